import type { EffectiveConfig } from '../../config/config.js';
import { publishInbox } from '../../bus/inbox.js';
import { lineFor } from '../hints.js';
import { entryOf, foldLog, placementOf, releaseToHosts } from '../hand-off.js';
import { type Out } from '../output.js';
import { RunPrinter } from '../run-printer.js';
import { createLogger, openRuntime } from '../runtime.js';
import { followTurn } from '../turn/follow-turn.js';
import { promptFor } from '../turn/approval-prompt.js';
import { answerFromArgs, questionToAnswer, type AnswerQuestionOptions } from '../turn/question-prompt.js';
import { questionAnswerMessage } from '../../client/messages.js';
import { awaitHosted, hostExisting } from '../turn/turn-hosting.js';

/**
 * `actorloop answer <agentId> <questionId> ("<text>" | --option ID)`: checks the answer against
 * the question the agent's log holds (nothing is sent when it does not fit), delivers it through
 * the agent's inbox as a client command, and follows the turn to its end: on the host that holds
 * the agent or takes it on this mail, else hosting it here as `resume` does.
 */
export async function answerQuestionCommand(
  agentId: string,
  questionId: string,
  text: string | undefined,
  opts: AnswerQuestionOptions,
  config: EffectiveConfig,
  out: Out,
): Promise<number> {
  const answer = answerFromArgs(text, opts);
  const rt = await openRuntime(config, createLogger(config));
  try {
    const json = opts.json === true;
    const entry = await entryOf(rt, agentId);
    const from = await foldLog(rt, entry);
    const q = questionToAnswer(agentId, questionId, from, answer, lineFor(config));
    const expired = Date.now() >= q.expiresAt;
    if (expired) {
      // the agent expires it once it is hosted (the expiry is persisted): follow that, send nothing
      out.stderr.write(`question ${questionId} expired at ${new Date(q.expiresAt).toISOString()} before it was answered: the agent goes on without the answer\n`);
    }
    const msg = questionAnswerMessage(agentId, questionId, answer);
    const answered = new Map([[questionId, expired ? 'expiry' : msg.id]]);
    const place = await placementOf(rt, agentId);
    const onHost = opts.inProcess !== true && (place.kind === 'host' || (place.kind === 'free' && place.hosts.length > 0));
    if (onHost || place.kind === 'other') {
      // nobody holds it: the answer is mail, which a host claims the agent for
      if (place.kind === 'free') await releaseToHosts(rt, entry);
      if (!expired) await publishInbox(await rt.bus.person(), msg, 'person');
      return await followTurn({
        rt, entry, from, directory: rt.bus.directory, printer: new RunPrinter(out, json), out, json,
        prompt: promptFor(out, json), answered, hosting: { kind: 'host', handedOver: place.kind === 'free' },
      });
    }
    const h = await hostExisting(agentId, rt, out, json);
    if (!expired) await h.supervisor.send(msg);
    return await awaitHosted(h, entry, from, json, out, answered);
  } finally {
    await rt.close();
  }
}
