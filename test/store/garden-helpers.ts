import assert from 'node:assert/strict';
import { randomBytes, randomUUID } from 'node:crypto';
import { gardenId } from '../../src/gardens/id.js';
import type { EndpointRecord, EventType, Role, Store, VersionedPlant } from '../../src/store/store.js';

// What the garden contract suites share: users, gardens with members, plants and endpoints, made
// through the store itself.

/** A user no other test knows. */
export const user = (what = 'user') => `${what}-${randomUUID()}`;

/** The user's home garden, made as the service makes it when first needed. */
export const home = async (store: Store, u: string) =>
  (await store.homeGarden(u, { id: gardenId(randomBytes), name: 'Home', at: new Date() })).id;

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

/** Every delivery due by `now` (far ahead by default), leased to a test dispatcher. */
export const claimAll = (store: Store, now = new Date(Date.now() + 365 * 86_400_000)) =>
  store.claimDeliveries({
    now,
    leaseMs: 60_000,
    leaseOwner: `test-${randomUUID()}`,
    limit: 1000,
    perEndpoint: 1000,
    skipEndpoints: [],
  });

/** The roles of a garden's members, by user. */
export const rolesIn = async (store: Store, g: string) =>
  Object.fromEntries((await store.listMembers(g)).map((m) => [m.user, m.role]));
