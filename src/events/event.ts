import { EVENT_TEXT, type EventRecord } from '../store/store.js';

/** The JSON an event is sent as, by webhook and by the live stream (CONTRACT.md sections 8, 13.1). */
export interface EventPayload {
  type: EventRecord['type'];
  timestamp: string;
  /** Who caused it (null: the service itself, or an event written before version 5). */
  actor: string | null;
  /** The X-Request-Id of the request that caused it (null: none). */
  requestId: string | null;
  data: EventRecord['data'];
}

export const eventPayload = (e: EventRecord): EventPayload => ({
  type: e.type,
  timestamp: e.createdAt.toISOString(),
  actor: e.actor,
  requestId: e.requestId,
  data: e.data,
});

/** An event as history and activity list it (contract 13.3): its webhook body, with its id. */
export const historyItem = (e: EventRecord): EventPayload & { id: string } => ({
  id: e.id,
  ...eventPayload(e),
});

/**
 * A page of history or activity as JSON text: each event as historyItem writes it, in its order of
 * keys, with the engine's text of its timestamp and data spliced in where the record carries it
 * (EVENT_TEXT: the data is not parsed only to be written again).
 */
export function historyJson(items: readonly EventRecord[]): string {
  const parts = items.map((e) => {
    const text = e[EVENT_TEXT];
    if (text === undefined) return JSON.stringify(historyItem(e));
    return `{"id":${JSON.stringify(e.id)},"type":${JSON.stringify(e.type)},"timestamp":${JSON.stringify(text.timestamp)},"actor":${JSON.stringify(e.actor)},"requestId":${JSON.stringify(e.requestId)},"data":${text.data}}`;
  });
  return `[${parts.join(',')}]`;
}
