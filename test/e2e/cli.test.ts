import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { POSTGRES_MIGRATIONS } from '../../src/store/postgres/migrations.js';
import { SQLITE_MIGRATIONS } from '../../src/store/sqlite/migrations.js';
import { ENGINES, recordMigration } from '../helpers/engines.js';
import { until } from '../helpers/wait.js';
import { cli, serve } from './process.js';

const PACKAGE = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
  version: string;
};

interface Audit {
  action: 'created' | 'revoked';
  tokenId: string;
  user: string;
  scopes: string[];
  by: { kind: string; account?: string };
}

/** The audit entries among stderr's lines (each a JSON log line with `audit`). */
function audits(stderr: string): Audit[] {
  return stderr
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => (JSON.parse(l) as { audit?: Audit }).audit)
    .filter((a): a is Audit => a !== undefined);
}

/** Asserts stderr carries exactly one audit line, of `action` for `tokenId` by an operator; returns it. */
function oneAudit(stderr: string, action: Audit['action'], tokenId: string): Audit {
  const found = audits(stderr);
  assert.equal(found.length, 1, `one audit line: ${stderr}`);
  const [a] = found as [Audit];
  assert.deepEqual([a.action, a.tokenId, a.by.kind], [action, tokenId, 'operator'], stderr);
  assert.equal(typeof a.by.account, 'string');
  assert.ok(!/pst_/.test(stderr), 'no secret on stderr');
  return a;
}

for (const engine of ENGINES)
  describe(`bin/plantstore token and migrate on ${engine.name}`, { skip: engine.skip }, () => {
    // The audit lines are info-level JSON log lines: at the default level, whatever the caller's shell says.
    const env = { DATABASE_URL: '', LOG_LEVEL: 'info' };
    let db = '';
    let drop = async () => {};
    before(async () => {
      const d = await engine.database();
      db = d.url;
      env.DATABASE_URL = d.url;
      drop = d.drop;
    });
    after(() => drop());

    it('migrate --dry-run lists every pending migration with whether it is safe while serving, and applies none', async () => {
      const known = engine.name === 'sqlite' ? SQLITE_MIGRATIONS : POSTGRES_MIGRATIONS;
      for (let run = 0; run < 2; run++) {
        const r = await cli(['migrate', '--dry-run'], env);
        assert.equal(r.code, 0, r.stderr);
        const lines = r.stdout.trimEnd().split('\n');
        assert.deepEqual(
          lines.map((l) => l.split('\t')[0]),
          known.map((m) => m.name),
        );
        for (const [i, m] of known.entries())
          assert.equal(
            lines[i]!.split('\t')[1],
            m.unsafeWhileServing
              ? `NOT safe while the previous release serves: ${m.unsafeWhileServing}`
              : 'safe while the previous release serves',
          );
        assert.match(
          r.stderr,
          new RegExp(`^${known.length} pending \\(schema at version 0, .*dry run: none applied\n$`),
        );
      }
      // A SQLite file is not even made by a dry run.
      if (engine.name === 'sqlite') assert.equal(existsSync(db.slice('sqlite:'.length)), false);
      const json = await cli(['migrate', '--dry-run', '--json'], env);
      const last = JSON.parse(json.stdout.trimEnd().split('\n').at(-1)!);
      const newest = known.at(-1)!;
      assert.deepEqual(last, {
        version: newest.version,
        name: newest.name,
        safeWhileServing: !newest.unsafeWhileServing,
        ...(newest.unsafeWhileServing ? { reason: newest.unsafeWhileServing } : {}),
      });
    });

    it('migrate creates the store and is idempotent; a dry run then finds nothing pending', async () => {
      const first = await cli(['migrate'], env);
      assert.equal(first.code, 0, first.stderr);
      assert.match(first.stderr, /applied 0001_init/);
      const second = await cli(['migrate', '--database', db]);
      assert.equal(second.code, 0);
      assert.match(second.stderr, /up to date/);
      const dry = await cli(['migrate', '--dry-run'], env);
      assert.equal(dry.code, 0);
      assert.equal(dry.stdout, '');
      assert.match(dry.stderr, /^schema is up to date \(version \d+\); nothing to apply\n$/);
    });

    it('token create prints the token alone on stdout and details on stderr', async () => {
      const r = await cli(['token', 'create', '--user', 'alice', '--name', 'laptop'], env);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /^pst_[A-Za-z0-9_-]{43}\n$/);
      assert.match(r.stderr, /alice/);
      assert.match(r.stderr, /plants:read,plants:write/);
      assert.ok(!r.stderr.includes(r.stdout.trim()), 'the secret is printed once');
      const id = /created token (tok_\S+) /.exec(r.stderr)?.[1];
      assert.ok(id, r.stderr);
      const a = oneAudit(r.stderr, 'created', id);
      assert.deepEqual([a.user, a.scopes], ['alice', ['plants:read', 'plants:write']]);
    });

    it('token create --json prints {id, token, user, scopes, expiresAt}', async () => {
      const before = Date.now();
      const r = await cli(
        [
          'token',
          'create',
          '--user',
          'bob',
          '--scopes',
          'plants:read,plants:admin',
          '--expires-in',
          '2h',
          '--json',
        ],
        env,
      );
      assert.equal(r.code, 0, r.stderr);
      const out = JSON.parse(r.stdout);
      assert.deepEqual(Object.keys(out).sort(), ['expiresAt', 'id', 'scopes', 'token', 'user']);
      assert.equal(out.user, 'bob');
      assert.deepEqual(out.scopes, ['plants:read', 'plants:admin']);
      assert.match(out.token, /^pst_/);
      const expires = Date.parse(out.expiresAt) - before;
      assert.ok(expires > 7_190_000 && expires < 7_300_000, String(expires));
      oneAudit(r.stderr, 'created', out.id);
    });

    it('token list: one line of 7 fields per token, newest first, never a secret; revoke marks it revoked', async () => {
      const made: string[] = [];
      for (const name of ['first', 'second', 'third']) {
        made.push(
          JSON.parse(
            (await cli(['token', 'create', '--user', 'carol', '--name', name, '--json'], env)).stdout,
          ).id,
        );
      }
      const list = await cli(['token', 'list', '--user', 'carol'], env);
      assert.equal(list.code, 0, list.stderr);
      const rows = list.stdout
        .trim()
        .split('\n')
        .map((l) => l.split('\t'));
      assert.deepEqual(
        rows.map((r) => r.length),
        [7, 7, 7],
      );
      assert.deepEqual(
        rows.map((r) => r[0]),
        [...made].reverse(),
        'newest first',
      );
      const [id, user, scopes, createdAt, expires, status, lastUsed] = rows[0]!;
      assert.deepEqual(
        [id, user, scopes, expires, status, lastUsed],
        [made[2], 'carol', 'plants:read,plants:write', 'never', 'active', 'never used'],
      );
      assert.ok(!Number.isNaN(Date.parse(createdAt!)));
      const created = rows.map((r) => Date.parse(r[3]!));
      assert.deepEqual(
        created,
        [...created].sort((a, b) => b - a),
      );
      assert.equal(audits(list.stderr).length, 0, 'a listing is not audited');
      const json = await cli(['token', 'list', '--user', 'carol', '--json'], env);
      assert.deepEqual(
        (JSON.parse(json.stdout) as { id: string; lastUsedAt: null }[]).map((t) => [t.id, t.lastUsedAt]),
        [...made].reverse().map((t) => [t, null]),
      );
      const all = await cli(['token', 'list', '--json'], env);
      assert.ok(!all.stdout.includes('pst_'), 'no secret in any listing');
      assert.ok(JSON.parse(all.stdout).length >= 5);

      const revoked = await cli(['token', 'revoke', made[1]!], env);
      assert.equal(revoked.code, 0, revoked.stderr);
      assert.equal(oneAudit(revoked.stderr, 'revoked', made[1]!).user, 'carol');
      assert.deepEqual(
        (await cli(['token', 'list', '--user', 'carol'], env)).stdout
          .trim()
          .split('\n')
          .map((l) => l.split('\t')[5]),
        ['active', 'revoked', 'active'],
      );
      const again = await cli(['token', 'revoke', made[1]!], env);
      assert.equal(again.code, 0, 'revoking twice is harmless');
      assert.equal(audits(again.stderr).length, 0, 'nothing was revoked the second time: no audit line');
      const unknown = await cli(['token', 'revoke', 'tok_nope'], env);
      assert.equal(unknown.code, 1);
      assert.match(unknown.stderr, /no token with id tok_nope/);
      assert.equal(audits(unknown.stderr).length, 0);
    });

    it('token create --scopes tokens:manage makes a token that manages tokens over HTTP; list shows when it was last used', async () => {
      const r = await cli(
        ['token', 'create', '--user', 'dave', '--scopes', 'plants:read,tokens:manage', '--json'],
        env,
      );
      assert.equal(r.code, 0, r.stderr);
      const made = JSON.parse(r.stdout) as { id: string; token: string; scopes: string[] };
      assert.deepEqual(made.scopes, ['plants:read', 'tokens:manage']);
      assert.deepEqual(oneAudit(r.stderr, 'created', made.id).scopes, ['plants:read', 'tokens:manage']);

      const server = await serve([], { DATABASE_URL: env.DATABASE_URL, LOG_LEVEL: 'info' });
      let used: string;
      try {
        const get = () =>
          fetch(`${server.url}/tokens/${made.id}`, {
            headers: { authorization: `Bearer ${made.token}` },
            signal: AbortSignal.timeout(10_000),
          });
        const first = await get();
        assert.equal(first.status, 200, await first.clone().text());
        assert.equal(
          ((await first.json()) as { scopes: string[] }).scopes.join(','),
          'plants:read,tokens:manage',
        );
        // The use is recorded a moment later (one write per token per minute): wait for it.
        used = await until('the use to be recorded', async () => {
          const t = (await (await get()).json()) as { lastUsedAt: string | null };
          return t.lastUsedAt ?? false;
        });
      } finally {
        await server.stop();
      }
      assert.equal(Date.parse(used) % 60_000, 0, 'kept to the minute');
      const list = await cli(['token', 'list', '--user', 'dave'], env);
      assert.equal(list.code, 0, list.stderr);
      const fields = list.stdout.trim().split('\n')[0]!.split('\t');
      assert.deepEqual([fields[0], fields[2], fields[5]], [made.id, 'plants:read,tokens:manage', 'active']);
      // The list shows the last use the store kept: the one seen over HTTP, or a later one when the
      // polls above crossed into the next minute (each minute's first use is written again).
      const listed = Date.parse(fields[6]!);
      assert.ok(listed >= Date.parse(used) && listed <= Date.now(), `${fields[6]} after ${used}`);
      assert.equal(listed % 60_000, 0, 'kept to the minute');
    });
  });

for (const engine of ENGINES)
  describe(`bin/plantstore on a store migrated by a newer release (${engine.name})`, {
    skip: engine.skip,
  }, () => {
    it('serve (with and without --workers), migrate and its dry run exit 1 naming both schema versions', async () => {
      const d = await engine.database();
      try {
        const env = { DATABASE_URL: d.url };
        assert.equal((await cli(['migrate'], env)).code, 0);
        const known = (engine.name === 'sqlite' ? SQLITE_MIGRATIONS : POSTGRES_MIGRATIONS).length;
        await recordMigration(d.url, known + 1);
        for (const args of [
          ['serve', '--port', '0'],
          ['serve', '--port', '0', '--workers', '2'],
          ['migrate'],
          ['migrate', '--dry-run'],
        ]) {
          const r = await cli(args, env);
          assert.equal(r.code, 1, `${args.join(' ')}: ${r.stderr}`);
          assert.equal(
            r.stderr,
            `plantstore: the store's schema is version ${known + 1}, newer than plantstore ${PACKAGE.version} knows (its newest is ${known}): run the release that migrated it, or a newer one\n`,
            args.join(' '),
          );
        }
      } finally {
        await d.drop();
      }
    });
  });

describe('bin/plantstore usage errors and help', () => {
  for (const flag of ['--version', '-V'])
    it(`${flag} prints the version in package.json alone and exits 0`, async () => {
      const r = await cli([flag]);
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.stdout, `${PACKAGE.version}\n`);
      assert.equal(r.stderr, '');
    });

  const dir = mkdtempSync(join(tmpdir(), 'plantstore-cli-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  for (const args of [
    ['token', 'create'],
    ['token', 'create', '--user', 'x', '--scopes', 'plants:fly'],
    ['token', 'create', '--user', 'x', '--scopes', ''],
    ['token', 'create', '--user', 'x', '--expires-in', '30'],
    ['token', 'create', '--user', 'x', '--expires-in', '1.5d'],
    ['token', 'create', '--user', 'has space'],
    ['token', 'create', '--user', 'x', '--bogus'],
    ['token', 'create', '--user', 'x', '--scopes', 'tokens:fly'],
    // The API's rule for a token's name (an export holding it would not import).
    ['token', 'create', '--user', 'x', '--name', 'line\nbreak'],
    ['token', 'create', '--user', 'x', '--name', '   '],
    ['token', 'create', '--user', 'x', '--name', '\u200b\u2060'],
    ['token', 'list', '--bogus'],
    ['token', 'revoke'],
    ['serve', '--port', '99999'],
    ['serve', '--jwt-issuer', 'https://id.example.com'],
    ['serve', '--jwt-issuer', 'https://id.example.com', '--jwt-audience', 'a', '--jwt-algorithms', 'HS256'],
    ['serve', '--durability', 'sometimes'],
    ['serve', '--trust-proxy'],
    ['serve', '--trust-proxy', 'true'],
    ['serve', '--trust-proxy', '1'],
    ['migrate', '--database', 'mysql://nope'],
    ['frobnicate'],
  ]) {
    it(`exits 2 with one line on stderr and writes nothing: ${args.join(' ')}`, async () => {
      const fresh = join(dir, `untouched-${Math.random()}.db`);
      const r = await cli(args, { DATABASE_URL: `sqlite:${fresh}` });
      assert.equal(r.code, 2, r.stderr);
      assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
      assert.match(r.stderr, /^plantstore: /);
      assert.equal(r.stdout, '');
      assert.ok(!existsSync(fresh), 'no store was created');
    });
  }

  // Each a URL the configuration refuses; the password (Sekr3t…) must appear in no message.
  for (const [args, url] of [
    [['serve'], 'mysql://app:Sekr3tPw@db/plants'],
    [['serve'], 'postgres://app:Sekr3t%E0%A4Pw@127.0.0.1/plants'],
    [['serve'], 'postgres://app:Sekr3t/Pw@127.0.0.1/plants'],
    [['serve'], 'postgres://app:Sekr3tPw@127.0.0.1:99999/plants'],
    [['serve'], 'postgres://app:Sekr3t/Pw@h1,h2/plants'],
    [['migrate'], 'postgres://app:Sekr3t/Pw@127.0.0.1/plants'],
    [['export'], 'postgres://app:Sekr3t%E0%A4Pw@127.0.0.1/plants'],
    [['import', 'test/e2e/cli.test.ts'], 'postgres://app:Sekr3t@Pw@h1,h2/plants'],
    [['backup'], 'mysql://app:Sekr3tPw@db/plants'],
  ] as const) {
    it(`${args[0]} with a bad DATABASE_URL exits 2 with one line that holds no password: ${url}`, async () => {
      const r = await cli([...args], { DATABASE_URL: url });
      assert.equal(r.code, 2, r.stderr);
      assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr);
      assert.match(r.stderr, /^plantstore: DATABASE_URL/);
      assert.doesNotMatch(r.stderr + r.stdout, /Sekr3t|Pw/);
    });
  }

  for (const args of [
    ['--help'],
    ['serve', '--help'],
    ['migrate', '--help'],
    ['token', '--help'],
    ['token', 'create', '--help'],
    ['token', 'list', '--help'],
    ['token', 'revoke', '--help'],
    ['backup', '--help'],
    ['plants', 'create', '--help'],
    ['plants', 'list', '--help'],
    ['gardens', '--help'],
    ['gardens', 'list', '--help'],
    ['gardens', 'create', '--help'],
    ['gardens', 'share', '--help'],
    ['gardens', 'unshare', '--help'],
  ]) {
    it(`${args.join(' ')} prints usage and exits 0`, async () => {
      const r = await cli(args);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /^Usage: plantstore/);
      if (args.includes('create') && args[0] === 'token') assert.match(r.stdout, /tokens:manage/);
      if (args.includes('list') && args[0] === 'token') assert.match(r.stdout, /last used/);
      if (args.includes('create') && args[0] === 'plants') assert.match(r.stdout, /--garden <gid>/);
      if (args.includes('list') && args[0] === 'plants') assert.match(r.stdout, /--garden <gid>/);
      if (args.includes('share'))
        assert.match(r.stdout, /--role <role>.*viewer, editor or owner.*default: "viewer"/s);
    });
  }
});
