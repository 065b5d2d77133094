import type Database from 'better-sqlite3';
import { reachHolds } from '../../access/policy.js';
import { maskOf, typeBit, typeOfBit, typesOf } from '../event-mask.js';
import { eventData } from '../plant-changes.js';
import type {
  ActivityQuery,
  AnyEventData,
  AttemptRecord,
  Change,
  Claim,
  ClaimQuery,
  DeliveryJob,
  EndpointPatch,
  EndpointRecord,
  EventRecord,
  EventType,
  FeedEvent,
  FeedLogRead,
  FinishedAttempt,
  HistoryQuery,
  LeaseRenewal,
  LogProgress,
  MemberEventData,
  NewEvent,
  PagePlant,
  QueuedLeaseRenewal,
  Role,
} from '../store.js';
import {
  EVENT_TYPES,
  isMemberEvent,
  MAX_ENDPOINTS_PER_USER,
  NOT_SENT_ADMIN,
  NOT_SENT_MEMBER,
  refused,
} from '../store.js';

// The log stores an event's type as its bit in endpoint masks (event-mask.ts), so that matching
// an endpoint is one AND in SQL.

interface EventRow {
  seq: number;
  type: number;
  owner: string;
  plant_id: number;
  name: string;
  tag: string | null;
  created_at: number;
  legacy_id: string | null;
  previous: string | null;
  garden: string;
  actor: string | null;
  request_id: string | null;
  traceparent: string | null;
}
const EVENT_COLS =
  'seq, type, owner, plant_id, name, tag, created_at, legacy_id, previous, garden, actor, request_id, traceparent';
// An endpoint has admin reach at `at`: the access policy's reachHolds, in SQL (made with
// plants:admin, and the credential that made it still valid then: its built-in token neither
// revoked nor expired, and before its expiry).
const ADMIN_REACH = (e: string, at: string) =>
  `(${e}.admin = 1 AND (${e}.admin_until IS NULL OR ${e}.admin_until > ${at}) AND (${e}.admin_token IS NULL OR EXISTS (
    SELECT 1 FROM tokens t WHERE t.id = ${e}.admin_token AND t.revoked_at IS NULL
      AND (t.expires_at IS NULL OR t.expires_at > ${at}))))`;
// An endpoint may see an event: the access policy's endpointSees, in SQL (it has admin reach at
// `at`, or its owner is a member of the event's garden at fan-out, the moment the event is
// written); `since`: and was already one when it was.
const MAY_SEE = (e: string, ev: string, at: string, since = false) =>
  `(${ADMIN_REACH(e, at)} OR EXISTS (SELECT 1 FROM garden_members m WHERE m.garden_id = ${ev}.garden AND m.user_id = ${e}.owner${
    since ? ` AND m.added_at <= ${ev}.created_at` : ''
  }))`;
interface EndpointRow {
  id: string;
  owner: string;
  admin: number;
  admin_token: string | null;
  admin_until: number | null;
  url: string;
  events: number;
  description: string | null;
  secret: string;
  previous_secret: string | null;
  previous_secret_until: number | null;
  status: 'enabled' | 'disabled';
  disabled_reason: string | null;
  created_at: number;
  last_success_at: number | null;
  failing_since: number | null;
  position: number;
  lease_owner: string | null;
  lease_until: number | null;
}
interface AttemptRow {
  id: number;
  delivery_id: number;
  endpoint_id: string;
  event_id: string;
  event_type: EventType;
  attempt: number;
  at: number;
  status: number | null;
  outcome: AttemptRecord['outcome'];
  error: string | null;
  duration_ms: number;
  next_attempt_at: number | null;
}

// A row of the change feed's read of the log: seq, type bit, owner, garden, plant id, and the
// plant as it is now (garden, name, tag, version; nulls when there is none).
type FeedRow = [
  number,
  number,
  string,
  string,
  number,
  string | null,
  string | null,
  string | null,
  number | null,
];
const TYPE_OF_BIT = new Map(EVENT_TYPES.map((t) => [typeBit(t), t]));

const date = (ms: number | null) => (ms === null ? null : new Date(ms));
/** How many seqs of the log one read looks at, at most, before the next (see list). */
const WINDOW = 20_000;
// The type bits of plant events: a plant's history holds those (member events have plant_id 0).
const PLANT_BITS = maskOf(EVENT_TYPES.filter((t) => !isMemberEvent(t)));
// History and activity, newest first along events_plant_seq / events_garden_seq: a page reads the
// rows it shows (and, with a garden or type filter, those of the same plant or garden it passes).
// Exported for the test that asks SQLite for their plans.
export const HISTORY_SQL = {
  historyAll: `SELECT ${EVENT_COLS} FROM events WHERE plant_id = ? AND seq < ? AND (type & ${PLANT_BITS}) != 0
    ORDER BY seq DESC LIMIT ?`,
  historyOf: `SELECT ${EVENT_COLS} FROM events WHERE plant_id = ? AND seq < ? AND (type & ${PLANT_BITS}) != 0
      AND garden IN (SELECT value FROM json_each(?))
    ORDER BY seq DESC LIMIT ?`,
  activity: `SELECT ${EVENT_COLS} FROM events WHERE garden = ? AND seq < ? AND (type & ?) != 0
    ORDER BY seq DESC LIMIT ?`,
};
// The change feed's read of the log (SqliteEvents.feed): a window (after, upTo] of the log, only
// the columns the feed uses, each event's plant as it is now beside it (a LEFT JOIN by rowid: none
// for a member event, plant_id 0, nor for a plant that no longer exists). feedAll walks the log by
// seq; feedOf one garden's events along events_garden_seq, in order; feedIn several gardens', each
// along events_garden_seq, sorted by seq (the window's events of those gardens, kept to the limit)
// before the plants are joined, so only the events it returns look their plants up. Exported for
// the test that asks for their plans.
const FEED_COLS = 'e.seq, e.type, e.owner, e.garden, e.plant_id, p.garden, p.name, p.tag, p.version';
export const FEED_SQL = {
  feedAll: `SELECT ${FEED_COLS} FROM events e LEFT JOIN plants p ON p.id = e.plant_id
    WHERE e.seq > ? AND e.seq <= ? AND e.type != 0 ORDER BY e.seq LIMIT ?`,
  feedOf: `SELECT ${FEED_COLS} FROM events e LEFT JOIN plants p ON p.id = e.plant_id
    WHERE e.garden = ? AND e.seq > ? AND e.seq <= ? AND e.type != 0 ORDER BY e.seq LIMIT ?`,
  feedIn: `SELECT ${FEED_COLS} FROM (
      SELECT e.seq, e.type, e.owner, e.garden, e.plant_id
      FROM json_each(?) g CROSS JOIN events e ON e.garden = g.value AND e.seq > ? AND e.seq <= ?
      WHERE e.type != 0 ORDER BY e.seq LIMIT ?) e
    LEFT JOIN plants p ON p.id = e.plant_id ORDER BY e.seq`,
};
// Where a history or activity page starts: before a position of an earlier page (its seq), or
// from the newest. A position of another engine's form ("xid.seq") is read by its seq.
const beforeSeq = (p: string | null): number =>
  p === null ? Number.MAX_SAFE_INTEGER : Number(p.slice(p.lastIndexOf('.') + 1)) || 0;
/**
 * Event ids: `evt_`, this log's key (16 hex digits, random, made with the database) and the seq (16
 * hex digits). Unique without an index: a seq is never reused within a log (purge leaves the
 * newest row, emptied), and another database has another key. Events written before the log took this
 * shape keep their own ids.
 */
const eventId = (key: string, seq: number): string => `evt_${key}${seq.toString(16).padStart(16, '0')}`;
const ID_SQL = (key: string, ev: string) =>
  `coalesce(${ev}.legacy_id, 'evt_${key}' || printf('%016x', ${ev}.seq))`;
const ID_PATTERN = /^evt_([0-9a-f]{16})([0-9a-f]{16})$/;
const toEndpoint = (r: EndpointRow): EndpointRecord => ({
  id: r.id,
  owner: r.owner,
  admin: r.admin === 1,
  adminTokenId: r.admin_token,
  adminUntil: date(r.admin_until),
  url: r.url,
  events: typesOf(r.events),
  description: r.description,
  secret: r.secret,
  previousSecret: r.previous_secret,
  previousSecretUntil: date(r.previous_secret_until),
  status: r.status,
  disabledReason: r.disabled_reason,
  createdAt: new Date(r.created_at),
  lastSuccessAt: date(r.last_success_at),
  failingSince: date(r.failing_since),
});
const toAttempt = (r: AttemptRow): AttemptRecord => ({
  id: String(r.id),
  // 0: a first attempt from the endpoint's log, never a queued delivery (their ids start at 1).
  deliveryId: r.delivery_id === 0 ? null : String(r.delivery_id),
  endpointId: r.endpoint_id,
  eventId: r.event_id,
  eventType: r.event_type,
  attempt: r.attempt,
  at: new Date(r.at),
  status: r.status,
  outcome: r.outcome,
  error: r.error,
  durationMs: r.duration_ms,
  nextAttemptAt: date(r.next_attempt_at),
});

// An event waiting for its batch's insert: type, owner, plant id, name, tag, created_at, previous
// (JSON), garden, actor, request id.
type PendingEvent = [
  number,
  string,
  number,
  string,
  string | null,
  number,
  string | null,
  string,
  string | null,
  string | null,
  string | null,
];

// A member event in the log's plant columns (migration 17): the member as name, its role as tag,
// the former role in previous; plant_id 0. A plant.purged event (migration 19): its plant id, an
// empty name (its garden is the row's).
export function eventColumns(data: AnyEventData): [number, string, string | null, string | null] {
  if ('user' in data) {
    const previous = data.previous === undefined ? null : JSON.stringify({ role: data.previous });
    return [0, data.user, data.role, previous];
  }
  if (!('name' in data)) return [data.id, '', null, null];
  const previous = data.previous === undefined ? null : JSON.stringify(data.previous);
  return [data.id, data.name, data.tag ?? null, previous];
}

// The data of a row, as eventColumns wrote it.
export function rowData(
  r: Pick<EventRow, 'garden' | 'plant_id' | 'name' | 'tag' | 'previous'>,
  type: EventType,
): AnyEventData {
  if (type === 'plant.purged') return { id: r.plant_id, garden: r.garden };
  if (isMemberEvent(type)) {
    const data: MemberEventData = { garden: r.garden, user: r.name, role: r.tag as Role };
    if (r.previous !== null) data.previous = (JSON.parse(r.previous) as { role: Role }).role;
    return data;
  }
  return eventData(
    r.plant_id,
    r.name,
    r.tag,
    r.garden,
    r.previous === null ? undefined : JSON.parse(r.previous),
  );
}

/**
 * The SQL of the event log, webhook endpoints and deliveries. Every method is synchronous and
 * runs inside whatever transaction its caller (SqliteStore's write or read batch) has open.
 */
export class SqliteEvents {
  private readonly s;
  /** This log's key, part of every event id it makes. */
  private readonly key: string;

  constructor(db: Database.Database) {
    const key = db.prepare<[], string>('SELECT key FROM event_log').pluck().get();
    if (key === undefined || !/^[0-9a-f]{16}$/.test(key)) throw new Error('the event log has no key');
    this.key = key;
    const id = (ev: string) => ID_SQL(key, ev);
    this.s = {
      // A commit batch's events, one run per event, its values bound: 1 to 5 µs of CPU an event
      // cheaper than one statement for the batch reading them out of a JSON array (json_each), at
      // 1,000 to 1 events a commit.
      insertEvent: db.prepare<PendingEvent>(
        `INSERT INTO events (type, owner, plant_id, name, tag, created_at, previous, garden, actor, request_id,
           traceparent)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      ),
      insertEndpoint: db.prepare(
        `INSERT INTO webhook_endpoints (id, owner, admin, url, events, description, secret, previous_secret,
           previous_secret_until, status, disabled_reason, created_at, last_success_at, admin_token, admin_until, seq,
           position)
         VALUES (@id, @owner, @admin, @url, @events, @description, @secret, @previous_secret,
           @previous_secret_until, @status, @disabled_reason, @created_at, @last_success_at, @admin_token,
           @admin_until, (SELECT coalesce(max(seq), 0) + 1 FROM webhook_endpoints),
           (SELECT coalesce(max(seq), 0) FROM events))`,
      ),
      // Counted in the writer's transaction: inserts never race past the limit.
      endpointCount: db
        .prepare<[string], number>('SELECT count(*) FROM webhook_endpoints WHERE owner = ?')
        .pluck(),
      // The built-in token that gave an endpoint its admin reach, as reachHolds reads it.
      reachToken: db.prepare<[string], { revoked_at: number | null; expires_at: number | null }>(
        'SELECT revoked_at, expires_at FROM tokens WHERE id = ?',
      ),
      endpointsAll: db.prepare<[], EndpointRow>('SELECT * FROM webhook_endpoints ORDER BY seq'),
      endpointsOf: db.prepare<[string], EndpointRow>(
        'SELECT * FROM webhook_endpoints WHERE owner = ? ORDER BY seq',
      ),
      endpoint: db.prepare<[string], EndpointRow>('SELECT * FROM webhook_endpoints WHERE id = ?'),
      updateEndpoint: db.prepare(
        `UPDATE webhook_endpoints SET secret = @secret, previous_secret = @previous_secret,
           previous_secret_until = @previous_secret_until, status = @status, disabled_reason = @disabled_reason,
           failing_since = @failing_since
         WHERE id = @id`,
      ),
      // Enabled again: it goes on from the log's head (while disabled it got nothing).
      fromHead: db.prepare<[string]>(
        `UPDATE webhook_endpoints SET position = (SELECT coalesce(max(seq), 0) FROM events), lease_owner = NULL,
           lease_until = NULL
         WHERE id = ?`,
      ),
      deleteEndpoint: db.prepare<[string]>('DELETE FROM webhook_endpoints WHERE id = ?'),
      deleteDeliveriesOf: db.prepare<[string]>('DELETE FROM deliveries WHERE endpoint_id = ?'),
      deleteAttemptsOf: db.prepare<[string]>('DELETE FROM delivery_attempts WHERE endpoint_id = ?'),
      // At most `perEndpoint` per endpoint in one claim, so one busy endpoint cannot take every slot;
      // each endpoint's due deliveries come from deliveries_endpoint_due, so the cost follows the
      // endpoints and what is claimed, not how long the queue is. Then `limit` of those, fairly:
      // each owner's in turn (its endpoints' first, then their second …), the owner holding the
      // fewest deliveries already (@load: the claimer's, by owner) first, among equals the most overdue.
      claim: db.prepare<
        [
          {
            owner: string;
            until: number;
            now: number;
            skip: string;
            limit: number;
            per: number;
            load: string;
          },
        ],
        { id: number; event_seq: number; endpoint_id: string; attempts: number }
      >(
        `UPDATE deliveries SET lease_owner = @owner, lease_until = @until
         WHERE id IN (
           SELECT r.id FROM (
             SELECT c.id, c.owner, c.due,
               row_number() OVER (PARTITION BY c.owner ORDER BY c.turn, c.due, c.id) AS owner_turn
             FROM (
               SELECT d.id, e.owner, d.next_attempt_at AS due,
                 row_number() OVER (PARTITION BY e.id ORDER BY d.next_attempt_at, d.id) AS turn
               FROM webhook_endpoints e JOIN deliveries d ON d.id IN (
                 SELECT x.id FROM deliveries x
                 WHERE x.endpoint_id = e.id AND x.state = 'pending' AND x.next_attempt_at <= @now
                   AND (x.lease_until IS NULL OR x.lease_until <= @now)
                 ORDER BY x.next_attempt_at, x.id LIMIT @per)
               WHERE e.status = 'enabled' AND e.id NOT IN (SELECT value FROM json_each(@skip))) c) r
           LEFT JOIN json_each(@load) l ON l.key = r.owner
           ORDER BY coalesce(l.value, 0) + r.owner_turn, r.due, r.id LIMIT @limit)
         RETURNING id, event_seq, endpoint_id, attempts`,
      ),
      anyEnabled: db
        .prepare<[], number>(`SELECT 1 FROM webhook_endpoints WHERE status = 'enabled' LIMIT 1`)
        .pluck(),
      eventBySeq: db.prepare<[number], EventRow>(
        `SELECT ${EVENT_COLS} FROM events WHERE seq = ? AND type != 0`,
      ),
      // The endpoints whose log a claim may read: enabled, with events after their position (or the
      // caller's window) written, and their log lease free, run out, or the caller's.
      logEndpoints: db.prepare<[{ owner: string; now: number; head: number; skip: string }], EndpointRow>(
        `SELECT * FROM webhook_endpoints
         WHERE status = 'enabled' AND (position < @head OR lease_owner = @owner)
           AND (lease_owner IS NULL OR lease_owner = @owner OR lease_until <= @now)
           AND id NOT IN (SELECT value FROM json_each(@skip))
         ORDER BY seq`,
      ),
      // An endpoint's log with every garden's events (admin reach): (after, upTo], of its types.
      logAll: db.prepare<[number, number, number, number], EventRow>(
        `SELECT ${EVENT_COLS} FROM events WHERE seq > ? AND seq <= ? AND (type & ?) != 0 ORDER BY seq LIMIT ?`,
      ),
      // An endpoint's log of its owner's gardens: each garden's events along events_garden_seq, only
      // those written while the owner was already a member (garden_members_user gives the gardens).
      logOf: db.prepare<
        [{ user: string; after: number; upTo: number; mask: number; limit: number }],
        EventRow
      >(
        `SELECT ${EVENT_COLS.split(', ')
          .map((c) => `e.${c}`)
          .join(', ')}
         FROM garden_members m CROSS JOIN events e ON e.garden = m.garden_id AND e.seq > @after AND e.seq <= @upTo
         WHERE m.user_id = @user AND (e.type & @mask) != 0 AND m.added_at <= e.created_at
         ORDER BY e.seq LIMIT @limit`,
      ),
      // Taken from the log: the endpoint's log is the caller's until @until.
      leaseLog: db.prepare<[{ id: string; owner: string; until: number }]>(
        `UPDATE webhook_endpoints SET lease_until = CASE WHEN lease_owner = @owner THEN max(coalesce(lease_until, 0), @until)
           ELSE @until END, lease_owner = @owner WHERE id = @id`,
      ),
      // Nothing there for it: a free endpoint's position moves on to as far as the claim looked.
      passLog: db.prepare<[{ id: string; owner: string; now: number; position: number }]>(
        `UPDATE webhook_endpoints SET position = max(position, @position), lease_owner = NULL, lease_until = NULL
         WHERE id = @id AND (lease_owner IS NULL OR lease_owner = @owner OR lease_until <= @now)`,
      ),
      // A first attempt from the log to be retried: queued as a delivery (its first attempt made),
      // only while the attempt's maker still holds the endpoint's log lease (else the new holder
      // sends the event again from the log).
      queueRetry: db.prepare<
        [{ event: string; seq: number; endpoint: string; next: number; at: number; owner: string }]
      >(
        `INSERT INTO deliveries (event_id, event_seq, endpoint_id, state, attempts, next_attempt_at, created_at)
         SELECT @event, @seq, @endpoint, 'pending', 1, @next, @at
         WHERE EXISTS (SELECT 1 FROM webhook_endpoints WHERE id = @endpoint AND lease_owner = @owner)
           AND NOT EXISTS (SELECT 1 FROM deliveries WHERE endpoint_id = @endpoint AND event_id = @event
             AND state = 'pending')`,
      ),
      // A log lease still the caller's, extended (renewLeases).
      renewLease: db.prepare<[{ id: string; owner: string; until: number }]>(
        `UPDATE webhook_endpoints SET lease_until = max(coalesce(lease_until, 0), @until)
         WHERE id = @id AND lease_owner = @owner`,
      ),
      // A queued delivery's lease still the caller's, extended (renewQueuedLeases).
      renewQueuedLease: db.prepare<[{ id: number; owner: string; now: number; until: number }]>(
        `UPDATE deliveries SET lease_until = max(lease_until, @until)
         WHERE id = @id AND state = 'pending' AND lease_owner = @owner AND lease_until > @now`,
      ),
      // How far a dispatcher got along an endpoint's log, where the lease is still its own.
      progress: db.prepare<[{ id: string; owner: string; position: number; until: number | null }]>(
        `UPDATE webhook_endpoints SET position = max(position, @position),
           lease_owner = CASE WHEN @until IS NULL THEN NULL ELSE lease_owner END, lease_until = @until
         WHERE id = @id AND lease_owner = @owner`,
      ),
      insertAttempt: db.prepare(
        `INSERT INTO delivery_attempts (delivery_id, endpoint_id, event_id, event_type, attempt, at, status,
           outcome, error, duration_ms, next_attempt_at)
         VALUES (@delivery_id, @endpoint_id, @event_id, @event_type, @attempt, @at, @status, @outcome, @error,
           @duration_ms, @next_attempt_at)`,
      ),
      // Finished attempts, many in one statement each: [delivery id, endpoint id, event id, event type,
      // attempt, at, status, outcome, error, duration, next attempt at, lease owner] as a JSON array.
      insertAttempts: db.prepare<[string]>(
        `INSERT INTO delivery_attempts (delivery_id, endpoint_id, event_id, event_type, attempt, at, status,
           outcome, error, duration_ms, next_attempt_at)
         SELECT value->>0, value->>1, value->>2, value->>3, value->>4, value->>5, value->>6, value->>7, value->>8,
           value->>9, value->>10
         FROM json_each(?) ORDER BY key`,
      ),
      finish: db.prepare<[string]>(
        `UPDATE deliveries SET attempts = attempts + 1,
           state = CASE WHEN f.outcome = 'retrying' THEN 'pending' ELSE f.outcome END,
           next_attempt_at = COALESCE(f.next, next_attempt_at), lease_owner = NULL, lease_until = NULL
         FROM (SELECT value->>0 AS id, value->>7 AS outcome, value->>10 AS next, value->>11 AS owner
               FROM json_each(?)) AS f
         WHERE deliveries.id = f.id AND deliveries.lease_owner = f.owner`,
      ),
      succeeded: db.prepare<[number, string]>(
        'UPDATE webhook_endpoints SET last_success_at = ?, failing_since = NULL WHERE id = ?',
      ),
      failing: db.prepare<[number, string]>(
        'UPDATE webhook_endpoints SET failing_since = ? WHERE id = ? AND failing_since IS NULL',
      ),
      disable: db.prepare<[string, string]>(
        `UPDATE webhook_endpoints SET status = 'disabled', disabled_reason = ? WHERE id = ?`,
      ),
      attempts: db.prepare<[string, number, number], AttemptRow>(
        'SELECT * FROM delivery_attempts WHERE endpoint_id = ? AND id < ? ORDER BY id DESC LIMIT ?',
      ),
      recover: db.prepare<[{ endpoint: string; since: number; now: number }]>(
        `INSERT INTO deliveries (event_id, event_seq, endpoint_id, state, next_attempt_at, created_at)
         SELECT ${id('ev')}, ev.seq, e.id, 'pending', @now, @now FROM webhook_endpoints e JOIN events ev
           ON ev.created_at >= @since AND (e.events & ev.type) != 0 AND ${MAY_SEE('e', 'ev', '@now', true)}
         WHERE e.id = @endpoint AND ev.seq <= e.position AND NOT EXISTS (
           SELECT 1 FROM deliveries d WHERE d.endpoint_id = e.id AND d.event_id = ${id('ev')} AND d.state = 'pending')
           AND ${id('ev')} NOT IN (
             SELECT a.event_id FROM delivery_attempts a WHERE a.endpoint_id = @endpoint AND a.outcome = 'succeeded')
         ORDER BY ev.seq`,
      ),
      hasSeq: db.prepare<[number], number>('SELECT seq FROM events WHERE seq = ? AND type != 0').pluck(),
      legacyPosition: db.prepare<[string], number>('SELECT seq FROM events WHERE legacy_id = ?').pluck(),
      head: db.prepare<[], number>('SELECT coalesce(max(seq), 0) FROM events').pluck(),
      historyAll: db.prepare<[number, number, number], EventRow>(HISTORY_SQL.historyAll),
      historyOf: db.prepare<[number, number, string, number], EventRow>(HISTORY_SQL.historyOf),
      activity: db.prepare<[string, number, number, number], EventRow>(HISTORY_SQL.activity),
      // A window of the log, (after, upTo], a slice at a time (see list).
      eventsAll: db.prepare<[number, number, number], EventRow>(
        `SELECT ${EVENT_COLS} FROM events WHERE seq > ? AND seq <= ? AND type != 0 ORDER BY seq LIMIT ?`,
      ),
      // The gardens' events of the window, each garden's read along events_garden_seq (the CROSS JOIN
      // keeps the planner from walking the whole log by seq and filtering by garden).
      eventsOf: db.prepare<[string, number, number, number], EventRow>(
        `SELECT ${EVENT_COLS.split(', ')
          .map((c) => `e.${c}`)
          .join(', ')}
         FROM json_each(?) g CROSS JOIN events e ON e.garden = g.value AND e.seq > ? AND e.seq <= ?
         WHERE e.type != 0 ORDER BY e.seq LIMIT ?`,
      ),
      feedAll: db.prepare<[number, number, number], FeedRow>(FEED_SQL.feedAll).raw(),
      feedOf: db.prepare<[string, number, number, number], FeedRow>(FEED_SQL.feedOf).raw(),
      feedIn: db.prepare<[string, number, number, number], FeedRow>(FEED_SQL.feedIn).raw(),
      // Whether an endpoint's owner is (still) a member of a garden: asked at every delivery.
      isMember: db
        .prepare<[string, string], number>('SELECT 1 FROM garden_members WHERE garden_id = ? AND user_id = ?')
        .pluck(),
      // A delivery not sent: ended without touching its endpoint's success or failure record.
      endUnsent: db.prepare<[number, string]>(
        `UPDATE deliveries SET attempts = attempts + 1, state = 'failed', lease_owner = NULL, lease_until = NULL
         WHERE id = ? AND lease_owner = ?`,
      ),
      purgeAttempts: db.prepare<[number]>('DELETE FROM delivery_attempts WHERE at < ?'),
      // Oldest first along seq (which follows time), a slice at a time: no index on created_at. The
      // newest row stays, emptied to a tombstone (type 0): the next seq is the highest plus one, and
      // must never be one that was used.
      purgeEvents: db.prepare<[number]>(
        `DELETE FROM events WHERE seq IN (SELECT seq FROM events ORDER BY seq LIMIT 5000) AND created_at < ?
           AND seq < (SELECT max(seq) FROM events)`,
      ),
      purgeNewest: db.prepare<[number]>(
        `UPDATE events SET type = 0, owner = '', plant_id = 0, name = '', tag = NULL, legacy_id = NULL, previous = NULL,
           garden = '', actor = NULL, request_id = NULL, traceparent = NULL
         WHERE seq = (SELECT max(seq) FROM events) AND created_at < ? AND type != 0`,
      ),
      // The newest seq the next slice of purgeEvents takes (the same rows), and that purgeNewest empties.
      purgeSliceMax: db
        .prepare<[number], number | null>(
          `SELECT max(seq) FROM (SELECT seq, created_at FROM events ORDER BY seq LIMIT 5000)
           WHERE created_at < ? AND seq < (SELECT max(seq) FROM events)`,
        )
        .pluck(),
      purgeNewestSeq: db
        .prepare<[number], number>(
          'SELECT seq FROM events WHERE seq = (SELECT max(seq) FROM events) AND created_at < ? AND type != 0',
        )
        .pluck(),
      // How far the log has been purged (migration 20): a change feed's position before it → 410.
      setHorizon: db.prepare<[number]>('UPDATE events_horizon SET seq = max(seq, ?)'),
      horizon: db.prepare<[], number>('SELECT seq FROM events_horizon').pluck(),
      // The change feed's reads (contract 13.4): the member's own joins and leaves since a seq, along
      // events_member_seq (migration 20; its predicate repeated so that the planner takes it).
      memberGardens: db
        .prepare<[string, number], string>(
          `SELECT DISTINCT garden FROM events WHERE owner = ? AND type IN (8, 32) AND seq > ?`,
        )
        .pluck(),
      // A garden's plant.deleted events since a seq, along events_garden_seq: their plant ids.
      deletedIds: db
        .prepare<[string, number, number, number], number>(
          `SELECT DISTINCT plant_id FROM events WHERE garden = ? AND seq > ? AND type = ${typeBit('plant.deleted')}
             AND plant_id > ? ORDER BY plant_id LIMIT ?`,
        )
        .pluck(),
      // Deliveries whose event is gone (purge takes the oldest, and empties the newest).
      purgeDeliveries: db.prepare(
        `DELETE FROM deliveries WHERE event_seq < coalesce((SELECT min(seq) FROM events), 0)
           OR event_seq IN (SELECT seq FROM events WHERE type = 0)`,
      ),
    };
  }

  // The open transaction's events, inserted together by writeEvents() before it commits, and the
  // deliveries it queued (recover).
  private pending: PendingEvent[] = [];
  private queued = 0;

  /** Records an event of the open transaction; writeEvents() writes it before the commit. */
  record(event: NewEvent, type: EventType, owner: string, garden: string, data: AnyEventData): void {
    const [plantId, name, tag, previous] = eventColumns(data);
    this.pending.push([
      typeBit(type),
      owner,
      plantId,
      name,
      tag,
      event.at.getTime(),
      previous,
      garden,
      event.actor ?? null,
      event.requestId ?? null,
      event.traceparent ?? null,
    ]);
  }

  /** How many events are recorded and not yet written (a savepoint's rollback returns to it). */
  mark(): number {
    return this.pending.length;
  }

  /** Forgets the events recorded after `mark` (their write was rolled back to a savepoint). */
  rewind(mark: number): void {
    this.pending.length = mark;
  }

  /**
   * Writes the events recorded in the open transaction, in order: the event only, whatever the
   * number of endpoints (each follows the log from its position). Returns how many events and
   * queued deliveries the transaction wrote in all (not 0: the process's listeners are told after the commit).
   */
  writeEvents(): number {
    const events = this.pending;
    const n = this.queued + events.length;
    this.forget();
    for (const e of events) this.s.insertEvent.run(...e);
    return n;
  }

  /** Forgets what the open transaction recorded (it is being rolled back). */
  forget(): void {
    this.pending = [];
    this.queued = 0;
  }

  private toEvent(r: EventRow): EventRecord {
    const type = typeOfBit(r.type)!;
    return {
      id: r.legacy_id ?? eventId(this.key, r.seq),
      type,
      owner: r.owner,
      garden: r.garden,
      data: rowData(r, type),
      createdAt: new Date(r.created_at),
      position: String(r.seq),
      actor: r.actor,
      requestId: r.request_id,
    };
  }

  /** Stores the endpoint unless its owner has MAX_ENDPOINTS_PER_USER already. */
  insertEndpoint(e: EndpointRecord): Change<true, 'too_many_endpoints'> {
    if (this.s.endpointCount.get(e.owner)! >= MAX_ENDPOINTS_PER_USER) return refused('too_many_endpoints');
    this.s.insertEndpoint.run({
      id: e.id,
      owner: e.owner,
      admin: e.admin ? 1 : 0,
      url: e.url,
      events: maskOf(e.events),
      description: e.description,
      secret: e.secret,
      previous_secret: e.previousSecret,
      previous_secret_until: e.previousSecretUntil?.getTime() ?? null,
      status: e.status,
      disabled_reason: e.disabledReason,
      created_at: e.createdAt.getTime(),
      last_success_at: e.lastSuccessAt?.getTime() ?? null,
      admin_token: e.adminTokenId,
      admin_until: e.adminUntil?.getTime() ?? null,
    });
    return { ok: true };
  }

  listEndpoints(owner: string | null): EndpointRecord[] {
    return (owner === null ? this.s.endpointsAll.all() : this.s.endpointsOf.all(owner)).map(toEndpoint);
  }

  getEndpoint(id: string): EndpointRecord | null {
    const row = this.s.endpoint.get(id);
    return row ? toEndpoint(row) : null;
  }

  updateEndpoint(id: string, patch: EndpointPatch): Change<EndpointRecord, 'missing'> {
    const current = this.getEndpoint(id);
    if (!current) return refused('missing');
    const next = { ...current, ...patch };
    if (current.status === 'disabled' && next.status === 'enabled') this.s.fromHead.run(id);
    this.s.updateEndpoint.run({
      id,
      secret: next.secret,
      previous_secret: next.previousSecret,
      previous_secret_until: next.previousSecretUntil?.getTime() ?? null,
      status: next.status,
      disabled_reason: next.disabledReason,
      failing_since: next.failingSince?.getTime() ?? null,
    });
    return { ok: next };
  }

  deleteEndpoint(id: string): Change<true, 'missing'> {
    this.s.deleteAttemptsOf.run(id);
    this.s.deleteDeliveriesOf.run(id);
    return this.s.deleteEndpoint.run(id).changes > 0 ? { ok: true } : refused('missing');
  }

  /**
   * The due queued deliveries first (as fair as the claim SQL makes them), then first attempts from
   * the endpoints' logs up to `limit`: the writer is the only one, so nobody else reads an
   * endpoint's log between this read and the lease it takes.
   */
  claim(q: ClaimQuery): Claim {
    // No endpoint enabled: nothing either step below could claim (both take enabled endpoints'
    // work only). The dispatcher claims every 10 ms while events are written, and the claim's
    // statements cost about 140 µs of the writer's CPU even with no endpoint at all.
    if (this.s.anyEnabled.get() === undefined) return { jobs: [], windows: {} };
    const now = q.now.getTime();
    const until = now + q.leaseMs;
    const rows = this.s.claim.all({
      owner: q.leaseOwner,
      until,
      now,
      skip: JSON.stringify(q.skipEndpoints),
      limit: q.limit,
      per: q.perEndpoint,
      load: JSON.stringify(q.ownerLoad ?? {}),
    });
    const endpoints = new Map<string, EndpointRecord | null>();
    // Whether the endpoint has admin reach now (the access policy's reachHolds), asked once per
    // endpoint in this claim.
    const reach = new Map<string, boolean>();
    const hasReach = (e: EndpointRecord) => {
      let r = reach.get(e.id);
      if (r === undefined) {
        r = e.admin && reachHolds(e, q.now, this.reachToken(e.adminTokenId));
        reach.set(e.id, r);
      }
      return r;
    };
    const jobs: DeliveryJob[] = [];
    // Jobs of this claim by endpoint, and by owner (with what the caller holds already).
    const taken = new Map<string, number>();
    const load = new Map<string, number>(Object.entries(q.ownerLoad ?? {}));
    const take = (job: DeliveryJob) => {
      jobs.push(job);
      taken.set(job.endpoint.id, (taken.get(job.endpoint.id) ?? 0) + 1);
      load.set(job.endpoint.owner, (load.get(job.endpoint.owner) ?? 0) + 1);
    };
    for (const r of rows) {
      if (!endpoints.has(r.endpoint_id)) endpoints.set(r.endpoint_id, this.getEndpoint(r.endpoint_id));
      const endpoint = endpoints.get(r.endpoint_id);
      const event = this.s.eventBySeq.get(r.event_seq);
      if (!endpoint || !event) continue;
      const job = {
        id: String(r.id),
        attempts: r.attempts,
        event: this.toEvent(event),
        endpoint,
        traceparent: event.traceparent,
      };
      // The access policy's endpointSees, spelt out so that the owner's membership of the event's
      // garden is read only for an endpoint without reach.
      if (hasReach(endpoint) || this.s.isMember.get(event.garden, endpoint.owner) !== undefined) take(job);
      else this.unsent(job, q.leaseOwner, now);
    }
    const windows: Record<string, string> = {};
    const head = this.s.head.get() ?? 0;
    const candidates = this.s.logEndpoints
      .all({ owner: q.leaseOwner, now, head, skip: JSON.stringify(q.skipEndpoints) })
      .map((row) => ({ row, endpoint: toEndpoint(row) }));
    // The owners holding the fewest first (as the claim SQL orders the queued ones), then each
    // owner's endpoints in their order.
    candidates.sort((a, b) => (load.get(a.endpoint.owner) ?? 0) - (load.get(b.endpoint.owner) ?? 0));
    for (const { row, endpoint } of candidates) {
      const mine = row.lease_owner === q.leaseOwner;
      const window = mine ? q.windows?.[endpoint.id] : undefined;
      // A window is read on from where it reaches, unless another dispatcher (whose lease ran out)
      // moved the position on past it meanwhile.
      const after = window === undefined ? row.position : Math.max(Number(window), row.position);
      const room = Math.min(q.limit - jobs.length, q.perEndpoint - (taken.get(endpoint.id) ?? 0));
      const upTo = Math.min(head, after + WINDOW);
      const events =
        room <= 0 || after >= upTo
          ? []
          : hasReach(endpoint)
            ? this.s.logAll.all(after, upTo, maskOf(endpoint.events), room)
            : this.s.logOf.all({
                user: endpoint.owner,
                after,
                upTo,
                mask: maskOf(endpoint.events),
                limit: room,
              });
      for (const e of events) {
        take({ id: null, attempts: 0, event: this.toEvent(e), endpoint, traceparent: e.traceparent });
      }
      // As far as this claim looked: the last event taken when it took all it could, else upTo.
      const reached = room <= 0 ? after : events.length === room ? events.at(-1)!.seq : upTo;
      if (events.length > 0 || window !== undefined) {
        this.s.leaseLog.run({ id: endpoint.id, owner: q.leaseOwner, until });
        windows[endpoint.id] = String(reached);
      } else if (room > 0) {
        this.s.passLog.run({ id: endpoint.id, owner: q.leaseOwner, now, position: reached });
      }
    }
    return { jobs, windows };
  }

  private reachToken(id: string | null): { revoked: boolean; expiresAt: Date | null } | null {
    const t = id === null ? undefined : this.s.reachToken.get(id);
    return t === undefined ? null : { revoked: t.revoked_at !== null, expiresAt: date(t.expires_at) };
  }

  // The endpoint's owner left the event's garden after it was written (or the endpoint's admin reach
  // ended, and its owner is no member of that garden): the delivery ends, logged
  // as not sent with the reason, and the endpoint's own record (failing since…) is left alone.
  private unsent(job: DeliveryJob, leaseOwner: string, now: number): void {
    this.s.insertAttempt.run({
      delivery_id: Number(job.id),
      endpoint_id: job.endpoint.id,
      event_id: job.event.id,
      event_type: job.event.type,
      attempt: job.attempts + 1,
      at: now,
      status: null,
      outcome: 'failed',
      error: `${job.endpoint.admin ? NOT_SENT_ADMIN : NOT_SENT_MEMBER}${job.event.garden}`,
      duration_ms: 0,
      next_attempt_at: null,
    });
    this.s.endUnsent.run(Number(job.id), leaseOwner);
  }

  /**
   * Logs the attempts and reschedules or ends their queued deliveries (those still leased to the
   * one that made the attempt), in two statements for the lot; queues the first attempts from the
   * log that are to be retried; then each endpoint's record once, as the attempts in their order
   * would have left it; then how far each endpoint's log got.
   */
  finish(list: FinishedAttempt[], progress: LogProgress[] = []): void {
    if (list.length > 0) {
      const rows = list.map(({ deliveryId, leaseOwner, attempt: a }) => [
        deliveryId === null ? 0 : Number(deliveryId),
        a.endpointId,
        a.eventId,
        a.eventType,
        a.attempt,
        a.at.getTime(),
        a.status,
        a.outcome,
        a.error,
        Math.round(a.durationMs),
        a.nextAttemptAt?.getTime() ?? null,
        leaseOwner,
      ]);
      const json = JSON.stringify(rows);
      this.s.insertAttempts.run(json);
      this.s.finish.run(json);
      for (const { deliveryId, leaseOwner, attempt: a } of list) {
        if (deliveryId !== null || a.outcome !== 'retrying' || a.nextAttemptAt === null) continue;
        const seq = this.position(a.eventId);
        if (seq === null) continue; // purged meanwhile: nothing left to send
        this.s.queueRetry.run({
          event: a.eventId,
          seq: Number(seq),
          endpoint: a.endpointId,
          next: a.nextAttemptAt.getTime(),
          at: a.at.getTime(),
          owner: leaseOwner,
        });
      }
    }
    // Per endpoint: its last success, and the first failure after it (or the first of all).
    const ends = new Map<string, { success: number | null; failure: number | null }>();
    for (const { attempt: a } of list) {
      const at = a.at.getTime();
      const e = ends.get(a.endpointId);
      if (a.outcome === 'succeeded') ends.set(a.endpointId, { success: at, failure: null });
      else if (!e) ends.set(a.endpointId, { success: null, failure: at });
      else e.failure ??= at;
    }
    for (const [id, e] of ends) {
      if (e.success !== null) this.s.succeeded.run(e.success, id);
      if (e.failure !== null) this.s.failing.run(e.failure, id);
    }
    for (const f of list) if (f.disableEndpoint) this.s.disable.run(f.disableEndpoint, f.attempt.endpointId);
    for (const p of progress) {
      this.s.progress.run({
        id: p.endpointId,
        owner: p.leaseOwner,
        position: Number(p.position),
        until: p.leaseUntil?.getTime() ?? null,
      });
    }
  }

  renewLeases(q: LeaseRenewal): string[] {
    const until = q.until.getTime();
    return q.endpoints.filter((id) => this.s.renewLease.run({ id, owner: q.owner, until }).changes > 0);
  }

  renewQueuedLeases(q: QueuedLeaseRenewal): string[] {
    const now = q.now.getTime();
    const until = q.until.getTime();
    return q.deliveries.filter(
      (id) =>
        /^[0-9]{1,15}$/.test(id) &&
        this.s.renewQueuedLease.run({ id: Number(id), owner: q.owner, now, until }).changes > 0,
    );
  }

  listAttempts(endpointId: string, q: { limit: number; beforeId: string | null }): AttemptRecord[] {
    const before = q.beforeId === null ? Number.MAX_SAFE_INTEGER : Number(q.beforeId);
    return this.s.attempts.all(endpointId, before, q.limit).map(toAttempt);
  }

  recover(endpointId: string, since: Date, now: Date): number {
    const n = this.s.recover.run({
      endpoint: endpointId,
      since: since.getTime(),
      now: now.getTime(),
    }).changes;
    this.queued += n;
    return n;
  }

  position(id: string): string | null {
    const m = ID_PATTERN.exec(id);
    const seq =
      m?.[1] === this.key ? this.s.hasSeq.get(Number.parseInt(m[2]!, 16)) : this.s.legacyPosition.get(id);
    return seq === undefined ? null : String(seq);
  }

  head(): string {
    return String(this.s.head.get() ?? 0);
  }

  /**
   * Up to `limit` events after `after` of the gardens given (null: every one), and the position the
   * reader has now seen everything up to: the last event's when the page is full, else the log's
   * head as it was read before the events were (one writer: every seq up to it had committed), so a
   * reader of a quiet garden moves along with the log instead of scanning the same stretch of
   * everyone else's events again. The log is read in windows of WINDOW seqs, so that sorting one
   * reader's events never takes more than a window's worth of them.
   */
  list(q: { after: string; gardens: string[] | null; limit: number }): {
    events: EventRecord[];
    position: string;
  } {
    const after = Number(q.after);
    const head = this.s.head.get() ?? 0;
    const gardens = q.gardens === null ? null : JSON.stringify([...new Set(q.gardens)]);
    const rows: EventRow[] = [];
    // No garden: nothing to read, and nothing to look at.
    for (let from = q.gardens?.length === 0 ? head : after; from < head; ) {
      const to = Math.min(head, from + WINDOW);
      const left = q.limit - rows.length;
      rows.push(
        ...(gardens === null
          ? this.s.eventsAll.all(from, to, left)
          : this.s.eventsOf.all(gardens, from, to, left)),
      );
      if (rows.length === q.limit) {
        return { events: rows.map((r) => this.toEvent(r)), position: String(rows.at(-1)!.seq) };
      }
      from = to;
    }
    return { events: rows.map((r) => this.toEvent(r)), position: String(Math.max(after, head)) };
  }

  /**
   * The change feed's read of the log (ChangePort.feedLog): list's events after `after` and where
   * a reader goes on from, with only what the feed uses of them; when they fall short of `limit`,
   * the events after `tailAfter` (committedEvents: every committed event, one writer); and the
   * plants they name as they are now, read with them (each event's row joined to its plant's).
   * `head`: the log's head as the caller read it in this transaction (else read here).
   */
  feed(
    q: { after: string; gardens: string[] | null; limit: number; tailAfter: string; tailLimit: number },
    head = this.s.head.get() ?? 0,
  ): FeedLogRead {
    const gardens = q.gardens === null ? null : [...new Set(q.gardens)];
    const plants = new Map<number, PagePlant>();
    const read = this.feedEvents(Number(q.after), gardens, q.limit, head, plants);
    const committed =
      read.events.length < q.limit
        ? this.feedEvents(Number(q.tailAfter), gardens, q.tailLimit, head, plants).events
        : null;
    return { events: read.events, position: read.position, committed, plants: [...plants.values()] };
  }

  // As list, a window at a time up to `head`.
  private feedEvents(
    after: number,
    gardens: string[] | null,
    limit: number,
    head: number,
    plants: Map<number, PagePlant>,
  ): { events: FeedEvent[]; position: string } {
    const set = gardens === null || gardens.length < 2 ? null : JSON.stringify(gardens);
    let rows: FeedRow[] = [];
    for (let from = gardens?.length === 0 ? head : after; from < head; ) {
      const to = Math.min(head, from + WINDOW);
      const left = limit - rows.length;
      const part =
        gardens === null
          ? this.s.feedAll.all(from, to, left)
          : set === null
            ? this.s.feedOf.all(gardens[0]!, from, to, left)
            : this.s.feedIn.all(set, from, to, left);
      rows = rows.length === 0 ? part : rows.concat(part);
      if (rows.length === limit) {
        return { events: this.feedRows(rows, plants), position: String(rows.at(-1)![0]) };
      }
      from = to;
    }
    return { events: this.feedRows(rows, plants), position: String(Math.max(after, head)) };
  }

  private feedRows(rows: FeedRow[], plants: Map<number, PagePlant>): FeedEvent[] {
    const events: FeedEvent[] = new Array(rows.length);
    for (let i = 0; i < rows.length; i++) {
      const [seq, bit, owner, garden, id, pGarden, name, tag, version] = rows[i]!;
      const type = TYPE_OF_BIT.get(bit)!;
      const member = isMemberEvent(type);
      events[i] = { position: String(seq), type, owner, garden, plant: member ? null : id };
      if (!member && pGarden !== null)
        plants.set(id, { id, garden: pGarden, name: name!, tag, version: version! });
    }
    return events;
  }

  /** A page of a plant's history (HistoryQuery), newest first. */
  history(q: HistoryQuery): EventRecord[] {
    const before = beforeSeq(q.before);
    const rows =
      q.gardens === null
        ? this.s.historyAll.all(q.plantId, before, q.limit)
        : q.gardens.length === 0
          ? []
          : this.s.historyOf.all(q.plantId, before, JSON.stringify(q.gardens), q.limit);
    return rows.map((r) => this.toEvent(r));
  }

  /** A page of a garden's activity (ActivityQuery), newest first. */
  activity(q: ActivityQuery): EventRecord[] {
    const mask = maskOf(q.types ?? EVENT_TYPES);
    return this.s.activity.all(q.garden, beforeSeq(q.before), mask, q.limit).map((r) => this.toEvent(r));
  }

  purge(before: Date): number {
    const t = before.getTime();
    this.s.purgeAttempts.run(t);
    let n = 0;
    let newest = 0;
    for (;;) {
      const max = this.s.purgeSliceMax.get(t) ?? null;
      const slice = this.s.purgeEvents.run(t).changes;
      if (slice === 0) break;
      n += slice;
      if (max !== null) newest = Math.max(newest, max);
    }
    const last = this.s.purgeNewestSeq.get(t);
    n += this.s.purgeNewest.run(t).changes;
    if (last !== undefined) newest = Math.max(newest, last);
    if (newest > 0) this.s.setHorizon.run(newest);
    if (n > 0) this.s.purgeDeliveries.run();
    return n;
  }

  /** How far the log has been purged (ChangePort.purgedUpTo). */
  purgedUpTo(): string {
    return String(this.s.horizon.get() ?? 0);
  }

  /** The gardens `user` joined or left after `after` (ChangePort.memberEventGardens). */
  memberGardens(user: string, after: string): string[] {
    return this.s.memberGardens.all(user, Number(after));
  }

  /** A garden's plants deleted after `after` (ChangePort.deletedPlantIds). */
  deletedIds(q: { garden: string; after: string; afterId: number; limit: number }): number[] {
    return this.s.deletedIds.all(q.garden, Number(q.after), q.afterId, q.limit);
  }
}
