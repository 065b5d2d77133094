import type { Command } from 'commander';
import { withDatabase, withRuntime } from './options.js';

/** `plantstore migrate`: brings the schema up to date and says what it applied. */
export function migrateCommand(program: Command): void {
  withDatabase(program.command('migrate').description('bring the store schema up to date')).action(
    async (opts) => {
      const applied = await withRuntime(opts, async (runtime) => runtime.applied);
      process.stderr.write(applied.length ? `applied ${applied.join(', ')}\n` : 'schema is up to date\n');
    },
  );
}
