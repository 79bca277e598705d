// A highly available PostgreSQL on this machine, from Debian's packages: one etcd, two Patroni
// nodes (PostgreSQL 15, synchronous replication) and HAProxy with a read-write port (the node
// whose Patroni answers /primary) and a read-only port (a node answering /replica, else one answering /read-only). The setup docs/deployment.md
// describes ("Highly available PostgreSQL"), small and fast: the failover tests
// (test/ha-failover.test.ts, through test/helpers/ha-cluster.ts) and the failover benchmark
// (bench/failover.ts) run on it. Everything lives in one temporary directory; every process
// started here has its working directory in it, and stop() ends them all (and, at the exit of
// this process, whatever is left), PostgreSQL's backends included.
import { spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';

export const PATRONI = '/usr/bin/patroni';
export const ETCD = '/usr/bin/etcd';
export const HAPROXY = '/usr/sbin/haproxy';
export const POSTGRES_BIN = '/usr/lib/postgresql/15/bin';

/** What is missing to run a cluster here ('' when nothing is), said as how to get it. */
export function haClusterMissing(): string {
  const missing = [
    [PATRONI, 'patroni'],
    [ETCD, 'etcd-server'],
    [HAPROXY, 'haproxy'],
    [path.join(POSTGRES_BIN, 'postgres'), 'postgresql-15'],
  ].filter(([file]) => !fs.existsSync(file));
  if (missing.length === 0) return '';
  return `no ${missing.map(([file]) => file).join(', ')} (apt-get install ${missing.map(([, pkg]) => pkg).join(' ')})`;
}

/**
 * Patroni's timings, small for a test and still sane on a loaded machine: the leader key lives
 * `ttl` seconds (a lost primary is replaced after at most that), each node runs its loop every
 * `loopWait` seconds, and gives up on etcd or PostgreSQL after `retryTimeout`. Patroni needs
 * ttl >= loop_wait + 2 * retry_timeout, or a slow loop loses the leader key by itself.
 */
export const PATRONI_TIMINGS = { ttl: 10, loopWait: 1, retryTimeout: 3 } as const;

/**
 * HAProxy's health checks and timeouts (docs/deployment.md, "Highly available PostgreSQL"):
 * a node is checked every 500 ms and taken out after 2 failed checks, back after 1; when it is
 * taken out, the sessions through it are cut; a connection finds its node within 1 s or fails.
 */
export const HAPROXY_SETTINGS = {
  check: 'inter 500ms fastinter 250ms downinter 500ms fall 2 rise 1 on-marked-down shutdown-sessions',
  connectTimeout: '1s',
  queueTimeout: '1s',
  checkTimeout: '1s',
} as const;

export interface HaNode {
  name: string;
  pgPort: number;
  restPort: number;
  /** postgres://… straight to this node's PostgreSQL, not through HAProxy. */
  url(database?: string): string;
  /** Whether its Patroni process runs (killed or stopped: false). */
  running(): boolean;
  /** Everything its Patroni (and the PostgreSQL it started) printed so far. */
  output(): string;
}

export interface PatroniMember {
  name: string;
  role: string;
  state: string;
  host: string;
  port: number;
  api_url: string;
  timeline?: number;
  lag?: number | string;
}

export interface Healthy {
  leader: HaNode;
  replica: HaNode;
}

export interface HaCluster {
  dir: string;
  nodes: HaNode[];
  /** postgres://… through HAProxy's read-write port (the primary). */
  rwUrl(database?: string): string;
  /** postgres://… through HAProxy's read-only port (the replica; the primary while no replica is up). */
  roUrl(database?: string): string;
  /** Patroni's GET /cluster, asked of any node that answers. */
  members(): Promise<PatroniMember[]>;
  /**
   * Waits (up to `timeoutMs`) for: a leader that takes writes, a synchronous standby that
   * streams from it (Patroni's /cluster and the leader's pg_stat_replication), and HAProxy
   * routing its read-write port to the leader and its read-only port to the standby.
   */
  waitForHealthy(timeoutMs?: number): Promise<Healthy>;
  /** Waits until the read-write port reaches a node that takes writes, and says which. */
  waitForPrimary(timeoutMs?: number): Promise<HaNode>;
  /** A planned switchover to the synchronous standby (POST /switchover), once it is done. */
  switchover(): Promise<{ from: HaNode; to: HaNode }>;
  /** kill -9 of the primary's Patroni and postmaster, at once: the node lost. */
  killPrimary(): Promise<HaNode>;
  /** Starts a killed or stopped node's Patroni again (it rejoins as a replica, with pg_rewind if needed). */
  startNode(node: HaNode): Promise<void>;
  /** Starts every node that is not running, and waits for the cluster to be healthy again. */
  restoreNodes(timeoutMs?: number): Promise<Healthy>;
  /** pg_wal_replay_pause() / pg_wal_replay_resume() on the replica (the node the read-only port reaches). */
  pauseReplay(node?: HaNode): Promise<HaNode>;
  resumeReplay(node?: HaNode): Promise<HaNode>;
  /** Stops everything (HAProxy, Patroni, PostgreSQL, etcd) and removes the directory. Idempotent. */
  stop(): Promise<void>;
  /** The last lines of every process's output, for a failure's message. */
  logTail(lines?: number): string;
  /** What the harness did and saw, with times: the requests it made, when each failure began and ended. */
  timeline: string[];
}

export interface HaClusterOptions {
  /** Ports to take a block of 10 free ones from (default 22000–22999). */
  portRange?: [number, number];
  /** Keep the directory after stop() (its logs), and say where it is. */
  keep?: boolean;
  /** Called with each process's output as it comes, prefixed with its name. */
  onOutput?: (line: string) => void;
}

const PG_USER = 'postgres';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Processes whose working directory is in `dir` (PostgreSQL's backends work in their data directory). */
function processesIn(dir: string): number[] {
  const pids: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cwd = fs.readlinkSync(`/proc/${entry}/cwd`);
      if (cwd === dir || cwd.startsWith(`${dir}/`)) pids.push(Number(entry));
    } catch {
      // gone, or not ours to read
    }
  }
  return pids;
}

function killAllIn(dir: string): number {
  const pids = processesIn(dir).filter((pid) => pid !== process.pid);
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  return pids.length;
}

const liveClusters = new Set<string>();
// Whatever ends this process (a failed test under --test-force-exit, an exception), no
// etcd, Patroni, PostgreSQL or HAProxy of it stays behind.
process.once('exit', () => {
  for (const dir of liveClusters) killAllIn(dir);
});

function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/** Ten consecutive free ports in `range`, from a random place in it (parallel runs rarely collide). */
async function freePortBlock([low, high]: [number, number], size = 10): Promise<number[]> {
  const blocks = Math.floor((high - low + 1) / size);
  const start = crypto.randomInt(blocks);
  for (let i = 0; i < blocks; i++) {
    const base = low + ((start + i) % blocks) * size;
    const ports = Array.from({ length: size }, (_, k) => base + k);
    let free = true;
    for (const port of ports) if (!(await portIsFree(port))) free = false;
    if (free) return ports;
  }
  throw new Error(`no ${size} free consecutive ports in ${low}-${high}`);
}

/** The uid and gid of the `postgres` user: PostgreSQL refuses to run as root. */
function postgresUser(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const line = fs
    .readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((l) => l.startsWith(`${PG_USER}:`));
  if (!line) throw new Error(`running as root, and there is no ${PG_USER} user for PostgreSQL to run as`);
  const [, , uid, gid] = line.split(':');
  return { uid: Number(uid), gid: Number(gid) };
}

function chownTree(dir: string, owner: { uid: number; gid: number } | undefined): void {
  if (!owner) return;
  fs.chownSync(dir, owner.uid, owner.gid);
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const file = path.join(dir, entry.name);
    if (entry.isDirectory()) chownTree(file, owner);
    else fs.chownSync(file, owner.uid, owner.gid);
  }
}

interface Started {
  child: ChildProcess;
  output: string[];
  exited: Promise<void>;
}

function startProcess(
  name: string,
  command: string,
  args: string[],
  cwd: string,
  logFile: string,
  owner: { uid: number; gid: number } | undefined,
  onOutput: ((line: string) => void) | undefined,
): Started {
  const child = spawn(command, args, {
    cwd,
    env: { ...process.env, PATH: `/usr/bin:/bin:/usr/sbin:/sbin:${process.env.PATH ?? ''}`, LC_ALL: 'C.UTF-8', LANG: 'C.UTF-8' },
    stdio: ['ignore', 'pipe', 'pipe'],
    ...(owner ?? {}),
  });
  const output: string[] = [];
  const log = fs.createWriteStream(logFile, { flags: 'a' });
  const take = (chunk: Buffer) => {
    const text = chunk.toString();
    log.write(text);
    for (const line of text.split('\n')) {
      if (line === '') continue;
      output.push(line);
      onOutput?.(`${name}: ${line}`);
    }
    if (output.length > 5000) output.splice(0, output.length - 4000);
  };
  child.stdout!.on('data', take);
  child.stderr!.on('data', take);
  child.on('error', (err) => take(Buffer.from(`could not start ${command}: ${err.message}\n`)));
  const exited = new Promise<void>((resolve) =>
    child.once('close', (code, signal) => {
      take(Buffer.from(`[${name} exited: ${signal ?? code}]\n`));
      log.end();
      resolve();
    }),
  );
  return { child, output, exited };
}

async function until<T>(what: string, timeoutMs: number, probe: () => Promise<T | undefined | false>, logTail: () => string): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value) return value;
      last = value;
    } catch (err) {
      last = (err as Error).message;
    }
    if (Date.now() >= deadline) {
      throw new Error(`HA cluster: ${what}: not seen within ${timeoutMs} ms (last: ${JSON.stringify(last)})\n${logTail()}`);
    }
    await sleep(200);
  }
}

async function query<R extends pg.QueryResultRow>(url: string, sql: string, timeoutMs = 3000): Promise<R[]> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: timeoutMs, query_timeout: timeoutMs });
  client.on('error', () => undefined);
  await client.connect();
  try {
    return (await client.query<R>(sql)).rows;
  } finally {
    await client.end().catch(() => undefined);
  }
}

async function restJson(port: number, method: string, pathname: string, body?: unknown, timeoutMs = 3000): Promise<{ status: number; body: unknown }> {
  const response = await fetch(`http://127.0.0.1:${port}${pathname}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(timeoutMs),
  });
  const text = await response.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // plain text (POST /switchover answers with a sentence)
  }
  return { status: response.status, body: parsed };
}

function patroniConfig(scope: string, name: string, nodeDir: string, ports: { etcd: number; rest: number; pg: number }): Record<string, unknown> {
  return {
    scope,
    namespace: '/ugs-ha/',
    name,
    log: { level: 'INFO', format: '%(asctime)s %(levelname)s: %(message)s' },
    restapi: { listen: `127.0.0.1:${ports.rest}`, connect_address: `127.0.0.1:${ports.rest}` },
    etcd3: { hosts: [`127.0.0.1:${ports.etcd}`] },
    bootstrap: {
      dcs: {
        ttl: PATRONI_TIMINGS.ttl,
        loop_wait: PATRONI_TIMINGS.loopWait,
        retry_timeout: PATRONI_TIMINGS.retryTimeout,
        maximum_lag_on_failover: 1048576,
        // A commit is acknowledged once the standby has it too (docs/deployment.md, "Highly
        // available PostgreSQL"): the standby Patroni promotes never lacks an acknowledged write.
        synchronous_mode: true,
        postgresql: {
          use_pg_rewind: true,
          use_slots: true,
          parameters: {
            wal_level: 'replica',
            hot_standby: 'on',
            wal_log_hints: 'on',
            max_connections: 200,
            max_wal_senders: 10,
            max_replication_slots: 10,
            wal_keep_size: '128MB',
            // What a small test machine affords; a real node is sized for its load.
            shared_buffers: '64MB',
          },
        },
      },
      initdb: [{ encoding: 'UTF8' }, { locale: 'C.UTF-8' }, 'data-checksums'],
    },
    postgresql: {
      listen: `127.0.0.1:${ports.pg}`,
      connect_address: `127.0.0.1:${ports.pg}`,
      data_dir: path.join(nodeDir, 'data'),
      bin_dir: POSTGRES_BIN,
      pgpass: path.join(nodeDir, 'pgpass'),
      authentication: {
        superuser: { username: PG_USER, password: 'postgres' },
        replication: { username: 'replicator', password: 'replicator' },
        rewind: { username: 'rewinder', password: 'rewinder' },
      },
      // Only this machine can reach these ports; trust keeps the test free of passwords.
      pg_hba: ['local all all trust', 'host all all 127.0.0.1/32 trust', 'host replication all 127.0.0.1/32 trust'],
      parameters: { unix_socket_directories: nodeDir, logging_collector: 'off', log_min_messages: 'warning' },
    },
    // No watchdog device on a test machine; a production node should have one (Patroni's docs, "Watchdog support").
    watchdog: { mode: 'off' },
    tags: { nofailover: false, noloadbalance: false, clonefrom: false, nosync: false },
  };
}

function haproxyConfig(ports: { rw: number; ro: number; stats: number }, nodes: { name: string; pg: number; rest: number }[]): string {
  const servers = nodes.map((node) => `  server ${node.name} 127.0.0.1:${node.pg} maxconn 200 check port ${node.rest}`);
  return [
    'global',
    '  maxconn 1000',
    'defaults',
    '  mode tcp',
    '  retries 1',
    `  timeout connect ${HAPROXY_SETTINGS.connectTimeout}`,
    `  timeout queue ${HAPROXY_SETTINGS.queueTimeout}`,
    `  timeout check ${HAPROXY_SETTINGS.checkTimeout}`,
    // A pooled connection may sit idle for minutes: these only end a connection no one uses.
    '  timeout client 30m',
    '  timeout server 30m',
    'listen stats',
    '  mode http',
    `  bind 127.0.0.1:${ports.stats}`,
    '  stats enable',
    '  stats uri /',
    'listen rw',
    `  bind 127.0.0.1:${ports.rw}`,
    '  option httpchk OPTIONS /primary',
    '  http-check expect status 200',
    `  default-server ${HAPROXY_SETTINGS.check}`,
    ...servers,
    // The read-only port: a replica while one is up; else any node that serves reads (the
    // primary, or a standby being promoted), so that reads never find the port empty while a
    // node that could answer them is up (a switchover takes the standby out of /replica the
    // moment it takes the leader key, seconds before the old primary is back as a replica).
    'frontend ro',
    `  bind 127.0.0.1:${ports.ro}`,
    '  use_backend ro_replicas if { nbsrv(ro_replicas) gt 0 }',
    '  default_backend ro_any',
    'backend ro_replicas',
    '  balance roundrobin',
    '  option httpchk OPTIONS /replica',
    '  http-check expect status 200',
    `  default-server ${HAPROXY_SETTINGS.check}`,
    ...servers,
    'backend ro_any',
    '  option httpchk OPTIONS /read-only',
    '  http-check expect status 200',
    `  default-server ${HAPROXY_SETTINGS.check}`,
    ...servers,
    '',
  ].join('\n');
}

/** HAProxy's view: for each of its backends (rw, ro_replicas, ro_any), the servers it has up. */
async function haproxyUp(statsPort: number): Promise<Record<string, string[]>> {
  const response = await fetch(`http://127.0.0.1:${statsPort}/;csv`, { signal: AbortSignal.timeout(3000) });
  const lines = (await response.text()).split('\n');
  const header = lines[0].replace(/^# /, '').split(',');
  const [px, sv, status] = ['pxname', 'svname', 'status'].map((k) => header.indexOf(k));
  const up: Record<string, string[]> = { rw: [], ro_replicas: [], ro_any: [] };
  for (const line of lines.slice(1)) {
    const cells = line.split(',');
    if (!(cells[px] in up) || ['FRONTEND', 'BACKEND'].includes(cells[sv])) continue;
    if (cells[status]?.startsWith('UP')) up[cells[px]].push(cells[sv]);
  }
  return up;
}

/** Starts the cluster and waits until it is healthy (a leader, a streaming synchronous standby, HAProxy routing to both). */
export async function startHaCluster(options: HaClusterOptions = {}): Promise<HaCluster> {
  const missing = haClusterMissing();
  if (missing) throw new Error(`HA cluster: ${missing}`);
  const owner = postgresUser();
  const dir = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'ugs-ha-')));
  fs.chmodSync(dir, 0o755);
  liveClusters.add(dir);
  const ports = await freePortBlock(options.portRange ?? [22000, 22999]);
  const [etcdClient, etcdPeer, haRw, haRo, haStats] = ports;
  const nodePorts = [
    { name: 'node1', pg: ports[5], rest: ports[6] },
    { name: 'node2', pg: ports[7], rest: ports[8] },
  ];
  const scope = `ugs-ha-${crypto.randomBytes(3).toString('hex')}`;
  const processes = new Map<string, Started>();
  let stopped = false;
  const timeline: string[] = [];
  const note = (text: string) => {
    timeline.push(`${new Date().toISOString()} ${text}`);
    options.onOutput?.(`harness: ${text}`);
  };
  const logTail = (lines = 40) =>
    [
      `--- harness (last ${lines} lines)\n${timeline.slice(-lines).join('\n')}`,
      ...[...processes.entries()].map(([name, started]) => `--- ${name} (last ${lines} lines)\n${started.output.slice(-lines).join('\n')}`),
    ].join('\n');

  const start = (name: string, command: string, args: string[], cwd: string, asPostgres: boolean) => {
    fs.mkdirSync(cwd, { recursive: true });
    if (asPostgres) chownTree(cwd, owner);
    const started = startProcess(name, command, args, cwd, path.join(dir, `${name}.log`), asPostgres ? owner : undefined, options.onOutput);
    processes.set(name, started);
    return started;
  };

  const stop = async () => {
    if (stopped) return;
    stopped = true;
    // HAProxy first (no new connections), then the nodes (Patroni stops its PostgreSQL), then etcd.
    const ending = async (names: string[], signal: NodeJS.Signals) => {
      await Promise.all(
        names.map(async (name) => {
          const started = processes.get(name);
          if (!started || started.child.exitCode !== null || started.child.signalCode !== null) return;
          started.child.kill(signal);
          await Promise.race([started.exited, sleep(15_000)]);
        }),
      );
    };
    await ending(['haproxy'], 'SIGTERM');
    await ending(
      nodePorts.map((n) => n.name),
      'SIGTERM',
    );
    await ending(['etcd'], 'SIGTERM');
    // Whatever is left (a postmaster whose Patroni was killed, its orphaned backends).
    for (let i = 0; i < 20 && killAllIn(dir) > 0; i++) await sleep(100);
    liveClusters.delete(dir);
    if (options.keep) console.error(`HA cluster: kept ${dir}`);
    else fs.rmSync(dir, { recursive: true, force: true });
  };

  try {
    const etcdDir = path.join(dir, 'etcd');
    start(
      'etcd',
      ETCD,
      [
        '--name',
        'etcd1',
        '--data-dir',
        path.join(etcdDir, 'data'),
        '--listen-client-urls',
        `http://127.0.0.1:${etcdClient}`,
        '--advertise-client-urls',
        `http://127.0.0.1:${etcdClient}`,
        '--listen-peer-urls',
        `http://127.0.0.1:${etcdPeer}`,
        '--initial-advertise-peer-urls',
        `http://127.0.0.1:${etcdPeer}`,
        '--initial-cluster',
        `etcd1=http://127.0.0.1:${etcdPeer}`,
        '--initial-cluster-state',
        'new',
        '--logger',
        'zap',
        '--log-level',
        'warn',
      ],
      etcdDir,
      false,
    );
    await until(
      `etcd answering on ${etcdClient}`,
      30_000,
      async () => {
        const response = await fetch(`http://127.0.0.1:${etcdClient}/health`, { signal: AbortSignal.timeout(2000) });
        return response.ok && ((await response.json()) as { health: string }).health === 'true';
      },
      logTail,
    );

    const nodes: HaNode[] = nodePorts.map((ports) => {
      const nodeDir = path.join(dir, ports.name);
      fs.mkdirSync(nodeDir, { recursive: true });
      fs.writeFileSync(
        path.join(nodeDir, 'patroni.yml'),
        JSON.stringify(patroniConfig(scope, ports.name, nodeDir, { etcd: etcdClient, rest: ports.rest, pg: ports.pg }), null, 2),
      );
      chownTree(nodeDir, owner);
      return {
        name: ports.name,
        pgPort: ports.pg,
        restPort: ports.rest,
        url: (database = 'postgres') => `postgres://${PG_USER}@127.0.0.1:${ports.pg}/${database}`,
        running: () => {
          const started = processes.get(ports.name);
          return started !== undefined && started.child.exitCode === null && started.child.signalCode === null;
        },
        output: () => processes.get(ports.name)?.output.join('\n') ?? '',
      };
    });
    const nodeNamed = (name: string) => {
      const node = nodes.find((n) => n.name === name);
      if (!node) throw new Error(`HA cluster: no node ${name}`);
      return node;
    };
    const startPatroni = (node: HaNode) => {
      const nodeDir = path.join(dir, node.name);
      start(node.name, PATRONI, [path.join(nodeDir, 'patroni.yml')], nodeDir, true);
    };

    const members = async (): Promise<PatroniMember[]> => {
      let lastError: unknown;
      for (const node of nodes) {
        try {
          const answer = await restJson(node.restPort, 'GET', '/cluster');
          if (answer.status === 200) return (answer.body as { members: PatroniMember[] }).members;
        } catch (err) {
          lastError = err;
        }
      }
      throw new Error(`no Patroni answered GET /cluster: ${(lastError as Error)?.message}`);
    };

    const takesWrites = async (url: string) => {
      const [row] = await query<{ recovery: boolean; port: number }>(url, 'select pg_is_in_recovery() as recovery, inet_server_port() as port');
      return row.recovery ? undefined : nodes.find((n) => n.pgPort === row.port);
    };

    const rwUrl = (database = 'postgres') => `postgres://${PG_USER}@127.0.0.1:${haRw}/${database}`;
    const roUrl = (database = 'postgres') => `postgres://${PG_USER}@127.0.0.1:${haRo}/${database}`;

    const waitForHealthy = async (timeoutMs = 120_000): Promise<Healthy> => {
      let healthy: Healthy | undefined;
      await until(
        'a leader, a streaming synchronous standby, and HAProxy routing rw to the leader and ro to the standby',
        timeoutMs,
        async () => {
          const list = await members();
          const leader = list.find((m) => m.role === 'leader' && m.state === 'running');
          const standby = list.find((m) => m.role === 'sync_standby' && (m.state === 'running' || m.state === 'streaming'));
          if (!leader || !standby) return false;
          const streaming = await query<{ application_name: string }>(
            nodeNamed(leader.name).url(),
            "select application_name from pg_stat_replication where state = 'streaming' and sync_state = 'sync'",
          );
          if (!streaming.some((row) => row.application_name === standby.name)) return false;
          const up = await haproxyUp(haStats);
          if (up.rw.join() !== leader.name || up.ro_replicas.join() !== standby.name) return false;
          const [rwNode, roRow] = [
            await takesWrites(rwUrl()),
            (await query<{ port: number; recovery: boolean }>(roUrl(), 'select inet_server_port() as port, pg_is_in_recovery() as recovery'))[0],
          ];
          if (rwNode?.name !== leader.name || !roRow.recovery || roRow.port !== nodeNamed(standby.name).pgPort) return false;
          healthy = { leader: nodeNamed(leader.name), replica: nodeNamed(standby.name) };
          note(`healthy: ${leader.name} leads, ${standby.name} streams synchronously, HAProxy routes rw and ro to them`);
          return true;
        },
        logTail,
      );
      return healthy!;
    };

    const waitForPrimary = async (timeoutMs = 120_000) => {
      const primary = await until('the read-write port reaching a node that takes writes', timeoutMs, () => takesWrites(rwUrl()), logTail);
      note(`the read-write port reaches ${primary.name}, which takes writes`);
      return primary;
    };

    const currentReplica = async (): Promise<HaNode> => {
      const list = await members();
      const standby = list.find((m) => m.role === 'sync_standby' || m.role === 'replica');
      if (!standby) throw new Error(`HA cluster: no replica in ${JSON.stringify(list)}`);
      return nodeNamed(standby.name);
    };

    const cluster: HaCluster = {
      dir,
      nodes,
      rwUrl,
      roUrl,
      members,
      waitForHealthy,
      waitForPrimary,
      async switchover() {
        const { leader, replica } = await waitForHealthy();
        note(`switchover from ${leader.name} to ${replica.name} requested`);
        let answer: { status: number; body: unknown } | undefined;
        const started = Date.now();
        await until(
          `POST /switchover from ${leader.name} to ${replica.name} accepted`,
          60_000,
          async () => {
            answer = await restJson(leader.restPort, 'POST', '/switchover', { leader: leader.name, candidate: replica.name }, 60_000);
            note(`POST /switchover answered ${answer.status} ${JSON.stringify(answer.body)} after ${Date.now() - started} ms`);
            // 503/412 while the standby is not yet a candidate Patroni accepts: asked again.
            return answer.status === 200;
          },
          () => `${JSON.stringify(answer)}\n${logTail()}`,
        );
        await until(
          `${replica.name} taking writes through the read-write port`,
          60_000,
          async () => (await takesWrites(rwUrl()))?.name === replica.name,
          logTail,
        );
        note(`switchover done: ${replica.name} takes writes through the read-write port`);
        return { from: leader, to: replica };
      },
      async killPrimary() {
        const list = await members();
        const leader = list.find((m) => m.role === 'leader');
        if (!leader) throw new Error(`HA cluster: no leader to kill in ${JSON.stringify(list)}`);
        const node = nodeNamed(leader.name);
        const patroni = processes.get(node.name)!;
        const postmaster = Number(fs.readFileSync(path.join(dir, node.name, 'data', 'postmaster.pid'), 'utf8').split('\n')[0]);
        process.kill(postmaster, 'SIGKILL');
        patroni.child.kill('SIGKILL');
        note(`kill -9 of ${node.name}'s Patroni (${patroni.child.pid}) and postmaster (${postmaster})`);
        await patroni.exited;
        // The postmaster's backends notice it is gone and exit by themselves; no new connection
        // reaches them (the postmaster accepted those).
        return node;
      },
      async startNode(node) {
        if (node.running()) throw new Error(`HA cluster: ${node.name} is running`);
        // A killed node's backends may still be ending; PostgreSQL will not start beside them.
        await until(
          `the processes of ${node.name}'s killed PostgreSQL ending`,
          30_000,
          async () => processesIn(path.join(dir, node.name)).length === 0,
          logTail,
        );
        startPatroni(node);
        note(`${node.name}'s Patroni started again`);
      },
      async restoreNodes(timeoutMs = 180_000) {
        for (const node of nodes) if (!node.running()) await cluster.startNode(node);
        return waitForHealthy(timeoutMs);
      },
      async pauseReplay(node) {
        const replica = node ?? (await currentReplica());
        await query(replica.url(), 'select pg_wal_replay_pause()');
        note(`replay paused on ${replica.name}`);
        return replica;
      },
      async resumeReplay(node) {
        const replica = node ?? (await currentReplica());
        await query(replica.url(), 'select pg_wal_replay_resume()');
        note(`replay resumed on ${replica.name}`);
        return replica;
      },
      stop,
      logTail,
      timeline,
    };

    // The first node bootstraps the cluster alone (initdb), then the second clones it.
    startPatroni(nodes[0]);
    await until('node1 bootstrapping the cluster and taking writes', 120_000, async () => (await takesWrites(nodes[0].url()))?.name === 'node1', logTail);
    startPatroni(nodes[1]);
    const haDir = path.join(dir, 'haproxy');
    fs.mkdirSync(haDir, { recursive: true });
    const haproxyCfg = path.join(haDir, 'haproxy.cfg');
    fs.writeFileSync(
      haproxyCfg,
      haproxyConfig(
        { rw: haRw, ro: haRo, stats: haStats },
        nodePorts.map((n) => ({ name: n.name, pg: n.pg, rest: n.rest })),
      ),
    );
    start('haproxy', HAPROXY, ['-db', '-f', haproxyCfg], haDir, false);
    await waitForHealthy();
    return cluster;
  } catch (err) {
    await stop();
    throw err;
  }
}
