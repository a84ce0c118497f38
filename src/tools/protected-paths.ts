import picomatch from 'picomatch';

// Paths in a workspace that no tool writes unless a policy rule names them (design §8): `.git`
// (the directory of a repository, nested ones too, and the `.git` file of a worktree), because git
// runs what its config, hooks and attributes name, and the host runs git on workspaces; and the
// workspace's `actorloop.toml`, because a trusted workspace's file may loosen the policy that
// guards every call. The shell sandbox binds the same paths read-only (sandbox.ts).

/** The name of a repository's git dir, protected at any depth. */
export const GIT_DIR_NAME = '.git';
/** The workspace config file, protected at the workspace root. */
export const WORKSPACE_CONFIG_NAME = 'actorloop.toml';

/**
 * What protects a workspace-relative, `/`-separated path: `.git` or `actorloop.toml`, or null.
 * Case-insensitive, so a case-insensitive filesystem cannot be used to write `.GIT/config`.
 */
export function protectedPart(rel: string): string | null {
  const parts = rel.split('/').filter((p) => p !== '' && p !== '.');
  if (parts.some((p) => p.toLowerCase() === GIT_DIR_NAME)) return GIT_DIR_NAME;
  if (parts.length === 1 && parts[0]!.toLowerCase() === WORKSPACE_CONFIG_NAME) return WORKSPACE_CONFIG_NAME;
  return null;
}

/**
 * True when `glob` names protected path `rel` explicitly: it matches it and spells the protected
 * name itself, so `.git/**` or `**\/.git/hooks/*` do, and `**` or `*` do not.
 */
export function globNamesProtected(glob: string, rel: string): boolean {
  const part = protectedPart(rel);
  if (part === null) return false;
  return glob.toLowerCase().includes(part) && picomatch.isMatch(rel, glob, { dot: true });
}

/** The policy rule a user adds to let `tool` write a protected path, as the denial shows it. */
export function allowRuleFor(tool: string, part: string): string {
  const glob = part === GIT_DIR_NAME ? '.git/**' : WORKSPACE_CONFIG_NAME;
  return `[[policy.rules]] tool = "${tool}", paths = ["${glob}"], decision = "allow"`;
}

/** Why a write to protected `rel` is refused, for the model and the person. */
export function protectedReason(tool: string, rel: string, part: string): string {
  const why = part === GIT_DIR_NAME
    ? 'git runs the programs its config, hooks and attributes name, and the runtime runs git on this workspace'
    : 'it sets the policy of runs in this workspace';
  return `${rel} is inside ${part === GIT_DIR_NAME ? '.git/' : part}, which the runtime protects (${why}); ` +
    `no tool writes there unless a policy rule names it (${allowRuleFor(tool, part)}); do not retry this call`;
}
