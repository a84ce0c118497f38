import type { TurnOutcome } from '../protocol/events.js';

/** Exit codes of the `actorloop` command; a contract with scripts. */
export const EXIT = {
  completed: 0,
  failed: 1,
  usage: 2,
  notFound: 3,
  /** The turn stopped short: a budget, its deadline, the model stopped. */
  stopped: 4,
  /** The turn waits for a person: an approval, the answer to a question, or a plan to accept. */
  waiting: 5,
  interrupted: 130,
} as const;

/** The exit code a turn outcome maps to. */
export function exitCodeFor(outcome: TurnOutcome): number {
  switch (outcome) {
    case 'completed':
      return EXIT.completed;
    case 'failed':
      return EXIT.failed;
    case 'stopped':
      return EXIT.stopped;
    case 'cancelled':
      return EXIT.interrupted;
  }
}
