import type {} from '@fastify/swagger';
import type { FastifyInstance } from 'fastify';
import type { Metrics } from '../http/metrics.js';
import { errorResponses } from '../schemas/error.js';
import type { Store } from '../store/store.js';

const Status = {
  type: 'object',
  properties: { status: { type: 'string' } },
  required: ['status'],
} as const;

/** Operations endpoints: no token, outside the plant API. */
export function opsRoutes(store: Store, metrics: Metrics | null) {
  return async (app: FastifyInstance) => {
    app.get(
      '/healthz',
      {
        schema: {
          summary: 'Liveness: 200 while the process is up',
          tags: ['operations'],
          response: { 200: Status },
        },
      },
      async () => ({ status: 'ok' }),
    );

    app.get(
      '/readyz',
      {
        schema: {
          summary: 'Readiness: 200 when the store answers, 503 otherwise',
          tags: ['operations'],
          response: { 200: Status, ...errorResponses(503) },
        },
      },
      async () => {
        await store.ping();
        return { status: 'ready' };
      },
    );

    if (metrics) {
      app.get(
        '/metrics',
        {
          schema: {
            summary: 'Prometheus metrics',
            tags: ['operations'],
            produces: ['text/plain'],
            response: { 200: { type: 'string', description: 'Prometheus text format' } },
          },
        },
        async (_request, reply) => {
          reply.type(metrics.registry.contentType);
          return metrics.registry.metrics();
        },
      );
    }

    app.get(
      '/openapi.json',
      {
        schema: {
          summary: 'This OpenAPI 3.1 document',
          tags: ['operations'],
          response: { 200: { type: 'object', additionalProperties: true } },
        },
      },
      async () => app.swagger(),
    );
  };
}
