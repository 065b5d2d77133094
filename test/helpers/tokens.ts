// What the /tokens route tests share: requests with a bearer secret, the answers' shapes, list
// walks and the checks of a refusal's answer, and the harness of the "tokens over HTTP" suites.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import type { Scope } from '../../src/schemas/token.js';
import { errorBody, type Harness } from './app.js';
import type { Engine } from './engines.js';
import { suiteHarness } from './suite.js';

const JSON_TYPE = { 'content-type': 'application/json' };
/** A token manager's scopes, and an admin's. */
export const MANAGE: Scope[] = ['tokens:manage', 'plants:read', 'plants:write'];
export const ADMIN: Scope[] = ['plants:admin', 'tokens:manage'];
/** The fields of a POST /tokens answer. */
export const CREATED_KEYS = ['createdAt', 'expiresAt', 'id', 'name', 'scopes', 'token', 'user'];
/** A secret's and a token id's shapes. */
export const SECRET = /^pst_[A-Za-z0-9_-]{43}$/;
export const TOKEN_ID = /^tok_[A-Za-z0-9_-]{12}$/;
export const REALM = 'Bearer realm="plantstore"';
export const HOUR = 3_600_000;
export const MINUTE = 60_000;

/** A POST /tokens answer: the only one that carries the secret. */
export interface Created {
  id: string;
  token: string;
  user: string;
  scopes: string[];
  name: string | null;
  createdAt: string;
  expiresAt: string | null;
}

/** A token as GET /tokens and GET /tokens/{id} show it. */
export interface View {
  id: string;
  user: string;
  scopes: string[];
  name: string | null;
  createdAt: string;
  expiresAt: string | null;
  lastUsedAt: string | null;
  status: 'active' | 'expired' | 'revoked';
}

/** A payload as sent: a string as it is, anything else as JSON. */
const asBody = (payload: unknown) => (typeof payload === 'string' ? payload : JSON.stringify(payload));
/** A user name no other test knows. */
export const uniqueUser = (prefix: string) => `${prefix}-${randomUUID().slice(0, 8)}`;
/** The target of a Link rel="next" header, or null. */
export const nextOf = (res: LightMyRequestResponse) =>
  /^<([^>]+)>; rel="next"$/.exec(String(res.headers.link ?? ''))?.[1] ?? null;

/** A request with this bearer secret (none: no Authorization header). */
export function call(
  h: Harness,
  secret: string | null,
  method: 'GET' | 'POST' | 'DELETE' | 'PUT' | 'PATCH' | 'HEAD',
  url: string,
  payload?: unknown,
  headers: Record<string, string> = payload === undefined ? {} : JSON_TYPE,
): Promise<LightMyRequestResponse> {
  return h.app.inject({
    method,
    url,
    headers: { ...(secret === null ? {} : { authorization: `Bearer ${secret}` }), ...headers },
    ...(payload === undefined ? {} : { payload: asBody(payload) }),
  });
}

/** POST /tokens, GET and DELETE /tokens/{id} and GET /me with this bearer secret, as they come back. */
export const postToken = (
  h: Harness,
  secret: string | null,
  body: unknown,
  headers?: Record<string, string>,
) => call(h, secret, 'POST', '/tokens', body, headers);
export const getToken = (h: Harness, secret: string, id: string) => call(h, secret, 'GET', `/tokens/${id}`);
export const revoke = (h: Harness, secret: string, id: string) => call(h, secret, 'DELETE', `/tokens/${id}`);
export const me = (h: Harness, secret: string) => call(h, secret, 'GET', '/me');

/** POST /tokens answered 201 with exactly the contract's fields; returns them. */
export async function made(h: Harness, secret: string, body: unknown = {}): Promise<Created> {
  const res = await postToken(h, secret, body);
  assert.equal(res.statusCode, 201, res.body);
  const c: Created = res.json();
  assert.deepEqual(Object.keys(c).sort(), CREATED_KEYS);
  assert.match(c.token, SECRET);
  assert.match(c.id, TOKEN_ID);
  assert.equal(res.headers.location, `/tokens/${c.id}`);
  assert.equal(res.headers['cache-control'], 'no-store');
  return c;
}

/** One token as GET /tokens/{id} shows it (200 asserted). */
export async function viewOf(h: Harness, secret: string, id: string): Promise<View> {
  const res = await getToken(h, secret, id);
  assert.equal(res.statusCode, 200, res.body);
  return res.json();
}

/** Every page of a listing, following Link (200 asserted on each). */
export async function walk(h: Harness, secret: string, url: string) {
  const pages: View[][] = [];
  const links: string[] = [];
  for (let next: string | null = url; next !== null; ) {
    const res = await call(h, secret, 'GET', next);
    assert.equal(res.statusCode, 200, `GET ${next}: ${res.body}`);
    assert.ok(!res.body.includes('pst_'), `a list body carries a secret: ${res.body}`);
    assert.equal(res.headers['cache-control'], 'no-store');
    pages.push(res.json());
    next = nextOf(res);
    if (next !== null) links.push(next);
    assert.ok(pages.length < 10_000, 'the listing ends');
  }
  return { pages, links, tokens: pages.flat() };
}

/** The ids of every token the caller lists (newest first). */
export const listedIds = async (h: Harness, secret: string, query = '') =>
  (await walk(h, secret, `/tokens?limit=1000${query}`)).tokens.map((t) => t.id);

/** Asserts an error of this status and code, with the contract's body. */
export function refusedAs(res: LightMyRequestResponse, status: number, code: string, what = ''): void {
  assert.equal(res.statusCode, status, `${what} ${res.body}`);
  assert.equal(errorBody(res).code, code, what);
}

/** 403 insufficient_scope for tokens:manage, with its challenge. */
export function insufficientScope(res: LightMyRequestResponse, what = ''): void {
  refusedAs(res, 403, 'insufficient_scope', what);
  assert.equal(
    res.headers['www-authenticate'],
    `${REALM}, error="insufficient_scope", scope="tokens:manage"`,
    what,
  );
}

/** 401 invalid_token, with its challenge. */
export function invalidToken(res: LightMyRequestResponse, what = ''): void {
  refusedAs(res, 401, 'invalid_token', what);
  assert.match(String(res.headers['www-authenticate']), /^Bearer realm="plantstore", error="invalid_token"/);
}

/** 403 scope_not_held naming the offending field. */
export function notHeld(res: LightMyRequestResponse, field: string, what = ''): void {
  refusedAs(res, 403, 'scope_not_held', what);
  const details = errorBody(res).details as { field: string }[] | undefined;
  assert.deepEqual(
    details?.map((d) => d.field),
    [field],
    what,
  );
}

/**
 * The "tokens over HTTP" suites' harness on this engine, for the enclosing describe block, and
 * `manager`: a new user's client with these scopes (tokens:manage and plants read and write).
 */
export function tokensOverHttp(engine: Engine) {
  // A long verifier cache: a token refused at once after a revocation here is refused because
  // the revocation (or the fresh check of a maker) reached it, not because its verdict aged.
  const h = suiteHarness(engine, { authFailureLimit: 0 }, { tokenCacheMs: 60_000, lastUsedFlushMs: 20 });
  return { h, manager: (scopes: Scope[] = MANAGE) => h.user(scopes) };
}
