// The SQLite change feed's reads of the log (FEED_SQL, contract 13.4) on a log of 20,000 events of
// 20 gardens and 2,000 plants, its statistics gathered: each walks the log by seq or a garden's
// events along events_garden_seq from the position, looks each plant up by its rowid, and never
// scans the log; only feedIn sorts, and only the window's events of its gardens (never the log).
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { FEED_SQL } from '../../src/store/sqlite/events.js';
import { SQLITE_MIGRATIONS } from '../../src/store/sqlite/migrations.js';
import { sqliteAtVersion } from '../helpers/engines.js';

const LOG = 20_000;
describe('change feed plans: sqlite', { timeout: 60_000 }, () => {
  it('reads the log along its indexes, each plant by id, with no scan of the log', () => {
    const dir = mkdtempSync(join(tmpdir(), 'plantstore-feed-plans-'));
    const db = sqliteAtVersion(join(dir, 'plants.db'), SQLITE_MIGRATIONS.at(-1)!.version);
    try {
      db.exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)
          INSERT INTO plants (id, owner, garden, name, tag, version) SELECT i, 'o', 'gdn_' || (i % 20), 'P', NULL, 1 FROM n;
        WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${LOG})
          INSERT INTO events (seq, type, owner, plant_id, name, tag, created_at, garden)
          SELECT i, 1 << (i % 3), 'o', 1 + i % 2000, 'P', NULL, i, 'gdn_' || (i % 20) FROM n;
        ANALYZE;`);
      const plan = (sql: string) =>
        (
          db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...Array.from(sql.matchAll(/\?/g), () => null)) as {
            detail: string;
          }[]
        )
          .map((r) => r.detail)
          .join('; ');
      const all = plan(FEED_SQL.feedAll);
      assert.match(all, /SEARCH e USING INTEGER PRIMARY KEY \(rowid>\? AND rowid<\?\)/, all);
      const of = plan(FEED_SQL.feedOf);
      assert.match(of, /SEARCH e USING INDEX events_garden_seq \(garden=\? AND seq>\? AND seq<\?\)/, of);
      const inSet = plan(FEED_SQL.feedIn);
      assert.match(
        inSet,
        /SEARCH e USING INDEX events_garden_seq \(garden=\? AND seq>\? AND seq<\?\)/,
        inSet,
      );
      for (const p of [all, of, inSet]) {
        assert.match(p, /SEARCH p USING INTEGER PRIMARY KEY \(rowid=\?\) LEFT-JOIN/, p);
      }
      assert.doesNotMatch(`${all}; ${of}`, /SCAN/);
      // feedIn's scans: the list of gardens, and its own sorted events (the subquery e, at most the limit).
      assert.deepEqual(inSet.match(/SCAN [^;]*/g), ['SCAN g VIRTUAL TABLE INDEX 1:', 'SCAN e'], inSet);
      // One sort at most: feedIn's of its gardens' events in the window; the plants joined after it.
      assert.doesNotMatch(all, /TEMP B-TREE/, all);
      assert.doesNotMatch(of, /TEMP B-TREE/, of);
      assert.equal(inSet.match(/TEMP B-TREE/g)?.length, 1, inSet);
    } finally {
      db.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
