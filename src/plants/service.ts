import { createHash } from 'node:crypto';
import { actorOf, allows } from '../access/policy.js';
import {
  AppError,
  ConflictError,
  GardenNotFoundError,
  NotFoundError,
  PreconditionFailedError,
} from '../errors.js';
import { forbidden, type GardenService } from '../gardens/service.js';
import { type Caller, isAdmin } from '../identity/caller.js';
import { type Page, pageOf } from '../paging.js';
import type { PlantCreate, PlantPatch } from '../schemas/plant.js';
import type {
  IdempotencyClaim,
  ListMarks,
  NewEvent,
  PagePlant,
  Store,
  VersionedPlant,
} from '../store/store.js';
import { decodeCursor, encodeCursor } from './cursor.js';

export const DEFAULT_LIMIT = 100;
/** Idempotency keys are kept at least this long (contract: 24 h). */
export const IDEMPOTENCY_RETAIN_MS = 24 * 3_600_000;
/** A claimed key whose request has not finished after this long is taken to be abandoned (a crash). */
export const IDEMPOTENCY_STALE_MS = 60_000;

export interface CreateOutcome {
  plant: VersionedPlant;
  /** True when an Idempotency-Key replayed an earlier response. */
  replayed: boolean;
}

/** A conditional request's ETags, parsed (etag.ts): any current plant, or these versions. */
export type Precondition = '*' | number[];

export interface UpdateOutcome {
  plant: VersionedPlant;
  /** True when an Idempotency-Key replayed an earlier response. */
  replayed: boolean;
}

/** The hash an Idempotency-Key record keeps of its request body. */
export function requestHash(body: unknown): string {
  return createHash('sha256').update(canonical(body)).digest('hex');
}

// Keys sorted recursively: two bodies are "the same JSON value" exactly when these match.
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const keys = Object.keys(value).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k])}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/** What a list reads: the gardens in it (null: every one, for an admin), for the tag and cursor binding. */
export interface ListScope {
  gardens: string[] | null;
  /** The one garden asked for (`garden=` or /gardens/{gid}/plants), if any. */
  garden: string | null;
  /** The list's marks for the tag asked, when the store read them with the gardens (Store.scopeMarks). */
  marks?: ListMarks;
}

/** The plant rules: visibility by garden membership, id assignment, idempotency, paging. No HTTP, no SQL. */
export class PlantService {
  constructor(
    private readonly store: Store,
    readonly gardens: GardenService,
    private readonly now: () => Date = () => new Date(),
    /** Told after a change and its event have committed (wakes this process's dispatcher and streams). */
    private readonly onEvent: () => void = () => {},
  ) {}

  // Every successful create and delete records an event, in the change's own transaction.
  private event(): NewEvent {
    return { at: this.now() };
  }

  /**
   * Creates a plant made by the caller, in `garden` (the caller must be its editor or owner) or,
   * without one, in the caller's home garden; replays or refuses per the Idempotency-Key.
   */
  async create(
    caller: Caller,
    body: PlantCreate,
    idempotencyKey?: string,
    garden?: string,
  ): Promise<CreateOutcome> {
    if (garden !== undefined) await this.gardens.require(caller, garden, 'write');
    const plant = {
      id: body.id ?? null,
      owner: caller.user,
      garden: garden ?? (await this.gardens.homeOf(caller.user)),
      ...(isAdmin(caller) ? { admin: true } : {}),
      name: body.name,
      tag: body.tag ?? null,
    };
    if (idempotencyKey === undefined) {
      const made = this.created(await this.store.createPlant(plant, undefined, this.event()), plant.id);
      this.onEvent();
      return { plant: made, replayed: false };
    }
    const ref = { user: caller.user, key: idempotencyKey };
    // A create into a named garden hashes its target too (a key used for /plants is 422 there);
    // one into the home garden hashes the body alone, as version 2 did, so its keys still replay.
    const claim = await this.claim(ref, garden === undefined ? body : { method: 'POST', garden, body });
    switch (claim.state) {
      case 'done':
        if (claim.outcome.status === 201 && claim.outcome.plantId !== null) {
          // The first answer's version (a key recorded before versions existed: version 1's).
          const version = claim.outcome.plant?.version ?? 1;
          return { plant: { ...plant, id: claim.outcome.plantId, version }, replayed: true };
        }
        throw this.exists(plant.id);
    }
    let result: Awaited<ReturnType<Store['createPlant']>>;
    try {
      result = await this.store.createPlant(plant, ref, this.event());
      if (!('created' in result) && !('exists' in result)) await this.store.releaseIdempotencyKey(ref);
    } catch (err) {
      await this.store.releaseIdempotencyKey(ref).catch(() => {});
      throw err;
    }
    const made = this.created(result, plant.id);
    this.onEvent();
    return { plant: made, replayed: false };
  }

  private created(r: Awaited<ReturnType<Store['createPlant']>>, id: number | null): VersionedPlant {
    if ('created' in r) return r.created;
    if ('exists' in r) throw this.exists(id);
    // The caller lost its role in the garden between the check and the create.
    if ('forbidden' in r) throw forbidden('write');
    throw new GardenNotFoundError();
  }

  /** The gardens a list reads: `garden` alone (404 unless the caller may see it), or all the caller's. */
  async scope(caller: Caller, garden: string | undefined, tag?: string): Promise<ListScope> {
    if (garden !== undefined) {
      await this.gardens.find(caller, garden);
      return { gardens: [garden], garden };
    }
    return { ...(await this.gardens.visibleWithMarks(caller, tag ?? null)), garden: null };
  }

  /** One page of the plants of `scope` (see scope()), in id order. */
  async list(
    caller: Caller,
    scope: ListScope,
    q: { limit?: number; tag?: string; cursor?: string; withVersion?: boolean },
  ): Promise<Page<PagePlant>> {
    const limit = q.limit ?? DEFAULT_LIMIT;
    const tag = q.tag ?? null;
    const afterId = q.cursor === undefined ? 0 : decodeCursor(q.cursor, caller.user, tag, scope.garden);
    const rows = await this.store.listPlants({
      gardens: scope.gardens,
      tag,
      afterId,
      limit: limit + 1,
      ...(q.withVersion ? { withVersion: true } : {}),
    });
    return pageOf(rows, limit, (last) => encodeCursor(last.id, caller.user, tag, scope.garden));
  }

  /**
   * What the pages of `scope` with `tag` depend on (ListMarks), read no later than the page will be;
   * undefined or null when the engine cannot tell. `tag` must be the one `scope` was read for.
   */
  listMarks(scope: ListScope, tag: string | undefined): ListMarks | Promise<ListMarks | null> | undefined {
    if (scope.marks !== undefined) return scope.marks;
    return this.store.listMarks?.(scope.gardens, tag ?? null);
  }

  /** The plant, if the caller may see it; 404 otherwise, whether or not it exists. */
  async get(caller: Caller, id: number): Promise<VersionedPlant> {
    return (await this.find(caller, id)).plant;
  }

  // The plant and the caller's role in its garden: one read by primary keys, 404 when not visible.
  private async find(caller: Caller, id: number) {
    const found = await this.store.plantFor(id, actorOf(caller));
    if (found === null) throw new NotFoundError();
    return found;
  }

  /**
   * Changes the plant per a merge patch, only if it is in a version `ifMatch` names: 404 if the
   * caller may not see it, then an Idempotency-Key replay, then 412 — the check and the change are
   * one step in the store. A patch that changes nothing answers the plant as it is, with no event.
   */
  async update(
    caller: Caller,
    id: number,
    patch: PlantPatch,
    ifMatch: Precondition,
    idempotencyKey?: string,
  ): Promise<UpdateOutcome> {
    const actor = actorOf(caller);
    const versions = ifMatch === '*' ? null : ifMatch;
    // Without a key the store's answer is the whole order (missing before mismatch) in one step.
    if (idempotencyKey === undefined) {
      return {
        plant: this.updated(
          await this.store.updatePlant(id, actor, patch, versions, undefined, this.event()),
        ),
        replayed: false,
      };
    }
    // With one, a plant the caller may not see is 404, and one it may only view 403, before any replay.
    const found = await this.find(caller, id);
    if (!allows(found.role, 'write')) throw forbidden('write');
    const ref = { user: caller.user, key: idempotencyKey };
    // The change's hash covers its target, so a key of a create or of another plant's change is 422.
    const claim = await this.claim(ref, { method: 'PATCH', id, patch });
    if (claim.state === 'done') {
      const shown = claim.outcome.plant;
      if (claim.outcome.status !== 200 || shown === undefined || claim.outcome.plantId !== id) {
        throw this.keyReused();
      }
      return { plant: { ...found.plant, ...shown }, replayed: true };
    }
    try {
      return {
        plant: this.updated(await this.store.updatePlant(id, actor, patch, versions, ref, this.event())),
        replayed: false,
      };
    } catch (err) {
      // Refused (404, 412) or failed: the key is free for a retry to be judged afresh.
      await this.store.releaseIdempotencyKey(ref).catch(() => {});
      throw err;
    }
  }

  private updated(r: Awaited<ReturnType<Store['updatePlant']>>): VersionedPlant {
    if ('missing' in r) throw new NotFoundError();
    if ('forbidden' in r) throw forbidden('write');
    if ('mismatch' in r) throw new PreconditionFailedError();
    if (r.changed) this.onEvent();
    return r.updated;
  }

  /** Deletes the plant if the caller may see it (404 otherwise) and, with `ifMatch`, it is in such a version (412). */
  async remove(caller: Caller, id: number, ifMatch?: Precondition): Promise<void> {
    const versions = ifMatch === undefined || ifMatch === '*' ? null : ifMatch;
    const deleted = await this.store.deletePlant(id, actorOf(caller), this.event(), versions);
    if (deleted === 'mismatch') throw new PreconditionFailedError();
    if (deleted === 'forbidden') throw forbidden('write');
    if (!deleted) throw new NotFoundError();
    this.onEvent();
  }

  // Claims the key, answering 422 and 409 for a reused or in-flight one; 'claimed' or 'done' are the caller's.
  private async claim(
    ref: { user: string; key: string },
    request: unknown,
  ): Promise<Extract<IdempotencyClaim, { state: 'claimed' | 'done' }>> {
    const claim = await this.store.claimIdempotencyKey(ref, requestHash(request), {
      now: this.now(),
      staleAfterMs: IDEMPOTENCY_STALE_MS,
      retainMs: IDEMPOTENCY_RETAIN_MS,
    });
    if (claim.state === 'mismatch') throw this.keyReused();
    if (claim.state === 'in_flight') {
      throw new ConflictError(
        'idempotency_key_in_flight',
        'a request with this Idempotency-Key is still in progress; retry later',
      );
    }
    return claim;
  }

  private keyReused(): AppError {
    return new AppError(
      422,
      'idempotency_key_reused',
      'this Idempotency-Key was already used with a different request',
    );
  }

  private exists(id: number | null): AppError {
    return new ConflictError('plant_exists', `a plant with id ${id} already exists`);
  }
}
