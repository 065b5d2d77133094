import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import { IdSpaceExhaustedError, StoreUnavailableError } from '../../errors.js';
import { MAX_PLANT_ID } from '../../schemas/plant.js';
import type { Scope } from '../../schemas/token.js';
import { pendingMigrations } from '../migrate.js';
import type {
  AttemptRecord,
  CreateResult,
  DeliveryJob,
  EndpointPatch,
  EndpointRecord,
  EventRecord,
  FinishedAttempt,
  IdempotencyClaim,
  IdempotencyRef,
  ListMarks,
  NewEvent,
  NewPlant,
  PageQuery,
  PlantRecord,
  Store,
  TokenRecord,
} from '../store.js';
import { Checkpointer } from './checkpointer.js';
import { eventData, SqliteEvents } from './events.js';
import { SQLITE_MIGRATIONS } from './migrations.js';
import { type Pending, TurnBatch } from './turn-batch.js';

type Outcome = { ok: boolean; value: unknown };

export interface SqliteOptions {
  /** File path, or ':memory:'. */
  path: string;
  /** 'full': a commit survives power loss; 'normal': it survives a process crash. */
  durability: 'full' | 'normal';
}

interface TokenRow {
  id: string;
  user_id: string;
  name: string | null;
  scopes: string;
  hash: string;
  created_at: number;
  expires_at: number | null;
  revoked_at: number | null;
}

interface IdemRow {
  request_hash: string;
  state: 'pending' | 'done';
  status: number | null;
  plant_id: number | null;
  created_at: number;
  locked_at: number;
}

// id, owner, name, tag
type Row = [number, string, string, string | null];
const toPlant = (r: Row): PlantRecord => ({ id: r[0], owner: r[1], name: r[2], tag: r[3] });
/**
 * The same mapping for the rows of a list page, written out a second time on purpose. V8 decides
 * per object literal in the source whether the objects it makes go straight to the old generation
 * (allocation-site pretenuring), and a page's records all outlive the young-generation GCs that
 * run while it is built, so V8 pretenures the literal that makes them. Shared with the one-plant
 * read, every read's record then became old-generation garbage: a major GC every ~1.2 s and read
 * one's p99 at 6-10 ms instead of ~2 ms (docs/benchmarks.md, item 14).
 */
const toPagePlant = (r: Row): PlantRecord => ({ id: r[0], owner: r[1], name: r[2], tag: r[3] });

// Errors that mean "the store cannot serve now", as opposed to a bug in a query.
const UNAVAILABLE = /^SQLITE_(BUSY|LOCKED|IOERR|FULL|CANTOPEN|READONLY|CORRUPT|NOTADB|PROTOCOL|NOMEM)/;

const toToken = (r: TokenRow): TokenRecord => ({
  id: r.id,
  user: r.user_id,
  name: r.name,
  scopes: r.scopes.split(' ').filter(Boolean) as Scope[],
  hash: r.hash,
  createdAt: new Date(r.created_at),
  expiresAt: r.expires_at === null ? null : new Date(r.expires_at),
  revokedAt: r.revoked_at === null ? null : new Date(r.revoked_at),
});

/** The embedded store: one better-sqlite3 connection, WAL, prepared statements. */
export class SqliteStore implements Store {
  readonly engine = 'sqlite';
  private readonly db: Database.Database;
  private checkpointer: Checkpointer | undefined;
  // Prepared on first use: the tables exist only once migrate() has run.
  private stmts: ReturnType<SqliteStore['prepare']> | undefined;

  constructor(opts: SqliteOptions) {
    try {
      if (opts.path !== ':memory:') mkdirSync(dirname(opts.path), { recursive: true });
      this.db = new Database(opts.path);
      this.db.pragma('journal_mode = WAL');
      this.db.pragma(`synchronous = ${opts.durability === 'full' ? 'FULL' : 'NORMAL'}`);
      this.db.pragma('busy_timeout = 5000');
      if (opts.path !== ':memory:') {
        // Checkpoints happen in a worker thread; the automatic one stays as a backstop only.
        this.db.pragma('wal_autocheckpoint = 10000');
        this.checkpointer = new Checkpointer(opts.path);
      }
      this.db.pragma('foreign_keys = ON');
    } catch (err) {
      throw new StoreUnavailableError(
        `cannot open SQLite database ${opts.path}: ${(err as Error).message}`,
        err,
      );
    }
  }

  private get s() {
    this.stmts ??= this.prepare();
    return this.stmts;
  }

  private eventsSql: SqliteEvents | undefined;
  private get e(): SqliteEvents {
    this.eventsSql ??= new SqliteEvents(this.db);
    return this.eventsSql;
  }

  private prepare() {
    const db = this.db;
    return {
      insertPlant: db.prepare<[number | null, string, string, string | null], { id: number }>(
        'INSERT INTO plants (id, owner, name, tag) VALUES (?, ?, ?, ?) ON CONFLICT (id) DO NOTHING RETURNING id',
      ),
      // Rows come back as arrays: far cheaper for the driver to build than objects.
      getPlant: db.prepare<[number], Row>('SELECT id, owner, name, tag FROM plants WHERE id = ?').raw(),
      listAll: db
        .prepare<[number, number], Row>(
          'SELECT id, owner, name, tag FROM plants WHERE id > ? ORDER BY id LIMIT ?',
        )
        .raw(),
      listAllTag: db
        .prepare<[string, number, number], Row>(
          'SELECT id, owner, name, tag FROM plants WHERE tag = ? AND id > ? ORDER BY id LIMIT ?',
        )
        .raw(),
      listOwner: db
        .prepare<[string, number, number], Row>(
          'SELECT id, owner, name, tag FROM plants WHERE owner = ? AND id > ? ORDER BY id LIMIT ?',
        )
        .raw(),
      listOwnerTag: db
        .prepare<[string, string, number, number], Row>(
          'SELECT id, owner, name, tag FROM plants WHERE owner = ? AND tag = ? AND id > ? ORDER BY id LIMIT ?',
        )
        .raw(),
      deleteAny: db
        .prepare<[number], Row>('DELETE FROM plants WHERE id = ? RETURNING id, owner, name, tag')
        .raw(),
      deleteOwned: db
        .prepare<[number, string], Row>(
          'DELETE FROM plants WHERE id = ? AND owner = ? RETURNING id, owner, name, tag',
        )
        .raw(),
      getIdem: db.prepare<[string, string], IdemRow>(
        'SELECT request_hash, state, status, plant_id, created_at, locked_at FROM idempotency_keys WHERE user_id = ? AND key = ?',
      ),
      putIdem: db.prepare<[string, string, string, number, number]>(
        `INSERT OR REPLACE INTO idempotency_keys (user_id, key, request_hash, state, created_at, locked_at)
         VALUES (?, ?, ?, 'pending', ?, ?)`,
      ),
      relockIdem: db.prepare<[number, string, string]>(
        'UPDATE idempotency_keys SET locked_at = ? WHERE user_id = ? AND key = ?',
      ),
      finishIdem: db.prepare<[number, number | null, string, string]>(
        `UPDATE idempotency_keys SET state = 'done', status = ?, plant_id = ? WHERE user_id = ? AND key = ?`,
      ),
      dropIdem: db.prepare<[string, string]>(
        `DELETE FROM idempotency_keys WHERE user_id = ? AND key = ? AND state = 'pending'`,
      ),
      purgeIdem: db.prepare<[number]>('DELETE FROM idempotency_keys WHERE created_at < ?'),
      insertToken: db.prepare<[string, string, string | null, string, string, number, number | null]>(
        `INSERT INTO tokens (id, user_id, name, scopes, hash, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
      ),
      tokenByHash: db.prepare<[string], TokenRow>('SELECT * FROM tokens WHERE hash = ?'),
      tokensAll: db.prepare<[], TokenRow>('SELECT * FROM tokens ORDER BY created_at, id'),
      tokensOfUser: db.prepare<[string], TokenRow>(
        'SELECT * FROM tokens WHERE user_id = ? ORDER BY created_at, id',
      ),
      revokeToken: db.prepare<[number, string]>(
        'UPDATE tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL',
      ),
      ping: db.prepare('SELECT 1'),
      // Both marks in one statement; a scope or tag never written has neither row (0, 0).
      listMarks: db
        .prepare<[string, string, string], [number | null, number | null]>(
          `SELECT (SELECT reorder FROM list_marks WHERE scope = ? AND tag = '*'),
                  (SELECT top FROM list_marks WHERE scope = ? AND tag = ?)`,
        )
        .raw(),
      begin: db.prepare('BEGIN IMMEDIATE'),
      beginRead: db.prepare('BEGIN'),
      commit: db.prepare('COMMIT'),
      rollback: db.prepare('ROLLBACK'),
      savepoint: db.prepare('SAVEPOINT w'),
      release: db.prepare('RELEASE w'),
      rollbackTo: db.prepare('ROLLBACK TO w'),
    };
  }

  // Group commit: writes that arrive while the event loop is busy are committed together in one
  // transaction (one fsync); a failing write fails alone. Every promise settles only after the
  // COMMIT has returned, i.e. after the batch is durable.
  private readonly writes = new TurnBatch((batch) => this.commitBatch(batch));

  private readonly queuedListeners: (() => void)[] = [];

  onDeliveriesQueued(listener: () => void): void {
    this.queuedListeners.push(listener);
  }

  private write<T>(fn: () => T): Promise<T> {
    return this.writes.push(fn);
  }

  private commitBatch(batch: Pending[]): void {
    let outcomes: Outcome[];
    let queued = 0;
    try {
      // Inside the try: preparing the statements fails on a closed database, and every queued
      // write must still be answered.
      const s = this.s;
      s.begin.run();
      // Writes rarely fail, so the batch first runs without a savepoint per write; if one throws,
      // the whole transaction is rolled back and the batch runs again with a savepoint around each
      // write. (A write's function only runs statements and bumps list versions, so running it
      // twice is harmless.)
      let ran = this.runWrites(batch, false);
      if (ran === null) {
        s.rollback.run();
        this.eventsSql?.forget();
        s.begin.run();
        ran = this.runWrites(batch, true) as Outcome[];
      }
      outcomes = ran;
      // The batch's events are written, and their deliveries queued, in its transaction.
      queued = this.eventsSql?.queueDeliveries() ?? 0;
      s.commit.run();
    } catch (err) {
      this.eventsSql?.forget();
      if (this.db.open && this.db.inTransaction) this.s.rollback.run();
      for (const item of batch) item.reject(this.translate(err));
      return;
    }
    if (queued > 0) for (const listener of this.queuedListeners) listener();
    batch.forEach((item, i) => {
      const o = outcomes[i]!;
      if (o.ok) item.resolve(o.value);
      else item.reject(this.translate(o.value));
    });
  }

  /** Runs the writes in the open transaction; without savepoints, null as soon as one throws. */
  private runWrites(batch: Pending[], isolated: boolean): Outcome[] | null {
    const s = this.s;
    const outcomes: Outcome[] = [];
    for (const item of batch) {
      if (!isolated) {
        try {
          outcomes.push({ ok: true, value: item.fn() });
        } catch {
          return null;
        }
        continue;
      }
      // Prepared SAVEPOINT statements: no transaction wrapper built per write.
      s.savepoint.run();
      const mark = this.eventsSql?.mark() ?? 0;
      try {
        outcomes.push({ ok: true, value: item.fn() });
      } catch (err) {
        s.rollbackTo.run();
        this.eventsSql?.rewind(mark);
        outcomes.push({ ok: false, value: err });
      }
      s.release.run();
    }
    return outcomes;
  }

  // Read batching: the reads that arrive in one turn of the event loop run in one read
  // transaction. Each read on its own would take and drop SQLite's shared-memory read lock (two
  // fcntl calls and a stat); a batch does that once. The snapshot is taken after every request in
  // the batch has arrived, so each still sees every write acknowledged before it was sent.
  private readonly reads = new TurnBatch((batch) => this.readBatch(batch));

  private read<T>(fn: () => T): Promise<T> {
    return this.reads.push(fn);
  }

  private readBatch(batch: Pending[]): void {
    let began = false;
    try {
      if (batch.length > 1) {
        this.s.beginRead.run();
        began = true;
      }
    } catch {
      // Without the shared transaction each read still runs (and fails) on its own.
    }
    for (const item of batch) {
      try {
        item.resolve(item.fn());
      } catch (err) {
        item.reject(this.translate(err));
      }
    }
    if (began && this.db.inTransaction) {
      try {
        this.s.commit.run();
      } catch {
        // A read transaction has nothing to lose; the next BEGIN starts afresh.
      }
    }
  }

  // Read in the turn's read batch, so asking costs no lock of its own.
  listMarks(owner: string | null, tag: string | null): Promise<ListMarks> {
    return this.read(() => {
      const scope = owner === null ? '*' : `u:${owner}`;
      const [reorder, top] = this.s.listMarks.get(scope, scope, tag === null ? '*' : `t:${tag}`) as [
        number | null,
        number | null,
      ];
      return { reorder: reorder ?? 0, top: top ?? 0 };
    });
  }

  // Runs `fn`, turning driver failures that mean "cannot serve now" into a 503.
  private run<T>(fn: () => T): Promise<T> {
    try {
      return Promise.resolve(fn());
    } catch (err) {
      return Promise.reject(this.translate(err));
    }
  }

  private translate(err: unknown): unknown {
    const code = (err as { code?: unknown }).code;
    if (typeof code === 'string' && UNAVAILABLE.test(code)) return new StoreUnavailableError(undefined, err);
    if (err instanceof TypeError && /database connection is not open/.test(err.message)) {
      return new StoreUnavailableError(undefined, err);
    }
    return err;
  }

  migrate(): Promise<string[]> {
    return this.run(() => {
      this.db.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
        version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)`);
      // IMMEDIATE takes the write lock first, so two processes migrating at once take turns.
      const apply = this.db.transaction(() => {
        const rows = this.db.prepare('SELECT version FROM schema_migrations').all() as { version: number }[];
        const todo = pendingMigrations(SQLITE_MIGRATIONS, new Set(rows.map((r) => r.version)));
        for (const m of todo) {
          this.db.exec(m.sql);
          this.db
            .prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)')
            .run(m.version, m.name, new Date().toISOString());
        }
        return todo.map((m) => m.name);
      });
      return apply.immediate();
    });
  }

  createPlant(plant: NewPlant, idem?: IdempotencyRef, event?: NewEvent): Promise<CreateResult> {
    return this.write((): CreateResult => {
      const row = this.s.insertPlant.get(plant.id, plant.owner, plant.name, plant.tag);
      if (row && row.id > MAX_PLANT_ID) throw new IdSpaceExhaustedError();
      if (idem) this.s.finishIdem.run(row ? 201 : 409, row ? row.id : null, idem.user, idem.key);
      if (!row) return { exists: true };
      if (event) this.e.record(event, 'plant.created', plant.owner, eventData(row.id, plant.name, plant.tag));
      return { created: { id: row.id, owner: plant.owner, name: plant.name, tag: plant.tag } };
    });
  }

  getPlant(id: number): Promise<PlantRecord | null> {
    return this.read(() => {
      const row = this.s.getPlant.get(id) as Row | undefined;
      return row === undefined ? null : toPlant(row);
    });
  }

  listPlants(q: PageQuery): Promise<PlantRecord[]> {
    return this.read(() => {
      let rows: unknown[];
      if (q.owner === null) {
        rows =
          q.tag === null
            ? this.s.listAll.all(q.afterId, q.limit)
            : this.s.listAllTag.all(q.tag, q.afterId, q.limit);
      } else {
        rows =
          q.tag === null
            ? this.s.listOwner.all(q.owner, q.afterId, q.limit)
            : this.s.listOwnerTag.all(q.owner, q.tag, q.afterId, q.limit);
      }
      return (rows as Row[]).map(toPagePlant);
    });
  }

  deletePlant(id: number, owner: string | null, event?: NewEvent): Promise<boolean> {
    return this.write(() => {
      const gone = owner === null ? this.s.deleteAny.get(id) : this.s.deleteOwned.get(id, owner);
      if (gone === undefined) return false;
      if (event) this.e.record(event, 'plant.deleted', gone[1], eventData(gone[0], gone[2], gone[3]));
      return true;
    });
  }

  insertEndpoint(endpoint: EndpointRecord): Promise<void> {
    return this.write(() => this.e.insertEndpoint(endpoint));
  }

  listEndpoints(owner: string | null): Promise<EndpointRecord[]> {
    return this.run(() => this.e.listEndpoints(owner));
  }

  getEndpoint(id: string): Promise<EndpointRecord | null> {
    return this.run(() => this.e.getEndpoint(id));
  }

  updateEndpoint(id: string, patch: EndpointPatch): Promise<EndpointRecord | null> {
    return this.write(() => this.e.updateEndpoint(id, patch));
  }

  deleteEndpoint(id: string): Promise<boolean> {
    return this.write(() => this.e.deleteEndpoint(id));
  }

  claimDeliveries(q: Parameters<Store['claimDeliveries']>[0]): Promise<DeliveryJob[]> {
    return this.write(() => this.e.claim(q));
  }

  finishDelivery(f: FinishedAttempt): Promise<void> {
    return this.write(() => this.e.finish(f));
  }

  listAttempts(endpointId: string, q: { limit: number; beforeId: string | null }): Promise<AttemptRecord[]> {
    return this.run(() => this.e.listAttempts(endpointId, q));
  }

  recoverDeliveries(endpointId: string, since: Date, now: Date): Promise<number> {
    return this.write(() => this.e.recover(endpointId, since, now));
  }

  eventPosition(id: string): Promise<string | null> {
    return this.run(() => this.e.position(id));
  }

  headPosition(): Promise<string> {
    return this.run(() => this.e.head());
  }

  listEvents(q: { after: string; owner: string | null; limit: number }): Promise<EventRecord[]> {
    return this.run(() => this.e.list(q));
  }

  purgeEvents(before: Date): Promise<number> {
    return this.write(() => this.e.purge(before));
  }

  claimIdempotencyKey(
    ref: IdempotencyRef,
    requestHash: string,
    opts: { now: Date; staleAfterMs: number; retainMs: number },
  ): Promise<IdempotencyClaim> {
    const now = opts.now.getTime();
    return this.write((): IdempotencyClaim => {
      const row = this.s.getIdem.get(ref.user, ref.key);
      if (!row || row.created_at < now - opts.retainMs) {
        this.s.putIdem.run(ref.user, ref.key, requestHash, now, now);
        return { state: 'claimed' };
      }
      if (row.request_hash !== requestHash) return { state: 'mismatch' };
      if (row.state === 'pending') {
        if (row.locked_at >= now - opts.staleAfterMs) return { state: 'in_flight' };
        this.s.relockIdem.run(now, ref.user, ref.key);
        return { state: 'claimed' };
      }
      return { state: 'done', outcome: { status: row.status ?? 500, plantId: row.plant_id } };
    });
  }

  releaseIdempotencyKey(ref: IdempotencyRef): Promise<void> {
    return this.write(() => {
      this.s.dropIdem.run(ref.user, ref.key);
    });
  }

  purgeIdempotencyKeys(before: Date): Promise<number> {
    return this.write(() => this.s.purgeIdem.run(before.getTime()).changes);
  }

  insertToken(t: TokenRecord): Promise<void> {
    return this.write(() => {
      this.s.insertToken.run(
        t.id,
        t.user,
        t.name,
        t.scopes.join(' '),
        t.hash,
        t.createdAt.getTime(),
        t.expiresAt ? t.expiresAt.getTime() : null,
      );
    });
  }

  findTokenByHash(hash: string): Promise<TokenRecord | null> {
    return this.run(() => {
      const row = this.s.tokenByHash.get(hash);
      return row ? toToken(row) : null;
    });
  }

  listTokens(user: string | null): Promise<TokenRecord[]> {
    return this.run(() =>
      (user === null ? this.s.tokensAll.all() : this.s.tokensOfUser.all(user)).map(toToken),
    );
  }

  revokeToken(id: string, at: Date): Promise<boolean> {
    return this.write(() => this.s.revokeToken.run(at.getTime(), id).changes > 0);
  }

  /** SQLite's online backup API: a consistent snapshot, taken while others keep reading and writing. */
  async backup(file: string): Promise<void> {
    try {
      await this.db.backup(file);
    } catch (err) {
      throw this.translate(err);
    }
  }

  ping(): Promise<void> {
    return this.run(() => {
      this.s.ping.get();
    });
  }

  async close(): Promise<void> {
    if (this.db.open) {
      this.writes.drainNow();
      this.reads.drainNow();
    }
    await this.checkpointer?.stop();
    this.checkpointer = undefined;
    if (this.db.open) this.db.close();
  }
}
