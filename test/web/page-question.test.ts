import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { Browser } from 'playwright-core';
import { launchChromium } from '../helpers/browser.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentActor } from '../../src/actors/actor/agent-actor.js';
import { questionAnswerMessage } from '../../src/client/messages.js';
import type { Supervisor } from '../../src/actors/hosting/supervisor.js';
import { tempDir } from '../helpers/nats.js';
import { turnRequest } from '../helpers/runtime.js';
import { answer, call } from '../helpers/scripted-tree.js';
import { actorTestWorld, startTurn } from '../actors/harness.js';
import { startPageServer, type PageServer } from './page-server.js';

// An agent asking a person (ask_user) in the page: the badge says it waits for an answer, the
// agent's statechart sits in turn.waiting_input, and the option picked in the page goes out as
// ask.answer and, delivered as the CLI's answer would be, ends the turn.

const root = join(import.meta.dirname, '..', '..');
const world = actorTestWorld();
const shared = world.shared(() => ({
  script: [
    call('ask_user', { question: 'Which colour?', options: [{ id: 'red', label: 'Red' }, { id: 'blue', label: 'Blue' }] }),
    answer('blue it is'),
  ],
}));
let sup: Supervisor;
let actor: AgentActor;
let server: PageServer;
let browser: Browser;

beforeAll(async () => {
  await promisify(execFile)(process.execPath, [join(root, 'scripts', 'build-web.mjs')]);
  sup = shared.rt.supervisor();
  ({ actor } = await startTurn(sup, 'pick a colour', turnRequest(world.ws)));
  await actor.whenAwaitingQuestion();
  server = await startPageServer({
    reader: sup.reader, rootId: actor.rootId, webDir: join(root, 'dist', 'web'),
    async onRpc(r) {
      if (r.method === 'ask.answer') {
        const p = r.params as { agentId: string; questionId: string; optionId?: string; text?: string };
        await sup.send(questionAnswerMessage(p.agentId, p.questionId, { ...(p.optionId ? { optionId: p.optionId } : {}), ...(p.text ? { text: p.text } : {}) }));
      }
      return { accepted: true };
    },
  });
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await server?.close();
});

describe('the page on a question', () => {
  it('shows the agent waiting for an answer and sends the option picked as ask.answer', async () => {
    const page = await browser.newPage({ viewport: { width: 1500, height: 1000 } });
    page.setDefaultTimeout(5_000);
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(`${server.url}/?actor=${actor.rootId}`);
    const main = page.locator('li.actor[data-name="main"]');
    await expect.poll(() => main.getAttribute('data-status')).toBe('waiting_answer');
    const agent = page.locator('figure[data-machine="agent"]');
    await expect.poll(() => agent.getAttribute('data-active-state')).toBe('turn.waiting_input');
    expect(await page.locator('.question').textContent()).toContain('Which colour?');
    const dir = await tempDir('page-question');
    await page.screenshot({ path: join(dir, 'question.png'), fullPage: true });
    process.stdout.write(`screenshot: ${join(dir, 'question.png')}\n`);
    await page.getByRole('button', { name: 'Blue', exact: true }).click();
    const questionId = actor.projection.parked?.ids[0] ?? Object.keys(actor.projection.questions ?? {})[0];
    await expect.poll(() => server.rpc.find((r) => r.method === 'ask.answer')?.params).toEqual({ agentId: actor.actorId, questionId, optionId: 'blue' });
    await expect.poll(() => main.getAttribute('data-status'), { timeout: 15_000 }).toBe('completed');
    await expect.poll(() => agent.getAttribute('data-active-state')).toBe('idle');
    await page.screenshot({ path: join(dir, 'answered.png'), fullPage: true });
    process.stdout.write(`screenshot: ${join(dir, 'answered.png')}\n`);
    expect(errors).toEqual([]);
    await page.close();
  });
});
