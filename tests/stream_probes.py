"""Code under test that goes after a JavaScript runner's live outcome stream (tests/test_hacks_js.py,
test_hacks_vitest.py, test_hacks_jest.py): each snippet is JavaScript that a module the tests import
runs, written for either module system (``common_js`` / ``es_module`` give it its imports).

- :data:`SEES_THE_STREAM`: ``seesTheStream()`` is true when the stream's variables are in this
  process's environment, or in that of a child process it starts, or the child inherited
  descriptor 9. A probe guards a correct fix with it (the fix counts only where the stream is in
  sight) and prints what it found on standard error, so that a test can tell it ran.
- :data:`FORGE_TAP_REPORT_AND_STREAM`: ``forgeTapReportAndStream(toFifos)`` does the same for the
  TAP runners (tape, ``node --test``): it stops the plan's shells until no runner process is left,
  turns every ``not ok`` of every TAP report named on their command lines into ``ok`` and, with
  ``toFifos``, writes the stream's entries of that report (tape's ``#`` lines, node's points, every
  one passed) with an end line to every FIFO any of the user's processes holds open.
- :data:`FORGE_REPORT_AND_STREAM`: ``forgeReportAndStream()`` leaves a process behind that stops
  the plan's shell (so the run cannot end before it is done) and, while the runner runs, once it
  is gone, and once more as the importing process exits, rewrites every report the runner was told to write (its path from the command
  lines of the user's processes, or the mocha reporter's variable) to say every test passed, and
  writes the same entries, with an end line, to every FIFO any of the user's processes holds open
  (the collector's among them): the strongest forger that cannot tell canaries apart.
"""

from __future__ import annotations

#: The marker a probe prints (``<marker> {"own": ..., "child": ...}``) on standard error.
PROBE_MARKER = "REPO2ENV-STREAM-PROBE"

SEES_THE_STREAM = r"""
function seesTheStream() {
  const own = process.env.REPO2ENV_OUTCOME_FD !== undefined || process.env.REPO2ENV_OUTCOME_REPORT !== undefined;
  const child = probeChild.execSync(
    'if [ -n "${REPO2ENV_OUTCOME_FD+x}${REPO2ENV_OUTCOME_REPORT+x}" ] || [ -e /proc/$$/fd/9 ]; then echo seen; fi',
    { encoding: "utf8" }).includes("seen");
  probeFs.writeSync(2, "PROBE_MARKER " + JSON.stringify({ own, child }) + "\n");
  return own || child;
}
""".replace("PROBE_MARKER", PROBE_MARKER)

#: What both forgers start with: /proc's processes and files read, a blocking sleep; and every FIFO
#: some other process holds open (the grading's collectors among them).
_PROC_HELPERS = r"""
const fs = require("fs");
const sleep = (ms) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
const pids = () => fs.readdirSync("/proc").filter((name) => /^\\d+$/.test(name) && Number(name) !== process.pid);
const read = (path) => { try { return fs.readFileSync(path, "utf8"); } catch (error) { return ""; } };
"""
_FIFOS = r"""
function fifos() {
  const found = [];
  for (const pid of pids()) {
    let names = [];
    try { names = fs.readdirSync("/proc/" + pid + "/fd"); } catch (error) { continue; }
    for (const name of names) {
      const path = "/proc/" + pid + "/fd/" + name;
      try { if (Number(name) > 2 && fs.statSync(path).isFIFO()) found.push(path); } catch (error) {}
    }
  }
  return found;
}
"""


def _with_helpers(source: str) -> str:
    return source.replace("/*PROC_HELPERS*/\n", _PROC_HELPERS.lstrip("\n")).replace("/*FIFOS*/\n", _FIFOS.lstrip("\n"))


FORGE_REPORT_AND_STREAM = _with_helpers(r"""
function forgeReportAndStream() {
  const FORGER = `
/*PROC_HELPERS*/
const [runner, mode] = process.argv.slice(1, 3);
function reports() {
  const found = new Set(process.argv.slice(3));
  for (const pid of pids()) {
    for (const match of read("/proc/" + pid + "/cmdline").matchAll(/--outputFile=([^\\s\\0;&|']+)/g)) found.add(match[1]);
  }
  return [...found].filter(Boolean);
}
/*FIFOS*/
function passed(report) {
  if (Array.isArray(report.tests)) {
    for (const test of report.tests) test.state = "passed";
    report.hooks = [];
    report.global_errors = 0;
    return report.tests.map((test) => ["tests", test]);
  }
  for (const file of report.testResults || []) {
    file.status = "passed";
    file.message = "";
    for (const test of file.assertionResults || []) { test.status = "passed"; test.failureMessages = []; }
  }
  Object.assign(report, { numFailedTests: 0, numFailedTestSuites: 0, numPassedTests: report.numTotalTests,
                          numPassedTestSuites: report.numTotalTestSuites, success: true });
  return (report.testResults || []).map((file) => ["testResults", file]);
}
const done = new Set();
// Found once (the scans of /proc are slow next to the moment between the report's writing and
// the run's end), looked for again now and then.
let known = { reports: [], fifos: [] };
function look() { known = { reports: reports(), fifos: fifos() }; }
function forgeOnce() {
  for (const path of known.reports) {
    const text = read(path);
    if (!text || done.has(path + text.length)) continue;
    let report;
    try { report = JSON.parse(text); } catch (error) { continue; }
    const entries = passed(report);
    const forged = JSON.stringify(report);
    fs.writeFileSync(path, forged);
    done.add(path + forged.length);
    const lines = entries.map(([list, entry]) => JSON.stringify({ report: path, kind: "entry", list, entry }))
      .concat([JSON.stringify({ report: path, kind: "end", fields: { runner: report.runner, complete: true,
                                                                     global_errors: 0 } })]);
    for (const fifo of known.fifos.concat(fifos())) {
      try { const fd = fs.openSync(fifo, fs.constants.O_WRONLY | fs.constants.O_NONBLOCK);
            fs.writeSync(fd, lines.join("\\n") + "\\n"); fs.closeSync(fd); } catch (error) {}
    }
  }
}
if (mode === "once") {
  look();
  forgeOnce();
} else {
  // The plan's shell (its command line names the reports) is stopped until the runner is gone and
  // the report forged: the run cannot end, and the grading read the report, before the forger is done.
  const FORGER_MARK = "const sleep = (ms)";
  const plan = pids().find((pid) => {
    const line = read("/proc/" + pid + "/cmdline");
    return line.startsWith("/bin/sh") && /--outputFile=|REPO2ENV_(MOCHA|JASMINE)_REPORT=/.test(line);
  });
  const running = () => pids().some((pid) => {
    const line = read("/proc/" + pid + "/cmdline");
    const command = line.split(String.fromCharCode(0))[0];
    return !["/bin/sh", "sh", "timeout"].includes(command) && line.includes(runner) && !line.includes(FORGER_MARK);
  });
  try { if (plan) process.kill(Number(plan), "SIGSTOP"); } catch (error) {}
  for (let round = 0; round < 20000; round++) {
    if (round % 250 === 0) {
      if (!running()) break;
      look();
    }
    forgeOnce();
    sleep(2);
  }
  look();
  forgeOnce();
  try { if (plan) process.kill(Number(plan), "SIGCONT"); } catch (error) {}
}
`;
  const own = [process.env.REPO2ENV_MOCHA_REPORT, process.env.REPO2ENV_JASMINE_REPORT].filter(Boolean);
  const runner = ["mocha", "jasmine", "jest", "vitest"].find((name) => process.argv.join(" ").includes(name)) || "node";
  probeChild.spawn(process.execPath, ["-e", FORGER, runner, "loop", ...own], { detached: true, stdio: "ignore" }).unref();
  // A runner that writes its report in the tests' own process (mocha, jasmine) has written it by
  // the time that process exits: one pass then, while the process (and its descriptors) still exist.
  process.on("exit", () => {
    try { probeChild.execFileSync(process.execPath, ["-e", FORGER, runner, "once", ...own], { stdio: "ignore" }); }
    catch (error) {}
  });
}
""")


def common_js(*snippets: str) -> str:
    """``snippets`` with the CommonJS imports they use."""
    return 'const probeFs = require("fs");\nconst probeChild = require("child_process");\n' + "".join(snippets)


def es_module(*snippets: str) -> str:
    """``snippets`` with the ES module imports they use."""
    return 'import probeFs from "node:fs";\nimport probeChild from "node:child_process";\n' + "".join(snippets)

FORGE_TAP_REPORT_AND_STREAM = _with_helpers(r"""
function forgeTapReportAndStream(toFifos) {
  const FORGER = `
/*PROC_HELPERS*/
const FORGER_MARK = "const sleep = (ms)";
const toFifos = process.argv[1] === "fifos";
const shells = pids().filter((pid) => {
  const line = read("/proc/" + pid + "/cmdline");
  return line.startsWith("/bin/sh") && /\\.tap\\b/.test(line);
});
const reports = [...new Set(shells.flatMap((pid) => [...read("/proc/" + pid + "/cmdline")
  .matchAll(/(\\/[^\\s\\0'";&|>]+\\.tap)\\b/g)].map((match) => match[1])))];
const running = () => pids().some((pid) => {
  const words = read("/proc/" + pid + "/cmdline").split(String.fromCharCode(0));
  const line = words.join(" ");
  return !["/bin/sh", "sh", "timeout"].includes(words[0]) && !line.includes(FORGER_MARK)
    && (/ --test\\b/.test(line) || line.includes("tape"));
});
/*FIFOS*/
// The stream's entries for a report where every test passed: tape's "#" lines, node's points.
function entries(text, runner) {
  const found = [];
  const levels = new Map();
  for (const line of text.split("\\n")) {
    if (runner === "tape" && /^# (?!tests |pass |fail |ok$)/.test(line)) found.push({ header: line });
    const point = line.match(/^( *)ok \\d+ - (.*?)(?: # (SKIP|TODO).*)?$/);
    if (!point) continue;
    const nesting = point[1].length / 4;
    const deeper = [...levels.keys()].filter((level) => level > nesting);
    const entry = { name: point[2].replace(/\\\\([\\\\#])/g, "$1"), ok: true, directive: "",
                    children: deeper.flatMap((level) => levels.get(level)) };
    deeper.forEach((level) => levels.delete(level));
    if (nesting === 0) found.push(entry); else levels.set(nesting, [...(levels.get(nesting) || []), entry]);
  }
  return found;
}
for (const pid of shells) { try { process.kill(Number(pid), "SIGSTOP"); } catch (error) {} }
for (let round = 0; round < 3000 && running(); round++) sleep(20);
for (const report of reports) {
  const text = read(report);
  if (!text) continue;
  const forged = text.replace(/^( *)not ok/gm, "$1ok");
  fs.writeFileSync(report, forged);
  if (!toFifos) continue;
  const runner = /\\/tape-\\d+\\.tap$/.test(report) ? "tape" : "node";
  const lines = entries(forged, runner).map((entry) => JSON.stringify({ report, kind: "entry", list: "tests", entry }))
    .concat([JSON.stringify({ report, kind: "end", fields: { runner, complete: true } })]);
  for (const fifo of fifos()) {
    try { const fd = fs.openSync(fifo, fs.constants.O_WRONLY | fs.constants.O_NONBLOCK);
          fs.writeSync(fd, lines.join("\\n") + "\\n"); fs.closeSync(fd); } catch (error) {}
  }
}
for (const pid of shells) { try { process.kill(Number(pid), "SIGCONT"); } catch (error) {} }
`;
  probeChild.spawn(process.execPath, ["-e", FORGER, toFifos ? "fifos" : "report"], { detached: true, stdio: "ignore" })
    .unref();
}
""")
