import { chmod, mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findChromium, launchChromium } from './browser.js';
import { tempDir } from './nats.js';

let dir: string;
/** An executable stand-in at `dir/<sub>/<name>`; its path. */
async function binary(sub: string, name: string, mode = 0o755): Promise<string> {
  await mkdir(join(dir, sub), { recursive: true });
  const path = join(dir, sub, name);
  await writeFile(path, '#!/bin/sh\n');
  await chmod(path, mode);
  return path;
}

beforeAll(async () => {
  dir = await tempDir('browser');
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('finding the browser', () => {
  it('takes ACTORLOOP_CHROMIUM first, then CHROME_PATH, over anything on PATH', async () => {
    const own = await binary('a', 'my-chrome');
    const chromePath = await binary('b', 'chrome');
    const onPath = await binary('bin', 'chromium');
    const PATH = join(dir, 'bin');
    expect(findChromium({ ACTORLOOP_CHROMIUM: own, CHROME_PATH: chromePath, PATH }, '/absent')).toBe(own);
    expect(findChromium({ CHROME_PATH: chromePath, PATH }, '/absent')).toBe(chromePath);
    expect(findChromium({ ACTORLOOP_CHROMIUM: '', PATH }, '/absent')).toBe(onPath);
  });

  it('refuses a variable that names no executable, in one line naming it', async () => {
    const plain = await binary('c', 'not-executable', 0o644);
    expect(() => findChromium({ ACTORLOOP_CHROMIUM: join(dir, 'nothing-here') }, '/absent')).toThrow(/^ACTORLOOP_CHROMIUM=.*nothing-here is not an executable file/);
    expect(() => findChromium({ CHROME_PATH: plain }, '/absent')).toThrow(/^CHROME_PATH=.*not-executable is not an executable file/);
  });

  it('looks for chromium, then chromium-browser, then google-chrome, in every PATH dir', async () => {
    const chrome = await binary('p1', 'google-chrome');
    const browser = await binary('p2', 'chromium-browser');
    await binary('p2', 'chromium', 0o644);
    const PATH = [join(dir, 'p0-missing'), join(dir, 'p1'), join(dir, 'p2')].join(':');
    expect(findChromium({ PATH }, '/absent')).toBe(browser);
    expect(findChromium({ PATH: join(dir, 'p1') }, '/absent')).toBe(chrome);
  });

  it("falls back to playwright's own browser, and to none", async () => {
    const own = await binary('pw', 'chrome');
    expect(findChromium({ PATH: join(dir, 'empty') }, own)).toBe(own);
    expect(findChromium({ PATH: join(dir, 'empty') }, join(dir, 'pw', 'not-installed'))).toBeNull();
  });

  it('launches the one this machine has', async () => {
    const browser = await launchChromium();
    try {
      expect(browser.version()).toMatch(/^\d+\./);
    } finally {
      await browser.close();
    }
  });
});
