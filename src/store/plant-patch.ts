import type { EventPrevious, PlantPatch, VersionedPlant } from './store.js';

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
