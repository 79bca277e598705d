// What an acknowledged write survives on PostgreSQL, from the primary's own settings
// (docs/api.md, "Concurrency and durability"): said in one line at start.
import { sql, type Kysely } from './kysely.ts';
import type { Database } from './schema.ts';

/** The primary's commit settings, as it reports them to the service's session. */
export interface CommitSettings {
  synchronousCommit: string;
  synchronousStandbyNames: string;
}

export async function commitSettings(db: Kysely<Database>): Promise<CommitSettings> {
  const { rows } = await sql<{
    commit: string;
    standbys: string;
  }>`select current_setting('synchronous_commit') as commit, current_setting('synchronous_standby_names') as standbys`.execute(db);
  return { synchronousCommit: rows[0].commit, synchronousStandbyNames: rows[0].standbys };
}

/** The values of synchronous_commit that wait for a synchronous standby, when one is named. */
const WAITS_FOR_STANDBY = new Set(['on', 'remote_apply', 'remote_write']);

/**
 * Whether a commit waits for a standby (synchronous replication), and what an acknowledged write
 * survives. Only a commit that a standby has too survives the loss of the primary's node.
 */
export function durabilityOf(settings: CommitSettings): { synchronous: boolean; level: 'info' | 'warn'; message: string } {
  const names = settings.synchronousStandbyNames.trim();
  if (names !== '' && WAITS_FOR_STANDBY.has(settings.synchronousCommit))
    return {
      synchronous: true,
      level: 'info',
      message: `PostgreSQL commits synchronously (synchronous_commit=${settings.synchronousCommit}, synchronous_standby_names=${names}): an acknowledged write survives the loss of the primary's node`,
    };
  if (settings.synchronousCommit === 'off')
    return {
      synchronous: false,
      level: 'warn',
      message:
        "PostgreSQL does not commit synchronously, and synchronous_commit=off: an acknowledged write may be lost even when PostgreSQL itself crashes, and with the loss of the primary's node",
    };
  return {
    synchronous: false,
    level: 'info',
    message: `PostgreSQL does not commit synchronously (synchronous_commit=${settings.synchronousCommit}, ${names === '' ? 'no synchronous_standby_names' : `synchronous_standby_names=${names}`}): an acknowledged write survives a crash of PostgreSQL or of this service, not the loss of the primary's node (its disk) or a failover to a standby that had not received it`,
  };
}
