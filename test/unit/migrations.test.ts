// Migrations only add (docs/operations.md, "Releases and versions"): one run while the previous
// release serves must break nothing that release does. This reads every migration of both engines
// and holds the rule: one that removes or reshapes what is there, or (on PostgreSQL) locks a table
// against writes for as long as a build or a rewrite takes, must say why in unsafeWhileServing AND
// be listed below by hand, so that breaking the rule is a decision someone wrote down, never a
// slip. The list is of migrations released before the rule; a new entry needs a reason in review.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { concurrentIndexName, type Migration } from '../../src/store/migrate.js';
import { POSTGRES_MIGRATIONS } from '../../src/store/postgres/migrations.js';
import { SQLITE_MIGRATIONS } from '../../src/store/sqlite/migrations.js';

const UNSAFE: Record<string, number[]> = {
  sqlite: [3, 4, 5, 7, 8, 9, 10, 11, 13, 14, 15, 16],
  postgres: [3, 5, 6, 7, 8, 9, 10, 11, 12, 14],
};

// What removes or reshapes: the previous release may still read or write it.
const REMOVES: [RegExp, string][] = [
  [/\bDROP\s+(TABLE|INDEX|TRIGGER|VIEW|COLUMN|FUNCTION|SEQUENCE|TYPE|CONSTRAINT)\b/i, 'drops'],
  [/\bRENAME\b/i, 'renames'],
  [/\bDELETE\s+FROM\b/i, 'deletes rows'],
  [/\bTRUNCATE\s+(TABLE\s+)?[a-z_]/i, 'truncates'],
  [/\bALTER\s+COLUMN\s+\w+\s+(SET\s+DATA\s+)?TYPE\b/i, 'changes a column type'],
  [/\bSET\s+NOT\s+NULL\b/i, 'makes a column NOT NULL (the previous release may write none)'],
  [
    /\bADD\s+COLUMN\s+\w+\s[^,;]*\bNOT\s+NULL\b(?![^,;]*\bDEFAULT\b)/i,
    'adds a NOT NULL column without a default',
  ],
];

// On PostgreSQL, what holds a lock that stops writers for as long as it takes: building an index
// on a table that already has rows without CONCURRENTLY, rewriting a table, locking one by hand,
// or filling rows inside the migration's transaction (its ALTER TABLE holds the table meanwhile).
const PG_BLOCKS: [RegExp, string][] = [
  [/\bLOCK\s+TABLE\b/i, 'locks a table'],
  [/\bGENERATED\s+ALWAYS\s+AS\s*\([\s\S]*?\)\s*STORED\b/i, 'adds a stored generated column (a rewrite)'],
];

/** The tables a migration's own SQL creates: an index on one of those blocks no one. */
const created = (sql: string) =>
  new Set(
    [...sql.matchAll(/\bCREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+)/gi)].map((m) => m[1]!.toLowerCase()),
  );

function breaches(engine: string, m: Migration<never>): string[] {
  const outside = m.concurrently ?? [];
  const sql = `${m.sql}\n${m.after ?? ''}`;
  const found = [sql, ...outside].flatMap((s) =>
    REMOVES.filter(([re]) => re.test(s)).map(([, what]) => what),
  );
  // Outside the transaction (after it commits) only an index built CONCURRENTLY IF NOT EXISTS: the
  // runner checks it on every migrate and builds again one a failed build left INVALID.
  if (engine !== 'postgres' && outside.length > 0)
    found.push('has statements to run outside its transaction (PostgreSQL only)');
  for (const s of outside)
    if (concurrentIndexName(s) === undefined)
      found.push(
        `runs outside its transaction what is not CREATE INDEX CONCURRENTLY IF NOT EXISTS: ${s.trim()}`,
      );
  // Inside a transaction CONCURRENTLY cannot run at all (PostgreSQL refuses it).
  if (/\bCONCURRENTLY\b/i.test(sql)) found.push('builds CONCURRENTLY inside its transaction');
  if (engine === 'postgres') {
    found.push(...PG_BLOCKS.filter(([re]) => re.test(sql)).map(([, what]) => what));
    const fresh = created(m.sql);
    for (const [, table] of sql.matchAll(
      /\bCREATE\s+(?:UNIQUE\s+)?INDEX\s+(?!CONCURRENTLY)\w+\s+ON\s+(\w+)/gi,
    ))
      if (!fresh.has(table!.toLowerCase())) found.push(`builds an index on ${table} without CONCURRENTLY`);
    if (m.fill) found.push('fills rows inside the transaction that altered their table');
  }
  return found;
}

const ENGINES: [string, Migration<never>[]][] = [
  ['sqlite', SQLITE_MIGRATIONS as Migration<never>[]],
  ['postgres', POSTGRES_MIGRATIONS as Migration<never>[]],
];

for (const [engine, migrations] of ENGINES)
  describe(`${engine} migrations only add`, () => {
    it('were read: every migration, numbered 1, 2, 3 …', () => {
      assert.ok(migrations.length >= 14);
      assert.deepEqual(
        migrations.map((m) => m.version),
        migrations.map((_, i) => i + 1),
      );
    });

    for (const m of migrations)
      it(`${m.name}: ${m.unsafeWhileServing ? 'marked unsafe and listed' : 'only adds'}`, () => {
        const found = breaches(engine, m);
        const listed = UNSAFE[engine]!.includes(m.version);
        if (found.length > 0)
          assert.ok(
            m.unsafeWhileServing && listed,
            `${m.name} ${found.join(', ')}: migrations only add (docs/operations.md). Add instead and remove one release later; if it truly cannot, say why in unsafeWhileServing and list version ${m.version} in this test's UNSAFE`,
          );
        assert.equal(
          Boolean(m.unsafeWhileServing),
          listed,
          listed
            ? `${m.name} is listed as unsafe here but says no reason (unsafeWhileServing)`
            : `${m.name} says it is unsafe while the previous release serves but is not listed in this test's UNSAFE`,
        );
      });
  });

describe('the rule catches what it names', () => {
  const m = (sql: string, extra: Partial<Migration<never>> = {}): Migration<never> => ({
    version: 99,
    name: 'x',
    sql,
    ...extra,
  });
  const cases: [string, string, string, boolean][] = [
    ['sqlite', 'DROP TABLE plants', 'a dropped table', true],
    ['sqlite', 'ALTER TABLE plants DROP COLUMN tag', 'a dropped column', true],
    ['postgres', 'ALTER TABLE plants RENAME COLUMN tag TO label', 'a renamed column', true],
    ['postgres', 'ALTER TABLE plants ALTER COLUMN tag TYPE integer USING 0', 'a changed type', true],
    ['postgres', 'ALTER TABLE plants ADD COLUMN n integer NOT NULL', 'NOT NULL without a default', true],
    ['postgres', 'CREATE INDEX plants_n ON plants (n)', 'an index built blocking writes', true],
    [
      'postgres',
      'ALTER TABLE plants ADD COLUMN n integer NOT NULL DEFAULT 0',
      'a column with a default',
      false,
    ],
    [
      'postgres',
      'CREATE INDEX CONCURRENTLY plants_n ON plants (n)',
      'an index built concurrently in the transaction',
      true,
    ],
    [
      'postgres',
      'CREATE TABLE trash (id bigint); CREATE INDEX trash_id ON trash (id)',
      'a new table and its index',
      false,
    ],
    ['sqlite', 'ALTER TABLE plants ADD COLUMN deleted_at INTEGER', 'a nullable column', false],
  ];
  for (const [engine, sql, what, caught] of cases)
    it(`${engine}: ${what} ${caught ? 'breaks' : 'keeps'} the rule`, () => {
      assert.equal(breaches(engine, m(sql)).length > 0, caught, sql);
    });
  const outside: [string, string, string, boolean][] = [
    [
      'postgres',
      'CREATE INDEX CONCURRENTLY IF NOT EXISTS plants_n ON plants (n) WHERE n > 0',
      'an index built concurrently outside the transaction',
      false,
    ],
    [
      'postgres',
      'CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS plants_n ON plants (n)',
      'a unique index built concurrently outside the transaction',
      false,
    ],
    [
      'postgres',
      'CREATE INDEX CONCURRENTLY plants_n ON plants (n)',
      'one without IF NOT EXISTS (not run again safely)',
      true,
    ],
    ['postgres', 'CREATE INDEX plants_n ON plants (n)', 'an index built blocking writes outside it', true],
    ['postgres', 'DROP INDEX CONCURRENTLY plants_n', 'an index dropped outside it', true],
    [
      'sqlite',
      'CREATE INDEX CONCURRENTLY IF NOT EXISTS plants_n ON plants (n)',
      'a statement outside the transaction',
      true,
    ],
  ];
  for (const [engine, statement, what, caught] of outside)
    it(`${engine}: ${what} ${caught ? 'breaks' : 'keeps'} the rule`, () => {
      assert.equal(
        breaches(engine, m('CREATE TABLE t (id bigint)', { concurrently: [statement] })).length > 0,
        caught,
        statement,
      );
    });
});
