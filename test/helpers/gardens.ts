// What the garden route tests share: requests for gardens, members and plants in gardens made
// through the app as a client would, and the checks of a refusal's answer.
import assert from 'node:assert/strict';
import type { LightMyRequestResponse } from 'fastify';
import { type Client, errorBody, locationId } from './app.js';

export const JSON_TYPE = { 'content-type': 'application/json' };
export const MERGE = { 'content-type': 'application/merge-patch+json' };
/** A well-formed garden id that no garden has. */
export const MISSING_GID = 'gdn_000000000000000000000000';

/** A member's role, as the API spells it. */
export type Role = 'viewer' | 'editor' | 'owner';

/** A garden as GET /gardens shows it to one caller. */
export interface Garden {
  id: string;
  name: string;
  home: boolean;
  role: Role;
  createdAt: string;
}

/** A member as GET /gardens/{gid}/members shows it. */
export interface Member {
  user: string;
  role: Role;
  addedAt: string;
}

/** A payload as sent: a string as it is, anything else as JSON. */
export const asBody = (payload: unknown) => (typeof payload === 'string' ? payload : JSON.stringify(payload));

/** POST /gardens with this payload, as it comes back. */
export const postGarden = (c: Client, payload: unknown, headers: Record<string, string> = JSON_TYPE) =>
  c.request({ method: 'POST', url: '/gardens', headers, payload: asBody(payload) });

/** A new garden of the caller's (201 asserted), as the API returns it. */
export async function createGarden(c: Client, name = 'Shared'): Promise<Garden> {
  const res = await postGarden(c, { name });
  assert.equal(res.statusCode, 201, res.body);
  return res.json();
}

/** The id of a new garden of the caller's (201 asserted). */
export const newGarden = async (c: Client, name = 'Shared'): Promise<string> =>
  (await createGarden(c, name)).id;

/** The caller's gardens, as GET /gardens lists them (200 asserted). */
export async function listGardens(c: Client): Promise<Garden[]> {
  const res = await c.request({ method: 'GET', url: '/gardens' });
  assert.equal(res.statusCode, 200, res.body);
  return res.json();
}

/** The id of the caller's home garden (the first GET /gardens lists; made on first need). */
export const homeOf = async (c: Client): Promise<string> => (await listGardens(c))[0]!.id;

/** PUT /gardens/{gid}/members/{user} with this role, as it comes back (raw: the user already encoded). */
export const putMember = (c: Client, gid: string, user: string, role: unknown, raw = false) =>
  c.request({
    method: 'PUT',
    url: `/gardens/${gid}/members/${raw ? user : encodeURIComponent(user)}`,
    headers: JSON_TYPE,
    payload: JSON.stringify({ role }),
  });

/** DELETE /gardens/{gid}/members/{user}, as it comes back (raw: the user already encoded). */
export const removeMember = (c: Client, gid: string, user: string, raw = false) =>
  c.request({ method: 'DELETE', url: `/gardens/${gid}/members/${raw ? user : encodeURIComponent(user)}` });

/** Adds `user` to the garden with this role, or changes its role (201 or 200 asserted); the member. */
export async function share(owner: Client, gid: string, user: string, role: Role): Promise<Member> {
  const res = await putMember(owner, gid, user, role);
  assert.ok(
    res.statusCode === 201 || res.statusCode === 200,
    `PUT ${user} ${role}: ${res.statusCode} ${res.body}`,
  );
  return res.json();
}

/** Removes `user` from the garden (204 asserted). */
export async function unshare(c: Client, gid: string, user: string): Promise<void> {
  const res = await removeMember(c, gid, user);
  assert.equal(res.statusCode, 204, res.body);
}

/** POST /gardens/{gid}/plants with this payload, as it comes back. */
export const plantIn = (c: Client, gid: string, payload: unknown, headers: Record<string, string> = {}) =>
  c.request({
    method: 'POST',
    url: `/gardens/${gid}/plants`,
    headers: { ...JSON_TYPE, ...headers },
    payload: asBody(payload),
  });

/** A new plant in the garden (201 asserted): its id and ETag. */
export async function newPlant(
  c: Client,
  gid: string,
  payload: unknown,
): Promise<{ id: number; etag: string }> {
  const res = await plantIn(c, gid, payload);
  assert.equal(res.statusCode, 201, res.body);
  return { id: locationId(res), etag: String(res.headers.etag) };
}

/** Asserts a 4xx/5xx error of this status (and code when given), with the contract's body. */
export function refused(res: LightMyRequestResponse, status: number, code?: string, what = ''): void {
  assert.equal(res.statusCode, status, `${what} ${res.body}`);
  const e = errorBody(res);
  if (code !== undefined) assert.equal(e.code, code, what);
}

/** A 403 for the role, not the token: no WWW-Authenticate challenge. */
export function insufficientRole(res: LightMyRequestResponse, what = ''): void {
  refused(res, 403, 'insufficient_role', what);
  assert.equal(res.headers['www-authenticate'], undefined, `${what}: no challenge for a role refusal`);
}

/** The target of a `Link: <…>; rel="next"` header, or null. */
export function nextLink(res: LightMyRequestResponse): string | null {
  const link = res.headers.link;
  if (link === undefined) return null;
  const m = /^<([^>]+)>; rel="next"$/.exec(String(link));
  assert.ok(m, `malformed Link header ${String(link)}`);
  return m[1]!;
}
