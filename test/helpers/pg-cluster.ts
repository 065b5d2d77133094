import { execFile } from 'node:child_process';
import { appendFileSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { until } from './wait.js';

// PostgreSQL clusters of a test's own, made with the machine's PostgreSQL 15 binaries: a primary
// and a streaming standby (pg_basebackup) that the primary waits for at every commit
// (synchronous_standby_names), on free ports in a temporary directory, run as the `postgres` user
// (PostgreSQL refuses root). For the failover tests of contract section 6; the machine's own
// PostgreSQL is never touched.

const BIN = '/usr/lib/postgresql/15/bin';
const run = promisify(execFile);

/** Why clusters cannot be made here, or false. In CI they must be. */
export const CLUSTER_SKIP: string | false = !existsSync(join(BIN, 'initdb'))
  ? `no PostgreSQL 15 binaries in ${BIN}`
  : process.getuid?.() !== 0 && process.env.USER !== 'postgres'
    ? 'clusters are run as the postgres user: run the tests as root or postgres'
    : false;
if (CLUSTER_SKIP && process.env.CI === 'true') throw new Error(`CI=true and ${CLUSTER_SKIP}`);

const asPostgres = (cmd: string, args: string[]) =>
  process.getuid?.() === 0
    ? run('runuser', ['-u', 'postgres', '--', join(BIN, cmd), ...args])
    : run(join(BIN, cmd), args);

/** A TCP port on 127.0.0.1 that nothing listens on right now. */
export async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const port = (s.address() as { port: number }).port;
  await new Promise((resolve) => s.close(resolve));
  return port;
}

export class Cluster {
  constructor(
    readonly name: string,
    readonly dir: string,
    readonly port: number,
  ) {}

  url(database = 'postgres'): string {
    return `postgres://postgres@127.0.0.1:${this.port}/${database}`;
  }

  async start(): Promise<void> {
    await asPostgres('pg_ctl', ['-D', this.dir, '-l', `${this.dir}.log`, '-w', '-t', '60', 'start']);
  }

  /**
   * kill -9 of the postmaster and its backends, as if the machine under it died; resolves once they
   * are gone (a new postmaster refuses to start while the old one's pid is alive).
   */
  async kill9(): Promise<void> {
    const pid = Number(readFileSync(join(this.dir, 'postmaster.pid'), 'utf8').split('\n')[0]);
    const children = readdirSync('/proc')
      .filter((p) => /^\d+$/.test(p))
      .filter((p) => {
        try {
          return /^PPid:\s+(\d+)$/m.exec(readFileSync(`/proc/${p}/status`, 'utf8'))?.[1] === String(pid);
        } catch {
          return false;
        }
      })
      .map(Number);
    for (const p of [pid, ...children]) {
      try {
        process.kill(p, 'SIGKILL');
      } catch {
        // gone already
      }
    }
    const alive = (p: number) => {
      try {
        return !/^State:\s+Z/m.test(readFileSync(`/proc/${p}/status`, 'utf8'));
      } catch {
        return false;
      }
    };
    await until('the killed cluster gone', () => ![pid, ...children].some(alive), 10_000);
    // Its pid may linger as a zombie (this sandbox's pid 1 reaps late), which a new postmaster takes
    // for a live one: its lock files go, as after a machine's restart.
    rmSync(join(this.dir, 'postmaster.pid'), { force: true });
    for (const f of ['', '.lock'])
      rmSync(join(dirname(this.dir), `.s.PGSQL.${this.port}${f}`), { force: true });
  }

  /** Starts a cluster that was a primary again as a read-only standby of `of`. */
  async startAsStandby(of: Cluster): Promise<void> {
    await run('runuser', ['-u', 'postgres', '--', 'touch', join(this.dir, 'standby.signal')]);
    appendFileSync(
      join(this.dir, 'postgresql.auto.conf'),
      `\nprimary_conninfo = 'host=127.0.0.1 port=${of.port} user=postgres application_name=old'\nsynchronous_standby_names = ''\n`,
    );
    await this.start();
  }

  async promote(): Promise<void> {
    await asPostgres('pg_ctl', ['-D', this.dir, '-w', '-t', '60', 'promote']);
  }

  async stop(): Promise<void> {
    if (!existsSync(join(this.dir, 'postmaster.pid'))) return;
    await asPostgres('pg_ctl', ['-D', this.dir, '-m', 'immediate', '-w', '-t', '60', 'stop']).catch(() => {});
  }

  async query<R extends pg.QueryResultRow>(sql: string, database = 'postgres'): Promise<R[]> {
    const c = new pg.Client({ connectionString: this.url(database), connectionTimeoutMillis: 3_000 });
    await c.connect();
    try {
      return (await c.query<R>(sql)).rows;
    } finally {
      await c.end();
    }
  }
}

/** A primary and a synchronous standby (application_name standby1), both running. */
export async function primaryAndStandby(): Promise<{
  root: string;
  primary: Cluster;
  standby: Cluster;
  close(): Promise<void>;
}> {
  const root = mkdtempSync(join(tmpdir(), 'plantstore-ha-'));
  if (process.getuid?.() === 0) await run('chown', ['postgres:postgres', root]);
  const primary = new Cluster('primary', join(root, 'primary'), await freePort());
  const standby = new Cluster('standby', join(root, 'standby'), await freePort());
  const settings = (port: number) =>
    [
      `port = ${port}`,
      "listen_addresses = '127.0.0.1'",
      `unix_socket_directories = '${root}'`,
      'wal_level = replica',
      'max_wal_senders = 5',
      'hot_standby = on',
      'fsync = on',
      "synchronous_standby_names = 'standby1'",
      'shared_buffers = 32MB',
      'max_connections = 60',
      '',
    ].join('\n');
  await asPostgres('initdb', ['-D', primary.dir, '-U', 'postgres', '--auth=trust', '--no-sync']);
  appendFileSync(primary.dir + '/postgresql.conf', settings(primary.port));
  await primary.start();
  await asPostgres('pg_basebackup', [
    '-h',
    '127.0.0.1',
    '-p',
    String(primary.port),
    '-U',
    'postgres',
    '-D',
    standby.dir,
    '-R',
    '-X',
    'stream',
  ]);
  appendFileSync(
    join(standby.dir, 'postgresql.auto.conf'),
    // Promoted, it waits for no standby of its own (as an operator or Patroni would set it).
    `\nport = ${standby.port}\nprimary_conninfo = 'host=127.0.0.1 port=${primary.port} user=postgres application_name=standby1'\nsynchronous_standby_names = ''\n`,
  );
  await standby.start();
  await until(
    'the standby streaming synchronously',
    async () => {
      const rows = await primary.query<{ s: string }>(
        "SELECT sync_state AS s FROM pg_stat_replication WHERE application_name = 'standby1'",
      );
      return rows[0]?.s === 'sync';
    },
    30_000,
  );
  return {
    root,
    primary,
    standby,
    async close() {
      await primary.stop();
      await standby.stop();
      rmSync(root, { recursive: true, force: true });
    },
  };
}
