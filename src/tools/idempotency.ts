import { createHash } from 'node:crypto';
import { canonicalJson } from '../protocol/canonical-json.js';

/**
 * The idempotency key of one tool call: the first 32 hex characters of a SHA-256 over the call
 * ID, tool name and canonical input. Canonical JSON makes key order irrelevant; NUL separators
 * keep `("ab","c")` and `("a","bc")` apart.
 */
export function idempotencyKey(callId: string, toolName: string, input: unknown): string {
  return createHash('sha256')
    .update(`${callId}\u0000${toolName}\u0000${canonicalJson(input)}`)
    .digest('hex')
    .slice(0, 32);
}
