import { idCursor } from '../paging.js';

// A plant list's cursor is bound to the user and the query (tag, garden and search). A listing of
// every garden is written as version 2's was, so its cursors still work.
function listing(user: string, tag: string | null, garden: string | null, q: string | null): string {
  const scope = garden === null ? '' : `\n@${garden}`;
  const search = q === null ? '' : `\n?${q.trim()}`;
  return `${user}\n${tag === null ? '-' : `+${tag}`}${scope}${search}`;
}

/** The opaque continuation token for a page that ended at afterId. */
export function encodeCursor(
  afterId: number,
  user: string,
  tag: string | null,
  garden: string | null,
  q: string | null = null,
): string {
  return idCursor.encode(afterId, listing(user, tag, garden, q));
}

/** The id a cursor continues after; 400 when it is malformed or belongs to another listing. */
export function decodeCursor(
  cursor: string,
  user: string,
  tag: string | null,
  garden: string | null,
  q: string | null = null,
): number {
  return idCursor.decode(cursor, listing(user, tag, garden, q));
}
