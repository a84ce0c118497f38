// Work submitted the way a client does it, with no command in between: a directory entry and a
// task in the agent's inbox, for hosts to pick up. The e2e files that run `actorloop host`
// processes start their agents this way, so which host claims one is the hosts' business.
import { pino } from 'pino';
import { openBus } from '../../src/bus/connection.js';
import { publishInbox } from '../../src/bus/inbox.js';
import { newId } from '../../src/protocol/ids.js';

/** What `submitTask` sends: the server, a data dir to log in from, the workspace, the model and the task. */
export interface SubmitOptions {
  natsUrl: string;
  dataDir: string;
  ws: string;
  /** `scripted:<file>` or another model spec. */
  model: string;
  task?: string;
  title?: string;
  /** The turn's run mode (default auto-edit). */
  approvalMode?: 'ask' | 'auto-edit' | 'full-auto' | 'deny-all';
}

/** Puts a new agent in the directory and its first task (auto-edit) in its inbox; returns its ID. */
export async function submitTask(o: SubmitOptions): Promise<string> {
  const bus = await openBus({ natsUrl: o.natsUrl, dataDir: o.dataDir, logger: pino({ level: 'silent' }) });
  const agentId = newId('agent');
  const now = new Date().toISOString();
  try {
    await bus.directory.put({
      actorId: agentId, kind: 'agent', parentId: null, rootId: agentId, status: 'running', title: o.title ?? 'fix it', workspace: o.ws,
      createdAt: now, updatedAt: now, labels: {},
    });
    await publishInbox(bus.js, {
      id: newId('message'), from: 'client:test', to: agentId, kind: 'user_message', target: 'next_turn', wakeup: true,
      content: o.task ?? 'fix the failing test', sentAt: now,
      request: {
        model: o.model, baseUrl: null, workspace: o.ws, tools: null, instructions: null, approvalMode: o.approvalMode ?? 'auto-edit',
        maxSteps: null, maxToolCalls: null, deadlineSeconds: null, maxAttempts: null,
      },
    }, 'person');
  } finally {
    await bus.close();
  }
  return agentId;
}
