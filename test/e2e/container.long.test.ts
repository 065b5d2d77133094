// The container image of CONTRACT.md 14.2, built and run for real with podman (or docker): the
// Dockerfile builds (on a `node:24-bookworm-slim` made locally from Debian's packages where none can
// be pulled, test/helpers/container.ts), the image runs with a read-only root filesystem and no
// tmpfs, as a non-root user, its store on a volume; a plant is created and read back, the export
// spools and `backup` writes on that volume; SIGTERM stops it with exit 0 (inside `stop -t 10`'s
// ten seconds: past them the engine kills, 137); started again on the same volume, the plant is
// still there; the one-shot commands (`migrate`, `token list`, `export`) run as the entrypoint's.
// Without an engine it says why and skips; with CI=true a missing engine fails.
// The first run makes the base (mmdebstrap, about a minute) and builds (about a minute); later runs
// find both under .tmp/container/ (scripts/container-image.ts does the same ahead, as .ci/run does).
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { after, describe, test } from 'node:test';
import { BASE, type Engine, engine, ensureBase, ensureImage, findEngine } from '../helpers/container.js';
import { createPgDatabase, ENGINES, REDIS_SKIP, REDIS_URL } from '../helpers/engines.js';
import { until } from '../helpers/wait.js';

const found = findEngine();
const skip = typeof found === 'string' && process.env.CI !== 'true' ? found : false;

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

describe('the container image (CONTRACT.md 14.2)', { skip, timeout: 25 * 60_000 }, () => {
  const e = found as Engine;
  const run = `plantstore-test-${process.pid}`;
  const volume = `${run}-data`;
  const containers: string[] = [];
  let image = '';

  after(async () => {
    if (typeof found === 'string') return;
    if (containers.length)
      await engine(e, ['rm', '--force', '--volumes', ...containers], { allowFail: true });
    await engine(e, ['volume', 'rm', '--force', volume], { allowFail: true });
  });

  /**
   * `run` flags the image needs here: read-only, host networking, nothing pulled, `env`; the store's
   * volume on /data unless `volume` is false (on PostgreSQL the image's own anonymous one serves).
   */
  const runFlags = ({ env = [] as string[], volume: withVolume = true } = {}) => [
    '--pull=never',
    '--network=host',
    '--read-only',
    // podman mounts tmpfs on /tmp, /var/tmp and /run under --read-only unless told not to; the
    // image needs none (TMPDIR is /data), so none is given, as docker gives none.
    ...(e.name === 'podman' ? ['--read-only-tmpfs=false'] : []),
    ...(withVolume ? ['--volume', `${volume}:/data`] : []),
    ...env.flatMap((v) => ['--env', v]),
  ];

  /** Starts the service on `port` (127.0.0.1: host networking); resolves when /readyz says 200. */
  async function start(name: string, port: number, flags = runFlags()): Promise<number> {
    const started = Date.now();
    containers.push(name);
    await engine(e, [
      'run',
      '--detach',
      '--name',
      name,
      ...flags,
      // podman runs HEALTHCHECK on systemd timers, and this machine has no systemd: the check is
      // run by hand below (`podman healthcheck run`).
      ...(e.name === 'podman' ? ['--health-interval=disable'] : []),
      '--env',
      'HOST=127.0.0.1',
      '--env',
      `PORT=${port}`,
      image,
    ]);
    await until(
      `${name}'s /readyz`,
      async () => {
        const res = await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => null);
        return res?.status === 200;
      },
      60_000,
    ).catch(async (err: Error) => {
      const logs = await engine(e, ['logs', name], { allowFail: true });
      throw new Error(`${err.message}\n${logs.stdout}${logs.stderr}`);
    });
    return Date.now() - started;
  }

  /** Stops `name` as the engine does (SIGTERM, then SIGKILL after 10 s); its exit status. */
  async function stop(name: string): Promise<{ status: number; ms: number; logs: string }> {
    const started = Date.now();
    await engine(e, ['stop', '--time', '10', name], { timeoutMs: 60_000 });
    const ms = Date.now() - started;
    const status = Number(
      (await engine(e, ['inspect', '--format', '{{.State.ExitCode}}', name])).stdout.trim(),
    );
    const logs = await engine(e, ['logs', name]);
    return { status, ms, logs: logs.stdout + logs.stderr };
  }

  const exec = async (name: string, ...args: string[]) => (await engine(e, ['exec', name, ...args])).stdout;
  const oneShot = async (args: string[], flags = runFlags()) =>
    (await engine(e, ['run', '--rm', ...flags, image, ...args])).stdout;

  /** Makes a plant through `url` with `token`; its Location. */
  async function create(url: string, token: string, name: string): Promise<string> {
    const res = await fetch(`${url}/plants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name }),
    });
    assert.equal(res.status, 201, await res.clone().text());
    return res.headers.get('location') ?? '';
  }

  test('an engine is present (CI=true requires one)', () => {
    assert.equal(typeof found, 'object', String(found));
  });

  // Two tests, so that a first run's two long steps each begin and end within the runner's watchdog.
  test(`has ${BASE}, made from Debian and npm when missing`, { timeout: 15 * 60_000 }, async (t) => {
    await ensureBase(e, (line) => t.diagnostic(line));
  });

  test('builds the image (once per source tree)', { timeout: 15 * 60_000 }, async (t) => {
    const { tag, built } = await ensureImage(e, (line) => t.diagnostic(line));
    image = tag;
    const size = await engine(e, ['image', 'inspect', '--format', '{{.Size}}', image]);
    t.diagnostic(
      `${image} ${built ? 'built' : 'already built'}: ${(Number(size.stdout) / 1e6).toFixed(0)} MB`,
    );
  });

  test('is configured as 14.2 says: non-root, /data, HOST 0.0.0.0:3000, HEALTHCHECK, SIGTERM', async () => {
    const [info] = JSON.parse((await engine(e, ['image', 'inspect', image])).stdout) as {
      Config: {
        User: string;
        Env: string[];
        Entrypoint: string[];
        Cmd: string[];
        Volumes: Record<string, unknown>;
        ExposedPorts: Record<string, unknown>;
        StopSignal: string;
        Healthcheck?: { Test: string[] };
      };
      Healthcheck?: { Test: string[] };
    }[];
    assert.ok(info);
    const c = info.Config;
    assert.equal(c.User, '1000:1000');
    assert.deepEqual(Object.keys(c.Volumes), ['/data']);
    assert.deepEqual(Object.keys(c.ExposedPorts), ['3000/tcp']);
    for (const env of [
      'HOST=0.0.0.0',
      'PORT=3000',
      'DATABASE_URL=sqlite:/data/plantstore.db',
      'TMPDIR=/data',
    ]) {
      assert.ok(c.Env.includes(env), `${env} in ${c.Env.join(' ')}`);
    }
    assert.deepEqual(c.Entrypoint, ['plantstore']);
    assert.deepEqual(c.Cmd, ['serve']);
    assert.equal(c.StopSignal, 'SIGTERM');
    assert.match((c.Healthcheck ?? info.Healthcheck)?.Test.join(' ') ?? '', /\/healthz/);
    // Production dependencies only (no `node` devDependency, no tsx, no TypeScript), no compiler.
    const present = await engine(e, [
      'run',
      '--rm',
      '--pull=never',
      '--network=host',
      '--entrypoint',
      'sh',
      image,
      '-c',
      'for p in node tsx typescript vite @biomejs; do [ -e /app/node_modules/$p ] && echo $p; done; ' +
        'for c in cc gcc g++ make python3; do command -v $c; done; ' +
        // No build secret left behind (they are mounted into the install step only).
        'ls -d /root/.npmrc /run/secrets/* 2>/dev/null; true',
    ]);
    assert.equal(present.stdout.trim(), '');
    // The SQLite extension, compiled in a stage of its own, is there and loads (docs/search.md).
    const stable = await engine(e, [
      'run',
      '--rm',
      '--pull=never',
      '--network=host',
      '--entrypoint',
      'node',
      image,
      '--input-type=module',
      '-e',
      "const { default: D } = await import('better-sqlite3'); const { planStatementsOnce } = await import('/app/dist/store/sqlite/plan-once.js'); const db = new D(':memory:'); console.log(planStatementsOnce(db), db.prepare('SELECT plantstore_qpsg()').pluck().get());",
    ]);
    assert.equal(stable.stdout.trim(), 'true 1', stable.stderr);
  });

  test('runs read-only as non-root; a plant survives SIGTERM and a restart on the same volume', async (t) => {
    await engine(e, ['volume', 'create', volume]);
    const port = await freePort();
    const first = `${run}-1`;
    t.diagnostic(`start to /readyz 200: ${await start(first, port)} ms`);
    const base = `http://127.0.0.1:${port}`;

    assert.notEqual((await exec(first, 'id', '-u')).trim(), '0');
    const top = await engine(e, ['top', first, 'user'], { allowFail: e.name !== 'podman' });
    if (e.name === 'podman') assert.doesNotMatch(top.stdout, /\broot\b/);
    const write = await engine(e, ['exec', first, 'sh', '-c', 'touch /app/x || touch /tmp/x'], {
      allowFail: true,
    });
    assert.notEqual(write.status, 0);
    assert.match(write.stderr, /read-only file system/i);
    if (e.name === 'podman') await engine(e, ['healthcheck', 'run', first]); // throws unless healthy

    const { token } = JSON.parse(
      await exec(first, 'plantstore', 'token', 'create', '--user', 'alice', '--json'),
    ) as { token: string };
    const auth = { authorization: `Bearer ${token}` };
    const created = await fetch(`${base}/plants`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Monstera deliciosa', tag: 'container' }),
    });
    assert.equal(created.status, 201, await created.clone().text());
    const location = created.headers.get('location') ?? '';
    const id = /^\/plants\/(.+)$/.exec(location)?.[1];
    assert.ok(id, `Location: ${location}`);
    const read = await fetch(`${base}${location}`, { headers: auth });
    assert.equal(read.status, 200);
    assert.equal(((await read.json()) as { name: string }).name, 'Monstera deliciosa');
    // The export answer spools to TMPDIR (/data): it works on the read-only root with no tmpfs.
    const exported = await fetch(`${base}/plants/export?format=ndjson`, { headers: auth });
    assert.equal(exported.status, 200, await exported.clone().text());
    assert.match(await exported.text(), new RegExp(`"id":"?${id}\\b`));
    assert.match(await exec(first, 'plantstore', 'backup'), /\/data\/backups\/plantstore-/);

    const stopped = await stop(first);
    t.diagnostic(`SIGTERM to exit: ${stopped.ms} ms, status ${stopped.status}`);
    // Past `--time 10` the engine would have killed it (137): 0 is a drain within the 10 s.
    assert.equal(stopped.status, 0, stopped.logs);
    assert.match(stopped.logs, /SIGTERM/);

    // The one-shot commands, each a container of its own on the same volume.
    await oneShot(['migrate']);
    assert.match(await oneShot(['token', 'list', '--user', 'alice']), /alice/);
    assert.match(await oneShot(['export']), /Monstera deliciosa/);

    const second = `${run}-2`;
    t.diagnostic(`start to /readyz 200, again: ${await start(second, port)} ms`);
    const again = await fetch(`${base}${location}`, { headers: auth });
    assert.equal(again.status, 200);
    assert.equal(((await again.json()) as { name: string }).name, 'Monstera deliciosa');
    assert.equal((await stop(second)).status, 0);
  });

  const pgSkip = ENGINES.find((x) => x.name === 'postgres')?.skip || REDIS_SKIP;
  test('as compose.yaml runs it: `migrate` once, then two instances on one PostgreSQL with Redis', {
    skip: pgSkip,
  }, async () => {
    // The machine's PostgreSQL and Redis stand in for compose's db and redis services.
    const db = await createPgDatabase();
    try {
      const flags = runFlags({ env: [`DATABASE_URL=${db.url}`, `REDIS_URL=${REDIS_URL}`], volume: false });
      await oneShot(['migrate'], flags);
      const ports = [await freePort(), await freePort()];
      const names = [`${run}-pg-1`, `${run}-pg-2`];
      await Promise.all(names.map((name, i) => start(name, ports[i] as number, flags)));
      const { token } = JSON.parse(await oneShot(['token', 'create', '--user', 'bob', '--json'], flags)) as {
        token: string;
      };
      const location = await create(`http://127.0.0.1:${ports[0]}`, token, 'Ficus lyrata');
      const read = await fetch(`http://127.0.0.1:${ports[1]}${location}`, {
        headers: { authorization: `Bearer ${token}` },
      });
      assert.equal(read.status, 200);
      assert.equal(((await read.json()) as { name: string }).name, 'Ficus lyrata');
      for (const name of names) assert.equal((await stop(name)).status, 0);
    } finally {
      await db.drop();
    }
  });
});
