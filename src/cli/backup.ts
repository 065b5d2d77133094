import { existsSync, mkdirSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import type { Command } from 'commander';
import { backupName } from '../ops/backups.js';
import { sqlitePath } from '../store/index.js';
import {
  type BackupCheck,
  BackupRefused,
  backupStore,
  checkBackup,
  holdsData,
  inUse,
  restoreStore,
} from '../store/sqlite/backup.js';
import { SqliteStore } from '../store/sqlite/store.js';
import { commandSpan } from '../telemetry/tracing.js';
import { UsageError } from '../usage-error.js';
import { configFrom, withDatabase } from './options.js';

// `plantstore backup`, `backup verify` and `restore` (contract section 12): SQLite's own; on
// PostgreSQL they point to PostgreSQL's tools (docs/operations.md).

const POSTGRES =
  'on PostgreSQL, use its own tools: pg_dump/pg_restore, or base backups with WAL archiving (docs/operations.md)';

/** The SQLite file a command's --database names; a usage error on PostgreSQL. */
function sqliteFile(opts: Record<string, unknown>): string {
  const { database } = configFrom(opts);
  if (!database.startsWith('sqlite:')) throw new UsageError(POSTGRES);
  return resolve(sqlitePath(database));
}

const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MB`;
const counts = (c: BackupCheck['counts']) =>
  `${c.plants} plants, ${c.gardens} gardens, ${c.members} members, ${c.tokens} tokens, ${c.webhooks} webhooks, ${c.events} events`;

/** `plantstore backup [--to PATH]`, `backup verify FILE` and `restore FILE`. */
export function backupCommand(program: Command): void {
  withDatabase(
    program
      .command('backup')
      .description(
        'write a consistent, checked copy of a SQLite store while it serves (PATH: a file, or a directory for plantstore-<time>.db; default: backups/ beside the store); `backup verify FILE` checks a backup',
      )
      .argument('[args...]', 'FILE (the same as --to FILE), or `verify FILE`')
      .option('--to <path>', 'a new file, or a directory'),
  ).action(async (args: string[], opts) => {
    if (args[0] === 'verify') {
      if (args.length !== 2) throw new UsageError('usage: plantstore backup verify FILE');
      return verify(args[1]!);
    }
    if (args.length > 1 || (args.length === 1 && opts.to !== undefined)) {
      throw new UsageError('usage: plantstore backup [--to PATH]');
    }
    const source = sqliteFile(opts);
    if (!existsSync(source)) throw new UsageError(`there is no store at ${source}`);
    const to = resolve(args[0] ?? opts.to ?? join(dirname(source), 'backups'));
    const isDir = existsSync(to)
      ? statSync(to).isDirectory()
      : args[0] === undefined && opts.to === undefined;
    if (isDir) mkdirSync(to, { recursive: true });
    const target = isDir ? join(to, backupName(new Date())) : to;
    if (existsSync(target)) throw new UsageError(`${target} exists already; choose a new file`);
    if (!existsSync(dirname(target))) throw new UsageError(`the directory ${dirname(target)} does not exist`);
    const made = await commandSpan('backup', () => backupStore(source, target));
    process.stdout.write(
      `${target}\t${mb(made.bytes)}\t${made.counts.plants} plants\tas of ${made.asOf.toISOString()}\n`,
    );
  });

  withDatabase(
    program
      .command('restore')
      .description(
        'make the SQLite store --database names from a backup (checked first; an older schema is migrated); refuses a store that holds data unless --force, and one a running process has open',
      )
      .argument('<file>', 'the backup')
      .option('--force', 'replace a store that holds data'),
  ).action(async (file: string, opts) => {
    const target = sqliteFile(opts);
    let check: BackupCheck;
    try {
      check = checkBackup(file);
    } catch (err) {
      if (err instanceof BackupRefused) throw new Refusal(err.message);
      throw err;
    }
    if (inUse(target)) throw new Refusal(`${target} is open by a running process; stop it first`);
    if (!opts.force && holdsData(target)) {
      throw new Refusal(`${target} holds data; restore over it with --force`);
    }
    mkdirSync(dirname(target), { recursive: true });
    await restoreStore(file, target);
    // An older schema is brought up to this version's.
    const store = new SqliteStore({ path: target, durability: 'full', writer: 'inline' });
    let migrated: string[];
    try {
      migrated = await store.migrate();
    } finally {
      await store.close();
    }
    process.stdout.write(
      `restored ${file} to ${target}: ${counts(check.counts)}${migrated.length ? `; migrated ${migrated.join(', ')}` : ''}\n`,
    );
  });
}

/** A refusal of the store's: exit 1 with its reason (a usage error is 2). */
class Refusal extends Error {}

function verify(file: string): void {
  try {
    const c = checkBackup(file);
    process.stdout.write(`${file}: ok, schema ${c.schema}, ${mb(c.bytes)}, ${counts(c.counts)}\n`);
  } catch (err) {
    if (err instanceof BackupRefused) throw new Refusal(err.message);
    throw err;
  }
}
