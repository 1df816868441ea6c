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

# --- agents' episodes and tools -------------------------------------------------------------------

#: Model calls one harness episode is answered (``harness run --max-turns``, ``EpisodeBudget``).
EPISODE_MAX_TURNS = 50
#: Seconds one harness episode may take from its start (``harness run --max-wall``, ``EpisodeBudget``).
EPISODE_MAX_WALL_S = 1800
#: Seconds one command of the agent's tools may take (``bash``; ``AgentTools``, ``RepoEnvConfig``).
TOOL_COMMAND_TIMEOUT_S = 120
#: Seconds one ``run_tests`` call of the agent's tools may take.
TOOL_TEST_TIMEOUT_S = 300
#: Longest answer of one tool call, in characters (longer ones are cut in the middle).
TOOL_OUTPUT_CAP_CHARS = 20_000
#: Harness episodes (sandboxes) at once when training on a harness's episodes (``train --harness-jobs``).
HARNESS_TRAIN_JOBS = 2

# --- publishing and exports --------------------------------------------------------------------------

#: The dataset name of exports (Harbor task names are ``<its first part>/<instance id>``, OpenEnv's manifest).
EXPORT_NAME = "repo2env"
