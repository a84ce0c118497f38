import type { Logger } from 'pino';
import type { ActorDirectory } from '../bus/directory.js';
import type { MachineDefinition, RpcParams, RpcResult } from '../protocol/gateway.js';
import type { InspectionReport } from '../protocol/inspection.js';
import type { LogReader } from '../store/log-port.js';
import type { LivenessPorts } from './actor-liveness.js';
import type { JobOutputSource } from './job-output.js';
import type { JobRpcParams, JobRpcResult } from '../protocol/gateway-jobs.js';
import type { RedactText } from './redact-json.js';

/**
 * What a person's commands do, given to the gateway by whoever opened the runtime (the `serve`
 * command): each puts one inbox message on the person channel, or (`kill`) gives a fault order.
 * The gateway never calls into an actor.
 */
export interface GatewayCommands {
  submit(p: RpcParams<'turn.submit'>): Promise<RpcResult<'turn.submit'>>;
  send(p: RpcParams<'inbox.send'>): Promise<RpcResult<'inbox.send'>>;
  respondApproval(p: RpcParams<'approval.respond'>): Promise<RpcResult<'approval.respond'>>;
  answer(p: RpcParams<'ask.answer'>): Promise<RpcResult<'ask.answer'>>;
  interrupt(p: RpcParams<'turn.interrupt'>): Promise<RpcResult<'turn.interrupt'>>;
  compact(p: RpcParams<'turn.compact'>): Promise<RpcResult<'turn.compact'>>;
  controlGoal(p: RpcParams<'goal.control'>): Promise<RpcResult<'goal.control'>>;
  kill(p: RpcParams<'fault.kill'>): Promise<RpcResult<'fault.kill'>>;
  /** A person's stop of a job, checked already (it exists and has not ended): an `interrupt` to the job's inbox. */
  cancelJob(p: JobRpcParams<'job.cancel'>): Promise<JobRpcResult<'job.cancel'>>;
}

/**
 * The hosts' live inspection reports (core NATS, src/bus/inspection.ts): `follow` asks the hosts
 * to report one actor while `signal` is not aborted, and hands each report it hears to `onReport`.
 */
export interface InspectionSource {
  follow(target: { rootId: string; actorId: string }, signal: AbortSignal, onReport: (r: InspectionReport) => void): void;
}

/** Options of `startGateway`. */
export interface GatewayOptions {
  /** The address to bind (default 127.0.0.1). */
  host: string;
  /** The port (0: any free one). */
  port: number;
  /** The bearer token every /v1 request and WebSocket upgrade needs; null: none (`--no-auth`, loopback only). */
  token: string | null;
  /** Origins besides its own that may use it from a browser (CORS and WebSocket); default none. */
  corsOrigins: readonly string[];
  /** `fault.kill` is refused unless this is set (`--allow-faults`). */
  allowFaults: boolean;
  reader: LogReader;
  directory: Pick<ActorDirectory, 'get' | 'list'>;
  redact: RedactText;
  /** The leases and host records, so the reads show `killed` as soon as an actor's holder dies; absent: the log's word alone. */
  liveness?: LivenessPorts;
  machines: MachineDefinition[];
  commands: GatewayCommands;
  /** Where `machines.subscribe` hears the hosts' live transitions; absent: it sends only the log's state. */
  inspection?: InspectionSource;
  /** Where `GET /v1/jobs/:id/output` hears a running job's output (its live subject); absent: that route says it relays none. */
  jobOutput?: JobOutputSource;
  logger: Logger;
  /** A directory holding the built page (index.html and its assets), served at `/`. */
  pageDir?: string;
  /** Between heartbeat comments on an idle SSE stream (default 15 s). */
  heartbeatMs?: number;
}
