import { roleOf } from '../../access/policy.js';
import type { ListMarks, Membership, PagePlant, PageQuery, Role, VersionedPlant } from '../store.js';
import { CallBatch } from './call-batch.js';
import type { PgDb } from './db.js';
import { type PLANT_QUERIES, versionedGardensPage } from './plant-queries.js';

// The plant reads of the PostgreSQL store. As in the SQLite store, the reads of one kind that arrive
// in one turn of the event loop become one statement (getPlant and plantFor one, listPlants
// another, scopeMarks a third): a batch costs one pool checkout, one round trip and one
// statement's parse, bind and plan instead of one per call. Its statement is sent after every
// request of the turn has queued its read (and, under load, once fewer than IN_FLIGHT of its kind
// are under way), so each read still sees every write acknowledged before it was sent.

/** A read of one plant, with the role of `user` in its garden (null: none asked). */
interface PlantRead {
  id: number;
  user: string | null;
}
/** A read of a user's memberships with the marks of its list with `tag`. */
interface ScopeRead {
  user: string;
  tag: string | null;
}
/** A plant as read with a user's role in its garden. */
export type PlantRow = VersionedPlant & { role: Role | null };

/** The plant of a row read with more beside it. */
export const toPlant = (r: PlantRow): VersionedPlant => ({
  id: r.id,
  owner: r.owner,
  garden: r.garden,
  name: r.name,
  tag: r.tag,
  version: r.version,
});

/** A garden's list marks as read (plant-queries.ts, MARK_COLS). */
interface MarkRow {
  garden: string;
  reorder: number;
  top: number;
  tag_top: number | null;
}

/**
 * The marks of the list of these gardens' plants (rows in garden order). One garden: its own
 * (reorder; top, or the tag's top). Several: every garden's marks as one string in both, so that
 * any write in any of them renews every page — a server id committed in one garden may land below
 * the newest id of another, inside an earlier page of the merged list.
 */
function marksOf(rows: MarkRow[]): ListMarks {
  if (rows.length === 1) {
    const r = rows[0]!;
    return { reorder: r.reorder, top: r.tag_top ?? r.top };
  }
  const all = rows.map((r) => `${r.reorder}.${r.top}.${r.tag_top ?? ''}`).join(',');
  return { reorder: all, top: all };
}

// Arguments the batch's typed arrays would refuse (so failing every read of the batch) or that
// PostgreSQL refuses in text (NUL) go on their own, failing alone as before.
export const batchable = (q: PageQuery): boolean =>
  Number.isSafeInteger(q.afterId) &&
  Number.isSafeInteger(q.limit) &&
  q.limit >= 0 &&
  !q.gardens?.some((g) => g.includes('\0')) &&
  !q.tag?.includes('\0');

/**
 * The rows of a batched statement, each tagged with its call's ordinal n (1-based), as one list per
 * call of `calls`, each in id order (`as` makes a call's row of a statement's). Each call's rows come
 * out of its own ordered scan; SQL promises that order only under a top-level ORDER BY, which would
 * sort the whole result, so the (unlikely) other case is put right here.
 */
export function perCall<R extends { n: number; id: number }, T extends { id: number }>(
  rows: readonly R[],
  calls: number,
  as: (r: R) => T,
): T[][] {
  const per = Array.from({ length: calls }, (): T[] => []);
  let ordered = true;
  for (const r of rows) {
    const mine = per[r.n - 1]!;
    const last = mine[mine.length - 1];
    if (last !== undefined && last.id > r.id) ordered = false;
    mine.push(as(r));
  }
  if (!ordered) for (const mine of per) mine.sort((a, b) => a.id - b.id);
  return per;
}

/** How many statements of one kind of read (or of creates) are under way at once, at most. */
export const IN_FLIGHT = 2;

/** Reads plants, batched per turn. */
export class PgPlantReads {
  constructor(private readonly db: PgDb<keyof typeof PLANT_QUERIES>) {}

  // Two statements of a kind at most under way (CallBatch): the rest wait and go together.
  private readonly gets = new CallBatch((reads: PlantRead[]) => this.getBatch(reads), IN_FLIGHT);
  private readonly lists = new CallBatch((qs: PageQuery[]) => this.listBatch(qs), IN_FLIGHT);
  private readonly scopes = new CallBatch((qs: ScopeRead[]) => this.scopeBatch(qs), IN_FLIGHT);

  /** The user's memberships and the marks of the list of all its gardens' plants with `tag`, in one read. */
  scopeMarks(user: string, tag: string | null): Promise<{ memberships: Membership[]; marks: ListMarks }> {
    return this.scopes.push({ user, tag });
  }

  private async scopeBatch(qs: ScopeRead[]): Promise<{ memberships: Membership[]; marks: ListMarks }[]> {
    // Text PostgreSQL refuses (NUL) would fail the whole batch: such a read goes alone.
    const alone = qs.length > 1 && qs.some((q) => q.user.includes('\0') || q.tag?.includes('\0'));
    if (alone) return Promise.all(qs.map((q) => this.scopeBatch([q]).then((r) => r[0]!)));
    const { rows } = await this.db.q<MarkRow & { n: number; role: Role }>('scopeMarks', [
      qs.map((q) => q.user),
      qs.map((q) => q.tag),
    ]);
    const per = qs.map((): (MarkRow & { role: Role })[] => []);
    for (const r of rows) per[r.n - 1]!.push(r);
    return per.map((mine) => ({
      memberships: mine.map((r) => ({ garden: r.garden, role: r.role })),
      marks: marksOf(mine),
    }));
  }

  /** The marks of the list of `gardens`' plants with `tag` (null for everyone's: no marks). */
  async listMarks(gardens: string[] | null, tag: string | null): Promise<ListMarks | null> {
    if (gardens === null) return null;
    const rows = (await this.db.q<MarkRow>('gardenMarks', [[...new Set(gardens)], tag])).rows;
    return marksOf(rows);
  }

  /** The plant with this id, whoever's garden it is in. */
  async get(id: number): Promise<VersionedPlant | null> {
    return (await this.read({ id, user: null }))?.plant ?? null;
  }

  /** The plant with this id and the user's role in its garden (null user: admin, owner); null if none or no member. */
  async plantFor(id: number, user: string | null): Promise<{ plant: VersionedPlant; role: Role } | null> {
    const r = await this.read({ id, user });
    if (r === null) return null;
    const role = roleOf(user, r.role);
    return role === null ? null : { plant: r.plant, role };
  }

  private read(x: PlantRead): Promise<{ plant: VersionedPlant; role: Role | null } | null> {
    // An id the batch's bigint[] would refuse, or a user text refuses, fails on its own rather
    // than with its batch.
    return Number.isSafeInteger(x.id) && !x.user?.includes('\0') ? this.gets.push(x) : this.readOne(x);
  }

  private async readOne(x: PlantRead): Promise<{ plant: VersionedPlant; role: Role | null } | null> {
    const row = (await this.db.q<PlantRow>('plantFor', [x.id, x.user])).rows[0];
    return row ? { plant: toPlant(row), role: row.role } : null;
  }

  private async getBatch(
    reads: PlantRead[],
  ): Promise<({ plant: VersionedPlant; role: Role | null } | null)[]> {
    if (reads.length === 1) return [await this.readOne(reads[0]!)];
    const rows = (
      await this.db.q<PlantRow & { n: number }>('plantsFor', [
        reads.map((x) => x.id),
        reads.map((x) => x.user),
      ])
    ).rows;
    const byN = new Map(rows.map((r) => [r.n, r]));
    // Each caller gets a record of its own, as from a query of its own, even for the same id.
    return reads.map((_, i) => {
      const row = byN.get(i + 1);
      return row ? { plant: toPlant(row), role: row.role } : null;
    });
  }

  /** A page of plants (see Store.listPlants). */
  list(q: PageQuery): Promise<PagePlant[]> {
    // A garden named twice is read once; no gardens, no plants.
    const page = q.gardens === null ? q : { ...q, gardens: [...new Set(q.gardens)] };
    if (page.gardens !== null && page.gardens.length === 0) return Promise.resolve([]);
    // A page with each plant's version (include=version): one statement, outside the turn's batch.
    if (q.withVersion) return this.listOne(page, true);
    return batchable(page) ? this.lists.push(page) : this.listOne(page, false);
  }

  private async listOne(q: PageQuery, withVersion: boolean): Promise<PagePlant[]> {
    const v = withVersion ? 'V' : '';
    if (withVersion && q.gardens !== null)
      return (await this.db.q<PagePlant>(...versionedGardensPage(q.gardens, q.tag, q.afterId, q.limit))).rows;
    const r =
      q.gardens === null
        ? q.tag === null
          ? await this.db.q<PagePlant>(`listAll${v}`, [q.afterId, q.limit])
          : await this.db.q<PagePlant>(`listAllTag${v}`, [q.tag, q.afterId, q.limit])
        : q.tag === null
          ? await this.db.q<PagePlant>(`listGardens${v}`, [q.gardens, q.afterId, q.limit])
          : await this.db.q<PagePlant>(`listGardensTag${v}`, [q.gardens, q.tag, q.afterId, q.limit]);
    return r.rows;
  }

  private async listBatch(qs: PageQuery[]): Promise<PagePlant[][]> {
    if (qs.length === 1) return [await this.listOne(qs[0]!, false)];
    // Every page's gardens in one array, each page naming its slice (1-based, inclusive).
    const gardens: string[] = [];
    const lo: (number | null)[] = [];
    const hi: (number | null)[] = [];
    for (const q of qs) {
      lo.push(q.gardens === null ? null : gardens.length + 1);
      if (q.gardens !== null) gardens.push(...q.gardens);
      hi.push(q.gardens === null ? null : gardens.length);
    }
    const { rows } = await this.db.q<PagePlant & { n: number }>('listPages', [
      qs.map((q) => q.tag),
      qs.map((q) => q.afterId),
      qs.map((q) => q.limit),
      lo,
      hi,
      gardens,
    ]);
    return perCall(rows, qs.length, (r) => ({ id: r.id, garden: r.garden, name: r.name, tag: r.tag }));
  }
}
