import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { ConnectionPool, postWebhook } from '../../src/events/outbound.js';

// Kept-alive connections to receivers: a socket is reused only for a request to the very address
// that was resolved and checked for it, under the same host name; every request is still resolved
// and checked first.
describe('webhook connections kept alive', () => {
  let server: Server;
  let port = 0;
  // Each connection the receiver accepted, by the address it was made to.
  const connections: string[] = [];
  // Each request: the address its connection was made to, and that connection's number.
  const requests: { address: string; connection: number }[] = [];
  const numbers = new WeakMap<Socket, number>();

  before(async () => {
    server = createServer((req, res) => {
      req.resume().on('end', () => {
        requests.push({ address: req.socket.localAddress!, connection: numbers.get(req.socket)! });
        res.writeHead(204).end();
      });
    });
    server.on('connection', (socket: Socket) => {
      numbers.set(socket, connections.length);
      connections.push(socket.localAddress!);
    });
    // Every loopback address: 127.0.0.1 and 127.0.0.2 reach the same server on the same port.
    await new Promise<void>((done) => server.listen(0, '0.0.0.0', done));
    port = (server.address() as AddressInfo).port;
  });
  after(async () => {
    server.closeAllConnections();
    await new Promise((done) => server.close(done));
  });

  const post = (url: string, address: string, pool: ConnectionPool, allowPrivate = true) =>
    postWebhook(url, {
      body: '{}',
      headers: {},
      timeoutMs: 5_000,
      allowPrivate,
      resolver: async () => [{ address, family: 4 }],
      pool,
    });

  it('reuses a socket for the same checked address, and never for another', async () => {
    const pool = new ConnectionPool();
    try {
      const url = `http://hooks.test:${port}/x`;
      const start = connections.length;
      const first = await post(url, '127.0.0.1', pool);
      assert.equal(first.kind === 'response' && first.status, 204);
      await post(url, '127.0.0.1', pool);
      assert.equal(connections.length - start, 1, 'the second request reused the first connection');
      // The name now resolves elsewhere: a connection of its own, to the new address.
      const moved = await post(url, '127.0.0.2', pool);
      assert.equal(moved.kind === 'response' && moved.address, '127.0.0.2');
      assert.equal(connections.length - start, 2);
      assert.equal(connections.at(-1), '127.0.0.2');
      assert.deepEqual(requests.at(-1), { address: '127.0.0.2', connection: connections.length - 1 });
      // And back: the first connection again, never the one to 127.0.0.2.
      await post(url, '127.0.0.1', pool);
      assert.equal(connections.length - start, 2);
      assert.deepEqual(requests.at(-1), { address: '127.0.0.1', connection: start });
      // Another name at the same address: a pool (and connection) of its own.
      await post(`http://other.test:${port}/x`, '127.0.0.1', pool);
      assert.equal(connections.length - start, 3);
      assert.equal(pool.size, 3);
    } finally {
      pool.destroy();
    }
  });

  it('checks every request: a pooled connection does not let a refused address through', async () => {
    const pool = new ConnectionPool();
    try {
      const url = `http://hooks.test:${port}/y`;
      await post(url, '127.0.0.1', pool);
      const seen = requests.length;
      const refused = await post(url, '127.0.0.1', pool, false);
      assert.equal(refused.kind, 'refused');
      assert.equal(requests.length, seen, 'nothing was sent');
    } finally {
      pool.destroy();
    }
  });

  it('a socket the receiver closed meanwhile is replaced, within the same request', async () => {
    const pool = new ConnectionPool();
    try {
      const url = `http://hooks.test:${port}/z`;
      await post(url, '127.0.0.1', pool);
      const start = connections.length;
      // The receiver drops its idle connections (as one restarting, or at its keep-alive timeout).
      server.closeIdleConnections();
      const again = await post(url, '127.0.0.1', pool);
      assert.equal(again.kind === 'response' && again.status, 204);
      assert.equal(connections.length - start, 1, 'a new connection');
    } finally {
      pool.destroy();
    }
  });
});
