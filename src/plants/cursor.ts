import { createHash } from 'node:crypto';
import { BadRequestError } from '../errors.js';
import { MAX_PLANT_ID } from '../schemas/plant.js';

// A cursor names the last id seen and a short hash of the listing it belongs to (user and tag),
// so one issued to another user or for another tag is refused rather than silently misused.
function listingHash(user: string, tag: string | null): string {
  return createHash('sha256')
    .update(`${user}\n${tag === null ? '-' : `+${tag}`}`)
    .digest('base64url')
    .slice(0, 16);
}

/** The opaque continuation token for a page that ended at afterId. */
export function encodeCursor(afterId: number, user: string, tag: string | null): string {
  return Buffer.from(`1.${afterId}.${listingHash(user, tag)}`).toString('base64url');
}

/** The id a cursor continues after; 400 when it is malformed or belongs to another listing. */
export function decodeCursor(cursor: string, user: string, tag: string | null): number {
  const bad = (why: string) =>
    new BadRequestError('invalid_cursor', `cursor ${why}`, [{ field: '/cursor', message: why }]);
  if (!/^[A-Za-z0-9_-]+$/.test(cursor)) throw bad('is not a cursor this service issued');
  const m = /^1\.([1-9][0-9]{0,15})\.([A-Za-z0-9_-]{16})$/.exec(
    Buffer.from(cursor, 'base64url').toString('latin1'),
  );
  const afterId = m ? Number(m[1]) : Number.NaN;
  if (!m || !(afterId <= MAX_PLANT_ID)) throw bad('is not a cursor this service issued');
  if (m[2] !== listingHash(user, tag)) throw bad('was issued to another user or for another tag');
  return afterId;
}
