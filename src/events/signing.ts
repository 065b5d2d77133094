import { createHmac, randomBytes } from 'node:crypto';

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
    .map((secret) => {
      const key = Buffer.from(secret.startsWith(PREFIX) ? secret.slice(PREFIX.length) : secret, 'base64');
      return `v1,${createHmac('sha256', key).update(content).digest('base64')}`;
    })
    .join(' ');
}
