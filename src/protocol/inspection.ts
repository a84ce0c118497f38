import { z } from 'zod';

// The live inspection feed (design §11): hosts report what XState's inspection says their agents'
// machines did, on core NATS (never persisted), and only for an actor someone watches. A watcher
// (the gateway, while a `machines.subscribe` is open) asks for it again every WATCH_EVERY_MS; a
// host reports an actor while its last watch is younger than WATCH_FRESH_MS, so a host nobody
// watches publishes nothing, and a watcher that went away costs at most that long.

/** How often a watcher asks again for an actor's inspection. */
export const WATCH_EVERY_MS = 2_000;
/** How long a host goes on reporting an actor after the last watch of it. */
export const WATCH_FRESH_MS = 10_000;

/** An XState state value: a state name, or a compound state's name → its child's value. */
export type StateValueJson = string | { [state: string]: StateValueJson };
/** An XState state value, as it travels. */
export const StateValueSchema: z.ZodType<StateValueJson> = z.lazy(() => z.union([z.string(), z.record(z.string(), StateValueSchema)]));

/** State values of an agent's open machines (`AgentSnapshot.machines`); null: that machine is not open. */
export const MachineStatesSchema = z.object({
  agent: StateValueSchema,
  turn: StateValueSchema.nullable(),
  step: StateValueSchema.nullable(),
  attempt: StateValueSchema.nullable(),
  calls: z.record(z.string(), StateValueSchema),
});
/** State values of an agent's open machines. */
export type MachineStatesJson = z.infer<typeof MachineStatesSchema>;

/** A watch request (`watch.<actorId>`): report this actor's inspection for a while. */
export const WatchRequestSchema = z.object({
  v: z.literal(1),
  /** A new watcher: the host that runs the actor reports its machines' states at once, before any transition. */
  hello: z.boolean().optional(),
});
/** A watch request. */
export type WatchRequest = z.infer<typeof WatchRequestSchema>;

/** One inspection report (`inspect.<rootId>.<actorId>`): the machines' states after an event, as the host's actor has them. */
export const InspectionReportSchema = z.object({
  v: z.literal(1),
  actorId: z.string(),
  rootId: z.string(),
  /** The event the agent's XState actor took (a log event's type, or a runtime signal); null: the states when a watch began. */
  event: z.string().nullable(),
  machines: MachineStatesSchema,
  /** The host's clock, ms since the epoch. */
  at: z.number(),
  /** The host's name (its lease holder name). */
  host: z.string(),
});
/** One inspection report. */
export type InspectionReport = z.infer<typeof InspectionReportSchema>;
