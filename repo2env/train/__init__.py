"""Training with TRL: GRPO on published repo2env datasets with RepoEnv (``repo2env train``), and a
tiny locally built policy for CPU runs (the tests and ``repo2env train --demo``)."""
