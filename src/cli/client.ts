import type { Command } from 'commander';
import { PlantStore } from '../client/index.js';
import { UsageError } from '../usage-error.js';

// What the client commands of CONTRACT.md section 7 share (`plants …`, `gardens …`, `events tail`):
// they speak HTTP to a running service through the project's own client. Exit status: 0 success,
// 1 the service refused (its message on stderr), 2 bad usage, 3 the service could not be reached.

export interface ClientOpts {
  url?: string;
  token?: string;
  json?: boolean;
}

/** The client for the service and token the options (or PLANTSTORE_URL, PLANTSTORE_TOKEN) name. */
export function connect(opts: ClientOpts): PlantStore {
  const url = opts.url ?? process.env.PLANTSTORE_URL ?? 'http://127.0.0.1:3000';
  const token = opts.token ?? process.env.PLANTSTORE_TOKEN;
  if (!token) throw new UsageError('a token is needed: --token or PLANTSTORE_TOKEN');
  if (!URL.canParse(url) || !/^https?:$/.test(new URL(url).protocol)) {
    // Not repeated: a URL may carry a user name and password.
    throw new UsageError('--url (PLANTSTORE_URL) must be an http(s) URL like http://127.0.0.1:3000');
  }
  return new PlantStore({ url, token });
}

/** Adds `--url`, `--token` and `--json` to a client command. */
export function withClient(cmd: Command): Command {
  return cmd
    .option('--url <url>', 'the service (env PLANTSTORE_URL, default http://127.0.0.1:3000)')
    .option('--token <token>', 'bearer token (env PLANTSTORE_TOKEN)')
    .option('--json', 'print JSON instead of lines');
}

// A garden id is opaque to the client: any text but an empty one (the service says whether it is one).
export function gardenId(text: string, what = 'a garden id'): string {
  if (text === '') throw new UsageError(`${what} must not be empty`);
  return text;
}

export const out = (text: string) => process.stdout.write(`${text}\n`);
