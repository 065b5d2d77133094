import type {} from '@fastify/swagger';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { BadRequestError } from '../errors.js';
import { type AuthDeps, authenticate } from '../http/auth.js';
import { methodNotAllowed, requireIdSegment, requireJson } from '../http/route-guards.js';
import { ListCache } from '../plants/list-cache.js';
import type { Page, PlantService } from '../plants/service.js';
import { errorResponses, SUCCESS_HEADERS } from '../schemas/error.js';
import {
  ListQuery,
  MAX_PLANT_ID,
  Plant,
  PlantCreate,
  PlantIdParam,
  PlantList,
  type PlantListItem,
} from '../schemas/plant.js';
import type { PlantRecord } from '../store/store.js';

export const BODY_LIMIT = 16 * 1024;
const tags = ['plants'];

const IdempotencyHeaders = Type.Object({
  'idempotency-key': Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: 255,
      pattern: '^[\\x20-\\x7E]+$',
      description:
        'Makes the create safe to retry: the same key and body replay the first response for 24 h.',
    }),
  ),
});

const view = (p: PlantRecord): Plant => (p.tag === null ? { name: p.name } : { name: p.name, tag: p.tag });
// A second copy for list pages, on purpose: sharing the object literals with the one-plant answers
// would let a page build make V8 pretenure them (see toPagePlant in the SQLite store).
const pageView = (p: PlantRecord): PlantListItem =>
  p.tag === null ? { name: p.name } : { name: p.name, tag: p.tag };
// With include=id (contract version 2): a list element a client can go on to read or delete.
const pageViewWithId = (p: PlantRecord): PlantListItem =>
  p.tag === null ? { id: p.id, name: p.name } : { id: p.id, name: p.name, tag: p.tag };

// The next page's link: the same query, with the page's limit and the next cursor.
function nextLink(page: Page, q: ListQuery): string | undefined {
  if (page.next === null) return undefined;
  const tag = q.tag === undefined ? '' : `&tag=${encodeURIComponent(q.tag)}`;
  const include = q.include === undefined ? '' : '&include=id';
  return `</plants?limit=${page.limit}&cursor=${page.next}${tag}${include}>; rel="next"`;
}

function plantId(raw: string): number {
  const id = Number(raw);
  if (!(id <= MAX_PLANT_ID)) {
    throw new BadRequestError('invalid_parameter', `id must be a whole number from 1 to ${MAX_PLANT_ID}`, [
      { field: '/id', message: `must be a whole number from 1 to ${MAX_PLANT_ID}` },
    ]);
  }
  return id;
}

/** The plant API of the interface document: HTTP only; the rules live in PlantService. */
export function plantRoutes(service: PlantService, auth: AuthDeps) {
  const lists = new ListCache(service);
  return async (root: FastifyInstance) => {
    const app = root.withTypeProvider<TypeBoxTypeProvider>();
    const security = auth.security;
    const read = authenticate(auth, 'plants:read');
    const write = authenticate(auth, 'plants:write');

    app.post(
      '/plants',
      {
        onRequest: [write, requireJson],
        bodyLimit: BODY_LIMIT,
        schema: {
          operationId: 'createPlant',
          summary: 'Create a plant',
          description:
            "Creates a plant owned by the caller. With an `Idempotency-Key`, a retry with the same key and body replays the first answer (with `Idempotent-Replayed: true`) instead of creating a second plant; the same key with another body is 422. An `id` of the caller's choosing that exists is 409.",
          tags,
          security,
          headers: IdempotencyHeaders,
          body: PlantCreate,
          response: {
            201: {
              ...Plant,
              description: 'Created. `Location: /plants/{id}` names the new plant.',
              headers: {
                location: { type: 'string', description: '/plants/{id}' },
                'idempotent-replayed': {
                  type: 'string',
                  enum: ['true'],
                  description: 'Present when this answer replays the first one for the same Idempotency-Key.',
                },
                ...SUCCESS_HEADERS,
              },
            },
            ...errorResponses(400, 401, 403, 409, 413, 415, 422, 429, 500, 503),
          },
        },
      },
      async (request, reply) => {
        const out = await service.create(request.caller!, request.body, request.headers['idempotency-key']);
        reply.code(201).header('location', `/plants/${out.plant.id}`);
        if (out.replayed) reply.header('idempotent-replayed', 'true');
        return view(out.plant);
      },
    );

    app.get(
      '/plants',
      {
        onRequest: read,
        schema: {
          operationId: 'listPlants',
          summary: 'List the plants the caller may see, by id ascending',
          description:
            'The plants the caller may see (its own; everyone\'s with `plants:admin`), by id ascending, a page at a time. Follow `Link: rel="next"` for the next page; the cursor is opaque and bound to the caller and the query. `include=id` adds each plant\'s id. A query parameter not listed here is 400 `invalid_parameter`.',
          tags,
          security,
          querystring: ListQuery,
          response: {
            200: {
              ...PlantList,
              description: 'A page of plants. `Link: <…>; rel="next"` is present when more follow.',
              headers: {
                link: {
                  type: 'string',
                  description:
                    'The next page, `</plants?limit=…&cursor=…>; rel="next"`, when more follow; absent on the last page.',
                },
                ...SUCCESS_HEADERS,
              },
            },
            ...errorResponses(400, 401, 403, 429, 500, 503),
          },
        },
      },
      async (request, reply) => {
        const q = request.query;
        const query = {
          limit: q.limit === undefined ? undefined : Number(q.limit),
          tag: q.tag,
          cursor: q.cursor,
          include: q.include,
        };
        const out = await lists.get(request.caller!, query, (page) => ({
          body: reply.serialize(page.plants.map(q.include === 'id' ? pageViewWithId : pageView)) as string,
          link: nextLink(page, q),
        }));
        if (out.link) reply.header('link', out.link);
        return reply.type('application/json; charset=utf-8').send(out.body as unknown as PlantListItem[]);
      },
    );

    app.get(
      '/plants/:id',
      {
        onRequest: [requireIdSegment, read],
        schema: {
          operationId: 'getPlant',
          summary: 'Read one plant',
          description:
            'One plant by id. A plant the caller may not see answers 404, exactly as one that does not exist.',
          tags,
          security,
          params: PlantIdParam,
          response: {
            200: { ...Plant, description: 'The plant.', headers: SUCCESS_HEADERS },
            ...errorResponses(400, 401, 403, 404, 429, 500, 503),
          },
        },
      },
      async (request) => view(await service.get(request.caller!, plantId(request.params.id))),
    );

    app.delete(
      '/plants/:id',
      {
        onRequest: [requireIdSegment, write],
        schema: {
          operationId: 'deletePlant',
          summary: 'Delete one plant',
          description:
            'Deletes one plant. A plant the caller may not see answers 404, exactly as one that does not exist.',
          tags,
          security,
          params: PlantIdParam,
          response: {
            204: Type.Null({ description: 'Deleted; no body.', headers: SUCCESS_HEADERS }),
            ...errorResponses(400, 401, 403, 404, 429, 500, 503),
          },
        },
      },
      async (request, reply) => {
        await service.remove(request.caller!, plantId(request.params.id));
        return reply.code(204).send(null);
      },
    );

    methodNotAllowed(root, '/plants', ['GET', 'POST']);
    methodNotAllowed(root, '/plants/:id', ['GET', 'DELETE']);
  };
}
