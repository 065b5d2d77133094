import Database from 'better-sqlite3';
import type { StoreRecord } from '../../schemas/store-file.js';
import {
  DATA_TABLES,
  type Loader,
  type LoadTarget,
  RecordRefused,
  recordName,
  StoreNotEmpty,
} from '../dump.js';
import {
  eventLine,
  lineData,
  TABLES_AFTER_WEBHOOKS,
  TABLES_BEFORE_EVENTS,
  webhookRecord,
} from '../dump-rows.js';
import { maskOf, typeBit, typeOfBit } from '../event-mask.js';
import { eventColumns, rowData } from './events.js';
import { LAST_PLANT_ID } from './plant-writes.js';
import { fillSearch, fillWords } from './search.js';
import { openConnection } from './writes.js';

// Export and import of a SQLite store (contract section 12; the file: src/ops/store-file.ts).
// An export reads one snapshot: a read transaction on a connection of its own, which a serving
// process's commits do not disturb. An import is one write transaction into an empty store.

const ms = (t: string | null): number | null => (t === null ? null : Date.parse(t));

/** Every record of the store at `path`, in the file's order, from one snapshot. */
export async function* dumpSqlite(path: string): AsyncGenerator<StoreRecord> {
  const db = new Database(path, { readonly: true, fileMustExist: true });
  db.pragma('busy_timeout = 5000');
  const iso = (t: unknown) => new Date(t as number).toISOString();
  try {
    db.exec('BEGIN');
    // The snapshot starts at the transaction's first read.
    const key = db.prepare<[], string>('SELECT key FROM event_log').pluck().get()!;
    const eventId = (legacy: string | null, seq: number) =>
      legacy ?? `evt_${key}${seq.toString(16).padStart(16, '0')}`;
    const rows = <T>(sql: string) => db.prepare<[], T>(sql).iterate();
    for (const t of TABLES_BEFORE_EVENTS) {
      for (const r of rows<Record<string, unknown>>(t.sql)) yield t.record(r, iso);
    }
    // An emptied row (type 0) only keeps the log's last seq after a purge: it is no event.
    for (const r of rows<{
      seq: number;
      type: number;
      owner: string;
      garden: string;
      plant_id: number;
      name: string;
      tag: string | null;
      previous: string | null;
      created_at: number;
      legacy_id: string | null;
      actor: string | null;
      request_id: string | null;
    }>(
      'SELECT seq, type, owner, garden, plant_id, name, tag, previous, created_at, legacy_id, actor, request_id FROM events WHERE type != 0 ORDER BY seq',
    )) {
      const type = typeOfBit(r.type)!;
      yield eventLine({
        id: eventId(r.legacy_id, r.seq),
        type,
        owner: r.owner,
        garden: r.garden,
        data: rowData(r, type),
        createdAt: iso(r.created_at),
        actor: r.actor,
        requestId: r.request_id,
      });
    }
    for (const r of rows<Record<string, unknown> & { after_seq: number | null; after_legacy: string | null }>(
      `SELECT w.*, a.seq AS after_seq, a.legacy_id AS after_legacy FROM webhook_endpoints w
       LEFT JOIN events a ON a.seq = (SELECT max(seq) FROM events e WHERE e.seq <= w.position AND e.type != 0)
       ORDER BY w.seq`,
    )) {
      yield webhookRecord(r, iso, r.after_seq === null ? null : eventId(r.after_legacy, r.after_seq));
    }
    for (const t of TABLES_AFTER_WEBHOOKS) {
      for (const r of rows<Record<string, unknown>>(t.sql)) yield t.record(r, iso);
    }
    const counters = db
      .prepare<[], { plant_id: number; version: number }>(
        `SELECT max(${LAST_PLANT_ID}, coalesce((SELECT max(id) FROM trash), 0)) AS plant_id,
                max((SELECT rev FROM write_clock), coalesce((SELECT max(version) FROM plants), 0),
                  coalesce((SELECT max(version) FROM trash), 0)) AS version`,
      )
      .get()!;
    yield { kind: 'counters', plantId: counters.plant_id, version: counters.version };
    db.exec('COMMIT');
  } finally {
    db.close();
  }
}

/** The schema version of the store at `path`. */
export function sqliteSchema(path: string): number {
  const db = new Database(path, { readonly: true, fileMustExist: true });
  try {
    return (
      db.prepare<[], number>('SELECT coalesce(max(version), 0) FROM schema_migrations').pluck().get() ?? 0
    );
  } finally {
    db.close();
  }
}

/**
 * Loads records into the (migrated) store at `path` in one write transaction. The plants' own
 * indexes and triggers are dropped for the load and made again at its end, and the search index is
 * filled then: one sorted build each, rather than an entry per row. Throws StoreNotEmpty, or what
 * the records' iteration throws; either way the transaction is rolled back and nothing is written.
 */
export const loadSqlite: LoadTarget = async (path, records) => {
  const db = openConnection(path, 'full');
  try {
    db.exec('BEGIN IMMEDIATE');
    try {
      for (const t of DATA_TABLES) {
        if (db.prepare(`SELECT 1 FROM ${t} LIMIT 1`).get())
          throw new StoreNotEmpty(`the store holds data (${t})`);
      }
      if (db.prepare('SELECT 1 FROM events WHERE type != 0 LIMIT 1').get()) {
        throw new StoreNotEmpty('the store holds data (events)');
      }
      const objects = db
        .prepare<[], { type: string; name: string; sql: string }>(
          "SELECT type, name, sql FROM sqlite_master WHERE tbl_name = 'plants' AND type IN ('index', 'trigger') AND sql IS NOT NULL",
        )
        .all();
      for (const o of objects) db.exec(`DROP ${o.type.toUpperCase()} ${o.name}`);
      const load = sqliteLoader(db);
      for await (const r of records) {
        try {
          load(r);
        } catch (err) {
          if (err instanceof RecordRefused) throw err;
          throw new RecordRefused(`${recordName(r)}: ${(err as Error).message}`);
        }
      }
      for (const o of objects) db.exec(o.sql);
      fillSearch(db);
      fillWords(db);
      db.exec('COMMIT');
    } catch (err) {
      if (db.inTransaction) db.exec('ROLLBACK');
      throw err;
    }
  } finally {
    db.close();
  }
};

function sqliteLoader(db: Database.Database): Loader {
  const s = {
    garden: db.prepare(
      'INSERT INTO gardens (id, name, home_user, created_by, created_at, seq) VALUES (?, ?, ?, ?, ?, ?)',
    ),
    member: db.prepare('INSERT INTO garden_members (garden_id, user_id, role, added_at) VALUES (?, ?, ?, ?)'),
    plant: db.prepare('INSERT INTO plants (id, owner, name, tag, version, garden) VALUES (?, ?, ?, ?, ?, ?)'),
    trash: db.prepare(
      `INSERT INTO trash (id, garden, owner, name, tag, version, deleted_at, deleted_by, purge_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ),
    token: db.prepare(
      `INSERT INTO tokens (id, user_id, name, scopes, hash, created_at, expires_at, revoked_at, last_used_at, seq)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ),
    event: db.prepare(
      `INSERT INTO events (seq, type, owner, plant_id, name, tag, created_at, legacy_id, previous, garden, actor, request_id)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ),
    webhook: db.prepare(
      `INSERT INTO webhook_endpoints (id, owner, admin, admin_token, admin_until, url, events, description, secret,
         previous_secret, previous_secret_until, status, disabled_reason, created_at, last_success_at, failing_since, seq, position)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,
         CASE WHEN ? IS NULL THEN 0 ELSE coalesce((SELECT seq FROM events WHERE legacy_id = ?), -1) END)`,
    ),
    delivery: db.prepare(
      `INSERT INTO deliveries (event_id, event_seq, endpoint_id, state, attempts, next_attempt_at, created_at)
       VALUES (?, coalesce((SELECT seq FROM events WHERE legacy_id = ?), 0), ?, 'pending', ?, ?, ?)`,
    ),
    idempotency: db.prepare(
      `INSERT INTO idempotency_keys (user_id, key, request_hash, state, status, plant_id, response, created_at, locked_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ),
    plantIds: db.prepare(
      `INSERT INTO sqlite_sequence (name, seq) SELECT 'plants', 0 WHERE NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'plants')`,
    ),
    raisePlantIds: db.prepare("UPDATE sqlite_sequence SET seq = max(seq, ?) WHERE name = 'plants'"),
    raiseRev: db.prepare('UPDATE write_clock SET rev = max(rev, ?)'),
    unknownPosition: db
      .prepare<[], string>('SELECT id FROM webhook_endpoints WHERE position = -1 LIMIT 1')
      .pluck(),
  };
  let seq = 0;
  return (r) => {
    switch (r.kind) {
      case 'garden':
        s.garden.run(r.id, r.name, r.homeUser, r.createdBy, Date.parse(r.createdAt), r.seq);
        return;
      case 'member':
        s.member.run(r.garden, r.user, r.role, Date.parse(r.addedAt));
        return;
      case 'plant':
        s.plant.run(r.id, r.owner, r.name, r.tag, r.version, r.garden);
        return;
      case 'trash':
        s.trash.run(
          r.id,
          r.garden,
          r.owner,
          r.name,
          r.tag,
          r.version,
          Date.parse(r.deletedAt),
          r.deletedBy,
          Date.parse(r.purgeAt),
        );
        return;
      case 'token':
        s.token.run(
          r.id,
          r.user,
          r.name,
          r.scopes.join(' '),
          r.hash,
          Date.parse(r.createdAt),
          ms(r.expiresAt),
          ms(r.revokedAt),
          ms(r.lastUsedAt),
          r.seq,
        );
        return;
      case 'event': {
        const data = lineData(r);
        if (data === null) throw new RecordRefused(`event ${r.id} has not what a ${r.type} event needs`);
        const [plantId, name, tag, previous] = eventColumns(data);
        s.event.run(
          ++seq,
          typeBit(r.type),
          r.owner,
          plantId,
          name,
          tag,
          Date.parse(r.createdAt),
          r.id,
          previous,
          r.garden,
          r.actor ?? null,
          r.requestId ?? null,
        );
        return;
      }
      case 'webhook':
        s.webhook.run(
          r.id,
          r.owner,
          r.admin ? 1 : 0,
          r.adminToken,
          ms(r.adminUntil),
          r.url,
          maskOf(r.events),
          r.description,
          r.secret,
          r.previousSecret,
          ms(r.previousSecretUntil),
          r.status,
          r.disabledReason,
          Date.parse(r.createdAt),
          ms(r.lastSuccessAt),
          ms(r.failingSince),
          r.seq,
          r.after,
          r.after,
        );
        if (s.unknownPosition.get() !== undefined) {
          throw new RecordRefused(`webhook ${r.id} follows event ${r.after}, which the file does not hold`);
        }
        return;
      case 'delivery':
        s.delivery.run(
          r.event,
          r.event,
          r.endpoint,
          r.attempts,
          Date.parse(r.nextAttemptAt),
          Date.parse(r.createdAt),
        );
        return;
      case 'idempotency':
        s.idempotency.run(
          r.user,
          r.key,
          r.requestHash,
          r.state,
          r.status,
          r.plantId,
          r.response,
          Date.parse(r.createdAt),
          Date.parse(r.lockedAt),
        );
        return;
      case 'counters':
        s.plantIds.run();
        s.raisePlantIds.run(r.plantId);
        s.raiseRev.run(r.version);
        return;
    }
  };
}
