// A vitest reporter (`--reporter=PATH`, before vitest's `json` reporter) that sends each test
// file's outcomes to the live outcome stream (outcome_stream.js, loaded with this file, before
// vitest runs any test file) in the shape of an entry of the json report's testResults, as that
// reporter words them (a test's state: pass -> passed, fail -> failed, anything else not run), and
// ends the stream. onFinished: the one hook every vitest from 0.x to 3 calls with the run's files.
// It writes no file. Node's own require loads the shared module (vitest runs this file through
// its own module runner, which would not run a CommonJS module as Node does).
import { createRequire } from 'node:module';

const stream = createRequire(import.meta.url)('./outcome_stream.js');

const STATUS = { pass: 'passed', fail: 'failed' };

function titles(test, file) {
  const names = [];
  for (let suite = test.suite; suite && suite !== file && !suite.filepath; suite = suite.suite) {
    names.unshift(suite.name);
  }
  return names;
}

function tests(task) {
  if (task.type === 'suite' || task.tasks) return (task.tasks || []).flatMap(tests);
  return task.type === 'test' || task.type === 'custom' ? [task] : [];
}

export default class Repo2envVitestReporter {
  onFinished(files) {
    for (const file of files || []) {
      const found = tests(file);
      const state = file.result && file.result.state;
      stream.entry('testResults', {
        name: file.filepath,
        status: state === 'fail' || !found.every((test) => test.result && test.result.state === 'pass') ? 'failed' : 'passed',
        assertionResults: found.map((test) => ({
          ancestorTitles: titles(test, file), title: test.name,
          status: STATUS[test.result && test.result.state] || 'skipped',
        })),
      });
    }
    stream.end({ runner: 'vitest' });
  }
}
