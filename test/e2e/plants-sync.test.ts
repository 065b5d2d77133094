// `plantstore plants sync --state FILE` (contract 13.4) against a running service: the first run
// writes every plant (a first line with the position, then one plant a line, by id); a second run
// on a changed store applies only what changed; the file always equals the list.
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { cli, type Server, serve } from './process.js';

describe('plants sync --state FILE', () => {
  const dir = mkdtempSync(join(tmpdir(), 'plantstore-sync-cli-'));
  const env = { DATABASE_URL: `sqlite:${join(dir, 'plants.db')}` };
  let server: Server;
  let as: Record<string, string>;
  before(async () => {
    server = await serve([], env);
    const token = (await cli(['token', 'create', '--user', 'sync-user'], env)).stdout.trim();
    as = { PLANTSTORE_URL: server.url, PLANTSTORE_TOKEN: token };
  });
  after(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const create = async (name: string) => {
    const r = await cli(['plants', 'create', '--name', name], as);
    assert.equal(r.code, 0, r.stderr);
    return Number(r.stdout.trim());
  };
  const state = join(dir, 'copy.ndjson');
  const fileOf = () => {
    const [head, ...plants] = readFileSync(state, 'utf8').trim().split('\n');
    return {
      head: JSON.parse(head!),
      plants: plants.map((l) => JSON.parse(l) as { id: number; name: string }),
    };
  };
  const listedIds = async () => {
    const r = await cli(['plants', 'list', '--all', '--json'], as);
    assert.equal(r.code, 0, r.stderr);
    return (JSON.parse(r.stdout) as { id: number; name: string }[]).map((p) => [p.id, p.name]);
  };

  it('the first run writes every plant; the next applies only what changed', async () => {
    const a = await create('Fern');
    const b = await create('Ivy');
    const first = await cli(['plants', 'sync', '--state', state, '--json', '--limit', '1'], as);
    assert.equal(first.code, 0, first.stderr);
    assert.deepEqual(JSON.parse(first.stdout), { plants: 2, upserts: 2, deletes: 0, restarted: false });
    const one = fileOf();
    assert.equal(one.head.sync, 1);
    assert.equal(typeof one.head.position, 'string');
    assert.deepEqual(
      one.plants.map((p) => [p.id, p.name]),
      await listedIds(),
    );

    const del = await cli(['plants', 'delete', String(a)], as);
    assert.equal(del.code, 0, del.stderr);
    const c = await create('Aloe');
    const second = await cli(['plants', 'sync', '--state', state, '--json'], as);
    assert.equal(second.code, 0, second.stderr);
    assert.deepEqual(JSON.parse(second.stdout), { plants: 2, upserts: 1, deletes: 1, restarted: false });
    assert.deepEqual(
      fileOf().plants.map((p) => p.id),
      [b, c],
    );
    assert.deepEqual(
      fileOf().plants.map((p) => [p.id, p.name]),
      await listedIds(),
    );
    // Nothing changed: nothing applied; no temporary file is left beside it.
    const third = await cli(['plants', 'sync', '--state', state, '--json'], as);
    assert.deepEqual(JSON.parse(third.stdout), { plants: 2, upserts: 0, deletes: 0, restarted: false });
    assert.deepEqual(
      readdirSync(dir).filter((f) => f.endsWith('.tmp')),
      [],
    );
  });

  it('a file that is not a state file, or one kept for another garden: exit 2, the file untouched', async () => {
    const bad = join(dir, 'bad.ndjson');
    writeFileSync(bad, 'hello\n');
    const r = await cli(['plants', 'sync', '--state', bad], as);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /not a state file/);
    assert.equal(readFileSync(bad, 'utf8'), 'hello\n');
    const other = await cli(
      ['plants', 'sync', '--state', state, '--garden', 'gdn_000000000000000000000000'],
      as,
    );
    assert.equal(other.code, 2, other.stderr);
  });
});
