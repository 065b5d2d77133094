import { randomBytes } from 'node:crypto';
import type { EventRecord } from '../store/store.js';

// Random bytes drawn in bulk: one call into the CSPRNG per 409 ids instead of one per id.
let pool = randomBytes(4096);
let used = pool.length;

/**
 * `evt_`, the time in milliseconds (12 hex digits) and 10 random bytes (20 hex digits): opaque
 * and unique, and increasing with time, so that the log's unique index on ids grows at its end.
 * Random ids landed on a different index page each, and every page an insert touches is written
 * to the WAL and synced with the create: random ids cost creates ~45 % (bench/events-cost.ts).
 */
export function newEventId(now = Date.now()): string {
  if (used + 10 > pool.length) {
    pool = randomBytes(4096);
    used = 0;
  }
  const random = pool.toString('hex', used, used + 10);
  used += 10;
  return `evt_${now.toString(16).padStart(12, '0')}${random}`;
}

/** The JSON an event is sent as, by webhook and by the live stream (CONTRACT.md section 8). */
export interface EventPayload {
  type: EventRecord['type'];
  timestamp: string;
  data: EventRecord['data'];
}

export const eventPayload = (e: EventRecord): EventPayload => ({
  type: e.type,
  timestamp: e.createdAt.toISOString(),
  data: e.data,
});

/** Who may see an event: its plant's owner, and plants:admin callers and endpoints. */
export const maySee = (e: Pick<EventRecord, 'owner'>, user: string, admin: boolean): boolean =>
  admin || e.owner === user;
