import { EVENT_TYPES, type EventType } from './store.js';

/**
 * Endpoint event types as a bit mask (1 created, 2 deleted, 4 updated), so matching an event is one
 * AND in SQL.
 */
export const typeBit = (t: EventType): number => (t === 'plant.created' ? 1 : t === 'plant.deleted' ? 2 : 4);

/** The type whose bit this is (the SQLite log stores an event's type as its bit). */
export const typeOfBit = (bit: number): EventType | undefined => EVENT_TYPES.find((t) => typeBit(t) === bit);

export const typesOf = (mask: number): EventType[] => EVENT_TYPES.filter((t) => (mask & typeBit(t)) !== 0);

export const maskOf = (types: readonly EventType[]): number => types.reduce((m, t) => m | typeBit(t), 0);
