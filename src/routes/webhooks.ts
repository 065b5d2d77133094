import type {} from '@fastify/swagger';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import type { WebhookService } from '../events/webhooks.js';
import { type AuthDeps, authenticate } from '../http/auth.js';
import { BODY_LIMIT, methodNotAllowed, requireIdSegment, requireJson } from '../http/route-guards.js';
import { nextLink } from '../paging.js';
import { created, errorResponses, SUCCESS_HEADERS, success } from '../schemas/error.js';
import {
  AttemptList,
  AttemptsQuery,
  RecoverBody,
  WebhookCreate,
  WebhookIdParam,
  WebhookList,
  WebhookWithSecret,
} from '../schemas/webhook.js';
import type { AttemptRecord, EndpointRecord } from '../store/store.js';

const tags = ['webhooks'];

function view(e: EndpointRecord) {
  return {
    id: e.id,
    url: e.url,
    events: e.events,
    description: e.description,
    status: e.status,
    ...(e.disabledReason ? { disabledReason: e.disabledReason } : {}),
    createdAt: e.createdAt.toISOString(),
  };
}
const withSecret = (e: EndpointRecord) => ({ ...view(e), secret: e.secret });

const attemptView = (a: AttemptRecord) => ({
  id: a.id,
  eventId: a.eventId,
  eventType: a.eventType,
  attempt: a.attempt,
  timestamp: a.at.toISOString(),
  status: a.status,
  outcome: a.outcome,
  ...(a.error ? { error: a.error } : {}),
  durationMs: a.durationMs,
  ...(a.nextAttemptAt ? { nextAttemptAt: a.nextAttemptAt.toISOString() } : {}),
});

/** The webhook endpoints API (CONTRACT.md section 8): HTTP only; the rules live in WebhookService. */
export function webhookRoutes(service: WebhookService, auth: AuthDeps) {
  return async (root: FastifyInstance) => {
    const app = root.withTypeProvider<TypeBoxTypeProvider>();
    const read = authenticate(auth, 'plants:read');
    const write = authenticate(auth, 'plants:write');
    const security = auth.security;
    const one = { onRequest: [requireIdSegment, read] };

    app.post(
      '/webhooks',
      {
        onRequest: [write, requireJson],
        bodyLimit: BODY_LIMIT,
        schema: {
          operationId: 'createWebhook',
          summary: 'Register a webhook endpoint',
          description:
            "Registers an endpoint that receives the caller's plant events as signed Standard Webhooks deliveries; registered with `plants:admin`, every user's, for as long as that token is valid (once it is revoked or expires, a JWT at its `exp`, only the caller's). The answer carries the signing secret. A URL that names or resolves to a loopback, private, link-local, CGNAT, multicast or unspecified address is refused (400 `invalid_webhook_url`; a host name is resolved now and again at every delivery), as is one whose host name does not resolve (unless the service allows private addresses). A user has at most 20 endpoints: one more is 409 `too_many_webhooks`.",
          tags,
          security,
          body: WebhookCreate,
          response: {
            201: created(WebhookWithSecret, 'Created; `Location: /webhooks/{id}`.', '/webhooks/{id}'),
            ...errorResponses(400, 401, 403, 409, 413, 415, 429, 500, 503),
          },
        },
      },
      async (request, reply) => {
        const e = await service.create(request.caller!, request.body);
        reply.code(201).header('location', `/webhooks/${e.id}`);
        return withSecret(e);
      },
    );

    app.get(
      '/webhooks',
      {
        onRequest: read,
        schema: {
          operationId: 'listWebhooks',
          summary: "List the caller's webhook endpoints (everyone's for plants:admin)",
          description:
            "The caller's endpoints (everyone's for `plants:admin`), oldest first, without their secrets.",
          tags,
          security,
          response: {
            200: success(WebhookList, 'The endpoints.'),
            ...errorResponses(401, 403, 429, 500, 503),
          },
        },
      },
      async (request) => (await service.list(request.caller!)).map((e) => view(e)),
    );

    app.get(
      '/webhooks/:id',
      {
        ...one,
        schema: {
          operationId: 'getWebhook',
          summary: 'Read one webhook endpoint, its secret included',
          description: "One endpoint with its secret; another user's answers 404.",
          tags,
          security,
          params: WebhookIdParam,
          response: {
            200: success(WebhookWithSecret, 'The endpoint, its secret included.'),
            ...errorResponses(401, 403, 404, 429, 500, 503),
          },
        },
      },
      async (request) => withSecret(await service.get(request.caller!, request.params.id)),
    );

    app.delete(
      '/webhooks/:id',
      {
        onRequest: [requireIdSegment, write],
        schema: {
          operationId: 'deleteWebhook',
          summary: 'Delete a webhook endpoint',
          description: 'Deletes an endpoint with its pending deliveries and their log.',
          tags,
          security,
          params: WebhookIdParam,
          response: {
            204: Type.Null({ description: 'Deleted; no body.', headers: SUCCESS_HEADERS }),
            ...errorResponses(401, 403, 404, 429, 500, 503),
          },
        },
      },
      async (request, reply) => {
        await service.remove(request.caller!, request.params.id);
        return reply.code(204).send(null);
      },
    );

    app.post(
      '/webhooks/:id/rotate-secret',
      {
        onRequest: [requireIdSegment, write],
        schema: {
          operationId: 'rotateWebhookSecret',
          summary: 'Rotate the signing secret; the old one keeps signing beside it for 24 h',
          description:
            'Gives the endpoint a new signing secret. For 24 hours deliveries carry signatures of both the new and the old secret, so receivers can switch without losing any.',
          tags,
          security,
          params: WebhookIdParam,
          response: {
            200: success(WebhookWithSecret, 'The endpoint with its new secret.'),
            ...errorResponses(401, 403, 404, 429, 500, 503),
          },
        },
      },
      async (request) => withSecret(await service.rotate(request.caller!, request.params.id)),
    );

    app.get(
      '/webhooks/:id/deliveries',
      {
        ...one,
        schema: {
          operationId: 'listWebhookDeliveries',
          summary: 'Delivery attempts to this endpoint, newest first, paged like the plant list',
          description:
            "Every delivery attempt to this endpoint, newest first: event, attempt number, status, outcome, error, duration and the next attempt's time.",
          tags,
          security,
          params: WebhookIdParam,
          querystring: AttemptsQuery,
          response: {
            200: success(AttemptList, 'A page of attempts; `Link: <…>; rel="next"` while more follow.', {
              link: { type: 'string', description: 'The next page, when more follow.' },
            }),
            ...errorResponses(400, 401, 403, 404, 429, 500, 503),
          },
        },
      },
      async (request, reply) => {
        const { id } = request.params;
        const limit = request.query.limit === undefined ? 100 : Number(request.query.limit);
        const page = await service.attempts(request.caller!, id, { limit, cursor: request.query.cursor });
        const link = nextLink(`/webhooks/${id}/deliveries`, page);
        if (link) reply.header('link', link);
        return page.items.map(attemptView);
      },
    );

    app.post(
      '/webhooks/:id/recover',
      {
        onRequest: [requireIdSegment, write, requireJson],
        bodyLimit: BODY_LIMIT,
        schema: {
          operationId: 'recoverWebhook',
          summary: 'Re-send every event since a time that this endpoint has not acknowledged',
          description:
            "Queues again every event since `since` that this endpoint may receive now and has not acknowledged, and enables the endpoint if it was disabled. An endpoint whose `plants:admin` credential is no longer valid replays only its owner's events.",
          tags,
          security,
          params: WebhookIdParam,
          body: RecoverBody,
          response: {
            202: Type.Object(
              { queued: Type.Integer({ description: 'Events queued again.' }) },
              { description: 'Accepted; the deliveries are queued.', headers: SUCCESS_HEADERS },
            ),
            ...errorResponses(400, 401, 403, 404, 413, 415, 429, 500, 503),
          },
        },
      },
      async (request, reply) => {
        const queued = await service.recover(
          request.caller!,
          request.params.id,
          new Date(request.body.since),
        );
        return reply.code(202).send({ queued });
      },
    );

    methodNotAllowed(root, '/webhooks', ['GET', 'POST']);
    methodNotAllowed(root, '/webhooks/:id', ['GET', 'DELETE']);
    methodNotAllowed(root, '/webhooks/:id/rotate-secret', ['POST']);
    methodNotAllowed(root, '/webhooks/:id/deliveries', ['GET']);
    methodNotAllowed(root, '/webhooks/:id/recover', ['POST']);
  };
}
