// What a request costs the database, beside what it costs the server (docs/performance.md,
// "Reading the JSON"): the statements the server sent for it (each one round trip: the hot
// reads of one turn go as one statement, so a batch counts once for all its requests), and on
// PostgreSQL the CPU time of the backends that served the server's connections, read from
// /proc/<pid>/stat like the server's own (Linux, and only when PostgreSQL runs on this machine).
// And `--plain-index`: the index an operator adds first, made on the live table.
import pg from 'pg';
import { sql } from '../src/db/kysely.ts';
import { openMigratedDatabase } from '../src/process/runtime.ts';
import { cpuSeconds, httpRequest } from './processes.ts';

/** The statements the server has sent, by its /metrics: the count of every ugs_db_query_duration_seconds series. */
export async function statementsSent(baseUrl: string): Promise<number> {
  const metrics = await httpRequest(baseUrl, { method: 'GET', path: '/metrics', headers: {} });
  let total = 0;
  for (const line of metrics.body.split('\n')) {
    if (line.startsWith('ugs_db_query_duration_seconds_count{')) total += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return total;
}

/** The database's CPU time over a measurement: the backends of the bench's database, sampled before and after. */
export interface DatabaseCpu {
  /** Seconds of CPU the backends used meanwhile, or null when they are not processes of this machine (or not PostgreSQL). */
  stop(): Promise<number | null>;
}

/**
 * PostgreSQL: starts counting the CPU time of every client backend connected to the bench's
 * database but this counter's own (the server's pool; the bench's other connections sit idle
 * while it measures). A backend that connects during the measurement counts from its first
 * sample; one that leaves, up to its last. SQLite runs inside the server: null.
 */
export async function startDatabaseCpu(databaseUrl: string): Promise<DatabaseCpu> {
  if (!databaseUrl.startsWith('postgres')) return { stop: async () => null };
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  const backends = async () =>
    (
      await client.query<{ pid: number }>(
        `select pid from pg_stat_activity where datname = current_database() and backend_type = 'client backend' and pid <> pg_backend_pid()`,
      )
    ).rows.map((row) => row.pid);
  const first = await backends();
  const before = cpuSeconds(first);
  return {
    async stop() {
      try {
        const pids = [...new Set([...first, ...(await backends())])];
        const after = cpuSeconds(pids);
        if (pids.length > 0 && after.size === 0) return null; // another machine's processes
        let total = 0;
        for (const pid of pids) total += (after.get(pid) ?? before.get(pid) ?? 0) - (before.get(pid) ?? 0);
        return total;
      } finally {
        await client.end();
      }
    },
  };
}

/** The index `--plain-index` makes: the first one an operator or a reporting tool adds (docs/operations.md, "Indexes you may add"). */
export const PLAIN_INDEX = 'create index bench_plain_index on user_groups (account_id, environment, team_id)';

/** Makes PLAIN_INDEX on the live table, as an operator would, while the server runs. */
export async function makePlainIndex(databaseUrl: string): Promise<void> {
  const { handle } = await openMigratedDatabase({ databaseUrl });
  try {
    await sql.raw(PLAIN_INDEX).execute(handle.db);
  } finally {
    await handle.close();
  }
}
