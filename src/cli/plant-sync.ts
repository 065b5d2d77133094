import { randomBytes } from 'node:crypto';
import { closeSync, fsyncSync, openSync, readFileSync, renameSync, rmSync, writeSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Command } from 'commander';
import type { PlantChange } from '../client/index.js';
import { LIMIT_TEXT } from '../schemas/plant.js';
import { UsageError } from '../usage-error.js';
import { type ClientOpts, connect, gardenId, out, withClient } from './client.js';

// `plantstore plants sync --state FILE` (contract 13.4): a copy of the plants kept with the change
// feed. FILE is NDJSON: a first line `{"sync": 1, "position": "…", "garden": null|"gdn_…"}`, then
// one plant a line as the export writes them, `{id, name, tag?, garden, version}`, by id. Each run
// reads FILE, asks the feed for what changed since its position, applies it, and writes FILE anew:
// to a temporary file beside it, flushed to disk, then renamed over it, so FILE is always a whole
// copy, the one before or the one after.

type Held = Extract<PlantChange, { op: 'upsert' }>['plant'];
interface State {
  position: string | null;
  garden: string | null;
  plants: Map<number, Held>;
}

/** The state FILE holds; none yet (no such file): an empty copy with no position. */
export function readState(file: string): State {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT')
      return { position: null, garden: null, plants: new Map() };
    throw new UsageError(`cannot read ${file}: ${(err as Error).message}`);
  }
  const lines = text.split('\n').filter((l) => l.trim() !== '');
  const bad = (why: string) =>
    new UsageError(`${file} is not a state file of plants sync (${why}); give another --state`);
  let head: { sync?: unknown; position?: unknown; garden?: unknown };
  try {
    head = JSON.parse(lines[0] ?? 'null') ?? {};
  } catch {
    throw bad('its first line is not JSON');
  }
  if (
    head.sync !== 1 ||
    typeof head.position !== 'string' ||
    !(head.garden === null || typeof head.garden === 'string')
  ) {
    throw bad('its first line is not {"sync": 1, "position", "garden"}');
  }
  const plants = new Map<number, Held>();
  lines.slice(1).forEach((l, i) => {
    let p: Held;
    try {
      p = JSON.parse(l) as Held;
    } catch {
      throw bad(`line ${i + 2} is not JSON`);
    }
    if (!Number.isSafeInteger(p.id) || typeof p.name !== 'string') throw bad(`line ${i + 2} is not a plant`);
    plants.set(p.id, p);
  });
  return { position: head.position, garden: head.garden, plants };
}

/** Writes the state to FILE atomically: a temporary file beside it, flushed, renamed over it. */
export function writeState(file: string, s: State): void {
  const tmp = join(dirname(file), `.${randomBytes(6).toString('hex')}.sync.tmp`);
  const fd = openSync(tmp, 'w', 0o600);
  try {
    const lines = [JSON.stringify({ sync: 1, position: s.position, garden: s.garden })];
    for (const id of [...s.plants.keys()].sort((a, b) => a - b)) lines.push(JSON.stringify(s.plants.get(id)));
    let chunk = '';
    for (const l of lines) {
      chunk += `${l}\n`;
      if (chunk.length >= 1 << 16) {
        writeSync(fd, chunk);
        chunk = '';
      }
    }
    if (chunk) writeSync(fd, chunk);
    fsyncSync(fd);
  } catch (err) {
    closeSync(fd);
    rmSync(tmp, { force: true });
    throw err;
  }
  closeSync(fd);
  renameSync(tmp, file);
}

/** `plantstore plants sync`. */
export function plantSyncCommand(plants: Command): void {
  withClient(
    plants
      .command('sync')
      .description(
        'keep a copy of your plants in a file: the first run writes them all, each later run applies only what changed since (contract 13.4); the file is NDJSON: a first line with the position, then one plant a line',
      )
      .requiredOption('--state <file>', 'the copy and its position (made when absent; rewritten atomically)')
      .option('--garden <gid>', 'only the plants of this garden (the file then keeps that garden only)')
      .option('--limit <n>', 'changes per request, 1 … 1000 (default 1000)'),
  ).action(async (o: ClientOpts & { state: string; garden?: string; limit?: string }) => {
    if (o.limit !== undefined && !new RegExp(LIMIT_TEXT).test(o.limit)) {
      throw new UsageError(`--limit must be 1 … 1000; got ${JSON.stringify(o.limit)}`);
    }
    const garden = o.garden === undefined ? null : gardenId(o.garden, '--garden');
    const state = readState(o.state);
    if (state.position !== null && state.garden !== garden) {
      const kept = state.garden === null ? 'every garden' : `garden ${state.garden}`;
      throw new UsageError(`${o.state} keeps ${kept}; give the same --garden, or another --state`);
    }
    const sync = connect(o).plants.sync(state.position, {
      limit: o.limit === undefined ? 1000 : Number(o.limit),
      ...(garden === null ? {} : { garden }),
    });
    let upserts = 0;
    let deletes = 0;
    let restarted = false;
    for (let r = await sync.next(); ; r = await sync.next()) {
      if (r.done) {
        state.position = r.value;
        break;
      }
      if (r.value.restarted) {
        state.plants.clear();
        restarted = true;
      }
      for (const c of r.value.changes) {
        if (c.op === 'upsert') {
          state.plants.set(c.id, c.plant);
          upserts++;
        } else {
          state.plants.delete(c.id);
          deletes++;
        }
      }
    }
    state.garden = garden;
    writeState(o.state, state);
    const summary = { plants: state.plants.size, upserts, deletes, restarted };
    if (o.json) out(JSON.stringify(summary));
    else {
      if (restarted) {
        process.stderr.write(
          'the position kept had expired (older than the events the service keeps): synced again from the start\n',
        );
      }
      process.stderr.write(`${state.plants.size} plants in ${o.state}: ${upserts} put, ${deletes} removed\n`);
    }
  });
}
