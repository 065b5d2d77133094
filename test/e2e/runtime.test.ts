import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { ENGINES, withPgDatabase } from '../helpers/engines.js';
import { BIN, exitOf, restarts, serve } from './process.js';

const dir = mkdtempSync(join(tmpdir(), 'plantstore-runtime-'));
after(() => rmSync(dir, { recursive: true, force: true }));

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}
function run(node: string, args: string[], env: Record<string, string> = {}): Promise<Run> {
  return new Promise((resolve) => {
    execFile(node, args, { env: { ...process.env, ...env } }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

/** A preload that makes this Node report another version, to test the check on any machine. */
function pretend(version: string): string {
  const file = join(dir, `pretend-${version}.mjs`);
  writeFileSync(file, `Object.defineProperty(process.versions, 'node', { value: '${version}' });\n`);
  return file;
}

const COMMANDS = [['serve'], ['migrate'], ['token', 'create', '--user', 'u'], ['plants', 'list'], ['--help']];

describe('bin/plantstore on a Node.js older than 22.14', () => {
  for (const version of ['20.20.2', '22.13.1', '18.0.0'])
    for (const args of COMMANDS)
      it(`on ${version}, \`${args.join(' ')}\` exits 2 with one line naming 22.14 and writes nothing`, async () => {
        const db = join(dir, `untouched-${Math.random()}.db`);
        const r = await run(process.execPath, ['--import', pretend(version), BIN, ...args], {
          DATABASE_URL: `sqlite:${db}`,
        });
        assert.equal(r.code, 2);
        assert.equal(r.stdout, '');
        const lines = r.stderr.trimEnd().split('\n');
        assert.equal(lines.length, 1, r.stderr);
        assert.match(lines[0]!, /needs Node\.js 22\.14 or newer \(24 LTS recommended\); this is v/);
        assert.equal(existsSync(db), false);
      });

  // The same with a real old binary, where the machine has one (the system Node of CI's machine is 20).
  const old = ['/usr/bin/node', '/usr/local/bin/node'].find((p) => {
    if (!existsSync(p)) return false;
    const [major, minor] = execFileSync(p, ['--version'], { encoding: 'utf8' })
      .slice(1)
      .split('.')
      .map(Number);
    return major! < 22 || (major === 22 && minor! < 14);
  });
  it('a real older Node stops with the same line', {
    skip: old ? false : 'no Node older than 22.14 here',
  }, async () => {
    const r = await run(old!, [BIN, 'serve']);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /^plantstore: needs Node\.js 22\.14 or newer/);
  });
});

describe('bin/plantstore serve on this Node', () => {
  const execve = typeof (process as { execve?: unknown }).execve === 'function';
  const node24 = Number(process.versions.node.split('.')[0]) >= 24;
  const cmdline = (pid: number) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');

  // An opt-in V8 flag: asked for in the environment, on the server's command line in the same process.
  for (const [env, value, flag, what] of [
    ['PLANTSTORE_MEMORY_REDUCER', 'off', '--no-memory-reducer', 'runs the server with the reducer off'],
    [
      'PLANTSTORE_PRETENURING',
      'off',
      '--no-allocation-site-pretenuring',
      'turns V8’s allocation-site pretenuring off',
    ],
  ] as const) {
    it(`${env}=${value} ${what}, in the same process`, { skip: !execve && 'no execve' }, async () => {
      const s = await serve(['--database', `sqlite:${join(dir, 'flag.db')}`], { [env]: value });
      try {
        assert.ok(cmdline(s.child.pid!).includes(flag));
      } finally {
        assert.equal(await s.stop(), 0);
      }
    });
  }

  it('by default the server keeps V8’s memory reducer and, on SQLite, its pretenuring, caps the young generation and uses two malloc arenas', async () => {
    const s = await serve(['--database', `sqlite:${join(dir, 'flag.db')}`]);
    try {
      const args = cmdline(s.child.pid!);
      assert.ok(!args.includes('--no-memory-reducer'));
      // Without execve (Node 22.14) it runs with V8's defaults.
      assert.equal(args.includes('--max-semi-space-size=16'), execve);
      assert.ok(!args.some((a) => a.includes('allocation-site-pretenuring')));
      assert.ok(!args.some((a) => a.includes('heap-growing-percent')));
      const environ = readFileSync(`/proc/${s.child.pid}/environ`, 'utf8').split('\0');
      assert.equal(environ.includes('MALLOC_ARENA_MAX=2'), execve);
      // V8's memory saver mode only when asked for (it costs throughput).
      assert.ok(!args.includes('--memory-saver-mode'));
    } finally {
      assert.equal(await s.stop(), 0);
    }
  });

  // The launcher's warning about `text` came once on the server's stderr.
  const saidOnce = (s: { stderr(): string }, text: string) =>
    assert.equal(
      s
        .stderr()
        .split('\n')
        .filter((l) => l.includes(text)).length,
      1,
      s.stderr(),
    );

  // A launcher script that runs bin/plantstore, pinned to one core (as `taskset -c 0` or a cpuset of
  // one leaves it) when `pinned`, under a `node` given flags of its own when `nodeFlags`.
  const launcher = (name: string, nodeFlags = '', pinned = false): string => {
    const file = join(dir, name);
    const node = nodeFlags ? `'${process.execPath}' ${nodeFlags} ` : '';
    writeFileSync(file, `#!/bin/sh\nexec ${pinned ? 'taskset -c 0 ' : ''}${node}'${BIN}' "$@"\n`, {
      mode: 0o755,
    });
    return file;
  };

  // The heap growth the server's command line asks V8 for (null: none, V8's own).
  const growthOf = (pid: number): string | null => {
    const flags = cmdline(pid).filter((a) => a.startsWith('--heap-growing-percent'));
    assert.ok(flags.length <= 1, flags.join(' '));
    return flags[0]?.split('=')[1] ?? null;
  };

  // On PostgreSQL V8's pretenuring is off and its heap growth held at 100 % unless asked otherwise
  // (bin/plantstore says why); the store is named by --database, --database= or DATABASE_URL.
  const pgSkip = ENGINES.find((e) => e.name === 'postgres')?.skip;
  it('on PostgreSQL serve turns V8’s pretenuring off and holds its heap growth at 100 % unless V8’s memory saver mode is on; PLANTSTORE_PRETENURING=on and PLANTSTORE_HEAP_GROWTH=v8 keep V8’s', {
    skip: (!execve && 'no execve') || pgSkip || false,
  }, async () => {
    await withPgDatabase(async (url) => {
      for (const [args, env, off, growth] of [
        [['--database', url], {}, true, '100'],
        [[], { DATABASE_URL: url }, true, '100'],
        // Not a whole percent: the store decides.
        [['--database', url], { PLANTSTORE_HEAP_GROWTH: 'lots' }, true, '100'],
        // V8's memory saver mode holds the growth lower itself (Node 24 and newer).
        [['--database', url], { PLANTSTORE_MEMORY_SAVER: 'on' }, true, node24 ? null : '100'],
        [[`--database=${url}`], { PLANTSTORE_PRETENURING: 'on', PLANTSTORE_HEAP_GROWTH: 'v8' }, false, null],
        [['--database', `sqlite:${join(dir, 'flag.db')}`], { DATABASE_URL: url }, false, null],
      ] as const) {
        const s = await serve([...args], env);
        try {
          assert.equal(
            cmdline(s.child.pid!).includes('--no-allocation-site-pretenuring'),
            off,
            args.join(' '),
          );
          assert.equal(growthOf(s.child.pid!), growth, args.join(' '));
        } finally {
          assert.equal(await s.stop(), 0);
        }
      }
      // V8's memory saver mode asked for on node's own command line, or turned off there against
      // PLANTSTORE_MEMORY_SAVER=on; of two, the last is V8's (Node 24 and newer). The launcher adds
      // no --memory-saver-mode of its own beside the user's flags.
      if (node24) {
        for (const [flags, env, growth] of [
          ['--memory-saver-mode', {}, null],
          ['--memory_saver_mode', {}, null],
          ['--no-memory-saver-mode', { PLANTSTORE_MEMORY_SAVER: 'on' }, '100'],
          ['--nomemory-saver-mode', { PLANTSTORE_MEMORY_SAVER: 'on' }, '100'],
          ['--memory-saver-mode --no-memory-saver-mode', {}, '100'],
          ['--no-memory-saver-mode --memory-saver-mode', {}, null],
        ] as const) {
          const s = await serve(['--database', url], env, launcher('own-saver.sh', flags));
          try {
            const own = flags.split(' ').filter((f) => f === '--memory-saver-mode').length;
            const line = cmdline(s.child.pid!);
            assert.equal(line.filter((a) => a === '--memory-saver-mode').length, own, line.join(' '));
            assert.equal(growthOf(s.child.pid!), growth, flags);
          } finally {
            assert.equal(await s.stop(), 0);
          }
        }
      }
    });
  });

  it('PLANTSTORE_HEAP_GROWTH sets V8’s heap growth on either engine; a value it does not know is said once; the user’s own flag wins', {
    skip: !execve && 'no execve',
  }, async () => {
    const db = ['--database', `sqlite:${join(dir, 'flag.db')}`];
    const asked = await serve(db, { PLANTSTORE_HEAP_GROWTH: '80' });
    try {
      assert.equal(growthOf(asked.child.pid!), '80');
    } finally {
      assert.equal(await asked.stop(), 0);
    }
    // Not a whole percent: said once, and the store decides (SQLite: V8's own).
    const unknown = await serve(db, { PLANTSTORE_HEAP_GROWTH: '1.5' });
    try {
      assert.equal(growthOf(unknown.child.pid!), null);
    } finally {
      assert.equal(await unknown.stop(), 0);
    }
    saidOnce(unknown, 'PLANTSTORE_HEAP_GROWTH="1.5"');
    const own = await serve(
      db,
      { PLANTSTORE_HEAP_GROWTH: '80' },
      launcher('own-growth.sh', '--heap-growing-percent=30'),
    );
    try {
      assert.equal(growthOf(own.child.pid!), '30');
    } finally {
      assert.equal(await own.stop(), 0);
    }
  });

  it('PLANTSTORE_MEMORY_SAVER=on turns V8’s memory saver mode on (Node 24 and newer)', {
    skip: !execve && 'no execve',
  }, async () => {
    const s = await serve(['--database', `sqlite:${join(dir, 'flag.db')}`], {
      PLANTSTORE_MEMORY_SAVER: 'on',
    });
    try {
      assert.equal(cmdline(s.child.pid!).includes('--memory-saver-mode'), node24);
    } finally {
      assert.equal(await s.stop(), 0);
    }
  });

  describe('V8’s GC threads: on one core (its CPU affinity) scavenges and compaction stay on the main thread', () => {
    const BACKGROUND = ['--no-parallel-scavenge', '--no-parallel-compaction', '--no-parallel-pointer-update'];
    // Which of the three ways the server's command line asks V8 for.
    const gcOf = (pid: number): string => {
      const line = cmdline(pid);
      const single = line.includes('--single-threaded-gc');
      const background = BACKGROUND.filter((f) => line.includes(f)).length;
      assert.ok(background === 0 || background === BACKGROUND.length, line.join(' '));
      assert.ok(!(single && background > 0), line.join(' '));
      return single ? 'single' : background > 0 ? 'background' : 'parallel';
    };
    const gcDb = () => ['--database', `sqlite:${join(dir, 'gc.db')}`];
    const pinnedScript = (name: string, nodeFlags = ''): string => launcher(name, nodeFlags, true);

    it('unpinned, by the machine’s own parallelism; pinned, background unless PLANTSTORE_GC_THREADS says', {
      skip: !execve && 'no execve',
    }, async () => {
      // With more than one core, V8 keeps its GC helper threads.
      const many = availableParallelism() > 1;
      const plain = await serve(gcDb());
      try {
        assert.equal(gcOf(plain.child.pid!), many ? 'parallel' : 'background');
      } finally {
        assert.equal(await plain.stop(), 0);
      }
      const pinned = pinnedScript('pinned.sh');
      for (const [env, want] of [
        [{}, 'background'],
        [{ PLANTSTORE_GC_THREADS: 'parallel' }, 'parallel'],
        [{ PLANTSTORE_GC_THREADS: 'single' }, 'single'],
      ] as const) {
        const s = await serve(gcDb(), env, pinned);
        try {
          assert.equal(gcOf(s.child.pid!), want, JSON.stringify(env));
        } finally {
          assert.equal(await s.stop(), 0);
        }
      }
    });

    it('PLANTSTORE_GC_THREADS asks on any machine; a value it does not know is said once and the CPUs decide', {
      skip: !execve && 'no execve',
    }, async () => {
      for (const want of ['single', 'background'] as const) {
        const asked = await serve(gcDb(), { PLANTSTORE_GC_THREADS: want });
        try {
          assert.equal(gcOf(asked.child.pid!), want);
        } finally {
          assert.equal(await asked.stop(), 0);
        }
      }
      const s = await serve(gcDb(), { PLANTSTORE_GC_THREADS: 'one' }, pinnedScript('unknown.sh'));
      try {
        assert.equal(gcOf(s.child.pid!), 'background');
      } finally {
        assert.equal(await s.stop(), 0);
      }
      saidOnce(s, 'PLANTSTORE_GC_THREADS=one');
    });

    it('a GC flag of the user’s own on node’s command line wins over the choice (- or _ in its name)', {
      skip: !execve && 'no execve',
    }, async () => {
      for (const [flag, want] of [
        ['--single-threaded-gc', 'single'],
        ['--single_threaded_gc', 'parallel'],
      ] as const) {
        const s = await serve(gcDb(), {}, pinnedScript('own-gc.sh', flag));
        try {
          const line = cmdline(s.child.pid!);
          assert.ok(line.includes(flag), line.join(' '));
          // Spelt with underscores, the flag is still the user's: nothing of the launcher's is added.
          assert.equal(gcOf(s.child.pid!), want, flag);
        } finally {
          assert.equal(await s.stop(), 0);
        }
      }
    });
  });

  describe('V8’s worker threads: on one core they yield it to the event loop (nice 10)', () => {
    // Each thread of the process: its name and its nice value (/proc/PID/task/TID/stat, field 19;
    // the name in parentheses may hold spaces, so the fields are counted after its closing one).
    const threads = (pid: number) =>
      readdirSync(`/proc/${pid}/task`).map((tid) => {
        const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
        const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
        return { name, nice: Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]) };
      });
    // The nice values of V8's worker threads (Node 24 names them V8Worker; Node 22 names no thread,
    // so none is found and none is niced) and of every other thread.
    const niceOf = (pid: number) => {
      const all = threads(pid);
      const v8 = all.filter((t) => t.name === 'V8Worker').map((t) => t.nice);
      if (node24) assert.ok(v8.length > 0, JSON.stringify(all));
      const others = all.filter((t) => t.name !== 'V8Worker');
      assert.ok(
        others.some((t) => t.name === 'MainThread' || t.name === 'node'),
        JSON.stringify(all),
      );
      return { v8: [...new Set(v8)], others: [...new Set(others.map((t) => t.nice))] };
    };
    const db = () => ['--database', `sqlite:${join(dir, 'nice.db')}`];
    const many = availableParallelism() > 1;

    it('pinned: V8’s workers at nice 10 and every other thread at 0; PLANTSTORE_GC_NICE sets it (0: none); unpinned none', async () => {
      const pinned = launcher('nice-pinned.sh', '', true);
      for (const [env, script, want] of [
        [{}, pinned, 10],
        [{ PLANTSTORE_GC_NICE: '0' }, pinned, 0],
        [{ PLANTSTORE_GC_NICE: '19' }, pinned, 19],
        [{}, undefined, many ? 0 : 10],
        [{ PLANTSTORE_GC_NICE: '5' }, undefined, 5],
      ] as const) {
        const s = await serve(db(), env, script);
        try {
          const n = niceOf(s.child.pid!);
          assert.deepEqual(n.v8, node24 ? [want] : [], JSON.stringify(env));
          assert.deepEqual(n.others, [0], JSON.stringify(env));
        } finally {
          assert.equal(await s.stop(), 0);
        }
      }
    });

    it('a PLANTSTORE_GC_NICE that is no nice value 0-19 is said once and the CPUs decide', async () => {
      const s = await serve(db(), { PLANTSTORE_GC_NICE: '-5' }, launcher('nice-unknown.sh', '', true));
      try {
        assert.deepEqual(niceOf(s.child.pid!).v8, node24 ? [10] : []);
      } finally {
        assert.equal(await s.stop(), 0);
      }
      saidOnce(s, 'PLANTSTORE_GC_NICE="-5"');
    });
  });

  it('a --max-semi-space-size of the user’s own in NODE_OPTIONS wins', async () => {
    const s = await serve(['--database', `sqlite:${join(dir, 'flag.db')}`], {
      NODE_OPTIONS: '--max-semi-space-size=4',
    });
    try {
      assert.ok(!cmdline(s.child.pid!).some((a) => a.startsWith('--max-semi-space-size')));
    } finally {
      assert.equal(await s.stop(), 0);
    }
  });

  // Node >= 24.19 aborted in better-sqlite3 12's statement destructor when a young-generation GC
  // collected a statement: this is the reproduction, run in a process of its own.
  it('survives 100,000 prepared statements left to the garbage collector', async () => {
    const script = `
      const Database = require('better-sqlite3');
      const db = new Database(':memory:');
      let junk = [];
      for (let i = 0; i < 1e5; i++) { db.prepare('SELECT 1'); junk.push({ i }); if (junk.length > 1000) junk = []; }
      console.log('done');`;
    const r = await run(process.execPath, ['-e', script]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout.trim(), 'done');
  });

  // A preload plants the failure: a signal the test sends makes the server throw, or reject a
  // promise nobody handles, on its own event loop.
  for (const [what, signal, planted] of [
    ['uncaught exception', 'SIGUSR2', "throw new Error('planted failure')"],
    ['unhandled rejection', 'SIGHUP', "Promise.reject(new Error('planted failure'))"],
  ] as const)
    it(`an ${what} is logged as one JSON line, then the server closes gracefully and exits 1`, async () => {
      const preload = join(dir, `plant-${signal}.mjs`);
      writeFileSync(preload, `process.on('${signal}', () => { ${planted}; });\n`);
      const s = await serve(['--database', `sqlite:${join(dir, 'crash.db')}`], {
        NODE_OPTIONS: `--import=${preload}`,
      });
      s.child.kill(signal);
      const code = await exitOf(s.child, `serve after an ${what}`, 10_000);
      await s.stop();
      assert.equal(code, 1);
      const lines = s.logs.map(
        (l) => JSON.parse(l) as { level: number; msg: string; err?: { message: string } },
      );
      const fatal = lines.filter((l) => l.level === 60);
      assert.equal(fatal.length, 1, s.logs.join('\n'));
      assert.equal(fatal[0]!.msg, `${what}: shutting down`);
      assert.equal(fatal[0]!.err?.message, 'planted failure');
      assert.ok(
        lines.some((l) => l.msg === 'shut down cleanly'),
        'closed gracefully',
      );
    });

  // runtime.long.test.ts does the same 20 times.
  it('starts, serves and stops cleanly 3 times in a row', async () => {
    await restarts(join(dir, 'restarts.db'), 3);
  });
});
