import { actorOf } from '../access/policy.js';
import { BadRequestError, NotFoundError } from '../errors.js';
import type { GardenService } from '../gardens/service.js';
import type { Caller } from '../identity/caller.js';
import { cursorCodec, type JsonTextPage, type Page, pageOf } from '../paging.js';
import { EVENT_TYPES, type EventRecord, type EventType, type JsonPage, type Store } from '../store/store.js';

/** A page's size when none is asked for, and the most one holds: the plant list's (contract 2). */
export const DEFAULT_LIMIT = 100;
export const MAX_LIMIT = 1000;

// A history or activity cursor is the position of the last event of its page, bound to the caller
// and to the plant, or to the garden and its types: a cursor of another user, plant, garden or
// type filter is 400. Positions are an engine's ("seq" or "xid.seq"); 18 digits each at most, so
// whatever a client sends parses as the engine's integers.
const POSITION = /^[0-9]{1,18}(?:\.[0-9]{1,18})?$/;
const cursors = cursorCodec<string>({
  write: (position) => position,
  read: (text) => (POSITION.test(text) ? text : undefined),
  another: 'another user or for another plant, garden or type',
});
const historyListing = (user: string, plantId: number) => `history\n${user}\n${plantId}`;
const activityListing = (user: string, garden: string, types: EventType[] | null) =>
  `activity\n${user}\n${garden}\n${types === null ? '*' : types.join(',')}`;

/** The event types an activity's `type` filter may name (the route's description lists them). */
export const ACTIVITY_TYPES: readonly EventType[] = EVENT_TYPES;

/**
 * The `type` filter of an activity: comma-separated event types, each known; none given: every
 * type. Returned in one order with no repeats, so that a cursor is bound to the set.
 */
export function parseTypes(raw: string | undefined): EventType[] | null {
  if (raw === undefined) return null;
  const known = new Set<string>(EVENT_TYPES);
  const parts = raw.split(',');
  const bad = parts.find((t) => !known.has(t));
  if (bad !== undefined) {
    const why = `must be a comma-separated list of ${EVENT_TYPES.join(', ')}`;
    throw new BadRequestError(
      'invalid_parameter',
      `type ${bad === '' ? 'has an empty entry' : `names an unknown event type (${JSON.stringify(bad.slice(0, 50))})`}: it ${why}`,
      [{ field: '/type', message: why }],
    );
  }
  return EVENT_TYPES.filter((t) => parts.includes(t));
}

const jsonPage = (page: JsonPage, limit: number, listing: string): JsonTextPage => ({
  json: page.json,
  next: page.rows > limit && page.last !== null ? cursors.encode(page.last, listing) : null,
  limit,
});

/**
 * History and activity (contract 13.3) without their HTTP: which events the caller may see is the
 * garden service's one answer (its gardens now; an admin every garden), never derived here.
 */
export class HistoryService {
  constructor(
    private readonly store: Store,
    private readonly gardens: GardenService,
  ) {}

  /**
   * A page of the events of plant id `plantId` in the gardens the caller is a member of now, newest
   * first. 404 plant_not_found when the first page holds none (no such plant, or none the caller
   * may see, or its events no longer kept).
   */
  async history(
    caller: Caller,
    plantId: number,
    q: { limit?: number; cursor?: string },
  ): Promise<Page<EventRecord> | JsonTextPage> {
    const listing = historyListing(caller.user, plantId);
    const before = q.cursor === undefined ? null : cursors.decode(q.cursor, listing);
    const limit = q.limit ?? DEFAULT_LIMIT;
    if (this.store.plantHistoryJson) {
      // The gardens visible (a member's now; an admin's every one: actorOf null) read in the page's
      // own statement, and the page written by the engine.
      const page = await this.store.plantHistoryJson({ plantId, actor: actorOf(caller), before, limit });
      if (page.rows === 0 && before === null) throw new NotFoundError();
      return jsonPage(page, limit, listing);
    }
    const gardens = await this.gardens.visible(caller);
    const rows = await this.store.plantHistory({ plantId, gardens, before, limit: limit + 1 });
    if (rows.length === 0 && before === null) throw new NotFoundError();
    return pageOf(rows, limit, (last) => cursors.encode(last.position, listing));
  }

  /**
   * A page of a garden's events (of `types`; null: every type), newest first, to any member of it
   * (an admin too); 404 garden_not_found otherwise, as every garden path answers.
   */
  async activity(
    caller: Caller,
    garden: string,
    q: { limit?: number; cursor?: string; types: EventType[] | null },
  ): Promise<Page<EventRecord> | JsonTextPage> {
    const listing = activityListing(caller.user, garden, q.types);
    const before = q.cursor === undefined ? null : cursors.decode(q.cursor, listing);
    const limit = q.limit ?? DEFAULT_LIMIT;
    if (this.store.gardenActivityJson) {
      // The garden's existence and the caller's role read with the page: find's decision on them.
      const page = await this.store.gardenActivityJson({
        garden: this.gardens.checkedId(garden),
        actor: actorOf(caller),
        types: q.types,
        before,
        limit,
      });
      this.gardens.roleFrom(caller, page);
      return jsonPage(page, limit, listing);
    }
    const { garden: found } = await this.gardens.find(caller, garden);
    const rows = await this.store.gardenActivity({
      garden: found.id,
      types: q.types,
      before,
      limit: limit + 1,
    });
    return pageOf(rows, limit, (last) => cursors.encode(last.position, listing));
  }
}
