import swagger from '@fastify/swagger';
import type { FastifyInstance, FastifyPluginAsync } from 'fastify';
import type { Config } from '../config.js';
import { docsRoutes } from '../http/docs.js';
import { documentRoute } from '../schemas/document.js';
import { ErrorBody } from '../schemas/error.js';
import { EventSchema, WEBHOOKS_DOC } from '../schemas/webhook.js';
import { VERSION } from '../version.js';

/** An OpenAPI tag: a feature's operations, grouped under one heading of the document. */
export interface Tag {
  name: string;
  description: string;
}

/**
 * The OpenAPI document of every route registered after it, with the features' tags in the order
 * given, and /docs, the reference page that reads it. Not encapsulated: the document must see
 * every feature's routes, and they must see the schemas they share (the error body, the event).
 */
export function docsFeature(config: Config, tags: Tag[]): FastifyPluginAsync {
  const plugin = async (app: FastifyInstance) => {
    app.addSchema(ErrorBody);
    app.addSchema(EventSchema);
    await app.register(swagger, {
      openapi: {
        openapi: '3.1.0',
        info: {
          title: 'plantstore',
          version: VERSION,
          description: 'A store of plants: create, list, read and delete, each with a bearer token.',
          license: { name: 'MIT', identifier: 'MIT' },
          contact: { name: 'plantstore maintainers' },
        },
        components: {
          securitySchemes: {
            bearerAuth: {
              type: 'http',
              scheme: 'bearer',
              description:
                'A built-in token: `pst_` and 43 base64url characters, from `plantstore token create`.',
            },
            ...(config.jwtIssuer
              ? {
                  jwtAuth: {
                    type: 'http',
                    scheme: 'bearer',
                    bearerFormat: 'JWT',
                    description: `A JWT access token (RFC 9068) from ${config.jwtIssuer} for the audience ${config.jwtAudience}; scopes in \`scope\` or \`scp\`.`,
                  },
                }
              : {}),
          },
        },
        tags,
      },
      refResolver: { buildLocalReference: (json, _base, _fragment, i) => String(json.$id ?? `def-${i}`) },
      transform: documentRoute,
      // OpenAPI 3.1's `webhooks`: what a registered endpoint receives, for generators and /docs.
      transformObject: (doc) =>
        ({
          ...('openapiObject' in doc ? doc.openapiObject : doc.swaggerObject),
          webhooks: WEBHOOKS_DOC,
        }) as never,
    });
    // /docs as a self-hosted service's page: it reads this service's own /openapi.json (with
    // `servers`, so its examples work when pasted), sends nothing off the machine (no agent, MCP,
    // telemetry, request proxy or registry) and offers nothing that would (no toolbar with deploy
    // and share, no developer tools, no button to Scalar's hosted client).
    docsRoutes(app, {
      url: '/openapi.json',
      pageTitle: 'plantstore API reference',
      title: 'plantstore API reference',
      favicon: '/favicon.svg',
      authentication: { preferredSecurityScheme: 'bearerAuth' },
      hideClientButton: true,
      withDefaultFonts: false,
      agent: { disabled: true },
      mcp: { disabled: true },
      telemetry: false,
      showDeveloperTools: 'never',
      showToolbar: 'never',
      externalUrls: { dashboardUrl: '', registryUrl: '', proxyUrl: '', apiBaseUrl: '' },
    });
  };
  return Object.assign(plugin, { [Symbol.for('skip-override')]: true });
}
