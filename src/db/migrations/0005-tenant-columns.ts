// Frozen in time (see 0001). Every tenant table names its tenant in its own columns, so that
// every statement on it can carry the account and environment as explicit conditions
// (docs/security.md, "Tenant isolation"):
// - retired_tokens (a rotation's old token in its grace period) gains account_id and
//   environment, copied from its group. The table is small (one row per token in a grace
//   period) and rebuilt whole: SQLite adds a NOT NULL column only with a default, and a
//   default here would be a wrong account.
// - history entries of API tokens carry the environment the token is restricted to (null:
//   unrestricted), so that an admin restricted to one environment reads only those.
import { sql } from '../kysely.ts';
import type { Kysely, Migration } from 'kysely';
import type { Dialect } from '../database.ts';

export function tenantColumns(dialect: Dialect): Migration {
  return {
    async up(db: Kysely<unknown>) {
      const idType = dialect === 'sqlite' ? 'integer' : 'bigint';
      await db.schema
        .createTable('retired_tokens_new')
        .addColumn('token_hash', 'text', (c) => c.primaryKey())
        .addColumn('team_id', idType, (c) => c.notNull().references('user_groups.team_id').onDelete('cascade'))
        .addColumn('account_id', idType, (c) => c.notNull())
        .addColumn('environment', 'text', (c) => c.notNull())
        .addColumn('expires_at', 'text', (c) => c.notNull())
        .execute();
      await sql`insert into retired_tokens_new (token_hash, team_id, account_id, environment, expires_at)
        select retired_tokens.token_hash, retired_tokens.team_id, user_groups.account_id, user_groups.environment, retired_tokens.expires_at
        from retired_tokens join user_groups on user_groups.team_id = retired_tokens.team_id`.execute(db);
      await db.schema.dropTable('retired_tokens').execute();
      await db.schema.alterTable('retired_tokens_new').renameTo('retired_tokens').execute();
      // PostgreSQL named the new table's key after it; a query plan names the key's index.
      if (dialect === 'postgres') await sql`alter index retired_tokens_new_pkey rename to retired_tokens_pkey`.execute(db);
      // The name the index had (0001): a query plan names it.
      await db.schema.createIndex('retired_tokens_team').on('retired_tokens').column('team_id').execute();

      await sql`update audit_log set environment = (
          select api_tokens.allowed_environment from api_tokens where cast(api_tokens.id as text) = audit_log.subject_id
        ) where subject_type = 'api_token'`.execute(db);
    },
  };
}
