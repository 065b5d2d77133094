import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ENGINES } from '../helpers/engines.js';
import { cli } from './process.js';

for (const engine of ENGINES)
  describe(`bin/plantstore token and migrate on ${engine.name}`, { skip: engine.skip }, () => {
    const env = { DATABASE_URL: '' };
    let db = '';
    let drop = async () => {};
    before(async () => {
      const d = await engine.database();
      db = d.url;
      env.DATABASE_URL = d.url;
      drop = d.drop;
    });
    after(() => drop());

    it('migrate creates the store and is idempotent', async () => {
      const first = await cli(['migrate'], env);
      assert.equal(first.code, 0, first.stderr);
      assert.match(first.stderr, /applied 0001_init/);
      const second = await cli(['migrate', '--database', db]);
      assert.equal(second.code, 0);
      assert.match(second.stderr, /up to date/);
    });

    it('token create prints the token alone on stdout and details on stderr', async () => {
      const r = await cli(['token', 'create', '--user', 'alice', '--name', 'laptop'], env);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /^pst_[A-Za-z0-9_-]{43}\n$/);
      assert.match(r.stderr, /alice/);
      assert.match(r.stderr, /plants:read,plants:write/);
      assert.ok(!r.stderr.includes(r.stdout.trim()), 'the secret is printed once');
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
    });

    it('token list shows one line per token and never a secret; revoke marks it revoked', async () => {
      const created = JSON.parse((await cli(['token', 'create', '--user', 'carol', '--json'], env)).stdout);
      const list = await cli(['token', 'list', '--user', 'carol'], env);
      assert.equal(list.code, 0);
      const lines = list.stdout.trim().split('\n');
      assert.equal(lines.length, 1);
      const [id, user, scopes, createdAt, expires, status] = lines[0]!.split('\t');
      assert.deepEqual(
        [id, user, scopes, expires, status],
        [created.id, 'carol', 'plants:read,plants:write', 'never', 'active'],
      );
      assert.ok(!Number.isNaN(Date.parse(createdAt!)));
      const all = await cli(['token', 'list', '--json'], env);
      assert.ok(!all.stdout.includes('pst_'), 'no secret in any listing');
      assert.ok(JSON.parse(all.stdout).length >= 3);

      const revoked = await cli(['token', 'revoke', created.id], env);
      assert.equal(revoked.code, 0, revoked.stderr);
      assert.match((await cli(['token', 'list', '--user', 'carol'], env)).stdout, /\trevoked\n$/);
      assert.equal((await cli(['token', 'revoke', created.id], env)).code, 0, 'revoking twice is harmless');
      const unknown = await cli(['token', 'revoke', 'tok_nope'], env);
      assert.equal(unknown.code, 1);
      assert.match(unknown.stderr, /no token with id tok_nope/);
    });
  });

describe('bin/plantstore usage errors and help', () => {
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
    ['token', 'revoke'],
    ['serve', '--port', '99999'],
    ['serve', '--jwt-issuer', 'https://id.example.com'],
    ['serve', '--jwt-issuer', 'https://id.example.com', '--jwt-audience', 'a', '--jwt-algorithms', 'HS256'],
    ['serve', '--durability', 'sometimes'],
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
      if (args.includes('create') && args[0] === 'plants') assert.match(r.stdout, /--garden <gid>/);
      if (args.includes('list') && args[0] === 'plants') assert.match(r.stdout, /--garden <gid>/);
      if (args.includes('share'))
        assert.match(r.stdout, /--role <role>.*viewer, editor or owner.*default: "viewer"/s);
    });
  }
});
