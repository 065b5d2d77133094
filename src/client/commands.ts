import { randomBytes } from 'node:crypto';
import type { Command } from 'commander';
import { isValidUser } from '../identity/tokens.js';
import { ID_TEXT, LIMIT_TEXT } from '../schemas/plant.js';
import { UsageError } from '../usage-error.js';
import {
  type Garden,
  type ListedPlant,
  type PlantEvent,
  type PlantPatch,
  PlantStore,
  PlantStoreError,
  type Role,
  signWebhook,
} from './index.js';

/**
 * The client commands of CONTRACT.md section 7: `plants create|list|get|update|delete`,
 * `gardens list|create|share|unshare` and `events tail`, speaking HTTP to a running service through
 * the project's own client. Exit status: 0 success, 1 the service refused (its message on stderr),
 * 2 bad usage, 3 the service could not be reached.
 */
interface ClientOpts {
  url?: string;
  token?: string;
  json?: boolean;
}

function connect(opts: ClientOpts): PlantStore {
  const url = opts.url ?? process.env.PLANTSTORE_URL ?? 'http://127.0.0.1:3000';
  const token = opts.token ?? process.env.PLANTSTORE_TOKEN;
  if (!token) throw new UsageError('a token is needed: --token or PLANTSTORE_TOKEN');
  if (!URL.canParse(url) || !/^https?:$/.test(new URL(url).protocol)) {
    throw new UsageError(`--url must be an http(s) URL; got ${JSON.stringify(url)}`);
  }
  return new PlantStore({ url, token });
}

function withClient(cmd: Command): Command {
  return cmd
    .option('--url <url>', 'the service (env PLANTSTORE_URL, default http://127.0.0.1:3000)')
    .option('--token <token>', 'bearer token (env PLANTSTORE_TOKEN)')
    .option('--json', 'print JSON instead of lines');
}

function plantId(text: string): number {
  const id = Number(text);
  if (!new RegExp(ID_TEXT).test(text) || !Number.isSafeInteger(id)) {
    throw new UsageError(`a plant id is a whole number 1 … 9007199254740991; got ${JSON.stringify(text)}`);
  }
  return id;
}

// A garden id is opaque to the client: any text but an empty one (the service says whether it is one).
function gardenId(text: string, what = 'a garden id'): string {
  if (text === '') throw new UsageError(`${what} must not be empty`);
  return text;
}

function userName(text: string): string {
  if (!isValidUser(text)) {
    throw new UsageError(
      `a user is 1 to 200 printable characters without spaces; got ${JSON.stringify(text)}`,
    );
  }
  return text;
}

const ROLES: readonly Role[] = ['viewer', 'editor', 'owner'];
function role(text: string): Role {
  if (!(ROLES as readonly string[]).includes(text)) {
    throw new UsageError(`--role must be ${ROLES.join(', ')}; got ${JSON.stringify(text)}`);
  }
  return text as Role;
}

const line = (p: ListedPlant) => `${p.id}\t${p.name}${p.tag === undefined ? '' : `\t${p.tag}`}`;
// A list line (contract version 3): id, name, tag (empty when none) and garden, always four fields.
const listLine = (p: ListedPlant<'garden'>) => `${p.id}\t${p.name}\t${p.tag ?? ''}\t${p.garden}`;
const gardenLine = (g: Garden) => `${g.id}\t${g.name}\t${g.role}`;
const out = (text: string) => process.stdout.write(`${text}\n`);

export function registerClientCommands(program: Command): void {
  const plants = program
    .command('plants')
    .description('create, list, read and delete plants on a running service');

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

  const gardens = program
    .command('gardens')
    .description('list and create gardens, and share them with other users, on a running service');

  withClient(
    gardens.command('list').description('one line per garden you are a member of: id, name, your role'),
  ).action(async (o: ClientOpts) => {
    const list = await connect(o).gardens.list();
    if (o.json) out(JSON.stringify(list));
    else for (const g of list) out(gardenLine(g));
  });

  withClient(
    gardens
      .command('create')
      .description('create a garden (you are its owner); prints its id')
      .argument('<name>', 'the garden’s name'),
  ).action(async (name: string, o: ClientOpts) => {
    const g = await connect(o).gardens.create(name);
    out(o.json ? JSON.stringify(g) : g.id);
  });

  withClient(
    gardens
      .command('share')
      .description('add a user to a garden, or change its role there (owners only)')
      .argument('<gid>', 'garden id (gdn_…)')
      .argument('<user>', 'the user, as its tokens name it')
      .option('--role <role>', 'viewer, editor or owner', 'viewer'),
  ).action(async (gid: string, user: string, o: ClientOpts & { role: string }) => {
    const args = [gardenId(gid), userName(user), role(o.role)] as const;
    const { member, created } = await connect(o).gardens.share(...args);
    if (o.json) out(JSON.stringify({ ...member, created }));
    else
      process.stderr.write(
        created
          ? `added ${member.user} to garden ${gid} as ${member.role}\n`
          : `${member.user} is ${member.role} in garden ${gid}\n`,
      );
  });

  withClient(
    gardens
      .command('unshare')
      .description('remove a user from a garden (owners; or yourself, to leave it)')
      .argument('<gid>', 'garden id (gdn_…)')
      .argument('<user>', 'the user, as its tokens name it'),
  ).action(async (gid: string, user: string, o: ClientOpts) => {
    const args = [gardenId(gid), userName(user)] as const;
    await connect(o).gardens.unshare(...args);
    if (o.json) out(JSON.stringify({ garden: gid, user, removed: true }));
    else process.stderr.write(`removed ${user} from garden ${gid}\n`);
  });

  const events = program.command('events').description('the live stream of plant events');
  withClient(
    events
      .command('tail')
      .description('print events as they happen (resuming after a lost connection); Ctrl-C stops')
      .option(
        '--forward-to <url>',
        'also POST each event to this URL, signed as Standard Webhooks deliveries are, with a secret printed at start',
      )
      .option('--last-event-id <id>', 'start right after this event'),
  ).action(async (o: ClientOpts & { forwardTo?: string; lastEventId?: string }) => {
    if (
      o.forwardTo !== undefined &&
      (!URL.canParse(o.forwardTo) || !/^https?:$/.test(new URL(o.forwardTo).protocol))
    ) {
      throw new UsageError(`--forward-to must be an http(s) URL; got ${JSON.stringify(o.forwardTo)}`);
    }
    const store = connect(o);
    const secret = `whsec_${randomBytes(24).toString('base64')}`;
    if (o.forwardTo) {
      process.stderr.write(`forwarding events to ${o.forwardTo}\nsigning secret: ${secret}\n`);
    }
    const stop = new AbortController();
    const onSignal = () => stop.abort();
    process.once('SIGINT', onSignal);
    process.once('SIGTERM', onSignal);
    try {
      for await (const e of store.events({
        signal: stop.signal,
        onOpen: () => process.stderr.write('connected: streaming events as they commit\n'),
        ...(o.lastEventId ? { lastEventId: o.lastEventId } : {}),
      })) {
        out(o.json ? JSON.stringify(e) : `${e.id}\t${e.type}\t${JSON.stringify(e.data)}`);
        if (o.forwardTo) await forward(o.forwardTo, secret, e);
      }
    } finally {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    }
  });
}

/** POSTs one event to a local receiver as a Standard Webhooks delivery; reports the outcome on stderr. */
async function forward(url: string, secret: string, e: PlantEvent): Promise<void> {
  const { id, ...payload } = e;
  const body = JSON.stringify(payload);
  const timestamp = Math.floor(Date.now() / 1000);
  try {
    const res = await fetch(url, {
      method: 'POST',
      redirect: 'manual',
      headers: {
        'content-type': 'application/json',
        'webhook-id': id,
        'webhook-timestamp': String(timestamp),
        'webhook-signature': await signWebhook(secret, id, timestamp, body),
      },
      body,
      signal: AbortSignal.timeout(15_000),
    });
    await res.body?.cancel();
    process.stderr.write(`${id} → ${res.status}\n`);
  } catch (err) {
    process.stderr.write(`${id} → not delivered: ${(err as Error).message}\n`);
  }
}
