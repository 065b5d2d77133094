import type Database from 'better-sqlite3';
import type { Migration } from '../migrate.js';
import { fillSearch, fillWords, SEARCH_TABLE, WORDS_TABLE } from './search.js';

// Released migrations are frozen: add a new entry rather than editing one.
export const SQLITE_MIGRATIONS: Migration<Database.Database>[] = [
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
  {
    version: 2,
    name: '0002_events',
    // The event log, written in the transaction of the change it describes; SQLite has one writer,
    // so seq order is commit order. Endpoint event types are a bit mask (1 created, 2 deleted).
    // Events carry no index beyond their keys: every page an insert touches is written to the WAL
    // and synced with the create, and readers (streams, purge) go by seq, which follows time.
    sql: `
      CREATE TABLE events (
        seq        INTEGER PRIMARY KEY AUTOINCREMENT,
        id         TEXT NOT NULL UNIQUE,
        type       TEXT NOT NULL,
        owner      TEXT NOT NULL,
        data       TEXT NOT NULL,
        created_at INTEGER NOT NULL
      );

      CREATE TABLE webhook_endpoints (
        id                    TEXT PRIMARY KEY,
        owner                 TEXT NOT NULL,
        admin                 INTEGER NOT NULL,
        url                   TEXT NOT NULL,
        events                INTEGER NOT NULL,
        description           TEXT,
        secret                TEXT NOT NULL,
        previous_secret       TEXT,
        previous_secret_until INTEGER,
        status                TEXT NOT NULL CHECK (status IN ('enabled', 'disabled')),
        disabled_reason       TEXT,
        created_at            INTEGER NOT NULL,
        last_success_at       INTEGER
      );
      CREATE INDEX webhook_endpoints_owner ON webhook_endpoints (owner, created_at);
      CREATE INDEX webhook_endpoints_admin ON webhook_endpoints (admin) WHERE admin = 1;

      CREATE TABLE deliveries (
        id              INTEGER PRIMARY KEY AUTOINCREMENT,
        event_id        TEXT NOT NULL,
        endpoint_id     TEXT NOT NULL,
        state           TEXT NOT NULL CHECK (state IN ('pending', 'succeeded', 'failed')),
        attempts        INTEGER NOT NULL DEFAULT 0,
        next_attempt_at INTEGER NOT NULL,
        lease_owner     TEXT,
        lease_until     INTEGER,
        created_at      INTEGER NOT NULL
      );
      CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE state = 'pending';
      CREATE INDEX deliveries_endpoint_event ON deliveries (endpoint_id, event_id);
      CREATE INDEX deliveries_event ON deliveries (event_id);

      CREATE TABLE delivery_attempts (
        id              INTEGER PRIMARY KEY AUTOINCREMENT,
        delivery_id     INTEGER NOT NULL,
        endpoint_id     TEXT NOT NULL,
        event_id        TEXT NOT NULL,
        event_type      TEXT NOT NULL,
        attempt         INTEGER NOT NULL,
        at              INTEGER NOT NULL,
        status          INTEGER,
        outcome         TEXT NOT NULL,
        error           TEXT,
        duration_ms     INTEGER NOT NULL,
        next_attempt_at INTEGER
      );
      CREATE INDEX delivery_attempts_endpoint ON delivery_attempts (endpoint_id, id);
      CREATE INDEX delivery_attempts_at ON delivery_attempts (at);
    `,
  },
  {
    version: 3,
    name: '0003_compact_event_log',
    unsafeWhileServing:
      'it replaces the events table with a new shape (DROP TABLE, RENAME): the previous release can no longer read or write its events',
    // The event log in a cheaper shape: every create and delete writes a row, synced with it, so the
    // row is small (type as a number, the plant as columns) and has no index beyond its seq. Event
    // ids are derived from the log's own key and the seq (events.ts), so nothing indexes them;
    // events written before keep their ids in legacy_id. No AUTOINCREMENT (it writes a page of its
    // own with every commit): purging leaves the newest row, emptied, so a seq is never used twice.
    // Deliveries carry their event's seq.
    // Endpoints: when their deliveries began failing with none acknowledged since (five days of that
    // disables one); endpoints failing when this lands start counting at their next failure.
    // Claims take each endpoint's due deliveries through deliveries_endpoint_due.
    sql: `
      CREATE TABLE event_log (key TEXT NOT NULL);
      INSERT INTO event_log (key) VALUES (lower(hex(randomblob(8))));

      CREATE TABLE events_v3 (
        seq        INTEGER PRIMARY KEY,
        type       INTEGER NOT NULL,
        owner      TEXT NOT NULL,
        plant_id   INTEGER NOT NULL,
        name       TEXT NOT NULL,
        tag        TEXT,
        created_at INTEGER NOT NULL,
        legacy_id  TEXT
      );
      INSERT INTO events_v3 (seq, type, owner, plant_id, name, tag, created_at, legacy_id)
        SELECT seq, CASE type WHEN 'plant.created' THEN 1 ELSE 2 END, owner, json_extract(data, '$.id'),
          json_extract(data, '$.name'), json_extract(data, '$.tag'), created_at, id
        FROM events;
      DROP TABLE events;
      ALTER TABLE events_v3 RENAME TO events;
      CREATE UNIQUE INDEX events_legacy_id ON events (legacy_id) WHERE legacy_id IS NOT NULL;

      ALTER TABLE deliveries ADD COLUMN event_seq INTEGER NOT NULL DEFAULT 0;
      UPDATE deliveries SET event_seq = coalesce((SELECT seq FROM events WHERE legacy_id = deliveries.event_id), 0);

      ALTER TABLE webhook_endpoints ADD COLUMN failing_since INTEGER;
      CREATE INDEX deliveries_endpoint_due ON deliveries (endpoint_id, next_attempt_at, id) WHERE state = 'pending';
    `,
  },
  {
    version: 4,
    name: '0004_list_pages',
    unsafeWhileServing:
      'it drops the plants list indexes the previous release reads and builds their successors under the write lock',
    // The list paths read only their index: each index carries the columns a page shows, so a page
    // of one owner's plants is a walk along a few adjacent index pages, not one table lookup per row
    // (~1.8× faster on 100,000 plants, docs/benchmarks.md).
    // list_marks tells cached list pages when they may have changed, whichever connection or process
    // wrote: per scope ('u:' || owner, or '*' for everyone's plants) and tag ('t:' || tag, or '*'
    // for every tag), `top` is the largest id ever created there, and on the '*' tag rows `reorder`
    // moves when a plant is deleted or created below `top`. A created plant above `top` lands after
    // every page but the last, so only last pages depend on `top`. Kept by triggers, in the write's
    // own transaction.
    sql: `
      DROP INDEX plants_owner_id;
      CREATE INDEX plants_owner_page ON plants (owner, id, name, tag);
      DROP INDEX plants_owner_tag_id;
      CREATE INDEX plants_owner_tag_page ON plants (owner, tag, id, name) WHERE tag IS NOT NULL;
      DROP INDEX plants_tag_id;
      CREATE INDEX plants_tag_page ON plants (tag, id, owner, name) WHERE tag IS NOT NULL;

      CREATE TABLE list_marks (
        scope   TEXT NOT NULL,
        tag     TEXT NOT NULL,
        reorder INTEGER NOT NULL DEFAULT 0,
        top     INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (scope, tag)
      ) WITHOUT ROWID;
      INSERT INTO list_marks (scope, tag, top)
        SELECT 'u:' || owner, '*', max(id) FROM plants GROUP BY owner
        UNION ALL SELECT '*', '*', max(id) FROM plants HAVING count(*) > 0
        UNION ALL SELECT 'u:' || owner, 't:' || tag, max(id) FROM plants WHERE tag IS NOT NULL GROUP BY owner, tag
        UNION ALL SELECT '*', 't:' || tag, max(id) FROM plants WHERE tag IS NOT NULL GROUP BY tag;

      CREATE TRIGGER plants_marks_insert AFTER INSERT ON plants BEGIN
        INSERT INTO list_marks (scope, tag, top) VALUES ('u:' || NEW.owner, '*', NEW.id), ('*', '*', NEW.id)
          ON CONFLICT (scope, tag) DO UPDATE
          SET reorder = reorder + (excluded.top < top), top = max(top, excluded.top);
        INSERT INTO list_marks (scope, tag, top)
          SELECT s, 't:' || NEW.tag, NEW.id FROM (SELECT 'u:' || NEW.owner AS s UNION ALL SELECT '*')
          WHERE NEW.tag IS NOT NULL
          ON CONFLICT (scope, tag) DO UPDATE SET top = max(top, excluded.top);
      END;
      CREATE TRIGGER plants_marks_delete AFTER DELETE ON plants BEGIN
        UPDATE list_marks SET reorder = reorder + 1 WHERE tag = '*' AND scope IN ('u:' || OLD.owner, '*');
      END;
    `,
  },
  {
    version: 5,
    name: '0005_write_clock',
    unsafeWhileServing:
      'it drops list_marks and its triggers, which the previous release reads and relies on',
    // The list marks leave the database: the triggers of migration 4 wrote two to four rows (and
    // their pages) with every create, about a fifth of a create's cost in the writer. The store now
    // keeps marks in memory (local-marks.ts) and learns of others' writes from one clock row:
    // plantstore's writers move it once per commit that changed plants, and these triggers count
    // every row changed, so that a change made outside plantstore (clocked falls behind rows) is
    // seen too. Updates come only from outside: plantstore never updates a plant.
    sql: `
      DROP TRIGGER plants_marks_insert;
      DROP TRIGGER plants_marks_delete;
      DROP TABLE list_marks;
      CREATE TABLE write_clock (
        id        INTEGER PRIMARY KEY CHECK (id = 1),
        n         INTEGER NOT NULL,
        writer    TEXT NOT NULL,
        run_start INTEGER NOT NULL,
        rows      INTEGER NOT NULL,
        clocked   INTEGER NOT NULL
      );
      INSERT INTO write_clock VALUES (1, 0, '', 0, 0, 0);
      CREATE TRIGGER plants_clock_insert AFTER INSERT ON plants BEGIN UPDATE write_clock SET rows = rows + 1; END;
      CREATE TRIGGER plants_clock_delete AFTER DELETE ON plants BEGIN UPDATE write_clock SET rows = rows + 1; END;
      CREATE TRIGGER plants_clock_update AFTER UPDATE ON plants BEGIN UPDATE write_clock SET rows = rows + 1; END;
    `,
  },
  {
    version: 6,
    name: '0006_plant_versions',
    // Plants change (PATCH): each has a version, given by the writer from write_clock.rev, which no
    // two plant states ever share (a plant re-created under a deleted one's id never repeats one);
    // plants made before are version 1 and the counter goes on from there. plant.updated events (type
    // bit 4) keep the changed fields' former values as JSON in \`previous\`. An idempotency record of
    // a change keeps the plant its 200 showed, to replay it. Endpoints that took every event type
    // (created and deleted, mask 3) take the new one too.
    sql: `
      ALTER TABLE plants ADD COLUMN version INTEGER NOT NULL DEFAULT 1;
      ALTER TABLE write_clock ADD COLUMN rev INTEGER NOT NULL DEFAULT 1;
      ALTER TABLE events ADD COLUMN previous TEXT;
      ALTER TABLE idempotency_keys ADD COLUMN response TEXT;
      UPDATE webhook_endpoints SET events = 7 WHERE events = 3;
    `,
  },
  {
    version: 7,
    name: '0007_gardens',
    unsafeWhileServing:
      "the previous release writes plants and events without a garden (''), which no one can see in this one; it also drops the owner indexes that release lists by",
    // Gardens (contract 3.2): every plant belongs to one, and its members' roles decide who sees and
    // changes it. Each user who has plants or events gets a home garden (named "Home", owned by the
    // user), and every plant and event so far goes into its owner's: a user who never shares sees
    // what it saw before. Lists read a garden's plants along plants_garden_page (a page of one garden
    // is a walk along adjacent index entries, as the owner's was); the owner indexes go, since
    // nothing lists by owner any more. The clock triggers count the UPDATE below, so every cached
    // page is forgotten once. write_clock.members moves with every membership change, by any
    // process (triggers): a store keeps users' memberships in memory while it stands still.
    sql: `
      CREATE TABLE gardens (
        id         TEXT PRIMARY KEY,
        name       TEXT NOT NULL,
        home_user  TEXT UNIQUE,
        created_at INTEGER NOT NULL
      );
      CREATE TABLE garden_members (
        garden_id TEXT NOT NULL REFERENCES gardens (id) ON DELETE CASCADE,
        user_id   TEXT NOT NULL,
        role      TEXT NOT NULL CHECK (role IN ('viewer', 'editor', 'owner')),
        added_at  INTEGER NOT NULL,
        PRIMARY KEY (garden_id, user_id)
      ) WITHOUT ROWID;
      CREATE INDEX garden_members_user ON garden_members (user_id, garden_id, role);

      INSERT INTO gardens (id, name, home_user, created_at)
        SELECT 'gdn_' || lower(hex(randomblob(12))), 'Home', u, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
        FROM (SELECT owner AS u FROM plants UNION SELECT owner FROM events WHERE type != 0) ORDER BY u;
      INSERT INTO garden_members (garden_id, user_id, role, added_at)
        SELECT id, home_user, 'owner', created_at FROM gardens;

      ALTER TABLE plants ADD COLUMN garden TEXT NOT NULL DEFAULT '';
      UPDATE plants SET garden = (SELECT g.id FROM gardens g WHERE g.home_user = plants.owner);
      DROP INDEX plants_owner_page;
      DROP INDEX plants_owner_tag_page;
      CREATE INDEX plants_garden_page ON plants (garden, id, name, tag);
      CREATE INDEX plants_garden_tag_page ON plants (garden, tag, id, name) WHERE tag IS NOT NULL;
      DROP INDEX plants_tag_page;
      CREATE INDEX plants_tag_page ON plants (tag, id, garden, name) WHERE tag IS NOT NULL;

      ALTER TABLE events ADD COLUMN garden TEXT NOT NULL DEFAULT '';
      UPDATE events SET garden = coalesce((SELECT g.id FROM gardens g WHERE g.home_user = events.owner), '')
        WHERE type != 0;

      ALTER TABLE write_clock ADD COLUMN members INTEGER NOT NULL DEFAULT 0;
      CREATE TRIGGER members_clock_insert AFTER INSERT ON garden_members BEGIN UPDATE write_clock SET members = members + 1; END;
      CREATE TRIGGER members_clock_update AFTER UPDATE ON garden_members BEGIN UPDATE write_clock SET members = members + 1; END;
      CREATE TRIGGER members_clock_delete AFTER DELETE ON garden_members BEGIN UPDATE write_clock SET members = members + 1; END;
      CREATE TRIGGER gardens_clock_delete AFTER DELETE ON gardens BEGIN UPDATE write_clock SET members = members + 1; END;
    `,
  },
  {
    version: 8,
    name: '0008_token_pages',
    unsafeWhileServing: "it drops tokens_user_id, the index the previous release lists a user's tokens by",
    // Tokens over HTTP (contract 3.3): when each was last used, kept to the minute, and indexes
    // for a keyset page newest first, of one user's tokens or of everyone's.
    sql: `
      ALTER TABLE tokens ADD COLUMN last_used_at INTEGER;
      DROP INDEX tokens_user_id;
      CREATE INDEX tokens_user_page ON tokens (user_id, created_at, id);
      CREATE INDEX tokens_page ON tokens (created_at, id);
    `,
  },
  {
    version: 9,
    name: '0009_delivery_indexes',
    unsafeWhileServing:
      "it drops two deliveries indexes (deliveries_due was the previous release's claim path)",
    // Every create queues a delivery row per endpoint that wants its event, and each index on
    // deliveries is one more b-tree insert per row: these two are read by no statement (claims
    // use deliveries_endpoint_due, recover deliveries_endpoint_event, the purge goes by event_seq).
    sql: `
      DROP INDEX deliveries_due;
      DROP INDEX deliveries_event;
    `,
  },
  {
    version: 10,
    name: '0010_creation_order',
    unsafeWhileServing:
      'gardens, tokens and endpoints the previous release makes get no seq, so this one cannot list them in order; it also drops and rebuilds their list indexes',
    // Gardens, tokens and webhook endpoints are listed in the order they were made. created_at has
    // millisecond resolution and ids are random, so two rows made in the same millisecond used to come
    // back in a random order: each row now gets a sequence number when it is inserted (the largest so
    // far plus one, under the write lock), and rows already there are numbered in the order they
    // were listed in until now (created_at, then id).
    sql: `
      ALTER TABLE gardens ADD COLUMN seq INTEGER;
      UPDATE gardens SET seq = o.n
        FROM (SELECT id, row_number() OVER (ORDER BY created_at, id) AS n FROM gardens) AS o WHERE o.id = gardens.id;
      CREATE UNIQUE INDEX gardens_seq ON gardens (seq);

      ALTER TABLE tokens ADD COLUMN seq INTEGER;
      UPDATE tokens SET seq = o.n
        FROM (SELECT id, row_number() OVER (ORDER BY created_at, id) AS n FROM tokens) AS o WHERE o.id = tokens.id;
      DROP INDEX tokens_user_page;
      DROP INDEX tokens_page;
      CREATE INDEX tokens_user_page ON tokens (user_id, seq);
      CREATE UNIQUE INDEX tokens_seq ON tokens (seq);

      ALTER TABLE webhook_endpoints ADD COLUMN seq INTEGER;
      UPDATE webhook_endpoints SET seq = o.n
        FROM (SELECT id, row_number() OVER (ORDER BY created_at, id) AS n FROM webhook_endpoints) AS o
        WHERE o.id = webhook_endpoints.id;
      DROP INDEX webhook_endpoints_owner;
      CREATE INDEX webhook_endpoints_owner ON webhook_endpoints (owner, seq);
      CREATE UNIQUE INDEX webhook_endpoints_seq ON webhook_endpoints (seq);
    `,
  },
  {
    version: 11,
    name: '0011_garden_creators',
    unsafeWhileServing:
      'gardens the previous release makes get no created_by, so the limit of gardens a user creates miscounts',
    // A user creates at most 100 gardens (its home garden among them); being added to others'
    // gardens never counts against that (contract 3.2), so each garden remembers who made it. For
    // gardens made before: a home garden's user, else its earliest owner, who is the one that made
    // it unless the maker has since left or been demoted.
    sql: `
      ALTER TABLE gardens ADD COLUMN created_by TEXT;
      UPDATE gardens SET created_by = coalesce(home_user,
        (SELECT m.user_id FROM garden_members m WHERE m.garden_id = gardens.id AND m.role = 'owner'
          ORDER BY m.added_at, m.user_id LIMIT 1), '');
      CREATE INDEX gardens_created_by ON gardens (created_by);
    `,
  },
  {
    version: 12,
    name: '0012_events_by_garden',
    // A stream resumed from an old position reads only the events of the gardens its caller is in,
    // along this index, instead of every later event of every user (contract 8: what a resumed
    // stream costs grows with the events the caller may see, never with other users' events).
    sql: `
      CREATE INDEX events_garden_seq ON events (garden, seq);
    `,
  },
  {
    version: 13,
    name: '0013_endpoint_admin_credential',
    unsafeWhileServing:
      'endpoints the previous release makes with plants:admin record no credential; it also turns every admin endpoint into an owner-only one',
    // An endpoint made with plants:admin receives every user's events only while the credential that
    // made it is valid (contract 8): each remembers that credential, a built-in token's id (revoked
    // or expired, it no longer counts) and/or when it expires (a JWT's exp). Endpoints that are
    // admin already were made by a credential nobody recorded: they become owner-only, receiving
    // their owner's events as any other endpoint does (an admin makes a new one to have every
    // user's again). Closing the hole beats keeping a reach nobody can bound.
    sql: `
      ALTER TABLE webhook_endpoints ADD COLUMN admin_token TEXT;
      ALTER TABLE webhook_endpoints ADD COLUMN admin_until INTEGER;
      UPDATE webhook_endpoints SET admin = 0 WHERE admin = 1;
    `,
  },
  {
    version: 14,
    name: '0014_deliveries_from_the_log',
    unsafeWhileServing:
      'the previous release queues a delivery row per event while this one follows the log: both sending, an event could be sent twice; finished delivery rows are deleted',
    // Webhooks come from the log: a create writes its event only, and each endpoint follows the log
    // from its position (every event of its up to there sent, or queued as a delivery for a retry),
    // read by the dispatcher holding its log lease. Every endpoint starts at the log's head: the
    // events before it already have their delivery rows. Pending rows stay, claimed as before (they
    // are the retry queue now); finished ones go (their attempts keep their history). So nothing
    // pending is lost or sent twice by the move.
    sql: `
      ALTER TABLE webhook_endpoints ADD COLUMN position INTEGER NOT NULL DEFAULT 0;
      ALTER TABLE webhook_endpoints ADD COLUMN lease_owner TEXT;
      ALTER TABLE webhook_endpoints ADD COLUMN lease_until INTEGER;
      UPDATE webhook_endpoints SET position = (SELECT coalesce(max(seq), 0) FROM events);
      DELETE FROM deliveries WHERE state != 'pending';
    `,
  },
  {
    version: 15,
    name: '0015_plant_search',
    unsafeWhileServing:
      'plants the previous release creates get no search row, so search never finds them; the fill holds the write lock for as long as it takes',
    // Search by name (contract 2's `q`): each plant's words in an FTS5 table (search.ts), filled
    // here for the plants already stored, in the migration's transaction.
    sql: `${SEARCH_TABLE};`,
    fill: fillSearch,
  },
  {
    version: 16,
    name: '0016_search_words',
    unsafeWhileServing:
      'plants the previous release creates never count in the words table; the fill holds the write lock for as long as it takes',
    // The distinct words search indexes, each with how many plants have it (search.ts): a term
    // longer than FTS5's prefix indexes is looked up here, then asked of FTS5 by the words it
    // begins. Filled here from the plants already stored, in the migration's transaction.
    sql: `${WORDS_TABLE};`,
    fill: fillWords,
  },
  {
    version: 17,
    name: '0017_event_actors',
    // Who did it (contract 13.1): each event keeps the user name of the caller whose request made it
    // and that request's id; events written before have neither (null). Membership changes are
    // events too (13.3), their type bits 8, 16 and 32: a member event keeps the member in \`name\`,
    // its role in \`tag\` and, on member.changed, the former role as {"role": …} in \`previous\`
    // (plant_id 0, which no plant has). Endpoints made before keep the types they have (nothing
    // of version 4 changes for a client that does not ask for the new): only endpoints made from
    // now on without a list of types receive membership events.
    sql: `
      ALTER TABLE events ADD COLUMN actor TEXT;
      ALTER TABLE events ADD COLUMN request_id TEXT;
    `,
  },
  {
    version: 18,
    name: '0018_history_pages',
    // History and activity (contract 13.3) read newest first a page at a time: a plant's events
    // along (plant_id, seq), a garden's along events_garden_seq (0012) backwards. One index more
    // for every event written; a page then costs what it holds, not what the log holds.
    sql: `CREATE INDEX events_plant_seq ON events (plant_id, seq);`,
  },
  {
    version: 19,
    name: '0019_trash',
    // The trash (contract 13.2): a deleted plant moves here, out of plants, so every read of plants
    // (one plant, lists, search, export, the list marks and the ids kept for them) passes it over
    // by construction, and its id may be taken again at once. A garden's page reads newest deletion
    // first along trash_garden_page, an admin's along trash_page; the service's purge takes the
    // oldest expired along trash_purge. No foreign key to gardens, as plants has none: a garden's
    // delete erases its trash itself, with an event per plant. A plant.purged event (type bit 128)
    // keeps the plant's id in plant_id and an empty name.
    sql: `
      CREATE TABLE trash (
        id         INTEGER PRIMARY KEY,
        garden     TEXT NOT NULL,
        owner      TEXT NOT NULL,
        name       TEXT NOT NULL,
        tag        TEXT,
        version    INTEGER NOT NULL,
        deleted_at INTEGER NOT NULL,
        deleted_by TEXT NOT NULL,
        purge_at   INTEGER NOT NULL
      );
      CREATE INDEX trash_garden_page ON trash (garden, deleted_at, id);
      CREATE INDEX trash_page ON trash (deleted_at, id);
      CREATE INDEX trash_purge ON trash (purge_at);
    `,
  },
  {
    version: 20,
    name: '0020_change_feed',
    // The change feed (contract 13.4). A caller's own membership changes (member.added 8,
    // member.removed 32) since a position, along (owner: the member, seq) for those two types only:
    // what a feed answer asks to learn which gardens the caller joined or left. And how far the log
    // has been purged (the newest seq purge took, or emptied to a tombstone): a feed position
    // before it may have lost events (410). Events purged before this migration all lie before any
    // position a feed has given out.
    sql: `
      CREATE INDEX events_member_seq ON events (owner, seq) WHERE type IN (8, 32);
      CREATE TABLE events_horizon (id INTEGER PRIMARY KEY CHECK (id = 1), seq INTEGER NOT NULL);
      INSERT INTO events_horizon (id, seq) VALUES (1, 0);
    `,
  },
  {
    version: 21,
    name: '0021_event_traceparent',
    // Traces (contract 14.1): the W3C traceparent of the request that wrote an event, so that its
    // webhook deliveries are spans of that trace whichever process sends them. Null: written with
    // traces off (or before this migration).
    sql: `ALTER TABLE events ADD COLUMN traceparent TEXT;`,
  },
];
