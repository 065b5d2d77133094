/**
 * Backups of a running SQLite store (contract section 12, issue targets): on a store of 1,000,000
 * plants, 20 connections creating plants for 10 s with no backup, then for 10 s with backups
 * taken back to back (on a thread of the benchmark's process, as `serve --backup-dir` takes them),
 * so that every create
 * of the second window overlaps a backup. Reports the creates' p50/p99 in both windows, each
 * backup's time, and the time `cp` takes to copy the same file (twice: the second with the file in
 * the page cache, as the backup reads it).
 *
 *   npx tsx bench/backup.ts [--plants 1000000] [--seconds 10]
 *
 * The 1,000,000-plant store is built once (raw inserts into a migrated store, search index too)
 * and kept under .tmp/ for later runs. The machine is small and shared: the load generator and the
 * server share its 2 cores, so the figures are what this machine gives, not a ceiling.
 */
import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import Database from 'better-sqlite3';
import { indexedWords } from '../src/search-text.js';
import { backupOnThread } from '../src/store/sqlite/backup.js';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { BENCH_SERVE_FLAGS, freePort, waitReady } from './ports.js';

const { values } = parseArgs({
  options: { plants: { type: 'string', default: '1000000' }, seconds: { type: 'string', default: '10' } },
});
const PLANTS = Number(values.plants);
const SECONDS = Number(values.seconds);
const ROOT = join(import.meta.dirname, '..');
const BIN = join(ROOT, 'bin/plantstore');
const WORDS = [
  'Monstera',
  'deliciosa',
  'Ficus',
  'lyrata',
  'Calathea',
  'orbifolia',
  'Pilea',
  'fern',
  'aloe',
  'rose',
];

// The seeded store, built once: gardens and plants written by plain SQL into a migrated file.
async function seeded(): Promise<string> {
  const file = join(ROOT, '.tmp', `backup-bench-${PLANTS}.db`);
  if (existsSync(file)) return file;
  mkdirSync(join(ROOT, '.tmp'), { recursive: true });
  const building = `${file}.building`;
  rmSync(building, { force: true });
  const store = new SqliteStore({ path: building, durability: 'normal', writer: 'inline' });
  await store.migrate();
  await store.close();
  const db = new Database(building);
  db.pragma('journal_mode = WAL');
  const at = Date.now();
  const garden = db.prepare(
    `INSERT INTO gardens (id, name, home_user, created_at, seq, created_by) VALUES (?, 'Home', ?, ${at}, ?, ?)`,
  );
  const member = db.prepare(
    `INSERT INTO garden_members (garden_id, user_id, role, added_at) VALUES (?, ?, 'owner', ${at})`,
  );
  for (let u = 1; u <= 100; u++) {
    const id = `gdn_bench${String(u).padStart(20, '0')}`;
    garden.run(id, `user${u}`, u, `user${u}`);
    member.run(id, `user${u}`);
  }
  const plant = db.prepare(
    'INSERT INTO plants (id, owner, garden, name, tag, version) VALUES (?, ?, ?, ?, ?, ?)',
  );
  const word = db.prepare('INSERT INTO plant_search (rowid, garden, words) VALUES (?, ?, ?)');
  const batch = db.transaction((from: number) => {
    for (let id = from; id < from + 10_000 && id <= PLANTS; id++) {
      const u = 1 + (id % 100);
      const garden = `gdn_bench${String(u).padStart(20, '0')}`;
      const name = `${WORDS[id % 10]} ${WORDS[(id * 7) % 10]} ${id}`;
      plant.run(id, `user${u}`, garden, name, id % 3 ? 'indoor' : null, id);
      word.run(id, Buffer.from(garden).toString('hex'), indexedWords(name));
    }
  });
  for (let from = 1; from <= PLANTS; from += 10_000) batch(from);
  db.exec(`UPDATE write_clock SET rev = ${PLANTS}`);
  db.pragma('wal_checkpoint(TRUNCATE)');
  db.close();
  execFileSync('mv', [building, file]);
  return file;
}

function load(
  url: string,
  token: string,
  seconds: number,
): Promise<{ rps: number; p50: number; p99: number; non2xx: number }> {
  const spec = {
    urls: [url],
    connections: 20,
    duration: seconds,
    method: 'POST',
    path: '/plants',
    body: { name: 'Backup bench fern', tag: 'bench' },
    token,
  };
  const child = spawn(process.execPath, [join(ROOT, 'bench/load.mjs'), JSON.stringify(spec)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.on('data', (d) => {
    out += d;
  });
  return new Promise((resolve, reject) => {
    child.once('exit', (code) =>
      code === 0 ? resolve(JSON.parse(out.trim())) : reject(new Error(`load exited ${code}`)),
    );
  });
}

function timed(cmd: string, args: string[], env: Record<string, string> = {}): number {
  const start = performance.now();
  const r = spawnSync(cmd, args, { env: { ...process.env, ...env }, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')}: ${r.stderr}`);
  return performance.now() - start;
}

const source = await seeded();
const dir = mkdtempSync(join(tmpdir(), 'plantstore-backup-bench-'));
const live = join(dir, 'live.db');
copyFileSync(source, live);
const env = { DATABASE_URL: `sqlite:${live}` };
const port = await freePort();
const server: ChildProcess = spawn(BIN, ['serve', '--port', String(port), ...BENCH_SERVE_FLAGS], {
  env: { ...process.env, ...env },
  stdio: 'ignore',
});
try {
  const url = `http://127.0.0.1:${port}`;
  await waitReady(url, '/readyz');
  const token = execFileSync(BIN, ['token', 'create', '--user', 'user1'], {
    env: { ...process.env, ...env },
    encoding: 'utf8',
  }).trim();
  const bytes = statSync(live).size;
  const copies = [1, 2].map(() => {
    const ms = timed('cp', [live, join(dir, 'cp.db')]);
    rmSync(join(dir, 'cp.db'));
    return ms;
  });
  await load(url, token, 2); // warm-up
  const before = await load(url, token, SECONDS);
  // Backups back to back for the whole window.
  const shelf = join(dir, 'shelf');
  mkdirSync(shelf);
  const backupMs: number[] = [];
  let stop = false;
  const backups = (async () => {
    for (let i = 0; !stop; i++) {
      const start = performance.now();
      // On a thread of this process, as `serve --backup-dir` takes them: the backup alone is timed.
      await backupOnThread(live, join(shelf, `b${i}.db`));
      backupMs.push(performance.now() - start);
      rmSync(join(shelf, `b${i}.db`));
    }
  })();
  const during = await load(url, token, SECONDS);
  stop = true;
  await backups;
  const result = {
    date: new Date().toISOString(),
    plants: PLANTS,
    fileMB: +(bytes / 1024 / 1024).toFixed(1),
    cpMs: copies.map((ms) => Math.round(ms)),
    backupMs: backupMs.map((ms) => Math.round(ms)),
    creates: {
      before: { rps: Math.round(before.rps), p50: before.p50, p99: before.p99, non2xx: before.non2xx },
      during: { rps: Math.round(during.rps), p50: during.p50, p99: during.p99, non2xx: during.non2xx },
    },
  };
  console.log(JSON.stringify(result, null, 2));
} finally {
  server.kill('SIGTERM');
  await new Promise((r) => server.once('exit', r));
  rmSync(dir, { recursive: true, force: true });
}
