import { z } from 'zod';
import type { ToolDefinition } from '../tool.js';

/** The tool's name, which the runtime recognises to run it itself. */
export const ASK_USER = 'ask_user';

const OptionSchema = z.strictObject({
  id: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/, 'an option ID is 1-64 letters, digits, _ . - (a person types it)')
    .describe('Short ID the person picks the option by (letters, digits, _ . -)'),
  label: z.string().min(1).max(500).describe('What the option says'),
});

const AskUserInput = z
  .strictObject({
    question: z.string().trim().min(1).max(4000).describe('The question, as the person should read it'),
    options: z.array(OptionSchema).max(20).optional().describe('Answers to choose from (omit for a free-text answer)'),
    allow_free_text: z.boolean().optional().describe('Whether the person may answer in their own words (default: true without options, false with them)'),
    sensitive: z.boolean().optional().describe('The answer is a secret (a token, a password): it reaches you but is never logged or shown (default false)'),
  })
  .superRefine((v, ctx) => {
    const ids = (v.options ?? []).map((o) => o.id);
    const dup = ids.find((id, i) => ids.indexOf(id) !== i);
    if (dup !== undefined) ctx.addIssue({ code: 'custom', path: ['options'], message: `option ID "${dup}" is given twice` });
    if (ids.length === 0 && v.allow_free_text === false) {
      ctx.addIssue({ code: 'custom', path: ['allow_free_text'], message: 'a question with no options must allow a free-text answer' });
    }
  });
/** Input of `ask_user`. */
export type AskUserInput = z.infer<typeof AskUserInput>;

/** A question as `ask/asked` records it: the input with its defaults applied. */
export interface AskedQuestion {
  question: string;
  options: Array<{ id: string; label: string }>;
  allowFreeText: boolean;
  sensitive: boolean;
}

/** The question an input asks, defaults applied: free text is allowed by default only without options. */
export function questionOf(input: AskUserInput): AskedQuestion {
  const options = input.options ?? [];
  return {
    question: input.question,
    options,
    allowFreeText: input.allow_free_text ?? options.length === 0,
    sensitive: input.sensitive === true,
  };
}

/**
 * `ask_user {question, options?, allow_free_text?, sensitive?}`: asks a person and waits for the
 * answer (design §6). The runtime runs it in the actor (`src/actors/runtime-tools/questions.ts`): the question
 * is a fact in the log, the wait survives restarts, and the answer arrives through the inbox, so
 * it has no timeout of its own, only the question's expiry (`ask_ttl_seconds`).
 */
export const askUserTool: ToolDefinition<AskUserInput> = {
  name: ASK_USER,
  version: '1',
  description:
    'Ask the person you work for a question and wait for their answer: when you need a decision or a fact only they have. ' +
    'Give options for a choice; the answer is the option they picked and/or their own words. Mark secrets sensitive.',
  input: AskUserInput,
  level: 'read',
  // asking changes nothing in the world; a rerun after a crash finds the question already asked
  executionSemantics: () => ({ effects: 'none', retry: 'auto' }),
  resources: () => [],
  async execute() {
    // reached only when something other than the runtime executes it (a bare executeTool)
    return { ok: false, output: 'ask_user is answered through the agent runtime; nobody here can answer it' };
  },
};
