// SQLite statements planned once (src/store/sqlite/plan-once.ts): every parameter of every statement
// the store prepares is behind a unary plus, so SQLite does not prepare it again each time a value
// is bound; and each such statement is planned as the same statement with bare parameters is.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { EXTENSION_FILE, planOnce, planStatementsOnce } from '../../src/store/sqlite/plan-once.js';
import { SqliteStore } from '../../src/store/sqlite/store.js';

/** The parameters of `sql` outside strings and comments, and whether each is behind a plus. */
function parameters(sql: string): { name: string; opaque: boolean }[] {
  const code = sql
    .replace(/'(?:[^']|'')*'|"(?:[^"]|"")*"/g, (m) => ' '.repeat(m.length))
    .replace(/--[^\n]*|\/\*[\s\S]*?\*\//g, (m) => ' '.repeat(m.length));
  return [...code.matchAll(/(\+?)\s*(\?\d*|[@:$][A-Za-z_]\w*)/g)].map((m) => ({
    name: m[2]!,
    opaque: m[1] === '+',
  }));
}

describe('planOnce', () => {
  it('puts a unary plus before every parameter, and nothing else', () => {
    assert.equal(
      planOnce('SELECT id FROM plants WHERE garden = ? AND id > ?2 ORDER BY id LIMIT ?'),
      'SELECT id FROM plants WHERE garden = +? AND id > +?2 ORDER BY id LIMIT +?',
    );
    assert.equal(
      planOnce('UPDATE t SET a = @a, b = :b WHERE c = $c AND d IN (SELECT value FROM json_each(@d))'),
      'UPDATE t SET a = +@a, b = +:b WHERE c = +$c AND d IN (SELECT value FROM json_each(+@d))',
    );
    // Strings, quoted names and comments keep their question marks and colons.
    const untouched = `SELECT '?', 'it''s @a ?', "col?", [c?], \`d?\` FROM t -- why ?\n/* :b ? */ WHERE x = 'a:b'`;
    assert.equal(planOnce(untouched), untouched);
    assert.equal(planOnce(`${untouched} AND y = ?`), `${untouched} AND y = +?`);
    // No parameter: the same text; an arithmetic plus stays beside the one added.
    assert.equal(planOnce('SELECT 1 + 2'), 'SELECT 1 + 2');
    assert.equal(planOnce('SELECT x + ? FROM t'), 'SELECT x + +? FROM t');
  });

  it('gives the same rows as the statement with bare parameters', () => {
    const db = new Database(':memory:');
    try {
      db.exec(`CREATE TABLE t (id INTEGER PRIMARY KEY, g TEXT NOT NULL, tag TEXT);
        CREATE INDEX t_g ON t (g, id); CREATE INDEX t_tag ON t (tag, id) WHERE tag IS NOT NULL;
        WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 500)
          INSERT INTO t SELECT i, 'g' || (i % 7), CASE WHEN i % 3 = 0 THEN 't' || (i % 5) END FROM n;`);
      const cases: [string, unknown[]][] = [
        ['SELECT id FROM t WHERE g = ? AND id > ? ORDER BY id LIMIT ?', ['g3', 40, 9]],
        ['SELECT id FROM t WHERE tag = ? AND id > ? ORDER BY id LIMIT ?', ['t2', 0, 1000]],
        [
          'SELECT id FROM t WHERE g IN (SELECT value FROM json_each(?)) ORDER BY id LIMIT ?',
          ['["g1","g2"]', 5],
        ],
        // Affinity as with a bare parameter: a text '7' compared with an integer column.
        ['SELECT id FROM t WHERE id = ?', ['7']],
        ['SELECT count(*) FROM t WHERE id > ? AND g = ?', [490, 'g0']],
      ];
      for (const [sql, args] of cases)
        assert.deepEqual(
          db
            .prepare(planOnce(sql))
            .raw()
            .all(...args),
          db
            .prepare(sql)
            .raw()
            .all(...args),
          sql,
        );
    } finally {
      db.close();
    }
  });
});

describe('the SQLite store', { timeout: 60_000 }, () => {
  it('prepares every statement with its parameters opaque, each planned as with bare ones', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'plantstore-plan-once-'));
    const path = join(dir, 'plants.db');
    const seen = new Set<string>();
    const prepare = Database.prototype.prepare;
    Database.prototype.prepare = function (this: Database.Database, sql: string) {
      seen.add(sql);
      return prepare.call(this, sql);
    } as typeof prepare;
    let store: SqliteStore | undefined;
    try {
      // The writer inline: its connection is in this thread, where its statements are seen too.
      store = new SqliteStore({ path, durability: 'normal', writer: 'inline' });
      await store.migrate();
      const at = new Date();
      const home = await store.homeGarden('ann', { id: 'gdn_home', name: 'Home', at });
      const shared = await store.createGarden({ id: 'gdn_shared', name: 'Shared', owner: 'ann', at });
      assert.ok('ok' in shared);
      const made = await store.createPlants(
        Array.from({ length: 300 }, (_, i) => ({
          id: null,
          owner: 'ann',
          garden: i % 2 ? home.id : 'gdn_shared',
          name: `${i % 3 ? 'Monstera' : 'Ficus'} deliciosa ${i}`,
          tag: i % 4 ? null : 'window',
        })),
      );
      assert.ok('ok' in made);
      const gardens = [home.id, 'gdn_shared'];
      const one = await store.createPlant({
        id: null,
        owner: 'ann',
        garden: home.id,
        name: 'Pilea',
        tag: null,
      });
      assert.ok('ok' in one);
      const pages = [
        await store.listPlants({ gardens: [home.id], tag: null, afterId: 0, limit: 20 }),
        await store.listPlants({ gardens, tag: null, afterId: 10, limit: 20 }),
        await store.listPlants({ gardens, tag: 'window', afterId: 0, limit: 20, withVersion: true }),
        await store.listPlants({ gardens, tag: null, afterId: 0, limit: 20, terms: ['mon'] }),
        await store.listPlants({ gardens, tag: null, afterId: 0, limit: 20, terms: ['deliciosa', '1'] }),
        await store.listPlants({ gardens: null, tag: null, afterId: 0, limit: 20 }),
      ];
      for (const p of pages) assert.ok(p.length > 0);
      const first = pages[0]![0]!.id;
      assert.ok(await store.plantFor(first, 'ann'));
      assert.ok('ok' in (await store.updatePlant(first, 'ann', { name: 'Pilea peperomioides' }, null)));
      assert.ok('ok' in (await store.deletePlant(first, 'ann')));
      await store.memberships('ann');
    } finally {
      Database.prototype.prepare = prepare;
      await store?.close();
    }
    try {
      const statements = [...seen].filter((sql) => parameters(sql).length > 0);
      assert.ok(statements.length >= 20, `statements with parameters seen: ${statements.length}`);
      const bare = statements.filter((sql) => parameters(sql).some((p) => !p.opaque));
      assert.deepEqual(bare, [], 'statements prepared with a bare parameter');
      // Each is planned as the statement with bare parameters: nothing the store relies on (an
      // index, a partial index's condition) needs the values to be chosen.
      const db = new Database(path, { readonly: true });
      try {
        let compared = 0;
        for (const sql of statements) {
          const plain = sql.replace(/\+(?=\?|[@:$][A-Za-z_])/g, '');
          const params = parameters(sql);
          const named = Object.fromEntries(
            params.filter((p) => !p.name.startsWith('?')).map((p) => [p.name.slice(1), null]),
          );
          const positional = params.filter((p) => p.name.startsWith('?')).map(() => null);
          const args = Object.keys(named).length > 0 ? [named, ...positional] : positional;
          const plan = (text: string) =>
            (db.prepare(`EXPLAIN QUERY PLAN ${text}`).all(...args) as { detail: string }[])
              .map((r) => r.detail)
              .join('; ');
          let expected: string;
          try {
            expected = plan(plain);
          } catch {
            continue; // a write on this read-only connection, or a statement EXPLAIN cannot take
          }
          assert.equal(plan(sql), expected, sql);
          compared++;
        }
        assert.ok(compared >= 20, `plans compared: ${compared}`);
      } finally {
        db.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

// The extension (src/store/sqlite/stable-plans.c) turns on SQLite's planner stability guarantee,
// which FTS5's own statements need (plan-once.ts says why). `npm run build` makes it with the
// machine's C compiler; a machine without one runs without it, and this test says so, but not in
// CI, where the build fails first without a compiler.
const built = existsSync(EXTENSION_FILE);
describe('the SQLite store’s extension', {
  timeout: 60_000,
  skip:
    built || process.env.CI === 'true'
      ? false
      : `not built (${EXTENSION_FILE}): no C compiler at npm run build`,
}, () => {
  it('is loaded by every connection the store opens: the reader and writer (openConnection, which the writer thread calls too) and the export’s', async () => {
    assert.ok(built, `${EXTENSION_FILE} was built`);
    const dir = mkdtempSync(join(tmpdir(), 'plantstore-stable-plans-'));
    const connections = new Set<Database.Database>();
    const prepare = Database.prototype.prepare;
    Database.prototype.prepare = function (this: Database.Database, sql: string) {
      connections.add(this);
      return prepare.call(this, sql);
    } as typeof prepare;
    const store = new SqliteStore({ path: join(dir, 'plants.db'), durability: 'normal', writer: 'inline' });
    try {
      await store.migrate();
      const home = await store.homeGarden('ann', { id: 'gdn_home', name: 'Home', at: new Date() });
      assert.ok(
        'ok' in
          (await store.createPlant({ id: null, owner: 'ann', garden: home.id, name: 'Monstera', tag: null })),
      );
      const found = await store.listPlants({
        gardens: [home.id],
        tag: null,
        afterId: 0,
        limit: 20,
        terms: ['mon'],
      });
      assert.equal(found.length, 1);
      const serving = connections.size;
      assert.ok(serving >= 1);
      const stable = (db: Database.Database) => prepare.call(db, 'SELECT plantstore_qpsg()').pluck().get();
      let exported = 0;
      for await (const page of store.exportPlants({ gardens: null, tag: null })) {
        exported += page.length;
        // While the export reads: its own connection is open beside the store's.
        const open = [...connections].filter((db) => db.open);
        assert.ok(open.length > serving, `connections open during the export: ${open.length}`);
        for (const db of open) assert.equal(stable(db), 1, db.name);
      }
      assert.equal(exported, 1);
    } finally {
      Database.prototype.prepare = prepare;
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('turns the guarantee on for its own connection only, and SQL cannot load it', () => {
    const plain = new Database(':memory:');
    const stable = new Database(':memory:');
    try {
      assert.equal(planStatementsOnce(stable), true);
      assert.equal(stable.prepare('SELECT plantstore_qpsg()').pluck().get(), 1);
      assert.throws(() => plain.prepare('SELECT plantstore_qpsg()'), /no such function/);
      // better-sqlite3 leaves SQL's load_extension() off: only the store's code loads extensions.
      assert.throws(() => plain.prepare('SELECT load_extension(?)').get(EXTENSION_FILE), /not authorized/);
    } finally {
      plain.close();
      stable.close();
    }
  });
});
