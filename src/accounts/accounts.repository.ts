import { BoundedMap } from '../foundations/bounded-map.ts';
import type { Kysely } from 'kysely';
import type { AccountRow, Database } from '../db/schema.ts';
import { dialectOf, type PageViewReads } from '../db/database.ts';

export function findAccountBySlug(db: Kysely<Database>, slug: string): Promise<AccountRow | undefined> {
  return db.selectFrom('accounts').selectAll().where('slug', '=', slug).executeTakeFirst();
}

/** Creates the account unless it exists; returns it either way and whether this call created it. */
export async function ensureAccount(db: Kysely<Database>, slug: string, now: Date): Promise<{ account: AccountRow; created: boolean }> {
  const inserted = await db
    .insertInto('accounts')
    .values({ slug, created_at: now.toISOString() })
    .onConflict((oc) => oc.column('slug').doNothing())
    .returningAll()
    .executeTakeFirst();
  if (inserted) return { account: inserted, created: true };
  const existing = await findAccountBySlug(db, slug);
  if (!existing) throw new Error(`account ${slug} vanished while being created`);
  return { account: existing, created: false };
}

/**
 * The account, locked until the transaction ends: changes to its API tokens are serialized,
 * so two admin tokens revoking each other at once cannot both see the other still active.
 * SQLite's write transactions are serialized already (BEGIN IMMEDIATE).
 */
export function lockAccount(trx: Kysely<Database>, accountId: number): Promise<AccountRow> {
  return trx
    .selectFrom('accounts')
    .selectAll()
    .where('id', '=', accountId)
    .$if(dialectOf(trx) === 'postgres', (q) => q.forUpdate())
    .executeTakeFirstOrThrow();
}

export async function countAccounts(db: Kysely<Database>): Promise<number> {
  const row = await db
    .selectFrom('accounts')
    .select((eb) => eb.fn.countAll<number | string>().as('n'))
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

export function listAccounts(db: Kysely<Database>): Promise<AccountRow[]> {
  return db.selectFrom('accounts').selectAll().orderBy('id').execute();
}

/** The slugs of accounts by id and their ids by slug, each read once: neither ever changes. */
export class AccountSlugs {
  private readonly slugs = new BoundedMap<number, string>(10_000);
  private readonly ids = new BoundedMap<string, number>(10_000);

  /** Reads on `db`, or through a page view's reads (a replica may answer: docs/api.md, "Reads from replicas"). */
  private readonly run: <T>(read: (db: Kysely<Database>) => Promise<T>) => Promise<T>;

  constructor(source: Kysely<Database> | Pick<PageViewReads, 'shared'>) {
    this.run = 'shared' in source ? (read) => source.shared(read) : (read) => read(source);
  }

  async get(accountId: number): Promise<string> {
    let slug = this.slugs.get(accountId);
    if (slug === undefined) {
      slug = (await this.run((db) => db.selectFrom('accounts').select('slug').where('id', '=', accountId).executeTakeFirstOrThrow())).slug;
      this.slugs.set(accountId, slug);
    }
    return slug;
  }

  /** The id of the account an embed token names; undefined if there is none (an unknown slug is not remembered). */
  async idOf(slug: string): Promise<number | undefined> {
    let id = this.ids.get(slug);
    if (id === undefined) {
      id = (await this.run((db) => findAccountBySlug(db, slug)))?.id;
      if (id !== undefined) this.ids.set(slug, id);
    }
    return id;
  }
}
