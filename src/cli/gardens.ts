import type { Command } from 'commander';
import { type EventType, type Garden, ROLES, type Role } from '../client/index.js';
import { isValidUser } from '../identity/tokens.js';
import { EVENT_TYPES } from '../store/ports/events.js';
import { UsageError } from '../usage-error.js';
import { type ClientOpts, connect, gardenId, out, withClient } from './client.js';
import { printEvents } from './event-lines.js';

function userName(text: string): string {
  if (!isValidUser(text)) {
    throw new UsageError(
      `a user is 1 to 200 printable characters without spaces; got ${JSON.stringify(text)}`,
    );
  }
  return text;
}

function role(text: string): Role {
  if (!(ROLES as readonly string[]).includes(text)) {
    throw new UsageError(`--role must be ${ROLES.join(', ')}; got ${JSON.stringify(text)}`);
  }
  return text as Role;
}

const gardenLine = (g: Garden) => `${g.id}\t${g.name}\t${g.role}`;

/** `plantstore gardens list|create|share|unshare|activity`, on a running service. */
export function gardenCommands(program: Command): void {
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

  withClient(
    gardens
      .command('activity')
      .description(
        "a garden's events still kept, plants' and members', newest first: time, type, who, and the plant or member; NDJSON with --json",
      )
      .argument('<gid>', 'garden id (gdn_…)')
      .option('--type <types>', `only these event types, comma-separated: ${EVENT_TYPES.join(', ')}`),
  ).action(async (gid: string, o: ClientOpts & { type?: string }) => {
    const type = o.type === undefined ? undefined : eventTypes(o.type);
    await printEvents(
      connect(o).gardens.activity(gardenId(gid), type === undefined ? {} : { type }),
      o.json,
      out,
    );
  });
}

function eventTypes(text: string): EventType[] {
  const types = text.split(',');
  const bad = types.find((t) => !(EVENT_TYPES as readonly string[]).includes(t));
  if (bad !== undefined) {
    throw new UsageError(
      `--type must be a comma-separated list of ${EVENT_TYPES.join(', ')}; got ${JSON.stringify(bad)}`,
    );
  }
  return types as EventType[];
}
