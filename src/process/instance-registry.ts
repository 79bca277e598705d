// The instance registry (docs/operations.md, "Upgrades, migrations and rollback"): every server
// process records itself in the database it serves, with the release it runs, the last
// migration its code knows, and the settings that every instance of one database must share,
// and keeps that row alive with a heartbeat. Two readers:
//   - `ugs migrate --contract` refuses while an instance whose code does not know a pending
//     contract change is alive (refuseContractWhileOlderAlive), and `ugs instances` lists them;
//   - each instance warns when a live one disagrees on a shared setting: with
//     UGS_WEBHOOK_ALLOW_PRIVATE false on one and true on another, the first takes the others'
//     deliveries to private addresses and fails them as private.
// Releases before 0.2.0 do not register: the contract step cannot see them (docs/operations.md).
import crypto from 'node:crypto';
import os from 'node:os';
import type { Kysely } from 'kysely';
import type { FastifyBaseLogger } from 'fastify';
import type { Config } from '../config.ts';
import type { DatabaseHandle } from '../db/database.ts';
import type { Database } from '../db/schema.ts';
import { lastKnownChange, SchemaRefused } from '../db/migrate.ts';
import { singleWrite } from '../db/transaction.ts';
import type { SchemaChange } from '../db/schema-changes.ts';
import { BackgroundLoop } from '../foundations/background-loop.ts';
import { SERVICE_VERSION } from '../foundations/version.ts';
import { deleteInstance, deleteInstancesSeenBefore, insertInstance, instancesSeenSince, touchInstance, type InstanceRow } from './instances.repository.ts';

/** How often an instance says it is alive. */
export const HEARTBEAT_MS = 10_000;
/** An instance not heard from for this long is gone (six heartbeats: a paused or overloaded process is not counted gone). */
export const GONE_AFTER_MS = 60_000;
/** Rows of instances gone for this long are removed. */
const FORGET_AFTER_MS = 24 * 3600_000;

/** The settings that every instance of one database must share, by the variable that sets each. */
export type SharedSettings = Record<string, boolean | string | number>;

export function sharedSettings(config: Pick<Config, 'webhookAllowPrivate'>): SharedSettings {
  return { UGS_WEBHOOK_ALLOW_PRIVATE: config.webhookAllowPrivate };
}

/** Why each shared setting must be alike, for the warning. */
const WHY: Record<string, string> = {
  UGS_WEBHOOK_ALLOW_PRIVATE:
    "an instance set to false takes the others' deliveries to private addresses and fails them as private, and one set to true delivers what the others refuse",
};

const label = (row: Pick<InstanceRow, 'host' | 'pid' | 'version'>) => `${row.host}:${row.pid} (${row.version})`;

/** The live instances (heartbeat within GONE_AFTER_MS of `now`). */
export async function liveInstances(db: Kysely<Database>, now = new Date()): Promise<InstanceRow[]> {
  return instancesSeenSince(db, new Date(now.getTime() - GONE_AFTER_MS).toISOString());
}

/**
 * The contract step's check (db/migrate.ts calls it before a contract change runs): every live
 * instance must run code that knows each pending change, else one line names them.
 */
export async function refuseContractWhileOlderAlive(db: Kysely<Database>, pending: SchemaChange[]): Promise<void> {
  const live = await liveInstances(db);
  const first = pending.map((change) => change.name).sort()[0];
  const older = live.filter((row) => row.schema < first);
  if (older.length === 0) return;
  throw new SchemaRefused(
    `not contracting (${pending.map((change) => change.name).join(', ')}): ${older.length} live instance(s) run code that still needs what it removes: ` +
      `${older.map(label).join(', ')}; upgrade or stop them first (ugs instances lists them; one not heard from for ${GONE_AFTER_MS / 1000} s counts as gone)`,
  );
}

/** The lines that say which live instances disagree with `mine` on a shared setting. */
export function disagreements(mine: SharedSettings, others: InstanceRow[]): string[] {
  const lines: string[] = [];
  for (const [name, value] of Object.entries(mine)) {
    const differ = others.filter((row) => {
      const theirs = (JSON.parse(row.settings) as SharedSettings)[name];
      return theirs !== undefined && theirs !== value;
    });
    if (differ.length === 0) continue;
    const theirs = differ.map((row) => `${label(row)} has ${String((JSON.parse(row.settings) as SharedSettings)[name])}`).join(', ');
    lines.push(
      `instances on this database disagree on ${name}: this one has ${String(value)}, ${theirs}; ${WHY[name] ?? 'set it alike everywhere'}: set it alike on every instance`,
    );
  }
  return lines;
}

/** This process's row in the registry, from its start to its shutdown. */
export class InstanceRegistry {
  readonly id = crypto.randomUUID();
  /** The heartbeat: every HEARTBEAT_MS. */
  private readonly loop: BackgroundLoop;
  private warned = '';
  private readonly row: InstanceRow;

  constructor(
    private readonly database: DatabaseHandle,
    settings: SharedSettings,
    private readonly log: Pick<FastifyBaseLogger, 'warn'>,
    onError: (err: unknown, what: string) => void,
  ) {
    this.loop = new BackgroundLoop({ name: 'instance registry', what: 'instance heartbeat', pass: () => this.beat(), next: () => HEARTBEAT_MS, onError });
    const at = new Date().toISOString();
    this.row = {
      id: this.id,
      host: os.hostname(),
      pid: process.pid,
      version: SERVICE_VERSION,
      schema: lastKnownChange(database.dialect),
      settings: JSON.stringify(settings),
      started_at: at,
      seen_at: at,
    };
  }

  async start(): Promise<void> {
    await singleWrite(this.database, () => insertInstance(this.database.db, this.row));
    await this.compare();
    this.loop.start(HEARTBEAT_MS);
  }

  /** Stops the heartbeat (waiting for one running: it could write the row again) and deletes the row. */
  async stop(): Promise<void> {
    await this.loop.stop();
    await singleWrite(this.database, () => deleteInstance(this.database.db, this.id)).catch(() => undefined); // a database that is gone forgets it anyway
  }

  private async beat(): Promise<void> {
    const now = new Date();
    this.row.seen_at = now.toISOString();
    const db = this.database.db;
    if (!(await singleWrite(this.database, () => touchInstance(db, this.id, this.row.seen_at))))
      await singleWrite(this.database, () => insertInstance(db, this.row));
    await singleWrite(this.database, () => deleteInstancesSeenBefore(db, new Date(now.getTime() - FORGET_AFTER_MS).toISOString()));
    await this.compare();
  }

  /** Warns when the disagreement changes (once at start, then only when another instance joins it or it ends). */
  private async compare(): Promise<void> {
    const others = (await liveInstances(this.database.db)).filter((row) => row.id !== this.id);
    const lines = disagreements(JSON.parse(this.row.settings) as SharedSettings, others);
    const key = lines.join('\n');
    if (key !== this.warned) for (const line of lines) this.log.warn({ instances: others.length + 1 }, line);
    this.warned = key;
  }
}
