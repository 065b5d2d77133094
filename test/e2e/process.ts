import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';

export const BIN = fileURLToPath(new URL('../../bin/plantstore', import.meta.url));

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `bin/plantstore ARGS` as a user would and collects its output. */
export function cli(args: string[], env: Record<string, string> = {}): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile(BIN, args, { env: { ...process.env, ...env } }, (err, stdout, stderr) => {
      const code = err ? ((err as { code?: number }).code ?? 1) : 0;
      resolve({ code: typeof code === 'number' ? code : 1, stdout, stderr });
    });
  });
}

export interface Server {
  child: ChildProcess;
  url: string;
  /** Every stdout line so far (JSON logs). */
  logs: string[];
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** Starts `bin/plantstore serve --port 0` and resolves once it listens. */
export async function serve(args: string[], env: Record<string, string> = {}): Promise<Server> {
  const child = spawn(BIN, ['serve', '--port', '0', ...args], {
    env: { ...process.env, LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const logs: string[] = [];
  let stderr = '';
  child.stderr!.on('data', (d) => {
    stderr += d;
  });
  const url = await new Promise<string>((resolve, reject) => {
    // Only until it listens: a timer left running killed a server whose tests took over 20 s on a
    // loaded CI machine, mid-test.
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(
        new Error(`serve did not report listening within 20 s (LOG_LEVEL must be info or lower): ${stderr}`),
      );
    }, 20_000);
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
    async stop(signal = 'SIGTERM') {
      // Already gone (exited, or killed by a signal): nothing to wait for.
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      const exited = once(child, 'exit');
      child.kill(signal);
      // A server that does not stop within 15 s is killed, so a failing test never leaves one behind.
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      const [code] = await exited;
      clearTimeout(timer);
      return code as number | null;
    },
  };
}
