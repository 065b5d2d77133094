import assert from 'node:assert/strict';
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { after } from 'node:test';
import { fileURLToPath } from 'node:url';

export const BIN = fileURLToPath(new URL('../../bin/plantstore', import.meta.url));

// Every child this file's tests start. Whatever a test leaves running (it failed before its own
// cleanup, or a `before` failed halfway) is killed once the file's tests are done, so a failing
// test never keeps the run waiting on a live child.
const running = new Set<ChildProcess>();
after(() => {
  for (const child of running) child.kill('SIGKILL');
});
function track<C extends ChildProcess>(child: C): C {
  running.add(child);
  child.once('exit', () => running.delete(child));
  return child;
}

/**
 * Starts `bin/plantstore ARGS` with piped output; it is killed after the file's tests if still running.
 * `bin` runs another tree's executable instead (an older version's, test/e2e/old-version.ts).
 */
export function spawnBin(args: string[], env: Record<string, string> = {}, bin = BIN): ChildProcess {
  return track(spawn(bin, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] }));
}

/** Resolves with the child's exit code once it has exited; rejects, naming `what`, after `ms`. */
export async function exitOf(child: ChildProcess, what: string, ms = 15_000): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), ms);
  try {
    const [code] = await once(child, 'exit', { signal: ac.signal });
    return code as number | null;
  } catch (err) {
    if (ac.signal.aborted) throw new Error(`${what} did not exit within ${ms} ms`);
    throw err;
  } finally {
    clearTimeout(timer);
  }
}

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

const CLI_TIMEOUT_MS = 60_000;

/** Runs `bin/plantstore ARGS` (or `bin`) as a user would and collects its output (killed after 60 s). */
export function cli(args: string[], env: Record<string, string> = {}, bin = BIN): Promise<CliResult> {
  return new Promise((resolve) => {
    const child = execFile(
      bin,
      args,
      { env: { ...process.env, ...env }, timeout: CLI_TIMEOUT_MS, killSignal: 'SIGKILL' },
      (err, stdout, stderr) => {
        const e = err as { code?: number; killed?: boolean } | null;
        if (e?.killed) stderr += `\n(test: plantstore ${args.join(' ')} killed after ${CLI_TIMEOUT_MS} ms)`;
        const code = e ? (e.code ?? 1) : 0;
        resolve({ code: typeof code === 'number' ? code : 1, stdout, stderr });
      },
    );
    track(child);
  });
}

export interface Server {
  child: ChildProcess;
  url: string;
  /** Every stdout line so far (JSON logs). */
  logs: string[];
  /** Stops it (SIGKILL after 15 s) and resolves once it has exited and its output has all been read. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
  /** Everything it wrote on stderr so far (a crash's stack, say). */
  stderr(): string;
}

/** How long `serve` may take to listen (under node:test's 90 s for a whole test). */
const LISTEN_MS = 60_000;

/** Starts `bin/plantstore serve --port 0` (or `bin`'s) and resolves once it listens. */
export async function serve(args: string[], env: Record<string, string> = {}, bin = BIN): Promise<Server> {
  const child = spawnBin(['serve', '--port', '0', ...args], { LOG_LEVEL: 'info', ...env }, bin);
  const logs: string[] = [];
  let stderr = '';
  child.stderr!.on('data', (d) => {
    stderr += d;
  });
  // 'close' comes after 'exit' and after the last of the output was read (from every process that
  // shares the pipe: `--workers` children write to it too).
  const closed = new Promise<void>((resolve) => child.once('close', () => resolve()));
  const url = await new Promise<string>((resolve, reject) => {
    // Only until it listens: a timer left running killed a server whose tests took over 20 s on a
    // loaded CI machine, mid-test. The bound is the start of a machine many times slower than usual
    // (27 s seen, against about 2 s), not of a usual one: a slow start makes a run slower, not red.
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(
        new Error(
          `serve did not report listening within ${LISTEN_MS / 1000} s (LOG_LEVEL must be info or lower): ${stderr}`,
        ),
      );
    }, LISTEN_MS);
    let buf = '';
    child.stdout!.on('data', (d: Buffer) => {
      buf += d.toString();
      let i = buf.indexOf('\n');
      while (i >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        logs.push(line);
        const m = /Server listening at (http:\/\/127\.0\.0\.1:[0-9]+)/.exec(line);
        if (m) {
          clearTimeout(timer);
          resolve(m[1]!);
        }
        i = buf.indexOf('\n');
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`serve exited ${code} before listening: ${stderr}`));
    });
  });
  return {
    child,
    url,
    logs,
    stderr: () => stderr,
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) {
        const exited = once(child, 'exit');
        child.kill(signal);
        // A server that does not stop within 15 s is killed, so a failing test never leaves one behind.
        const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
        await exited;
        clearTimeout(timer);
      }
      // Its output is read to the end, so `logs` holds every line it wrote; an orphaned
      // grandchild holding the pipe open is not waited for beyond 5 s.
      const drained = setTimeout(() => {
        child.stdout?.destroy();
        child.stderr?.destroy();
      }, 5_000);
      await closed;
      clearTimeout(drained);
      return child.exitCode;
    },
  };
}

/** Starts `serve` on the SQLite file `db` `times` times in a row; each must be ready and stop with 0. */
export async function restarts(db: string, times: number): Promise<void> {
  for (let i = 0; i < times; i++) {
    const s = await serve(['--database', `sqlite:${db}`]);
    const health = await fetch(`${s.url}/readyz`);
    assert.equal(health.status, 200);
    assert.equal(await s.stop(), 0, `start ${i + 1} did not stop cleanly`);
  }
}
