"""The defaults a user meets, each written once.

Every command's options, the batch spec's fields, the stages' option types and the demos read
them here, so ``repo2env mine``, a ``pipelines/*.yaml`` spec and ``make demo`` cannot drift apart.
This module imports nothing: the CLI reads it to show its defaults in ``--help`` without loading
any stage.
"""

from __future__ import annotations

from pathlib import Path

#: Where task folders are written and looked for when no folder is given (``generated/<owner>__<name>``).
GENERATED = Path("generated")
#: A batch's output folder when its spec names none: ``generated/pipelines/<spec name>``.
PIPELINES_OUTPUT = GENERATED / "pipelines"
#: ``repo2env demo run`` / ``make demo``.
DEMO_OUTPUT = GENERATED / "demo"
#: ``repo2env train --demo`` / ``make train-demo``.
TRAIN_DEMO_OUTPUT = GENERATED / "train-demo"

# --- mining (SWE-bench's collection rules) -----------------------------------------------------------

#: Reject PRs changing more source + test files than this.
MINE_MAX_FILES = 50
#: Reject PRs whose fix (the source part) changes more lines than this.
MINE_MAX_CHANGED_LINES = 3000

# --- building, validating, grading -------------------------------------------------------------------

#: Task images built at once.
BUILD_JOBS = 2
#: Tasks validated at once.
VALIDATE_JOBS = 1
#: The acceptance policy validation judges with: ``validators/default.yaml``.
ACCEPTANCE_POLICY = "default"
#: Seconds the hidden tests of one grading may take.
GRADE_TIMEOUT_S = 900
#: Seconds a command given to ``repo2env run`` may take.
RUN_TIMEOUT_S = 600

# --- publishing and exports --------------------------------------------------------------------------

#: The dataset name of exports (Harbor task names are ``<its first part>/<instance id>``, OpenEnv's manifest).
EXPORT_NAME = "repo2env"
