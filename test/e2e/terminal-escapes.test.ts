// Terminals see text, not control codes: a workspace file carrying an escape sequence (clear the
// screen, retitle the window, ring the bell) read by the agent and quoted in its answer reaches
// the terminal escaped in `run` and `events`, while `events --json` keeps the exact characters.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { AGENT_ID, lines, parseEvents, show } from '../helpers/cli.js';
import { useCliStack } from '../helpers/cli-stack.js';

const HOSTILE = '\x1b[2J\x1b]0;PWNED\x07';
const SHOWN = '\\x1b[2J\\x1b]0;PWNED\\x07';

const stack = useCliStack();

test('run and events print a hostile file escaped; events --json keeps it exact', async ({ onTestFinished }) => {
  const ws = await stack.dir('ws');
  const dataDir = await stack.dir('data');
  const scratch = await stack.dir('scripts');
  await writeFile(join(ws, 'notes.txt'), `before ${HOSTILE} after\n`);
  const script = join(scratch, 'script.json');
  await writeFile(script, JSON.stringify({
    responses: [
      { tool_calls: [{ name: 'read_file', arguments: { path: 'notes.txt' } }] },
      { content: `The file says: ${HOSTILE}\nThat is all.` },
    ],
  }));
  const cli = stack.cli(onTestFinished, dataDir);
  const common = stack.flags(dataDir);

  const run = await cli.run(['run', 'what does notes.txt say?', '--model', `scripted:${script}`, '--cwd', ws, ...common]);
  expect(run.code, show(run)).toBe(0);
  const agentId = lines(run.stdout)[0]!;
  expect(agentId).toMatch(AGENT_ID);
  expect(run.stdout).not.toMatch(/[\x1b\x07]/);
  // the answer keeps its lines; the sequence in it is shown
  expect(run.stdout).toContain(`The file says: ${SHOWN}\nThat is all.`);

  const events = await cli.run(['events', agentId, ...common]);
  expect(events.code, show(events)).toBe(0);
  expect(events.stdout).not.toMatch(/[\x1b\x07]/);
  const result = lines(events.stdout).find((l) => /tool\/result/.test(l));
  expect(result).toContain(SHOWN);
  expect(lines(events.stdout).find((l) => /assistant\/accepted/.test(l) && l.includes('The file says'))).toContain(SHOWN);

  const json = await cli.run(['events', agentId, '--json', ...common]);
  expect(json.code, show(json)).toBe(0);
  const parsed = parseEvents(json.stdout);
  const output = parsed.find((e) => e.type === 'tool/result');
  expect(output?.type === 'tool/result' && output.data.output).toContain(`before ${HOSTILE} after`);
  expect(parsed.at(-1)).toMatchObject({ type: 'turn/end', data: { answer: `The file says: ${HOSTILE}\nThat is all.` } });
});
