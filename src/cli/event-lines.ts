import type { PlantEvent } from '../client/index.js';

/**
 * One event a line, as `plants history` and `gardens activity` print them: time, type, who did it
 * (`-`: the service itself, or an event from before version 5), then what it was about — the
 * plant's id and name (a purged plant's: its id and `-`), or the member and its role.
 */
export function eventLine(e: PlantEvent): string {
  const d = e.data as Record<string, unknown>;
  const what = 'user' in d ? `${d.user}\t${d.role}` : `${d.id}\t${d.name ?? '-'}`;
  return `${e.timestamp}\t${e.type}\t${e.actor ?? '-'}\t${what}`;
}

/** Prints every event of `events`: NDJSON (one event a line) with --json, else eventLine. */
export async function printEvents(
  events: AsyncIterable<PlantEvent>,
  json: boolean | undefined,
  out: (s: string) => void,
) {
  for await (const e of events) out(json ? JSON.stringify(e) : eventLine(e));
}
