import { AppError } from '../errors.js';
import { isGardenId } from '../gardens/id.js';
import type { GardenService } from '../gardens/service.js';
import { type Caller, isAdmin } from '../identity/caller.js';
import { cursorCodec } from '../paging.js';
import type { EventRecord, FeedEvent, FeedLogRead, PagePlant, Store } from '../store/store.js';
import { DEFAULT_LIMIT } from './history.js';

// The change feed (contract 13.4): what changed for a caller since a position in the event log.
//
// A position (`since`, `next`) is where the caller's copy stands, bound (as every cursor) to the
// caller, its admin reach and the `garden` filter. It is one of:
//   initial  the first sync: the visible plants by id after `afterId`, then the log from `position`
//            (the log's head as the first page was read: everything after it comes from the log);
//   log      the log after `position`;
//   sweep    a garden the caller joined or left at `position` (an event of the log), its plants by
//            id after `afterId`; then the log after `position`.
//
// An answer reads the log after its position in the gardens that matter to the caller (those it is
// a member of now, and those it joined or left since the position), in log order, and collects the
// plant ids the events name, each once; its own joins and leaves stop the reading and sweep the
// garden's plants (a join: its plants now, as upserts; a leave: its plants now and those deleted
// from it since, as deletes). Every id is then answered with its state now: an upsert when the
// plant exists in a garden the caller sees now, else a delete. An id answered with its state now is
// right whatever its events said, so an answer never has to replay them in order; a position never
// passes an event it has not read (on PostgreSQL: one whose transaction might still commit before
// it, see readEvents), so what commits late is read by the next answer.

/** One change of a feed answer. */
export type FeedChange =
  | {
      id: number;
      op: 'upsert';
      plant: { id: number; name: string; tag?: string; garden: string; version: number };
    }
  | { id: number; op: 'delete' };

export interface FeedPage {
  changes: FeedChange[];
  next: string;
  more: boolean;
}

type State =
  | { kind: 'initial'; position: string; afterId: number }
  | { kind: 'log'; position: string }
  | { kind: 'sweep'; position: string; afterId: number; garden: string };

// `<kind letter><position>[~<afterId>[~<garden>]]`; positions as the engine writes them.
const STATE = /^([ils])([0-9]{1,20}(?:\.[0-9]{1,20})?)(?:~(0|[1-9][0-9]{0,15}))?(?:~(gdn_[0-9a-f]{24}))?$/;
const positions = cursorCodec<State>({
  write: (s) =>
    s.kind === 'log'
      ? `l${s.position}`
      : s.kind === 'initial'
        ? `i${s.position}~${s.afterId}`
        : `s${s.position}~${s.afterId}~${s.garden}`,
  read(text) {
    const m = STATE.exec(text);
    if (m === null) return undefined;
    const [, kind, position, after, garden] = m as unknown as [string, string, string, string?, string?];
    const afterId = after === undefined ? undefined : Number(after);
    if (afterId !== undefined && !Number.isSafeInteger(afterId)) return undefined;
    if (kind === 'l' && afterId === undefined && garden === undefined) return { kind: 'log', position };
    if (kind === 'i' && afterId !== undefined && garden === undefined) {
      return { kind: 'initial', position, afterId };
    }
    if (kind === 's' && afterId !== undefined && garden !== undefined && isGardenId(garden)) {
      return { kind: 'sweep', position, afterId, garden };
    }
    return undefined;
  },
  another: 'another user or for another garden',
  param: 'since',
});
const listing = (caller: Caller, garden: string | null) =>
  `changes\n${caller.user}\n${isAdmin(caller) ? 'admin' : 'member'}\n${garden ?? '*'}`;

/** Most events one answer looks at: past it, the answer ends with `more` (its ids collected so far). */
const EVENT_BUDGET = 20_000;
/** Most events read from the log at a time (a read asks for as many as the answer has room for, and twice as many again each time the events it read named ids it had). */
const EVENT_BATCH = 1_000;

const upsert = (p: PagePlant): FeedChange => ({
  id: p.id,
  op: 'upsert',
  plant:
    p.tag === null
      ? { id: p.id, name: p.name, garden: p.garden, version: p.version! }
      : { id: p.id, name: p.name, tag: p.tag, garden: p.garden, version: p.version! },
});

const isPlantEvent = (e: FeedEvent) => e.type.startsWith('plant.');
// A purge from the trash (contract 13.2) follows the delete that answered it already.
const isPurge = (e: FeedEvent) => (e.type as string) === 'plant.purged';
/** An event of the log as the feed reads it (an engine without feedLog reads it whole). */
const feedEvent = (e: EventRecord): FeedEvent => ({
  position: e.position,
  type: e.type,
  owner: e.owner,
  garden: e.garden,
  plant: e.type.startsWith('plant.') ? (e.data as { id: number }).id : null,
});

/** The change feed without its HTTP: which gardens the caller sees is the garden service's answer. */
export class ChangeFeed {
  constructor(
    private readonly store: Store,
    private readonly gardens: GardenService,
  ) {}

  /**
   * One answer of GET /plants/changes: 400 for a `since` that is malformed or was issued to another
   * caller or `garden`; 404 for a `garden` the caller is not a member of; 410 changes_expired for a
   * `since` before the events still kept.
   */
  async changes(caller: Caller, q: { since?: string; limit?: number; garden?: string }): Promise<FeedPage> {
    const garden = q.garden ?? null;
    const bound = listing(caller, garden);
    let state: State | null = q.since === undefined ? null : positions.decode(q.since, bound);
    if (state !== null) this.checkForm(state.position);
    const limit = q.limit ?? DEFAULT_LIMIT;
    const admin = isAdmin(caller);
    // The log's head before anything else is read: every event up to it is reflected in the
    // memberships and plants read after it, and no answer goes past it (what follows is the next's).
    // An engine with feedStart reads it with the horizon, the memberships and the caller's joins and
    // leaves (one statement on PostgreSQL, whose snapshot is the head's: see its query).
    // A member's delta from the log asks for the log's first read with it (one statement on
    // PostgreSQL): the read Answer.log makes first, its batch and tail limits as it computes them.
    const first =
      state?.kind === 'log' && !admin
        ? { limit: Math.min(limit + 1, EVENT_BATCH), tailLimit: limit + 1, garden }
        : undefined;
    const start = await this.store.feedStart?.(admin ? null : caller.user, state?.position ?? null, first);
    const head = start?.head ?? (await this.store.headPosition());
    if (garden !== null) await this.gardens.find(caller, garden);
    const member = admin ? null : new Set(start?.gardens ?? (await this.gardens.visible(caller)));
    const purged = start?.purgedUpTo ?? (state === null ? null : await this.store.purgedUpTo());
    if (state !== null && this.store.comparePositions(state.position, purged!) < 0) {
      throw new AppError(
        410,
        'changes_expired',
        'events since that position are no longer kept; sync again from the start, without since',
      );
    }
    state ??= { kind: 'initial', position: head, afterId: 0 };
    const sees = (g: string) => (garden === null || g === garden) && (member === null || member.has(g));
    // The gardens whose events matter: those the caller sees now, and those it joined or left since.
    const scope =
      garden !== null
        ? [garden]
        : member === null
          ? null
          : [
              ...new Set([
                ...member,
                ...(start?.moved ?? (await this.store.memberEventGardens(caller.user, state.position))),
              ]),
            ];
    const run = new Answer(this.store, caller.user, limit, head, sees, scope, garden, member);
    if (start?.log !== undefined && first !== undefined)
      run.prefetched = { after: state.position, ...first, read: start.log };
    const more = await run.from(state);
    const changes = await run.changes();
    return { changes, next: positions.encode(run.state, bound), more };
  }

  // A position of another engine's form is no position of this store: 400, as a malformed one.
  private checkForm(position: string): void {
    try {
      this.store.comparePositions(position, position);
    } catch {
      positions.decode('', '');
    }
  }
}

/** One answer's work: what it collected, and where the next one goes on. */
class Answer {
  /** Each id once: its plant as just read (initial sync, a join's sweep), or null: read it at the end. */
  private readonly found = new Map<number, PagePlant | null>();
  state!: State;
  private looked = 0;
  /** With feedLog: the committed events after the head read with the log, and how many at most. */
  private tailRead: { events: FeedEvent[]; limit: number } | null = null;
  /** With feedLog: the plants as read with the events that named them (null: it does not exist). */
  private readonly named = new Map<number, PagePlant | null>();
  /** The log's read made with feedStart (FeedStart.log): readLog's own when it asks the same, once. */
  prefetched: { after: string; limit: number; tailLimit: number; read: FeedLogRead } | null = null;

  constructor(
    private readonly store: Store,
    private readonly user: string,
    private readonly limit: number,
    private readonly head: string,
    private readonly sees: (garden: string) => boolean,
    private readonly scope: string[] | null,
    private readonly garden: string | null,
    private readonly member: Set<string> | null,
  ) {}

  private get room(): number {
    return this.limit - this.found.size;
  }

  /** Adds an id (its plant, if read now); false when it is new and there is no room for it. */
  private take(id: number, plant: PagePlant | null): boolean {
    if (this.found.has(id)) {
      this.found.set(id, plant);
      return true;
    }
    if (this.room <= 0) return false;
    this.found.set(id, plant);
    return true;
  }

  /** Works from `state` until the answer is full or the log is read up to the head; returns `more`. */
  async from(state: State): Promise<boolean> {
    this.state = state;
    for (;;) {
      const s = this.state;
      if (s.kind === 'initial') {
        if (await this.initial(s)) return true;
      } else if (s.kind === 'sweep') {
        if (await this.sweep(s)) return true;
      } else {
        const more = await this.log(s);
        if (more !== null) return more;
      }
    }
  }

  // The first sync: the plants the caller sees now, by id.
  private async initial(s: Extract<State, { kind: 'initial' }>): Promise<boolean> {
    const rows = await this.store.listPlants({
      gardens: this.scope === null ? null : this.scope.filter(this.sees),
      tag: null,
      afterId: s.afterId,
      limit: this.room + 1,
      withVersion: true,
    });
    let afterId = s.afterId;
    for (const p of rows) {
      if (!this.take(p.id, p)) {
        this.state = { ...s, afterId };
        return true;
      }
      afterId = p.id;
    }
    this.state = { kind: 'log', position: s.position };
    return false;
  }

  // A garden joined (the caller is its member now: its plants, upserted) or left (it is not: its
  // plants now and those deleted from it since the position, answered as deletes).
  private async sweep(s: Extract<State, { kind: 'sweep' }>): Promise<boolean> {
    const joined = this.sees(s.garden);
    const n = this.room + 1;
    const rows = await this.store.listPlants({
      gardens: [s.garden],
      tag: null,
      afterId: s.afterId,
      limit: n,
      withVersion: true,
    });
    let ids = rows.map((p) => p.id);
    let complete = rows.length < n;
    if (!joined) {
      const gone = await this.store.deletedPlantIds({
        garden: s.garden,
        after: s.position,
        afterId: s.afterId,
        limit: n,
      });
      // The first n of the union are right only up to where both lists are: the shorter's reach.
      const reach = Math.min(
        rows.length < n ? Number.POSITIVE_INFINITY : ids.at(-1)!,
        gone.length < n ? Number.POSITIVE_INFINITY : gone.at(-1)!,
      );
      complete = reach === Number.POSITIVE_INFINITY;
      ids = [...new Set([...ids, ...gone])].filter((id) => id <= reach).sort((a, b) => a - b);
    }
    const plants = new Map(rows.map((p) => [p.id, p]));
    let afterId = s.afterId;
    for (const id of ids) {
      if (!this.take(id, joined ? plants.get(id)! : null)) {
        this.state = { ...s, afterId };
        return true;
      }
      afterId = id;
    }
    this.state = complete ? { kind: 'log', position: s.position } : { ...s, afterId };
    return false;
  }

  // The log after the position, up to the head read first; null: a sweep is to follow.
  private async log(s: Extract<State, { kind: 'log' }>): Promise<boolean | null> {
    let position = s.position;
    const stop = (more: boolean, next: State = { kind: 'log', position }) => {
      this.state = next;
      return more;
    };
    for (let batch = Math.min(this.room + 1, EVENT_BATCH); ; batch = Math.min(batch * 2, EVENT_BATCH)) {
      if (this.looked >= EVENT_BUDGET) return stop(true);
      const read = await this.readLog(position, batch);
      this.looked += read.events.length;
      for (const e of read.events) {
        if (this.store.comparePositions(e.position, this.head) > 0) return this.tail(this.head);
        if (isPlantEvent(e)) {
          if (!isPurge(e) && !this.take(e.plant!, null)) return stop(true);
        } else if (this.sweeps(e)) {
          this.state = { kind: 'sweep', position: e.position, afterId: 0, garden: e.garden };
          return null;
        }
        position = e.position;
      }
      if (read.events.length < batch) {
        // Read up to the log's head as readEvents saw it; the answer's own head bounds it.
        const reached = this.store.comparePositions(read.position, this.head) < 0 ? read.position : this.head;
        return this.tail(this.store.comparePositions(reached, position) > 0 ? reached : position);
      }
    }
  }

  // committedEvents read on its own, later than any plant read with the log: those are read again.
  private async committed(after: string, limit: number): Promise<FeedEvent[]> {
    this.named.clear();
    return (await this.store.committedEvents({ after, gardens: this.scope, limit })).map(feedEvent);
  }

  // The log after `after` (readEvents), with feedLog also the committed events after the head
  // (for tail) and the plants the events name, in one read.
  private async readLog(after: string, limit: number): Promise<{ events: FeedEvent[]; position: string }> {
    if (this.store.feedLog === undefined) {
      const read = await this.store.readEvents({ after, gardens: this.scope, limit });
      return { events: read.events.map(feedEvent), position: read.position };
    }
    const tailLimit = this.room + 1;
    const ahead = this.prefetched;
    this.prefetched = null;
    const read =
      ahead !== null && ahead.after === after && ahead.limit === limit && ahead.tailLimit === tailLimit
        ? ahead.read
        : await this.store.feedLog({ after, gardens: this.scope, limit, tailAfter: this.head, tailLimit });
    this.tailRead = read.committed === null ? null : { events: read.committed, limit: tailLimit };
    // Every id the events name, as it is in the read's snapshot (after the head's: see tail).
    for (const e of [...read.events, ...(read.committed ?? [])])
      if (e.plant !== null) this.named.set(e.plant, null);
    for (const p of read.plants) this.named.set(p.id, p);
    return read;
  }

  // The caller's own join of a garden it is a member of now, or leave of one it is not (a join it
  // has left since, or a leave it has come back from since, is answered by that later event).
  private sweeps(e: FeedEvent): boolean {
    if (this.member === null || e.owner !== this.user) return false;
    if (this.garden !== null && e.garden !== this.garden) return false;
    if (e.type === 'member.added') return this.member.has(e.garden);
    if (e.type === 'member.removed') return !this.member.has(e.garden);
    return false;
  }

  // The log is read up to `position`. Events committed after it (since the head was read, or, on
  // PostgreSQL, before it but with a transaction that might still be followed by one committing
  // late) cannot be passed yet, but the plants they name are answered as they are now, so that an
  // answer with `more` false holds every committed change; the next answer reads them again.
  private async tail(position: string): Promise<boolean> {
    this.state = { kind: 'log', position };
    const room = this.room;
    // Read with the log when it was read after the head (a later snapshot would do as well: what
    // commits after either is read by the next answer), and for at least as many as there is room.
    const events =
      this.tailRead !== null &&
      this.tailRead.limit >= room + 1 &&
      this.store.comparePositions(position, this.head) === 0
        ? this.tailRead.events.slice(0, room + 1)
        : await this.committed(position, room + 1);
    for (const e of events) {
      if (isPlantEvent(e)) {
        if (!isPurge(e) && !this.take(e.plant!, null)) return true;
      } else if (this.sweeps(e)) {
        return true;
      }
    }
    return events.length > room;
  }

  /** The answer's changes, by id: each plant as it is now, or a delete when the caller does not see it. */
  async changes(): Promise<FeedChange[]> {
    const unread = [...this.found].flatMap(([id, p]) => (p === null && !this.named.has(id) ? [id] : []));
    const now = new Map(
      unread.length === 0 ? [] : (await this.store.plantsByIds(unread)).map((p) => [p.id, p]),
    );
    const out: FeedChange[] = [];
    for (const id of [...this.found.keys()].sort((a, b) => a - b)) {
      const p = this.found.get(id) ?? this.named.get(id) ?? now.get(id);
      out.push(p !== undefined && this.sees(p.garden) ? upsert(p) : { id, op: 'delete' });
    }
    return out;
  }
}
