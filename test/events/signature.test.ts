import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { isWebhookSecret, newWebhookSecret, signWebhook } from '../../src/events/signing.js';

describe('Standard Webhooks signatures', () => {
  it('matches the specification’s published test vector', () => {
    const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
    const sig = signWebhook([secret], 'msg_p5jXN8AQM9LWM0D4loKWxJek', 1614265330, '{"test": 2432232314}');
    assert.equal(sig, 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=');
  });

  it('agrees with the official standardwebhooks library, one secret or two', () => {
    const a = newWebhookSecret();
    const b = newWebhookSecret();
    assert.ok(isWebhookSecret(a) && isWebhookSecret(b));
    const body = JSON.stringify({
      type: 'plant.created',
      timestamp: new Date().toISOString(),
      data: { id: 1, name: 'é' },
    });
    const ts = Math.floor(Date.now() / 1000);
    assert.equal(
      signWebhook([a], 'evt_x', ts, body),
      new Webhook(a).sign('evt_x', new Date(ts * 1000), body),
    );
    const headers = {
      'webhook-id': 'evt_x',
      'webhook-timestamp': String(ts),
      'webhook-signature': signWebhook([a, b], 'evt_x', ts, body),
    };
    assert.deepEqual(new Webhook(a).verify(body, headers), JSON.parse(body));
    assert.deepEqual(new Webhook(b).verify(body, headers), JSON.parse(body));
    assert.throws(() => new Webhook(newWebhookSecret()).verify(body, headers));
    assert.throws(() => new Webhook(a).verify(`${body} `, headers));
  });

  it('secrets are whsec_ and 32 random bytes in base64, never repeated', () => {
    const seen = new Set(Array.from({ length: 100 }, newWebhookSecret));
    assert.equal(seen.size, 100);
    for (const s of seen) assert.equal(Buffer.from(s.slice(6), 'base64').length, 32);
  });
});
