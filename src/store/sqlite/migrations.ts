import type { Migration } from '../migrate.js';

// Released migrations are frozen: add a new entry rather than editing one.
export const SQLITE_MIGRATIONS: Migration[] = [
  {
    version: 1,
    name: '0001_init',
    // AUTOINCREMENT keeps a high-water mark of every id ever stored (client-chosen ones included),
    // so server-assigned ids increase, are never reused and never collide with a client's.
    sql: `
      CREATE TABLE plants (
        id    INTEGER PRIMARY KEY AUTOINCREMENT,
        owner TEXT NOT NULL,
        name  TEXT NOT NULL,
        tag   TEXT
      );
      CREATE INDEX plants_owner_id ON plants (owner, id);
      CREATE INDEX plants_owner_tag_id ON plants (owner, tag, id) WHERE tag IS NOT NULL;
      CREATE INDEX plants_tag_id ON plants (tag, id) WHERE tag IS NOT NULL;

      CREATE TABLE tokens (
        id         TEXT PRIMARY KEY,
        user_id    TEXT NOT NULL,
        name       TEXT,
        scopes     TEXT NOT NULL,
        hash       TEXT NOT NULL UNIQUE,
        created_at INTEGER NOT NULL,
        expires_at INTEGER,
        revoked_at INTEGER
      );
      CREATE INDEX tokens_user_id ON tokens (user_id);

      CREATE TABLE idempotency_keys (
        user_id      TEXT NOT NULL,
        key          TEXT NOT NULL,
        request_hash TEXT NOT NULL,
        state        TEXT NOT NULL CHECK (state IN ('pending', 'done')),
        status       INTEGER,
        plant_id     INTEGER,
        created_at   INTEGER NOT NULL,
        locked_at    INTEGER NOT NULL,
        PRIMARY KEY (user_id, key)
      ) WITHOUT ROWID;
      CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);
    `,
  },
];
