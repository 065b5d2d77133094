// What a change to a plant is. Pure and below both the store and the plant service: every
// engine's updatePlant applies it inside its own transaction (SQLite's on its writer's thread,
// where nothing but data can be sent), so the engines cannot differ on it.

/** The fields of a plant a merge patch may change (tag null: none). */
export interface PatchedFields {
  name: string;
  tag: string | null;
}

/**
 * A checked JSON Merge Patch (a field present is to be set; tag null: removed) applied to a plant
 * as it is: its new name and tag, whether that changes anything, and the changed fields' former
 * values (a plant.updated event's `previous`).
 */
export function applyPatch(
  was: PatchedFields,
  patch: Partial<PatchedFields>,
): PatchedFields & { changed: boolean; previous: Partial<PatchedFields> } {
  const name = patch.name ?? was.name;
  const tag = patch.tag === undefined ? was.tag : patch.tag;
  const previous: Partial<PatchedFields> = {};
  if (name !== was.name) previous.name = was.name;
  if (tag !== was.tag) previous.tag = was.tag;
  return { name, tag, changed: name !== was.name || tag !== was.tag, previous };
}
