import { createWriteStream, readFileSync } from 'node:fs';
import { finished } from 'node:stream/promises';
import { StoreFileWriter } from '../../src/ops/store-file.js';
import type { StoreFileHeader, StoreRecord } from '../../src/schemas/store-file.js';

/**
 * Writes `to` from the export file `from` with its records passed through `edit`, and its trailer
 * (counts and SHA-256) made again by the exporter's own writer: a tampered file whose checksum
 * holds. Answers the records written.
 */
export async function rewriteExport(
  from: string,
  to: string,
  edit: (records: StoreRecord[]) => StoreRecord[],
): Promise<StoreRecord[]> {
  const lines = readFileSync(from, 'utf8').split('\n').filter(Boolean);
  const header = JSON.parse(lines[0]!) as StoreFileHeader;
  const records = edit(lines.slice(1, -1).map((l) => JSON.parse(l) as StoreRecord));
  const out = createWriteStream(to, { mode: 0o600 });
  const w = new StoreFileWriter(out, header.schema);
  for (const r of records) await w.write(r);
  await w.end();
  out.end();
  await finished(out);
  return records;
}
