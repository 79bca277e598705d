// A scratch PostgreSQL primary and a streaming standby of it, made with Debian's PostgreSQL 15
// binaries (initdb, then pg_basebackup -R for the standby) in a temporary directory, on free
// ports of 21000-21999 (the machine's PostgreSQL on 5432 is left alone). As root, every binary
// runs as the postgres user (initdb refuses root). stop() stops both and deletes the directory;
// a test process that exits first stops them too.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { eventually } from './wait.ts';

export const PG_BIN = process.env.TEST_PG_BIN || '/usr/lib/postgresql/15/bin';
const PORTS = { first: 21000, last: 21999 };
const DATABASE = 'ugs';

/** Why the pair cannot be made on this machine, or false. */
export function replicaPairUnavailable(): string | false {
  if (!process.env.TEST_POSTGRES_URL) return 'TEST_POSTGRES_URL is not set (the PostgreSQL-only suites are off)';
  for (const tool of ['initdb', 'pg_ctl', 'pg_basebackup', 'postgres']) {
    if (!fs.existsSync(path.join(PG_BIN, tool))) return `${path.join(PG_BIN, tool)} is missing (apt-get install postgresql-15)`;
  }
  return false;
}

export interface ReplicaPair {
  /** postgres:// URL of the primary's database `ugs`. */
  primaryUrl: string;
  /** The same database on the standby. */
  replicaUrl: string;
  /** pg_ctl stop -m immediate (the primary's postmaster is gone; its port refuses). */
  stopPrimary(): Promise<void>;
  startPrimary(): Promise<void>;
  /** select pg_wal_replay_pause() on the standby, until it says it is paused. */
  pauseReplay(): Promise<void>;
  resumeReplay(): Promise<void>;
  /** Resolves once the standby has replayed everything the primary had written when asked. */
  caughtUp(): Promise<void>;
  /** Stops both servers and deletes their files. */
  stop(): Promise<void>;
}

const asRoot = typeof process.getuid === 'function' && process.getuid() === 0;

/** A PostgreSQL binary, as the postgres user when this process is root. */
function pgCommand(tool: string, args: string[]): [string, string[]] {
  const binary = path.join(PG_BIN, tool);
  return asRoot ? ['runuser', ['-u', 'postgres', '--', binary, ...args]] : [binary, args];
}

function run(tool: string, args: string[]): Promise<void> {
  const [command, argv] = pgCommand(tool, args);
  return new Promise((resolve, reject) => {
    const child = spawn(command, argv, { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk) => (output += chunk));
    child.stderr.on('data', (chunk) => (output += chunk));
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`${tool} ${args.join(' ')} failed (${code}):\n${output}`))));
  });
}

function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** Two free ports of the range, starting at a random place so that parallel runs rarely collide. */
async function freePorts(count: number): Promise<number[]> {
  const span = PORTS.last - PORTS.first + 1;
  const start = Math.floor(Math.random() * span);
  const found: number[] = [];
  for (let i = 0; i < span && found.length < count; i++) {
    const port = PORTS.first + ((start + i) % span);
    if (await portIsFree(port)) found.push(port);
  }
  if (found.length < count) throw new Error(`no ${count} free ports in ${PORTS.first}-${PORTS.last}`);
  return found;
}

function settings(port: number, socketDir: string): string {
  return [
    `port = ${port}`,
    "listen_addresses = '127.0.0.1'",
    `unix_socket_directories = '${socketDir}'`,
    'wal_level = replica',
    'max_wal_senders = 5',
    'wal_keep_size = 256MB',
    'hot_standby = on',
    'hot_standby_feedback = on',
    'max_connections = 60',
    'shared_buffers = 32MB',
    // A scratch cluster of a test: durability against a power cut is not what it tests.
    'fsync = off',
    'full_page_writes = off',
    "log_min_messages = 'warning'",
    '',
  ].join('\n');
}

async function query(url: string, text: string): Promise<pg.QueryResult> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 });
  await client.connect();
  try {
    return await client.query(text);
  } finally {
    await client.end().catch(() => undefined);
  }
}

export async function startReplicaPair(): Promise<ReplicaPair> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ugs-replica-pair-'));
  if (asRoot) spawnSync('chown', ['postgres:postgres', dir]);
  const primaryDir = path.join(dir, 'primary');
  const standbyDir = path.join(dir, 'standby');
  const [primaryPort, standbyPort] = await freePorts(2);
  const started = new Set<string>();
  // A test process that exits without stop() must not leave the servers running.
  const reap = () => {
    for (const data of started) spawnSync(...pgCommand('pg_ctl', ['-D', data, 'stop', '-m', 'immediate']));
    fs.rmSync(dir, { recursive: true, force: true });
  };
  process.once('exit', reap);
  const start = async (data: string) => {
    await run('pg_ctl', ['-D', data, '-l', path.join(dir, `${path.basename(data)}.log`), '-w', '-t', '60', 'start']);
    started.add(data);
  };
  const stopServer = async (data: string) => {
    if (!started.has(data)) return;
    await run('pg_ctl', ['-D', data, '-w', '-t', '60', 'stop', '-m', 'immediate']);
    started.delete(data);
  };
  const primaryUrl = `postgres://postgres@127.0.0.1:${primaryPort}/${DATABASE}`;
  const replicaUrl = `postgres://postgres@127.0.0.1:${standbyPort}/${DATABASE}`;
  try {
    await run('initdb', ['-D', primaryDir, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--locale=C.UTF-8', '--no-sync']);
    fs.appendFileSync(path.join(primaryDir, 'postgresql.conf'), settings(primaryPort, dir));
    await start(primaryDir);
    await query(`postgres://postgres@127.0.0.1:${primaryPort}/postgres`, `create database ${DATABASE}`);
    await run('pg_basebackup', [
      '-h',
      '127.0.0.1',
      '-p',
      String(primaryPort),
      '-U',
      'postgres',
      '-D',
      standbyDir,
      '-R',
      '-X',
      'stream',
      '--checkpoint=fast',
      '--no-sync',
    ]);
    // The standby's copy of postgresql.conf names the primary's port: a later line wins.
    fs.appendFileSync(path.join(standbyDir, 'postgresql.conf'), settings(standbyPort, dir));
    await start(standbyDir);
    await eventually('the standby accepts connections to the database', () =>
      query(replicaUrl, 'select pg_is_in_recovery() as standby').then(
        (result) => result.rows[0].standby === true,
        () => false,
      ),
    );
  } catch (err) {
    reap();
    process.removeListener('exit', reap);
    throw err;
  }

  const replayPaused = async () => (await query(replicaUrl, 'select pg_get_wal_replay_pause_state() as state')).rows[0].state === 'paused';
  return {
    primaryUrl,
    replicaUrl,
    stopPrimary: () => stopServer(primaryDir),
    startPrimary: async () => {
      if (!started.has(primaryDir)) await start(primaryDir);
    },
    async pauseReplay() {
      await query(replicaUrl, 'select pg_wal_replay_pause()');
      await eventually('the standby says its replay is paused', replayPaused);
    },
    async resumeReplay() {
      await query(replicaUrl, 'select pg_wal_replay_resume()');
      await eventually('the standby says its replay runs', async () => !(await replayPaused()));
    },
    async caughtUp() {
      const { rows } = await query(primaryUrl, 'select pg_current_wal_insert_lsn()::text as lsn');
      await eventually(`the standby replays up to ${rows[0].lsn}`, async () => {
        const replayed = await query(replicaUrl, `select pg_last_wal_replay_lsn() >= '${rows[0].lsn}'::pg_lsn as done`);
        return replayed.rows[0].done === true;
      });
    },
    async stop() {
      await stopServer(standbyDir).catch(() => undefined);
      await stopServer(primaryDir).catch(() => undefined);
      fs.rmSync(dir, { recursive: true, force: true });
      process.removeListener('exit', reap);
    },
  };
}
