import { type Static, Type } from 'typebox';
import { ROLES } from '../access/policy.js';
import { text } from './plant.js';

const GARDEN_ID_EXAMPLE = 'gdn_3f9a1c0e5b7d2a4c6e8f0b1d';

export const GardenName = text(100, 'Garden name: 1–100 characters, not blank, no control characters.');

export const Role = Type.Union([Type.Literal(ROLES[0]), Type.Literal(ROLES[1]), Type.Literal(ROLES[2])], {
  description:
    '`viewer`: lists and reads the plants; `editor`: also creates, changes and deletes them; `owner`: also renames the garden, deletes it when empty, and manages its members.',
});

export const Garden = Type.Object(
  {
    id: Type.String({ description: 'Opaque: `gdn_` and 24 hex digits.', examples: [GARDEN_ID_EXAMPLE] }),
    name: GardenName,
    home: Type.Boolean({ description: "True only for the caller's own home garden." }),
    role: { ...Role, description: "The caller's role here (`owner` for an admin who is not a member)." },
    createdAt: Type.String({ format: 'date-time' }),
  },
  { additionalProperties: false, title: 'Garden' },
);
export type Garden = Static<typeof Garden>;

export const GardenList = Type.Array(Garden, { title: 'GardenList' });

export const GardenCreate = Type.Object(
  { name: GardenName },
  { additionalProperties: false, title: 'GardenCreate', examples: [{ name: 'Greenhouse' }] },
);
export type GardenCreate = Static<typeof GardenCreate>;

export const GardenPatch = Type.Object(
  { name: GardenName },
  { additionalProperties: false, title: 'GardenPatch', examples: [{ name: 'Glasshouse' }] },
);

export const Member = Type.Object(
  {
    user: Type.String({ description: 'The user, as its tokens name it.' }),
    role: Role,
    addedAt: Type.String({ format: 'date-time' }),
  },
  { additionalProperties: false, title: 'Member' },
);
export const MemberList = Type.Array(Member, { title: 'MemberList' });

export const MemberPut = Type.Object(
  { role: Role },
  { additionalProperties: false, title: 'MemberPut', examples: [{ role: 'editor' }] },
);
export type MemberPut = Static<typeof MemberPut>;

export const GardenIdParam = Type.Object(
  {
    gid: Type.String({
      description:
        'A garden id. One the caller is not a member of answers 404, exactly as one that does not exist.',
      examples: [GARDEN_ID_EXAMPLE],
    }),
  },
  { additionalProperties: false },
);

export const MemberParams = Type.Object(
  {
    gid: GardenIdParam.properties.gid,
    user: Type.String({
      description: "The member's user name, URL-encoded (1–200 printable characters, no spaces).",
      examples: ['alice'],
    }),
  },
  { additionalProperties: false },
);
