import type {} from '@fastify/swagger';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';
import type { Static } from 'typebox';
import type { ChangeFeed, FeedPage } from '../events/changes.js';
import { type AuthDeps, authenticate } from '../http/auth.js';
import { methodNotAllowed } from '../http/route-guards.js';
import { ChangesPage, ChangesQuery } from '../schemas/changes.js';
import { errorResponses, success } from '../schemas/error.js';

/**
 * An answer as JSON.stringify writes it, built as one string (a first sync's page holds 1,000
 * plants: no generic walk of their objects). Names and tags are the only free text.
 */
export function pageJson(page: FeedPage): string {
  let out = '{"changes":[';
  for (let i = 0; i < page.changes.length; i++) {
    const c = page.changes[i]!;
    if (i > 0) out += ',';
    if (c.op === 'delete') {
      out += `{"id":${c.id},"op":"delete"}`;
      continue;
    }
    const p = c.plant;
    out += `{"id":${c.id},"op":"upsert","plant":{"id":${p.id},"name":${JSON.stringify(p.name)}`;
    if (p.tag !== undefined) out += `,"tag":${JSON.stringify(p.tag)}`;
    out += `,"garden":${JSON.stringify(p.garden)},"version":${p.version}}}`;
  }
  return `${out}],"next":${JSON.stringify(page.next)},"more":${page.more}}`;
}

/** The change feed (contract 13.4): HTTP only; what changed for whom is ChangeFeed's. */
export function changeRoutes(feed: ChangeFeed, auth: AuthDeps) {
  return async (root: FastifyInstance) => {
    const app = root.withTypeProvider<TypeBoxTypeProvider>();
    app.get(
      '/plants/changes',
      {
        onRequest: authenticate(auth, 'plants:read'),
        schema: {
          operationId: 'plantChanges',
          summary: 'What changed since a position (sync)',
          description:
            "Keeps a copy of the plants the caller sees. Without `since`: every such plant as an upsert, by id, a page at a time (`more` true until the last page, whose `next` is the caller's position in the log). With `since` (an earlier `next`): what changed since, each plant id at most once with its latest state: created, changed or restored → upsert; deleted or trashed → delete; a garden joined → upserts of its plants; a garden left, removed from or deleted → deletes of its plants; a role change alone changes nothing. Apply each change (upsert = put, delete = remove) and ask again with `next` while `more` is true: the copy then holds what `GET /plants?include=id,garden,version` lists. A `since` older than the events kept (`EVENT_RETENTION`) → 410 `changes_expired`: start again without it.",
          tags: ['plants'],
          security: auth.security,
          querystring: ChangesQuery,
          response: {
            200: success(ChangesPage, 'Changes since `since`, and where the next answer starts.'),
            ...errorResponses(400, 401, 403, 404, 410, 429, 500, 503),
          },
        },
      },
      async (request, reply) => {
        const q = request.query;
        const page = await feed.changes(request.caller!, {
          since: q.since,
          limit: q.limit === undefined ? undefined : Number(q.limit),
          garden: q.garden,
        });
        // Serialized here, as history pages are, rather than through the schema's union.
        reply.type('application/json; charset=utf-8');
        return pageJson(page) as unknown as Static<typeof ChangesPage>;
      },
    );
    methodNotAllowed(root, '/plants/changes', ['GET']);
  };
}
