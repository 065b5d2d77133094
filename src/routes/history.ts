import type {} from '@fastify/swagger';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { type Static, Type } from 'typebox';
import { historyJson } from '../events/event.js';
import { ACTIVITY_TYPES, type HistoryService, parseTypes } from '../events/history.js';
import { type AuthDeps, authenticate } from '../http/auth.js';
import { methodNotAllowed, requireIdSegment } from '../http/route-guards.js';
import { type JsonTextPage, nextLink, type Page } from '../paging.js';
import { errorResponses, success } from '../schemas/error.js';
import { GardenIdParam } from '../schemas/garden.js';
import { LIMIT_TEXT, PlantIdParam } from '../schemas/plant.js';
import { HistoryPage } from '../schemas/webhook.js';
import type { EventRecord } from '../store/store.js';
import { plantId } from './plants.js';

const limit = Type.Optional(
  Type.String({
    pattern: LIMIT_TEXT,
    description: 'Page size: 1 … 1000 in decimal digits, default 100 (as the plant list).',
    examples: ['20'],
  }),
);
const cursor = Type.Optional(
  Type.String({
    minLength: 1,
    maxLength: 512,
    description: 'Opaque token from a `Link: rel="next"` header.',
  }),
);
const HistoryQuery = Type.Object({ limit, cursor }, { additionalProperties: false });
const ActivityQuery = Type.Object(
  {
    limit,
    cursor,
    type: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 200,
        description: `Only events of these types, comma-separated: ${ACTIVITY_TYPES.map((t) => `\`${t}\``).join(', ')}. An unknown type or an empty entry: 400 \`invalid_parameter\`.`,
        examples: ['plant.deleted,member.removed'],
      }),
    ),
  },
  { additionalProperties: false },
);

const paged = (path: string, what: string) =>
  success(HistoryPage, `${what}, newest first. \`Link: <…>; rel="next"\` is present when more follow.`, {
    link: {
      type: 'string',
      description: `The next page, \`<${path}?limit=…&cursor=…>; rel="next"\`, when more follow; absent on the last page.`,
    },
  });

function send(
  reply: FastifyReply,
  path: string,
  page: Page<EventRecord> | JsonTextPage,
  params: Record<string, string[] | undefined> = {},
) {
  const link = nextLink(path, page, params);
  if (link) reply.header('link', link);
  // Serialized here (historyJson: JSON.stringify, as webhook and stream bodies are, or the engine's
  // own JSON text of each event's data) rather than through the response schema's union of plant
  // and member events (about 10 % less CPU for a page of 100, measured in-process). A string with
  // its type set is sent as it is. An engine that wrote the page's JSON itself (JsonTextPage) had
  // it written the same way, in SQL.
  reply.type('application/json; charset=utf-8');
  const json = 'json' in page ? page.json : historyJson(page.items);
  return json as unknown as Static<typeof HistoryPage>;
}

/** History and activity (contract 13.3): HTTP only; who sees what is HistoryService's (and its gardens'). */
export function historyRoutes(history: HistoryService, auth: AuthDeps) {
  return async (root: FastifyInstance) => {
    const app = root.withTypeProvider<TypeBoxTypeProvider>();
    const security = auth.security;
    const read = authenticate(auth, 'plants:read');

    app.get(
      '/plants/:id/history',
      {
        onRequest: [requireIdSegment, read],
        schema: {
          operationId: 'plantHistory',
          summary: "A plant's history",
          description:
            'The events of this plant id still kept (`EVENT_RETENTION`, 30 days by default), newest first, each `{id, type, timestamp, actor, requestId, data}`: a webhook body with the event id. Only events of gardens the caller is a member of now (every garden with `plants:admin`); a plant deleted since still has its history while its events are kept. None visible: 404 `plant_not_found`. Follow `Link: rel="next"` for older events; the cursor is bound to the caller and the plant.',
          tags: ['plants'],
          security,
          params: PlantIdParam,
          querystring: HistoryQuery,
          response: {
            200: paged('/plants/{id}/history', "The plant's events"),
            ...errorResponses(400, 401, 403, 404, 429, 500, 503),
          },
        },
      },
      async (request, reply) => {
        const id = plantId(request.params.id);
        const q = request.query;
        const page = await history.history(request.caller!, id, {
          limit: q.limit === undefined ? undefined : Number(q.limit),
          cursor: q.cursor,
        });
        return send(reply, `/plants/${id}/history`, page);
      },
    );

    app.get(
      '/gardens/:gid/activity',
      {
        onRequest: [requireIdSegment, read],
        schema: {
          operationId: 'gardenActivity',
          summary: "A garden's activity",
          description:
            "The garden's events still kept, plants' and members' (`member.added`, `member.changed`, `member.removed`), newest first, each as in a plant's history. Any member may read it (an admin too); a garden the caller is not a member of answers 404, as one that does not exist. `type` keeps only the types it names. Follow `Link: rel=\"next\"` for older events; the cursor is bound to the caller, the garden and `type`.",
          tags: ['gardens'],
          security,
          params: GardenIdParam,
          querystring: ActivityQuery,
          response: {
            200: paged('/gardens/{gid}/activity', "The garden's events"),
            ...errorResponses(400, 401, 403, 404, 429, 500, 503),
          },
        },
      },
      async (request, reply) => {
        const q = request.query;
        const types = parseTypes(q.type);
        const gid = request.params.gid;
        const page = await history.activity(request.caller!, gid, {
          limit: q.limit === undefined ? undefined : Number(q.limit),
          cursor: q.cursor,
          types,
        });
        return send(reply, `/gardens/${encodeURIComponent(gid)}/activity`, page, {
          type: q.type?.split(','),
        });
      },
    );

    methodNotAllowed(root, '/plants/:id/history', ['GET']);
    methodNotAllowed(root, '/gardens/:gid/activity', ['GET']);
  };
}
