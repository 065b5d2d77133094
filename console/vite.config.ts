import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { brotliCompressSync, constants, gzipSync } from 'node:zlib';
import preact from '@preact/preset-vite';
import { defineConfig, type Plugin } from 'vite';

const root = fileURLToPath(new URL('.', import.meta.url));
const outDir = fileURLToPath(new URL('../dist/console/', import.meta.url));

/**
 * Brotli and gzip copies of every text file next to it (`x.js.br`, `x.js.gz`), made once at build
 * time so the service sends them as they are (@fastify/static's preCompressed) and compresses
 * nothing per request.
 */
function precompress(): Plugin {
  const walk = (dir: string): string[] =>
    readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
      e.isDirectory() ? walk(join(dir, e.name)) : [join(dir, e.name)],
    );
  return {
    name: 'plantstore-precompress',
    apply: 'build',
    closeBundle() {
      for (const file of walk(outDir)) {
        if (!/\.(js|css|html|svg|json|txt)$/.test(file)) continue;
        const data = readFileSync(file);
        writeFileSync(
          `${file}.br`,
          brotliCompressSync(data, { params: { [constants.BROTLI_PARAM_QUALITY]: 11 } }),
        );
        writeFileSync(`${file}.gz`, gzipSync(data, { level: 9 }));
      }
    },
  };
}

export default defineConfig({
  root,
  base: '/console/',
  plugins: [preact(), precompress()],
  resolve: {
    alias: { 'plantstore/client': fileURLToPath(new URL('../src/client/index.ts', import.meta.url)) },
  },
  build: {
    outDir,
    emptyOutDir: true,
    target: 'es2022',
    // Nothing inlined as a data: URL; the polyfill would be dead weight in the browsers targeted.
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    reportCompressedSize: true,
  },
  // `npm run dev:console`: the console from source with reload, the API from `npm run dev` on :3000.
  server: {
    proxy: Object.fromEntries(
      ['/plants', '/gardens', '/me', '/tokens', '/webhooks', '/events', '/console/config.json'].map((p) => [
        p,
        'http://127.0.0.1:3000',
      ]),
    ),
  },
});
