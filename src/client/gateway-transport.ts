import { ActorloopError } from '../protocol/errors.js';
import { EventSchema, type ActorEvent } from '../protocol/events.js';
import type { StreamedEvent } from './gateway-client.js';
import { connectionLost, type GatewaySession } from './gateway-session.js';
import type { ClientCommand, ClientTransport, FollowSpec, TransportEvent } from './transport.js';

// The client transport over the gateway (`actorloop serve`, docs/gateway.md): events from an
// `events.subscribe` over its WebSocket, commands as its JSON-RPC methods, whose messages the
// gateway builds with the same module the bus transport uses. Every event is parsed with the
// protocol's schema here, at the edge: what a printer or a fold is given is an event, not a guess.

/**
 * An event as the gateway streamed it, parsed; one that does not fit the protocol is the
 * gateway's error, said as one line (exit 2), never folded.
 */
export function parseStreamedEvent(e: StreamedEvent): TransportEvent {
  const parsed = EventSchema.safeParse(e.event);
  if (!parsed.success) {
    const type = typeof e.event.type === 'string' ? ` ${e.event.type}` : '';
    throw new ActorloopError('gateway.bad_answer', `the gateway sent an event${type} (stream sequence ${e.streamSeq}) that does not fit protocol v1`, {
      hint: 'run the CLI of the same version as the gateway',
    });
  }
  return { actorId: e.actor, streamSeq: e.streamSeq, event: parsed.data as ActorEvent };
}

/**
 * Where a resumed subscription starts: the last commit seen is read again, since a connection
 * may drop between the events of one commit (they share its stream sequence); what was handed
 * already is skipped by its seq.
 */
export function resumeAfter(lastStreamSeq: number): number {
  return Math.max(0, lastStreamSeq - 1);
}

/** The gateway transport over a session (a connection made again when lost). */
export function createGatewayTransport(session: GatewaySession): ClientTransport {
  return {
    follow: (spec) => followGateway(session, spec),
    async send(c: ClientCommand) {
      const client = session.client;
      switch (c.type) {
        case 'submit':
          return (await client.call('turn.submit', { agentId: c.agentId, task: c.task })).messageId;
        case 'steer':
        case 'inject':
        case 'follow_up':
          return (await client.call('inbox.send', { agentId: c.agentId, kind: c.type, content: c.text })).messageId;
        case 'approve':
          return (await client.call('approval.respond', {
            agentId: c.agentId, approvalId: c.approvalId, decision: 'approve', ...(c.always ? { always: true } : {}), ...(c.planDigest !== undefined ? { planDigest: c.planDigest } : {}),
          })).messageId;
        case 'deny':
          return (await client.call('approval.respond', {
            agentId: c.agentId, approvalId: c.approvalId, decision: 'deny', ...(c.reason !== undefined ? { reason: c.reason } : {}), ...(c.planDigest !== undefined ? { planDigest: c.planDigest } : {}),
          })).messageId;
        case 'answer':
          return (await client.call('ask.answer', {
            agentId: c.agentId, questionId: c.questionId, ...(c.answer.optionId !== undefined ? { optionId: c.answer.optionId } : {}), ...(c.answer.text !== undefined ? { text: c.answer.text } : {}),
          })).messageId;
        case 'interrupt':
          return (await client.call('turn.interrupt', { agentId: c.agentId })).messageId;
        case 'compact':
          return (await client.call('turn.compact', { agentId: c.agentId })).messageId;
        case 'goal':
          return (await client.call('goal.control', { agentId: c.agentId, action: c.change.action, expectedRevision: c.change.expectedRevision })).messageId;
      }
    },
  };
}

/**
 * The subscription's events, each parsed and handed once, until the signal aborts. A connection
 * lost on the way is made again (the session's backoff) and the subscription resumed from the
 * last commit seen; a subscription the gateway ends with an error is the follower's error.
 */
async function* followGateway(session: GatewaySession, spec: FollowSpec): AsyncGenerator<TransportEvent> {
  const { signal } = spec;
  const queue: StreamedEvent[] = [];
  const seen = new Map<string, number>();
  let failure: Error | null = null;
  let wake: (() => void) | null = null;
  let lastStreamSeq = spec.afterStreamSeq ?? 0;
  let resumed = false;
  // the subscription made last, to end when the follower stops
  const current: Array<{ client: GatewaySession['client']; subscription: string }> = [];
  const poke = (): void => {
    wake?.();
    wake = null;
  };
  const subscribe = async (): Promise<void> => {
    failure = null;
    const client = session.client;
    const after = resumed ? resumeAfter(lastStreamSeq) : lastStreamSeq;
    const subscription = await client.subscribeEvents(
      { agentId: spec.agentId, ...(spec.tree ? { tree: true } : {}), ...(after > 0 ? { afterStreamSeq: after } : {}) },
      (e) => (queue.push(e), poke()),
      (err) => ((failure = err), poke()),
    );
    current.splice(0, current.length, { client, subscription });
  };
  signal.addEventListener('abort', poke, { once: true });
  try {
    try {
      await subscribe();
    } catch (err) {
      if (!connectionLost(err)) throw err;
      failure = err as Error;
    }
    while (!signal.aborted) {
      const raw = queue.shift();
      if (!raw) {
        if (failure) {
          const lost: Error = failure;
          if (!connectionLost(lost)) throw lost;
          await session.reconnect(lost);
          resumed = true;
          try {
            await subscribe();
          } catch (err) {
            if (!connectionLost(err)) throw err;
            failure = err as Error;
          }
          continue;
        }
        await new Promise<void>((resolve) => (wake = resolve));
        continue;
      }
      const e = parseStreamedEvent(raw);
      lastStreamSeq = Math.max(lastStreamSeq, e.streamSeq);
      if (e.event.seq <= (seen.get(e.actorId) ?? 0)) continue;
      seen.set(e.actorId, e.event.seq);
      if (!spec.tree && spec.afterSeq !== undefined && e.event.seq <= spec.afterSeq) continue;
      yield e;
    }
  } finally {
    signal.removeEventListener('abort', poke);
    for (const c of current) c.client.unsubscribe(c.subscription);
  }
}
