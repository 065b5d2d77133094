import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type Harness, harness } from '../helpers/app.js';
import { ENGINES } from '../helpers/engines.js';

// Contract section 8: "A comment line at least every 15 s (and, while nothing else is sent, not
// much more often: about every 15 s)". Counted over a real minute with the service's own default
// heartbeat, so it is in the long tier. The keep-alive does not depend on the engine: SQLite only.
const MINUTE = 60_000;

describe('GET /events keep-alive comments, at the default heartbeat', () => {
  const engine = ENGINES[0]!;
  let h: Harness;
  let base = '';
  before(async () => {
    h = await harness(engine);
    base = await h.app.listen({ port: 0, host: '127.0.0.1' });
  });
  after(async () => {
    await h?.close();
  });

  it('an idle stream gets a comment line about every 15 s over a minute, never one per tick', {
    timeout: MINUTE + 30_000,
  }, async () => {
    const c = await h.user();
    const abort = new AbortController();
    const res = await fetch(`${base}/events`, {
      headers: { accept: 'text/event-stream', authorization: `Bearer ${c.token}` },
      signal: abort.signal,
    });
    assert.equal(res.status, 200);
    const opened = Date.now();
    // Each keep-alive comment's arrival, from the stream's own bytes.
    const beats: number[] = [];
    const other: string[] = [];
    const reading = (async () => {
      const decoder = new TextDecoder();
      let buf = '';
      try {
        for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
          buf += decoder.decode(chunk, { stream: true });
          let i = buf.indexOf('\n');
          while (i >= 0) {
            const line = buf.slice(0, i);
            buf = buf.slice(i + 1);
            if (line === ': keep-alive') beats.push(Date.now() - opened);
            else if (line !== '') other.push(line);
            i = buf.indexOf('\n');
          }
        }
      } catch (err) {
        if (!abort.signal.aborted) throw err;
      }
    })();
    // A minute of the stream as it comes: the wait is the measurement itself, not an ordering.
    await new Promise((done) => setTimeout(done, MINUTE));
    abort.abort();
    await reading;

    // The opening lines only: nothing else was written to an idle stream.
    assert.deepEqual(other, [': plantstore event stream', 'retry: 2000']);
    // At least every 15 s: 4 in a minute at the least; about every 15 s: a pass over the streams
    // takes 80 % of the heartbeat (12 s), so 5, and never the 240 a 250 ms tick would write.
    assert.ok(beats.length >= 4 && beats.length <= 6, `comments at ${beats.join(', ')} ms`);
    const gaps = [beats[0]!, ...beats.slice(1).map((t, i) => t - beats[i]!)];
    for (const gap of gaps) {
      assert.ok(gap >= 10_000, `a comment ${gap} ms after the one before: ${beats.join(', ')} ms`);
      assert.ok(gap <= 15_000 + 1_000, `a gap of ${gap} ms: ${beats.join(', ')} ms`);
    }
  });
});
