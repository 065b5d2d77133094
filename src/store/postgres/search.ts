import type pg from 'pg';
import { indexedWords } from '../../search-text.js';
import type { PageQuery } from '../store.js';

// Search on PostgreSQL (contract 2's `q`): each plant's folded words (search-text.ts) in the
// tsvector column `search`, written by every create and rename in its own statement, under a GIN
// index; a term is a prefix query on them (`'term':*`). The terms hold letters and digits only, so
// the query is built as tsquery text, never parsed by a text-search configuration.

/** The tsquery of the terms: every one a word prefix. */
export const tsquery = (terms: readonly string[]): string => terms.map((t) => `'${t}':*`).join(' & ');

const COLS = 'id, garden, name, tag, version';

/**
 * A search page's statement and values. Across gardens, each garden's matches are read on their
 * own and merged in id order, as the list's pages are (plant-queries.ts): the planner picks, per
 * call and for the terms given (never a generic plan), between the garden's page index filtered by
 * the match and the GIN index's matches sorted.
 */
export function searchPage(q: PageQuery & { terms: string[] }): { text: string; values: unknown[] } {
  const values: unknown[] = [tsquery(q.terms), q.afterId, q.limit];
  const tag = q.tag === null ? '' : ` AND tag = $${values.push(q.tag)}`;
  if (q.gardens === null) {
    return {
      text: `SELECT ${COLS} FROM plants WHERE search @@ $1::tsquery AND id > $2${tag} ORDER BY id LIMIT $3`,
      values,
    };
  }
  const gardens = `$${values.push([...new Set(q.gardens)])}::text[]`;
  return {
    text: `SELECT p.* FROM unnest(${gardens}) AS g(id) CROSS JOIN LATERAL (
        SELECT ${COLS} FROM plants WHERE garden = g.id AND search @@ $1::tsquery AND id > $2${tag}
        ORDER BY id LIMIT $3) p
      ORDER BY p.id LIMIT $3`,
    values,
  };
}

/** Fills `search` for the plants already stored (migration 12), a slice of ids at a time. */
export async function fillSearch(c: pg.PoolClient): Promise<void> {
  for (let after = 0; ; ) {
    const { rows } = await c.query<{ id: number; name: string }>(
      'SELECT id, name FROM plants WHERE id > $1 ORDER BY id LIMIT 5000',
      [after],
    );
    if (rows.length === 0) return;
    await c.query(
      `UPDATE plants p SET search = array_to_tsvector(string_to_array(w.words, ' '))
       FROM unnest($1::bigint[], $2::text[]) AS w(id, words) WHERE p.id = w.id`,
      [rows.map((r) => r.id), rows.map((r) => indexedWords(r.name))],
    );
    after = rows[rows.length - 1]!.id;
  }
}
