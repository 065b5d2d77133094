import { userInfo } from 'node:os';
import type { Command } from 'commander';
import pino from 'pino';
import { parseDuration } from '../durations.js';
import { TokenNotFoundError } from '../errors.js';
import type { Operator, TokenService } from '../identity/token-service.js';
import { isValidUser, tokenStatus } from '../identity/tokens.js';
import { DEFAULT_SCOPES, isScope, SCOPES, type Scope, TokenName } from '../schemas/token.js';
import { visibleProblem } from '../text-rules.js';
import { UsageError } from '../usage-error.js';
import { configFrom, withDatabase, withRuntime } from './options.js';

// The API's rule for a token's name (POST /tokens), so that the CLI makes no token it would refuse;
// compiled when a name is checked (typebox's compiler takes a quarter of a second to load).
async function validName(name: string): Promise<boolean> {
  const { Compile } = await import('typebox/compile');
  // The schema's pattern, and the visible character its keyword asks Ajv for.
  return Compile(TokenName).Check(name) && visibleProblem(name) === null;
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
  const { TokenService } = await import('../identity/token-service.js');
  return withRuntime(opts, ({ store }) =>
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

/** `plantstore token create|list|revoke`: the operator's tokens, straight on the store. */
export function tokenCommands(program: Command): void {
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
    if (opts.name !== undefined && !(await validName(opts.name))) {
      throw new UsageError(
        '--name must be 1 to 200 characters with a visible character (not only spaces or invisible ones), without control characters',
      );
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
}
