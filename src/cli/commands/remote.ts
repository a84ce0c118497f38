import { resolve } from 'node:path';
import type { EffectiveConfig } from '../../config/config.js';
import type { GatewayClient, GatewayTarget } from '../../client/gateway-client.js';
import { GatewaySession, type SessionNotices } from '../../client/gateway-session.js';
import { createGatewayTransport } from '../../client/gateway-transport.js';
import type { TransportEvent } from '../../client/transport.js';
import { followTurnSteps, turnEndOf } from '../../client/turn-follower.js';
import { ROOT_NAME, watchTreeThrough, type TreeView } from '../../client/tree.js';
import { parseModelSpec } from '../../model/model-spec.js';
import { ConfigError, NotFoundError } from '../../protocol/errors.js';
import type { RpcParams } from '../../protocol/gateway.js';
import { EXIT } from '../exit-codes.js';
import type { WhereConfig } from '../hints.js';
import { EventDescriber, eventLine, type Out } from '../output.js';
import { RunPrinter } from '../run-printer.js';
import { exitCodeForSignal, onStop, stopReceived } from '../stop-signals.js';
import { emptyProjection } from '../../store/projection.js';
import { cliLine } from '../hints.js';
import { InterruptKey } from '../interrupt-key.js';
import { askPerson } from '../person-prompter.js';
import { ttyQuestionPrompt, type QuestionPrompt } from '../turn/question-prompt.js';
import type { Prompt } from '../turn/approval-prompt.js';
import { printTurnEnd, printWaiting } from '../turn/turn-output.js';
import { terminalText } from '../../client/terminal-text.js';
import { answerFromArgs } from '../turn/question-prompt.js';
import { promptFor } from '../turn/approval-prompt.js';
import { readToken } from '../token-file.js';
import { findGatewayToken } from '../../server/gateway-token.js';
import { compactFate, readAll, validateSend, type SendOptions } from '../person-messages.js';
import { checkTask, goalOfFlags, settingsOfFlags, type RunOptions } from '../turn/turn-flags.js';
import { answerLines, drawTreeViews, treeLines } from '../tree/tree-view.js';
import { terminalColumns } from '../terminal-width.js';

// The commands that drive a remote runtime through the gateway (`--gateway URL`): no NATS, no
// LMDB here, only the gateway's JSON-RPC and SSE (docs/gateway.md). Each prints what the local
// command prints and exits with its codes.

/** The flags every remote command takes. */
export interface GatewayFlags {
  gateway?: string;
  /** A file whose first line is the bearer token (`actorloop serve --token-file`). */
  gatewayTokenFile?: string;
}

/**
 * Where the gateway is and its token: `--gateway-token-file`'s (a file that cannot be read is one
 * line, exit 2), else the one `actorloop serve` keeps in this data dir, when this user can read it.
 */
export function gatewayTarget(o: GatewayFlags, config: Pick<EffectiveConfig, 'dataDir'>): GatewayTarget {
  if (o.gatewayTokenFile !== undefined) return { url: o.gateway!, token: readToken(o.gatewayTokenFile), tokenFile: o.gatewayTokenFile };
  const found = findGatewayToken(config.dataDir);
  return { url: o.gateway!, token: found.token, tokenFile: found.file };
}

/**
 * Refuses `--in-process` beside `--gateway` (exit 2), as `run` does: the one hosts the agent in
 * this process, the other drives it through a gateway, and dropping either would do what the
 * person did not ask for.
 */
function refuseInProcess(command: string, o: { inProcess?: boolean }): void {
  if (o.inProcess !== true) return;
  throw new ConfigError('cli.gateway_flag', `${command} --in-process hosts the agent in this process, and --gateway drives it through a gateway: not both`, {
    hint: 'drop --in-process, or run without --gateway where the runtime is',
  });
}

/** The config whose command lines (a hint to approve, to go on) reach the agent through the same gateway. */
function remoteWhere(config: EffectiveConfig, o: GatewayFlags): WhereConfig {
  return { sources: config.sources, dataDir: config.dataDir, natsUrl: config.natsUrl, gateway: { url: o.gateway!, tokenFile: o.gatewayTokenFile ?? null } };
}

/** What a session says on stderr when it loses the gateway and when it has it again. */
function sessionNotices(o: GatewayFlags, out: Out): SessionNotices {
  return {
    lost: (err) => out.stderr.write(`lost the gateway at ${o.gateway} (${terminalText(err.message)}); connecting again…\n`),
    back: () => out.stderr.write(`connected to the gateway at ${o.gateway} again; carrying on from the last event seen\n`),
  };
}

async function withSession(o: GatewayFlags, config: Pick<EffectiveConfig, 'dataDir'>, out: Out, f: (session: GatewaySession) => Promise<number>): Promise<number> {
  const session = await GatewaySession.open(gatewayTarget(o, config), sessionNotices(o, out));
  try {
    return await f(session);
  } finally {
    session.close();
  }
}

/**
 * The directory is the gateway host's, not this command's: a remote command records no status
 * (the log is where a status comes from; the directory is a cache of it).
 */
const NO_DIRECTORY = { get: async () => undefined, put: async () => 0 };

/** What `followRemoteTurn` needs. */
interface RemoteTurnOptions {
  session: GatewaySession;
  agentId: string;
  printer: RunPrinter;
  out: Out;
  json: boolean;
  /** Asks a person on a TTY; null: a wait for a person exits 5. */
  prompt: Prompt | null;
  /** Asks a question (default, with `prompt`: on this command's terminal). */
  askQuestion?: QuestionPrompt;
  config: WhereConfig;
  /** Events up to this log seq are folded, not printed, and a turn end among them is not the one followed. */
  printAfterSeq: number;
  /** Approvals (and questions) this command answered already (ID → message ID). */
  answered?: Map<string, string>;
  /** The message carrying the task this command follows (`run --continue`, `--last`). */
  taskMessageId?: string;
}

/**
 * Follows the agent's next turn end through the gateway: the one turn follower over the gateway
 * transport, its events printed by the same printer and turn-end code as a local command's, and
 * the approvals and questions it waits on asked on a TTY (as locally) or printed with exit 5.
 * Ctrl-C interrupts the turn through the gateway (a second one leaves at once).
 */
async function followRemoteTurn(o: RemoteTurnOptions): Promise<number> {
  const transport = createGatewayTransport(o.session);
  const p = emptyProjection(o.agentId);
  const answered = new Map(o.answered ?? []);
  const stop = new AbortController();
  const followLine = cliLine(o.config, 'events', o.agentId, '--follow');
  const key = new InterruptKey({
    agentId: o.agentId,
    resumeLine: followLine,
    send: async () => void (await transport.send({ type: 'interrupt', agentId: o.agentId })),
    say: (line) => {
      o.printer.endLine();
      o.out.stderr.write(`\n${line}\n`);
    },
  });
  const leaving = key.left.then((l) => ({ kind: 'leave' as const, sent: l.sent }));
  const onSigint = (): void => key.press();
  process.on('SIGINT', onSigint);
  const out = { directory: NO_DIRECTORY, printer: o.printer, out: o.out, json: o.json };
  const steps = followTurnSteps({
    transport, agentId: o.agentId, from: p, answered, quietUntilSeq: o.printAfterSeq, signal: stop.signal,
    ...(o.taskMessageId !== undefined ? { taskMessageId: o.taskMessageId } : {}),
  });
  const pull = () => steps.next().then((r) => ({ kind: 'step' as const, r }));
  let seeded = false;
  try {
    for (;;) {
      const r = await Promise.race([pull(), leaving]);
      if (r.kind === 'leave') {
        o.printer.endLine();
        const why = r.sent ? 'the interrupt is on its way to its host' : 'its turn goes on on its host';
        o.out.stderr.write(`\nstopped following ${o.agentId}; ${why} (\`${followLine}\` follows it again)\n`);
        return EXIT.interrupted;
      }
      if (r.r.done) throw new Error(`the gateway follower of ${o.agentId} ended`);
      const step = r.r.value;
      if (step.kind === 'event') {
        if (!seeded) o.printer.seedFrom(p);
        seeded = true;
        o.printer.commit([step.event]);
        continue;
      }
      if (step.kind === 'parked') {
        o.printer.endLine();
        if (!o.prompt) return await printWaiting(out, { actorId: o.agentId, projection: p }, step.waiting, o.config);
        // Ctrl-C at a prompt interrupts the turn (as a Ctrl-C anywhere): its end is followed as any other
        await askPerson({
          transport, agentId: o.agentId, projection: p, waiting: step.waiting, prompt: o.prompt, answered,
          askQuestion: o.askQuestion ?? ttyQuestionPrompt(o.out.stdin!, o.out.stderr), interrupted: () => key.press(),
        });
        continue;
      }
      key.clear();
      return await printTurnEnd(out, { actorId: o.agentId, projection: p }, turnEndOf(step.event), o.config);
    }
  } finally {
    key.clear();
    process.off('SIGINT', onSigint);
    stop.abort();
    void steps.return(undefined).catch(() => {});
  }
}

/**
 * `run` flags the gateway's `turn.submit` does not carry, refused rather than dropped: the model
 * endpoint is the hosts' to choose, and where an agent is hosted is theirs too.
 */
const LOCAL_ONLY: (keyof RunOptions)[] = ['baseUrl', 'inProcess'];

/**
 * The settings of `run`'s flags as `turn.submit` params, checked here as a local `run` checks
 * them (a mistake is one line, exit 2, before anything is sent); the files they name
 * (instructions, output schema) are read here and sent as their contents.
 */
async function submitSettings(opts: RunOptions, config: EffectiveConfig): Promise<Partial<RpcParams<'turn.submit'>>> {
  // the workspace is the gateway's to check: it may be a path of its machine
  const flags = await settingsOfFlags({ ...opts, cwd: undefined });
  const goal = goalOfFlags(opts, config);
  const some = <T,>(k: string, v: T | undefined | null): Record<string, T> => (v === undefined || v === null ? {} : { [k]: v });
  return {
    ...some('approve', flags.approvalMode),
    ...some('maxSteps', flags.maxSteps),
    ...some('maxToolCalls', flags.maxToolCalls),
    ...(opts.tools !== undefined ? { tools: opts.tools } : {}),
    ...(flags.planMode ? { planMode: true } : {}),
    ...some('deadlineSeconds', flags.deadlineSeconds),
    ...some('maxTokens', flags.maxTokens),
    ...some('maxCostUsd', flags.maxCostUsd),
    ...some('effort', flags.effort),
    ...some('maxOutputTokens', flags.maxOutputTokens),
    ...some('instructions', flags.instructions),
    ...some('outputSchema', flags.outputSchema),
    ...some('completeWhen', flags.completeWhen),
    ...(goal ? { goal: { objective: goal.objective, ...goal.budget } } : {}),
  };
}

/**
 * `run --gateway URL <task>`: `turn.submit` to the gateway (a host behind it takes the agent),
 * then the turn followed over its event subscription to its end, printed as a local run's.
 * With `--continue <agent>` or `--last` the task is that agent's next turn, as locally.
 */
export async function remoteRunCommand(task: string, opts: RunOptions & GatewayFlags, config: EffectiveConfig, out: Out): Promise<number> {
  checkTask(task);
  const given = LOCAL_ONLY.filter((k) => opts[k] !== undefined && opts[k] !== false);
  if (given.length > 0) {
    const flag = given[0]!.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
    throw new ConfigError('cli.gateway_flag', `--${flag} is not carried by the gateway's turn.submit`, {
      hint: flag === 'base-url' ? 'the hosts behind the gateway choose the model endpoint: drop it, or run without --gateway' : 'drop it, or run without --gateway where the runtime is',
    });
  }
  const continuing = opts.continue !== undefined || opts.last === true;
  if (opts.continue !== undefined && opts.last) throw new ConfigError('cli.continue_last', '--continue <agent> and --last name the agent twice', { hint: 'pass one of them' });
  // paths are this command's: the gateway resolves them from its own directory; a next turn keeps its model unless one is named
  const spec = opts.model ?? (continuing ? undefined : config.defaultModel ?? undefined);
  const parsed = spec !== undefined ? parseModelSpec(spec) : null;
  const model = parsed?.provider === 'scripted' ? `scripted:${resolve(parsed.file)}` : spec;
  const settings = await submitSettings(opts, config);
  return withSession(opts, config, out, async (session) => {
    const json = opts.json === true;
    const submitted = await session.client.call('turn.submit', {
      task,
      // a next turn keeps its workspace unless one is named; `--last` looks in this one
      ...(!continuing || opts.cwd !== undefined || opts.last ? { cwd: resolve(opts.cwd ?? '.') } : {}),
      ...(opts.continue !== undefined ? { agentId: opts.continue } : {}),
      ...(opts.last ? { last: true } : {}),
      ...(model !== undefined ? { model } : {}),
      ...settings,
    });
    (json || out.quiet ? out.stderr : out.stdout).write(`${submitted.agentId}\n`);
    return followRemoteTurn({
      session, agentId: submitted.agentId, printer: new RunPrinter(out, json), out, json, prompt: promptFor(out, json), config: remoteWhere(config, opts),
      printAfterSeq: 0, ...(continuing ? { taskMessageId: submitted.messageId } : {}),
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
  agentId: string, approvalId: string, decision: 'approve' | 'deny', opts: GatewayFlags & { json?: boolean; always?: boolean; reason?: string; inProcess?: boolean },
  config: EffectiveConfig, out: Out,
): Promise<number> {
  refuseInProcess(decision, opts);
  return withSession(opts, config, out, async (session) => {
    const { seq } = await stateOf(session.client, agentId);
    const messageId = await createGatewayTransport(session).send(
      decision === 'approve' ? { type: 'approve', agentId, approvalId, always: opts.always === true } : { type: 'deny', agentId, approvalId, ...(opts.reason !== undefined ? { reason: opts.reason } : {}) },
    );
    const json = opts.json === true;
    return followRemoteTurn({
      session, agentId, printer: new RunPrinter(out, json), out, json, prompt: promptFor(out, json), config: remoteWhere(config, opts), printAfterSeq: seq, answered: new Map([[approvalId, messageId]]),
    });
  });
}

/** `answer --gateway URL <agentId> <questionId> [text] [--option id]`: `ask.answer`, then the turn followed to its end. */
export async function remoteAnswerCommand(
  agentId: string, questionId: string, text: string | undefined, opts: GatewayFlags & { option?: string; json?: boolean; inProcess?: boolean },
  config: EffectiveConfig, out: Out,
): Promise<number> {
  refuseInProcess('answer', opts);
  // the same checks as a local answer: the same mistake exits with the same code
  const answer = answerFromArgs(text, opts);
  return withSession(opts, config, out, async (session) => {
    const { seq } = await stateOf(session.client, agentId);
    const messageId = await createGatewayTransport(session).send({ type: 'answer', agentId, questionId, answer });
    const json = opts.json === true;
    return followRemoteTurn({
      session, agentId, printer: new RunPrinter(out, json), out, json, prompt: promptFor(out, json), config: remoteWhere(config, opts), printAfterSeq: seq, answered: new Map([[questionId, messageId]]),
    });
  });
}

/** `send --gateway URL <agentId> <text>`: `inbox.send` (a steer while a turn runs, else a follow-up turn), then its next turn end. */
export async function remoteSendCommand(
  agentId: string, textArg: string, opts: GatewayFlags & SendOptions, config: EffectiveConfig, out: Out,
): Promise<number> {
  refuseInProcess('send', opts);
  // `-`: the text is stdin's, read here and sent as it is
  const text = textArg === '-' ? await readAll(out.stdin) : textArg;
  const kind = validateSend(text, opts);
  return withSession(opts, config, out, async (session) => {
    const { seq, open } = await stateOf(session.client, agentId);
    const sent = kind === null || kind === 'user_message' ? (open ? 'steer' : 'follow_up') : kind;
    const messageId = await createGatewayTransport(session).send({ type: sent, agentId, text });
    const json = opts.json === true;
    (json || out.quiet ? out.stderr : out.stdout).write(`${messageId} (${sent.replace('_', '-')})\n`);
    // a steer or an inject to an idle agent starts nothing: there is no turn end to wait for
    if (opts.follow === false || (sent !== 'follow_up' && !open)) return EXIT.completed;
    return followRemoteTurn({ session, agentId, printer: new RunPrinter(out, json), out, json, prompt: promptFor(out, json), config: remoteWhere(config, opts), printAfterSeq: seq });
  });
}

/**
 * `interrupt --gateway URL <agentId>`: `turn.interrupt`, then the turn followed to its end; exit 0
 * once it ended cancelled, as the local command; no open turn: said, exit 0.
 */
export async function remoteInterruptCommand(agentId: string, opts: GatewayFlags & { json?: boolean; inProcess?: boolean }, config: EffectiveConfig, out: Out): Promise<number> {
  refuseInProcess('interrupt', opts);
  return withSession(opts, config, out, async (session) => {
    const d = await session.client.call('actor.inspect', { agentId });
    if (d.openTurn === null) {
      const last = d.lastTurn ? ` (its last turn ended ${d.lastTurn.outcome})` : '';
      out.stderr.write(`${agentId} has no open turn: nothing to interrupt${terminalText(last)}\n`);
      return EXIT.completed;
    }
    await createGatewayTransport(session).send({ type: 'interrupt', agentId });
    const json = opts.json === true;
    const code = await followRemoteTurn({ session, agentId, printer: new RunPrinter(out, json), out, json, prompt: null, config: remoteWhere(config, opts), printAfterSeq: d.seq });
    // the turn ended as asked: the command did what it was told
    return code === EXIT.interrupted ? EXIT.completed : code;
  });
}

/** `compact --gateway URL <agentId>`: `turn.compact`; returns once the gateway's inbox has it. */
export async function remoteCompactCommand(agentId: string, opts: GatewayFlags & { json?: boolean }, config: EffectiveConfig, out: Out): Promise<number> {
  return withSession(opts, config, out, async (session) => {
    const d = await session.client.call('actor.inspect', { agentId });
    const messageId = await createGatewayTransport(session).send({ type: 'compact', agentId });
    if (opts.json === true) out.stdout.write(`${JSON.stringify({ messageId, agentId, turnOpen: d.openTurn !== null })}\n`);
    else (out.quiet ? out.stderr : out.stdout).write(`${messageId} compact\n`);
    out.stderr.write(`${compactFate(agentId, d.openTurn !== null)}\n`);
    return EXIT.completed;
  });
}

/**
 * `events --gateway URL <agentId> [--tree] [--follow] [--json] [--after seq]`: the log through the gateway transport,
 * printed as the local command prints it. Without `--follow` it stops at the log's end as
 * `actor.inspect` saw it when the command started.
 */
export async function remoteEventsCommand(
  agentId: string, opts: GatewayFlags & { after?: number; follow?: boolean; json?: boolean; tree?: boolean }, config: EffectiveConfig, out: Out,
): Promise<number> {
  if (opts.tree && opts.after !== undefined) {
    throw new ConfigError('cli.tree_after', '--after counts one agent\'s events, and --tree merges many', {
      hint: `drop --tree to read one agent's log after a seq, or --after to read the whole tree`,
    });
  }
  return withSession(opts, config, out, async (session) => {
    const d = await session.client.call('actor.inspect', { agentId });
    const end = opts.tree ? d.actor.streamSeq : d.seq;
    if (!opts.follow && (end === 0 || (!opts.tree && (opts.after ?? 0) >= end))) return EXIT.completed;
    const stop = new AbortController();
    const onSigint = (): void => stop.abort();
    process.once('SIGINT', onSigint);
    const offStop = onStop(() => stop.abort());
    const names = new Map<string, string>();
    const describers = new Map<string, EventDescriber>();
    let width = 8;
    let rootSeen = false;
    const print = ({ streamSeq, actorId, event: e }: TransportEvent): boolean => {
      let d = describers.get(actorId);
      if (!d) describers.set(actorId, (d = new EventDescriber()));
      if (opts.json) out.stdout.write(eventLine(e));
      else if (!opts.tree) out.stdout.write(`${d.describe(e)}\n`);
      else {
        // the tree's first log is its root's: `main`, as the local command names it
        if (!rootSeen) names.set(actorId, ROOT_NAME);
        rootSeen = true;
        if (e.type === 'subagent/spawn_requested') names.set(e.data.childId, e.data.name);
        const name = terminalText(names.get(actorId) ?? actorId);
        width = Math.max(width, name.length);
        out.stdout.write(`${name.padEnd(width)}  ${d.describe(e)}\n`);
      }
      return !opts.follow && (opts.tree ? streamSeq >= end : e.seq >= end);
    };
    try {
      // the transport resumes a lost connection after the last commit seen, each event printed once
      const events = createGatewayTransport(session).follow({
        agentId, signal: stop.signal, ...(opts.tree ? { tree: true } : {}), ...(opts.after !== undefined ? { afterSeq: opts.after } : {}),
      });
      for await (const e of events) if (print(e)) break;
    } finally {
      stop.abort();
      process.off('SIGINT', onSigint);
      offStop();
    }
    const signal = stopReceived();
    return signal === null ? EXIT.completed : exitCodeForSignal(signal);
  });
}

/**
 * `tree --gateway URL <agentId> [--json] [--follow]`: the agent's tree from `actors.list`, drawn
 * as the local command draws it; followed, drawn again after each commit of the tree's logs (an
 * `events.subscribe` over the tree tells when) until it is settled.
 */
export async function remoteTreeCommand(agentId: string, opts: GatewayFlags & { json?: boolean; follow?: boolean }, config: EffectiveConfig, out: Out): Promise<number> {
  return withSession(opts, config, out, async (session) => {
    const { actors } = await session.client.call('actors.list', undefined);
    const me = actors.find((a) => a.id === agentId);
    if (!me) throw new NotFoundError('actor.not_found', `no agent ${agentId} at the gateway`, { hint: 'pass an agent ID that `actorloop runs` lists where the host runs' });
    const root = actors.find((a) => a.id === me.rootId);
    // the tree folded here from its events, with the fold a local `tree` uses
    const views = (signal: AbortSignal) => watchTreeThrough({ transport: createGatewayTransport(session), rootId: me.rootId, endStreamSeq: root?.streamSeq ?? me.streamSeq, signal });
    if (opts.follow) return drawTreeViews(views, opts, out);
    const stop = new AbortController();
    let view: TreeView | null = null;
    try {
      for await (const v of views(stop.signal)) {
        view = v.view;
        break;
      }
    } finally {
      stop.abort();
    }
    if (!view) return EXIT.completed;
    out.stdout.write(opts.json ? `${JSON.stringify(view)}\n` : `${[...treeLines(view, terminalColumns(out)), ...answerLines(remoteWhere(config, opts), view)].join('\n')}\n`);
    return EXIT.completed;
  });
}
