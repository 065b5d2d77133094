import type { Tracing } from '../telemetry/tracing.js';
import type { Store } from './store.js';

// What is not a unit of store work to trace: setup, hooks, and the export's async iterable (the
// export's own span covers its pages).
const UNTRACED = new Set([
  'engine',
  'migrate',
  'migrationsPending',
  'schemaVersion',
  'close',
  'poolStats',
  'listMarks',
  'scopeMarks',
  'onEvents',
  'comparePositions',
  'exportPlants',
]);

/**
 * The store with each operation a client span of its own (contract 14.1) under the span active when
 * it is called (a request's, or a job's): named by the engine and the operation (`sqlite
 * updatePlant`), with db.system.name and db.operation.name; never an argument's value. Called
 * outside any span (the webhook dispatcher's and the streams' polls), an operation is not traced:
 * a trace for every poll would bury the requests' traces. Each SQLite operation is one statement
 * or one write of the writer's batch, each PostgreSQL one a prepared statement or a transaction of
 * them.
 */
export function traceStore(store: Store, tracing: Tracing): Store {
  const system = store.engine === 'postgres' ? 'postgresql' : 'sqlite';
  // A PostgreSQL operation's statements are spans under it; a SQLite one has none.
  const leaf = system === 'sqlite';
  const wrapped = new Map<PropertyKey, unknown>();
  return new Proxy(store, {
    get(target, prop) {
      const value = Reflect.get(target, prop, target) as unknown;
      if (typeof value !== 'function') return value;
      let fn = wrapped.get(prop);
      if (fn === undefined) {
        const method = value as (...args: unknown[]) => unknown;
        const name = String(prop);
        // Built once a method, not once a call.
        const spanName = `${system} ${name}`;
        const attributes = { 'db.system.name': system, 'db.operation.name': name };
        fn = UNTRACED.has(name)
          ? method.bind(target)
          : (...args: unknown[]) =>
              tracing.childSpan(spanName, attributes, () => method.apply(target, args), leaf);
        wrapped.set(prop, fn);
      }
      return fn;
    },
  });
}
