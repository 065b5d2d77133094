import type {} from '@fastify/swagger';
import type { FastifyInstance } from 'fastify';
import type { Metrics } from '../http/metrics.js';
import { errorResponses, REQUEST_ID } from '../schemas/error.js';
import type { Store } from '../store/store.js';
import { origin } from './protected-resource.js';

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
          operationId: 'health',
          summary: 'Liveness: 200 while the process is up',
          description: '200 while the process is up; it asks nothing of the store.',
          tags: ['operations'],
          security: [],
          response: { 200: { ...Status, description: 'Up.', headers: REQUEST_ID } },
        },
      },
      async () => ({ status: 'ok' }),
    );

    app.get(
      '/readyz',
      {
        schema: {
          operationId: 'ready',
          summary: 'Readiness: 200 when the store answers, 503 otherwise',
          description:
            '200 when the store answers a query; 503 otherwise, so a load balancer sends nothing here meanwhile.',
          tags: ['operations'],
          security: [],
          response: {
            200: { ...Status, description: 'Ready.', headers: REQUEST_ID },
            ...errorResponses(503),
          },
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
            operationId: 'metrics',
            summary: 'Prometheus metrics',
            description:
              'Prometheus text: HTTP requests and latencies by route and status, store operations, authentication failures, webhook attempts, open event streams and process metrics.',
            tags: ['operations'],
            security: [],
            produces: ['text/plain'],
            response: { 200: { type: 'string', description: 'Prometheus text format', headers: REQUEST_ID } },
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
          operationId: 'openapi',
          summary: 'This OpenAPI 3.1 document',
          description:
            'This OpenAPI 3.1 document, with `servers` naming this service as the client reached it.',
          tags: ['operations'],
          security: [],
          response: {
            200: {
              type: 'object',
              additionalProperties: true,
              description: 'This document.',
              headers: REQUEST_ID,
            },
          },
        },
      },
      // `servers`: this service as the client reached it, so that examples and generated clients
      // work when copied (behind a proxy, with --trust-proxy, as the proxy says).
      async (request) => ({ ...app.swagger(), servers: [{ url: origin(request) }] }),
    );
  };
}
