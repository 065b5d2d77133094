import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { StoreUnavailableError } from '../../errors.js';
import type { Scope } from '../../schemas/token.js';
import { tracing } from '../../telemetry/tracing.js';
import { maskOf } from '../event-mask.js';
import { concurrentIndexName, described, type PendingMigration, pendingMigrations } from '../migrate.js';
import { recordedOutcome } from '../plant-changes.js';
import type {
  ActivityPageQuery,
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
  EventType,
  ExportQuery,
  FeedEvent,
  FeedLogRead,
  FeedStart,
  FeedStartLog,
  FinishedAttempt,
  GardenChange,
  GardenJsonPage,
  GardenRecord,
  HistoryPageQuery,
  HistoryQuery,
  IdempotencyClaim,
  IdempotencyRef,
  JsonPage,
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
  PoolStats,
  QueuedLeaseRenewal,
  RestoreResult,
  Role,
  Store,
  TokenPageQuery,
  TokenRecord,
  TokenRefusal,
  Trashing,
  TrashPageQuery,
  TrashQuery,
  TrashRecord,
  UpdateResult,
  VersionedPlant,
} from '../store.js';
import { MAX_ENDPOINTS_PER_USER, refused } from '../store.js';
import { CallBatch } from './call-batch.js';
import {
  type AttemptRow,
  type ClaimRow,
  claimEndpoint,
  type EndpointRow,
  EVENT_QUERIES,
  type EventRow,
  type PageRow,
  parsePosition,
  position,
  toAttempt,
  toEndpoint,
  toEvent,
  toPageEvent,
} from './events.js';
import { GARDEN_QUERIES, PgGardens } from './gardens.js';
import {
  connectToSuitable,
  HostChooser,
  isMultiHost,
  multiHostPool,
  NET_ERRORS,
  parsePgUrl,
} from './hosts.js';
import { POSTGRES_MIGRATIONS } from './migrations.js';
import { EventNotices } from './notices.js';
import { PLANT_QUERIES, versionedGardensPage } from './plant-queries.js';
import { batchable, IN_FLIGHT, PgPlantReads, perCall } from './plant-reads.js';
import { PgPlantWrites } from './plant-writes.js';
import {
  SEARCH_QUERIES,
  SearchWalk,
  searchPage,
  type WalkArgs,
  type WalkRow,
  walkArgs,
  walkCall,
  walksCall,
} from './search.js';
import { PgTrash, TRASH_QUERIES } from './trash.js';

/** A statement's span attributes: the engine and the statement's name (db.query.summary). */
const statementAttributes = (name: string) => ({ 'db.system.name': 'postgresql', 'db.query.summary': name });

export interface PgOptions {
  url: string;
  /** Most connections this process holds. */
  poolSize: number;
  /**
   * Every statement of this process planned with bitmap scans off (a `deliver` process, which asks
   * little but claims and finishes): a claim's reads of the log then walk their index in order
   * and stop at their LIMIT, whatever statistics the planner has (claimDeliveries).
   */
  orderedScans?: boolean;
}

/**
 * Runs one `CREATE INDEX CONCURRENTLY IF NOT EXISTS` of a migration (src/store/migrate.ts), on a
 * connection in no transaction. A valid index of that name is left as it is; one a failed or
 * interrupted build left INVALID (IF NOT EXISTS would keep it, unused and still written) is
 * dropped, CONCURRENTLY too, and built again.
 */
async function buildConcurrently(client: pg.PoolClient, migration: string, statement: string): Promise<void> {
  const name = concurrentIndexName(statement);
  if (!name)
    throw new Error(
      `${migration}: a concurrently statement must be CREATE INDEX CONCURRENTLY IF NOT EXISTS name ON …: ${statement.trim()}`,
    );
  const found = await client.query<{ valid: boolean }>(
    'SELECT i.indisvalid AS valid FROM pg_index i WHERE i.indexrelid = to_regclass($1)',
    [name],
  );
  if (found.rows[0]?.valid) return;
  // A build reads the whole table (twice) and may take far longer than the pool's query timeout.
  const long = { query_timeout: BUILD_TIMEOUT_MS };
  if (found.rows.length > 0)
    await client.query({ text: `DROP INDEX CONCURRENTLY IF EXISTS ${name}`, ...long });
  await client.query({ text: statement, ...long });
}

/** How long one concurrent index build may take before the client gives up on it: a day. */
const BUILD_TIMEOUT_MS = 24 * 3600_000;

// Arbitrary but fixed key for the advisory lock that serializes migrations (plant-writes.ts and
// gardens.ts hold the others: 727_002 and 727_003).
const MIGRATION_LOCK = 727_001;

/** Plants an export reads at a time. */
const EXPORT_PAGE = 1000;

/** Type parsers: bigint (int8) as a number (the contract caps ids at 2^53−1; every counter is below it). */
export const types = {
  getTypeParser: (oid: number, format?: string) =>
    oid === 20 ? (v: string) => Number(v) : pg.types.getTypeParser(oid, format as 'text'),
};

/** feedLog's events, column by column (FEED_EVENTS_JSON); each column null when there are none. */
export interface FeedEventColumns {
  x: string[] | null;
  s: number[] | null;
  t: EventType[] | null;
  o: string[] | null;
  g: string[] | null;
  i: (number | null)[] | null;
}
/** feedLog's plants, column by column. */
interface FeedPlantColumns {
  i: number[] | null;
  g: string[] | null;
  n: string[] | null;
  t: (string | null)[] | null;
  v: number[] | null;
}
/** feedLog's answer, one JSON document: the snapshot's xmin, its events (e), the committed events (c), the plants (p). */
interface FeedLogJson {
  xmin: string;
  e: FeedEventColumns;
  c: FeedEventColumns;
  p: FeedPlantColumns;
}

/** What feedQuiet read for one user: the snapshot's head, the horizon, the log's last event, the user's gardens. */
interface QuietRead {
  xmin: string;
  purgedUpTo: string;
  last: [string, number] | null;
  gardens: string[];
}

/** The position the log is purged up to, from events_horizon's row (none: nothing purged). */
const horizon = (xid: string | null, seq: number | null) =>
  xid === null ? position('0', 0) : position(xid, seq!);

/** How xid.seq `a` and `b` compare in the log (below 0: a first). */
const byPosition = (ax: string, as: number, bx: string, bs: number) => compareDigits(ax, bx) || as - bs;

/** The events of feedLog's columns, in log order (the statement's order; sorted if it was not). */
export function feedEvents(cols: FeedEventColumns): FeedEvent[] {
  const { x, s, t, o, g, i } = cols;
  if (x === null) return [];
  const out: FeedEvent[] = new Array(x.length);
  let ordered = true;
  for (let k = 0; k < x.length; k++) {
    if (k > 0 && byPosition(x[k - 1]!, s![k - 1]!, x[k]!, s![k]!) > 0) ordered = false;
    out[k] = {
      position: position(x[k]!, s![k]!),
      type: t![k]!,
      owner: o![k]!,
      garden: g![k]!,
      plant: i![k]!,
    };
  }
  if (!ordered) {
    const order = out.map((_, k) => k).sort((a, b) => byPosition(x[a]!, s![a]!, x[b]!, s![b]!));
    return order.map((k) => out[k]!);
  }
  return out;
}

/** What feedLog read (its JSON), after `since`. */
function feedLogRead(read: FeedLogJson, limit: number, since: string): FeedLogRead {
  const events = feedEvents(read.e);
  // The committed events are read only when the events fell short of the limit.
  const committed = events.length < limit ? feedEvents(read.c) : null;
  const { i, g, n, t, v } = read.p;
  const plants: PagePlant[] = [];
  for (let k = 0; k < (i?.length ?? 0); k++)
    plants.push({ id: i![k]!, garden: g![k]!, name: n![k]!, tag: t![k]!, version: v![k]! });
  if (events.length === limit) return { events, position: events.at(-1)!.position, committed, plants };
  // As readEvents: everything before the snapshot's xmin has been looked at.
  const [xid] = parsePosition(since);
  return {
    events,
    position: compareDigits(read.xmin, xid) > 0 ? position(read.xmin, 0) : since,
    committed,
    plants,
  };
}

/**
 * -1, 0 or 1 as two decimal digit strings compare as numbers (leading zeros allowed): a delta
 * compares each of its events' positions, and two BigInts a position cost more than the read.
 */
export function compareDigits(a: string, b: string): number {
  let i = 0;
  let j = 0;
  while (i < a.length - 1 && a.charCodeAt(i) === 48) i++;
  while (j < b.length - 1 && b.charCodeAt(j) === 48) j++;
  if (a.length - i !== b.length - j) return a.length - i < b.length - j ? -1 : 1;
  for (; i < a.length; i++, j++) {
    const d = a.charCodeAt(i) - b.charCodeAt(j);
    if (d !== 0) return d < 0 ? -1 : 1;
  }
  return 0;
}

/** With several hosts: how long one connection attempt may take before the next host is tried. */
const HOST_CONNECT_MS = 1_000;
/** With several hosts: how long a request waits for a host that suits before its 503. */
const FAILOVER_WAIT_MS = 3_000;

// SQLSTATE classes and driver errors that mean "cannot serve now", as opposed to a bug in a query.
function isUnavailable(err: unknown): boolean {
  const code = (err as { code?: unknown }).code;
  if (typeof code !== 'string') {
    return err instanceof Error && /timeout|terminat|Connection|after calling end/i.test(err.message);
  }
  return (
    // 25006: a write on a host that turned read-only (a demoted primary, contract 6).
    /^(08|53|57P0|58|25006)/.test(code) || NET_ERRORS.includes(code)
  );
}

interface TokenRow {
  id: string;
  user_id: string;
  name: string | null;
  scopes: string;
  hash: string;
  created_at: Date;
  expires_at: Date | null;
  revoked_at: Date | null;
  last_used_at: Date | null;
}

const toToken = (r: TokenRow): TokenRecord => ({
  id: r.id,
  user: r.user_id,
  name: r.name,
  scopes: r.scopes.split(' ').filter(Boolean) as Scope[],
  hash: r.hash,
  createdAt: r.created_at,
  expiresAt: r.expires_at,
  revokedAt: r.revoked_at,
  lastUsedAt: r.last_used_at,
});

const Q = {
  ...PLANT_QUERIES,
  ...SEARCH_QUERIES,
  ...GARDEN_QUERIES,
  ...TRASH_QUERIES,
  // Claims a new key, an expired one, or an abandoned claim of the same request, in one statement.
  claimIdem: `INSERT INTO idempotency_keys (user_id, key, request_hash, state, created_at, locked_at)
    VALUES ($1, $2, $3, 'pending', $4, $4)
    ON CONFLICT (user_id, key) DO UPDATE SET request_hash = EXCLUDED.request_hash, state = 'pending',
      status = NULL, plant_id = NULL, response = NULL, created_at = EXCLUDED.created_at, locked_at = EXCLUDED.locked_at
    WHERE idempotency_keys.created_at < $5
       OR (idempotency_keys.state = 'pending' AND idempotency_keys.locked_at < $6
           AND idempotency_keys.request_hash = EXCLUDED.request_hash)
    RETURNING 1`,
  getIdem:
    'SELECT request_hash, state, status, plant_id, response FROM idempotency_keys WHERE user_id = $1 AND key = $2',
  finishIdem: `UPDATE idempotency_keys SET state = 'done', status = $1, plant_id = $2, response = $5
    WHERE user_id = $3 AND key = $4`,
  dropIdem: `DELETE FROM idempotency_keys WHERE user_id = $1 AND key = $2 AND state = 'pending'`,
  purgeIdem: 'DELETE FROM idempotency_keys WHERE created_at < $1',
  insertToken: `INSERT INTO tokens (id, user_id, name, scopes, hash, created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
  tokenByHash: 'SELECT * FROM tokens WHERE hash = $1',
  tokenById: 'SELECT * FROM tokens WHERE id = $1',
  activeTokens: `SELECT id FROM tokens WHERE id = ANY($1::text[])
    AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > $2)`,
  // Newest first by the order of creation (seq), from before the token a page ended with.
  tokensPage: `SELECT * FROM tokens
    WHERE seq < coalesce((SELECT seq FROM tokens WHERE id = $1), 9223372036854775807)
    ORDER BY seq DESC LIMIT $2`,
  tokensOfUserPage: `SELECT * FROM tokens WHERE user_id = $1
      AND seq < coalesce((SELECT seq FROM tokens WHERE id = $2), 9223372036854775807)
    ORDER BY seq DESC LIMIT $3`,
  revokeToken: 'UPDATE tokens SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL',
  // One statement for a batch; a row already at this minute (another instance was first) is left.
  touchTokens: `UPDATE tokens SET last_used_at = $2 WHERE id = ANY($1::text[])
    AND (last_used_at IS NULL OR last_used_at < $2)`,
  ...EVENT_QUERIES,
} as const;

type QueryName = keyof typeof Q;

/** The scale-out store: a bounded node-postgres pool, named (prepared) statements. */
// Where a history or activity page starts: before the seq of a position of an earlier page
// ("xid.seq"; a bare seq too), or from the newest.
const beforeSeq = (p: string | null): string =>
  p === null ? '9223372036854775807' : p.slice(p.lastIndexOf('.') + 1) || '0';

/** How long an answer of anyEnabled stands (PgStore.anyEndpointEnabled). */
const ENDPOINTS_CHECK_MS = 1000;

export class PgStore implements Store {
  readonly engine = 'postgres';
  private readonly pool: pg.Pool;
  /**
   * A few connections of their own for the change feed's statements (feedDelta, feedStart, the
   * feed's log reads), on which a prepared statement always runs its generic plan
   * (plan_cache_mode). PostgreSQL otherwise plans these statements afresh on every call: their
   * generic plans' estimates, made without the values, look dearer than each custom plan, though
   * they run as fast. On 1,000,000 plants and events an empty delta's statement took 0.36 ms
   * with the generic plan against 0.92 ms planned each time, a delta of 100 changes 1.40 against
   * 2.82 ms (docs/sync.md). Not the main pool's setting: the statements planned for their values
   * on purpose (search, a deliverer's claims) would then run generic plans too.
   */
  private readonly feedPool: pg.Pool;
  /**
   * Whether the last delta found the log quiet since its position (nothing after it) and no event
   * has been written or notified here since: the next delta then asks feedQuiet first, which
   * answers an empty delta in about half the statement time (pgbench: 60 against 108 µs a call; a
   * third of PostgreSQL's CPU a request under load), and feedDelta only when it is not
   * quiet after all. Only a guess of which to ask first: every answer is what the statement it
   * ran read (another instance's write that nobody here heard of costs one feedQuiet more).
   */
  private feedQuiet = false;
  /**
   * feedQuiet for the deltas that ask in the same turn of the event loop, one statement for them
   * all (CallBatch; as many statements out at once as the feed pool has connections, the deltas
   * that ask meanwhile wait and go together in the next). Each statement is sent after every
   * delta of its batch asked, so it reads whatever was committed before any of them. Under 20
   * connections of empty deltas (bench/changes.ts, 1,000,000 plants) the service answered 23,881–
   * 25,556 against 11,723–12,296 a second, its CPU 35–37 against 77–82 µs a request and
   * PostgreSQL's 4–5 against 38 (docs/sync.md).
   */
  private readonly quietProbes: CallBatch<string, QuietRead>;
  /** How many deltas began with each statement (tests read it: which path an answer took). */
  readonly feedReads = { quiet: 0, delta: 0 };
  /** How many feedQuiet statements ran (tests read it: how the quiet probes were batched). */
  quietStatements = 0;

  /** Whether an endpoint was enabled when last read, and until when that answer stands (anyEndpointEnabled). */
  private endpointsSeen: { any: boolean; until: number } | null = null;
  /** How many endpoint writes this process has made (anyEndpointEnabled: a read that overlapped one is not kept). */
  private endpointWrites = 0;

  // Tells this process's own NOTIFYs from other processes'.
  private readonly instance = randomBytes(8).toString('hex');

  constructor(opts: PgOptions) {
    const common = {
      max: opts.poolSize,
      // Connections once opened are kept, as a fixed-size pool (HikariCP's advice for a spike's
      // sake): a connection closed while idle came back under the next load as a new backend that
      // had to prepare each statement again and load its catalog caches: a server back from more
      // than 30 s without requests (bench/mixed.ts stops it while the other variants run) had
      // every answer over 25 ms of a fixed-rate run in its first 1.5 s, p99 8.1x the ceiling's
      // against 3.4x with the connections kept (one run each; the second had the endpoint check of
      // claimDeliveries cached too). A connection that breaks still leaves the pool.
      min: opts.poolSize,
      idleTimeoutMillis: 30_000,
      // A connection that goes silent (a cut network) fails its query instead of hanging it.
      query_timeout: 10_000,
      keepAlive: true,
      types,
      // No JIT: every statement here reads a page or a few rows, but a planner's estimate grows
      // with the table (a page's LIMIT is a parameter of the batched list statement), and on
      // 10,000,000 plants the list's generic plan crossed jit_above_cost — 15-58 ms of compiling
      // a page that runs in 0.2 ms (docs/benchmarks.md, "How cost grows with size"). A deliver
      // process also plans its claims along the index (bitmap scans off; docs/benchmarks.md,
      // "Where a PostgreSQL drain's time goes").
      options: opts.orderedScans ? '-c jit=off -c enable_bitmapscan=off' : '-c jit=off',
    };
    const feedSize = Math.max(2, Math.ceil(opts.poolSize / 4));
    const feed = {
      ...common,
      max: feedSize,
      min: feedSize,
      options: `${common.options} -c plan_cache_mode=force_generic_plan`,
    };
    if (isMultiHost(opts.url)) {
      // Several hosts (contract 6): a dead one costs at most a second before the next is tried.
      const chooser = new HostChooser(parsePgUrl(opts.url));
      const base = { keepAlive: true, connectionTimeoutMillis: HOST_CONNECT_MS };
      this.events = new EventNotices(
        () => connectToSuitable(chooser, base),
        this.instance,
        () => this.eventsCommitted(),
      );
      this.pool = multiHostPool(
        chooser,
        { ...common, connectionTimeoutMillis: HOST_CONNECT_MS },
        FAILOVER_WAIT_MS,
      );
      this.feedPool = multiHostPool(
        chooser,
        { ...feed, connectionTimeoutMillis: HOST_CONNECT_MS },
        FAILOVER_WAIT_MS,
      );
    } else {
      const open = async () => {
        const c = new pg.Client({
          connectionString: opts.url,
          keepAlive: true,
          connectionTimeoutMillis: 3_000,
        });
        c.on('error', () => {});
        try {
          await c.connect();
        } catch (err) {
          await c.end().catch(() => {});
          throw err;
        }
        return c;
      };
      this.events = new EventNotices(open, this.instance, () => this.eventsCommitted());
      this.pool = new pg.Pool({ ...common, connectionString: opts.url, connectionTimeoutMillis: 3_000 });
      this.feedPool = new pg.Pool({ ...feed, connectionString: opts.url, connectionTimeoutMillis: 3_000 });
    }
    this.quietProbes = new CallBatch(async (users) => {
      this.quietStatements++;
      const row = (
        await this.q<{
          xmin: string;
          purged_xid: string | null;
          purged_seq: number | null;
          last_xid: string | null;
          last_seq: number | null;
          gardens: Record<string, string[]>;
        }>('feedQuiet', [[...new Set(users)]], this.feedPool)
      ).rows[0]!;
      const purgedUpTo = horizon(row.purged_xid, row.purged_seq);
      const last: [string, number] | null = row.last_xid === null ? null : [row.last_xid, row.last_seq!];
      return users.map((u) => ({ xmin: row.xmin, purgedUpTo, last, gardens: row.gardens[u] ?? [] }));
    }, feed.max);
    for (const pool of [this.pool, this.feedPool]) {
      // An idle connection that breaks (server restart, network cut) must not crash the process;
      // the pool drops it and the next query opens a fresh one.
      pool.on('error', () => {});
      // A connection that dies while lent out between two statements of a transaction (every
      // backend of a primary killed says so at once) emits 'error' with no query to fail: without a
      // listener that would end the process. Its next statement fails instead, and the connection
      // is released as broken.
      pool.on('connect', (client) => client.on('error', () => {}));
    }
  }

  // What the code of each concern borrows: the prepared statements and transactions.
  private readonly db = {
    q: <R extends pg.QueryResultRow>(name: QueryName, values: unknown[], client?: pg.PoolClient) =>
      this.q<R>(name, values, client),
    tx: <T>(fn: (c: pg.PoolClient) => Promise<T>) => this.tx(fn),
  };
  private readonly reads = new PgPlantReads(this.db);
  private readonly writes = new PgPlantWrites(this.db);
  private readonly gardens = new PgGardens(this.db);
  private readonly trash = new PgTrash(this.db, (write, event) => this.told(write, event));

  // One prepared statement per name, per connection; failures that mean "unavailable" become 503s.
  private q<R extends pg.QueryResultRow>(
    name: QueryName,
    values: unknown[],
    client: pg.Pool | pg.PoolClient = this.pool,
  ): Promise<pg.QueryResult<R>> {
    return this.statement(name, () => client.query<R>({ name, text: Q[name], values }));
  }

  // A statement planned afresh for its values each time (unnamed, not prepared): for one whose plan
  // depends on them so much that PostgreSQL's generic plan for a prepared statement would be far
  // slower than the planning it saves.
  private planned<R extends pg.QueryResultRow>(
    name: QueryName,
    values: unknown[],
  ): Promise<pg.QueryResult<R>> {
    return this.statement(name, () => this.pool.query<R>({ text: Q[name], values }));
  }

  // A statement's run, its failures translated. Traces on (contract 14.1): a client span under the
  // store's operation, by the statement's name, never its values; off, nothing of a span is built.
  private statement<R extends pg.QueryResultRow>(
    name: QueryName,
    run: () => Promise<pg.QueryResult<R>>,
  ): Promise<pg.QueryResult<R>> {
    const work = async () => {
      try {
        return await run();
      } catch (err) {
        throw this.translate(err);
      }
    };
    const traces = tracing();
    return traces ? traces.childSpan(`postgresql ${name}`, statementAttributes(name), work, true) : work();
  }

  private translate(err: unknown): unknown {
    return isUnavailable(err) ? new StoreUnavailableError(undefined, err) : err;
  }

  private async connect(): Promise<pg.PoolClient> {
    try {
      return await this.pool.connect();
    } catch (err) {
      throw this.translate(err);
    }
  }

  private async tx<T>(fn: (c: pg.PoolClient) => Promise<T>): Promise<T> {
    const client = await this.connect();
    let broken = false;
    let committing = false;
    try {
      await client.query('BEGIN');
      const out = await fn(client);
      committing = true;
      await client.query('COMMIT');
      return out;
    } catch (err) {
      // A connection lost (or a host turned read-only) goes, rather than back to the pool.
      if (isUnavailable(err)) broken = true;
      await client.query('ROLLBACK').catch(() => {
        broken = true;
      });
      if (committing && isUnavailable(err)) {
        // The COMMIT was sent and no answer came: it may or may not have taken effect. Logged as
        // such with the 503; a retry with the request's Idempotency-Key is safe either way.
        throw new StoreUnavailableError(
          undefined,
          new Error(
            `the outcome of a COMMIT is unknown (${(err as Error).message}): it may have been applied; a retry with the same Idempotency-Key is safe`,
            { cause: err },
          ),
        );
      }
      throw this.translate(err);
    } finally {
      client.release(broken);
    }
  }

  async migrate(): Promise<string[]> {
    const client = await this.connect();
    try {
      // Several instances starting at once take turns here; the later ones find nothing to do.
      // Asked for again and again rather than waited for inside one statement: a waiting
      // pg_advisory_lock holds a snapshot, and CREATE INDEX CONCURRENTLY (run below, under this
      // lock) waits for every older snapshot to end: the two would deadlock.
      for (let wait = 50; ; wait = Math.min(wait * 2, 1000)) {
        const { rows } = await client.query<{ got: boolean }>('SELECT pg_try_advisory_lock($1) AS got', [
          MIGRATION_LOCK,
        ]);
        if (rows[0]?.got) break;
        await new Promise((resume) => setTimeout(resume, wait));
      }
      await client.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
        version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`);
      const { rows } = await client.query<{ version: number }>('SELECT version FROM schema_migrations');
      const todo = pendingMigrations(POSTGRES_MIGRATIONS, new Set(rows.map((r) => r.version)));
      for (const m of todo) {
        await client.query('BEGIN');
        try {
          await client.query(m.sql);
          await m.fill?.(client);
          if (m.after) await client.query(m.after);
          await client.query('INSERT INTO schema_migrations (version, name) VALUES ($1, $2)', [
            m.version,
            m.name,
          ]);
          await client.query('COMMIT');
        } catch (err) {
          await client.query('ROLLBACK');
          throw err;
        }
      }
      // Outside any transaction, for every migration applied (the ones just now and earlier ones
      // whose build was interrupted): indexes built without blocking writers.
      for (const m of POSTGRES_MIGRATIONS)
        for (const statement of m.concurrently ?? []) await buildConcurrently(client, m.name, statement);
      return todo.map((m) => m.name);
    } catch (err) {
      throw this.translate(err);
    } finally {
      await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch(() => {});
      client.release();
    }
  }

  createPlant(plant: NewPlant, idem?: IdempotencyRef, event?: NewEvent): Promise<CreateResult> {
    return this.told(this.writes.create(plant, idem, event), event);
  }

  getPlant(id: number): Promise<VersionedPlant | null> {
    return this.reads.get(id);
  }

  plantFor(id: number, user: string | null): Promise<{ plant: VersionedPlant; role: Role } | null> {
    return this.reads.plantFor(id, user);
  }

  listPlants(q: PageQuery): Promise<PagePlant[]> {
    if (q.terms !== undefined) return this.searchPlants({ ...q, terms: q.terms });
    return this.reads.list(q);
  }

  /**
   * How many search pages the walks answered whole, how many searchPage finished or answered, how
   * many walks went in a statement with others (searchWalks), and how many later rounds of a walk
   * ran (SearchWalk).
   */
  readonly searchReads = { walk: 0, planned: 0, batched: 0, again: 0 };

  // The walks of the searches that arrive in one turn, in one statement (as the list's pages:
  // plant-reads.ts), two statements under way at most; those with a tag in one of their own.
  private readonly walks = new CallBatch((ws: WalkArgs[]) => this.walkBatch(ws), IN_FLIGHT);
  private readonly taggedWalks = new CallBatch((ws: WalkArgs[]) => this.walkBatch(ws), IN_FLIGHT);

  private async walkBatch(ws: WalkArgs[]): Promise<WalkRow[][]> {
    if (ws.length === 1) return [await this.walkAlone(ws[0]!)];
    this.searchReads.batched += ws.length;
    const { rows } = await this.q<WalkRow & { n: number }>(...walksCall(ws));
    return perCall(rows, ws.length, (r): WalkRow => r);
  }

  // One walk in its statement with one row (search.ts, walkCall), its rows in id order as perCall
  // puts a batch's.
  private async walkAlone(w: WalkArgs, client: pg.Pool | pg.PoolClient = this.pool): Promise<WalkRow[]> {
    const { rows } = await this.q<WalkRow & { n: number }>(...walkCall(w), client);
    return perCall(rows, 1, (r): WalkRow => r)[0]!;
  }

  // A page of search's matches (search.ts): the walk's prepared statement where it applies, a few
  // rounds of it where the first leaves the page short (SearchWalk), then the statement planned for
  // the terms from where the walks stopped, or for the whole page. On `client` (an export's
  // transaction) every statement reads one snapshot; on the pool each its own, each walk after
  // where the one before stopped and the planned statement after the last walk's stop, so no
  // plant is shown twice.
  private async searchPlants(
    q: PageQuery & { terms: string[] },
    client: pg.Pool | pg.PoolClient = this.pool,
  ): Promise<PagePlant[]> {
    if (q.gardens?.length === 0) return [];
    const first = walkArgs(q);
    let page: PagePlant[] = [];
    let from = q.afterId;
    if (first !== null) {
      const walk = new SearchWalk(first);
      // On the pool, with the other searches of the turn (those with a tag with the others with one:
      // search.ts, searchWalks); alone in a transaction (an export's), or with values the batch's
      // arrays or PostgreSQL's text would refuse, so that those fail alone. Later rounds alone.
      const alone = client !== this.pool || !batchable(q);
      walk.take(
        alone
          ? await this.walkAlone(first, client)
          : await (first.tag === null ? this.walks : this.taggedWalks).push(first),
      );
      let whole = walk.page();
      while (whole === null) {
        const more = walk.next();
        if (more === null) break;
        this.searchReads.again++;
        walk.take(await this.walkAlone(more, client));
        whole = walk.page();
      }
      if (whole !== null) {
        this.searchReads.walk++;
        return whole;
      }
      ({ page, from } = walk.rest());
    }
    this.searchReads.planned++;
    try {
      const rest = await client.query<PagePlant>(
        searchPage({ ...q, afterId: from, limit: q.limit - page.length }),
      );
      return page.length === 0 ? rest.rows : page.concat(rest.rows);
    } catch (err) {
      throw this.translate(err);
    }
  }

  createPlants(plants: NewPlant[], idem?: IdempotencyRef, event?: NewEvent): Promise<BatchCreateResult> {
    return this.told(this.writes.createMany(plants, idem, event), event);
  }

  /**
   * Every page of the export from one REPEATABLE READ, READ ONLY transaction on a connection of its
   * own (from the pool), held until the last page has been taken (or the iteration ends early).
   */
  async *exportPlants(q: ExportQuery): AsyncIterable<PagePlant[]> {
    if (q.gardens?.length === 0) return;
    const client = await this.connect();
    let open = false;
    let broken = false;
    try {
      await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
      open = true;
      for (let afterId = 0; ; ) {
        const got = await this.exportPage(client, { ...q, afterId, limit: EXPORT_PAGE, withVersion: true });
        // The rows moved out of the driver's array into one of ours, leaving its array empty. Left
        // in it, they were kept past young-generation collections (reached from driver objects
        // already promoted, it seems): about 45 % of what a page allocated was promoted, and
        // exporting 1,000,000 plants filled the old generation to V8's limit before a full
        // collection (RSS 135 -> 240 MB, against 172 MB for 250,000). Emptied, almost nothing is.
        const rows = got.splice(0, got.length);
        if (rows.length > 0) yield rows;
        if (rows.length < EXPORT_PAGE) break;
        afterId = rows[rows.length - 1]!.id;
      }
      open = false;
      await client.query('COMMIT');
    } catch (err) {
      throw this.translate(err);
    } finally {
      if (open) await client.query('ROLLBACK').catch(() => (broken = true));
      client.release(broken);
    }
  }

  // One page of an export, on the export's connection: the list's statements (with versions) or search's.
  private async exportPage(client: pg.PoolClient, q: PageQuery): Promise<PagePlant[]> {
    if (q.terms !== undefined) return this.searchPlants({ ...q, terms: q.terms }, client);
    const gardens = q.gardens === null ? null : [...new Set(q.gardens)];
    if (gardens !== null && gardens.length === 0) return [];
    const [name, values]: [QueryName, unknown[]] =
      gardens === null
        ? q.tag === null
          ? ['listAllV', [q.afterId, q.limit]]
          : ['listAllTagV', [q.tag, q.afterId, q.limit]]
        : versionedGardensPage(gardens, q.tag, q.afterId, q.limit);
    return (await this.q<PagePlant>(name, values, client)).rows;
  }

  listMarks(gardens: string[] | null, tag: string | null): Promise<ListMarks | null> {
    return this.reads.listMarks(gardens, tag);
  }

  scopeMarks(user: string, tag: string | null): Promise<{ memberships: Membership[]; marks: ListMarks }> {
    return this.reads.scopeMarks(user, tag);
  }

  updatePlant(...change: Parameters<Store['updatePlant']>): Promise<UpdateResult> {
    return this.told(this.writes.update(...change), change[5]);
  }

  deletePlant(
    id: number,
    actor: Actor,
    event?: NewEvent,
    ifVersions?: number[] | null,
    trash?: Trashing | null,
  ): Promise<DeleteResult> {
    return this.told(this.writes.delete(id, actor, event, ifVersions, trash), event);
  }

  listTrash(q: TrashQuery): Promise<TrashRecord[]> {
    return this.trash.list(q);
  }

  listTrashJson(q: TrashPageQuery): Promise<GardenJsonPage> {
    return this.trash.listJson(q);
  }

  restorePlant(id: number, actor: Actor, idem?: IdempotencyRef, event?: NewEvent): Promise<RestoreResult> {
    return this.trash.restore(id, actor, idem, event);
  }

  purgeTrashed(id: number, actor: Actor, event?: NewEvent): Promise<Change<true, 'missing' | 'forbidden'>> {
    return this.trash.purge(id, actor, event);
  }

  async purgeExpiredTrash(now: Date, limit: number): Promise<number> {
    const n = await this.trash.purgeExpired(now, limit);
    // Its events are in the log: this process's listeners look, other processes are told.
    if (n > 0) await this.told(Promise.resolve(), { at: now });
    return n;
  }

  // Who listens for events (onEvents); the connection that LISTENs for other processes' NOTIFYs.
  private readonly eventListeners = new Set<() => void>();
  private readonly events: EventNotices;

  onEvents(listener: () => void): () => void {
    this.eventListeners.add(listener);
    this.events.listen();
    return () => {
      this.eventListeners.delete(listener);
    };
  }

  private eventsCommitted(): void {
    this.feedQuiet = false;
    for (const listener of this.eventListeners) listener();
  }

  // A write with an event has settled (committed, or refused and rolled back: a listener that finds
  // nothing new costs one read): this process's listeners look at once, other processes are told.
  private told<T>(write: Promise<T>, event: NewEvent | undefined): Promise<T> {
    if (event === undefined) return write;
    return write.finally(() => {
      this.eventsCommitted();
      this.events.notify();
    });
  }

  // After a commit that queued deliveries (recover): this process's dispatcher looks at once.
  private queued(n: number): void {
    if (n > 0) this.eventsCommitted();
  }

  homeGarden(user: string, make: { id: string; name: string; at: Date }): Promise<GardenRecord> {
    return this.gardens.home(user, make);
  }

  gardensOf(user: string): Promise<(GardenRecord & { role: Role })[]> {
    return this.gardens.gardensOf(user);
  }

  memberships(user: string): Promise<Membership[]> {
    return this.gardens.memberships(user);
  }

  membersOf(gardens: string[]): Promise<Map<string, string[]>> {
    return this.gardens.membersOf(gardens);
  }

  gardenFor(id: string, user: string | null): Promise<{ garden: GardenRecord; role: Role } | null> {
    return this.gardens.gardenFor(id, user);
  }

  createGarden(g: NewGarden): Promise<GardenChange<GardenRecord>> {
    return this.gardens.createGarden(g);
  }

  renameGarden(id: string, actor: Actor, name: string): Promise<GardenChange<GardenRecord>> {
    return this.gardens.renameGarden(id, actor, name);
  }

  deleteGarden(id: string, actor: Actor, event?: NewEvent): Promise<GardenChange<true>> {
    return this.told(this.gardens.deleteGarden(id, actor, event), event);
  }

  listMembers(id: string): Promise<MemberRecord[]> {
    return this.gardens.listMembers(id);
  }

  putMember(...a: Parameters<Store['putMember']>): Promise<MemberPut> {
    return this.told(this.gardens.putMember(...a), a[5]);
  }

  removeMember(...a: Parameters<Store['removeMember']>): Promise<GardenChange<true>> {
    return this.told(this.gardens.removeMember(...a), a[3]);
  }

  insertEndpoint(e: EndpointRecord): Promise<Change<true, 'too_many_endpoints'>> {
    return this.endpointWrite(() =>
      this.tx(async (c) => {
        await this.q('lockOwner', [e.owner], c);
        const inserted = await this.q(
          'insertEndpoint',
          [
            e.id,
            e.owner,
            e.admin,
            e.url,
            maskOf(e.events),
            e.description,
            e.secret,
            e.previousSecret,
            e.previousSecretUntil,
            e.status,
            e.disabledReason,
            e.createdAt,
            e.lastSuccessAt,
            e.adminTokenId,
            e.adminUntil,
            MAX_ENDPOINTS_PER_USER,
          ],
          c,
        );
        return (inserted.rowCount ?? 0) > 0 ? { ok: true } : refused('too_many_endpoints');
      }),
    );
  }

  async listEndpoints(owner: string | null): Promise<EndpointRecord[]> {
    const r =
      owner === null
        ? await this.q<EndpointRow>('endpointsAll', [])
        : await this.q<EndpointRow>('endpointsOf', [owner]);
    return r.rows.map(toEndpoint);
  }

  async getEndpoint(id: string): Promise<EndpointRecord | null> {
    const row = (await this.q<EndpointRow>('endpoint', [id])).rows[0];
    return row ? toEndpoint(row) : null;
  }

  async updateEndpoint(id: string, patch: EndpointPatch): Promise<Change<EndpointRecord, 'missing'>> {
    const current = await this.getEndpoint(id);
    if (!current) return refused('missing');
    const n = { ...current, ...patch };
    const row = (
      await this.endpointWrite(() =>
        this.q<EndpointRow>('updateEndpoint', [
          id,
          n.secret,
          n.previousSecret,
          n.previousSecretUntil,
          n.status,
          n.disabledReason,
          n.failingSince,
          'failingSince' in patch,
        ]),
      )
    ).rows[0];
    return row ? { ok: toEndpoint(row) } : refused('missing');
  }

  async deleteEndpoint(id: string): Promise<Change<true, 'missing'>> {
    return ((await this.endpointWrite(() => this.q('deleteEndpoint', [id]))).rowCount ?? 0) > 0
      ? { ok: true }
      : refused('missing');
  }

  /**
   * Whether an endpoint is enabled, as last read (anyEnabled) within ENDPOINTS_CHECK_MS: one small
   * statement a second at most instead of one before every claim. This process's own endpoint
   * writes drop the answer at once; another instance's new endpoint waits at most that long for
   * its first claim, and loses nothing meanwhile (it is delivered from its position in the log).
   */
  private async anyEndpointEnabled(): Promise<boolean> {
    const now = Date.now();
    if (this.endpointsSeen !== null && now < this.endpointsSeen.until) return this.endpointsSeen.any;
    const asOf = this.endpointWrites;
    const any = ((await this.q('anyEnabled', [])).rowCount ?? 0) > 0;
    // An endpoint written by this process while the read was out: its answer may be stale.
    if (asOf === this.endpointWrites) this.endpointsSeen = { any, until: now + ENDPOINTS_CHECK_MS };
    return any;
  }

  /**
   * An endpoint write by this process: whether any is enabled is read again before the next claim.
   * Counted at its start and its end, so that no read made while it was out is kept.
   */
  private async endpointWrite<T>(write: () => Promise<T>): Promise<T> {
    this.endpointWrites++;
    this.endpointsSeen = null;
    try {
      return await write();
    } finally {
      this.endpointWrites++;
      this.endpointsSeen = null;
    }
  }

  async claimDeliveries(q: ClaimQuery): Promise<Claim> {
    // No endpoint enabled: nothing the claim could take (it takes enabled endpoints' work only), as
    // on SQLite. The dispatcher claims every 10 ms while events are written, and the claim, planned
    // for its values each time, had a backend on CPU in 43-44 % of pg_stat_activity samples with
    // no endpoint at all (2,260-2,589 creates/s), beside the creates on the same two cores.
    if (!(await this.anyEndpointEnabled())) return { jobs: [], windows: {} };
    const until = new Date(q.now.getTime() + q.leaseMs);
    const rows =
      // Planned for each claim: the generic plan of a prepared claim, made while the log was small,
      // took 500 ms where a plan for the values takes 3 ms (10 endpoints, 4 events each, a log of
      // 200,000 events). A plan for the values can still be far off when the statistics are not
      // (a log that grew since autovacuum last analyzed it): each endpoint's read of its garden's
      // events was planned as a bitmap scan of every event after its position, sorted, for the 16
      // it takes: 30-70 ms a claim with 10,000 events due per endpoint, against 3 ms along
      // events_garden_position in order. A `deliver` process plans with bitmap scans off
      // (orderedScans), at no extra round trip; a serving process keeps its planner's choice.
      (
        await this.planned<ClaimRow>('claim', [
          q.leaseOwner,
          until,
          q.now,
          q.skipEndpoints,
          q.limit,
          q.perEndpoint,
          JSON.stringify(q.ownerLoad ?? {}),
          JSON.stringify(q.windows ?? {}),
        ])
      ).rows;
    const windows: Record<string, string> = {};
    for (const r of rows) if (r.kind === 'w') windows[r.endpoint_id] = position(r.window_xid!, r.window_seq!);
    // Each endpoint made into a record once.
    const endpoints = new Map<string, EndpointRecord>();
    const jobs = rows.flatMap((r) => {
      // A job whose endpoint was deleted meanwhile is dropped.
      if (r.kind === 'w' || r.w_id === null) return [];
      let endpoint = endpoints.get(r.endpoint_id);
      if (!endpoint) {
        endpoint = toEndpoint(claimEndpoint(r));
        endpoints.set(r.endpoint_id, endpoint);
      }
      return [
        {
          id: r.delivery_id,
          attempts: r.attempts,
          event: toEvent(r),
          endpoint,
          traceparent: r.traceparent ?? null,
        },
      ];
    });
    return { jobs, windows };
  }

  async renewLeases(q: LeaseRenewal): Promise<string[]> {
    if (q.endpoints.length === 0) return [];
    return (await this.q<{ id: string }>('renewLeases', [q.owner, q.endpoints, q.until])).rows.map(
      (r) => r.id,
    );
  }

  async renewQueuedLeases(q: QueuedLeaseRenewal): Promise<string[]> {
    const ids = q.deliveries.filter((id) => /^[0-9]{1,18}$/.test(id));
    if (ids.length === 0) return [];
    return (await this.q<{ id: string }>('renewQueuedLeases', [q.owner, ids, q.until, q.now])).rows.map(
      (r) => r.id,
    );
  }

  async finishDeliveries(list: FinishedAttempt[], progress: LogProgress[] = []): Promise<void> {
    if (list.length === 0 && progress.length === 0) return;
    const column = <T>(fn: (f: FinishedAttempt) => T) => list.map(fn);
    const at = progress.map((p) => parsePosition(p.position));
    // Planned for each call, like the claim: the arrays' lengths and the endpoints they name vary
    // from call to call, and a generic plan made on the first few would be kept for them all.
    await this.planned('finish', [
      column((f) => f.deliveryId),
      column((f) => f.leaseOwner),
      column((f) => f.attempt.endpointId),
      column((f) => f.attempt.eventId),
      column((f) => f.attempt.eventType),
      column((f) => f.attempt.attempt),
      column((f) => f.attempt.at),
      column((f) => f.attempt.status),
      column((f) => f.attempt.outcome),
      column((f) => f.attempt.error),
      column((f) => Math.round(f.attempt.durationMs)),
      column((f) => f.attempt.nextAttemptAt),
      column((f) => f.disableEndpoint),
      progress.map((p) => p.endpointId),
      progress.map((p) => p.leaseOwner),
      at.map(([xid]) => xid),
      at.map(([, seq]) => seq),
      progress.map((p) => p.leaseUntil),
    ]);
  }

  async listAttempts(
    endpointId: string,
    q: { limit: number; beforeId: string | null },
  ): Promise<AttemptRecord[]> {
    const before = q.beforeId ?? '9223372036854775807';
    return (await this.q<AttemptRow>('attempts', [endpointId, before, q.limit])).rows.map(toAttempt);
  }

  async recoverDeliveries(endpointId: string, since: Date, now: Date): Promise<number> {
    const n = (await this.q('recover', [endpointId, since, now])).rowCount ?? 0;
    this.queued(n);
    return n;
  }

  async eventPosition(id: string): Promise<string | null> {
    const row = (await this.q<{ xid: string; seq: number }>('position', [id])).rows[0];
    return row ? position(row.xid, row.seq) : null;
  }

  async headPosition(): Promise<string> {
    const row = (await this.q<{ xmin: string }>('head', [])).rows[0]!;
    // Every event from xmin on is still to come (seq values start at 1, so `.0` is before them all).
    return position(row.xmin, 0);
  }

  async readEvents(q: { after: string; gardens: string[] | null; limit: number }): Promise<EventRead> {
    const [xid, seq] = parsePosition(q.after);
    const gardens = q.gardens === null ? null : [...new Set(q.gardens)];
    const r =
      gardens === null
        ? await this.q<EventRow & { head: string }>('eventsAll', [xid, seq, q.limit])
        : await this.q<EventRow & { head: string }>('eventsOf', [xid, seq, q.limit, gardens]);
    const events = r.rows.filter((row) => row.id !== null).map(toEvent);
    if (events.length === q.limit) return { events, position: events.at(-1)!.position };
    // Everything before the snapshot's xmin has been looked at: go on from there, never backwards.
    const head = BigInt(r.rows[0]!.head);
    return { events, position: head > BigInt(xid) ? position(String(head), 0) : q.after };
  }

  async plantHistory(q: HistoryQuery): Promise<EventRecord[]> {
    const r = await this.q<PageRow>('history', [q.plantId, beforeSeq(q.before), q.gardens, q.limit]);
    return r.rows.map(toPageEvent);
  }

  async gardenActivity(q: ActivityQuery): Promise<EventRecord[]> {
    const r = await this.q<PageRow>('activity', [q.garden, beforeSeq(q.before), q.types, q.limit]);
    return r.rows.map(toPageEvent);
  }

  async plantHistoryJson(q: HistoryPageQuery): Promise<JsonPage> {
    const r = await this.q<JsonPage>('historyJson', [q.plantId, beforeSeq(q.before), q.actor, q.limit]);
    return r.rows[0]!;
  }

  async gardenActivityJson(q: ActivityPageQuery): Promise<GardenJsonPage> {
    const r = await this.q<GardenJsonPage>('activityJson', [
      q.garden,
      beforeSeq(q.before),
      q.types,
      q.limit,
      q.actor,
    ]);
    return r.rows[0]!;
  }

  comparePositions(a: string, b: string): number {
    const [ax, as] = parsePosition(a);
    const [bx, bs] = parsePosition(b);
    return compareDigits(ax, bx) || compareDigits(as, bs);
  }

  async purgedUpTo(): Promise<string> {
    const row = (await this.q<{ xid: string; seq: number }>('purgedUpTo', [])).rows[0];
    return horizon(row?.xid ?? null, row?.seq ?? null);
  }

  async feedStart(user: string | null, since: string | null, log?: FeedStartLog): Promise<FeedStart> {
    if (log !== undefined && user !== null && since !== null) return this.feedDelta(user, since, log);
    const [xid, seq] = since === null ? [null, null] : parsePosition(since);
    const row = (
      await this.q<{
        head: string;
        purged_xid: string | null;
        purged_seq: number | null;
        gardens: string[] | null;
        moved: string[] | null;
      }>('feedStart', [user, xid, seq], this.feedPool)
    ).rows[0]!;
    return {
      head: position(row.head, 0),
      purgedUpTo: horizon(row.purged_xid, row.purged_seq),
      gardens: row.gardens,
      moved: row.moved ?? [],
    };
  }

  // feedStart with the log's first read, in one statement: feedQuiet when the log was quiet at the
  // last delta and has been since (the guess), and it says so; feedDelta otherwise.
  private async feedDelta(user: string, since: string, log: FeedStartLog): Promise<FeedStart> {
    const [xid, seq] = parsePosition(since);
    if (this.feedQuiet) {
      this.feedReads.quiet++;
      const q = await this.quietProbes.push(user);
      // QUIET_SINCE in q's snapshot: since not past the head, and no event after it.
      const quiet =
        byPosition(xid, Number(seq), q.xmin, 0) <= 0 &&
        (q.last === null || byPosition(q.last[0], q.last[1], xid, Number(seq)) <= 0);
      if (quiet) {
        // What feedDelta would have read in this snapshot (FEED_QUIET says why): nothing after since.
        const none = { x: null, s: null, t: null, o: null, g: null, i: null };
        return {
          head: position(q.xmin, 0),
          purgedUpTo: q.purgedUpTo,
          gardens: q.gardens,
          moved: [],
          log: feedLogRead(
            { xmin: q.xmin, e: none, c: none, p: { i: null, g: null, n: null, t: null, v: null } },
            log.limit,
            since,
          ),
        };
      }
    }
    this.feedReads.delta++;
    const { rows } = await this.q<{
      read: FeedLogJson & {
        purgedXid: string | null;
        purgedSeq: number | null;
        gardens: string[];
        moved: string[];
        quiet: boolean;
      };
    }>('feedDelta', [user, xid, seq, log.limit, log.tailLimit, log.garden], this.feedPool);
    const read = rows[0]!.read;
    this.feedQuiet = read.quiet;
    return {
      head: position(read.xmin, 0),
      purgedUpTo: horizon(read.purgedXid, read.purgedSeq),
      gardens: read.gardens,
      moved: read.moved,
      log: feedLogRead(read, log.limit, since),
    };
  }

  async feedLog(q: {
    after: string;
    gardens: string[] | null;
    limit: number;
    tailAfter: string;
    tailLimit: number;
  }): Promise<FeedLogRead> {
    const [xid, seq] = parsePosition(q.after);
    const [txid, tseq] = parsePosition(q.tailAfter);
    const args: unknown[] = [xid, seq, q.limit, q.gardens === null ? null : [...new Set(q.gardens)]];
    args.push(txid, tseq, q.tailLimit);
    const { rows } = await this.q<{ read: FeedLogJson }>(
      q.gardens === null ? 'feedLogAll' : 'feedLogOf',
      args,
      this.feedPool,
    );
    return feedLogRead(rows[0]!.read, q.limit, q.after);
  }

  async memberEventGardens(user: string, after: string): Promise<string[]> {
    const [xid, seq] = parsePosition(after);
    return (await this.q<{ garden: string }>('memberGardens', [user, xid, seq])).rows.map((r) => r.garden);
  }

  async committedEvents(q: {
    after: string;
    gardens: string[] | null;
    limit: number;
  }): Promise<EventRecord[]> {
    const [xid, seq] = parsePosition(q.after);
    if (q.gardens?.length === 0) return [];
    const r =
      q.gardens === null
        ? await this.q<EventRow>('committedAll', [xid, seq, q.limit])
        : await this.q<EventRow>('committedOf', [xid, seq, q.limit, [...new Set(q.gardens)]]);
    return r.rows.map(toEvent);
  }

  async deletedPlantIds(q: {
    garden: string;
    after: string;
    afterId: number;
    limit: number;
  }): Promise<number[]> {
    const [xid, seq] = parsePosition(q.after);
    const r = await this.q<{ id: number }>('deletedIds', [q.garden, xid, seq, q.afterId, q.limit]);
    return r.rows.map((row) => Number(row.id));
  }

  async plantsByIds(ids: number[]): Promise<PagePlant[]> {
    if (ids.length === 0) return [];
    return (await this.q<PagePlant>('plantsByIds', [ids])).rows;
  }

  async purgeEvents(before: Date): Promise<number> {
    return (await this.q<{ n: number }>('purge', [before])).rows[0]?.n ?? 0;
  }

  async claimIdempotencyKey(
    ref: IdempotencyRef,
    requestHash: string,
    opts: { now: Date; staleAfterMs: number; retainMs: number },
  ): Promise<IdempotencyClaim> {
    const now = opts.now.getTime();
    for (let attempt = 0; ; attempt++) {
      const claimed = await this.q('claimIdem', [
        ref.user,
        ref.key,
        requestHash,
        opts.now,
        new Date(now - opts.retainMs),
        new Date(now - opts.staleAfterMs),
      ]);
      if ((claimed.rowCount ?? 0) > 0) return { ok: true };
      const row = (
        await this.q<{
          request_hash: string;
          state: string;
          status: number | null;
          plant_id: number | null;
          response: string | null;
        }>('getIdem', [ref.user, ref.key])
      ).rows[0];
      if (!row && attempt < 5) continue; // released between the two statements: claim again
      if (!row) throw new StoreUnavailableError('idempotency key is contended; retry later');
      if (row.request_hash !== requestHash) return refused('mismatch');
      if (row.state === 'pending') return refused('in_flight');
      return refused('done', { outcome: recordedOutcome(row.status, row.plant_id, row.response) });
    }
  }

  async releaseIdempotencyKey(ref: IdempotencyRef): Promise<void> {
    await this.q('dropIdem', [ref.user, ref.key]);
  }

  async purgeIdempotencyKeys(before: Date): Promise<number> {
    return (await this.q('purgeIdem', [before])).rowCount ?? 0;
  }

  async insertToken(t: TokenRecord): Promise<void> {
    await this.q('insertToken', [t.id, t.user, t.name, t.scopes.join(' '), t.hash, t.createdAt, t.expiresAt]);
  }

  async findTokenByHash(hash: string): Promise<TokenRecord | null> {
    const row = (await this.q<TokenRow>('tokenByHash', [hash])).rows[0];
    return row ? toToken(row) : null;
  }

  async findToken(id: string): Promise<TokenRecord | null> {
    const row = (await this.q<TokenRow>('tokenById', [id])).rows[0];
    return row ? toToken(row) : null;
  }

  async pageTokens(q: TokenPageQuery): Promise<TokenRecord[]> {
    const after = q.before?.id ?? null;
    const r =
      q.user === null
        ? await this.q<TokenRow>('tokensPage', [after, q.limit])
        : await this.q<TokenRow>('tokensOfUserPage', [q.user, after, q.limit]);
    return r.rows.map(toToken);
  }

  async revokeToken(id: string, at: Date): Promise<Change<true, TokenRefusal>> {
    if (((await this.q('revokeToken', [at, id])).rowCount ?? 0) > 0) return { ok: true };
    // Tokens are never deleted, and a revocation never undone: one found now was revoked already.
    return refused((await this.findToken(id)) === null ? 'missing' : 'revoked');
  }

  async activeTokens(ids: string[], now: Date): Promise<string[]> {
    if (ids.length === 0) return [];
    return (await this.q<{ id: string }>('activeTokens', [ids, now])).rows.map((r) => r.id);
  }

  async touchTokens(ids: string[], minute: Date): Promise<number> {
    if (ids.length === 0) return 0;
    return (await this.q('touchTokens', [ids, minute])).rowCount ?? 0;
  }

  async ping(): Promise<void> {
    try {
      await this.pool.query('SELECT 1');
    } catch (err) {
      throw this.translate(err);
    }
  }

  async migrationsPending(): Promise<PendingMigration[]> {
    const applied = await this.appliedVersions();
    return pendingMigrations(POSTGRES_MIGRATIONS, new Set(applied)).map(described);
  }

  async schemaVersion(): Promise<number> {
    return Math.max(0, ...(await this.appliedVersions()));
  }

  // Without creating schema_migrations (to_regclass is null while it does not exist), in the
  // schema the connection's search_path names, as migrate() uses.
  private async appliedVersions(): Promise<number[]> {
    try {
      const { rows } = await this.pool.query<{ exists: boolean }>(
        "SELECT to_regclass('schema_migrations') IS NOT NULL AS exists",
      );
      if (!rows[0]?.exists) return [];
      const versions = await this.pool.query<{ version: number }>('SELECT version FROM schema_migrations');
      return versions.rows.map((r) => r.version);
    } catch (err) {
      throw this.translate(err);
    }
  }

  poolStats(): PoolStats {
    return { size: this.pool.totalCount, idle: this.pool.idleCount, waiting: this.pool.waitingCount };
  }

  async close(): Promise<void> {
    await this.events.close();
    if (!this.pool.ended) await this.pool.end();
    if (!this.feedPool.ended) await this.feedPool.end();
  }
}
