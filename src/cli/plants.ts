import type { Command } from 'commander';
import { type ListedPlant, type PlantPatch, type PlantStore, PlantStoreError } from '../client/index.js';
import { ID_TEXT, LIMIT_TEXT } from '../schemas/plant.js';
import { UsageError } from '../usage-error.js';
import { type ClientOpts, connect, gardenId, out, withClient } from './client.js';
import { printEvents } from './event-lines.js';
import { listLine, plantFileCommands } from './plant-files.js';
import { plantSyncCommand } from './plant-sync.js';

export function plantId(text: string): number {
  const id = Number(text);
  if (!new RegExp(ID_TEXT).test(text) || !Number.isSafeInteger(id)) {
    throw new UsageError(`a plant id is a whole number 1 … 9007199254740991; got ${JSON.stringify(text)}`);
  }
  return id;
}

const line = (p: ListedPlant) => `${p.id}\t${p.name}${p.tag === undefined ? '' : `\t${p.tag}`}`;

/** `plantstore plants create|list|get|update|delete`, on a running service. */
export function plantCommands(program: Command): void {
  const plants = program
    .command('plants')
    .description('create, list, search, read, delete, export, import and sync plants on a running service');

  withClient(
    plants
      .command('create')
      .description('create a plant; prints its id')
      .requiredOption('--name <name>', 'the plant’s name')
      .option('--tag <tag>', 'its tag')
      .option('--id <id>', 'an id of your choosing (default: the service assigns one)')
      .option('--garden <gid>', 'the garden to put it in (default: your home garden)'),
  ).action(async (o: ClientOpts & { name: string; tag?: string; id?: string; garden?: string }) => {
    const garden = o.garden === undefined ? undefined : gardenId(o.garden, '--garden');
    const plant = {
      name: o.name,
      ...(o.tag === undefined ? {} : { tag: o.tag }),
      ...(o.id === undefined ? {} : { id: plantId(o.id) }),
    };
    const p = await connect(o).create(plant, garden === undefined ? {} : { garden });
    out(o.json ? JSON.stringify(p) : String(p.id));
  });

  withClient(
    plants
      .command('list')
      .description('one line per plant: id, name, tag (empty when none), garden')
      .option('--tag <tag>', 'only plants with this tag')
      .option('--garden <gid>', 'only the plants of this garden')
      .option('--limit <n>', 'page size, 1 … 1000 (default 100)')
      .option('--all', 'follow every next link, not only the first page'),
  ).action(async (o: ClientOpts & { tag?: string; garden?: string; limit?: string; all?: boolean }) => {
    if (o.limit !== undefined && !new RegExp(LIMIT_TEXT).test(o.limit)) {
      throw new UsageError(`--limit must be 1 … 1000; got ${JSON.stringify(o.limit)}`);
    }
    const garden = o.garden === undefined ? undefined : gardenId(o.garden, '--garden');
    const store = connect(o);
    const q = {
      include: ['garden'] as const,
      ...(o.tag === undefined ? {} : { tag: o.tag }),
      ...(garden === undefined ? {} : { garden }),
      ...(o.limit ? { limit: Number(o.limit) } : {}),
    };
    const plants: ListedPlant<'garden'>[] = [];
    if (o.all) {
      for await (const p of store.list(q)) {
        if (o.json) plants.push(p);
        else out(listLine(p));
      }
    } else {
      const page = await store.page(q);
      if (o.json) plants.push(...page.plants);
      else for (const p of page.plants) out(listLine(p));
      if (page.next && !o.json) process.stderr.write('more plants follow: --all lists them all\n');
    }
    if (o.json) out(JSON.stringify(plants));
  });

  withClient(plants.command('get').description('read one plant').argument('<id>', 'plant id')).action(
    async (id: string, o: ClientOpts) => {
      const n = plantId(id);
      const { etag, ...plant } = await connect(o).get(n);
      const p = { id: n, ...plant };
      out(o.json ? JSON.stringify({ ...p, etag }) : line(p));
    },
  );

  withClient(
    plants
      .command('update')
      .description('change one plant: reads it, then changes it only if nobody else has meanwhile')
      .argument('<id>', 'plant id')
      .option('--name <name>', 'its new name')
      .option('--tag <tag>', 'its new tag')
      .option('--no-tag', 'remove its tag'),
  ).action(async (id: string, o: ClientOpts & { name?: string; tag?: string | false }) => {
    const n = plantId(id);
    // commander gives tag: true when neither --tag nor --no-tag was given.
    const tag = o.tag === false ? null : typeof o.tag === 'string' ? o.tag : undefined;
    if (o.name === undefined && tag === undefined)
      throw new UsageError('nothing to change: --name, --tag or --no-tag');
    const patch: PlantPatch = {
      ...(o.name === undefined ? {} : { name: o.name }),
      ...(tag === undefined ? {} : { tag }),
    };
    const store = connect(o);
    const before = await store.get(n);
    let after: Awaited<ReturnType<PlantStore['get']>>;
    try {
      after = await store.update(n, patch, { ifMatch: before.etag });
    } catch (err) {
      if (!(err instanceof PlantStoreError) || err.status !== 412) throw err;
      // Someone changed it between the read and the change: say what it is now, change nothing.
      const now = await store.get(n);
      const shown = `name ${JSON.stringify(now.name)}, ${now.tag === undefined ? 'no tag' : `tag ${JSON.stringify(now.tag)}`}`;
      throw new PlantStoreError(
        412,
        err.code,
        `plant ${n} changed meanwhile and was not changed; it is now: ${shown}`,
      );
    }
    const p = { id: n, name: after.name, ...(after.tag === undefined ? {} : { tag: after.tag }) };
    out(o.json ? JSON.stringify({ ...p, etag: after.etag }) : line(p));
  });

  withClient(plants.command('delete').description('delete one plant').argument('<id>', 'plant id')).action(
    async (id: string, o: ClientOpts) => {
      const n = plantId(id);
      await connect(o).delete(n);
      if (o.json) out(JSON.stringify({ id: n, deleted: true }));
      else process.stderr.write(`deleted plant ${n}\n`);
    },
  );

  withClient(
    plants
      .command('history')
      .description(
        'the events of one plant still kept (a deleted one too), newest first: time, type, who, id, name; NDJSON with --json',
      )
      .argument('<id>', 'plant id'),
  ).action(async (id: string, o: ClientOpts) => {
    await printEvents(connect(o).plants.history(plantId(id)), o.json, out);
  });

  plantFileCommands(plants);
  plantSyncCommand(plants);
}
