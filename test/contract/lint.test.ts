import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { buildApp } from '../../src/app.js';
import { testConfig } from '../../src/config.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** Runs a linter's bin from node_modules on this test's own Node; resolves with its output and status. */
function run(
  bin: string,
  args: string[],
  cwd: string,
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      join(ROOT, 'node_modules/.bin', bin),
      args,
      {
        cwd,
        env: { ...process.env, PATH: `${dirname(process.execPath)}:${process.env.PATH}`, NO_COLOR: '1' },
        maxBuffer: 1 << 26,
      },
      (err, stdout, stderr) =>
        resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

// The served document, as a client fetches it, linted by tools nobody here wrote (CONTRACT.md
// section 9): Spectral's spectral:oas and Redocly's recommended rules, no errors and no warnings
// beyond those openapi/.redocly.lint-ignore.yaml keeps with a reason each. JWTs on, so that both
// security schemes are in it.
describe('the served OpenAPI document passes Spectral and Redocly', () => {
  const dir = mkdtempSync(join(tmpdir(), 'plantstore-lint-'));
  before(async () => {
    const app = await buildApp(
      testConfig({
        metrics: true,
        jwtIssuer: 'https://issuer.example',
        jwtAudience: 'https://plants.example',
      }),
    );
    const res = await app.inject({ url: '/openapi.json', headers: { host: '127.0.0.1:3000' } });
    await app.close();
    writeFileSync(join(dir, 'openapi.json'), res.body);
    for (const f of ['.spectral.yaml', 'redocly.yaml', '.redocly.lint-ignore.yaml']) {
      copyFileSync(join(ROOT, 'openapi', f), join(dir, f));
    }
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('Spectral (spectral:oas): no problem of any severity', async () => {
    const r = await run(
      'spectral',
      ['lint', 'openapi.json', '--ruleset', '.spectral.yaml', '-f', 'json', '--quiet'],
      dir,
    );
    const problems = JSON.parse(r.stdout || '[]') as { code: string; message: string; path: string[] }[];
    assert.deepEqual(
      problems.map((p) => `${p.code} at ${p.path.join('.')}: ${p.message}`),
      [],
      r.stderr,
    );
    assert.equal(r.code, 0);
  });

  it('Redocly (recommended): no error, no warning beyond the kept ones', async () => {
    const r = await run('redocly', ['lint', 'openapi.json', '--format', 'json'], dir);
    const out = JSON.parse(r.stdout.slice(r.stdout.indexOf('{'))) as {
      totals: { errors: number; warnings: number; ignored: number };
      problems: { ruleId: string; message: string; location: { pointer: string }[] }[];
    };
    assert.deepEqual(
      out.problems
        .filter((p) => !('ignored' in p && p.ignored))
        .map((p) => `${p.ruleId} at ${p.location[0]?.pointer}: ${p.message}`),
      [],
    );
    assert.deepEqual([out.totals.errors, out.totals.warnings], [0, 0]);
    assert.equal(out.totals.ignored, 5, 'exactly the five kept in the ignore file');
    assert.equal(r.code, 0, r.stderr);
  });
});
