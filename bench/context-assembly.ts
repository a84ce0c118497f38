/**
 * Context assembly (docs/context.md): what assembling a step's request costs, and how much of each
 * request is a prefix of the next (what a provider's prompt cache can hold).
 *
 * - Cost: a step's assembly at 100 contributions (the instructions, 10 project docs, the skill
 *   index, 2 memory files, 16 tool schemas and a history of 85 items, 42 of them untrusted tool
 *   results of 2 KB), step after step of one turn as an agent runs it: one assembler, a history
 *   growing by an assistant answer and a tool result each step. The model `gpt-4.1` (its o200k
 *   tokenizer counts every new item) and `scripted:` (estimated: four characters a token).
 * - Prefix stability: a 20-step turn's Chat Completions bodies as the adapter writes them (the
 *   same docs, skills and memory; a tool result of 2 KB a step), and for each body the share of its
 *   bytes that the next body starts with. Target ≥ 95%.
 */
import type { AssemblyInput, TextContribution } from '../src/context/assembly.js';
import { ContextAssembler } from '../src/context/assembly.js';
import { prepareOpenAIChat } from '../src/model/openai-chat.js';
import type { HistoryItem } from '../src/protocol/history.js';
import { builtinTools } from '../src/tools/builtins/index.js';
import { createToolRegistry } from '../src/tools/registry.js';
import { fmtMs, median, nowMs, percentile, table } from './stats.js';

const doc = (i: number): TextContribution => ({
  source: 'project_doc', scope: i === 0 ? 'AGENTS.md' : `pkg${i}/AGENTS.md`, trust: 'project',
  text: `Project instructions from pkg${i}/AGENTS.md:\n\n${'- keep changes small and tested; run npm test before you answer.\n'.repeat(8)}`,
});

function base(model: string): Omit<AssemblyInput, 'history'> {
  const tools = createToolRegistry(builtinTools()).specs(builtinTools().map((t) => t.name).slice(0, 16));
  return {
    model,
    instructions: 'You are an agent working in a workspace through tools. Read before you change anything.',
    docs: Array.from({ length: 10 }, (_, i) => doc(i)),
    docsMaxBytes: 32 * 1024,
    skillIndex: { source: 'skill_index', scope: '5 skills', trust: 'project', text: `Skills:\n${Array.from({ length: 5 }, (_, i) => `- skill-${i}: does task ${i} the project's way`).join('\n')}` },
    memory: [
      { source: 'memory', scope: 'USER.md', trust: 'project', text: '# User preferences\n- answer briefly\n' },
      { source: 'memory', scope: 'MEMORY.md', trust: 'project', text: `# Memory\n${'- tests run with node --test\n'.repeat(20)}` },
    ],
    tools,
    afterCall: new Map(),
    inbox: [],
    window: 1_000_000,
    reserve: 20_000,
    maxOutputTokens: null,
  };
}

function step(i: number): HistoryItem[] {
  const result = `line ${i}: ${'x'.repeat(60)}\n`.repeat(28);
  return [
    { role: 'assistant', content: null, toolCalls: [{ id: `call_${i}`, name: 'read_file', arguments: `{"path":"src/file${i}.js"}` }] },
    { role: 'tool', callId: `call_${i}`, name: 'read_file', content: result, untrusted: true },
  ];
}

/** Per-step assembly time at 100 contributions (85 history items), over `steps` steps past that point. */
function assemblyCost(model: string, steps: number): { p50: number; p99: number; contributions: number } {
  const asm = new ContextAssembler();
  const input = base(model);
  const history: HistoryItem[] = [{ role: 'user', content: 'fix the bug' }];
  for (let i = 0; history.length < 83; i++) history.push(...step(i));
  asm.assemble({ ...input, history: [...history] });
  const times: number[] = [];
  let contributions = 0;
  for (let i = 0; i < steps; i++) {
    // the step's own answer and result are new; the 83 items before them were assembled before
    const items = [...history, ...step(1000 + i)];
    const t = nowMs();
    const a = asm.assemble({ ...input, history: items });
    times.push(nowMs() - t);
    // the history counted item by item: each is a contribution of its own to assemble
    contributions = a.contributions.length - 1 + items.length;
  }
  return { p50: median(times), p99: percentile(times, 99), contributions };
}

/** For each of a 20-step turn's bodies, the share of its bytes the next body starts with. */
function prefixStability(steps: number): number[] {
  const asm = new ContextAssembler();
  const input = base('gpt-4.1');
  const history: HistoryItem[] = [{ role: 'user', content: 'fix the bug' }];
  const bodies: string[] = [];
  for (let i = 0; i < steps; i++) {
    bodies.push(prepareOpenAIChat(asm.assemble({ ...input, history: [...history] }).request).body);
    history.push(...step(i));
  }
  const shares: number[] = [];
  for (let i = 0; i + 1 < bodies.length; i++) {
    const a = bodies[i]!;
    const b = bodies[i + 1]!;
    let n = 0;
    while (n < a.length && a.charCodeAt(n) === b.charCodeAt(n)) n++;
    shares.push(n / a.length);
  }
  return shares;
}

/** Prints the section's tables. */
export function runContextAssemblyBench(opts: { steps: number }): void {
  console.log('');
  console.log('== context assembly: one step\'s request at 100 contributions (80 history items), and each body\'s prefix of the next ==');
  const rows = ['gpt-4.1', 'scripted:bench'].map((model) => {
    const c = assemblyCost(model, opts.steps);
    return [model, String(c.contributions), fmtMs(c.p50), fmtMs(c.p99)];
  });
  console.log(table(['model (tokenizer)', 'contributions', 'assembly p50', 'p99'], rows));
  const shares = prefixStability(20);
  const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
  console.log(table(['20-step turn, chat bodies', 'min', 'median', 'target'], [['share of each body that the next starts with', pct(Math.min(...shares)), pct(median(shares)), '≥ 95%']]));
}

if (import.meta.url === `file://${process.argv[1]}`) runContextAssemblyBench({ steps: Number(process.argv[2] ?? 200) });
