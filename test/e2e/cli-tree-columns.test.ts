// `tree` and `events --tree` keep their columns whatever the names: a child with a long name does
// not push the lines after it out of line, and on a terminal no line is wider than the terminal
// (cut with an ellipsis); a pipe gets every line whole.
import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { CliPool, cliEnv, lines, show } from '../helpers/cli.js';
import { startTestNats, tempDir, type TestNats } from '../helpers/nats.js';
import { onTerminal } from '../helpers/terminal.js';

const NAME = 'investigator-of-notes';
const usage = { input_tokens: 40, output_tokens: 4 };
const TREE = {
  agents: {
    main: {
      responses: [
        { tool_calls: [{ name: 'spawn_agent', arguments: { task: 'read notes.txt and say what it holds', name: NAME, mode: 'foreground' } }], usage },
        { content: 'the investigator read the notes', usage },
      ],
    },
    [NAME]: { responses: [{ content: 'notes.txt says the meeting moved to Thursday, and a good deal more besides that makes this line long', usage }] },
  },
};

let nats: TestNats;
const dirs: string[] = [];
const pool = new CliPool();

beforeAll(async () => {
  nats = await startTestNats();
});
afterAll(async () => {
  await pool.killAll();
  await nats?.stop();
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});

/** Where each event line's time stands (after the name column and the seq): one column when the names keep theirs. */
const offsets = (ls: string[]): Set<number> => new Set(ls.map((l) => l.search(/\d\d:\d\d:\d\d\.\d{3}/)));
/** The column of the times: the name column (as wide as the longest name), two spaces, the seq in five, two spaces. */
const TIMES = NAME.length + 2 + 5 + 2;

/** The lines a command drew on a terminal `cols` wide. */
function screenLines(screen: string): string[] {
  return screen.split(/\r?\n/).map((l) => l.replace(/\r/g, '')).filter((l) => l.trim() !== '');
}

test('a long child name keeps the columns of tree and events --tree in line; a terminal gets lines cut to its width', async ({ onTestFinished }) => {
  const ws = await tempDir('cols-ws');
  const dataDir = await tempDir('cols-data');
  dirs.push(ws, dataDir);
  await writeFile(join(ws, 'notes.txt'), 'the meeting moved to Thursday\n');
  const script = join(dataDir, 'tree.json');
  await writeFile(script, JSON.stringify(TREE));
  const common = ['--nats', nats.url, '--data-dir', dataDir];
  const env = cliEnv(dataDir);
  const cli = pool.forTest({ onTestFinished }, env);
  const run = await cli.run(['run', 'have the notes read', '--model', `scripted:${script}`, '--cwd', ws, ...common]);
  expect(run.code, show(run)).toBe(0);
  const rootId = lines(run.stdout)[0]!;

  // in a pipe: whole lines, the IDs in one column
  const tree = await cli.run(['tree', rootId, ...common]);
  const agents = lines(tree.stdout).slice(0, 2);
  expect(agents[1], show(tree)).toContain(`  ${NAME}  agt_`);
  expect(new Set(agents.map((l) => l.indexOf('agt_'))).size, show(tree)).toBe(1);
  const events = await cli.run(['events', rootId, '--tree', ...common]);
  const evLines = lines(events.stdout);
  expect(evLines.some((l) => l.startsWith(NAME)), show(events)).toBe(true);
  // some are wider than the terminal below: a pipe gets them whole
  expect(evLines.some((l) => l.length > 60), show(events)).toBe(true);
  // every event's text starts in the same column, the root's before the child's name was seen too
  expect(offsets(evLines), show(events)).toEqual(new Set([TIMES]));

  // on a terminal 60 columns wide: no line wider, the long ones cut with an ellipsis
  for (const args of [['tree', rootId], ['events', rootId, '--tree']]) {
    const term = onTerminal(['stty', 'cols', '60', ';', 'node', 'bin/actorloop.js', ...args, ...common], env, onTestFinished);
    expect(await term.closed).toBe(0);
    const drawn = screenLines(term.screen);
    expect(drawn.length, term.screen).toBeGreaterThan(1);
    for (const l of drawn) expect(l.length, l).toBeLessThan(60);
    expect(drawn.some((l) => l.endsWith('…')), term.screen).toBe(true);
    if (args[0] === 'events') expect(offsets(drawn), term.screen).toEqual(new Set([TIMES]));
  }
});
