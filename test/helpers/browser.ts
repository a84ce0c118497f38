// The browser the page tests (and the page bench) drive: a real headless Chromium, wherever this
// machine has one. Debian calls it `chromium`, Ubuntu's snap `chromium-browser`, Google's package
// `google-chrome`; playwright keeps its own under ~/.cache/ms-playwright once installed.
import { accessSync, constants, existsSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { chromium, type Browser } from 'playwright-core';

/** Environment variables that name the browser's binary, in the order they are read. */
export const BROWSER_ENV = ['ACTORLOOP_CHROMIUM', 'CHROME_PATH'] as const;
/** Commands looked up on PATH when no variable names a browser. */
export const BROWSER_COMMANDS = ['chromium', 'chromium-browser', 'google-chrome'] as const;

/** What to do on a machine with no browser: the one line a page test fails with. */
export const NO_BROWSER =
  'no Chromium found: install it (`npm run quickstart`, or `apt-get install chromium`, or `npx playwright install chromium`), or set ACTORLOOP_CHROMIUM to its binary';

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * The path of a Chromium binary: `ACTORLOOP_CHROMIUM` or `CHROME_PATH` when set, else the first of
 * `chromium`, `chromium-browser`, `google-chrome` found on PATH, else playwright's own; null when none.
 * A variable that names no executable file is an error, not a fallback: its owner meant that one.
 */
export function findChromium(
  env: NodeJS.ProcessEnv = process.env,
  // where `npx playwright install chromium` puts it: known even before it is installed
  playwrightOwn: string = chromium.executablePath(),
): string | null {
  for (const name of BROWSER_ENV) {
    const path = env[name];
    if (path === undefined || path === '') continue;
    if (!executable(path)) throw new Error(`${name}=${path} is not an executable file: point it at a Chromium binary, or unset it`);
    return path;
  }
  const dirs = (env.PATH ?? '').split(delimiter).filter((d) => d !== '');
  for (const command of BROWSER_COMMANDS) {
    for (const dir of dirs) {
      const path = join(dir, command);
      if (executable(path)) return path;
    }
  }
  return existsSync(playwrightOwn) && executable(playwrightOwn) ? playwrightOwn : null;
}

/** Launches headless Chromium (as root it needs `--no-sandbox`); throws `NO_BROWSER` when there is none. */
export async function launchChromium(): Promise<Browser> {
  const executablePath = findChromium();
  if (executablePath === null) throw new Error(NO_BROWSER);
  return chromium.launch({ executablePath, headless: true, args: ['--no-sandbox'] });
}
