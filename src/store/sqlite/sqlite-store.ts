import { randomBytes } from 'node:crypto';
import type Database from 'better-sqlite3';
import { StoreUnavailableError } from '../../errors.js';
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
  PlantPatch,
  PlantRecord,
  Store,
  TokenRecord,
  UpdateResult,
  VersionedPlant,
} from '../store.js';
import { type Pending, TurnBatch } from '../turn-batch.js';
import { Checkpointer } from './checkpointer.js';
import { SqliteEvents } from './events.js';
import { LocalMarks } from './local-marks.js';
import { SQLITE_MIGRATIONS } from './migrations.js';
import { InlineWriter, openConnection, ThreadWriter, type Writer } from './writer.js';

export interface SqliteOptions {
  /** File path, or ':memory:'. */
  path: string;
  /** 'full': a commit survives power loss; 'normal': it survives a process crash. */
  durability: 'full' | 'normal';
  /**
   * Where writes are committed: 'thread' (a file's default), a thread of their own, so that no
   * commit holds the event loop; 'inline', on the serving thread ('\:memory:' always is).
   */
  writer?: 'thread' | 'inline';
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

// id, owner, name, tag (and version, for one plant)
type Row = [number, string, string, string | null];
type VersionedRow = [number, string, string, string | null, number];
const toPlant = (r: VersionedRow): VersionedPlant => ({
  id: r[0],
  owner: r[1],
  name: r[2],
  tag: r[3],
  version: r[4],
});
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
  private readonly writer: Writer;
  private readonly marks: LocalMarks;
  // Prepared on first use: the tables exist only once migrate() has run.
  private stmts: ReturnType<SqliteStore['prepare']> | undefined;

  constructor(opts: SqliteOptions) {
    try {
      this.db = openConnection(opts.path, opts.durability);
      if (opts.path !== ':memory:') this.checkpointer = new Checkpointer(opts.path);
    } catch (err) {
      throw new StoreUnavailableError(
        `cannot open SQLite database ${opts.path}: ${(err as Error).message}`,
        err,
      );
    }
    const translate = (err: unknown) => this.translate(err);
    // Names this store's writer in the write clock, so that its marks can tell its commits from others'.
    const me = randomBytes(8).toString('hex');
    this.marks = new LocalMarks(me);
    // ':memory:' is private to its connection, so its writes stay on it.
    this.writer =
      opts.path === ':memory:' || opts.writer === 'inline'
        ? new InlineWriter(this.db, me, translate)
        : new ThreadWriter(opts.path, opts.durability, me, translate);
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
      // Rows come back as arrays: far cheaper for the driver to build than objects.
      getPlant: db
        .prepare<[number], VersionedRow>('SELECT id, owner, name, tag, version FROM plants WHERE id = ?')
        .raw(),
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
      // The same pages with each plant's version (include=version): not in the list indexes, so
      // each row is looked up in the table; only lists that ask for versions pay for it.
      listAllV: db
        .prepare<[number, number], VersionedRow>(
          'SELECT id, owner, name, tag, version FROM plants WHERE id > ? ORDER BY id LIMIT ?',
        )
        .raw(),
      listAllTagV: db
        .prepare<[string, number, number], VersionedRow>(
          'SELECT id, owner, name, tag, version FROM plants WHERE tag = ? AND id > ? ORDER BY id LIMIT ?',
        )
        .raw(),
      listOwnerV: db
        .prepare<[string, number, number], VersionedRow>(
          'SELECT id, owner, name, tag, version FROM plants WHERE owner = ? AND id > ? ORDER BY id LIMIT ?',
        )
        .raw(),
      listOwnerTagV: db
        .prepare<[string, string, number, number], VersionedRow>(
          'SELECT id, owner, name, tag, version FROM plants WHERE owner = ? AND tag = ? AND id > ? ORDER BY id LIMIT ?',
        )
        .raw(),
      tokenByHash: db.prepare<[string], TokenRow>('SELECT * FROM tokens WHERE hash = ?'),
      tokensAll: db.prepare<[], TokenRow>('SELECT * FROM tokens ORDER BY created_at, id'),
      tokensOfUser: db.prepare<[string], TokenRow>(
        'SELECT * FROM tokens WHERE user_id = ? ORDER BY created_at, id',
      ),
      ping: db.prepare('SELECT 1'),
      clock: db
        .prepare<[], [number, string, number, number]>(
          'SELECT n, writer, run_start, rows - clocked FROM write_clock',
        )
        .raw(),
      beginRead: db.prepare('BEGIN'),
      commit: db.prepare('COMMIT'),
    };
  }

  onDeliveriesQueued(listener: () => void): void {
    this.writer.onQueued(listener);
  }

  // Read batching: the reads that arrive in one turn of the event loop run in one read
  // transaction. Each read on its own would take and drop SQLite's shared-memory read lock (two
  // fcntl calls and a stat); a batch does that once. The snapshot is taken after every request in
  // the batch has arrived, so each still sees every write acknowledged before it was sent.
  private readonly reads = new TurnBatch((batch) => this.readBatch(batch));

  // Counts read batches: the clock is read once in each (every read of a batch sees one snapshot).
  private turn = 0;
  private clockTurn = -1;

  private read<T>(fn: () => T): Promise<T> {
    return this.reads.push(fn);
  }

  private readBatch(batch: Pending[]): void {
    this.turn++;
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

  // The clock is read in the turn's read batch, so asking costs no lock of its own.
  listMarks(owner: string | null, tag: string | null): Promise<ListMarks> {
    return this.read(() => {
      if (this.clockTurn !== this.turn) {
        const [n, writer, runStart, raw] = this.s.clock.get() as [number, string, number, number];
        this.marks.observe({ n, writer, runStart, raw });
        this.clockTurn = this.turn;
      }
      return this.marks.get(owner, tag);
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

  async migrate(): Promise<string[]> {
    const applied = await this.run(() => {
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
    // Serving starts after migrating: by then the writer takes writes at once.
    await this.writer.ready;
    return applied;
  }

  // The marks move before the write is answered, so no page kept afterwards misses it.
  async createPlant(plant: NewPlant, idem?: IdempotencyRef, event?: NewEvent): Promise<CreateResult> {
    const r = await this.writer.write('createPlant', plant, idem, event);
    if ('created' in r) this.marks.created(plant.owner, plant.tag, r.created.id, plant.id === null);
    return r;
  }

  getPlant(id: number): Promise<VersionedPlant | null> {
    return this.read(() => {
      const row = this.s.getPlant.get(id) as VersionedRow | undefined;
      return row === undefined ? null : toPlant(row);
    });
  }

  listPlants(q: PageQuery): Promise<(PlantRecord & { version?: number })[]> {
    if (q.withVersion) return this.read(() => this.listVersioned(q));
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

  async updatePlant(
    id: number,
    owner: string | null,
    patch: PlantPatch,
    ifVersions: number[] | null,
    idem?: IdempotencyRef,
    event?: NewEvent,
  ): Promise<UpdateResult> {
    const r = await this.writer.write('updatePlant', id, owner, patch, ifVersions, idem, event);
    // A change may move a plant between tag filters or change what any page of its owner shows.
    if ('changed' in r && r.changed) this.marks.deleted(r.updated.owner);
    return r;
  }

  private listVersioned(q: PageQuery): VersionedPlant[] {
    let rows: VersionedRow[];
    if (q.owner === null) {
      rows =
        q.tag === null
          ? this.s.listAllV.all(q.afterId, q.limit)
          : this.s.listAllTagV.all(q.tag, q.afterId, q.limit);
    } else {
      rows =
        q.tag === null
          ? this.s.listOwnerV.all(q.owner, q.afterId, q.limit)
          : this.s.listOwnerTagV.all(q.owner, q.tag, q.afterId, q.limit);
    }
    return rows.map(toPlant);
  }

  async deletePlant(
    id: number,
    owner: string | null,
    event?: NewEvent,
    ifVersions?: number[] | null,
  ): Promise<boolean | 'mismatch'> {
    const gone = await this.writer.write('deletePlant', id, owner, event, ifVersions);
    if (gone === 'mismatch') return gone;
    if (gone !== null) this.marks.deleted(gone);
    return gone !== null;
  }

  insertEndpoint(endpoint: EndpointRecord): Promise<void> {
    return this.writer.write('insertEndpoint', endpoint);
  }

  listEndpoints(owner: string | null): Promise<EndpointRecord[]> {
    return this.run(() => this.e.listEndpoints(owner));
  }

  getEndpoint(id: string): Promise<EndpointRecord | null> {
    return this.run(() => this.e.getEndpoint(id));
  }

  updateEndpoint(id: string, patch: EndpointPatch): Promise<EndpointRecord | null> {
    return this.writer.write('updateEndpoint', id, patch);
  }

  deleteEndpoint(id: string): Promise<boolean> {
    return this.writer.write('deleteEndpoint', id);
  }

  claimDeliveries(q: Parameters<Store['claimDeliveries']>[0]): Promise<DeliveryJob[]> {
    return this.writer.write('claimDeliveries', q);
  }

  finishDelivery(f: FinishedAttempt): Promise<void> {
    return this.writer.write('finishDelivery', f);
  }

  listAttempts(endpointId: string, q: { limit: number; beforeId: string | null }): Promise<AttemptRecord[]> {
    return this.run(() => this.e.listAttempts(endpointId, q));
  }

  recoverDeliveries(endpointId: string, since: Date, now: Date): Promise<number> {
    return this.writer.write('recoverDeliveries', endpointId, since, now);
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
    return this.writer.write('purgeEvents', before);
  }

  claimIdempotencyKey(
    ref: IdempotencyRef,
    requestHash: string,
    opts: { now: Date; staleAfterMs: number; retainMs: number },
  ): Promise<IdempotencyClaim> {
    return this.writer.write(
      'claimIdempotencyKey',
      ref,
      requestHash,
      opts.now.getTime(),
      opts.staleAfterMs,
      opts.retainMs,
    );
  }

  releaseIdempotencyKey(ref: IdempotencyRef): Promise<void> {
    return this.writer.write('releaseIdempotencyKey', ref);
  }

  purgeIdempotencyKeys(before: Date): Promise<number> {
    return this.writer.write('purgeIdempotencyKeys', before.getTime());
  }

  insertToken(t: TokenRecord): Promise<void> {
    return this.writer.write('insertToken', t);
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
    return this.writer.write('revokeToken', id, at.getTime());
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
    // Writes first: every queued write is committed and answered before the connections close.
    await this.writer.close();
    if (this.db.open) this.reads.drainNow();
    await this.checkpointer?.stop();
    this.checkpointer = undefined;
    if (this.db.open) this.db.close();
  }
}
