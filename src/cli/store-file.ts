import { randomBytes } from 'node:crypto';
import { createWriteStream, existsSync, linkSync, rmSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { finished } from 'node:stream/promises';
import type { Command } from 'commander';
import { commandSpan } from '../telemetry/tracing.js';
import { UsageError } from '../usage-error.js';
import { configFrom, withDatabase } from './options.js';

// `plantstore export [--to FILE]` and `plantstore import FILE` (contract section 12): a whole store,
// either engine, as one portable file, and into an empty store of either engine.

const SECRETS = 'it holds webhook secrets and token hashes: keep it private';

// The stores' and the file's modules, loaded when export or import runs rather than whenever any
// command starts (`--help`, the client commands): together they take half a second to load.
async function modules() {
  const [file, dump, index, backup] = await Promise.all([
    import('../ops/store-file.js'),
    import('../store/dump.js'),
    import('../store/index.js'),
    import('../store/sqlite/backup.js'),
  ]);
  return { ...file, ...dump, ...index, ...backup };
}

/** `plantstore export` and `plantstore import`. */
export function storeFileCommands(program: Command): void {
  withDatabase(
    program
      .command('export')
      .description(
        `write the whole store, as of one commit, to one portable file (mode 0600: ${SECRETS}); standard output without --to`,
      )
      .option('--to <file>', 'a new file'),
  ).action((opts) => commandSpan('export', () => exportStore(opts)));
  async function exportStore(opts: Record<string, unknown>): Promise<void> {
    const { describeCounts, dumpStore, fsyncPath, sqlitePath, StoreFileWriter, storeSchema } =
      await modules();
    const { database } = configFrom(opts);
    if (database.startsWith('sqlite:') && !existsSync(resolve(sqlitePath(database)))) {
      throw new UsageError(`there is no store at ${database}`);
    }
    const schema = await storeSchema(database);
    if (opts.to === undefined) {
      const writer = new StoreFileWriter(process.stdout, schema);
      for await (const r of dumpStore(database)) await writer.write(r);
      const counts = await writer.end();
      process.stderr.write(`exported ${describeCounts(counts)}; ${SECRETS}\n`);
      return;
    }
    const target = resolve(opts.to as string);
    if (existsSync(target)) throw new UsageError(`${target} exists already; choose a new file`);
    if (!existsSync(dirname(target))) throw new UsageError(`the directory ${dirname(target)} does not exist`);
    // Written under a temporary name, synced, then linked to its name (never over another file).
    const temp = join(dirname(target), `.${basename(target)}.${randomBytes(6).toString('hex')}.tmp`);
    const out = createWriteStream(temp, { mode: 0o600, flags: 'wx' });
    try {
      const writer = new StoreFileWriter(out, schema);
      for await (const r of dumpStore(database)) await writer.write(r);
      const counts = await writer.end();
      out.end();
      await finished(out);
      fsyncPath(temp);
      try {
        linkSync(temp, target);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'EEXIST')
          throw new UsageError(`${target} exists already; choose a new file`);
        throw err;
      }
      fsyncPath(dirname(target));
      process.stderr.write(`exported ${describeCounts(counts)} to ${target} (mode 0600: ${SECRETS})\n`);
    } finally {
      out.destroy();
      rmSync(temp, { force: true });
    }
  }

  withDatabase(
    program
      .command('import')
      .description(
        'load an export file into an empty store of either engine, in one transaction: a truncated, altered or unknown file, or a store that holds data, is refused with nothing written (exit 1), and so is a record the API would refuse or that names what the file does not hold (exit 2)',
      )
      .argument('<file>', 'a file written by plantstore export'),
  ).action((file: string, opts) => commandSpan('import', () => importStore(file, opts)));
  async function importStore(file: string, opts: Record<string, unknown>): Promise<void> {
    const { describeCounts, loadStore, openStore, StoreFileReader, StoreRecordRefused } = await modules();
    const { database } = configFrom(opts);
    if (!existsSync(file)) throw new UsageError(`${file} does not exist`);
    const store = await openStore({ url: database, durability: 'full', poolSize: 1 });
    try {
      await store.migrate();
    } finally {
      await store.close();
    }
    const reader = new StoreFileReader(file);
    try {
      await loadStore(database, reader.records());
    } catch (err) {
      // A record the API would never have made: the file's content is refused, as a bad flag is.
      if (err instanceof StoreRecordRefused) throw new UsageError(err.message);
      throw err;
    }
    const { header, counts } = reader.summary!;
    process.stdout.write(
      `imported ${describeCounts(counts)} (exported from ${header.schema.engine} at ${header.createdAt})\n`,
    );
  }
}
