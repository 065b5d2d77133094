// Contract section 12 on SQLite: `backup --to` while writers create, change and delete (every write
// acknowledged before the backup began is in it, nothing half-written under a final name, even after
// kill -9), `backup verify` of good, corrupt, truncated and newer files, and `restore` with each of
// its refusals; on PostgreSQL both commands point to PostgreSQL's tools.
import assert from 'node:assert/strict';
import {
  chmodSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { sqliteAtVersion } from '../helpers/engines.js';
import { until } from '../helpers/wait.js';
import { cli, exitOf, type Server, serve, spawnBin } from './process.js';

describe('backup, verify and restore (SQLite)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'plantstore-backups-'));
  const live = join(dir, 'live.db');
  const env = { DATABASE_URL: `sqlite:${live}` };
  let server: Server;
  let token: string;
  const call = (method: string, path: string, body?: unknown) =>
    fetch(`${server.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });

  before(async () => {
    server = await serve([], env);
    token = (await cli(['token', 'create', '--user', 'keeper'], env)).stdout.trim();
  });
  after(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('backs up while writers create, change and delete: every write acknowledged before it began is in it', async () => {
    const kept: number[] = [];
    for (let i = 0; i < 40; i++) {
      const res = await call('POST', '/plants', { name: `kept ${i}` });
      assert.equal(res.status, 201);
      kept.push(Number(res.headers.get('location')!.split('/').pop()));
    }
    for (const id of kept.slice(0, 10)) assert.equal((await call('DELETE', `/plants/${id}`)).status, 204);
    for (const id of kept.slice(10, 20)) {
      const res = await fetch(`${server.url}/plants/${id}`, {
        method: 'PATCH',
        headers: {
          authorization: `Bearer ${token}`,
          'content-type': 'application/merge-patch+json',
          'if-match': '*',
        },
        body: JSON.stringify({ name: `changed ${id}` }),
      });
      assert.equal(res.status, 200);
    }
    // Writers keep going while the backup runs.
    let stop = false;
    const writers = Promise.all(
      Array.from({ length: 4 }, async (_, w) => {
        let n = 0;
        while (!stop) {
          const res = await call('POST', '/plants', { name: `during ${w}.${n++}` });
          assert.equal(res.status, 201);
          if (n % 3 === 0) await call('DELETE', res.headers.get('location')!);
        }
      }),
    );
    const out = join(dir, 'out');
    const r = await cli(['backup', '--to', out], { ...env, DATABASE_URL: `sqlite:${live}` }).finally(() => {
      stop = true;
    });
    await writers;
    // `backup --to DIR` when DIR does not exist yet writes a file named DIR: it must be a directory to hold one.
    assert.equal(r.code, 0, r.stderr);
    const [path, size, plants, asOf] = r.stdout.trim().split('\t');
    assert.equal(path, out);
    assert.match(size!, /MB$/);
    assert.match(plants!, /^\d+ plants$/);
    assert.match(asOf!, /^as of \d{4}-/);
    const db = new Database(out, { readonly: true });
    const names = new Map(
      (db.prepare('SELECT id, name FROM plants').raw().all() as [number, string][]).map(([id, name]) => [
        id,
        name,
      ]),
    );
    db.close();
    for (const id of kept.slice(0, 10)) assert.ok(!names.has(id), `deleted ${id} is not in the backup`);
    for (const id of kept.slice(10, 20)) assert.equal(names.get(id), `changed ${id}`);
    for (const id of kept.slice(20)) assert.ok(names.get(id)?.startsWith('kept'));
    assert.deepEqual(
      readdirSync(dir).filter((f) => f.includes('.partial-')),
      [],
      'no partial file is left',
    );

    // Into a directory: plantstore-<UTC time>.db.
    const shelf = join(dir, 'shelf');
    const { mkdirSync } = await import('node:fs');
    mkdirSync(shelf);
    const again = await cli(['backup', '--to', shelf], env);
    assert.equal(again.code, 0, again.stderr);
    const files = readdirSync(shelf);
    assert.equal(files.length, 1);
    assert.match(files[0]!, /^plantstore-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d{3}Z\.db$/);
    const verified = await cli(['backup', 'verify', join(shelf, files[0]!)], env);
    assert.equal(verified.code, 0, verified.stderr);
    assert.match(verified.stdout, /: ok, schema \d+, .*\d+ plants, \d+ gardens, \d+ members, 1 tokens/);
  });

  it('leaves nothing under a final name when the process taking a backup is killed', async () => {
    // A store big enough that the copy takes a while: a table of filler beside plantstore's own.
    const big = join(dir, 'big.db');
    const db = sqliteAtVersion(big, 15);
    db.exec('CREATE TABLE filler (b BLOB)');
    const ins = db.prepare('INSERT INTO filler VALUES (randomblob(65536))');
    db.transaction(() => {
      for (let i = 0; i < 2000; i++) ins.run();
    })();
    db.close();
    const target = join(dir, 'killed.db');
    const child = spawnBin(['backup', '--to', target], { DATABASE_URL: `sqlite:${big}` });
    const partial = await until(
      'the partial copy to appear',
      () =>
        readdirSync(dir).find((f) => f.startsWith('.killed.db.partial-')) ??
        (child.exitCode !== null ? 'done' : undefined),
      30_000,
    );
    child.kill('SIGKILL');
    await exitOf(child, 'the killed backup');
    if (partial === 'done') {
      // It finished before it could be killed: then the file under the final name is whole.
      assert.equal((await cli(['backup', 'verify', target], env)).code, 0);
    } else {
      assert.ok(!existsSync(target), 'no file under the final name');
    }
  });

  it('verify names what is wrong with a corrupt, truncated, newer or foreign file', async () => {
    const good = join(dir, 'good.db');
    assert.equal((await cli(['backup', good], env)).code, 0);
    const bad = (name: string, make: (file: string) => void) => {
      const file = join(dir, name);
      writeFileSync(file, readFileSync(good));
      make(file);
      return file;
    };
    const pageSize = 4096;
    const cases: [string, string, RegExp][] = [
      [
        'a corrupt page',
        bad('corrupt.db', (f) => {
          const bytes = readFileSync(f);
          bytes.fill(0xa5, pageSize * 2 + 8, pageSize * 3);
          writeFileSync(f, bytes);
        }),
        /corrupt/,
      ],
      [
        'a truncated file',
        bad('truncated.db', (f) => truncateSync(f, Math.floor(statSync(f).size / 2))),
        /truncated/,
      ],
      [
        'a newer schema',
        bad('newer.db', (f) => {
          const d = new Database(f);
          d.prepare(`INSERT INTO schema_migrations VALUES (999, '0999_future', '')`).run();
          d.close();
        }),
        /newer/,
      ],
      [
        'not SQLite',
        bad('text.db', (f) => writeFileSync(f, 'plants!\n'.repeat(100))),
        /not a SQLite database/,
      ],
      ['missing', join(dir, 'nothing-here.db'), /does not exist/],
    ];
    for (const [what, file, why] of cases) {
      const r = await cli(['backup', 'verify', file], env);
      assert.equal(r.code, 1, `${what}: ${r.stdout}${r.stderr}`);
      assert.match(r.stderr, why, what);
    }
    // Restoring any of them changes nothing.
    const target = join(dir, 'untouched.db');
    for (const [what, file] of cases) {
      const r = await cli(['restore', file], { DATABASE_URL: `sqlite:${target}` });
      assert.equal(r.code, 1, `${what}: ${r.stderr}`);
      assert.ok(!existsSync(target), `${what}: nothing was made`);
    }
  });

  it('restores into a new file, refuses a store with data (unless --force) or one a process has open, and migrates an older one', async () => {
    const backup = join(dir, 'for-restore.db');
    assert.equal((await cli(['backup', backup], env)).code, 0);
    const target = join(dir, 'restored', 'plants.db');
    const tenv = { DATABASE_URL: `sqlite:${target}` };
    const first = await cli(['restore', backup], tenv);
    assert.equal(first.code, 0, first.stderr);
    assert.equal((statSync(target).mode & 0o777).toString(8), '600', 'a new store file is 0600');
    assert.match(first.stdout, /restored .* \d+ plants/);
    const restored = await serve([], tenv);
    try {
      const res = await fetch(`${restored.url}/plants?limit=1000`, {
        headers: { authorization: `Bearer ${token}` },
      });
      assert.equal(res.status, 200, 'the same token works on the restored store');
      assert.ok(((await res.json()) as unknown[]).length > 0);
      const busy = await cli(['restore', backup, '--force'], tenv);
      assert.equal(busy.code, 1);
      assert.match(busy.stderr, /open by a running process/);
    } finally {
      await restored.stop();
    }
    const before = readFileSync(target);
    const refused = await cli(['restore', backup], tenv);
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /holds data; .*--force/);
    assert.ok(readFileSync(target).equals(before), 'nothing changed');
    // A store replaced with --force keeps the mode its operator gave it.
    chmodSync(target, 0o640);
    assert.equal((await cli(['restore', backup, '--force'], tenv)).code, 0);
    assert.equal((statSync(target).mode & 0o777).toString(8), '640', "the replaced store's mode");

    // An older schema's backup is migrated on restore.
    const old = join(dir, 'v14.db');
    sqliteAtVersion(old, 14).close();
    const migrated = await cli(['restore', old], { DATABASE_URL: `sqlite:${join(dir, 'from-old.db')}` });
    assert.equal(migrated.code, 0, migrated.stderr);
    assert.match(migrated.stdout, /migrated 0015_plant_search/);
  });

  it('on PostgreSQL, backup and restore point to its own tools with exit 2', async () => {
    const pgEnv = { DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/postgres' };
    for (const args of [['backup'], ['restore', join(dir, 'good.db')]]) {
      const r = await cli(args, pgEnv);
      assert.equal(r.code, 2, r.stderr);
      assert.match(r.stderr, /pg_dump/);
    }
  });
});
