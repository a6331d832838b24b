import fs from 'node:fs';
import { type Browser, type ConsoleMessage, chromium, type Page } from 'playwright-core';

/**
 * Headless Chromium for the dashboard tests: Debian's `chromium` package driven by playwright-core
 * (which downloads no browser of its own). A missing browser fails the test, never skips it; CI's
 * .ci/run installs the package when it is missing.
 */
export const CHROMIUM_PATH = '/usr/bin/chromium';

// What this machine kind needs: no sandbox as root, and no background traffic to Google's hosts
// (the network is closed, and each refused connection would be noise).
const ARGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export async function launchChromium(): Promise<Browser> {
  if (!fs.existsSync(CHROMIUM_PATH)) {
    throw new Error(
      `Chromium is not installed at ${CHROMIUM_PATH}; the dashboard tests need it: apt-get install -y chromium`,
    );
  }
  // Playwright gives every launch a fresh, empty profile (user data dir) and removes it on close.
  return chromium.launch({ executablePath: CHROMIUM_PATH, headless: true, args: ARGS });
}

/** Everything a page reported as going wrong: console errors and uncaught exceptions. */
export function watchProblems(page: Page): string[] {
  const problems: string[] = [];
  page.on('console', (msg: ConsoleMessage) => {
    if (msg.type() === 'error' || msg.type() === 'warning')
      problems.push(`console.${msg.type()}: ${msg.text()}`);
  });
  page.on('pageerror', (err) => problems.push(`uncaught: ${err.message}`));
  return problems;
}
