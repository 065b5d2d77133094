import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { parse } from 'csv-parse/sync';
import { type ListedPlant, PlantStoreError } from '../client/index.js';
import { UsageError } from '../usage-error.js';
import { type ClientOpts, connect, gardenId, out, withClient } from './client.js';

// `plants search`, `plants export` and `plants import` (contract section 7, version 4): search and
// export through the client; an import sends a CSV or NDJSON file 1,000 rows (and under 1 MiB) a
// request, saying how far it got on stderr, and stops at the first batch the service refuses.

/** A list line (contract version 3): id, name, tag (empty when none) and garden, always four fields. */
export const listLine = (p: ListedPlant<'garden'>) => `${p.id}\t${p.name}\t${p.tag ?? ''}\t${p.garden}`;
const ROWS = 1000;
// Under the service's 1 MiB, with room for the header.
const BYTES = 1_000_000;

/** A file's rows as text to send, in chunks the service takes: each row's text and its row number. */
interface Chunk {
  text: string;
  first: number;
  last: number;
}

function chunks(header: string, rows: string[], sep: string): Chunk[] {
  const out: Chunk[] = [];
  let at = 0;
  while (at < rows.length) {
    let text = header;
    const first = at;
    while (at < rows.length && at - first < ROWS) {
      const row = `${rows[at]}${sep}`;
      if (at > first && text.length + row.length > BYTES) break;
      text += row;
      at++;
    }
    out.push({ text, first: first + 1, last: at });
  }
  return out;
}

/** CSV: the header and each record's own text (csv-parse reads the quoting; nothing is rewritten). */
function csvChunks(text: string): Chunk[] {
  let records: { raw: string }[];
  try {
    records = parse(text, {
      bom: true,
      raw: true,
      skip_empty_lines: true,
      relax_column_count: true,
    }) as unknown as {
      raw: string;
    }[];
  } catch (err) {
    throw new UsageError(`the file is not CSV: ${(err as Error).message}`);
  }
  if (records.length < 2) throw new UsageError('the CSV file has no rows after its header');
  // Each record's text without the line end csv-parse leaves on it (a loop: no regex to backtrack).
  const raw = records.map((r) => {
    let end = r.raw.length;
    while (end > 0 && (r.raw[end - 1] === '\n' || r.raw[end - 1] === '\r')) end--;
    return r.raw.slice(0, end);
  });
  return chunks(`${raw[0]}\r\n`, raw.slice(1), '\r\n');
}

function ndjsonChunks(text: string): Chunk[] {
  const lines = text.split('\n').filter((l) => l.trim() !== '');
  if (lines.length === 0) throw new UsageError('the NDJSON file has no plants');
  return chunks('', lines, '\n');
}

/** `plantstore plants search|export|import`. */
export function plantFileCommands(plants: Command): void {
  withClient(
    plants
      .command('search')
      .description(
        'every plant whose name has a word starting with each term of TEXT (case and accents ignored): id, name, tag, garden',
      )
      .argument('<text>', 'the search, e.g. "mon del"')
      .option('--tag <tag>', 'only plants with this tag')
      .option('--garden <gid>', 'only the plants of this garden'),
  ).action(async (text: string, o: ClientOpts & { tag?: string; garden?: string }) => {
    const q = {
      include: ['garden'] as const,
      limit: 1000,
      ...(o.tag === undefined ? {} : { tag: o.tag }),
      ...(o.garden === undefined ? {} : { garden: gardenId(o.garden, '--garden') }),
    };
    const found: ListedPlant<'garden'>[] = [];
    for await (const p of connect(o).plants.search(text, q)) {
      if (o.json) found.push(p);
      else out(listLine(p));
    }
    if (o.json) out(JSON.stringify(found));
  });

  withClient(
    plants
      .command('export')
      .description('every plant you may see (or those the filters keep), from one snapshot, to stdout')
      .option('--format <format>', 'csv or ndjson', 'ndjson')
      .option('--tag <tag>', 'only plants with this tag')
      .option('--garden <gid>', 'only the plants of this garden')
      .option('--q <text>', 'only the plants this search finds'),
  ).action(async (o: ClientOpts & { format: string; tag?: string; garden?: string; q?: string }) => {
    if (o.format !== 'csv' && o.format !== 'ndjson') {
      throw new UsageError(`--format must be csv or ndjson; got ${JSON.stringify(o.format)}`);
    }
    const q = {
      ...(o.tag === undefined ? {} : { tag: o.tag }),
      ...(o.garden === undefined ? {} : { garden: gardenId(o.garden, '--garden') }),
      ...(o.q === undefined ? {} : { q: o.q }),
    };
    for await (const line of connect(o).plants.exportText(q, o.format)) {
      // Waits while stdout is full: memory stays flat however many plants there are.
      if (!process.stdout.write(line)) await new Promise((r) => process.stdout.once('drain', r));
    }
  });

  withClient(
    plants
      .command('import')
      .description(
        'create the plants of a CSV (header: name, tag, id, garden) or NDJSON file, 1,000 a request, each request all or nothing; stops at the first refused one',
      )
      .argument('<file>', 'a .csv or .ndjson file (an export of `plants export` too)')
      .option('--garden <gid>', 'the garden for rows that name none (default: your home garden)')
      .option('--new-ids', 'ignore the ids in the file: the service assigns new ones'),
  ).action(async (file: string, o: ClientOpts & { garden?: string; newIds?: boolean }) => {
    let text: string;
    try {
      text = new TextDecoder('utf-8', { fatal: true }).decode(readFileSync(file));
    } catch (err) {
      throw new UsageError(`cannot read ${file}: ${(err as Error).message}`);
    }
    const isNdjson = /\.(nd)?jsonl?$|\.ndjson$/i.test(file) || /^\uFEFF?\s*\{/.test(text);
    const parts = isNdjson ? ndjsonChunks(text) : csvChunks(text);
    const total = parts[parts.length - 1]!.last;
    const store = connect(o);
    const opts = {
      ...(o.garden === undefined ? {} : { garden: gardenId(o.garden, '--garden') }),
      ...(o.newIds ? { newIds: true } : {}),
    };
    const ids: number[] = [];
    for (const part of parts) {
      try {
        const made = await store.plants.batch(isNdjson ? { ndjson: part.text } : { csv: part.text }, opts);
        ids.push(...made.ids);
      } catch (err) {
        if (!(err instanceof PlantStoreError) || err.status === 0) throw err;
        // The service's rows count from 1 in each request; the file's from 1 after its header.
        const rows = (err.details ?? []).map((d) => {
          const m = /^\/rows\/(\d+)(\/.*)?$/.exec(d.field);
          return m
            ? `row ${part.first + Number(m[1]) - 1}${m[2] ? ` ${m[2].slice(1)}` : ''} ${d.message}`
            : d.message;
        });
        const why = rows.length ? rows.join('; ') : err.message;
        throw new PlantStoreError(
          err.status,
          err.code,
          `rows ${part.first}–${part.last} refused, none of them created: ${why} (${ids.length} plants imported before them)`,
        );
      }
      process.stderr.write(`imported ${part.last}/${total}\n`);
    }
    out(o.json ? JSON.stringify({ created: ids.length, ids }) : `imported ${ids.length} plants`);
  });
}
