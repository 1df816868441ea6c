'use strict';
// The live outcome stream our reporters share: each test's outcome, as it comes, to a root process
// of the grading sandbox (repo2env.verify.tamper's collector), which no file the tests' user can
// write stands in for. The grading plan opens the collector's FIFO as a descriptor (`9>FIFO`) and
// names it, with the report the outcomes stand for, in REPO2ENV_OUTCOME_FD and
// REPO2ENV_OUTCOME_REPORT. Both are taken out of the environment the moment this module loads
// (before any test file does), so nothing the tests start sees them; the descriptor is reopened
// close-on-exec and the inherited one closed, so no process started later inherits it either.
// Without the variables (a run outside grading) every call is a no-op.
// One JSON line per record: {"report", "kind": "entry", "list", "entry"} adds `entry` to the
// report's `list`, {"report", "kind": "end", "fields"} ends the report. Node's fs only, Node 8 on.
const fs = require('fs');

const given = process.env.REPO2ENV_OUTCOME_FD;
const report = process.env.REPO2ENV_OUTCOME_REPORT || '';
delete process.env.REPO2ENV_OUTCOME_FD;
delete process.env.REPO2ENV_OUTCOME_REPORT;

let descriptor = null;
if (given !== undefined && /^[0-9]+$/.test(given)) {
  descriptor = Number(given);
  try {
    // fs opens close-on-exec; the FIFO is reached through the descriptor, its name being gone.
    const own = fs.openSync(`/proc/self/fd/${descriptor}`, fs.constants.O_WRONLY);
    fs.closeSync(descriptor);
    descriptor = own;
  } catch (error) {
    // No /proc: the inherited descriptor serves as it is.
  }
}

function send(record) {
  if (descriptor === null) return;
  const line = Buffer.from(JSON.stringify(Object.assign({ report }, record)) + '\n', 'utf8');
  let written = 0;
  while (written < line.length) {
    try {
      written += fs.writeSync(descriptor, line, written, line.length - written);
    } catch (error) {
      if (error.code === 'EAGAIN') continue;
      descriptor = null;  // the collector is gone: the stream ends unfinished, and fails the run
      return;
    }
  }
}

// Adds `entry` to the report's list `list` (one test's outcome, or one file's).
function entry(list, value) { send({ kind: 'entry', list, entry: value }); }

// Ends the report: `fields` are its top-level fields besides the lists.
function end(fields) { send({ kind: 'end', fields: fields || {} }); }

module.exports = { entry, end, active: () => descriptor !== null };
