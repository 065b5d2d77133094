import { CsvError, parse } from 'csv-parse/sync';

// CSV as plant batches read it and exports write it (contract 2): RFC 4180, UTF-8, an optional
// BOM, CRLF or LF; reading is csv-parse's, writing one record is small enough to do here.

/** One data row of a CSV body: `row` counts data rows from 1 (the header is not counted). */
export interface CsvRow {
  row: number;
  cells: string[];
}
export type CsvTable =
  | { ok: true; header: string[]; rows: CsvRow[] }
  | { ok: false; problem: string; row?: number };

/**
 * Parses a whole CSV text, its first record the header. Empty lines are skipped. Never throws:
 * an empty body, a header without rows, a row whose cells do not match the header's columns, a
 * malformed quote or more than `maxRows` rows is a problem (with the data row, where there is one).
 */
export function parseCsv(text: string, maxRows: number): CsvTable {
  let records: string[][];
  // Records read so far: when one fails, it is the one after them (0: the header).
  let read = 0;
  try {
    records = parse(text, {
      bom: true,
      skip_empty_lines: true,
      relax_column_count: true,
      to: maxRows + 2,
      on_record: (record: string[]) => {
        read++;
        return record;
      },
    }) as string[][];
  } catch (err) {
    if (!(err instanceof CsvError)) throw err;
    const where = read === 0 ? ' in the header' : ` in row ${read}`;
    return {
      ok: false,
      problem: `the CSV body is malformed${where}: ${err.message}`,
      ...(read > 0 ? { row: read } : {}),
    };
  }
  if (records.length === 0) return { ok: false, problem: 'the CSV body is empty' };
  const header = records[0]!;
  if (records.length === 1) return { ok: false, problem: 'the CSV body has a header but no rows' };
  if (records.length > maxRows + 1)
    return { ok: false, problem: `the CSV body has more than ${maxRows} rows` };
  const rows: CsvRow[] = [];
  for (let i = 1; i < records.length; i++) {
    const cells = records[i]!;
    if (cells.length !== header.length) {
      return {
        ok: false,
        problem: `row ${i} has ${cells.length} cells but the header names ${header.length} columns`,
        row: i,
      };
    }
    rows.push({ row: i, cells });
  }
  return { ok: true, header, rows };
}

const FORMULA = /^[=+\-@\t\r']/;
const UNFORMULA = /^'[=+\-@\t\r']/;
// Quoted: a cell holding the delimiter, a quote or a line break (RFC 4180), a space at either end,
// and one holding `;` or a tab, the delimiters a spreadsheet may split on instead (a `;` list
// separator): its pieces stay one quoted text cell rather than cells of their own, one of which
// could begin with `=`.
const QUOTE = /[",;\t\r\n]|^ | $/;

/**
 * A cell that begins with `=`, `+`, `-`, `@`, tab or carriage return (or `'`, so that the rule can
 * be undone) is prefixed with `'`: no spreadsheet runs it as a formula.
 */
export const formulaSafe = (cell: string): string => (FORMULA.test(cell) ? `'${cell}` : cell);

/** formulaSafe undone (import): a cell that begins with `'` and one of those characters loses the `'`. */
export const unformula = (cell: string): string => (UNFORMULA.test(cell) ? cell.slice(1) : cell);

/**
 * One CSV record ending in CRLF: each cell formula-safe, quoted where it must be (QUOTE), `"`
 * doubled.
 */
export function csvLine(cells: readonly (string | null | undefined)[]): string {
  let line = '';
  for (let i = 0; i < cells.length; i++) {
    const cell = formulaSafe(cells[i] ?? '');
    if (i > 0) line += ',';
    line += QUOTE.test(cell) ? `"${cell.replaceAll('"', '""')}"` : cell;
  }
  return `${line}\r\n`;
}
