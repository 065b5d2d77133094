/**
 * Makes dist/client/index.js one module with no imports, as `plantstore/client` ships: the client
 * with the service's access rules and ETag module (src/access/policy.ts, src/plants/etag.ts) built
 * in, so it runs as it is in a browser and in Node alike. `npm run build` runs it after tsc, which
 * wrote the declarations next to it.
 */
import { join } from 'node:path';
import { build } from 'vite';

const root = join(import.meta.dirname, '..');

await build({
  configFile: false,
  root,
  logLevel: 'warn',
  build: {
    lib: { entry: join(root, 'src/client/index.ts'), formats: ['es'], fileName: () => 'index.js' },
    outDir: join(root, 'dist/client'),
    emptyOutDir: false,
    target: 'es2022',
    minify: false,
    sourcemap: true,
  },
});
