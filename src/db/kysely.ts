// Kysely's values (classes, `sql`), loaded from its CommonJS build. Node's ESM loader opens
// every file of a module graph at once, and Kysely's 279 files alone nearly fill an
// open-files limit of 256: `npm start` under `ulimit -n 256` died with EMFILE before it
// listened. require() opens them one at a time. Types still come from 'kysely' itself
// (`import type` loads nothing); test/architecture.test.ts keeps value imports here.
import { createRequire } from 'node:module';
import type * as KyselyModule from 'kysely';

const kysely = createRequire(import.meta.url)('kysely') as typeof KyselyModule;

export const { Migrator, PostgresAdapter, PostgresDialect, SqliteDialect, sql } = kysely;

/** The database handle: the class to construct, and its type. */
export const Kysely = kysely.Kysely;
export type Kysely<DB> = KyselyModule.Kysely<DB>;
