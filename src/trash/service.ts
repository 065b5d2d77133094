import { actorOf, allows } from '../access/policy.js';
import { forbidden, type GardenService } from '../gardens/service.js';
import type { Caller } from '../identity/caller.js';
import { cursorCodec, type JsonTextPage, type Page, pageOf } from '../paging.js';
import { IdempotentWrites, keyReused } from '../plants/idempotency.js';
import { refusal } from '../plants/service.js';
import type { Change, NewEvent, Store, TrashPosition, TrashRecord, VersionedPlant } from '../store/store.js';
import { currentTraceparent } from '../telemetry/tracing.js';

/** A page's size when none is asked for, and the most one holds: the plant list's (contract 2). */
export const DEFAULT_LIMIT = 100;

// A trash cursor is the last entry of its page (its deletion time in milliseconds and its id),
// bound to the caller and to the `garden` filter: one of another user or garden filter is 400.
const POSITION = /^(0|[1-9][0-9]{0,15})\.([1-9][0-9]{0,15})$/;
const cursors = cursorCodec<TrashPosition>({
  write: (p) => `${p.deletedAt.getTime()}.${p.id}`,
  read: (text) => {
    const m = POSITION.exec(text);
    if (m === null) return undefined;
    const [ms, id] = [Number(m[1]), Number(m[2])];
    return ms <= 8.64e15 && id <= Number.MAX_SAFE_INTEGER ? { deletedAt: new Date(ms), id } : undefined;
  },
  another: 'another user or for another garden',
});
const listing = (user: string, garden: string | undefined) => `trash\n${user}\n${garden ?? '*'}`;

/** A restore's outcome: the plant back, and whether an Idempotency-Key replayed an earlier answer. */
export interface RestoreOutcome {
  plant: Pick<VersionedPlant, 'id' | 'name' | 'tag' | 'version'>;
  replayed: boolean;
}

const ok = <T>(r: Change<T, 'missing' | 'forbidden' | 'exists'>, id: number): T => {
  if ('refused' in r) throw refusal(r.refused, id);
  return r.ok;
};

/**
 * The trash (contract 13.2) without its HTTP: which gardens' trash the caller sees is the garden
 * service's answer (editor or owner now; an admin every garden); the store checks each write's
 * role again in the write's own transaction.
 */
export class TrashService {
  private readonly keys: IdempotentWrites;

  constructor(
    private readonly store: Store,
    private readonly gardens: GardenService,
    private readonly now: () => Date = () => new Date(),
    /** Told after a write and its event have committed (wakes this process's streams and dispatcher). */
    private readonly onEvent: () => void = () => {},
  ) {
    this.keys = new IdempotentWrites(store, now);
  }

  private event(caller: Caller, requestId: string | null): NewEvent {
    return { at: this.now(), actor: caller.user, requestId, traceparent: currentTraceparent() };
  }

  /**
   * A page of the trash of `garden` (404 unless a member, 403 for a viewer), or of every garden the
   * caller may restore in, newest deletion first. A bad cursor is 400 before the garden's 404.
   */
  async list(
    caller: Caller,
    q: { garden?: string; limit?: number; cursor?: string },
  ): Promise<Page<TrashRecord> | JsonTextPage> {
    const bound = listing(caller.user, q.garden);
    const after = q.cursor === undefined ? null : cursors.decode(q.cursor, bound);
    const limit = q.limit ?? DEFAULT_LIMIT;
    if (this.store.listTrashJson) {
      // The garden's existence and the caller's role (or the gardens it may restore in) read with
      // the page, and the page written by the engine; the same decisions as below on those facts.
      const garden = q.garden === undefined ? null : this.gardens.checkedId(q.garden);
      const page = await this.store.listTrashJson({ garden, actor: actorOf(caller), after, limit });
      if (garden !== null && !allows(this.gardens.roleFrom(caller, page), 'write')) throw forbidden('write');
      const last = page.rows > limit ? page.last : null;
      const dot = last?.indexOf('.') ?? -1;
      return {
        json: page.json,
        next:
          last === null || dot < 0
            ? null
            : cursors.encode(
                { deletedAt: new Date(Number(last.slice(0, dot))), id: Number(last.slice(dot + 1)) },
                bound,
              ),
        limit,
      };
    }
    let gardens: string[] | null;
    if (q.garden !== undefined) {
      const view = await this.gardens.find(caller, q.garden);
      if (!allows(view.role, 'write')) throw forbidden('write');
      gardens = [view.garden.id];
    } else {
      gardens = await this.gardens.writable(caller);
    }
    const rows =
      gardens?.length === 0 ? [] : await this.store.listTrash({ gardens, after, limit: limit + 1 });
    return pageOf(rows, limit, (last) => cursors.encode({ deletedAt: last.deletedAt, id: last.id }, bound));
  }

  /**
   * Puts a trashed plant back in its garden with a new version (404 unless it is in a trash the
   * caller may see, 403 for a viewer, 409 when a plant has its id now); an Idempotency-Key replays
   * the first answer as on POST /plants.
   */
  async restore(
    caller: Caller,
    id: number,
    idempotencyKey?: string,
    requestId: string | null = null,
  ): Promise<RestoreOutcome> {
    const actor = actorOf(caller);
    const event = this.event(caller, requestId);
    if (idempotencyKey === undefined) {
      const plant = ok(await this.store.restorePlant(id, actor, undefined, event), id);
      this.onEvent();
      return { plant, replayed: false };
    }
    const ref = { user: caller.user, key: idempotencyKey };
    // The hash covers the target: a key of a create, or of another plant's restore, is 422.
    const claim = await this.keys.claim(ref, { method: 'POST', path: `/trash/${id}/restore` });
    if ('refused' in claim) {
      const { status, plantId, plant } = claim.outcome;
      if (plantId === id && status === 200 && plant !== undefined)
        return { plant: { id, name: plant.name, tag: plant.tag, version: plant.version }, replayed: true };
      if (plantId === id && status === 409) throw refusal('exists', id);
      throw keyReused();
    }
    const plant = ok(await this.keys.underKey(ref, () => this.store.restorePlant(id, actor, ref, event)), id);
    this.onEvent();
    return { plant, replayed: false };
  }

  /** Erases a trashed plant for good (404 unless in a trash the caller may see, 403 for a viewer). */
  async purge(caller: Caller, id: number, requestId: string | null = null): Promise<void> {
    ok(await this.store.purgeTrashed(id, actorOf(caller), this.event(caller, requestId)), id);
    this.onEvent();
  }
}
