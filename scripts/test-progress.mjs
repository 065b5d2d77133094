// A node:test reporter for scripts/test.ts's watchdog: one JSON line each time a test is enqueued
// (declared to run), dequeued (about to run) and completes, in the order things happen (not node:test's
// reporting order, which holds a file's results back behind the files before it), so that a run
// stopped for going over its limit can say which files and tests were still running, and a run
// whose file ended before its queued tests did is told from one that ran them all. It writes to
// the file given as its --test-reporter-destination. Plain JavaScript: Node 22 loads reporters
// before tsx's loader is in place.
export default async function* progress(source) {
  for await (const e of source) {
    const event =
      e.type === 'test:enqueue'
        ? 'queue'
        : e.type === 'test:dequeue'
          ? 'run'
          : e.type === 'test:complete'
            ? 'end'
            : null;
    if (!event) continue;
    const { file, name, line, nesting } = e.data;
    yield `${JSON.stringify({ event, file, name, line, nesting, at: Date.now() })}\n`;
  }
}
