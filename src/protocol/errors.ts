/** Options every actorloop error takes. */
export interface ErrorOptions {
  cause?: unknown;
  retryable?: boolean;
  /** What the user should do next; shown after the message. */
  hint?: string;
}

/**
 * The root of every error actorloop raises on purpose. Decisions read `code` and `retryable`,
 * never the message text.
 */
export class ActorloopError extends Error {
  readonly code: string;
  readonly retryable: boolean;
  readonly hint: string | undefined;

  constructor(code: string, message: string, opts: ErrorOptions = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = new.target.name;
    this.code = code;
    this.retryable = opts.retryable ?? false;
    this.hint = opts.hint;
  }

  /** One line for a person: what happened and what to do. */
  userMessage(): string {
    return this.hint ? `${this.message}. ${this.hint}` : this.message;
  }
}

/** The NATS connection, embedded server, streams or inbox failed. */
export class BusError extends ActorloopError {}
/** The log, snapshots or blobs refused or failed. */
export class StoreError extends ActorloopError {}
/** A model adapter failed; `code` is the error class (rate_limit, server, ...). */
export class ModelError extends ActorloopError {}
/** A tool call failed; inside a tool it is a business failure the model sees as an observation. */
export class ToolError extends ActorloopError {}
/** A policy decision could not be made. */
export class PolicyError extends ActorloopError {}
/** Configuration, flags or input files are invalid: exit 2. */
export class ConfigError extends ActorloopError {}
/** Something the user named does not exist: exit 3. */
export class NotFoundError extends ActorloopError {}

/** An agent ID the directory does not hold (exit 3), in the one wording every command uses. */
export function agentNotFound(actorId: string): NotFoundError {
  return new NotFoundError('actor.not_found', `no agent ${actorId} in this data dir`, {
    hint: 'list agents with `actorloop runs`, and pass the same --data-dir and --nats as the run',
  });
}

/** Stable store error codes. */
export const STORE_CODES = {
  fenced: 'store.fenced',
  gap: 'store.gap',
  snapshotAhead: 'store.snapshot_ahead',
  invalidEvent: 'store.invalid_event',
  publishUnknown: 'store.publish_unknown',
  publishRejected: 'store.publish_rejected',
  /** A blob the log names is not in the blob store: final, the log alone cannot rebuild it. */
  blobMissing: 'store.blob_missing',
  /** A blob could not be written to the Object Store (NATS unreachable, out of storage): the commit naming it waits. */
  blobUnwritten: 'store.blob_unwritten',
  /** A commit is larger than the server takes in one message (max_payload): retrying cannot help. */
  commitTooLarge: 'store.commit_too_large',
  /** `actorloop gc` could not read the blob bucket or remove a blob from it; running it again is safe. */
  blobGcFailed: 'store.blob_gc_failed',
} as const;

/** Narrows an unknown thrown value to an ActorloopError with the given code. */
export function hasCode(err: unknown, code: string): err is ActorloopError {
  return err instanceof ActorloopError && err.code === code;
}

/** Exhaustiveness guard for switches over discriminated unions. */
export function assertNever(value: never, what = 'value'): never {
  throw new Error(`unexpected ${what}: ${JSON.stringify(value)}`);
}
