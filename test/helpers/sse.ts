export interface SseMessage {
  id?: string;
  event?: string;
  data?: string;
  comment?: string;
}

/** A Server-Sent Events reader over fetch, as a browser's EventSource would parse it. */
export interface SseReader {
  status: number;
  messages: SseMessage[];
  /** Resolves once `n` messages with data have arrived. */
  waitFor(n: number, ms?: number): Promise<SseMessage[]>;
  /** Resolves when the server ends the stream. */
  ended: Promise<void>;
  close(): void;
}

export async function openStream(url: string, headers: Record<string, string>): Promise<SseReader> {
  const abort = new AbortController();
  const res = await fetch(url, {
    headers: { accept: 'text/event-stream', ...headers },
    signal: abort.signal,
  });
  const messages: SseMessage[] = [];
  const waiters: (() => void)[] = [];
  const data = () => messages.filter((m) => m.data !== undefined);
  let ended: Promise<void> = Promise.resolve();
  if (res.status === 200 && res.body) {
    ended = (async () => {
      const decoder = new TextDecoder();
      let buf = '';
      try {
        for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
          buf += decoder.decode(chunk, { stream: true });
          let i = buf.indexOf('\n\n');
          while (i >= 0) {
            const block = buf.slice(0, i);
            buf = buf.slice(i + 2);
            const m: SseMessage = {};
            for (const line of block.split('\n')) {
              if (line.startsWith(':')) m.comment = line.slice(1).trim();
              else {
                const [field, ...rest] = line.split(':');
                const value = rest.join(':').replace(/^ /, '');
                if (field === 'id' || field === 'event' || field === 'data') m[field] = value;
              }
            }
            messages.push(m);
            for (const w of waiters.splice(0)) w();
            i = buf.indexOf('\n\n');
          }
        }
      } catch {
        // aborted by close()
      }
    })();
  }
  return {
    status: res.status,
    messages,
    ended,
    async waitFor(n, ms = 5_000) {
      const deadline = Date.now() + ms;
      while (data().length < n) {
        if (Date.now() > deadline) throw new Error(`only ${data().length} of ${n} events in ${ms} ms`);
        await new Promise<void>((resolve) => {
          waiters.push(resolve);
          setTimeout(resolve, 50);
        });
      }
      return data();
    },
    close: () => abort.abort(),
  };
}

/**
 * Opens `GET /events` streams of a service with a bearer token and keeps them, so that a suite
 * closes every one it opened at once (in its `after`). `base` is asked at each open: a suite's
 * server is listening only from its `before` on.
 */
export function eventStreams(base: () => string) {
  const readers: SseReader[] = [];
  return {
    async open(token: string, headers: Record<string, string> = {}): Promise<SseReader> {
      const r = await openStream(`${base()}/events`, { authorization: `Bearer ${token}`, ...headers });
      readers.push(r);
      return r;
    },
    closeAll(): void {
      for (const r of readers) r.close();
    },
  };
}
