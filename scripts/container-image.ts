/**
 * Builds the project's container image for this source tree, and first the base image
 * `node:24-bookworm-slim` when it cannot be had otherwise (test/helpers/container.ts): what
 * test/e2e/container.long.test.ts runs, done ahead. .ci/run calls it once before the test tiers, so
 * the build is timed on its own and both runs of the suite find the image made. Prints the tag.
 *   npx tsx scripts/container-image.ts
 */
import { ensureImage, findEngine } from '../test/helpers/container.js';

const started = Date.now();
const engine = findEngine();
if (typeof engine === 'string') {
  console.error(`container-image: ${engine}`);
  process.exit(process.env.CI === 'true' ? 1 : 0);
}
const { tag, built } = await ensureImage(engine, (line) => console.error(`  ${line}`));
const seconds = ((Date.now() - started) / 1000).toFixed(1);
console.error(
  `container-image: ${tag} ${built ? 'built' : 'already built'} with ${engine.name} in ${seconds} s`,
);
console.log(tag);
