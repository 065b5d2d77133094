import { type Command, Option } from 'commander';
import { type Config, FIELDS, loadConfig } from '../config.js';
import type { Runtime } from '../runtime.js';

export const CONFIG_KEYS = Object.keys(FIELDS) as (keyof Config)[];

/** Adds `--database` to a command that opens the store. */
export function withDatabase(cmd: Command): Command {
  return cmd.addOption(
    new Option(`${FIELDS.database.flag} <url>`, `${FIELDS.database.doc} (env ${FIELDS.database.env})`),
  );
}

/** Adds the configuration fields `keys` as options of `cmd` (a boolean one also as a hidden `--no-…`). */
export function withConfig(cmd: Command, keys: readonly (keyof Config)[]): Command {
  for (const k of keys) {
    const f = FIELDS[k];
    const value = typeof f.default === 'boolean' ? '[value]' : '<value>';
    cmd.addOption(new Option(`${f.flag} ${value}`, `${f.doc} (env ${f.env}, default ${String(f.default)})`));
    if (typeof f.default === 'boolean') {
      cmd.addOption(new Option(`--no-${f.flag.slice(2)}`, `the same as ${f.flag} false`).hideHelp());
    }
  }
  return cmd;
}

// Commander's camelCase option names match Config's keys.
export function configFrom(opts: Record<string, unknown>): Config {
  const flags: Partial<Record<keyof Config, string>> = {};
  for (const k of CONFIG_KEYS) {
    const v = opts[k];
    // A switch given without a value (`--jwt-allow-untyped`) means true; `--no-console`, false.
    if (typeof v === 'string' || typeof v === 'boolean') flags[k] = String(v);
  }
  return loadConfig(process.env, flags);
}

/** Runs `fn` on the store the options name (migrated first), and closes it. */
export async function withRuntime<T>(
  opts: Record<string, unknown>,
  fn: (runtime: Runtime) => Promise<T>,
): Promise<T> {
  const { Runtime } = await import('../runtime.js');
  const runtime = await Runtime.open(configFrom(opts), 'command');
  try {
    return await fn(runtime);
  } finally {
    await runtime.close();
  }
}
