import type {} from '@fastify/swagger';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { type AuthDeps, authenticate } from '../http/auth.js';
import { setEtag } from '../http/conditional.js';
import { methodNotAllowed, requireIdSegment } from '../http/route-guards.js';
import { nextLink } from '../paging.js';
import { errorResponses, SUCCESS_HEADERS, success } from '../schemas/error.js';
import { Plant, PlantIdParam } from '../schemas/plant.js';
import { type TrashItem, TrashList, TrashQuery } from '../schemas/trash.js';
import type { TrashRecord } from '../store/store.js';
import type { TrashService } from '../trash/service.js';
import { etagHeader, IdempotencyHeaders, plantId, replayedHeader } from './plants.js';

const tags = ['trash'];

const item = (e: TrashRecord) => ({
  id: e.id,
  name: e.name,
  ...(e.tag === null ? {} : { tag: e.tag }),
  garden: e.garden,
  deletedAt: e.deletedAt.toISOString(),
  deletedBy: e.deletedBy,
  purgeAt: e.purgeAt.toISOString(),
});

/** The trash (contract 13.2): HTTP only; who sees and does what is TrashService's (and its gardens'). */
export function trashRoutes(trash: TrashService, auth: AuthDeps) {
  return async (root: FastifyInstance) => {
    const app = root.withTypeProvider<TypeBoxTypeProvider>();
    const security = auth.security;
    const read = authenticate(auth, 'plants:read');
    const write = authenticate(auth, 'plants:write');

    app.get(
      '/trash',
      {
        onRequest: read,
        schema: {
          operationId: 'listTrash',
          summary: 'The trash: deleted plants that may still be restored',
          description:
            'The trashed plants of every garden where the caller is an editor or owner (every garden with `plants:admin`), newest deletion first, each `{id, name, tag, garden, deletedAt, deletedBy, purgeAt}` (`tag` only when set). `garden=` lists one garden\'s (not a member: 404 `garden_not_found`; a viewer: 403 `insufficient_role`). Follow `Link: rel="next"` for older ones; the cursor is opaque and bound to the caller and to `garden`. A query parameter not listed here, or one given twice, is 400.',
          tags,
          security,
          querystring: TrashQuery,
          response: {
            200: success(
              TrashList,
              'A page of the trash. `Link: <…>; rel="next"` is present when more follow.',
              {
                link: {
                  type: 'string',
                  description:
                    'The next page, `</trash?limit=…&cursor=…>; rel="next"` (with `garden=` when asked), when more follow; absent on the last page.',
                },
              },
            ),
            ...errorResponses(400, 401, 403, 404, 429, 500, 503),
          },
        },
      },
      async (request, reply) => {
        const q = request.query;
        const page = await trash.list(request.caller!, {
          ...(q.garden === undefined ? {} : { garden: q.garden }),
          ...(q.limit === undefined ? {} : { limit: Number(q.limit) }),
          ...(q.cursor === undefined ? {} : { cursor: q.cursor }),
        });
        const link = nextLink('/trash', page, { garden: q.garden });
        if (link) reply.header('link', link);
        if ('json' in page) {
          // The engine wrote the page as TrashList's JSON (item's fields, in its order): sent as it
          // is, a string with its type set, as history's pages are.
          reply.type('application/json; charset=utf-8');
          return page.json as unknown as TrashItem[];
        }
        return page.items.map(item);
      },
    );

    app.post(
      '/trash/:id/restore',
      {
        onRequest: [requireIdSegment, write],
        schema: {
          operationId: 'restorePlant',
          summary: 'Restore a plant from the trash',
          description:
            'Puts the plant back in its garden as it was (same owner, name and tag) with a new version: `200` with the plant, its new `ETag` and `Location: /plants/{id}`, and a `plant.restored` event. Editors and owners of its garden (a viewer: 403 `insufficient_role`); a plant in no trash the caller may see: 404 `plant_not_found`. A plant made since with its id: 409 `plant_exists`, and nothing changes. With an `Idempotency-Key`, a retry with the same key replays the first answer (with `Idempotent-Replayed: true`); the same key used for another request is 422. No body.',
          tags,
          security,
          params: PlantIdParam,
          headers: IdempotencyHeaders,
          response: {
            200: success(Plant, 'Restored. `Location: /plants/{id}` names the plant.', {
              location: { type: 'string', description: '/plants/{id}' },
              ...etagHeader,
              ...replayedHeader,
            }),
            ...errorResponses(400, 401, 403, 404, 409, 422, 429, 500, 503),
          },
        },
      },
      async (request, reply) => {
        const id = plantId(request.params.id);
        const key = request.headers['idempotency-key'];
        const out = await trash.restore(request.caller!, id, key, request.id);
        setEtag(reply.header('location', `/plants/${id}`), out.plant.version);
        if (out.replayed) reply.header('idempotent-replayed', 'true');
        const { name, tag } = out.plant;
        return tag === null ? { name } : { name, tag };
      },
    );

    app.delete(
      '/trash/:id',
      {
        onRequest: [requireIdSegment, write],
        schema: {
          operationId: 'purgeTrashedPlant',
          summary: 'Erase a plant from the trash for good',
          description:
            'Erases the trashed plant: it cannot be restored any more; a `plant.purged` event (data `{id, garden}`). Editors and owners of its garden (a viewer: 403 `insufficient_role`); a plant in no trash the caller may see: 404 `plant_not_found`.',
          tags,
          security,
          params: PlantIdParam,
          response: {
            204: Type.Null({ description: 'Erased; no body.', headers: SUCCESS_HEADERS }),
            ...errorResponses(400, 401, 403, 404, 429, 500, 503),
          },
        },
      },
      async (request, reply) => {
        await trash.purge(request.caller!, plantId(request.params.id), request.id);
        return reply.code(204).send(null);
      },
    );

    methodNotAllowed(root, '/trash', ['GET']);
    methodNotAllowed(root, '/trash/:id/restore', ['POST']);
    methodNotAllowed(root, '/trash/:id', ['DELETE']);
  };
}
