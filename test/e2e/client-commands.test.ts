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
  before(async () => {
    server = await serve([], env);
    const token = (await cli(['token', 'create', '--user', 'cli-user'], env)).stdout.trim();
    as = { PLANTSTORE_URL: server.url, PLANTSTORE_TOKEN: token };
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
    const all = await cli(['plants', 'list', '--limit', '1', '--all'], as);
    assert.equal(all.code, 0);
    assert.deepEqual(all.stdout, `${id}\tFern\tgreen\n4242\tIvy\n`);
    const first = await cli(['plants', 'list', '--limit', '1'], as);
    assert.deepEqual([first.stdout, /--all/.test(first.stderr)], [`${id}\tFern\tgreen\n`, true]);
    const json = await cli(['plants', 'list', '--json', '--tag', 'green'], as);
    assert.deepEqual(JSON.parse(json.stdout), [{ id: Number(id), name: 'Fern', tag: 'green' }]);
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
        data: { id: number; name: string };
      };
      assert.equal(event.type, 'plant.created');
      assert.deepEqual(event.data, { id, name: 'Forwarded' });
      const line = `\t${JSON.stringify({ id, name: 'Forwarded' })}`;
      await until('events tail to print the event on stdout', () => stdout.includes(line), 10_000).catch(
        (err) => {
          throw new Error(`${(err as Error).message}; it printed: ${stdout}`);
        },
      );
      assert.match(stdout, /^evt_\S+\tplant\.created\t\{"id":\d+,"name":"Forwarded"\}$/m);
      tail.kill('SIGINT');
      assert.equal(await exitOf(tail, 'events tail, after SIGINT,'), 0);
    } finally {
      tail.kill('SIGKILL');
      await r.close();
    }
  });
});
