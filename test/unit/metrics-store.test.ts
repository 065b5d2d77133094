import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Metrics } from '../../src/http/metrics.js';
import type { Store } from '../../src/store/store.js';
import { ENGINES } from '../helpers/engines.js';

// Metrics.instrument wraps the store the service runs on. An operation an engine has but the
// wrapper drops is silently replaced by the feed's slower fallback (the change feed's one-statement
// reads on PostgreSQL went unused behind it), so the optional ones are checked on every engine.
const OPTIONAL = ['feedStart', 'feedLog', 'listTrashJson', 'plantHistoryJson', 'gardenActivityJson'] as const;

for (const engine of ENGINES) {
  describe(`Metrics.instrument (${engine.name})`, { skip: engine.skip, timeout: 30_000 }, () => {
    let raw: Store;
    before(async () => {
      raw = await engine.open();
    });
    after(() => raw?.close());

    it('keeps each optional operation the engine has, and only those', async () => {
      const timed = new Metrics().instrument(raw);
      for (const name of OPTIONAL) assert.equal(typeof timed[name], typeof raw[name], name);
      if (timed.feedStart !== undefined) {
        const start = await timed.feedStart('someone', null);
        assert.deepEqual(start.gardens, []);
      }
    });
  });
}
