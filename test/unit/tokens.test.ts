import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseDuration } from '../../src/durations.js';
import { hashToken, isWellFormedToken } from '../../src/identity/tokens.js';
import { decodeCursor, encodeCursor } from '../../src/plants/cursor.js';

describe('tokens, durations and cursors', () => {
  it('parses durations of a whole number and s, m, h or d', () => {
    assert.equal(parseDuration('45s'), 45_000);
    assert.equal(parseDuration('15m'), 900_000);
    assert.equal(parseDuration('12h'), 43_200_000);
    assert.equal(parseDuration('30d'), 2_592_000_000);
    for (const bad of ['', '0d', '1.5h', '10', 'd', '1w', '-1d', ' 1d', '1D', '999999999999d']) {
      assert.equal(parseDuration(bad), null, bad);
    }
  });

  it('recognises the token shape and hashes with SHA-256', () => {
    assert.ok(isWellFormedToken(`pst_${'a'.repeat(43)}`));
    assert.ok(!isWellFormedToken(`pst_${'a'.repeat(42)}`));
    assert.ok(!isWellFormedToken(`xyz_${'a'.repeat(43)}`));
    assert.equal(hashToken('abc'), 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  });

  it('a cursor round-trips for its own user, tag and garden only', () => {
    const c = encodeCursor(42, 'alice', 'green', null);
    assert.equal(decodeCursor(c, 'alice', 'green', null), 42);
    assert.throws(() => decodeCursor(c, 'bob', 'green', null), /another user/);
    assert.throws(() => decodeCursor(c, 'alice', null, null), /another user or for another tag/);
    assert.throws(() => decodeCursor(encodeCursor(1, 'alice', null, null), 'alice', '', null), /another/);
    assert.throws(() => decodeCursor('!!', 'alice', null, null), /not a cursor/);
    const g = encodeCursor(7, 'alice', null, 'gdn_000000000000000000000001');
    assert.equal(decodeCursor(g, 'alice', null, 'gdn_000000000000000000000001'), 7);
    assert.throws(() => decodeCursor(g, 'alice', null, null), /another tag or garden/);
    assert.throws(
      () => decodeCursor(g, 'alice', null, 'gdn_000000000000000000000002'),
      /another tag or garden/,
    );
  });
});
