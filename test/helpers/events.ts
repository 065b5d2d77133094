import assert from 'node:assert/strict';

/** An event's data as a plant event's (asserted: a membership change's has no plant). */
export function plantOf<D extends object>(data: D): Extract<D, { name: string; id: number }> {
  assert.ok('id' in data && 'name' in data, `not a plant event's data: ${JSON.stringify(data)}`);
  return data as Extract<D, { name: string; id: number }>;
}
