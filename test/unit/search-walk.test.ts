import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SearchWalk, type WalkArgs, type WalkRow } from '../../src/store/postgres/search.js';

// SearchWalk's bookkeeping (src/store/postgres/search.ts) on rows made by hand: how far the gardens'
// matches are known after each round, when the page is whole, and from where a later round or the
// planned statement reads on.

const row = (id: number, garden: string, hit: boolean, cut = false): WalkRow => ({
  id,
  garden,
  name: `p${id}`,
  tag: null,
  version: id,
  hit,
  cut,
});
const plant = ({ hit, cut, ...p }: WalkRow) => p;
const first = (limit: number, afterId = 0): WalkArgs => ({
  gardens: ['a', 'b', 'c'],
  tsquery: "'mon':*",
  afterId,
  budget: 50,
  tag: null,
  limit,
});

describe('SearchWalk', () => {
  it('walks on from its marker while the page is short, then leaves the rest to the planned statement', () => {
    const w = new SearchWalk(first(4, 7));
    // The first walk reads its budget: two matches, then its marker at 60.
    w.take([row(10, 'a', true), row(31, 'c', true), row(60, 'b', false, true)]);
    assert.equal(w.page(), null);
    assert.deepEqual(w.next(), { ...first(4, 7), afterId: 60 });
    // The second: one more match, then its marker.
    w.take([row(70, 'a', true), row(99, 'b', false, true)]);
    assert.equal(w.page(), null, 'three matches known of four');
    assert.deepEqual(w.next()?.afterId, 99);
    // The third: nothing but its marker. Two rounds after the first: the planned statement
    // finishes the page from the last marker.
    w.take([row(150, 'c', false, true)]);
    assert.equal(w.page(), null);
    assert.equal(w.next(), null);
    assert.deepEqual(w.rest(), {
      page: [row(10, 'a', true), row(31, 'c', true), row(70, 'a', true)].map(plant),
      from: 150,
    });
  });

  it('answers the page once limit matches are known, or the gardens end', () => {
    const full = new SearchWalk(first(2));
    full.take([row(1, 'a', true), row(2, 'b', true)]);
    assert.deepEqual(
      full.page()?.map((p) => p.id),
      [1, 2],
    );
    // An answer of fewer rows than the limit and no marker: the gardens ended, the page is what
    // was found (here one plant; below, none).
    const ended = new SearchWalk(first(20));
    ended.take([row(5, 'c', true)]);
    assert.deepEqual(
      ended.page()?.map((p) => p.id),
      [5],
    );
    const none = new SearchWalk(first(20));
    none.take([]);
    assert.deepEqual(none.page(), []);
  });

  it('an answer cut at the limit by a marker: known to the marker, one match short', () => {
    const w = new SearchWalk(first(2));
    w.take([row(3, 'a', true), row(8, 'b', false, true)]);
    assert.equal(w.page(), null);
    assert.deepEqual(w.next()?.afterId, 8);
    // A marker that is itself a match completes the page.
    const m = new SearchWalk(first(2));
    m.take([row(3, 'a', true), row(8, 'b', true, true)]);
    assert.deepEqual(
      m.page()?.map((p) => p.id),
      [3, 8],
    );
  });

  it('a rare term (under a quarter page of matches after a walk) goes to the planned statement at once', () => {
    const w = new SearchWalk(first(20));
    w.take([row(3, 'a', true), row(4, 'b', true), row(400, 'c', false, true)]);
    assert.equal(w.page(), null);
    assert.equal(w.next(), null);
    assert.deepEqual(w.rest(), { page: [row(3, 'a', true), row(4, 'b', true)].map(plant), from: 400 });
  });
});
