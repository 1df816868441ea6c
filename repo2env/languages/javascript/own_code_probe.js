'use strict';
// Runs inside a JavaScript task image (Node 12 and up, no dependencies): proves that the names of the
// project's own packages resolve to its code in /testbed, not to a copy the package manager fetched
// from the registry (a test tool that depends on the project pulls the released package into
// node_modules, and a test that requires the project by name would then test the release).
//
//   node own_code_probe.js check '{"names": ["dayjs"], "from": ["test", "packages/core/test"]}'
//
// For each name and each folder of "from" (relative to /testbed), Node's lookup is walked: the first
// node_modules/<name> found on the way up must be a link into /testbed outside any node_modules (a
// workspace package), or there must be none (the tests import the code by path, or the package
// refers to itself through its "exports"). Prints one "own-code check failed: ..." line per problem
// and exits 1 if there is any.
const fs = require('fs');
const path = require('path');

const TESTBED = '/testbed';
const MARKER = 'own-code check failed: ';

function firstInstalled(name, folder) {
  let current = path.resolve(TESTBED, folder);
  for (;;) {
    const candidate = path.join(current, 'node_modules', name);
    if (fs.existsSync(candidate)) return candidate;
    const parent = path.dirname(current);
    if (parent === current || !(parent + '/').startsWith(TESTBED + '/')) return null;
    current = parent;
  }
}

function check(settings) {
  const problems = [];
  for (const name of settings.names || []) {
    for (const folder of settings.from && settings.from.length ? settings.from : ['']) {
      const installed = firstInstalled(name, folder);
      if (installed === null) continue;
      const real = fs.realpathSync(installed);
      const inside = (real + '/').startsWith(TESTBED + '/') && !real.split(path.sep).includes('node_modules');
      if (!inside) {
        problems.push(`${name} resolves to ${path.relative(TESTBED, installed)} (a copy from the registry, not the `
          + `project's code) from ${folder || '.'}`);
      }
    }
  }
  for (const problem of [...new Set(problems)]) console.log(MARKER + problem);
  return problems.length ? 1 : 0;
}

const [command, argument] = process.argv.slice(2);
if (command !== 'check') {
  console.error('usage: own_code_probe.js check JSON');
  process.exit(2);
}
process.exit(check(JSON.parse(argument || '{}')));
