import { createHash } from 'node:crypto';
import { BadRequestError } from '../errors.js';
import { MAX_PLANT_ID } from '../schemas/plant.js';

// A cursor names the last id seen and a short hash of the listing it belongs to (user, tag and
// garden), so one issued to another user or for another tag or garden is refused rather than
// silently misused. A listing of every garden hashes as version 2's did, so its cursors still work.
function listingHash(user: string, tag: string | null, garden: string | null): string {
  const scope = garden === null ? '' : `\n@${garden}`;
  return createHash('sha256')
    .update(`${user}\n${tag === null ? '-' : `+${tag}`}${scope}`)
    .digest('base64url')
    .slice(0, 16);
}

/** The opaque continuation token for a page that ended at afterId. */
export function encodeCursor(
  afterId: number,
  user: string,
  tag: string | null,
  garden: string | null,
): string {
  return Buffer.from(`1.${afterId}.${listingHash(user, tag, garden)}`).toString('base64url');
}

/** The id a cursor continues after; 400 when it is malformed or belongs to another listing. */
export function decodeCursor(
  cursor: string,
  user: string,
  tag: string | null,
  garden: string | null,
): number {
  const bad = (why: string) =>
    new BadRequestError('invalid_cursor', `cursor ${why}`, [{ field: '/cursor', message: why }]);
  if (!/^[A-Za-z0-9_-]+$/.test(cursor)) throw bad('is not a cursor this service issued');
  const m = /^1\.([1-9][0-9]{0,15})\.([A-Za-z0-9_-]{16})$/.exec(
    Buffer.from(cursor, 'base64url').toString('latin1'),
  );
  const afterId = m ? Number(m[1]) : Number.NaN;
  if (!m || !(afterId <= MAX_PLANT_ID)) throw bad('is not a cursor this service issued');
  if (m[2] !== listingHash(user, tag, garden)) {
    throw bad('was issued to another user or for another tag or garden');
  }
  return afterId;
}
