import { createHmac, createSecretKey, type KeyObject, randomBytes } from 'node:crypto';

const PREFIX = 'whsec_';

/** A Standard Webhooks secret: `whsec_` and base64 of 32 random bytes. */
export const newWebhookSecret = (): string => `${PREFIX}${randomBytes(32).toString('base64')}`;

export const isWebhookSecret = (s: string): boolean => /^whsec_[A-Za-z0-9+/]{43}=$/.test(s);

/**
 * The `webhook-signature` header (Standard Webhooks 1.0): `v1,<base64 HMAC-SHA256 of
 * "{id}.{timestamp}.{body}">` keyed with the base64-decoded secret, one per secret, space-separated.
 */
export function signWebhook(secrets: string[], id: string, timestampSeconds: number, body: string): string {
  const content = `${id}.${timestampSeconds}.${body}`;
  return secrets
    .map((secret) => `v1,${createHmac('sha256', keyOf(secret)).update(content).digest('base64')}`)
    .join(' ');
}

// Secrets as keys, made once each: importing a key costs more than the HMAC of a small event.
const keys = new Map<string, KeyObject>();
function keyOf(secret: string): KeyObject {
  let key = keys.get(secret);
  if (key === undefined) {
    if (keys.size >= 1_000) keys.clear();
    key = createSecretKey(
      Buffer.from(secret.startsWith(PREFIX) ? secret.slice(PREFIX.length) : secret, 'base64'),
    );
    keys.set(secret, key);
  }
  return key;
}
