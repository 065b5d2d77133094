import type pg from 'pg';
import { allows, roleOf, rolesFor } from '../../access/policy.js';
import { indexedWords } from '../../search-text.js';
import { shownPlant } from '../plant-changes.js';
import {
  type Actor,
  type Change,
  type GardenJsonPage,
  type IdempotencyRef,
  type NewEvent,
  type RestoreResult,
  type Role,
  refused,
  type TrashPageQuery,
  type TrashQuery,
  type TrashRecord,
} from '../store.js';
import type { PgDb } from './db.js';
import { causeOf, DATA, eventFor, ISO_TEXT, JSON_PAGE, PURGED_DATA } from './events.js';

// The trash on PostgreSQL (contract 13.2; migration 15; mirrors sqlite/trash.ts). A plant's delete
// puts it here in the delete's own statement (plant-queries.ts trashPlant). Locks are taken in one
// order by every trash write that takes more than one: the garden's row, then the entry's, so a
// restore, a member's purge and a garden's delete never wait on each other in a cycle; the
// service's purge takes only entries no one holds (SKIP LOCKED), one instance at a time.

// Arbitrary but fixed key of the advisory lock one purge batch holds (727_001 … 727_004 are taken).
const PURGE_LOCK = 727_005;

const WRITERS = rolesFor('write')
  .map((r) => `'${r}'`)
  .join(', ');
const COLS = 'id, garden, owner, name, tag, version, deleted_at, deleted_by, purge_at';
const ORDER = 'ORDER BY deleted_at DESC, id DESC';

// A trash row as the route's TrashItem, byte for byte as Fastify's serializer writes it: {id, name,
// garden, deletedAt, deletedBy, purgeAt, tag (when set)} (the optional key last); and its position
// as a cursor writes it (`<deletedAt ms>.<id>`).
const TRASH_ITEM = `'{"id":' || id || ',"name":' || to_json(name)::text
  || ',"garden":' || to_json(garden)::text || ',"deletedAt":"' || ${ISO_TEXT('deleted_at')}
  || '","deletedBy":' || to_json(deleted_by)::text || ',"purgeAt":"' || ${ISO_TEXT('purge_at')} || '"'
  || CASE WHEN tag IS NULL THEN '' ELSE ',"tag":' || to_json(tag)::text END || '}'`;
const TRASH_PAGE = (rows: string, limit: string) =>
  JSON_PAGE(
    rows,
    limit,
    TRASH_ITEM,
    (at) => `floor(extract(epoch FROM ${at('deleted_at')}) * 1000)::bigint::text || '.' || ${at('id')}`,
  );
const ROWS = 'id, garden, name, tag, deleted_at, deleted_by, purge_at';

export const TRASH_QUERIES = {
  // A page of the gardens $1 (each along trash_garden_page, merged and cut at the limit), after
  // ($2, $3), at most $4; everyone's along trash_page.
  trashOfGardens: `SELECT t.* FROM unnest($1::text[]) AS g(id) CROSS JOIN LATERAL (
      SELECT ${COLS} FROM trash WHERE garden = g.id AND (deleted_at, id) < ($2::timestamptz, $3::bigint)
      ${ORDER} LIMIT $4) t
    ${ORDER} LIMIT $4`,
  trashAll: `SELECT ${COLS} FROM trash WHERE (deleted_at, id) < ($1::timestamptz, $2::bigint) ${ORDER} LIMIT $3`,
  // The same pages as their answers' JSON, one statement each (TrashPageQuery). trashJsonGarden:
  // the garden $1's, with its existence and the actor $2's role (null: an administrator), its rows
  // read only when the actor may write there; trashJsonMine: the gardens where the actor $1 is an
  // editor or owner now, each along trash_garden_page and merged; trashJsonAll: everyone's.
  // trashJsonAll's bound and limit, and trashJsonGarden's limit, are read through scalar subqueries
  // so that PostgreSQL keeps their generic plans rather than planning every page, as activityJson's
  // in events.ts. (trashJsonGarden's garden and bound are left in sight: hidden too, the plan test's
  // small trash was read along trash_page filtered by garden. So a custom plan for a garden with
  // fewer entries than the average still looks the cheaper, and such a garden's pages may still
  // be planned each time.)
  trashJsonGarden: `WITH g AS (SELECT m.role FROM gardens gd
      LEFT JOIN garden_members m ON m.garden_id = gd.id AND m.user_id = $2 WHERE gd.id = $1)
    SELECT EXISTS (SELECT 1 FROM g) AS found, (SELECT role FROM g) AS role, p.* FROM (${TRASH_PAGE(
      `SELECT ${ROWS} FROM trash WHERE garden = $1 AND (deleted_at, id) < ($3::timestamptz, $4::bigint)
        AND EXISTS (SELECT 1 FROM g WHERE $2::text IS NULL OR g.role IN (${WRITERS}))
      ${ORDER} LIMIT (SELECT $5 + 1)`,
      '$5',
    )}) p`,
  trashJsonMine: `SELECT true AS found, NULL::text AS role, p.* FROM (${TRASH_PAGE(
    `SELECT t.* FROM garden_members m CROSS JOIN LATERAL (
        SELECT ${ROWS} FROM trash WHERE garden = m.garden_id AND (deleted_at, id) < ($2::timestamptz, $3::bigint)
        ${ORDER} LIMIT $4 + 1) t
      WHERE m.user_id = $1 AND m.role IN (${WRITERS})
      ${ORDER} LIMIT $4 + 1`,
    '$4',
  )}) p`,
  trashJsonAll: `SELECT true AS found, NULL::text AS role, p.* FROM (${TRASH_PAGE(
    `SELECT ${ROWS} FROM trash WHERE (deleted_at, id) < ((SELECT $1::timestamptz), (SELECT $2::bigint))
      ${ORDER} LIMIT (SELECT $3 + 1)`,
    '$3',
  )}) p`,
  trashGarden: 'SELECT garden FROM trash WHERE id = $1',
  lockGardenShare: 'SELECT id FROM gardens WHERE id = $1 FOR KEY SHARE',
  // The entry, locked, with the role of the actor $2 in its garden.
  trashForWrite: `SELECT t.garden, t.owner, t.name, t.tag, m.role FROM trash t
    LEFT JOIN garden_members m ON m.garden_id = t.garden AND m.user_id = $2 WHERE t.id = $1 FOR UPDATE OF t`,
  plantExists: 'SELECT EXISTS (SELECT 1 FROM plants WHERE id = $1) AS any',
  // The entry $1 back in plants ($2 … $6: owner, garden, name, tag, words) with a new version, out
  // of the trash, with its plant.restored event at $7 (null: none; caused by $8, $9); no row: its
  // id was taken meanwhile (nothing written).
  restore: `WITH ins AS (INSERT INTO plants (id, owner, garden, name, tag, search)
      VALUES ($1, $2, $3, $4, $5, array_to_tsvector(string_to_array($6::text, ' ')))
      ON CONFLICT (id) DO NOTHING RETURNING id, owner, garden, name, tag, version),
    d AS (DELETE FROM trash WHERE id = $1 AND EXISTS (SELECT 1 FROM ins)),
    p AS (SELECT * FROM ins),
    ${eventFor('plant.restored', '$7::timestamptz', ['$8', '$9'], DATA, 'WHERE $7::timestamptz IS NOT NULL')}
    SELECT version FROM ins`,
  // A member's purge in one statement, by an actor $2 (null: admin) that may write in the entry's
  // garden, with its event at $3 (null: none; caused by $4, $5). When it erases nothing, the store
  // reads why.
  purgeTrashed: `WITH p AS (DELETE FROM trash t WHERE t.id = $1
      AND ($2::text IS NULL OR EXISTS (SELECT 1 FROM garden_members m
        WHERE m.garden_id = t.garden AND m.user_id = $2 AND m.role IN (${WRITERS})))
      RETURNING t.id, t.owner, t.garden),
    ${eventFor('plant.purged', '$3::timestamptz', ['$4', '$5'], PURGED_DATA('p'), 'WHERE $3::timestamptz IS NOT NULL')}
    SELECT id FROM p`,
  trashRole: `SELECT m.role FROM trash t LEFT JOIN garden_members m ON m.garden_id = t.garden AND m.user_id = $2
    WHERE t.id = $1`,
  // The service's purge: up to $2 entries due at $1, oldest first, those another transaction holds
  // passed over, each with its plant.purged event (no actor); nothing unless this instance holds
  // the purge's lock for the statement (another purging now: it waits for the next round).
  purgeExpired: `WITH l AS (SELECT pg_try_advisory_xact_lock(${PURGE_LOCK}) AS held),
    p AS (DELETE FROM trash WHERE id IN (
        SELECT id FROM trash WHERE purge_at <= $1 AND (SELECT held FROM l) ORDER BY purge_at LIMIT $2
        FOR UPDATE SKIP LOCKED)
      RETURNING id, owner, garden),
    ${eventFor('plant.purged', '$1::timestamptz', ['NULL', 'NULL'], PURGED_DATA('p'))}
    SELECT count(*)::int AS n FROM p`,
  // A garden's whole trash (the garden is being deleted, its row locked), each with its event at
  // $2 (null: none; caused by $3, $4).
  purgeGardenTrash: `WITH p AS (DELETE FROM trash WHERE garden = $1 RETURNING id, owner, garden),
    ${eventFor('plant.purged', '$2::timestamptz', ['$3', '$4'], PURGED_DATA('p'), 'WHERE $2::timestamptz IS NOT NULL')}
    SELECT count(*) FROM p`,
} as const;

interface TrashRow {
  id: number;
  garden: string;
  owner: string;
  name: string;
  tag: string | null;
  version: number;
  deleted_at: Date;
  deleted_by: string;
  purge_at: Date;
}
const toRecord = (r: TrashRow): TrashRecord => ({
  id: r.id,
  garden: r.garden,
  owner: r.owner,
  name: r.name,
  tag: r.tag,
  version: r.version,
  deletedAt: r.deleted_at,
  deletedBy: r.deleted_by,
  purgeAt: r.purge_at,
});

// Past every entry: where a first page starts.
const PAST_END = { deletedAt: new Date(8.64e15), id: Number.MAX_SAFE_INTEGER };

/** The trash's reads and writes. */
export class PgTrash {
  constructor(
    private readonly db: PgDb<keyof typeof TRASH_QUERIES | 'finishIdem'>,
    /** Asks for an event's NOTIFY after a write that wrote events has settled. */
    private readonly told: <T>(write: Promise<T>, event: NewEvent | undefined) => Promise<T>,
  ) {}

  async list(q: TrashQuery): Promise<TrashRecord[]> {
    const after = q.after ?? PAST_END;
    if (q.gardens?.length === 0) return [];
    const r =
      q.gardens === null
        ? await this.db.q<TrashRow>('trashAll', [after.deletedAt, after.id, q.limit])
        : await this.db.q<TrashRow>('trashOfGardens', [
            [...new Set(q.gardens)],
            after.deletedAt,
            after.id,
            q.limit,
          ]);
    return r.rows.map(toRecord);
  }

  /** A page of the trash as its answer's JSON (TrashPort.listTrashJson). */
  async listJson(q: TrashPageQuery): Promise<GardenJsonPage> {
    const after = q.after ?? PAST_END;
    const r =
      q.garden !== null
        ? await this.db.q<GardenJsonPage>('trashJsonGarden', [
            q.garden,
            q.actor,
            after.deletedAt,
            after.id,
            q.limit,
          ])
        : q.actor === null
          ? await this.db.q<GardenJsonPage>('trashJsonAll', [after.deletedAt, after.id, q.limit])
          : await this.db.q<GardenJsonPage>('trashJsonMine', [q.actor, after.deletedAt, after.id, q.limit]);
    return r.rows[0]!;
  }

  /** Restores per Store.restorePlant: the garden's row locked first, then the entry's. */
  restore(id: number, actor: Actor, idem?: IdempotencyRef, event?: NewEvent): Promise<RestoreResult> {
    if (!Number.isSafeInteger(id)) return Promise.resolve(refused('missing'));
    return this.told(
      this.db.tx(async (c): Promise<RestoreResult> => {
        for (let attempt = 0; attempt < 3; attempt++) {
          const garden = (await this.db.q<{ garden: string }>('trashGarden', [id], c)).rows[0]?.garden;
          if (garden === undefined) return refused('missing');
          if ((await this.db.q('lockGardenShare', [garden], c)).rows.length === 0) return refused('missing');
          const r = (
            await this.db.q<{
              garden: string;
              owner: string;
              name: string;
              tag: string | null;
              role: Role | null;
            }>('trashForWrite', [id, actor], c)
          ).rows[0];
          if (r === undefined) return refused('missing');
          // Replaced meanwhile by a deletion in another garden: that garden's lock is needed instead.
          if (r.garden !== garden) continue;
          const role = roleOf(actor, r.role);
          if (role === null) return refused('missing');
          if (!allows(role, 'write')) return refused('forbidden');
          return this.putBack(c, id, r, idem, event);
        }
        return refused('missing');
      }),
      event,
    );
  }

  // The entry back in plants, if its id is free (else 409, recorded against the key).
  private async putBack(
    c: pg.PoolClient,
    id: number,
    r: { garden: string; owner: string; name: string; tag: string | null },
    idem?: IdempotencyRef,
    event?: NewEvent,
  ): Promise<RestoreResult> {
    const taken = (await this.db.q<{ any: boolean }>('plantExists', [id], c)).rows[0]!.any;
    const made = taken
      ? undefined
      : (
          await this.db.q<{ version: number }>(
            'restore',
            [
              id,
              r.owner,
              r.garden,
              r.name,
              r.tag,
              indexedWords(r.name),
              event?.at ?? null,
              ...causeOf(event),
            ],
            c,
          )
        ).rows[0];
    if (made === undefined) {
      if (idem) await this.db.q('finishIdem', [409, id, idem.user, idem.key, null], c);
      return refused('exists');
    }
    const plant = { id, owner: r.owner, garden: r.garden, name: r.name, tag: r.tag, version: made.version };
    if (idem) await this.db.q('finishIdem', [200, id, idem.user, idem.key, shownPlant(plant)], c);
    return { ok: plant };
  }

  /** Erases per Store.purgeTrashed, in one statement (missing before forbidden when it erased nothing). */
  async purge(id: number, actor: Actor, event?: NewEvent): Promise<Change<true, 'missing' | 'forbidden'>> {
    if (!Number.isSafeInteger(id)) return refused('missing');
    const write = this.db.q('purgeTrashed', [id, actor, event?.at ?? null, ...causeOf(event)]);
    const r = await this.told(write, event);
    if ((r.rowCount ?? 0) > 0) return { ok: true };
    if (actor === null) return refused('missing');
    const now = (await this.db.q<{ role: Role | null }>('trashRole', [id, actor])).rows[0];
    const role = now && roleOf(actor, now.role);
    if (now === undefined || role === null) return refused('missing');
    return allows(role, 'write') ? refused('missing') : refused('forbidden');
  }

  /** One batch of the service's purge (Store.purgeExpiredTrash). */
  async purgeExpired(now: Date, limit: number): Promise<number> {
    const write = this.db.q<{ n: number }>('purgeExpired', [now, limit]);
    const n = (await write).rows[0]?.n ?? 0;
    return n;
  }
}
