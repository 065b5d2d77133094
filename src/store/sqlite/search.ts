import type Database from 'better-sqlite3';
import { indexedWords } from '../../search-text.js';

// Search on SQLite (contract 2's `q`): an FTS5 table of each plant's words, kept by the plant
// writes in their own transaction. It holds no text of its own (contentless): a row is the plant's
// id (its rowid), its garden as one token and its folded words (plants/search-text.ts), so the
// ascii tokenizer only has to split on the spaces between them. A prefix index of one to three
// characters keeps short terms as cheap as long ones; deletes by rowid (contentless_delete) need
// no copy of what was indexed, so they work whatever Unicode version folded the words.
//
// A longer term is looked up first in the table of the distinct words indexed (plant_search_words,
// each with how many plants have it, kept by the same writes): the words it begins are asked of
// FTS5 by name, each an exact token read a row at a time, so a search reads only the rows that
// match, however many others share the term's first letters. A term no word begins with is
// answered without FTS5.

/** The table, as migration 15 makes it. */
export const SEARCH_TABLE = `CREATE VIRTUAL TABLE plant_search USING fts5(garden, words,
  content='', contentless_delete=1, tokenize='ascii', prefix='1 2 3', detail='column')`;

/** The distinct words of plant_search and how many plants have each (migration 16). */
export const WORDS_TABLE = `CREATE TABLE plant_search_words (
  word   TEXT PRIMARY KEY,
  plants INTEGER NOT NULL
) WITHOUT ROWID`;

/** The longest prefix FTS5 keeps an index of (the table's prefix='1 2 3'). */
const LONGEST_PREFIX = 3;

/**
 * Most words a term is asked of FTS5 by: an OR of that many exact tokens (64 cost a page of 20
 * about 0.5 ms, against 0.1 ms for one). A term more words begin with is a "wide" term: see
 * SqlitePlantReads.search.
 */
export const MAX_TERM_WORDS = 64;

/** Above every character a word can hold (U+10FFFF is no letter or digit): the end of a term's range. */
const PAST = '\u{10FFFF}';

/** The words of the index that begin with `term`, in order, at most `limit`: read from plant_search_words. */
export type WordsFrom = (from: string, to: string, limit: number) => string[];

/**
 * One term as FTS5 is asked for it, as quoted strings (terms are letters and digits only,
 * search-text.ts: never an operator): `exact` reads its matches only — a prefix FTS5 has an index
 * of, else the words the term begins. A term more than MAX_TERM_WORDS words begin with is `exact`
 * as a prefix of its own, which FTS5 answers by merging the rows of all those words, in the whole
 * store, before the first; its `first3` reads along its first 3 letters' index a row at a time, the
 * rows still to be checked against the whole term. Null: no word begins with it.
 */
export function termQuery(term: string, wordsFrom: WordsFrom): { exact: string; first3?: string } | null {
  const chars = [...term];
  if (chars.length <= LONGEST_PREFIX) return { exact: `"${term}"*` };
  const words = wordsFrom(term, term + PAST, MAX_TERM_WORDS + 1);
  if (words.length === 0) return null;
  if (words.length <= MAX_TERM_WORDS) return { exact: `(${words.map((w) => `"${w}"`).join(' OR ')})` };
  return { exact: `"${term}"*`, first3: `"${chars.slice(0, LONGEST_PREFIX).join('')}"*` };
}

/** A garden's id as one token the ascii tokenizer keeps whole. */
export const gardenToken = (garden: string): string => Buffer.from(garden, 'utf8').toString('hex');

/** The FTS5 query for plants in `gardens` (null: any) matching every term (termQuery's). */
export function matchQuery(gardens: readonly string[] | null, terms: readonly string[]): string {
  const words = `words : (${terms.join(' AND ')})`;
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

/** How many plants have each word, for words indexed `plants` times more (+) or fewer (−). */
export function countWords(into: Map<string, number>, words: string, plants: number): void {
  if (words === '') return;
  for (const w of words.split(' ')) into.set(w, (into.get(w) ?? 0) + plants);
}

/** Fills plant_search_words from the plants already stored (migration 16), a slice of ids at a time. */
export function fillWords(db: Database.Database): void {
  const read = db
    .prepare<[number], [number, string]>('SELECT id, name FROM plants WHERE id > ? ORDER BY id LIMIT 5000')
    .raw();
  const counts = new Map<string, number>();
  for (let after = 0; ; ) {
    const rows = read.all(after);
    for (const [, name] of rows) countWords(counts, indexedWords(name), 1);
    if (rows.length < 5000) break;
    after = rows[rows.length - 1]![0];
  }
  const insert = db.prepare('INSERT INTO plant_search_words (word, plants) VALUES (?, ?)');
  for (const [word, plants] of [...counts].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
    insert.run(word, plants);
}
