"""The JavaScript/TypeScript building blocks the JavaScript language profile is assembled from.

- :mod:`.project`: the repository's files at a commit and its ``package.json``;
- :mod:`.environment`: package manager, Node version, install commands, date pin, workspaces,
  TypeScript transform (pure functions of the files and the commit date);
- :mod:`.runners`: jest, vitest, mocha, ava, tape and ``node --test``: detection, the command
  that runs a list of test ids with a machine-readable report, the files each reads for
  configuration;
- :mod:`.reports`: per-test outcomes from each runner's report;
- :mod:`.test_ids`: how ids are written (``<file>::<describe> > <title>``) and split back.

Node base images are made by :mod:`repo2env.runtime.node_bootstrap` (runtime needs Docker;
this package does not).
"""
