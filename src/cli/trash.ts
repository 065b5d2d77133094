import type { Command } from 'commander';
import type { TrashedPlant } from '../client/index.js';
import { type ClientOpts, connect, gardenId, out, withClient } from './client.js';
import { plantId } from './plants.js';

// `plantstore trash list|restore|purge` (contract 13.2), on a running service through the client.

/** One trashed plant a line: id, name, tag (empty when none), garden, deleted at, by, purged at. */
const trashLine = (t: TrashedPlant) =>
  [t.id, t.name, t.tag ?? '', t.garden, t.deletedAt, t.deletedBy, t.purgeAt].join('\t');

export function trashCommands(program: Command): void {
  const trash = program
    .command('trash')
    .description('list, restore and erase deleted plants on a running service');

  withClient(
    trash
      .command('list')
      .description(
        'the trash of the gardens where you may restore, newest deletion first: id, name, tag, garden, deleted at, by, purged at; NDJSON with --json',
      )
      .option('--garden <gid>', "only this garden's trash"),
  ).action(async (o: ClientOpts & { garden?: string }) => {
    const garden = o.garden === undefined ? undefined : gardenId(o.garden, '--garden');
    for await (const t of connect(o).trash.list(garden === undefined ? {} : { garden })) {
      out(o.json ? JSON.stringify(t) : trashLine(t));
    }
  });

  withClient(
    trash
      .command('restore')
      .description('put a deleted plant back in its garden (a new version); prints its id')
      .argument('<id>', 'plant id'),
  ).action(async (id: string, o: ClientOpts) => {
    const p = await connect(o).trash.restore(plantId(id));
    out(o.json ? JSON.stringify(p) : String(p.id));
  });

  withClient(
    trash.command('purge').description('erase a deleted plant for good').argument('<id>', 'plant id'),
  ).action(async (id: string, o: ClientOpts) => {
    const n = plantId(id);
    await connect(o).trash.purge(n);
    if (o.json) out(JSON.stringify({ id: n, purged: true }));
    else process.stderr.write(`erased plant ${n} for good\n`);
  });
}
