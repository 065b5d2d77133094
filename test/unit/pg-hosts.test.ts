import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isMultiHost, PgUrlError, parsePgUrl } from '../../src/pg-url.js';
import { HostChooser } from '../../src/store/postgres/hosts.js';

// libpq's multi-host connection strings (contract section 6), as src/pg-url.ts reads them, and the
// host chooser of src/store/postgres/hosts.ts.

describe('several PostgreSQL hosts: the connection string', () => {
  it('reads hosts with their own ports, IPv6 in brackets, and target_session_attrs', () => {
    const t = parsePgUrl(
      'postgres://app:s%40cret@db1:5433,[::1]:6000,db3/plants?target_session_attrs=primary&sslmode=disable&application_name=ps',
    );
    assert.deepEqual(t.hosts, [
      { host: 'db1', port: 5433 },
      { host: '::1', port: 6000 },
      { host: 'db3', port: 5432 },
    ]);
    assert.equal(t.attrs, 'primary');
    assert.equal(t.config.user, 'app');
    assert.equal(t.config.password, 's@cret');
    assert.equal(t.config.database, 'plants');
    assert.equal((t.config as Record<string, unknown>).application_name, 'ps');
    assert.equal(
      (t.config as Record<string, unknown>).target_session_attrs,
      undefined,
      'not sent to the server',
    );
    assert.equal(t.config.host, undefined);
  });

  it('defaults to read-write with several hosts and any with one; a port= parameter is every bare host’s', () => {
    assert.equal(parsePgUrl('postgresql://h1,h2/db').attrs, 'read-write');
    assert.equal(parsePgUrl('postgres://h1/db').attrs, 'any');
    assert.deepEqual(parsePgUrl('postgres://h1,h2:7000/db?port=6543').hosts, [
      { host: 'h1', port: 6543 },
      { host: 'h2', port: 7000 },
    ]);
  });

  it('refuses what libpq would refuse, naming the problem', () => {
    for (const [url, why] of [
      ['postgres://h1,,h2/db', /is not a host/],
      ['postgres://h1:99999/db', /port of "h1:99999" must be 1-65535/],
      ['postgres://h1:abc,h2/db', /port/],
      ['postgres://::1:5432/db', /IPv6 address goes in brackets/],
      [
        'postgres://h1,h2/db?target_session_attrs=standby',
        /target_session_attrs must be read-write, primary, any/,
      ],
    ] as const) {
      assert.throws(
        () => parsePgUrl(url),
        (err: Error) => err instanceof PgUrlError && why.test(err.message),
        url,
      );
    }
  });

  it('reads a password holding ? or # as libpq does (its user information ends at the first @ before any /)', () => {
    for (const password of ['pa?ss', 'pa#ss', 'p?a#s=s&']) {
      const t = parsePgUrl(`postgres://app:${password}@h1,h2/plants`);
      assert.deepEqual(t.hosts, [
        { host: 'h1', port: 5432 },
        { host: 'h2', port: 5432 },
      ]);
      assert.equal(t.config.user, 'app');
      assert.equal(t.config.password, password);
      assert.equal(t.config.database, 'plants');
      assert.equal(isMultiHost(`postgres://app:${password}@h1,h2/plants`), true);
    }
    assert.equal(
      isMultiHost('postgres://app:pa,ss@h1/plants'),
      false,
      'a comma in the password is no host list',
    );
  });

  it('never quotes the user information in its refusals', () => {
    for (const url of [
      'postgres://app:Sekr3t/Pw@h1,h2/plants',
      'postgres://app:Sekr3t@Pw@h1,h2/plants',
      'postgres://app:Sekr3t%zzPw@h1,h2/plants',
      'postgres://app:Sekr3t%E0%A4Pw@h1,h2/plants',
      'postgres://app:Sekr3t:Pw/@h1,h2/plants',
    ]) {
      assert.throws(
        () => parsePgUrl(url),
        (err: Error) => err instanceof PgUrlError && !/Sekr3t|Pw/.test(err.message),
        url,
      );
    }
  });

  it('tells a multi-host URL from a single one', () => {
    assert.equal(isMultiHost('postgres://u@h1:5432,h2:5432/db'), true);
    assert.equal(isMultiHost('postgres://u@h1/db?target_session_attrs=read-write'), true);
    assert.equal(isMultiHost('postgres://u:p,w@h1/db'), false, 'a comma in the password is not a host list');
    assert.equal(isMultiHost('postgres://u@h1:5432/db?application_name=a,b'), false);
  });

  it('moves new connections on to the next host when the current one fails, and stays there', () => {
    const c = new HostChooser(parsePgUrl('postgres://a,b,c/db'));
    assert.equal(c.next().host.host, 'a');
    c.failed(0);
    assert.equal(c.next().host.host, 'b');
    c.failed(0); // a late report of the host already left changes nothing
    assert.equal(c.next().host.host, 'b');
    c.failed(1);
    c.failed(2);
    assert.equal(c.next().host.host, 'a', 'round the list');
  });
});
