import { type CastingContext, CsvError, parse } from 'csv-parse/sync';

// CSV as plant batches read it and exports write it (contract 2): RFC 4180, UTF-8, an optional
// BOM, CRLF or LF, the delimiter `,`, `;` or tab (what spreadsheets save, by locale); reading is
// csv-parse's, writing one record is small enough to do here. Every refusal is a sentence for a
// person, never csv-parse's own message.

/** The delimiters a CSV body may use (contract 2, version 5): what spreadsheets save by locale. */
export type Delimiter = ',' | ';' | '\t';
export const DELIMITERS: readonly Delimiter[] = [',', ';', '\t'];

/** One data row of a CSV body: `row` counts data rows from 1 (the header is not counted). */
export interface CsvRow {
  row: number;
  cells: string[];
}
export type CsvTable = { ok: true; rows: CsvRow[] } | CsvProblem;
export type CsvHeader = { ok: true; header: string[]; delimiter: Delimiter } | CsvProblem;
/**
 * Why a CSV body is refused: as a whole (`problem`, a sentence), or at one record (`row`, 0: the
 * header) for the reason `detail` says, worded to follow "Row 3 " or "The header ".
 */
export type CsvProblem =
  | { ok: false; problem: string; row?: undefined }
  | { ok: false; row: number; detail: string };

/**
 * The most bytes the cells of one record may hold: a plant's longest row (a name of 200 and a tag of
 * 100 characters of up to 4 bytes each, an id and a garden) is under half of it.
 */
export const MAX_RECORD_BYTES = 4096;

/**
 * The delimiter of a CSV text, as its header row shows: the one of `,`, `;` and tab found most
 * often outside quotes in the first record (`,` on a tie, and when there is none: one column).
 * Only the first record is looked at, at most MAX_RECORD_BYTES characters of it (a longer header
 * is refused anyway).
 */
export function findDelimiter(text: string): Delimiter {
  const counts = new Map<string, number>(DELIMITERS.map((d) => [d, 0]));
  let i = text.charCodeAt(0) === 0xfeff ? 1 : 0;
  const end = Math.min(text.length, i + MAX_RECORD_BYTES + 1);
  let quoted = false;
  let begun = false;
  for (; i < end; i++) {
    const ch = text[i]!;
    if (ch === '"') quoted = !quoted;
    else if (!quoted && (ch === '\n' || ch === '\r')) {
      // Empty lines before the header are skipped, as the reader skips them.
      if (begun) break;
      continue;
    } else if (!quoted) {
      const n = counts.get(ch);
      if (n !== undefined) counts.set(ch, n + 1);
    }
    begun = true;
  }
  let best: Delimiter = ',';
  for (const d of DELIMITERS) if (counts.get(d)! > counts.get(best)!) best = d;
  return best;
}

// A record with more cells than allowed, stopped at the first one too many (csv-parse reads a
// record whole before counting its cells: 1 MiB of commas is a million empty cells).
class TooManyCells extends Error {}

/**
 * Reads the records of a CSV text (`to` at most), each at most `maxCells` cells and MAX_RECORD_BYTES:
 * it stops at the first record that breaks a bound or the syntax (`read`: the records before it).
 * A record whose cells are all empty (`,,` for a row a spreadsheet left blank) is skipped.
 */
function read(
  text: string,
  to: number,
  maxCells: number,
  delimiter: Delimiter,
): { records: string[][] } | { err: Error; read: number } {
  let read = 0;
  try {
    const records = parse(text, {
      bom: true,
      delimiter,
      skip_empty_lines: true,
      skip_records_with_empty_values: true,
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

/**
 * The header of a CSV text: its delimiter (findDelimiter) and its first record alone (empty lines
 * skipped), at most `maxCells` cells (the `names` a header may use, and any empty ones a
 * spreadsheet adds); nothing after it is read, so a bad header costs what the header does.
 */
export function parseCsvHeader(text: string, names: readonly string[], maxCells: number): CsvHeader {
  const delimiter = findDelimiter(text);
  const r = read(text, 1, maxCells, delimiter);
  if ('err' in r)
    return { ok: false, row: 0, detail: syntaxProblem(r.err, { delimiter, cells: maxCells, names }) };
  const header = r.records[0];
  if (header === undefined) {
    return {
      ok: false,
      problem: `The file is empty: it needs a header row naming its columns (${names.join(', ')}; name is required) and a row for each plant.`,
    };
  }
  return { ok: true, header, delimiter };
}

/**
 * The data rows of a CSV text whose header (parseCsvHeader) names `header`'s columns, read with
 * its delimiter. Never throws: a header without rows, a row with more cells than the header's
 * columns (reading stops there), a row over MAX_RECORD_BYTES, a malformed quote or more than
 * `maxRows` rows is a problem (with the data row, where there is one). A row with fewer cells has
 * the rest empty (Excel leaves out the delimiters of empty cells at the end of some rows).
 */
export function parseCsv(
  text: string,
  maxRows: number,
  header: readonly string[],
  delimiter: Delimiter,
): CsvTable {
  const r = read(text, maxRows + 2, header.length, delimiter);
  if ('err' in r)
    return {
      ok: false,
      row: r.read,
      detail: syntaxProblem(r.err, { delimiter, cells: header.length, header }),
    };
  const { records } = r;
  if (records.length <= 1) {
    return { ok: false, problem: 'The file has a header but no rows: add a row for each plant under it.' };
  }
  if (records.length > maxRows + 1) {
    return {
      ok: false,
      problem: `The file has more than ${maxRows} rows; one import takes at most ${maxRows}: split it into files of ${maxRows} rows or fewer (plantstore plants import FILE does this itself).`,
    };
  }
  return { ok: true, rows: records.slice(1).map((cells, i) => ({ row: i + 1, cells })) };
}

/** A delimiter as a sentence names it. */
export const delimiterName = (d: Delimiter): string => (d === '\t' ? 'a tab' : `"${d}"`);

/**
 * What a bound or a syntax error in a record says, worded to follow "Row 3 " or "The header "
 * (the header's own: `names`, the columns a header may use; a row's: `header`, its column names).
 */
export function syntaxProblem(
  err: Error,
  at: { delimiter: Delimiter; cells: number; names?: readonly string[]; header?: readonly string[] },
): string {
  const d = delimiterName(at.delimiter);
  if (err instanceof TooManyCells) {
    return at.names !== undefined
      ? `has more than ${at.cells} cells: the columns are ${at.names.join(', ')}, each at most once`
      : `has more cells than the header's ${at.cells} columns: a cell holding ${d} must be in quotes`;
  }
  const e = err as CsvError & { column?: number | null };
  const index = typeof e.column === 'number' ? e.column : null;
  const name = index === null ? undefined : at.header?.[index];
  const column = index === null ? '' : ` (column ${name ?? index + 1})`;
  switch (e.code) {
    case 'CSV_MAX_RECORD_SIZE':
      return `is longer than the ${MAX_RECORD_BYTES} bytes a row may hold`;
    case 'CSV_QUOTE_NOT_CLOSED':
      return `has a quote that is never closed${column}: a cell that begins with a quote must end with one, and a quote inside it is written twice ("")`;
    case 'CSV_INVALID_CLOSING_QUOTE': {
      // csv-parse names the character after the quote only in its message.
      const next = /got "(.)"/su.exec(e.message)?.[1];
      if (next !== undefined && next !== at.delimiter && (DELIMITERS as readonly string[]).includes(next)) {
        return `separates its cells with ${delimiterName(next as Delimiter)}, but the header with ${d}${column}: every row must use the header's delimiter`;
      }
      return `has text after the closing quote of a quoted cell${column}: a quote inside a quoted cell is written twice ("")`;
    }
    case 'CSV_NON_TRIMABLE_CHAR_AFTER_CLOSING_QUOTE':
      return `has text after the closing quote of a quoted cell${column}: a quote inside a quoted cell is written twice ("")`;
    case 'CSV_RECORD_INCONSISTENT_FIELDS_LENGTH':
    case 'CSV_RECORD_INCONSISTENT_COLUMNS':
      return `does not have as many cells as the header has columns: a cell holding ${d} must be in quotes`;
    case 'INVALID_OPENING_QUOTE':
      return `has a quote inside a cell that does not begin with one${column}: put the whole cell in quotes and write each quote inside it twice, as in "5"" pot"`;
    default:
      return `cannot be read as CSV${column}`;
  }
}

const FORMULA = /^[=+\-@\t\r']/;
const UNFORMULA = /^'[=+\-@\t\r']/;
// Quoted: a cell holding any of the delimiters (the one in use, and those a spreadsheet of another
// locale splits on), a quote or a line break (RFC 4180), or a space at either end.
const QUOTE = /[",;\t\r\n]|^ | $/;
// A record with a cell holding a delimiter other than the one in use (`;` or a tab in a `,` file,
// `,` or a tab in a `;` file) has every cell quoted. A spreadsheet whose list separator is that
// other delimiter splits the record on it, and honours a quote only where its own field begins,
// which for the cells after the first is mid-field: with every cell quoted the record begins with
// one, and each such delimiter then lies between quotes for it too, so no piece of a cell becomes
// a field of its own that could begin with `=` (OWASP's advice for CSV injection: quote every cell).
const OTHERS: Record<Delimiter, RegExp> = { ',': /[;\t]/, ';': /[,\t]/, '\t': /[,;]/ };

/**
 * A cell that begins with `=`, `+`, `-`, `@`, tab or carriage return (or `'`, so that the rule can
 * be undone) is prefixed with `'`: no spreadsheet runs it as a formula.
 */
export const formulaSafe = (cell: string): string => (FORMULA.test(cell) ? `'${cell}` : cell);

/** formulaSafe undone (import): a cell that begins with `'` and one of those characters loses the `'`. */
export const unformula = (cell: string): string => (UNFORMULA.test(cell) ? cell.slice(1) : cell);

/**
 * One CSV record ending in CRLF, its cells separated by `delimiter`: each cell formula-safe,
 * quoted where it must be (QUOTE), or every cell quoted when one holds another delimiter (OTHERS);
 * `"` doubled.
 */
export function csvLine(cells: readonly (string | null | undefined)[], delimiter: Delimiter = ','): string {
  const safe = cells.map((c) => formulaSafe(c ?? ''));
  const others = OTHERS[delimiter];
  const all = safe.some((c) => others.test(c));
  let line = '';
  for (let i = 0; i < safe.length; i++) {
    const cell = safe[i]!;
    if (i > 0) line += delimiter;
    line += all || QUOTE.test(cell) ? `"${cell.replaceAll('"', '""')}"` : cell;
  }
  return `${line}\r\n`;
}
