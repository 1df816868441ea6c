'use strict';
// A jasmine reporter (`jasmine --reporter=PATH`) that writes each spec's outcome with its title
// path (suite descriptions, then the spec's) as JSON to the file named by REPO2ENV_JASMINE_REPORT,
// once the run is done. Jasmine's own results give the full name joined by spaces only, so the
// stack of suites is followed here (suites run one at a time, in any order). Each spec's outcome
// goes to the live outcome stream as well (outcome_stream.js, loaded with this file, before jasmine
// loads any spec file).
const fs = require('fs');
const stream = require('./outcome_stream.js');

class Repo2envJasmineReporter {
  constructor() {
    this.output = process.env.REPO2ENV_JASMINE_REPORT;
    if (!this.output) throw new Error('repo2env jasmine reporter: set REPO2ENV_JASMINE_REPORT=FILE');
    this.suites = [];
    this.tests = [];
  }
  suiteStarted(result) { this.suites.push(result.description); }
  suiteDone() { this.suites.pop(); }
  specDone(result) {
    const test = { titles: this.suites.concat([result.description]), state: result.status };
    this.tests.push(test);
    stream.entry('tests', test);
  }
  jasmineDone(result) {
    const errors = ((result && result.failedExpectations) || []).length;
    stream.end({ runner: 'jasmine', global_errors: errors, complete: true });
    fs.writeFileSync(this.output, JSON.stringify({ runner: 'jasmine', tests: this.tests, global_errors: errors,
                                                   complete: true }));
  }
}

module.exports = Repo2envJasmineReporter;
