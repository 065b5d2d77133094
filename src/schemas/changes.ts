import { type Static, Type } from 'typebox';
import { LIMIT_TEXT, PlantId } from './plant.js';

// The change feed's request and answer (contract 13.4).

export const ChangesQuery = Type.Object(
  {
    since: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 512,
        description:
          'The `next` of an earlier answer: what changed since then. Absent: every plant the caller sees now, as upserts by id (the first sync). Malformed, or issued to another user or for another `garden`: 400; older than the events kept: 410 `changes_expired`.',
      }),
    ),
    limit: Type.Optional(
      Type.String({
        pattern: LIMIT_TEXT,
        description:
          'Most changes in one answer: 1 … 1000 in decimal digits, default 100 (as the plant list).',
        examples: ['500'],
      }),
    ),
    garden: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 200,
        description:
          "Only this garden's plants. A garden the caller is not a member of answers 404, as one that does not exist; a `since` is bound to it.",
        examples: ['gdn_3f9a1c0e5b7d2a4c6e8f0b1d'],
      }),
    ),
  },
  { additionalProperties: false },
);
export type ChangesQuery = Static<typeof ChangesQuery>;

const Upsert = Type.Object(
  {
    id: PlantId,
    op: Type.Literal('upsert'),
    plant: Type.Object(
      {
        id: PlantId,
        name: Type.String(),
        tag: Type.Optional(Type.String()),
        garden: Type.String(),
        version: Type.Integer({ minimum: 1 }),
      },
      { description: 'The plant as it is now (tag only when set).' },
    ),
  },
  { title: 'ChangeUpsert', description: 'The plant exists and the caller sees it: put it in the copy.' },
);
const Delete = Type.Object(
  { id: PlantId, op: Type.Literal('delete') },
  {
    title: 'ChangeDelete',
    description:
      'The caller does not see this plant now (deleted, trashed, or its garden left, removed from or deleted): remove it from the copy.',
  },
);

export const ChangesPage = Type.Object(
  {
    changes: Type.Array(Type.Union([Upsert, Delete]), {
      description: 'Each plant id at most once, with its latest state, by id.',
    }),
    next: Type.String({ description: 'The position after this answer: send it as `since` next time.' }),
    more: Type.Boolean({
      description: 'Whether to ask again with `next` at once (false: the copy is up to date).',
    }),
  },
  {
    title: 'ChangesPage',
    examples: [
      {
        changes: [
          {
            id: 42,
            op: 'upsert',
            plant: {
              id: 42,
              name: 'Fern',
              tag: 'indoor',
              garden: 'gdn_3f9a1c0e5b7d2a4c6e8f0b1d',
              version: 7,
            },
          },
          { id: 43, op: 'delete' },
        ],
        next: 'bDEyMzQ1LjY3OC5hYmNkZWZnaGlqa2xtbm9w',
        more: false,
      },
    ],
  },
);
