import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { PlantStore, type PlantStoreError, verifyWebhook } from '../../src/client/index.js';
import { type Harness, harness } from '../helpers/app.js';
import { ENGINES } from '../helpers/engines.js';
import { plantOf } from '../helpers/events.js';
import { startReceiver } from '../helpers/receiver.js';
import { until } from '../helpers/wait.js';

// store.webhooks and store.tokens against a real listening service, as the web console uses them.

describe('the typed client: webhooks and tokens', { timeout: 60_000 }, () => {
  let h: Harness;
  let base: string;
  before(async () => {
    h = await harness(ENGINES[0]!, { webhookAllowPrivate: true }, { dispatcher: { pollMs: 50 } });
    base = await h.app.listen({ port: 0, host: '127.0.0.1' });
  });
  after(() => h?.close());

  it('webhooks: create (secret once), list without secrets, deliveries, rotate, recover, delete', async () => {
    const receiver = await startReceiver();
    try {
      const store = new PlantStore({ url: base, token: (await h.user()).token });
      const made = await store.webhooks.create({ url: receiver.url, description: 'test' });
      assert.match(made.secret, /^whsec_/);
      const listed = await store.webhooks.list();
      assert.deepEqual(
        listed.map((e) => e.id),
        [made.id],
      );
      assert.ok(!('secret' in listed[0]!), 'a list never carries a secret');

      await store.create({ name: 'Delivered fern' });
      const [got] = await receiver.waitFor(1);
      const event = await verifyWebhook(made.secret, got!.headers as Record<string, string>, got!.body);
      assert.equal(plantOf(event.data).name, 'Delivered fern');
      const page = await until('the attempt to be recorded', async () => {
        const p = await store.webhooks.deliveries(made.id);
        return p.attempts.length > 0 && p;
      });
      assert.equal(page.attempts[0]?.outcome, 'succeeded');
      assert.equal(page.attempts[0]?.status, 200);
      assert.equal(page.next, null);

      await store.create({ name: 'Second' });
      await receiver.waitFor(2);
      const two = await until('a second attempt, on a page of its own', async () => {
        const p = await store.webhooks.deliveries(made.id, { limit: 1 });
        return p.next !== null && p;
      });
      assert.equal(two.attempts.length, 1);
      assert.ok(two.next, 'a next page through Link');
      const rest = await store.webhooks.deliveries(made.id, { next: two.next });
      assert.ok(rest.attempts.length >= 1);

      const rotated = await store.webhooks.rotateSecret(made.id);
      assert.notEqual(rotated.secret, made.secret);
      assert.equal(typeof (await store.webhooks.recover(made.id, new Date(Date.now() - 60_000))), 'number');
      await store.webhooks.delete(made.id);
      await assert.rejects(store.webhooks.get(made.id), (e: PlantStoreError) => e.status === 404);
    } finally {
      await receiver.close();
    }
  });

  it('tokens: create (secret once), page newest first through Link, get, revoke', async () => {
    const me = await h.user(['plants:read', 'plants:write', 'tokens:manage']);
    const store = new PlantStore({ url: base, token: me.token });
    const a = await store.tokens.create({ name: 'first', scopes: ['plants:read'] });
    const b = await store.tokens.create({ name: 'second', expiresIn: '1d' });
    assert.match(a.token, /^pst_/);
    assert.deepEqual(b.scopes, ['plants:read', 'plants:write']);
    const first = await store.tokens.list({ limit: 2 });
    assert.deepEqual(
      first.tokens.map((t) => t.name),
      ['second', 'first'],
    );
    assert.ok(
      first.tokens.every((t) => !('token' in t)),
      'never a secret in a list',
    );
    assert.ok(first.next);
    const second = await store.tokens.list({ next: first.next });
    assert.deepEqual(
      second.tokens.map((t) => t.id),
      [me.tokenId],
    );
    await store.tokens.revoke(a.id);
    assert.equal((await store.tokens.get(a.id)).status, 'revoked');
    await assert.rejects(
      store.tokens.create({ scopes: ['plants:admin'] }),
      (e: PlantStoreError) => e.status === 403 && e.code === 'scope_not_held',
    );
  });
});
