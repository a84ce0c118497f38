import { z } from 'zod';
import { FaultOrderPointSchema } from './fault-points.js';

// A fault order (design §7, §11): a client with the right to give one (the gateway started with
// `--allow-faults`) asks the host holding an actor's lease, by a core NATS request on
// `fault.<host>`, to SIGKILL itself when that actor reaches a point, or now. The host arms it
// only when it was started with `--allow-faults` itself; otherwise it refuses, saying why.

/** A fault order, the request's body. */
export const FaultOrderSchema = z.object({
  /** The actor whose incarnation must reach the point (the fault fires for no other). */
  actorId: z.string().min(1),
  point: FaultOrderPointSchema,
  /** Fires the n-th time the actor reaches the point from when it is armed (default 1); not with `now`. */
  nth: z.number().int().positive().optional(),
  /** The order's ID, in the host's log lines. */
  orderId: z.string().min(1),
});
/** A fault order. */
export type FaultOrder = z.infer<typeof FaultOrderSchema>;

/** The host's answer: armed (for `now`: the kill follows at once), or refused and why. */
export const FaultOrderReplySchema = z.discriminatedUnion('armed', [
  z.object({ armed: z.literal(true), hostId: z.string(), pid: z.number().int(), point: FaultOrderPointSchema }),
  z.object({
    armed: z.literal(false),
    hostId: z.string(),
    pid: z.number().int(),
    /** A stable code: `host.faults_disabled`, `host.not_holding`, `host.fault_order_invalid`. */
    code: z.string(),
    message: z.string(),
  }),
]);
/** A host's answer to a fault order. */
export type FaultOrderReply = z.infer<typeof FaultOrderReplySchema>;
