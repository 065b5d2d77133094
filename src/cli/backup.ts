import { existsSync } from 'node:fs';
import type { Command } from 'commander';
import { sqlitePath } from '../store/index.js';
import { UsageError } from '../usage-error.js';
import { configFrom, withDatabase, withRuntime } from './options.js';

/** `plantstore backup FILE`: an online, consistent copy of a SQLite store. */
export function backupCommand(program: Command): void {
  withDatabase(
    program
      .command('backup')
      .description(
        'write an online, consistent copy of a SQLite store to FILE (the service may keep running)',
      )
      .argument('<file>', 'where to write the copy; must not exist yet'),
  ).action(async (file: string, opts) => {
    if (existsSync(file)) throw new UsageError(`${file} exists already; choose a new file`);
    const { database } = configFrom(opts);
    if (!database.startsWith('sqlite:')) {
      throw new UsageError('backup copies SQLite stores; for PostgreSQL use pg_dump (see the README)');
    }
    if (!existsSync(sqlitePath(database)))
      throw new UsageError(`there is no store at ${sqlitePath(database)}`);
    await withRuntime(opts, async ({ store }) => {
      await store.backup!(file);
    });
    process.stderr.write(`backed up to ${file}\n`);
  });
}
