import { resolve } from 'node:path';
import type { EffectiveConfig } from '../../config/config.js';
import { GatewayClient, sseEvents, type GatewayTarget } from '../../client/gateway-client.js';
import type { TreeAgent, TreeView } from '../../client/tree.js';
import { ROOT_NAME } from '../../client/tree.js';
import { parseModelSpec } from '../../model/model-spec.js';
import { ConfigError, NotFoundError } from '../../protocol/errors.js';
import type { ActorEvent } from '../../protocol/events.js';
import type { ActorSummary } from '../../protocol/gateway.js';
import type { TextKind } from '../person-messages.js';
import { EXIT } from '../exit-codes.js';
import type { WhereConfig } from '../hints.js';
import { EventDescriber, eventLine, RunPrinter, type Out } from '../output.js';
import { followRemoteTurn } from '../remote-turn.js';
import { exitCodeForSignal, onStop, stopReceived } from '../stop-signals.js';
import { terminalText } from '../terminal-text.js';
import { promptFor } from './resume.js';
import { readToken } from './serve.js';
import { checkTask, type RunOptions } from './run.js';
import { answerLines, treeLines } from './tree.js';

// The commands that drive a remote runtime through the gateway (`--gateway URL`): no NATS, no
// LMDB here, only the gateway's JSON-RPC and SSE (docs/gateway.md). Each prints what the local
// command prints and exits with its codes.

/** The flags every remote command takes. */
export interface GatewayFlags {
  gateway?: string;
  /** A file whose first line is the bearer token (`actorloop serve --token-file`). */
  gatewayTokenFile?: string;
}

/** Where the gateway is, from the flags; a token file that cannot be read is one line, exit 2. */
export function gatewayTarget(o: GatewayFlags): GatewayTarget {
  return { url: o.gateway!, token: o.gatewayTokenFile !== undefined ? readToken(o.gatewayTokenFile) : null };
}

/** The config whose command lines (a hint to approve, to go on) reach the agent through the same gateway. */
function remoteWhere(config: EffectiveConfig, o: GatewayFlags): WhereConfig {
  return { sources: config.sources, dataDir: config.dataDir, natsUrl: config.natsUrl, gateway: { url: o.gateway!, tokenFile: o.gatewayTokenFile ?? null } };
}

async function withClient(o: GatewayFlags, f: (client: GatewayClient) => Promise<number>): Promise<number> {
  const client = await GatewayClient.connect(gatewayTarget(o));
  try {
    return await f(client);
  } finally {
    client.close();
  }
}

/** `run` flags the gateway's `turn.submit` does not carry: refused rather than dropped. */
const LOCAL_ONLY: (keyof RunOptions)[] = [
  'deadline', 'maxTokens', 'maxCost', 'baseUrl', 'outputSchema', 'effort', 'maxOutputTokens', 'inProcess',
  'continue', 'last', 'instructions', 'completeWhen', 'goal', 'goalTokens', 'goalCost', 'goalSeconds',
];

/**
 * `run --gateway URL <task>`: `turn.submit` to the gateway (a host behind it takes the agent),
 * then the turn followed over its event subscription to its end, printed as a local run's.
 */
export async function remoteRunCommand(task: string, opts: RunOptions & GatewayFlags, config: EffectiveConfig, out: Out): Promise<number> {
  checkTask(task);
  const given = LOCAL_ONLY.filter((k) => opts[k] !== undefined && opts[k] !== false);
  if (given.length > 0) {
    const flag = given[0]!.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
    throw new ConfigError('cli.gateway_flag', `--${flag} is not carried by the gateway's turn.submit`, { hint: 'drop it, or run without --gateway where the runtime is' });
  }
  // paths are this command's: the gateway resolves them from its own directory
  const spec = opts.model ?? config.defaultModel ?? undefined;
  const parsed = spec !== undefined ? parseModelSpec(spec) : null;
  const model = parsed?.provider === 'scripted' ? `scripted:${resolve(parsed.file)}` : spec;
  return withClient(opts, async (client) => {
    const json = opts.json === true;
    const submitted = await client.call('turn.submit', {
      task,
      cwd: resolve(opts.cwd ?? '.'),
      ...(model !== undefined ? { model } : {}),
      ...(opts.approve !== undefined ? { approve: opts.approve } : {}),
      ...(opts.maxSteps !== undefined ? { maxSteps: opts.maxSteps } : {}),
      ...(opts.maxToolCalls !== undefined ? { maxToolCalls: opts.maxToolCalls } : {}),
      ...(opts.tools !== undefined ? { tools: opts.tools } : {}),
      ...(opts.planMode ? { planMode: true } : {}),
    });
    (json || out.quiet ? out.stderr : out.stdout).write(`${submitted.agentId}\n`);
    return followRemoteTurn({
      client, agentId: submitted.agentId, printer: new RunPrinter(out, json), out, json, prompt: promptFor(out, json), config: remoteWhere(config, opts), printAfterSeq: 0,
    });
  });
}

/** The agent's log seq now, and whether a turn is open: what a command that answers it follows on from. */
async function stateOf(client: GatewayClient, agentId: string): Promise<{ seq: number; open: boolean }> {
  const d = await client.call('actor.inspect', { agentId });
  return { seq: d.seq, open: d.openTurn !== null };
}

/** `approve|deny --gateway URL <agentId> <approvalId>`: `approval.respond`, then the turn followed to its end. */
export async function remoteApproveCommand(
  agentId: string, approvalId: string, decision: 'approve' | 'deny', opts: GatewayFlags & { json?: boolean; always?: boolean; reason?: string },
  config: EffectiveConfig, out: Out,
): Promise<number> {
  return withClient(opts, async (client) => {
    const { seq } = await stateOf(client, agentId);
    const { messageId } = await client.call('approval.respond', {
      agentId, approvalId, decision, ...(opts.always ? { always: true } : {}), ...(opts.reason !== undefined ? { reason: opts.reason } : {}),
    });
    const json = opts.json === true;
    return followRemoteTurn({
      client, agentId, printer: new RunPrinter(out, json), out, json, prompt: promptFor(out, json), config: remoteWhere(config, opts), printAfterSeq: seq, answered: new Map([[approvalId, messageId]]),
    });
  });
}

/** `answer --gateway URL <agentId> <questionId> [text] [--option id]`: `ask.answer`, then the turn followed to its end. */
export async function remoteAnswerCommand(
  agentId: string, questionId: string, text: string | undefined, opts: GatewayFlags & { option?: string; json?: boolean },
  config: EffectiveConfig, out: Out,
): Promise<number> {
  if (text === undefined && opts.option === undefined) {
    throw new ConfigError('cli.answer_missing', 'no answer given', { hint: 'pass the answer as text, or --option <id>' });
  }
  return withClient(opts, async (client) => {
    const { seq } = await stateOf(client, agentId);
    const { messageId } = await client.call('ask.answer', { agentId, questionId, ...(opts.option !== undefined ? { optionId: opts.option } : { text: text! }) });
    const json = opts.json === true;
    return followRemoteTurn({
      client, agentId, printer: new RunPrinter(out, json), out, json, prompt: promptFor(out, json), config: remoteWhere(config, opts), printAfterSeq: seq, answered: new Map([[questionId, messageId]]),
    });
  });
}

/** `send --gateway URL <agentId> <text>`: `inbox.send` (a steer while a turn runs, else a follow-up turn), then its next turn end. */
export async function remoteSendCommand(
  agentId: string, text: string, kind: TextKind | null, opts: GatewayFlags & { json?: boolean; follow?: boolean }, config: EffectiveConfig, out: Out,
): Promise<number> {
  if (text === '-') throw new ConfigError('cli.gateway_flag', 'send --gateway takes the text as an argument, not from stdin', { hint: 'pass the text itself' });
  return withClient(opts, async (client) => {
    const { seq, open } = await stateOf(client, agentId);
    const sent = kind === null || kind === 'user_message' ? (open ? 'steer' : 'follow_up') : kind;
    const { messageId } = await client.call('inbox.send', { agentId, kind: sent, content: text });
    const json = opts.json === true;
    (json || out.quiet ? out.stderr : out.stdout).write(`${messageId} (${sent.replace('_', '-')})\n`);
    // a steer or an inject to an idle agent starts nothing: there is no turn end to wait for
    if (opts.follow === false || (sent !== 'follow_up' && !open)) return EXIT.completed;
    return followRemoteTurn({ client, agentId, printer: new RunPrinter(out, json), out, json, prompt: promptFor(out, json), config: remoteWhere(config, opts), printAfterSeq: seq });
  });
}

/**
 * `interrupt --gateway URL <agentId>`: `turn.interrupt`, then the turn followed to its end; exit 0
 * once it ended cancelled, as the local command; no open turn: said, exit 0.
 */
export async function remoteInterruptCommand(agentId: string, opts: GatewayFlags & { json?: boolean }, config: EffectiveConfig, out: Out): Promise<number> {
  return withClient(opts, async (client) => {
    const d = await client.call('actor.inspect', { agentId });
    if (d.openTurn === null) {
      const last = d.lastTurn ? ` (its last turn ended ${d.lastTurn.outcome})` : '';
      out.stderr.write(`${agentId} has no open turn: nothing to interrupt${terminalText(last)}\n`);
      return EXIT.completed;
    }
    await client.call('turn.interrupt', { agentId });
    const json = opts.json === true;
    const code = await followRemoteTurn({ client, agentId, printer: new RunPrinter(out, json), out, json, prompt: null, config: remoteWhere(config, opts), printAfterSeq: d.seq });
    // the turn ended as asked: the command did what it was told
    return code === EXIT.interrupted ? EXIT.completed : code;
  });
}

/**
 * `events --gateway URL <agentId> [--tree] [--follow] [--json] [--after seq]`: the log over SSE,
 * printed as the local command prints it. Without `--follow` it stops at the log's end as
 * `actor.inspect` saw it when the command started.
 */
export async function remoteEventsCommand(
  agentId: string, opts: GatewayFlags & { after?: number; follow?: boolean; json?: boolean; tree?: boolean }, out: Out,
): Promise<number> {
  if (opts.tree && opts.after !== undefined) {
    throw new ConfigError('cli.tree_after', '--after counts one agent\'s events, and --tree merges many', {
      hint: `drop --tree to read one agent's log after a seq, or --after to read the whole tree`,
    });
  }
  const target = gatewayTarget(opts);
  const end = await withClient(opts, async (client) => {
    const d = await client.call('actor.inspect', { agentId });
    return opts.tree ? d.actor.streamSeq : d.seq;
  });
  if (!opts.follow && (end === 0 || (!opts.tree && (opts.after ?? 0) >= end))) return EXIT.completed;
  const stop = new AbortController();
  const onSigint = (): void => stop.abort();
  process.once('SIGINT', onSigint);
  const offStop = onStop(() => stop.abort());
  const names = new Map<string, string>();
  const describers = new Map<string, EventDescriber>();
  let width = 8;
  let rootSeen = false;
  try {
    for await (const { streamSeq, actor, event: raw } of sseEvents({ ...target, agentId, tree: opts.tree === true, signal: stop.signal })) {
      const e = raw as unknown as ActorEvent;
      if (!opts.tree && e.seq <= (opts.after ?? 0)) continue;
      let d = describers.get(actor);
      if (!d) describers.set(actor, (d = new EventDescriber()));
      if (opts.json) out.stdout.write(eventLine(e));
      else if (!opts.tree) out.stdout.write(`${d.describe(e)}\n`);
      else {
        // the tree's first log is its root's: `main`, as the local command names it
        if (!rootSeen) names.set(actor, ROOT_NAME);
        rootSeen = true;
        if (e.type === 'subagent/spawn_requested') names.set(e.data.childId, e.data.name);
        const name = terminalText(names.get(actor) ?? actor);
        width = Math.max(width, name.length);
        out.stdout.write(`${name.padEnd(width)}  ${d.describe(e)}\n`);
      }
      if (!opts.follow && (opts.tree ? streamSeq >= end : e.seq >= end)) break;
    }
  } finally {
    stop.abort();
    process.off('SIGINT', onSigint);
    offStop();
  }
  const signal = stopReceived();
  return signal === null ? EXIT.completed : exitCodeForSignal(signal);
}

/** `tree --gateway URL <agentId> [--json]`: the agent's tree from `actors.list`, drawn as the local command draws it. */
export async function remoteTreeCommand(agentId: string, opts: GatewayFlags & { json?: boolean; follow?: boolean }, config: EffectiveConfig, out: Out): Promise<number> {
  if (opts.follow) throw new ConfigError('cli.gateway_flag', '--follow is not carried by tree --gateway yet', { hint: 'drop --follow, or watch the tree in the page at the gateway\'s URL' });
  return withClient(opts, async (client) => {
    const { actors } = await client.call('actors.list', undefined);
    const me = actors.find((a) => a.id === agentId);
    if (!me) throw new NotFoundError('actor.not_found', `no agent ${agentId} at the gateway`, { hint: 'pass an agent ID that `actorloop runs` lists where the host runs' });
    const view = treeViewOf(actors.filter((a) => a.rootId === me.rootId), me.rootId);
    out.stdout.write(opts.json ? `${JSON.stringify(view)}\n` : `${[...treeLines(view), ...answerLines(remoteWhere(config, opts), view)].join('\n')}\n`);
    return EXIT.completed;
  });
}

/** A tree view from the gateway's summaries: root first, each agent followed by its subtree. */
function treeViewOf(summaries: ActorSummary[], rootId: string): TreeView {
  const byParent = new Map<string | null, ActorSummary[]>();
  for (const s of summaries) byParent.set(s.parentId, [...(byParent.get(s.parentId) ?? []), s]);
  const agents: TreeAgent[] = [];
  const walk = (s: ActorSummary): void => {
    const children = byParent.get(s.id) ?? [];
    agents.push({
      actorId: s.id, name: s.name, parentId: s.parentId, depth: s.depth, status: s.status as TreeAgent['status'], waitingFor: s.waitingFor,
      step: s.step, tool: s.tool, tokens: s.tokens, estimated: false, costUsd: s.costUsd, children: children.map((c) => c.id),
    });
    for (const c of children) walk(c);
  };
  const root = summaries.find((s) => s.id === rootId);
  if (root) walk(root);
  const costs = agents.map((a) => a.costUsd);
  return {
    rootId,
    agents,
    total: { agents: agents.length, tokens: agents.reduce((n, a) => n + a.tokens, 0), estimated: false, costUsd: costs.includes(null) ? null : costs.reduce<number>((n, c) => n + c!, 0) },
    settled: agents.every((a) => !['running', 'starting', 'killed', 'recovering', 'waiting'].includes(a.status)),
  };
}
