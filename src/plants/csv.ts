import { type CastingContext, CsvError, parse } from 'csv-parse/sync';

// CSV as plant batches read it and exports write it (contract 2): RFC 4180, UTF-8, an optional
// BOM, CRLF or LF; reading is csv-parse's, writing one record is small enough to do here.

/** One data row of a CSV body: `row` counts data rows from 1 (the header is not counted). */
export interface CsvRow {
  row: number;
  cells: string[];
}
export type CsvTable = { ok: true; rows: CsvRow[] } | CsvProblem;
export type CsvHeader = { ok: true; header: string[] } | CsvProblem;
/**
 * Why a CSV body is refused, and the detail for the record at fault: `row` is its data row (0: the
 * header), when there is one.
 */
export interface CsvProblem {
  ok: false;
  problem: string;
  detail?: string;
  row?: number;
}

/**
 * The most bytes the cells of one record may hold: a plant's longest row (a name of 200 and a tag of
 * 100 characters of up to 4 bytes each, an id and a garden) is under half of it.
 */
export const MAX_RECORD_BYTES = 4096;

// A record with more cells than allowed, stopped at the first one too many (csv-parse reads a
// record whole before counting its cells: 1 MiB of commas is a million empty cells).
class TooManyCells extends Error {}

/**
 * Reads the records of a CSV text (`to` at most), each at most `maxCells` cells and MAX_RECORD_BYTES:
 * it stops at the first record that breaks a bound or the syntax (`read`: the records before it).
 */
function read(
  text: string,
  to: number,
  maxCells: number,
): { records: string[][] } | { err: Error; read: number } {
  let read = 0;
  try {
    const records = parse(text, {
      bom: true,
      skip_empty_lines: true,
      relax_column_count: true,
      to,
      max_record_size: MAX_RECORD_BYTES,
      cast: (value: string, context: CastingContext) => {
        if (context.index >= maxCells) throw new TooManyCells();
        return value;
      },
      on_record: (record: string[]) => {
        read++;
        return record;
      },
    }) as string[][];
    return { records };
  } catch (err) {
    if (!(err instanceof CsvError || err instanceof TooManyCells)) throw err;
    return { err, read };
  }
}

// What a bound or a syntax error in record `row` (0: the header) says; `cells`: the bound on its
// cells, and the names the header may use.
function problemOf(err: Error, row: number, cells: number, names?: readonly string[]): CsvProblem {
  const what = row === 0 ? 'the CSV header' : `row ${row}`;
  if (err instanceof TooManyCells) {
    const known = names === undefined ? '' : ` (${names.join(', ')})`;
    return row === 0
      ? {
          ok: false,
          problem: `${what} names more than ${cells} columns${known}`,
          detail: `must name at most ${cells} columns${known}`,
          row,
        }
      : {
          ok: false,
          problem: `${what} has more cells than the header's ${cells} columns`,
          detail: `must have at most the header's ${cells} cells`,
          row,
        };
  }
  if ((err as CsvError).code === 'CSV_MAX_RECORD_SIZE') {
    return {
      ok: false,
      problem: `${what} is longer than ${MAX_RECORD_BYTES} bytes`,
      detail: `must be at most ${MAX_RECORD_BYTES} bytes`,
      row,
    };
  }
  return {
    ok: false,
    problem: `the CSV body is malformed in ${row === 0 ? 'the header' : what}: ${err.message}`,
    row,
  };
}

/**
 * The header of a CSV text: its first record alone (empty lines skipped), at most as many cells as
 * the `names` a header may use; nothing after it is read, so a bad header costs what the header does.
 */
export function parseCsvHeader(text: string, names: readonly string[]): CsvHeader {
  const r = read(text, 1, names.length);
  if ('err' in r) return problemOf(r.err, 0, names.length, names);
  const header = r.records[0];
  if (header === undefined) return { ok: false, problem: 'the CSV body is empty' };
  return { ok: true, header };
}

/**
 * The data rows of a CSV text whose header (parseCsvHeader) names `columns` columns. Never throws: a
 * header without rows, a row whose cells do not match the header's columns (reading stops at a
 * row with more), a row over MAX_RECORD_BYTES, a malformed quote or more than `maxRows` rows is a
 * problem (with the data row, where there is one).
 */
export function parseCsv(text: string, maxRows: number, columns: number): CsvTable {
  const r = read(text, maxRows + 2, columns);
  if ('err' in r) return problemOf(r.err, r.read, columns);
  const { records } = r;
  if (records.length <= 1) return { ok: false, problem: 'the CSV body has a header but no rows' };
  if (records.length > maxRows + 1)
    return { ok: false, problem: `the CSV body has more than ${maxRows} rows` };
  const rows: CsvRow[] = [];
  for (let i = 1; i < records.length; i++) {
    const cells = records[i]!;
    if (cells.length !== columns) {
      return {
        ok: false,
        problem: `row ${i} has ${cells.length} cells but the header names ${columns} columns`,
        row: i,
      };
    }
    rows.push({ row: i, cells });
  }
  return { ok: true, rows };
}

const FORMULA = /^[=+\-@\t\r']/;
const UNFORMULA = /^'[=+\-@\t\r']/;
// Quoted: a cell holding the delimiter, a quote or a line break (RFC 4180), or a space at either end.
const QUOTE = /[",\r\n]|^ | $/;
// A record with a cell holding `;` or a tab, the separators a spreadsheet may split on instead of
// `,` (a `;` list separator), has every cell quoted. Such a reader honours a quote only where its
// own field begins, which for the cells after the first is mid-field: with every cell quoted the
// record begins with one, and each `;` and tab then lies between quotes for it too, so no piece
// of a cell becomes a field of its own that could begin with `=` (OWASP's advice for CSV
// injection: quote every cell).
const OTHER_SEPARATOR = /[;\t]/;

/**
 * A cell that begins with `=`, `+`, `-`, `@`, tab or carriage return (or `'`, so that the rule can
 * be undone) is prefixed with `'`: no spreadsheet runs it as a formula.
 */
export const formulaSafe = (cell: string): string => (FORMULA.test(cell) ? `'${cell}` : cell);

/** formulaSafe undone (import): a cell that begins with `'` and one of those characters loses the `'`. */
export const unformula = (cell: string): string => (UNFORMULA.test(cell) ? cell.slice(1) : cell);

/**
 * One CSV record ending in CRLF: each cell formula-safe, quoted where it must be (QUOTE), or every
 * cell quoted when one holds `;` or a tab (OTHER_SEPARATOR); `"` doubled.
 */
export function csvLine(cells: readonly (string | null | undefined)[]): string {
  const safe = cells.map((c) => formulaSafe(c ?? ''));
  const all = safe.some((c) => OTHER_SEPARATOR.test(c));
  let line = '';
  for (let i = 0; i < safe.length; i++) {
    const cell = safe[i]!;
    if (i > 0) line += ',';
    line += all || QUOTE.test(cell) ? `"${cell.replaceAll('"', '""')}"` : cell;
  }
  return `${line}\r\n`;
}
