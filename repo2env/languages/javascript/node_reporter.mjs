// A reporter for Node's test runner (`node --test --test-reporter=PATH`, beside the `tap` reporter
// that writes the report) that sends each top-level test, with its subtests, to the live outcome
// stream (outcome_stream.js, loaded with this file: Node loads its reporters before it starts the
// test files' processes) as the TAP reporter words it: a point per `test:pass`/`test:fail` event,
// its name, whether it passed, its directive (`skip`, `todo`: the TAP reporter's rule, a field
// that is there) and the points of the deeper levels that ended before it (its subtests; events
// come as the TAP lines do, subtests first). A top-level point goes out once it has ended, whole,
// so that each entry stands alone; the end of the events ends the report. It writes nothing else.
// Custom reporters came with --test-reporter itself (Node 18.15, 19.6), which the plan uses anyway.
import { createRequire } from 'node:module';

const stream = createRequire(import.meta.url)('./outcome_stream.js');

export default async function* repo2envNodeReporter(source) {
  const levels = new Map();
  for await (const event of source) {
    if (event.type !== 'test:pass' && event.type !== 'test:fail') continue;
    const { name, nesting = 0, skip, todo } = event.data;
    const deeper = [...levels.keys()].filter((level) => level > nesting).sort((a, b) => a - b);
    const point = {
      name: String(name), ok: event.type === 'test:pass',
      directive: skip !== undefined ? 'skip' : todo !== undefined ? 'todo' : '',
      children: deeper.flatMap((level) => levels.get(level)),
    };
    for (const level of deeper) levels.delete(level);
    if (nesting === 0) {
      stream.entry('tests', point);
    } else {
      if (!levels.has(nesting)) levels.set(nesting, []);
      levels.get(nesting).push(point);
    }
  }
  stream.end({ runner: 'node', complete: true });
}
