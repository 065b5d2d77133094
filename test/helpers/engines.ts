import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { POSTGRES_MIGRATIONS } from '../../src/store/postgres/migrations.js';
import { PgStore } from '../../src/store/postgres/store.js';
import { SQLITE_MIGRATIONS } from '../../src/store/sqlite/migrations.js';
import { SqliteStore } from '../../src/store/sqlite/store.js';
import type { Store } from '../../src/store/store.js';
import { PG_ADMIN_URL, postgresUnreachable, REDIS_URL, redisUnreachable } from './services.js';

export { PG_ADMIN_URL, REDIS_URL };

/** A store engine the suites run against; `skip` says why it cannot run here. */
export interface Engine {
  name: string;
  skip: string | false;
  /** A fresh, migrated, empty store of its own; closing it also drops whatever it created. */
  open(): Promise<Store>;
  /** A database URL of its own for a spawned `bin/plantstore`, and how to drop it. */
  database(): Promise<{ url: string; drop(): Promise<void> }>;
}

async function admin<T>(fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: PG_ADMIN_URL });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

/** Creates an empty database named plantstore_test_…; returns its URL and how to drop it. */
export async function createPgDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `plantstore_test_${randomBytes(6).toString('hex')}`;
  await admin((c) => c.query(`CREATE DATABASE ${name}`));
  const url = new URL(PG_ADMIN_URL);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: () => admin((c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)).then(() => {}),
  };
}

const pgSkip = await postgresUnreachable();
// In CI an unreachable PostgreSQL is a failure, never a silent skip.
if (pgSkip && process.env.CI === 'true') throw new Error(`CI=true and ${pgSkip}`);

const sqlite: Engine = {
  name: 'sqlite',
  skip: false,
  // A file, as served: its writes are committed by the writer thread (':memory:' writes inline,
  // which test/store/sqlite.test.ts covers).
  async open() {
    const dir = mkdtempSync(join(tmpdir(), 'plantstore-store-'));
    const store = new SqliteStore({ path: join(dir, 'plants.db'), durability: 'full' });
    await store.migrate();
    const close = store.close.bind(store);
    store.close = async () => {
      await close();
      rmSync(dir, { recursive: true, force: true });
    };
    return store;
  },
  async database() {
    const dir = mkdtempSync(join(tmpdir(), 'plantstore-db-'));
    return {
      url: `sqlite:${join(dir, 'plants.db')}`,
      drop: async () => rmSync(dir, { recursive: true, force: true }),
    };
  },
};

const postgres: Engine = {
  name: 'postgres',
  skip: pgSkip,
  async open() {
    const db = await createPgDatabase();
    const store = new PgStore({ url: db.url, poolSize: 5 });
    await store.migrate();
    const close = store.close.bind(store);
    store.close = async () => {
      await close();
      await db.drop();
    };
    return store;
  },
  database: createPgDatabase,
};

/**
 * Two instances on one store of the engine (two PostgreSQL pools on one database; two SQLite
 * stores, each with its writer, on one file); `url` is the database's (PostgreSQL) or file's.
 */
export async function twoInstances(
  engine: string,
): Promise<{ stores: Store[]; url: string; close(): Promise<void> }> {
  if (engine === 'postgres') {
    const db = await createPgDatabase();
    const a = new PgStore({ url: db.url, poolSize: 4 });
    await a.migrate();
    const b = new PgStore({ url: db.url, poolSize: 4 });
    return {
      stores: [a, b],
      url: db.url,
      async close() {
        await a.close();
        await b.close();
        await db.drop();
      },
    };
  }
  const dir = mkdtempSync(join(tmpdir(), 'plantstore-feed-'));
  const path = join(dir, 'plants.db');
  const a = new SqliteStore({ path, durability: 'full' });
  await a.migrate();
  const b = new SqliteStore({ path, durability: 'full' });
  await b.migrate();
  return {
    stores: [a, b],
    url: path,
    async close() {
      await a.close();
      await b.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Every engine; suites do `for (const engine of ENGINES) describe(…, { skip: engine.skip }, …)`. */
export const ENGINES: Engine[] = [sqlite, postgres];

/** Why the Redis suites cannot run here, or false. In CI they must run. */
export const REDIS_SKIP = await redisUnreachable();
if (REDIS_SKIP && process.env.CI === 'true') throw new Error(`CI=true and ${REDIS_SKIP}`);

/** A SQLite file at `path` with the schema as migration `version` left it (applied and recorded). */
export function sqliteAtVersion(path: string, version: number): Database.Database {
  const db = new Database(path);
  db.exec(
    'CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)',
  );
  for (const m of SQLITE_MIGRATIONS.filter((m) => m.version <= version)) {
    db.exec(m.sql);
    db.prepare('INSERT INTO schema_migrations VALUES (?, ?, ?)').run(m.version, m.name, '');
  }
  return db;
}

/** Runs `fn` on a PostgreSQL database of its own (its URL and a client connected to it), then drops it. */
export async function withPgDatabase(fn: (url: string, c: pg.Client) => Promise<void>): Promise<void> {
  const db = await createPgDatabase();
  const c = new pg.Client({ connectionString: db.url });
  try {
    await c.connect();
    await fn(db.url, c);
  } finally {
    await c.end();
    await db.drop();
  }
}

/** Brings the PostgreSQL database `c` is connected to to the schema as migration `version` left it. */
export async function pgAtVersion(c: pg.Client, version: number): Promise<void> {
  await c.query(`CREATE TABLE schema_migrations (
    version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`);
  for (const m of POSTGRES_MIGRATIONS.filter((m) => m.version <= version)) {
    await c.query(m.sql);
    await c.query('INSERT INTO schema_migrations (version, name) VALUES ($1, $2)', [m.version, m.name]);
    for (const statement of m.concurrently ?? []) await c.query(statement);
  }
}

/**
 * Records migration `version` as applied in the store at `url` (a SQLite file or a PostgreSQL
 * database), beside any process that has it open, as a newer release's `migrate` would.
 */
export async function recordMigration(url: string, version: number): Promise<void> {
  const name = 'from_a_newer_release';
  if (url.startsWith('sqlite:')) {
    const db = new Database(url.slice('sqlite:'.length));
    try {
      db.prepare('INSERT INTO schema_migrations VALUES (?, ?, ?)').run(version, name, '');
    } finally {
      db.close();
    }
    return;
  }
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    await c.query('INSERT INTO schema_migrations (version, name) VALUES ($1, $2)', [version, name]);
  } finally {
    await c.end();
  }
}
