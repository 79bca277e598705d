// `ugs import` and `ugs export` (docs/cli.md, "Import and export"), run as real processes on
// the database of a real server, which then serves what they wrote.
import { it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createTestDatabase, type TestDatabase } from './helpers/backends.ts';
import { forEachBackend } from './helpers/harness.ts';
import { ROOT, UGS_ENTRY, httpRequest, issueTokenWithCli, runUgs, spawnServer, type ServerProcess } from './helpers/processes.ts';
import { runUgsHere } from './helpers/ugs-in-process.ts';
import { UpsertItem } from '../src/user-groups/user-groups.schemas.ts';

const ndjson = (items: unknown[]) => `${items.map((item) => JSON.stringify(item)).join('\n')}\n`;
const byRow = <T extends { row: number }>(entries: T[]) => entries.sort((a, b) => a.row - b.row);
const lines = (text: string) =>
  text
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line));

/**
 * Exported lines as expected: each carries exactly the fields an import takes (an upsert
 * item's, from the declaration in src/user-groups/declared-fields.ts), and the values given here.
 */
function assertExported(exportedLines: Record<string, unknown>[], expected: Record<string, unknown>[]) {
  for (const line of exportedLines) assert.deepEqual(Object.keys(line).sort(), Object.keys(UpsertItem.properties).sort());
  assert.deepEqual(
    exportedLines.map((line, i) => Object.fromEntries(Object.keys(expected[i] ?? {}).map((field) => [field, line[field]]))),
    expected,
  );
}

forEachBackend('ugs import and ugs export', (backend) => {
  let database: TestDatabase;
  let env: Record<string, string>;
  let server: ServerProcess;
  let dir: string;
  // The commands run in this process (helpers/ugs-in-process.ts); the binary itself where the
  // test is about it (a small heap, a terminal, a closed pipe).
  const ugs = (...args: string[]) => runUgsHere(args, env);
  const file = (name: string, text: string) => {
    const full = path.join(dir, name);
    fs.writeFileSync(full, text);
    return full;
  };
  async function exported(account: string, environment = 'Customer') {
    const r = await ugs('export', '--account', account, '--env', environment);
    assert.equal(r.code, 0, r.stderr);
    return r.stdout;
  }

  before(async () => {
    database = await createTestDatabase(backend);
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ugs-import-'));
    env = { DATABASE_URL: database.url, UGS_SECRET_KEY: crypto.randomBytes(32).toString('base64') };
    server = await spawnServer(env);
    for (const account of ['source', 'copy', 'nd', 'csv', 'bad', 'dry', 'tty', 'big', 'enc', 'semi', 'stops', 'nd-stops'])
      assert.equal((await ugs('account', 'create', account)).code, 0);
  });
  after(async () => {
    await server?.stop('SIGTERM');
    await database?.drop();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('import: an NDJSON file creates its groups, with working tokens; running it again leaves every one unchanged, exit 0', async () => {
    const items = [
      { user_group_id: 'acme', name: 'ACME', properties: { plan: 'pro' }, group_tags: ['b', 'a'] },
      { user_group_id: 'acme-eu', parent_user_group_id: 'acme', mapping: { '40': '213' }, is_demo_group: true },
      ...Array.from({ length: 1200 }, (_, i) => ({ user_group_id: `bulk-${i}` })), // more than one batch
    ];
    const input = file('groups.ndjson', ndjson(items));
    const first = await ugs('import', input, '--account', 'nd', '--env', 'Customer');
    assert.equal(first.code, 0, first.stderr);
    assert.match(first.stdout, /imported 1202 rows: 1202 created, 0 updated, 0 unchanged, 0 failed/);
    assert.match(first.stderr, /1,000 rows: /, 'a progress line per batch when standard error is no terminal');
    assert.ok(!fs.existsSync(`${input}.errors.ndjson`), 'no errors file when nothing failed');

    const again = await ugs('import', input, '--account', 'nd', '--env', 'Customer', '--json');
    assert.equal(again.code, 0, again.stderr);
    assert.deepEqual(JSON.parse(again.stdout), { rows: 1202, created: 0, updated: 0, unchanged: 1202, failed: 0, errors_file: null });

    const { token } = await issueTokenWithCli(env, ['--account', 'nd']);
    const child = await httpRequest(server.baseUrl, 'GET', '/api/user/lookup?user_group_id=acme-eu', { token });
    assert.equal(child.status, 200, child.text);
    const group = (child.body as { user_group: Record<string, unknown> }).user_group;
    assert.equal(group.parent_user_group_id, 'acme');
    assert.deepEqual(group.computed_properties, { plan: 'pro' });
    assert.equal(group.is_demo_group, true);
    const embed = await httpRequest(server.baseUrl, 'GET', '/api/embed/context', { headers: { authorization: `Bearer ${group.token}` } });
    assert.equal(embed.status, 200, embed.text);
  });

  it('import: a CSV file (header row, JSON text in JSON-valued cells, empty cell = absent) creates its groups; again: unchanged, exit 0', async () => {
    const csv = [
      'user_group_id,name,mapping,properties,is_demo_group,parent_user_group_id,hierarchy_level,group_tags,api_environment_tag',
      'globex,"Globex, Inc.","{""40"":""213""}","{""region"":""emea"",""n"":1}",true,,Customer,"[""beta""]",Testing',
      'globex:jane,,,,false,globex,User,,',
      '"multi,line",,,"{\n  ""k"": ""v""\n}",,,,,',
    ].join('\r\n');
    const input = file('groups.csv', csv);
    const first = await ugs('import', input, '--account', 'csv', '--env', 'Testing');
    assert.equal(first.code, 0, first.stderr);
    assert.match(first.stdout, /imported 3 rows: 3 created, 0 updated, 0 unchanged, 0 failed/);
    const again = await ugs('import', input, '--account', 'csv', '--env', 'Testing');
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stdout, /imported 3 rows: 0 created, 0 updated, 3 unchanged, 0 failed/);
    assertExported(lines(await exported('csv', 'Testing')), [
      {
        user_group_id: 'globex',
        name: 'Globex, Inc.',
        mapping: { '40': '213' },
        properties: { region: 'emea', n: 1 },
        is_demo_group: true,
        parent_user_group_id: null,
        hierarchy_level: 'Customer',
        group_tags: ['beta'],
        api_environment_tag: 'Testing',
      },
      {
        user_group_id: 'multi,line',
        name: 'multi,line',
        mapping: null,
        properties: { k: 'v' },
        is_demo_group: false,
        parent_user_group_id: null,
        hierarchy_level: null,
        group_tags: [],
        api_environment_tag: 'Testing',
      },
      {
        user_group_id: 'globex:jane',
        name: 'globex:jane',
        mapping: null,
        properties: null,
        is_demo_group: false,
        parent_user_group_id: 'globex',
        hierarchy_level: 'User',
        group_tags: [],
        api_environment_tag: 'Testing',
      },
    ]);
  });

  it('import: bad rows go to the errors file with their row number, item and error; the others are imported; summary, exit 1', async () => {
    const input = file(
      'mixed.ndjson',
      [
        JSON.stringify({ user_group_id: 'ok-1' }),
        'not json',
        JSON.stringify({ user_group_id: 'orphan', parent_user_group_id: 'missing' }),
        '',
        JSON.stringify({ user_group_id: 'typo', nmae: 'x' }),
        JSON.stringify({ user_group_id: 'elsewhere', api_environment_tag: 'Testing' }),
        JSON.stringify({ user_group_id: 'ok-2', parent_user_group_id: 'ok-1' }),
      ].join('\n'),
    );
    const r = await ugs('import', input, '--account', 'bad', '--env', 'Customer');
    assert.equal(r.code, 1);
    assert.match(r.stdout, /imported 6 rows: 2 created, 0 updated, 0 unchanged, 4 failed/);
    assert.match(r.stdout, new RegExp(`failed rows: ${`${input}.errors.ndjson`.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`));
    assert.match(r.stderr, /4 of 6 rows failed/);
    const errors = lines(fs.readFileSync(`${input}.errors.ndjson`, 'utf8'));
    assert.deepEqual(
      errors.map((e) => [e.row, e.error.code]),
      [
        [2, 'invalid_json'],
        [3, 'parent_not_found'],
        [5, 'validation_failed'],
        [6, 'environment_forbidden'],
      ],
    );
    assert.equal(errors[0].item, 'not json');
    assert.deepEqual(errors[1].item, { user_group_id: 'orphan', parent_user_group_id: 'missing' });
    assert.match(errors[2].error.message, /nmae/);
    assert.deepEqual(
      lines(await exported('bad')).map((g) => g.user_group_id),
      ['ok-1', 'ok-2'],
    );

    // A CSV row: a cell that is not JSON, a row with too many cells.
    const csv = file('mixed.csv', 'user_group_id,properties\nc-ok,\nc-bad,{nope\nc-long,,extra\n');
    const errorsFile = path.join(dir, 'csv-errors.ndjson');
    const c = await ugs('import', csv, '--account', 'bad', '--env', 'Customer', '--errors', errorsFile, '--json');
    assert.equal(c.code, 1);
    assert.deepEqual(JSON.parse(c.stdout), { rows: 3, created: 1, updated: 0, unchanged: 0, failed: 2, errors_file: errorsFile });
    assert.deepEqual(
      lines(fs.readFileSync(errorsFile, 'utf8')).map((e) => [e.row, e.error.code]),
      [
        [3, 'invalid_json'],
        [4, 'validation_failed'],
      ],
    );
  });

  it('import: a line over 1 MiB fails alone, named by its line, without being read whole; the errors file holds its start, not the line', async () => {
    const input = path.join(dir, 'big.ndjson');
    const out = fs.openSync(input, 'w');
    fs.writeSync(out, `${JSON.stringify({ user_group_id: 'before' })}\n{"user_group_id":"huge","properties":{"a":"`);
    const mebibyte = Buffer.alloc(1024 * 1024, 'x');
    for (let i = 0; i < 64; i++) fs.writeSync(out, mebibyte); // one 64 MiB line
    fs.writeSync(out, `"}}\n${JSON.stringify({ user_group_id: 'after' })}\n`);
    fs.closeSync(out);
    // A heap smaller than the line: the line is never held as a whole.
    const r = await runUgs(['import', input, '--account', 'big', '--env', 'Customer'], { ...env, NODE_OPTIONS: '--max-old-space-size=48' });
    assert.equal(r.code, 1, r.stderr);
    assert.doesNotMatch(r.stderr, /RangeError|heap|\n\s+at /, 'no crash, no stack');
    assert.match(r.stdout, /imported 3 rows: 2 created, 0 updated, 0 unchanged, 1 failed/);
    const errorsText = fs.readFileSync(`${input}.errors.ndjson`, 'utf8');
    assert.ok(errorsText.length < 2000, `the errors file holds the line's start only (${errorsText.length} characters)`);
    const [failed] = lines(errorsText);
    assert.equal(failed.row, 2);
    assert.equal(failed.error.code, 'payload_too_large');
    assert.match(failed.error.message, /^line 2 is 67,108,9\d\d bytes, over the 1 MiB a row may hold/);
    assert.match(failed.item, /^\{"user_group_id":"huge","properties":\{"a":"x+…$/);
    assert.deepEqual(
      lines(await exported('big')).map((g) => g.user_group_id),
      ['before', 'after'],
    );

    // CSV: a quote left open makes the rest of the file one row; the import stops at its line.
    const csv = file('open-quote.csv', `user_group_id,name\nc1,ok\nc2,"never closed\n${'c3,x\n'.repeat(300_000)}`);
    const c = await ugs('import', csv, '--account', 'big', '--env', 'Customer');
    assert.equal(c.code, 1);
    assert.match(c.stderr, /^ugs: the row at line 3 is over the 1 MiB a row may hold \(is a quote left open\?\)/);
    assert.doesNotMatch(c.stderr, /\n\s+at /, 'no stack');
    assert.ok(
      lines(await exported('big')).some((g) => g.user_group_id === 'c1'),
      'the rows before it are in, as the message says',
    );
  });

  it('import: a row that is not valid UTF-8 fails alone with its line number, NDJSON or CSV, never read with U+FFFD', async () => {
    const latin1 = (text: string) => Buffer.from(text, 'latin1');
    const nd = path.join(dir, 'latin1.ndjson');
    fs.writeFileSync(nd, Buffer.concat([latin1('{"user_group_id":"plain"}\n{"user_group_id":"M\xfcller"}\n'), Buffer.from('{"user_group_id":"Müller ok"}\n')]));
    const r = await ugs('import', nd, '--account', 'enc', '--env', 'Customer');
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stdout, /imported 3 rows: 2 created, 0 updated, 0 unchanged, 1 failed/);
    const [bad] = lines(fs.readFileSync(`${nd}.errors.ndjson`, 'utf8'));
    assert.deepEqual([bad.row, bad.error.code], [2, 'validation_failed']);
    assert.match(bad.error.message, /^line 2 is not valid UTF-8/);

    const csv = path.join(dir, 'latin1.csv');
    fs.writeFileSync(csv, Buffer.concat([Buffer.from('user_group_id,name\nc-ok,"two\nlines"\n'), latin1('c-bad,M\xfcller\n'), Buffer.from('c-ok-2,Müller\n')]));
    const c = await ugs('import', csv, '--account', 'enc', '--env', 'Customer', '--json');
    assert.equal(c.code, 1, c.stderr);
    assert.deepEqual(
      // Rows that cannot be read are written as they are met, the others' failures after their batch: by row here.
      byRow(lines(fs.readFileSync(`${csv}.errors.ndjson`, 'utf8'))).map((e) => [e.row, e.error.code, e.item.user_group_id]),
      [
        [2, 'validation_failed', 'c-ok'], // a name with a line break: the validator's, at the line it starts
        [4, 'validation_failed', 'c-bad'],
      ],
    );
    const names = lines(await exported('enc')).map((g) => g.name);
    assert.deepEqual(names, ['plain', 'Müller ok', 'Müller'], 'nothing stored with U+FFFD');
  });

  it("import: a CSV saved with semicolons or tabs between fields is read; a row's number is the line it starts on, a quoted cell spanning lines included", async () => {
    const semicolons = file(
      'european.csv',
      ['user_group_id;name;properties', '"s1";"Société; Paris";"{""n"":1}"', '', 's2;"two', 'lines";', 's3;"x";{broken', 's4;Plain;'].join('\r\n'),
    );
    const r = await ugs('import', semicolons, '--account', 'semi', '--env', 'Customer');
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stdout, /imported 4 rows: 2 created, 0 updated, 0 unchanged, 2 failed/);
    assert.deepEqual(
      byRow(lines(fs.readFileSync(`${semicolons}.errors.ndjson`, 'utf8'))).map((e) => [e.row, e.error.code, e.item.user_group_id]),
      [
        [4, 'validation_failed', 's2'],
        [6, 'invalid_json', 's3'],
      ],
    );
    const tabs = file('tabs.csv', 'user_group_id\tname\nt1\tTab, one\n');
    assert.equal((await ugs('import', tabs, '--account', 'semi', '--env', 'Customer')).code, 0);
    assert.deepEqual(
      lines(await exported('semi')).map((g) => [g.user_group_id, g.name, g.properties]),
      [
        ['s1', 'Société; Paris', { n: 1 }],
        ['s4', 'Plain', null],
        ['t1', 'Tab, one', null],
      ],
    );
    // Another separator: refused, saying how the header was read.
    const pipes = file('pipes.csv', 'user_group_id|name\np1|x\n');
    const refused = await ugs('import', pipes, '--account', 'semi', '--env', 'Customer');
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /unknown fields: user_group_id\|name .*read as separated by commas.*commas, semicolons or tabs/);
    // A parse error names the line of the row it is in.
    const quote = file('quote.csv', 'user_group_id,name\nq1,"a\nb"\n\nq2,"x"y\n');
    const q = await ugs('import', quote, '--account', 'semi', '--env', 'Customer');
    assert.equal(q.code, 1);
    assert.match(q.stderr, /^ugs: the CSV file cannot be read in the row at line 5: Invalid Closing Quote/);
  });

  it('import: a CSV row that cannot be parsed stops the import at its line, and every row before it is imported, also those of its own batch and many batches of them', async () => {
    // Line 3 does not parse (a quote closed in the middle of a cell): line 2 is in, line 4 is not read.
    const third = file('third-line.csv', 'user_group_id,name\nbefore,ok\nbroken,"x"y\nafter,z\n');
    const r = await ugs('import', third, '--account', 'stops', '--env', 'Customer');
    assert.equal(r.code, 1, r.stderr);
    assert.match(
      r.stderr,
      /^ugs: the CSV file cannot be read in the row at line 3: Invalid Closing Quote.*\(the rows before it were imported: fix the file and run the import again\)/,
    );
    assert.deepEqual(
      lines(await exported('stops')).map((g) => g.user_group_id),
      ['before'],
    );
    // 2,500 rows before it: more than the parser holds ahead of the reader, and three batches.
    const ids = Array.from({ length: 2500 }, (_, i) => `row-${String(i).padStart(4, '0')}`);
    const many = file('many-then-broken.csv', `user_group_id\n${ids.join('\n')}\n"broken"x\nafter\n`);
    const m = await ugs('import', many, '--account', 'stops', '--env', 'Customer');
    assert.equal(m.code, 1, m.stderr);
    assert.match(m.stderr, /in the row at line 2502: Invalid Closing Quote/);
    assert.deepEqual(
      lines(await exported('stops')).map((g) => g.user_group_id),
      ['before', ...ids],
    );
  });

  it('import: an NDJSON line that does not parse fails alone: the lines before and after it are imported (no line stops an NDJSON import)', async () => {
    const input = file(
      'third-line.ndjson',
      `${JSON.stringify({ user_group_id: 'before' })}\n${JSON.stringify({ user_group_id: 'first' })}\n{"user_group_id": "broken",\n${JSON.stringify({ user_group_id: 'after' })}\n`,
    );
    const r = await ugs('import', input, '--account', 'nd-stops', '--env', 'Customer');
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stdout, /imported 4 rows: 3 created, 0 updated, 0 unchanged, 1 failed/);
    assert.deepEqual(
      lines(fs.readFileSync(`${input}.errors.ndjson`, 'utf8')).map((e) => [e.row, e.error.code]),
      [[3, 'invalid_json']],
    );
    assert.deepEqual(
      lines(await exported('nd-stops')).map((g) => g.user_group_id),
      ['before', 'first', 'after'],
    );
  });

  it('import --dry-run: checks every row with the same validator, reports what would fail, writes nothing', async () => {
    const input = file(
      'dry.ndjson',
      ndjson([{ user_group_id: 'a' }, { user_group_id: 'b', is_demo_group: 'yes' }, { user_group_id: 'c', parent_user_group_id: 'a' }]),
    );
    const r = await ugs('import', input, '--account', 'dry', '--env', 'Customer', '--dry-run');
    assert.equal(r.code, 1, 'a row would fail');
    assert.match(r.stdout, /dry run of 3 rows: 1 would fail/);
    assert.deepEqual(
      lines(fs.readFileSync(`${input}.errors.ndjson`, 'utf8')).map((e) => [e.row, e.error.code]),
      [[2, 'validation_failed']],
    );
    assert.equal(await exported('dry'), '', 'nothing written');
    const history = await ugs('audit', '--account', 'dry', '--json');
    assert.deepEqual(JSON.parse(history.stdout), []);

    const good = file('dry-good.csv', 'user_group_id\nx\ny\n');
    const ok = await ugs('import', good, '--account', 'dry', '--env', 'Customer', '--dry-run');
    assert.equal(ok.code, 0, ok.stderr);
    assert.equal(await exported('dry'), '');
  });

  it('export: every field, never a token, parents before children; imported into an empty account it gives the same groups in one pass', async () => {
    const { token } = await issueTokenWithCli(env, ['--account', 'source']);
    const call = async (method: string, body: unknown) => {
      const r = await httpRequest(server.baseUrl, method, '/api/user', { token, body });
      assert.ok(r.status < 300, r.text);
      return r;
    };
    // Children created before their parents, then moved under them: team_id order is not parent order.
    await call('POST', { user_group_id: 'leaf', properties: { deep: [1, { x: 'y' }] }, group_tags: ['z', 'y'], hierarchy_level: 'User' });
    await call('POST', { user_group_id: 'middle', mapping: { '7': 9 }, is_demo_group: true });
    await call('POST', { user_group_id: 'top', name: 'Top «1»', properties: { plan: 'pro' } });
    await call('PUT', { user_group_id: 'middle', parent_user_group_id: 'top' });
    await call('PUT', { user_group_id: 'leaf', parent_user_group_id: 'middle' });
    await call('POST', { user_group_id: 'lonely' });
    await call('POST', { user_group_id: 'testing-only', api_environment_tag: 'Testing' });

    const text = await exported('source');
    assert.ok(!/ugs_grp_/.test(text), 'never a token');
    const groups = lines(text);
    assert.deepEqual(
      groups.map((g) => g.user_group_id),
      ['top', 'lonely', 'middle', 'leaf'],
    );
    const seen = new Set<string>();
    for (const g of groups) {
      if (g.parent_user_group_id !== null) assert.ok(seen.has(g.parent_user_group_id), `${g.user_group_id} comes after its parent`);
      seen.add(g.user_group_id);
    }
    assertExported(groups.slice(3), [
      {
        user_group_id: 'leaf',
        name: 'leaf',
        mapping: null,
        properties: { deep: [1, { x: 'y' }] },
        is_demo_group: false,
        parent_user_group_id: 'middle',
        hierarchy_level: 'User',
        group_tags: ['y', 'z'],
        api_environment_tag: 'Customer',
      },
    ]);

    const output = path.join(dir, 'source.ndjson');
    const toFile = await ugs('export', '--account', 'source', '--env', 'Customer', '--output', output);
    assert.equal(toFile.code, 0, toFile.stderr);
    assert.equal(fs.readFileSync(output, 'utf8'), text);
    const imported = await ugs('import', output, '--account', 'copy', '--env', 'Customer');
    assert.equal(imported.code, 0, imported.stderr);
    assert.match(imported.stdout, /4 created, 0 updated, 0 unchanged, 0 failed/);
    assert.equal(await exported('copy'), text, 'the copy exports the same lines');
    assert.equal(await exported('copy', 'Testing'), '', 'only the environment exported');

    const refused = await ugs('export', '--account', 'source', '--env', 'Customer', '--output', output);
    assert.equal(refused.code, 2, 'never overwrites a file');
    assert.equal((await ugs('export', '--account', 'nobody', '--env', 'Customer')).code, 2);
  });

  const noTerminal = fs.existsSync('/usr/bin/script') ? false : 'the terminal test needs script(1) (util-linux): SKIPPED';
  if (noTerminal) console.warn(`\n*** ${noTerminal} ***\n`);
  it('import: on a terminal, progress is one bar redrawn in place, ending at 100 %, and the summary follows', { skip: noTerminal }, async () => {
    const input = file('terminal.ndjson', ndjson(Array.from({ length: 2500 }, (_, i) => ({ user_group_id: `tty-${i}` }))));
    // script(1) gives the command a terminal (a pseudo-terminal) and copies what it shows.
    const command = `node ${UGS_ENTRY} import ${input} --account tty --env Customer`;
    const child = spawn('script', ['-qec', command, '/dev/null'], { cwd: ROOT, env: { ...process.env, ...env } });
    let shown = '';
    child.stdout.on('data', (c) => (shown += c));
    const code = await new Promise((resolve) => child.on('close', resolve));
    assert.equal(code, 0, shown);
    assert.match(shown, /\r\u001B\[2K\[#{30}\] 100% 2,500 rows: 2,500 created, 0 updated, 0 unchanged, 0 failed\r?\n/, 'the bar, redrawn in place, full');
    assert.doesNotMatch(shown, /% of the file read/, 'no plain progress lines on a terminal');
    assert.match(shown, /imported 2500 rows: 2500 created/);
  });

  it('export: a reader that stops early (| head) ends it quietly with the status of SIGPIPE, 141', async () => {
    // The account "nd" holds the 1,202 groups of the first test: more than a pipe holds.
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a bash variable, not a template
    const script = `node ${UGS_ENTRY} export --account nd --env Customer | head -n 1; ` + 'echo "status ${PIPESTATUS[0]}" >&2';
    const child = spawn('bash', ['-c', script], { cwd: ROOT, env: { ...process.env, ...env } });
    let [stdout, stderr] = ['', ''];
    child.stdout.on('data', (c) => (stdout += c));
    child.stderr.on('data', (c) => (stderr += c));
    await new Promise((resolve) => child.on('close', resolve));
    assert.equal(lines(stdout).length, 1, 'head printed the first group');
    assert.equal(stderr.trim(), 'status 141', 'no error message, and the status of a command stopped by SIGPIPE');
  });
});
