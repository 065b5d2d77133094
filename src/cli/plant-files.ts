import { readFileSync } from 'node:fs';
import type { Command } from 'commander';
import { CsvError, parse } from 'csv-parse/sync';
import { type CsvDelimiter, type ListedPlant, PlantStoreError } from '../client/index.js';
import { findDelimiter, syntaxProblem } from '../plants/csv.js';
import { encodingProblem } from '../plants/file-encoding.js';
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
    let bytes = Buffer.byteLength(header);
    const first = at;
    while (at < rows.length && at - first < ROWS) {
      const row = `${rows[at]}${sep}`;
      // In bytes, as the service counts: 1,000 rows of non-ASCII names pass 1 MiB sooner.
      const size = Buffer.byteLength(row);
      if (at > first && bytes + size > BYTES) break;
      text += row;
      bytes += size;
      at++;
    }
    out.push({ text, first: first + 1, last: at });
  }
  return out;
}

/**
 * CSV: the header and each record's own text, read with the delimiter the header shows (csv-parse
 * reads the quoting; nothing is rewritten, so each request keeps the file's delimiter). Records
 * whose cells are all empty are left out, as the service leaves them out, so row numbers agree.
 */
function csvChunks(text: string): Chunk[] {
  const delimiter = findDelimiter(text);
  let read = 0;
  let header: string[] | undefined;
  let records: { raw: string }[];
  try {
    records = parse(text, {
      bom: true,
      delimiter,
      raw: true,
      skip_empty_lines: true,
      skip_records_with_empty_values: true,
      relax_column_count: true,
      on_record: (record: string[]) => {
        // With `raw`, csv-parse hands over `{record, raw}`.
        header ??= (record as unknown as { record: string[] }).record;
        read++;
        return record;
      },
    }) as unknown as { raw: string }[];
  } catch (err) {
    if (!(err instanceof CsvError)) throw err;
    const where = read === 0 ? 'the header' : `row ${read}`;
    const names = header?.map((h) => h.trim().toLowerCase());
    throw new UsageError(
      `${where} of the file ${syntaxProblem(err, { delimiter, cells: 0, ...(names ? { header: names } : {}) })}`,
    );
  }
  if (records.length === 0)
    throw new UsageError('the CSV file is empty: it needs a header row and a row for each plant');
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

// --delimiter as the client takes it; only with --format csv.
function delimiterOption(value: string | undefined, format: string): CsvDelimiter | undefined {
  if (value === undefined) return undefined;
  if (format !== 'csv') throw new UsageError('--delimiter is for --format csv only');
  const d = value === 'tab' || value === '\\t' ? '\t' : value;
  if (d !== ',' && d !== ';' && d !== '\t') {
    throw new UsageError(`--delimiter must be ",", ";" or "tab"; got ${JSON.stringify(value)}`);
  }
  return d;
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
      .option(
        '--delimiter <d>',
        'CSV only: "," (the default), ";" (for Excel where the decimal separator is a comma, as in German or French) or "tab"',
      )
      .option('--tag <tag>', 'only plants with this tag')
      .option('--garden <gid>', 'only the plants of this garden')
      .option('--q <text>', 'only the plants this search finds'),
  ).action(
    async (
      o: ClientOpts & { format: string; delimiter?: string; tag?: string; garden?: string; q?: string },
    ) => {
      if (o.format !== 'csv' && o.format !== 'ndjson') {
        throw new UsageError(`--format must be csv or ndjson; got ${JSON.stringify(o.format)}`);
      }
      const delimiter = delimiterOption(o.delimiter, o.format);
      const q = {
        ...(o.tag === undefined ? {} : { tag: o.tag }),
        ...(o.garden === undefined ? {} : { garden: gardenId(o.garden, '--garden') }),
        ...(o.q === undefined ? {} : { q: o.q }),
      };
      const opts = delimiter === undefined ? {} : { delimiter };
      for await (const line of connect(o).plants.exportText(q, o.format, opts)) {
        // Waits while stdout is full: memory stays flat however many plants there are.
        if (!process.stdout.write(line)) await new Promise((r) => process.stdout.once('drain', r));
      }
    },
  );

  withClient(
    plants
      .command('import')
      .description(
        'create the plants of a CSV (UTF-8, with or without a BOM; header: name, tag, id, garden; cells separated by ",", ";" or tabs, as the header shows) or NDJSON file, 1,000 a request, each request all or nothing; stops at the first refused one',
      )
      .argument('<file>', 'a .csv or .ndjson file (an export of `plants export` too)')
      .option('--garden <gid>', 'the garden for rows that name none (default: your home garden)')
      .option('--new-ids', 'ignore the ids in the file: the service assigns new ones'),
  ).action(async (file: string, o: ClientOpts & { garden?: string; newIds?: boolean }) => {
    let bytes: Buffer;
    try {
      bytes = readFileSync(file);
    } catch (err) {
      throw new UsageError(`cannot read ${file}: ${(err as Error).message}`);
    }
    // Checked here, as the service checks them: text decoded with replacement characters would
    // send "Gr��e" for a Windows-1252 "Größe".
    const start = bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf ? 3 : 0;
    const isNdjson =
      /\.(nd)?jsonl?$|\.ndjson$/i.test(file) || /^\s*\{/.test(bytes.toString('latin1', start, start + 64));
    const problem = encodingProblem(bytes, isNdjson ? 'ndjson' : 'csv');
    if (problem !== null) throw new UsageError(`${file}: ${problem}`);
    const text = bytes.toString('utf8', start);
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
          const row = /^\/rows\/(\d+)(?:\/(.+))?$/.exec(d.field);
          if (row) {
            const n = part.first + Number(row[1]) - 1;
            return row[2] === undefined
              ? `row ${n} ${d.message}`
              : `row ${n}, ${isNdjson ? 'field' : 'column'} ${row[2]}: ${d.message}`;
          }
          const column = /^\/columns(?:\/(\d+))?$/.exec(d.field);
          if (column)
            return column[1] === undefined
              ? `the header ${d.message}`
              : `header column ${column[1]}: ${d.message}`;
          return d.message;
        });
        // One line a person reads: the first few rows, and how many more.
        const shown = rows.slice(0, 5).join('; ');
        const more = rows.length > 5 ? ` (and ${rows.length - 5} more problems)` : '';
        const why = rows.length ? `${shown}${more}` : err.message;
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
