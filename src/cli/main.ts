import { Command, CommanderError } from 'commander';
import { PlantStoreError } from '../client/index.js';
import { ConfigError } from '../config.js';
import { NewerSchemaError } from '../store/migrate.js';
import { UsageError } from '../usage-error.js';
import { VERSION } from '../version.js';
import { backupCommand } from './backup.js';
import { deliverCommand } from './deliver.js';
import { eventCommands } from './events.js';
import { gardenCommands } from './gardens.js';
import { migrateCommand } from './migrate.js';
import { plantCommands } from './plants.js';
import { serveCommand } from './serve.js';
import { storeFileCommands } from './store-file.js';
import { tokenCommands } from './token.js';
import { trashCommands } from './trash.js';

/** `plantstore`: the service's commands, then the client commands, in the order --help lists them. */
export function buildCli(): Command {
  const program = new Command('plantstore')
    .description('A Plant Store HTTP service on SQLite or PostgreSQL')
    .version(VERSION, '-V, --version', 'print the version of this release')
    .showSuggestionAfterError(false)
    .exitOverride()
    .configureOutput({ outputError: () => {} });
  serveCommand(program);
  deliverCommand(program);
  migrateCommand(program);
  backupCommand(program);
  storeFileCommands(program);
  tokenCommands(program);
  plantCommands(program);
  trashCommands(program);
  gardenCommands(program);
  eventCommands(program);
  return program;
}

// Each run of whitespace that holds a line break becomes one space. /\s*\n\s*/ said the same and
// took time quadratic in a long run of spaces (every start in the run scanned the rest of it).
const oneLine = (text: string) => text.replace(/\s+/g, (run) => (run.includes('\n') ? ' ' : run));

export async function main(argv: string[]): Promise<void> {
  try {
    await buildCli().parseAsync(argv);
  } catch (err) {
    if (err instanceof CommanderError) {
      if (err.exitCode === 0) return; // --help, --version
      process.stderr.write(`plantstore: ${oneLine(err.message.replace(/^error: /, ''))}\n`);
      process.exit(2);
    }
    if (err instanceof PlantStoreError) {
      // 3: the service could not be reached; 1: it refused, with its own message.
      const refused = err.status === 0 ? '' : ` (${err.code}, HTTP ${err.status})`;
      process.stderr.write(`plantstore: ${err.message}${refused}\n`);
      process.exit(err.status === 0 ? 3 : 1);
    }
    if (err instanceof NewerSchemaError) {
      process.stderr.write(
        `plantstore: the store's schema is version ${err.schema}, newer than plantstore ${VERSION} knows (its newest is ${err.known}): run the release that migrated it, or a newer one\n`,
      );
      process.exit(1);
    }
    if (err instanceof UsageError || err instanceof ConfigError) {
      process.stderr.write(`plantstore: ${err.message}\n`);
      process.exit(2);
    }
    process.stderr.write(`plantstore: ${(err as Error).message}\n`);
    process.exit(1);
  }
}

await main(process.argv);
