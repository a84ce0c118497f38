import type { ModelErrorClass } from '../protocol/events.js';

// Why a turn ended, in words a person reads without the design at hand: the page's actor summary
// and runs list say `stopped: step_budget — it took as many steps as it may` where the log says
// `{outcome: 'stopped', reason: 'step_budget'}`. Reasons the runtime writes as codes get a
// sentence; any other reason (a person's words, a model error's message) is shown as it is.
// Pure: the page bundles it.

/** What each reason code the turn and attempt machines write means, and the knob that moves it. */
const REASONS: Record<string, string> = {
  step_budget: 'it took as many steps as its turn may (--max-steps)',
  tool_budget: 'it made as many tool calls as its turn may (--max-tool-calls)',
  deadline: 'its deadline passed (--deadline)',
  token_budget: 'it used the tokens its turn may (--max-tokens)',
  cost_budget: 'it spent what its turn may cost (--max-cost)',
  goal_token_budget: "it used its goal's token budget (--goal-tokens)",
  goal_cost_budget: "it spent its goal's cost budget (--goal-cost)",
  interrupted: 'a person interrupted it',
  user_cancelled: 'a person cancelled it',
  context_cannot_fit: "its request could not be made to fit the model's context window, even by compacting its history",
};

/** Model error classes (`attempt/end` errors) in words. */
const MODEL_ERRORS: Record<ModelErrorClass, string> = {
  rate_limit: 'the provider limited the rate of requests',
  overloaded: 'the provider was overloaded',
  context_overflow: "the request no longer fits the model's context window",
  auth: 'the provider refused the credentials',
  invalid_request: 'the provider refused the request as invalid',
  network: 'the provider could not be reached',
  server: 'the provider failed with a server error',
  cancelled: 'the model call was cancelled',
  output_too_large: 'the model wrote more than max_model_output_bytes allows',
  token_budget: 'the answer ran past the tokens its turn may use (--max-tokens)',
  cost_budget: 'the answer ran past what its turn may cost (--max-cost)',
  goal_token_budget: "the answer ran past its goal's token budget (--goal-tokens)",
  goal_cost_budget: "the answer ran past its goal's cost budget (--goal-cost)",
};

/** The sentence a reason code stands for, or null for a reason that is already words. */
export function reasonMeaning(reason: string): string | null {
  if (Object.hasOwn(REASONS, reason)) return REASONS[reason]!;
  if (Object.hasOwn(MODEL_ERRORS, reason)) return MODEL_ERRORS[reason as ModelErrorClass];
  // `context_overflow: 400 …`: a model error class and the provider's message
  const m = /^([a-z_]+):/.exec(reason);
  if (m && Object.hasOwn(MODEL_ERRORS, m[1]!)) return MODEL_ERRORS[m[1] as ModelErrorClass];
  // `context_cannot_fit: <why>`: the runtime's own reason, its words after it
  if (m && Object.hasOwn(REASONS, m[1]!)) return REASONS[m[1]!]!;
  return null;
}

/**
 * `stopped: step_budget — it took as many steps as its turn may (--max-steps)`; `completed`;
 * `failed: <the reason as written>` for a reason that has no code.
 */
export function outcomeWords(outcome: string, reason: string | null | undefined): string {
  if (!reason) return outcome;
  const meaning = reasonMeaning(reason);
  return meaning === null ? `${outcome}: ${reason}` : `${outcome}: ${reason} — ${meaning}`;
}
