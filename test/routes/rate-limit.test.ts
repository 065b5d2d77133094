import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { loadConfig } from '../../src/config.js';
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

    // A client writes any X-Forwarded-For it likes; the proxy appends the address it saw.
    const spoofed = (i: number, client: string) => ({
      authorization: `Bearer pst_${'x'.repeat(43)}`,
      'x-forwarded-for': `198.51.100.${i % 250}, 203.0.113.${i % 250}, ${client}`,
    });

    it('TRUST_PROXY naming the one proxy: rotating the left-most X-Forwarded-For still hits the failed-auth limit', async () => {
      const { trustProxy } = loadConfig({ TRUST_PROXY: '10.0.0.2' });
      const h = await harness(engine, { authFailureLimit: 5, trustProxy });
      try {
        const viaProxy = (i: number, client: string) =>
          h.app.inject({
            method: 'GET',
            url: '/plants',
            remoteAddress: '10.0.0.2',
            headers: spoofed(i, client),
          });
        for (let i = 0; i < 5; i++) assert.equal((await viaProxy(i, '192.0.2.1')).statusCode, 401);
        const limited = await viaProxy(5, '192.0.2.1');
        assert.equal(limited.statusCode, 429, 'the address the proxy saw is the one counted');
        assert.equal(errorBody(limited).code, 'rate_limited');
        assert.equal(
          (await viaProxy(6, '192.0.2.2')).statusCode,
          401,
          'another client behind the proxy is its own',
        );
      } finally {
        await h.close();
      }
    });

    it('TRUST_PROXY as addresses: X-Forwarded-For from an untrusted peer is ignored, from the proxy it is read', async () => {
      const { trustProxy } = loadConfig({ TRUST_PROXY: '10.0.0.0/8' });
      const h = await harness(engine, { authFailureLimit: 5, trustProxy });
      try {
        const from = (remoteAddress: string, i: number) =>
          h.app.inject({ method: 'GET', url: '/plants', remoteAddress, headers: spoofed(i, `192.0.2.${i}`) });
        for (let i = 0; i < 5; i++) assert.equal((await from('192.0.2.200', i)).statusCode, 401);
        assert.equal(
          (await from('192.0.2.200', 5)).statusCode,
          429,
          'an untrusted peer is counted by its own address',
        );
        for (let i = 0; i < 10; i++) {
          assert.equal(
            (await from('10.1.2.3', i)).statusCode,
            401,
            'each client behind a trusted proxy counts alone',
          );
        }
      } finally {
        await h.close();
      }
    });
  });
}
