import type { Readable } from 'node:stream';
import { spool } from '../http/spool.js';
import { csvLine, type Delimiter } from '../plants/csv.js';
import type { PagePlant } from '../store/store.js';

// GET /plants/export's body (contract 2): NDJSON, one `{id, name, tag, garden, version}` a line
// (tag only when set), or CSV with the header `id,name,tag,garden` and formula-safe cells (csv.ts),
// after a UTF-8 byte order mark: without it Excel reads the file as its locale's code page (and
// shows "CafÃ©"); with it, every spreadsheet reads UTF-8, and the batch import skips it.

/** Whether the request asks for CSV: `format=csv`, or without `format` an Accept naming text/csv but not NDJSON. */
export function wantsCsv(format: 'csv' | 'ndjson' | undefined, accept: string | undefined): boolean {
  if (format !== undefined) return format === 'csv';
  return accept !== undefined && /\btext\/csv\b/i.test(accept) && !/\bapplication\/x-ndjson\b/i.test(accept);
}

const ndjson = (p: PagePlant): string =>
  `${JSON.stringify(
    p.tag === null
      ? { id: p.id, name: p.name, garden: p.garden, version: p.version }
      : { id: p.id, name: p.name, tag: p.tag, garden: p.garden, version: p.version },
  )}\n`;

const BOM = '\uFEFF';

/**
 * The export's body as a stream: every page read from the store's snapshot at the store's pace and
 * spooled to a temporary file (http/spool.ts), which is then sent at the client's. The snapshot
 * (a PostgreSQL connection, a SQLite read transaction) is released before anything is sent, so a
 * store that fails during the read is still a 503, and a slow client holds only a file. `csv`: the
 * CSV's delimiter, null for NDJSON.
 */
export function exportBody(pages: AsyncIterable<PagePlant[]>, csv: Delimiter | null): Promise<Readable> {
  const line =
    csv === null ? ndjson : (p: PagePlant) => csvLine([String(p.id), p.name, p.tag, p.garden], csv);
  async function* body() {
    if (csv !== null) yield BOM + csvLine(['id', 'name', 'tag', 'garden'], csv);
    for await (const page of pages) {
      let chunk = '';
      for (const p of page) chunk += line(p);
      yield chunk;
    }
  }
  return spool(body());
}
