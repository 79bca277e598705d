// GET /docs, the API reference page, in Debian's Chromium against a real server: it loads
// nothing from another origin (it works offline), shows the service's name and each
// operation's code samples, takes a pasted API token, and "Try" on get-or-create by query
// string answers 201 the first time and 200 the second.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { createTestDatabase, type TestDatabase } from './helpers/backends.ts';
import { spawnServer, issueTokenWithCli, type ServerProcess } from './helpers/processes.ts';
import { ARTIFACTS, launchChromium, missingBrowser } from './helpers/browser.ts';

const skip = missingBrowser('the reference page browser test');

describe('the reference page (/docs) in headless Chromium', { skip, timeout: 120_000 }, () => {
  let database: TestDatabase;
  let server: ServerProcess;
  let browser: Browser;
  let page: Page;
  let apiToken: string;
  const foreignRequests: string[] = [];

  before(async () => {
    database = await createTestDatabase('sqlite');
    const issued = await issueTokenWithCli({ DATABASE_URL: database.url }, ['--account', 'docs']);
    apiToken = issued.token;
    server = await spawnServer({ DATABASE_URL: database.url, UGS_SECRET_KEY: crypto.randomBytes(32).toString('base64') });
    browser = await launchChromium();
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    page.on('request', (request) => {
      if (!request.url().startsWith(server.baseUrl) && !request.url().startsWith('data:')) foreignRequests.push(request.url());
    });
  });
  after(async () => {
    await browser?.close();
    await server?.stop();
    await database?.drop();
  });

  it('docs: the branded page reads /openapi.json from this server and loads nothing from elsewhere', async () => {
    const spec = page.waitForResponse((response) => response.url() === `${server.baseUrl}/openapi.json`);
    await page.goto(`${server.baseUrl}/docs`);
    assert.equal((await spec).status(), 200);
    assert.equal(await page.title(), 'User Group Service · API reference');
    await page.locator('rapi-doc').getByText('User Group Service').first().waitFor();
    await page.screenshot({ path: path.join(ARTIFACTS, 'docs-overview.png') });
    assert.deepEqual(foreignRequests, [], 'no request left this server');
  });

  it('docs: each security scheme is titled by the token it takes, and its field says what to paste there', async () => {
    await page.goto(`${server.baseUrl}/docs#auth`);
    const auth = page.locator('rapi-doc').locator('#auth');
    await auth.locator('input.api-key-input').first().waitFor();
    const schemes = {
      apiToken: { title: 'API token (ugs_api_…)', placeholder: 'ugs_api_…' },
      userGroupOrEmbedToken: { title: 'User group token (ugs_grp_…) or embed token', placeholder: 'ugs_grp_… or an embed token' },
    };
    for (const [id, { title, placeholder }] of Object.entries(schemes)) {
      const row = auth.locator(`#security-scheme-${id}`);
      await row.getByText(title, { exact: true }).waitFor();
      await row.locator(`input[placeholder="${placeholder}"]`).waitFor();
    }
    assert.equal(await auth.getByText('HTTP Bearer').count(), 0, 'no scheme is titled by its type alone');
    assert.equal(await auth.locator('input[placeholder="api-token"]').count(), 0, 'no field is labelled api-token');
    await page.screenshot({ path: path.join(ARTIFACTS, 'docs-authentication.png') });
  });

  it('docs: with a pasted API token, Try on get-or-create by query string answers 201, then 200', async () => {
    await page.goto(`${server.baseUrl}/docs#auth`);
    const keyInput = page.locator('rapi-doc').locator('input.api-key-input').first();
    await keyInput.waitFor();
    await keyInput.fill(apiToken);
    await page.locator('rapi-doc').getByRole('button', { name: 'SET' }).first().click();

    await page.goto(`${server.baseUrl}/docs#get-/api/user`);
    const operation = page.locator('rapi-doc').locator('api-request').first();
    await operation.waitFor();
    await operation.locator('input[data-pname="user_group_id"]').fill('from-the-docs');
    await page.screenshot({ path: path.join(ARTIFACTS, 'docs-get-or-create.png') });
    assert.ok(await page.locator('rapi-doc').getByText('@ugs/client').first().isVisible(), 'the TypeScript sample is shown');

    for (const expected of [201, 200]) {
      const answered = page.waitForResponse((response) => response.url().startsWith(`${server.baseUrl}/api/user?`));
      await operation.getByRole('button', { name: 'TRY' }).click();
      const response = await answered;
      assert.equal(response.status(), expected, await response.text());
      assert.equal(response.request().headers().authorization, `Bearer ${apiToken}`);
      // What the page shows of it.
      const shown = operation.locator('.response-message');
      await shown.filter({ hasText: String(expected) }).waitFor();
      await shown.scrollIntoViewIfNeeded();
    }
    await page.screenshot({ path: path.join(ARTIFACTS, 'docs-try-it.png') });
    assert.deepEqual(foreignRequests, []);
  });
});
