import { type Static, Type } from 'typebox';
import { LIMIT_TEXT, PlantId, PlantName, PlantTag } from './plant.js';

// The trash (contract 13.2): its page's elements and query.

export const TrashItem = Type.Object(
  {
    id: PlantId,
    name: PlantName,
    tag: Type.Optional(PlantTag),
    garden: Type.String({ description: "The plant's garden.", examples: ['gdn_3f9a1c0e5b7d2a4c6e8f0b1d'] }),
    deletedAt: Type.String({ format: 'date-time', description: 'When it was deleted.' }),
    deletedBy: Type.String({ description: 'The user name of the caller that deleted it.' }),
    purgeAt: Type.String({
      format: 'date-time',
      description: "When the service's own purge erases it (its deletion plus `TRASH_RETENTION`).",
    }),
  },
  { additionalProperties: false, title: 'TrashItem' },
);
export type TrashItem = Static<typeof TrashItem>;
export const TrashList = Type.Array(TrashItem, { title: 'TrashList' });

export const TrashQuery = Type.Object(
  {
    garden: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 200,
        description:
          "Only this garden's trash. A garden the caller is not a member of: 404, as one that does not exist; one where it is a viewer: 403 `insufficient_role`.",
        examples: ['gdn_3f9a1c0e5b7d2a4c6e8f0b1d'],
      }),
    ),
    limit: Type.Optional(
      Type.String({
        pattern: LIMIT_TEXT,
        description: 'Page size: 1 … 1000 in decimal digits, default 100 (as the plant list).',
        examples: ['20'],
      }),
    ),
    cursor: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 512,
        description: 'Opaque token from a `Link: rel="next"` header, bound to the caller and to `garden`.',
      }),
    ),
  },
  { additionalProperties: false },
);
export type TrashQuery = Static<typeof TrashQuery>;
