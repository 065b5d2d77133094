import { BadRequestError, type ErrorDetail } from '../errors.js';
import { MAX_PLANT_ID } from '../plant-id.js';
import { CONTROL, illFormedAt, textProblem } from '../text-rules.js';
import { type CsvProblem, parseCsv, parseCsvHeader, unformula } from './csv.js';

// The plants of a batch create (contract 2, POST /plants/batch) as each body form gives them: a JSON
// object's `plants`, a CSV body's rows or an NDJSON body's lines, checked row by row so that a 400
// names every bad row (`/plants/3/name` in JSON, `/rows/4/name` for CSV and NDJSON, rows counted
// from 1 after the header).

/** Most plants in one batch. */
export const MAX_BATCH = 1000;

/** One plant of a batch; `garden` null: the batch's garden (`?garden=`, or the caller's home). */
export interface BatchRow {
  id: number | null;
  name: string;
  tag: string | null;
  garden: string | null;
}

const ID_TEXT = /^[1-9][0-9]{0,15}$/;
const COLUMNS = ['name', 'tag', 'id', 'garden'] as const;
// The cells a CSV header may have: its columns, and empty ones after them.
const MAX_HEADER_CELLS = 16;
type Column = (typeof COLUMNS)[number];

const idProblem = `must be a whole number from 1 to ${MAX_PLANT_ID}`;

/**
 * Where a detail's field is, as the summary of a 400 says it: "Row 4, column name:" for
 * `/rows/4/name` (`noun`: "field" in NDJSON), "Row 4" for `/rows/4`, "Header column 2:" and "The
 * header" for `/columns/2` and `/columns`; a JSON body's pointer as it is (`plants/3/name`).
 */
function where(field: string, noun: string): string {
  const row = /^\/rows\/(\d+)(?:\/(.+))?$/.exec(field);
  if (row) return row[2] === undefined ? `Row ${row[1]}` : `Row ${row[1]}, ${noun} ${row[2]}:`;
  const column = /^\/columns(?:\/(\d+))?$/.exec(field);
  if (column) return column[1] === undefined ? 'The header' : `Header column ${column[1]}:`;
  return field.slice(1);
}

/**
 * The message of a 400 with these details: the first one's place and reason, and how many more
 * there are; each detail says only its own reason, so message and details say each thing once.
 */
function summary(details: readonly ErrorDetail[], noun = 'column'): string {
  const first = details[0]!;
  const n = details.length - 1;
  const more = n === 0 ? '' : ` (and ${n} more problem${n === 1 ? '' : 's'})`;
  return `${where(first.field, noun)} ${first.message}${more}`;
}

/** Collects a batch's problems, one detail per bad field. */
class Problems {
  readonly details: ErrorDetail[] = [];
  constructor(private readonly noun = 'column') {}
  add(field: string, message: string): void {
    if (this.details.length < 100) this.details.push({ field, message });
  }
  /** Throws the 400 when there was any problem. */
  check(): void {
    if (this.details.length === 0) return;
    throw new BadRequestError('invalid_body', summary(this.details, this.noun), this.details);
  }
}

function tooMany(count: number): never {
  throw new BadRequestError('invalid_body', `a batch holds 1 to ${MAX_BATCH} plants; this one has ${count}`, [
    { field: '', message: `must hold 1 to ${MAX_BATCH} plants` },
  ]);
}

/** The plants of a JSON body (already checked against its schema). */
export function rowsFromJson(
  plants: { id?: number | null; name: string; tag?: string | null }[],
): BatchRow[] {
  return plants.map((p) => ({ id: p.id ?? null, name: p.name, tag: p.tag ?? null, garden: null }));
}

/**
 * The plants of a CSV body: RFC 4180 (csv.ts) with the delimiter its header shows, a header naming
 * columns from name, tag, id and garden (name required; case and spaces around a name aside); a
 * cell that an export made formula-safe (a leading `'`) is read back as it was.
 */
export function rowsFromCsv(text: string): BatchRow[] {
  // The header first, alone: a bad one is refused before any row is read.
  const head = parseCsvHeader(text, COLUMNS, MAX_HEADER_CELLS);
  if (!head.ok) refuseCsv(head);
  const problems = new Problems();
  const at = new Map<Column, number>();
  // Empty cells at the end of the header are columns a spreadsheet wrote for a used range wider
  // than the table (`name;tag;;`); the rows may have cells there, empty ones.
  let named = head.header.length;
  while (named > 0 && head.header[named - 1]!.trim() === '') named--;
  head.header.slice(0, named).forEach((cell, i) => {
    const name = cell.trim().toLowerCase();
    const column = COLUMNS.find((c) => c === name);
    if (name === '')
      problems.add(`/columns/${i + 1}`, `is empty: name the column (${COLUMNS.join(', ')}) or remove it`);
    else if (column === undefined) problems.add(`/columns/${i + 1}`, unknownColumn(cell));
    else if (at.has(column)) problems.add(`/columns/${i + 1}`, `names the column ${name} a second time`);
    else at.set(column, i);
  });
  if (!at.has('name')) problems.add('/columns', 'must include a name column');
  problems.check();
  const table = parseCsv(text, MAX_BATCH, head.header, head.delimiter);
  if (!table.ok) refuseCsv(table);
  const cell = (cells: string[], column: Column) => {
    const i = at.get(column);
    return i === undefined ? '' : unformula(cells[i] ?? '');
  };
  const rows = table.rows.map(({ row, cells }) => {
    const name = cell(cells, 'name');
    const tag = cell(cells, 'tag');
    const id = cell(cells, 'id');
    const garden = cell(cells, 'garden');
    return {
      n: row,
      row: {
        id: id === '' ? null : Number(id),
        name,
        tag: tag === '' ? null : tag,
        garden: garden === '' ? null : garden,
      },
      idText: id,
    };
  });
  for (const { n, row, idText } of rows) {
    checkRow(problems, `/rows/${n}`, row, idText);
  }
  for (const { row, cells } of table.rows) {
    const extra = cells.findIndex((c, i) => i >= named && c.trim() !== '');
    if (extra >= 0)
      problems.add(`/rows/${row}`, `has a value in column ${extra + 1}, which the header does not name`);
  }
  problems.check();
  return rows.map((r) => r.row);
}

// Why a header cell names no column; a cell that holds known names joined by another separator
// (`name;tag` read as one column) says the header seems split on the wrong delimiter.
function unknownColumn(cell: string): string {
  const known = `the columns are ${COLUMNS.join(', ')}`;
  for (const sep of [';', ',', '\t', '|']) {
    const parts = cell.split(sep).map((p) => p.trim().toLowerCase());
    if (parts.length > 1 && parts.some((p) => (COLUMNS as readonly string[]).includes(p))) {
      const d = sep === '\t' ? 'tabs' : `"${sep}"`;
      return `${JSON.stringify(cell)} is not a column: it looks like several column names joined by ${d}, so the header seems split on the wrong delimiter (separate its columns with ",", ";" or a tab, outside quotes, and its rows the same way); ${known}`;
    }
  }
  return `${JSON.stringify(cell)} is not a column: ${known}`;
}

// The 400 of a CSV body refused as a whole (a sentence, no details), or at its header (`/columns`)
// or one row (`/rows/4`).
function refuseCsv(p: CsvProblem & { ok: false }): never {
  if (p.row === undefined) throw new BadRequestError('invalid_body', p.problem);
  const details = [{ field: p.row === 0 ? '/columns' : `/rows/${p.row}`, message: p.detail }];
  throw new BadRequestError('invalid_body', summary(details), details);
}

// The checks of section 1 on one row of a CSV or NDJSON body (JSON bodies have their schema).
function checkRow(problems: Problems, at: string, row: BatchRow, idText: string | null): void {
  const name = textProblem(row.name, 200);
  if (name !== null) problems.add(`${at}/name`, name);
  if (row.tag !== null) {
    const tag = textProblem(row.tag, 100);
    if (tag !== null) problems.add(`${at}/tag`, tag);
  }
  if (idText !== null && idText !== '' && (!ID_TEXT.test(idText) || Number(idText) > MAX_PLANT_ID)) {
    problems.add(`${at}/id`, idProblem);
  }
  if (row.garden !== null && (row.garden.length > 200 || CONTROL.test(row.garden))) {
    problems.add(`${at}/garden`, 'is not a garden id');
  }
}

const NDJSON_FIELDS = new Set(['id', 'name', 'tag', 'garden', 'version']);

/**
 * The plants of an NDJSON body: one JSON object per line (`{id?, name, tag?, garden?}`, and the
 * `version` an export writes, which is ignored); blank lines are skipped, rows counted from 1.
 */
export function rowsFromNdjson(text: string): BatchRow[] {
  const lines = text.split('\n').filter((l) => l.trim() !== '');
  if (lines.length === 0) {
    throw new BadRequestError('invalid_body', 'the NDJSON body has no plants', [
      { field: '', message: 'must hold at least one plant' },
    ]);
  }
  if (lines.length > MAX_BATCH) tooMany(lines.length);
  const problems = new Problems('field');
  const rows = lines.map((line, i): BatchRow => {
    const at = `/rows/${i + 1}`;
    const none: BatchRow = { id: null, name: '', tag: null, garden: null };
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      problems.add(at, 'is not valid JSON');
      return none;
    }
    // A lone surrogate (a \uD800 escape) anywhere in the line: stored, it would read back as U+FFFD.
    const bad = illFormedAt(value);
    if (bad !== null) {
      problems.add(`${at}${bad.field}`, bad.message);
      return none;
    }
    if (value === null || typeof value !== 'object' || Array.isArray(value)) {
      problems.add(at, 'must be a JSON object');
      return none;
    }
    const o = value as Record<string, unknown>;
    for (const key of Object.keys(o))
      if (!NDJSON_FIELDS.has(key)) problems.add(`${at}/${key}`, 'is not a known field');
    const { id, name, tag, garden, version } = o;
    if (typeof name !== 'string')
      problems.add(`${at}/name`, name === undefined ? 'is required' : 'must be a string');
    if (tag !== undefined && tag !== null && typeof tag !== 'string')
      problems.add(`${at}/tag`, 'must be a string or null');
    if (garden !== undefined && garden !== null && typeof garden !== 'string') {
      problems.add(`${at}/garden`, 'must be a string or null');
    }
    if (id !== undefined && id !== null && !(Number.isSafeInteger(id) && (id as number) >= 1)) {
      problems.add(`${at}/id`, idProblem);
    }
    if (version !== undefined && !(Number.isSafeInteger(version) && (version as number) >= 1)) {
      problems.add(`${at}/version`, 'must be a positive integer');
    }
    const row: BatchRow = {
      id: typeof id === 'number' ? id : null,
      name: typeof name === 'string' ? name : '',
      tag: typeof tag === 'string' ? tag : null,
      garden: typeof garden === 'string' ? garden : null,
    };
    if (typeof name === 'string') checkRow(problems, at, row, null);
    return row;
  });
  problems.check();
  return rows;
}

/**
 * A 400 naming each row whose id an earlier row of the batch has, with the id and that row
 * (`at(i)`: the row's field prefix): the batch is invalid, whether or not the id exists yet.
 */
export function distinctIds(rows: BatchRow[], at: (i: number) => string): void {
  const first = new Map<number, number>();
  const problems = new Problems();
  rows.forEach((r, i) => {
    if (r.id === null) return;
    const earlier = first.get(r.id);
    if (earlier === undefined) first.set(r.id, i);
    else
      problems.add(
        `${at(i)}/id`,
        `repeats the id ${r.id} of ${at(earlier)
          .slice(1)
          .replace(/^rows\//, 'row ')}`,
      );
  });
  problems.check();
}
