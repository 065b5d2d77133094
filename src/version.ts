import { readFileSync } from 'node:fs';

/**
 * This release's version, read from package.json when the process starts (never a copy made at
 * build time, so it cannot go stale). Both src/ and dist/ sit one folder below the package root.
 */
export const VERSION: string = (
  JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }
).version;
