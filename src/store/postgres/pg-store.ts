import pg from 'pg';
import { IdSpaceExhaustedError, StoreUnavailableError } from '../../errors.js';
import type { Scope } from '../../schemas/token.js';
import { maskOf } from '../event-mask.js';
import { pendingMigrations } from '../migrate.js';
import { applyPatch, eventData, recordedOutcome, shownPlant } from '../plant-changes.js';
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
  NewEvent,
  NewPlant,
  PageQuery,
  PlantPatch,
  PlantRecord,
  PoolStats,
  Store,
  TokenRecord,
  UpdateResult,
  VersionedPlant,
} from '../store.js';
import { type Pending, TurnBatch } from '../turn-batch.js';
import {
  type AttemptRow,
  type EndpointRow,
  EVENT_QUERIES,
  type EventRow,
  parsePosition,
  position,
  toAttempt,
  toEndpoint,
  toEvent,
} from './events.js';
import { POSTGRES_MIGRATIONS } from './migrations.js';

export interface PgOptions {
  url: string;
  /** Most connections this process holds. */
  poolSize: number;
}

// Arbitrary but fixed keys for the advisory locks that serialize migrations and client-chosen ids.
const MIGRATION_LOCK = 727_001;
const ID_LOCK = 727_002;

// bigint ids fit in a JS number (the contract caps them at 2^53−1).
const types = {
  getTypeParser: (oid: number, format?: string) =>
    oid === 20 ? (v: string) => Number(v) : pg.types.getTypeParser(oid, format as 'text'),
};

// SQLSTATE classes and driver errors that mean "cannot serve now", as opposed to a bug in a query.
function isUnavailable(err: unknown): boolean {
  const code = (err as { code?: unknown }).code;
  if (typeof code !== 'string') {
    return err instanceof Error && /timeout|terminat|Connection|after calling end/i.test(err.message);
  }
  return (
    /^(08|53|57P0|58)/.test(code) ||
    ['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENOTFOUND', 'EPIPE', 'EAI_AGAIN'].includes(
      code,
    )
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
});

const COLS = 'id, owner, name, tag, version';
// A list page shows no versions.
const PAGE_COLS = 'id, owner, name, tag';

// listPages, one branch per shape of query: the shape's pages (`which`), each an ordered index
// range scan stopped at its LIMIT, its rows tagged with the page's ordinal n.
// `owner = o AND id > a` is spelt `(owner, id) > (o, a) AND owner <= o` (likewise for tags): only
// then does the one right index yield the order asked for. The planner cannot see the values in
// the arrays, and given the equality it may walk the primary key in id order and filter, which
// reads the whole table for a rare owner or tag. (The database's collation is deterministic, equal
// meaning byte-equal, so both spellings select the same rows.)
const branch = (which: string, where: string, order: string) => `
    SELECT q.n, p.id, p.owner, p.name, p.tag FROM q CROSS JOIN LATERAL (
      SELECT ${PAGE_COLS} FROM plants WHERE ${where} ORDER BY ${order} LIMIT q.lim) p
    WHERE ${which}`;
const PAGE_SHAPES = [
  branch(
    'q.owner IS NOT NULL AND q.tag IS NULL',
    '(owner, id) > (q.owner, q.after_id) AND owner <= q.owner',
    'owner, id',
  ),
  branch(
    'q.owner IS NOT NULL AND q.tag IS NOT NULL',
    'owner = q.owner AND (tag, id) > (q.tag, q.after_id) AND tag <= q.tag',
    'tag, id',
  ),
  branch(
    'q.owner IS NULL AND q.tag IS NOT NULL',
    '(tag, id) > (q.tag, q.after_id) AND tag <= q.tag',
    'tag, id',
  ),
  branch('q.owner IS NULL AND q.tag IS NULL', 'id > q.after_id', 'id'),
];

const Q = {
  insertServerId: `INSERT INTO plants (id, owner, name, tag) VALUES (nextval('plants_id_seq'), $1, $2, $3)
    ON CONFLICT (id) DO NOTHING RETURNING id, version`,
  insertClientId:
    'INSERT INTO plants (id, owner, name, tag) VALUES ($1, $2, $3, $4) ON CONFLICT (id) DO NOTHING RETURNING id, version',
  // A change: the row locked, so that its check and its write are one step against any other writer.
  plantForUpdate: `SELECT ${COLS} FROM plants WHERE id = $1 FOR UPDATE`,
  updatePlant: `UPDATE plants SET name = $2, tag = $3, version = nextval('plant_versions') WHERE id = $1 RETURNING version`,
  raiseSequence: `SELECT setval('plants_id_seq', GREATEST($1::bigint, (SELECT last_value FROM plants_id_seq)))`,
  getPlant: `SELECT ${COLS} FROM plants WHERE id = $1`,
  listAll: `SELECT ${PAGE_COLS} FROM plants WHERE id > $1 ORDER BY id LIMIT $2`,
  listAllTag: `SELECT ${PAGE_COLS} FROM plants WHERE tag = $1 AND id > $2 ORDER BY id LIMIT $3`,
  listOwner: `SELECT ${PAGE_COLS} FROM plants WHERE owner = $1 AND id > $2 ORDER BY id LIMIT $3`,
  listOwnerTag: `SELECT ${PAGE_COLS} FROM plants WHERE owner = $1 AND tag = $2 AND id > $3 ORDER BY id LIMIT $4`,
  listAllV: `SELECT ${COLS} FROM plants WHERE id > $1 ORDER BY id LIMIT $2`,
  listAllTagV: `SELECT ${COLS} FROM plants WHERE tag = $1 AND id > $2 ORDER BY id LIMIT $3`,
  listOwnerV: `SELECT ${COLS} FROM plants WHERE owner = $1 AND id > $2 ORDER BY id LIMIT $3`,
  listOwnerTagV: `SELECT ${COLS} FROM plants WHERE owner = $1 AND tag = $2 AND id > $3 ORDER BY id LIMIT $4`,
  // The batched forms of the above: a turn's reads in one statement.
  getPlants: `SELECT ${COLS} FROM plants WHERE id = ANY($1::bigint[])`,
  // Pages $1[i], $2[i], $3[i], $4[i] (owner, tag, afterId, limit; a null owner or tag: any).
  listPages: `WITH q AS (SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[])
      WITH ORDINALITY AS q(owner, tag, after_id, lim, n))
    ${PAGE_SHAPES.join('\n    UNION ALL')}`,
  deleteAny: 'DELETE FROM plants WHERE id = $1 AND ($2::bigint[] IS NULL OR version = ANY($2))',
  deleteOwned:
    'DELETE FROM plants WHERE id = $1 AND owner = $3 AND ($2::bigint[] IS NULL OR version = ANY($2))',
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
  tokensAll: 'SELECT * FROM tokens ORDER BY created_at, id',
  tokensOfUser: 'SELECT * FROM tokens WHERE user_id = $1 ORDER BY created_at, id',
  revokeToken: 'UPDATE tokens SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL',
  ...EVENT_QUERIES,
} as const;

type QueryName = keyof typeof Q;

/**
 * The calls of one kind queued in a turn (TurnBatch), answered by one call of `run`, which gives
 * an outcome per argument, in order (a promise for one settled on its own); when `run` fails,
 * every call of the batch fails with its error.
 */
class CallBatch<A, R> {
  // A pending item's fn hands back the call's argument.
  private readonly turn = new TurnBatch((items) => {
    this.settle(items);
  });

  constructor(private readonly run: (args: A[]) => Promise<(R | Promise<R>)[]>) {}

  push(arg: A): Promise<R> {
    return this.turn.push(() => arg) as Promise<unknown> as Promise<R>;
  }

  private settle(items: Pending[]): void {
    this.run(items.map((item) => item.fn() as A)).then(
      (results) => {
        items.forEach((item, i) => {
          item.resolve(results[i]);
        });
      },
      (err: unknown) => {
        for (const item of items) item.reject(err);
      },
    );
  }
}

interface ServerIdCreate {
  plant: NewPlant;
  event: NewEvent;
}

/** A plant a create wrote: its id and version. */
interface Made {
  id: number;
  version: number;
}

// Arguments the batch's typed arrays would refuse (so failing every read of the batch) or that
// PostgreSQL refuses in text (NUL) go on their own, failing alone as before.
const batchable = (q: PageQuery): boolean =>
  Number.isSafeInteger(q.afterId) &&
  Number.isSafeInteger(q.limit) &&
  q.limit >= 0 &&
  !q.owner?.includes('\0') &&
  !q.tag?.includes('\0');

/** The scale-out store: a bounded node-postgres pool, named (prepared) statements. */
export class PgStore implements Store {
  readonly engine = 'postgres';
  private readonly pool: pg.Pool;

  constructor(opts: PgOptions) {
    this.pool = new pg.Pool({
      connectionString: opts.url,
      max: opts.poolSize,
      connectionTimeoutMillis: 3_000,
      idleTimeoutMillis: 30_000,
      // A connection that goes silent (a cut network) fails its query instead of hanging it.
      query_timeout: 10_000,
      keepAlive: true,
      types,
    });
    // An idle connection that breaks (server restart, network cut) must not crash the process;
    // the pool drops it and the next query opens a fresh one.
    this.pool.on('error', () => {});
  }

  // Read batching, as in the SQLite store: the getPlant calls that arrive in one turn of the event
  // loop become one statement, and so do the listPlants calls; a batch costs one pool checkout,
  // one round trip and one statement's parse, bind and plan instead of one per call. Its
  // statement is sent after every request of the turn has queued its read, so each read still
  // sees every write acknowledged before it was sent.
  private readonly gets = new CallBatch((ids: number[]) => this.getBatch(ids));
  private readonly lists = new CallBatch((qs: PageQuery[]) => this.listBatch(qs));
  // The creates with server-assigned ids of a turn, likewise: one statement writes their plants,
  // events and deliveries.
  private readonly creates = new CallBatch((cs: ServerIdCreate[]) => this.createBatch(cs));

  // One prepared statement per name, per connection; failures that mean "unavailable" become 503s.
  private async q<R extends pg.QueryResultRow>(
    name: QueryName,
    values: unknown[],
    client: pg.Pool | pg.PoolClient = this.pool,
  ): Promise<pg.QueryResult<R>> {
    try {
      return await client.query<R>({ name, text: Q[name], values });
    } catch (err) {
      throw this.translate(err);
    }
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
    try {
      await client.query('BEGIN');
      const out = await fn(client);
      await client.query('COMMIT');
      return out;
    } catch (err) {
      await client.query('ROLLBACK').catch(() => {
        broken = true;
      });
      throw this.translate(err);
    } finally {
      client.release(broken);
    }
  }

  async migrate(): Promise<string[]> {
    const client = await this.connect();
    try {
      // Several instances starting at once take turns here; the later ones find nothing to do.
      await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
      await client.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
        version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`);
      const { rows } = await client.query<{ version: number }>('SELECT version FROM schema_migrations');
      const todo = pendingMigrations(POSTGRES_MIGRATIONS, new Set(rows.map((r) => r.version)));
      for (const m of todo) {
        await client.query('BEGIN');
        try {
          await client.query(m.sql);
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
      return todo.map((m) => m.name);
    } catch (err) {
      throw this.translate(err);
    } finally {
      await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch(() => {});
      client.release();
    }
  }

  async createPlant(plant: NewPlant, idem?: IdempotencyRef, event?: NewEvent): Promise<CreateResult> {
    if (plant.id === null && !idem) {
      // The common case: the turn's creates in one statement, no explicit transaction (their events
      // and deliveries in the same statement).
      const made = event
        ? await this.creates.push({ plant, event })
        : await this.insertServerId(plant, this.pool);
      return { created: { ...plant, id: made.id, version: made.version } };
    }
    let queued = 0;
    const result = await this.tx(async (c) => {
      let made: Made | null;
      if (plant.id === null) {
        const r = await this.insertServerId(plant, c, event);
        made = r;
        queued = r.queued;
      } else {
        const r = await this.q<Made>('insertClientId', [plant.id, plant.owner, plant.name, plant.tag], c);
        made = r.rows[0] ?? null;
        if (made !== null) {
          // Serialized so two concurrent client ids cannot lower the sequence below either of them.
          await c.query('SELECT pg_advisory_xact_lock($1)', [ID_LOCK]);
          await this.q('raiseSequence', [made.id], c);
          if (event) {
            const e = await this.q<{ queued: number }>(
              'recordCreated',
              [made.id, plant.owner, plant.name, plant.tag, event.at],
              c,
            );
            queued = e.rows[0]?.queued ?? 0;
          }
        }
      }
      const id = made?.id ?? null;
      if (idem) {
        const shown = made && shownPlant({ ...plant, version: made.version });
        await this.q('finishIdem', [id === null ? 409 : 201, id, idem.user, idem.key, shown], c);
      }
      return made === null
        ? { exists: true as const }
        : { created: { ...plant, id: made.id, version: made.version } };
    });
    this.queued(queued);
    return result;
  }

  async updatePlant(
    id: number,
    owner: string | null,
    patch: PlantPatch,
    ifVersions: number[] | null,
    idem?: IdempotencyRef,
    event?: NewEvent,
  ): Promise<UpdateResult> {
    // An id the bigint parameter would refuse is no plant.
    if (!Number.isSafeInteger(id)) return { missing: true };
    let queued = 0;
    const result = await this.tx(async (c): Promise<UpdateResult> => {
      const was = (await this.q<VersionedPlant>('plantForUpdate', [id], c)).rows[0];
      if (was === undefined || (owner !== null && was.owner !== owner)) return { missing: true };
      if (ifVersions !== null && !ifVersions.includes(was.version)) return { mismatch: was };
      const { name, tag, changed, previous } = applyPatch(was, patch);
      let now = was;
      if (changed) {
        const r = await this.q<{ version: number }>('updatePlant', [id, name, tag], c);
        now = { ...was, name, tag, version: r.rows[0]!.version };
        if (event) {
          const e = await this.q<{ queued: number }>(
            'recordUpdated',
            [id, was.owner, JSON.stringify(eventData(id, name, tag, previous)), event.at],
            c,
          );
          queued = e.rows[0]?.queued ?? 0;
        }
      }
      if (idem) {
        const shown = shownPlant(now);
        await this.q('finishIdem', [200, id, idem.user, idem.key, shown], c);
      }
      return { updated: now, changed };
    });
    this.queued(queued);
    return result;
  }

  private readonly queuedListeners: (() => void)[] = [];

  onDeliveriesQueued(listener: () => void): void {
    this.queuedListeners.push(listener);
  }

  // After a commit that queued deliveries: this process's dispatcher looks at once.
  private queued(n: number): void {
    if (n > 0) for (const listener of this.queuedListeners) listener();
  }

  private async createBatch(cs: ServerIdCreate[]): Promise<(Made | Promise<Made>)[]> {
    if (cs.length === 1) return [this.createOne(cs[0]!)];
    let rows: { n: number; id: number; version: number; queued: number }[];
    try {
      rows = (
        await this.q<{ n: number; id: number; version: number; queued: number }>('insertServerIdEvents', [
          cs.map((c) => c.plant.owner),
          cs.map((c) => c.plant.name),
          cs.map((c) => c.plant.tag),
          cs.map((c) => c.event.at),
        ])
      ).rows;
    } catch (err) {
      // The statement may have committed before the connection failed: a retry could create twice.
      if (err instanceof StoreUnavailableError) throw err;
      // Refused, it wrote nothing; each create runs on its own, to succeed or fail by itself.
      return cs.map((c) => this.createOne(c));
    }
    this.queued(rows[0]?.queued ?? 0);
    const made = new Map(rows.map((r) => [r.n, { id: r.id, version: r.version }]));
    // A plant whose id a client took meanwhile was not written: it takes the next id on its own.
    return cs.map((c, i) => made.get(i + 1) ?? this.createOne(c));
  }

  private async createOne(c: ServerIdCreate): Promise<Made> {
    const r = await this.insertServerId(c.plant, this.pool, c.event);
    this.queued(r.queued);
    return r;
  }

  // nextval may land on an id a client took meanwhile; then take the next one.
  private async insertServerId(
    plant: NewPlant,
    c: pg.Pool | pg.PoolClient,
    event?: NewEvent,
  ): Promise<Made & { queued: number }> {
    for (let attempt = 0; attempt < 100; attempt++) {
      let r: pg.QueryResult<Made & { queued?: number }>;
      try {
        r = event
          ? await this.q<Made & { queued: number }>(
              'insertServerIdEvent',
              [plant.owner, plant.name, plant.tag, event.at],
              c,
            )
          : await this.q<Made>('insertServerId', [plant.owner, plant.name, plant.tag], c);
      } catch (err) {
        // The sequence stops at 2^53−1 (sequence_generator_limit_exceeded).
        if ((err as { code?: string }).code === '2200H') throw new IdSpaceExhaustedError();
        throw err;
      }
      const row = r.rows[0];
      if (row !== undefined) return { id: row.id, version: row.version, queued: row.queued ?? 0 };
    }
    throw new StoreUnavailableError('could not find a free plant id; retry later');
  }

  getPlant(id: number): Promise<VersionedPlant | null> {
    // An id the batch's bigint[] would refuse fails on its own rather than with its batch.
    return Number.isSafeInteger(id) ? this.gets.push(id) : this.getOne(id);
  }

  private async getOne(id: number): Promise<VersionedPlant | null> {
    return (await this.q<VersionedPlant>('getPlant', [id])).rows[0] ?? null;
  }

  private async getBatch(ids: number[]): Promise<(VersionedPlant | null)[]> {
    if (ids.length === 1) return [await this.getOne(ids[0]!)];
    const byId = new Map<number, VersionedPlant>();
    for (const row of (await this.q<VersionedPlant>('getPlants', [ids])).rows) byId.set(row.id, row);
    // Each caller gets a record of its own, as from a query of its own, even for the same id.
    const taken = new Set<number>();
    return ids.map((id) => {
      const row = byId.get(id);
      if (row === undefined) return null;
      if (taken.has(id)) return { ...row };
      taken.add(id);
      return row;
    });
  }

  listPlants(q: PageQuery): Promise<(PlantRecord & { version?: number })[]> {
    if (q.withVersion) return this.listVersioned(q);
    return batchable(q) ? this.lists.push(q) : this.listOne(q);
  }

  // A page with each plant's version (include=version): one statement, outside the turn's batch.
  private async listVersioned(q: PageQuery): Promise<VersionedPlant[]> {
    const r =
      q.owner === null
        ? q.tag === null
          ? await this.q<VersionedPlant>('listAllV', [q.afterId, q.limit])
          : await this.q<VersionedPlant>('listAllTagV', [q.tag, q.afterId, q.limit])
        : q.tag === null
          ? await this.q<VersionedPlant>('listOwnerV', [q.owner, q.afterId, q.limit])
          : await this.q<VersionedPlant>('listOwnerTagV', [q.owner, q.tag, q.afterId, q.limit]);
    return r.rows;
  }

  private async listBatch(qs: PageQuery[]): Promise<PlantRecord[][]> {
    if (qs.length === 1) return [await this.listOne(qs[0]!)];
    const { rows } = await this.q<PlantRecord & { n: number }>('listPages', [
      qs.map((q) => q.owner),
      qs.map((q) => q.tag),
      qs.map((q) => q.afterId),
      qs.map((q) => q.limit),
    ]);
    const pages = qs.map((): PlantRecord[] => []);
    let ordered = true;
    for (const r of rows) {
      const page = pages[r.n - 1]!;
      const last = page[page.length - 1];
      if (last !== undefined && last.id > r.id) ordered = false;
      page.push({ id: r.id, owner: r.owner, name: r.name, tag: r.tag });
    }
    // Each page comes out of its own ordered scan; SQL promises that order only under a top-level
    // ORDER BY, which would sort the whole result, so the (unlikely) other case is put right here.
    if (!ordered) for (const page of pages) page.sort((a, b) => a.id - b.id);
    return pages;
  }

  private async listOne(q: PageQuery): Promise<PlantRecord[]> {
    const r =
      q.owner === null
        ? q.tag === null
          ? await this.q<PlantRecord>('listAll', [q.afterId, q.limit])
          : await this.q<PlantRecord>('listAllTag', [q.tag, q.afterId, q.limit])
        : q.tag === null
          ? await this.q<PlantRecord>('listOwner', [q.owner, q.afterId, q.limit])
          : await this.q<PlantRecord>('listOwnerTag', [q.owner, q.tag, q.afterId, q.limit]);
    return r.rows;
  }

  async deletePlant(
    id: number,
    owner: string | null,
    event?: NewEvent,
    ifVersions?: number[] | null,
  ): Promise<boolean | 'mismatch'> {
    const versions = ifVersions ?? null;
    let deleted: boolean;
    if (event) {
      const r =
        owner === null
          ? await this.q<{ queued: number }>('deleteAnyEvent', [id, event.at, versions])
          : await this.q<{ queued: number }>('deleteOwnedEvent', [id, event.at, owner, versions]);
      this.queued(r.rows[0]?.queued ?? 0);
      deleted = (r.rowCount ?? 0) > 0;
    } else {
      const r =
        owner === null
          ? await this.q('deleteAny', [id, versions])
          : await this.q('deleteOwned', [id, versions, owner]);
      deleted = (r.rowCount ?? 0) > 0;
    }
    if (deleted || versions === null) return deleted;
    // Not deleted under a condition: in another version if it is there (and the owner's) now.
    const now = await this.getOne(id);
    return now !== null && (owner === null || now.owner === owner) ? 'mismatch' : false;
  }

  async insertEndpoint(e: EndpointRecord): Promise<void> {
    await this.q('insertEndpoint', [
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
    ]);
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

  async updateEndpoint(id: string, patch: EndpointPatch): Promise<EndpointRecord | null> {
    const current = await this.getEndpoint(id);
    if (!current) return null;
    const n = { ...current, ...patch };
    const row = (
      await this.q<EndpointRow>('updateEndpoint', [
        id,
        n.secret,
        n.previousSecret,
        n.previousSecretUntil,
        n.status,
        n.disabledReason,
        n.failingSince,
        'failingSince' in patch,
      ])
    ).rows[0];
    return row ? toEndpoint(row) : null;
  }

  async deleteEndpoint(id: string): Promise<boolean> {
    return ((await this.q('deleteEndpoint', [id])).rowCount ?? 0) > 0;
  }

  async claimDeliveries(q: Parameters<Store['claimDeliveries']>[0]): Promise<DeliveryJob[]> {
    const until = new Date(q.now.getTime() + q.leaseMs);
    const rows = (
      await this.q<{ id: string; event_id: string; endpoint_id: string; attempts: number }>('claim', [
        q.leaseOwner,
        until,
        q.now,
        q.skipEndpoints,
        q.limit,
        q.perEndpoint,
      ])
    ).rows;
    if (rows.length === 0) return [];
    const [events, endpoints] = await Promise.all([
      this.q<EventRow>('eventsIn', [[...new Set(rows.map((r) => r.event_id))]]),
      this.q<EndpointRow>('endpointsIn', [[...new Set(rows.map((r) => r.endpoint_id))]]),
    ]);
    const ev = new Map(events.rows.map((r) => [r.id, toEvent(r)]));
    const ep = new Map(endpoints.rows.map((r) => [r.id, toEndpoint(r)]));
    return rows.flatMap((r) => {
      const event = ev.get(r.event_id);
      const endpoint = ep.get(r.endpoint_id);
      return event && endpoint ? [{ id: r.id, attempts: r.attempts, event, endpoint }] : [];
    });
  }

  async finishDelivery(f: FinishedAttempt): Promise<void> {
    const a = f.attempt;
    await this.q('finish', [
      f.deliveryId,
      f.leaseOwner,
      a.endpointId,
      a.eventId,
      a.eventType,
      a.attempt,
      a.at,
      a.status,
      a.outcome,
      a.error,
      Math.round(a.durationMs),
      a.nextAttemptAt,
      f.disableEndpoint,
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

  async listEvents(q: { after: string; owner: string | null; limit: number }): Promise<EventRecord[]> {
    const [xid, seq] = parsePosition(q.after);
    const r =
      q.owner === null
        ? await this.q<EventRow>('eventsAll', [xid, seq, q.limit])
        : await this.q<EventRow>('eventsOf', [xid, seq, q.limit, q.owner]);
    return r.rows.map(toEvent);
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
      if ((claimed.rowCount ?? 0) > 0) return { state: 'claimed' };
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
      if (row.request_hash !== requestHash) return { state: 'mismatch' };
      if (row.state === 'pending') return { state: 'in_flight' };
      return { state: 'done', outcome: recordedOutcome(row.status, row.plant_id, row.response) };
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

  async listTokens(user: string | null): Promise<TokenRecord[]> {
    const r =
      user === null
        ? await this.q<TokenRow>('tokensAll', [])
        : await this.q<TokenRow>('tokensOfUser', [user]);
    return r.rows.map(toToken);
  }

  async revokeToken(id: string, at: Date): Promise<boolean> {
    return ((await this.q('revokeToken', [at, id])).rowCount ?? 0) > 0;
  }

  async ping(): Promise<void> {
    try {
      await this.pool.query('SELECT 1');
    } catch (err) {
      throw this.translate(err);
    }
  }

  poolStats(): PoolStats {
    return { size: this.pool.totalCount, idle: this.pool.idleCount, waiting: this.pool.waitingCount };
  }

  async close(): Promise<void> {
    if (!this.pool.ended) await this.pool.end();
  }
}
