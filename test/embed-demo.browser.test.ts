// The embed demo (examples/embed-demo) in a real headless Chromium: a real service process,
// the demo backend (holding the API token) and the page, served from a third origin, which
// calls /api/embed/context across origins with a short-lived embed token. After the group's
// token is rotated, the same page must report its embed token as no longer valid. With
// PostgreSQL, the page also fetches rows from examples/postgres-rls's data API with the same
// embed token, and two groups see different rows. Two viewers of one group (embed tokens
// that name a viewer) see themselves, their own region among their attributes (the group's
// region stays the group's), and their region's rows only.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { POSTGRES_URL, createTestDatabase, type TestDatabase } from './helpers/backends.ts';
import {
  ROOT,
  freePort,
  httpRequest,
  spawnServer,
  issueTokenWithCli,
  startExample,
  stopExample,
  type ExampleProcess,
  type ServerProcess,
} from './helpers/processes.ts';
import { ARTIFACTS, launchChromium, missingBrowser, openPage } from './helpers/browser.ts';
import { startDataApi, type DataApi } from './helpers/data-api.ts';

const DEMO = path.join(ROOT, 'examples', 'embed-demo');

const skip = missingBrowser('the embed demo browser test');
const noDataApi = POSTGRES_URL ? false : 'TEST_POSTGRES_URL is not set: the rows part of the demo needs the PostgreSQL data API';
if (!skip && noDataApi) {
  process.stderr.write(`\n${'!'.repeat(78)}\n!! SKIPPING the embed demo's rows from the data API: ${noDataApi}\n${'!'.repeat(78)}\n\n`);
}

describe('embed demo in headless Chromium', { skip }, () => {
  let database: TestDatabase;
  let service: ServerProcess;
  let backend: ExampleProcess;
  let pageServer: ExampleProcess;
  let dataApi: DataApi | undefined;
  let browser: Browser;
  let page: Page;
  let apiToken: string;

  before(async () => {
    database = await createTestDatabase('sqlite');
    const secretKey = crypto.randomBytes(32).toString('base64');
    const [servicePort, backendPort, pagePort] = [await freePort(), await freePort(), await freePort()];
    const pageOrigin = `http://127.0.0.1:${pagePort}`;
    const backendUrl = `http://127.0.0.1:${backendPort}`;

    // Only the page's origin may call the embed routes from a browser. The port is fixed so
    // that the tokens' issuer (http://HOST:PORT by default) is the service's real address.
    service = await spawnServer({ DATABASE_URL: database.url, UGS_SECRET_KEY: secretKey, UGS_CORS_ORIGINS: pageOrigin, PORT: String(servicePort) });
    const issued = await issueTokenWithCli({ DATABASE_URL: database.url, UGS_SECRET_KEY: secretKey }, ['--account', 'demo', '--scopes', 'read,write']);
    apiToken = issued.token;

    if (!noDataApi) {
      // The data API as its README runs it: the service's issuer, the demo's dashboard as
      // audience, and the page as the only browser origin.
      dataApi = await startDataApi({ UGS_ISSUER: service.baseUrl, UGS_ACCOUNT: 'demo', AUDIENCE: 'sales-overview', ALLOWED_ORIGINS: pageOrigin });
    }
    backend = await startExample(path.join(DEMO, 'backend.mjs'), {
      UGS_URL: service.baseUrl,
      UGS_API_TOKEN: apiToken,
      PAGE_ORIGIN: pageOrigin,
      PORT: String(backendPort),
    });
    pageServer = await startExample(path.join(DEMO, 'page-server.mjs'), { BACKEND_URL: backendUrl, DATA_API_URL: dataApi?.url ?? '', PORT: String(pagePort) });
    assert.equal(pageServer.url, pageOrigin);
    assert.notEqual(new URL(pageServer.url).origin, new URL(service.baseUrl).origin, 'the page runs on another origin than the service');

    browser = await launchChromium();
    page = await openPage(browser, { viewport: { width: 900, height: 720 } });
  });

  after(async () => {
    await browser?.close();
    await Promise.all([backend, pageServer].map(stopExample));
    await dataApi?.stop();
    await service?.stop();
    await database?.drop();
  });

  async function variablesShown(): Promise<Record<string, string>> {
    return page.$$eval('#variables tbody tr', (rows) =>
      Object.fromEntries(rows.map((row) => [row.children[0].textContent ?? '', row.children[1].textContent ?? ''])),
    );
  }

  it('demo: the page, on its own origin, shows the group name and variables from /api/embed/context', async () => {
    const contextResponse = page.waitForResponse((response) => response.url().includes('/api/embed/context'));
    await page.goto(pageServer.url);
    const response = await contextResponse;
    assert.equal(response.status(), 200);
    assert.equal((await response.allHeaders())['access-control-allow-origin'], pageServer.url, 'CORS allows exactly the page origin');
    assert.ok(response.url().startsWith(`${service.baseUrl}/api/embed/context?embed_id=sales-overview`));

    await page.waitForSelector('#status[data-state="ok"]');
    assert.equal(await page.textContent('#group-name'), 'ACME Corporation');
    assert.equal(await page.textContent('#group-id'), 'acme-corp');
    assert.equal(await page.textContent('#group-env'), 'Customer');
    assert.deepEqual(await variablesShown(), {
      user_group_id: 'acme-corp',
      user_group_name: 'ACME Corporation',
      region: 'emea',
      plan: 'enterprise',
      seats: '42',
    });
    // The page holds an embed token, never the long-lived user group token.
    const stored = await page.evaluate(() => sessionStorage.getItem('embed-demo-session') ?? '');
    assert.match(JSON.parse(stored).embed_token, /^[\w-]+\.[\w-]+\.[\w-]+$/);
    assert.ok(!stored.includes('ugs_grp_') && !stored.includes('ugs_api_'));
    await page.screenshot({ path: path.join(ARTIFACTS, 'embed-demo.png'), fullPage: true });
  });

  async function rowsShown(table: string): Promise<string[][]> {
    return page.$$eval(`#${table} tbody tr`, (rows) => rows.map((row) => [...row.children].map((cell) => cell.textContent ?? '')));
  }

  it('demo: two groups see different rows from the data API, fetched with their embed tokens under row-level security', { skip: noDataApi }, async () => {
    const ordersResponse = page.waitForResponse((response) => response.url() === `${dataApi!.url}/orders`);
    await page.goto(`${pageServer.url}/?customer=acme-corp`);
    assert.equal((await ordersResponse).status(), 200);
    await page.waitForSelector('#data-status[data-state="ok"]');
    assert.equal(await page.textContent('#group-name'), 'ACME Corporation');
    assert.deepEqual(await rowsShown('orders'), [
      ['Anvils', 'emea', '1,200'],
      ['Rocket skates', 'amer', '860'],
      ['Giant magnet', 'emea', '410'],
    ]);
    assert.deepEqual(
      (await rowsShown('notices')).map(([region]) => region),
      ['emea'],
    );
    await page.screenshot({ path: path.join(ARTIFACTS, 'embed-demo-rows-acme.png'), fullPage: true });

    await page.goto(`${pageServer.url}/?customer=globex`);
    await page.waitForSelector('#data-status[data-state="ok"]');
    assert.equal(await page.textContent('#group-name'), 'Globex');
    assert.deepEqual(await rowsShown('orders'), [
      ['Hammocks', 'amer', '95'],
      ['Doomsday device', 'emea', '1,000,000'],
    ]);
    assert.deepEqual(
      (await rowsShown('notices')).map(([region]) => region),
      ['amer'],
    );
    await page.screenshot({ path: path.join(ARTIFACTS, 'embed-demo-rows-globex.png'), fullPage: true });

    // The same tokens, sent from an origin they are not bound to, get nothing.
    const globexSession = JSON.parse((await page.evaluate(() => sessionStorage.getItem('embed-demo-session:globex'))) ?? '{}');
    const elsewhere = await fetch(`${dataApi!.url}/orders`, {
      headers: { authorization: `Bearer ${globexSession.embed_token}`, origin: 'https://elsewhere.example' },
    });
    assert.equal(elsewhere.status, 403);
  });

  it("demo: two viewers of one group each see themselves and their own region in viewer_attributes, beside the group's; the whole group shows no viewer", async () => {
    await page.goto(`${pageServer.url}/?customer=acme-corp&viewer=ada`);
    await page.waitForSelector('#status[data-state="ok"]');
    assert.equal(await page.textContent('#group-name'), 'ACME Corporation');
    assert.equal(await page.isVisible('#viewer'), true);
    assert.equal(await page.textContent('#status'), 'Viewing as Ada Lovelace, of ACME Corporation');
    assert.equal(await page.textContent('#viewer-name'), 'Ada Lovelace');
    assert.equal(await page.textContent('#viewer-id'), 'ada');
    assert.equal(await page.textContent('#viewer-time-zone'), 'Europe/London');
    assert.deepEqual(await variablesShown(), {
      user_group_id: 'acme-corp',
      user_group_name: 'ACME Corporation',
      viewer_id: 'ada',
      viewer_attributes: '{"region":"emea"}',
      region: 'emea',
      plan: 'enterprise',
      seats: '42',
    });

    await page.goto(`${pageServer.url}/?customer=acme-corp&viewer=bruno`);
    await page.waitForSelector('#status[data-state="ok"]');
    assert.equal(await page.textContent('#viewer-name'), 'Bruno Díaz');
    assert.equal(await page.textContent('#viewer-permissions'), 'view_orders, export_csv');
    const bruno = await variablesShown();
    assert.equal(bruno.viewer_id, 'bruno');
    assert.equal(bruno.viewer_attributes, '{"region":"amer"}');
    assert.equal(bruno.region, 'emea', "the viewer's region never replaces the group's");
    assert.equal(await page.getAttribute('#viewers a[aria-current="page"]', 'href'), '/?customer=acme-corp&viewer=bruno');

    await page.goto(`${pageServer.url}/?customer=acme-corp`);
    await page.waitForSelector('#status[data-state="ok"]');
    assert.equal(await page.isHidden('#viewer'), true);
    assert.equal(await page.isVisible('#no-viewer'), true);
    assert.equal((await variablesShown()).viewer_id, undefined);
  });

  it('demo: two viewers of one group see different rows from the data API: each only their region of the group', { skip: noDataApi }, async () => {
    await page.goto(`${pageServer.url}/?customer=acme-corp&viewer=ada`);
    await page.waitForSelector('#data-status[data-state="ok"]');
    assert.equal(await page.textContent('#viewer-name'), 'Ada Lovelace');
    assert.deepEqual(await rowsShown('orders'), [
      ['Anvils', 'emea', '1,200'],
      ['Giant magnet', 'emea', '410'],
    ]);
    assert.deepEqual(
      (await rowsShown('notices')).map(([region]) => region),
      ['emea'],
    );
    await page.screenshot({ path: path.join(ARTIFACTS, 'embed-demo-viewer-ada.png'), fullPage: true });

    await page.goto(`${pageServer.url}/?customer=acme-corp&viewer=bruno`);
    await page.waitForSelector('#data-status[data-state="ok"]');
    assert.equal(await page.textContent('#viewer-name'), 'Bruno Díaz');
    assert.deepEqual(await rowsShown('orders'), [['Rocket skates', 'amer', '860']]);
    assert.deepEqual(
      (await rowsShown('notices')).map(([region]) => region),
      ['emea'],
      "the notices of the group's region: the viewer's attribute narrows the orders, never the group's variables",
    );
    await page.screenshot({ path: path.join(ARTIFACTS, 'embed-demo-viewer-bruno.png'), fullPage: true });
  });

  it("demo: after the group's token is rotated, the page reports its embed token as no longer valid", async () => {
    const current = await httpRequest(service.baseUrl, 'GET', '/api/user?user_group_id=acme-corp', { token: apiToken });
    assert.equal(current.status, 200);
    const rotated = await httpRequest(service.baseUrl, 'POST', '/api/user', { token: apiToken, body: { current_token: current.body.user_group.token } });
    assert.equal(rotated.status, 200, JSON.stringify(rotated.body));

    await page.goto(pageServer.url); // the same embed token, from sessionStorage
    await page.waitForSelector('#status[data-state="invalid"]');
    assert.match((await page.textContent('#status')) ?? '', /no longer valid \(invalid_token\)/);
    assert.equal(await page.isHidden('#group'), true, 'no stale group data is shown');
    await page.screenshot({ path: path.join(ARTIFACTS, 'embed-demo-rotated.png'), fullPage: true });

    // A new embed token from the backend carries the new token generation and works again.
    await page.click('#renew');
    await page.waitForSelector('#status[data-state="ok"]');
    assert.equal(await page.textContent('#group-name'), 'ACME Corporation');
  });
});
