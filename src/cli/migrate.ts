import { existsSync } from 'node:fs';
import { type Command, Option } from 'commander';
import type { PendingMigration } from '../store/migrate.js';
import { configFrom, withDatabase, withRuntime } from './options.js';

/** `plantstore migrate`: brings the schema up to date and says what it applied; `--dry-run` lists only. */
export function migrateCommand(program: Command): void {
  withDatabase(program.command('migrate').description('bring the store schema up to date'))
    .addOption(
      new Option(
        '--dry-run',
        'list the pending migrations, each with whether it is safe to run while the previous release serves, and apply none',
      ),
    )
    .addOption(new Option('--json', 'with --dry-run: one JSON object per pending migration, a line each'))
    .action(async (opts: Record<string, unknown>) => {
      if (opts.dryRun) return dryRun(opts);
      const applied = await withRuntime(opts, async (runtime) => runtime.applied);
      process.stderr.write(applied.length ? `applied ${applied.join(', ')}\n` : 'schema is up to date\n');
    });
}

async function dryRun(opts: Record<string, unknown>): Promise<void> {
  const config = configFrom(opts);
  const { openStore, sqlitePath } = await import('../store/index.js');
  // A SQLite file that does not exist yet has applied nothing; opening it would create it, so an
  // empty store in memory is asked instead.
  const absent =
    config.database.startsWith('sqlite:') &&
    sqlitePath(config.database) !== ':memory:' &&
    !existsSync(sqlitePath(config.database));
  const store = await openStore({
    url: absent ? 'sqlite::memory:' : config.database,
    durability: config.durability,
    poolSize: 1,
  });
  let pending: PendingMigration[];
  let schema: number;
  try {
    pending = await store.migrationsPending();
    schema = await store.schemaVersion();
  } finally {
    await store.close();
  }
  for (const m of pending) {
    const safe = m.unsafeWhileServing === undefined;
    process.stdout.write(
      opts.json
        ? `${JSON.stringify({ version: m.version, name: m.name, safeWhileServing: safe, ...(safe ? {} : { reason: m.unsafeWhileServing }) })}\n`
        : `${m.name}\t${safe ? 'safe while the previous release serves' : `NOT safe while the previous release serves: ${m.unsafeWhileServing}`}\n`,
    );
  }
  const unsafe = pending.filter((m) => m.unsafeWhileServing !== undefined).length;
  process.stderr.write(
    pending.length === 0
      ? `schema is up to date (version ${schema}); nothing to apply\n`
      : `${pending.length} pending (schema at version ${schema}, ${unsafe} not safe while the previous release serves); dry run: none applied\n`,
  );
}
