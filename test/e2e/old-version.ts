import { execFile } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

export interface OldVersion {
  /** The full commit id. */
  commit: string;
  /** The tree, built: `bin/plantstore` there runs that commit's code. */
  dir: string;
  bin: string;
}

/**
 * An earlier commit of this repository, as its own built tree, so a test can make a store with
 * the real code of an earlier version (its `serve`, its `token create`) and then hand it to this
 * one. The tree is `git archive` of the commit (no worktree is registered, nothing of the
 * repository changes), with this checkout's node_modules linked in, compiled by its own
 * tsconfig.build.json into its own dist/. It is kept under .tmp/ (ignored by git) and reused by
 * later runs; a half-made tree is never used: it is made aside and renamed into place when built.
 * The commit must be in this clone's history (a shallow clone has to be deepened first).
 */
export async function oldVersion(commit: string): Promise<OldVersion> {
  let full: string;
  try {
    full = (await run('git', ['-C', ROOT, 'rev-parse', '--verify', `${commit}^{commit}`])).stdout.trim();
  } catch (err) {
    throw new Error(
      `commit ${commit} is not in this clone's history (${(err as Error).message.trim()}); a shallow clone needs \`git fetch --unshallow\``,
    );
  }
  const base = join(ROOT, '.tmp');
  const dir = join(base, `plantstore-${full.slice(0, 12)}`);
  const marker = join(dir, '.built');
  const built = (d: string) =>
    existsSync(join(d, '.built')) && readFileSync(join(d, '.built'), 'utf8') === full;
  const found: OldVersion = { commit: full, dir, bin: join(dir, 'bin', 'plantstore') };
  if (built(dir)) return found;

  mkdirSync(base, { recursive: true });
  const making = mkdtempSync(join(base, `plantstore-${full.slice(0, 12)}.making-`));
  try {
    const tar = join(making, '.tree.tar');
    await run('git', ['-C', ROOT, 'archive', '--format=tar', '-o', tar, full], { timeout: 60_000 });
    await run('tar', ['-xf', tar, '-C', making], { timeout: 60_000 });
    rmSync(tar);
    // Its package.json and lockfile are this checkout's (an older commit's dependencies that
    // differ would need an `npm ci` of its own instead).
    symlinkSync(join(ROOT, 'node_modules'), join(making, 'node_modules'), 'dir');
    await run(
      process.execPath,
      [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.build.json'],
      {
        cwd: making,
        timeout: 180_000,
      },
    ).catch((err: Error & { stdout?: string }) => {
      // Type errors alone (a newer TypeScript or @types than the commit had) still emit its code.
      if (!existsSync(join(making, 'dist', 'cli.js'))) {
        throw new Error(`building ${commit} failed: ${err.message}\n${err.stdout ?? ''}`);
      }
    });
    writeFileSync(join(making, '.built'), full);
    if (existsSync(dir) && !built(dir)) rmSync(dir, { recursive: true, force: true });
    try {
      renameSync(making, dir);
    } catch (err) {
      // Another run made it meanwhile: that one is as good.
      if (!built(dir)) throw err;
    }
  } finally {
    rmSync(making, { recursive: true, force: true });
  }
  if (!existsSync(marker)) throw new Error(`the tree of ${commit} at ${dir} was not made`);
  return found;
}
