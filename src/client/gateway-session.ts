import { ActorloopError } from '../protocol/errors.js';
import { GatewayClient, type GatewayTarget } from './gateway-client.js';

// A command driving a remote runtime must outlive a gateway restart or a dropped connection:
// the work goes on in the hosts whatever happens to the gateway, and every subscription resumes
// from a stream sequence. A session holds the current connection and makes a new one when it
// is lost, retrying with backoff for a while before it gives up.

/** How long a session keeps trying to reach the gateway again before it gives up. */
export const RECONNECT_FOR_MS = 120_000;

/** Errors that mean the gateway will not take this client, now or after a retry: a retry cannot help. */
const FATAL = new Set(['gateway.unauthorized', 'gateway.refused', 'gateway.url', 'gateway.bad_answer']);

/** Whether an error is the connection lost (or not reachable yet), which reconnecting may mend. */
export function connectionLost(err: unknown): boolean {
  if (!(err instanceof ActorloopError)) return false;
  return err.code === 'gateway.closed' || err.code === 'gateway.unreachable';
}

/** What a session tells the person about its connection. */
export interface SessionNotices {
  lost(err: Error): void;
  back(): void;
}

/** One command's connection to the gateway, made again when it is lost. */
export class GatewaySession {
  private constructor(
    private readonly target: GatewayTarget,
    private current: GatewayClient,
    private readonly notices: SessionNotices | null,
    private readonly retryForMs: number,
  ) {}

  /** Connects (a first connection that fails is the command's error: nothing is under way yet). */
  static async open(target: GatewayTarget, notices: SessionNotices | null = null, retryForMs = RECONNECT_FOR_MS): Promise<GatewaySession> {
    return new GatewaySession(target, await GatewayClient.connect(target), notices, retryForMs);
  }

  /** The connection now. */
  get client(): GatewayClient {
    return this.current;
  }

  /**
   * A new connection after `err` lost the last one: tried again with backoff (0.25 s doubling to
   * 4 s) for the session's retry time. A refusal (a token no longer taken) is thrown at once, and
   * so is the last failure when the time is up.
   */
  async reconnect(err: Error): Promise<GatewayClient> {
    this.current.close();
    this.notices?.lost(err);
    const until = Date.now() + this.retryForMs;
    let wait = 250;
    let last: unknown = err;
    while (Date.now() < until) {
      await new Promise((resolve) => setTimeout(resolve, wait));
      wait = Math.min(wait * 2, 4_000);
      try {
        this.current = await GatewayClient.connect(this.target);
        this.notices?.back();
        return this.current;
      } catch (e) {
        if (e instanceof ActorloopError && FATAL.has(e.code)) throw e;
        last = e;
      }
    }
    throw last;
  }

  /** Closes the connection. */
  close(): void {
    this.current.close();
  }
}
