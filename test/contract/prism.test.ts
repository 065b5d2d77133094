import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { createToken } from '../../src/identity/tokens.js';
import type { Scope } from '../../src/schemas/token.js';
import { type Client, type Harness, harness } from '../helpers/app.js';
import { ENGINES } from '../helpers/engines.js';
import { until } from '../helpers/wait.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
// Prism 5.16 runs on Node 24.18 or newer only; the Node 24 half of CI runs this file.
const [major, minor] = process.versions.node.split('.').map(Number) as [number, number];
const skip =
  major > 24 || (major === 24 && minor >= 18)
    ? false
    : `Prism 5.16 needs Node 24.18+; this is ${process.version}`;

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as AddressInfo;
  await new Promise((r) => s.close(r));
  return port;
}

interface Exchange {
  name: string;
  method: string;
  path: string;
  status: number;
  client?: Client | null;
  /** The request goes with a fresh token of this client's user (the limit is 3 a token). */
  as?: Client;
  /** The fresh token's scopes (default plants:read plants:write). */
  scopes?: Scope[];
  headers?: Record<string, string>;
  body?: string;
  /** Done before the request is sent. */
  setup?: () => Promise<void>;
}

/**
 * The served document as a contract, checked by a tool nobody here wrote: Prism as a validating
 * proxy (`--errors`) between these requests and the service. Every documented operation, and every
 * status the tests can provoke, goes through it; a response that breaks the document (a status,
 * header or body it does not describe) is a violation, and fails this test. Requests are passed on
 * unchecked (`--validate-request false`) so that the service itself answers bad ones.
 */
describe('every operation through Prism, validating against the served document', { skip }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'plantstore-prism-'));
  let h: Harness;
  let prism: ChildProcess;
  let proxy: string;
  let log = '';
  before(async () => {
    // The webhook URLs below name hooks.example.com: resolved when an endpoint is made, to a public
    // address here (nothing is delivered to it; the dispatcher's attempts fail on their own).
    h = await harness(
      ENGINES[0]!,
      { rateLimit: 3 },
      { resolver: async () => [{ address: '93.184.216.34', family: 4 }] },
    );
    const base = await h.app.listen({ port: 0, host: '127.0.0.1' });
    const doc = await h.app.inject({ url: '/openapi.json', headers: { host: new URL(base).host } });
    writeFileSync(join(dir, 'openapi.json'), doc.body);
    const port = await freePort();
    prism = spawn(
      join(ROOT, 'node_modules/.bin/prism'),
      [
        'proxy',
        join(dir, 'openapi.json'),
        base,
        '--errors',
        '--validate-request',
        'false',
        '--port',
        String(port),
      ],
      {
        env: { ...process.env, PATH: `${dirname(process.execPath)}:${process.env.PATH}`, NO_COLOR: '1' },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    prism.stdout!.on('data', (d) => (log += d));
    prism.stderr!.on('data', (d) => (log += d));
    proxy = `http://127.0.0.1:${port}`;
    await until(
      'Prism to listen',
      () => {
        if (prism.exitCode !== null) throw new Error(`Prism exited: ${log}`);
        return /Prism is listening/.test(log);
      },
      // About 5 s usually; 30 s ran out on a machine many times slower than usual.
      60_000,
    );
  });
  after(async () => {
    prism?.kill();
    await h?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('answers every exchange as documented: 0 violations', async () => {
    const owner = await h.user();
    const reader = await h.user(['plants:read']);
    const writer = await h.user(['plants:write']);
    const json = { 'content-type': 'application/json' };
    const made = await owner.create({ name: 'Contract fern', tag: 'green' });
    const plant = made.headers.location as string;
    const etag = String(made.headers.etag);
    const merge = { 'content-type': 'application/merge-patch+json' };
    await owner.create({ name: 'Second', tag: 'green' });
    const reg = await owner.request({
      method: 'POST',
      url: '/webhooks',
      headers: json,
      payload: JSON.stringify({ url: 'https://hooks.example.com/plantstore' }),
    });
    const hook = `/webhooks/${reg.json().id}`;
    const limited = await h.user();

    // Gardens (contract 3.2): made and shared directly, each request with a token of its own.
    const tokenOf = async (c: Client, scopes: Scope[] = ['plants:read', 'plants:write']) =>
      (await createToken(h.store, { user: c.user, scopes, name: null, expiresInMs: null })).secret;
    const direct = async (c: Client, method: 'GET' | 'POST' | 'PUT', url: string, body?: unknown) => {
      const res = await h.app.inject({
        method,
        url,
        headers: {
          authorization: `Bearer ${await tokenOf(c)}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
      });
      assert.ok(res.statusCode < 300, `${method} ${url}: ${res.statusCode} ${res.body}`);
      return res.json();
    };
    const friend = await h.user();
    const stranger = await h.user();
    const home = `/gardens/${(await direct(owner, 'GET', '/gardens'))[0].id}`;
    const beds = `/gardens/${(await direct(owner, 'POST', '/gardens', { name: 'Contract beds' })).id}`;
    const spare = `/gardens/${(await direct(owner, 'POST', '/gardens', { name: 'Spare' })).id}`;
    await direct(owner, 'PUT', `${beds}/members/${friend.user}`, { role: 'viewer' });
    await direct(owner, 'POST', `${beds}/plants`, { name: 'Bed fern', tag: 'green' });
    const none = '/gardens/gdn_000000000000000000000000';
    // The trash (contract 13.2): plants of `beds` deleted into it, each with a fresh token.
    const trashed = async (name: string) => {
      await direct(owner, 'POST', `${beds}/plants`, { name });
      const made = (
        await h.app.inject({
          url: '/plants?include=id&limit=1000',
          headers: {
            authorization: `Bearer ${await tokenOf(owner)}`,
          },
        })
      )
        .json()
        .find((x: { name: string }) => x.name === name);
      const res = await h.app.inject({
        method: 'DELETE',
        url: `/plants/${made.id}`,
        headers: { authorization: `Bearer ${await tokenOf(owner)}` },
      });
      assert.equal(res.statusCode, 204, res.body);
      return made.id as number;
    };
    const toRestore = await trashed('Trash restore');
    const toPurge = await trashed('Trash purge');
    const clash = await trashed('Trash clash');
    await direct(owner, 'POST', `${beds}/plants`, { id: clash, name: 'Clash taker' });
    const bedsId = beds.slice('/gardens/'.length);
    const trashPage = await h.app.inject({
      url: `/trash?garden=${bedsId}&limit=1`,
      headers: { authorization: `Bearer ${await tokenOf(owner)}` },
    });
    const trashNext = /<([^>]+)>; rel="next"/.exec(String(trashPage.headers.link))?.[1];
    assert.ok(trashNext, 'a Link to the trash page after the first');

    // Tokens over HTTP (contract 3.3): every exchange's fresh token also holds tokens:manage.
    const MANAGE: Scope[] = ['plants:read', 'plants:write', 'tokens:manage'];
    const spareToken = async (c: Client) =>
      `/tokens/${(await createToken(h.store, { user: c.user, scopes: ['plants:read'], name: 'spare', expiresInMs: null })).record.id}`;
    const readable = await spareToken(owner);
    const revocable = await spareToken(owner);
    const theirs = `/tokens/${stranger.tokenId}`;
    const firstPage = await h.app.inject({
      url: '/tokens?limit=1',
      headers: { authorization: `Bearer ${await tokenOf(owner, MANAGE)}` },
    });
    const secondPage = /<([^>]+)>; rel="next"/.exec(String(firstPage.headers.link))?.[1];
    assert.ok(secondPage, `a Link to the second page: ${JSON.stringify(firstPage.headers)}`);
    // A change feed's position (contract 13.4), from the first sync of the owner's plants.
    const synced = await h.app.inject({
      url: '/plants/changes?limit=1000',
      headers: { authorization: `Bearer ${await tokenOf(owner)}` },
    });
    const since = encodeURIComponent((synced.json() as { next: string }).next);

    const exchanges: Exchange[] = [
      {
        name: 'create',
        method: 'POST',
        path: '/plants',
        status: 201,
        headers: { ...json, 'idempotency-key': 'k-1' },
        body: '{"name":"Monstera","tag":"indoor"}',
      },
      {
        name: 'create replayed',
        method: 'POST',
        path: '/plants',
        status: 201,
        headers: { ...json, 'idempotency-key': 'k-1' },
        body: '{"name":"Monstera","tag":"indoor"}',
      },
      {
        name: 'create, key reused with another body',
        method: 'POST',
        path: '/plants',
        status: 422,
        headers: { ...json, 'idempotency-key': 'k-1' },
        body: '{"name":"Other"}',
      },
      {
        name: 'create, bad body',
        method: 'POST',
        path: '/plants',
        status: 400,
        headers: json,
        body: '{"name":""}',
      },
      {
        name: 'create, taken id',
        method: 'POST',
        path: '/plants',
        status: 409,
        headers: json,
        body: `{"id":${plant.split('/').pop()},"name":"Again"}`,
      },
      {
        name: 'create, too large',
        method: 'POST',
        path: '/plants',
        status: 413,
        headers: json,
        body: JSON.stringify({ name: 'x'.repeat(20_000) }),
      },
      {
        name: 'create, not JSON',
        method: 'POST',
        path: '/plants',
        status: 415,
        headers: { 'content-type': 'text/plain' },
        body: 'fern',
      },
      {
        name: 'create, no token',
        method: 'POST',
        path: '/plants',
        status: 401,
        client: null,
        headers: json,
        body: '{"name":"x"}',
      },
      {
        name: 'create, read-only token',
        method: 'POST',
        path: '/plants',
        status: 403,
        client: reader,
        headers: json,
        body: '{"name":"x"}',
      },
      { name: 'list', method: 'GET', path: '/plants?limit=1', status: 200 },
      { name: 'list with ids and tag', method: 'GET', path: '/plants?include=id&tag=green', status: 200 },
      { name: 'list, bad limit', method: 'GET', path: '/plants?limit=0', status: 400 },
      { name: 'list, unknown parameter', method: 'GET', path: '/plants?color=red', status: 400 },
      { name: 'list, write-only token', method: 'GET', path: '/plants', status: 403, client: writer },
      {
        name: 'list, bad token',
        method: 'GET',
        path: '/plants',
        status: 401,
        headers: { authorization: 'Bearer pst_nope' },
        client: null,
      },
      { name: 'read', method: 'GET', path: plant, status: 200 },
      { name: 'read, none', method: 'GET', path: '/plants/999999', status: 404 },
      {
        name: 'read, not modified',
        method: 'GET',
        path: plant,
        status: 304,
        headers: { 'if-none-match': etag },
      },
      {
        name: 'change, no If-Match',
        method: 'PATCH',
        path: plant,
        status: 428,
        headers: merge,
        body: '{"name":"Changed"}',
      },
      {
        name: 'change, bad body',
        method: 'PATCH',
        path: plant,
        status: 400,
        headers: { ...merge, 'if-match': etag },
        body: '{"name":null}',
      },
      {
        name: 'change, not a merge patch',
        method: 'PATCH',
        path: plant,
        status: 415,
        headers: { 'content-type': 'text/plain', 'if-match': etag },
        body: 'x',
      },
      {
        name: 'change, none',
        method: 'PATCH',
        path: '/plants/999999',
        status: 404,
        headers: { ...merge, 'if-match': '*' },
        body: '{"tag":null}',
      },
      {
        name: 'change',
        method: 'PATCH',
        path: plant,
        status: 200,
        headers: { ...merge, 'if-match': etag, 'idempotency-key': 'p-1' },
        body: '{"name":"Changed","tag":null}',
      },
      {
        name: 'change replayed',
        method: 'PATCH',
        path: plant,
        status: 200,
        headers: { ...merge, 'if-match': etag, 'idempotency-key': 'p-1' },
        body: '{"name":"Changed","tag":null}',
      },
      {
        name: 'change, stale ETag',
        method: 'PATCH',
        path: plant,
        status: 412,
        headers: { ...json, 'if-match': etag },
        body: '{"tag":"late"}',
      },
      {
        name: 'delete, stale ETag',
        method: 'DELETE',
        path: plant,
        status: 412,
        headers: { 'if-match': etag },
      },
      { name: 'read, bad id', method: 'GET', path: '/plants/007', status: 400 },
      {
        name: 'webhook create',
        method: 'POST',
        path: '/webhooks',
        status: 201,
        headers: json,
        body: '{"url":"https://hooks.example.com/x"}',
      },
      {
        name: 'webhook create, private',
        method: 'POST',
        path: '/webhooks',
        status: 400,
        headers: json,
        body: '{"url":"http://10.0.0.1/x"}',
      },
      { name: 'webhooks', method: 'GET', path: '/webhooks', status: 200 },
      { name: 'webhook', method: 'GET', path: hook, status: 200 },
      { name: 'webhook, none', method: 'GET', path: '/webhooks/whk_none', status: 404 },
      { name: 'rotate', method: 'POST', path: `${hook}/rotate-secret`, status: 200 },
      { name: 'deliveries', method: 'GET', path: `${hook}/deliveries?limit=5`, status: 200 },
      {
        name: 'recover',
        method: 'POST',
        path: `${hook}/recover`,
        status: 202,
        headers: json,
        body: '{"since":"2026-01-01T00:00:00Z"}',
      },
      {
        name: 'events, not a stream request',
        method: 'GET',
        path: '/events',
        status: 406,
        headers: { accept: 'application/json' },
      },
      {
        name: 'events, expired Last-Event-ID',
        method: 'GET',
        path: '/events',
        status: 410,
        headers: { accept: 'text/event-stream', 'last-event-id': 'evt_gone' },
      },
      {
        name: 'garden create',
        method: 'POST',
        path: '/gardens',
        status: 201,
        headers: json,
        body: '{"name":"Greenhouse"}',
      },
      {
        name: 'garden create, bad body',
        method: 'POST',
        path: '/gardens',
        status: 400,
        headers: json,
        body: '{"name":"","color":"green"}',
      },
      {
        name: 'garden create, not JSON',
        method: 'POST',
        path: '/gardens',
        status: 415,
        headers: { 'content-type': 'text/plain' },
        body: 'Greenhouse',
      },
      {
        name: 'garden create, too large',
        method: 'POST',
        path: '/gardens',
        status: 413,
        headers: json,
        body: JSON.stringify({ name: 'x'.repeat(20_000) }),
      },
      {
        name: 'garden create, read-only token',
        method: 'POST',
        path: '/gardens',
        status: 403,
        client: reader,
        headers: json,
        body: '{"name":"x"}',
      },
      { name: 'gardens', method: 'GET', path: '/gardens', status: 200 },
      { name: 'gardens, no token', method: 'GET', path: '/gardens', status: 401, client: null },
      { name: 'garden', method: 'GET', path: beds, status: 200 },
      { name: 'garden, as a viewer', method: 'GET', path: beds, status: 200, as: friend },
      { name: 'garden, none', method: 'GET', path: none, status: 404 },
      { name: 'garden, not a member', method: 'GET', path: beds, status: 404, as: stranger },
      {
        name: 'share',
        method: 'PUT',
        path: `${beds}/members/newbie`,
        status: 201,
        headers: json,
        body: '{"role":"editor"}',
      },
      {
        name: 'share, role changed',
        method: 'PUT',
        path: `${beds}/members/newbie`,
        status: 200,
        headers: json,
        body: '{"role":"viewer"}',
      },
      {
        name: 'share, bad role',
        method: 'PUT',
        path: `${beds}/members/newbie`,
        status: 400,
        headers: json,
        body: '{"role":"boss"}',
      },
      {
        name: 'share, bad user name',
        method: 'PUT',
        path: `${beds}/members/has%20space`,
        status: 400,
        headers: json,
        body: '{"role":"viewer"}',
      },
      {
        name: 'share, not JSON',
        method: 'PUT',
        path: `${beds}/members/newbie`,
        status: 415,
        headers: { 'content-type': 'text/plain' },
        body: 'viewer',
      },
      {
        name: 'share, by a viewer',
        method: 'PUT',
        path: `${beds}/members/newbie`,
        status: 403,
        as: friend,
        headers: json,
        body: '{"role":"owner"}',
      },
      {
        name: 'share, demoting the last owner',
        method: 'PUT',
        path: `${beds}/members/${owner.user}`,
        status: 409,
        headers: json,
        body: '{"role":"viewer"}',
      },
      {
        name: 'share, none',
        method: 'PUT',
        path: `${none}/members/newbie`,
        status: 404,
        headers: json,
        body: '{"role":"viewer"}',
      },
      { name: 'members', method: 'GET', path: `${beds}/members`, status: 200 },
      { name: 'members, as a viewer', method: 'GET', path: `${beds}/members`, status: 200, as: friend },
      { name: 'members, not a member', method: 'GET', path: `${beds}/members`, status: 404, as: stranger },
      // The change feed (contract 13.4).
      { name: 'changes, first sync', method: 'GET', path: '/plants/changes?limit=1', status: 200 },
      { name: 'changes, since', method: 'GET', path: `/plants/changes?since=${since}`, status: 200 },
      {
        name: 'changes, a garden',
        method: 'GET',
        path: `/plants/changes?garden=${beds.split('/').pop()}`,
        status: 200,
        as: friend,
      },
      { name: 'changes, bad since', method: 'GET', path: '/plants/changes?since=nope', status: 400 },
      { name: 'changes, bad limit', method: 'GET', path: '/plants/changes?limit=1001', status: 400 },
      {
        name: 'changes, not a member',
        method: 'GET',
        path: `/plants/changes?garden=${beds.split('/').pop()}`,
        status: 404,
        as: stranger,
      },
      { name: 'changes, no token', method: 'GET', path: '/plants/changes', status: 401, client: null },
      {
        name: 'changes, write-only token',
        method: 'GET',
        path: '/plants/changes',
        status: 403,
        as: writer,
        scopes: ['plants:write'],
      },
      // History and activity (contract 13.3).
      { name: 'history', method: 'GET', path: `${plant}/history`, status: 200 },
      { name: 'history, a page', method: 'GET', path: `${plant}/history?limit=1`, status: 200 },
      { name: 'history, none', method: 'GET', path: '/plants/999999/history', status: 404 },
      { name: 'history, bad id', method: 'GET', path: '/plants/0/history', status: 400 },
      { name: 'history, bad limit', method: 'GET', path: `${plant}/history?limit=0`, status: 400 },
      { name: 'history, bad cursor', method: 'GET', path: `${plant}/history?cursor=nope`, status: 400 },
      { name: 'history, no token', method: 'GET', path: `${plant}/history`, status: 401, client: null },
      {
        name: 'history, write-only token',
        method: 'GET',
        path: `${plant}/history`,
        status: 403,
        client: writer,
      },
      { name: 'activity', method: 'GET', path: `${beds}/activity`, status: 200 },
      {
        name: 'activity, as a viewer',
        method: 'GET',
        path: `${beds}/activity?limit=1`,
        status: 200,
        as: friend,
      },
      {
        name: 'activity, some types',
        method: 'GET',
        path: `${beds}/activity?type=plant.created,member.added`,
        status: 200,
      },
      { name: 'activity, unknown type', method: 'GET', path: `${beds}/activity?type=plant.x`, status: 400 },
      { name: 'activity, not a member', method: 'GET', path: `${beds}/activity`, status: 404, as: stranger },
      { name: 'activity, none', method: 'GET', path: `${none}/activity`, status: 404 },
      { name: 'activity, no token', method: 'GET', path: `${beds}/activity`, status: 401, client: null },
      // The trash (contract 13.2).
      { name: 'trash', method: 'GET', path: '/trash', status: 200 },
      {
        name: 'trash of a garden, a page',
        method: 'GET',
        path: `/trash?garden=${bedsId}&limit=1`,
        status: 200,
      },
      { name: 'trash, the next page', method: 'GET', path: trashNext, status: 200 },
      { name: 'trash, as a viewer', method: 'GET', path: `/trash?garden=${bedsId}`, status: 403, as: friend },
      {
        name: 'trash, not a member',
        method: 'GET',
        path: `/trash?garden=${bedsId}`,
        status: 404,
        as: stranger,
      },
      { name: 'trash, bad limit', method: 'GET', path: '/trash?limit=1001', status: 400 },
      { name: 'trash, bad cursor', method: 'GET', path: '/trash?cursor=nope', status: 400 },
      { name: 'trash, no token', method: 'GET', path: '/trash', status: 401, client: null },
      {
        name: 'trash, write-only token',
        method: 'GET',
        path: '/trash',
        status: 403,
        as: owner,
        scopes: ['plants:write'],
      },
      {
        name: 'restore, by a viewer',
        method: 'POST',
        path: `/trash/${toRestore}/restore`,
        status: 403,
        as: friend,
      },
      {
        name: 'restore',
        method: 'POST',
        path: `/trash/${toRestore}/restore`,
        status: 200,
        headers: { 'idempotency-key': 'r-1' },
      },
      {
        name: 'restore, replayed',
        method: 'POST',
        path: `/trash/${toRestore}/restore`,
        status: 200,
        headers: { 'idempotency-key': 'r-1' },
      },
      {
        name: 'restore, key reused for another plant',
        method: 'POST',
        path: `/trash/${toPurge}/restore`,
        status: 422,
        headers: { 'idempotency-key': 'r-1' },
      },
      { name: 'restore, id taken since', method: 'POST', path: `/trash/${clash}/restore`, status: 409 },
      { name: 'restore, none', method: 'POST', path: '/trash/999999/restore', status: 404 },
      { name: 'restore, bad id', method: 'POST', path: '/trash/0/restore', status: 400 },
      {
        name: 'restore, read-only token',
        method: 'POST',
        path: `/trash/${clash}/restore`,
        status: 403,
        as: owner,
        scopes: ['plants:read'],
      },
      { name: 'purge, by a viewer', method: 'DELETE', path: `/trash/${toPurge}`, status: 403, as: friend },
      { name: 'purge', method: 'DELETE', path: `/trash/${toPurge}`, status: 204 },
      { name: 'purge, none', method: 'DELETE', path: `/trash/${toPurge}`, status: 404 },
      { name: 'purge, bad id', method: 'DELETE', path: '/trash/abc', status: 400 },
      {
        name: 'create in a garden',
        method: 'POST',
        path: `${beds}/plants`,
        status: 201,
        headers: { ...json, 'idempotency-key': 'g-1' },
        body: '{"name":"Tomato","tag":"veg"}',
      },
      {
        name: 'create in a garden, replayed',
        method: 'POST',
        path: `${beds}/plants`,
        status: 201,
        headers: { ...json, 'idempotency-key': 'g-1' },
        body: '{"name":"Tomato","tag":"veg"}',
      },
      {
        name: 'create in a garden, key reused with another body',
        method: 'POST',
        path: `${beds}/plants`,
        status: 422,
        headers: { ...json, 'idempotency-key': 'g-1' },
        body: '{"name":"Basil"}',
      },
      {
        name: 'create in a garden, bad body',
        method: 'POST',
        path: `${beds}/plants`,
        status: 400,
        headers: json,
        body: '{"name":" "}',
      },
      {
        name: 'create in a garden, by a viewer',
        method: 'POST',
        path: `${beds}/plants`,
        status: 403,
        as: friend,
        headers: json,
        body: '{"name":"Weed"}',
      },
      {
        name: 'create in a garden, none',
        method: 'POST',
        path: `${none}/plants`,
        status: 404,
        headers: json,
        body: '{"name":"Weed"}',
      },
      {
        name: 'list a garden',
        method: 'GET',
        path: `${beds}/plants?limit=1&include=id,garden,version`,
        status: 200,
      },
      {
        name: 'list a garden, as a viewer',
        method: 'GET',
        path: `${beds}/plants?tag=veg`,
        status: 200,
        as: friend,
      },
      { name: 'list a garden, bad limit', method: 'GET', path: `${beds}/plants?limit=0`, status: 400 },
      {
        name: 'list a garden, not a member',
        method: 'GET',
        path: `${beds}/plants`,
        status: 404,
        as: stranger,
      },
      {
        name: 'list with garden=',
        method: 'GET',
        path: `/plants?garden=${beds.split('/').pop()}&include=garden&limit=1`,
        status: 200,
      },
      {
        name: 'list with garden=, not a member',
        method: 'GET',
        path: `/plants?garden=${beds.split('/').pop()}`,
        status: 404,
        as: stranger,
      },
      {
        name: 'rename',
        method: 'PATCH',
        path: spare,
        status: 200,
        headers: json,
        body: '{"name":"Glasshouse"}',
      },
      {
        name: 'rename, bad body',
        method: 'PATCH',
        path: spare,
        status: 400,
        headers: json,
        body: '{"name":"Glasshouse","home":true}',
      },
      {
        name: 'rename, by a viewer',
        method: 'PATCH',
        path: beds,
        status: 403,
        as: friend,
        headers: json,
        body: '{"name":"Mine"}',
      },
      {
        name: 'rename, none',
        method: 'PATCH',
        path: none,
        status: 404,
        headers: json,
        body: '{"name":"Nowhere"}',
      },
      { name: 'unshare', method: 'DELETE', path: `${beds}/members/newbie`, status: 204 },
      { name: 'unshare, not a member', method: 'DELETE', path: `${beds}/members/newbie`, status: 404 },
      {
        name: 'unshare, by a viewer',
        method: 'DELETE',
        path: `${beds}/members/${owner.user}`,
        status: 403,
        as: friend,
      },
      {
        name: 'unshare, the last owner',
        method: 'DELETE',
        path: `${beds}/members/${owner.user}`,
        status: 409,
      },
      { name: 'leave', method: 'DELETE', path: `${beds}/members/${friend.user}`, status: 204, as: friend },
      { name: 'garden delete, not empty', method: 'DELETE', path: beds, status: 409 },
      { name: 'garden delete, home', method: 'DELETE', path: home, status: 409 },
      { name: 'garden delete', method: 'DELETE', path: spare, status: 204 },
      { name: 'garden delete, gone', method: 'DELETE', path: spare, status: 404 },
      { name: 'me', method: 'GET', path: '/me', status: 200 },
      { name: 'me, no token', method: 'GET', path: '/me', status: 401, client: null },
      {
        name: 'token create',
        method: 'POST',
        path: '/tokens',
        status: 201,
        scopes: MANAGE,
        headers: json,
        body: '{"scopes":["plants:read"],"expiresIn":"30d","name":"contract"}',
      },
      {
        name: 'token create, defaults',
        method: 'POST',
        path: '/tokens',
        status: 201,
        scopes: MANAGE,
        headers: json,
        body: '{}',
      },
      {
        name: 'token create, bad body',
        method: 'POST',
        path: '/tokens',
        status: 400,
        scopes: MANAGE,
        headers: json,
        body: '{"scopes":["plants:read"],"color":"red"}',
      },
      {
        name: 'token create, bad duration',
        method: 'POST',
        path: '/tokens',
        status: 400,
        scopes: MANAGE,
        headers: json,
        body: '{"expiresIn":"soon"}',
      },
      {
        name: 'token create, not JSON',
        method: 'POST',
        path: '/tokens',
        status: 415,
        scopes: MANAGE,
        headers: { 'content-type': 'text/plain' },
        body: 'token',
      },
      {
        name: 'token create, too large',
        method: 'POST',
        path: '/tokens',
        status: 413,
        scopes: MANAGE,
        headers: json,
        body: JSON.stringify({ name: 'x'.repeat(20_000) }),
      },
      {
        name: 'token create, a scope not held',
        method: 'POST',
        path: '/tokens',
        status: 403,
        scopes: MANAGE,
        headers: json,
        body: '{"scopes":["plants:admin"]}',
      },
      {
        name: 'token create, without tokens:manage',
        method: 'POST',
        path: '/tokens',
        status: 403,
        headers: json,
        body: '{}',
      },
      {
        name: 'token create, no token',
        method: 'POST',
        path: '/tokens',
        status: 401,
        client: null,
        headers: json,
        body: '{}',
      },
      { name: 'tokens', method: 'GET', path: '/tokens?limit=1', status: 200, scopes: MANAGE },
      { name: 'tokens, next page', method: 'GET', path: secondPage, status: 200, scopes: MANAGE },
      { name: 'tokens, bad limit', method: 'GET', path: '/tokens?limit=0', status: 400, scopes: MANAGE },
      { name: 'tokens, bad cursor', method: 'GET', path: '/tokens?cursor=nope', status: 400, scopes: MANAGE },
      {
        name: "tokens, another user's",
        method: 'GET',
        path: `/tokens?user=${stranger.user}`,
        status: 403,
        scopes: MANAGE,
      },
      { name: 'tokens, without tokens:manage', method: 'GET', path: '/tokens', status: 403 },
      { name: 'tokens, no token', method: 'GET', path: '/tokens', status: 401, client: null },
      { name: 'token', method: 'GET', path: readable, status: 200, scopes: MANAGE },
      { name: "token, another user's", method: 'GET', path: theirs, status: 404, scopes: MANAGE },
      { name: 'token, none', method: 'GET', path: '/tokens/tok_AAAAAAAAAAAA', status: 404, scopes: MANAGE },
      { name: 'token, without tokens:manage', method: 'GET', path: readable, status: 403 },
      { name: 'token revoke', method: 'DELETE', path: revocable, status: 204, scopes: MANAGE },
      { name: 'token revoke, again', method: 'DELETE', path: revocable, status: 204, scopes: MANAGE },
      { name: "token revoke, another user's", method: 'DELETE', path: theirs, status: 404, scopes: MANAGE },
      { name: 'token revoke, without tokens:manage', method: 'DELETE', path: readable, status: 403 },
      { name: 'token revoke, no token', method: 'DELETE', path: readable, status: 401, client: null },
      { name: 'search', method: 'GET', path: '/plants?q=contract%20fe&include=id', status: 200 },
      { name: 'search, nothing found', method: 'GET', path: '/plants?q=%25', status: 200 },
      { name: 'search, bad q', method: 'GET', path: '/plants?q=a%01b', status: 400 },
      {
        name: 'batch',
        method: 'POST',
        path: '/plants/batch',
        status: 201,
        headers: json,
        body: '{"plants":[{"name":"Batch fern"},{"name":"Batch aloe","tag":"sun"}]}',
      },
      ...['batch with a key', 'batch replayed'].map((name) => ({
        name,
        method: 'POST',
        path: '/plants/batch',
        status: 201,
        headers: { ...json, 'idempotency-key': 'contract-batch' },
        body: '{"plants":[{"name":"Once"}]}',
      })),
      {
        name: 'batch, CSV',
        method: 'POST',
        path: `/plants/batch?garden=${beds.split('/').pop()}`,
        status: 201,
        headers: { 'content-type': 'text/csv' },
        body: 'name,tag\r\nCSV fern,\r\n',
      },
      {
        name: 'batch, NDJSON',
        method: 'POST',
        path: '/plants/batch',
        status: 201,
        headers: { 'content-type': 'application/x-ndjson' },
        body: '{"name":"NDJSON fern"}\n',
      },
      {
        name: 'batch, bad rows',
        method: 'POST',
        path: '/plants/batch',
        status: 400,
        headers: { 'content-type': 'text/csv' },
        body: 'name,colour\r\nx,red\r\n',
      },
      {
        name: 'batch, taken id',
        method: 'POST',
        path: '/plants/batch',
        status: 409,
        headers: json,
        body: `{"plants":[{"name":"dup","id":${plant.split('/').pop()}}]}`,
      },
      {
        name: 'batch, key reused with another batch',
        method: 'POST',
        path: '/plants/batch',
        status: 422,
        headers: { ...json, 'idempotency-key': 'contract-batch' },
        body: '{"plants":[{"name":"Twice"}]}',
      },
      {
        name: 'batch, read-only token',
        method: 'POST',
        path: '/plants/batch',
        status: 403,
        scopes: ['plants:read'],
        headers: json,
        body: '{"plants":[{"name":"Not mine"}]}',
      },
      {
        name: 'batch, none',
        method: 'POST',
        path: '/plants/batch?garden=gdn_000000000000000000000000',
        status: 404,
        headers: json,
        body: '{"plants":[{"name":"Nowhere"}]}',
      },
      {
        name: 'batch, too large',
        method: 'POST',
        path: '/plants/batch',
        status: 413,
        headers: { 'content-type': 'text/csv' },
        body: `name\n${'x'.repeat(1_100_000)}\n`,
      },
      {
        name: 'batch, not JSON or CSV',
        method: 'POST',
        path: '/plants/batch',
        status: 415,
        headers: { 'content-type': 'text/plain' },
        body: 'x',
      },
      { name: 'export', method: 'GET', path: '/plants/export', status: 200 },
      { name: 'export, CSV', method: 'GET', path: '/plants/export?format=csv&q=fern', status: 200 },
      {
        name: 'export, CSV by Accept',
        method: 'GET',
        path: '/plants/export?tag=green',
        status: 200,
        headers: { accept: 'text/csv' },
      },
      { name: 'export, bad format', method: 'GET', path: '/plants/export?format=xml', status: 400 },
      {
        name: 'export, CSV with ";"',
        method: 'GET',
        path: '/plants/export?format=csv&delimiter=%3B',
        status: 200,
      },
      {
        name: 'export, bad delimiter',
        method: 'GET',
        path: '/plants/export?format=csv&delimiter=%7C',
        status: 400,
      },
      {
        name: 'batch, CSV labelled Windows-1252',
        method: 'POST',
        path: '/plants/batch',
        status: 415,
        headers: { 'content-type': 'text/csv; charset=windows-1252' },
        body: 'name\r\nFern\r\n',
      },
      {
        name: 'batch, CSV with ";" and a BOM',
        method: 'POST',
        path: '/plants/batch',
        status: 201,
        headers: { 'content-type': 'text/csv' },
        body: '\ufeffname;tag\r\nSemicolon fern;shade, cool\r\n',
      },
      {
        name: 'export, not a member',
        method: 'GET',
        path: `/plants/export?garden=${beds.split('/').pop()}`,
        status: 404,
        as: stranger,
      },
      {
        name: 'export, write-only token',
        method: 'GET',
        path: '/plants/export',
        status: 403,
        client: writer,
      },
      { name: 'webhook delete', method: 'DELETE', path: hook, status: 204 },
      { name: 'delete', method: 'DELETE', path: plant, status: 204 },
      { name: 'delete, gone', method: 'DELETE', path: plant, status: 404 },
      { name: 'health', method: 'GET', path: '/healthz', status: 200, client: null },
      { name: 'ready', method: 'GET', path: '/readyz', status: 200, client: null },
      { name: 'metrics', method: 'GET', path: '/metrics', status: 200, client: null },
      { name: 'document', method: 'GET', path: '/openapi.json', status: 200, client: null },
      // The fourth request of one token in a window is 429.
      ...[1, 2, 3].map((i) => ({
        name: `limited ${i}`,
        method: 'GET',
        path: '/plants',
        status: 200,
        client: limited,
      })),
      { name: 'rate limited', method: 'GET', path: '/plants', status: 429, client: limited },
      // Last, since it empties the log: a position before the events kept.
      {
        name: 'changes, expired',
        method: 'GET',
        path: `/plants/changes?since=${since}`,
        status: 410,
        setup: async () => {
          await h.store.purgeEvents(new Date(Date.now() + 60_000));
        },
      },
    ];
    const problems: string[] = [];
    // The per-token limit is 3 a window: each exchange of the owner's goes with a token of its own.
    for (const x of exchanges) {
      await x.setup?.();
      const who = x.as
        ? { authorization: `Bearer ${await tokenOf(x.as, x.scopes)}` }
        : x.client === undefined
          ? { authorization: `Bearer ${await tokenOf(owner, x.scopes)}` }
          : x.client?.auth;
      let res: Response;
      try {
        res = await fetch(`${proxy}${x.path}`, {
          method: x.method,
          headers: { ...who, ...x.headers },
          ...(x.body === undefined ? {} : { body: x.body }),
          signal: AbortSignal.timeout(10_000),
        });
      } catch (err) {
        problems.push(`${x.name}: ${x.method} ${x.path} → no answer: ${(err as Error).message}`);
        continue;
      }
      const text = await res.text();
      const violations = res.headers.get('sl-violations');
      if (res.status !== x.status || violations) {
        problems.push(
          `${x.name}: ${x.method} ${x.path} → ${res.status} (wanted ${x.status}) ${violations ?? ''} ${text.slice(0, 300)}`,
        );
      }
    }
    assert.deepEqual(
      problems,
      [],
      log
        .split('\n')
        .filter((l) => /violation|error/i.test(l))
        .slice(-20)
        .join('\n'),
    );
    assert.ok(exchanges.length >= 120);
  });
});
