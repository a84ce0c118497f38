import type { EffectiveConfig } from '../../config/config.js';
import { statusOf } from '../../client/status.js';
import { ConfigError } from '../../protocol/errors.js';
import type { Projection } from '../../store/projection.js';
import { EXIT } from '../exit-codes.js';
import { entryOf, foldLog, inboxPending, placementOf, releaseToHosts } from '../hand-off.js';
import { type Out } from '../output.js';
import { RunPrinter } from '../run-printer.js';
import { inboxLimitBytes, readAll, sendAsPerson, validateSend, type SendOptions } from '../person-messages.js';
import { checkMessageSize } from '../../client/message-size.js';
import { textMessage, type TextKind } from '../../client/messages.js';
import { createLogger, openRuntime } from '../runtime.js';
import { terminalText } from '../../client/terminal-text.js';
import { cliLine } from '../hints.js';
import { followTurn } from '../turn/follow-turn.js';
import { promptFor } from '../turn/approval-prompt.js';
import { awaitHosted, hostExisting } from '../turn/turn-hosting.js';
import { handOverLeftWork } from '../left-work.js';

/** True while the agent's log has a turn open, or a task received that starts one (the projection's status). */
function turnRunning(p: Projection): boolean {
  const status = statusOf(p);
  return status === 'running' || status === 'waiting';
}

/** What becomes of a message of `kind`, in words, for the line after its ID. */
function fate(kind: TextKind, running: boolean): string {
  switch (kind) {
    case 'steer':
      return running ? 'the running turn takes it at its next step' : 'no turn runs: it waits for the next step (without --steer, send starts a turn)';
    case 'inject':
      return running ? 'the running turn takes it at its next step; it wakes nobody' : 'no turn runs: it waits for a step other work drives (an inject never starts a turn)';
    case 'follow_up':
      return running ? 'it starts a turn when the running one ends' : "it starts a turn with the last turn's settings";
    case 'user_message':
      return "it starts a turn with the last turn's settings";
  }
}

/**
 * `actorloop send <agent> "<text>"`: puts a person's text in the agent's durable inbox (person
 * channel) as a steer while a turn runs (the log says so), else as a new turn with the last
 * turn's settings; `--steer`, `--inject`, `--follow-up` choose. Prints the message ID and its
 * kind, then follows the agent to its next turn end as `resume` does: on the host or command that
 * runs it, on a live host it is handed to, or hosted here. With `--no-follow`, or for a message no
 * turn will take now (a steer or an inject to an idle agent), it returns once the inbox has it;
 * when nobody runs the agent, `actorloop resume` carries it.
 */
export async function sendCommand(agentId: string, textArg: string, opts: SendOptions, config: EffectiveConfig, out: Out): Promise<number> {
  // `-`: the text is stdin's (a long one: one argument of a command line stops at 128 KiB)
  const text = textArg === '-' ? await readAll(out.stdin) : textArg;
  const chosen = validateSend(text, opts);
  const rt = await openRuntime(config, createLogger(config));
  try {
    const json = opts.json === true;
    const entry = await entryOf(rt, agentId);
    const from = await foldLog(rt, entry);
    // a task handed to a host and not received yet is a turn on its way
    const running = turnRunning(from) || (from.lastSettings === null && (await inboxPending(rt, agentId)) > 0);
    const kind: TextKind = chosen ?? (running ? 'steer' : 'user_message');
    if (!running && from.lastSettings === null && (kind === 'user_message' || kind === 'follow_up')) {
      throw new ConfigError('cli.no_settings', `${agentId} has run no turn, so a new one has no settings to take`, {
        hint: 'start an agent with `actorloop run "<task>"`',
      });
    }
    const msg = textMessage(agentId, kind, text);
    // refused here, before anything is handed over or published
    checkMessageSize(msg, inboxLimitBytes(rt));
    const place = await placementOf(rt, agentId);
    const wakes = running || kind === 'user_message' || kind === 'follow_up';
    const follow = opts.follow !== false && wakes;
    const elsewhere = place.kind === 'host' || place.kind === 'other' || (place.kind === 'free' && place.hosts.length > 0 && opts.inProcess !== true);
    // a live host is asked to take an agent nobody holds when the message gives it work
    const handed = place.kind === 'free' && place.hosts.length > 0 && wakes && (elsewhere || !follow);
    if (handed) await releaseToHosts(rt, entry);
    await sendAsPerson(rt, msg);
    (json || out.quiet ? out.stderr : out.stdout).write(`${msg.id} ${kind}\n`);
    out.stderr.write(`${terminalText(fate(kind, running))}\n`);
    if (!follow) {
      if (place.kind === 'free' && !handed) {
        out.stderr.write(`nobody runs ${agentId} now: the message waits in its inbox, and \`${cliLine(rt.config, 'resume', agentId)}\` carries it\n`);
      }
      return EXIT.completed;
    }
    if (elsewhere) {
      return await followTurn({
        rt, entry, from, directory: rt.bus.directory, printer: new RunPrinter(out, json), out, json,
        prompt: promptFor(out, json), hosting: { kind: 'host', handedOver: place.kind === 'free' },
      });
    }
    // nobody runs it: hosted here, it takes the mail in (recovering an open turn first)
    const h = await hostExisting(agentId, rt, out, json);
    const code = await awaitHosted(h, entry, from, json, out);
    await handOverLeftWork(rt, h.supervisor, entry, h.actor, out, code);
    return code;
  } finally {
    await rt.close();
  }
}
