// ListCache (src/plants/list-cache.ts): bounded by the bytes of the bodies it keeps, the oldest
// page going first; a page stored again counts as new; what is built after the cache emptied and
// filled again is still bounded. A service of the test's own answers each cursor with a page whose
// body is 100 bytes, and counts the builds, so a hit and a miss are told apart.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Caller } from '../../src/identity/caller.js';
import type { Page } from '../../src/paging.js';
import { ListCache } from '../../src/plants/list-cache.js';
import type { PlantService } from '../../src/plants/service.js';
import type { PagePlant } from '../../src/store/store.js';

const T = { timeout: 10_000 };
const caller = {
  user: 'alice',
  scopes: new Set(),
  tokenId: 't',
  kind: 'token',
  expiresAt: null,
} as unknown as Caller;
const scope = { gardens: ['g1'], garden: null };
const BODY = 100;

function cache(maxBytes: number) {
  const built: string[] = [];
  let marks = { reorder: 1, top: 1 };
  const service = {
    listMarks: () => marks,
    list: async (_c: Caller, _s: unknown, q: { cursor?: string }): Promise<Page<PagePlant>> => {
      built.push(q.cursor ?? '');
      return { items: [], next: 'more', limit: 20 };
    },
  } as unknown as PlantService;
  const lists = new ListCache(service, maxBytes);
  const get = (cursor: string) => lists.get(caller, scope, { cursor }, () => 'x'.repeat(BODY));
  return { get, built, moveMarks: () => (marks = { reorder: marks.reorder + 1, top: 1 }) };
}

describe('list cache eviction', () => {
  it('keeps at most its bytes, dropping the oldest page first', T, async () => {
    const c = cache(5 * BODY);
    for (const k of ['a', 'b', 'c', 'd', 'e', 'f', 'g']) await c.get(k);
    assert.deepEqual(c.built, ['a', 'b', 'c', 'd', 'e', 'f', 'g']);
    // The five newest are kept (hits build nothing); a and b went, and come back as misses.
    for (const k of ['c', 'd', 'e', 'f', 'g']) await c.get(k);
    assert.equal(c.built.length, 7);
    await c.get('a');
    assert.deepEqual(c.built.slice(7), ['a']);
    // a's return pushed out the oldest, c; d is still kept.
    await c.get('d');
    assert.equal(c.built.length, 8);
    await c.get('c');
    assert.deepEqual(c.built.slice(8), ['c']);
  });

  it('counts a page built again (stale marks) as new, and stays bounded after emptying', T, async () => {
    // Four pages' bytes (a page over a quarter of the cache is never kept).
    const c = cache(4 * BODY);
    for (const k of ['a', 'b', 'c', 'd']) await c.get(k);
    // New marks: every kept page is stale, and each is built again when asked.
    c.moveMarks();
    await c.get('a');
    assert.deepEqual(c.built.slice(4), ['a']);
    // a is now the newest: three more pages push out b, c and d (stale, still counted), not a.
    for (const k of ['x', 'y', 'z']) await c.get(k);
    const before = c.built.length;
    await c.get('a');
    assert.equal(c.built.length, before, 'a was kept');
    // Many more pages than it holds, twice over: each time only the newest four answer from it.
    for (let round = 0; round < 2; round++) {
      for (let i = 0; i < 50; i++) await c.get(`r${round}-${i}`);
      const n = c.built.length;
      for (const i of [46, 47, 48, 49]) await c.get(`r${round}-${i}`);
      assert.equal(c.built.length, n, 'the newest four are hits');
      await c.get(`r${round}-45`);
      assert.equal(c.built.length, n + 1, 'the fifth newest was dropped');
    }
  });
});
