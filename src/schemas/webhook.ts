import { type Static, Type } from 'typebox';
import { LIMIT_TEXT } from './plant.js';

export const EventTypeSchema = Type.Union(
  [
    Type.Literal('plant.created'),
    Type.Literal('plant.updated'),
    Type.Literal('plant.deleted'),
    Type.Literal('plant.restored'),
    Type.Literal('plant.purged'),
    Type.Literal('member.added'),
    Type.Literal('member.changed'),
    Type.Literal('member.removed'),
  ],
  { description: "What happened: to a plant, or to a garden's membership." },
);

export const WebhookUrl = Type.String({
  minLength: 1,
  maxLength: 2000,
  description:
    'Absolute http(s) URL that receives the deliveries. Private, loopback and link-local addresses are refused.',
  examples: ['https://hooks.example.com/plantstore'],
});
export const WebhookDescription = Type.String({ maxLength: 500 });

export const WebhookCreate = Type.Object(
  {
    url: WebhookUrl,
    events: Type.Optional(
      Type.Array(EventTypeSchema, {
        minItems: 1,
        uniqueItems: true,
        description: 'Which events to receive; default every type.',
      }),
    ),
    description: Type.Optional(Type.Union([WebhookDescription, Type.Null()])),
  },
  {
    additionalProperties: false,
    examples: [{ url: 'https://hooks.example.com/plantstore', events: ['plant.created'] }],
  },
);
export type WebhookCreate = Static<typeof WebhookCreate>;

const endpointFields = {
  id: Type.String({ examples: ['whk_3kTMd8QvWmZb1nXy0aJf2c9R'] }),
  url: Type.String(),
  events: Type.Array(EventTypeSchema),
  description: Type.Union([Type.String(), Type.Null()]),
  status: Type.Union([Type.Literal('enabled'), Type.Literal('disabled')]),
  disabledReason: Type.Optional(Type.String()),
  createdAt: Type.String({ format: 'date-time' }),
};

export const Webhook = Type.Object(endpointFields, {
  description: 'A webhook endpoint (its secret is not shown here).',
});
export const WebhookWithSecret = Type.Object(
  {
    ...endpointFields,
    secret: Type.String({
      description: 'Standard Webhooks signing secret: `whsec_` and base64 of 32 random bytes.',
      examples: ['whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'],
    }),
  },
  { description: 'A webhook endpoint with its signing secret.' },
);
export const WebhookList = Type.Array(Webhook);

export const WebhookIdParam = Type.Object({
  id: Type.String({
    minLength: 1,
    maxLength: 64,
    description: 'The endpoint id.',
    examples: ['whk_3kq9xv7m2p'],
  }),
});

export const Attempt = Type.Object({
  id: Type.String(),
  eventId: Type.String(),
  eventType: EventTypeSchema,
  attempt: Type.Integer({ minimum: 1, description: '1 for the first attempt of this delivery.' }),
  timestamp: Type.String({ format: 'date-time' }),
  status: Type.Union([Type.Integer(), Type.Null()], {
    description: "The receiver's HTTP status; null when none came.",
  }),
  outcome: Type.Union([Type.Literal('succeeded'), Type.Literal('retrying'), Type.Literal('failed')]),
  error: Type.Optional(Type.String()),
  durationMs: Type.Integer(),
  nextAttemptAt: Type.Optional(Type.String({ format: 'date-time' })),
});
export const AttemptList = Type.Array(Attempt);

export const AttemptsQuery = Type.Object(
  {
    limit: Type.Optional(
      Type.String({
        pattern: LIMIT_TEXT,
        description: 'Page size: 1 … 1000, default 100.',
      }),
    ),
    cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 512 })),
  },
  { additionalProperties: false },
);

export const RecoverBody = Type.Object(
  {
    since: Type.String({
      format: 'date-time',
      description: 'Re-send every event since this time that the endpoint has not acknowledged.',
      examples: ['2026-11-22T09:00:00Z'],
    }),
  },
  { additionalProperties: false, examples: [{ since: '2026-11-22T09:00:00Z' }] },
);

const eventCause = {
  actor: Type.Union([Type.String(), Type.Null()], {
    description:
      "The user name of the caller whose request caused it; null for the service's own actions (and events written before version 5).",
  }),
  requestId: Type.Union([Type.String(), Type.Null()], {
    description:
      'The `X-Request-Id` of the request that caused it, as the service answered it; null when none.',
  }),
};
const Time = Type.String({ format: 'date-time' });
const roleName = (description: string) =>
  Type.Union([Type.Literal('viewer'), Type.Literal('editor'), Type.Literal('owner')], { description });

const PlantEventSchema = Type.Object(
  {
    type: Type.Union([
      Type.Literal('plant.created'),
      Type.Literal('plant.updated'),
      Type.Literal('plant.deleted'),
      Type.Literal('plant.restored'),
    ]),
    timestamp: Time,
    ...eventCause,
    data: Type.Object(
      {
        id: Type.Integer({ minimum: 1, maximum: 9007199254740991 }),
        name: Type.String(),
        tag: Type.Optional(Type.String()),
        garden: Type.String({ description: "The plant's garden." }),
        previous: Type.Optional(
          Type.Object(
            {
              name: Type.Optional(Type.String()),
              tag: Type.Optional(Type.Union([Type.String(), Type.Null()])),
            },
            {
              description:
                "plant.updated only: the changed fields' former values (`tag: null` when the change added a tag).",
            },
          ),
        ),
      },
      {
        description:
          'The plant (for plant.deleted: as it was; for plant.updated: after the change; for plant.restored: as it is back).',
      },
    ),
  },
  { title: 'PlantEvent' },
);

// A trashed plant erased for good (contract 13.2): only its id and garden, so that every member of
// the garden (viewers too) may be told without being shown the plant.
const PurgedEventSchema = Type.Object(
  {
    type: Type.Literal('plant.purged'),
    timestamp: Time,
    ...eventCause,
    data: Type.Object(
      {
        id: Type.Integer({ minimum: 1, maximum: 9007199254740991 }),
        garden: Type.String({ description: "The plant's garden." }),
      },
      { description: "The plant erased from its garden's trash: its id and garden only." },
    ),
  },
  { title: 'PurgedEvent' },
);

const MemberEventSchema = Type.Object(
  {
    type: Type.Union([
      Type.Literal('member.added'),
      Type.Literal('member.changed'),
      Type.Literal('member.removed'),
    ]),
    timestamp: Time,
    ...eventCause,
    data: Type.Object(
      {
        garden: Type.String(),
        user: Type.String({ description: 'The member whose membership changed.' }),
        role: roleName('Its role now; on member.removed, the role it had.'),
        previous: Type.Optional(roleName('member.changed only: the role it had before.')),
      },
      { description: "A garden's membership change." },
    ),
  },
  { title: 'MemberEvent' },
);

// History and activity (contract 13.3): each event as a webhook's body, with the event's id.
const EventIdField = {
  id: Type.String({ description: 'The event id (`evt_…`), as webhooks send it in `webhook-id`.' }),
};
export const HistoryEvent = Type.Union(
  [
    Type.Object({ ...EventIdField, ...PlantEventSchema.properties }, { title: 'PlantHistoryEvent' }),
    Type.Object({ ...EventIdField, ...PurgedEventSchema.properties }, { title: 'PurgedHistoryEvent' }),
    Type.Object({ ...EventIdField, ...MemberEventSchema.properties }, { title: 'MemberHistoryEvent' }),
  ],
  { title: 'HistoryEvent' },
);
export const HistoryPage = Type.Array(HistoryEvent, { title: 'HistoryPage' });

export const EventSchema = Type.Union([PlantEventSchema, PurgedEventSchema, MemberEventSchema], {
  $id: 'Event',
  title: 'Event',
  examples: [
    {
      type: 'plant.created',
      timestamp: '2026-11-22T10:00:00.000Z',
      actor: 'alice',
      requestId: '4f8c2a9e-6b1d-4c3e-9a7f-2d5e8b1c0a6f',
      data: { id: 42, name: 'Fern', tag: 'indoor', garden: 'gdn_5b1f0c3a9e2d4f6a8b7c1d0e' },
    },
    {
      type: 'plant.updated',
      timestamp: '2026-11-22T10:05:00.000Z',
      actor: 'alice',
      requestId: 'a1b2c3',
      data: {
        id: 42,
        name: 'Boston fern',
        tag: 'indoor',
        garden: 'gdn_5b1f0c3a9e2d4f6a8b7c1d0e',
        previous: { name: 'Fern' },
      },
    },
    {
      type: 'member.changed',
      timestamp: '2026-11-22T10:06:00.000Z',
      actor: 'alice',
      requestId: 'b2c3d4',
      data: { garden: 'gdn_5b1f0c3a9e2d4f6a8b7c1d0e', user: 'bob', role: 'editor', previous: 'viewer' },
    },
  ],
});

const deliveryHeaders = [
  ['webhook-id', 'The event id; the same on every retry: use it to drop duplicates.', 'evt_9x2Qm4…'],
  ['webhook-timestamp', 'Unix seconds of this attempt.', '1795348800'],
  [
    'webhook-signature',
    'Space-separated `v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`, one per secret in use (two for 24 h after a rotation).',
    'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
  ],
].map(([name, description, example]) => ({
  name,
  in: 'header',
  required: true,
  description,
  schema: { type: 'string' },
  example,
}));

const delivery = (type: string, summary: string) => ({
  post: {
    operationId: `webhook_${type.replace('.', '_')}`,
    summary,
    // plantstore sends no bearer token: a delivery proves itself by its signature.
    security: [],
    description:
      'A Standard Webhooks 1.0 delivery, at least once. Answer 2xx within the timeout (default 15 s) to acknowledge; anything else is retried on the schedule, honouring Retry-After; 410 Gone disables the endpoint.',
    parameters: deliveryHeaders,
    requestBody: {
      required: true,
      content: { 'application/json': { schema: { $ref: '#/components/schemas/Event' } } },
    },
    responses: {
      '2XX': { description: 'Acknowledged.' },
      '410': { description: 'Gone: the endpoint is disabled and receives nothing more.' },
      default: { description: 'Not acknowledged: retried later.' },
    },
  },
});

/** The OpenAPI 3.1 `webhooks` section: the deliveries a registered endpoint receives. */
export const WEBHOOKS_DOC = {
  'plant.created': delivery('plant.created', 'A plant was created'),
  'plant.updated': delivery(
    'plant.updated',
    'A plant was changed (data: the plant after the change, and `previous`: the changed fields as they were)',
  ),
  'plant.deleted': delivery(
    'plant.deleted',
    "A plant was deleted (data: the plant as it was); with the trash on, it waits in its garden's trash",
  ),
  'plant.restored': delivery(
    'plant.restored',
    "A plant was restored from its garden's trash (data: the plant as it is back)",
  ),
  'plant.purged': delivery(
    'plant.purged',
    "A trashed plant was erased for good, by a member or by the service's own purge (data: id and garden only)",
  ),
  'member.added': delivery('member.added', 'A member was added to a garden (data: garden, user, role)'),
  'member.changed': delivery(
    'member.changed',
    "A member's role in a garden was changed (data: garden, user, role, and `previous`: the role it had)",
  ),
  'member.removed': delivery(
    'member.removed',
    'A member was removed from a garden, or left it (data: garden, user, and the role it had)',
  ),
};
