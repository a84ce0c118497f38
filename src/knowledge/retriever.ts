/**
 * The retriever port: given a query, a scope and a token budget, it returns excerpts of files,
 * each naming its source, the version of the file it was read from and its line range, so a
 * request that carried them can be rebuilt and checked against the files later.
 *
 * `createRipgrepRetriever` (words of the query searched with ripgrep) is the first
 * implementation. A vector index plugs in by implementing `Retriever` the same way:
 * - `search` returns excerpts best first, whose `tokens` add up to at most `tokenBudget`;
 * - `source` is relative to `scope.root` and never outside it (no symlinks followed out);
 * - `version` is `sha256:<hex>` of the whole file as read, so an index that answers from stale
 *   chunks says so by its version differing from the file's;
 * - `startLine`/`endLine` are 1-based and inclusive, `text` those lines;
 * - `tokens` is what the excerpt costs, `estimated: true` when it is not a tokenizer's count;
 * - `signal` stops the search: it rejects with the signal's reason.
 */

/** What to look for, where, and how much of it the caller can take. */
export interface RetrieverQuery {
  /** The query as the model or the assembler wrote it: words, never a pattern or a shell string. */
  text: string;
  /** The directory searched (absolute), and optionally files or folders under it (relative) to search alone. */
  scope: { root: string; paths?: string[] };
  /** The excerpts returned add up to at most this many tokens. */
  tokenBudget: number;
}

/** One excerpt a retriever found. */
export interface Excerpt {
  /** Path of the file relative to the scope's root, with `/` separators. */
  source: string;
  /** `sha256:<hex>` of the whole file read. */
  version: string;
  /** 1-based, inclusive. */
  startLine: number;
  endLine: number;
  text: string;
  tokens: number;
  /** True when `tokens` is an estimate (characters / 4), not a tokenizer's count. */
  estimated: boolean;
}

/** A source of excerpts for a query: ripgrep today, a vector index later. */
export interface Retriever {
  /** What it is, as recorded with the contribution it made (`ripgrep`). */
  readonly name: string;
  /** Excerpts best first within `q.tokenBudget`; rejects with a ToolError for a scope it cannot search. */
  search(q: RetrieverQuery, signal?: AbortSignal): Promise<Excerpt[]>;
}

/** Tokens of a text by the estimate retrievers use when they have no tokenizer: 4 characters a token. */
export function estimateTokens(text: string): number {
  return Math.ceil(text.length / 4);
}

/**
 * 0-based inclusive line ranges around `hits` (sorted line indexes), widened by `context` lines
 * and merged where they overlap or touch: the excerpts of one file never repeat a line.
 */
export function mergeRanges(hits: readonly number[], context: number, lineCount: number): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  for (const h of hits) {
    const from = Math.max(0, h - context);
    const to = Math.min(lineCount - 1, h + context);
    const last = out[out.length - 1];
    if (last && from <= last[1] + 1) last[1] = Math.max(last[1], to);
    else out.push([from, to]);
  }
  return out;
}
