import { z } from 'zod';

// One `[[policy.rules]]` entry of actorloop.toml (design §8, §12). It lives in the protocol because
// the config loader validates it and may import nothing but the protocol; the policy engine in
// src/tools compiles and matches it.

const LevelSchema = z.enum(['read', 'write', 'execute', 'network'], {
  error: 'a side-effect level: "read", "write", "execute" or "network"',
});

const COMMAND_FORMS =
  'a command prefix ("git push"), its words (["git", "push"]) or a list of prefixes ([["git", "push"], ["rm"]])';

const PathGlob = z
  .string()
  .min(1, 'a glob must not be empty')
  // Plan paths are workspace-relative, so an absolute or `..` glob would silently never match:
  // a deny rule that never fires is worse than a config error.
  .refine((g) => !g.startsWith('/') && !g.split('/').includes('..'), {
    message: 'paths are globs relative to the workspace root, such as "src/**" or "**/.env" (no leading "/", no "..")',
  });

/** One `[[policy.rules]]` entry: which calls it matches, and what it decides for them. */
export const PolicyRuleSchema = z
  .strictObject({
    /** Names the rule in decisions (`config:<id>`); without it the rule is named by its 1-based position. */
    id: z.string().min(1).optional(),
    /** Tool names; `*` is a wildcard (`"*"`, `"mcp_*"`). */
    tool: z.union([z.string().min(1), z.array(z.string().min(1)).min(1)], { error: 'a tool name or a list of them ("*" matches any)' }).optional(),
    /** Globs relative to the workspace, matched against every path the call touches. */
    paths: z.array(PathGlob).min(1, 'give at least one glob').optional(),
    /** Command prefixes for shell calls. */
    command: z
      .union([z.string().trim().min(1), z.array(z.string().min(1)).min(1), z.array(z.array(z.string().min(1)).min(1)).min(1)], {
        error: COMMAND_FORMS,
      })
      .optional(),
    /** Side-effect levels of the tool. */
    level: z.union([LevelSchema, z.array(LevelSchema).min(1)]).optional(),
    /** Matches only when (true) or unless (false) the step read untrusted content since the last user message. */
    untrusted_context: z.boolean().optional(),
    /** On an allow rule: the sandbox of the matching shell call may reach the network. */
    network: z.boolean().optional(),
    /** On an allow rule: secret-looking environment variables passed through to matching shell calls. */
    env_allow: z.array(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'an environment variable name such as NPM_TOKEN')).optional(),
    decision: z.enum(['allow', 'ask', 'deny'], { error: 'decision must be "allow", "ask" or "deny"' }),
    /** Shown to the model and the person with a deny or ask decision. */
    reason: z.string().min(1).optional(),
  })
  .superRefine((rule, ctx) => {
    if (Array.isArray(rule.command) && rule.command.every((w) => typeof w === 'string')) {
      // ["git push", "rm"] reads like a list of prefixes but is the words of one command; refuse
      // it rather than let a deny rule quietly match nothing.
      const i = rule.command.findIndex((w) => /\s/.test(w as string));
      if (i >= 0) {
        ctx.addIssue({
          code: 'custom',
          path: ['command', i],
          message:
            `a list of strings is the words of one command, so ${JSON.stringify(rule.command[i])} cannot hold spaces; ` +
            'for several prefixes write [["git", "push"], ["rm"]] or one rule each',
        });
      }
    }
    if (rule.decision !== 'allow' && (rule.network === true || (rule.env_allow?.length ?? 0) > 0)) {
      ctx.addIssue({
        code: 'custom',
        path: [rule.network === true ? 'network' : 'env_allow'],
        message: 'network and env_allow grant something to an allowed call, so they only go on rules with decision = "allow"',
      });
    }
  });

/** One `[[policy.rules]]` entry as validated. */
export type PolicyRule = z.infer<typeof PolicyRuleSchema>;
