import { canonicalJson, sha256Hex } from '../protocol/canonical-json.js';

/**
 * The idempotency key of one tool call: the first 32 hex characters of a SHA-256 over the call
 * ID, tool name and canonical input. Canonical JSON makes key order irrelevant; NUL separators
 * keep `("ab","c")` and `("a","bc")` apart.
 */
export function idempotencyKey(callId: string, toolName: string, input: unknown): string {
  return sha256Hex(`${callId}\u0000${toolName}\u0000${canonicalJson(input)}`).slice(0, 32);
}
