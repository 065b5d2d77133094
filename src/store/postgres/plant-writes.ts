import type pg from 'pg';
import { allows, roleOf } from '../../access/policy.js';
import { IdSpaceExhaustedError, StoreUnavailableError } from '../../errors.js';
import { applyPatch } from '../../plant-patch.js';
import { indexedWords } from '../../search-text.js';
import { eventData, idsLeftFor, repeatedId, shownBatch, shownPlant } from '../plant-changes.js';
import {
  type Actor,
  type BatchCreateResult,
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
} from '../store.js';
import { CallBatch } from './call-batch.js';
import type { PgDb } from './db.js';
import { causeOf, requestCause } from './events.js';
import type { PLANT_QUERIES } from './plant-queries.js';
import { IN_FLIGHT, type PlantRow, toPlant } from './plant-reads.js';

// The plant writes of the PostgreSQL store: creates (batched per turn), changes and deletes, each
// with its garden's role check and its event in the same statement or transaction.

// Arbitrary but fixed key of the advisory lock that serializes client-chosen ids.
const ID_LOCK = 727_002;

/** A create with a server-assigned id; event null: it records none. */
interface ServerIdCreate {
  plant: NewPlant;
  event: NewEvent | null;
}

/** A delete as the store was asked for it. */
interface PlantDelete {
  id: number;
  actor: Actor;
  versions: number[] | null;
  event: NewEvent | null;
  trash: Trashing | null;
}

/** A plant a create wrote (its id and version), or why its garden refused it. */
type Made = { id: number; version: number } | 'no_garden' | 'forbidden';

/** A row of createPlants: the plant written, or (id null) whether its garden was found and the creator's role. */
interface CreateRow {
  n: number;
  id: number | null;
  version: number | null;
  found: boolean;
  role: Role | null;
}

/** What a create row says; null when its id was taken (a server-assigned one then takes the next id). */
function madeOf(plant: NewPlant, r: CreateRow | undefined): Made | null {
  if (r === undefined) return null;
  if (r.id !== null && r.version !== null) return { id: r.id, version: r.version };
  const role = roleOf(plant.admin ? null : plant.owner, r.role);
  if (!r.found || role === null) return 'no_garden';
  return allows(role, 'write') ? null : 'forbidden';
}

// What createPlant answers for what it made; null: the id exists.
function createResult(plant: NewPlant, made: Made | null): CreateResult {
  if (made === null) return refused('exists');
  if (typeof made === 'string') return refused(made);
  const { owner, garden, name, tag } = plant;
  return { ok: { id: made.id, owner, garden, name, tag, version: made.version } };
}

/** Ends a batch's transaction (rolled back) with what the batch answers. */
class BatchRefused extends Error {
  constructor(readonly outcome: BatchCreateResult | 'again') {
    super('batch refused');
  }
}

/** Creates, changes and deletes plants. */
export class PgPlantWrites {
  constructor(private readonly db: PgDb<keyof typeof PLANT_QUERIES | 'finishIdem'>) {}

  // The creates with server-assigned ids of a turn: one statement checks their gardens and writes
  // their plants and events.
  private readonly creates = new CallBatch((cs: ServerIdCreate[]) => this.createBatch(cs), IN_FLIGHT);
  // The deletes of a turn: one statement for them all (deleteBatch).
  private readonly deletes = new CallBatch((ds: PlantDelete[]) => this.deleteBatch(ds), IN_FLIGHT);

  /** Creates a plant (see Store.createPlant). */
  async create(plant: NewPlant, idem?: IdempotencyRef, event?: NewEvent): Promise<CreateResult> {
    const create = { plant, event: event ?? null };
    if (plant.id === null && !idem) {
      // The common case: the turn's creates in one statement, no explicit transaction (their garden
      // checks and events in the same statement).
      return createResult(plant, await this.creates.push(create));
    }
    return this.db.tx(async (c): Promise<CreateResult> => {
      const made =
        plant.id === null ? await this.createOne(create, c) : await this.createClientId(plant, event, c);
      // A refusal by the garden records nothing against the key: the caller releases it.
      if (typeof made === 'string') return createResult(plant, made);
      if (idem) {
        const shown = made && shownPlant({ ...plant, version: made.version });
        await this.db.q(
          'finishIdem',
          [made === null ? 409 : 201, made?.id ?? null, idem.user, idem.key, shown],
          c,
        );
      }
      return createResult(plant, made);
    });
  }

  // A client-chosen id, step by step in the create's transaction: the plant, if its creator may
  // write in its garden (null: the id exists), the sequence raised past it, and its event.
  private async createClientId(
    plant: NewPlant,
    event: NewEvent | undefined,
    c: pg.PoolClient,
  ): Promise<Made | null> {
    const row = (
      await this.db.q<Omit<CreateRow, 'n'>>(
        'insertClientId',
        [
          plant.id,
          plant.owner,
          plant.garden,
          plant.name,
          plant.tag,
          plant.admin === true,
          indexedWords(plant.name),
        ],
        c,
      )
    ).rows[0]!;
    const made = madeOf(plant, { ...row, n: 1 });
    if (typeof made === 'string') return made;
    if (made === null) return null;
    // Serialized so two concurrent client ids cannot lower the sequence below either of them.
    await c.query('SELECT pg_advisory_xact_lock($1)', [ID_LOCK]);
    await this.db.q('raiseSequence', [made.id], c);
    if (event) {
      await this.db.q(
        'recordCreated',
        [made.id, plant.owner, plant.garden, plant.name, plant.tag, event.at, ...causeOf(event)],
        c,
      );
    }
    return made;
  }

  /**
   * Creates every plant or none (see Store.createPlants), in one transaction: the gardens checked
   * and locked first; with ids given, the sequence raised past them before any id is assigned, so
   * that no assigned id meets one the batch gives; then every plant and its event in one statement.
   * An id given twice or that exists refuses it all; a server-assigned id that a client had taken
   * meanwhile makes the batch run again.
   */
  async createMany(plants: NewPlant[], idem?: IdempotencyRef, event?: NewEvent): Promise<BatchCreateResult> {
    if (plants.some((p) => p.id !== null && !Number.isSafeInteger(p.id))) {
      throw new TypeError('plant ids must be safe integers');
    }
    const gardens = [...new Set(plants.map((p) => p.garden))];
    const owner = plants[0]!.owner;
    const admin = plants[0]!.admin === true;
    const given = plants.flatMap((p) => (p.id === null ? [] : [p.id]));
    const maxId = Math.max(0, ...given);
    const twice = repeatedId(given);
    if (twice !== null) return this.batchExists(twice, idem);
    if (!idsLeftFor(maxId, plants.length - given.length)) throw new IdSpaceExhaustedError();
    for (let attempt = 0; attempt < 10; attempt++) {
      const outcome = await this.db
        .tx(async (c): Promise<BatchCreateResult | 'again'> => {
          const access = await this.db.q<{ garden: string; found: boolean; role: Role | null }>(
            'batchAccess',
            [gardens, owner],
            c,
          );
          for (const a of access.rows) {
            const role = roleOf(admin ? null : owner, a.role);
            if (!a.found || role === null) return { refused: 'no_garden', garden: a.garden };
            if (!allows(role, 'write')) return { refused: 'forbidden', garden: a.garden };
          }
          if (maxId > 0) {
            // As one client-chosen id's create, serialized with the others; an id that exists is
            // refused before the sequence moves (setval is not rolled back).
            await c.query('SELECT pg_advisory_xact_lock($1)', [ID_LOCK]);
            const exists = await this.db.q<{ id: number }>('firstExisting', [given], c);
            if (exists.rows[0] !== undefined) return { refused: 'exists', id: exists.rows[0].id };
            await this.db.q('raiseSequence', [maxId], c);
          }
          const { rows } = await this.db.q<{ n: number; id: number; version: number | null }>(
            'createBatch',
            [
              plants.map((p) => p.id),
              plants.map((p) => p.owner),
              plants.map((p) => p.garden),
              plants.map((p) => p.name),
              plants.map((p) => p.tag),
              plants.map((p) => indexedWords(p.name)),
              event?.at ?? null,
              ...causeOf(event),
            ],
            c,
          );
          const taken = rows.find((r) => r.version === null);
          if (taken !== undefined) {
            // Nothing of the batch stays: the transaction is rolled back by the throw.
            const asked = plants[taken.n - 1]!.id;
            throw new BatchRefused(asked === null ? 'again' : { refused: 'exists', id: asked });
          }
          const made = rows.map((r, i) => {
            const { owner, garden, name, tag } = plants[i]!;
            return { id: r.id, owner, garden, name, tag, version: r.version! };
          });
          if (idem) {
            const shown = shownBatch(made.map((p) => p.id));
            await this.db.q('finishIdem', [201, null, idem.user, idem.key, shown], c);
          }
          return { ok: made };
        })
        .catch((err) => {
          if (err instanceof BatchRefused) return err.outcome;
          // The sequence stops at 2^53−1 (sequence_generator_limit_exceeded).
          if ((err as { code?: string }).code === '2200H') throw new IdSpaceExhaustedError();
          throw err;
        });
      if (outcome === 'again') continue;
      if ('refused' in outcome && outcome.refused === 'exists') return this.batchExists(outcome.id, idem);
      return outcome;
    }
    throw new StoreUnavailableError('could not find free plant ids; retry later');
  }

  // A batch refused for an id that exists (or that it gives twice), its 409 recorded against the key.
  private async batchExists(id: number, idem?: IdempotencyRef): Promise<BatchCreateResult> {
    if (idem) await this.db.q('finishIdem', [409, id, idem.user, idem.key, null]);
    return { refused: 'exists', id };
  }

  /** Changes a plant (see Store.updatePlant). */
  async update(
    id: number,
    actor: Actor,
    patch: PlantPatch,
    ifVersions: number[] | null,
    idem?: IdempotencyRef,
    event?: NewEvent,
  ): Promise<UpdateResult> {
    // An id the bigint parameter would refuse is no plant.
    if (!Number.isSafeInteger(id)) return refused('missing');
    return this.db.tx(async (c): Promise<UpdateResult> => {
      const row = (await this.db.q<PlantRow>('plantForUpdate', [id, actor], c)).rows[0];
      const role = row && roleOf(actor, row.role);
      if (row === undefined || role === null) return refused('missing');
      if (!allows(role, 'write')) return refused('forbidden');
      const was = toPlant(row);
      if (ifVersions !== null && !ifVersions.includes(was.version))
        return refused('mismatch', { current: was });
      const { name, tag, changed, previous } = applyPatch(was, patch);
      let now = was;
      if (changed) {
        const words = indexedWords(name);
        const r = await this.db.q<{ version: number }>('updatePlant', [id, name, tag, words], c);
        now = { ...was, name, tag, version: r.rows[0]!.version };
        if (event) {
          const data = JSON.stringify(eventData(id, name, tag, was.garden, previous));
          await this.db.q('recordUpdated', [id, was.owner, was.garden, data, event.at, ...causeOf(event)], c);
        }
      }
      if (idem) {
        const shown = shownPlant(now);
        await this.db.q('finishIdem', [200, id, idem.user, idem.key, shown], c);
      }
      return { ok: { plant: now, changed } };
    });
  }

  // Runs createPlants for these creates; a row per create, by its ordinal.
  private async createRows(cs: ServerIdCreate[], c?: pg.PoolClient): Promise<Map<number, CreateRow>> {
    const r = await this.db.q<CreateRow>(
      'createPlants',
      [
        cs.map((x) => x.plant.owner),
        cs.map((x) => x.plant.garden),
        cs.map((x) => x.plant.name),
        cs.map((x) => x.plant.tag),
        cs.map((x) => x.event?.at ?? null),
        cs.map((x) => x.plant.admin === true),
        cs.map((x) => indexedWords(x.plant.name)),
        cs.map((x) => x.event?.actor ?? null),
        cs.map((x) => requestCause(x.event?.requestId ?? null, x.event?.traceparent)),
      ],
      c,
    );
    return new Map(r.rows.map((row) => [row.n, row]));
  }

  private async createBatch(cs: ServerIdCreate[]): Promise<(Made | Promise<Made>)[]> {
    const alone = (x: ServerIdCreate) => this.createOne(x);
    if (cs.length === 1) return [alone(cs[0]!)];
    let rows: Map<number, CreateRow>;
    try {
      rows = await this.createRows(cs);
    } catch (err) {
      // The statement may have committed before the connection failed: a retry could create twice.
      if (err instanceof StoreUnavailableError) throw err;
      // Refused, it wrote nothing; each create runs on its own, to succeed or fail by itself.
      return cs.map(alone);
    }
    // A plant whose id a client took meanwhile was not written: it takes the next id on its own.
    return cs.map((x, i) => madeOf(x.plant, rows.get(i + 1)) ?? alone(x));
  }

  // One create with a server-assigned id; nextval may land on an id a client took meanwhile, and
  // then it takes the next one.
  private async createOne(x: ServerIdCreate, c?: pg.PoolClient): Promise<Made> {
    for (let attempt = 0; attempt < 100; attempt++) {
      let row: CreateRow | undefined;
      try {
        row = (await this.createRows([x], c)).get(1);
      } catch (err) {
        // The sequence stops at 2^53−1 (sequence_generator_limit_exceeded).
        if ((err as { code?: string }).code === '2200H') throw new IdSpaceExhaustedError();
        throw err;
      }
      const made = madeOf(x.plant, row);
      if (made !== null) return made;
    }
    throw new StoreUnavailableError('could not find a free plant id; retry later');
  }

  /** Deletes a plant (see Store.deletePlant). */
  async delete(
    id: number,
    actor: Actor,
    event?: NewEvent,
    ifVersions?: number[] | null,
    trash?: Trashing | null,
  ): Promise<DeleteResult> {
    // An id the bigint parameter would refuse is no plant.
    if (!Number.isSafeInteger(id)) return refused('missing');
    const versions = ifVersions ?? null;
    const deleted = await this.deletes.push({
      id,
      actor,
      versions,
      event: event ?? null,
      trash: trash ?? null,
    });
    if (deleted) return { ok: true };
    if (actor === null && versions === null) return refused('missing');
    // Not deleted: why, as things stand now (missing before forbidden before mismatch).
    const now = (await this.db.q<{ version: number; role: Role | null }>('plantFor', [id, actor])).rows[0];
    const role = now && roleOf(actor, now.role);
    if (now === undefined || role === null) return refused('missing');
    if (!allows(role, 'write')) return refused('forbidden');
    return refused(versions !== null && !versions.includes(now.version) ? 'mismatch' : 'missing');
  }

  // One delete in its own statement: whether it deleted the plant.
  private async deleteOne(d: PlantDelete): Promise<boolean> {
    const values = [d.id, d.actor, d.versions, d.event?.at ?? null, ...causeOf(d.event ?? undefined)];
    const r = d.trash
      ? await this.db.q('trashPlant', [...values, d.trash.deletedAt, d.trash.deletedBy, d.trash.purgeAt])
      : await this.db.q('deletePlant', values);
    return (r.rowCount ?? 0) > 0;
  }

  /**
   * A turn's deletes: those of one kind (into the trash or not, as the first is) and each id's
   * first in one statement (deletePlants, trashPlants); a later delete of an id in the statement
   * runs on its own once the statement has ended (the plant is gone by then, or still there when
   * the first was refused), and one of the other kind on its own. A statement PostgreSQL refuses
   * (a deadlock with another batch) wrote nothing: each of its deletes then runs on its own.
   */
  private async deleteBatch(ds: PlantDelete[]): Promise<(boolean | Promise<boolean>)[]> {
    if (ds.length === 1) return [this.deleteOne(ds[0]!)];
    const trash = ds[0]!.trash !== null;
    const ids = new Set<number>();
    const together = ds.map((d) => {
      if ((d.trash !== null) !== trash || ids.has(d.id)) return false;
      ids.add(d.id);
      return true;
    });
    const inIt = ds.filter((_, i) => together[i]);
    const column = <T>(fn: (d: PlantDelete) => T) => inIt.map(fn);
    const values = [
      column((d) => d.id),
      column((d) => d.actor),
      column((d) => d.versions?.join(',') ?? null),
      column((d) => d.event?.at ?? null),
      column((d) => d.event?.actor ?? null),
      column((d) => requestCause(d.event?.requestId ?? null, d.event?.traceparent)),
      column((d) => d.trash?.deletedAt ?? null),
      column((d) => d.trash?.deletedBy ?? null),
      column((d) => d.trash?.purgeAt ?? null),
    ];
    const ran = this.db.q<{ n: string }>(trash ? 'trashPlants' : 'deletePlants', values).then(
      (r) => new Set(r.rows.map((row) => Number(row.n))),
      (err) => {
        // The statement may have committed before the connection failed: its deletes are not retried.
        if (err instanceof StoreUnavailableError) throw err;
        return null;
      },
    );
    // The statement's end, whatever it did, before a delete outside it runs.
    const settled = ran.then(
      () => undefined,
      () => undefined,
    );
    let k = 0;
    return ds.map((d, i) => {
      if (!together[i]) return settled.then(() => this.deleteOne(d));
      const n = ++k;
      return ran.then((deleted) => (deleted === null ? this.deleteOne(d) : deleted.has(n)));
    });
  }
}
