import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigError, loadConfig } from '../../src/config.js';
import { effectiveConfig, maskUrl } from '../../src/config-log.js';

describe('configuration', () => {
  it('defaults match the contract', () => {
    const c = loadConfig({});
    assert.equal(c.port, 3000);
    assert.equal(c.host, '127.0.0.1');
    assert.equal(c.database, 'sqlite:./data/plantstore.db');
    assert.equal(c.rateLimit, 6000);
    assert.equal(c.authFailureLimit, 60);
    assert.equal(c.durability, 'full');
    assert.equal(c.metrics, true);
  });

  it('a flag beats the environment, which beats the default', () => {
    const c = loadConfig({ PORT: '4000', HOST: '0.0.0.0', RATE_LIMIT: '0' }, { port: '5000' });
    assert.equal(c.port, 5000);
    assert.equal(c.host, '0.0.0.0');
    assert.equal(c.rateLimit, 0);
  });

  for (const [env, message] of [
    [{ PORT: '70000' }, /PORT must be a whole number from 0 to 65535/],
    [{ PORT: '3e3' }, /PORT/],
    [{ DATABASE_URL: 'mysql://x' }, /DATABASE_URL must be sqlite:PATH or postgres/],
    [
      { DATABASE_URL: 'postgres://h1:5432,h2:70000/db' },
      /DATABASE_URL: the port of "h2:70000" must be 1-65535/,
    ],
    [
      { DATABASE_URL: 'postgres://h1,h2/db?target_session_attrs=standby' },
      /DATABASE_URL: target_session_attrs must be/,
    ],
    [{ TRUST_PROXY: 'true' }, /TRUST_PROXY must not be true: .*give the addresses or CIDRs of the proxies/],
    [{ TRUST_PROXY: 'yes' }, /TRUST_PROXY must not be true/],
    [{ TRUST_PROXY: '1' }, /TRUST_PROXY must not be a number of proxies: .*give the addresses or CIDRs/],
    [
      { TRUST_PROXY: '10.0.0.0/33' },
      /TRUST_PROXY must be false or the proxies' addresses and CIDRs .*"10.0.0.0\/33" is not one/,
    ],
    [{ TRUST_PROXY: '10.0.0.1,proxy.internal' }, /"proxy.internal" is not one/],
    [{ DURABILITY: 'none' }, /DURABILITY must be one of full, normal/],
    [{ METRICS: 'maybe' }, /METRICS must be true or false/],
    [{ RATE_LIMIT: '-1' }, /RATE_LIMIT/],
    [{ JWT_ISSUER: 'https://id.example.com' }, /--jwt-issuer needs --jwt-audience \(JWT_AUDIENCE\)/],
    [{ JWT_ISSUER: 'id.example.com', JWT_AUDIENCE: 'a' }, /JWT_ISSUER must be an absolute http\(s\) URL/],
    [{ JWT_ISSUER: 'https://i', JWT_AUDIENCE: 'a', JWT_ALGORITHMS: 'RS256,HS256' }, /"HS256" is not allowed/],
    [{ JWT_ALGORITHMS: 'none' }, /"none" is not allowed/],
    [{ JWT_CLOCK_TOLERANCE: '30' }, /JWT_CLOCK_TOLERANCE must be a whole number and ms, s, m, h or d/],
    [{ JWT_JWKS_URL: 'file:///etc/keys' }, /JWT_JWKS_URL must be an absolute http\(s\) URL/],
    [{ JWT_ALLOW_UNTYPED: 'perhaps' }, /JWT_ALLOW_UNTYPED must be true or false/],
    [{ MAX_EVENT_LOOP_DELAY: '200' }, /MAX_EVENT_LOOP_DELAY must be a whole number and ms, s, m, h or d/],
  ] as const) {
    it(`rejects ${JSON.stringify(env)} with one clear line`, () => {
      assert.throws(
        () => loadConfig(env),
        (err: Error) => err instanceof ConfigError && message.test(err.message),
      );
    });
  }

  it('load shedding: 200 ms of event-loop delay by default; a duration; 0s turns it off', () => {
    assert.equal(loadConfig({}).maxEventLoopDelay, 200);
    assert.equal(loadConfig({ MAX_EVENT_LOOP_DELAY: '0s' }).maxEventLoopDelay, 0);
    assert.equal(
      loadConfig({ MAX_EVENT_LOOP_DELAY: '1s' }, { maxEventLoopDelay: '50ms' }).maxEventLoopDelay,
      50,
    );
  });

  it('a DATABASE_URL it refuses is never printed back: one line, no password', () => {
    for (const url of [
      'mysql://app:Sekr3tPw@db/plants',
      'app:Sekr3tPw@db/plants',
      'postgres://app:Sekr3t%E0%A4Pw@db/plants',
      'postgres://app:Sekr3t/Pw@db/plants',
      'postgres://app:Sekr3tPw@db:99999/plants',
      'postgresql://app:Sekr3tPw@[::1/plants',
      'postgres://app:Sekr3t%zzPw@h1,h2/plants',
      'postgres://app:Sekr3t/Pw@h1,h2/plants',
      'postgres://app:Sekr3t@Pw@h1,h2/plants',
      'postgres://app:Sekr3tPw@h1,h2:70000/plants',
      'postgres://app:Sekr3tPw@db/plants?sslrootcert=/nonexistent/ca.pem',
    ]) {
      assert.throws(
        () => loadConfig({ DATABASE_URL: url }),
        (err: Error) =>
          err instanceof ConfigError &&
          err.message.startsWith('DATABASE_URL') &&
          !err.message.includes('\n') &&
          !/Sekr3t|Pw/.test(err.message),
        url,
      );
    }
  });

  it("TRUST_PROXY: false by default, else the proxies' addresses and CIDRs", () => {
    assert.equal(loadConfig({}).trustProxy, false);
    assert.equal(loadConfig({ TRUST_PROXY: 'false' }).trustProxy, false);
    assert.equal(loadConfig({ TRUST_PROXY: '0' }).trustProxy, false);
    assert.deepEqual(loadConfig({}, { trustProxy: '192.0.2.7' }).trustProxy, ['192.0.2.7']);
    assert.deepEqual(
      loadConfig({ TRUST_PROXY: ' 10.0.0.0/8, 192.0.2.7,fd00::/8 , ::1,loopback' }).trustProxy,
      ['10.0.0.0/8', '192.0.2.7', 'fd00::/8', '::1', 'loopback'],
    );
  });

  it('JWT settings: off by default; contract defaults; durations and lists parsed', () => {
    const off = loadConfig({});
    assert.equal(off.jwtIssuer, '');
    assert.deepEqual(off.jwtAlgorithms, ['RS256', 'PS256', 'ES256', 'EdDSA']);
    assert.equal(off.jwtUserClaim, 'sub');
    assert.equal(off.jwtClockTolerance, 30_000);
    assert.equal(off.jwtAllowUntyped, false);
    const on = loadConfig(
      {
        JWT_ISSUER: 'https://id.example.com/realms/x',
        JWT_AUDIENCE: 'plantstore',
        JWT_CLOCK_TOLERANCE: '2m',
      },
      { jwtAlgorithms: 'ES256, RS256', jwtAllowUntyped: 'true', jwtClockTolerance: '1500ms' },
    );
    assert.deepEqual(on.jwtAlgorithms, ['ES256', 'RS256']);
    assert.equal(on.jwtClockTolerance, 1500);
    assert.equal(on.jwtAllowUntyped, true);
  });

  it('the trash retention: 30d by default, 0 turns it off; events are kept at least as long', () => {
    const DAY = 86_400_000;
    const d = loadConfig({});
    assert.deepEqual([d.trashRetention, d.eventRetention], [30 * DAY, 30 * DAY]);
    assert.equal(loadConfig({ TRASH_RETENTION: '0' }).trashRetention, 0);
    assert.equal(loadConfig({}, { trashRetention: '0s' }).trashRetention, 0);
    // Without EVENT_RETENTION, events follow a longer trash retention; a shorter one changes nothing.
    const long = loadConfig({ TRASH_RETENTION: '90d' });
    assert.deepEqual([long.trashRetention, long.eventRetention], [90 * DAY, 90 * DAY]);
    assert.equal(loadConfig({ TRASH_RETENTION: '1h' }).eventRetention, 30 * DAY);
    assert.equal(loadConfig({ TRASH_RETENTION: '0', EVENT_RETENTION: '1h' }).eventRetention, 3_600_000);
    // Given below the trash retention: a usage error naming both, as they were given.
    assert.throws(
      () => loadConfig({ EVENT_RETENTION: '7d' }),
      (e: Error) =>
        e instanceof ConfigError &&
        /EVENT_RETENTION=7d/.test(e.message) &&
        /--trash-retention 30d/.test(e.message),
    );
    assert.throws(
      () => loadConfig({ TRASH_RETENTION: '10d' }, { eventRetention: '2d' }),
      (e: Error) => /--event-retention 2d/.test(e.message) && /TRASH_RETENTION=10d/.test(e.message),
    );
    for (const bad of ['30', '-1d', '1y', 'off']) {
      assert.throws(() => loadConfig({ TRASH_RETENTION: bad }), /TRASH_RETENTION must be 0 \(off\) or/);
    }
  });
});

describe('the effective configuration as logged at start', () => {
  it('every setting, with the passwords of URLs and secret parameters masked', () => {
    const c = loadConfig({
      DATABASE_URL: 'postgres://app:Sekr3t%2Fpw@db1:5432,db2:5432/plants?sslpassword=Key9&sslmode=require',
      REDIS_URL: 'redis://:R3dis@cache:6379/0',
      JWT_ISSUER: 'https://issuer.example/',
      JWT_AUDIENCE: 'plantstore',
    });
    const logged = effectiveConfig(c);
    assert.deepEqual(Object.keys(logged).sort(), Object.keys(c).sort());
    assert.equal(
      logged.database,
      'postgres://app:***@db1:5432,db2:5432/plants?sslpassword=***&sslmode=require',
    );
    assert.equal(logged.redisUrl, 'redis://:***@cache:6379/0');
    assert.equal(logged.jwtIssuer, 'https://issuer.example/');
    assert.equal(logged.port, 3000);
    assert.doesNotMatch(JSON.stringify(logged), /Sekr3t|Key9|R3dis/);
  });

  it('a password holding an unencoded / or @ is masked whole; URLs without one are kept', () => {
    assert.equal(maskUrl('postgres://u:a/b@c@h/db'), 'postgres://u:***@h/db');
    assert.equal(maskUrl('postgres://u@h/db'), 'postgres://u@h/db');
    assert.equal(maskUrl('sqlite:./data/plantstore.db'), 'sqlite:./data/plantstore.db');
    assert.equal(maskUrl('redis://h:6379?password=x#f'), 'redis://h:6379?password=***#f');
  });

  it('a setting named for a secret is masked whatever it holds', () => {
    const logged = effectiveConfig({ ...loadConfig({}), webhookSigningKey: 'whsec_abc' } as never);
    assert.equal(logged.webhookSigningKey, '***');
  });
});
