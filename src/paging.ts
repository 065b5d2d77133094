// Keyset paging as every list answers it (plants, tokens, webhook deliveries): an opaque cursor
// bound to the listing it came from, a page read one row past its limit, and the `Link` header
// that names the next page. Shared by services and routes, so it belongs to none of them.
import { createHash } from 'node:crypto';
import { BadRequestError } from './errors.js';

/** One page of a listing and where the next one starts. */
export interface Page<T> {
  items: T[];
  /** The next page's cursor; null on the last page. */
  next: string | null;
  limit: number;
}

/**
 * A page whose items the engine wrote as the answer's JSON text (a JSON array, sent as it is), and
 * where the next one starts.
 */
export interface JsonTextPage {
  json: string;
  /** The next page's cursor; null on the last page. */
  next: string | null;
  limit: number;
}

/** The page of `rows`, read with a limit of `limit + 1`: the extra row only says that more follow. */
export function pageOf<T>(rows: T[], limit: number, cursorAfter: (last: T) => string): Page<T> {
  const more = rows.length > limit;
  const items = more ? rows.slice(0, limit) : rows;
  const last = items[items.length - 1];
  return { items, next: more && last !== undefined ? cursorAfter(last) : null, limit };
}

/** Turns a position in a listing into a cursor and back, for one listing at a time. */
export interface CursorCodec<P> {
  encode(position: P, listing: string): string;
  /** The position a cursor continues after; 400 when it is malformed or belongs to another listing. */
  decode(cursor: string, listing: string): P;
}

// A cursor is `<position>.<hash>` in base64url: the position as the listing writes it, and a short
// hash of the listing (the caller and the query that shape it), so that a cursor issued for another
// listing is refused rather than silently misused. Clients hold cursors: the form never changes.
// The hash of a listing, remembered: a deep page hashes its listing twice (the cursor it was given
// and the next one), and a client paging through a list asks for the same listing again and again.
// A SHA-256 took 1.2 µs a call (createHash, update, digest); the lookup 0.02 µs. At most HASHES_KEPT listings are kept,
// all forgotten when it is full (a listing names a caller and a query: there are few per client).
const HASHES_KEPT = 10_000;
const hashes = new Map<string, string>();
function listingHash(listing: string): string {
  let hash = hashes.get(listing);
  if (hash === undefined) {
    hash = createHash('sha256').update(listing).digest('base64url').slice(0, 16);
    if (hashes.size >= HASHES_KEPT) hashes.clear();
    hashes.set(listing, hash);
  }
  return hash;
}
const CURSOR_TEXT = /^[A-Za-z0-9_-]{1,200}$/;
const PAYLOAD = /^(.+)\.([A-Za-z0-9_-]{16})$/;

/**
 * A cursor codec whose position is written by `write` and read back by `read` (undefined: not a
 * position this service writes). `another` says what a cursor of another listing was issued to;
 * `param` the query parameter that carries it (default `cursor`), as a 400 names it.
 */
export function cursorCodec<P>(form: {
  write: (position: P) => string;
  read: (text: string) => P | undefined;
  another: string;
  param?: string;
}): CursorCodec<P> {
  const param = form.param ?? 'cursor';
  const bad = (why: string) =>
    new BadRequestError('invalid_cursor', `${param} ${why}`, [{ field: `/${param}`, message: why }]);
  return {
    encode: (position, listing) =>
      Buffer.from(`${form.write(position)}.${listingHash(listing)}`).toString('base64url'),
    decode(cursor, listing) {
      const m = CURSOR_TEXT.test(cursor)
        ? PAYLOAD.exec(Buffer.from(cursor, 'base64url').toString('latin1'))
        : null;
      const position = m ? form.read(m[1] as string) : undefined;
      if (m === null || position === undefined) throw bad('is not a cursor this service issued');
      if (m[2] !== listingHash(listing)) throw bad(`was issued to ${form.another}`);
      return position;
    },
  };
}

const ID_POSITION = /^1\.([1-9][0-9]{0,15})$/;

/** Cursors whose position is a row id from 1 to 2^53 − 1 (plants, delivery attempts): `1.<id>`. */
export const idCursor = cursorCodec<number>({
  write: (id) => `1.${id}`,
  read: (text) => {
    const m = ID_POSITION.exec(text);
    const id = m ? Number(m[1]) : Number.NaN;
    return id <= Number.MAX_SAFE_INTEGER ? id : undefined;
  },
  another: 'another user or for another tag or garden',
});

/**
 * The `Link` header of a page that has a next one (RFC 8288): `path` again with the page's limit,
 * its next cursor and `params` in their order. A value is percent-encoded; a list is joined by
 * commas after its elements are. Undefined on the last page.
 */
export function nextLink(
  path: string,
  page: { next: string | null; limit: number },
  params: Record<string, string | string[] | undefined> = {},
): string | undefined {
  if (page.next === null) return undefined;
  let query = `limit=${page.limit}&cursor=${page.next}`;
  for (const [name, value] of Object.entries(params)) {
    if (value === undefined) continue;
    const text = Array.isArray(value) ? value.map(encodeURIComponent).join(',') : encodeURIComponent(value);
    query += `&${name}=${text}`;
  }
  return `<${path}?${query}>; rel="next"`;
}
