import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigError, loadConfig } from '../../src/config.js';

describe('configuration', () => {
  it('defaults match the contract', () => {
    const c = loadConfig({});
    assert.equal(c.port, 3000);
    assert.equal(c.host, '127.0.0.1');
    assert.equal(c.database, 'sqlite:./data/plantstore.db');
    assert.equal(c.rateLimit, 6000);
    assert.equal(c.authFailureLimit, 60);
    assert.equal(c.durability, 'full');
    assert.equal(c.metrics, true);
  });

  it('a flag beats the environment, which beats the default', () => {
    const c = loadConfig({ PORT: '4000', HOST: '0.0.0.0', RATE_LIMIT: '0' }, { port: '5000' });
    assert.equal(c.port, 5000);
    assert.equal(c.host, '0.0.0.0');
    assert.equal(c.rateLimit, 0);
  });

  for (const [env, message] of [
    [{ PORT: '70000' }, /PORT must be a whole number from 0 to 65535/],
    [{ PORT: '3e3' }, /PORT/],
    [{ DATABASE_URL: 'mysql://x' }, /DATABASE_URL must be sqlite:PATH or postgres/],
    [{ DURABILITY: 'none' }, /DURABILITY must be one of full, normal/],
    [{ METRICS: 'maybe' }, /METRICS must be true or false/],
    [{ RATE_LIMIT: '-1' }, /RATE_LIMIT/],
  ] as const) {
    it(`rejects ${JSON.stringify(env)} with one clear line`, () => {
      assert.throws(
        () => loadConfig(env),
        (err: Error) => err instanceof ConfigError && message.test(err.message),
      );
    });
  }
});
