import type { FastifyPluginAsync } from 'fastify';
import type { Config } from '../config.js';
import { consoleRoutes } from '../routes/console.js';

/** The web console under /console; OpenID sign-in when a JWT issuer and a client id are configured. */
export function consoleFeature(config: Config): FastifyPluginAsync {
  return consoleRoutes({
    oidc:
      config.jwtIssuer && config.consoleClientId
        ? {
            issuer: config.jwtIssuer,
            clientId: config.consoleClientId,
            scope: config.consoleScope,
            audience: config.jwtAudience,
          }
        : null,
    trash: config.trashRetention > 0,
  });
}
