import type Database from 'better-sqlite3';
import { indexedWords } from '../../search-text.js';

// Search on SQLite (contract 2's `q`): an FTS5 table of each plant's words, kept by the plant
// writes in their own transaction. It holds no text of its own (contentless): a row is the plant's
// id (its rowid), its garden as one token and its folded words (plants/search-text.ts), so the
// ascii tokenizer only has to split on the spaces between them. A prefix index of one to three
// characters keeps short terms as cheap as long ones; deletes by rowid (contentless_delete) need
// no copy of what was indexed, so they work whatever Unicode version folded the words.

/** The table, as migration 15 makes it. */
export const SEARCH_TABLE = `CREATE VIRTUAL TABLE plant_search USING fts5(garden, words,
  content='', contentless_delete=1, tokenize='ascii', prefix='1 2 3', detail='column')`;

/** The longest prefix FTS5 keeps an index of (the table's prefix='1 2 3'). */
const LONGEST_PREFIX = 3;

/** A term as FTS5 is asked for it: its first 3 characters, for which it has an index. */
export function shortTerm(term: string): string {
  const chars = [...term];
  return chars.length <= LONGEST_PREFIX ? term : chars.slice(0, LONGEST_PREFIX).join('');
}

/** A garden's id as one token the ascii tokenizer keeps whole. */
export const gardenToken = (garden: string): string => Buffer.from(garden, 'utf8').toString('hex');

/**
 * The FTS5 query for plants in `gardens` (null: any) with a word starting with each term. Terms are
 * letters and digits only (search-text.ts), written as quoted strings: never an operator.
 */
export function matchQuery(gardens: readonly string[] | null, terms: readonly string[]): string {
  const words = `words : (${terms.map((t) => `"${t}"*`).join(' AND ')})`;
  if (gardens === null) return words;
  const tokens = [...new Set(gardens)].map((g) => `"${gardenToken(g)}"`);
  return `garden : (${tokens.join(' OR ')}) AND ${words}`;
}

/** Fills the table for the plants already stored (migration 15), a slice of ids at a time. */
export function fillSearch(db: Database.Database): void {
  const read = db
    .prepare<[number], [number, string, string]>(
      'SELECT id, garden, name FROM plants WHERE id > ? ORDER BY id LIMIT 5000',
    )
    .raw();
  const insert = db.prepare('INSERT INTO plant_search (rowid, garden, words) VALUES (?, ?, ?)');
  for (let after = 0; ; ) {
    const rows = read.all(after);
    for (const [id, garden, name] of rows) insert.run(id, gardenToken(garden), indexedWords(name));
    if (rows.length < 5000) return;
    after = rows[rows.length - 1]![0];
  }
}
