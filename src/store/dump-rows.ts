import type { EventLine, StoreRecord, TokenLine, WebhookLine } from '../schemas/store-file.js';
import { typesOf } from './event-mask.js';
import { eventData } from './plant-changes.js';
import { type AnyEventData, type EventType, isMemberEvent } from './store.js';

// What both engines' exports (sqlite/dump.ts, postgres/dump.ts) read the same way: the statements
// of the tables whose columns have the same names on both, and the records made of their rows.
// A time is whatever the engine's driver gives (SQLite: milliseconds; PostgreSQL: a Date), turned
// into ISO 8601 by the engine's `iso`.

type Row = Record<string, unknown>;

export interface TableDump {
  sql: string;
  record(r: Row, iso: (t: unknown) => string): StoreRecord;
}

const maybe = (iso: (t: unknown) => string, t: unknown): string | null => (t === null ? null : iso(t));

/** Before the events: gardens, their members, plants and tokens, each in a stable order. */
export const TABLES_BEFORE_EVENTS: TableDump[] = [
  {
    sql: 'SELECT id, name, home_user, created_by, created_at, seq FROM gardens ORDER BY seq',
    record: (r, iso) => ({
      kind: 'garden',
      id: r.id as string,
      name: r.name as string,
      homeUser: r.home_user as string | null,
      createdBy: (r.created_by as string | null) ?? '',
      createdAt: iso(r.created_at),
      seq: Number(r.seq),
    }),
  },
  {
    sql: 'SELECT garden_id, user_id, role, added_at FROM garden_members ORDER BY garden_id, user_id',
    record: (r, iso) => ({
      kind: 'member',
      garden: r.garden_id as string,
      user: r.user_id as string,
      role: r.role as 'viewer' | 'editor' | 'owner',
      addedAt: iso(r.added_at),
    }),
  },
  {
    sql: 'SELECT id, garden, owner, name, tag, version FROM plants ORDER BY id',
    record: (r) => ({
      kind: 'plant',
      id: Number(r.id),
      garden: r.garden as string,
      owner: r.owner as string,
      name: r.name as string,
      tag: r.tag as string | null,
      version: Number(r.version),
    }),
  },
  {
    sql: 'SELECT id, user_id, name, scopes, hash, created_at, expires_at, revoked_at, last_used_at, seq FROM tokens ORDER BY seq',
    record: (r, iso) => ({
      kind: 'token',
      id: r.id as string,
      user: r.user_id as string,
      name: r.name as string | null,
      scopes: (r.scopes as string).split(' ').filter(Boolean) as TokenLine['scopes'],
      hash: r.hash as string,
      createdAt: iso(r.created_at),
      expiresAt: maybe(iso, r.expires_at),
      revokedAt: maybe(iso, r.revoked_at),
      lastUsedAt: maybe(iso, r.last_used_at),
      seq: Number(r.seq),
    }),
  },
];

/** After the endpoints: the pending deliveries (their leases left behind) and Idempotency-Keys. */
export const TABLES_AFTER_WEBHOOKS: TableDump[] = [
  {
    sql: "SELECT event_id, endpoint_id, attempts, next_attempt_at, created_at FROM deliveries WHERE state = 'pending' ORDER BY id",
    record: (r, iso) => ({
      kind: 'delivery',
      event: r.event_id as string,
      endpoint: r.endpoint_id as string,
      attempts: Number(r.attempts),
      nextAttemptAt: iso(r.next_attempt_at),
      createdAt: iso(r.created_at),
    }),
  },
  {
    sql: 'SELECT user_id, key, request_hash, state, status, plant_id, response, created_at, locked_at FROM idempotency_keys ORDER BY user_id, key',
    record: (r, iso) => ({
      kind: 'idempotency',
      user: r.user_id as string,
      key: r.key as string,
      requestHash: r.request_hash as string,
      state: r.state as 'pending' | 'done',
      status: r.status === null ? null : Number(r.status),
      plantId: r.plant_id === null ? null : Number(r.plant_id),
      response: r.response as string | null,
      createdAt: iso(r.created_at),
      lockedAt: iso(r.locked_at),
    }),
  },
];

/** A webhook endpoint's row (every column of webhook_endpoints) as its record. */
export function webhookRecord(r: Row, iso: (t: unknown) => string, after: string | null): WebhookLine {
  return {
    kind: 'webhook',
    id: r.id as string,
    owner: r.owner as string,
    admin: r.admin === true || r.admin === 1,
    adminToken: r.admin_token as string | null,
    adminUntil: maybe(iso, r.admin_until),
    url: r.url as string,
    events: typesOf(Number(r.events)),
    description: r.description as string | null,
    secret: r.secret as string,
    previousSecret: r.previous_secret as string | null,
    previousSecretUntil: maybe(iso, r.previous_secret_until),
    status: r.status as 'enabled' | 'disabled',
    disabledReason: r.disabled_reason as string | null,
    createdAt: iso(r.created_at),
    lastSuccessAt: maybe(iso, r.last_success_at),
    failingSince: maybe(iso, r.failing_since),
    seq: Number(r.seq),
    after,
  };
}

/** An event as its record: a plant's change or a membership change, and who caused it. */
export function eventLine(e: {
  id: string;
  type: EventType;
  owner: string;
  garden: string;
  data: AnyEventData;
  createdAt: string;
  actor: string | null;
  requestId: string | null;
}): EventLine {
  const { id, type, owner, garden, data, createdAt, actor, requestId } = e;
  if ('user' in data) {
    const member = { user: data.user, role: data.role, previous: data.previous ?? null };
    return { kind: 'event', id, type, owner, garden, member, createdAt, actor, requestId };
  }
  // plant.purged: the plant's id alone.
  if (!('name' in data)) {
    return { kind: 'event', id, type, owner, garden, plant: { id: data.id }, createdAt, actor, requestId };
  }
  const plant = { id: data.id, name: data.name, tag: data.tag ?? null };
  return {
    kind: 'event',
    id,
    type,
    owner,
    garden,
    plant,
    previous: data.previous ?? null,
    createdAt,
    actor,
    requestId,
  };
}

/**
 * The data of an event's record, as the engines write an event's data (eventData's and
 * memberChange's shapes); null when the record has not what its type needs.
 */
export function lineData(r: EventLine): AnyEventData | null {
  if (isMemberEvent(r.type)) {
    if (r.member === undefined || r.plant !== undefined) return null;
    const { user, role, previous } = r.member;
    return previous === null ? { garden: r.garden, user, role } : { garden: r.garden, user, role, previous };
  }
  if (r.plant === undefined || r.member !== undefined) return null;
  const purged = r.type === 'plant.purged';
  if (!('name' in r.plant)) return purged && r.previous == null ? { id: r.plant.id, garden: r.garden } : null;
  if (purged) return null;
  const { id, name, tag } = r.plant;
  return eventData(id, name, tag, r.garden, r.previous ?? undefined);
}
