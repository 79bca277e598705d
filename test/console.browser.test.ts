// The console (/console) in Debian's Chromium against a real server process, used the way a
// support engineer uses it: sign in with a pasted token, search and page, open a group, edit
// it (a validation error first), rotate its token, delete it, create and revoke an API token,
// sign out. On every page axe-core finds no serious or critical violation, every control is
// reachable with Tab, and the strict Content-Security-Policy is never violated. The token
// lives in sessionStorage only and travels only in the Authorization header.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { createRequire } from 'node:module';
import SQLite from 'better-sqlite3';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { createTestDatabase, type TestDatabase } from './helpers/backends.ts';
import { httpRequest, runUgs, spawnServer, issueTokenWithCli, type ServerProcess } from './helpers/processes.ts';
import { ARTIFACTS, README_IMAGES, launchChromium, missingBrowser, openContext } from './helpers/browser.ts';
import { CONSOLE_CONTENT_SECURITY_POLICY } from '../src/pages/console.routes.ts';
import { GENEROUS_WAIT_MS, eventually } from './helpers/wait.ts';
import { UserGroupPublic } from '../src/user-groups/user-groups.schemas.ts';

const skip = missingBrowser('the console browser test');
const AXE_SOURCE = fs.readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

interface ApiCall {
  method: string;
  url: string;
  authorization: string | undefined;
  body?: string | null;
}

describe('the console (/console) in headless Chromium', { skip }, () => {
  let database: TestDatabase;
  let server: ServerProcess;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let adminToken: string;
  let readToken: string;
  let firstStartToken: string;
  const cspViolations: string[] = [];
  const apiCalls: ApiCall[] = [];
  const wellKnownCalls: ApiCall[] = [];
  let env: Record<string, string>;

  before(async () => {
    database = await createTestDatabase('sqlite');
    const secretKey = crypto.randomBytes(32).toString('base64');
    // Webhooks go to a receiver of this test, on 127.0.0.1.
    env = { DATABASE_URL: database.url, UGS_SECRET_KEY: secretKey, UGS_WEBHOOK_ALLOW_PRIVATE: 'true' };
    // The first start on the empty database issues its token (account default), as for a newcomer.
    server = await spawnServer({ ...env, UGS_BOOTSTRAP: 'true' });
    firstStartToken = (await server.waitForOutput(/ugs_api_\w+/))[0];
    await server.waitForOutput(/"msg":"started"/);
    adminToken = (await issueTokenWithCli(env, ['--account', 'acme', '--scopes', 'read,write,admin', '--name', 'support'])).token;
    readToken = (await issueTokenWithCli(env, ['--account', 'acme', '--scopes', 'read', '--name', 'viewer'])).token;
    // 60 groups (more than two pages), a company with two users, and a tag.
    const create = (body: Record<string, unknown>) => httpRequest(server.baseUrl, 'POST', '/api/user', { token: adminToken, body });
    for (let i = 0; i < 60; i++)
      assert.equal(
        (await create({ user_group_id: `customer-${String(i).padStart(2, '0')}`, name: `Customer ${i}`, group_tags: i % 10 === 0 ? ['beta'] : [] })).status,
        201,
      );
    assert.equal((await create({ user_group_id: 'acme-corp', name: 'ACME Corporation', properties: { region: 'emea', plan: 'enterprise' } })).status, 201);
    for (const user of ['jane', 'joe']) {
      assert.equal(
        (await create({ user_group_id: `acme-corp:${user}`, name: `${user} at ACME`, parent_user_group_id: 'acme-corp', properties: { seat: user } })).status,
        201,
      );
    }

    browser = await launchChromium();
    context = await openContext(browser, { viewport: { width: 1280, height: 900 } });
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: server.baseUrl });
    page = await context.newPage();
    page.on('console', (message) => {
      if (/Content.Security.Policy/i.test(message.text())) cspViolations.push(message.text());
    });
    page.on('request', (request) => {
      if (request.url().startsWith(`${server.baseUrl}/api/`))
        apiCalls.push({ method: request.method(), url: request.url(), authorization: request.headers().authorization, body: request.postData() });
      if (request.url().startsWith(`${server.baseUrl}/.well-known/`))
        wellKnownCalls.push({ method: request.method(), url: request.url(), authorization: request.headers().authorization });
    });
  });

  after(async () => {
    await browser?.close();
    await server?.stop();
    await database?.drop();
  });

  /** axe-core on the page as it is now: no serious or critical violation. */
  async function assertAccessible(what: string): Promise<void> {
    if (!(await page.evaluate(() => 'axe' in window))) await page.evaluate(AXE_SOURCE);
    const violations = await page.evaluate(async () => {
      const result = await (
        window as unknown as {
          axe: { run: (context: Document, options: object) => Promise<{ violations: { id: string; impact: string; nodes: { target: string[] }[] }[] }> };
        }
      ).axe.run(document, { resultTypes: ['violations'] });
      return result.violations.map((v) => ({ id: v.id, impact: v.impact, targets: v.nodes.map((n) => n.target.join(' ')) }));
    });
    const serious = violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
    assert.deepEqual(serious, [], `${what}: accessibility violations`);
  }

  /** Tabs through the page and checks that every enabled, visible control received focus. */
  async function assertKeyboardReachable(what: string): Promise<void> {
    const controls = await page.evaluate(() => {
      const all = [...document.querySelectorAll<HTMLElement>('a[href], button, input, select, textarea, summary')];
      return all
        .filter((el) => !(el as HTMLButtonElement).disabled && el.getClientRects().length > 0 && !el.closest('dialog:not([open])'))
        .map((el, i) => {
          el.dataset.kbd = String(i);
          return String(i);
        });
    });
    const reached = new Set<string>();
    await page.evaluate(() => (document.activeElement as HTMLElement | null)?.blur());
    await page.evaluate(() => window.scrollTo(0, 0));
    for (let i = 0; i < controls.length + 10; i++) {
      await page.keyboard.press('Tab');
      const id = await page.evaluate(() => (document.activeElement as HTMLElement | null)?.dataset.kbd ?? null);
      if (id !== null) reached.add(id);
    }
    const missed = controls.filter((id) => !reached.has(id));
    const names = await page.evaluate((ids) => ids.map((id) => document.querySelector(`[data-kbd="${id}"]`)?.outerHTML.slice(0, 80)), missed);
    assert.deepEqual(names, [], `${what}: controls Tab never reached`);
  }

  async function shot(name: string): Promise<void> {
    await page.screenshot({ path: path.join(ARTIFACTS, `console-${name}.png`), fullPage: true });
  }

  it('console: served with a strict Content-Security-Policy, no inline script, no CORS, nothing from another origin', async () => {
    const res = await fetch(`${server.baseUrl}/console`, { headers: { origin: 'https://elsewhere.example' } });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-security-policy'), CONSOLE_CONTENT_SECURITY_POLICY);
    assert.match(CONSOLE_CONTENT_SECURITY_POLICY, /script-src 'self'(;|$)/);
    assert.match(CONSOLE_CONTENT_SECURITY_POLICY, /frame-ancestors 'none'/);
    assert.equal(res.headers.get('access-control-allow-origin'), null);
    const html = await res.text();
    assert.doesNotMatch(html, /<script(?![^>]*\bsrc=)/, 'no inline script');
    assert.doesNotMatch(html, /https?:\/\//, 'nothing from another origin');
    const preflight = await fetch(`${server.baseUrl}/console`, {
      method: 'OPTIONS',
      headers: { origin: 'https://elsewhere.example', 'access-control-request-method': 'GET' },
    });
    assert.equal(preflight.headers.get('access-control-allow-origin'), null);
  });

  it('console: sign in with a pasted token, kept in sessionStorage only: never in the URL, a cookie or localStorage', async () => {
    await page.goto(`${server.baseUrl}/console`);
    await page.getByLabel('API token').waitFor();
    await assertAccessible('sign-in');
    await page.getByLabel('API token').fill('x'); // the button is enabled once there is a token
    await assertKeyboardReachable('sign-in');
    await page.getByLabel('API token').fill('');
    await shot('sign-in');
    await page.getByLabel('API token').fill('ugs_api_not-a-real-token');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('alert').filter({ hasText: 'invalid_api_token' }).waitFor();
    assert.equal(await page.evaluate(() => sessionStorage.length), 0, 'a refused token is not kept');

    await page.getByLabel('API token').fill(adminToken);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { name: 'User groups in Customer' }).waitFor();
    assert.ok((await page.evaluate(() => Object.values(sessionStorage))).includes(adminToken), 'in sessionStorage');
    assert.equal(await page.evaluate(() => localStorage.length), 0, 'not in localStorage');
    assert.deepEqual(await context.cookies(), [], 'no cookie');
    assert.ok(!page.url().includes(adminToken));
    for (const call of apiCalls) {
      assert.ok(!call.url.includes(adminToken), `token in a URL: ${call.url}`);
      if (call.url.includes('/api/embed/context')) continue;
      assert.ok(
        call.authorization === `Token ${adminToken}` || call.authorization === 'Token ugs_api_not-a-real-token',
        `${call.url} sent ${call.authorization}`,
      );
    }
  });

  it('console: the list pages with the cursor (25 a page), searches by prefix and filters by tag, parent and level', async () => {
    const rows = () => page.locator('table.groups tbody tr td:first-child').allTextContents();
    await page.getByText('Page 1: 25 user groups').waitFor();
    const first = await rows();
    assert.equal(first.length, 25);
    await assertAccessible('list');
    await assertKeyboardReachable('list');
    await shot('groups');

    await page.getByRole('button', { name: 'Next page' }).click();
    await page.getByText('Page 2: 25 user groups').waitFor();
    const second = await rows();
    assert.equal(new Set([...first, ...second]).size, 50, 'page 2 holds other groups');
    await page.getByRole('button', { name: 'Next page' }).click();
    await page.getByText('Page 3: 13 user groups').waitFor();
    assert.equal(await page.getByRole('button', { name: 'Next page' }).isDisabled(), true);
    await page.getByRole('button', { name: 'Previous page' }).click();
    await page.getByText('Page 2: 25 user groups').waitFor();
    const listCalls = apiCalls.filter((call) => new URL(call.url).pathname === '/api/users');
    assert.ok(
      listCalls.every(
        (call) =>
          new URL(call.url).searchParams.get('limit') === '25' ||
          new URL(call.url).searchParams.has('q') ||
          new URL(call.url).searchParams.has('parent_user_group_id'),
      ),
    );
    assert.ok(
      listCalls.some((call) => new URL(call.url).searchParams.has('cursor')),
      'pages by cursor: a page costs the same at any depth',
    );

    await page.getByLabel('Search').fill('acme');
    await page.getByRole('button', { name: 'Search' }).click();
    await page.getByText('Page 1: 3 user groups').waitFor();
    assert.deepEqual(await rows(), ['acme-corp', 'acme-corp:jane', 'acme-corp:joe']);
    assert.match(page.url(), /#\/groups\?q=acme$/);

    await page.getByRole('link', { name: 'Clear' }).click();
    // The cleared list first: the form is drawn anew with it, and would drop what was typed before.
    await page.getByText('Page 1: 25 user groups').waitFor();
    await page.getByLabel('Tag').fill('beta');
    await page.getByRole('button', { name: 'Search' }).click();
    await page.getByText('Page 1: 6 user groups').waitFor();
    await page.getByLabel('Tag').fill('');
    await page.getByLabel('Parent').fill('acme-corp');
    await page.getByRole('button', { name: 'Search' }).click();
    await page.getByText('Page 1: 2 user groups').waitFor();
    assert.deepEqual(await rows(), ['acme-corp:jane', 'acme-corp:joe']);

    // The environment switch: Testing has none of these groups.
    await page.getByLabel('Environment', { exact: true }).selectOption('Testing');
    await page.getByRole('heading', { name: 'User groups in Testing' }).waitFor();
    await page.getByText('Page 1: 0 user groups').waitFor();
    await page.getByLabel('Environment', { exact: true }).selectOption('Customer');
    await page.getByRole('heading', { name: 'User groups in Customer' }).waitFor();
  });

  it('console: create a group, with properties as JSON; its token is shown once', async () => {
    await page.getByRole('link', { name: 'New user group' }).click();
    await page.getByLabel('user_group_id').fill('initech');
    await page.getByLabel('Name').fill('Initech');
    await page.getByLabel('Tags').fill('beta, trial');
    await page.getByLabel('Properties').fill('{"region": "amer"}');
    await assertAccessible('create');
    await assertKeyboardReachable('create');
    await page.getByRole('button', { name: 'Create' }).click();
    await page.getByRole('heading', { name: 'Created initech' }).waitFor();
    assert.match(await page.getByLabel('User group token').inputValue(), /^ugs_grp_/);
    const stored = await httpRequest(server.baseUrl, 'GET', '/api/users?q=initech', { token: readToken });
    assert.deepEqual(
      [stored.body.user_groups[0].name, stored.body.user_groups[0].group_tags, stored.body.user_groups[0].properties],
      ['Initech', ['beta', 'trial'], { region: 'amer' }],
    );
    await page.getByRole('link', { name: 'Open initech' }).click();
    await page.getByRole('heading', { name: 'Initech' }).waitFor();
    await page.goto(`${server.baseUrl}/console#/groups?parent=acme-corp`);
    await page.getByText('Page 1: 2 user groups').waitFor();
  });

  it('console: a group shows its fields, computed properties, parent, children, history and the variables a dashboard gets', async () => {
    const callsBefore = apiCalls.length;
    await page.getByRole('link', { name: 'acme-corp:jane' }).click();
    await page.getByRole('heading', { name: 'jane at ACME' }).waitFor();
    const computed = page.locator('figure', { hasText: 'Computed properties (with the groups above it)' }).locator('pre');
    assert.deepEqual(JSON.parse((await computed.textContent()) ?? ''), { region: 'emea', plan: 'enterprise', seat: 'jane' });
    assert.equal(await page.getByRole('link', { name: 'acme-corp', exact: true }).count(), 1, 'the parent, as a link');
    // Every field of a group has its place, read from the declaration: a field the page has no row of its own for gets a plain one.
    const missing: string[] = [];
    for (const field of Object.keys(UserGroupPublic.properties)) if ((await page.locator(`[data-field="${field}"]`).count()) !== 1) missing.push(field);
    assert.deepEqual(missing, [], 'every field of UserGroupWithoutToken is shown once');
    assert.equal(await page.locator('[data-field="provided_id"]').textContent(), 'acme-corp:jane');
    // Read with GET /api/user/lookup, which never creates; no embed token until asked for.
    const paths = () => apiCalls.slice(callsBefore).map((call) => new URL(call.url).pathname);
    assert.ok(paths().includes('/api/user/lookup'), 'the group is read with the lookup');
    assert.ok(!paths().includes('/api/user'), 'never through get-or-create');
    assert.equal(paths().filter((p) => p === '/api/embed_token').length, 0, 'no embed token minted on view');
    await page.getByRole('button', { name: 'Show the dashboard variables' }).click();
    const variables = page.locator('table.variables tbody tr');
    await variables.first().waitFor();
    assert.equal(paths().filter((p) => p === '/api/embed_token').length, 1, 'one embed token, when asked');
    const shown = Object.fromEntries(
      await variables.evaluateAll((rows) => rows.map((row) => [row.querySelector('th')!.textContent, row.querySelector('td')!.textContent])),
    );
    assert.deepEqual(shown, { user_group_id: 'acme-corp:jane', user_group_name: 'jane at ACME', region: 'emea', plan: 'enterprise', seat: 'jane' });

    // As one viewer of the group: the viewer's attributes beside the group's properties, never over them.
    await page.getByText('As one viewer of the group (optional)').click();
    await page.getByLabel('Viewer id').fill('ada');
    await page.getByLabel('Viewer attributes').fill('{"region": "amer", "team": "west"}');
    await page.getByRole('button', { name: 'Show again' }).click();
    await page.getByText('As viewer ada').waitFor();
    const asViewer = Object.fromEntries(
      await variables.evaluateAll((rows) => rows.map((row) => [row.querySelector('th')!.textContent, row.querySelector('td')!.textContent])),
    );
    assert.deepEqual(asViewer, {
      user_group_id: 'acme-corp:jane',
      user_group_name: 'jane at ACME',
      viewer_id: 'ada',
      viewer_attributes: '{"region":"amer","team":"west"}',
      region: 'emea',
      plan: 'enterprise',
      seat: 'jane',
    });
    const minted = apiCalls.filter((call) => new URL(call.url).pathname === '/api/embed_token').at(-1);
    assert.deepEqual(JSON.parse(minted?.body ?? '{}').viewer, { id: 'ada', attributes: { region: 'amer', team: 'west' } });
    await page.locator('ol.timeline li').first().waitFor();
    // The history in words: what happened, and the ids it moved by their labels, none for null.
    assert.match((await page.locator('ol.timeline li').first().textContent()) ?? '', /Created by API token \d+/);
    assert.equal(await page.locator('ol.timeline li .change').first().textContent(), 'parent: none → acme-corp');
    // README's picture of the console (`npm run screenshots` writes it): the page as it is now, before any focus ring.
    if (README_IMAGES) await page.screenshot({ path: path.join(README_IMAGES, 'console-group.png'), fullPage: true });
    await assertAccessible('group');
    await assertKeyboardReachable('group');
    await shot('group');

    await page.getByRole('link', { name: 'acme-corp', exact: true }).first().click();
    await page.getByRole('heading', { name: 'ACME Corporation' }).waitFor();
    await page.locator('ul.children li').nth(1).waitFor();
    assert.deepEqual(await page.locator('ul.children a').allTextContents(), ['acme-corp:jane', 'acme-corp:joe']);
  });

  it("console: edit shows a JSON error at its line and column, an over-long field as an error (never cut), the API's details next to the field; Save goes to the group's page", async () => {
    await page.getByRole('link', { name: 'Edit' }).click();
    await page.getByRole('heading', { name: 'Edit acme-corp' }).waitFor();
    const callsBefore = apiCalls.length;
    await page.getByLabel('Properties').fill('{\n  "region": "emea",\n  "plan": enterprise\n}');
    await page.getByText('Line 3, column 11').waitFor();
    await page.getByRole('button', { name: 'Save' }).click();
    // Only a save would be a PUT (the page may still be reading the group meanwhile).
    assert.deepEqual(
      apiCalls.slice(callsBefore).filter((call) => call.method === 'PUT'),
      [],
      'nothing sent with broken JSON',
    );
    assert.equal(await page.evaluate(() => document.activeElement?.id), 'properties', 'focus goes to the broken editor');
    await shot('edit-json-error');

    await page.getByLabel('Properties').fill('{"region": "emea", "plan": "enterprise", "tier": 2}');
    // The field's limit comes from the OpenAPI document: a longer paste stays as pasted, said to be too long, and is not sent.
    await page.getByLabel('Name').fill('x'.repeat(300));
    assert.equal((await page.getByLabel('Name').inputValue()).length, 300, 'nothing is cut');
    assert.equal(await page.getByLabel('Name').getAttribute('maxlength'), null);
    assert.equal(await page.locator('#name-error').textContent(), '300 characters: at most 256. Shorten it; nothing is cut.');
    assert.equal(await page.getByLabel('Name').getAttribute('aria-invalid'), 'true');
    await page.getByRole('button', { name: 'Save' }).click();
    assert.equal(await page.evaluate(() => document.activeElement?.id), 'name', 'focus goes to the over-long field');
    assert.deepEqual(
      apiCalls.slice(callsBefore).filter((call) => call.method === 'PUT'),
      [],
      'nothing sent while a field is too long',
    );
    await shot('edit-too-long');
    await page.getByLabel('Name').fill('ACME Corp.');
    assert.equal(await page.locator('#name-error').count(), 0);
    // What only the service can know: the details of its answer go next to the field they name.
    await page.getByLabel('Parent').fill('no-such-parent');
    await page.getByRole('button', { name: 'Save' }).click();
    await page.locator('#parent_user_group_id-error').waitFor();
    assert.match((await page.locator('#parent_user_group_id-error').textContent()) ?? '', /no user group with user_group_id "no-such-parent"/);
    assert.equal(await page.getByLabel('Parent').getAttribute('aria-invalid'), 'true');
    assert.equal(await page.evaluate(() => document.activeElement?.id), 'parent_user_group_id');
    await assertAccessible('edit with errors');
    await shot('edit-validation-error');

    await page.getByLabel('Parent').fill('');
    await page.getByRole('button', { name: 'Save' }).click();
    // Back on the group's page, as saved, saying so.
    await page.getByRole('heading', { name: 'ACME Corp.' }).waitFor();
    await page.getByRole('status').filter({ hasText: 'Saved acme-corp.' }).waitFor();
    assert.match(page.url(), /#\/group\/Customer\/acme-corp\?saved$/);
    await page.getByText('"tier": 2').first().waitFor();
    await page
      .locator('ol.timeline li')
      .first()
      .getByText(/^Changed name and properties$/)
      .waitFor();
    await shot('saved');
    const stored = await httpRequest(server.baseUrl, 'GET', '/api/user?user_group_id=acme-corp', { token: readToken });
    assert.equal(stored.body.user_group.name, 'ACME Corp.');
    assert.deepEqual(stored.body.user_group.properties, { region: 'emea', plan: 'enterprise', tier: 2 });
  });

  it('console: rotate with a grace period shows the new token once, with a copy button; the old one works until the grace ends', async () => {
    const before = await httpRequest(server.baseUrl, 'GET', '/api/user?user_group_id=acme-corp', { token: readToken });
    const oldToken = before.body.user_group.token;
    await page.getByRole('heading', { name: 'ACME Corp.' }).waitFor(); // the group's page, where Save left us
    await page.getByRole('button', { name: 'Rotate token' }).click();
    const dialog = page.getByRole('dialog', { name: 'Rotate the user group token' });
    await dialog.getByLabel('Grace period (seconds)').fill('3600');
    await assertAccessible('rotate dialog');
    await dialog.getByRole('button', { name: 'Rotate', exact: true }).click();
    const shownToken = dialog.getByLabel('New user group token');
    await shownToken.waitFor();
    const newToken = await shownToken.inputValue();
    assert.match(newToken, /^ugs_grp_/);
    await dialog.getByRole('button', { name: 'Copy' }).click();
    await dialog.getByRole('button', { name: 'Copied' }).waitFor();
    assert.equal(await page.evaluate(() => navigator.clipboard.readText()), newToken);
    await shot('rotated');
    const after = await httpRequest(server.baseUrl, 'GET', '/api/user?user_group_id=acme-corp', { token: readToken });
    assert.equal(after.body.user_group.token, newToken);
    assert.equal(
      (await httpRequest(server.baseUrl, 'GET', '/api/embed/context', { headers: { authorization: `Bearer ${oldToken}` } })).status,
      200,
      'the old token, in its grace period',
    );
    await dialog.getByRole('button', { name: 'Close' }).click();
    await page.locator('dialog[open]').waitFor({ state: 'detached' });
    assert.equal(await page.getByText(newToken).count(), 0, 'shown once: gone when the dialog closes');
    await page
      .locator('ol.timeline li')
      .first()
      .getByText(/^Token rotated$/)
      .waitFor();
  });

  it("console: delete only after typing the group's id", async () => {
    await page.goto(`${server.baseUrl}/console#/group/Customer/customer-07`);
    await page.getByRole('heading', { name: 'Customer 7' }).waitFor();
    await page.getByRole('button', { name: 'Delete' }).click();
    const dialog = page.getByRole('dialog', { name: 'Delete the user group' });
    const confirm = dialog.getByRole('button', { name: 'Delete customer-07' });
    assert.equal(await confirm.isDisabled(), true);
    await dialog.getByLabel('Type the user_group_id to confirm').fill('customer-0');
    assert.equal(await confirm.isDisabled(), true);
    await dialog.getByLabel('Type the user_group_id to confirm').fill('customer-07');
    await assertAccessible('delete dialog');
    await shot('delete');
    await confirm.click();
    await page.getByRole('status').filter({ hasText: 'Deleted customer-07.' }).waitFor();
    const gone = await httpRequest(server.baseUrl, 'GET', '/api/users?q=customer-07', { token: readToken });
    assert.deepEqual(gone.body.user_groups, []);
  });

  it('console: the Tags page lists each tag with its count, linked to its groups; create, rename onto another (they merge) and delete; the group form offers the tags in use', async () => {
    const rows = () =>
      page.locator('table.tags tbody tr').evaluateAll((trs) => trs.map((tr) => [tr.querySelector('td code')?.textContent, tr.children[1].textContent]));
    await page.getByRole('link', { name: 'Tags', exact: true }).click();
    await page.getByRole('heading', { name: 'Tags in Customer' }).waitFor();
    await page.getByText('Page 1: 2 tags').waitFor();
    // beta: every tenth customer and initech; trial: initech.
    assert.deepEqual(await rows(), [
      ['beta', '7'],
      ['trial', '1'],
    ]);
    await assertAccessible('tags');
    await assertKeyboardReachable('tags');
    await shot('tags');

    // A tag's limit comes from the OpenAPI document: a longer paste stays as pasted, said to be too long, and cannot be sent.
    await page.getByLabel('Name', { exact: true }).fill('g'.repeat(70));
    assert.equal((await page.getByLabel('Name', { exact: true }).inputValue()).length, 70, 'nothing is cut');
    assert.equal(await page.locator('#new-tag-error').textContent(), '70 characters: at most 64. Shorten it; nothing is cut.');
    assert.equal(await page.getByRole('button', { name: 'Create tag' }).isDisabled(), true);
    await page.getByLabel('Name', { exact: true }).fill('gold');
    await page.getByRole('button', { name: 'Create tag' }).click();
    await page.getByText('Created tag gold.').waitFor();
    await page.getByText('Page 1: 3 tags').waitFor();
    assert.deepEqual(await rows(), [
      ['beta', '7'],
      ['gold', '0'],
      ['trial', '1'],
    ]);

    // initech has both: it keeps one beta, and beta's count stays 7.
    await page.getByRole('button', { name: 'Rename tag trial' }).click();
    const dialog = page.locator('dialog[open]');
    await dialog.getByLabel('New name').fill('beta');
    await assertAccessible('rename a tag');
    await shot('tags-rename');
    await dialog.getByRole('button', { name: 'Rename', exact: true }).click();
    await page.getByText('Renamed tag trial to beta on 1 group: merged into the existing tag, which 7 groups carry now.').waitFor();
    await page.getByText('Page 1: 2 tags').waitFor();
    assert.deepEqual(await rows(), [
      ['beta', '7'],
      ['gold', '0'],
    ]);
    const initech = await httpRequest(server.baseUrl, 'GET', '/api/user/lookup?user_group_id=initech', { token: readToken });
    assert.deepEqual(initech.body.user_group.group_tags, ['beta']);

    await page.getByRole('button', { name: 'Delete tag gold' }).click();
    await page.locator('dialog[open]').getByRole('button', { name: 'Delete tag gold' }).click();
    await page.getByText('Deleted tag gold from 0 groups.').waitFor();
    await page.getByText('Page 1: 1 tags').waitFor();

    await page.getByRole('link', { name: '7 groups with tag beta' }).click();
    await page.getByRole('heading', { name: 'User groups in Customer' }).waitFor();
    await page.getByText('Page 1: 7 user groups').waitFor();
    assert.match(page.url(), /#\/groups\?tag=beta$/);

    // The group form offers the tags in use as a tag is typed; one click puts it in the field.
    await page.goto(`${server.baseUrl}/console#/group/Customer/customer-01/edit`);
    await page.getByRole('heading', { name: 'Edit customer-01' }).waitFor();
    await page.getByLabel('Tags').fill('vip, b');
    const offered = page.getByRole('group', { name: 'In use in Customer:' });
    await offered.getByRole('button', { name: 'beta 7' }).waitFor();
    await assertAccessible('tag suggestions');
    await shot('edit-tag-suggestions');
    await offered.getByRole('button', { name: 'beta 7' }).click();
    assert.equal(await page.getByLabel('Tags').inputValue(), 'vip, beta, ');
    assert.equal(await page.evaluate(() => document.activeElement?.id), 'group_tags', 'the field keeps the focus');
    await page.getByRole('button', { name: 'Save' }).click();
    await page.getByRole('status').filter({ hasText: 'Saved customer-01.' }).waitFor();
    const saved = await httpRequest(server.baseUrl, 'GET', '/api/user/lookup?user_group_id=customer-01', { token: readToken });
    assert.deepEqual(saved.body.user_group.group_tags, ['beta', 'vip']);
  });

  it('console: a malformed or unknown fragment shows the not-found view, not a blank page', async () => {
    for (const fragment of ['#/group/Customer/%E0%A4%A', '#/nowhere', '#/group/Customer']) {
      await page.goto(`${server.baseUrl}/console${fragment}`);
      await page.getByRole('heading', { name: 'No such page' }).waitFor();
    }
    await assertAccessible('not found');
    await shot('not-found');
    await page.getByRole('link', { name: 'Go to the user groups' }).click();
    await page.getByText('Page 1: 25 user groups').waitFor();
  });

  it('console: create an API token (its value shown once) and revoke it; the last admin token cannot be revoked', async () => {
    await page.getByRole('link', { name: 'API tokens' }).click();
    await page.getByRole('heading', { name: 'API tokens of acme' }).waitFor();
    await page.getByLabel('Name').fill('reporting backend');
    await page.getByRole('button', { name: 'Create token' }).click();
    const value = await page.getByLabel('New API token').inputValue();
    assert.match(value, /^ugs_api_/);
    assert.equal((await httpRequest(server.baseUrl, 'GET', '/api/users', { token: value })).status, 200, 'the new token works');
    const row = page.locator('table.tokens tbody tr', { hasText: 'reporting backend' });
    await row.waitFor();
    // One word for "no environment restriction", as `ugs token create --env any` and `ugs token list` say it.
    assert.equal(await row.locator('td').nth(4).textContent(), 'any');
    assert.equal(await page.locator('#token-environment').inputValue(), 'any');
    assert.equal(await page.getByText(/\bboth\b/).count(), 0, 'never "both"');
    await assertAccessible('tokens');
    await assertKeyboardReachable('tokens');
    await shot('tokens');

    await row.getByRole('button', { name: 'Revoke reporting backend' }).click();
    const dialog = page.getByRole('dialog', { name: 'Revoke the API token' });
    await dialog.getByRole('button', { name: 'Revoke reporting backend' }).click();
    await page.getByRole('status').filter({ hasText: 'Revoked reporting backend.' }).waitFor();
    await row.getByText('revoked').waitFor();
    await new Promise((resolve) => setTimeout(resolve, 1000)); // every instance, within a second
    assert.equal((await httpRequest(server.baseUrl, 'GET', '/api/users', { token: value })).status, 401);

    await page.locator('table.tokens tbody tr', { hasText: 'support' }).getByRole('button', { name: 'Revoke support' }).click();
    await page.getByRole('dialog', { name: 'Revoke the API token' }).getByRole('button', { name: 'Revoke support' }).click();
    await page.getByRole('dialog').getByRole('alert').filter({ hasText: 'last_admin_token' }).waitFor();
    await page.getByRole('dialog').getByRole('button', { name: 'Close' }).click();
    // The history names the token that acted.
    await page
      .getByText(/Token \d+ revoked by API token \d+/)
      .first()
      .waitFor();
  });

  it('console: add a webhook endpoint (its secret shown once), send a test event, see its deliveries, enable it once disabled, delete it', async () => {
    const received: { type: string; id: string }[] = [];
    const receiver = http.createServer((req, res) => {
      let body = '';
      req.on('data', (chunk) => (body += chunk));
      req.on('end', () => {
        received.push({ type: JSON.parse(body).type, id: String(req.headers['webhook-id']) });
        res.end('ok');
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
    try {
      await page.getByRole('link', { name: 'Webhooks' }).click();
      await page.getByRole('heading', { name: 'Webhooks of acme' }).waitFor();
      await page.getByText('No endpoint yet.').waitFor();
      await page.getByLabel('URL').fill(url);
      await page.getByLabel('Description').fill('cache invalidation');
      await page.getByLabel('user_group.created').check();
      await page.getByRole('button', { name: 'Add endpoint' }).click();
      const secret = await page.getByLabel('Signing secret').inputValue();
      assert.match(secret, /^whsec_/);
      const row = page.locator('table.webhooks tbody tr', { hasText: 'cache invalidation' });
      await row.waitFor();
      const id = await row.getAttribute('data-endpoint-id');
      assert.doesNotMatch((await page.locator('table.webhooks').textContent()) ?? '', /whsec_/, 'the listing never shows a secret');
      await assertAccessible('webhooks');
      await assertKeyboardReachable('webhooks');
      await shot('webhooks');

      await row.getByRole('button', { name: `Send a test event to endpoint ${id}` }).click();
      await page
        .getByRole('status')
        .filter({ hasText: `Test event delivered to endpoint ${id}: HTTP 200` })
        .waitFor();
      assert.equal(received[0]?.type, 'webhook_endpoint.test');

      // A change is delivered, and listed with its attempt.
      assert.equal((await httpRequest(server.baseUrl, 'POST', '/api/user', { token: adminToken, body: { user_group_id: 'webhook-console' } })).status, 201);
      await eventually('the change delivered', async () =>
        (await httpRequest(server.baseUrl, 'GET', `/api/webhook_endpoints/${id}/deliveries`, { token: adminToken })).body.deliveries.some(
          (d: { status: string }) => d.status === 'delivered',
        ),
      );
      await row.getByRole('link', { name: `Deliveries of endpoint ${id}` }).click();
      await page.getByRole('heading', { name: `Deliveries of endpoint ${id}` }).waitFor();
      const delivery = page.locator('table.deliveries tbody tr', { hasText: 'user_group.created' });
      await delivery.getByText('delivered').waitFor();
      await delivery.getByText(/HTTP 200 in \d+ ms/).waitFor();
      assert.equal(await delivery.locator('code').textContent(), received.find((r) => r.type === 'user_group.created')!.id, 'the webhook-id the receiver got');
      await assertAccessible('webhook deliveries');
      await shot('webhook-deliveries');

      await page.getByRole('link', { name: 'All endpoints' }).click();
      // Disabled as the dispatcher leaves it after 3 days of failures (which this test cannot wait for).
      const file = new SQLite(database.url.slice('sqlite:'.length));
      file.pragma('busy_timeout = 5000');
      file
        .prepare('update webhook_endpoints set failing_since = ?, disabled_at = ?, next_attempt_at = null where id = ?')
        .run(new Date(Date.now() - 3 * 86_400_000).toISOString(), new Date().toISOString(), Number(id));
      file.close();
      await page.reload();
      const disabledRow = page.locator('table.webhooks tbody tr', { hasText: 'cache invalidation' });
      await disabledRow.getByText('disabled').waitFor();
      await assertAccessible('webhooks, one disabled');
      await shot('webhooks-disabled');
      await disabledRow.getByRole('button', { name: `Enable endpoint ${id}` }).click();
      await page
        .getByRole('status')
        .filter({ hasText: `Endpoint ${id} is enabled` })
        .waitFor();
      await disabledRow.getByText('enabled').waitFor();
      assert.equal(await disabledRow.getByRole('button', { name: `Enable endpoint ${id}` }).count(), 0, 'no Enable button on an enabled endpoint');
      const [afterEnable] = (await httpRequest(server.baseUrl, 'GET', '/api/webhook_endpoints', { token: adminToken })).body.webhook_endpoints;
      assert.equal(afterEnable.status, 'enabled');
      assert.equal(afterEnable.failing_since, null);

      await page
        .locator('table.webhooks tbody tr', { hasText: 'cache invalidation' })
        .getByRole('button', { name: `Delete endpoint ${id}` })
        .click();
      await page
        .getByRole('dialog', { name: 'Delete the webhook endpoint' })
        .getByRole('button', { name: `Delete endpoint ${id}` })
        .click();
      await page
        .getByRole('status')
        .filter({ hasText: `Deleted endpoint ${id}.` })
        .waitFor();
      const listed = await httpRequest(server.baseUrl, 'GET', '/api/webhook_endpoints', { token: adminToken });
      assert.deepEqual(listed.body.webhook_endpoints, []);
    } finally {
      receiver.closeAllConnections();
      await new Promise((resolve) => receiver.close(resolve));
    }
  });

  it('console: the signing keys page lists the published keys (kid, kty, alg) of every algorithm and what signs now, read from the public documents without the API token', async () => {
    // A rotation to RS256 keeps the ES256 key of the first start published: two key types at once.
    const rotated = await runUgs(['keys', 'embed', 'rotate', '--alg', 'RS256', '--activate-in', '0s', '--json'], env);
    assert.equal(rotated.code, 0, rotated.stderr);
    const { kid } = JSON.parse(rotated.stdout) as { kid: string };
    for (let waited = 0; ; waited += 200) {
      const discovery = await httpRequest(server.baseUrl, 'GET', '/.well-known/openid-configuration');
      if ((discovery.body as unknown as { id_token_signing_alg_values_supported: string[] }).id_token_signing_alg_values_supported[0] === 'RS256') break;
      assert.ok(waited < GENEROUS_WAIT_MS, 'the server publishes the new key within its one-second copy of the key table');
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    // And an EdDSA key, published ahead: the console lists it, though the default key set does not (docs/api.md, "Keys").
    const eddsa = await runUgs(['keys', 'embed', 'rotate', '--alg', 'EdDSA', '--activate-in', '1h', '--json'], env);
    assert.equal(eddsa.code, 0, eddsa.stderr);
    const { kid: eddsaKid } = JSON.parse(eddsa.stdout) as { kid: string };
    type KeySet = { keys: { kid: string; kty: string; alg: string }[] };
    const { keys } = await eventually('the EdDSA key in the key set that asks for it', async () => {
      const set = JSON.parse((await httpRequest(server.baseUrl, 'GET', '/.well-known/jwks.json?alg=ES256,RS256,EdDSA')).text) as KeySet;
      return set.keys.some((key) => key.kid === eddsaKid) ? set : undefined;
    });
    assert.deepEqual(keys.map((key) => key.alg).sort(), ['ES256', 'EdDSA', 'RS256']);

    await page.getByRole('link', { name: 'Signing keys' }).click();
    await page.getByRole('heading', { name: 'Embed signing keys' }).waitFor();
    await page.locator(`table.signing-keys tbody tr[data-kid="${kid}"]`).waitFor();
    const rows = await page
      .locator('table.signing-keys tbody tr')
      .evaluateAll((trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent)));
    assert.deepEqual(
      rows,
      keys.map((key) => [key.kid, key.kty, key.alg, { RSA: '2048 bits', EC: 'P-256', OKP: 'Ed25519' }[key.kty], 'sig']),
      'every published key, in the order of the key set',
    );
    await page.getByText('RS256 (still published: EdDSA, ES256)').waitFor();
    assert.equal(await page.getByRole('link', { name: 'Signing keys' }).getAttribute('aria-current'), 'page');
    assert.ok(wellKnownCalls.length >= 2, 'the key set and the discovery document were read');
    assert.deepEqual(
      wellKnownCalls.filter((call) => call.authorization !== undefined),
      [],
      'public documents: the API token is not sent',
    );
    await assertAccessible('signing keys');
    await assertKeyboardReachable('signing keys');
    await shot('signing-keys');
  });

  it('console: says what it means in plain words: no code points, descendants, ancestors, instances or status codes on the pages and in the dialogs', async () => {
    const JARGON = /code.point|descendant|ancestor|\binstances?\b|\b40[13]\b|Authorization header|keyset|prefix/i;
    const said: string[] = [];
    const read = async (what: string) => {
      // biome-ignore lint/performance/useDomNodeTextContent: what the page shows, as laid out (closed dialogs left out)
      const text = await page.locator('body').innerText();
      for (const match of text.match(new RegExp(JARGON, 'gi')) ?? []) said.push(`${what}: ${match}`);
    };
    await page.goto(`${server.baseUrl}/console#/groups`);
    await page.getByText('Page 1: 25 user groups').waitFor();
    await read('groups');
    await page.goto(`${server.baseUrl}/console#/group/Customer/acme-corp`);
    await page.locator('ul.children li').first().waitFor();
    await read('group');
    await page.getByRole('button', { name: 'Rotate token' }).click();
    await read('rotate dialog');
    await page.getByRole('dialog').getByRole('button', { name: 'Close' }).click();
    await page.getByRole('button', { name: 'Delete' }).click();
    await page.getByLabel('Also delete every group under it (its children, theirs, and so on)').waitFor();
    await read('delete dialog');
    await page.getByRole('dialog').getByRole('button', { name: 'Close' }).click();
    await page.goto(`${server.baseUrl}/console#/tags`);
    await page.getByText('Page 1: 2 tags, sorted by name (capital letters before small ones)').waitFor();
    await read('tags');
    await page.goto(`${server.baseUrl}/console#/tokens`);
    await page.locator('table.tokens tbody tr', { hasText: 'viewer' }).getByRole('button', { name: 'Revoke viewer' }).click();
    await page.getByRole('dialog', { name: 'Revoke the API token' }).getByText('viewer stops working within a second.').waitFor();
    await read('revoke dialog');
    await page.getByRole('dialog').getByRole('button', { name: 'Close' }).click();
    for (const [name, fragment] of [
      ['webhooks', '#/webhooks'],
      ['keys', '#/keys'],
    ]) {
      await page.goto(`${server.baseUrl}/console${fragment}`);
      await page.locator('main h1').waitFor();
      await read(name);
    }
    assert.deepEqual(said, []);
  });

  it('console: at 390 px (a phone) each user group is a card: its id, its name and what it has, named, with nothing to scroll sideways; at 1280 px a table', async () => {
    await page.goto(`${server.baseUrl}/console#/groups?parent=acme-corp`);
    await page.getByText('Page 1: 2 user groups').waitFor();
    const header = page.locator('table.groups thead th');
    assert.deepEqual(await header.allInnerTexts(), ['user_group_id', 'Name', 'Level', 'Parent', 'Tags', 'Updated'], 'a table with its header at 1280 px');
    await page.setViewportSize({ width: 390, height: 844 });
    try {
      const card = page.locator('table.groups tbody tr', { hasText: 'acme-corp:jane' });
      // biome-ignore lint/performance/useDomNodeTextContent: the lines a card shows, as laid out (empty cells hidden)
      const lines = async () => (await card.innerText()).split('\n').map((line) => line.trim());
      assert.deepEqual((await lines()).slice(0, 3), ['acme-corp:jane', 'jane at ACME', 'Parent: acme-corp']);
      assert.match((await lines())[3], /^Updated: \d+ \w+ \d{4}, [\d:]+ UTC$/);
      assert.equal((await lines()).length, 4, 'no line for what the group does not have (level, tags)');
      // The header stays for screen readers, out of sight: the cards name their own lines.
      assert.ok((await page.locator('table.groups thead').evaluate((thead) => thead.getBoundingClientRect().height)) <= 1, 'no header row on screen');
      await page.goto(`${server.baseUrl}/console#/groups?q=customer-00`);
      await page.getByText('Page 1: 1 user group', { exact: true }).waitFor();
      const tags = (await httpRequest(server.baseUrl, 'GET', '/api/user/lookup?user_group_id=customer-00', { token: readToken })).body.user_group.group_tags;
      assert.ok(tags.length > 0);
      const tagged = page.locator('table.groups tbody tr', { hasText: 'customer-00' });
      // biome-ignore lint/performance/useDomNodeTextContent: the lines a card shows, as laid out
      assert.deepEqual((await tagged.innerText()).split('\n').slice(0, 3), ['customer-00', 'Customer 0', `Tags: ${tags.join(', ')}`]);
      const layout = await page.evaluate(() => {
        const region = document.querySelector<HTMLElement>('.table-scroll')!;
        const outside = [...document.querySelectorAll<HTMLElement>('table.groups td')]
          .filter((td) => td.getClientRects().length > 0)
          .map((td) => td.getBoundingClientRect())
          .filter((box) => box.left < 0 || box.right > window.innerWidth).length;
        return { sideways: region.scrollWidth - region.clientWidth, outside };
      });
      assert.deepEqual(layout, { sideways: 0, outside: 0 }, 'nothing to scroll sideways, every cell on the screen');
      await assertAccessible('groups as cards');
      await shot('groups-cards-390px');
    } finally {
      await page.setViewportSize({ width: 1280, height: 900 });
    }
  });

  it('console: at 390 px wide (a phone) every page fits: no label or control over another, nothing wider than the screen', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    try {
      const pages = [
        ['groups', '#/groups', 'User groups in Customer'],
        ['group', '#/group/Customer/acme-corp', 'ACME Corp.'],
        ['edit', '#/group/Customer/acme-corp/edit', 'Edit acme-corp'],
        ['tags', '#/tags', 'Tags in Customer'],
        ['tokens', '#/tokens', 'API tokens of acme'],
        ['webhooks', '#/webhooks', 'Webhooks of acme'],
        ['keys', '#/keys', 'Embed signing keys'],
      ] as const;
      for (const [name, fragment, heading] of pages) {
        await page.goto(`${server.baseUrl}/console${fragment}`);
        await page.getByRole('heading', { name: heading }).waitFor();
        const layout = await page.evaluate(() => {
          const visible = [...document.querySelectorAll<HTMLElement>('label, legend, input, select, textarea, button, a.button, h1')].filter(
            (el) =>
              el.getClientRects().length > 0 &&
              !el.closest('dialog:not([open])') &&
              !el.closest('.visually-hidden') &&
              // What a closed <details> holds is not shown (only its summary is).
              !(el.closest('details:not([open])') && !el.closest('summary')),
          );
          const boxes = visible.map((el) => ({ el, box: el.getBoundingClientRect() }));
          const overlaps: string[] = [];
          for (let i = 0; i < boxes.length; i++) {
            for (let j = i + 1; j < boxes.length; j++) {
              const [a, b] = [boxes[i].box, boxes[j].box];
              const width = Math.min(a.right, b.right) - Math.max(a.left, b.left);
              const height = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
              const nested = boxes[i].el.contains(boxes[j].el) || boxes[j].el.contains(boxes[i].el);
              if (width > 1 && height > 1 && !nested) overlaps.push(`${boxes[i].el.outerHTML.slice(0, 60)} / ${boxes[j].el.outerHTML.slice(0, 60)}`);
            }
          }
          return { overlaps, overflow: document.documentElement.scrollWidth - window.innerWidth };
        });
        assert.deepEqual(layout.overlaps, [], `${name} at 390 px: overlapping labels or controls`);
        assert.ok(layout.overflow <= 0, `${name} at 390 px: the page is ${layout.overflow} px wider than the screen`);
        await assertAccessible(`${name} at 390 px`);
        await shot(`${name}-390px`);
      }
    } finally {
      await page.setViewportSize({ width: 1280, height: 900 });
    }
  });

  it('console: sign out forgets the token; a reload shows the sign-in form', async () => {
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByLabel('API token').waitFor();
    await page.getByText('It is kept in this tab only and sent only to this service; closing the tab or signing out forgets it.').waitFor();
    assert.equal(await page.evaluate(() => sessionStorage.length), 0);
    await page.reload();
    await page.getByLabel('API token').waitFor();
  });

  it("console: the first start's token says it was issued at the first start, not by the command-line tool", async () => {
    await page.getByLabel('API token').fill(firstStartToken);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('link', { name: 'API tokens' }).click();
    await page.getByRole('heading', { name: 'API tokens of default' }).waitFor();
    const history = page.locator('ol.timeline li');
    await history.first().waitFor();
    assert.deepEqual(
      (await history.locator('p:not(.when)').allTextContents()).map((text) => text.replace(/\s+/g, ' ').trim()),
      ['Token 1 issued at the first start'],
    );
    await shot('first-start-token');
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByLabel('API token').waitFor();
  });

  it('console: a read-only token sees no write controls and no API tokens page', async () => {
    await page.getByLabel('API token').fill(readToken);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByText('Page 1: 25 user groups').waitFor();
    assert.equal(await page.getByRole('link', { name: 'New user group' }).count(), 0);
    assert.equal(await page.getByRole('link', { name: 'API tokens' }).count(), 0);
    assert.equal(await page.getByRole('link', { name: 'Signing keys' }).count(), 1, 'public keys: every token may look at them');
    await page.getByRole('link', { name: 'customer-01' }).click();
    await page.getByRole('heading', { name: 'Customer 1' }).waitFor();
    await page.getByRole('button', { name: 'Show the dashboard variables' }).click();
    await page.locator('table.variables tbody tr').first().waitFor();
    for (const name of ['Edit', 'Rotate token', 'Delete'])
      assert.equal(await page.getByRole(name === 'Edit' ? 'link' : 'button', { name, exact: true }).count(), 0, name);
    await assertAccessible('read-only group');
    await shot('read-only');
    await page.getByRole('link', { name: 'Tags', exact: true }).click();
    await page.getByText('Page 1: 2 tags').waitFor();
    for (const name of ['Create tag', 'Rename tag beta', 'Delete tag beta']) assert.equal(await page.getByRole('button', { name }).count(), 0, name);
    await page.getByRole('button', { name: 'Sign out' }).click();
  });

  it('console: no Content-Security-Policy violation happened on any page', () => {
    assert.deepEqual(cspViolations, []);
  });
});
