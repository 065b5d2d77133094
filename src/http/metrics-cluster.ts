import cluster from 'node:cluster';
import { AggregatorRegistry, type Registry } from 'prom-client';

// `serve --workers N`: a scrape reaches one worker, which asks the primary; the primary collects
// every worker's registry through prom-client's own cluster messages and sums them (each metric
// by its `aggregator`), so one scrape counts the requests of every worker.

const ASK = 'plantstore:metrics-ask';
const ANSWER = 'plantstore:metrics-answer';
// prom-client gives up on a worker that has not answered within 5 s.
const WAIT_MS = 10_000;

interface Message {
  type?: unknown;
  id?: number;
  text?: string;
  error?: string;
}

/** In the primary: answers a worker's ASK with the metrics of every worker, aggregated. */
export function aggregateWorkerMetrics(): void {
  const aggregator = new AggregatorRegistry();
  cluster.on('message', (worker, message: Message) => {
    if (message?.type !== ASK) return;
    aggregator.clusterMetrics().then(
      (text) => worker.send({ type: ANSWER, id: message.id, text }),
      (err: Error) => worker.send({ type: ANSWER, id: message.id, error: err.message }),
    );
  });
}

/**
 * A scrape of `registry`: in a cluster worker, the primary's aggregate of every worker (this
 * registry is what this worker gives it); in a process on its own, the registry itself.
 */
export function scrapeOf(registry: Registry): () => Promise<string> {
  if (!cluster.isWorker || !process.send) return () => registry.metrics();
  AggregatorRegistry.setRegistries([registry]);
  // Its constructor makes this worker answer the primary's requests for its metrics.
  new AggregatorRegistry();
  const waiting = new Map<number, (m: Message) => void>();
  let next = 0;
  process.on('message', (message: Message) => {
    if (message?.type === ANSWER && message.id !== undefined) waiting.get(message.id)?.(message);
  });
  return () =>
    new Promise<string>((resolve, reject) => {
      const id = next++;
      const timer = setTimeout(() => settle({ error: 'the primary did not answer' }), WAIT_MS);
      const settle = (m: Message) => {
        clearTimeout(timer);
        waiting.delete(id);
        if (m.text !== undefined) resolve(m.text);
        else reject(new Error(`metrics of the workers: ${m.error}`));
      };
      waiting.set(id, settle);
      process.send!({ type: ASK, id });
    });
}
