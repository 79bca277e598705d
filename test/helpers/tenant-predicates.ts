// The rule of docs/security.md, "Tenant isolation", checked on one captured statement: every
// reference to a tenant table is held to the caller's account by an explicit condition (a
// parameter that is the caller's account id, or a join to a row already held to it), and a
// caller restricted to one environment is held to it too. An index range (the "scope" text
// of the listing and search indexes) does not count: it is an optimisation.
//
// The statements are the service's own, so their spelling is known: Kysely's quoted
// identifiers ("user_groups"."account_id") and the repositories' raw SQL (user_groups.account_id).

export interface Statement {
  sql: string;
  parameters: readonly unknown[];
}

export interface Caller {
  accountId: number;
  /** The environment the caller's API token is restricted to, or null. */
  environment: 'Customer' | 'Testing' | null;
}

const TENANT_TABLES = [
  'user_groups',
  'user_group_tags',
  'group_tag_set',
  'retired_tokens',
  'audit_log',
  'api_tokens',
  'accounts',
  'event_outbox',
  'events',
  'event_heads',
  'webhook_endpoints',
  'webhook_deliveries',
  'webhook_attempts',
  'idempotency_keys',
  'event_streams',
  'heavy_operations',
];
/** Tables whose rows belong to a whole account, not to one environment of it. */
const ACCOUNT_TABLES = ['accounts', 'event_heads', 'idempotency_keys', 'event_streams', 'heavy_operations'];
const TABLE_REFERENCE = new RegExp(String.raw`\b(?:from|join|into|update)\s+"?(${TENANT_TABLES.join('|')})"?(?![\w.])`, 'gi');
const P = String.raw`(\$\d+|\?)`;
const COLUMN = (name: string) => String.raw`(?:"?\w+"?\.)?"?${name}"?`;

/**
 * Statements that find a tenant's row by a credential, before any account is known: the
 * secret (a token's hash) is what selects the row, and it selects one row of one account.
 */
const CREDENTIAL_LOOKUPS: { why: string; pattern: RegExp }[] = [
  { why: 'authentication: an API token by its hash', pattern: /^select [^;]* from "api_tokens" where "token_hash" = (\$1|\?)$/ },
  { why: 'the embed side: a group by its current token hash', pattern: /user_groups\.token_hash = (\$1|\?)|user_groups\.token_hash = k\.token_hash/ },
  { why: 'the embed side: a group by a retired token in its grace period', pattern: /from retired_tokens\s+where retired_tokens\.token_hash = (\$1|\?)/ },
  { why: 'the embed side: the account a verified embed token names', pattern: /^select [^;]* from "accounts" where "slug" = (\$1|\?)$/ },
];

/** The value of the placeholder at `offset` (PostgreSQL's $n, or SQLite's nth ?). */
function parameterAt(statement: Statement, offset: number, placeholder: string): unknown {
  if (placeholder.startsWith('$')) return statement.parameters[Number(placeholder.slice(1)) - 1];
  const before = statement.sql.slice(0, offset).split('?').length - 1;
  return statement.parameters[before];
}

/** The columns of `unnest(…) … as k(columns)` (a batched read), each with the array it is bound to. */
function batchColumns(statement: Statement): Map<string, unknown[]> {
  const columns = new Map<string, unknown[]>();
  const match = /unnest\(([^)]*)\)\s+with ordinality as k\(([^)]*)\)/.exec(statement.sql);
  if (!match) return columns;
  const placeholders = [...match[1].matchAll(/\$\d+/g)].map((m) => m[0]);
  match[2].split(',').forEach((name, i) => {
    if (placeholders[i]) columns.set(name.trim(), statement.parameters[Number(placeholders[i].slice(1)) - 1] as unknown[]);
  });
  return columns;
}

/** Each inserted row's value of `column`, or undefined when the insert does not set it. */
function insertedValues(statement: Statement, column: string): unknown[] | undefined {
  const match = /^insert into "?\w+"? \(([^)]*)\) values /.exec(statement.sql);
  if (!match) return undefined;
  const columns = match[1].split(',').map((c) => c.trim().replaceAll('"', ''));
  const index = columns.indexOf(column);
  if (index === -1 || statement.parameters.length % columns.length !== 0) return undefined;
  const values: unknown[] = [];
  for (let row = 0; row < statement.parameters.length / columns.length; row++) values.push(statement.parameters[row * columns.length + index]);
  return values;
}

const isAccount = (caller: Caller) => (value: unknown) => Number(value) === caller.accountId && value !== null && value !== '';
const inScope = (caller: Caller) => (value: unknown) => typeof value === 'string' && value.startsWith(`${caller.accountId}/`);

/** What is wrong with a statement under the rule, or an empty list. */
export function tenantViolations(statement: Statement, caller: Caller): string[] {
  const sql = statement.sql;
  const references = [...sql.matchAll(TABLE_REFERENCE)].map((m) => m[1]);
  if (references.length === 0) return [];
  if (CREDENTIAL_LOOKUPS.some(({ pattern }) => pattern.test(sql))) return [];

  const problems: string[] = [];
  let held = 0;
  let bound = 0;
  const check = (what: string, value: unknown, ok: (value: unknown) => boolean) => {
    bound++;
    if (!ok(value)) problems.push(`${what} is bound to ${JSON.stringify(value)}, not the caller's account ${caller.accountId}`);
  };

  for (const m of sql.matchAll(new RegExp(String.raw`${COLUMN('account_id')}(?:\s*\+\s*0)?\s*=\s*${P}`, 'g')))
    check('account_id', parameterAt(statement, m.index!, m[1]), isAccount(caller));
  for (const m of sql.matchAll(new RegExp(String.raw`${COLUMN('scope')}(?:\s*\|\|\s*'')?\s*=\s*${P}`, 'g')))
    check('scope', parameterAt(statement, m.index!, m[1]), inScope(caller));
  if (references.includes('accounts')) {
    for (const m of sql.matchAll(new RegExp(String.raw`"id"\s*=\s*${P}`, 'g'))) check('accounts.id', parameterAt(statement, m.index!, m[1]), isAccount(caller));
  }
  const batch = batchColumns(statement);
  if (/account_id"?(?:\s*\+\s*0)?\s*=\s*"?k"?\."?account_id/.test(sql)) {
    for (const value of batch.get('account_id') ?? [undefined]) check('k.account_id', value, isAccount(caller));
  }
  for (const column of ['account_id', 'scope'] as const) {
    const values = insertedValues(statement, column);
    if (values) for (const value of values) check(`inserted ${column}`, value, column === 'scope' ? inScope(caller) : isAccount(caller));
  }
  // A join to a row already held to the account: a parent, a step of a chain.
  const ties = [...sql.matchAll(/"?\w+"?\."?account_id"?(?:\s*\+\s*0)?\s*=\s*"?(\w+)"?\."?account_id"?/g)].filter((m) => m[1] !== 'k').length;

  held = bound + ties;

  if (bound === 0) problems.push("no condition binds the caller's account");
  // An insert's rows are held by their values; every other reference needs its own condition.
  const insertsHeld = /^insert /.test(sql) ? 1 : 0;
  if (held + insertsHeld < references.length)
    problems.push(`${references.length} references to tenant tables (${references.join(', ')}), ${held} held to the account`);

  if (caller.environment !== null && !references.every((table) => ACCOUNT_TABLES.includes(table)))
    problems.push(...environmentViolations(statement, caller.environment, batch));
  return problems;
}

/** A caller restricted to one environment: the statement names it, and no other. */
function environmentViolations(statement: Statement, environment: string, batch: Map<string, unknown[]>): string[] {
  const sql = statement.sql;
  const values: unknown[] = [];
  for (const m of sql.matchAll(new RegExp(String.raw`${COLUMN('(?:allowed_)?environment')}(?:\s*\|\|\s*'')?\s*=\s*${P}`, 'g')))
    values.push(parameterAt(statement, m.index!, m[1]));
  // The scope texts, `<account>/<environment>` and what follows it.
  for (const m of sql.matchAll(new RegExp(String.raw`${COLUMN('scope')}(?:\s*\|\|\s*'')?\s*=\s*${P}`, 'g'))) {
    values.push(String(parameterAt(statement, m.index!, m[1])).split('/')[1]);
  }
  if (/environment"?(?:\s*\|\|\s*'')?\s*=\s*"?k"?\."?environment/.test(sql)) values.push(...(batch.get('environment') ?? []));
  for (const column of ['environment', 'allowed_environment', 'scope']) {
    const inserted = insertedValues(statement, column);
    if (inserted) values.push(...inserted.map((value) => (column === 'scope' ? String(value).split('/')[1] : value)));
  }
  if (values.length === 0) return [`no condition binds the environment ${environment} the caller is restricted to`];
  const wrong = values.filter((value) => value !== environment);
  return wrong.length === 0 ? [] : [`environment bound to ${JSON.stringify(wrong)}, outside the caller's ${environment}`];
}
