// The one place tests make gardens and share them: through the app as a client would (requests
// for gardens, members and plants in gardens, and the checks of a refusal's answer), and through
// the store itself for the store's contract suites (users, gardens with members, plants and
// endpoints).
import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import { gardenId } from '../../src/gardens/id.js';
import type {
  DeliveryJob,
  EndpointRecord,
  EventType,
  FinishedAttempt,
  Role,
  Store,
  VersionedPlant,
} from '../../src/store/store.js';
import { type Client, errorBody, type Harness, locationId } from './app.js';
import { logSettled } from './log.js';

// ---- through the app ----

export const JSON_TYPE = { 'content-type': 'application/json' };
export const MERGE = { 'content-type': 'application/merge-patch+json' };
/** A well-formed garden id that no garden has. */
export const MISSING_GID = 'gdn_000000000000000000000000';

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

/** GET /gardens/{gid}, as it comes back. */
export const getGarden = (c: Client, gid: string) => c.request({ method: 'GET', url: `/gardens/${gid}` });
/** PATCH /gardens/{gid} with this payload, as it comes back. */
export const patchGarden = (
  c: Client,
  gid: string,
  payload: unknown,
  headers: Record<string, string> = JSON_TYPE,
) => c.request({ method: 'PATCH', url: `/gardens/${gid}`, headers, payload: asBody(payload) });
/** DELETE /gardens/{gid}, as it comes back. */
export const deleteGarden = (c: Client, gid: string) =>
  c.request({ method: 'DELETE', url: `/gardens/${gid}` });
/** GET /gardens/{gid}/members, as it comes back. */
export const members = (c: Client, gid: string) =>
  c.request({ method: 'GET', url: `/gardens/${gid}/members` });
/** A user name as it stands in a path. */
export const enc = encodeURIComponent;

const GARDEN_KEYS = ['createdAt', 'home', 'id', 'name', 'role'];

/** Asserts a garden has exactly the contract's fields, each of its type. */
export function assertGardenShape(g: Garden): void {
  assert.deepEqual(Object.keys(g).sort(), GARDEN_KEYS);
  assert.match(g.id, /^gdn_/);
  assert.equal(typeof g.name, 'string');
  assert.equal(typeof g.home, 'boolean');
  assert.ok(['viewer', 'editor', 'owner'].includes(g.role));
  assert.equal(new Date(g.createdAt).toISOString(), g.createdAt, 'createdAt is an ISO 8601 timestamp');
}

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

/** An owner, an editor, a viewer and a non-member of a new garden (made in that order), as clients. */
export async function clientTeam(h: Pick<Harness, 'user'>) {
  const o = await h.user();
  const e = await h.user();
  const v = await h.user();
  const n = await h.user();
  const g = await newGarden(o);
  await share(o, g, e.user, 'editor');
  await share(o, g, v.user, 'viewer');
  return { o, e, v, n, g };
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

/** Renames plant `id` whatever its version (PATCH with If-Match: *): the answer, unchecked. */
export const rename = (c: Client, id: number, name: string) =>
  c.request({
    method: 'PATCH',
    url: `/plants/${id}`,
    headers: { ...MERGE, 'if-match': '*' },
    payload: JSON.stringify({ name }),
  });

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

// ---- through the store ----

/** A user no other test knows. */
export const user = (what = 'user') => `${what}-${randomUUID()}`;

/** The id of the user's home garden: the one it has, or a new one (`id`) made as the service makes it. */
export const home = async (store: Store, u: string, id = gardenId(randomBytes)) =>
  (await store.homeGarden(u, { id, name: 'Home', at: new Date() })).id;

/** A new garden owned by `owner`, with these members besides (added in order). */
export async function garden(
  store: Store,
  owner: string,
  members: [string, Role][] = [],
  name = 'Shared',
): Promise<string> {
  const made = await store.createGarden({ id: gardenId(randomBytes), name, owner, at: new Date() });
  assert.ok('ok' in made, `createGarden: ${JSON.stringify(made)}`);
  for (const [u, role] of members) {
    const r = await store.putMember(made.ok.id, owner, u, role, new Date());
    assert.ok('ok' in r, `putMember: ${JSON.stringify(r)}`);
  }
  return made.ok.id;
}

/** A new garden `g` of a new owner `o`, with a new editor `e` and a new viewer `v` (added in that order). */
export async function team(store: Store): Promise<{ o: string; e: string; v: string; g: string }> {
  const o = user();
  const e = user();
  const v = user();
  const g = await garden(store, o, [
    [e, 'editor'],
    [v, 'viewer'],
  ]);
  return { o, e, v, g };
}

/** A plant `owner` makes in `g` (with its plant.created event at `at`, when given). */
export async function plant(
  store: Store,
  owner: string,
  g: string,
  fields: { id?: number; name?: string; tag?: string | null; at?: Date; admin?: boolean } = {},
): Promise<VersionedPlant> {
  const r = await store.createPlant(
    {
      id: fields.id ?? null,
      owner,
      garden: g,
      name: fields.name ?? 'Fern',
      tag: fields.tag ?? null,
      ...(fields.admin ? { admin: true } : {}),
    },
    undefined,
    fields.at ? { at: fields.at } : undefined,
  );
  assert.ok('ok' in r, `createPlant: ${JSON.stringify(r)}`);
  return r.ok;
}

/**
 * An enabled endpoint of `owner`'s (admin: made with plants:admin, by the token `adminTokenId` and
 * until `adminUntil` when given), stored.
 */
export async function endpoint(
  store: Store,
  owner: string,
  opts: {
    admin?: boolean;
    adminTokenId?: string;
    adminUntil?: Date;
    events?: EventType[];
    status?: 'enabled' | 'disabled';
    at?: Date;
  } = {},
): Promise<EndpointRecord> {
  const e: EndpointRecord = {
    id: `we_${randomUUID()}`,
    owner,
    admin: opts.admin ?? false,
    adminTokenId: opts.adminTokenId ?? null,
    adminUntil: opts.adminUntil ?? null,
    url: 'https://example.com/hook',
    events: opts.events ?? ['plant.created', 'plant.updated', 'plant.deleted'],
    description: null,
    secret: 'whsec_test',
    previousSecret: null,
    previousSecretUntil: null,
    status: opts.status ?? 'enabled',
    disabledReason: opts.status === 'disabled' ? 'test' : null,
    createdAt: opts.at ?? new Date(),
    lastSuccessAt: null,
    failingSince: null,
  };
  assert.deepEqual(await store.insertEndpoint(e), { ok: true });
  return e;
}

// Every delivery due by `now` and every event of the endpoints' logs, leased to `leaseOwner` for a
// minute, once every event committed so far is readable.
const claimEverything = async (store: Store, now: Date, leaseOwner: string) => {
  await logSettled(store);
  return store.claimDeliveries({
    now,
    leaseMs: 60_000,
    leaseOwner,
    limit: 1000,
    perEndpoint: 1000,
    skipEndpoints: [],
  });
};

/**
 * Every delivery due by `now` (far ahead by default), and every event of the endpoints' logs,
 * leased to a test dispatcher (`leaseOwner`: a new one by default) for a minute.
 */
export const claimAll = async (
  store: Store,
  now = new Date(Date.now() + 365 * 86_400_000),
  leaseOwner = `test-${randomUUID()}`,
) => (await claimEverything(store, now, leaseOwner)).jobs;

/**
 * Claims as claimAll does, then moves each endpoint whose log it took on past what it took and ends
 * its lease, recording no attempt: as a dispatcher that sent all of it. Later claims get only what
 * comes after.
 */
export const takeAll = async (store: Store, now = new Date(Date.now() + 365 * 86_400_000)) => {
  const leaseOwner = `test-${randomUUID()}`;
  const claim = await claimEverything(store, now, leaseOwner);
  await store.finishDeliveries(
    [],
    Object.entries(claim.windows).map(([endpointId, position]) => ({
      endpointId,
      leaseOwner,
      position,
      leaseUntil: null,
    })),
  );
  return claim.jobs;
};

/** A job's attempt as a receiver that answered 204 at once at `at` would leave it. */
export const acknowledged = (job: DeliveryJob, leaseOwner: string, at: Date): FinishedAttempt => ({
  deliveryId: job.id,
  leaseOwner,
  disableEndpoint: null,
  attempt: {
    deliveryId: job.id,
    endpointId: job.endpoint.id,
    eventId: job.event.id,
    eventType: job.event.type,
    attempt: job.attempts + 1,
    at,
    status: 204,
    outcome: 'succeeded',
    error: null,
    durationMs: 1,
    nextAttemptAt: null,
  },
});

/** The roles of a garden's members, by user. */
export const rolesIn = async (store: Store, g: string) =>
  Object.fromEntries((await store.listMembers(g)).map((m) => [m.user, m.role]));
