// GET /docs, the API reference page, in Debian's Chromium against a real server: it loads
// nothing from another origin (it works offline), shows the service's name and each
// operation's code samples, takes a pasted API token, and "Try" on get-or-create by query
// string answers 201 the first time and 200 the second. It says each pattern's rule in words,
// never as a regular expression; at 390 px (a phone) its Contents button leads to every
// operation; /docs/ leads to /docs.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { createTestDatabase, type TestDatabase } from './helpers/backends.ts';
import { spawnServer, issueTokenWithCli, type ServerProcess } from './helpers/processes.ts';
import { ARTIFACTS, launchChromium, missingBrowser, openPage } from './helpers/browser.ts';
import { openApiDocument } from '../scripts/openapi-document.ts';
import { PATTERN_WORDS } from '../src/pages/pattern-words.ts';

const skip = missingBrowser('the reference page browser test');
const PHONE = { width: 390, height: 844 };
const DESKTOP = { width: 1280, height: 900 };

/** Every `pattern` of a JSON document. */
function patternsOf(node: unknown): string[] {
  if (node === null || typeof node !== 'object') return [];
  const own = typeof (node as { pattern?: unknown }).pattern === 'string' ? [(node as { pattern: string }).pattern] : [];
  return [...own, ...Object.entries(node).flatMap(([key, value]) => (key === 'examples' || key === 'example' ? [] : patternsOf(value)))];
}

describe('the reference page: patterns in words', () => {
  it('docs: every pattern of /openapi.json has its rule in words for the reference page', async () => {
    const patterns = new Set(patternsOf(await openApiDocument()));
    assert.ok(patterns.size > 0);
    assert.deepEqual(
      [...patterns].filter((pattern) => !Object.hasOwn(PATTERN_WORDS, pattern)),
      [],
      'say the rule in words in src/pages/pattern-words.ts',
    );
  });
});

describe('the reference page (/docs) in headless Chromium', { skip }, () => {
  let database: TestDatabase;
  let server: ServerProcess;
  let browser: Browser;
  let page: Page;
  let apiToken: string;
  const foreignRequests: string[] = [];
  const cspViolations: string[] = [];

  /** The text RapiDoc shows, through its nested shadow roots (style sheets aside). */
  const shownText = () =>
    // No named function inside: the compiled test would name it with a helper the page lacks.
    page.evaluate(() => {
      const parts: string[] = [];
      const stack: Node[] = [document.querySelector('rapi-doc')!.shadowRoot!];
      while (stack.length > 0) {
        const node = stack.pop()!;
        if (node.nodeType === Node.TEXT_NODE) parts.push((node as Text).data);
        if (node.nodeType === Node.ELEMENT_NODE && ['STYLE', 'SCRIPT'].includes((node as Element).tagName)) continue;
        const children = [...node.childNodes, ...((node as Element).shadowRoot ? [(node as Element).shadowRoot!] : [])];
        stack.push(...children.reverse());
      }
      return parts.join(' ');
    });
  const navigationEntries = () =>
    page.evaluate(() =>
      [...document.querySelector('rapi-doc')!.shadowRoot!.querySelectorAll<HTMLElement>('.nav-bar-path[data-content-id]')].map((el) => el.dataset.contentId!),
    );
  /** Shows one operation (as a link to it would) and waits until RapiDoc has drawn it. */
  const showOperation = async (id: string) => {
    await page.evaluate((target) => {
      location.hash = target;
    }, id);
    await page.waitForFunction((target) => document.querySelector('rapi-doc')?.shadowRoot?.getElementById(target) !== null, id);
  };

  before(async () => {
    database = await createTestDatabase('sqlite');
    const issued = await issueTokenWithCli({ DATABASE_URL: database.url }, ['--account', 'docs']);
    apiToken = issued.token;
    server = await spawnServer({ DATABASE_URL: database.url, UGS_SECRET_KEY: crypto.randomBytes(32).toString('base64') });
    browser = await launchChromium();
    page = await openPage(browser, { viewport: DESKTOP });
    page.on('request', (request) => {
      if (!request.url().startsWith(server.baseUrl) && !request.url().startsWith('data:')) foreignRequests.push(request.url());
    });
    page.on('console', (message) => {
      if (/Content.Security.Policy/i.test(message.text())) cspViolations.push(message.text());
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

  it('docs: at 1280 px every operation is listed beside the reference, and there is no Contents button', async () => {
    await page.goto(`${server.baseUrl}/docs`);
    const entry = page.locator('rapi-doc').locator('.nav-bar-path', { hasText: 'List user groups' });
    await entry.waitFor();
    const box = await entry.boundingBox();
    assert.ok(
      box && box.x >= 0 && box.x + box.width <= DESKTOP.width && box.y + box.height <= DESKTOP.height,
      `the entry is on the screen: ${JSON.stringify(box)}`,
    );
    assert.equal(await page.getByRole('button', { name: 'Contents' }).isVisible(), false);
    await entry.click();
    await page.locator('rapi-doc').locator('[id="get-/api/users"]').waitFor();
    assert.match(page.url(), /#get-\/api\/users$/);
  });

  it("docs: no operation shows a regular expression; each pattern's rule is said in words after the field's description", async () => {
    await page.goto(`${server.baseUrl}/docs`);
    await page.locator('rapi-doc').locator('.nav-bar-path').first().waitFor();
    const operations = await navigationEntries();
    assert.ok(operations.length >= 30, `every operation is listed (${operations.length})`);
    const shown: string[] = [];
    for (const id of operations) {
      await showOperation(id);
      const text = await shownText();
      if (/Pattern:/.test(text) || Object.keys(PATTERN_WORDS).some((pattern) => text.includes(pattern))) shown.push(id);
    }
    assert.deepEqual(shown, [], 'operations that show a regular expression');

    // The list's q: its description, then the rule in the words of a refusal.
    await showOperation('get-/api/users');
    await page.locator('rapi-doc').locator('input[data-pname="q"]').waitFor();
    assert.match(await shownText(), /starts with this \(case-sensitive\)\. Plain text: no control characters or unpaired surrogates\./);
    // A description that says the rule already is not told it twice.
    await showOperation('get-/api/user');
    const text = await shownText();
    assert.match(text, /no control characters, not only white space\. Case-sensitive, never trimmed\./);
    assert.doesNotMatch(text, /Case-sensitive, never trimmed\. Plain text/);
    await page.screenshot({ path: path.join(ARTIFACTS, 'docs-patterns-in-words.png') });
  });

  it('docs: at 390 px (a phone) Contents opens the list of operations over the page; picking one shows it and closes the list', async () => {
    await page.setViewportSize(PHONE);
    try {
      await page.goto(`${server.baseUrl}/docs`);
      const contents = page.getByRole('button', { name: 'Contents' });
      await contents.waitFor();
      await page.locator('rapi-doc').getByText('Authenticate below').waitFor();
      const entry = page.locator('rapi-doc').locator('.nav-bar-path', { hasText: 'List user groups' });
      assert.equal(await entry.isVisible(), false, 'RapiDoc alone shows no navigation on a phone');
      assert.equal(await contents.getAttribute('aria-expanded'), 'false');
      const overflow = () => page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      assert.ok((await overflow()) <= 0, 'nothing wider than the screen');
      await page.screenshot({ path: path.join(ARTIFACTS, 'docs-390px-overview.png') });

      await contents.click();
      assert.equal(await page.getByRole('button', { name: 'Close' }).getAttribute('aria-expanded'), 'true');
      await entry.waitFor();
      const box = await entry.boundingBox();
      assert.ok(box && box.x >= 0 && box.x + box.width <= PHONE.width, `the entry fits the screen: ${JSON.stringify(box)}`);
      const focused = await page.evaluate(() => document.querySelector('rapi-doc')?.shadowRoot?.activeElement?.className ?? '');
      assert.match(focused, /nav-bar/, 'focus goes into the list');
      await page.screenshot({ path: path.join(ARTIFACTS, 'docs-390px-contents.png') });
      // Escape closes it, and focus goes back to the button.
      await page.keyboard.press('Escape');
      await contents.waitFor();
      assert.equal(await entry.isVisible(), false);
      assert.equal(await page.evaluate(() => document.activeElement?.id), 'contents-button');

      await contents.click();
      await entry.click();
      await page.locator('rapi-doc').locator('[id="get-/api/users"]').waitFor();
      assert.match(page.url(), /#get-\/api\/users$/);
      assert.equal(await entry.isVisible(), false, 'the list closes once an operation is picked');
      assert.equal(await contents.getAttribute('aria-expanded'), 'false');
      const title = page.locator('rapi-doc').getByText('List user groups', { exact: true }).first();
      assert.ok(await title.isVisible(), 'the operation is shown');
      assert.ok((await overflow()) <= 0, 'nothing wider than the screen');
      await page.screenshot({ path: path.join(ARTIFACTS, 'docs-390px-operation.png') });
    } finally {
      await page.setViewportSize(DESKTOP);
    }
  });

  it("docs: /docs/ leads to /docs, fragment and all, with the pages' headers", async () => {
    const answer = await fetch(`${server.baseUrl}/docs/?from=bookmark`, { redirect: 'manual' });
    assert.equal(answer.status, 301);
    assert.equal(answer.headers.get('location'), '/docs?from=bookmark');
    assert.equal(answer.headers.get('x-frame-options'), 'DENY');
    await page.goto(`${server.baseUrl}/docs/#get-/api/users`);
    await page.locator('rapi-doc').locator('[id="get-/api/users"]').waitFor();
    assert.equal(new URL(page.url()).pathname, '/docs');
  });

  it('docs: each security scheme is titled by the token it takes, and its field says what to paste there', async () => {
    await page.goto(`${server.baseUrl}/docs#auth`);
    const auth = page.locator('rapi-doc').locator('#auth');
    await auth.locator('input.api-key-input').first().waitFor();
    const schemes = {
      apiToken: { title: 'API token (ugs_api_…), sent as Token <API token>', placeholder: 'Token ugs_api_…' },
      apiTokenBearer: { title: 'API token (ugs_api_…), sent as Bearer', placeholder: 'ugs_api_…' },
      userGroupOrEmbedToken: { title: 'User group token (ugs_grp_…) or embed token', placeholder: 'ugs_grp_… or an embed token' },
    };
    for (const [id, { title, placeholder }] of Object.entries(schemes)) {
      const row = auth.locator(`#security-scheme-${id}`);
      await row.getByText(title, { exact: true }).waitFor();
      await row.locator(`input[placeholder="${placeholder}"]`).waitFor();
    }
    assert.equal(await auth.getByText('HTTP Bearer').count(), 0, 'no scheme is titled by its type alone');
    assert.equal(await auth.getByText('API Key (Authorization)').count(), 0, 'no scheme is titled by its type alone');
    assert.equal(await auth.locator('input[placeholder="api-token"]').count(), 0, 'no field is labelled api-token');
    await page.screenshot({ path: path.join(ARTIFACTS, 'docs-authentication.png') });
  });

  it('docs: with an API token pasted after the word Token, Try on get-or-create by query string answers 201, then 200', async () => {
    await page.goto(`${server.baseUrl}/docs#auth`);
    const keyInput = page.locator('rapi-doc').locator('input.api-key-input.apiToken');
    await keyInput.waitFor();
    await keyInput.fill(`Token ${apiToken}`);
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
      assert.equal(response.request().headers().authorization, `Token ${apiToken}`);
      // What the page shows of it.
      const shown = operation.locator('.response-message');
      await shown.filter({ hasText: String(expected) }).waitFor();
      await shown.scrollIntoViewIfNeeded();
    }
    await page.screenshot({ path: path.join(ARTIFACTS, 'docs-try-it.png') });
    assert.deepEqual(foreignRequests, []);
  });

  it('docs: no Content-Security-Policy violation happened', () => {
    assert.deepEqual(cspViolations, []);
  });
});
