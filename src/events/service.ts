import type { ServerResponse } from 'node:http';
import { AppError } from '../errors.js';
import type { GardenService } from '../gardens/service.js';
import type { Caller } from '../identity/caller.js';
import type { Store } from '../store/store.js';
import { EventStreams, type StreamOptions, type StreamSlot } from './stream.js';

/** A stream opened for a caller and not yet served: where it starts, and its place. */
export interface OpenedStream {
  caller: Caller;
  position: string;
  slot: StreamSlot;
}

/**
 * The live stream of plant events (CONTRACT.md section 8) without its HTTP: how many streams a user
 * may hold at once, where a stream starts (right after Last-Event-ID, or at the head of the log)
 * and which gardens' events its reader sees (its memberships as the events are read).
 */
export class EventService {
  private readonly streams: EventStreams;

  constructor(
    private readonly store: Store,
    private readonly gardens: GardenService,
    opts: StreamOptions = {},
  ) {
    this.streams = new EventStreams(store, opts);
  }

  /**
   * Takes one of the caller's places and finds where its stream starts: right after
   * `lastEventId`, or at the head of the log when there is none. 429 too_many_streams when the user
   * holds as many as it may; 410 events_expired when that event is no longer kept.
   */
  async open(caller: Caller, lastEventId: string | null): Promise<OpenedStream> {
    const slot = this.streams.reserve(caller.user);
    if (slot === null) {
      throw new AppError(
        429,
        'too_many_streams',
        `a user may have at most ${this.streams.maxPerUser} open event streams at once; close one first`,
        undefined,
        { 'retry-after': '5' },
      );
    }
    try {
      const position =
        lastEventId === null ? await this.store.headPosition() : await this.store.eventPosition(lastEventId);
      if (position === null) {
        throw new AppError(
          410,
          'events_expired',
          'that event is no longer kept; start a new stream without Last-Event-ID',
        );
      }
      return { caller, position, slot };
    } catch (err) {
      slot.release();
      throw err;
    }
  }

  /**
   * Serves an opened stream on `res` (already hijacked) until it ends, or until `authorized` says
   * the credential that opened it no longer works; streams opened with the same `credential` (the
   * bearer) share one such check.
   */
  serve(
    res: ServerResponse,
    opened: OpenedStream,
    authorized: () => Promise<boolean>,
    credential?: string,
  ): Promise<void> {
    const { caller, position, slot } = opened;
    return this.streams.serve(res, {
      user: caller.user,
      visible: () => this.gardens.visible(caller),
      authorized,
      credential,
      ...(caller.kind === 'token' ? { tokenId: caller.tokenId } : {}),
      position,
      slot,
    });
  }

  /** Reads the log now: an event just committed (in this process, or another one said so). */
  nudge(): void {
    this.streams.nudge();
  }

  /** How many streams this process serves now. */
  get openCount(): number {
    return this.streams.open;
  }

  /** Ends every stream cleanly (shutdown). */
  closeAll(): void {
    this.streams.closeAll();
  }
}
