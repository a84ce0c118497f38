import type { JetStreamClient } from '@nats-io/jetstream';
import type { ActorDirectory } from '../bus/directory.js';
import { publishInbox } from '../bus/inbox.js';
import { agentNotFound, ConfigError, NotFoundError } from '../protocol/errors.js';
import type { InboxMessage } from '../protocol/inbox.js';
import type { LogReader, StoredEvent, TreeEvent } from '../store/log-port.js';
import { approvalById, emptyProjection, foldEvent, questionById, type Projection } from '../store/projection.js';
import { checkMessageSize } from './message-size.js';
import {
  approvalMessage, CLI_SENDER, compactMessage, goalControlMessage, interruptMessage, questionAnswerMessage, textMessage,
} from './messages.js';
import type { ClientCommand, ClientTransport, FollowSpec, TransportEvent } from './transport.js';

// The client transport over the bus itself: events from the log reader (JetStream), commands
// published to the agent's inbox on the person channel, as the person's own login. Whoever hosts
// the agent takes the mail from its inbox; a command that also hands the agent to a host does
// that first (`beforeSend`).

/** What the bus transport reads and publishes with. */
export interface BusTransportOptions {
  reader: Pick<LogReader, 'read' | 'follow' | 'followTree'>;
  directory: Pick<ActorDirectory, 'get'>;
  /** The person login's JetStream (`Bus.person()`): only it may publish on the person channel. */
  person(): Promise<JetStreamClient>;
  /** The largest message the inbox takes, in bytes: a larger one is refused before it is published. */
  limitBytes: number;
  /** Who the messages come from (default `client:cli`). */
  from?: string;
  /** Runs before each message is published (the gateway hands an agent nobody holds to a live host). */
  beforeSend?(msg: InboxMessage): Promise<void>;
}

/** The bus transport; `publish` sends a message built already (a task with settings only its sender can make). */
export interface BusTransport extends ClientTransport {
  /** Checks a message against the inbox's limit and publishes it on the person channel; resolves with its ID. */
  publish(msg: InboxMessage): Promise<string>;
}

/** The bus transport. */
export function createBusTransport(o: BusTransportOptions): BusTransport {
  const from = o.from ?? CLI_SENDER;
  const rootOf = async (agentId: string): Promise<string> => {
    const entry = await o.directory.get(agentId);
    if (!entry) throw agentNotFound(agentId);
    return entry.rootId;
  };
  const projectionOf = async (agentId: string): Promise<Projection> => {
    const p = emptyProjection(agentId);
    for await (const { event } of o.reader.read(await rootOf(agentId), agentId)) foldEvent(p, event);
    return p;
  };
  const planDigestOf = async (agentId: string, approvalId: string): Promise<string> => {
    const approval = approvalById(await projectionOf(agentId), approvalId);
    if (!approval) throw new NotFoundError('client.approval_not_found', `${agentId} has no approval ${approvalId}`, { hint: `\`actorloop approvals ${agentId}\` lists what it waits for` });
    return approval.planDigest;
  };
  const checkQuestion = async (agentId: string, questionId: string): Promise<void> => {
    if (questionById(await projectionOf(agentId), questionId)) return;
    throw new NotFoundError('client.question_not_found', `${agentId} has no question ${questionId}`, { hint: `\`actorloop questions ${agentId}\` lists what it asks` });
  };
  const checkGoal = async (agentId: string): Promise<void> => {
    if ((await projectionOf(agentId)).goal) return;
    throw new NotFoundError('client.goal_not_found', `${agentId} has no goal`, { hint: 'start one with actorloop run --goal "<objective>" "<task>" (or run --continue <agent> --goal ...)' });
  };
  const messageOf = async (c: ClientCommand): Promise<InboxMessage> => {
    switch (c.type) {
      case 'submit':
        // a follow-up to an idle agent is its next turn, with its last turn's settings
        return textMessage(c.agentId, 'follow_up', c.task, from);
      case 'steer':
      case 'inject':
      case 'follow_up':
        return textMessage(c.agentId, c.type, c.text, from);
      case 'approve':
        return approvalMessage(c.agentId, c.approvalId, c.planDigest ?? (await planDigestOf(c.agentId, c.approvalId)), { decision: 'approve', always: c.always === true }, from);
      case 'deny':
        return approvalMessage(c.agentId, c.approvalId, c.planDigest ?? (await planDigestOf(c.agentId, c.approvalId)), { decision: 'deny', reason: c.reason ?? null }, from);
      case 'answer':
        // an answer to no question the agent asked would be refused by it: said here, before it is sent
        await checkQuestion(c.agentId, c.questionId);
        return questionAnswerMessage(c.agentId, c.questionId, c.answer, from);
      case 'interrupt':
        return interruptMessage(c.agentId, from);
      case 'compact':
        return compactMessage(c.agentId, from);
      case 'goal':
        // a change of no goal would be refused by the agent: said here, before it is sent
        await checkGoal(c.agentId);
        return goalControlMessage(c.agentId, c.change, from);
    }
  };
  const publish = async (msg: InboxMessage): Promise<string> => {
    checkMessageSize(msg, o.limitBytes);
    await o.beforeSend?.(msg);
    await publishInbox(await o.person(), msg, 'person');
    return msg.id;
  };
  return {
    publish,
    async *follow(spec) {
      const rootId = spec.rootId ?? (await rootOf(spec.agentId));
      yield* followBus(o.reader, rootId, spec);
    },
    async send(command) {
      // mail to an agent nobody knows would wait in an inbox no host reads
      await rootOf(command.agentId);
      return publish(await messageOf(command));
    },
  };
}

/**
 * One agent's log (from a log seq, its own consumer) or its tree's logs (from a stream sequence,
 * the tree's consumer, filtered to the agent unless the tree is asked for), live until the signal
 * aborts. A consumer the server lost ends without being asked to: it is made again after the last
 * commit seen, whose events already handed are skipped by their seq.
 */
async function* followBus(reader: BusTransportOptions['reader'], rootId: string, spec: FollowSpec): AsyncGenerator<TransportEvent> {
  if (spec.tree && spec.afterSeq !== undefined) throw new ConfigError('client.tree_after_seq', 'a tree has no one log seq to follow after', { hint: 'follow a tree after a stream sequence' });
  const { signal } = spec;
  const seen = new Map<string, number>();
  let afterStreamSeq = spec.afterStreamSeq ?? 0;
  const byLog = !spec.tree && spec.afterStreamSeq === undefined;
  if (byLog) seen.set(spec.agentId, spec.afterSeq ?? 0);
  while (!signal.aborted) {
    const source: AsyncIterable<StoredEvent | TreeEvent> = byLog
      ? reader.follow(rootId, spec.agentId, { afterSeq: seen.get(spec.agentId)!, signal })
      : reader.followTree(rootId, { afterStreamSeq, signal });
    for await (const e of source) {
      const actorId = 'actorId' in e ? e.actorId : spec.agentId;
      if (!spec.tree && actorId !== spec.agentId) continue;
      if (e.event.seq <= (seen.get(actorId) ?? 0)) continue;
      if (spec.afterSeq !== undefined && e.event.seq <= spec.afterSeq) continue;
      seen.set(actorId, e.event.seq);
      // a commit holds several events: going on after the one before it cannot skip its rest
      afterStreamSeq = e.streamSeq - 1;
      yield { actorId, streamSeq: e.streamSeq, event: e.event };
    }
  }
}
