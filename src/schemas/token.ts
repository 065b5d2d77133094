import { type Static, Type } from 'typebox';
import { SCOPES, type Scope } from '../access/policy.js';
import { ListQuery, text } from './plant.js';

export { SCOPES, type Scope };
export const DEFAULT_SCOPES: Scope[] = ['plants:read', 'plants:write'];

export function isScope(s: string): s is Scope {
  return (SCOPES as readonly string[]).includes(s);
}

// What the HTTP API of contract 3.3 sends and takes. Never a secret except in TokenCreated.

const TOKEN_ID_EXAMPLE = 'tok_Xq3v9LmR0aBc';
export const UserName = Type.String({
  minLength: 1,
  maxLength: 200,
  pattern: '^[\\x21-\\x7E]+$',
  description: 'A user name: 1–200 printable ASCII characters, no spaces.',
  examples: ['alice'],
});
export const TokenName = text(200, 'A label to recognise the token by: 1–200 characters.');
export const ScopeName = Type.Unsafe<Scope>(Type.Union(SCOPES.map((s) => Type.Literal(s))));
const ScopeList = Type.Array(ScopeName, {
  description: 'Scopes, as an array of strings.',
  examples: [['plants:read', 'plants:write']],
});
const DATE = Type.String({ format: 'date-time' });
const NULLABLE_DATE = (description: string) =>
  Type.Union([Type.String({ format: 'date-time' }), Type.Null()], { description });

export const TokenCreate = Type.Object(
  {
    user: Type.Optional({
      ...UserName,
      description: "Whose token; default the caller's own user. Another user's needs plants:admin.",
    }),
    scopes: Type.Optional({
      ...ScopeList,
      minItems: 1,
      maxItems: SCOPES.length,
      description:
        "Default `['plants:read', 'plants:write']`. Only scopes the caller holds, unless it holds plants:admin.",
    }),
    expiresIn: Type.Optional(
      Type.Union([Type.String({ minLength: 1, maxLength: 20, examples: ['30d'] }), Type.Null()], {
        description:
          "Lifetime: a whole number and `s`, `m`, `h` or `d`. Absent or null: never expires, or, for a caller that expires, as long as the caller's token (never longer).",
      }),
    ),
    name: Type.Optional(Type.Union([TokenName, Type.Null()])),
  },
  {
    additionalProperties: false,
    title: 'TokenCreate',
    examples: [{ scopes: ['plants:read'], expiresIn: '30d', name: 'dashboard' }],
  },
);
export type TokenCreate = Static<typeof TokenCreate>;

const tokenFields = {
  id: Type.String({ description: "The token's id (never its secret).", examples: [TOKEN_ID_EXAMPLE] }),
  user: UserName,
  scopes: ScopeList,
  name: Type.Union([Type.String(), Type.Null()], { description: 'Its label, or null.' }),
  createdAt: DATE,
  expiresAt: NULLABLE_DATE('When it stops working; null: never.'),
};

export const TokenCreated = Type.Object(
  {
    ...tokenFields,
    token: Type.String({
      description: 'The secret: `pst_` and 43 base64url characters. Shown in this answer only.',
      examples: ['pst_0b8Yf2bWkq3lRkJxTqz0m4Jv7Hn2cR5sXgP9aLdE1uQ'],
    }),
  },
  { additionalProperties: false, title: 'TokenCreated' },
);

export const TokenView = Type.Object(
  {
    ...tokenFields,
    lastUsedAt: NULLABLE_DATE('The start of the last minute it was used in; null: never used.'),
    status: Type.Union([Type.Literal('active'), Type.Literal('expired'), Type.Literal('revoked')]),
  },
  { additionalProperties: false, title: 'Token' },
);
export type TokenView = Static<typeof TokenView>;
export const TokenList = Type.Array(TokenView, { title: 'TokenList' });

export const TokenListQuery = Type.Object(
  {
    user: Type.Optional({
      ...UserName,
      description: "Only this user's tokens (another user than the caller's needs plants:admin).",
    }),
    // A page's size and continuation, exactly as GET /plants takes them.
    limit: ListQuery.properties.limit,
    cursor: ListQuery.properties.cursor,
  },
  { additionalProperties: false },
);
export type TokenListQuery = Static<typeof TokenListQuery>;

export const TokenIdParam = Type.Object(
  {
    id: Type.String({
      description:
        "A token id. Another user's token answers 404 (except to an admin), as one that does not exist.",
      examples: [TOKEN_ID_EXAMPLE],
    }),
  },
  { additionalProperties: false },
);
