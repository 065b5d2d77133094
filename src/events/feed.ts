import type { EventRecord, Store } from '../store/store.js';
import { eventPayload } from './event.js';

/** SSE message for one event: `id`, `event`, `data` lines (CONTRACT.md section 8). */
export const sseMessage = (e: EventRecord): string =>
  `id: ${e.id}\nevent: ${e.type}\ndata: ${JSON.stringify(eventPayload(e))}\n\n`;

/** A reader following the feed. */
export interface FeedMember {
  /** Whose memberships decide what it sees; null: every event (plants:admin). */
  feedUser: string | null;
  /** Joined ahead of the feed: nothing up to this position is handed to it; null once passed. */
  after: string | null;
}

/** Hands one event (with its SSE message, made once for every reader) to a member. */
export type Deliver<M extends FeedMember> = (member: M, event: EventRecord, message: string) => void;

const BATCH = 500;

/**
 * The one reader of the event log in this process. When woken it reads the next batch of the log
 * once, for every stream, then asks the store once for the members of the batch's gardens and
 * hands each event to the streams of those members (and to every admin stream), found in memory.
 *
 * Why the members are read per batch rather than kept per user: one statement, read after the
 * events, sees every membership change committed before them, on whatever instance it was made, so
 * a reader removed from a garden is shown nothing of it from the next event on (as when every
 * stream read the log for itself), with no cache to keep right across processes and engines. It
 * costs one statement per batch, whatever the number of streams, and none while the log is quiet.
 *
 * The feed's position is where every member stands (except one that joined ahead of it, which says
 * so in `after`); a member that leaves takes its place in the log with it (see EventStreams).
 */
export class EventFeed<M extends FeedMember> {
  /** Where the feed has read up to; null while it has no member (then the next one sets it). */
  private pos: string | null = null;
  private readonly byUser = new Map<string, Set<M>>();
  private readonly admins = new Set<M>();
  /** Members that joined ahead of the feed, until it passes their position. */
  private readonly ahead = new Set<M>();
  private count = 0;
  private reading = false;
  private more = false;

  constructor(
    private readonly store: Store,
    private readonly deliver: Deliver<M>,
    private readonly warn?: (obj: object, msg: string) => void,
  ) {}

  get position(): string | null {
    return this.pos;
  }

  get size(): number {
    return this.count;
  }

  /** Reads of the log made by the feed (for tests and metrics). */
  reads = 0;

  /**
   * Whether a reader standing at `position` may join now: it is not behind the feed (a reader
   * behind reads the log on its own until it is not).
   */
  canJoin(position: string): boolean {
    return this.pos === null || this.store.comparePositions(position, this.pos) >= 0;
  }

  /** Adds a member standing at `position` (canJoin must hold): it is handed every event after it. */
  join(m: M, position: string): void {
    if (this.pos === null) this.pos = position;
    else if (this.store.comparePositions(position, this.pos) > 0) {
      m.after = position;
      this.ahead.add(m);
    } else m.after = null;
    if (m.feedUser === null) this.admins.add(m);
    else {
      const set = this.byUser.get(m.feedUser);
      if (set === undefined) this.byUser.set(m.feedUser, new Set([m]));
      else set.add(m);
    }
    this.count++;
  }

  /**
   * Removes a member; answers where it stands in the log when this is called between batches (a
   * member leaving while an event is handed to it stands at that event instead).
   */
  leave(m: M): string | null {
    let removed: boolean;
    if (m.feedUser === null) removed = this.admins.delete(m);
    else {
      const set = this.byUser.get(m.feedUser);
      removed = set?.delete(m) ?? false;
      if (set?.size === 0) this.byUser.delete(m.feedUser);
    }
    if (!removed) return null;
    this.ahead.delete(m);
    this.count--;
    const at = m.after ?? this.pos;
    m.after = null;
    // With no member, the feed stops where it is: the next one to join sets its place afresh.
    if (this.count === 0) this.pos = null;
    return at;
  }

  /** Reads the log now (an event was committed, here or elsewhere, or the safety poll). */
  wake(): void {
    if (this.reading) {
      this.more = true;
      return;
    }
    if (this.pos === null) return;
    this.reading = true;
    this.more = false;
    void this.read(this.pos);
  }

  private async read(from: string): Promise<void> {
    let full = false;
    try {
      this.reads++;
      const { events, position } = await this.store.readEvents({ after: from, gardens: null, limit: BATCH });
      full = events.length === BATCH;
      let members: Map<string, string[]> | null = null;
      if (events.length > 0 && this.byUser.size > 0) {
        // After the events: every membership change committed before them is seen.
        members = await this.store.membersOf([...new Set(events.map((e) => e.garden))]);
      }
      // Everyone left while the log was read, or the feed started again from another place.
      if (this.pos !== from) return;
      for (const e of events) this.handOut(e, members);
      // A member that left while an event was handed to it may have been the last one.
      this.pos = this.count > 0 ? position : null;
      if (this.ahead.size > 0) {
        for (const m of this.ahead) {
          if (m.after === null || this.store.comparePositions(m.after, position) <= 0) {
            m.after = null;
            this.ahead.delete(m);
          }
        }
      }
    } catch (err) {
      this.warn?.({ err }, 'event feed could not read the log; will retry');
    } finally {
      this.reading = false;
    }
    if (full || this.more) this.wake();
  }

  private handOut(e: EventRecord, members: Map<string, string[]> | null): void {
    let message: string | undefined;
    const give = (m: M) => {
      if (m.after !== null && this.store.comparePositions(e.position, m.after) <= 0) return;
      message ??= sseMessage(e);
      try {
        this.deliver(m, e, message);
      } catch (err) {
        // One reader's failure is its own: the others get the event, and the feed goes on.
        this.warn?.({ err }, 'event feed could not hand an event to a stream');
      }
    };
    const users = members?.get(e.garden);
    if (users !== undefined) {
      for (const u of users) {
        const set = this.byUser.get(u);
        if (set !== undefined) for (const m of set) give(m);
      }
    }
    for (const m of this.admins) give(m);
  }
}
