import type {} from '@fastify/swagger';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../errors.js';
import type { EventService } from '../events/service.js';
import { type AuthDeps, authenticate, stillAuthorized } from '../http/auth.js';
import { methodNotAllowed } from '../http/route-guards.js';
import { errorResponses, SUCCESS_HEADERS } from '../schemas/error.js';

// Before authentication reads anything: a client that cannot take a stream is told so first.
function requireEventStream(
  request: FastifyRequest,
  _reply: FastifyReply,
  done: (err?: Error) => void,
): void {
  const accept = request.headers.accept ?? '';
  done(
    /(^|,)\s*(text\/event-stream|text\/\*|\*\/\*)\s*(;|,|$)/i.test(accept)
      ? undefined
      : new AppError(
          406,
          'not_acceptable',
          'GET /events is a Server-Sent Events stream: send Accept: text/event-stream',
        ),
  );
}

/** The live stream (CONTRACT.md section 8): HTTP only; the event service reads the log and writes. */
export function eventRoutes(events: EventService, auth: AuthDeps) {
  return async (app: FastifyInstance) => {
    app.get(
      '/events',
      {
        onRequest: [authenticate(auth, 'plants:read'), requireEventStream],
        schema: {
          operationId: 'streamEvents',
          summary: 'Server-Sent Events of the plants the caller may see, as they commit',
          description:
            'Each message: `id: <event id>`, `event: <type>`, `data: <event JSON>`; a comment line at least every 15 s. ' +
            'Send `Last-Event-ID` to resume right after that event; one no longer kept answers 410 `events_expired`, ' +
            'one that is not an event id 400 `invalid_event_id`. A user has a limited number of open streams at once ' +
            '(20 by default): one more answers 429 `too_many_streams`. A stream ends within 5 s of its token being ' +
            'revoked or expiring.',
          tags: ['events'],
          security: auth.security,
          headers: {
            type: 'object',
            properties: {
              // An event id as the service gives them (`evt_` and letters, digits, `_`, `-`), 200
              // characters at most; anything else is 400 invalid_event_id, never a look-up.
              'last-event-id': {
                type: 'string',
                maxLength: 200,
                pattern: '^(?:evt_[A-Za-z0-9_-]{1,196})?$',
                description: 'Resume after this event.',
              },
            },
          },
          response: {
            200: {
              description: 'The stream (text/event-stream).',
              headers: SUCCESS_HEADERS,
              content: { 'text/event-stream': { schema: { type: 'string' } } },
            },
            ...errorResponses(400, 401, 403, 406, 410, 429, 500, 503),
          },
        },
      },
      async (request: FastifyRequest, reply: FastifyReply) => {
        const last = request.headers['last-event-id'];
        const opened = await events.open(
          request.caller!,
          typeof last === 'string' && last !== '' ? last : null,
        );
        // A hijacked reply writes none of the headers set on it so far (RateLimit-*): they go here.
        const set = reply.getHeaders();
        reply.hijack();
        const res = reply.raw;
        for (const [name, value] of Object.entries(set)) if (value !== undefined) res.setHeader(name, value);
        res.writeHead(200, {
          'content-type': 'text/event-stream; charset=utf-8',
          'cache-control': 'no-cache',
          connection: 'keep-alive',
          'x-accel-buffering': 'no',
          'x-request-id': request.id,
        });
        res.flushHeaders();
        // The Authorization header names the credential: streams opened with one bearer share its check.
        const credential = request.headers.authorization;
        await events.serve(res, opened, stillAuthorized(auth, request, 'plants:read'), credential);
      },
    );
    methodNotAllowed(app, '/events', ['GET']);
  };
}
