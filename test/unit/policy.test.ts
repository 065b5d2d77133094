// The access policy on its own: the role table, scopes, membership rules and reach, with no store.
// The engines' and services' behaviour under it is proven by the route and store suites.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  allows,
  endpointReach,
  endpointSees,
  grantable,
  grantableBy,
  holds,
  leastRole,
  MAX_MEMBERS_PER_GARDEN,
  MAX_MEMBERSHIPS_PER_USER,
  mayCreateGarden,
  mayDelete,
  mayPutMember,
  mayRemoveMember,
  mayRename,
  reachHolds,
  roleOf,
  rolesFor,
  sees,
} from '../../src/access/policy.js';

test('roles: viewers read, editors also write, owners also manage', () => {
  assert.deepEqual(rolesFor('read'), ['viewer', 'editor', 'owner']);
  assert.deepEqual(rolesFor('write'), ['editor', 'owner']);
  assert.deepEqual(rolesFor('manage'), ['owner']);
  assert.equal(allows(null, 'read'), false);
  assert.equal(allows(undefined, 'read'), false);
  assert.equal(leastRole('write'), 'editor');
  assert.equal(roleOf(null, null), 'owner');
  assert.equal(roleOf('ann', null), null);
  assert.equal(roleOf('ann', 'viewer'), 'viewer');
});

test('scopes: plants:admin implies the plant scopes and nothing else; a token grants what its maker holds', () => {
  assert.equal(holds(['plants:admin'], 'plants:write'), true);
  assert.equal(holds(new Set(['plants:admin']), 'plants:read'), true);
  assert.equal(holds(['plants:admin'], 'tokens:manage'), false);
  assert.equal(holds(['plants:read'], 'plants:write'), false);
  assert.deepEqual(grantable(['plants:admin', 'plants:read']), ['plants:read', 'plants:admin']);
  assert.deepEqual(grantableBy(['plants:admin']), [
    'plants:read',
    'plants:write',
    'plants:admin',
    'tokens:manage',
  ]);
  assert.deepEqual(grantableBy(['plants:read', 'tokens:manage']), ['plants:read', 'tokens:manage']);
});

test('garden writes: missing hides a garden from non-members; owners manage; home gardens and last owners are kept', () => {
  const owner = { homeUser: null, role: 'owner' as const };
  const home = { homeUser: 'ann', role: 'owner' as const };
  const editor = { homeUser: null, role: 'editor' as const };
  assert.equal(mayRename(null), 'missing');
  assert.equal(mayRename({ homeUser: null, role: null }), 'missing');
  assert.equal(mayRename(editor), 'forbidden');
  assert.equal(mayRename(owner), null);
  assert.equal(mayDelete(home, false), 'home_garden');
  assert.equal(mayDelete(owner, true), 'garden_not_empty');
  assert.equal(mayDelete(owner, false), null);
  assert.equal(mayDelete(editor, false), 'forbidden');

  const m = { was: null, owners: 1, members: 1, userGardens: 1 };
  assert.equal(mayPutMember(owner, 'bob', 'viewer', m), null);
  assert.equal(mayPutMember(editor, 'bob', 'viewer', m), 'forbidden');
  assert.equal(
    mayPutMember(owner, 'bob', 'viewer', { ...m, userGardens: MAX_MEMBERSHIPS_PER_USER }),
    'too_many_gardens',
  );
  assert.equal(
    mayPutMember(owner, 'bob', 'viewer', { ...m, members: MAX_MEMBERS_PER_GARDEN }),
    'too_many_members',
  );
  assert.equal(mayPutMember(owner, 'bob', 'owner', { ...m, was: 'owner' }), null, 'the same role: no change');
  assert.equal(mayPutMember(home, 'ann', 'viewer', { ...m, was: 'owner', owners: 2 }), 'home_garden');
  assert.equal(mayPutMember(owner, 'bob', 'viewer', { ...m, was: 'owner', owners: 1 }), 'last_owner');
  assert.equal(mayPutMember(owner, 'bob', 'viewer', { ...m, was: 'owner', owners: 2 }), null);

  assert.equal(
    mayRemoveMember(editor, 'bob', 'bob', { was: 'editor', owners: 1 }),
    null,
    'a member may leave',
  );
  assert.equal(mayRemoveMember(editor, 'bob', 'cat', { was: 'viewer', owners: 1 }), 'forbidden');
  assert.equal(mayRemoveMember(owner, 'ann', 'cat', { was: null, owners: 1 }), 'no_member');
  assert.equal(mayRemoveMember(home, 'ann', 'ann', { was: 'owner', owners: 2 }), 'home_garden');
  assert.equal(mayRemoveMember(owner, 'ann', 'ann', { was: 'owner', owners: 1 }), 'last_owner');
  assert.equal(
    mayRemoveMember({ homeUser: null, role: null }, 'x', 'x', { was: null, owners: 0 }),
    'missing',
  );

  assert.equal(mayCreateGarden(99, 999), null);
  assert.equal(mayCreateGarden(100, 1), 'too_many_gardens');
  assert.equal(mayCreateGarden(1, 1000), 'too_many_gardens');
});

test('visibility: members see their gardens, administrators every garden, endpoints by reach or membership', () => {
  assert.equal(sees(null, 'gdn_a'), true);
  assert.equal(sees(['gdn_a'], 'gdn_a'), true);
  assert.equal(sees(new Set(['gdn_a']), 'gdn_b'), false);

  const at = new Date(1_000_000);
  const token = endpointReach({ scopes: ['plants:admin'], kind: 'token', tokenId: 'tok_1', expiresAt: null });
  assert.deepEqual(token, { admin: true, adminTokenId: 'tok_1', adminUntil: null });
  assert.equal(reachHolds(token, at, { revoked: false, expiresAt: null }), true);
  assert.equal(reachHolds(token, at, { revoked: true, expiresAt: null }), false);
  assert.equal(reachHolds(token, at, { revoked: false, expiresAt: new Date(at.getTime() - 1) }), false);
  assert.equal(reachHolds(token, at, null), false, 'a deleted token gives no reach');
  const unbounded = endpointReach({
    scopes: ['plants:admin'],
    kind: 'jwt',
    tokenId: 'jwt:ann',
    expiresAt: null,
  });
  assert.equal(unbounded.admin, false, 'a JWT without exp gives no admin reach');
  const jwt = endpointReach({ scopes: ['plants:admin'], kind: 'jwt', tokenId: 'jwt:ann', expiresAt: at });
  assert.equal(reachHolds(jwt, new Date(at.getTime() - 1), null), true);
  assert.equal(reachHolds(jwt, at, null), false);
  const user = endpointReach({ scopes: ['plants:write'], kind: 'token', tokenId: 'tok_2', expiresAt: null });
  assert.deepEqual(user, { admin: false, adminTokenId: null, adminUntil: null });

  assert.equal(endpointSees(true, [], 'gdn_a'), true);
  assert.equal(endpointSees(false, ['gdn_a'], 'gdn_a'), true);
  assert.equal(endpointSees(false, ['gdn_a'], 'gdn_b'), false);
});
