import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { HealthService } from '../../src/ops/health.js';
import { until } from '../helpers/wait.js';

describe("/healthz's schema version", () => {
  it('answers at once from what it last read, and reads again in the background at most once a second', async () => {
    let version = 18;
    let reads = 0;
    let release: () => void = () => {};
    const store = {
      ping: async () => {},
      // Each read waits until the test lets it answer: the answer must never wait on it.
      schemaVersion: () =>
        new Promise<number>((resolve) => {
          reads++;
          release = () => resolve(version);
        }),
    };
    const health = new HealthService(store, 18);
    assert.equal(health.schema(), 18);
    assert.equal(reads, 0, 'no read within a second of start');
    version = 19; // another process migrated
    await until('a read of the store to begin', () => {
      health.schema();
      return reads === 1;
    });
    for (let i = 0; i < 5; i++) assert.equal(health.schema(), 18, 'while the read is under way');
    assert.equal(reads, 1, 'one read at a time');
    release();
    await until('the new version to show', () => health.schema() === 19);
  });

  it('keeps the version it had when the store cannot answer', async () => {
    let reads = 0;
    const store = {
      ping: async () => {},
      schemaVersion: async () => {
        reads++;
        throw new Error('store down');
      },
    };
    const health = new HealthService(store, 7);
    await until('a failed read', () => {
      health.schema();
      return reads > 0;
    });
    assert.equal(health.schema(), 7);
  });
});
