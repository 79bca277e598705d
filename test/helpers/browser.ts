// Debian's Chromium for the browser tests, driven by playwright-core: never a downloaded
// browser (CI installs the package; CHROMIUM_PATH points elsewhere). Suites skip loudly when
// it is missing. Screenshots go to test/artifacts/, to be looked at.
import fs from 'node:fs';
import path from 'node:path';
import type { Browser, BrowserContext, BrowserContextOptions, Page } from 'playwright-core';
import { ROOT } from './processes.ts';

const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';
// Without the background-networking flags Chromium keeps trying hosts this machine cannot reach.
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export const ARTIFACTS = path.join(ROOT, 'test', 'artifacts');

/**
 * Where the browser tests also write the README's pictures, when asked (`npm run screenshots`):
 * the pictures then show the pages as the tests leave them, never an older console.
 */
export const README_IMAGES = process.env.UGS_WRITE_README_IMAGES === '1' ? path.join(ROOT, 'docs', 'images') : null;

/** False when Chromium is there; otherwise why the suite is skipped (and said so on stderr). */
export function missingBrowser(suite: string): string | false {
  if (fs.existsSync(CHROMIUM)) return false;
  const reason = `${CHROMIUM} is missing: install it (apt-get install -y chromium) or set CHROMIUM_PATH to run the browser test`;
  process.stderr.write(`\n${'!'.repeat(78)}\n!! SKIPPING ${suite}: ${reason}\n${'!'.repeat(78)}\n\n`);
  return reason;
}

/**
 * How long a page's wait (an element shown, a navigation, a response) may take: Playwright's
 * own default of 30 s is a fixed time that a loaded machine exceeds (the reference page drew
 * its operations past it at load 12); the runner's bound of a test (test/run-tests.ts) is the
 * backstop of a wait that never ends.
 */
export const PAGE_WAIT_MS = 5 * 60_000;

/** A browser context whose pages wait PAGE_WAIT_MS for what they wait for. */
export async function openContext(browser: Browser, options: BrowserContextOptions): Promise<BrowserContext> {
  const context = await browser.newContext(options);
  context.setDefaultTimeout(PAGE_WAIT_MS);
  context.setDefaultNavigationTimeout(PAGE_WAIT_MS);
  return context;
}

/** A page of its own context (openContext). */
export async function openPage(browser: Browser, options: BrowserContextOptions): Promise<Page> {
  return (await openContext(browser, options)).newPage();
}

export async function launchChromium(): Promise<Browser> {
  const { chromium } = await import('playwright-core');
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  return chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
}
