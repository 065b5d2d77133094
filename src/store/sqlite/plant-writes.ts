import type Database from 'better-sqlite3';
import { allows, roleOf } from '../../access/policy.js';
import { IdSpaceExhaustedError } from '../../errors.js';
import { MAX_PLANT_ID } from '../../plant-id.js';
import { applyPatch } from '../../plant-patch.js';
import { indexedWords } from '../../search-text.js';
import { eventData, idsLeftFor, repeatedId, shownBatch, shownPlant } from '../plant-changes.js';
import {
  type Actor,
  type BatchCreateResult,
  type Change,
  type CreateResult,
  type DeleteResult,
  type IdempotencyRef,
  type NewEvent,
  type NewPlant,
  type PlantPatch,
  type Role,
  refused,
  type Trashing,
  type UpdateResult,
  type VersionedPlant,
} from '../store.js';
import type { SqliteEvents } from './events.js';
import { countWords, gardenToken } from './search.js';
import type { SqliteTrashWrites } from './trash.js';

/**
 * A batch create as the writer answers it: the plants' ids in order and the first one's version
 * (each next plant's is one more), or the refusal. The store rebuilds the plants from those it sent
 * (SqliteStore.createPlants): sending 1,000 plants back from the writer's thread cost more than
 * the ids.
 */
export type WrittenBatch =
  | { made: { ids: number[]; version: number } }
  | Exclude<BatchCreateResult, { ok: unknown }>;

/**
 * The largest plant id ever stored, the one AUTOINCREMENT assigns past (sqlite_sequence has no row
 * for plants before the first insert), as an SQL expression.
 */
export const LAST_PLANT_ID = `max(coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'plants'), 0),
  coalesce((SELECT max(id) FROM plants), 0))`;

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
  /**
   * The search index's changes of the open transaction, in order: [id, words] unindexes the plant
   * (the words it was indexed with), [id, garden token, words] indexes it. Written last, just before COMMIT (flushWords): FTS5 writes
   * its pending terms to disk as a new segment whenever a statement of the transaction opens a
   * statement journal (each plant insert does, for the write clock's trigger), so words written
   * between the plant rows made one segment, and its merges, per plant — 20 µs of a create's CPU
   * against 7 written together. Nothing reads the index in the writer's own transaction.
   */
  private words: ([number, string] | [number, string, string])[] = [];

  constructor(
    db: Database.Database,
    /** The writer's event log, which records a change's event in the same transaction. */
    private readonly events: () => SqliteEvents,
    /** The writer's trash, where a delete puts the plant when the trash is on. */
    private readonly trash: () => SqliteTrashWrites,
  ) {
    this.s = {
      insertPlant: db.prepare<[number | null, string, string, string, string | null, number], { id: number }>(
        'INSERT INTO plants (id, owner, garden, name, tag, version) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING RETURNING id',
      ),
      // A batch's plants, their ids looked up first (createMany): a plain insert, 3 µs a plant cheaper
      // than the upsert's ON CONFLICT and RETURNING.
      insertChecked: db.prepare<[number | null, string, string, string, string | null, number]>(
        'INSERT INTO plants (id, owner, garden, name, tag, version) VALUES (?, ?, ?, ?, ?, ?)',
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
      // Search's words (search.ts), written with the plant's every create, rename and delete.
      indexWords: db.prepare<[number, string, string]>(
        'INSERT INTO plant_search (rowid, garden, words) VALUES (?, ?, ?)',
      ),
      unindexWords: db.prepare<[number]>('DELETE FROM plant_search WHERE rowid = ?'),
      // How many plants have each word (search.ts plant_search_words): a word none has is deleted.
      addWord: db.prepare<[string, number]>(
        'INSERT INTO plant_search_words (word, plants) VALUES (?, ?) ON CONFLICT (word) DO UPDATE SET plants = plants + excluded.plants',
      ),
      removeWord: db.prepare<[number, string]>(
        'UPDATE plant_search_words SET plants = plants - ? WHERE word = ?',
      ),
      dropWord: db.prepare<[string]>('DELETE FROM plant_search_words WHERE word = ? AND plants <= 0'),
      plantExists: db.prepare<[number], number>('SELECT 1 FROM plants WHERE id = ?').pluck(),
      lastPlantId: db.prepare<[], number>(`SELECT ${LAST_PLANT_ID}`).pluck(),
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
    this.words = [];
  }

  /** Where the transaction's search changes stand, to rewind to (a write rolled back to a savepoint). */
  markWords(): number {
    return this.words.length;
  }

  /** Forgets the search changes made after `mark`. */
  rewindWords(mark: number): void {
    this.words.length = mark;
  }

  /** Writes the transaction's search changes to the index, in order; the transaction commits next. */
  flushWords(): void {
    const words = this.words;
    this.words = [];
    // Each word's count changes once, by the transaction's sum for it.
    const counts = new Map<string, number>();
    for (const w of words) {
      if (w.length === 2) {
        this.s.unindexWords.run(w[0]);
        countWords(counts, w[1], -1);
      } else {
        this.s.indexWords.run(w[0], w[1], w[2]);
        countWords(counts, w[2], 1);
      }
    }
    for (const [word, n] of counts) {
      if (n > 0) this.s.addWord.run(word, n);
      else if (n < 0) {
        this.s.removeWord.run(-n, word);
        this.s.dropWord.run(word);
      }
    }
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

  // Whether the creator may create in the plant's garden, read under the write lock: a garden
  // deleted, or a member removed, a moment ago takes no plant.
  private gardenRefusal(plant: NewPlant): 'no_garden' | 'forbidden' | null {
    if (plant.admin) return this.s.gardenExists.get(plant.garden) === undefined ? 'no_garden' : null;
    const role = this.s.role.get(plant.garden, plant.owner);
    if (role === undefined) return 'no_garden';
    return allows(role, 'write') ? null : 'forbidden';
  }

  // Inserts the plant with its words and its event; null: the id exists (nothing written). `checked`:
  // its id is known not to exist (createMany looked), so it is inserted without ON CONFLICT.
  private insert(plant: NewPlant, event?: NewEvent, checked = false): VersionedPlant | null {
    const version = this.nextVersion();
    const { owner, garden, name, tag } = plant;
    let id: number;
    if (checked) {
      id = Number(this.s.insertChecked.run(plant.id, owner, garden, name, tag, version).lastInsertRowid);
    } else {
      const row = this.s.insertPlant.get(plant.id, owner, garden, name, tag, version);
      if (!row) return null;
      id = row.id;
    }
    if (id > MAX_PLANT_ID) throw new IdSpaceExhaustedError();
    this.words.push([id, gardenToken(garden), indexedWords(name)]);
    if (event) this.events().record(event, 'plant.created', owner, garden, eventData(id, name, tag, garden));
    return { id, owner, garden, name, tag, version };
  }

  /**
   * Puts a plant back under its own id (a restore from the trash: the caller checked that the id is
   * free and the actor may), with a new version and its search words.
   */
  reinsert(plant: Omit<VersionedPlant, 'version'>): VersionedPlant {
    const version = this.nextVersion();
    const { id, owner, garden, name, tag } = plant;
    this.s.insertChecked.run(id, owner, garden, name, tag, version);
    this.words.push([id, gardenToken(garden), indexedWords(name)]);
    return { ...plant, version };
  }

  /** Creates a plant per Store.createPlant: its garden checked, and it written, under the write lock. */
  create(plant: NewPlant, idem?: IdempotencyRef, event?: NewEvent): CreateResult {
    const refusal = this.gardenRefusal(plant);
    if (refusal !== null) return refused(refusal);
    const made = this.insert(plant, event);
    if (idem) {
      const shown = made && shownPlant(made);
      this.s.finishIdem.run(made ? 201 : 409, made ? made.id : null, shown, idem.user, idem.key);
    }
    return made ? { ok: made } : refused('exists');
  }

  /**
   * Creates every plant or none per Store.createPlants, under the write lock: each garden checked
   * once, and every id the batch gives looked up, before anything is written. Checked first rather
   * than rolled back to a savepoint: with a savepoint open, every statement that opens a statement
   * journal (each insert does, for the write clock's trigger) copies the pages it changes into the
   * sub-journal — 17 µs a plant against 6 without, measured on 100 batches of 1,000.
   */
  createMany(plants: NewPlant[], idem?: IdempotencyRef, event?: NewEvent): WrittenBatch {
    const checked = new Set<string>();
    for (const plant of plants) {
      if (checked.has(plant.garden)) continue;
      const refusal = this.gardenRefusal(plant);
      if (refusal !== null) return { refused: refusal, garden: plant.garden };
      checked.add(plant.garden);
    }
    const given = plants.flatMap((p) => (p.id === null ? [] : [p.id]));
    const taken = repeatedId(given) ?? given.find((id) => this.s.plantExists.get(id) !== undefined);
    if (taken !== undefined && taken !== null) {
      if (idem) this.s.finishIdem.run(409, taken, null, idem.user, idem.key);
      return { refused: 'exists', id: taken };
    }
    // With ids given, the batch's own ids are assigned past them (and past every id ever stored, as
    // AUTOINCREMENT would): one given after a row without one never meets the id that row took.
    let next = given.length === 0 ? null : Math.max(this.s.lastPlantId.get()!, ...given) + 1;
    if (next !== null && !idsLeftFor(next - 1, plants.length - given.length))
      throw new IdSpaceExhaustedError();
    const ids: number[] = [];
    let version = 0;
    // Checked above under the same write lock: an id that exists now would fail its insert, and
    // throwing rolls the writer's transaction back whole.
    for (const plant of plants) {
      const id = plant.id ?? (next === null ? null : next++);
      const made = this.insert(id === plant.id ? plant : { ...plant, id }, event, true)!;
      if (ids.length === 0) version = made.version;
      ids.push(made.id);
    }
    if (idem) {
      const shown = shownBatch(ids);
      this.s.finishIdem.run(201, null, shown, idem.user, idem.key);
    }
    return { made: { ids, version } };
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
      if (name !== was.name) {
        this.words.push([id, indexedWords(was.name)], [id, gardenToken(was.garden), indexedWords(name)]);
      }
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
    trash?: Trashing | null,
  ): Change<string, Extract<DeleteResult, { refused: unknown }>['refused']> {
    const found = this.plantOf(id, actor);
    if (found === null) return refused('missing');
    if (!found.writable) return refused('forbidden');
    const gone = found.plant;
    if (ifVersions && !ifVersions.includes(gone.version)) return refused('mismatch');
    this.s.deletePlant.run(id);
    this.words.push([id, indexedWords(gone.name)]);
    if (event) {
      const data = eventData(gone.id, gone.name, gone.tag, gone.garden);
      this.events().record(event, 'plant.deleted', gone.owner, gone.garden, data);
    }
    if (trash) this.trash().put(gone, trash, event);
    return { ok: gone.garden };
  }
}
