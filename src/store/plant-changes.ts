import { MAX_PLANT_ID } from '../plant-id.js';
import type { EventData, EventPrevious, IdempotencyOutcome } from './store.js';

// What every engine writes of a plant's change (its event's data, its Idempotency-Key record),
// decided in one place so the engines cannot differ on it. What a change is: plant-patch.ts.

/**
 * The plant as an event carries it: NewPlant's shape, tag only when set, its garden (and what a
 * change replaced).
 */
export function eventData(
  id: number,
  name: string,
  tag: string | null,
  garden: string,
  previous?: EventPrevious,
): EventData {
  const data: EventData = tag === null ? { id, name, garden } : { id, name, tag, garden };
  if (previous !== undefined) data.previous = previous;
  return data;
}

/** The plant an idempotent create's or change's answer showed, as its record keeps it (text). */
export const shownPlant = (p: { name: string; tag: string | null; version: number }): string =>
  JSON.stringify({ name: p.name, tag: p.tag, version: p.version });

/** What an idempotent batch create's answer showed, as its record keeps it (text). */
export const shownBatch = (ids: number[]): string => JSON.stringify({ ids });

/**
 * A record's outcome with the plant (or a batch's ids) it showed, when it kept one (records made
 * before versions did not).
 */
export function recordedOutcome(
  status: number | null,
  plantId: number | null,
  shown: string | null,
): IdempotencyOutcome {
  const outcome: IdempotencyOutcome = { status: status ?? 500, plantId };
  if (shown !== null) {
    const kept = JSON.parse(shown);
    if (Array.isArray(kept.ids)) outcome.ids = kept.ids;
    else outcome.plant = kept;
  }
  return outcome;
}

/**
 * Whether a batch's rows without an id (`absent` of them) fit past the largest id it gives: past
 * MAX_PLANT_ID no id is left for them, and the batch is refused before the engine's counter moves.
 */
export const idsLeftFor = (maxGiven: number, absent: number): boolean =>
  absent === 0 || maxGiven + absent <= MAX_PLANT_ID;

/**
 * The first id of a batch's given ids that an earlier one repeats (null: none does): the batch is
 * refused as for an id that exists, the second would find the first.
 */
export function repeatedId(ids: readonly number[]): number | null {
  const seen = new Set<number>();
  for (const id of ids) {
    if (seen.has(id)) return id;
    seen.add(id);
  }
  return null;
}
