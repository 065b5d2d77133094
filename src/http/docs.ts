import Fastify, { type FastifyInstance } from 'fastify';
import { SHED } from './pressure.js';

/** Where the API reference lives, and Scalar's own paths under it. */
const PREFIX = '/docs';
const PATHS = [PREFIX, `${PREFIX}/`, `${PREFIX}/js/scalar.js`];

/**
 * /docs: Scalar's API reference page, loaded on its first request. Scalar's plugin holds its
 * browser bundle as a string in its own source, ~17 MB of heap between the two, which a server
 * that nobody reads the reference of should not carry (docs/benchmarks.md's memory figures). Until someone
 * asks, the page's three routes exist and nothing else is loaded; then a small Fastify instance
 * with the plugin answers them, through inject, with the configuration given here.
 */
export function docsRoutes(app: FastifyInstance, configuration: Record<string, unknown>): void {
  let docs: Promise<FastifyInstance> | undefined;
  const load = async (): Promise<FastifyInstance> => {
    const { default: scalar } = await import('@scalar/fastify-api-reference');
    const inner = Fastify({ logger: false });
    await inner.register(scalar, { routePrefix: PREFIX, configuration } as never);
    await inner.ready();
    return inner;
  };
  app.addHook('onClose', async () => {
    if (docs) await (await docs.catch(() => undefined))?.close();
  });
  for (const url of PATHS) {
    app.get(url, { ...SHED, schema: { hide: true }, logLevel: 'warn' }, async (request, reply) => {
      docs ??= load();
      // A failed load is tried again by the next request rather than remembered.
      const inner = await docs.catch((err: unknown) => {
        docs = undefined;
        throw err;
      });
      const res = await inner.inject({ method: 'GET', url: request.url });
      for (const name of ['content-type', 'location'] as const) {
        const value = res.headers[name];
        if (value !== undefined) reply.header(name, value);
      }
      return reply.code(res.statusCode).send(res.rawPayload);
    });
  }
}
