import type {} from '@fastify/swagger';
import type { FastifyInstance } from 'fastify';
import { noneMatch } from '../http/conditional.js';
import type { Metrics } from '../http/metrics.js';
import { SHED, SHED_RESPONSE } from '../http/pressure.js';
import type { HealthService } from '../ops/health.js';
import type { OpenApiBytes } from '../ops/openapi-bytes.js';
import { errorResponses, REQUEST_ID } from '../schemas/error.js';
import { VERSION } from '../version.js';
import { origin } from './protected-resource.js';

// A leaf, drawn in a 16×16 box.
const FAVICON = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><title>plantstore</title>
<path fill="#2e7d32" d="M13.5 2.5C7 2.5 3 6 3 10.5c0 1.2.3 2.2.8 3L2.5 15l1 .5 1.3-1.4c.9.6 2 .9 3.2.9 4.4 0 5.5-5 5.5-12.5z"/>
<path fill="none" stroke="#c8e6c9" stroke-width=".8" d="M4.5 13.5C6.5 10 9 7.5 12 5"/></svg>
`;

const Status = {
  type: 'object',
  properties: { status: { type: 'string' } },
  required: ['status'],
} as const;

const Health = {
  type: 'object',
  properties: {
    status: { type: 'string', description: '`ok` while the process is up.' },
    version: { type: 'string', description: 'The release this process runs (semver, from package.json).' },
    schema: {
      type: 'integer',
      description:
        "The store's schema version (its newest migration), as last read: at start, then at most once a second as this is asked.",
    },
  },
  required: ['status', 'version', 'schema'],
} as const;

const ETAG = {
  etag: {
    type: 'string',
    description: 'This document as sent to this origin; send it back in If-None-Match.',
  },
};

/**
 * Operations endpoints: no token, outside the plant API. /healthz and /readyz are never shed
 * (http/pressure.ts); the others answer 503 `overloaded` while the event loop is behind.
 */
export function opsRoutes(health: HealthService, metrics: Metrics | null, document: OpenApiBytes) {
  return async (app: FastifyInstance) => {
    app.get(
      '/healthz',
      {
        schema: {
          operationId: 'health',
          summary: 'Liveness: 200 while the process is up, with its release and schema versions',
          description:
            "200 while the process is up, with the release it runs and the store's schema version; it never waits on the store. 503 `shutting_down` once it has been told to stop (SIGTERM), as every path then answers.",
          tags: ['operations'],
          security: [],
          response: { 200: { ...Health, description: 'Up.', headers: REQUEST_ID }, ...errorResponses(503) },
        },
      },
      async () => ({ status: 'ok', version: VERSION, schema: health.schema() }),
    );

    app.get(
      '/readyz',
      {
        schema: {
          operationId: 'ready',
          summary: 'Readiness: 200 when the store answers, 503 otherwise',
          description:
            '200 when the store answers a query; 503 otherwise (`store_unavailable`, or `shutting_down` from the moment it is told to stop), so a load balancer sends nothing here meanwhile.',
          tags: ['operations'],
          security: [],
          response: {
            200: { ...Status, description: 'Ready.', headers: REQUEST_ID },
            ...errorResponses(503),
          },
        },
      },
      async () => {
        await health.ready();
        return { status: 'ready' };
      },
    );

    if (metrics) {
      app.get(
        '/metrics',
        {
          ...SHED,
          schema: {
            operationId: 'metrics',
            summary: 'Prometheus metrics',
            description:
              'Prometheus text: HTTP requests and latencies by route and status, store operations, authentication failures, webhook attempts, open event streams and process metrics.',
            tags: ['operations'],
            security: [],
            produces: ['text/plain'],
            response: {
              200: { type: 'string', description: 'Prometheus text format', headers: REQUEST_ID },
              ...SHED_RESPONSE,
            },
          },
        },
        async (_request, reply) => {
          reply.type(metrics.registry.contentType);
          return metrics.scrape();
        },
      );
    }

    // plantstore's icon, for /docs and for browsers that ask /favicon.ico by themselves.
    for (const url of ['/favicon.svg', '/favicon.ico']) {
      app.get(url, { ...SHED, schema: { hide: true } }, async (_request, reply) =>
        reply.type('image/svg+xml').header('cache-control', 'public, max-age=86400').send(FAVICON),
      );
    }

    app.get(
      '/openapi.json',
      {
        ...SHED,
        schema: {
          operationId: 'openapi',
          summary: 'This OpenAPI 3.1 document',
          description:
            'This OpenAPI 3.1 document, with `servers` naming this service as the client reached it, and its `ETag`. With `If-None-Match` naming that ETag (or `*`), 304 and no body.',
          tags: ['operations'],
          security: [],
          headers: {
            type: 'object',
            properties: {
              'if-none-match': {
                type: 'string',
                description: 'An ETag the caller holds: 304 while the document is still that one.',
              },
            },
          },
          response: {
            200: {
              type: 'object',
              additionalProperties: true,
              description: 'This document.',
              headers: { ...ETAG, ...REQUEST_ID },
            },
            304: {
              type: 'null',
              description: 'Not modified: the document is still the one `If-None-Match` names; no body.',
              headers: { ...ETAG, ...REQUEST_ID },
            },
            ...SHED_RESPONSE,
          },
        },
      },
      // `servers`: this service as the client reached it, so that examples and generated clients
      // work when copied (behind a proxy, with --trust-proxy, as the proxy says). The bytes are
      // made once per origin (ops/openapi-bytes.ts), not serialized per request.
      async (request, reply) => {
        const { body, etag } = document.forOrigin(origin(request));
        reply.header('etag', etag);
        // No payload at all: Fastify then sends neither a body nor Content-Length/Type.
        if (noneMatch(request, etag)) return reply.code(304).send(undefined as unknown as null);
        return reply.type('application/json; charset=utf-8').send(body);
      },
    );
  };
}
