import type { Readable } from 'node:stream';
import type {} from '@fastify/swagger';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { AppError, BadRequestError } from '../errors.js';
import { type AuthDeps, authenticate } from '../http/auth.js';
import { explainPrecondition, ifMatch, readWithEtag, requireIfMatch, setEtag } from '../http/conditional.js';
import {
  BATCH_BODY_LIMIT,
  BODY_LIMIT,
  methodNotAllowed,
  requireBatchMedia,
  requireIdSegment,
  requireJson,
  requireMergePatch,
} from '../http/route-guards.js';
import { nextLink } from '../paging.js';
import {
  type BatchRow,
  distinctIds,
  rowsFromCsv,
  rowsFromJson,
  rowsFromNdjson,
} from '../plants/batch-input.js';
import { encodingProblem, foreignCharset } from '../plants/file-encoding.js';
import { ListCache } from '../plants/list-cache.js';
import type { PlantService } from '../plants/service.js';
import { created, errorResponses, SUCCESS_HEADERS, success } from '../schemas/error.js';
import { GardenIdParam } from '../schemas/garden.js';
import {
  BatchQuery,
  ExportQuery,
  ListQuery,
  MAX_PLANT_ID,
  Plant,
  PlantBatch,
  PlantBatchCreated,
  PlantCreate,
  PlantIdParam,
  PlantList,
  type PlantListItem,
  PlantPatch,
} from '../schemas/plant.js';
import type { PagePlant } from '../store/store.js';
import { exportBody, wantsCsv } from './plant-export.js';

const tags = ['plants'];
const mediaType = (request: FastifyRequest) =>
  (request.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();

// A CSV or NDJSON batch labelled with a charset other than UTF-8: 415 before its body is read (a
// JSON body's charset is the JSON parser's to judge).
function requireUtf8Text(request: FastifyRequest, _reply: FastifyReply, done: (err?: Error) => void): void {
  const type = mediaType(request);
  const charset = type === 'application/json' ? null : foreignCharset(request.headers['content-type']);
  done(
    charset === null
      ? undefined
      : new AppError(
          415,
          'unsupported_media_type',
          `Only UTF-8 text is accepted, and this ${type} body is labelled charset=${charset}. Save the file as UTF-8 (in Excel: "CSV UTF-8 (Comma delimited)") and send it with charset=utf-8 or no charset.`,
        ),
  );
}

export const IdempotencyHeaders = Type.Object({
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

const IfMatchHeaders = Type.Object({
  'if-match': Type.Optional(
    Type.String({
      description:
        'The ETag of the plant as the caller last read it, exactly as sent, quotes included (`"42"`, not `42`), or `*`: the request applies only if the plant has not changed since.',
      examples: ['"42"'],
    }),
  ),
});

export const etagHeader = {
  etag: {
    type: 'string',
    description:
      "The plant's current version as a strong ETag: send it back in `If-Match` to change or delete only that version.",
  },
};

export const replayedHeader = {
  'idempotent-replayed': {
    type: 'string',
    enum: ['true'],
    description: 'Present when this answer replays the first one for the same Idempotency-Key.',
  },
};

const view = (p: { name: string; tag: string | null }): Plant =>
  p.tag === null ? { name: p.name } : { name: p.name, tag: p.tag };
// A second copy for list pages, on purpose: sharing the object literals with the one-plant answers
// would let a page build make V8 pretenure them (see toPagePlant in the SQLite store).
const pageView = (p: PagePlant): PlantListItem =>
  p.tag === null ? { name: p.name } : { name: p.name, tag: p.tag };
// With include=id (contract version 2): a list element a client can go on to read or delete.
const pageViewWithId = (p: PagePlant): PlantListItem =>
  p.tag === null ? { id: p.id, name: p.name } : { id: p.id, name: p.name, tag: p.tag };
// With more of include=id,garden,version (any order): also what a change's If-Match needs, and
// where the plant is. (The serializer writes the fields in its schema's order, name first.)
const pageViewWith =
  (want: { id: boolean; garden: boolean; version: boolean }) =>
  (p: PagePlant): PlantListItem => {
    const item: PlantListItem = {} as PlantListItem;
    if (want.id) item.id = p.id;
    if (want.garden) item.garden = p.garden;
    if (want.version) item.version = p.version!;
    item.name = p.name;
    if (p.tag !== null) item.tag = p.tag;
    return item;
  };

/** The fields include= asks for; a field named twice is a 400, as the contract says. */
function includes(include: string | undefined): { id: boolean; garden: boolean; version: boolean } {
  const fields = include?.split(',') ?? [];
  if (new Set(fields).size !== fields.length) {
    throw new BadRequestError('invalid_parameter', 'include names each field at most once', [
      { field: '/include', message: 'names each field at most once' },
    ]);
  }
  return {
    id: fields.includes('id'),
    garden: fields.includes('garden'),
    version: fields.includes('version'),
  };
}

// A create's answer, on /plants and on /gardens/{gid}/plants alike.
const createdPlant = created(
  Plant,
  'Created. `Location: /plants/{id}` names the new plant.',
  '/plants/{id}',
  {
    ...etagHeader,
    ...replayedHeader,
  },
);

// A list's answer, on /plants and on /gardens/{gid}/plants alike: its next link names its own path.
const listed = (path: string) =>
  success(PlantList, 'A page of plants. `Link: <…>; rel="next"` is present when more follow.', {
    link: {
      type: 'string',
      description: `The next page, \`<${path}?limit=…&cursor=…>; rel="next"\`, when more follow; absent on the last page.`,
    },
  });

// The nested list's query: the garden is in the path.
const { garden: _inPath, ...nestedQuery } = ListQuery.properties;
const GardenListQuery = Type.Object(nestedQuery, { additionalProperties: false });

/** A path's plant id, checked against the ids a plant may have (400 otherwise); shared with history. */
export function plantId(raw: string): number {
  const id = Number(raw);
  if (!(id <= MAX_PLANT_ID)) {
    throw new BadRequestError('invalid_parameter', `id must be a whole number from 1 to ${MAX_PLANT_ID}`, [
      { field: '/id', message: `must be a whole number from 1 to ${MAX_PLANT_ID}` },
    ]);
  }
  return id;
}

/** The plant API of the interface document: HTTP only; the rules live in PlantService. */
export function plantRoutes(service: PlantService, auth: AuthDeps, listCacheBytes?: number) {
  const lists = new ListCache(service, listCacheBytes);

  async function create(request: FastifyRequest, reply: FastifyReply, garden: string | undefined) {
    const key = request.headers['idempotency-key'] as string | undefined;
    const out = await service.create(request.caller!, request.body as PlantCreate, key, garden, request.id);
    setEtag(reply.code(201).header('location', `/plants/${out.plant.id}`), out.plant.version);
    if (out.replayed) reply.header('idempotent-replayed', 'true');
    return view(out.plant);
  }

  // One list answer for /plants and /gardens/{gid}/plants; `linkGarden`: the next link repeats garden=.
  async function list(
    request: FastifyRequest,
    reply: FastifyReply,
    path: string,
    q: ListQuery,
    linkGarden = true,
  ) {
    const want = includes(q.include);
    const scope = await service.scope(request.caller!, q.garden, q.tag, q);
    const query = {
      limit: q.limit === undefined ? undefined : Number(q.limit),
      tag: q.tag,
      cursor: q.cursor,
      include: q.include,
      withVersion: want.version,
      q: q.q,
    };
    const shape = want.version || want.garden ? pageViewWith(want) : want.id ? pageViewWithId : pageView;
    const out = await lists.get(
      request.caller!,
      scope,
      query,
      (page) => reply.serialize(page.items.map(shape)) as string,
    );
    // Built here, not kept with the page: the cache answers both paths from one entry.
    const link = nextLink(path, out, {
      tag: q.tag,
      garden: linkGarden ? q.garden : undefined,
      include: q.include?.split(','),
      q: q.q,
    });
    if (link) reply.header('link', link);
    return reply.type('application/json; charset=utf-8').send(out.body as unknown as PlantListItem[]);
  }

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
            "Creates a plant in the caller's home garden (`POST /gardens/{gid}/plants` creates in another). With an `Idempotency-Key`, a retry with the same key and body replays the first answer (with `Idempotent-Replayed: true`) instead of creating a second plant; the same key with another body is 422. An `id` of the caller's choosing that exists is 409.",
          tags,
          security,
          headers: IdempotencyHeaders,
          body: PlantCreate,
          response: {
            201: createdPlant,
            ...errorResponses(400, 401, 403, 409, 413, 415, 422, 429, 500, 503),
          },
        },
      },
      async (request, reply) => create(request, reply, undefined),
    );

    app.get(
      '/plants',
      {
        onRequest: read,
        schema: {
          operationId: 'listPlants',
          summary: 'List the plants the caller may see, by id ascending',
          description:
            'The plants of every garden the caller is a member of (every plant, with `plants:admin`), by id ascending, a page at a time, as one keyset page across all those gardens. `garden=` lists one garden (one the caller is not a member of: 404). Follow `Link: rel="next"` for the next page; the cursor is opaque and bound to the caller and the query. `include` adds each plant\'s `id`, `garden` and `version`, in any order. A query parameter not listed here is 400 `invalid_parameter`.',
          tags,
          security,
          querystring: ListQuery,
          response: {
            200: listed('/plants'),
            ...errorResponses(400, 401, 403, 404, 429, 500, 503),
          },
        },
      },
      async (request, reply) => list(request, reply, '/plants', request.query),
    );

    app.get(
      '/gardens/:gid/plants',
      {
        onRequest: [requireIdSegment, read],
        schema: {
          operationId: 'listGardenPlants',
          summary: "List one garden's plants, by id ascending",
          description:
            'The list of `GET /plants` for one garden, with the same parameters and `Link` rules. Any member may list them; a garden the caller is not a member of answers 404.',
          tags,
          security,
          params: GardenIdParam,
          querystring: GardenListQuery,
          response: {
            200: listed('/gardens/{gid}/plants'),
            ...errorResponses(400, 401, 403, 404, 429, 500, 503),
          },
        },
      },
      async (request, reply) => {
        const gid = request.params.gid;
        const path = `/gardens/${encodeURIComponent(gid)}/plants`;
        return list(request, reply, path, { ...request.query, garden: gid }, false);
      },
    );

    app.post(
      '/gardens/:gid/plants',
      {
        onRequest: [requireIdSegment, write, requireJson],
        bodyLimit: BODY_LIMIT,
        schema: {
          operationId: 'createGardenPlant',
          summary: 'Create a plant in a garden',
          description:
            'The create of `POST /plants`, into this garden: its editors and owners may (a viewer: 403 `insufficient_role`; a garden the caller is not a member of: 404). An `Idempotency-Key` is bound to the garden too.',
          tags,
          security,
          params: GardenIdParam,
          headers: IdempotencyHeaders,
          body: PlantCreate,
          response: {
            201: createdPlant,
            ...errorResponses(400, 401, 403, 404, 409, 413, 415, 422, 429, 500, 503),
          },
        },
      },
      async (request, reply) => create(request, reply, request.params.gid),
    );

    app.get(
      '/plants/:id',
      {
        onRequest: [requireIdSegment, read],
        schema: {
          operationId: 'getPlant',
          summary: 'Read one plant',
          description:
            'One plant by id, with its `ETag`. A plant the caller may not see answers 404, exactly as one that does not exist. With `If-None-Match` naming its current ETag (or `*`), 304 and no body.',
          tags,
          security,
          params: PlantIdParam,
          headers: Type.Object({
            'if-none-match': Type.Optional(
              Type.String({
                description: 'An ETag the caller holds: 304 while the plant is still in that version.',
                examples: ['"42"'],
              }),
            ),
          }),
          response: {
            200: success(Plant, 'The plant.', etagHeader),
            304: Type.Null({
              description: 'Not modified: the plant is still in the version `If-None-Match` names; no body.',
              headers: { ...etagHeader, ...SUCCESS_HEADERS },
            }),
            ...errorResponses(400, 401, 403, 404, 429, 500, 503),
          },
        },
      },
      async (request, reply) => {
        const plant = await service.get(request.caller!, plantId(request.params.id));
        return readWithEtag(request, reply, plant.version, view(plant));
      },
    );

    app.patch(
      '/plants/:id',
      {
        onRequest: [requireIdSegment, write, requireMergePatch],
        bodyLimit: BODY_LIMIT,
        schema: {
          operationId: 'updatePlant',
          summary: 'Change one plant',
          description:
            'Applies a JSON Merge Patch (RFC 7396) of `name` and `tag` (`tag: null` removes the tag), only if the plant is still in the version `If-Match` names (`*`: any). Without `If-Match`, 428; when the plant has changed since, 412 and nothing changes. A patch that changes nothing answers 200 with the same ETag and records no event. With an `Idempotency-Key`, a retry of an applied change replays its 200. A plant the caller may not see answers 404.',
          tags,
          security,
          params: PlantIdParam,
          headers: Type.Object({ ...IdempotencyHeaders.properties, ...IfMatchHeaders.properties }),
          // One schema under both media types a merge patch may be sent as.
          body: {
            content: {
              'application/merge-patch+json': { schema: PlantPatch },
              'application/json': { schema: PlantPatch },
            },
          },
          response: {
            200: success(
              Plant,
              'Changed (or unchanged, for a patch that changes nothing): the plant and its new ETag.',
              { ...etagHeader, ...replayedHeader },
            ),
            ...errorResponses(400, 401, 403, 404, 409, 412, 413, 415, 422, 428, 429, 500, 503),
          },
        },
      },
      async (request, reply) => {
        const versions = requireIfMatch(request);
        const out = await service
          .update(
            request.caller!,
            plantId(request.params.id),
            request.body as PlantPatch,
            versions,
            request.headers['idempotency-key'],
            request.id,
          )
          .catch((err: unknown) => {
            throw explainPrecondition(request, err);
          });
        setEtag(reply, out.plant.version);
        if (out.replayed) reply.header('idempotent-replayed', 'true');
        return view(out.plant);
      },
    );

    app.delete(
      '/plants/:id',
      {
        onRequest: [requireIdSegment, write],
        schema: {
          operationId: 'deletePlant',
          summary: 'Delete one plant',
          description:
            "Deletes one plant. A plant the caller may not see answers 404, exactly as one that does not exist. With `If-Match`, only if the plant is still in that version (else 412, and it is kept). While the trash is on (`TRASH_RETENTION`, 30 days by default), the plant moves to its garden's trash (`GET /trash`, `POST /trash/{id}/restore`); to every other read it is gone at once, and its id may be taken again.",
          tags,
          security,
          params: PlantIdParam,
          headers: IfMatchHeaders,
          response: {
            204: Type.Null({ description: 'Deleted; no body.', headers: SUCCESS_HEADERS }),
            ...errorResponses(400, 401, 403, 404, 412, 429, 500, 503),
          },
        },
      },
      async (request, reply) => {
        await service
          .remove(request.caller!, plantId(request.params.id), ifMatch(request), request.id)
          .catch((err: unknown) => {
            throw explainPrecondition(request, err);
          });
        return reply.code(204).send(null);
      },
    );

    // Bodies a batch create takes besides JSON: read whole (1 MiB at most), as UTF-8 text. Bytes
    // that are not UTF-8 are refused with what they are and how to save them, never decoded with
    // replacement characters (which would store "Gr��e" for a Windows-1252 "Größe").
    root.addContentTypeParser(
      ['text/csv', 'application/x-ndjson'],
      { parseAs: 'buffer', bodyLimit: BATCH_BODY_LIMIT },
      (request, body, done) => {
        const bytes = body as Buffer;
        const kind = mediaType(request) === 'text/csv' ? 'csv' : 'ndjson';
        const problem = encodingProblem(bytes, kind);
        if (problem !== null) done(new BadRequestError('invalid_body', problem));
        // Without its byte order mark, if it has one (what Excel's "CSV UTF-8" writes).
        else
          done(
            null,
            bytes.toString('utf8', bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf ? 3 : 0),
          );
      },
    );

    app.post(
      '/plants/batch',
      {
        onRequest: [write, requireBatchMedia, requireUtf8Text],
        bodyLimit: BATCH_BODY_LIMIT,
        schema: {
          operationId: 'createPlantsBatch',
          summary: 'Create many plants at once, all or nothing',
          description:
            'Creates 1 … 1000 plants in one transaction, each with its own `plant.created` event, or none of them. The body is JSON (`{"plants": [...], "garden"?: gid}`), CSV (`text/csv`: RFC 4180, UTF-8 with or without a BOM, CRLF or LF; the delimiter `,`, `;` or a tab, whichever the header row holds most outside quotes (`,` for a header of one column), every row read with it; a header naming columns from `name`, `tag`, `id`, `garden`, case aside; an empty cell is none, a row whose cells are all empty is skipped, a row with fewer cells than the header has the rest empty, empty header cells at its end name no column) or NDJSON (`application/x-ndjson`: one `{id?, name, tag?, garden?}` a line, as the export writes them), at most 1 MiB. A body that is not UTF-8 (Excel\'s "CSV (Comma delimited)" saves Windows-1252, its "Unicode Text" UTF-16): 400 naming the first bad byte and its line and saying how to save the file as UTF-8, nothing created; a `charset` other than UTF-8 in the Content-Type of a CSV or NDJSON body: 415. A plant without a garden goes to `?garden=` or else the caller\'s home garden; the caller must be an editor or owner of each. Any invalid plant: 400 with a detail per bad one (`/plants/3/name` in JSON, `/rows/4/name` for CSV and NDJSON, rows counted from 1 after the header; `/columns/2` for the CSV header), nothing created: the `message` is a sentence naming the first problem\'s row and column and how many more there are (`Row 4, column name: must not be empty (and 2 more problems)`), each detail\'s `message` that field\'s own reason; a CSV that cannot be read (a quote never closed, a row with more cells than the header) names its row and column in a sentence. A whole-body problem (empty, no rows, over 1000 rows, not UTF-8) is a `message` alone; an id that exists: 409 naming it, nothing created. `?ids=drop` ignores the ids given (re-importing an export as new plants). An `Idempotency-Key` covers the whole batch.',
          tags,
          security,
          headers: IdempotencyHeaders,
          querystring: BatchQuery,
          body: {
            content: {
              'application/json': { schema: PlantBatch },
              'text/csv': {
                schema: Type.String({
                  description:
                    'CSV in UTF-8 (a BOM is skipped) with a header row naming columns from name, tag, id and garden, its cells separated by `,`, `;` or a tab as the header shows.',
                  examples: ['name,tag\r\nMonstera,indoor\r\nBoston fern,\r\n'],
                }),
              },
              'application/x-ndjson': {
                schema: Type.String({
                  description: 'One JSON object `{id?, name, tag?, garden?}` a line.',
                  examples: ['{"name":"Monstera","tag":"indoor"}\n{"name":"Boston fern"}\n'],
                }),
              },
            },
          },
          response: {
            201: success(
              PlantBatchCreated,
              'Created, every one: how many, and their ids in input order.',
              replayedHeader,
            ),
            ...errorResponses(400, 401, 403, 404, 409, 413, 415, 422, 429, 500, 503),
          },
        },
      },
      async (request, reply) => {
        const type = mediaType(request);
        const query = request.query;
        let rows: BatchRow[];
        let garden = query.garden;
        let at: (i: number) => string;
        if (type === 'application/json') {
          const body = request.body as PlantBatch;
          if (body.garden !== undefined && garden !== undefined && body.garden !== garden) {
            throw new BadRequestError('invalid_body', 'garden names another garden than ?garden=', [
              { field: '/garden', message: 'must be the garden ?garden= names' },
            ]);
          }
          garden = body.garden ?? garden;
          rows = rowsFromJson(body.plants);
          at = (i) => `/plants/${i}`;
        } else {
          const text = request.body as string;
          rows = type === 'text/csv' ? rowsFromCsv(text) : rowsFromNdjson(text);
          at = (i) => `/rows/${i + 1}`;
        }
        if (query.ids !== 'drop') distinctIds(rows, at);
        const out = await service.batch(request.caller!, rows, {
          ...(garden === undefined ? {} : { garden }),
          newIds: query.ids === 'drop',
          requestId: request.id,
          ...(request.headers['idempotency-key'] === undefined
            ? {}
            : { idempotencyKey: request.headers['idempotency-key'] }),
        });
        reply.code(201);
        if (out.replayed) reply.header('idempotent-replayed', 'true');
        return { created: out.ids.length, ids: out.ids };
      },
    );

    app.get(
      '/plants/export',
      {
        onRequest: read,
        schema: {
          operationId: 'exportPlants',
          summary: 'Every plant the caller may see, in one streamed answer',
          description:
            "Every plant a list with the same `tag`, `garden` and `q` shows, by id, from one consistent snapshot of the store, streamed (no `limit` or `cursor`). NDJSON by default (`{id, name, tag, garden, version}` a line); CSV with `?format=csv` or `Accept: text/csv`: a UTF-8 BOM (so spreadsheets read UTF-8), then the header `id,name,tag,garden`, cells separated by `,` or by `?delimiter=` (`;` for Excel where the decimal separator is a comma, or a tab); a cell holding `,`, `;`, a tab, a quote or a line break, or a space at either end, is quoted, and a record with a cell holding a delimiter other than the one in use has every cell quoted; a cell beginning with `=`, `+`, `-`, `@`, tab, carriage return or `'` is prefixed with `'`, so no spreadsheet runs it as a formula. `delimiter` with NDJSON, or another delimiter: 400 `invalid_parameter`. Either is accepted back by `POST /plants/batch` (with `?ids=drop` for new ids). The snapshot is read whole before the answer starts, so a store that fails is a 503, never a cut answer. A user runs at most 2 exports at once and an instance 8 (by default): one more answers 429 `too_many_exports` with Retry-After.",
          tags,
          security,
          querystring: ExportQuery,
          response: {
            200: {
              description: 'The plants, streamed.',
              headers: SUCCESS_HEADERS,
              content: {
                'application/x-ndjson': {
                  schema: Type.String({
                    examples: ['{"id":1,"name":"Monstera","tag":"indoor","garden":"gdn_3f9a","version":1}\n'],
                  }),
                },
                'text/csv': {
                  schema: Type.String({
                    examples: ['\uFEFFid,name,tag,garden\r\n1,Monstera,indoor,gdn_3f9a\r\n'],
                  }),
                },
              },
            },
            ...errorResponses(400, 401, 403, 404, 429, 500, 503),
          },
        },
      },
      async (request, reply) => {
        const q = request.query;
        const asCsv = wantsCsv(q.format, request.headers.accept);
        if (q.delimiter !== undefined && !asCsv) {
          throw new BadRequestError(
            'invalid_parameter',
            'query parameter delimiter is for CSV only: add format=csv, or leave delimiter out for NDJSON',
            [{ field: '/delimiter', message: 'is for CSV only (format=csv)' }],
          );
        }
        const scope = await service.scope(request.caller!, q.garden, q.tag, q);
        const { pages, release } = service.export(request.caller!, scope, q);
        let body: Readable;
        try {
          body = await exportBody(pages, asCsv ? (q.delimiter ?? ',') : null);
        } catch (err) {
          release();
          throw err;
        }
        // Its place is held until the file is sent or the client goes (either closes the stream).
        body.once('close', release);
        reply.type(asCsv ? 'text/csv; charset=utf-8' : 'application/x-ndjson; charset=utf-8');
        if (asCsv) reply.header('content-disposition', 'attachment; filename="plants.csv"');
        return reply.send(body as unknown as string);
      },
    );

    methodNotAllowed(root, '/plants', ['GET', 'POST']);
    methodNotAllowed(root, '/plants/batch', ['POST']);
    methodNotAllowed(root, '/plants/export', ['GET']);
    methodNotAllowed(root, '/plants/:id', ['DELETE', 'GET', 'PATCH']);
    methodNotAllowed(root, '/gardens/:gid/plants', ['GET', 'POST']);
  };
}
