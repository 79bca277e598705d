// Bulk work on SQLite that gives the event loop a turn between its statements.
//
// better-sqlite3 runs a statement synchronously, and a transaction's statements follow each
// other in microtasks: a part of a bulk upsert, a batch of a tag's rename or of the event
// sequencer held the event loop for its whole length. Whatever else the process had to do
// waited meanwhile, even work that needs no database: a webhook delivery's request and answer
// need a few turns of the loop each, and under one account's bulk work another account's
// deliveries went out a few a second. With a turn between statements, the other work of the
// process runs between them; the transaction keeps the connection (and SQLite's write lock)
// throughout, as before. PostgreSQL's statements wait for the network anyway: nothing to do.
import type { Kysely, KyselyPlugin, PluginTransformQueryArgs, PluginTransformResultArgs, QueryResult, RootOperationNode, UnknownRow } from 'kysely';
import type { Dialect } from './database.ts';
import type { Database } from './schema.ts';

/** The longest a bulk transaction runs on without a turn of the event loop. */
const WORK_BETWEEN_TURNS_MS = 3;

/** One per transaction: it gives the loop a turn after a statement once the work since the last turn reached WORK_BETWEEN_TURNS_MS. */
class TurnsWhileWorking implements KyselyPlugin {
  private since = performance.now();

  transformQuery(args: PluginTransformQueryArgs): RootOperationNode {
    return args.node;
  }

  async transformResult(args: PluginTransformResultArgs): Promise<QueryResult<UnknownRow>> {
    if (performance.now() - this.since >= WORK_BETWEEN_TURNS_MS) {
      await new Promise((resolve) => setImmediate(resolve));
      this.since = performance.now();
    }
    return args.result;
  }
}

/**
 * `db` (a transaction) as bulk work uses it: on SQLite, giving the event loop a turn after a
 * statement whenever it has worked WORK_BETWEEN_TURNS_MS since the last. Not after every
 * statement: each turn keeps the connection, which the process's other writes wait for, a
 * little longer.
 */
export function givingTurns(db: Kysely<Database>, dialect: Dialect): Kysely<Database> {
  return dialect === 'sqlite' ? db.withPlugin(new TurnsWhileWorking()) : db;
}
