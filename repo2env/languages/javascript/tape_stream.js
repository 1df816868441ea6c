'use strict';
// Starts tape's own command (`node tape_stream.js ARGS` runs `tape ARGS`, the tape the package
// resolves from the working folder) with each test's outcome sent to the live outcome stream
// (outcome_stream.js, loaded first, before tape or any test file). Tape has no reporter plugins,
// and its public stream (`tape.createStream`) replaces the TAP output it is called before: so the
// hooks go on its results collector (lib/results.js, every tape's), where the TAP report's lines
// are made. The outcomes are read as the report's reader (repo2env's parse_tape_tap) reads the
// TAP: a test is the latest `# <name>` line (a test's start, or a comment a test wrote), and its
// outcome the assertions that follow. Each entry stands alone: `{"header"}` when a `#` line
// starts a test (passed, unless an assertion says otherwise), `{"header", "point"}` for an
// assertion written `not ok` under it (`point`: its name and directive, as tape words them). The
// results' close (where tape writes the plan that ends its report) ends the report.
const fs = require('fs');
const path = require('path');
const stream = require('./outcome_stream.js');

const cwd = process.cwd();
const packageFile = require.resolve('tape/package.json', { paths: [cwd] });
const folder = path.dirname(packageFile);
const manifest = JSON.parse(fs.readFileSync(packageFile, 'utf8'));
const bin = typeof manifest.bin === 'string' ? manifest.bin : (manifest.bin || {}).tape;
const Results = require(path.join(folder, 'lib', 'results.js'));

// Per results collector, the `#` line its failed assertions are read under.
const headers = new WeakMap();
const coalesce = (text) => String(text).replace(/\s+/g, ' ');

function directive(flag, word) {
  return ` # ${word}${typeof flag === 'string' ? ` ${coalesce(flag)}` : ''}`;
}

function watch(results, test) {
  // As Results#_watch writes each line: the test's `#` line once it starts, every result after.
  test.once('prerun', () => {
    let header = `# ${coalesce(test.name)}`;
    if (test._skip) header = `# SKIP ${coalesce(test.name)}${typeof test._skip === 'string' ? ` ${coalesce(test._skip)}` : ''}`;
    else if (test._todo) header = `# TODO ${coalesce(test.name)}`;
    headers.set(results, header);
    stream.entry('tests', { header });
  });
  test.on('result', (result) => {
    if (typeof result === 'string') {
      headers.set(results, `# ${result}`);
      stream.entry('tests', { header: headers.get(results) });
      return;
    }
    if (!result || result.ok || (results.todoIsOK && result.todo)) return;
    const point = (result.name ? coalesce(result.name) : '')
      + (result.skip ? directive(result.skip, 'SKIP') : result.todo ? directive(result.todo, 'TODO') : '');
    stream.entry('tests', { header: headers.get(results) || '', point });
  });
  test.on('test', (subtest) => watch(results, subtest));
}

const push = Results.prototype.push;
Results.prototype.push = function (test) {
  watch(this, test);
  return push.apply(this, arguments);
};
const close = Results.prototype.close;
Results.prototype.close = function () {
  const closed = close.apply(this, arguments);
  stream.end({ runner: 'tape', complete: true });
  return closed;
};

process.argv.splice(1, 1, path.join(folder, bin || 'bin/tape'));
require(process.argv[1]);
