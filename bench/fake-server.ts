/**
 * The fake OpenAI-compatible server of the model benchmark, run as its own process
 * (`node --import tsx bench/fake-server.ts <steps> [firstByteMs]`) so that its work does not share
 * the event loop being measured. It answers every streamed Chat Completions request from the
 * request alone: while the conversation holds fewer than `steps` tool results, one call to `echo`;
 * then a final answer. With `firstByteMs` > 0 every answer's first byte waits that long, as a
 * hosted model's time to first token does. Prints `{"baseURL": ...}` on one line once listening; exits when its stdin closes
 * (the parent went away) or on SIGTERM/SIGINT.
 */
import { startFakeOpenAI, type FakeOpenAI, type FakeTurn, type RecordedRequest } from '../test/helpers/fake-openai.js';

/** The answer to one request of the echo loop: decided by counting the tool results it carries. */
function echoLoopTurn(req: RecordedRequest, steps: number, firstByteMs: number): FakeTurn {
  const messages = ((req.body as { messages?: Array<{ role?: string }> } | undefined)?.messages ?? []);
  const done = messages.reduce((n, m) => n + (m.role === 'tool' ? 1 : 0), 0);
  const turn: FakeTurn =
    done < steps ? { toolCalls: [{ name: 'echo', arguments: JSON.stringify({ text: `echo ${done + 1}` }) }] } : { content: 'All echoes returned.' };
  if (firstByteMs > 0) turn.fault = { kind: 'slow-first-byte', delayMs: firstByteMs };
  return turn;
}

async function main(): Promise<void> {
  const steps = Number(process.argv[2] ?? '20');
  if (!Number.isInteger(steps) || steps < 0) throw new Error(`fake-server: steps must be an integer ≥ 0, got "${process.argv[2]}"`);
  const firstByteMs = Number(process.argv[3] ?? '0');
  if (!Number.isInteger(firstByteMs) || firstByteMs < 0) {
    throw new Error(`fake-server: firstByteMs must be an integer ≥ 0, got "${process.argv[3]}"`);
  }
  let fake: FakeOpenAI | undefined;
  fake = await startFakeOpenAI({
    handler(req) {
      // the helper records every request for tests; the bench keeps none
      if (fake) fake.requests.length = 0;
      return echoLoopTurn(req, steps, firstByteMs);
    },
  });
  let closing = false;
  const stop = (): void => {
    if (closing) return;
    closing = true;
    void fake!.close().finally(() => process.exit(0));
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  process.stdin.on('end', stop);
  process.stdin.on('close', stop);
  process.stdin.resume();
  process.stdout.write(`${JSON.stringify({ baseURL: fake.baseURL })}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`fake-server failed: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
