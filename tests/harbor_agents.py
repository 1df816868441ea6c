"""Harbor agents for the tests (loaded by the harbor CLI: ``-a harbor_agents:PlantedFixAgent``): probes
of what an agent that is root in its container can do outside what its diff carries.

PlantedFixAgent plants the task's fix where the grading's Python finds it at start-up, not in the
repository: a ``sitecustomize`` module in the environment's site-packages (as root) that applies the
fix to /testbed whenever a Python process starts there, and leaves /testbed as it found it, so its
diff is empty. NodeModulesShimAgent does the same to a JavaScript task through its test runner: a
shim at the top of the runner's entry script under /testbed/node_modules (which the task image
keeps out of git, so out of the diff) applies the fix whenever the runner starts. A verifier sharing
the agent's container would run the planted code with the hidden tests and score the fix;
repo2env's tasks grade in a pristine container, where it is not.

Only this file imports harbor: it is read by the harbor CLI's own virtualenv, never by pytest.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from harbor.agents.base import BaseAgent
from harbor.environments.base import BaseEnvironment
from harbor.models.agent.context import AgentContext

PLANTED_PATCH = "/opt/planted-fix.diff"
SITECUSTOMIZE = f'''import subprocess
subprocess.run(["git", "-c", "safe.directory=*", "apply", "--whitespace=nowarn", "{PLANTED_PATCH}"],
               cwd="/testbed", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
'''


class PlantedFixAgent(BaseAgent):
    """Root in its container: puts ``patch_path`` (a host file) where every Python start applies it."""

    def __init__(self, *args, patch_path: str, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._patch = Path(patch_path)

    @staticmethod
    def name() -> str:
        return "repo2env-planted-fix"

    def version(self) -> str:
        return "1.0"

    async def setup(self, environment: BaseEnvironment) -> None:
        return None

    async def run(self, instruction: str, environment: BaseEnvironment, context: AgentContext) -> None:
        await environment.upload_file(self._patch, PLANTED_PATCH)
        script = (f"chmod 644 {PLANTED_PATCH} && site=$(python -c 'import site; print(site.getsitepackages()[0])') && "
                  f"printf %s {shlex.quote(SITECUSTOMIZE)} > \"$site/sitecustomize.py\" && git -C /testbed status --short")
        result = await environment.exec(command=script, user="root")
        if result.return_code != 0:
            raise RuntimeError(f"planting the fix failed: {result.stdout} {result.stderr}")


NODE_SHIM = f'''require("child_process").spawnSync("git", ["-c", "safe.directory=*", "apply", "--whitespace=nowarn",
  "{PLANTED_PATCH}"], {{cwd: "/testbed", stdio: "ignore"}});
'''


class NodeModulesShimAgent(PlantedFixAgent):
    """Root in its container: puts ``patch_path`` (a host file) into the entry script of ``runner``
    (a name in /testbed/node_modules/.bin), applied by whatever starts the runner; /testbed's
    tracked files stay as they were."""

    def __init__(self, *args, runner: str = "mocha", **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._runner = runner

    @staticmethod
    def name() -> str:
        return "repo2env-node-modules-shim"

    async def run(self, instruction: str, environment: BaseEnvironment, context: AgentContext) -> None:
        await environment.upload_file(self._patch, PLANTED_PATCH)
        # After the entry script's first line (its #!), so the runner's own code runs next.
        script = (f"set -e; chmod 644 {PLANTED_PATCH}; entry=$(readlink -f /testbed/node_modules/.bin/{self._runner}); "
                  f"{{ head -n 1 \"$entry\"; printf %s {shlex.quote(NODE_SHIM)}; tail -n +2 \"$entry\"; }} > /tmp/shimmed; "
                  f"cat /tmp/shimmed > \"$entry\"; grep -q {PLANTED_PATCH} \"$entry\"; "
                  "test -z \"$(git -C /testbed status --porcelain)\"")
        result = await environment.exec(command=script, user="root")
        if result.return_code != 0:
            raise RuntimeError(f"planting the shim failed: {result.stdout} {result.stderr}")
