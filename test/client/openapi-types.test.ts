import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

// The client's types are generated from the served document (scripts/openapi-types.ts, run by
// `npm run build`): a schema or route changed without running it leaves the client behind.
describe('src/client/openapi.ts', () => {
  it('is what scripts/openapi-types.ts makes from the served document (not stale)', async () => {
    const r = await new Promise<{ code: number; stderr: string }>((resolve) => {
      execFile(
        process.execPath,
        ['--import', 'tsx', 'scripts/openapi-types.ts', '--check'],
        { cwd: ROOT, timeout: 60_000, killSignal: 'SIGKILL' },
        (err, _stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stderr }),
      );
    });
    assert.equal(r.code, 0, `${r.stderr}\nrun \`npm run build\` (or npx tsx scripts/openapi-types.ts)`);
  });
});
