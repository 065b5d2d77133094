import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SearchWalk, type WalkRow } from '../../src/store/postgres/search.js';

// SearchWalk's bookkeeping (src/store/postgres/search.ts) on rows made by hand: each garden's
// known end only ever moves forward, so no later walk reads a garden's known matches again.

const row = (id: number, garden: string, hit: boolean, cut = false): WalkRow => ({
  id,
  garden,
  name: `p${id}`,
  tag: null,
  version: id,
  hit,
  cut,
});

describe('SearchWalk', () => {
  it("keeps a garden's known end when a later answer is cut at the limit below where its walk started", () => {
    const w = new SearchWalk({
      gardens: ['a', 'b', 'c'],
      tsquery: "'mon':*",
      afterId: 0,
      budget: 50,
      tag: null,
      limit: 4,
    });
    // First walk: a and b stop at their markers (10, 11); c's matches are known to 500, where
    // the answer was cut at its 4 rows.
    w.take(
      ['a', 'b', 'c'],
      [row(10, 'a', false, true), row(11, 'b', false, true), row(300, 'c', true), row(500, 'c', true)],
    );
    assert.equal(w.page(), null);
    const second = w.next();
    // Fewer than 4 matches known: every unfinished garden walks on, each from its own end.
    assert.deepEqual(second?.gardens, ['a', 'b', 'c']);
    assert.deepEqual(second?.afters, [10, 11, 500]);
    // The answer cut at its 4 rows by a's and b's alone, at 30: below 500, so c's end stays at
    // 500 and its matches 300 and 500 are not read again; a and b walk on from their markers.
    w.take(
      ['a', 'b', 'c'],
      [row(20, 'a', true), row(25, 'a', false, true), row(28, 'b', true), row(30, 'b', false, true)],
    );
    assert.equal(w.page(), null);
    const third = w.next();
    assert.deepEqual(third?.gardens, ['a', 'b']);
    assert.deepEqual(third?.afters, [25, 30]);
    // What the planned statement would finish: the matches at or below the least end, and from where.
    assert.deepEqual(w.rest(), { page: [row(20, 'a', true)].map(({ hit, cut, ...p }) => p), from: 25 });
  });

  it('answers the page once the matches at or below every unfinished garden reach the limit', () => {
    const w = new SearchWalk({
      gardens: ['a', 'b'],
      tsquery: "'mon':*",
      afterId: 0,
      budget: 50,
      tag: null,
      limit: 2,
    });
    w.take(['a', 'b'], [row(1, 'a', true), row(2, 'b', true)]);
    assert.deepEqual(
      w.page()?.map((p) => p.id),
      [1, 2],
    );
  });
});
