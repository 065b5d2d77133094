import { rolesFor } from '../../access/policy.js';
import { DATA, eventFor, PURGED_DATA } from './events.js';

// The SQL of plants on PostgreSQL: creates (with their garden's role check), changes, deletes and
// list pages, with the events and deliveries each writes in the same statement or transaction.

const COLS = 'id, owner, garden, name, tag, version';
// A list page shows neither the creator nor (unless asked) the version: the garden page indexes
// hold every column it shows.
const PAGE_COLS = 'id, garden, name, tag';
const PAGE_COLS_V = 'id, garden, name, tag, version';

// Whether a role column holds a role that may write a garden's plants (the access policy's
// rolesFor('write')). Spelt as a literal list, built once: the planner sees constants, as it would
// in hand-written SQL, and these statements are the hot path.
const WRITERS = rolesFor('write')
  .map((r) => `'${r}'`)
  .join(', ');
const WRITES = (role: string) => `${role} IN (${WRITERS})`;

// A parameter read through a scalar subquery (an InitPlan). With the values in sight (an array's
// length, a garden's or a tag's statistics) PostgreSQL's custom plan for a prepared statement
// looked cheaper than its generic plan, so it planned the hot list, read and create statements afresh on
// every call, though the generic plans (the same index walks) ran as fast or faster: on 1,000,000
// plants a one-garden page 0.28 against 0.60 ms a call, a tagged page 0.28 against 1.26, one plant
// read 0.20 against 0.43 (`npx tsx bench/pg-plans.ts`). Read this way, neither plan knows the value,
// both cost the same, and PostgreSQL keeps the generic plan after its first five custom ones.
export const P = (n: number, type: string) => `(SELECT $${n}::${type})`;
const G1 = P(1, 'text[]');

// One garden's page (garden `g`, with `tag` unless null, ids after `after`, `lim` of them), an
// ordered index range scan stopped at its LIMIT. `garden = g AND id > a` is spelt `(garden, id) > (g, a) AND garden <= g` (likewise
// for tags): only then does the one right index yield the order asked for. The planner cannot see
// the values in the arrays, and given the equality it may walk the primary key in id order and
// filter, which reads the whole table for a small garden or a rare tag. (The database's collation is
// deterministic, equal meaning byte-equal, so both spellings select the same rows.) The search
// walk reads a garden's plants the same way (search.ts).
export const gardenPage = (cols: string, g: string, tag: string | null, after: string, lim: string) =>
  tag === null
    ? `SELECT ${cols} FROM plants WHERE (garden, id) > (${g}, ${after}) AND garden <= ${g}
        ORDER BY garden, id LIMIT ${lim}`
    : `SELECT ${cols} FROM plants WHERE garden = ${g} AND (tag, id) > (${tag}, ${after}) AND tag <= ${tag}
        ORDER BY tag, id LIMIT ${lim}`;

// A page across gardens (the text[] `gardens`): each garden's own page, merged in id order and cut at
// the limit, so the cost follows the gardens and the limit, never how many plants they hold.
const acrossGardens = (cols: string, gardens: string, tag: string | null, after: string, lim: string) =>
  `SELECT p.* FROM unnest(${gardens}) AS g(id) CROSS JOIN LATERAL (
      ${gardenPage(cols, 'g.id', tag, after, lim)}) p
    ORDER BY p.id LIMIT ${lim}`;

// A page with each plant's version (a first sync's, an export's: pages of up to 1,000) across n
// gardens, 1 < n <= 32: one branch per garden, each its garden's ids along plants_garden_page (or
// plants_garden_tag_page) stopped at the limit, under a Merge Append in id order cut at the limit,
// then each plant of the page read by its id (a nested loop: LATERAL with a LIMIT, so that the
// planner cannot make it a hash join over the whole table). The merge pulls ids from a branch only
// as the page needs them, so a page reads about `limit` + n index entries and `limit` plants;
// acrossGardens reads up to `limit` from each garden and sorts them all (20 gardens, a page of
// 1,000: 20,020 rows read and heap-fetched for 1,001 kept: 15.7 ms on 1,000,000 plants, against
// 0.9 for the merge when its branches read whole rows and 2.3-3.1 since they read ids; docs/sync.md).
// A branch reads ids alone, which the index holds: asked for the version too, the planner weighed
// the index's walk, a visit to the table for every row in no order, against the primary key's in
// the table's own order filtering by garden, and with few gardens in the store, each a large share
// of it, took the primary key (35,000 rows read for a page of 1,000 in 20 of 40 gardens, against
// 2,000 now; it takes the index once the table is vacuumed, as autovacuum keeps it). There is a
// statement for each size in MERGED_SIZES, the array of gardens padded with nulls, each null's
// branch skipped by a one-time filter: in a plan that walks the primary key, a null's branch walked
// the whole table after the bound for nothing (a first sync of 100,000 plants in 20 gardens, the
// generic plan: 220 ms a page in place of 7).
export const MERGED_SIZES = [2, 4, 8, 16, 32] as const;
type MergedSize = (typeof MERGED_SIZES)[number];
/**
 * The ids after `after` of the gardens `gardens` (expressions; a null one reads nothing, its
 * branch skipped by a one-time filter), with `tag` unless none, merged in id order and cut at
 * `limit`: each garden's ids along plants_garden_page (or plants_garden_tag_page) under a Merge
 * Append that pulls from a garden only as the merge needs it. The merged pages' core (below), and
 * the search walk's (search.ts). With `branch`, each id comes with its garden's ordinal (1 …) as `b`.
 */
export const mergedIds = (
  gardens: readonly string[],
  o: { tag?: string; after: string; limit: string; branch?: boolean },
): string => {
  const branches = gardens.map(
    (g, i) => `(SELECT id${o.branch ? `, ${i + 1} AS b` : ''} FROM plants WHERE ${g} IS NOT NULL
      AND garden = ${g}${o.tag ? ` AND tag = ${o.tag}` : ''}
      AND id > ${o.after}
      ORDER BY id LIMIT ${o.limit})`,
  );
  return `SELECT * FROM (${branches.join(' UNION ALL ')}) u
    ORDER BY id LIMIT ${o.limit}`;
};
const mergedGardens = (n: number, tag: boolean) => {
  const [after, lim] = tag ? ['$3::bigint', '$4::bigint'] : ['$2::bigint', '$3::bigint'];
  const gardens = Array.from({ length: n }, (_, i) => `($1::text[])[${i + 1}]`);
  const ids = mergedIds(gardens, { after, limit: lim, ...(tag ? { tag: '$2::text' } : {}) });
  return `SELECT u.id, p.garden, p.name, p.tag, p.version FROM (${ids}) u CROSS JOIN LATERAL (SELECT garden, name, tag, version FROM plants
      WHERE plants.id = u.id LIMIT 1) p ORDER BY u.id`;
};
const MERGED_QUERIES = Object.fromEntries(
  MERGED_SIZES.flatMap((n) => [
    [`listMergedV${n}`, mergedGardens(n, false)],
    [`listMergedTagV${n}`, mergedGardens(n, true)],
  ]),
) as Record<`listMergedV${MergedSize}` | `listMergedTagV${MergedSize}`, string>;

/**
 * The statement and values of a page with versions across `gardens` (distinct, at least one): the
 * merged form for 2 to 32 gardens, acrossGardens for one or more than 32.
 */
export function versionedGardensPage(
  gardens: string[],
  tag: string | null,
  afterId: number,
  limit: number,
): [keyof typeof PLANT_QUERIES, unknown[]] {
  const n = MERGED_SIZES.find((size) => size >= gardens.length);
  if (gardens.length < 2 || n === undefined)
    return tag === null
      ? ['listGardensV', [gardens, afterId, limit]]
      : ['listGardensTagV', [gardens, tag, afterId, limit]];
  const padded = [...gardens, ...Array<null>(n - gardens.length).fill(null)];
  return tag === null
    ? [`listMergedV${n}`, [padded, afterId, limit]]
    : [`listMergedTagV${n}`, [padded, tag, afterId, limit]];
}

// The batched pages' branches, one per shape of query, each row tagged with its page's ordinal n. A
// page's gardens are the slice lo…hi of $6 (a null lo: every plant).
const branch = (which: string, from: string) => `
    SELECT q.n, p.id, p.garden, p.name, p.tag FROM q CROSS JOIN LATERAL (${from}) p
    WHERE ${which}`;
const PAGE_SHAPES = [
  branch(
    'q.lo IS NOT NULL AND q.tag IS NULL',
    acrossGardens(PAGE_COLS, `(${P(6, 'text[]')})[q.lo:q.hi]`, null, 'q.after_id', 'q.lim'),
  ),
  branch(
    'q.lo IS NOT NULL AND q.tag IS NOT NULL',
    acrossGardens(PAGE_COLS, `(${P(6, 'text[]')})[q.lo:q.hi]`, 'q.tag', 'q.after_id', 'q.lim'),
  ),
  branch(
    'q.lo IS NULL AND q.tag IS NOT NULL',
    `SELECT ${PAGE_COLS} FROM plants WHERE (tag, id) > (q.tag, q.after_id) AND tag <= q.tag
      ORDER BY tag, id LIMIT q.lim`,
  ),
  branch(
    'q.lo IS NULL AND q.tag IS NULL',
    `SELECT ${PAGE_COLS} FROM plants WHERE id > q.after_id ORDER BY id LIMIT q.lim`,
  ),
];

// A create checks its garden and the creator's role in the statement that inserts the plant, and
// locks the garden's row FOR KEY SHARE, as a foreign key's check would: a garden's delete (FOR
// UPDATE) waits for the creates in flight and then sees their plants, and a create that waited for
// a delete finds no garden, so no plant is ever left in a deleted garden. Membership changes take
// FOR NO KEY UPDATE, which does not wait for creates (gardens.ts).
// Whether `garden` exists, and the role in it of the creator `owner` (null: none); a create by an
// administrator (plants:admin) needs none, a member's needs a role that WRITES.
const ACCESS = (garden: string, owner: string) => `
      SELECT g.id IS NOT NULL AS found, m.role
      FROM (SELECT 1) one
      LEFT JOIN LATERAL (SELECT id FROM gardens WHERE id = ${garden} FOR KEY SHARE) g ON true
      LEFT JOIN garden_members m ON m.garden_id = ${garden} AND m.user_id = ${owner}`;

// The words search matches (search.ts), from the space-separated words of the name that the
// caller folded (search-text.ts), as lexemes taken as they are.
const WORDS = (words: string) => `array_to_tsvector(string_to_array(${words}, ' '))`;

// A garden's list marks (marks row k, absent before its first plant) and, with a tag, its top.
const MARK_COLS = (
  garden: string,
  tag: string,
) => `coalesce(k.reorder, 0) AS reorder, coalesce(k.top, 0) AS top,
      CASE WHEN ${tag} IS NOT NULL THEN coalesce((SELECT max(t.id) FROM plants t
        WHERE t.garden = ${garden} AND t.tag = ${tag}), 0) END AS tag_top`;

// The trash entries of the plants p deleted (when deleted, by whom, when purged: `when`), each
// replacing the entry its id had, after old has locked that.
const INTO_TRASH = (
  when: string,
) => `INSERT INTO trash (id, garden, owner, name, tag, version, deleted_at, deleted_by, purge_at)
      SELECT p.id, p.garden, p.owner, p.name, p.tag, p.version, ${when} FROM p WHERE (SELECT count(*) FROM old) >= 0
      ON CONFLICT (id) DO UPDATE SET garden = EXCLUDED.garden, owner = EXCLUDED.owner, name = EXCLUDED.name,
        tag = EXCLUDED.tag, version = EXCLUDED.version, deleted_at = EXCLUDED.deleted_at,
        deleted_by = EXCLUDED.deleted_by, purge_at = EXCLUDED.purge_at`;

// The deletes of deletePlants and trashPlants, a row each, and the DELETE of those whose actor may
// write in the plant's garden and whose versions hold (with the columns `more` besides).
const DELETES_U = `u AS (SELECT * FROM unnest(${P(1, 'bigint[]')}, ${P(2, 'text[]')}, ${P(3, 'text[]')},
      ${P(4, 'timestamptz[]')}, ${P(5, 'text[]')}, ${P(6, 'text[]')}, ${P(7, 'timestamptz[]')}, ${P(8, 'text[]')},
      ${P(9, 'timestamptz[]')})
    WITH ORDINALITY AS u(id, actor, versions, at, cause_actor, cause, deleted_at, deleted_by, purge_at, n))`;
const DELETES_P = (more: string) => `DELETE FROM plants x USING u WHERE x.id = u.id
      AND (u.versions IS NULL OR x.version = ANY(string_to_array(u.versions, ',')::bigint[]))
      AND (u.actor IS NULL OR EXISTS (SELECT 1 FROM garden_members m
        WHERE m.garden_id = x.garden AND m.user_id = u.actor AND ${WRITES('m.role')}))
      RETURNING x.id, x.owner, x.garden, x.name, x.tag, u.n, u.at, u.cause_actor, u.cause${more}`;

export const PLANT_QUERIES = {
  // Creates with server-assigned ids ($1[i] … $6[i]: owner, garden, name, tag, the event's time or
  // null for none, made by admin; $7[i] the name's words, $8[i] and $9[i] the event's actor and
  // request id), each row of the answer tagged with its ordinal n; only a plant
  // whose creator may write in its garden takes an id. `i` is evaluated once (it calls nextval), so
  // each plant's id is the one its row is matched back by; a plant whose id was taken meanwhile is
  // not in p.
  createPlants: `WITH u AS (
      SELECT u.n, u.owner, u.garden, u.name, u.tag, u.at, u.admin, u.words, u.actor, u.request_id, a.found, a.role
      FROM unnest(${P(1, 'text[]')}, ${P(2, 'text[]')}, ${P(3, 'text[]')}, ${P(4, 'text[]')},
          ${P(5, 'timestamptz[]')}, ${P(6, 'boolean[]')}, ${P(7, 'text[]')}, ${P(8, 'text[]')}, ${P(9, 'text[]')})
        WITH ORDINALITY AS u(owner, garden, name, tag, at, admin, words, actor, request_id, n)
      CROSS JOIN LATERAL (${ACCESS('u.garden', 'u.owner')}) a),
    i AS (SELECT nextval('plants_id_seq') AS id, owner, garden, name, tag, at, words, actor, request_id, n FROM u
      WHERE found AND (admin OR ${WRITES('role')})),
    ins AS (INSERT INTO plants (id, owner, garden, name, tag, search)
      SELECT id, owner, garden, name, tag, ${WORDS('words')} FROM i
      ON CONFLICT (id) DO NOTHING RETURNING id, version),
    p AS (SELECT i.*, ins.version FROM i JOIN ins USING (id)),
    ${eventFor('plant.created', 'p.at', ['p.actor', 'p.request_id'], DATA, 'WHERE p.at IS NOT NULL')}
    SELECT u.n, p.id, p.version, u.found, u.role FROM u LEFT JOIN p USING (n)`,
  // A client-chosen id's plant ($1 … $5: id, owner, garden, name, tag; $6 by admin), if its
  // creator may write in its garden: whether it may, and the plant written (none: the id exists).
  insertClientId: `WITH a AS (${ACCESS('$3::text', '$2::text')}),
    ins AS (INSERT INTO plants (id, owner, garden, name, tag, search) SELECT $1, $2, $3, $4, $5, ${WORDS('$7::text')} FROM a
      WHERE a.found AND ($6::boolean OR ${WRITES('a.role')}) ON CONFLICT (id) DO NOTHING RETURNING id, version)
    SELECT a.found, a.role, ins.id, ins.version FROM a LEFT JOIN ins ON true`,
  // The first of the ids $1, in their order, that a plant has.
  firstExisting: `SELECT u.id FROM unnest($1::bigint[]) WITH ORDINALITY AS u(id, n)
    WHERE EXISTS (SELECT 1 FROM plants p WHERE p.id = u.id) ORDER BY u.n LIMIT 1`,
  raiseSequence: `SELECT setval('plants_id_seq', GREATEST($1::bigint, (SELECT last_value FROM plants_id_seq)))`,
  recordCreated: `WITH p AS (SELECT $1::bigint AS id, $2::text AS owner, $3::text AS garden, $4::text AS name,
      $5::text AS tag), ${eventFor('plant.created', '$6', ['$7', '$8'])} SELECT 1`,
  // A change: the row locked, so that its check and its write are one step against any other
  // writer, with the actor's role in its garden.
  plantForUpdate: `SELECT p.id, p.owner, p.garden, p.name, p.tag, p.version, m.role FROM plants p
    LEFT JOIN garden_members m ON m.garden_id = p.garden AND m.user_id = $2 WHERE p.id = $1 FOR UPDATE OF p`,
  // $4: the new name's words (search.ts).
  updatePlant: `UPDATE plants SET name = $2, tag = $3, version = nextval('plant_versions'), search = ${WORDS('$4::text')}
    WHERE id = $1 RETURNING version`,
  // A batch's gardens $1, each with whether it exists and the role of the creator $2 in it, locked
  // as one create's are (ACCESS).
  batchAccess: `SELECT g.id AS garden, a.found, a.role FROM unnest($1::text[]) AS g(id)
    CROSS JOIN LATERAL (${ACCESS('g.id', '$2::text')}) a`,
  // A batch's plants ($1[i] … $6[i]: id or null for the next, owner, garden, name, tag, words), with
  // their events at $7 (null: none; caused by actor $8 and request id $9), in the batch's transaction, its garden checks done and the
  // sequence raised past the ids given (no id taken twice in the statement, so each inserted row
  // joins back to one row of i): each row of the answer is a plant by its ordinal n, with its
  // version when it was written (none: its id exists).
  createBatch: `WITH i AS (
      SELECT coalesce(u.id, nextval('plants_id_seq')) AS id, u.owner, u.garden, u.name, u.tag, u.words,
        $7::timestamptz AS at, u.n
      FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[])
        WITH ORDINALITY AS u(id, owner, garden, name, tag, words, n)),
    ins AS (INSERT INTO plants (id, owner, garden, name, tag, search)
      SELECT id, owner, garden, name, tag, ${WORDS('words')} FROM i
      ON CONFLICT (id) DO NOTHING RETURNING id, version),
    p AS (SELECT i.*, ins.version FROM i JOIN ins USING (id)),
    ${eventFor('plant.created', 'p.at', ['$8', '$9'], DATA, 'WHERE p.at IS NOT NULL')}
    SELECT i.n, i.id, p.version FROM i LEFT JOIN p USING (n) ORDER BY i.n`,
  // A change's event: the plant row and the event's data (the plant after it, with previous) as
  // parameters; $6 and $7 its actor and request id.
  recordUpdated: `WITH p AS (SELECT $1::bigint AS id, $2::text AS owner, $3::text AS garden),
    ${eventFor('plant.updated', '$5', ['$6', '$7'], '$4::text')} SELECT 1`,
  // A delete in one statement, by an actor ($2; null: admin) that may write in the plant's garden,
  // in one of the versions $3 (null: any), with its event at $4 (null: none; caused by actor $5 and
  // request id $6). When it deletes
  // nothing, the store reads why.
  deletePlant: `WITH p AS (DELETE FROM plants x WHERE x.id = $1 AND ($3::bigint[] IS NULL OR x.version = ANY($3))
      AND ($2::text IS NULL OR EXISTS (SELECT 1 FROM garden_members m
        WHERE m.garden_id = x.garden AND m.user_id = $2 AND ${WRITES('m.role')}))
      RETURNING x.id, x.owner, x.garden, x.name, x.tag),
    ${eventFor('plant.deleted', '$4::timestamptz', ['$5', '$6'], DATA, 'WHERE $4::timestamptz IS NOT NULL')}
    SELECT id FROM p`,
  // The deletes of a turn in one statement (deletePlant's rules, each row its own: $1[i] the id,
  // $2[i] the actor (null: admin), $3[i] its versions (comma-separated; null: any), $4[i] its
  // event's time (null: none), $5[i] and $6[i] the event's actor and request id), no id twice;
  // the answer: the ordinal n of each plant deleted. One commit, and one move of each garden's list
  // marks, for them all: deletes one at a time queued on their gardens' marks rows, each waiting for
  // the one before to commit.
  deletePlants: `WITH ${DELETES_U},
    p AS (${DELETES_P('')}),
    ${eventFor('plant.deleted', 'p.at', ['p.cause_actor', 'p.cause'], DATA, 'WHERE p.at IS NOT NULL')}
    SELECT n FROM p`,
  // The same with the trash on: $7[i], $8[i], $9[i] when deleted, by whom, when purged; each
  // entry the trash held with its id replaced and given its plant.purged event, as trashPlant does.
  trashPlants: `WITH ${DELETES_U},
    p AS (${DELETES_P(', x.version, u.deleted_at, u.deleted_by, u.purge_at')}),
    old AS (SELECT t.id, t.owner, t.garden, p.at, p.cause_actor, p.cause FROM trash t JOIN p ON p.id = t.id
      FOR UPDATE OF t),
    k AS (${INTO_TRASH('p.deleted_at, p.deleted_by, p.purge_at')}),
    ${eventFor('plant.deleted', 'p.at', ['p.cause_actor', 'p.cause'], DATA, 'WHERE p.at IS NOT NULL')},
    ${eventFor('plant.purged', 'old.at', ['old.cause_actor', 'old.cause'], PURGED_DATA('old'), 'WHERE old.at IS NOT NULL AND (SELECT count(*) FROM e) >= 0', { cte: 'f', from: 'old' })}
    SELECT n FROM p`,
  // The same delete with the trash on (contract 13.2): the plant moves to its garden's trash
  // (deleted at $7 by $8, purged at $9) in the same statement. An entry the trash held with its id
  // (deleted, made again, deleted again) is read locked first (old), replaced, and given its
  // plant.purged event, caused as the delete is, after the plant.deleted event in the log (f reads
  // e first), as on SQLite.
  trashPlant: `WITH p AS (DELETE FROM plants x WHERE x.id = $1 AND ($3::bigint[] IS NULL OR x.version = ANY($3))
      AND ($2::text IS NULL OR EXISTS (SELECT 1 FROM garden_members m
        WHERE m.garden_id = x.garden AND m.user_id = $2 AND ${WRITES('m.role')}))
      RETURNING x.id, x.owner, x.garden, x.name, x.tag, x.version),
    old AS (SELECT t.id, t.owner, t.garden FROM trash t WHERE t.id = $1 AND EXISTS (SELECT 1 FROM p) FOR UPDATE),
    k AS (${INTO_TRASH('$7, $8, $9')}),
    ${eventFor('plant.deleted', '$4::timestamptz', ['$5', '$6'], DATA, 'WHERE $4::timestamptz IS NOT NULL')},
    ${eventFor('plant.purged', '$4::timestamptz', ['$5', '$6'], PURGED_DATA('old'), 'WHERE $4::timestamptz IS NOT NULL AND (SELECT count(*) FROM e) >= 0', { cte: 'f', from: 'old' })}
    SELECT id FROM p`,
  getPlant: `SELECT ${COLS} FROM plants WHERE id = $1`,
  // A plant and a user's role in its garden (no user: no role), by primary keys.
  plantFor: `SELECT p.id, p.owner, p.garden, p.name, p.tag, p.version, m.role FROM plants p
    LEFT JOIN garden_members m ON m.garden_id = p.garden AND m.user_id = $2 WHERE p.id = $1`,
  // The batched form: plant $1[i] with the role of user $2[i], tagged with the ordinal n.
  plantsFor: `SELECT u.n, p.id, p.owner, p.garden, p.name, p.tag, p.version, m.role
    FROM unnest(${P(1, 'bigint[]')}, ${P(2, 'text[]')}) WITH ORDINALITY AS u(id, usr, n) JOIN plants p ON p.id = u.id
    LEFT JOIN garden_members m ON m.garden_id = p.garden AND m.user_id = u.usr`,
  listAll: `SELECT ${PAGE_COLS} FROM plants WHERE id > $1 ORDER BY id LIMIT $2`,
  listAllTag: `SELECT ${PAGE_COLS} FROM plants WHERE tag = $1 AND id > $2 ORDER BY id LIMIT $3`,
  listGardens: acrossGardens(PAGE_COLS, G1, null, P(2, 'bigint'), P(3, 'bigint')),
  listGardensTag: acrossGardens(PAGE_COLS, G1, P(2, 'text'), P(3, 'bigint'), P(4, 'bigint')),
  listAllV: `SELECT ${PAGE_COLS_V} FROM plants WHERE id > $1 ORDER BY id LIMIT $2`,
  listAllTagV: `SELECT ${PAGE_COLS_V} FROM plants WHERE tag = $1 AND id > $2 ORDER BY id LIMIT $3`,
  listGardensV: acrossGardens(PAGE_COLS_V, G1, null, P(2, 'bigint'), P(3, 'bigint')),
  listGardensTagV: acrossGardens(PAGE_COLS_V, G1, P(2, 'text'), P(3, 'bigint'), P(4, 'bigint')),
  ...MERGED_QUERIES,
  // List marks (migration 7): the memberships of users $1[i], with each garden's marks row and,
  // for a tag $2[i], the largest id with it in the garden (one step down plants_garden_tag_page),
  // tagged with the ordinal n. Read in one statement, so one snapshot.
  scopeMarks: `SELECT q.n, m.garden_id AS garden, m.role, ${MARK_COLS('m.garden_id', 'q.tag')}
    FROM unnest(${P(1, 'text[]')}, ${P(2, 'text[]')}) WITH ORDINALITY AS q(usr, tag, n)
    JOIN garden_members m ON m.user_id = q.usr
    LEFT JOIN list_marks k ON k.garden = m.garden_id
    ORDER BY q.n, m.garden_id`,
  // The same marks for the gardens $1 and the tag $2.
  gardenMarks: `SELECT g.id AS garden, ${MARK_COLS('g.id', P(2, 'text'))}
    FROM unnest(${G1}) AS g(id) LEFT JOIN list_marks k ON k.garden = g.id ORDER BY g.id`,
  // Pages $1[i] … $5[i] (tag, afterId, limit, and the slice lo…hi of $6 holding its gardens; a null
  // tag: any, a null lo: every plant).
  listPages: `WITH q AS (SELECT * FROM unnest(${P(1, 'text[]')}, ${P(2, 'bigint[]')}, ${P(3, 'bigint[]')}, ${P(4, 'int[]')}, ${P(5, 'int[]')})
      WITH ORDINALITY AS q(tag, after_id, lim, lo, hi, n))
    ${PAGE_SHAPES.join('\n    UNION ALL')}`,
} as const;
