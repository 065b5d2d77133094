import { typeBit, typesOf } from '../event-mask.js';
import {
  type AttemptRecord,
  type EndpointRecord,
  EVENT_TYPES,
  type EventData,
  type EventRecord,
  type EventType,
  NOT_SENT_ADMIN,
  NOT_SENT_MEMBER,
} from '../store.js';

// The SQL of the event log, webhook endpoints and deliveries on PostgreSQL (mirrors sqlite/events.ts).

// A plant row `p` as the event's data: NewPlant's shape, tag only when set, and its garden, keys in
// eventData's order.
export const DATA = `(CASE WHEN p.tag IS NULL THEN json_build_object('id', p.id, 'name', p.name, 'garden', p.garden)
  ELSE json_build_object('id', p.id, 'name', p.name, 'tag', p.tag, 'garden', p.garden) END)::text`;

// An event id: `evt_`, the time in milliseconds (12 hex digits) and 80 random bits (20 hex digits),
// so that the unique index on ids grows at its end rather than on a random page per insert.
const NEW_ID = (
  at: string,
) => `'evt_' || lpad(to_hex((extract(epoch FROM ${at}::timestamptz) * 1000)::bigint), 12, '0')
  || substr(md5(gen_random_uuid()::text), 1, 20)`;

// An endpoint `w` has admin reach at `at`: the access policy's reachHolds, in SQL (made with
// plants:admin, and the credential that made it still valid then: its built-in token neither
// revoked nor expired, and before its expiry).
export const ADMIN_REACH = (w: string, at: string) =>
  `(${w}.admin AND (${w}.admin_until IS NULL OR ${w}.admin_until > ${at}) AND (${w}.admin_token IS NULL OR EXISTS (
    SELECT 1 FROM tokens t WHERE t.id = ${w}.admin_token AND t.revoked_at IS NULL
      AND (t.expires_at IS NULL OR t.expires_at > ${at}))))`;
// An endpoint of `owner` with admin reach `reach` may see an event `ev`: the access policy's
// endpointSees, in SQL (the reach, or its owner is a member of the event's garden: one read of the
// membership's primary key).
// `since`: and was one already when the event was written (recover).
const MAY_SEE = (reach: string, owner: string, ev: string, since = false) =>
  `(${reach} OR EXISTS (SELECT 1 FROM garden_members m WHERE m.garden_id = ${ev}.garden AND m.user_id = ${owner}${
    since ? ` AND m.added_at <= ${ev}.created_at` : ''
  }))`;

// Writes an event (type T, at $AT) for the rows of CTE `p` (those `where` keeps), and its deliveries,
// in one statement. The deliveries go to the enabled endpoints that want the type and whose owner
// is a member of the event's garden now, as the event is written (endpoints with admin reach then:
// every event); the members' endpoints and the admin ones are two joins, so each can go by its own
// index.
export const eventFor = (type: EventType, at: string, data = DATA, where = '') => `
  e AS (INSERT INTO events (id, type, owner, garden, data, created_at)
        SELECT ${NEW_ID(at)}, '${type}', p.owner, p.garden, ${data}, ${at} FROM p ${where}
        RETURNING id, garden, created_at),
  d AS (INSERT INTO deliveries (event_id, endpoint_id, state, next_attempt_at, created_at)
        SELECT e.id, w.id, 'pending', e.created_at, e.created_at
          FROM e JOIN garden_members m ON m.garden_id = e.garden
          JOIN webhook_endpoints w ON w.owner = m.user_id AND NOT ${ADMIN_REACH('w', 'e.created_at')}
          WHERE w.status = 'enabled' AND (w.events & ${typeBit(type)}) != 0
        UNION ALL
        SELECT e.id, w.id, 'pending', e.created_at, e.created_at FROM e JOIN webhook_endpoints w
          ON w.admin AND w.status = 'enabled' AND (w.events & ${typeBit(type)}) != 0
          AND ${ADMIN_REACH('w', 'e.created_at')}
        RETURNING 1)`;
// How many deliveries the statement queued (the dispatcher is told when there are some).
export const QUEUED = '(SELECT count(*) FROM d)::int AS queued';

// Endpoints per owner are counted under an advisory lock on the owner (there is no users row to
// lock); a key space of its own, apart from the gardens' user lock (gardens.ts).
const OWNER_LOCK = 727_004;
const sqlText = (s: string) => `'${s.replaceAll("'", "''")}'`;

const EVENT_COLS = 'xid::text AS xid, seq, id, type, owner, garden, data, created_at';
// An event type column's bit in endpoint masks, as event-mask.ts gives it.
const TYPE_BIT_SQL = (column: string) =>
  `(CASE ${column} ${EVENT_TYPES.map((t) => `WHEN '${t}' THEN ${typeBit(t)}`).join(' ')} END)`;

export const EVENT_QUERIES = {
  // Under the owner's lock (lockOwner), so that racing inserts count each other.
  lockOwner: `SELECT pg_advisory_xact_lock(${OWNER_LOCK}, hashtext($1))`,
  insertEndpoint: `INSERT INTO webhook_endpoints (id, owner, admin, url, events, description, secret, previous_secret,
      previous_secret_until, status, disabled_reason, created_at, last_success_at, admin_token, admin_until)
    SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15
    WHERE (SELECT count(*) FROM webhook_endpoints WHERE owner = $2) < $16`,
  endpointsAll: 'SELECT * FROM webhook_endpoints ORDER BY seq',
  endpointsOf: 'SELECT * FROM webhook_endpoints WHERE owner = $1 ORDER BY seq',
  endpoint: 'SELECT * FROM webhook_endpoints WHERE id = $1',
  endpointsIn: 'SELECT * FROM webhook_endpoints WHERE id = ANY($1::text[])',
  updateEndpoint: `UPDATE webhook_endpoints SET secret = $2, previous_secret = $3, previous_secret_until = $4,
      status = $5, disabled_reason = $6,
      -- Only when the patch sets it: a delivery finishing meanwhile keeps what it wrote.
      failing_since = CASE WHEN $8 THEN $7 ELSE failing_since END
    WHERE id = $1 RETURNING *`,
  deleteEndpoint: `WITH a AS (DELETE FROM delivery_attempts WHERE endpoint_id = $1),
      d AS (DELETE FROM deliveries WHERE endpoint_id = $1)
    DELETE FROM webhook_endpoints WHERE id = $1`,
  // Per enabled endpoint, its first $6 due deliveries through the deliveries_endpoint_due index
  // (locked with SKIP LOCKED: another instance's claim passes over them), then $5 of those, fairly:
  // each owner's in turn (its endpoints' first, then their second …), the owner holding the fewest
  // deliveries already ($7: the claimer's load by owner) first, and among equals the most overdue.
  // The cost follows the endpoints and what is claimed, not how long the queue is.
  // Those whose endpoint may no longer see their event (its owner is no member of the event's
  // garden, and it has no admin reach now) are not leased but ended, failed, with an attempt that
  // says why and no status; the endpoint's own record (failing since, last success) is left alone,
  // since nothing was sent to it.
  claim: `WITH due AS (
      SELECT d.id, d.event_id, d.attempts, d.next_attempt_at, w.id AS endpoint_id, w.owner, w.admin AS made_admin,
        ${ADMIN_REACH('w', '$3')} AS admin,
        row_number() OVER (PARTITION BY w.id ORDER BY d.next_attempt_at, d.id) AS turn
      FROM webhook_endpoints w CROSS JOIN LATERAL (
        SELECT x.id, x.event_id, x.attempts, x.next_attempt_at FROM deliveries x
        WHERE x.endpoint_id = w.id AND x.state = 'pending' AND x.next_attempt_at <= $3
          AND (x.lease_until IS NULL OR x.lease_until <= $3)
        ORDER BY x.next_attempt_at, x.id LIMIT $6
        FOR UPDATE SKIP LOCKED) d
      WHERE w.status = 'enabled' AND NOT (w.id = ANY($4::text[]))),
    picked AS (SELECT * FROM (
        SELECT due.*, row_number() OVER (PARTITION BY owner ORDER BY turn, next_attempt_at, id) AS owner_turn
        FROM due) r
      ORDER BY coalesce(($7::jsonb ->> r.owner)::bigint, 0) + r.owner_turn, r.next_attempt_at, r.id LIMIT $5),
    checked AS (SELECT p.*, ev.type, ev.garden, ev.id IS NULL OR ${MAY_SEE('p.admin', 'p.owner', 'ev')} AS allowed
      FROM picked p LEFT JOIN events ev ON ev.id = p.event_id),
    unsent AS (UPDATE deliveries SET state = 'failed', attempts = deliveries.attempts + 1,
        lease_owner = NULL, lease_until = NULL
      FROM checked c WHERE deliveries.id = c.id AND NOT c.allowed),
    logged AS (INSERT INTO delivery_attempts (delivery_id, endpoint_id, event_id, event_type, attempt, at, status,
        outcome, error, duration_ms, next_attempt_at)
      SELECT c.id, c.endpoint_id, c.event_id, c.type, c.attempts + 1, $3, NULL, 'failed',
        CASE WHEN c.made_admin THEN ${sqlText(NOT_SENT_ADMIN)} ELSE ${sqlText(NOT_SENT_MEMBER)} END || c.garden,
        0, NULL
      FROM checked c WHERE NOT c.allowed)
    UPDATE deliveries SET lease_owner = $1, lease_until = $2 FROM checked c WHERE deliveries.id = c.id AND c.allowed
    RETURNING deliveries.id::text AS id, deliveries.event_id, deliveries.endpoint_id, deliveries.attempts`,
  eventsIn: `SELECT ${EVENT_COLS} FROM events WHERE id = ANY($1::text[])`,
  // Finished attempts, any number in one statement (one array per column, in their order): each is
  // logged, its delivery rescheduled or ended (if still leased to the one that made the attempt),
  // and each endpoint's record updated once, as the attempts in their order would have left it:
  // its last success, and the first failure after it (or the first of all, if it was not failing).
  finish: `WITH f AS (
      SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::int[],
        $7::timestamptz[], $8::int[], $9::text[], $10::text[], $11::int[], $12::timestamptz[], $13::text[])
        WITH ORDINALITY AS f(delivery_id, lease_owner, endpoint_id, event_id, event_type, attempt, at, status,
          outcome, error, duration_ms, next_attempt_at, disable, n)),
    a AS (INSERT INTO delivery_attempts (delivery_id, endpoint_id, event_id, event_type, attempt, at, status,
        outcome, error, duration_ms, next_attempt_at)
      SELECT delivery_id, endpoint_id, event_id, event_type, attempt, at, status, outcome, error, duration_ms,
        next_attempt_at FROM f ORDER BY n),
    d AS (UPDATE deliveries SET attempts = deliveries.attempts + 1,
        state = CASE WHEN f.outcome = 'retrying' THEN 'pending' ELSE f.outcome END,
        next_attempt_at = COALESCE(f.next_attempt_at, deliveries.next_attempt_at), lease_owner = NULL,
        lease_until = NULL
      FROM f WHERE deliveries.id = f.delivery_id AND deliveries.lease_owner = f.lease_owner),
    s AS (SELECT endpoint_id, max(n) FILTER (WHERE outcome = 'succeeded') AS sn FROM f GROUP BY endpoint_id),
    ep AS (SELECT f.endpoint_id, max(f.at) FILTER (WHERE f.n = s.sn) AS success,
        (array_agg(f.at ORDER BY f.n) FILTER (WHERE f.outcome <> 'succeeded' AND f.n > coalesce(s.sn, 0)))[1]
          AS failure,
        (array_agg(f.disable ORDER BY f.n) FILTER (WHERE f.disable IS NOT NULL))[1] AS disable
      FROM f JOIN s ON s.endpoint_id = f.endpoint_id GROUP BY f.endpoint_id)
    UPDATE webhook_endpoints w SET
      last_success_at = COALESCE(ep.success, w.last_success_at),
      failing_since = CASE WHEN ep.success IS NOT NULL THEN ep.failure ELSE COALESCE(w.failing_since, ep.failure) END,
      status = CASE WHEN ep.disable IS NOT NULL THEN 'disabled' ELSE w.status END,
      disabled_reason = COALESCE(ep.disable, w.disabled_reason)
    FROM ep WHERE w.id = ep.endpoint_id`,
  attempts: 'SELECT * FROM delivery_attempts WHERE endpoint_id = $1 AND id < $2 ORDER BY id DESC LIMIT $3',
  recover: `INSERT INTO deliveries (event_id, endpoint_id, state, next_attempt_at, created_at)
    SELECT ev.id, w.id, 'pending', $3, $3 FROM webhook_endpoints w JOIN events ev
      ON ev.created_at >= $2
        AND (w.events & ${TYPE_BIT_SQL('ev.type')}) != 0
        AND ${MAY_SEE(ADMIN_REACH('w', '$3'), 'w.owner', 'ev', true)}
    WHERE w.id = $1 AND NOT EXISTS (
      SELECT 1 FROM deliveries d WHERE d.endpoint_id = w.id AND d.event_id = ev.id AND d.state IN ('pending', 'succeeded'))`,
  position: 'SELECT xid::text AS xid, seq FROM events WHERE id = $1',
  // Events of every transaction at or after the oldest one still running have yet to be read.
  head: `SELECT pg_snapshot_xmin(pg_current_snapshot())::text AS xmin`,
  // Each read also answers the snapshot's xmin (\`head\`: every event of a transaction before it has
  // committed or never will), on a row of its own when there is no event: where a reader that found
  // fewer than it asked for goes on from (readEvents).
  eventsAll: `SELECT h.xmin::text AS head, e.* FROM (SELECT pg_snapshot_xmin(pg_current_snapshot()) AS xmin) h
    LEFT JOIN LATERAL (SELECT xid AS x, ${EVENT_COLS} FROM events
      WHERE (xid, seq) > ($1::xid8, $2::bigint) AND xid < h.xmin
      ORDER BY xid, seq LIMIT $3) e ON true
    ORDER BY e.x, e.seq`,
  // The gardens' events ($4), each garden's read along events_garden_position and merged, as a
  // plant list page is.
  eventsOf: `SELECT h.xmin::text AS head, e.* FROM (SELECT pg_snapshot_xmin(pg_current_snapshot()) AS xmin) h
    LEFT JOIN LATERAL (
      SELECT e.xid AS x, e.xid::text AS xid, e.seq, e.id, e.type, e.owner, e.garden, e.data, e.created_at
      FROM unnest($4::text[]) AS g(id) CROSS JOIN LATERAL (
        SELECT * FROM events
        WHERE garden = g.id AND (xid, seq) > ($1::xid8, $2::bigint) AND xid < h.xmin
        ORDER BY xid, seq LIMIT $3) e
      ORDER BY e.xid, e.seq LIMIT $3) e ON true
    ORDER BY e.x, e.seq`,
  purge: `WITH a AS (DELETE FROM delivery_attempts WHERE at < $1),
      ev AS (DELETE FROM events WHERE created_at < $1 RETURNING id),
      d AS (DELETE FROM deliveries WHERE event_id IN (SELECT id FROM ev))
    SELECT count(*)::int AS n FROM ev`,
} as const;

export interface EventRow {
  xid: string;
  seq: number;
  id: string;
  type: EventType;
  owner: string;
  garden: string;
  data: string;
  created_at: Date;
}
export interface EndpointRow {
  id: string;
  owner: string;
  admin: boolean;
  admin_token: string | null;
  admin_until: Date | null;
  url: string;
  events: number;
  description: string | null;
  secret: string;
  previous_secret: string | null;
  previous_secret_until: Date | null;
  status: 'enabled' | 'disabled';
  disabled_reason: string | null;
  created_at: Date;
  last_success_at: Date | null;
  failing_since: Date | null;
}
export interface AttemptRow {
  id: number;
  delivery_id: number;
  endpoint_id: string;
  event_id: string;
  event_type: EventType;
  attempt: number;
  at: Date;
  status: number | null;
  outcome: AttemptRecord['outcome'];
  error: string | null;
  duration_ms: number;
  next_attempt_at: Date | null;
}

/** A log position: the writing transaction's id and the sequence value, as "xid.seq". */
export const position = (xid: string, seq: number | string): string => `${xid}.${seq}`;
export function parsePosition(p: string): [string, string] {
  const m = /^([0-9]{1,20})\.([0-9]{1,20})$/.exec(p);
  if (!m) throw new Error(`not a PostgreSQL log position: ${p}`);
  return [m[1]!, m[2]!];
}

export function toEvent(r: EventRow): EventRecord {
  const data = JSON.parse(r.data) as EventData;
  // Events written before gardens (migration 5 put them in their owner's home garden) carry their
  // garden in the column only.
  if (data.garden === undefined) data.garden = r.garden;
  return {
    id: r.id,
    type: r.type,
    owner: r.owner,
    garden: r.garden,
    data,
    createdAt: r.created_at,
    position: position(r.xid, r.seq),
  };
}

export const toEndpoint = (r: EndpointRow): EndpointRecord => ({
  id: r.id,
  owner: r.owner,
  admin: r.admin,
  adminTokenId: r.admin_token,
  adminUntil: r.admin_until,
  url: r.url,
  events: typesOf(r.events),
  description: r.description,
  secret: r.secret,
  previousSecret: r.previous_secret,
  previousSecretUntil: r.previous_secret_until,
  status: r.status,
  disabledReason: r.disabled_reason,
  createdAt: r.created_at,
  lastSuccessAt: r.last_success_at,
  failingSince: r.failing_since,
});

export const toAttempt = (r: AttemptRow): AttemptRecord => ({
  id: String(r.id),
  deliveryId: String(r.delivery_id),
  endpointId: r.endpoint_id,
  eventId: r.event_id,
  eventType: r.event_type,
  attempt: r.attempt,
  at: r.at,
  status: r.status,
  outcome: r.outcome,
  error: r.error,
  durationMs: r.duration_ms,
  nextAttemptAt: r.next_attempt_at,
});
