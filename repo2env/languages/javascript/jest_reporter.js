'use strict';
// A jest reporter (`--reporters=PATH`, next to jest's `--json` report) that sends each test file's
// outcomes, as jest finishes the file, to the live outcome stream (outcome_stream.js, loaded with
// this file, before jest runs any test file), in the shape of an entry of the `--json` report's
// testResults, and ends the stream when the run is complete. It writes no file.
const stream = require('./outcome_stream.js');

class Repo2envJestReporter {
  onTestResult(test, result) {
    const failed = Boolean(result.testExecError || result.failureMessage);
    stream.entry('testResults', {
      name: result.testFilePath,
      status: failed ? 'failed' : 'passed',
      assertionResults: (result.testResults || []).map((assertion) => ({
        ancestorTitles: assertion.ancestorTitles || [], title: assertion.title, status: assertion.status,
      })),
    });
  }

  onRunComplete() { stream.end({ runner: 'jest' }); }

  getLastError() { return undefined; }
}

module.exports = Repo2envJestReporter;
