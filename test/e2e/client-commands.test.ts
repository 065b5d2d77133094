import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { startReceiver } from '../helpers/receiver.js';
import { until } from '../helpers/wait.js';
import { cli, exitOf, type Server, serve, spawnBin } from './process.js';

describe('client commands against a running service (CONTRACT.md section 7)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'plantstore-client-cli-'));
  const env = { DATABASE_URL: `sqlite:${join(dir, 'plants.db')}` };
  let server: Server;
  let as: Record<string, string>;
  let friend: Record<string, string>;
  // cli-user's home garden, where plants made without --garden go.
  let home = '';
  before(async () => {
    server = await serve([], env);
    const token = (await cli(['token', 'create', '--user', 'cli-user'], env)).stdout.trim();
    as = { PLANTSTORE_URL: server.url, PLANTSTORE_TOKEN: token };
    const other = (await cli(['token', 'create', '--user', 'cli-friend'], env)).stdout.trim();
    friend = { PLANTSTORE_URL: server.url, PLANTSTORE_TOKEN: other };
    const gardens = await cli(['gardens', 'list', '--json'], as);
    assert.equal(gardens.code, 0, gardens.stderr);
    home = (JSON.parse(gardens.stdout) as { id: string; home: boolean }[]).find((g) => g.home)!.id;
  });
  after(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('plants create, get, list (every page, JSON) and delete, with exit status 0', async () => {
    const made = await cli(['plants', 'create', '--name', 'Fern', '--tag', 'green'], as);
    assert.equal(made.code, 0, made.stderr);
    const id = made.stdout.trim();
    assert.match(id, /^[1-9][0-9]*$/);
    const second = await cli(['plants', 'create', '--name', 'Ivy', '--id', '4242'], as);
    assert.deepEqual([second.code, second.stdout], [0, '4242\n']);
    assert.deepEqual((await cli(['plants', 'get', id], as)).stdout, `${id}\tFern\tgreen\n`);
    // One line per plant: id, name, tag (an empty field when none) and its garden.
    const all = await cli(['plants', 'list', '--limit', '1', '--all'], as);
    assert.equal(all.code, 0);
    assert.deepEqual(all.stdout, `${id}\tFern\tgreen\t${home}\n4242\tIvy\t\t${home}\n`);
    const first = await cli(['plants', 'list', '--limit', '1'], as);
    assert.deepEqual([first.stdout, /--all/.test(first.stderr)], [`${id}\tFern\tgreen\t${home}\n`, true]);
    const json = await cli(['plants', 'list', '--json', '--tag', 'green'], as);
    assert.deepEqual(JSON.parse(json.stdout), [{ id: Number(id), garden: home, name: 'Fern', tag: 'green' }]);
    const del = await cli(['plants', 'delete', '4242'], as);
    assert.equal(del.code, 0, del.stderr);
    const gone = await cli(['plants', 'get', '4242'], as);
    assert.equal(gone.code, 1);
    assert.match(gone.stderr, /^plantstore: plant not found \(plant_not_found, HTTP 404\)\n$/);
  });

  it('plants update changes by name and tag (--no-tag removes it); a change made meanwhile is exit 1 naming the current values', async () => {
    const id = (await cli(['plants', 'create', '--name', 'Rubber plant', '--tag', 'hall'], as)).stdout.trim();
    const renamed = await cli(['plants', 'update', id, '--name', 'Rubber fig', '--no-tag'], as);
    assert.equal(renamed.code, 0, renamed.stderr);
    assert.equal(renamed.stdout, `${id}\tRubber fig\n`);
    const json = await cli(['plants', 'update', id, '--tag', 'office', '--json'], as);
    const shown = JSON.parse(json.stdout) as { id: number; name: string; tag: string; etag: string };
    assert.deepEqual({ ...shown, etag: '' }, { id: Number(id), name: 'Rubber fig', tag: 'office', etag: '' });
    assert.match(shown.etag, /^"[^"]+"$/);
    assert.equal((await cli(['plants', 'update', id], as)).code, 2, 'nothing to change is bad usage');
    // A proxy of the test's own: before it forwards the command's PATCH, someone else changes the plant.
    const auth = { authorization: `Bearer ${as.PLANTSTORE_TOKEN}` };
    const proxy = createServer(async (req, res) => {
      const body = await new Promise<Buffer>((done) => {
        const parts: Buffer[] = [];
        req.on('data', (d) => parts.push(d)).on('end', () => done(Buffer.concat(parts)));
      });
      if (req.method === 'PATCH') {
        await fetch(`${server.url}/plants/${id}`, {
          method: 'PATCH',
          headers: { ...auth, 'content-type': 'application/merge-patch+json', 'if-match': '*' },
          body: JSON.stringify({ name: 'Changed by someone else' }),
        });
      }
      const headers = Object.fromEntries(
        Object.entries(req.headers).filter(([k]) => !['host', 'connection', 'content-length'].includes(k)),
      ) as Record<string, string>;
      const up = await fetch(`${server.url}${req.url}`, {
        method: req.method,
        headers,
        ...(body.length ? { body: new Uint8Array(body) } : {}),
      });
      res.writeHead(up.status, Object.fromEntries(up.headers)).end(Buffer.from(await up.arrayBuffer()));
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
    try {
      const url = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
      const conflict = await cli(['plants', 'update', id, '--name', 'My edit'], {
        ...as,
        PLANTSTORE_URL: url,
      });
      assert.equal(conflict.code, 1, conflict.stderr);
      assert.match(
        conflict.stderr,
        /changed meanwhile.*name "Changed by someone else", tag "office".*HTTP 412/,
      );
    } finally {
      proxy.closeAllConnections();
      await new Promise((r) => proxy.close(r));
    }
    assert.equal((await cli(['plants', 'get', id], as)).stdout, `${id}\tChanged by someone else\toffice\n`);
  });

  // The garden the two tests below share (made by the first).
  let gid = '';
  let gardenList = '';

  it('gardens create and list; plants create and list --garden', async () => {
    const listed = await cli(['gardens', 'list'], as);
    assert.deepEqual([listed.code, listed.stdout], [0, `${home}\tHome\towner\n`]);
    const made = await cli(['gardens', 'create', 'Greenhouse'], as);
    assert.equal(made.code, 0, made.stderr);
    gid = made.stdout.trim();
    assert.match(made.stdout, /^gdn_\S+\n$/);
    assert.deepEqual(
      (await cli(['gardens', 'list'], as)).stdout,
      `${home}\tHome\towner\n${gid}\tGreenhouse\towner\n`,
    );
    const json = JSON.parse((await cli(['gardens', 'list', '--json'], as)).stdout) as Record<
      string,
      unknown
    >[];
    assert.deepEqual(
      json.map((g) => [g.id, g.name, g.home, g.role]),
      [
        [home, 'Home', true, 'owner'],
        [gid, 'Greenhouse', false, 'owner'],
      ],
    );

    const tomato = await cli(['plants', 'create', '--name', 'Tomato', '--tag', 'veg', '--garden', gid], as);
    assert.equal(tomato.code, 0, tomato.stderr);
    const tid = tomato.stdout.trim();
    const basil = (await cli(['plants', 'create', '--name', 'Basil', '--garden', gid, '--id', '7777'], as))
      .stdout;
    assert.equal(basil, '7777\n');
    const inGarden = await cli(['plants', 'list', '--garden', gid, '--limit', '1', '--all'], as);
    assert.equal(inGarden.code, 0, inGarden.stderr);
    assert.equal(inGarden.stdout, `${tid}\tTomato\tveg\t${gid}\n7777\tBasil\t\t${gid}\n`);
    const tagged = await cli(['plants', 'list', '--garden', gid, '--tag', 'veg', '--json'], as);
    assert.deepEqual(JSON.parse(tagged.stdout), [
      { id: Number(tid), garden: gid, name: 'Tomato', tag: 'veg' },
    ]);

    gardenList = inGarden.stdout;
  });

  it('gardens share and unshare: a viewer reads the garden but cannot create there (exit 1), an editor can', async () => {
    assert.ok(gid, 'the garden the test before made');
    // cli-friend sees nothing of it until it is shared, then reads it as a viewer (the default role).
    const hidden = await cli(['plants', 'list', '--garden', gid], friend);
    assert.equal(hidden.code, 1);
    assert.match(hidden.stderr, /^plantstore: garden not found \(garden_not_found, HTTP 404\)\n$/);
    const shared = await cli(['gardens', 'share', gid, 'cli-friend'], as);
    assert.deepEqual([shared.code, shared.stdout], [0, ''], shared.stderr);
    assert.match(shared.stderr, /added cli-friend to garden gdn_\S+ as viewer/);
    const friendHome = (
      JSON.parse((await cli(['gardens', 'list', '--json'], friend)).stdout) as { id: string }[]
    )[0]!.id;
    assert.equal(
      (await cli(['gardens', 'list'], friend)).stdout,
      `${friendHome}\tHome\towner\n${gid}\tGreenhouse\tviewer\n`,
    );
    assert.equal((await cli(['plants', 'list', '--garden', gid], friend)).stdout, gardenList);
    const refused = await cli(['plants', 'create', '--name', 'Weed', '--garden', gid], friend);
    assert.equal(refused.code, 1, refused.stderr);
    assert.equal(refused.stdout, '');
    assert.equal(
      refused.stderr,
      'plantstore: only an editor or owner of this garden may change its plants (insufficient_role, HTTP 403)\n',
    );
    const notOwner = await cli(['gardens', 'share', gid, 'cli-friend', '--role', 'owner'], friend);
    assert.equal(notOwner.code, 1);
    assert.match(notOwner.stderr, /insufficient_role, HTTP 403/);

    // Made an editor, it may; --json shows the member and whether it was added.
    const promoted = await cli(['gardens', 'share', gid, 'cli-friend', '--role', 'editor', '--json'], as);
    assert.equal(promoted.code, 0, promoted.stderr);
    const member = JSON.parse(promoted.stdout) as { user: string; role: string; created: boolean };
    assert.deepEqual([member.user, member.role, member.created], ['cli-friend', 'editor', false]);
    const planted = await cli(['plants', 'create', '--name', 'Mint', '--garden', gid], friend);
    assert.equal(planted.code, 0, planted.stderr);
    assert.match(
      (await cli(['plants', 'list', '--all'], friend)).stdout,
      new RegExp(`^${planted.stdout.trim()}\tMint\t\t${gid}$`, 'm'),
    );

    // Unshared, it sees nothing of the garden again.
    const removed = await cli(['gardens', 'unshare', gid, 'cli-friend'], as);
    assert.deepEqual([removed.code, removed.stdout], [0, ''], removed.stderr);
    assert.match(removed.stderr, /removed cli-friend from garden/);
    assert.equal((await cli(['plants', 'list', '--garden', gid], friend)).code, 1);
    assert.equal((await cli(['gardens', 'list'], friend)).stdout, `${friendHome}\tHome\towner\n`);
    const again = await cli(['gardens', 'unshare', gid, 'cli-friend'], as);
    assert.equal(again.code, 1);
    assert.match(again.stderr, /member_not_found, HTTP 404/);
    const last = await cli(['gardens', 'unshare', gid, 'cli-user'], as);
    assert.equal(last.code, 1);
    assert.match(last.stderr, /last_owner, HTTP 409/);
    const blank = await cli(['gardens', 'create', ' '], as);
    assert.equal(blank.code, 1);
    assert.match(blank.stderr, /invalid_body, HTTP 400/);
  });

  it('gardens and plants --garden: bad usage is exit 2 with one line, nothing sent; down is exit 3', async () => {
    for (const args of [
      ['gardens', 'create'],
      ['gardens', 'share', 'gdn_x'],
      ['gardens', 'share', 'gdn_x', 'bob', '--role', 'boss'],
      ['gardens', 'share', 'gdn_x', 'has space'],
      ['gardens', 'share', '', 'bob'],
      ['gardens', 'unshare', 'gdn_x'],
      ['gardens', 'unshare', 'gdn_x', 'bob', 'extra'],
      ['gardens', 'frobnicate'],
      ['plants', 'list', '--garden', ''],
      ['plants', 'create', '--name', 'x', '--garden'],
    ]) {
      const r = await cli(args, as);
      assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
      assert.equal(r.stderr.split('\n').length, 2, `${args.join(' ')}: one line: ${r.stderr}`);
      assert.equal(r.stdout, '');
    }
    const down = await cli(['gardens', 'list'], { ...as, PLANTSTORE_URL: 'http://127.0.0.1:1' });
    assert.equal(down.code, 3, down.stderr);
    assert.match(down.stderr, /could not be reached/);
    const noToken = await cli(['gardens', 'create', 'x'], {
      PLANTSTORE_URL: server.url,
      PLANTSTORE_TOKEN: '',
    });
    assert.equal(noToken.code, 2);
  });

  it('exit 1 when the service refuses, 2 for bad usage, 3 when it cannot be reached', async () => {
    const refused = await cli(['plants', 'create', '--name', ' '], as);
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /invalid_body, HTTP 400/);
    const denied = await cli(['plants', 'list'], { ...as, PLANTSTORE_TOKEN: 'pst_wrong' });
    assert.equal(denied.code, 1);
    for (const args of [
      ['plants', 'get', 'abc'],
      ['plants', 'get', '007'],
      ['plants', 'create'],
      ['plants', 'list', '--limit', '0'],
      ['plants', 'frobnicate'],
      ['events', 'tail', '--forward-to', 'ftp://x'],
    ]) {
      const r = await cli(args, as);
      assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
      assert.equal(r.stderr.split('\n').length, 2, 'one line');
    }
    const noToken = await cli(['plants', 'list'], { PLANTSTORE_URL: server.url, PLANTSTORE_TOKEN: '' });
    assert.equal(noToken.code, 2);
    const down = await cli(['plants', 'list'], { ...as, PLANTSTORE_URL: 'http://127.0.0.1:1' });
    assert.equal(down.code, 3, down.stderr);
    assert.match(down.stderr, /could not be reached/);
  });

  it('events tail prints events and forwards each, signed, to a local receiver', async () => {
    const r = await startReceiver();
    const tail = spawnBin(['events', 'tail', '--forward-to', `${r.url}/hook`], as);
    try {
      let stdout = '';
      let stderr = '';
      tail.stdout!.on('data', (d) => (stdout += d));
      tail.stderr!.on('data', (d) => (stderr += d));
      const said = (what: string, re: RegExp) =>
        until(`events tail to print ${what}`, () => re.exec(stderr) ?? undefined, 20_000).catch((err) => {
          throw new Error(`${(err as Error).message}; it wrote: ${stderr}`);
        });
      const secret = (await said('its signing secret', /signing secret: (whsec_\S+)/))[1]!;
      // It says so once the response's headers arrived, and the service took the stream's position
      // (the log's head) before sending them: the next change must be the first event it forwards.
      await said('that it is connected', /connected: streaming events as they commit/);
      const made = await cli(['plants', 'create', '--name', 'Forwarded'], as);
      assert.equal(made.code, 0, made.stderr);
      const id = Number(made.stdout.trim());
      const [d] = await r.waitFor(1, 10_000).catch((err) => {
        const logs = server.logs.slice(-20).join('\n');
        throw new Error(
          `${(err as Error).message}; events tail wrote: ${stderr} / ${stdout}; server: ${logs}`,
        );
      });
      const event = new Webhook(secret).verify(d!.body, d!.headers as Record<string, string>) as {
        type: string;
        data: { id: number; name: string; garden: string };
      };
      assert.equal(event.type, 'plant.created');
      // Version 3: an event's data names the plant's garden (its home garden here).
      assert.deepEqual(event.data, { id, name: 'Forwarded', garden: home });
      const line = `\t${JSON.stringify(event.data)}`;
      await until('events tail to print the event on stdout', () => stdout.includes(line), 10_000).catch(
        (err) => {
          throw new Error(`${(err as Error).message}; it printed: ${stdout}`);
        },
      );
      assert.match(stdout, /^evt_\S+\tplant\.created\t\{"id":\d+,"name":"Forwarded","garden":"gdn_\w+"\}$/m);
      tail.kill('SIGINT');
      assert.equal(await exitOf(tail, 'events tail, after SIGINT,'), 0);
    } finally {
      tail.kill('SIGKILL');
      await r.close();
    }
  });

  it('plants history ID: newest first, one line an event (time, type, who, id, name); NDJSON with --json', async () => {
    const id = (await cli(['plants', 'create', '--name', 'Aloe'], as)).stdout.trim();
    assert.equal((await cli(['plants', 'update', id, '--name', 'Aloe vera'], as)).code, 0);
    const lines = await cli(['plants', 'history', id], as);
    assert.equal(lines.code, 0, lines.stderr);
    const rows = lines.stdout
      .trimEnd()
      .split('\n')
      .map((l) => l.split('\t').slice(1));
    assert.deepEqual(rows, [
      ['plant.updated', 'cli-user', id, 'Aloe vera'],
      ['plant.created', 'cli-user', id, 'Aloe'],
    ]);
    const json = await cli(['plants', 'history', id, '--json'], as);
    const events = json.stdout
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l) as { type: string; id: string });
    assert.deepEqual(
      events.map((e) => e.type),
      ['plant.updated', 'plant.created'],
    );
    assert.match(events[0]!.id, /^evt_/);
  });

  it('trash list, restore and purge: a deleted plant listed, put back, deleted and erased for good', async () => {
    const g = (await cli(['gardens', 'create', 'Bin'], as)).stdout.trim();
    const id = (
      await cli(['plants', 'create', '--name', 'Basil', '--tag', 'herb', '--garden', g], as)
    ).stdout.trim();
    assert.equal((await cli(['plants', 'delete', id], as)).code, 0);
    const listed = await cli(['trash', 'list', '--garden', g], as);
    assert.equal(listed.code, 0, listed.stderr);
    const [row] = listed.stdout
      .trimEnd()
      .split('\n')
      .map((l) => l.split('\t'));
    assert.deepEqual(row!.slice(0, 4), [id, 'Basil', 'herb', g]);
    assert.equal(row![5], 'cli-user');
    const restored = await cli(['trash', 'restore', id], as);
    assert.deepEqual([restored.code, restored.stdout], [0, `${id}\n`]);
    assert.equal((await cli(['plants', 'get', id], as)).stdout, `${id}\tBasil\therb\n`);
    assert.equal((await cli(['plants', 'delete', id], as)).code, 0);
    const json = await cli(['trash', 'list', '--garden', g, '--json'], as);
    assert.equal((JSON.parse(json.stdout.trim()) as { id: number }).id, Number(id));
    const purged = await cli(['trash', 'purge', id], as);
    assert.equal(purged.code, 0, purged.stderr);
    assert.equal((await cli(['trash', 'list', '--garden', g], as)).stdout, '');
    const again = await cli(['trash', 'restore', id], as);
    assert.equal(again.code, 1);
    assert.match(again.stderr, /plant_not_found, HTTP 404/);
    assert.equal((await cli(['trash', 'purge', 'abc'], as)).code, 2);
  });

  it("gardens activity GID --type: that garden's events of those types; an unknown type is exit 2", async () => {
    const g = (await cli(['gardens', 'create', 'Activity'], as)).stdout.trim();
    assert.equal((await cli(['gardens', 'share', g, 'cli-friend'], as)).code, 0);
    assert.equal((await cli(['plants', 'create', '--name', 'Sage', '--garden', g], as)).code, 0);
    const seen = await cli(['gardens', 'activity', g, '--type', 'member.added'], friend);
    assert.equal(seen.code, 0, seen.stderr);
    assert.deepEqual(
      seen.stdout
        .trimEnd()
        .split('\n')
        .map((l) => l.split('\t').slice(1)),
      [['member.added', 'cli-user', 'cli-friend', 'viewer']],
    );
    const bad = await cli(['gardens', 'activity', g, '--type', 'plant.x'], as);
    assert.equal(bad.code, 2, bad.stderr);
  });
});
