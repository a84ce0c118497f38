import { randomUUID } from 'node:crypto';
import type { WebSocket } from 'ws';
import type { z } from 'zod';
import { ActorloopError, ConfigError, NotFoundError } from '../protocol/errors.js';
import { MAX_SUBSCRIPTIONS_PER_SOCKET, RPC_ERRORS, RpcParamsSchemas, RpcRequestSchema, type RpcMethod } from '../protocol/gateway.js';
import { entryOf, inspectActor, listActors, type ActorReadPorts } from './actor-reads.js';
import { eventCommits } from './event-stream.js';
import type { GatewayOptions } from './gateway-ports.js';
import { JobRpcParamsSchemas, type JobRpcMethod } from '../protocol/gateway-jobs.js';
import { cancellableJob, inspectJob, listJobs } from './job-reads.js';
import { followMachines } from './machine-feed.js';
import { listPending, listRuns } from './run-reads.js';
import { redactJson } from './redact-json.js';

// JSON-RPC 2.0 over one WebSocket (`/v1/rpc`). Requests are answered as they finish (each has its
// id); a subscription's notifications go out in commit order; closing the socket ends every
// subscription it opened (each one's reader consumer is stopped by its abort signal).

type Id = string | number | null;

/** A JSON-RPC error to answer with. */
export class RpcError extends Error {
  constructor(readonly code: number, message: string, readonly data?: unknown) {
    super(message);
    this.name = 'RpcError';
  }
}

/** The JSON of an error for a thrown value: an actorloop error is an application error (code ≥ 1) naming its own code. */
function errorObject(err: unknown, redact: (text: string) => string): { code: number; message: string; data?: unknown } {
  if (err instanceof RpcError) return { code: err.code, message: redact(err.message), ...(err.data !== undefined ? { data: redactJson(err.data, redact) } : {}) };
  if (err instanceof ActorloopError) {
    // a message may quote what it was given (a task, an answer): redacted like everything served
    return { code: err instanceof NotFoundError ? RPC_ERRORS.notFound : RPC_ERRORS.application, message: redact(err.userMessage()), data: { code: err.code, retryable: err.retryable } };
  }
  return { code: RPC_ERRORS.internal, message: 'internal error' };
}

/** Serves JSON-RPC on one WebSocket until it closes; `reads` are the gateway's, shared by every connection. */
export function serveRpc(ws: WebSocket, o: GatewayOptions, reads: ActorReadPorts): void {
  const subscriptions = new Map<string, AbortController>();
  // subscriptions asked for and not open yet (their actor is being looked up) count against the cap too
  let opening = 0;
  const send = (msg: unknown): void => {
    if (ws.readyState === ws.OPEN) ws.send(JSON.stringify(msg));
  };
  const notify = (method: string, params: unknown): void => send({ jsonrpc: '2.0', method, params });

  /** Runs a subscription's loop until it is aborted; a failure is told to the client as `subscription.error`. */
  const subscribe = (run: (signal: AbortSignal, id: string) => Promise<void>): { subscription: string } => {
    const id = randomUUID();
    const ac = new AbortController();
    subscriptions.set(id, ac);
    run(ac.signal, id).catch((err: unknown) => {
      if (ac.signal.aborted) return;
      o.logger.warn({ err, subscription: id }, 'gateway subscription failed');
      notify('subscription.error', { subscription: id, error: errorObject(err, o.redact) });
    }).finally(() => subscriptions.delete(id));
    return { subscription: id };
  };
  /** Runs `open` (a lookup, then `subscribe`) in a slot of the connection's cap; refused when every slot is taken. */
  const withinCap = async (open: () => Promise<{ subscription: string }>): Promise<{ subscription: string }> => {
    if (subscriptions.size + opening >= MAX_SUBSCRIPTIONS_PER_SOCKET) {
      throw new RpcError(RPC_ERRORS.tooManySubscriptions,
        `this connection holds ${MAX_SUBSCRIPTIONS_PER_SOCKET} subscriptions, the most one may: end one (events.unsubscribe, machines.unsubscribe) before opening another`,
        { code: 'gateway.too_many_subscriptions', limit: MAX_SUBSCRIPTIONS_PER_SOCKET });
    }
    opening++;
    try {
      return await open();
    } finally {
      opening--;
    }
  };
  const unsubscribe = (id: string): { ok: true } => {
    const ac = subscriptions.get(id);
    if (!ac) throw new RpcError(RPC_ERRORS.invalidParams, `no subscription ${id} on this connection`);
    ac.abort();
    subscriptions.delete(id);
    return { ok: true };
  };

  const handlers: { [M in RpcMethod]: (p: z.infer<(typeof RpcParamsSchemas)[M]>) => Promise<unknown> } = {
    'turn.submit': (p) => o.commands.submit(p),
    'inbox.send': (p) => o.commands.send(p),
    'approval.respond': (p) => o.commands.respondApproval(p),
    'ask.answer': (p) => o.commands.answer(p),
    'turn.interrupt': (p) => o.commands.interrupt(p),
    'turn.compact': (p) => o.commands.compact(p),
    'goal.control': (p) => o.commands.controlGoal(p),
    'actors.list': async (p) => ({ actors: await listActors(reads, p?.rootId) }),
    'actor.inspect': (p) => inspectActor(reads, p.agentId),
    'runs.list': (p) => listRuns(reads, p ?? {}),
    'pending.list': (p) => listPending(reads, p?.rootId),
    'events.subscribe': (p) => withinCap(async () => {
      const entry = await entryOf(o.directory, p.agentId);
      return subscribe(async (signal, subscription) => {
        const commits = eventCommits({
          reader: o.reader, rootId: entry.rootId, actorId: p.agentId, tree: p.tree === true, afterStreamSeq: p.afterStreamSeq ?? 0, redact: o.redact, signal,
        });
        for await (const commit of commits) for (const e of commit) notify('events.event', { subscription, ...e });
      });
    }),
    'events.unsubscribe': async (p) => unsubscribe(p.subscription),
    'machines.subscribe': (p) => withinCap(async () => {
      const entries = await Promise.all(p.agentIds.map((id) => entryOf(o.directory, id)));
      return subscribe(async (signal, subscription) => {
        await Promise.all(entries.map((entry) => followMachines({ reader: o.reader, inspection: o.inspection, entry, subscription, signal, notify })));
      });
    }),
    'machines.unsubscribe': async (p) => unsubscribe(p.subscription),
    'fault.kill': (p) => {
      if (!o.allowFaults) {
        throw new RpcError(RPC_ERRORS.faultsDisabled, 'fault orders are off: start the gateway with `actorloop serve --allow-faults` to kill hosts from a client', {
          code: 'gateway.faults_disabled',
        });
      }
      return o.commands.kill(p);
    },
  };

  const jobHandlers: { [M in JobRpcMethod]: (p: z.infer<(typeof JobRpcParamsSchemas)[M]>) => Promise<unknown> } = {
    'jobs.list': (p) => listJobs(reads, p?.rootId),
    'job.inspect': (p) => inspectJob(reads, p.jobId),
    'job.cancel': async (p) => {
      // refused here, before anything is sent: an unknown job (not found), or one that ended
      await cancellableJob(reads, p.jobId);
      return o.commands.cancelJob(p);
    },
  };
  /** The schema and handler of a method, or null when the gateway has none of that name. */
  const methodOf = (name: string): { schema: z.ZodType; run: (p: unknown) => Promise<unknown> } | null => {
    if (Object.hasOwn(RpcParamsSchemas, name)) return { schema: RpcParamsSchemas[name as RpcMethod], run: handlers[name as RpcMethod] as (p: unknown) => Promise<unknown> };
    if (Object.hasOwn(JobRpcParamsSchemas, name)) return { schema: JobRpcParamsSchemas[name as JobRpcMethod], run: jobHandlers[name as JobRpcMethod] as (p: unknown) => Promise<unknown> };
    return null;
  };

  const handle = async (raw: string): Promise<void> => {
    let json: unknown;
    try {
      json = JSON.parse(raw);
    } catch {
      return send({ jsonrpc: '2.0', id: null, error: { code: RPC_ERRORS.parse, message: 'parse error: the message is not JSON' } });
    }
    const req = RpcRequestSchema.safeParse(json);
    if (!req.success) {
      const id = (json as { id?: unknown } | null)?.id;
      return send({
        jsonrpc: '2.0', id: typeof id === 'string' || typeof id === 'number' ? id : null,
        error: { code: RPC_ERRORS.invalidRequest, message: 'invalid request: not a JSON-RPC 2.0 request (batches are not taken)', data: req.error.issues },
      });
    }
    const { method, params } = req.data;
    const id: Id | undefined = req.data.id;
    const reply = (body: { result: unknown } | { error: unknown }): void => {
      // a notification (no id) is never answered, not even with an error (JSON-RPC 2.0 §4.1)
      if (id !== undefined) send({ jsonrpc: '2.0', id, ...body });
    };
    const found = methodOf(method);
    if (!found) {
      return reply({ error: { code: RPC_ERRORS.methodNotFound, message: `method not found: ${method}`, data: { methods: [...Object.keys(RpcParamsSchemas), ...Object.keys(JobRpcParamsSchemas)] } } });
    }
    const m = method;
    const parsed = found.schema.safeParse(params);
    if (!parsed.success) {
      // the first issue in the message: a client that shows the message alone still says what was wrong
      const first = parsed.error.issues[0];
      const why = first ? `: ${first.path.length > 0 ? `${first.path.join('.')}: ` : ''}${first.message}` : '';
      return reply({ error: { code: RPC_ERRORS.invalidParams, message: o.redact(`invalid params for ${m}${why}`), data: redactJson(parsed.error.issues, o.redact) } });
    }
    try {
      const result = await found.run(parsed.data);
      reply({ result });
    } catch (err) {
      if (!(err instanceof ActorloopError) && !(err instanceof RpcError)) o.logger.error({ err, method: m }, 'gateway method failed');
      reply({ error: errorObject(err, o.redact) });
    }
  };

  ws.on('message', (data, isBinary) => {
    if (isBinary) {
      send({ jsonrpc: '2.0', id: null, error: { code: RPC_ERRORS.parse, message: 'parse error: binary frames are not JSON text' } });
      return;
    }
    void handle(data.toString());
  });
  ws.on('close', () => {
    for (const ac of subscriptions.values()) ac.abort();
    subscriptions.clear();
  });
  ws.on('error', (err) => o.logger.debug({ err }, 'gateway websocket error'));
}

/** The error a command gives when no host runs to take the work. */
export function noHostError(): ConfigError {
  return new ConfigError('gateway.no_host', 'no `actorloop host` is running to take the work', {
    hint: 'start one in another terminal with `actorloop host` (same --data-dir and --nats as this gateway)',
  });
}
