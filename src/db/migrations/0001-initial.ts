// Frozen in time: a migration never imports application code, so it stays what it was
// when it first ran. The two dialects differ only in how an ever-increasing id is declared.
import { sql } from '../kysely.ts';
import type { Kysely, Migration } from 'kysely';
import type { Dialect } from '../database.ts';

export function initial(dialect: Dialect): Migration {
  // SQLite's AUTOINCREMENT (unlike a plain rowid) never hands out an id twice, even after a
  // delete of the highest row; PostgreSQL identities never go back either.
  const serialId = (db: Kysely<unknown>, table: string, column: string) =>
    db.schema
      .createTable(table)
      .addColumn(column, dialect === 'sqlite' ? 'integer' : 'bigint', (c) =>
        dialect === 'sqlite' ? c.primaryKey().autoIncrement() : c.primaryKey().generatedAlwaysAsIdentity(),
      );

  return {
    async up(db: Kysely<unknown>) {
      await serialId(db, 'accounts', 'id')
        .addColumn('slug', 'text', (c) => c.notNull().unique())
        .addColumn('created_at', 'text', (c) => c.notNull())
        .execute();

      await serialId(db, 'api_tokens', 'id')
        .addColumn('account_id', 'bigint', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        .addColumn('name', 'text')
        .addColumn('token_hash', 'text', (c) => c.notNull().unique())
        .addColumn('token_start', 'text', (c) => c.notNull())
        .addColumn('scopes', 'text', (c) => c.notNull())
        .addColumn('allowed_environment', 'text')
        .addColumn('default_environment', 'text', (c) => c.notNull())
        .addColumn('expires_at', 'text')
        .addColumn('revoked_at', 'text')
        .addColumn('created_at', 'text', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('api_tokens_account').on('api_tokens').columns(['account_id', 'id']).execute();

      await serialId(db, 'user_groups', 'team_id')
        .addColumn('account_id', 'bigint', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
        .addColumn('environment', 'text', (c) => c.notNull().check(sql`environment in ('Customer', 'Testing')`))
        .addColumn('provided_id', 'text', (c) => c.notNull())
        .addColumn('name', 'text', (c) => c.notNull())
        .addColumn('mapping', 'text')
        .addColumn('properties', 'text')
        .addColumn('is_demo_group', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('token_hash', 'text', (c) => c.notNull().unique())
        .addColumn('token_ciphertext', 'text', (c) => c.notNull())
        .addColumn('token_generation', 'integer', (c) => c.notNull().defaultTo(1))
        .addColumn('created_at', 'text', (c) => c.notNull())
        .addColumn('updated_at', 'text', (c) => c.notNull())
        // The identity of a user group: one per (account, environment, caller's id).
        .addUniqueConstraint('user_groups_identity', ['account_id', 'environment', 'provided_id'])
        .execute();
      // Keyset pagination walks team_id inside one account and environment.
      await db.schema.createIndex('user_groups_listing').on('user_groups').columns(['account_id', 'environment', 'team_id']).execute();

      await db.schema
        .createTable('retired_tokens')
        .addColumn('token_hash', 'text', (c) => c.primaryKey())
        .addColumn('team_id', 'bigint', (c) => c.notNull().references('user_groups.team_id').onDelete('cascade'))
        .addColumn('expires_at', 'text', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('retired_tokens_team').on('retired_tokens').column('team_id').execute();

      await serialId(db, 'audit_log', 'id')
        .addColumn('account_id', 'bigint', (c) => c.notNull())
        .addColumn('subject_type', 'text', (c) => c.notNull())
        .addColumn('subject_id', 'text', (c) => c.notNull())
        .addColumn('environment', 'text')
        .addColumn('provided_id', 'text')
        .addColumn('action', 'text', (c) => c.notNull())
        .addColumn('changed_fields', 'text')
        .addColumn('actor_token_id', 'bigint')
        .addColumn('request_id', 'text')
        .addColumn('created_at', 'text', (c) => c.notNull())
        .execute();
      await db.schema.createIndex('audit_log_subject').on('audit_log').columns(['account_id', 'environment', 'provided_id', 'id']).execute();
    },
  };
}
