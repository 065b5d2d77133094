import { createHash } from 'node:crypto';
import { AppError, ConflictError, NotFoundError } from '../errors.js';
import type { PlantCreate } from '../schemas/plant.js';
import type { Scope } from '../schemas/token.js';
import type { ListMarks, NewEvent, PlantRecord, Store } from '../store/store.js';
import type { Caller } from '../tokens/verifier.js';
import { decodeCursor, encodeCursor } from './cursor.js';

export const DEFAULT_LIMIT = 100;
/** Idempotency keys are kept at least this long (contract: 24 h). */
export const IDEMPOTENCY_RETAIN_MS = 24 * 3_600_000;
/** A claimed key whose request has not finished after this long is taken to be abandoned (a crash). */
export const IDEMPOTENCY_STALE_MS = 60_000;

/** Whether the caller holds `scope`; plants:admin implies read and write. */
export function hasScope(caller: Caller, scope: Scope): boolean {
  return caller.scopes.has(scope) || caller.scopes.has('plants:admin');
}

const isAdmin = (caller: Caller) => caller.scopes.has('plants:admin');

export interface CreateOutcome {
  plant: PlantRecord;
  /** True when an Idempotency-Key replayed an earlier response. */
  replayed: boolean;
}

export interface Page {
  plants: PlantRecord[];
  /** Cursor for the next page, or null on the last one. */
  next: string | null;
  limit: number;
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

/** The plant rules: visibility, id assignment, idempotency, paging. No HTTP, no SQL. */
export class PlantService {
  constructor(
    private readonly store: Store,
    private readonly now: () => Date = () => new Date(),
    /** Told after a change and its event have committed (wakes this process's dispatcher and streams). */
    private readonly onEvent: () => void = () => {},
  ) {}

  // Every successful create and delete records an event, in the change's own transaction.
  private event(): NewEvent {
    return { at: this.now() };
  }

  /** Creates a plant owned by the caller; replays or refuses per the Idempotency-Key. */
  async create(caller: Caller, body: PlantCreate, idempotencyKey?: string): Promise<CreateOutcome> {
    const plant = { id: body.id ?? null, owner: caller.user, name: body.name, tag: body.tag ?? null };
    if (idempotencyKey === undefined) {
      const r = await this.store.createPlant(plant, undefined, this.event());
      if ('exists' in r) throw this.exists(plant.id);
      this.onEvent();
      return { plant: r.created, replayed: false };
    }
    const ref = { user: caller.user, key: idempotencyKey };
    const claim = await this.store.claimIdempotencyKey(ref, requestHash(body), {
      now: this.now(),
      staleAfterMs: IDEMPOTENCY_STALE_MS,
      retainMs: IDEMPOTENCY_RETAIN_MS,
    });
    switch (claim.state) {
      case 'mismatch':
        throw new AppError(
          422,
          'idempotency_key_reused',
          'this Idempotency-Key was already used with a different request body',
        );
      case 'in_flight':
        throw new ConflictError(
          'idempotency_key_in_flight',
          'a request with this Idempotency-Key is still in progress; retry later',
        );
      case 'done':
        if (claim.outcome.status === 201 && claim.outcome.plantId !== null) {
          return { plant: { ...plant, id: claim.outcome.plantId }, replayed: true };
        }
        throw this.exists(plant.id);
    }
    let result: Awaited<ReturnType<Store['createPlant']>>;
    try {
      result = await this.store.createPlant(plant, ref, this.event());
    } catch (err) {
      await this.store.releaseIdempotencyKey(ref).catch(() => {});
      throw err;
    }
    if ('exists' in result) throw this.exists(plant.id);
    this.onEvent();
    return { plant: result.created, replayed: false };
  }

  /** One page of the plants the caller may see, in id order. */
  async list(caller: Caller, q: { limit?: number; tag?: string; cursor?: string }): Promise<Page> {
    const limit = q.limit ?? DEFAULT_LIMIT;
    const tag = q.tag ?? null;
    const afterId = q.cursor === undefined ? 0 : decodeCursor(q.cursor, caller.user, tag);
    const rows = await this.store.listPlants({
      owner: isAdmin(caller) ? null : caller.user,
      tag,
      afterId,
      limit: limit + 1,
    });
    const more = rows.length > limit;
    const plants = more ? rows.slice(0, limit) : rows;
    const last = plants[plants.length - 1];
    return { plants, next: more && last ? encodeCursor(last.id, caller.user, tag) : null, limit };
  }

  /** What the caller's pages with `tag` depend on (ListMarks); undefined when the engine cannot tell. */
  listMarks(caller: Caller, tag: string | undefined): Promise<ListMarks> | undefined {
    return this.store.listMarks?.(isAdmin(caller) ? null : caller.user, tag ?? null);
  }

  /** The plant, if the caller may see it; 404 otherwise, whether or not it exists. */
  async get(caller: Caller, id: number): Promise<PlantRecord> {
    const p = await this.store.getPlant(id);
    if (!p || (p.owner !== caller.user && !isAdmin(caller))) throw new NotFoundError();
    return p;
  }

  /** Deletes the plant if the caller may see it; 404 otherwise. */
  async remove(caller: Caller, id: number): Promise<void> {
    const deleted = await this.store.deletePlant(id, isAdmin(caller) ? null : caller.user, this.event());
    if (!deleted) throw new NotFoundError();
    this.onEvent();
  }

  private exists(id: number | null): AppError {
    return new ConflictError('plant_exists', `a plant with id ${id} already exists`);
  }
}
