import { randomBytes } from 'node:crypto';
import { setImmediate as nextTurn } from 'node:timers/promises';
import Database from 'better-sqlite3';
import { roleOf, type Scope } from '../../access/policy.js';
import { StoreUnavailableError } from '../../errors.js';
import { described, type PendingMigration, pendingMigrations } from '../migrate.js';
import type {
  ActivityQuery,
  Actor,
  AttemptRecord,
  BatchCreateResult,
  Change,
  Claim,
  ClaimQuery,
  CreateResult,
  DeleteResult,
  EndpointPatch,
  EndpointRecord,
  EventRead,
  EventRecord,
  ExportQuery,
  FeedLogRead,
  FeedStart,
  FeedStartLog,
  FinishedAttempt,
  GardenChange,
  GardenRecord,
  HistoryQuery,
  IdempotencyClaim,
  IdempotencyRef,
  LeaseRenewal,
  ListMarks,
  LogProgress,
  MemberPut,
  MemberRecord,
  Membership,
  NewEvent,
  NewGarden,
  NewPlant,
  PagePlant,
  PageQuery,
  QueuedLeaseRenewal,
  RestoreResult,
  Role,
  Store,
  TokenPageQuery,
  TokenRecord,
  TokenRefusal,
  Trashing,
  TrashQuery,
  TrashRecord,
  UpdateResult,
  VersionedPlant,
} from '../store.js';
import { type Pending, TurnBatch } from '../turn-batch.js';
import { Checkpointer } from './checkpointer.js';
import { SqliteEvents } from './events.js';
import { GardenIdLists } from './garden-ids.js';
import { type GardenRow, toGarden } from './gardens.js';
import { LocalMarks } from './local-marks.js';
import { SQLITE_MIGRATIONS } from './migrations.js';
import { planStatementsOnce } from './plan-once.js';
import { inReadTransaction, SqlitePlantReads } from './plant-reads.js';
import { SearchMerger } from './search-merge.js';
import { SqliteTrashReads } from './trash.js';
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
  /**
   * The most plant ids of one set of gardens kept in memory for pages across them (default
   * 100,000; 0 keeps none: every such page reads the store).
   */
  keptIdsPerList?: number;
  /**
   * Milliseconds without a plant write after which the search index is merged into one segment
   * (search-merge.ts; default 2,000). Not for ':memory:', whose writes hold the event loop.
   */
  searchMergeQuietMs?: number;
  /**
   * How the search index is merged while writes go on (search-merge.ts): 'paced' (the default), by
   * the writer thread in small steps between commits, FTS5's automerge off; 'automerge', by FTS5
   * inside the commits that cross its mark (kept for comparing the two in benchmarks). An inline
   * writer always leaves it to FTS5.
   */
  searchMerge?: 'paced' | 'automerge';
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
  last_used_at: number | null;
}

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
  lastUsedAt: r.last_used_at === null ? null : new Date(r.last_used_at),
});

/**
 * Plants an export reads at a time. At 1,000 a page lived long enough, while the client took its
 * lines, to outlast young-generation collections: exporting 1,000,000 plants on a fresh server
 * grew its RSS from 163 to 312 MB (V8's old generation filling with pages already sent), where
 * pages of 200 keep it at 185 MB, as fast (1.0–1.1 s; .tmp measurement on the benchmark's store).
 */
const EXPORT_PAGE = 200;

// Enough microtasks for a list's chain of awaits from one read to its next; a few more batches at most.
const READ_FOLLOW_UPS = { batches: 4, hops: 8 };

/** The embedded store: one better-sqlite3 connection, WAL, prepared statements. */
/** How often another process's commits are looked for, while someone listens for events. */
const EVENTS_POLL_MS = 100;

export class SqliteStore implements Store {
  readonly engine = 'sqlite';
  private readonly db: Database.Database;
  private checkpointer: Checkpointer | undefined;
  private readonly writer: Writer;
  private readonly marks: LocalMarks;
  private readonly plants: SqlitePlantReads;
  private readonly path: string;
  // Prepared on first use: the tables exist only once migrate() has run.
  private stmts: ReturnType<SqliteStore['prepare']> | undefined;

  constructor(opts: SqliteOptions) {
    this.path = opts.path;
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
    this.plants = new SqlitePlantReads(
      this.db,
      new GardenIdLists(opts.keptIdsPerList),
      this.marks,
      (g, tag) => this.marksNow(g, tag),
    );
    // ':memory:' is private to its connection, so its writes stay on it.
    this.writer =
      opts.path === ':memory:' || opts.writer === 'inline'
        ? new InlineWriter(this.db, me, translate)
        : new ThreadWriter(opts.path, opts.durability, me, translate, opts.searchMerge !== 'automerge');
    if (opts.path !== ':memory:')
      this.merger = new SearchMerger(() => this.writer.write('mergeSearch'), opts.searchMergeQuietMs ?? 2000);
  }

  /** Merges the search index while plant writes are quiet (none for ':memory:'). */
  private readonly merger: SearchMerger | undefined;

  /** Rows search has read from its index so far (SqlitePlantReads.searchRows): what a search's work follows. */
  get searchRowsRead(): number {
    return this.plants.searchRows;
  }

  private get s() {
    this.stmts ??= this.prepare();
    return this.stmts;
  }

  private trashSql: SqliteTrashReads | undefined;
  private get trash(): SqliteTrashReads {
    this.trashSql ??= new SqliteTrashReads(this.db);
    return this.trashSql;
  }

  private eventsSql: SqliteEvents | undefined;
  private get e(): SqliteEvents {
    this.eventsSql ??= new SqliteEvents(this.db);
    return this.eventsSql;
  }

  private prepare() {
    const db = this.db;
    return {
      memberships: db
        .prepare<[string], [string, Role]>('SELECT garden_id, role FROM garden_members WHERE user_id = ?')
        .raw(),
      membersClock: db.prepare<[], number>('SELECT members FROM write_clock').pluck(),
      membersOf: db
        .prepare<[string], [string, string]>(
          'SELECT garden_id, user_id FROM garden_members WHERE garden_id IN (SELECT value FROM json_each(?))',
        )
        .raw(),
      gardensOf: db.prepare<[string], GardenRow & { role: Role }>(
        `SELECT g.*, m.role FROM garden_members m JOIN gardens g ON g.id = m.garden_id WHERE m.user_id = ?
         ORDER BY g.home_user IS NOT m.user_id, g.seq`,
      ),
      gardenFor: db.prepare<[string, string], GardenRow & { role: Role | null }>(
        `SELECT g.*, m.role FROM gardens g LEFT JOIN garden_members m ON m.garden_id = g.id AND m.user_id = ?
         WHERE g.id = ?`,
      ),
      members: db.prepare<[string], { user_id: string; role: Role; added_at: number }>(
        'SELECT user_id, role, added_at FROM garden_members WHERE garden_id = ? ORDER BY added_at, user_id',
      ),
      tokenByHash: db.prepare<[string], TokenRow>('SELECT * FROM tokens WHERE hash = ?'),
      tokenById: db.prepare<[string], TokenRow>('SELECT * FROM tokens WHERE id = ?'),
      activeTokens: db
        .prepare<[string, number], string>(
          `SELECT id FROM tokens WHERE id IN (SELECT value FROM json_each(?))
           AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?)`,
        )
        .pluck(),
      // Newest first by the order of creation (seq), from before the token a page ended with.
      tokensPage: db.prepare<[string | null, number], TokenRow>(
        `SELECT * FROM tokens WHERE seq < coalesce((SELECT seq FROM tokens WHERE id = ?), 9007199254740991)
         ORDER BY seq DESC LIMIT ?`,
      ),
      tokensOfUserPage: db.prepare<[string, string | null, number], TokenRow>(
        `SELECT * FROM tokens WHERE user_id = ?
           AND seq < coalesce((SELECT seq FROM tokens WHERE id = ?), 9007199254740991)
         ORDER BY seq DESC LIMIT ?`,
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

  // Who listens for events (onEvents), and the log's head as the poll for other processes' commits
  // last saw it.
  private readonly eventListeners = new Set<() => void>();
  private eventsPoll: NodeJS.Timeout | undefined;
  private seenHead = '';
  private writerHooked = false;

  onEvents(listener: () => void): () => void {
    if (!this.writerHooked) {
      this.writerHooked = true;
      this.writer.onQueued(() => this.eventsCommitted());
    }
    if (this.eventListeners.size === 0) {
      // This process's commits call at once (the writer says when a batch wrote events); another
      // process's show as a new head of the log, looked at every 100 ms (one read of the rowid
      // b-tree's last page) while anyone listens.
      this.eventsPoll ??= setInterval(() => {
        if (this.eventListeners.size === 0 || !this.db.open) return;
        void this.headPosition().then(
          (head) => {
            if (head === this.seenHead) return;
            this.seenHead = head;
            this.eventsCommitted();
          },
          () => {},
        );
      }, EVENTS_POLL_MS);
      this.eventsPoll.unref();
    }
    this.eventListeners.add(listener);
    return () => {
      this.eventListeners.delete(listener);
    };
  }

  private eventsCommitted(): void {
    for (const listener of this.eventListeners) listener();
  }

  // Read batching: the reads that arrive in one turn of the event loop run in one read
  // transaction. Each read on its own would take and drop SQLite's shared-memory read lock (two
  // fcntl calls and a stat); a batch does that once. The snapshot is taken after every request in
  // the batch has arrived, so each still sees every write acknowledged before it was sent.
  // A request's next read (a list's marks after its gardens, its page after the marks) is read in
  // the same turn, not a turn later (TurnBatch's follow-ups).
  private readonly reads = new TurnBatch((batch) => this.readBatch(batch), READ_FOLLOW_UPS);

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
  listMarks(gardens: string[] | null, tag: string | null): Promise<ListMarks> {
    return this.read(() => this.marksNow(gardens, tag));
  }

  // The marks as of this read batch's snapshot (the clock is looked at once per batch).
  private marksNow(gardens: readonly string[] | null, tag: string | null): ListMarks {
    if (this.clockTurn !== this.turn) {
      const [n, writer, runStart, raw] = this.s.clock.get() as [number, string, number, number];
      this.marks.observe({ n, writer, runStart, raw });
      this.clockTurn = this.turn;
    }
    return this.marks.get(gardens, tag);
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
          m.fill?.(this.db);
          if (m.after) this.db.exec(m.after);
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
    // A store opened with its index in many segments has them merged at its first quiet spell.
    this.merger?.wrote();
    return applied;
  }

  // The marks move before the write is answered, so no page kept afterwards misses it.
  async createPlant(plant: NewPlant, idem?: IdempotencyRef, event?: NewEvent): Promise<CreateResult> {
    const r = await this.writer.write('createPlant', plant, idem, event);
    if ('ok' in r) {
      this.marks.created(plant.garden, plant.tag, r.ok.id, plant.id === null);
      this.merger?.wrote();
    }
    return r;
  }

  async createPlants(
    plants: NewPlant[],
    idem?: IdempotencyRef,
    event?: NewEvent,
  ): Promise<BatchCreateResult> {
    const r = await this.writer.write('createPlants', plants, idem, event);
    if (!('made' in r)) return r;
    const { ids, version } = r.made;
    const made = plants.map(({ owner, garden, name, tag }, i) => ({
      id: ids[i]!,
      owner,
      garden,
      name,
      tag,
      version: version + i,
    }));
    // As createPlant: the marks move before the batch is answered.
    made.forEach((p, i) => {
      this.marks.created(p.garden, p.tag, p.id, plants[i]!.id === null);
    });
    this.merger?.wrote();
    return { ok: made };
  }

  /**
   * Every page of the export from one read transaction: on a connection of its own (read-only), so
   * that the serving connection's reads go on meanwhile, yielding to the event loop between pages;
   * ':memory:' has only the one connection, so its pages are read at once, in one read batch.
   */
  async *exportPlants(q: ExportQuery): AsyncIterable<PagePlant[]> {
    const pageOf = (reads: SqlitePlantReads, afterId: number) =>
      reads.list({ ...q, afterId, limit: EXPORT_PAGE, withVersion: true });
    if (this.path === ':memory:') {
      yield* await this.read(() => {
        const pages: PagePlant[][] = [];
        for (
          let rows = pageOf(this.plants, 0);
          rows.length > 0;
          rows = pageOf(this.plants, rows.at(-1)!.id)
        ) {
          pages.push(rows);
          if (rows.length < EXPORT_PAGE) break;
        }
        return pages;
      });
      return;
    }
    let db: Database.Database;
    try {
      db = new Database(this.path, { readonly: true, fileMustExist: true });
      planStatementsOnce(db);
      db.pragma('busy_timeout = 5000');
    } catch (err) {
      throw this.translate(err);
    }
    try {
      // Never keeps ids nor looks at marks: every page is read from this connection's snapshot.
      const reads = new SqlitePlantReads(db, new GardenIdLists(0), this.marks, () => ({
        reorder: 0,
        top: 0,
      }));
      db.exec('BEGIN');
      for (let afterId = 0; ; ) {
        let rows: PagePlant[];
        try {
          rows = pageOf(reads, afterId);
        } catch (err) {
          throw this.translate(err);
        }
        if (rows.length > 0) yield rows;
        if (rows.length < EXPORT_PAGE) return;
        afterId = rows[rows.length - 1]!.id;
        // Each page is read synchronously: the event loop takes its turn between two of them, so
        // that the other requests (and twenty exports at once) go on while an export is read.
        await nextTurn();
      }
    } finally {
      db.close();
    }
  }

  getPlant(id: number): Promise<VersionedPlant | null> {
    return this.read(() => this.plants.get(id));
  }

  plantFor(id: number, user: string | null): Promise<{ plant: VersionedPlant; role: Role } | null> {
    return this.read(() => this.plants.plantFor(id, user));
  }

  listPlants(q: PageQuery): Promise<PagePlant[]> {
    return this.read(() => this.plants.list(q));
  }

  // Users' memberships as last read, while write_clock.members (moved by triggers on every
  // membership change, by any process) stands still; its value as this store last saw it, and the
  // read batch in which it looked.
  private readonly memberCache = new Map<string, Membership[]>();
  private membersSeen = -1;
  private membersTurn = -1;

  /** The user's memberships: read once, then kept while no membership anywhere has changed. */
  memberships(user: string): Promise<Membership[]> {
    return this.read(() => this.membershipsNow(user));
  }

  // The memberships as of this read batch's snapshot (the clock is looked at once per batch).
  private membershipsNow(user: string): Membership[] {
    if (this.membersTurn !== this.turn) {
      // Once per read batch: every request of the batch is answered with what the clock says now.
      const rev = this.s.membersClock.get()!;
      if (rev !== this.membersSeen) {
        this.memberCache.clear();
        this.membersSeen = rev;
      }
      this.membersTurn = this.turn;
    }
    let kept = this.memberCache.get(user);
    if (kept === undefined) {
      kept = this.s.memberships.all(user).map((r) => ({ garden: r[0], role: r[1] }));
      if (this.memberCache.size >= 100_000) this.memberCache.clear();
      this.memberCache.set(user, kept);
    }
    return kept;
  }

  gardensOf(user: string): Promise<(GardenRecord & { role: Role })[]> {
    return this.read(() => this.s.gardensOf.all(user).map((r) => ({ ...toGarden(r), role: r.role })));
  }

  gardenFor(id: string, user: string | null): Promise<{ garden: GardenRecord; role: Role } | null> {
    return this.read(() => {
      const r = this.s.gardenFor.get(user ?? '', id);
      if (r === undefined) return null;
      const role = roleOf(user, r.role);
      return role === null ? null : { garden: toGarden(r), role };
    });
  }

  membersOf(gardens: string[]): Promise<Map<string, string[]>> {
    return this.read(() => {
      const members = new Map<string, string[]>();
      if (gardens.length === 0) return members;
      for (const [garden, user] of this.s.membersOf.all(JSON.stringify(gardens))) {
        const users = members.get(garden);
        if (users === undefined) members.set(garden, [user]);
        else users.push(user);
      }
      return members;
    });
  }

  listMembers(id: string): Promise<MemberRecord[]> {
    return this.read(() =>
      this.s.members.all(id).map((r) => ({ user: r.user_id, role: r.role, addedAt: new Date(r.added_at) })),
    );
  }

  homeGarden(user: string, make: { id: string; name: string; at: Date }): Promise<GardenRecord> {
    return this.writer.write('homeGarden', user, make);
  }

  createGarden(g: NewGarden): Promise<GardenChange<GardenRecord>> {
    return this.writer.write('createGarden', g);
  }

  renameGarden(id: string, actor: Actor, name: string): Promise<GardenChange<GardenRecord>> {
    return this.writer.write('renameGarden', id, actor, name);
  }

  deleteGarden(id: string, actor: Actor, event?: NewEvent): Promise<GardenChange<true>> {
    return this.writer.write('deleteGarden', id, actor, event);
  }

  putMember(...a: Parameters<Store['putMember']>): Promise<MemberPut> {
    return this.writer.write('putMember', ...a);
  }

  removeMember(...a: Parameters<Store['removeMember']>): Promise<GardenChange<true>> {
    return this.writer.write('removeMember', ...a);
  }

  async updatePlant(...change: Parameters<Store['updatePlant']>): Promise<UpdateResult> {
    const r = await this.writer.write('updatePlant', ...change);
    // A change may move a plant between tag filters or change what any page of its garden shows.
    if ('ok' in r && r.ok.changed) {
      this.marks.deleted(r.ok.plant.garden);
      this.merger?.wrote();
    }
    return r;
  }

  async deletePlant(
    id: number,
    actor: Actor,
    event?: NewEvent,
    ifVersions?: number[] | null,
    trash?: Trashing | null,
  ): Promise<DeleteResult> {
    const r = await this.writer.write('deletePlant', id, actor, event, ifVersions, trash);
    if ('refused' in r) return r;
    this.marks.deleted(r.ok);
    this.merger?.wrote();
    return { ok: true };
  }

  listTrash(q: TrashQuery): Promise<TrashRecord[]> {
    return this.read(() => this.trash.list(q));
  }

  async restorePlant(
    id: number,
    actor: Actor,
    idem?: IdempotencyRef,
    event?: NewEvent,
  ): Promise<RestoreResult> {
    const r = await this.writer.write('restorePlant', id, actor, idem, event);
    if ('ok' in r) {
      // Back under an id that may lie below the newest, as a client-chosen id's create.
      this.marks.created(r.ok.garden, r.ok.tag, r.ok.id, false);
      this.merger?.wrote();
    }
    return r;
  }

  async purgeTrashed(
    id: number,
    actor: Actor,
    event?: NewEvent,
  ): Promise<Change<true, 'missing' | 'forbidden'>> {
    const r = await this.writer.write('purgeTrashed', id, actor, event);
    return 'refused' in r ? r : { ok: true };
  }

  purgeExpiredTrash(now: Date, limit: number): Promise<number> {
    return this.writer.write('purgeExpiredTrash', now, limit);
  }

  insertEndpoint(endpoint: EndpointRecord): Promise<Change<true, 'too_many_endpoints'>> {
    return this.writer.write('insertEndpoint', endpoint);
  }

  listEndpoints(owner: string | null): Promise<EndpointRecord[]> {
    return this.run(() => this.e.listEndpoints(owner));
  }

  getEndpoint(id: string): Promise<EndpointRecord | null> {
    return this.run(() => this.e.getEndpoint(id));
  }

  updateEndpoint(id: string, patch: EndpointPatch): Promise<Change<EndpointRecord, 'missing'>> {
    return this.writer.write('updateEndpoint', id, patch);
  }

  deleteEndpoint(id: string): Promise<Change<true, 'missing'>> {
    return this.writer.write('deleteEndpoint', id);
  }

  claimDeliveries(q: ClaimQuery): Promise<Claim> {
    return this.writer.write('claimDeliveries', q);
  }

  renewLeases(q: LeaseRenewal): Promise<string[]> {
    if (q.endpoints.length === 0) return Promise.resolve([]);
    return this.writer.write('renewLeases', q);
  }

  renewQueuedLeases(q: QueuedLeaseRenewal): Promise<string[]> {
    if (q.deliveries.length === 0) return Promise.resolve([]);
    return this.writer.write('renewQueuedLeases', q);
  }

  finishDeliveries(f: FinishedAttempt[], progress: LogProgress[] = []): Promise<void> {
    if (f.length === 0 && progress.length === 0) return Promise.resolve();
    return this.writer.write('finishDeliveries', f, progress);
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

  readEvents(q: { after: string; gardens: string[] | null; limit: number }): Promise<EventRead> {
    return this.run(() => this.e.list(q));
  }

  purgedUpTo(): Promise<string> {
    return this.run(() => this.e.purgedUpTo());
  }

  // The head first, then the rest, in one read transaction (one snapshot, and SQLite's read lock
  // taken once): every event up to the head is reflected in the memberships read with it.
  feedStart(user: string | null, since: string | null, log?: FeedStartLog): Promise<FeedStart> {
    return this.read(() =>
      this.inRead(() => {
        const head = this.e.head();
        const purgedUpTo = this.e.purgedUpTo();
        if (user === null) return { head, purgedUpTo, gardens: null, moved: [] };
        const gardens = this.membershipsNow(user).map((m) => m.garden);
        const moved = this.e.memberGardens(user, since ?? head);
        const start: FeedStart = { head, purgedUpTo, gardens, moved };
        if (log !== undefined && since !== null) {
          const scope = log.garden !== null ? [log.garden] : [...gardens, ...moved];
          start.log = this.e.feed(
            { after: since, gardens: scope, limit: log.limit, tailAfter: head, tailLimit: log.tailLimit },
            Number(head),
          );
        }
        return start;
      }),
    );
  }

  feedLog(q: {
    after: string;
    gardens: string[] | null;
    limit: number;
    tailAfter: string;
    tailLimit: number;
  }): Promise<FeedLogRead> {
    return this.read(() => this.inRead(() => this.e.feed(q)));
  }

  // `fn` in a read transaction: the read batch's when it has one, else one of its own.
  private inRead<T>(fn: () => T): T {
    return inReadTransaction(this.db, this.s.beginRead, this.s.commit, fn);
  }

  memberEventGardens(user: string, after: string): Promise<string[]> {
    return this.run(() => this.e.memberGardens(user, after));
  }

  // One writer at a time: every committed event is one a position may pass.
  committedEvents(q: { after: string; gardens: string[] | null; limit: number }): Promise<EventRecord[]> {
    return this.run(() => this.e.list(q).events);
  }

  deletedPlantIds(q: { garden: string; after: string; afterId: number; limit: number }): Promise<number[]> {
    return this.run(() => this.e.deletedIds(q));
  }

  plantsByIds(ids: number[]): Promise<PagePlant[]> {
    return this.read(() => this.plants.byIds(ids));
  }

  plantHistory(q: HistoryQuery): Promise<EventRecord[]> {
    return this.run(() => this.e.history(q));
  }

  gardenActivity(q: ActivityQuery): Promise<EventRecord[]> {
    return this.run(() => this.e.activity(q));
  }

  // Positions are the log's seq numbers, written as decimal text.
  comparePositions(a: string, b: string): number {
    return Number(a) - Number(b);
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

  findToken(id: string): Promise<TokenRecord | null> {
    return this.run(() => {
      const row = this.s.tokenById.get(id);
      return row ? toToken(row) : null;
    });
  }

  pageTokens(q: TokenPageQuery): Promise<TokenRecord[]> {
    const after = q.before?.id ?? null;
    return this.run(() =>
      (q.user === null
        ? this.s.tokensPage.all(after, q.limit)
        : this.s.tokensOfUserPage.all(q.user, after, q.limit)
      ).map(toToken),
    );
  }

  revokeToken(id: string, at: Date): Promise<Change<true, TokenRefusal>> {
    return this.writer.write('revokeToken', id, at.getTime());
  }

  activeTokens(ids: string[], now: Date): Promise<string[]> {
    if (ids.length === 0) return Promise.resolve([]);
    return this.read(() => this.s.activeTokens.all(JSON.stringify(ids), now.getTime()));
  }

  touchTokens(ids: string[], minute: Date): Promise<number> {
    return ids.length === 0 ? Promise.resolve(0) : this.writer.write('touchTokens', ids, minute.getTime());
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

  async migrationsPending(): Promise<PendingMigration[]> {
    const applied = await this.appliedVersions();
    return pendingMigrations(SQLITE_MIGRATIONS, new Set(applied)).map(described);
  }

  async schemaVersion(): Promise<number> {
    return Math.max(0, ...(await this.appliedVersions()));
  }

  // Without creating schema_migrations: a store never migrated has applied nothing.
  private appliedVersions(): Promise<number[]> {
    return this.run(() => {
      const table = this.db
        .prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'")
        .get();
      if (!table) return [];
      return this.db.prepare('SELECT version FROM schema_migrations').pluck().all() as number[];
    });
  }

  async close(): Promise<void> {
    clearInterval(this.eventsPoll);
    this.merger?.close();
    // Writes first: every queued write is committed and answered before the connections close.
    await this.writer.close();
    if (this.db.open) this.reads.drainNow();
    await this.checkpointer?.stop();
    this.checkpointer = undefined;
    if (this.db.open) this.db.close();
  }
}
