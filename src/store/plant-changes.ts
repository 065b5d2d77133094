import type { EventData, EventPrevious, IdempotencyOutcome, PlantPatch, VersionedPlant } from './store.js';

// What every engine writes when a plant is created, changed or deleted, decided in one place so the
// engines cannot differ on it.

/**
 * A merge patch applied to a plant as it is: its new name and tag, whether that changes anything,
 * and the changed fields' former values (a plant.updated event's `previous`). Every engine's
 * updatePlant decides by this, so they cannot differ on what a change is.
 */
export function applyPatch(
  was: VersionedPlant,
  patch: PlantPatch,
): { name: string; tag: string | null; changed: boolean; previous: EventPrevious } {
  const name = patch.name ?? was.name;
  const tag = patch.tag === undefined ? was.tag : patch.tag;
  const previous: EventPrevious = {};
  if (name !== was.name) previous.name = was.name;
  if (tag !== was.tag) previous.tag = was.tag;
  return { name, tag, changed: name !== was.name || tag !== was.tag, previous };
}

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

/** A new garden id: `gdn_` and 24 hex digits (96 random bits). */
export const gardenId = (random: (n: number) => Buffer): string => `gdn_${random(12).toString('hex')}`;

/** The plant an idempotent create's or change's answer showed, as its record keeps it (text). */
export const shownPlant = (p: { name: string; tag: string | null; version: number }): string =>
  JSON.stringify({ name: p.name, tag: p.tag, version: p.version });

/** A record's outcome with the plant it showed, when it kept one (records made before versions did not). */
export function recordedOutcome(
  status: number | null,
  plantId: number | null,
  shown: string | null,
): IdempotencyOutcome {
  const outcome: IdempotencyOutcome = { status: status ?? 500, plantId };
  if (shown !== null) outcome.plant = JSON.parse(shown);
  return outcome;
}
