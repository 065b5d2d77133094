import type {} from '@fastify/swagger';
import type { FastifyPluginAsync } from 'fastify';
import type { Metrics } from '../http/metrics.js';
import { HealthService } from '../ops/health.js';
import { OpenApiBytes } from '../ops/openapi-bytes.js';
import { opsRoutes } from '../routes/ops.js';
import type { Store } from '../store/store.js';
import type { Tag } from './docs.js';

export const OPS_TAGS: Tag[] = [
  { name: 'operations', description: 'Health, readiness, metrics and this description; no token' },
];

/** Operations endpoints, without a token: health, readiness, metrics and /openapi.json. */
export function opsFeature(store: Store, schema: number, metrics: Metrics | null): FastifyPluginAsync {
  return async (app) => {
    const document = new OpenApiBytes(() => app.swagger());
    await opsRoutes(new HealthService(store, schema), metrics, document)(app);
  };
}
