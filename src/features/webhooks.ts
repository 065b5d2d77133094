import type { FastifyPluginAsync } from 'fastify';
import type { Resolver } from '../events/outbound.js';
import { WebhookService } from '../events/webhooks.js';
import type { AuthDeps } from '../http/auth.js';
import { webhookRoutes } from '../routes/webhooks.js';
import type { Store } from '../store/store.js';
import type { Tag } from './docs.js';

export const WEBHOOK_TAGS: Tag[] = [
  {
    name: 'webhooks',
    description: 'Webhook endpoints: signed deliveries (Standard Webhooks) of plant events',
  },
];

export interface WebhooksOptions {
  store: Store;
  auth: AuthDeps;
  /** Whether endpoints may be private addresses (loopback, LAN). */
  allowPrivate: boolean;
  /** Resolves endpoint host names (tests map names to addresses of their own). */
  resolver?: Resolver | undefined;
}

/** Webhook endpoints: /webhooks; the runtime's dispatcher sends what they are due. */
export function webhooksFeature(opts: WebhooksOptions): FastifyPluginAsync {
  const service = new WebhookService(opts.store, {
    allowPrivate: opts.allowPrivate,
    ...(opts.resolver ? { resolver: opts.resolver } : {}),
  });
  return webhookRoutes(service, opts.auth);
}
