import { ConfigError } from '../protocol/errors.js';
import type { TurnRequest } from '../protocol/events.js';
import type { RpcParams } from '../protocol/gateway.js';
import { outputValidator } from '../model/output-schema.js';
import { GATEWAY_SENDER } from '../client/messages.js';
import { gatewayCommands as serverCommands, type GatewayCommandOptions } from '../server/gateway-commands.js';
import type { GatewayCommands } from '../server/gateway.js';
import { noHostError } from '../server/rpc.js';
import { answerFromArgs, questionToAnswer } from './turn/question-prompt.js';
import { continueRequest, validateRun, type RunOptions } from './turn/turn-flags.js';
import { entryOf, foldLog, latestAgent, placementOf, releaseToHosts, submitToHosts } from './hand-off.js';
import { lineFor } from './hints.js';
import { personTransport } from './person-messages.js';
import type { Runtime } from './runtime.js';

// The runtime the gateway's write side (src/server/gateway-commands.ts) runs over, made of a
// command's open runtime: the bus transport it sends with as `client:gateway`, and the checks
// `run`, `run --continue` and `answer` make, so a call through the gateway is refused where the
// same CLI command would be.

/**
 * `run`'s options for a `turn.submit`: the same checks (`validateRun`, `continueRequest`) then
 * apply to a remote run as to a local one. A file the CLI reads (instructions, output schema)
 * comes as its contents: `withGatewaySettings` puts those in.
 */
function runOptionsOf(p: RpcParams<'turn.submit'>): RunOptions {
  const str = (n: number | undefined): string | undefined => (n === undefined ? undefined : String(n));
  const opts: RunOptions = {
    model: p.model, cwd: p.cwd, approve: p.approve, maxSteps: p.maxSteps, maxToolCalls: p.maxToolCalls, tools: p.tools,
    planMode: p.planMode, deadline: p.deadlineSeconds, maxTokens: p.maxTokens, maxCost: p.maxCostUsd, effort: p.effort,
    maxOutputTokens: p.maxOutputTokens, completeWhen: p.completeWhen,
    goal: p.goal?.objective, goalTokens: str(p.goal?.tokens), goalCost: str(p.goal?.costUsd), goalSeconds: str(p.goal?.seconds),
  };
  // an absent key is a flag not given (`settingsOfFlags` tells a given one by its presence)
  for (const k of Object.keys(opts) as (keyof RunOptions)[]) if (opts[k] === undefined) delete opts[k];
  return opts;
}

/** The request with the instructions and output schema the call carries as text and JSON (checked as `run` checks the files). */
function withGatewaySettings(request: TurnRequest, p: RpcParams<'turn.submit'>): TurnRequest {
  if (p.instructions !== undefined) {
    if (p.instructions.trim() === '') throw new ConfigError('config.instructions', 'the instructions are empty', { hint: 'send the system prompt\'s text, or leave instructions out' });
    request.instructions = p.instructions;
  }
  if (p.outputSchema !== undefined) {
    outputValidator(p.outputSchema);
    request.outputSchema = p.outputSchema;
  }
  return request;
}

/** The gateway's commands over an open runtime. */
export function gatewayCommands(rt: Runtime, o: GatewayCommandOptions = { allowLooserPolicy: false }): GatewayCommands {
  const line = lineFor(rt.config);
  const transport = personTransport(rt, {
    from: GATEWAY_SENDER,
    // an agent nobody holds goes to a live host with its mail; none live: an error saying to start one
    async beforeSend(msg) {
      const place = await placementOf(rt, msg.to);
      if (place.kind !== 'free') return;
      if (place.hosts.length === 0) throw noHostError();
      await releaseToHosts(rt, await entryOf(rt, msg.to));
    },
  });
  return serverCommands({
    transport,
    entryOf: (agentId) => entryOf(rt, agentId),
    latestAgent: (workspace) => latestAgent(rt, workspace),
    foldLog: (entry) => foldLog(rt, entry),
    liveHosts: async () => (await rt.hosts.live(Date.now())).length,
    submitToHosts: (entry, msg) => submitToHosts(rt, entry, msg),
    firstTurn: async (p) => withGatewaySettings(await validateRun(p.task, runOptionsOf(p), rt.config), p),
    nextTurn: async (p, last) => withGatewaySettings(await continueRequest(runOptionsOf(p), rt.config, last), p),
    answerOf(p, proj) {
      const answer = answerFromArgs(p.optionId === undefined ? p.text : undefined, p.optionId === undefined ? {} : { option: p.optionId });
      questionToAnswer(p.agentId, p.questionId, proj, answer, line);
      return answer;
    },
    titleOf: (task) => rt.tooling.redactor.redact(task.trim()).text.slice(0, 120),
    holder: async (actorId) => (await rt.leases.get(actorId, Date.now()))?.host ?? null,
    faultOrders: rt.bus.nc,
    approvalMode: rt.config.approvalMode,
  }, o);
}
