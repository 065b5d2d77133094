// LastUsed (src/identity/last-used.ts): a token's lastUsedAt kept to the minute with at most one
// write per token per minute, batched, against a double of the store that records every write.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LastUsed } from '../../src/identity/last-used.js';
import type { Store } from '../../src/store/store.js';
import { until } from '../helpers/wait.js';

const T = { timeout: 10_000 };
const MINUTE = 60_000;
// A whole minute, well in the past, so the tests' uses name their own times.
const M = Date.UTC(2030, 0, 1, 12, 0, 0);

interface Touch {
  ids: string[];
  minute: string;
}

/** A store double that records touchTokens calls (and fails them while `failing`). */
function recordingStore() {
  const calls: Touch[] = [];
  const double = {
    calls,
    failing: false,
    async touchTokens(ids: string[], minute: Date): Promise<number> {
      calls.push({ ids: [...ids], minute: minute.toISOString() });
      if (double.failing) throw new Error('store down');
      return ids.length;
    },
  };
  return { double, store: double as unknown as Store };
}

const at = (ms: number) => new Date(ms).toISOString();

describe('LastUsed: lastUsedAt to the minute', () => {
  it('many uses of one token in one minute make exactly one write, of the minute’s start', T, async () => {
    const { double, store } = recordingStore();
    const lastUsed = new LastUsed(store, { flushMs: 60_000 });
    for (let s = 0; s < 60; s++) lastUsed.use('tok_a', M + s * 1000 + 999);
    await lastUsed.flush();
    assert.deepEqual(double.calls, [{ ids: ['tok_a'], minute: at(M) }]);
    // Later uses in the same minute, after the write: nothing more to write.
    lastUsed.use('tok_a', M + 59_999);
    await lastUsed.flush();
    assert.equal(double.calls.length, 1);
  });

  it('uses across two minutes make two writes, one for each minute', T, async () => {
    const { double, store } = recordingStore();
    const lastUsed = new LastUsed(store, { flushMs: 60_000 });
    lastUsed.use('tok_a', M + 5_000);
    lastUsed.use('tok_a', M + 30_000);
    lastUsed.use('tok_a', M + MINUTE); // the first instant of the next minute
    lastUsed.use('tok_a', M + MINUTE + 10_000);
    await lastUsed.flush();
    assert.deepEqual(double.calls, [
      { ids: ['tok_a'], minute: at(M) },
      { ids: ['tok_a'], minute: at(M + MINUTE) },
    ]);
    // And a third minute, flushed on its own.
    lastUsed.use('tok_a', M + 2 * MINUTE + 1);
    await lastUsed.flush();
    assert.deepEqual(double.calls.at(-1), { ids: ['tok_a'], minute: at(M + 2 * MINUTE) });
    assert.equal(double.calls.length, 3);
  });

  it('several tokens used in one minute are written in one call', T, async () => {
    const { double, store } = recordingStore();
    const lastUsed = new LastUsed(store, { flushMs: 60_000 });
    for (const id of ['tok_a', 'tok_b', 'tok_c', 'tok_a', 'tok_b', 'tok_d']) lastUsed.use(id, M + 1_000);
    await lastUsed.flush();
    assert.equal(double.calls.length, 1);
    assert.deepEqual([...double.calls[0]!.ids].sort(), ['tok_a', 'tok_b', 'tok_c', 'tok_d']);
    assert.equal(double.calls[0]!.minute, at(M));
  });

  it('an empty flush writes nothing', T, async () => {
    const { double, store } = recordingStore();
    await new LastUsed(store, { flushMs: 60_000 }).flush();
    assert.deepEqual(double.calls, []);
  });

  it('known() with a lastUsedAt of the current minute: a use then needs no write', T, async () => {
    const { double, store } = recordingStore();
    const lastUsed = new LastUsed(store, { flushMs: 60_000 });
    // The store says another instance wrote this minute already.
    lastUsed.known('tok_a', new Date(M));
    lastUsed.use('tok_a', M + 45_000);
    // An older minute in the store does not stop this minute's write.
    lastUsed.known('tok_b', new Date(M - MINUTE));
    lastUsed.use('tok_b', M + 45_000);
    // Never used (null): written.
    lastUsed.known('tok_c', null);
    lastUsed.use('tok_c', M + 45_000);
    await lastUsed.flush();
    assert.deepEqual(double.calls, [{ ids: ['tok_b', 'tok_c'], minute: at(M) }]);
    // What known() says never moves the minute back: an older answer after a write changes nothing.
    lastUsed.known('tok_b', new Date(M - 2 * MINUTE));
    lastUsed.use('tok_b', M + 50_000);
    await lastUsed.flush();
    assert.equal(double.calls.length, 1);
  });

  it(
    'a failing touchTokens is reported to warn and never throws; the next minute tries again',
    T,
    async () => {
      const { double, store } = recordingStore();
      const warnings: { obj: object; msg: string }[] = [];
      const lastUsed = new LastUsed(store, {
        flushMs: 60_000,
        warn: (obj, msg) => warnings.push({ obj, msg }),
      });
      double.failing = true;
      lastUsed.use('tok_a', M + 1_000);
      await lastUsed.flush(); // resolves: the failure is reported, not thrown
      assert.equal(double.calls.length, 1);
      assert.equal(warnings.length, 1);
      assert.match(warnings[0]!.msg, /last used/);
      const err = (warnings[0]!.obj as { err?: unknown }).err;
      assert.ok(err instanceof Error && err.message === 'store down', 'the store’s error is passed to warn');

      double.failing = false;
      lastUsed.use('tok_a', M + MINUTE + 1_000);
      await lastUsed.flush();
      assert.deepEqual(double.calls.at(-1), { ids: ['tok_a'], minute: at(M + MINUTE) });
      assert.equal(warnings.length, 1);
    },
  );

  it('a failing write without a warn function does not throw either', T, async () => {
    const { double, store } = recordingStore();
    const lastUsed = new LastUsed(store, { flushMs: 60_000 });
    double.failing = true;
    lastUsed.use('tok_a', M);
    await lastUsed.flush();
    assert.equal(double.calls.length, 1);
  });

  it('queued uses are written on their own after flushMs, in one call', T, async () => {
    const { double, store } = recordingStore();
    const lastUsed = new LastUsed(store, { flushMs: 10 });
    const now = Date.now();
    lastUsed.use('tok_a', now);
    lastUsed.use('tok_b', now);
    await until('the queued uses to be written', () => double.calls.length > 0, 5_000);
    assert.deepEqual(double.calls, [{ ids: ['tok_a', 'tok_b'], minute: at(now - (now % MINUTE)) }]);
    await lastUsed.flush();
    assert.equal(double.calls.length, 1, 'flushing again writes nothing new');
  });
});
