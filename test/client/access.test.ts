import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  can,
  capabilities,
  etagOf,
  grantableScopes,
  PlantStore,
  type Role,
  SCOPES,
  type Scope,
} from '../../src/client/index.js';
import { type Harness, harness } from '../helpers/app.js';
import { ENGINES } from '../helpers/engines.js';

// What the client tells a caller it may do (the console shows only that) must be what the service
// then allows: the same rules, checked here against the service itself.

const sqlite = ENGINES.find((e) => e.name === 'sqlite')!;
const me = (...scopes: Scope[]) => ({ user: 'ann', scopes });

describe('what the client says a caller may do', () => {
  it('plants:admin implies the plant scopes, and not tokens:manage', () => {
    assert.equal(can(me('plants:admin'), 'plants:write'), true);
    assert.equal(can(me('plants:admin'), 'tokens:manage'), false);
    assert.equal(can(me('plants:read'), 'plants:write'), false);
  });

  it('in a garden: editors write, owners also manage, an admin is an owner everywhere; all need plants:write', () => {
    const writer = me('plants:read', 'plants:write');
    const of = (role: Role | undefined, who = writer) => capabilities(who, role && { role });
    assert.deepEqual(of('viewer'), { write: false, manage: false });
    assert.deepEqual(of('editor'), { write: true, manage: false });
    assert.deepEqual(of('owner'), { write: true, manage: true });
    assert.deepEqual(of(undefined), { write: false, manage: false });
    assert.deepEqual(of('owner', me('plants:read')), { write: false, manage: false });
    assert.deepEqual(of('viewer', me('plants:admin')), { write: true, manage: true });
    assert.deepEqual(of(undefined, me('plants:admin')), { write: true, manage: true });
  });

  it('etagOf a listed plant is the ETag the service sends for that version', () => {
    assert.equal(etagOf({ version: 7 }), '"7"');
  });
});

describe('grantableScopes agrees with POST /tokens', { skip: sqlite.skip }, () => {
  let h: Harness;
  let url: string;
  before(async () => {
    h = await harness(sqlite);
    url = await h.app.listen({ port: 0, host: '127.0.0.1' });
  });
  after(() => h?.close());

  for (const held of [
    ['plants:read', 'tokens:manage'],
    ['plants:read', 'plants:write', 'tokens:manage'],
    ['plants:admin', 'tokens:manage'],
  ] as Scope[][]) {
    it(`a caller with ${held.join(' ')} may give exactly the scopes it is offered`, async () => {
      const c = await h.user(held);
      const store = new PlantStore({ url, token: c.token, retries: 0 });
      const offered = grantableScopes(await store.me());
      for (const scope of SCOPES) {
        const made = await store.tokens.create({ scopes: [scope] }).then(
          () => true,
          (err) => (err.code === 'scope_not_held' ? false : Promise.reject(err)),
        );
        assert.equal(made, offered.includes(scope), `${scope}: offered ${offered.includes(scope)}`);
      }
    });
  }
});
