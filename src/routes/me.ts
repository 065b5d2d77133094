import type {} from '@fastify/swagger';
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { type AuthDeps, authenticate } from '../http/auth.js';
import { methodNotAllowed } from '../http/route-guards.js';
import type { Caller } from '../identity/caller.js';
import { errorResponses, SUCCESS_HEADERS } from '../schemas/error.js';
import { SCOPES } from '../schemas/token.js';

const Me = Type.Object(
  {
    user: Type.String({ description: 'The user the credential acts as.', examples: ['alice'] }),
    scopes: Type.Array(Type.Union(SCOPES.map((s) => Type.Literal(s))), {
      description: "The credential's scopes, as an array.",
      examples: [['plants:read', 'plants:write']],
    }),
    kind: Type.Union([Type.Literal('token'), Type.Literal('jwt')], {
      description: '`token`: a built-in token; `jwt`: an access token from the identity provider.',
    }),
    tokenId: Type.Optional(
      Type.String({
        description: "A built-in token's id (never its secret).",
        examples: ['tok_Xq3v9LmR0aBc'],
      }),
    ),
    expiresAt: Type.Optional(
      Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
        description: "When it stops working: a built-in token's expiry (null: never), a JWT's `exp`.",
      }),
    ),
  },
  { additionalProperties: false, title: 'Me' },
);

/** What GET /me answers for a caller (contract 3.3). */
export function meOf(caller: Caller) {
  const scopes = [...caller.scopes].sort();
  const expiresAt = caller.expiresAt === null ? null : caller.expiresAt.toISOString();
  return caller.kind === 'jwt'
    ? { user: caller.user, scopes, kind: caller.kind, expiresAt }
    : { user: caller.user, scopes, kind: caller.kind, tokenId: caller.tokenId, expiresAt };
}

/** GET /me: who the credential is, for any valid token (no scope needed). */
export function meRoutes(auth: AuthDeps) {
  return async (app: FastifyInstance) => {
    app.get(
      '/me',
      {
        onRequest: authenticate(auth, null),
        schema: {
          operationId: 'getMe',
          summary: 'Who am I',
          description:
            'The user, scopes and kind of the credential sent: any valid token, built-in or JWT, whatever its scopes. A built-in token also shows its id and expiry.',
          tags: ['identity'],
          security: auth.security,
          response: {
            200: { ...Me, description: 'The caller.', headers: SUCCESS_HEADERS },
            ...errorResponses(401, 429, 500, 503),
          },
        },
      },
      async (request) => meOf(request.caller!),
    );
    methodNotAllowed(app, '/me', ['GET']);
  };
}
