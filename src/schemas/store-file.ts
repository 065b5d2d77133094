import { type Static, Type } from 'typebox';
import { Role } from './garden.js';
import { PlantId, storedText } from './plant.js';
import { ScopeName, UserName } from './token.js';
import { EventTypeSchema, WebhookDescription, WebhookUrl } from './webhook.js';

// The records of an export file (contract section 12): one JSON line each, the same from either
// engine. Times are ISO 8601 strings; event types and roles are the API's words; an endpoint's
// progress is the id of the last kept event at or before its position (null: before them all).
// Each field the API takes from a client has the API's own schema here (names, tags, users,
// scopes, URLs), so an import takes nothing a request could not have made, with one exception:
// names, tags and labels follow the rule every release had (not only whitespace, no control
// characters), not version 5's visible-character rule, so a store that holds a name made before it
// can still move (its events hold that name too); what the records say
// of each other (a plant's garden, an endpoint's token, the counters) is ops/store-file-rules.ts.

const Str = Type.String();
// Printable ASCII without spaces, as user names are: every id the service makes is.
const Id = Type.String({ ...UserName, description: 'An id: 1–200 printable ASCII characters, no spaces.' });
const Time = Type.String({ format: 'date-time' });
const MaybeTime = Type.Union([Time, Type.Null()]);
const MaybeStr = Type.Union([Str, Type.Null()]);
const Int = (min = 0) => Type.Integer({ minimum: min, maximum: Number.MAX_SAFE_INTEGER });
const strict = { additionalProperties: false } as const;

const EventTypeName = EventTypeSchema;
const User = UserName;
const MaybeUser = Type.Union([User, Type.Null()]);
const PlantName = storedText(200, 'Plant name as stored.');
const GardenName = storedText(100, 'Garden name as stored.');
const TokenName = storedText(200, 'Token name as stored.');
const MaybeTag = Type.Union([storedText(100, 'Plant tag as stored.'), Type.Null()]);

export const GardenLine = Type.Object(
  {
    kind: Type.Literal('garden'),
    id: Id,
    name: GardenName,
    homeUser: MaybeUser,
    /** '': not recorded (gardens made before version 3 recorded no maker). */
    createdBy: Type.Union([User, Type.Literal('')]),
    createdAt: Time,
    seq: Int(1),
  },
  strict,
);

export const MemberLine = Type.Object(
  {
    kind: Type.Literal('member'),
    garden: Id,
    user: User,
    role: Role,
    addedAt: Time,
  },
  strict,
);

export const PlantLine = Type.Object(
  {
    kind: Type.Literal('plant'),
    id: PlantId,
    garden: Id,
    owner: User,
    name: PlantName,
    tag: MaybeTag,
    version: Int(1),
  },
  strict,
);

export const TokenLine = Type.Object(
  {
    kind: Type.Literal('token'),
    id: Id,
    user: User,
    name: Type.Union([TokenName, Type.Null()]),
    scopes: Type.Array(ScopeName, { minItems: 1, uniqueItems: true }),
    hash: Type.String({ minLength: 1 }),
    createdAt: Time,
    expiresAt: MaybeTime,
    revokedAt: MaybeTime,
    lastUsedAt: MaybeTime,
    seq: Int(1),
  },
  strict,
);

// An event: a plant's change (`plant`, and `previous` as its data has it) or a membership change
// (`member`, version 5); who caused it (version 5: absent in older files, where it means null).
export const EventLine = Type.Object(
  {
    kind: Type.Literal('event'),
    id: Type.String({ pattern: '^evt_[0-9A-Za-z_-]{1,64}$' }),
    type: EventTypeName,
    owner: User,
    garden: Str,
    // plant.purged (version 5): the plant's id alone.
    plant: Type.Optional(
      Type.Union([
        Type.Object({ id: PlantId, name: PlantName, tag: MaybeTag }, strict),
        Type.Object({ id: PlantId }, strict),
      ]),
    ),
    previous: Type.Optional(
      Type.Union([
        Type.Object({ name: Type.Optional(PlantName), tag: Type.Optional(MaybeTag) }, strict),
        Type.Null(),
      ]),
    ),
    member: Type.Optional(
      Type.Object({ user: User, role: Role, previous: Type.Union([Role, Type.Null()]) }, strict),
    ),
    createdAt: Time,
    actor: Type.Optional(MaybeUser),
    requestId: Type.Optional(MaybeStr),
  },
  strict,
);

export const WebhookLine = Type.Object(
  {
    kind: Type.Literal('webhook'),
    id: Id,
    owner: User,
    admin: Type.Boolean(),
    adminToken: MaybeStr,
    adminUntil: MaybeTime,
    url: WebhookUrl,
    events: Type.Array(EventTypeName, { minItems: 1, uniqueItems: true }),
    description: Type.Union([WebhookDescription, Type.Null()]),
    secret: Type.String({ minLength: 1 }),
    previousSecret: MaybeStr,
    previousSecretUntil: MaybeTime,
    status: Type.Union([Type.Literal('enabled'), Type.Literal('disabled')]),
    disabledReason: MaybeStr,
    createdAt: Time,
    lastSuccessAt: MaybeTime,
    failingSince: MaybeTime,
    seq: Int(1),
    /** Every event of its up to and including this one was sent or queued; null: none yet. */
    after: MaybeStr,
  },
  strict,
);

export const DeliveryLine = Type.Object(
  {
    kind: Type.Literal('delivery'),
    event: Id,
    endpoint: Id,
    attempts: Int(),
    nextAttemptAt: Time,
    createdAt: Time,
  },
  strict,
);

export const IdempotencyLine = Type.Object(
  {
    kind: Type.Literal('idempotency'),
    user: User,
    key: Str,
    requestHash: Str,
    state: Type.Union([Type.Literal('pending'), Type.Literal('done')]),
    status: Type.Union([Type.Integer(), Type.Null()]),
    plantId: Type.Union([Int(), Type.Null()]),
    response: MaybeStr,
    createdAt: Time,
    lockedAt: Time,
  },
  strict,
);

/** The largest plant id and plant version ever given: new ones start after them. */
export const CountersLine = Type.Object(
  { kind: Type.Literal('counters'), plantId: Int(), version: Int() },
  strict,
);

/** Each kind's schema, for an error that names the field of that kind which failed. */
export const RECORD_SCHEMAS = {
  garden: GardenLine,
  member: MemberLine,
  plant: PlantLine,
  token: TokenLine,
  event: EventLine,
  webhook: WebhookLine,
  delivery: DeliveryLine,
  idempotency: IdempotencyLine,
  counters: CountersLine,
} as const;

export const StoreRecord = Type.Union([
  GardenLine,
  MemberLine,
  PlantLine,
  TokenLine,
  EventLine,
  WebhookLine,
  DeliveryLine,
  IdempotencyLine,
  CountersLine,
]);

export type GardenLine = Static<typeof GardenLine>;
export type MemberLine = Static<typeof MemberLine>;
export type PlantLine = Static<typeof PlantLine>;
export type TokenLine = Static<typeof TokenLine>;
export type EventLine = Static<typeof EventLine>;
export type WebhookLine = Static<typeof WebhookLine>;
export type DeliveryLine = Static<typeof DeliveryLine>;
export type IdempotencyLine = Static<typeof IdempotencyLine>;
export type CountersLine = Static<typeof CountersLine>;
export type StoreRecord = Static<typeof StoreRecord>;
export type RecordKind = StoreRecord['kind'];

/** The kinds in the order an export writes them: what a record refers to comes before it. */
export const RECORD_KINDS: readonly RecordKind[] = [
  'garden',
  'member',
  'plant',
  'token',
  'event',
  'webhook',
  'delivery',
  'idempotency',
  'counters',
];

export const StoreFileHeader = Type.Object(
  {
    format: Type.Literal('plantstore-export'),
    version: Type.Literal(1),
    schema: Type.Object({ engine: Type.String(), migration: Type.Integer({ minimum: 0 }) }),
    createdAt: Time,
  },
  strict,
);
export type StoreFileHeader = Static<typeof StoreFileHeader>;
