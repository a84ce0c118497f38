import { DeliverPolicy, type JetStreamClient } from '@nats-io/jetstream';
import { Kvm, type KV } from '@nats-io/kv';
import { z } from 'zod';
import { pino, type Logger } from 'pino';
import { BusError } from '../protocol/errors.js';
import { BUCKETS } from './subjects.js';

/** One actor in the `actors` directory (design §6). */
export const DirectoryEntrySchema = z.object({
  actorId: z.string().regex(/^[A-Za-z0-9_-]+$/, 'actor IDs must be valid KV keys'),
  kind: z.enum(['agent', 'subagent', 'job', 'workflow']),
  parentId: z.string().nullable(),
  rootId: z.string(),
  status: z.enum(['idle', 'running', 'waiting', 'stopped', 'completed', 'failed', 'cancelled']),
  title: z.string(),
  workspace: z.string(),
  createdAt: z.string(),
  updatedAt: z.string(),
  labels: z.record(z.string(), z.string()),
});
/** One actor in the directory. */
export type DirectoryEntry = z.infer<typeof DirectoryEntrySchema>;
/** Lifecycle status shown in the directory. */
export type ActorStatus = DirectoryEntry['status'];

/** The status a turn's outcome leaves an actor in. */
export const STATUS_AFTER_TURN: Record<'completed' | 'failed' | 'stopped' | 'cancelled', ActorStatus> = {
  completed: 'completed',
  failed: 'failed',
  stopped: 'stopped',
  cancelled: 'cancelled',
};

/**
 * The status a committed event moves an actor to, or null when it moves none: a turn starting
 * (`running`), asking a person or parked for one (`waiting`), ending (its outcome's status).
 * A cache: `runs` shows the status its log gives (`src/client/status.ts`).
 */
export function statusAfter(e: { type: string; data?: unknown }): ActorStatus | null {
  if (e.type === 'turn/start' || e.type === 'approval/granted' || e.type === 'approval/denied' || e.type === 'ask/answered') return 'running';
  if (e.type === 'approval/requested' || e.type === 'ask/asked' || e.type === 'actor/parked') return 'waiting';
  // a turn whose goal goes on owes the next turn: a host must take the agent on until it starts
  if (e.type === 'turn/end' && (e.data as { goalContinues?: boolean }).goalContinues === true) return 'running';
  // a child owes its parent the notice of the turn: a host must take it on until it is sent
  if (e.type === 'turn/end' && (e.data as { noticeOwed?: boolean }).noticeOwed === true) return 'running';
  if (e.type === 'subagent/notified') return STATUS_AFTER_TURN[(e.data as { outcome: keyof typeof STATUS_AFTER_TURN }).outcome] ?? null;
  if (e.type === 'turn/end') return STATUS_AFTER_TURN[(e.data as { outcome: keyof typeof STATUS_AFTER_TURN }).outcome] ?? null;
  return null;
}

/** Kinds of mail an idle agent takes as a new turn. */
const TURN_MAIL = new Set(['user_message', 'follow_up', 'subagent_task', 'subagent_completed', 'subagent_report', 'job_notice']);

/** Whether mail of this kind starts a turn when its agent is idle. */
export function mailStartsTurn(kind: string): boolean {
  return TURN_MAIL.has(kind);
}

/** Statuses of an actor that a host must take on when its holder dies. */
export const NEEDS_HOST: ReadonlySet<ActorStatus> = new Set<ActorStatus>(['running', 'waiting']);

/** The directory of actors on KV `actors`: who exists, their kind, parent, root and status. */
export interface ActorDirectory {
  /** Writes an entry (validated); returns the KV revision. */
  put(entry: DirectoryEntry): Promise<number>;
  /** The entry of one actor, or undefined. */
  get(actorId: string): Promise<DirectoryEntry | undefined>;
  /** Every entry, in key order of the bucket's last values. */
  list(): Promise<DirectoryEntry[]>;
}

/** Opens the `actors` bucket (it must exist: `ensureStreams` creates it) as a directory. */
export async function openActorDirectory(js: JetStreamClient, logger?: Logger): Promise<ActorDirectory> {
  return createActorDirectory(await new Kvm(js).open(BUCKETS.actors), js, logger);
}

/** A directory over an open KV bucket. */
export function createActorDirectory(
  kv: KV, js: JetStreamClient, logger: Logger = pino({ level: 'silent' }),
): ActorDirectory {
  const stream = `KV_${BUCKETS.actors}`;
  const prefix = `$KV.${BUCKETS.actors}.`;

  const decode = (key: string, raw: Uint8Array): DirectoryEntry | undefined => {
    try {
      return DirectoryEntrySchema.parse(JSON.parse(new TextDecoder().decode(raw)));
    } catch (err) {
      // a bad entry must not hide the others: skip it and say so
      logger.warn({ key, err }, 'invalid actor directory entry skipped');
      return undefined;
    }
  };

  return {
    async put(entry) {
      const parsed = DirectoryEntrySchema.safeParse(entry);
      if (!parsed.success) {
        throw new BusError('bus.invalid_entry', `invalid directory entry: ${parsed.error.issues[0]?.message}`);
      }
      return kv.put(entry.actorId, JSON.stringify(parsed.data));
    },
    async get(actorId) {
      const e = await kv.get(actorId);
      if (!e || e.operation !== 'PUT') return undefined;
      return decode(actorId, e.value);
    },
    async list() {
      // One ordered consumer over the last value per key: O(1) round trips instead of a
      // get per key. The listing is what the consumer held when it was made (`num_pending` values,
      // one per key) and ends once that many came: waiting for pending to reach 0 hung when a key
      // was written under the listing (a host writes statuses as it lists), since the ordered
      // consumer then waits out a missed heartbeat before it delivers again. A later value of a
      // key delivered in the same pulls replaces the earlier one.
      const consumer = await js.consumers.get(stream, {
        filter_subjects: `${prefix}>`,
        deliver_policy: DeliverPolicy.LastPerSubject,
      });
      const byKey = new Map<string, DirectoryEntry | null>();
      try {
        const info = await consumer.info(true);
        let left = info.num_pending;
        while (left > 0) {
          let got = 0;
          // bounded pulls: a value purged since the count leaves one short, which ends the listing
          const batch = await consumer.fetch({ max_messages: Math.min(left, 256), expires: 1_000 });
          for await (const m of batch) {
            got += 1;
            left -= 1;
            const key = m.subject.slice(prefix.length);
            const op = m.headers?.get('KV-Operation');
            byKey.set(key, op === 'DEL' || op === 'PURGE' ? null : (decode(key, m.data) ?? null));
            if (m.info.pending === 0) {
              left = 0;
              break;
            }
          }
          if (got === 0) break;
        }
        return [...byKey.values()].filter((e): e is DirectoryEntry => e !== null);
      } finally {
        await consumer.delete().catch(() => {});
      }
    },
  };
}
