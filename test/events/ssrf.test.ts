import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import {
  checkWebhookTarget,
  checkWebhookUrl,
  isForbiddenAddress,
  parseRetryAfter,
  postWebhook,
  type Resolver,
} from '../../src/events/outbound.js';

describe('the outbound address policy', () => {
  const forbidden = [
    '0.0.0.0',
    '0.1.2.3',
    '10.0.0.1',
    '10.255.255.255',
    '100.64.0.1',
    '100.127.255.254',
    '127.0.0.1',
    '127.255.0.9',
    '169.254.169.254',
    '172.16.0.1',
    '172.31.255.255',
    '192.0.0.8',
    '192.0.2.1',
    '192.168.1.1',
    '198.18.0.1',
    '198.51.100.7',
    '203.0.113.9',
    '224.0.0.1',
    '239.255.255.250',
    '240.0.0.1',
    '255.255.255.255',
    '::',
    '::1',
    '::ffff:127.0.0.1',
    '::ffff:7f00:1',
    '::ffff:10.0.0.1',
    '::ffff:a9fe:a9fe',
    '0:0:0:0:0:ffff:c0a8:0101',
    '::127.0.0.1',
    'fc00::1',
    'fd12:3456::1',
    'fe80::1',
    'fe80::1%eth0',
    'ff02::1',
    '64:ff9b::7f00:1',
    '64:ff9b::a00:1',
    '2002:7f00:1::1',
    '2002:a00:1::',
    '2001:db8::1',
    // IPv4-translated (::ffff:0:a.b.c.d), whatever the IPv4 address inside
    '::ffff:0:7f00:1',
    '::ffff:0:a00:1',
    '0:0:0:0:ffff:0:127.0.0.1',
    '::ffff:0:808:808',
    '::a00:1',
    '::ffff:0:0:7f00:1',
    '5f00::1',
    '3fff::1',
    '2001:2::1',
    'not-an-ip',
    '',
  ];
  for (const ip of forbidden)
    it(`refuses ${ip || '(empty)'}`, () => assert.equal(isForbiddenAddress(ip), true));
  for (const ip of [
    '8.8.8.8',
    '1.1.1.1',
    '93.184.216.34',
    '100.63.255.255',
    '172.32.0.1',
    '2606:4700:4700::1111',
    '2a00:1450:4001:80b::200e',
    '::ffff:8.8.8.8',
  ]) {
    it(`allows public ${ip}`, () => assert.equal(isForbiddenAddress(ip), false));
  }

  for (const url of [
    'http://127.0.0.1/',
    'http://127.1/',
    'http://2130706433/',
    'http://0x7f.1/',
    'http://017700000001/',
    'http://[::1]/',
    'http://[::ffff:127.0.0.1]/',
    'http://[::ffff:7f00:1]/',
    'http://[::ffff:0:127.0.0.1]/',
    'http://[64:ff9b::10.0.0.1]/',
    'http://[2002:a00:1::]/',
    'http://[::]/',
    'http://[::10.0.0.1]/',
    'http://0x0a000001/',
    'http://012.0.0.1/',
    'http://167772161/',
    'http://10.1/',
    'http://[fe80::1]/',
    'http://169.254.169.254/',
    'http://100.64.0.1/',
    'http://localhost:3000/',
    'http://api.localhost/',
    'ftp://example.com/',
    'http://user:pw@example.com/',
    'javascript:alert(1)',
    'not a url',
    `https://example.com/${'a'.repeat(2000)}`,
  ]) {
    it(`checkWebhookUrl refuses ${url.slice(0, 50)}`, () =>
      assert.equal(checkWebhookUrl(url, { allowPrivate: false }).ok, false));
  }
  it('checkWebhookUrl accepts public names and addresses, and private ones when allowed', () => {
    assert.equal(checkWebhookUrl('https://hooks.example.com/x?y=1', { allowPrivate: false }).ok, true);
    assert.equal(checkWebhookUrl('http://8.8.8.8:8080/', { allowPrivate: false }).ok, true);
    assert.equal(checkWebhookUrl('http://127.0.0.1:9/', { allowPrivate: true }).ok, true);
  });

  it('checkWebhookTarget resolves a host name, within a bounded wait, and never says what it resolved to', async () => {
    const names: Record<string, string[]> = {
      'public.test': ['93.184.216.34', '2606:4700::1'],
      'inside.test': ['10.0.0.7'],
      'mixed.test': ['93.184.216.34', '127.0.0.1'],
      'translated.test': ['::ffff:0:a00:7'],
      'empty.test': [],
    };
    let asked = 0;
    const resolver: Resolver = async (name) => {
      asked++;
      if (name === 'slow.test') return new Promise(() => {});
      const a = names[name];
      if (!a) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${name}`), { code: 'ENOTFOUND' });
      return a.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }) as const);
    };
    const check = (url: string, allowPrivate = false) =>
      checkWebhookTarget(url, { allowPrivate, resolver, timeoutMs: 50 });
    assert.equal((await check('https://public.test/x')).ok, true);
    for (const name of ['inside.test', 'mixed.test', 'translated.test']) {
      const r = await check(`https://${name}/x`);
      assert.equal(r.ok, false, name);
      assert.match(r.ok ? '' : r.reason, /resolves to a private, loopback or otherwise internal address/);
      assert.doesNotMatch(r.ok ? '' : r.reason, /10\.0\.0\.7|127\.0\.0\.1|ffff/);
    }
    for (const [name, says] of [
      ['empty.test', /does not resolve/],
      ['nowhere.test', /does not resolve/],
      ['slow.test', /did not resolve in time/],
    ] as const) {
      const r = await check(`https://${name}/x`);
      assert.match(r.ok ? '' : r.reason, says, name);
    }
    // Literal addresses need no lookup; private ones allowed: no lookup either.
    asked = 0;
    assert.equal((await check('http://8.8.8.8/')).ok, true);
    assert.equal((await check('http://[::ffff:0:127.0.0.1]/')).ok, false);
    assert.equal((await check('http://inside.test/', true)).ok, true);
    assert.equal(asked, 0);
  });

  it('checkWebhookTarget with the system resolver: a hosts-file name for 127.0.0.1 is refused', async () => {
    const { readFileSync } = await import('node:fs');
    const name = readFileSync('/etc/hosts', 'utf8')
      .split('\n')
      .map((l) => l.trim().split(/\s+/))
      .find(([ip, n]) => ip === '127.0.0.1' && n && n !== 'localhost')?.[1];
    const r = await checkWebhookTarget(`http://${name ?? 'localhost.localdomain'}:8080/`, {
      allowPrivate: false,
    });
    assert.equal(r.ok, false);
    assert.doesNotMatch(r.ok ? '' : r.reason, /127\.0\.0\.1/);
  });

  it('parses Retry-After as seconds or an HTTP date', () => {
    assert.equal(parseRetryAfter('120'), 120_000);
    assert.equal(parseRetryAfter(new Date(Date.now() + 60_000).toUTCString(), Date.now()) !== null, true);
    assert.equal(parseRetryAfter('soon'), null);
    assert.equal(parseRetryAfter(undefined), null);
  });
});

describe('postWebhook against a real receiver on 127.0.0.1', () => {
  let port = 0;
  let hits: { url: string; host: string; body: string }[] = [];
  let connections = 0;
  const server = createServer((req, res) => {
    let body = '';
    req
      .on('data', (d) => (body += d))
      .on('end', () => {
        hits.push({ url: req.url!, host: req.headers.host!, body });
        if (req.url === '/redirect') return res.writeHead(302, { location: '/target' }).end();
        if (req.url === '/slow') return; // never answers
        if (req.url === '/busy') return res.writeHead(503, { 'retry-after': '7' }).end();
        res.writeHead(204).end();
      });
  });
  server.on('connection', () => connections++);
  before(async () => {
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as AddressInfo).port;
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });
  const base = { body: '{"a":1}', headers: { 'webhook-id': 'evt_1' }, timeoutMs: 2_000 };

  it('delivers the body and headers and reports the status', async () => {
    hits = [];
    const r = await postWebhook(`http://127.0.0.1:${port}/ok`, { ...base, allowPrivate: true });
    assert.equal(r.kind, 'response');
    assert.equal(r.kind === 'response' && r.status, 204);
    assert.deepEqual(hits, [{ url: '/ok', host: `127.0.0.1:${port}`, body: '{"a":1}' }]);
  });

  it('follows no redirect', async () => {
    hits = [];
    const r = await postWebhook(`http://127.0.0.1:${port}/redirect`, { ...base, allowPrivate: true });
    assert.equal(r.kind === 'response' && r.status, 302);
    assert.deepEqual(
      hits.map((h) => h.url),
      ['/redirect'],
    );
  });

  it('reads Retry-After', async () => {
    const r = await postWebhook(`http://127.0.0.1:${port}/busy`, { ...base, allowPrivate: true });
    assert.equal(r.kind === 'response' && r.retryAfterMs, 7_000);
  });

  it('bounds the whole exchange with the timeout', async () => {
    const started = Date.now();
    const r = await postWebhook(`http://127.0.0.1:${port}/slow`, {
      ...base,
      timeoutMs: 300,
      allowPrivate: true,
    });
    assert.equal(r.kind, 'failed');
    assert.match(r.kind === 'failed' ? r.reason : '', /timeout after 300 ms/);
    assert.ok(Date.now() - started < 2_000);
  });

  it('a refused connection is a failure, not a throw', async () => {
    const r = await postWebhook('http://127.0.0.1:1/x', { ...base, allowPrivate: true });
    assert.equal(r.kind, 'failed');
  });

  it('a name resolving to any private address is refused and never connected to', async () => {
    for (const addresses of [
      [{ address: '127.0.0.1', family: 4 }],
      [{ address: '::1', family: 6 }],
      [{ address: '::ffff:10.0.0.1', family: 6 }],
      [
        { address: '93.184.216.34', family: 4 },
        { address: '127.0.0.1', family: 4 },
      ],
    ] as const) {
      const before = connections;
      const resolver: Resolver = async () => [...addresses];
      const r = await postWebhook(`http://hooks.example.test:${port}/x`, {
        ...base,
        allowPrivate: false,
        resolver,
      });
      assert.equal(r.kind, 'refused', JSON.stringify(addresses));
      assert.doesNotMatch(r.kind === 'refused' ? r.reason : '', /127\.0\.0\.1|::1|10\.0\.0\.1/);
      assert.equal(connections, before);
    }
  });

  it('a failed connection to a name is reported by the name, not the address it resolved to', async () => {
    const resolver: Resolver = async () => [{ address: '127.0.0.1', family: 4 }];
    const r = await postWebhook('http://closed.test:1/x', { ...base, allowPrivate: true, resolver });
    assert.equal(r.kind, 'failed');
    assert.match(r.kind === 'failed' ? r.reason : '', /ECONNREFUSED.*closed\.test/);
    assert.doesNotMatch(r.kind === 'failed' ? r.reason : '', /127\.0\.0\.1/);
  });

  it('connects to the address it resolved and checked, once, with the name as Host', async () => {
    hits = [];
    let lookups = 0;
    const resolver: Resolver = async (name) => {
      lookups++;
      assert.equal(name, 'pinned.test');
      return [{ address: '127.0.0.1', family: 4 }];
    };
    const r = await postWebhook(`http://pinned.test:${port}/pinned`, {
      ...base,
      allowPrivate: true,
      resolver,
    });
    assert.equal(r.kind === 'response' && r.address, '127.0.0.1');
    assert.equal(lookups, 1);
    assert.deepEqual(
      hits.map((h) => h.host),
      [`pinned.test:${port}`],
    );
  });
});
