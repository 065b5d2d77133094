import { type Static, Type } from 'typebox';

// Its own module, so that the SQLite writer thread does not load TypeBox to know it.
import { MAX_PLANT_ID } from '../plant-id.js';

export { MAX_PLANT_ID };

// One pattern for "no control characters and at least one non-whitespace character"; the error
// formatter looks at the value to say which half failed. It runs on request input, also on text
// already too long (Ajv's allErrors), so it must not backtrack: the leading run takes only
// whitespace and the character after it must not be whitespace, so where one part ends and the
// next begins is never in doubt and the time is linear in the text's length
// (test/unit/redos.test.ts checks every pattern in src/). [^\S…] is "whitespace that is not a
// control character": tab and newline are refused as before.
const TEXT_PATTERN = '^[^\\S\\u0000-\\u001F\\u007F]*[^\\s\\u0000-\\u001F\\u007F][^\\u0000-\\u001F\\u007F]*$';

export const text = (maxLength: number, description: string) =>
  Type.String({ minLength: 1, maxLength, pattern: TEXT_PATTERN, description });

export const PlantName = text(200, 'Plant name: 1–200 characters, not blank, no control characters.');
export const PlantTag = text(100, 'Plant tag: 1–100 characters, not blank, no control characters.');

export const PlantId = Type.Integer({
  minimum: 1,
  maximum: MAX_PLANT_ID,
  description: 'Plant identifier, 1 … 2^53−1.',
});

// A tag a request may send as null (a create: none; a change: remove it).
const nullableTag = (description: string) =>
  Type.Optional(Type.Unsafe<string | null>({ ...PlantTag, type: ['string', 'null'], description }));

export const PlantCreate = Type.Object(
  {
    id: Type.Optional(
      Type.Unsafe<number | null>({
        ...PlantId,
        type: ['integer', 'null'],
        description: 'Optional; when absent or null the service assigns one.',
      }),
    ),
    name: PlantName,
    tag: nullableTag('Optional; null means absent.'),
  },
  {
    additionalProperties: false,
    title: 'PlantCreate',
    // The request example: a client, /docs or a contract tester sends this and gets a 201.
    examples: [{ name: 'Monstera', tag: 'indoor' }],
  },
);
export type PlantCreate = Static<typeof PlantCreate>;

export const PlantPatch = Type.Object(
  {
    name: Type.Optional({ ...PlantName, description: 'The new name; absent: unchanged (null is refused).' }),
    tag: nullableTag('The new tag; null removes it; absent: unchanged.'),
  },
  {
    additionalProperties: false,
    title: 'PlantPatch',
    description: 'A JSON Merge Patch (RFC 7396) of the plant: only the fields present change.',
    examples: [{ name: 'Boston fern', tag: null }],
  },
);
export type PlantPatch = Static<typeof PlantPatch>;

export const Plant = Type.Object(
  { name: PlantName, tag: Type.Optional(PlantTag) },
  { additionalProperties: false, title: 'Plant' },
);
export type Plant = Static<typeof Plant>;

export const PlantListItem = Type.Object(
  {
    id: Type.Optional({ ...PlantId, description: 'Present with `include=id`.' }),
    garden: Type.Optional(
      Type.String({
        description: "Present with `include=garden`: the id of the plant's garden.",
        examples: ['gdn_3f9a1c0e5b7d2a4c6e8f0b1d'],
      }),
    ),
    version: Type.Optional(
      Type.Integer({
        minimum: 1,
        description:
          "Present with `include=version`: the plant's version; its ETag is the version in quotes.",
      }),
    ),
    name: PlantName,
    tag: Type.Optional(PlantTag),
  },
  { additionalProperties: false, title: 'PlantListItem' },
);
export type PlantListItem = Static<typeof PlantListItem>;

export const PlantList = Type.Array(PlantListItem, { title: 'PlantList' });

// Path and query parameters arrive as text; their exact forms are the contract's (the OpenAPI
// document shows them as the integers they are: schemas/document.ts).
export const ID_TEXT = '^[1-9][0-9]{0,15}$';
export const LIMIT_TEXT = '^(?:[1-9][0-9]{0,2}|1000)$';
export const PlantIdParam = Type.Object(
  {
    id: Type.String({
      pattern: ID_TEXT,
      description: 'Plant id in decimal, 1 … 9007199254740991, no sign or leading zero.',
    }),
  },
  { additionalProperties: false },
);

// Search's text (contract 2's `q`); the rest of its rules (1–100 characters after trimming, at
// most 8 terms, no control characters) are search-text.ts's, which names the one broken.
const SearchText = Type.String({
  minLength: 1,
  maxLength: 1000,
  description:
    'Search by name: 1–100 characters after trimming, up to 8 terms split on whitespace; a plant matches when every term is a prefix of a word of its name (words: runs of letters and digits), ignoring case and accents. `q=mon del` finds "Monstera deliciosa".',
  examples: ['mon del'],
});

export const ListQuery = Type.Object(
  {
    limit: Type.Optional(
      Type.String({
        pattern: LIMIT_TEXT,
        description: 'Page size: 1 … 1000 in decimal digits, default 100.',
        examples: ['20'],
      }),
    ),
    tag: Type.Optional({ ...PlantTag, description: 'Only plants with exactly this tag.' }),
    include: Type.Optional(
      Type.String({
        pattern: '^(?:id|version|garden)(?:,(?:id|version|garden)){0,2}$',
        description:
          'A comma-separated list of `id`, `garden` and `version`, each at most once, in any order: each element also carries those fields, `{id, garden, version, name, tag}` (the version is the one its ETag names, for a change or delete with If-Match).',
        examples: ['id,version'],
      }),
    ),
    garden: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 200,
        description:
          "Only this garden's plants. A garden the caller is not a member of answers 404, as one that does not exist.",
        examples: ['gdn_3f9a1c0e5b7d2a4c6e8f0b1d'],
      }),
    ),
    q: Type.Optional(SearchText),
    cursor: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 512,
        description: 'Opaque token from a `Link: rel="next"` header.',
      }),
    ),
  },
  { additionalProperties: false },
);
export type ListQuery = Static<typeof ListQuery>;

export const PlantBatch = Type.Object(
  {
    plants: Type.Array(PlantCreate, {
      minItems: 1,
      maxItems: 1000,
      description: 'The plants to create, 1 … 1000, each as `POST /plants` takes one.',
    }),
    garden: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 200,
        description: "The garden to create them in (else `?garden=`, else the caller's home garden).",
        examples: ['gdn_3f9a1c0e5b7d2a4c6e8f0b1d'],
      }),
    ),
  },
  {
    additionalProperties: false,
    title: 'PlantBatch',
    examples: [{ plants: [{ name: 'Monstera', tag: 'indoor' }, { name: 'Boston fern' }] }],
  },
);
export type PlantBatch = Static<typeof PlantBatch>;

export const PlantBatchCreated = Type.Object(
  {
    created: Type.Integer({ minimum: 1, description: 'How many plants were created (all of them).' }),
    ids: Type.Array(PlantId, { description: 'Their ids, in the order of the input.' }),
  },
  { additionalProperties: false, title: 'PlantBatchCreated' },
);
export type PlantBatchCreated = Static<typeof PlantBatchCreated>;

const GardenFilter = ListQuery.properties.garden;

export const BatchQuery = Type.Object(
  {
    garden: Type.Optional({
      ...GardenFilter,
      description: "The garden for plants that name none (else the caller's home garden).",
    }),
    ids: Type.Optional(
      Type.Literal('drop', {
        description:
          '`drop`: ignore the ids given and let the service assign new ones (re-importing an export).',
      }),
    ),
  },
  { additionalProperties: false },
);
export type BatchQuery = Static<typeof BatchQuery>;

export const ExportQuery = Type.Object(
  {
    format: Type.Optional(
      Type.Union([Type.Literal('ndjson'), Type.Literal('csv')], {
        description: 'ndjson (the default) or csv; without it, `Accept: text/csv` chooses CSV.',
      }),
    ),
    delimiter: Type.Optional(
      Type.Union([Type.Literal(','), Type.Literal(';'), Type.Literal('\t')], {
        description:
          'CSV only: the delimiter between cells, `,` (the default), `;` (what Excel expects where the decimal separator is a comma, as in German or French) or a tab (`%09`). Write `;` as `%3B`, as a URL encoder does.',
      }),
    ),
    tag: ListQuery.properties.tag,
    garden: GardenFilter,
    q: Type.Optional(SearchText),
  },
  { additionalProperties: false },
);
export type ExportQuery = Static<typeof ExportQuery>;
