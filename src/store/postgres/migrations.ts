import type pg from 'pg';
import type { Migration } from '../migrate.js';
import { fillSearch } from './search.js';

// Released migrations are frozen: add a new entry rather than editing one.
export const POSTGRES_MIGRATIONS: Migration<pg.PoolClient>[] = [
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
  {
    version: 2,
    name: '0002_events',
    // The event log, written in the transaction of the change it describes. Its position is
    // (xid, seq): the writing transaction's id and a sequence value. A reader takes only events of
    // transactions older than every transaction still running (pg_snapshot_xmin), so an event
    // whose sequence value was taken early but committed late is never passed over.
    sql: `
      CREATE TABLE events (
        seq        bigserial NOT NULL,
        xid        xid8 NOT NULL DEFAULT pg_current_xact_id(),
        id         text PRIMARY KEY,
        type       text NOT NULL,
        owner      text NOT NULL,
        data       text NOT NULL,
        created_at timestamptz NOT NULL
      );
      CREATE INDEX events_position ON events (xid, seq);
      CREATE INDEX events_owner_position ON events (owner, xid, seq);
      CREATE INDEX events_created_at ON events (created_at);

      CREATE TABLE webhook_endpoints (
        id                    text PRIMARY KEY,
        owner                 text NOT NULL,
        admin                 boolean NOT NULL,
        url                   text NOT NULL,
        events                integer NOT NULL,
        description           text,
        secret                text NOT NULL,
        previous_secret       text,
        previous_secret_until timestamptz,
        status                text NOT NULL CHECK (status IN ('enabled', 'disabled')),
        disabled_reason       text,
        created_at            timestamptz NOT NULL,
        last_success_at       timestamptz
      );
      CREATE INDEX webhook_endpoints_owner ON webhook_endpoints (owner, created_at);
      CREATE INDEX webhook_endpoints_admin ON webhook_endpoints (admin) WHERE admin;

      CREATE TABLE deliveries (
        id              bigserial PRIMARY KEY,
        event_id        text NOT NULL,
        endpoint_id     text NOT NULL,
        state           text NOT NULL CHECK (state IN ('pending', 'succeeded', 'failed')),
        attempts        integer NOT NULL DEFAULT 0,
        next_attempt_at timestamptz NOT NULL,
        lease_owner     text,
        lease_until     timestamptz,
        created_at      timestamptz NOT NULL
      );
      CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE state = 'pending';
      CREATE INDEX deliveries_endpoint_event ON deliveries (endpoint_id, event_id);
      CREATE INDEX deliveries_event ON deliveries (event_id);

      CREATE TABLE delivery_attempts (
        id              bigserial PRIMARY KEY,
        delivery_id     bigint NOT NULL,
        endpoint_id     text NOT NULL,
        event_id        text NOT NULL,
        event_type      text NOT NULL,
        attempt         integer NOT NULL,
        at              timestamptz NOT NULL,
        status          integer,
        outcome         text NOT NULL,
        error           text,
        duration_ms     integer NOT NULL,
        next_attempt_at timestamptz
      );
      CREATE INDEX delivery_attempts_endpoint ON delivery_attempts (endpoint_id, id);
      CREATE INDEX delivery_attempts_at ON delivery_attempts (at);
    `,
  },
  {
    version: 3,
    name: '0003_endpoint_failing_since',
    unsafeWhileServing:
      'it builds deliveries_endpoint_due without CONCURRENTLY: writes to deliveries wait for the build',
    // When an endpoint's deliveries began failing with none acknowledged since: five days of that
    // disables it. Endpoints failing when this lands start counting at their next failure.
    // Claims take each endpoint's due deliveries through deliveries_endpoint_due.
    sql: `
      ALTER TABLE webhook_endpoints ADD COLUMN failing_since timestamptz;
      CREATE INDEX deliveries_endpoint_due ON deliveries (endpoint_id, next_attempt_at, id) WHERE state = 'pending';
    `,
  },
  {
    version: 4,
    name: '0004_plant_versions',
    // Plants change (PATCH): each has a version from plant_versions, which no two plant states ever
    // share (a plant re-created under a deleted one's id never repeats one); plants made before are
    // version 1 (a constant default: no table rewrite) and the sequence starts after it. An
    // idempotency record of a change keeps the plant its 200 showed, to replay it. Endpoints that
    // took every event type (created and deleted, mask 3) take plant.updated (bit 4) too.
    sql: `
      CREATE SEQUENCE plant_versions AS bigint START 2 MAXVALUE 9007199254740991;
      ALTER TABLE plants ADD COLUMN version bigint NOT NULL DEFAULT 1;
      ALTER TABLE plants ALTER COLUMN version SET DEFAULT nextval('plant_versions');
      ALTER TABLE idempotency_keys ADD COLUMN response text;
      UPDATE webhook_endpoints SET events = 7 WHERE events = 3;
    `,
  },
  {
    version: 5,
    name: '0005_gardens',
    unsafeWhileServing:
      "plants.garden and events.garden become NOT NULL: the previous release's creates, which write no garden, fail; it drops the owner indexes that release reads",
    // Gardens (contract 3.2): every plant belongs to one, and its members' roles decide who sees and
    // changes it. Each user who has plants or events gets a home garden (named "Home", owned by the
    // user), and every plant and event so far goes into its owner's, so a user who never shares sees
    // what it saw before. A garden's list page is a walk along plants_garden_page (or, with a tag,
    // plants_garden_tag_page), which also holds every column a page shows; the owner indexes go,
    // since nothing reads plants or events by owner any more. The columns are filled before the
    // indexes are built (one sorted build rather than an entry per updated row).
    // plants.garden has no foreign key: a create locks its garden's row itself, in the statement
    // that checks the creator's role (a key check would be a second, per-row query doing the same).
    sql: `
      CREATE TABLE gardens (
        id         text PRIMARY KEY,
        name       text NOT NULL,
        home_user  text UNIQUE,
        created_at timestamptz NOT NULL
      );
      CREATE TABLE garden_members (
        garden_id text NOT NULL REFERENCES gardens (id) ON DELETE CASCADE,
        user_id   text NOT NULL,
        role      text NOT NULL CHECK (role IN ('viewer', 'editor', 'owner')),
        added_at  timestamptz NOT NULL,
        PRIMARY KEY (garden_id, user_id)
      );
      CREATE INDEX garden_members_user ON garden_members (user_id, garden_id, role);

      INSERT INTO gardens (id, name, home_user, created_at)
        SELECT 'gdn_' || substr(replace(gen_random_uuid()::text, '-', ''), 1, 24), 'Home', u, now()
        FROM (SELECT owner AS u FROM plants UNION SELECT owner FROM events) users ORDER BY u;
      INSERT INTO garden_members (garden_id, user_id, role, added_at)
        SELECT id, home_user, 'owner', created_at FROM gardens;

      DROP INDEX plants_owner_id;
      DROP INDEX plants_owner_tag_id;
      ALTER TABLE plants ADD COLUMN garden text;
      UPDATE plants SET garden = g.id FROM gardens g WHERE g.home_user = plants.owner;
      ALTER TABLE plants ALTER COLUMN garden SET NOT NULL;
      CREATE INDEX plants_garden_page ON plants (garden, id) INCLUDE (name, tag);
      CREATE INDEX plants_garden_tag_page ON plants (garden, tag, id) INCLUDE (name) WHERE tag IS NOT NULL;

      DROP INDEX events_owner_position;
      ALTER TABLE events ADD COLUMN garden text;
      UPDATE events SET garden = g.id FROM gardens g WHERE g.home_user = events.owner;
      ALTER TABLE events ALTER COLUMN garden SET NOT NULL;
      CREATE INDEX events_garden_position ON events (garden, xid, seq);
    `,
  },
  {
    version: 6,
    name: '0006_token_pages',
    unsafeWhileServing: "it drops tokens_user_id, the index the previous release lists a user's tokens by",
    // Tokens over HTTP (contract 3.3): when each was last used, kept to the minute, and indexes
    // for a keyset page newest first, of one user's tokens or of everyone's.
    sql: `
      ALTER TABLE tokens ADD COLUMN last_used_at timestamptz;
      DROP INDEX tokens_user_id;
      CREATE INDEX tokens_user_page ON tokens (user_id, created_at, id);
      CREATE INDEX tokens_page ON tokens (created_at, id);
    `,
  },
  {
    version: 7,
    name: '0007_list_marks',
    unsafeWhileServing:
      'it locks plants against writes (LOCK TABLE … SHARE ROW EXCLUSIVE) while it fills list_marks',
    // List marks (store.ts, ListMarks), one row per garden, kept by triggers on plants so that every
    // writer moves them in its own transaction (any instance, any version, SQL by hand): `top` is
    // the largest id created in the garden, `reorder` moves when a plant in it is deleted or
    // changed, or created at or below `top` (a client's id, or a server id whose transaction
    // committed after one holding a larger id: the row's lock orders the garden's writers as they
    // commit). A list page read after the marks is exact while they stand (store.ts). The rows of
    // a batch are written in garden order, so two batches never wait on each other in a cycle.
    sql: `
      CREATE TABLE list_marks (
        garden  text PRIMARY KEY,
        reorder bigint NOT NULL DEFAULT 0,
        top     bigint NOT NULL DEFAULT 0
      );
      LOCK TABLE plants IN SHARE ROW EXCLUSIVE MODE;
      INSERT INTO list_marks (garden, top) SELECT garden, max(id) FROM plants GROUP BY garden;

      CREATE FUNCTION list_marks_created() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        INSERT INTO list_marks AS k (garden, top)
          SELECT garden, max(id) FROM created GROUP BY garden ORDER BY garden
        ON CONFLICT (garden) DO UPDATE SET
          reorder = k.reorder + ((SELECT min(c.id) FROM created c WHERE c.garden = k.garden) <= k.top)::int,
          top = greatest(k.top, EXCLUDED.top);
        RETURN NULL;
      END $$;
      CREATE FUNCTION list_marks_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        INSERT INTO list_marks AS k (garden, reorder)
          SELECT DISTINCT garden, 1 FROM gone ORDER BY garden
        ON CONFLICT (garden) DO UPDATE SET reorder = k.reorder + 1;
        RETURN NULL;
      END $$;
      CREATE FUNCTION list_marks_updated() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        INSERT INTO list_marks AS k (garden, reorder)
          SELECT garden, 1 FROM (SELECT garden FROM gone UNION SELECT garden FROM came) g ORDER BY garden
        ON CONFLICT (garden) DO UPDATE SET reorder = k.reorder + 1;
        RETURN NULL;
      END $$;
      CREATE FUNCTION list_marks_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        UPDATE list_marks SET reorder = reorder + 1;
        RETURN NULL;
      END $$;
      CREATE TRIGGER plants_list_marks_created AFTER INSERT ON plants
        REFERENCING NEW TABLE AS created FOR EACH STATEMENT EXECUTE FUNCTION list_marks_created();
      CREATE TRIGGER plants_list_marks_deleted AFTER DELETE ON plants
        REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION list_marks_deleted();
      CREATE TRIGGER plants_list_marks_updated AFTER UPDATE ON plants
        REFERENCING OLD TABLE AS gone NEW TABLE AS came FOR EACH STATEMENT EXECUTE FUNCTION list_marks_updated();
      CREATE TRIGGER plants_list_marks_truncated AFTER TRUNCATE ON plants
        FOR EACH STATEMENT EXECUTE FUNCTION list_marks_truncated();
    `,
  },
  {
    version: 8,
    name: '0008_creation_order',
    unsafeWhileServing:
      'it locks gardens, tokens and webhook_endpoints against writes while it numbers their rows, and drops and rebuilds their list indexes',
    // Gardens, tokens and webhook endpoints are listed in the order they were made. created_at has
    // millisecond resolution and ids are random, so two rows made in the same millisecond used to come
    // back in a random order: each row now takes a number from an identity sequence when it is
    // inserted, and rows already there are numbered in the order they were listed in until now
    // (created_at, then id). The tables are locked first so that no row is inserted between the
    // numbering and the sequence taking over.
    sql: `
      LOCK TABLE gardens, tokens, webhook_endpoints IN SHARE ROW EXCLUSIVE MODE;
      ALTER TABLE gardens ADD COLUMN seq bigint;
      UPDATE gardens t SET seq = o.n
        FROM (SELECT id, row_number() OVER (ORDER BY created_at, id) AS n FROM gardens) o WHERE o.id = t.id;
      ALTER TABLE gardens ALTER COLUMN seq SET NOT NULL;
      ALTER TABLE gardens ALTER COLUMN seq ADD GENERATED BY DEFAULT AS IDENTITY;
      SELECT setval(pg_get_serial_sequence('gardens', 'seq'), (SELECT coalesce(max(seq), 0) + 1 FROM gardens), false);
      CREATE UNIQUE INDEX gardens_seq ON gardens (seq);

      ALTER TABLE tokens ADD COLUMN seq bigint;
      UPDATE tokens t SET seq = o.n
        FROM (SELECT id, row_number() OVER (ORDER BY created_at, id) AS n FROM tokens) o WHERE o.id = t.id;
      ALTER TABLE tokens ALTER COLUMN seq SET NOT NULL;
      ALTER TABLE tokens ALTER COLUMN seq ADD GENERATED BY DEFAULT AS IDENTITY;
      SELECT setval(pg_get_serial_sequence('tokens', 'seq'), (SELECT coalesce(max(seq), 0) + 1 FROM tokens), false);
      DROP INDEX tokens_user_page;
      DROP INDEX tokens_page;
      CREATE INDEX tokens_user_page ON tokens (user_id, seq);
      CREATE UNIQUE INDEX tokens_seq ON tokens (seq);

      ALTER TABLE webhook_endpoints ADD COLUMN seq bigint;
      UPDATE webhook_endpoints t SET seq = o.n
        FROM (SELECT id, row_number() OVER (ORDER BY created_at, id) AS n FROM webhook_endpoints) o WHERE o.id = t.id;
      ALTER TABLE webhook_endpoints ALTER COLUMN seq SET NOT NULL;
      ALTER TABLE webhook_endpoints ALTER COLUMN seq ADD GENERATED BY DEFAULT AS IDENTITY;
      SELECT setval(pg_get_serial_sequence('webhook_endpoints', 'seq'), (SELECT coalesce(max(seq), 0) + 1 FROM webhook_endpoints), false);
      DROP INDEX webhook_endpoints_owner;
      CREATE INDEX webhook_endpoints_owner ON webhook_endpoints (owner, seq);
      CREATE UNIQUE INDEX webhook_endpoints_seq ON webhook_endpoints (seq);
    `,
  },
  {
    version: 9,
    name: '0009_garden_creators',
    unsafeWhileServing:
      "gardens.created_by becomes NOT NULL: the previous release's garden creates, which write none, fail",
    // A user creates at most 100 gardens (its home garden among them); being added to others'
    // gardens never counts against that (contract 3.2), so each garden remembers who made it. For
    // gardens made before: a home garden's user, else its earliest owner, who is the one that made
    // it unless the maker has since left or been demoted.
    sql: `
      ALTER TABLE gardens ADD COLUMN created_by text;
      UPDATE gardens g SET created_by = coalesce(g.home_user,
        (SELECT m.user_id FROM garden_members m WHERE m.garden_id = g.id AND m.role = 'owner'
          ORDER BY m.added_at, m.user_id LIMIT 1), '');
      ALTER TABLE gardens ALTER COLUMN created_by SET NOT NULL;
      CREATE INDEX gardens_created_by ON gardens (created_by);
    `,
  },
  {
    version: 10,
    name: '0010_endpoint_admin_credential',
    unsafeWhileServing:
      'endpoints the previous release makes with plants:admin record no credential; it also turns every admin endpoint into an owner-only one',
    // An endpoint made with plants:admin receives every user's events only while the credential that
    // made it is valid (contract 8): each remembers that credential, a built-in token's id (revoked
    // or expired, it no longer counts) and/or when it expires (a JWT's exp). Endpoints that are
    // admin already were made by a credential nobody recorded: they become owner-only, receiving
    // their owner's events as any other endpoint does (an admin makes a new one to have every
    // user's again). Closing the hole beats keeping a reach nobody can bound.
    sql: `
      ALTER TABLE webhook_endpoints ADD COLUMN admin_token text, ADD COLUMN admin_until timestamptz;
      UPDATE webhook_endpoints SET admin = false WHERE admin;
    `,
  },
  {
    version: 11,
    name: '0011_deliveries_from_the_log',
    unsafeWhileServing:
      'the previous release queues a delivery row per event while this one follows the log: both sending, an event could be sent twice; finished delivery rows are deleted',
    // Webhooks come from the log: a write records its event only, and each endpoint follows the log
    // from its position (xid, seq: every matching event up to there has been sent, or queued for a
    // retry), under a lease held by the dispatcher sending what follows it. Every endpoint starts at
    // this transaction (its id, seq 0): the events of older transactions have their delivery rows
    // already (those still pending stay, and are claimed as before: they are the retry queue now),
    // and those of later ones come from the log, so the move loses nothing and sends nothing twice.
    // An endpoint made later starts at its own transaction (the default). window_xid/window_seq: the
    // last event the lease holder's claims handed out, so that a report ending the lease at a
    // position short of it (a claim ran meanwhile) keeps the lease instead. Finished delivery rows go (the attempts log
    // keeps their history); a first attempt from the log has no delivery row.
    sql: `
      ALTER TABLE webhook_endpoints ADD COLUMN position_xid xid8 NOT NULL DEFAULT pg_current_xact_id(),
        ADD COLUMN position_seq bigint NOT NULL DEFAULT 0,
        ADD COLUMN lease_owner text, ADD COLUMN lease_until timestamptz,
        ADD COLUMN window_xid xid8, ADD COLUMN window_seq bigint;
      ALTER TABLE delivery_attempts ALTER COLUMN delivery_id DROP NOT NULL;
      DELETE FROM deliveries WHERE state <> 'pending';
    `,
  },
  {
    version: 12,
    name: '0012_plant_search',
    unsafeWhileServing:
      "plants stays locked (ALTER TABLE holds ACCESS EXCLUSIVE to the end of the migration's transaction) while every plant's search words are computed, and the GIN index is built without CONCURRENTLY; plants the previous release creates meanwhile get empty search words",
    // Search by name (contract 2's `q`): each plant's folded words as a tsvector (search.ts), filled
    // here for the plants already stored, then indexed.
    sql: `ALTER TABLE plants ADD COLUMN search tsvector NOT NULL DEFAULT ''::tsvector;`,
    fill: fillSearch,
    after: 'CREATE INDEX plants_search ON plants USING gin (search);',
  },
  {
    version: 13,
    name: '0013_event_actors',
    // Who did it (contract 13.1): each event keeps the user name of the caller whose request made it
    // and that request's id; events written before have neither (null: adding a nullable column
    // rewrites nothing). Membership changes are events too (13.3; their data is JSON as a plant
    // event's is). Endpoints made before keep the types they have (nothing of version 4 changes
    // for a client that does not ask for the new): only endpoints made from now on without a list
    // of types receive membership events.
    sql: `
      ALTER TABLE events ADD COLUMN actor text, ADD COLUMN request_id text;
    `,
  },
  {
    version: 14,
    name: '0014_history_pages',
    unsafeWhileServing:
      'adding a stored generated column rewrites the whole events table under an ACCESS EXCLUSIVE lock (every write of an event, so every change, waits for it), and both indexes are built without CONCURRENTLY',
    // History and activity (contract 13.3) read newest first a page at a time. A plant event's
    // plant id lives in its JSON data: a stored generated column takes it out, filled here for
    // the events kept (the table is rewritten once) and by PostgreSQL on every insert, whichever
    // statement writes it. A plant's events by (plant_id, seq), a garden's by (garden, seq): a page
    // costs what it holds, not what the log holds.
    sql: `
      ALTER TABLE events ADD COLUMN plant_id bigint
        GENERATED ALWAYS AS (CASE WHEN type LIKE 'plant.%' THEN (data::jsonb ->> 'id')::bigint END) STORED;
      CREATE INDEX events_plant_history ON events (plant_id, seq) WHERE plant_id IS NOT NULL;
      CREATE INDEX events_garden_history ON events (garden, seq);
    `,
  },
  {
    version: 15,
    name: '0015_trash',
    // The trash (contract 13.2): a deleted plant moves here, out of plants, so every read of plants
    // (one plant, lists, search, export, the list marks) passes it over by construction, and its id
    // may be taken again at once. A garden's page reads newest deletion first along
    // trash_garden_page, an admin's along trash_page; the service's purge takes the oldest expired
    // along trash_purge. No foreign key to gardens, as plants has none: a garden's delete erases
    // its trash itself, with an event per plant, and a restore locks its garden's row as a create does.
    sql: `
      CREATE TABLE trash (
        id         bigint PRIMARY KEY,
        garden     text NOT NULL,
        owner      text NOT NULL,
        name       text NOT NULL,
        tag        text,
        version    bigint NOT NULL,
        deleted_at timestamptz NOT NULL,
        deleted_by text NOT NULL,
        purge_at   timestamptz NOT NULL
      );
      CREATE INDEX trash_garden_page ON trash (garden, deleted_at, id);
      CREATE INDEX trash_page ON trash (deleted_at, id);
      CREATE INDEX trash_purge ON trash (purge_at);
    `,
  },
  {
    version: 16,
    name: '0016_change_feed',
    // The change feed (contract 13.4). A caller's own membership changes (added, removed) since a
    // position, along (owner: the member, xid, seq) for those two types only: what a feed answer
    // asks to learn which gardens the caller joined or left. And how far the log has been purged
    // (the newest position purge took): a feed position before it may have lost events (410). The
    // events purged before this migration all lie before any position a feed has given out.
    // The index is built CONCURRENTLY, after the transaction (writers of events never wait for it);
    // a store that applied this migration before it did (built in the transaction) keeps its own.
    sql: `
      CREATE TABLE events_horizon (
        one boolean PRIMARY KEY DEFAULT true CHECK (one),
        xid xid8 NOT NULL,
        seq bigint NOT NULL
      );
      INSERT INTO events_horizon (xid, seq) VALUES ('0', 0);
    `,
    concurrently: [
      `CREATE INDEX CONCURRENTLY IF NOT EXISTS events_member_position ON events (owner, xid, seq)
        WHERE type IN ('member.added', 'member.removed')`,
    ],
  },
  {
    version: 17,
    name: '0017_event_traceparent',
    // Traces (contract 14.1): the W3C traceparent of the request that wrote an event, so that its
    // webhook deliveries are spans of that trace whichever process or instance sends them. Null:
    // written with traces off (or before this migration). A nullable column without a default:
    // no rewrite, only a moment's lock.
    sql: `ALTER TABLE events ADD COLUMN traceparent text;`,
  },
];
