import { actorOf, allows } from '../access/policy.js';
import {
  AppError,
  BadRequestError,
  ConflictError,
  GardenNotFoundError,
  NotFoundError,
  PreconditionFailedError,
} from '../errors.js';
import { forbidden, type GardenService } from '../gardens/service.js';
import { type Caller, isAdmin } from '../identity/caller.js';
import { type Page, pageOf } from '../paging.js';
import type { PlantCreate, PlantPatch } from '../schemas/plant.js';
import { queryProblem, searchTerms } from '../search-text.js';
import type {
  BatchCreateResult,
  Change,
  ListMarks,
  NewEvent,
  PagePlant,
  PlantRefusal,
  Store,
  VersionedPlant,
} from '../store/store.js';
import { currentTraceparent } from '../telemetry/tracing.js';
import type { BatchRow } from './batch-input.js';
import { decodeCursor, encodeCursor } from './cursor.js';
import { ExportSlots } from './export-slots.js';
import { IdempotentWrites, keyReused } from './idempotency.js';

export const DEFAULT_LIMIT = 100;
export { IDEMPOTENCY_RETAIN_MS, IDEMPOTENCY_STALE_MS, requestHash } from './idempotency.js';

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

/** What each refusal of a plant write answers (`id`: the plant's, as asked for). */
export function refusal(why: PlantRefusal, id: number | null): AppError {
  switch (why) {
    case 'missing':
      return new NotFoundError();
    case 'no_garden':
      return new GardenNotFoundError();
    case 'forbidden':
      // The caller lost its role in the garden between the check and the write, or is a viewer.
      return forbidden('write');
    case 'exists':
      return new ConflictError('plant_exists', `a plant with id ${id} already exists`);
    case 'mismatch':
      return new PreconditionFailedError();
  }
}

const ok = <T>(r: Change<T, PlantRefusal>, id: number | null): T => {
  if ('refused' in r) throw refusal(r.refused, id);
  return r.ok;
};

/** What a list reads: the gardens in it (null: every one, for an admin), for the tag and cursor binding. */
export interface ListScope {
  gardens: string[] | null;
  /** The one garden asked for (`garden=` or /gardens/{gid}/plants), if any. */
  garden: string | null;
  /** The list's marks for the tag asked, when the store read them with the gardens (Store.scopeMarks). */
  marks?: ListMarks;
}

/** Exports one user, and everyone, may run at once in a process; 0: no limit. */
export interface ExportLimits {
  perUser: number;
  total: number;
}

/** Seconds a refused export is told to wait (most exports take seconds to read). */
const EXPORT_RETRY_AFTER_S = '5';

/** The plant rules: visibility by garden membership, id assignment, idempotency, paging. No HTTP, no SQL. */
export class PlantService {
  private readonly exports: ExportSlots;
  private readonly keys: IdempotentWrites;

  constructor(
    private readonly store: Store,
    readonly gardens: GardenService,
    private readonly now: () => Date = () => new Date(),
    /** Told after a change and its event have committed (wakes this process's dispatcher and streams). */
    private readonly onEvent: () => void = () => {},
    exportLimits: ExportLimits = { perUser: 0, total: 0 },
    /** Milliseconds a deleted plant waits in its garden's trash (contract 13.2); 0: a delete is final. */
    private readonly trashRetention = 0,
  ) {
    this.exports = new ExportSlots(exportLimits.perUser, exportLimits.total);
    this.keys = new IdempotentWrites(store, now);
  }

  // Every successful create, change and delete records an event, in the change's own transaction,
  // with who caused it: the caller, in the request `requestId` (contract 13.1).
  private event(caller: Caller, requestId: string | null): NewEvent {
    return { at: this.now(), actor: caller.user, requestId, traceparent: currentTraceparent() };
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
    requestId: string | null = null,
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
      const made = ok(
        await this.store.createPlant(plant, undefined, this.event(caller, requestId)),
        plant.id,
      );
      this.onEvent();
      return { plant: made, replayed: false };
    }
    const ref = { user: caller.user, key: idempotencyKey };
    // A create into a named garden hashes its target too (a key used for /plants is 422 there);
    // one into the home garden hashes the body alone, as version 2 did, so its keys still replay.
    const claim = await this.keys.claim(ref, garden === undefined ? body : { method: 'POST', garden, body });
    if ('refused' in claim) {
      if (claim.outcome.status === 201 && claim.outcome.plantId !== null) {
        // The first answer's version (a key recorded before versions existed: version 1's).
        const version = claim.outcome.plant?.version ?? 1;
        return { plant: { ...plant, id: claim.outcome.plantId, version }, replayed: true };
      }
      throw refusal('exists', plant.id);
    }
    const result = await this.keys.underKey(ref, () =>
      this.store.createPlant(plant, ref, this.event(caller, requestId)),
    );
    const made = ok(result, plant.id);
    this.onEvent();
    return { plant: made, replayed: false };
  }

  /**
   * The gardens a list reads: `garden` alone (404 unless the caller may see it), or all the caller's.
   * `check`'s q and cursor are checked first: a bad one is 400 before the garden's 404 (section 2's order).
   */
  async scope(
    caller: Caller,
    garden: string | undefined,
    tag?: string,
    check: { q?: string; cursor?: string } = {},
  ): Promise<ListScope> {
    if (check.q !== undefined) this.terms(check.q);
    if (check.cursor !== undefined) {
      decodeCursor(check.cursor, caller.user, tag ?? null, garden ?? null, check.q ?? null);
    }
    if (garden !== undefined) {
      await this.gardens.find(caller, garden);
      return { gardens: [garden], garden };
    }
    return { ...(await this.gardens.visibleWithMarks(caller, tag ?? null)), garden: null };
  }

  /** One page of the plants of `scope` (see scope()), in id order; with `q`, only those it finds. */
  async list(
    caller: Caller,
    scope: ListScope,
    q: { limit?: number; tag?: string; cursor?: string; withVersion?: boolean; q?: string },
  ): Promise<Page<PagePlant>> {
    const limit = q.limit ?? DEFAULT_LIMIT;
    const tag = q.tag ?? null;
    const search = q.q ?? null;
    const terms = search === null ? undefined : this.terms(search);
    const afterId =
      q.cursor === undefined ? 0 : decodeCursor(q.cursor, caller.user, tag, scope.garden, search);
    const rows =
      terms === 'none'
        ? []
        : await this.store.listPlants({
            gardens: scope.gardens,
            tag,
            afterId,
            limit: limit + 1,
            ...(q.withVersion ? { withVersion: true } : {}),
            ...(terms === undefined ? {} : { terms }),
          });
    return pageOf(rows, limit, (last) => encodeCursor(last.id, caller.user, tag, scope.garden, search));
  }

  /** The terms `q` searches for (`none`: nothing can match); 400 naming the problem when it is no query. */
  terms(q: string): string[] | 'none' {
    const problem = queryProblem(q);
    if (problem !== null) {
      throw new BadRequestError('invalid_parameter', `query parameter q ${problem}`, [
        { field: '/q', message: problem },
      ]);
    }
    return searchTerms(q);
  }

  /**
   * Every plant of `scope` a list with `tag` and `q` shows, a page at a time from one snapshot (see
   * Store.exportPlants), with versions, and the export's place among those running, to `release`
   * once its answer has been sent or abandoned. 429 too_many_exports when the caller, or this
   * process, runs as many as it may.
   */
  export(
    caller: Caller,
    scope: ListScope,
    q: { tag?: string; q?: string },
  ): { pages: AsyncIterable<PagePlant[]>; release: () => void } {
    const terms = q.q === undefined ? undefined : this.terms(q.q);
    const slot = this.exports.take(caller.user);
    if (slot === 'user' || slot === 'total') {
      const message =
        slot === 'user'
          ? `a user may run at most ${this.exports.perUser} exports at once; wait for one to end`
          : `this instance runs as many exports as it may (${this.exports.total}); try again shortly`;
      throw new AppError(429, 'too_many_exports', message, undefined, {
        'retry-after': EXPORT_RETRY_AFTER_S,
      });
    }
    const pages: AsyncIterable<PagePlant[]> =
      terms === 'none'
        ? (async function* () {})()
        : this.store.exportPlants({
            gardens: scope.gardens,
            tag: q.tag ?? null,
            ...(terms === undefined ? {} : { terms }),
          });
    return { pages, release: slot.release };
  }

  /**
   * Creates every plant of the batch or none, made by the caller: a row's garden (or `garden`, or
   * the caller's home garden) must be one the caller may write in, as for one create; `newIds`
   * drops the ids given. With an Idempotency-Key (covering the whole batch), a retry replays the
   * first answer.
   */
  async batch(
    caller: Caller,
    rows: BatchRow[],
    opts: { garden?: string; newIds?: boolean; idempotencyKey?: string; requestId?: string | null },
  ): Promise<{ ids: number[]; replayed: boolean }> {
    const named = new Set(rows.flatMap((r) => (r.garden === null ? [] : [r.garden])));
    if (opts.garden !== undefined) named.add(opts.garden);
    for (const g of named) await this.gardens.require(caller, g, 'write');
    const fallback = rows.some((r) => r.garden === null)
      ? (opts.garden ?? (await this.gardens.homeOf(caller.user)))
      : '';
    const admin = isAdmin(caller) ? { admin: true } : {};
    const plants = rows.map((r) => ({
      id: opts.newIds ? null : r.id,
      owner: caller.user,
      garden: r.garden ?? fallback,
      ...admin,
      name: r.name,
      tag: r.tag,
    }));
    const key = opts.idempotencyKey;
    const event = this.event(caller, opts.requestId ?? null);
    if (key === undefined) {
      const ids = this.batchMade(await this.store.createPlants(plants, undefined, event));
      return { ids, replayed: false };
    }
    const ref = { user: caller.user, key };
    const request = {
      method: 'POST',
      path: '/plants/batch',
      garden: opts.garden ?? null,
      newIds: !!opts.newIds,
      rows,
    };
    const claim = await this.keys.claim(ref, request);
    if ('refused' in claim) {
      const { status, ids, plantId } = claim.outcome;
      if (status === 201 && ids !== undefined) return { ids, replayed: true };
      if (status === 409 && plantId !== null) throw refusal('exists', plantId);
      throw keyReused();
    }
    const result = await this.keys.underKey(ref, () => this.store.createPlants(plants, ref, event));
    return { ids: this.batchMade(result), replayed: false };
  }

  // The ids a batch made, or its refusal as an error.
  private batchMade(r: BatchCreateResult): number[] {
    if ('refused' in r) throw refusal(r.refused, r.refused === 'exists' ? r.id : null);
    this.onEvent();
    return r.ok.map((p) => p.id);
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
    requestId: string | null = null,
  ): Promise<UpdateOutcome> {
    const actor = actorOf(caller);
    const event = this.event(caller, requestId);
    const versions = ifMatch === '*' ? null : ifMatch;
    // Without a key the store's answer is the whole order (missing before mismatch) in one step.
    if (idempotencyKey === undefined) {
      return {
        plant: this.updated(await this.store.updatePlant(id, actor, patch, versions, undefined, event), id),
        replayed: false,
      };
    }
    // With one, a plant the caller may not see is 404, and one it may only view 403, before any replay.
    const found = await this.find(caller, id);
    if (!allows(found.role, 'write')) throw forbidden('write');
    const ref = { user: caller.user, key: idempotencyKey };
    // The change's hash covers its target, so a key of a create or of another plant's change is 422.
    const claim = await this.keys.claim(ref, { method: 'PATCH', id, patch });
    if ('refused' in claim) {
      const shown = claim.outcome.plant;
      if (claim.outcome.status !== 200 || shown === undefined || claim.outcome.plantId !== id) {
        throw keyReused();
      }
      return { plant: { ...found.plant, ...shown }, replayed: true };
    }
    try {
      return {
        plant: this.updated(await this.store.updatePlant(id, actor, patch, versions, ref, event), id),
        replayed: false,
      };
    } catch (err) {
      // Refused (404, 412) or failed: the key is free for a retry to be judged afresh.
      await this.keys.release(ref);
      throw err;
    }
  }

  private updated(r: Awaited<ReturnType<Store['updatePlant']>>, id: number): VersionedPlant {
    const { plant, changed } = ok<{ plant: VersionedPlant; changed: boolean }>(r, id);
    if (changed) this.onEvent();
    return plant;
  }

  /**
   * Deletes the plant if the caller may see it (404 otherwise) and, with `ifMatch`, it is in such a
   * version (412): into its garden's trash while the trash is on.
   */
  async remove(
    caller: Caller,
    id: number,
    ifMatch?: Precondition,
    requestId: string | null = null,
  ): Promise<void> {
    const versions = ifMatch === undefined || ifMatch === '*' ? null : ifMatch;
    const event = this.event(caller, requestId);
    const trash =
      this.trashRetention > 0
        ? {
            deletedAt: event.at,
            deletedBy: caller.user,
            purgeAt: new Date(event.at.getTime() + this.trashRetention),
          }
        : null;
    ok(await this.store.deletePlant(id, actorOf(caller), event, versions, trash), id);
    this.onEvent();
  }
}
