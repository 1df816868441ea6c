'use strict';
// Runs inside a JavaScript task image (Node 12 and up, no dependencies): proves that the names of the
// project's own packages resolve to its code in /testbed, not to a copy the package manager fetched
// from the registry (a test tool that depends on the project pulls the released package into
// node_modules, and a test that requires the project by name would then test the release).
//
//   node own_code_probe.js check '{"names": ["dayjs"], "from": ["test", "packages/core/test"],
//                                  "unimported": ["@dayjs/plugins"]}'
//
// "names" are the project's package names the test files import or require by name (the caller reads
// the test files). For each of them and each folder of "from" (relative to /testbed), Node's lookup is
// walked: the first node_modules/<name> found on the way up must be a link into /testbed outside any
// node_modules (a workspace package), or there must be none (the package refers to itself through its
// "exports"). Prints one "own-code check failed: ..." line per problem and exits 1 if there is any.
// "unimported" are the project's names no test file imports by name: the tests reach that code by
// relative paths, which run the project's files by construction, so a registry copy in node_modules
// (a dev tool's dependency) is never what they run; one "own-code check not needed: ..." line says so.
// "root" replaces /testbed (the probe's own tests).
const fs = require('fs');
const path = require('path');

const TESTBED = '/testbed';
const MARKER = 'own-code check failed: ';
const NOT_NEEDED = 'own-code check not needed: ';

function firstInstalled(root, name, folder) {
  let current = path.resolve(root, folder);
  for (;;) {
    const candidate = path.join(current, 'node_modules', name);
    if (fs.existsSync(candidate)) return candidate;
    const parent = path.dirname(current);
    if (parent === current || !(parent + '/').startsWith(root + '/')) return null;
    current = parent;
  }
}

function check(settings) {
  const root = settings.root || TESTBED; // another root: the probe's own tests
  const problems = [];
  const folders = settings.from && settings.from.length ? settings.from : [''];
  for (const name of settings.names || []) {
    for (const folder of folders) {
      const installed = firstInstalled(root, name, folder);
      if (installed === null) continue;
      const real = fs.realpathSync(installed);
      const inside = (real + '/').startsWith(root + '/') && !real.split(path.sep).includes('node_modules');
      if (!inside) {
        problems.push(`${name} resolves to ${path.relative(root, installed)} (a copy from the registry, not the `
          + `project's code) from ${folder || '.'}`);
      }
    }
  }
  for (const name of settings.unimported || []) {
    const copies = [...new Set(folders.map((folder) => firstInstalled(root, name, folder))
      .filter((installed) => installed !== null).map((installed) => path.relative(root, installed)))];
    const left = copies.length ? `; ${copies.join(', ')} is left to the tools that depend on it` : '';
    console.log(`${NOT_NEEDED}no test file in ${folders.map((folder) => folder || '.').join(', ')} imports ${name} `
      + `by name, the tests run the project's files by relative paths${left}`);
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
