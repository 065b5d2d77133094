import type {} from '@fastify/swagger';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';
import { parseDuration } from '../durations.js';
import { BadRequestError } from '../errors.js';
import { type AuthDeps, authenticate } from '../http/auth.js';
import { BODY_LIMIT, methodNotAllowed, requireIdSegment, requireJson } from '../http/route-guards.js';
import type { TokenService } from '../identity/token-service.js';
import { tokenStatus } from '../identity/tokens.js';
import { nextLink } from '../paging.js';
import { created, errorResponses, SUCCESS_HEADERS, success } from '../schemas/error.js';
import {
  TokenCreate,
  TokenCreated,
  TokenIdParam,
  TokenList,
  TokenListQuery,
  TokenView,
} from '../schemas/token.js';
import type { TokenRecord } from '../store/store.js';

const tags = ['identity'];
const iso = (d: Date | null) => (d === null ? null : d.toISOString());

/** A token as the API shows it: never its secret or its hash. */
export const tokenView = (t: TokenRecord, now = new Date()): TokenView => ({
  id: t.id,
  user: t.user,
  scopes: t.scopes,
  name: t.name,
  createdAt: t.createdAt.toISOString(),
  expiresAt: iso(t.expiresAt),
  lastUsedAt: iso(t.lastUsedAt),
  status: tokenStatus(t, now),
});

// Token metadata is a credential's description: no cache keeps any of it.
const NO_STORE = {
  'cache-control': { type: 'string', description: '`no-store`: no cache keeps this answer.' },
};

function lifetime(expiresIn: string | null | undefined): number | null {
  if (expiresIn === undefined || expiresIn === null) return null;
  const ms = parseDuration(expiresIn);
  if (ms === null) {
    const message = 'must be a whole number and s, m, h or d, at most 100 years (like 30d)';
    throw new BadRequestError('invalid_body', `expiresIn ${message}`, [{ field: '/expiresIn', message }]);
  }
  return ms;
}

/** Tokens over HTTP (contract 3.3): HTTP only; the rules live in TokenService. */
export function tokenRoutes(tokens: TokenService, auth: AuthDeps) {
  return async (root: FastifyInstance) => {
    const app = root.withTypeProvider<TypeBoxTypeProvider>();
    const security = auth.security;
    // Reads may trust a token checked a moment ago; making and revoking ask the store every time,
    // so a token revoked on another instance a moment ago makes and revokes nothing.
    const read = authenticate(auth, 'tokens:manage');
    const change = authenticate(auth, 'tokens:manage', { fresh: true });
    const headers = { ...NO_STORE, ...SUCCESS_HEADERS };
    app.addHook('onSend', (_request, reply, payload, done) => {
      reply.header('cache-control', 'no-store');
      done(null, payload);
    });

    app.post(
      '/tokens',
      {
        onRequest: [change, requireJson],
        bodyLimit: BODY_LIMIT,
        schema: {
          operationId: 'createToken',
          summary: 'Create a token',
          description:
            "Makes a built-in token and answers its secret, this once (`Cache-Control: no-store`). Needs `tokens:manage`. A token never gets more than its maker holds: only scopes the caller holds, only for the caller's own user, never outliving the caller's own expiry (each else 403 `scope_not_held`), unless the caller holds `plants:admin` (which lifts the first two).",
          tags,
          security,
          body: TokenCreate,
          response: {
            201: created(
              TokenCreated,
              'Created. The secret is in `token`; it is never shown again.',
              '/tokens/{id}',
              NO_STORE,
            ),
            ...errorResponses(400, 401, 403, 413, 415, 429, 500, 503),
          },
        },
      },
      async (request, reply) => {
        const body = request.body;
        const { record, secret } = await tokens.create(
          request.caller!,
          {
            user: body.user,
            scopes: body.scopes,
            expiresInMs: lifetime(body.expiresIn),
            name: body.name,
          },
          request.id,
        );
        reply.code(201).header('location', `/tokens/${record.id}`);
        const { lastUsedAt: _l, status: _s, ...shown } = tokenView(record);
        return { ...shown, token: secret };
      },
    );

    app.get(
      '/tokens',
      {
        onRequest: read,
        schema: {
          operationId: 'listTokens',
          summary: 'List tokens',
          description:
            "The caller's user's tokens, newest first, a page at a time (follow `Link: rel=\"next\"`); with `plants:admin`, every user's, or `user`'s. Never a secret. Needs `tokens:manage`.",
          tags,
          security,
          querystring: TokenListQuery,
          response: {
            200: success(TokenList, 'A page of tokens.', {
              link: {
                type: 'string',
                description:
                  'The next page, `</tokens?limit=…&cursor=…>; rel="next"` (with `user` repeated), when more follow.',
              },
              ...NO_STORE,
            }),
            ...errorResponses(400, 401, 403, 429, 500, 503),
          },
        },
      },
      async (request, reply) => {
        const q = request.query;
        const limit = q.limit === undefined ? 100 : Number(q.limit);
        const page = await tokens.page(request.caller!, { user: q.user, cursor: q.cursor, limit });
        const link = nextLink('/tokens', page, { user: q.user });
        if (link) reply.header('link', link);
        const now = new Date();
        return page.items.map((t) => tokenView(t, now));
      },
    );

    app.get(
      '/tokens/:id',
      {
        onRequest: [requireIdSegment, read],
        schema: {
          operationId: 'getToken',
          summary: 'Read one token',
          description:
            "One token, without its secret. Another user's token is 404 (to an admin, it is shown). Needs `tokens:manage`.",
          tags,
          security,
          params: TokenIdParam,
          response: {
            200: success(TokenView, 'The token.', NO_STORE),
            ...errorResponses(401, 403, 404, 429, 500, 503),
          },
        },
      },
      async (request) => tokenView(await tokens.get(request.caller!, request.params.id)),
    );

    app.delete(
      '/tokens/:id',
      {
        onRequest: [requireIdSegment, change],
        schema: {
          operationId: 'revokeToken',
          summary: 'Revoke a token',
          description:
            "Revokes a token (the one in use included): it stops working on every instance within 5 seconds, on this one at once. Revoking a revoked token is 204 again. Another user's token is 404 (an admin may revoke any). Needs `tokens:manage`.",
          tags,
          security,
          params: TokenIdParam,
          response: {
            204: { type: 'null', description: 'Revoked.', headers },
            ...errorResponses(401, 403, 404, 429, 500, 503),
          },
        },
      },
      async (request, reply) => {
        await tokens.revoke(request.caller!, request.params.id, request.id);
        reply.code(204);
      },
    );

    methodNotAllowed(app, '/tokens', ['GET', 'POST']);
    methodNotAllowed(app, '/tokens/:id', ['GET', 'DELETE']);
  };
}
