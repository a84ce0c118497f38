import type { StateValue } from 'xstate';
import { canonicalJson } from '../../protocol/canonical-json.js';
import { isVerification } from '../../protocol/completion.js';
import { newId } from '../../protocol/ids.js';
import type { ApprovalPreview, EventData } from '../../protocol/events.js';
import { ToolError } from '../../protocol/errors.js';
import { approvalById, approvalsOf, type ApprovalRecord, type OpenCall } from '../../store/projection.js';
import { decide, defaultPlan, planDigest, type PolicyDecision } from '../../tools/policy.js';
import { parseShellCommand, type ParsedCommand } from '../../tools/shell-command.js';
import { previewCall } from '../../tools/approval-preview.js';
import type { ExecutionPlan, ResourceKey, ToolDefinition } from '../../tools/tool.js';
import { scope, settings, type EffectContext } from '../agent/effect-context.js';
import { clipStrings } from '../agent/output-blobs.js';
import { planModeDenial } from '../agent/plan-mode.js';

// The policy side of the tool pipeline (design §8): the normalized execution plan of a call,
// the decision on it, approvals bound to that plan, and the answers people give.

/** A call's plan as the policy and an approval see it. */
export interface CallPlan {
  tool: ToolDefinition<any>;
  input: unknown;
  plan: ExecutionPlan;
  digest: string;
  resources: ResourceKey[];
  shell: ParsedCommand | null;
}

/** Plans a valid call of the open step; a ToolError when the tool cannot plan it (its message says why). */
export function planCall(a: EffectContext, call: OpenCall): CallPlan {
  const s = settings(a);
  const ctx = { workspace: s.workspace };
  const r = a.ports.tools.resolveCall(call.name, a.outputs.argumentsOf(call), s.tools, ctx);
  // e.g. resumed by a runtime whose registry no longer offers the tool: denied, not a crash
  if (r.status !== 'valid') throw new ToolError('tool.unresolvable', `the call no longer resolves: ${r.error}`);
  const resources = r.tool.resources(r.input, ctx);
  const plan = r.tool.plan ? r.tool.plan(r.input, ctx) : defaultPlan(r.tool, r.input, resources, s.workspace);
  const command = (r.input as { command?: unknown }).command;
  const shell = r.tool.level === 'execute' && typeof command === 'string' ? parseShellCommand(command) : null;
  if (shell?.ok) plan.commands = shell.commands.map((c) => c.argv);
  return { tool: r.tool, input: r.input, plan, digest: planDigest(plan), resources, shell };
}

function openCall(a: EffectContext, callId: string): OpenCall {
  const call = a.projection.pending.calls.find((c) => c.callId === callId);
  if (!call) throw new Error(`tool call ${callId} is not in the open step`);
  return call;
}

/** Decides a call: policy rules, run mode, remembered "always" answers, and (on recheck) the approval's binding. */
export function decideCall(a: EffectContext, callId: string, recheck: boolean): void {
  const call = openCall(a, callId);
  const ids = Object.assign(scope(a), { call: callId });
  let planned: CallPlan;
  try {
    planned = planCall(a, call);
  } catch (err) {
    if (!(err instanceof ToolError)) throw err;
    a.stage({ type: 'policy/decided', ...ids, data: { decision: 'deny', rule: 'tool:unplannable', reason: err.message, recheck } });
    return;
  }
  const { tool, plan, digest, shell } = planned;
  const semantics = tool.executionSemantics(planned.input, { workspace: settings(a).workspace });
  // plan mode first: no rule, run mode, "always" answer or approval lets an effect through
  const readOnly = planModeDenial(settings(a), semantics.effects);
  if (readOnly) {
    a.stage({ type: 'policy/decided', ...ids, data: { decision: 'deny', rule: readOnly.rule, reason: readOnly.reason, planDigest: digest, recheck } });
    return;
  }
  const policy = a.ports.tooling.policy(settings(a));
  let d: PolicyDecision = decide(policy.rules, policy.mode, {
    tool: tool.name,
    level: tool.level,
    effects: semantics.effects,
    plan,
    untrustedContext: a.projection.openStep?.untrusted === true,
    sandboxed: a.ports.tooling.bwrapPath !== null,
    shell,
  });
  if (d.decision === 'ask' && (a.projection.alwaysAllowed ?? []).includes(`${tool.name}\u0000${digest}`)) {
    d = { ...d, decision: 'allow', rule: 'approval:always', reason: null };
  }
  if (d.decision === 'ask' && recheck) {
    const id = call.approvalId;
    const approval = id ? approvalsOf(a.projection)[id] : undefined;
    const mismatch = approval
      ? bindingMismatch(approval, { callId, toolVersion: tool.version, digest, scope: planned.resources, nowMs: a.ports.clock.nowMs() })
      : 'no approval was granted';
    d = mismatch === null
      ? { ...d, decision: 'allow', rule: `approval:${id}`, reason: null }
      : { ...d, reason: `approval ${id ?? ''} does not hold: ${mismatch}; a new approval is needed` };
  }
  const data: EventData<'policy/decided'> = { decision: d.decision, rule: d.rule, reason: d.reason, planDigest: digest, recheck };
  // recorded with the decision, so the completion policy reads it from the log, never re-parses
  if (isVerification(plan.commands, settings(a).verifyCommands ?? [])) data.verification = true;
  if (d.decision === 'allow') {
    data.network = d.network;
    data.envAllow = d.envAllow;
  }
  a.stage({ type: 'policy/decided', ...ids, data });
}

/** The call as it would run now, which a granted approval must cover. */
export interface CallNow {
  callId: string;
  toolVersion: string;
  digest: string;
  scope: ResourceKey[];
  nowMs: number;
}

/** Why a granted approval does not cover the call as it would run now; null when it does. */
export function bindingMismatch(ap: ApprovalRecord, now: CallNow): string | null {
  if (ap.state !== 'granted') return `it is ${ap.state}, not granted`;
  if (ap.callId !== now.callId) return 'it was given for another call';
  if (ap.toolVersion !== now.toolVersion) return `the tool changed from version ${ap.toolVersion} to ${now.toolVersion}`;
  if (ap.planDigest !== now.digest) return 'the execution plan changed since it was approved';
  if (ap.scope && canonicalJson(ap.scope) !== canonicalJson(now.scope)) return 'the resources the call touches changed since it was approved';
  if (now.nowMs >= ap.expiresAt) return `it expired at ${new Date(ap.expiresAt).toISOString()}`;
  return null;
}

/** What a person is told when a crash left a call's outcome unknown. */
export const UNKNOWN_OUTCOME_QUESTION =
  'the process stopped after this call started and before its result was recorded, so it may or may not have taken effect; ' +
  'check the workspace, then approve to let the agent go on (it is told the outcome is unknown) or deny with what you found';

/**
 * Asks a person: commits `approval/requested` bound to the tool, its version, the plan digest,
 * scope and expiry, with the preview the person is shown (a diff, the patch, the argv), made
 * here where the call would run. `confirmUnknown`: the question is whether the turn may go on
 * after a crash left the call's outcome unknown (`reconcileReason`: why its tool's reconcile
 * could not tell).
 */
export async function requestApproval(a: EffectContext, callId: string, confirmUnknown = false, reconcileReason?: string): Promise<void> {
  const call = openCall(a, callId);
  const planned: ApprovalSubject = confirmUnknown ? planOrRecorded(a, call) : planCall(a, call);
  const preview = await previewOf(a, planned);
  // an interrupt or a stop while the preview was made moved the call on: there is nothing to ask
  if (a.halted || !isRequesting(a.callState(callId))) return;
  const question = reconcileReason === undefined
    ? UNKNOWN_OUTCOME_QUESTION
    : `${call.name}'s reconcile could not tell whether it took effect (${reconcileReason}); ${UNKNOWN_OUTCOME_QUESTION}`;
  const last = confirmUnknown ? { rule: 'recovery:outcome-unknown', reason: question } : call.decided;
  a.stage({
    type: 'approval/requested',
    ...scope(a),
    call: callId,
    data: {
      approvalId: newId('approval'),
      tool: planned.tool.name,
      toolVersion: planned.tool.version,
      planDigest: planned.digest,
      expiresAt: a.ports.clock.nowMs() + a.ports.tooling.approvalTtlMs,
      // bound to the whole plan by its digest; what the log shows a person cuts blob-stored input
      plan: (call.argumentsRef ? clipStrings(planned.plan, call.argumentsRef) : planned.plan) as Record<string, unknown>,
      scope: planned.resources,
      ...(last ? { rule: last.rule, reason: last.reason } : {}),
      preview,
    },
  });
}

/** The preview of what an approval binds: the tool's own, or the plan's view of the call (bounded, redacted, never a throw). */
function previewOf(a: EffectContext, planned: ApprovalSubject): Promise<ApprovalPreview> {
  const t = a.ports.tooling;
  return previewCall(planned.tool, planned.input, {
    workspace: settings(a).workspace,
    plan: planned.plan,
    env: t.env,
    sandboxed: t.bwrapPath !== null,
    redactor: t.redactor,
    signal: a.signal,
  });
}

/** True in the states that ask for an approval and wait for `approval/requested`. */
function isRequesting(state: StateValue | undefined): boolean {
  if (state === undefined || typeof state === 'string') return false;
  return state.awaiting_approval === 'requesting' || state.confirming === 'requesting';
}

/**
 * The plan a confirmation of an unknown outcome is bound to: the call's plan, or, when the tool
 * no longer resolves (a resume with another registry), the call as the log recorded it. The
 * person must still be asked: the call may have run.
 */
function planOrRecorded(a: EffectContext, call: OpenCall): ApprovalSubject {
  try {
    return planCall(a, call);
  } catch (err) {
    if (!(err instanceof ToolError)) throw err;
    const plan: ExecutionPlan = { tool: call.name, version: 'unresolved', paths: [], network: false, input: call.arguments };
    return { tool: { name: call.name, version: 'unresolved' }, input: call.arguments, plan, digest: planDigest(plan), resources: [] };
  }
}

/** What an approval is bound to: the tool and version, the plan and its digest, the resources. */
type ApprovalSubject = { tool: Pick<ToolDefinition<any>, 'name' | 'version'> & Partial<Pick<ToolDefinition<any>, 'preview'>> } & Pick<CallPlan, 'input' | 'plan' | 'digest' | 'resources'>;

/** The answer a client sends in an `approval_response` inbox message. */
interface ApprovalAnswer {
  approvalId: string;
  decision: 'approve' | 'deny';
  always?: boolean;
  planDigest?: string;
  reason?: string;
}

/** Who may answer an approval: a client command, never an agent, a tool or a job. */
export const CLIENT_SENDER = /^client:[a-z0-9_-]+$/;

/**
 * Applies an approval answer from the inbox. Refused (committed as `inbox/cancelled` with why):
 * a sender that is not a client command, a malformed answer, an approval that is not pending, or
 * an answer for another plan than the one asked about. Otherwise `approval/granted` or
 * `approval/denied`, scoped to the call it was asked for.
 */
export async function answerApproval(a: EffectContext, messageId: string, from: string, content: string): Promise<void> {
  const refuse = (reason: string): void => {
    a.stage({ type: 'inbox/cancelled', data: { messageId, reason } });
    a.logger.warn({ messageId, from }, `approval answer refused: ${reason}`);
  };
  if (!CLIENT_SENDER.test(from)) return refuse(`approvals are answered by client commands (actorloop approve / deny), not by ${from}`);
  const answer = parseAnswer(content);
  if (!answer) return refuse('the message is not an approval answer ({approvalId, decision: approve | deny})');
  const ap = approvalById(a.projection, answer.approvalId);
  if (!ap) return refuse(`no approval ${answer.approvalId} was asked for in the open turn`);
  if (ap.state !== 'pending') return refuse(`approval ${answer.approvalId} is already ${ap.state}; an approval is single use`);
  if (answer.planDigest !== undefined && answer.planDigest !== ap.planDigest) {
    return refuse(`the answer is for plan ${answer.planDigest}, but approval ${answer.approvalId} asks about ${ap.planDigest}`);
  }
  const turn = a.projection.openTurn;
  const step = a.projection.openStep;
  if (!turn || !step) return refuse(`approval ${answer.approvalId} belongs to a step that is no longer open`);
  const ids = { turn: turn.id, step: step.id, call: ap.callId };
  if (a.ports.clock.nowMs() >= ap.expiresAt) {
    refuse(`approval ${answer.approvalId} expired at ${new Date(ap.expiresAt).toISOString()}`);
    expireApproval(a, ap.callId, answer.approvalId);
    return;
  }
  if (answer.decision === 'approve') {
    a.stage({ type: 'approval/granted', ...ids, data: { approvalId: answer.approvalId, by: from, messageId, always: answer.always === true } });
    // The grant is its own commit, before the recheck and the call's tool/start: a crash between
    // the approval and the execution then recovers to a recheck and runs the call once, where a
    // shared commit would leave a started call whose outcome is unknown.
    await a.flush();
  } else {
    const reason = answer.reason ? `denied by a person: ${answer.reason}` : 'denied by a person';
    a.stage({ type: 'approval/denied', ...ids, data: { approvalId: answer.approvalId, by: from, reason, messageId } });
  }
}

/** Denies a call whose approval was not answered in time (its expiry is a persisted deadline). */
export function expireApproval(a: EffectContext, callId: string, approvalId: string): void {
  const ap = approvalsOf(a.projection)[approvalId];
  if (!ap || ap.state !== 'pending' || !a.projection.openStep) return;
  a.stage({
    type: 'approval/denied',
    ...scope(a),
    call: callId,
    data: {
      approvalId,
      by: 'expiry',
      reason: `nobody answered the approval before it expired at ${new Date(ap.expiresAt).toISOString()}; the call did not run`,
    },
  });
}

function parseAnswer(content: string): ApprovalAnswer | null {
  let v: unknown;
  try {
    v = JSON.parse(content);
  } catch {
    return null;
  }
  if (v === null || typeof v !== 'object') return null;
  const o = v as Record<string, unknown>;
  if (typeof o.approvalId !== 'string' || (o.decision !== 'approve' && o.decision !== 'deny')) return null;
  return {
    approvalId: o.approvalId,
    decision: o.decision,
    ...(o.always === true ? { always: true } : {}),
    ...(typeof o.planDigest === 'string' ? { planDigest: o.planDigest } : {}),
    ...(typeof o.reason === 'string' ? { reason: o.reason } : {}),
  };
}
