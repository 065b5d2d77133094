import { createServer, type IncomingHttpHeaders, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Received {
  /** The request's path (an endpoint's URL may add one to the receiver's). */
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  at: number;
}

/** What the receiver answers next: a status (and headers), or 'hang' (never answers). */
export type Answer = { status: number; headers?: Record<string, string> } | 'hang';

/** A real HTTP webhook receiver on 127.0.0.1 that records every delivery and answers as told. */
export interface Receiver {
  url: string;
  received: Received[];
  connections: number;
  /** Answers, in order, for the next deliveries; when empty, 200. */
  answers: Answer[];
  /** While true, deliveries are recorded and held unanswered until release(). */
  holding: boolean;
  /** Stops holding: every held delivery is answered (as `answers` say) and later ones at once. */
  release(): void;
  /** Resolves once `n` deliveries have arrived (rejects after `ms`). */
  waitFor(n: number, ms?: number): Promise<Received[]>;
  close(): Promise<void>;
}

export async function startReceiver(): Promise<Receiver> {
  const hung: ServerResponse[] = [];
  const held: ServerResponse[] = [];
  const answer = (res: ServerResponse) => {
    const a = r.answers.shift() ?? { status: 200 };
    if (a === 'hang') hung.push(res);
    else res.writeHead(a.status, a.headers ?? {}).end('ok');
  };
  const waiters: { n: number; resolve: () => void }[] = [];
  const r: Receiver = {
    url: '',
    received: [],
    connections: 0,
    answers: [],
    holding: false,
    release() {
      r.holding = false;
      for (const res of held.splice(0)) answer(res);
    },
    waitFor(n, ms = 5_000) {
      if (r.received.length >= n) return Promise.resolve(r.received);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`only ${r.received.length} of ${n} deliveries in ${ms} ms`)),
          ms,
        );
        waiters.push({
          n,
          resolve: () => {
            clearTimeout(timer);
            resolve(r.received);
          },
        });
      });
    },
    async close() {
      for (const res of [...hung, ...held]) res.destroy();
      server.closeAllConnections();
      await new Promise((done) => server.close(done));
    },
  };
  const server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (d) => (body += d));
    req.on('end', () => {
      r.received.push({ path: req.url ?? '', headers: req.headers, body, at: Date.now() });
      for (const w of waiters.filter((w) => r.received.length >= w.n)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve();
      }
      if (r.holding) held.push(res);
      else answer(res);
    });
  });
  server.on('connection', () => r.connections++);
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  r.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  return r;
}
