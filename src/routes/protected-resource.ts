import type { FastifyInstance, FastifyRequest } from 'fastify';
import { SCOPES } from '../schemas/token.js';

const PATH = '/.well-known/oauth-protected-resource';

/**
 * This service's own URL as the client reached it (behind a proxy, with --trust-proxy, as the
 * proxy says). RFC 9728 3.3: `resource` must equal the URL the metadata path was appended to.
 * A Host header with anything but host-name characters is cut down to them: it lands in a
 * quoted challenge parameter.
 */
export function origin(request: FastifyRequest): string {
  const host = request.host.replace(/[^A-Za-z0-9.:[\]-]/g, '');
  return `${request.protocol}://${host}`;
}

/** The metadata URL that a 401 challenge names in `resource_metadata`. */
export const resourceMetadataUrl = (request: FastifyRequest): string => `${origin(request)}${PATH}`;

const Metadata = {
  type: 'object',
  properties: {
    resource: { type: 'string', format: 'uri' },
    authorization_servers: { type: 'array', items: { type: 'string', format: 'uri' } },
    scopes_supported: { type: 'array', items: { type: 'string' } },
    bearer_methods_supported: { type: 'array', items: { type: 'string' } },
  },
  required: ['resource', 'authorization_servers', 'scopes_supported', 'bearer_methods_supported'],
} as const;

/** RFC 9728 protected-resource metadata: where a client gets tokens for this API. No token needed. */
export function protectedResourceRoutes(issuer: string) {
  return async (app: FastifyInstance) => {
    app.get(
      PATH,
      {
        schema: {
          operationId: 'protectedResourceMetadata',
          summary:
            'OAuth 2.0 protected-resource metadata (RFC 9728): the issuer whose JWTs this service accepts',
          description:
            'Where a client gets tokens for this API: the issuer whose JWTs it accepts, the scopes it knows, and that tokens go in the Authorization header. Every 401 names this document in `resource_metadata`.',
          tags: ['operations'],
          security: [],
          response: { 200: Metadata },
        },
      },
      async (request) => ({
        resource: origin(request),
        authorization_servers: [issuer],
        scopes_supported: [...SCOPES],
        bearer_methods_supported: ['header'],
      }),
    );
  };
}
