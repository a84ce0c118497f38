import { describe, expect, it } from 'vitest';
import { machineDefinition, machineDefinitions, type StateDefinition } from '../../src/client/machine-definitions.js';
import { stepMachine } from '../../src/machines/step.machine.js';

/** Every dotted path of a definition's states. */
function paths(states: Record<string, StateDefinition>, prefix = ''): string[] {
  return Object.entries(states).flatMap(([k, s]) => [prefix + k, ...paths(s.states ?? {}, `${prefix}${k}.`)]);
}

describe('machineDefinitions', () => {
  it('serves the five machines of an agent, as JSON', () => {
    const { machines } = machineDefinitions();
    expect(machines.map((m) => m.id)).toEqual(['agent', 'turn', 'step', 'attempt', 'tool-call']);
    expect(JSON.parse(JSON.stringify(machines))).toEqual(machines);
  });

  it('every transition targets a state of its machine, and every initial is one of its states', () => {
    for (const m of machineDefinitions().machines) {
      const all = new Set(paths(m.states));
      expect(all.has(m.initial), `${m.id}: initial ${m.initial}`).toBe(true);
      const walk = (states: Record<string, StateDefinition>, on: Record<string, string[]>): void => {
        for (const targets of Object.values(on)) for (const t of targets) expect(all.has(t), `${m.id}: target ${t}`).toBe(true);
        for (const s of Object.values(states)) {
          walk(s.states ?? {}, s.on);
          if (s.initial) expect(s.states?.[s.initial], `${m.id}: initial child ${s.initial}`).toBeDefined();
        }
      };
      walk(m.states, m.on);
    }
  });

  it('reads nesting, guards, finals and eventless transitions as the step machine has them', () => {
    const step = machineDefinition(stepMachine);
    expect(step.initial).toBe('assembling');
    expect(step.states.generating).toMatchObject({ type: 'compound', initial: 'launching' });
    expect(step.states.generating!.states!.launching!.on['attempt/start']).toEqual(['generating.attempting']);
    // a guarded event lists each target it may take
    expect(step.states.accepting!.on['assistant/accepted']!.sort()).toEqual(['ending', 'tools']);
    expect(step.states.tools!.on.always).toEqual(['ending']);
    expect(step.states.done!.type).toBe('final');
    expect(step.on['step/end']).toEqual(['done']);
  });

  it('lights awaiting_approval from where a policy may ask', () => {
    const call = machineDefinitions().machines.find((m) => m.id === 'tool-call')!;
    expect(call.states.deciding!.on['policy/decided']).toContain('awaiting_approval');
    expect(call.states.awaiting_approval!.states!.requesting!.on['approval/requested']).toEqual(['awaiting_approval.waiting']);
  });
});
