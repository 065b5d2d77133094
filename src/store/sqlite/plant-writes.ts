import type Database from 'better-sqlite3';
import { allows, roleOf } from '../../access/policy.js';
import { IdSpaceExhaustedError } from '../../errors.js';
import { MAX_PLANT_ID } from '../../plant-id.js';
import { applyPatch } from '../../plant-patch.js';
import { eventData, shownPlant } from '../plant-changes.js';
import {
  type Actor,
  type Change,
  type CreateResult,
  type DeleteResult,
  type IdempotencyRef,
  type NewEvent,
  type NewPlant,
  type PlantPatch,
  type Role,
  refused,
  type UpdateResult,
  type VersionedPlant,
} from '../store.js';
import type { SqliteEvents } from './events.js';

// id, owner, garden, name, tag, version
type Row = [number, string, string, string, string | null, number];

/**
 * The plant writes of SQLite: creates, changes and deletes, each with its garden's role check, its
 * Idempotency-Key outcome and its event. Each runs inside the writer's transaction (writes.ts),
 * which holds the database's write lock from its first statement: the check and the write are one
 * step, whatever another request, process or instance does meanwhile.
 */
export class SqlitePlantWrites {
  private readonly s;
  /** The last plant version given, in the open transaction (undefined: not read yet). */
  private rev: number | undefined;

  constructor(
    db: Database.Database,
    /** The writer's event log, which records a change's event in the same transaction. */
    private readonly events: () => SqliteEvents,
  ) {
    this.s = {
      insertPlant: db.prepare<[number | null, string, string, string, string | null, number], { id: number }>(
        'INSERT INTO plants (id, owner, garden, name, tag, version) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING RETURNING id',
      ),
      plantForWrite: db
        .prepare<[number], Row>('SELECT id, owner, garden, name, tag, version FROM plants WHERE id = ?')
        .raw(),
      role: db
        .prepare<[string, string], Role>(
          'SELECT role FROM garden_members WHERE garden_id = ? AND user_id = ?',
        )
        .pluck(),
      gardenExists: db.prepare<[string], number>('SELECT 1 FROM gardens WHERE id = ?').pluck(),
      updatePlant: db.prepare<[string, string | null, number, number]>(
        'UPDATE plants SET name = ?, tag = ?, version = ? WHERE id = ?',
      ),
      deletePlant: db.prepare<[number]>('DELETE FROM plants WHERE id = ?'),
      finishIdem: db.prepare<[number, number | null, string | null, string, string]>(
        `UPDATE idempotency_keys SET state = 'done', status = ?, plant_id = ?, response = ? WHERE user_id = ? AND key = ?`,
      ),
      rev: db.prepare<[], number>('SELECT rev FROM write_clock').pluck(),
    };
  }

  /**
   * A new transaction: the versions it gives follow the last one given, by any writer (the write
   * lock is held from BEGIN IMMEDIATE, so no other writer gives one meanwhile); read lazily, once.
   */
  begin(): void {
    this.rev = undefined;
  }

  /** The last version the open transaction gave; undefined: none. */
  get lastVersion(): number | undefined {
    return this.rev;
  }

  // The next plant version: one more than the last given by any writer.
  private nextVersion(): number {
    this.rev = (this.rev ?? this.s.rev.get()!) + 1;
    return this.rev;
  }

  /** Creates a plant per Store.createPlant: its garden checked, and it written, under the write lock. */
  create(plant: NewPlant, idem?: IdempotencyRef, event?: NewEvent): CreateResult {
    if (plant.admin) {
      // Read under the write lock: a garden deleted a moment ago takes no plant.
      if (this.s.gardenExists.get(plant.garden) === undefined) return refused('no_garden');
    } else {
      // Likewise, a member removed a moment ago creates nothing.
      const role = this.s.role.get(plant.garden, plant.owner);
      if (role === undefined) return refused('no_garden');
      if (!allows(role, 'write')) return refused('forbidden');
    }
    const version = this.nextVersion();
    const row = this.s.insertPlant.get(plant.id, plant.owner, plant.garden, plant.name, plant.tag, version);
    if (row && row.id > MAX_PLANT_ID) throw new IdSpaceExhaustedError();
    if (idem) {
      const shown = row ? shownPlant({ ...plant, version }) : null;
      this.s.finishIdem.run(row ? 201 : 409, row ? row.id : null, shown, idem.user, idem.key);
    }
    if (!row) return refused('exists');
    if (event) {
      const data = eventData(row.id, plant.name, plant.tag, plant.garden);
      this.events().record(event, 'plant.created', plant.owner, plant.garden, data);
    }
    const created = {
      id: row.id,
      owner: plant.owner,
      garden: plant.garden,
      name: plant.name,
      tag: plant.tag,
    };
    return { ok: { ...created, version } };
  }

  // The plant, if it exists and the actor (null: admin) may see it, and whether the actor may change it.
  private plantOf(id: number, actor: Actor): { plant: VersionedPlant; writable: boolean } | null {
    const r = this.s.plantForWrite.get(id);
    if (r === undefined) return null;
    const role = roleOf(actor, actor === null ? null : this.s.role.get(r[2], actor));
    if (role === null) return null;
    const plant = { id: r[0], owner: r[1], garden: r[2], name: r[3], tag: r[4], version: r[5] };
    return { plant, writable: allows(role, 'write') };
  }

  /** Changes the plant per Store.updatePlant: read, checked and written under the write lock. */
  update(
    id: number,
    actor: Actor,
    patch: PlantPatch,
    ifVersions: number[] | null,
    idem?: IdempotencyRef,
    event?: NewEvent,
  ): UpdateResult {
    const found = this.plantOf(id, actor);
    if (found === null) return refused('missing');
    if (!found.writable) return refused('forbidden');
    const was = found.plant;
    if (ifVersions !== null && !ifVersions.includes(was.version))
      return refused('mismatch', { current: was });
    const { name, tag, changed, previous } = applyPatch(was, patch);
    const now = changed ? { ...was, name, tag, version: this.nextVersion() } : was;
    if (changed) {
      this.s.updatePlant.run(name, tag, now.version, id);
      if (event) {
        const data = eventData(id, name, tag, was.garden, previous);
        this.events().record(event, 'plant.updated', was.owner, was.garden, data);
      }
    }
    if (idem) {
      const shown = shownPlant(now);
      this.s.finishIdem.run(200, id, shown, idem.user, idem.key);
    }
    return { ok: { plant: now, changed } };
  }

  /**
   * Deletes the plant per Store.deletePlant, under the write lock; answers its garden (whose list
   * marks move) in place of `true`.
   */
  delete(
    id: number,
    actor: Actor,
    event?: NewEvent,
    ifVersions?: number[] | null,
  ): Change<string, Extract<DeleteResult, { refused: unknown }>['refused']> {
    const found = this.plantOf(id, actor);
    if (found === null) return refused('missing');
    if (!found.writable) return refused('forbidden');
    const gone = found.plant;
    if (ifVersions && !ifVersions.includes(gone.version)) return refused('mismatch');
    this.s.deletePlant.run(id);
    if (event) {
      const data = eventData(gone.id, gone.name, gone.tag, gone.garden);
      this.events().record(event, 'plant.deleted', gone.owner, gone.garden, data);
    }
    return { ok: gone.garden };
  }
}
