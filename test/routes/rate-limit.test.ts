import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { errorBody, harness } from '../helpers/app.js';
import { ENGINES } from '../helpers/engines.js';

for (const engine of ENGINES) {
  describe(`rate limits (${engine.name})`, { skip: engine.skip }, () => {
    it('per token: past the limit a minute, 429 with Retry-After; other tokens unaffected', async () => {
      const h = await harness(engine, { rateLimit: 3 });
      try {
        const a = await h.user();
        const b = await h.user();
        for (let i = 3; i > 0; i--) {
          const res = await a.request({ method: 'GET', url: '/plants' });
          assert.equal(res.statusCode, 200);
          assert.equal(res.headers['ratelimit-remaining'], String(i - 1));
        }
        const limited = await a.request({ method: 'GET', url: '/plants' });
        assert.equal(limited.statusCode, 429);
        assert.equal(errorBody(limited).code, 'rate_limited');
        assert.match(String(limited.headers['retry-after']), /^[1-9][0-9]*$/);
        assert.ok(Number(limited.headers['retry-after']) <= 60);
        assert.equal(limited.headers['ratelimit-remaining'], '0');
        const created = await a.create({ name: 'blocked' });
        assert.equal(created.statusCode, 429, 'writes are limited too and store nothing');
        assert.equal((await b.request({ method: 'GET', url: '/plants' })).statusCode, 200);
      } finally {
        await h.close();
      }
    });

    it('0 turns the per-token limit off: no RateLimit headers', async () => {
      const h = await harness(engine, { rateLimit: 0 });
      try {
        const c = await h.user();
        const res = await c.request({ method: 'GET', url: '/plants' });
        assert.equal(res.statusCode, 200);
        assert.equal(res.headers['ratelimit-limit'], undefined);
      } finally {
        await h.close();
      }
    });

    it('failed authentications per address: 429 after the burst, while valid tokens still work', async () => {
      const h = await harness(engine, { authFailureLimit: 5 });
      try {
        const bad = { authorization: `Bearer pst_${'x'.repeat(43)}` };
        for (let i = 0; i < 5; i++) {
          assert.equal((await h.app.inject({ method: 'GET', url: '/plants', headers: bad })).statusCode, 401);
        }
        const limited = await h.app.inject({ method: 'GET', url: '/plants', headers: bad });
        assert.equal(limited.statusCode, 429);
        assert.match(String(limited.headers['retry-after']), /^[1-9][0-9]*$/);
        assert.equal(
          (await h.app.inject({ method: 'GET', url: '/plants' })).statusCode,
          429,
          'a missing token counts too',
        );
        const c = await h.user();
        assert.equal((await c.request({ method: 'GET', url: '/plants' })).statusCode, 200);
      } finally {
        await h.close();
      }
    });
  });
}
