import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, it } from 'node:test';
import { buildApp } from '../../src/app.js';
import { testConfig } from '../../src/config.js';
import { createToken } from '../../src/identity/tokens.js';
import { RedisRateLimiter } from '../../src/ratelimit/redis.js';
import { ENGINES, REDIS_SKIP, REDIS_URL } from '../helpers/engines.js';

const engine = ENGINES[0]!;

describe('rate limits shared through Redis', { skip: REDIS_SKIP }, () => {
  it('two instances count one token’s requests together', async () => {
    const store = await engine.open();
    const prefix = `plantstore:test:${randomUUID()}:`;
    const limiters = [new RedisRateLimiter(REDIS_URL, prefix), new RedisRateLimiter(REDIS_URL, prefix)];
    const apps = await Promise.all(
      limiters.map((limiter) => buildApp(testConfig({ rateLimit: 4 }), { store, limiter })),
    );
    try {
      const { secret } = await createToken(store, {
        user: 'shared',
        scopes: ['plants:read'],
        name: null,
        expiresInMs: null,
      });
      const get = (i: number) =>
        apps[i]!.inject({ method: 'GET', url: '/plants', headers: { authorization: `Bearer ${secret}` } });
      const statuses = [];
      for (const i of [0, 1, 0, 1, 0, 1]) statuses.push((await get(i)).statusCode);
      assert.deepEqual(statuses, [200, 200, 200, 200, 429, 429]);
      const last = await get(1);
      assert.equal(last.headers['ratelimit-remaining'], '0');
      assert.ok(Number(last.headers['retry-after']) >= 1 && Number(last.headers['retry-after']) <= 60);
    } finally {
      for (const app of apps) await app.close();
      for (const l of limiters) await l.close();
      await store.close();
    }
  });

  it('serve with REDIS_URL uses Redis; an unreachable Redis fails open instead of failing requests', async () => {
    const store = await engine.open();
    const app = await buildApp(testConfig({ rateLimit: 2, redisUrl: 'redis://127.0.0.1:1' }), { store });
    try {
      const { secret } = await createToken(store, {
        user: 'open',
        scopes: ['plants:read'],
        name: null,
        expiresInMs: null,
      });
      for (let i = 0; i < 4; i++) {
        const res = await app.inject({
          method: 'GET',
          url: '/plants',
          headers: { authorization: `Bearer ${secret}` },
        });
        assert.equal(res.statusCode, 200);
      }
    } finally {
      await app.close();
      await store.close();
    }
  });
});
