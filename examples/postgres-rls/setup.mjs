// Creates the data API's role, the sample tables under row-level security (schema.sql) and
// a few rows for two customers. Run it once, as a role that may create roles:
//   ADMIN_DATABASE_URL=postgres://postgres@127.0.0.1:5432/analytics APP_ROLE=ugs_reader node setup.mjs
// The data API then connects as APP_ROLE (server.mjs, DATABASE_URL).
import fs from 'node:fs';
import pg from 'pg';

const ADMIN_DATABASE_URL = process.env.ADMIN_DATABASE_URL;
const APP_ROLE = process.env.APP_ROLE || 'ugs_reader';
const APP_PASSWORD = process.env.APP_PASSWORD; // optional: trust or peer authentication needs none

if (!ADMIN_DATABASE_URL) {
  console.error('set ADMIN_DATABASE_URL to a database this script may create tables in, as a role that may create roles');
  process.exit(1);
}

// ACME and Globex are customers (Customer); a test ACME of the same id lives in Testing.
const SAMPLE_ORDERS = [
  [1, 'Customer', 'acme-corp', 'emea', 'Anvils', 1200],
  [2, 'Customer', 'acme-corp', 'amer', 'Rocket skates', 860],
  [3, 'Customer', 'acme-corp', 'emea', 'Giant magnet', 410],
  [4, 'Customer', 'globex', 'amer', 'Hammocks', 95],
  [5, 'Customer', 'globex', 'emea', 'Doomsday device', 1000000],
  [6, 'Testing', 'acme-corp', 'emea', 'Test anvil', 1],
];
const SAMPLE_NOTICES = [
  [1, 'emea', 'EMEA: quarter closes on the 30th'],
  [2, 'amer', 'AMER: new pricing from next month'],
];

const client = new pg.Client({ connectionString: ADMIN_DATABASE_URL });
await client.connect();
try {
  const role = client.escapeIdentifier(APP_ROLE);
  await client.query('begin');
  const exists = await client.query('select 1 from pg_roles where rolname = $1', [APP_ROLE]);
  const password = APP_PASSWORD ? ` password ${client.escapeLiteral(APP_PASSWORD)}` : '';
  await client.query(`${exists.rowCount ? 'alter' : 'create'} role ${role} login nosuperuser nobypassrls nocreatedb nocreaterole noinherit${password}`);
  const schema = fs.readFileSync(new URL('./schema.sql', import.meta.url), 'utf8').replaceAll(':"app_role"', role);
  await client.query(schema);
  for (const row of SAMPLE_ORDERS)
    await client.query('insert into orders (id, environment, user_group_id, region, product, amount) values ($1, $2, $3, $4, $5, $6)', row);
  for (const row of SAMPLE_NOTICES) await client.query('insert into regional_notices (id, region, notice) values ($1, $2, $3)', row);
  await client.query('commit');
  console.log(`created role ${APP_ROLE}, tables orders and regional_notices under row-level security, and sample rows`);
} catch (err) {
  await client.query('rollback').catch(() => undefined);
  console.error(`setup failed: ${err.message}`);
  process.exitCode = 1;
} finally {
  await client.end();
}
