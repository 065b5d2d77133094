import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { cli, type Server, serve } from './process.js';

describe('bin/plantstore backup (SQLite)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'plantstore-backup-'));
  const env = { DATABASE_URL: `sqlite:${join(dir, 'live.db')}` };
  let server: Server;
  let token: string;
  const post = (name: string) =>
    fetch(`${server.url}/plants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name }),
    });

  before(async () => {
    server = await serve([], env);
    token = (await cli(['token', 'create', '--user', 'backup'], env)).stdout.trim();
  });
  after(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('copies a running store consistently, with every acknowledged plant, while writes go on', async () => {
    for (let i = 0; i < 50; i++) assert.equal((await post(`before-${i}`)).status, 201);
    const during = Promise.all(
      Array.from({ length: 50 }, (_, i) => post(`during-${i}`).then((r) => r.status)),
    );
    const copy = join(dir, 'copy.db');
    const r = await cli(['backup', copy], env);
    assert.equal(r.code, 0, r.stderr);
    assert.equal((statSync(copy).mode & 0o777).toString(8), '600', 'it holds token hashes and secrets');
    assert.ok((await during).every((s) => s === 201));

    const db = new Database(copy, { readonly: true });
    assert.equal(db.pragma('integrity_check', { simple: true }), 'ok');
    const names = db.prepare("SELECT name FROM plants WHERE owner = 'backup'").pluck().all() as string[];
    for (let i = 0; i < 50; i++)
      assert.ok(names.includes(`before-${i}`), `before-${i} missing from the copy`);
    assert.equal((db.prepare('SELECT count(*) FROM tokens').pluck().get() as number) >= 1, true);
    db.close();

    const list = await fetch(`${server.url}/plants?limit=1000`, {
      headers: { authorization: `Bearer ${token}` },
    });
    assert.equal(((await list.json()) as unknown[]).length, 100, 'the service kept serving');

    // Restore: the copy is a store of its own; a service started on it answers the same token
    // and holds the same data, in order, and takes new writes.
    const copyEnv = { DATABASE_URL: `sqlite:${copy}` };
    assert.match((await cli(['migrate'], copyEnv)).stderr, /up to date/);
    const restored = await serve([], copyEnv);
    try {
      const auth = { authorization: `Bearer ${token}` };
      const page = await fetch(`${restored.url}/plants?limit=1000`, { headers: auth });
      assert.equal(page.status, 200);
      const plants = (await page.json()) as { name: string }[];
      assert.deepEqual(
        plants.slice(0, 50).map((p) => p.name),
        Array.from({ length: 50 }, (_, i) => `before-${i}`),
        'the acknowledged plants, in id order',
      );
      const created = await fetch(`${restored.url}/plants`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'after restore' }),
      });
      assert.equal(created.status, 201);
      const location = created.headers.get('location')!;
      assert.deepEqual(await (await fetch(`${restored.url}${location}`, { headers: auth })).json(), {
        name: 'after restore',
      });
      assert.equal(
        (await fetch(`${restored.url}${location}`, { method: 'DELETE', headers: auth })).status,
        204,
      );
    } finally {
      await restored.stop();
    }
  });

  it('refuses to overwrite a file, a missing store, and PostgreSQL, with exit 2', async () => {
    const existing = join(dir, 'copy.db');
    for (const [args, extra] of [
      [['backup', existing], env],
      [['backup', join(dir, 'x.db')], { DATABASE_URL: `sqlite:${join(dir, 'nope', 'missing.db')}` }],
      [['backup', join(dir, 'y.db')], { DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/postgres' }],
    ] as const) {
      const res = await cli([...args], extra);
      assert.equal(res.code, 2, res.stderr);
      assert.match(res.stderr, /^plantstore: /);
    }
    assert.ok(!existsSync(join(dir, 'nope')), 'nothing was created for the missing store');
  });
});
