import type Database from 'better-sqlite3';
import { allows, roleOf } from '../../access/policy.js';
import { type GardenRead, mergeOrdered } from '../garden-merge.js';
import { eventData, shownPlant } from '../plant-changes.js';
import {
  type Actor,
  type Change,
  type IdempotencyRef,
  type NewEvent,
  type RestoreResult,
  type Role,
  refused,
  type Trashing,
  type TrashPosition,
  type TrashQuery,
  type TrashRecord,
  type VersionedPlant,
} from '../store.js';
import type { SqliteEvents } from './events.js';
import type { SqlitePlantWrites } from './plant-writes.js';

// The trash on SQLite (contract 13.2; migration 19): writes run in the writer's transaction, under
// the database's write lock, so each check and its change are one step; reads run in the store's
// read batch.

// id, garden, owner, name, tag, version, deleted_at, deleted_by, purge_at
type Row = [number, string, string, string, string | null, number, number, string, number];
const COLS = 'id, garden, owner, name, tag, version, deleted_at, deleted_by, purge_at';
const toRecord = (r: Row): TrashRecord => ({
  id: r[0],
  garden: r[1],
  owner: r[2],
  name: r[3],
  tag: r[4],
  version: r[5],
  deletedAt: new Date(r[6]),
  deletedBy: r[7],
  purgeAt: new Date(r[8]),
});

// Newest deletion first, then the larger id: a page goes on strictly after (deleted_at, id).
const PAST_END = { deletedAt: new Date(8.64e15), id: Number.MAX_SAFE_INTEGER };
/** Whether entry `a` comes before `b` in a trash page (newest deletion first, then the larger id). */
const before = (a: TrashRecord, b: TrashRecord): boolean =>
  a.deletedAt.getTime() > b.deletedAt.getTime() ||
  (a.deletedAt.getTime() === b.deletedAt.getTime() && a.id > b.id);
const positionOf = (r: TrashRecord): TrashPosition => ({ deletedAt: r.deletedAt, id: r.id });

/** Trash pages: one garden's along trash_garden_page, several merged, everyone's along trash_page. */
export class SqliteTrashReads {
  private readonly s;

  constructor(db: Database.Database) {
    this.s = {
      ofGarden: db
        .prepare<[string, number, number, number], Row>(
          `SELECT ${COLS} FROM trash WHERE garden = ? AND (deleted_at, id) < (?, ?)
           ORDER BY deleted_at DESC, id DESC LIMIT ?`,
        )
        .raw(),
      all: db
        .prepare<[number, number, number], Row>(
          `SELECT ${COLS} FROM trash WHERE (deleted_at, id) < (?, ?) ORDER BY deleted_at DESC, id DESC LIMIT ?`,
        )
        .raw(),
    };
  }

  /** A page of the trash per TrashQuery. */
  list(q: TrashQuery): TrashRecord[] {
    const after = q.after ?? PAST_END;
    if (q.gardens === null) {
      return this.s.all.all(after.deletedAt.getTime(), after.id, q.limit).map(toRecord);
    }
    const read: GardenRead<TrashRecord, TrashPosition> = (garden, from, n) => {
      return this.s.ofGarden.all(garden, from.deletedAt.getTime(), from.id, n).map(toRecord);
    };
    return mergeOrdered(q.gardens, after, q.limit, read, { before, positionOf });
  }
}

/**
 * The trash's writes: a deleted plant put in, a restore, a member's purge and the service's purge
 * of expired entries, each with its event.
 */
export class SqliteTrashWrites {
  private readonly s;

  constructor(
    db: Database.Database,
    private readonly events: () => SqliteEvents,
    /** The plant writes of the same transaction: a restore takes a version and search words there. */
    private readonly plants: () => SqlitePlantWrites,
  ) {
    this.s = {
      entry: db.prepare<[number], Row>(`SELECT ${COLS} FROM trash WHERE id = ?`).raw(),
      put: db.prepare<[number, string, string, string, string | null, number, number, string, number]>(
        `INSERT INTO trash (${COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      ),
      putNew: db.prepare<Row>(
        `INSERT INTO trash (${COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
      ),
      remove: db.prepare<[number]>('DELETE FROM trash WHERE id = ?'),
      expired: db
        .prepare<[number, number], [number, string, string]>(
          `DELETE FROM trash WHERE id IN (SELECT id FROM trash WHERE purge_at <= ? ORDER BY purge_at LIMIT ?)
           RETURNING id, owner, garden`,
        )
        .raw(),
      ofGarden: db
        .prepare<[string], [number, string]>('DELETE FROM trash WHERE garden = ? RETURNING id, owner')
        .raw(),
      role: db
        .prepare<[string, string], Role>(
          'SELECT role FROM garden_members WHERE garden_id = ? AND user_id = ?',
        )
        .pluck(),
      plantExists: db.prepare<[number], number>('SELECT 1 FROM plants WHERE id = ?').pluck(),
      finishIdem: db.prepare<[number, number | null, string | null, string, string]>(
        `UPDATE idempotency_keys SET state = 'done', status = ?, plant_id = ?, response = ? WHERE user_id = ? AND key = ?`,
      ),
    };
  }

  // A plant.purged event of entry `id` (made by `owner`, in `garden`).
  private purged(event: NewEvent | undefined, id: number, owner: string, garden: string): void {
    if (event) this.events().record(event, 'plant.purged', owner, garden, { id, garden });
  }

  /**
   * Puts a plant just deleted into its garden's trash; an entry with its id already there (deleted,
   * made again, deleted again) is erased for good first, with its plant.purged event.
   */
  put(plant: VersionedPlant, trashing: Trashing, event?: NewEvent): void {
    const { deletedAt, deletedBy, purgeAt } = trashing;
    const row: Row = [
      plant.id,
      plant.garden,
      plant.owner,
      plant.name,
      plant.tag,
      plant.version,
      deletedAt.getTime(),
      deletedBy,
      purgeAt.getTime(),
    ];
    // The common case in one statement; only when the id is there already is the old entry read.
    if (this.s.putNew.run(...row).changes > 0) return;
    const old = this.s.entry.get(plant.id)!;
    this.s.remove.run(plant.id);
    this.purged(event, old[0], old[2], old[1]);
    this.s.put.run(...row);
  }

  // The entry and whether the actor (null: admin) may see it (a member) and act on it (an editor).
  private entryFor(id: number, actor: Actor): Change<TrashRecord, 'missing' | 'forbidden'> {
    const r = this.s.entry.get(id);
    if (r === undefined) return refused('missing');
    const role = roleOf(actor, actor === null ? null : this.s.role.get(r[1], actor));
    if (role === null) return refused('missing');
    return allows(role, 'write') ? { ok: toRecord(r) } : refused('forbidden');
  }

  /** Restores per Store.restorePlant, under the write lock. */
  restore(id: number, actor: Actor, idem?: IdempotencyRef, event?: NewEvent): RestoreResult {
    const found = this.entryFor(id, actor);
    if ('refused' in found) return found;
    if (this.s.plantExists.get(id) !== undefined) {
      if (idem) this.s.finishIdem.run(409, id, null, idem.user, idem.key);
      return refused('exists');
    }
    const { owner, garden, name, tag } = found.ok;
    const plant = this.plants().reinsert({ id, owner, garden, name, tag });
    this.s.remove.run(id);
    if (event) this.events().record(event, 'plant.restored', owner, garden, eventData(id, name, tag, garden));
    if (idem) this.s.finishIdem.run(200, id, shownPlant(plant), idem.user, idem.key);
    return { ok: plant };
  }

  /** Erases an entry per Store.purgeTrashed, under the write lock. */
  purge(id: number, actor: Actor, event?: NewEvent): Change<string, 'missing' | 'forbidden'> {
    const found = this.entryFor(id, actor);
    if ('refused' in found) return found;
    this.s.remove.run(id);
    this.purged(event, id, found.ok.owner, found.ok.garden);
    return { ok: found.ok.garden };
  }

  /** Erases up to `limit` expired entries per Store.purgeExpiredTrash; how many. */
  purgeExpired(now: Date, limit: number): number {
    const gone = this.s.expired.all(now.getTime(), limit);
    const event = { at: now };
    for (const [id, owner, garden] of gone) this.purged(event, id, owner, garden);
    return gone.length;
  }

  /** Erases a garden's whole trash (the garden is being deleted), each entry with its event. */
  purgeGarden(garden: string, event?: NewEvent): void {
    for (const [id, owner] of this.s.ofGarden.all(garden)) this.purged(event, id, owner, garden);
  }
}
