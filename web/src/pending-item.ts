import type { ApprovalPreview } from '../../src/protocol/events.js';

// What waits on a person, as the page holds it: from the page's fold of a tree, or from the
// gateway's `GET /v1/pending` (its ISO times made ms).

/** A pending approval as the page shows it (the gateway's `PendingApproval`, or the page's fold of one). */
export interface ApprovalItem {
  approvalId: string;
  tool: string;
  toolVersion: string;
  planDigest: string;
  preview: ApprovalPreview | null;
  plan: unknown;
  reason: string | null;
  rule: string | null;
  /** ms since the epoch. */
  expiresAt: number;
}

/** A pending question as the page shows it. */
export interface QuestionItem {
  questionId: string;
  question: string;
  options: Array<{ id: string; label: string }>;
  allowFreeText: boolean;
  sensitive: boolean;
  expiresAt: number;
}

/** One thing a person is asked for, by whom. */
export type PendingItem =
  | { kind: 'approval'; actorId: string; actorName: string; rootId: string; approval: ApprovalItem }
  | { kind: 'question'; actorId: string; actorName: string; rootId: string; question: QuestionItem };
