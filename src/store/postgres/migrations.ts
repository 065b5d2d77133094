import type { Migration } from '../migrate.js';

// Released migrations are frozen: add a new entry rather than editing one.
export const POSTGRES_MIGRATIONS: Migration[] = [
  {
    version: 1,
    name: '0001_init',
    // Server-assigned ids come from plants_id_seq; a client-chosen id pushes the sequence past
    // itself, so server ids increase, are never reused and never collide with a client's.
    sql: `
      CREATE SEQUENCE plants_id_seq AS bigint MINVALUE 1 MAXVALUE 9007199254740991;
      CREATE TABLE plants (
        id    bigint PRIMARY KEY CHECK (id BETWEEN 1 AND 9007199254740991),
        owner text NOT NULL,
        name  text NOT NULL,
        tag   text
      );
      CREATE INDEX plants_owner_id ON plants (owner, id);
      CREATE INDEX plants_owner_tag_id ON plants (owner, tag, id) WHERE tag IS NOT NULL;
      CREATE INDEX plants_tag_id ON plants (tag, id) WHERE tag IS NOT NULL;

      CREATE TABLE tokens (
        id         text PRIMARY KEY,
        user_id    text NOT NULL,
        name       text,
        scopes     text NOT NULL,
        hash       text NOT NULL UNIQUE,
        created_at timestamptz NOT NULL,
        expires_at timestamptz,
        revoked_at timestamptz
      );
      CREATE INDEX tokens_user_id ON tokens (user_id);

      CREATE TABLE idempotency_keys (
        user_id      text NOT NULL,
        key          text NOT NULL,
        request_hash text NOT NULL,
        state        text NOT NULL CHECK (state IN ('pending', 'done')),
        status       integer,
        plant_id     bigint,
        created_at   timestamptz NOT NULL,
        locked_at    timestamptz NOT NULL,
        PRIMARY KEY (user_id, key)
      );
      CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);
    `,
  },
];
