'use strict';
// A mocha reporter that writes each test's outcome with its title path (describe titles, then the
// test's title) as JSON to the file given by `--reporter-options output=FILE`
// (or the REPO2ENV_MOCHA_REPORT variable). Mocha's own `json`
// reporter joins the titles with spaces, which cannot be split back into describe blocks.
// Each outcome goes to the live outcome stream as well (outcome_stream.js, loaded with this file,
// before mocha loads any test file), the same entries the report's lists get.
// Only event names that mocha has had since version 3 are used; a mocha before 4 has no
// Runnable#titlePath, so the path is walked up the parents as titlePath does (express 2018: mocha 3.5.3).
const fs = require('fs');
const path = require('path');
const stream = require('./outcome_stream.js');

function titlePath(runnable) {
  if (typeof runnable.titlePath === 'function') return runnable.titlePath();
  const path = [];
  for (let node = runnable; node; node = node.parent) if (!node.root) path.unshift(node.title);
  return path;
}

function titles(runnable) {
  return titlePath(runnable).filter((title, index) => index > 0 || title !== '');
}

function Repo2envReporter(runner, options) {
  const given = (options && (options.reporterOptions || options.reporterOption)) || {};
  const output = given.output || process.env.REPO2ENV_MOCHA_REPORT;
  if (!output) throw new Error('repo2env mocha reporter: give --reporter-options output=FILE');
  const tests = [];
  const hooks = [];
  const add = (list, name, value) => { list.push(value); stream.entry(name, value); };
  const file = (runnable) => runnable.file || (runnable.parent && runnable.parent.file) || '';
  runner.on('pass', (test) => add(tests, 'tests', { file: file(test), titles: titles(test), state: 'passed' }));
  runner.on('pending', (test) => add(tests, 'tests', { file: file(test), titles: titles(test), state: 'pending' }));
  runner.on('fail', (runnable, error) => {
    if (runnable.type === 'hook') {
      add(hooks, 'hooks', { file: file(runnable), titles: titles(runnable.parent || runnable), hook: runnable.title,
                            error: String(error && error.message || error) });
    } else {
      add(tests, 'tests', { file: file(runnable), titles: titles(runnable), state: 'failed' });
    }
  });
  runner.once('end', () => {
    stream.end({ runner: 'mocha', complete: true });
    fs.mkdirSync(path.dirname(path.resolve(output)), { recursive: true });
    fs.writeFileSync(output, JSON.stringify({ runner: 'mocha', tests, hooks, complete: true }));
  });
}

module.exports = Repo2envReporter;
