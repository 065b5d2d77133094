import { randomBytes } from 'node:crypto';
import { closeSync, existsSync, fsyncSync, openSync, readSync, renameSync, rmSync, statSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { Worker } from 'node:worker_threads';
import Database from 'better-sqlite3';
import { SQLITE_MIGRATIONS } from './migrations.js';
import { createPrivate } from './private-file.js';

// Backups of a SQLite store (contract section 12): a consistent copy as of one commit, written
// under a temporary name, checked, fsynced and renamed; the check of a backup file; and a restore
// that never touches a store a running process has open. A backup and a new restored store are
// 0600 (private-file.ts); a store a restore replaces keeps its mode.

/** What a backup file holds, as its check found it. */
export interface BackupCheck {
  /** The schema version it is at (the migrations applied to it). */
  schema: number;
  bytes: number;
  counts: {
    plants: number;
    gardens: number;
    members: number;
    tokens: number;
    webhooks: number;
    events: number;
  };
}

/** A backup file is not a store this version can take: `reason` says what is wrong. */
export class BackupRefused extends Error {}

const HEADER = Buffer.from('SQLite format 3\0', 'latin1');
const COUNTED = {
  plants: 'plants',
  gardens: 'gardens',
  members: 'garden_members',
  tokens: 'tokens',
  webhooks: 'webhook_endpoints',
  events: 'events',
} as const;

/** The newest schema this version knows. */
export const SCHEMA = SQLITE_MIGRATIONS.length;

/**
 * Checks that `file` is a whole, uncorrupted plantstore store of a schema this version can open
 * (equal or older): its header, its size against the page count it states, SQLite's quick_check,
 * its schema version, and that every table counted is there. Throws BackupRefused naming the
 * problem; never changes the file.
 */
export function checkBackup(file: string): BackupCheck {
  if (!existsSync(file)) throw new BackupRefused(`${file} does not exist`);
  const bytes = statSync(file).size;
  const head = Buffer.alloc(100);
  const fd = openSync(file, 'r');
  try {
    readSync(fd, head, 0, 100, 0);
  } finally {
    closeSync(fd);
  }
  if (bytes < 100 || !head.subarray(0, 16).equals(HEADER))
    throw new BackupRefused(`${file} is not a SQLite database`);
  const pageSize = head.readUInt16BE(16) === 1 ? 65536 : head.readUInt16BE(16);
  const pages = head.readUInt32BE(28);
  if (pages > 0 && bytes < pageSize * pages) {
    throw new BackupRefused(`${file} is truncated: ${bytes} bytes where its header says ${pageSize * pages}`);
  }
  // A file in WAL mode makes -wal and -shm files when opened, even to read: those it made go again.
  const made = ['-wal', '-shm'].map((x) => `${file}${x}`).filter((f) => !existsSync(f));
  let db: Database.Database;
  try {
    db = new Database(file, { readonly: true, fileMustExist: true });
  } catch (err) {
    throw new BackupRefused(`${file} cannot be opened: ${(err as Error).message}`);
  }
  try {
    const problems = (db.pragma('quick_check(5)', { simple: false }) as { quick_check: string }[]).map(
      (r) => r.quick_check,
    );
    if (problems.join() !== 'ok') throw new BackupRefused(`${file} is corrupt: ${problems.join('; ')}`);
    const hasMigrations = db
      .prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'")
      .get();
    if (!hasMigrations) throw new BackupRefused(`${file} is not a plantstore store (no schema_migrations)`);
    const schema =
      (db.prepare('SELECT coalesce(max(version), 0) FROM schema_migrations').pluck().get() as number) ?? 0;
    if (schema > SCHEMA) {
      throw new BackupRefused(
        `${file} is of schema ${schema}, newer than this plantstore's (${SCHEMA}): upgrade first`,
      );
    }
    const counts = {} as BackupCheck['counts'];
    for (const [key, table] of Object.entries(COUNTED) as [keyof typeof COUNTED, string][]) {
      const exists = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?").get(table);
      counts[key] = exists ? (db.prepare(`SELECT count(*) FROM ${table}`).pluck().get() as number) : 0;
    }
    return { schema, bytes, counts };
  } catch (err) {
    if (err instanceof BackupRefused) throw err;
    throw new BackupRefused(`${file} is corrupt: ${(err as Error).message}`);
  } finally {
    db.close();
    for (const f of made) rmSync(f, { force: true });
  }
}

// Makes a rename durable: the directory's entry is fsynced too.
export function fsyncPath(path: string): void {
  const fd = openSync(path, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

// A backup is one file: the copy leaves WAL mode (the store's, copied with its header), so that
// opening it never makes -wal and -shm files beside it; a store opened on it goes back to WAL.
function selfContained(file: string): void {
  const db = new Database(file, { fileMustExist: true });
  try {
    db.pragma('journal_mode = DELETE');
  } finally {
    db.close();
  }
}

/** A temporary name beside `target`, never one a backup is kept under. */
const partial = (target: string) =>
  join(dirname(target), `.${basename(target)}.partial-${process.pid}-${randomBytes(4).toString('hex')}`);

/**
 * Copies the store at `source` to `target` (which must not exist) as of one commit, while other
 * connections and processes go on writing: SQLite's online backup in a single step, on a read-only
 * connection of its own, so the copy is one snapshot and writers are never blocked (WAL). The copy
 * is checked, fsynced and renamed into place; on any failure nothing is left under either name.
 */
export async function backupStore(source: string, target: string): Promise<BackupCheck & { asOf: Date }> {
  const tmp = partial(target);
  try {
    const db = new Database(source, { readonly: true, fileMustExist: true });
    let asOf: Date;
    try {
      db.pragma('busy_timeout = 5000');
      asOf = new Date();
      createPrivate(tmp);
      // The first step copies nothing; asking for every page in the next makes the copy one read.
      await db.backup(tmp, { progress: () => 0x7fffffff });
    } finally {
      db.close();
    }
    selfContained(tmp);
    const check = checkBackup(tmp);
    fsyncPath(tmp);
    if (existsSync(target)) throw new BackupRefused(`${target} exists already`);
    renameSync(tmp, target);
    fsyncPath(dirname(target));
    return { ...check, asOf };
  } finally {
    rmSync(tmp, { force: true });
  }
}

/** Whether any connection, in this process or another, has the store at `path` open. */
export function inUse(path: string): boolean {
  if (!existsSync(path)) return false;
  const db = new Database(path, { timeout: 0, fileMustExist: true });
  try {
    db.pragma('locking_mode = EXCLUSIVE');
    db.exec('BEGIN EXCLUSIVE');
    db.exec('COMMIT');
    return false;
  } catch {
    return true;
  } finally {
    db.close();
  }
}

/** Whether the store at `path` holds anything: a plant, garden, token, endpoint or event. */
export function holdsData(path: string): boolean {
  if (!existsSync(path) || statSync(path).size === 0) return false;
  try {
    const c = checkBackup(path).counts;
    return Object.values(c).some((n) => n > 0);
  } catch {
    // Something that is not an empty store is data to keep.
    return true;
  }
}

/**
 * Puts the checked backup `file` in place as the store at `target`: copied beside it, fsynced,
 * then renamed over it, with the old store's WAL and shared-memory files removed first (they
 * belong to the old file). The caller has made sure that nothing has `target` open.
 */
export async function restoreStore(file: string, target: string): Promise<BackupCheck> {
  const check = checkBackup(file);
  const tmp = partial(target);
  try {
    createPrivate(tmp, existsSync(target) ? statSync(target).mode & 0o777 : 0o600);
    const db = new Database(file, { readonly: true, fileMustExist: true });
    try {
      await db.backup(tmp, { progress: () => 0x7fffffff });
    } finally {
      db.close();
    }
    fsyncPath(tmp);
    for (const extra of ['-wal', '-shm', '-journal']) rmSync(`${target}${extra}`, { force: true });
    renameSync(tmp, target);
    fsyncPath(dirname(target));
    return check;
  } finally {
    rmSync(tmp, { force: true });
  }
}

/** What a backup taken on a thread of its own reports. */
export interface BackupMade {
  bytes: number;
  plants: number;
  asOf: Date;
}

/**
 * backupStore on a worker thread: the serving thread's event loop is not held while the copy is
 * read and checked. Rejects with the reason when the backup failed (nothing is left under `target`).
 */
export function backupOnThread(source: string, target: string): Promise<BackupMade> {
  const workerData = { source, target };
  // As the writer's thread (writer.ts): compiled, beside this module; from source, through tsx.
  const worker = import.meta.url.endsWith('.ts')
    ? new Worker(
        `import(${JSON.stringify(import.meta.resolve('tsx/esm/api'))}).then((tsx) => { tsx.register();
         return import(${JSON.stringify(new URL('./backup-thread.ts', import.meta.url).href)}); });`,
        { eval: true, workerData },
      )
    : new Worker(new URL('./backup-thread.js', import.meta.url), { workerData });
  return new Promise((resolve, reject) => {
    worker.once('message', (m: { ok?: { bytes: number; plants: number; asOf: number }; error?: string }) => {
      if (m.ok) resolve({ bytes: m.ok.bytes, plants: m.ok.plants, asOf: new Date(m.ok.asOf) });
      else reject(new Error(m.error));
      void worker.terminate();
    });
    worker.once('error', reject);
    worker.once('exit', (code) => reject(new Error(`the backup thread exited (${code}) before it reported`)));
  });
}
