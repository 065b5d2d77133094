import { EVENT_TYPES, type EventType } from './store.js';

/**
 * Endpoint event types as a bit mask, so matching an event is one AND in SQL. The bits are stored
 * (endpoint masks on both engines, the SQLite log's type column): never renumber one.
 */
const BITS: Record<EventType, number> = {
  'plant.created': 1,
  'plant.deleted': 2,
  'plant.updated': 4,
  'member.added': 8,
  'member.changed': 16,
  'member.removed': 32,
  'plant.restored': 64,
  'plant.purged': 128,
};

export const typeBit = (t: EventType): number => BITS[t];

/** The type whose bit this is (the SQLite log stores an event's type as its bit). */
export const typeOfBit = (bit: number): EventType | undefined => EVENT_TYPES.find((t) => typeBit(t) === bit);

export const typesOf = (mask: number): EventType[] => EVENT_TYPES.filter((t) => (mask & typeBit(t)) !== 0);

export const maskOf = (types: readonly EventType[]): number => types.reduce((m, t) => m | typeBit(t), 0);
