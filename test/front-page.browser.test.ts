// GET /, the front page, in Debian's Chromium against a real server: it leads to the console
// and to the API reference, at 1280 px and at 390 px (a phone), under the pages' headers and a
// policy that allows its own style sheet only; it says nothing of the deployment.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { createTestDatabase, type TestDatabase } from './helpers/backends.ts';
import { spawnServer, type ServerProcess } from './helpers/processes.ts';
import { ARTIFACTS, launchChromium, missingBrowser, openPage } from './helpers/browser.ts';

const skip = missingBrowser('the front page browser test');

describe('the front page (/) in headless Chromium', { skip }, () => {
  let database: TestDatabase;
  let server: ServerProcess;
  let browser: Browser;
  let page: Page;
  const cspViolations: string[] = [];
  const foreignRequests: string[] = [];

  before(async () => {
    database = await createTestDatabase('sqlite');
    server = await spawnServer({ DATABASE_URL: database.url, UGS_SECRET_KEY: crypto.randomBytes(32).toString('base64') });
    browser = await launchChromium();
    page = await openPage(browser, { viewport: { width: 1280, height: 900 } });
    page.on('console', (message) => {
      if (/Content.Security.Policy/i.test(message.text())) cspViolations.push(message.text());
    });
    page.on('request', (request) => {
      if (!request.url().startsWith(server.baseUrl)) foreignRequests.push(request.url());
    });
  });
  after(async () => {
    await browser?.close();
    await server?.stop();
    await database?.drop();
  });

  it("front page: served with the pages' headers, no script, and nothing about the deployment", async () => {
    const answer = await fetch(`${server.baseUrl}/`);
    assert.equal(answer.status, 200);
    assert.match(String(answer.headers.get('content-type')), /^text\/html/);
    const policy = String(answer.headers.get('content-security-policy'));
    assert.match(policy, /^default-src 'none'; style-src 'sha256-[\w+/=]+'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'$/);
    assert.equal(answer.headers.get('x-frame-options'), 'DENY');
    assert.equal(answer.headers.get('x-content-type-options'), 'nosniff');
    assert.equal(answer.headers.get('referrer-policy'), 'no-referrer');
    assert.equal(answer.headers.get('access-control-allow-origin'), null);
    const html = await answer.text();
    assert.doesNotMatch(html, /<script/i, 'no script');
    assert.doesNotMatch(html, /0\.1\.0|sqlite|postgres|ugs_api_|127\.0\.0\.1/i, 'no version, database, token or address');
    assert.doesNotMatch(html, /https?:\/\//, 'nothing from another origin');
  });

  for (const [width, height] of [
    [1280, 900],
    [390, 844],
  ]) {
    it(`front page at ${width} px: its two links lead to the console and to the API reference, and it fits the screen`, async () => {
      await page.setViewportSize({ width, height });
      await page.goto(`${server.baseUrl}/`);
      assert.equal(await page.title(), 'User Group Service');
      const consoleLink = page.getByRole('link', { name: /^Console/ });
      const referenceLink = page.getByRole('link', { name: /^API reference/ });
      for (const link of [consoleLink, referenceLink]) {
        const box = await link.boundingBox();
        assert.ok(box && box.x >= 0 && box.x + box.width <= width && box.y + box.height <= height, `on the first screen: ${JSON.stringify(box)}`);
      }
      assert.ok((await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth)) <= 0, 'nothing wider than the screen');
      // The style sheet applied (a blocked one would leave the links underlined and blue).
      assert.equal(await consoleLink.evaluate((a) => getComputedStyle(a).textDecorationLine), 'none');
      await page.screenshot({ path: path.join(ARTIFACTS, `front-page-${width}px.png`) });

      await consoleLink.click();
      await page.getByLabel('API token').waitFor();
      assert.equal(new URL(page.url()).pathname, '/console');
      await page.goBack();
      await referenceLink.click();
      await page.waitForURL(`${server.baseUrl}/docs`);
      await page.locator('rapi-doc').getByText('Authenticate below').waitFor();
    });
  }

  it('front page: no Content-Security-Policy violation, nothing loaded from elsewhere', () => {
    assert.deepEqual(cspViolations, []);
    assert.deepEqual(foreignRequests, []);
  });
});
