import { Readable } from 'node:stream';
import { csvLine } from '../plants/csv.js';
import type { PagePlant } from '../store/store.js';

// GET /plants/export's body (contract 2): NDJSON, one `{id, name, tag, garden, version}` a line
// (tag only when set), or CSV with the header `id,name,tag,garden` and formula-safe cells (csv.ts).

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

const csv = (p: PagePlant): string => csvLine([String(p.id), p.name, p.tag, p.garden]);

/**
 * The export's body as a stream. The first page is read before anything is sent (so that a store
 * that cannot serve is still a 503); each later page only when the client has taken the one before,
 * and a client that goes away ends the read (and its snapshot).
 */
export async function exportBody(pages: AsyncIterable<PagePlant[]>, asCsv: boolean): Promise<Readable> {
  const it = pages[Symbol.asyncIterator]();
  const first = await it.next();
  const line = asCsv ? csv : ndjson;
  async function* body() {
    try {
      if (asCsv) yield csvLine(['id', 'name', 'tag', 'garden']);
      for (let r = first; !r.done; r = await it.next()) {
        let chunk = '';
        for (const p of r.value) chunk += line(p);
        yield chunk;
      }
    } finally {
      await it.return?.();
    }
  }
  return Readable.from(body(), { objectMode: false });
}
