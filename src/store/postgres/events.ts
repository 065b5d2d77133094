import { rolesFor } from '../../access/policy.js';
import { typeBit, typesOf } from '../event-mask.js';
import {
  type AnyEventData,
  type AttemptRecord,
  type EndpointRecord,
  EVENT_TEXT,
  EVENT_TYPES,
  type EventRecord,
  type EventType,
  type NewEvent,
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

// Writes an event (type T, at $AT, caused by the actor and request id the SQL expressions `cause`
// give) for the rows of CTE `p` (those `where` keeps), in one statement. Nothing per endpoint: each
// endpoint's dispatcher reads the log from its own position (claim).
// `cte` names the CTE it makes, `from` the one whose rows it reads (default e and p).
export const eventFor = (
  type: EventType,
  at: string,
  cause: [actor: string, requestId: string],
  data = DATA,
  where = '',
  { cte = 'e', from = 'p' } = {},
) => `
  ${cte} AS (INSERT INTO events (id, type, owner, garden, data, created_at, actor, request_id, traceparent)
        SELECT ${NEW_ID(at)}, '${type}', ${from}.owner, ${from}.garden, ${data}, ${at}, ${cause[0]}::text,
          ${REQUEST_ID(cause[1])}, ${TRACEPARENT(cause[1])}
        FROM ${from} ${where}
        RETURNING 1)`;

/** A trashed plant's row `from` as a plant.purged event's data: its id and garden only. */
export const PURGED_DATA = (from: string) =>
  `json_build_object('id', ${from}.id, 'garden', ${from}.garden)::text`;

/**
 * An event's request id and traceparent (traces on, contract 14.1) as one statement parameter: the
 * request id, then a line feed and the traceparent when there is one. Neither can hold a line feed
 * (both are HTTP header values), so every statement that writes events keeps its parameters.
 */
export const requestCause = (requestId: string | null, traceparent: string | null | undefined) =>
  traceparent ? `${requestId ?? ''}\n${traceparent}` : requestId;
const REQUEST_ID = (p: string) => `NULLIF(split_part(${p}::text, E'\\n', 1), '')`;
const TRACEPARENT = (p: string) => `NULLIF(split_part(${p}::text, E'\\n', 2), '')`;

/** An event's actor and request cause (requestCause), as statement parameters (null: none). */
export const causeOf = (event: NewEvent | undefined): [string | null, string | null] => [
  event?.actor ?? null,
  requestCause(event?.requestId ?? null, event?.traceparent),
];

// One event from parameters: type $1, owner $2, garden $3, data $4 (JSON text), at $5, actor $6,
// request id $7 (a membership change's, written in its transaction: gardens.ts).
export const RECORD_EVENT = `INSERT INTO events (id, type, owner, garden, data, created_at, actor, request_id,
    traceparent)
  VALUES (${NEW_ID('$5')}, $1, $2, $3, $4, $5, $6, ${REQUEST_ID('$7')}, ${TRACEPARENT('$7')})`;

// A member.removed event (at $2, actor $3, request id $4) for each member of garden $1, the role
// it had in its data: written as the garden is deleted, before its memberships go.
export const RECORD_MEMBERS_REMOVED = `INSERT INTO events (id, type, owner, garden, data, created_at, actor, request_id,
    traceparent)
  SELECT ${NEW_ID('$2')}, 'member.removed', m.user_id, m.garden_id,
    json_build_object('garden', m.garden_id, 'user', m.user_id, 'role', m.role)::text, $2, $3::text,
    ${REQUEST_ID('$4')}, ${TRACEPARENT('$4')}
  FROM garden_members m WHERE m.garden_id = $1 ORDER BY m.added_at, m.user_id`;

// Endpoints per owner are counted under an advisory lock on the owner (there is no users row to
// lock); a key space of its own, apart from the gardens' user lock (gardens.ts).
const OWNER_LOCK = 727_004;
const sqlText = (s: string) => `'${s.replaceAll("'", "''")}'`;

// An endpoint's columns, as toEndpoint reads them.
const ENDPOINT_COLS = [
  'id',
  'owner',
  'admin',
  'admin_token',
  'admin_until',
  'url',
  'events',
  'description',
  'secret',
  'previous_secret',
  'previous_secret_until',
  'status',
  'disabled_reason',
  'created_at',
  'last_success_at',
  'failing_since',
] as const;
const EVENT_COLS = (t = 'events') =>
  `${t}.xid::text AS xid, ${t}.seq, ${t}.id, ${t}.type, ${t}.owner, ${t}.garden, ${t}.data, ${t}.created_at, ${t}.actor, ${t}.request_id, ${t}.traceparent`;
// A history or activity page's columns: the time as toISOString() writes it (PostgreSQL's to_char
// truncates to the millisecond as the Date node-postgres makes does), so that a page neither parses
// a date nor formats one (toPageEvent).
const PAGE_COLS = `xid::text AS xid, seq, id, type, owner, garden, data,
  to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS at, actor, request_id`;
// A time as toISOString() writes it (to_char truncates to the millisecond, as node-postgres's Date).
export const ISO_TEXT = (column: string) =>
  `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;
// A text or null as JSON.
export const JSON_TEXT = (column: string) => `coalesce(to_json(${column})::text, 'null')`;
// The data text names its garden (NAMES_GARDEN), in SQL. The regular expression alone cost a page
// of 100 about 0.1 ms of PostgreSQL's CPU, so the two spellings the service writes (JSON.stringify's
// `"garden":`, json_build_object's `"garden" :`) are looked for first as plain text: the same
// answer, since either is a match of the expression.
const DATA_NAMES_GARDEN = `(strpos(data, '"garden":') > 0 OR strpos(data, '"garden" :') > 0 OR data ~ '"garden"\\s*:')`;
// An event row as historyJson writes it: {id, type, timestamp, actor, requestId, data}, the stored
// data text as it is when it names its garden (a key "garden": see NAMES_GARDEN), else with the
// event's garden added as its last key, as toPageEvent's parsed data gets it.
const HISTORY_ITEM = `'{"id":' || to_json(id)::text || ',"type":' || to_json(type)::text
  || ',"timestamp":"' || ${ISO_TEXT('created_at')} || '","actor":' || ${JSON_TEXT('actor')}
  || ',"requestId":' || ${JSON_TEXT('request_id')} || ',"data":'
  || CASE WHEN ${DATA_NAMES_GARDEN} THEN data
    ELSE left(data, -1) || CASE WHEN data ~ '^\\{\\s*\\}$' THEN '' ELSE ',' END || '"garden":' || ${JSON_TEXT('garden')} || '}'
  END || '}'`;
/**
 * A page as its answer's JSON (JsonPage): `rows` (read in the page's order with a limit of `limit`
 * + 1) cut at `limit`, each written by `item`; `last` the position of the limit-th row (`position`,
 * given how to read a column of that row) when more follow. One row, whatever was read.
 * The rows are aggregated in the order `rows` reads them: an aggregate over an ordered subquery,
 * with no join beside it, takes its rows in that order (PostgreSQL's manual, 4.2.7). Neither a
 * row_number() window nor an ordered aggregate (string_agg … ORDER BY n), each a second pass over
 * the rows with a sort or a store of its own; the limit+1-th row's item is written too (1 in 101)
 * and cut off with the array's slice.
 */
export const JSON_PAGE = (
  rows: string,
  limit: string,
  item: string,
  position: (at: (column: string) => string) => string,
) =>
  `SELECT count(*)::int AS rows,
    CASE WHEN count(*) > ${limit} THEN ${position((column) => `(array_agg(${column}))[${limit}]`)} END AS last,
    '[' || coalesce(array_to_string((array_agg(${item}))[1:${limit}], ','), '') || ']' AS json
  FROM (${rows}) r`;
const READERS = rolesFor('read')
  .map((r) => `'${r}'`)
  .join(', ');
const HISTORY_ROWS = 'xid, seq, id, type, garden, data, created_at, actor, request_id';
const HISTORY_PAGE = (rows: string, limit: string) =>
  JSON_PAGE(rows, limit, HISTORY_ITEM, (at) => `${at('xid')}::text || '.' || ${at('seq')}`);

// An event type column's bit in endpoint masks, as event-mask.ts gives it.
const TYPE_BIT_SQL = (column: string) =>
  `(CASE ${column} ${EVENT_TYPES.map((t) => `WHEN '${t}' THEN ${typeBit(t)}`).join(' ')} END)`;

// A feed answer's read of the log (ChangePort.feedLog): `source(bound)` is the events of the
// gardens ($4; none: every garden's, the second query) in log order after `bound`, up to the limit
// its caller adds. e: the events after $1.$2 up to the snapshot's xmin, as readEvents reads them
// ($3 at most); c: when e is short of $3, the committed events after $5.$6 ($7 at most), as
// committedEvents reads them; p: the plants now that e and c name. One statement, one snapshot.
// Its answer is one JSON document (FEED_JSON, with the snapshot's xmin): node-postgres parses
// one value instead of a row of columns an event and a plant (about 200 rows a delta of 100).
const FEED_EVENT_COLS = 'xid, seq, type, owner, garden, plant_id';
// e, c and p column by column: an object of arrays, one a column ({x: xid, s: seq, t: type,
// o: owner, g: garden, i: plant_id} for events in log order; {i: id, g: garden, n: name, t: tag,
// v: version} for plants, in no order), each null when there are no rows. array_agg categorizes
// its type once a column, where json_build_array did it for every value of every row: on the
// delta of 100 the statement took about 15 % less of PostgreSQL's time. The events' arrays keep
// e's and c's order: an aggregate over a subquery, with no join beside it, takes its rows in the
// subquery's order (PostgreSQL's manual, 4.2.7; JSON_PAGE relies on the same), and feedLogRead
// checks it.
const FEED_EVENTS_JSON = (from: string) =>
  `(SELECT json_build_object('x', array_agg(xid::text), 's', array_agg(seq), 't', array_agg(type),
    'o', array_agg(owner), 'g', array_agg(garden), 'i', array_agg(plant_id)) FROM ${from})`;
const FEED_JSON = `'e', ${FEED_EVENTS_JSON('e')}, 'c', ${FEED_EVENTS_JSON('c')},
    'p', (SELECT json_build_object('i', array_agg(id), 'g', array_agg(garden), 'n', array_agg(name),
      't', array_agg(tag), 'v', array_agg(version)) FROM p)`;
// Whether any event of the log, whatever its garden, comes after xid.seq: the log's last event
// (one step back along events_position) compared with it. (Spelt as EXISTS … WHERE (xid, seq) > …,
// the generic plan guessed a third of the log follows and scanned the table for the first one:
// 100 ms when none does.) e and c are each one index probe a garden of the scope (20 for a caller in 20
// gardens), most of an empty delta's work; each is skipped, by a one-time filter, when it cannot
// find anything: e when its bound is at or past the snapshot's xmin (nothing committed before the
// xmin follows it), c when no event at all follows its bound.
const ANY_AFTER = (xid: string, seq: string) =>
  `EXISTS (SELECT 1 FROM (SELECT xid, seq FROM events ORDER BY xid DESC, seq DESC LIMIT 1) last
    WHERE (last.xid, last.seq) > (${xid}, ${seq}))`;
// Whether the log is quiet since $2.$3 for a delta read in h's snapshot (FEED_QUIET below).
const QUIET_SINCE = `(($2::xid8, $3::bigint) <= (h.xmin, 0::bigint) AND NOT ${ANY_AFTER('$2::xid8', '$3::bigint')})`;
// The log's reads of a feed answer, as CTEs after h (the snapshot's xmin): e, the events after
// `after` before the xmin (`limit` at most); c, when e is short of the limit, those after
// `tailAfter` (`tailLimit` at most); p, the plants the two name. `source(bound, limit)` reads the
// scope's events in log order after `bound`. FEED_LOG and FEED_DELTA differ only in the source and
// the parameters.
const FEED_READS = (
  source: (bound: string, limit: string) => string,
  [xid, seq]: [string, string],
  limit: string,
  [tailXid, tailSeq]: [string, string],
  tailLimit: string,
) => `e AS (SELECT * FROM (${source(`(${xid}, ${seq}) AND xid < (SELECT xmin FROM h)`, limit)}) e
    WHERE ${xid} < (SELECT xmin FROM h)),
  c AS (SELECT * FROM (${source(`(${tailXid}, ${tailSeq})`, tailLimit)}) c WHERE (SELECT count(*) FROM e) < ${limit}
    AND ${ANY_AFTER(tailXid, tailSeq)}),
  p AS (SELECT id, garden, name, tag, version FROM plants
    WHERE id IN (SELECT plant_id FROM e UNION SELECT plant_id FROM c))`;
const FEED_LOG = (source: (bound: string, limit: string) => string) => `WITH h AS (
    SELECT pg_snapshot_xmin(pg_current_snapshot()) AS xmin),
  ${FEED_READS(source, ['$1::xid8', '$2::bigint'], '$3', ['$5::xid8', '$6::bigint'], '$7')}
  SELECT json_build_object('xmin', (SELECT xmin::text FROM h), ${FEED_JSON}) AS read`;

// A delta's whole read (ChangePort.feedStart with `log`), one statement, one snapshot: feedStart's
// head, horizon, memberships of $1 and its joins and leaves after $2.$3, then FEED_LOG's reads in
// the scope those make (the garden $6 alone when named, else the memberships and the gardens joined
// or left), after $2.$3 ($4 events at most) and, when short, after the head ($5 at most). One JSON
// document: the start (the snapshot's xmin, the horizon, the memberships, the gardens joined or
// left) and e, c and p as in FEED_LOG.
const FEED_DELTA_SOURCE = (
  bound: string,
  limit: string,
) => `SELECT ev.* FROM s CROSS JOIN unnest(s.scope) AS g(id)
    CROSS JOIN LATERAL (
      SELECT ${FEED_EVENT_COLS} FROM events WHERE garden = g.id AND (xid, seq) > ${bound}
      ORDER BY xid, seq LIMIT ${limit}) ev
    ORDER BY ev.xid, ev.seq LIMIT ${limit}`;
const FEED_DELTA = `WITH h AS (SELECT pg_snapshot_xmin(pg_current_snapshot()) AS xmin),
  m AS (SELECT ARRAY(SELECT garden_id FROM garden_members WHERE user_id = $1 ORDER BY garden_id) AS gardens,
    ARRAY(SELECT DISTINCT garden FROM events WHERE owner = $1 AND type IN ('member.added', 'member.removed')
      AND (xid, seq) > ($2::xid8, $3::bigint)) AS moved),
  s AS (SELECT CASE WHEN $6::text IS NULL THEN ARRAY(SELECT DISTINCT x FROM unnest(m.gardens || m.moved) AS x)
    ELSE ARRAY[$6::text] END AS scope FROM m),
  ${FEED_READS(FEED_DELTA_SOURCE, ['$2::xid8', '$3::bigint'], '$4', ['(SELECT xmin FROM h)', '0::bigint'], '$5')}
  SELECT json_build_object('xmin', h.xmin::text, 'purgedXid', hz.xid::text, 'purgedSeq', hz.seq,
    'gardens', m.gardens, 'moved', m.moved, ${FEED_JSON}, 'quiet', ${QUIET_SINCE}) AS read
  FROM h CROSS JOIN m LEFT JOIN events_horizon hz ON true`;

// An empty delta's whole read when the log is quiet since its position: no event of the log,
// whatever its garden, after the position, and the position not past the snapshot's head. Then
// FEED_DELTA, in the same snapshot, finds nothing either: no joins or leaves (they are events),
// no e (events after the position), no c (events after the head, which is not before the
// position), no p. What it would answer besides (head, horizon, memberships) is all FEED_QUIET
// reads, with the log's last event (QUIET_SINCE's test, made by the store with it): one index
// probe for that event and one for each user's memberships, where FEED_DELTA's plan, with its
// every read skipped, still sets up some 60 nodes (about 45 µs of PostgreSQL's time a call:
// docs/sync.md). The users ($1, distinct) are those of the deltas that asked at the same time:
// one statement answers them all (PgStore.quietProbes). The memberships come as one JSON
// object, user → gardens: node-postgres' parser of a text[] walked it a character at a time, 9 %
// of the service's CPU on an empty delta in 20 gardens; JSON.parse is native.
const FEED_QUIET = `WITH h AS (SELECT pg_snapshot_xmin(pg_current_snapshot()) AS xmin)
  SELECT h.xmin::text AS xmin, hz.xid::text AS purged_xid, hz.seq AS purged_seq,
    last.xid::text AS last_xid, last.seq AS last_seq,
    (SELECT json_object_agg(u.id, ARRAY(SELECT garden_id FROM garden_members WHERE user_id = u.id
      ORDER BY garden_id)) FROM unnest($1::text[]) AS u(id)) AS gardens
  FROM h LEFT JOIN events_horizon hz ON true
    LEFT JOIN (SELECT xid, seq FROM events ORDER BY xid DESC, seq DESC LIMIT 1) last ON true`;

export const EVENT_QUERIES = {
  feedDelta: FEED_DELTA,
  feedQuiet: FEED_QUIET,
  feedLogOf: FEED_LOG(
    (bound, limit) => `SELECT ev.* FROM unnest($4::text[]) AS g(id) CROSS JOIN LATERAL (
      SELECT ${FEED_EVENT_COLS} FROM events WHERE garden = g.id AND (xid, seq) > ${bound}
      ORDER BY xid, seq LIMIT ${limit}) ev
    ORDER BY ev.xid, ev.seq LIMIT ${limit}`,
  ),
  // $4 (null here) named all the same: PostgreSQL refuses a statement with a parameter it cannot type.
  feedLogAll: FEED_LOG(
    (bound, limit) => `SELECT ${FEED_EVENT_COLS} FROM events WHERE (xid, seq) > ${bound}
      AND $4::text[] IS NULL
    ORDER BY xid, seq LIMIT ${limit}`,
  ),
  // History and activity, newest first by seq along events_plant_history / events_garden_history
  // (migration 14): a page reads the rows it shows, and those of the same plant or garden that its
  // garden or type filter passes over. $3 null: every garden (every type).
  history: `SELECT ${PAGE_COLS} FROM events
    WHERE plant_id = $1 AND seq < $2 AND ($3::text[] IS NULL OR garden = ANY($3::text[]))
    ORDER BY seq DESC LIMIT $4`,
  activity: `SELECT ${PAGE_COLS} FROM events
    WHERE garden = $1 AND seq < $2 AND ($3::text[] IS NULL OR type = ANY($3::text[]))
    ORDER BY seq DESC LIMIT $4`,
  // The same pages as their answers' JSON in one statement each (JsonPage). historyJson: the
  // gardens those the actor $3 (null: an administrator, every garden) is a member of now, read once
  // (an InitPlan) and used as history's $3 is. activityJson: with the garden's existence and the
  // actor $5's role in it (GardenJsonPage); its events read only when the actor may read them.
  // Its events' garden, bound, types and limit are each read through a scalar subquery (an
  // InitPlan), so that a custom plan knows no more of them than the generic plan does: both cost
  // the same, and PostgreSQL keeps the generic plan after its five custom ones instead of planning
  // every page afresh. (With the values in sight, a big garden's custom plan looked cheaper than
  // the generic plan, whose limit it guesses at 10 % of the garden's events, so every page was
  // planned: about 0.25 ms of PostgreSQL's CPU a page, a third of its cost.)
  historyJson: HISTORY_PAGE(
    `SELECT ${HISTORY_ROWS} FROM events
    WHERE plant_id = $1 AND seq < $2 AND ($3::text IS NULL
      OR garden = ANY(ARRAY(SELECT garden_id FROM garden_members WHERE user_id = $3)))
    ORDER BY seq DESC LIMIT $4 + 1`,
    '$4',
  ),
  activityJson: `WITH g AS (SELECT m.role FROM gardens gd
      LEFT JOIN garden_members m ON m.garden_id = gd.id AND m.user_id = $5 WHERE gd.id = $1)
    SELECT EXISTS (SELECT 1 FROM g) AS found, (SELECT role FROM g) AS role, p.* FROM (${HISTORY_PAGE(
      `SELECT ${HISTORY_ROWS} FROM events
      WHERE garden = (SELECT $1::text) AND seq < (SELECT $2::bigint)
        AND ((SELECT $3::text[]) IS NULL OR type = ANY((SELECT $3::text[])::text[]))
        AND EXISTS (SELECT 1 FROM g WHERE $5::text IS NULL OR g.role IN (${READERS}))
      ORDER BY seq DESC LIMIT (SELECT $4 + 1)`,
      '$4',
    )}) p`,
  // Under the owner's lock (lockOwner), so that racing inserts count each other.
  lockOwner: `SELECT pg_advisory_xact_lock(${OWNER_LOCK}, hashtext($1))`,
  insertEndpoint: `INSERT INTO webhook_endpoints (id, owner, admin, url, events, description, secret, previous_secret,
      previous_secret_until, status, disabled_reason, created_at, last_success_at, admin_token, admin_until)
    SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15
    WHERE (SELECT count(*) FROM webhook_endpoints WHERE owner = $2) < $16`,
  endpointsAll: 'SELECT * FROM webhook_endpoints ORDER BY seq',
  endpointsOf: 'SELECT * FROM webhook_endpoints WHERE owner = $1 ORDER BY seq',
  endpoint: 'SELECT * FROM webhook_endpoints WHERE id = $1',
  updateEndpoint: `UPDATE webhook_endpoints SET secret = $2, previous_secret = $3, previous_secret_until = $4,
      status = $5, disabled_reason = $6,
      -- Only when the patch sets it: a delivery finishing meanwhile keeps what it wrote.
      failing_since = CASE WHEN $8 THEN $7 ELSE failing_since END,
      -- Enabled again: it goes on from the log's head (while disabled it got nothing).
      position_xid = CASE WHEN status = 'disabled' AND $5 = 'enabled' THEN pg_current_xact_id() ELSE position_xid END,
      position_seq = CASE WHEN status = 'disabled' AND $5 = 'enabled' THEN 0 ELSE position_seq END,
      lease_owner = CASE WHEN status = 'disabled' AND $5 = 'enabled' THEN NULL ELSE lease_owner END,
      lease_until = CASE WHEN status = 'disabled' AND $5 = 'enabled' THEN NULL ELSE lease_until END
    WHERE id = $1 RETURNING *`,
  // Whether any endpoint is enabled: a claim without one has nothing to take (claimDeliveries).
  anyEnabled: `SELECT 1 FROM webhook_endpoints WHERE status = 'enabled' LIMIT 1`,
  // The log leases still the caller's, extended (renewLeases).
  renewLeases: `UPDATE webhook_endpoints SET lease_until = GREATEST(lease_until, $3)
    WHERE id = ANY($2::text[]) AND lease_owner = $1 RETURNING id`,
  // The queued deliveries' leases still the caller's, extended (renewQueuedLeases).
  renewQueuedLeases: `UPDATE deliveries SET lease_until = GREATEST(lease_until, $3)
    WHERE id = ANY($2::bigint[]) AND state = 'pending' AND lease_owner = $1 AND lease_until > $4
    RETURNING id::text AS id`,
  deleteEndpoint: `WITH a AS (DELETE FROM delivery_attempts WHERE endpoint_id = $1),
      d AS (DELETE FROM deliveries WHERE endpoint_id = $1)
    DELETE FROM webhook_endpoints WHERE id = $1`,
  // (a) The queued deliveries (retries, recovers, and those queued before deliveries came from the
  // log): per enabled endpoint, its first $6 due ones through the deliveries_endpoint_due index
  // (locked with SKIP LOCKED: another instance's claim passes over them), then $5 of those, fairly:
  // each owner's in turn (its endpoints' first, then their second …), the owner holding the fewest
  // deliveries already ($7: the claimer's load by owner) first, and among equals the most overdue.
  // Those whose endpoint may no longer see their event (its owner is no member of the event's
  // garden, and it has no admin reach now) are not leased but ended, failed, with an attempt that
  // says why and no status; the endpoint's own record is left alone, since nothing was sent to it.
  // (b) Then, up to $5 in all and $6 per endpoint, first attempts from the log: for each enabled
  // endpoint whose log lease is free, run out or the caller's, the events after its window's end
  // ($8: the caller's windows, honoured while it still holds the lease) or else after its position,
  // of its types, that it may see now: with admin reach any garden's (along events_position), else
  // those of its owner's gardens written while the owner was a member (along
  // events_garden_position, one walk per garden): the cost follows the owner's gardens and what is
  // taken, not the log. Only events whose every predecessor has committed (xid before the
  // snapshot's xmin), as readEvents. The owners take turns as in (a).
  // The endpoint rows are written only where the lease is still free or the caller's and the
  // position (or the caller's lease) is still as read, locked first in the order of their ids: of
  // claims racing for one endpoint, one wins and the others hand out none of its events. A row
  // another write holds is passed over (SKIP LOCKED), except one of the caller's own windows, whose
  // lock is waited for: it is the caller's own record under way on another connection, and passing
  // over it would leave the window idle until the next poll. An endpoint that took events is leased
  // to the caller (window_xid/seq: the last one handed out); one that found none moves its position
  // to as far as the claim looked (the snapshot's xmin), or, when the caller has a window there,
  // keeps it leased. A window whose lease is no longer the caller's once locked is answered as it
  // was, with nothing taken (the next claim finds it gone). The answer: kind `q` (a queued
  // delivery), `l` (an event from the log), each with its event and endpoint (w_…), or `w` (a
  // window the caller holds after the claim, and how far it reaches).
  claim: `WITH h AS (SELECT pg_snapshot_xmin(pg_current_snapshot()) AS xmin),
    due AS (
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
      FROM checked c WHERE NOT c.allowed),
    leased AS (UPDATE deliveries SET lease_owner = $1, lease_until = $2 FROM checked c
      WHERE deliveries.id = c.id AND c.allowed
      RETURNING deliveries.id, deliveries.event_id, deliveries.endpoint_id, deliveries.attempts),
    qn AS (SELECT endpoint_id, owner, count(*) AS n FROM checked WHERE allowed GROUP BY endpoint_id, owner),
    wl AS (SELECT w.id, w.owner, w.events, w.position_xid AS px, w.position_seq AS ps, ${ADMIN_REACH('w', '$3')} AS reach,
        coalesce(o.x IS NOT NULL AND w.lease_owner = $1, false) AS windowed, o.x, o.s,
        CASE WHEN w.id = ANY($4::text[]) THEN 0
          ELSE $6 - coalesce((SELECT sum(qn.n) FROM qn WHERE qn.endpoint_id = w.id), 0) END AS room
      FROM webhook_endpoints w LEFT JOIN (
        SELECT key, split_part(value, '.', 1)::xid8 AS x, split_part(value, '.', 2)::bigint AS s
        FROM jsonb_each_text($8::jsonb)) o ON o.key = w.id
      WHERE w.status = 'enabled' AND (w.lease_owner IS NULL OR w.lease_until <= $3 OR w.lease_owner = $1)),
    wf AS (SELECT wl.*, CASE WHEN windowed THEN x ELSE px END AS fx, CASE WHEN windowed THEN s ELSE ps END AS fs
      FROM wl WHERE windowed OR room > 0),
    cand AS (SELECT * FROM (
        SELECT wf.id AS endpoint_id, wf.owner, wf.room, x.xid, x.seq, x.event_id,
          row_number() OVER (PARTITION BY wf.id ORDER BY x.xid, x.seq) AS turn
        FROM wf CROSS JOIN h CROSS JOIN LATERAL (
          (SELECT e.xid, e.seq, e.id AS event_id FROM events e
            WHERE wf.reach AND (e.xid, e.seq) > (wf.fx, wf.fs) AND e.xid < h.xmin
              AND (wf.events & ${TYPE_BIT_SQL('e.type')}) != 0
            ORDER BY e.xid, e.seq LIMIT $6)
          UNION ALL
          (SELECT g.xid, g.seq, g.event_id FROM garden_members m CROSS JOIN LATERAL (
              SELECT e.xid, e.seq, e.id AS event_id FROM events e
              WHERE e.garden = m.garden_id AND (e.xid, e.seq) > (wf.fx, wf.fs) AND e.xid < h.xmin
                AND e.created_at >= m.added_at AND (wf.events & ${TYPE_BIT_SQL('e.type')}) != 0
              ORDER BY e.xid, e.seq LIMIT $6) g
            WHERE NOT wf.reach AND m.user_id = wf.owner
            ORDER BY g.xid, g.seq LIMIT $6)) x
        WHERE wf.room > 0) c
      WHERE c.turn <= c.room),
    took AS (SELECT * FROM (
        SELECT c.*, row_number() OVER (PARTITION BY c.owner ORDER BY c.turn, c.xid, c.seq) AS owner_turn FROM cand c) r
      ORDER BY coalesce(($7::jsonb ->> r.owner)::bigint, 0)
          + coalesce((SELECT sum(qn.n) FROM qn WHERE qn.owner = r.owner), 0) + r.owner_turn, r.xid, r.seq
      LIMIT greatest($5 - (SELECT count(*) FROM checked WHERE allowed), 0)),
    fc AS (SELECT endpoint_id, count(*) AS n FROM cand GROUP BY endpoint_id),
    tc AS (SELECT endpoint_id, count(*) AS n, (array_agg(xid ORDER BY xid DESC, seq DESC))[1] AS lx,
        (array_agg(seq ORDER BY xid DESC, seq DESC))[1] AS ls
      FROM took GROUP BY endpoint_id),
    st AS (SELECT wf.id, wf.windowed, wf.px, wf.ps, wf.fx, wf.fs, h.xmin, coalesce(tc.n, 0) AS taken, tc.lx, tc.ls,
        wf.room > 0 AND coalesce(fc.n, 0) < wf.room AND coalesce(tc.n, 0) = coalesce(fc.n, 0) AS looked
      FROM wf CROSS JOIN h LEFT JOIN fc ON fc.endpoint_id = wf.id LEFT JOIN tc ON tc.endpoint_id = wf.id),
    ends AS (SELECT st.*,
        CASE WHEN looked AND xmin > fx THEN xmin WHEN looked THEN fx WHEN taken > 0 THEN lx ELSE fx END AS ex,
        CASE WHEN looked AND xmin > fx THEN 0 WHEN looked THEN fs WHEN taken > 0 THEN ls ELSE fs END AS es,
        CASE WHEN taken > 0 OR windowed THEN 'lease' WHEN looked AND xmin > px THEN 'move' END AS act
      FROM st),
    own AS MATERIALIZED (SELECT w.id FROM webhook_endpoints w JOIN ends e ON e.id = w.id
      WHERE e.act IS NOT NULL AND e.windowed AND w.lease_owner = $1 ORDER BY w.id FOR UPDATE OF w),
    free AS MATERIALIZED (SELECT w.id FROM webhook_endpoints w JOIN ends e ON e.id = w.id
      WHERE e.act IS NOT NULL AND NOT e.windowed
        AND (w.lease_owner IS NULL OR w.lease_until <= $3 OR w.lease_owner = $1)
        AND w.position_xid = e.px AND w.position_seq = e.ps
      ORDER BY w.id FOR UPDATE OF w SKIP LOCKED),
    lk AS (SELECT id FROM own UNION ALL SELECT id FROM free),
    upd AS (UPDATE webhook_endpoints w SET
        lease_owner = CASE WHEN e.act = 'lease' THEN $1 END,
        lease_until = CASE WHEN e.act = 'lease' AND w.lease_owner = $1 THEN GREATEST(w.lease_until, $2::timestamptz)
          WHEN e.act = 'lease' THEN $2::timestamptz END,
        position_xid = CASE WHEN e.act = 'move' THEN e.ex ELSE w.position_xid END,
        position_seq = CASE WHEN e.act = 'move' THEN e.es ELSE w.position_seq END,
        window_xid = CASE WHEN e.taken > 0 THEN e.lx WHEN e.act = 'lease' THEN w.window_xid END,
        window_seq = CASE WHEN e.taken > 0 THEN e.ls WHEN e.act = 'lease' THEN w.window_seq END
      FROM ends e JOIN lk ON lk.id = e.id WHERE w.id = e.id
      RETURNING w.id, e.act, e.ex, e.es)
    SELECT r.*, ${ENDPOINT_COLS.map((c) => `ep.${c} AS w_${c}`).join(', ')} FROM (
      SELECT 'q' AS kind, l.id::text AS delivery_id, l.attempts, l.endpoint_id, NULL AS window_xid,
          NULL::bigint AS window_seq, ev.xid AS x, ${EVENT_COLS('ev')}
        FROM leased l JOIN events ev ON ev.id = l.event_id
      UNION ALL
      SELECT 'l', NULL, 0, t.endpoint_id, NULL, NULL, ev.xid, ${EVENT_COLS('ev')}
        FROM took t JOIN upd u ON u.id = t.endpoint_id AND u.act = 'lease' JOIN events ev ON ev.id = t.event_id
      UNION ALL
      SELECT 'w', NULL, 0, u.id, u.ex::text, u.es, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
        NULL
        FROM upd u WHERE u.act = 'lease'
      UNION ALL
      -- A window of the caller's whose lease its own record just ended (or another took after it ran
      -- out): answered as it was, with nothing more taken from it.
      SELECT 'w', NULL, 0, e.id, e.fx::text, e.fs, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
        NULL
        FROM ends e WHERE e.windowed AND NOT EXISTS (SELECT 1 FROM lk WHERE lk.id = e.id)) r
    LEFT JOIN webhook_endpoints ep ON ep.id = r.endpoint_id AND r.kind <> 'w'
    ORDER BY r.kind DESC, r.x, r.seq`,
  // Finished attempts and log progress, any number in one statement (one array per column, in
  // their order): each attempt is logged; a queued delivery is rescheduled or ended (if still leased
  // to the one that made the attempt); a first attempt from the log that is to be retried becomes a
  // queued delivery, if its maker still holds the endpoint's log lease (else whoever holds it now
  // sends the event again from the log); each endpoint's record is updated once, as the attempts in
  // their order would have left it (its last success, and the first failure after it, or the first
  // of all if it was not failing), and its position and lease set as the progress ($14 …) gives
  // them, where the lease is still the caller's; a lease to end is kept when a claim of the caller's
  // reached past the position meanwhile (a claim and a record of one dispatcher may run at once:
  // ending it would let another dispatcher send that claim's events again). The endpoint rows are
  // locked in the order of their ids first, so that two finishes never wait for each other in a circle.
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
    q AS (INSERT INTO deliveries (event_id, endpoint_id, state, attempts, next_attempt_at, created_at)
      SELECT f.event_id, f.endpoint_id, 'pending', 1, f.next_attempt_at, f.at
      FROM f JOIN webhook_endpoints w ON w.id = f.endpoint_id AND w.lease_owner = f.lease_owner
      WHERE f.delivery_id IS NULL AND f.outcome = 'retrying' AND f.next_attempt_at IS NOT NULL),
    s AS (SELECT endpoint_id, max(n) FILTER (WHERE outcome = 'succeeded') AS sn FROM f GROUP BY endpoint_id),
    ep AS (SELECT f.endpoint_id, max(f.at) FILTER (WHERE f.n = s.sn) AS success,
        (array_agg(f.at ORDER BY f.n) FILTER (WHERE f.outcome <> 'succeeded' AND f.n > coalesce(s.sn, 0)))[1]
          AS failure,
        (array_agg(f.disable ORDER BY f.n) FILTER (WHERE f.disable IS NOT NULL))[1] AS disable
      FROM f JOIN s ON s.endpoint_id = f.endpoint_id GROUP BY f.endpoint_id),
    p AS (SELECT * FROM unnest($14::text[], $15::text[], $16::xid8[], $17::bigint[], $18::timestamptz[])
        AS p(endpoint_id, lease_owner, xid, seq, until)),
    u AS (SELECT coalesce(ep.endpoint_id, p.endpoint_id) AS id, ep.endpoint_id IS NOT NULL AS attempted,
        ep.success, ep.failure, ep.disable, p.lease_owner AS p_owner, p.xid, p.seq, p.until
      FROM ep FULL JOIN p ON p.endpoint_id = ep.endpoint_id),
    lk AS MATERIALIZED (SELECT w.id FROM webhook_endpoints w WHERE w.id IN (SELECT id FROM u) ORDER BY w.id FOR UPDATE)
    UPDATE webhook_endpoints w SET
      last_success_at = COALESCE(u.success, w.last_success_at),
      failing_since = CASE WHEN NOT u.attempted THEN w.failing_since WHEN u.success IS NOT NULL THEN u.failure
        ELSE COALESCE(w.failing_since, u.failure) END,
      status = CASE WHEN u.disable IS NOT NULL THEN 'disabled' ELSE w.status END,
      disabled_reason = COALESCE(u.disable, w.disabled_reason),
      position_xid = CASE WHEN w.lease_owner = u.p_owner THEN u.xid ELSE w.position_xid END,
      position_seq = CASE WHEN w.lease_owner = u.p_owner THEN u.seq ELSE w.position_seq END,
      lease_until = CASE WHEN NOT coalesce(w.lease_owner = u.p_owner, false) THEN w.lease_until
        WHEN u.until IS NOT NULL THEN GREATEST(u.until, w.lease_until)
        WHEN (w.window_xid, w.window_seq) > (u.xid, u.seq) THEN w.lease_until END,
      lease_owner = CASE WHEN NOT coalesce(w.lease_owner = u.p_owner, false) OR u.until IS NOT NULL
        OR (w.window_xid, w.window_seq) > (u.xid, u.seq) THEN w.lease_owner END,
      window_xid = CASE WHEN NOT coalesce(w.lease_owner = u.p_owner, false) OR u.until IS NOT NULL
        OR (w.window_xid, w.window_seq) > (u.xid, u.seq) THEN w.window_xid END,
      window_seq = CASE WHEN NOT coalesce(w.lease_owner = u.p_owner, false) OR u.until IS NOT NULL
        OR (w.window_xid, w.window_seq) > (u.xid, u.seq) THEN w.window_seq END
    FROM u JOIN lk ON lk.id = u.id WHERE w.id = u.id`,
  attempts: 'SELECT * FROM delivery_attempts WHERE endpoint_id = $1 AND id < $2 ORDER BY id DESC LIMIT $3',
  // Events since $2 the endpoint wants and may see now, at or before its position (those after it
  // come from the log), neither acknowledged (a succeeded attempt) nor queued already.
  recover: `INSERT INTO deliveries (event_id, endpoint_id, state, next_attempt_at, created_at)
    SELECT ev.id, w.id, 'pending', $3, $3 FROM webhook_endpoints w JOIN events ev
      ON ev.created_at >= $2
        AND (ev.xid, ev.seq) <= (w.position_xid, w.position_seq)
        AND (w.events & ${TYPE_BIT_SQL('ev.type')}) != 0
        AND ${MAY_SEE(ADMIN_REACH('w', '$3'), 'w.owner', 'ev', true)}
    WHERE w.id = $1
      AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.endpoint_id = w.id AND d.event_id = ev.id AND d.state = 'pending')
      AND ev.id NOT IN (SELECT a.event_id FROM delivery_attempts a
        WHERE a.endpoint_id = $1 AND a.outcome = 'succeeded')`,
  position: 'SELECT xid::text AS xid, seq FROM events WHERE id = $1',
  // Events of every transaction at or after the oldest one still running have yet to be read.
  head: `SELECT pg_snapshot_xmin(pg_current_snapshot())::text AS xmin`,
  // Ordered by the columns (xid8), never by the text alias \`xid\` an unqualified name would mean.
  // Each read also answers the snapshot's xmin (\`head\`: every event of a transaction before it has
  // committed or never will), on a row of its own when there is no event: where a reader that found
  // fewer than it asked for goes on from (readEvents).
  eventsAll: `SELECT h.xmin::text AS head, e.* FROM (SELECT pg_snapshot_xmin(pg_current_snapshot()) AS xmin) h
    LEFT JOIN LATERAL (SELECT xid AS x, ${EVENT_COLS()} FROM events
      WHERE (xid, seq) > ($1::xid8, $2::bigint) AND xid < h.xmin
      ORDER BY events.xid, events.seq LIMIT $3) e ON true
    ORDER BY e.x, e.seq`,
  // The gardens' events ($4), each garden's read along events_garden_position and merged, as a
  // plant list page is.
  eventsOf: `SELECT h.xmin::text AS head, e.* FROM (SELECT pg_snapshot_xmin(pg_current_snapshot()) AS xmin) h
    LEFT JOIN LATERAL (
      SELECT e.xid AS x, e.xid::text AS xid, e.seq, e.id, e.type, e.owner, e.garden, e.data, e.created_at,
        e.actor, e.request_id
      FROM unnest($4::text[]) AS g(id) CROSS JOIN LATERAL (
        SELECT * FROM events
        WHERE garden = g.id AND (xid, seq) > ($1::xid8, $2::bigint) AND xid < h.xmin
        ORDER BY xid, seq LIMIT $3) e
      ORDER BY e.xid, e.seq LIMIT $3) e ON true
    ORDER BY e.x, e.seq`,
  // The newest position purged is kept (events_horizon): a change feed's position before it → 410.
  purge: `WITH a AS (DELETE FROM delivery_attempts WHERE at < $1),
      ev AS (DELETE FROM events WHERE created_at < $1 RETURNING id, xid, seq),
      d AS (DELETE FROM deliveries WHERE event_id IN (SELECT id FROM ev)),
      h AS (UPDATE events_horizon SET xid = m.xid, seq = m.seq
        FROM (SELECT xid, seq FROM ev ORDER BY xid DESC, seq DESC LIMIT 1) m
        WHERE (m.xid, m.seq) > (events_horizon.xid, events_horizon.seq))
    SELECT count(*)::int AS n FROM ev`,
  plantsByIds: 'SELECT id, garden, name, tag, version FROM plants WHERE id = ANY($1::bigint[]) ORDER BY id',
  // The change feed's reads (contract 13.4; ChangePort). Ordered by the columns (xid8), never by
  // the text alias.
  purgedUpTo: 'SELECT xid::text AS xid, seq FROM events_horizon',
  // A feed answer's start (ChangePort.feedStart), one statement: the log's head, how far it has
  // been purged and, for a user ($1; null: an administrator, none), its gardens and those it joined
  // or left since $2.$3 (null: since the head). Under READ COMMITTED every part of one statement
  // reads the one snapshot pg_current_snapshot() reports: every transaction before its xmin has
  // ended, so every event before the head is reflected in the memberships read with it (and in
  // whatever later statements read), as when the head was read by a statement of its own first.
  // The gardens come as JSON, as FEED_QUIET's do.
  feedStart: `WITH h AS (SELECT pg_snapshot_xmin(pg_current_snapshot()) AS xmin)
    SELECT h.xmin::text AS head, p.xid::text AS purged_xid, p.seq AS purged_seq,
      CASE WHEN $1::text IS NULL THEN NULL ELSE
        to_json(ARRAY(SELECT garden_id FROM garden_members WHERE user_id = $1 ORDER BY garden_id)) END AS gardens,
      CASE WHEN $1::text IS NULL THEN NULL ELSE
        to_json(ARRAY(SELECT DISTINCT garden FROM events WHERE owner = $1 AND type IN ('member.added', 'member.removed')
          AND (xid, seq) > (coalesce($2::xid8, h.xmin), coalesce($3::bigint, 0)))) END AS moved
    FROM h LEFT JOIN events_horizon p ON true`,
  // Along events_member_position (migration 16): the caller's own joins and leaves since $2.$3.
  memberGardens: `SELECT DISTINCT garden FROM events
    WHERE owner = $1 AND type IN ('member.added', 'member.removed') AND (xid, seq) > ($2::xid8, $3::bigint)`,
  committedAll: `SELECT ${EVENT_COLS()} FROM events WHERE (xid, seq) > ($1::xid8, $2::bigint)
    ORDER BY events.xid, events.seq LIMIT $3`,
  committedOf: `SELECT e.xid::text AS xid, e.seq, e.id, e.type, e.owner, e.garden, e.data, e.created_at, e.actor,
      e.request_id
    FROM unnest($4::text[]) AS g(id) CROSS JOIN LATERAL (
      SELECT * FROM events WHERE garden = g.id AND (xid, seq) > ($1::xid8, $2::bigint)
      ORDER BY xid, seq LIMIT $3) e
    ORDER BY e.xid, e.seq LIMIT $3`,
  // Along events_garden_position: the garden's events since the position, deletes kept.
  deletedIds: `SELECT DISTINCT plant_id AS id FROM events
    WHERE garden = $1 AND (xid, seq) > ($2::xid8, $3::bigint) AND type = 'plant.deleted' AND plant_id > $4
    ORDER BY plant_id LIMIT $5`,
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
  actor: string | null;
  request_id: string | null;
  /** Where the columns are read (EVENT_COLS): the traceparent it was written under. */
  traceparent?: string | null;
}
/** A row of the claim: a queued delivery (q), an event from the log (l), or a window (w). */
export type ClaimRow = EventRow & { [K in keyof EndpointRow as `w_${K}`]: EndpointRow[K] } & {
  kind: 'q' | 'l' | 'w';
  delivery_id: string | null;
  attempts: number;
  endpoint_id: string;
  window_xid: string | null;
  window_seq: number | null;
};
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
  delivery_id: number | null;
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
  const data = JSON.parse(r.data) as AnyEventData;
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
    actor: r.actor,
    requestId: r.request_id,
  };
}

/** A row of a history or activity page (PAGE_COLS): the time as ISO text. */
export type PageRow = Omit<EventRow, 'created_at'> & { at: string };

// The data text names its garden: a key "garden" (a string value "garden" is never followed by a
// colon; the service writes no key with a quote in it). Events written before gardens carry no
// garden anywhere in their data.
const NAMES_GARDEN = /"garden"\s*:/;

/**
 * A record of a history or activity page, as toEvent's but lazy: its data is parsed and its Date
 * made only when read, and the text the page is sent with (EVENT_TEXT) is the stored JSON itself
 * when it already carries its garden (else that text is absent and the data parsed as toEvent does).
 */
export function toPageEvent(r: PageRow): EventRecord {
  let data: AnyEventData | undefined;
  let createdAt: Date | undefined;
  const e: EventRecord = {
    id: r.id,
    type: r.type,
    owner: r.owner,
    garden: r.garden,
    get data(): AnyEventData {
      if (data === undefined) {
        data = JSON.parse(r.data) as AnyEventData;
        if (data.garden === undefined) data.garden = r.garden;
      }
      return data;
    },
    get createdAt(): Date {
      createdAt ??= new Date(r.at);
      return createdAt;
    },
    position: position(r.xid, r.seq),
    actor: r.actor,
    requestId: r.request_id,
  };
  if (NAMES_GARDEN.test(r.data)) {
    Object.defineProperty(e, EVENT_TEXT, { value: { timestamp: r.at, data: r.data }, enumerable: false });
  }
  return e;
}

/** The endpoint of a claim's row (its w_… columns). */
export const claimEndpoint = (r: ClaimRow): EndpointRow =>
  Object.fromEntries(ENDPOINT_COLS.map((c) => [c, r[`w_${c}`]])) as unknown as EndpointRow;

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
  deliveryId: r.delivery_id === null ? null : String(r.delivery_id),
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
