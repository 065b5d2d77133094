import type { EventRecord } from '../store/store.js';

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
