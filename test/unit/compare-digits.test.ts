import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { compareDigits } from '../../src/store/postgres/store.js';

// PostgreSQL's log positions (xid.seq) compare digit by digit: as their numbers do, up to 20 digits.
describe('compareDigits', () => {
  it('orders decimal strings as BigInt orders their numbers', () => {
    let seed = 20261126;
    const rand = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    const digits = () => {
      // Up to 20 digits, sometimes with leading zeros, often sharing a prefix with the last one.
      const zeros = rand(4) === 0 ? '0'.repeat(rand(3)) : '';
      const body = String(rand(10) === 0 ? 0 : rand(2 ** 31)) + (rand(2) ? String(rand(10 ** 9)) : '');
      return zeros + body.slice(0, 20 - zeros.length);
    };
    const sign = (x: bigint) => (x === 0n ? 0 : x < 0n ? -1 : 1);
    for (let k = 0; k < 5000; k++) {
      const a = digits();
      const b = rand(5) === 0 ? a : rand(3) === 0 ? `${a.slice(0, -1)}${rand(10)}` : digits();
      assert.equal(compareDigits(a, b), sign(BigInt(a) - BigInt(b)), `${a} against ${b}`);
    }
    assert.equal(compareDigits('0', '000'), 0);
    assert.equal(compareDigits('18446744073709551615', '9223372036854775807'), 1);
  });
});
