import pg from 'pg';
import type { StoreRecord } from '../../schemas/store-file.js';
import { indexedWords } from '../../search-text.js';
import { DATA_TABLES, type LoadTarget, RecordRefused, StoreNotEmpty } from '../dump.js';
import {
  eventLine,
  lineData,
  TABLES_AFTER_WEBHOOKS,
  TABLES_BEFORE_EVENTS,
  webhookRecord,
} from '../dump-rows.js';
import { maskOf } from '../event-mask.js';
import type { AnyEventData, EventType } from '../store.js';
import { types } from './store.js';

// Export and import of a PostgreSQL store (contract section 12; the file: src/ops/store-file.ts).
// An export reads one REPEATABLE READ snapshot through cursors, a page at a time. An import is one
// transaction into an empty store: its plants' secondary indexes (the search index among them) are
// dropped and built again at its end, their triggers are off while it loads (the list marks are
// set once at the end), and each page of rows is one INSERT … SELECT FROM unnest(…), sent once the
// page before it has answered, while the next page is read from the file.

/** Rows an import sends in one INSERT. */
const PAGE = 1000;
/**
 * Rows an export fetches at a time, as the service's own export reads SQLite pages (sqlite/store.ts).
 * Against pages of 1,000 it made no difference to speed or memory that one run could tell; what
 * keeps the export's memory flat is V8's --optimize-for-size (bin/plantstore).
 */
const FETCH = 200;

async function connect(url: string): Promise<pg.Client> {
  const c = new pg.Client({ connectionString: url, types });
  await c.connect();
  c.on('error', () => {});
  return c;
}

/** The schema version of the store at `url`. */
export async function postgresSchema(url: string): Promise<number> {
  const c = await connect(url);
  try {
    const { rows } = await c.query<{ v: number }>(
      'SELECT coalesce(max(version), 0)::int AS v FROM schema_migrations',
    );
    return rows[0]!.v;
  } finally {
    await c.end();
  }
}

/** Every record of the store at `url`, in the file's order, from one snapshot. */
export async function* dumpPostgres(url: string): AsyncGenerator<StoreRecord> {
  const c = await connect(url);
  const iso = (t: unknown) => (t as Date).toISOString();
  try {
    await c.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    for (const t of TABLES_BEFORE_EVENTS) {
      for await (const r of pages<Record<string, unknown>>(c, t.sql)) yield t.record(r, iso);
    }
    // Log order is (xid, seq), compared as xid8: never as the text of the xid.
    for await (const r of pages<{
      id: string;
      type: EventType;
      owner: string;
      garden: string;
      data: string;
      created_at: Date;
      actor: string | null;
      request_id: string | null;
    }>(
      c,
      'SELECT id, type, owner, garden, data, created_at, actor, request_id FROM events ORDER BY xid, seq',
    )) {
      yield eventLine({
        id: r.id,
        type: r.type,
        owner: r.owner,
        garden: r.garden,
        data: JSON.parse(r.data) as AnyEventData,
        createdAt: iso(r.created_at),
        actor: r.actor,
        requestId: r.request_id,
      });
    }
    for await (const r of pages<Record<string, unknown> & { after: string | null }>(
      c,
      `SELECT w.*, (SELECT e.id FROM events e WHERE (e.xid, e.seq) <= (w.position_xid, w.position_seq)
         ORDER BY e.xid DESC, e.seq DESC LIMIT 1) AS after
       FROM webhook_endpoints w ORDER BY w.seq`,
    )) {
      yield webhookRecord(r, iso, r.after);
    }
    for (const t of TABLES_AFTER_WEBHOOKS) {
      for await (const r of pages<Record<string, unknown>>(c, t.sql)) yield t.record(r, iso);
    }
    // A sequence's last_value is the last one given once is_called; before, the one it gives next.
    const {
      rows: [k],
    } = await c.query<{ plant_id: number; version: number }>(
      `SELECT greatest((SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM plants_id_seq),
                       (SELECT coalesce(max(id), 0) FROM plants)) AS plant_id,
              greatest((SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM plant_versions),
                       (SELECT coalesce(max(version), 0) FROM plants)) AS version`,
    );
    yield { kind: 'counters', plantId: k!.plant_id, version: k!.version };
    await c.query('COMMIT');
  } finally {
    await c.end();
  }
}

/** A query's rows, read through a cursor a page at a time (inside the caller's transaction). */
let cursors = 0;
async function* pages<T extends pg.QueryResultRow>(c: pg.Client, sql: string): AsyncGenerator<T> {
  const cursor = `dump_${++cursors}`;
  await c.query(`DECLARE ${cursor} NO SCROLL CURSOR FOR ${sql}`);
  for (;;) {
    const page = (await c.query<T>(`FETCH ${FETCH} FROM ${cursor}`)).rows;
    const full = page.length === FETCH;
    // Each row leaves the driver's array as it is handed on, so that a page does not outlive its
    // use (young collections promote what is still referenced).
    page.reverse();
    while (page.length > 0) yield page.pop()!;
    if (!full) break;
  }
  await c.query(`CLOSE ${cursor}`);
}

/** Columns of each kind's INSERT … SELECT FROM unnest(…): name and array type. */
const INSERTS = {
  garden: {
    sql: 'INSERT INTO gardens (id, name, home_user, created_by, created_at, seq) SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::bigint[])',
    n: 6,
  },
  member: {
    sql: 'INSERT INTO garden_members (garden_id, user_id, role, added_at) SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[])',
    n: 4,
  },
  plant: {
    sql: `INSERT INTO plants (id, owner, name, tag, version, garden, search)
      SELECT u.id, u.owner, u.name, u.tag, u.version, u.garden, array_to_tsvector(string_to_array(u.words, ' '))
      FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::text[], $7::text[])
        AS u(id, owner, name, tag, version, garden, words)`,
    n: 7,
  },
  token: {
    sql: `INSERT INTO tokens (id, user_id, name, scopes, hash, created_at, expires_at, revoked_at, last_used_at, seq)
      SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[], $7::timestamptz[],
        $8::timestamptz[], $9::timestamptz[], $10::bigint[])`,
    n: 10,
  },
  // The import's own transaction is every event's xid: their order is their seq, as in the file.
  event: {
    sql: `INSERT INTO events (seq, id, type, owner, garden, data, created_at, actor, request_id)
      SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::timestamptz[],
        $8::text[], $9::text[])`,
    n: 9,
  },
  webhook: {
    sql: `INSERT INTO webhook_endpoints (id, owner, admin, admin_token, admin_until, url, events, description, secret,
        previous_secret, previous_secret_until, status, disabled_reason, created_at, last_success_at, failing_since, seq,
        position_xid, position_seq)
      SELECT u.id, u.owner, u.admin, u.admin_token, u.admin_until, u.url, u.events, u.description, u.secret,
        u.previous_secret, u.previous_secret_until, u.status, u.disabled_reason, u.created_at, u.last_success_at,
        u.failing_since, u.seq, coalesce(e.xid, '0'::xid8), coalesce(e.seq, 0)
      FROM unnest($1::text[], $2::text[], $3::boolean[], $4::text[], $5::timestamptz[], $6::text[], $7::int[], $8::text[],
        $9::text[], $10::text[], $11::timestamptz[], $12::text[], $13::text[], $14::timestamptz[], $15::timestamptz[],
        $16::timestamptz[], $17::bigint[], $18::text[])
        AS u(id, owner, admin, admin_token, admin_until, url, events, description, secret, previous_secret,
          previous_secret_until, status, disabled_reason, created_at, last_success_at, failing_since, seq, after)
      LEFT JOIN events e ON e.id = u.after`,
    n: 18,
  },
  delivery: {
    sql: `INSERT INTO deliveries (event_id, endpoint_id, state, attempts, next_attempt_at, created_at)
      SELECT u.e, u.w, 'pending', u.a, u.n, u.c FROM unnest($1::text[], $2::text[], $3::int[], $4::timestamptz[], $5::timestamptz[]) AS u(e, w, a, n, c)`,
    n: 5,
  },
  idempotency: {
    sql: `INSERT INTO idempotency_keys (user_id, key, request_hash, state, status, plant_id, response, created_at, locked_at)
      SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int[], $6::bigint[], $7::text[],
        $8::timestamptz[], $9::timestamptz[])`,
    n: 9,
  },
} as const;

type Kind = keyof typeof INSERTS;

/** A record as its INSERT's row. */
function row(r: StoreRecord, seq: number): unknown[] {
  switch (r.kind) {
    case 'garden':
      return [r.id, r.name, r.homeUser, r.createdBy, r.createdAt, r.seq];
    case 'member':
      return [r.garden, r.user, r.role, r.addedAt];
    case 'plant':
      return [r.id, r.owner, r.name, r.tag, r.version, r.garden, indexedWords(r.name)];
    case 'token':
      return [
        r.id,
        r.user,
        r.name,
        r.scopes.join(' '),
        r.hash,
        r.createdAt,
        r.expiresAt,
        r.revokedAt,
        r.lastUsedAt,
        r.seq,
      ];
    case 'event': {
      const data = lineData(r);
      if (data === null) throw new RecordRefused(`event ${r.id} has not what a ${r.type} event needs`);
      const cause = [r.actor ?? null, r.requestId ?? null];
      return [seq, r.id, r.type, r.owner, r.garden, JSON.stringify(data), r.createdAt, ...cause];
    }
    case 'webhook':
      return [
        r.id,
        r.owner,
        r.admin,
        r.adminToken,
        r.adminUntil,
        r.url,
        maskOf(r.events),
        r.description,
        r.secret,
        r.previousSecret,
        r.previousSecretUntil,
        r.status,
        r.disabledReason,
        r.createdAt,
        r.lastSuccessAt,
        r.failingSince,
        r.seq,
        r.after,
      ];
    case 'delivery':
      return [r.event, r.endpoint, r.attempts, r.nextAttemptAt, r.createdAt];
    case 'idempotency':
      return [
        r.user,
        r.key,
        r.requestHash,
        r.state,
        r.status,
        r.plantId,
        r.response,
        r.createdAt,
        r.lockedAt,
      ];
    case 'counters':
      return [];
  }
}

export const loadPostgres: LoadTarget = async (url, records) => {
  const c = await connect(url);
  try {
    await c.query('BEGIN');
    try {
      for (const t of [...DATA_TABLES, 'events']) {
        const { rows } = await c.query(`SELECT 1 FROM ${t} LIMIT 1`);
        if (rows.length > 0) throw new StoreNotEmpty(`the store holds data (${t})`);
      }
      await c.query(
        'LOCK TABLE plants, gardens, garden_members, tokens, events, webhook_endpoints, deliveries, idempotency_keys IN EXCLUSIVE MODE',
      );
      // The plants' secondary indexes, made again in one sorted build each once the rows are in.
      const { rows: indexes } = await c.query<{ name: string; def: string }>(
        `SELECT i.indexrelid::regclass::text AS name, pg_get_indexdef(i.indexrelid) AS def FROM pg_index i
         WHERE i.indrelid = 'plants'::regclass AND NOT i.indisprimary
           AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid)`,
      );
      for (const i of indexes) await c.query(`DROP INDEX ${i.name}`);
      await c.query('ALTER TABLE plants DISABLE TRIGGER USER');

      let kind: Kind | null = null;
      let cols: unknown[][] = [];
      let rowsIn = 0;
      let seq = 0;
      let counters: { plantId: number; version: number } | null = null;
      const follows: [string, string][] = [];
      // One page in flight while the next is read from the file. A page is sent once the one before
      // it has answered (pg queues nothing for us: a query sent while another runs is deprecated),
      // and a refusal is met at the next send or at the end, naming the page's kind.
      let inFlight: Promise<void> = Promise.resolve();
      const flush = async () => {
        if (kind === null || rowsIn === 0) return;
        const what = kind;
        const params = cols;
        kind = null;
        cols = [];
        rowsIn = 0;
        await inFlight;
        inFlight = c.query(INSERTS[what].sql, params).then(
          () => {},
          (err: Error) => {
            throw new RecordRefused(`${what} records: ${err.message}`);
          },
        );
        inFlight.catch(() => {});
      };
      for await (const r of records) {
        if (r.kind === 'counters') {
          counters = r;
          continue;
        }
        if (r.kind !== kind || rowsIn === PAGE) {
          await flush();
          kind = r.kind;
          cols = Array.from({ length: INSERTS[r.kind].n }, () => []);
        }
        if (r.kind === 'webhook' && r.after !== null) follows.push([r.id, r.after]);
        const values = row(r, r.kind === 'event' ? ++seq : 0);
        for (let i = 0; i < values.length; i++) cols[i]!.push(values[i]);
        rowsIn++;
      }
      await flush();
      await inFlight;
      // An endpoint following an event the file does not hold would be sent the whole log again.
      const { rows: lost } = await c.query<{ id: string; after: string }>(
        'SELECT u.id, u.after FROM unnest($1::text[], $2::text[]) AS u(id, after) WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.id = u.after)',
        [follows.map((f) => f[0]), follows.map((f) => f[1])],
      );
      if (lost[0])
        throw new RecordRefused(
          `webhook ${lost[0].id} follows event ${lost[0].after}, which the file does not hold`,
        );

      for (const i of indexes) await c.query(i.def);
      await c.query('ALTER TABLE plants ENABLE TRIGGER USER');
      await c.query(
        `INSERT INTO list_marks (garden, top) SELECT garden, max(id) FROM plants GROUP BY garden
         ON CONFLICT (garden) DO UPDATE SET top = greatest(list_marks.top, EXCLUDED.top), reorder = list_marks.reorder + 1`,
      );
      const plantId = Math.max(counters?.plantId ?? 0, 0);
      await c.query(
        `SELECT setval('plants_id_seq', greatest($1::bigint, (SELECT coalesce(max(id), 0) FROM plants)))
         WHERE greatest($1::bigint, (SELECT coalesce(max(id), 0) FROM plants)) > 0`,
        [plantId],
      );
      await c.query(
        `SELECT setval('plant_versions', greatest($1::bigint, (SELECT coalesce(max(version), 1) FROM plants), 1))`,
        [counters?.version ?? 1],
      );
      if (seq > 0) await c.query(`SELECT setval(pg_get_serial_sequence('events', 'seq'), $1)`, [seq]);
      for (const t of ['gardens', 'tokens', 'webhook_endpoints']) {
        await c.query(
          `SELECT setval(pg_get_serial_sequence('${t}', 'seq'), max(seq)) FROM ${t} HAVING count(*) > 0`,
        );
      }
      await c.query('COMMIT');
    } catch (err) {
      await c.query('ROLLBACK').catch(() => {});
      throw err;
    }
  } finally {
    await c.end();
  }
};
