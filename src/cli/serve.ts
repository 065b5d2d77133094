import type { Command } from 'commander';
import { CONFIG_KEYS, configFrom, withConfig } from './options.js';

/** `plantstore serve`: the HTTP service, with every configuration field as an option. */
export function serveCommand(program: Command): void {
  const serve = withConfig(
    program.command('serve').description('run the HTTP service (migrates the store first)'),
    CONFIG_KEYS,
  );
  serve.action(async (opts: Record<string, unknown>) => {
    // The server's modules (most of a second to load) only for serve, not for every command.
    const { serveAll } = await import('../cluster.js');
    await serveAll(configFrom(opts));
  });
}
