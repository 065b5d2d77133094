import type {} from '@fastify/swagger';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import { BadRequestError } from '../errors.js';
import type { GardenService, GardenView } from '../gardens/service.js';
import { type AuthDeps, authenticate } from '../http/auth.js';
import { BODY_LIMIT, methodNotAllowed, requireIdSegment, requireJson } from '../http/route-guards.js';
import { isValidUser } from '../identity/tokens.js';
import { created, errorResponses, SUCCESS_HEADERS, success } from '../schemas/error.js';
import {
  Garden,
  GardenCreate,
  GardenIdParam,
  GardenList,
  GardenPatch,
  Member,
  MemberList,
  MemberParams,
  MemberPut,
} from '../schemas/garden.js';
import type { MemberRecord } from '../store/store.js';

const tags = ['gardens'];

const gardenView = (v: GardenView): Garden => ({
  id: v.garden.id,
  name: v.garden.name,
  home: v.home,
  role: v.role,
  createdAt: v.garden.createdAt.toISOString(),
});
const memberView = (m: MemberRecord) => ({ user: m.user, role: m.role, addedAt: m.addedAt.toISOString() });

// The router has decoded the path segment; a user name follows the rules tokens are made with.
function memberName(raw: string): string {
  if (!isValidUser(raw)) {
    throw new BadRequestError(
      'invalid_parameter',
      'user must be 1 to 200 printable characters without spaces',
      [{ field: '/user', message: 'must be 1 to 200 printable characters without spaces' }],
    );
  }
  return raw;
}

/** Gardens and their members (contract 3.2): HTTP only; the rules live in GardenService and the store. */
export function gardenRoutes(gardens: GardenService, auth: AuthDeps) {
  return async (root: FastifyInstance) => {
    const app = root.withTypeProvider<TypeBoxTypeProvider>();
    const security = auth.security;
    const read = authenticate(auth, 'plants:read');
    const write = authenticate(auth, 'plants:write');

    app.post(
      '/gardens',
      {
        onRequest: [write, requireJson],
        bodyLimit: BODY_LIMIT,
        schema: {
          operationId: 'createGarden',
          summary: 'Create a garden',
          description:
            'Makes a garden with the caller as its owner. A user makes at most 100 gardens (its home garden included) and belongs to at most 1,000: beyond that, 409 `too_many_gardens`. Being added to the gardens of others never counts against the 100.',
          tags,
          security,
          body: GardenCreate,
          response: {
            201: created(Garden, 'Created.', '/gardens/{gid}'),
            ...errorResponses(400, 401, 403, 409, 413, 415, 429, 500, 503),
          },
        },
      },
      async (request, reply) => {
        const view = await gardens.create(request.caller!, request.body.name);
        reply.code(201).header('location', `/gardens/${view.garden.id}`);
        return gardenView(view);
      },
    );

    app.get(
      '/gardens',
      {
        onRequest: read,
        schema: {
          operationId: 'listGardens',
          summary: "The caller's gardens",
          description:
            'Every garden the caller is a member of, with its role there: its home garden first (made when first needed), then by creation.',
          tags,
          security,
          response: {
            200: success(GardenList, "The caller's gardens."),
            ...errorResponses(401, 403, 429, 500, 503),
          },
        },
      },
      async (request) => (await gardens.list(request.caller!)).map(gardenView),
    );

    app.get(
      '/gardens/:gid',
      {
        onRequest: [requireIdSegment, read],
        schema: {
          operationId: 'getGarden',
          summary: 'Read one garden',
          description:
            'Any member may read it; to anyone else it is 404, exactly as one that does not exist.',
          tags,
          security,
          params: GardenIdParam,
          response: { 200: success(Garden, 'The garden.'), ...errorResponses(401, 403, 404, 429, 500, 503) },
        },
      },
      async (request) => gardenView(await gardens.find(request.caller!, request.params.gid)),
    );

    app.patch(
      '/gardens/:gid',
      {
        onRequest: [requireIdSegment, write, requireJson],
        bodyLimit: BODY_LIMIT,
        schema: {
          operationId: 'renameGarden',
          summary: 'Rename a garden',
          description: 'Owners only (another member: 403 `insufficient_role`).',
          tags,
          security,
          params: GardenIdParam,
          body: GardenPatch,
          response: {
            200: success(Garden, 'The renamed garden.'),
            ...errorResponses(400, 401, 403, 404, 413, 415, 429, 500, 503),
          },
        },
      },
      async (request) =>
        gardenView(await gardens.rename(request.caller!, request.params.gid, request.body.name)),
    );

    app.delete(
      '/gardens/:gid',
      {
        onRequest: [requireIdSegment, write],
        schema: {
          operationId: 'deleteGarden',
          summary: 'Delete an empty garden',
          description:
            'Owners only. A garden with plants is 409 `garden_not_empty`; a home garden is 409 `home_garden`. A garden whose plants are all in its trash may be deleted: its trash is erased with it (a `plant.purged` event each). Its members lose it at once.',
          tags,
          security,
          params: GardenIdParam,
          response: {
            204: Type.Null({ description: 'Deleted; no body.', headers: SUCCESS_HEADERS }),
            ...errorResponses(401, 403, 404, 409, 429, 500, 503),
          },
        },
      },
      async (request, reply) => {
        await gardens.remove(request.caller!, request.params.gid, request.id);
        return reply.code(204).send(null);
      },
    );

    app.get(
      '/gardens/:gid/members',
      {
        onRequest: [requireIdSegment, read],
        schema: {
          operationId: 'listMembers',
          summary: "A garden's members",
          description: 'Any member may list them, by when they were added.',
          tags,
          security,
          params: GardenIdParam,
          response: {
            200: success(MemberList, 'The members.'),
            ...errorResponses(401, 403, 404, 429, 500, 503),
          },
        },
      },
      async (request) => (await gardens.members(request.caller!, request.params.gid)).map(memberView),
    );

    app.put(
      '/gardens/:gid/members/:user',
      {
        onRequest: [requireIdSegment, write, requireJson],
        bodyLimit: BODY_LIMIT,
        schema: {
          operationId: 'putMember',
          summary: 'Add a member, or change its role',
          description:
            "Owners only. The user need not have signed in yet. 201 when added, 200 when its role changed (or was already that). Demoting the last owner: 409 `last_owner`; the home garden's own user: 409 `home_garden`; limits: 409 `too_many_gardens` (the user is in 1,000) or `too_many_members` (the garden has 1,000).",
          tags,
          security,
          params: MemberParams,
          body: MemberPut,
          response: {
            200: success(Member, 'Its role changed (or already was the one asked).'),
            201: success(Member, 'Added.'),
            ...errorResponses(400, 401, 403, 404, 409, 413, 415, 429, 500, 503),
          },
        },
      },
      async (request, reply) => {
        const user = memberName(request.params.user);
        const out = await gardens.share(
          request.caller!,
          request.params.gid,
          user,
          request.body.role,
          request.id,
        );
        reply.code(out.created ? 201 : 200);
        return memberView(out.member);
      },
    );

    app.delete(
      '/gardens/:gid/members/:user',
      {
        onRequest: [requireIdSegment, write],
        schema: {
          operationId: 'removeMember',
          summary: 'Remove a member, or leave',
          description:
            "Owners may remove anyone; any member may remove itself (leave). The last owner: 409 `last_owner`; the home garden's own user: 409 `home_garden`; a user who is not a member: 404 `member_not_found`. The removed member sees nothing of the garden from its next request on, on every instance.",
          tags,
          security,
          params: MemberParams,
          response: {
            204: Type.Null({ description: 'Removed; no body.', headers: SUCCESS_HEADERS }),
            ...errorResponses(400, 401, 403, 404, 409, 429, 500, 503),
          },
        },
      },
      async (request, reply) => {
        const user = memberName(request.params.user);
        await gardens.unshare(request.caller!, request.params.gid, user, request.id);
        return reply.code(204).send(null);
      },
    );

    methodNotAllowed(root, '/gardens', ['GET', 'POST']);
    methodNotAllowed(root, '/gardens/:gid', ['DELETE', 'GET', 'PATCH']);
    methodNotAllowed(root, '/gardens/:gid/members', ['GET']);
    methodNotAllowed(root, '/gardens/:gid/members/:user', ['DELETE', 'PUT']);
  };
}
