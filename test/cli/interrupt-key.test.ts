// Ctrl-C during a turn: one press sends an interrupt to the inbox after a short window; a second
// press within it leaves and sends nothing (the turn stays open); a second press later leaves too.
import { describe, expect, test } from 'vitest';
import { InterruptKey } from '../../src/cli/interrupt-key.js';
import type { InboxMessage } from '../../src/protocol/inbox.js';

function key() {
  const sent: InboxMessage[] = [];
  const said: string[] = [];
  const k = new InterruptKey({
    agentId: 'agt_1', resumeLine: 'actorloop resume agt_1 --data-dir /tmp/d', windowMs: 30, send: async (m) => void sent.push(m), say: (l) => said.push(l),
  });
  return { k, sent, said };
}
const settle = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('InterruptKey', () => {
  test('one press: says so, then sends one person-only interrupt to the agent', async () => {
    const { k, sent, said } = key();
    k.press();
    expect(said[0]).toContain('`actorloop resume agt_1 --data-dir /tmp/d` carries it on');
    expect(sent).toEqual([]);
    await settle(60);
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatchObject({ to: 'agt_1', kind: 'interrupt', from: 'client:cli', request: null });
  });

  test('a second press within the window leaves and never sends', async () => {
    const { k, sent } = key();
    k.press();
    k.press();
    await expect(k.left).resolves.toEqual({ kind: 'leave', sent: false });
    await settle(60);
    expect(sent).toEqual([]);
  });

  test('a second press after the interrupt went out leaves, saying it was sent', async () => {
    const { k, sent } = key();
    k.press();
    await settle(60);
    k.press();
    await expect(k.left).resolves.toEqual({ kind: 'leave', sent: true });
    expect(sent).toHaveLength(1);
  });
});
