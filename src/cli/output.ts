/** Where command output goes; stdout carries results and `--json` NDJSON, stderr the rest. */
export interface Out {
  stdout: NodeJS.WritableStream & { isTTY?: boolean };
  stderr: NodeJS.WritableStream & { isTTY?: boolean };
  /** Where a person answers prompts (approvals); absent or not a TTY: nobody to ask. */
  stdin?: NodeJS.ReadableStream & { isTTY?: boolean };
  /**
   * `--quiet`: stdout gets only a turn's answer; what a person must know (errors, what a turn
   * waits for) still goes to stderr.
   */
  quiet?: boolean;
}

// A run's output has two ideas of its own: one event as text (`events`), and a run shown as it
// goes (RunPrinter). Their names stay importable from here.
export { describeEvent, eventLine, EventDescriber } from '../client/event-text.js';
