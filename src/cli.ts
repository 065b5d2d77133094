import { existsSync } from 'node:fs';
import { userInfo } from 'node:os';
import { Command, CommanderError, Option } from 'commander';
import pino from 'pino';
import { registerClientCommands } from './client/commands.js';
import { PlantStoreError } from './client/index.js';
import { serveAll } from './cluster.js';
import { type Config, ConfigError, FIELDS, loadConfig } from './config.js';
import { parseDuration } from './durations.js';
import { TokenNotFoundError } from './errors.js';
import { type Operator, TokenService } from './identity/token-service.js';
import { isValidUser, tokenStatus } from './identity/tokens.js';
import { Runtime } from './runtime.js';
import { DEFAULT_SCOPES, isScope, SCOPES, type Scope } from './schemas/token.js';
import { sqlitePath } from './store/index.js';
import { UsageError } from './usage-error.js';

const CONFIG_KEYS = Object.keys(FIELDS) as (keyof Config)[];

function withDatabase(cmd: Command): Command {
  return cmd.addOption(
    new Option(`${FIELDS.database.flag} <url>`, `${FIELDS.database.doc} (env ${FIELDS.database.env})`),
  );
}

// Commander's camelCase option names match Config's keys.
function configFrom(opts: Record<string, unknown>): Config {
  const flags: Partial<Record<keyof Config, string>> = {};
  for (const k of CONFIG_KEYS) {
    const v = opts[k];
    // A switch given without a value (`--jwt-allow-untyped`) means true; `--no-console`, false.
    if (typeof v === 'string' || typeof v === 'boolean') flags[k] = String(v);
  }
  return loadConfig(process.env, flags);
}

async function withStore<T>(opts: Record<string, unknown>, fn: (runtime: Runtime) => Promise<T>): Promise<T> {
  const runtime = await Runtime.open(configFrom(opts), 'command');
  try {
    return await fn(runtime);
  } finally {
    await runtime.close();
  }
}

// Whoever runs `plantstore token …` has the database's credentials: an operator, who may make any
// token. The audit line (who, for whom, which scopes, the id; never the secret) goes to stderr as
// JSON, as the service logs it.
async function withTokens<T>(
  opts: Record<string, unknown>,
  fn: (tokens: TokenService, me: Operator) => Promise<T>,
) {
  const config = configFrom(opts);
  const log = pino(
    { level: config.logLevel, base: { command: 'token' } },
    pino.destination({ fd: 2, sync: true }),
  );
  let account = 'unknown';
  try {
    account = userInfo().username;
  } catch {
    // No entry for this uid (a container): the audit line says unknown.
  }
  return withStore(opts, ({ store }) =>
    fn(new TokenService(store, { audit: (entry) => log.info({ audit: entry }, `token ${entry.action}`) }), {
      kind: 'operator',
      account,
    }),
  );
}

function parseScopes(text: string | undefined): Scope[] {
  if (text === undefined) return DEFAULT_SCOPES;
  const scopes = text.split(/[,\s]+/).filter(Boolean);
  const bad = scopes.find((s) => !isScope(s));
  if (scopes.length === 0 || bad !== undefined) {
    throw new UsageError(
      `--scopes must be a comma-separated list of ${SCOPES.join(', ')}${bad ? `; got ${JSON.stringify(bad)}` : ''}`,
    );
  }
  return scopes as Scope[];
}

const iso = (d: Date | null) => (d ? d.toISOString() : 'never');

/** Adds the configuration fields `keys` as options of `cmd` (a boolean one also as a hidden `--no-…`). */
function withConfig(cmd: Command, keys: readonly (keyof Config)[]): Command {
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

export function buildCli(): Command {
  const program = new Command('plantstore')
    .description('A Plant Store HTTP service on SQLite or PostgreSQL')
    .showSuggestionAfterError(false)
    .exitOverride()
    .configureOutput({ outputError: () => {} });

  const serve = withConfig(
    program.command('serve').description('run the HTTP service (migrates the store first)'),
    CONFIG_KEYS,
  );
  serve.action(async (opts: Record<string, unknown>) => {
    await serveAll(configFrom(opts));
  });

  const deliver = withConfig(
    program
      .command('deliver')
      .description(
        'send webhook deliveries, and nothing else, until SIGTERM (beside `serve --no-webhook-delivery`; any number may run)',
      ),
    ['database', 'durability', 'logLevel', 'webhookAllowPrivate', 'webhookTimeout', 'webhookRetrySchedule'],
  );
  deliver.action(async (opts: Record<string, unknown>) => {
    await deliverUntilStopped(configFrom(opts));
  });

  withDatabase(program.command('migrate').description('bring the store schema up to date')).action(
    async (opts) => {
      const applied = await withStore(opts, async (runtime) => runtime.applied);
      process.stderr.write(applied.length ? `applied ${applied.join(', ')}\n` : 'schema is up to date\n');
    },
  );

  withDatabase(
    program
      .command('backup')
      .description(
        'write an online, consistent copy of a SQLite store to FILE (the service may keep running)',
      )
      .argument('<file>', 'where to write the copy; must not exist yet'),
  ).action(async (file: string, opts) => {
    if (existsSync(file)) throw new UsageError(`${file} exists already; choose a new file`);
    const { database } = configFrom(opts);
    if (!database.startsWith('sqlite:')) {
      throw new UsageError('backup copies SQLite stores; for PostgreSQL use pg_dump (see the README)');
    }
    if (!existsSync(sqlitePath(database)))
      throw new UsageError(`there is no store at ${sqlitePath(database)}`);
    await withStore(opts, async ({ store }) => {
      await store.backup!(file);
    });
    process.stderr.write(`backed up to ${file}\n`);
  });

  const token = program.command('token').description('create, list and revoke bearer tokens');
  withDatabase(
    token
      .command('create')
      .description('create a token; prints it alone on stdout (it is shown only once)')
      .requiredOption('--user <user>', 'the user the token acts as')
      .option(
        '--scopes <list>',
        `comma-separated: ${SCOPES.join(', ')} (default ${DEFAULT_SCOPES.join(',')})`,
      )
      .option('--expires-in <duration>', 'lifetime: a whole number and s, m, h or d (default: never expires)')
      .option('--name <name>', 'a label to recognise the token by')
      .option('--json', 'print {id, token, user, scopes, expiresAt} as JSON'),
  ).action(async (opts) => {
    if (!isValidUser(opts.user))
      throw new UsageError('--user must be 1 to 200 printable characters without spaces');
    const scopes = parseScopes(opts.scopes);
    const expiresInMs = opts.expiresIn === undefined ? null : parseDuration(opts.expiresIn);
    if (expiresInMs === null && opts.expiresIn !== undefined) {
      throw new UsageError(
        `--expires-in must be a whole number and s, m, h or d (like 30d), got ${JSON.stringify(opts.expiresIn)}`,
      );
    }
    if (opts.name !== undefined && (opts.name.length < 1 || opts.name.length > 200)) {
      throw new UsageError('--name must be 1 to 200 characters');
    }
    const { record, secret } = await withTokens(opts, (tokens, me) =>
      tokens.create(me, { user: opts.user, scopes, name: opts.name ?? null, expiresInMs }),
    );
    if (opts.json) {
      const out = {
        id: record.id,
        token: secret,
        user: record.user,
        scopes: record.scopes,
        expiresAt: record.expiresAt?.toISOString() ?? null,
      };
      process.stdout.write(`${JSON.stringify(out)}\n`);
    } else {
      process.stdout.write(`${secret}\n`);
      process.stderr.write(
        `created token ${record.id} for user ${record.user} (scopes ${record.scopes.join(',')}; expires ${iso(record.expiresAt)})\n`,
      );
    }
  });

  withDatabase(
    token
      .command('list')
      .description(
        'one line per token, newest first: id, user, scopes, created, expires, status, last used (never the secret)',
      )
      .option('--user <user>', 'only this user’s tokens')
      .option('--json', 'print a JSON array'),
  ).action(async (opts) => {
    const list = await withTokens(opts, (tokens, me) => tokens.all(me, opts.user));
    const rows = list.map((t) => ({
      id: t.id,
      user: t.user,
      name: t.name,
      scopes: t.scopes,
      createdAt: t.createdAt.toISOString(),
      expiresAt: t.expiresAt?.toISOString() ?? null,
      status: tokenStatus(t),
      lastUsedAt: t.lastUsedAt?.toISOString() ?? null,
    }));
    if (opts.json) {
      process.stdout.write(`${JSON.stringify(rows)}\n`);
      return;
    }
    for (const r of rows) {
      process.stdout.write(
        `${[r.id, r.user, r.scopes.join(','), r.createdAt, r.expiresAt ?? 'never', r.status, r.lastUsedAt ?? 'never used'].join('\t')}\n`,
      );
    }
  });

  withDatabase(
    token.command('revoke').description('revoke a token by its id').argument('<id>', 'token id (tok_…)'),
  ).action(async (id: string, opts) => {
    const outcome = await withTokens(opts, async (tokens, me) => {
      try {
        return (await tokens.revoke(me, id)) ? 'revoked' : 'already';
      } catch (err) {
        if (err instanceof TokenNotFoundError) return 'unknown';
        throw err;
      }
    });
    if (outcome === 'unknown') {
      process.stderr.write(`plantstore: no token with id ${id}\n`);
      process.exitCode = 1;
    } else {
      process.stderr.write(outcome === 'revoked' ? `revoked ${id}\n` : `${id} was already revoked\n`);
    }
  });
  registerClientCommands(program);
  return program;
}

// Another process's commits do not wake this one: it looks for due deliveries this often when idle
// (a claim that finds nothing writes nothing), and at once again whenever a slot frees.
const DELIVER_POLL_MS = 100;

/** `plantstore deliver`: a dispatcher of its own (no HTTP), on the store the service writes to. */
async function deliverUntilStopped(config: Config): Promise<void> {
  const log = pino(
    { level: config.logLevel, base: { command: 'deliver' } },
    pino.destination({ fd: 2, sync: true }),
  );
  const runtime = await Runtime.open(config, 'deliver', {
    warn: (obj, msg) => log.warn(obj, msg),
    dispatcher: { pollMs: DELIVER_POLL_MS },
  });
  // A commit of this process's own (an attempt recorded, a retry due) may have made more work.
  runtime.deliver();
  log.info({}, 'delivering webhooks');
  // The dispatcher's timers do not hold a process open (a serving one is held by its listener).
  const alive = setInterval(() => {}, 3_600_000);
  await new Promise<void>((resolve) => {
    const stop = () => resolve();
    process.once('SIGTERM', stop);
    process.once('SIGINT', stop);
  });
  clearInterval(alive);
  // What is in flight is sent and recorded (each bounded by the timeout); what was claimed and not
  // sent is claimed again once its lease runs out.
  await runtime.close();
  log.info({}, 'stopped');
}

// Each run of whitespace that holds a line break becomes one space. /\s*\n\s*/ said the same and
// took time quadratic in a long run of spaces (every start in the run scanned the rest of it).
const oneLine = (text: string) => text.replace(/\s+/g, (run) => (run.includes('\n') ? ' ' : run));

export async function main(argv: string[]): Promise<void> {
  try {
    await buildCli().parseAsync(argv);
  } catch (err) {
    if (err instanceof CommanderError) {
      if (err.exitCode === 0) return; // --help, --version
      process.stderr.write(`plantstore: ${oneLine(err.message.replace(/^error: /, ''))}\n`);
      process.exit(2);
    }
    if (err instanceof PlantStoreError) {
      // 3: the service could not be reached; 1: it refused, with its own message.
      const refused = err.status === 0 ? '' : ` (${err.code}, HTTP ${err.status})`;
      process.stderr.write(`plantstore: ${err.message}${refused}\n`);
      process.exit(err.status === 0 ? 3 : 1);
    }
    if (err instanceof UsageError || err instanceof ConfigError) {
      process.stderr.write(`plantstore: ${err.message}\n`);
      process.exit(2);
    }
    process.stderr.write(`plantstore: ${(err as Error).message}\n`);
    process.exit(1);
  }
}

await main(process.argv);
