import type { AnyStateMachine, StateValue } from 'xstate';

/** An effect a machine asked for: the name of its action slot and the params it computed. */
export interface Effect {
  name: string;
  params: any;
}

/** Where a transition's effects go, in order. */
export type EffectSink = (effect: Effect) => void;

/** A snapshot of a compiled machine: its active leaf state, context and status. */
export interface CompiledSnapshot {
  readonly node: StateNodeInfo;
  readonly context: any;
  readonly status: 'active' | 'done';
  readonly value: StateValue;
}

/**
 * What `getPersistedSnapshot` of XState writes for a machine with no children or history: a
 * compiled snapshot persists to the same shape, so either engine restores what the other saved.
 */
export interface PersistedMachineSnapshot {
  status: 'active' | 'done';
  value: StateValue;
  historyValue: Record<string, never>;
  context: unknown;
  children: Record<string, never>;
}

// The parts of XState's resolved definition read here (StateNode, TransitionDefinition).
interface XNode {
  id: string;
  key: string;
  path: string[];
  type: string;
  parent?: XNode;
  states: Record<string, XNode>;
  entry: unknown[];
  exit: unknown[];
  transitions: Map<string, XTransition[]>;
  always?: XTransition[];
  initial?: { target: XNode[]; actions: unknown[] };
  invoke: unknown[];
  after: unknown[];
  history: unknown;
}
interface XTransition {
  source: XNode;
  target?: XNode[];
  guard?: unknown;
  actions: unknown[];
  reenter: boolean;
}

type Guard = (args: { context: any; event: any }) => boolean;
type Step =
  | { kind: 'assign'; assignment: ((args: { context: any; event: any }) => object) | Record<string, unknown> }
  | { kind: 'effect'; name: string; params: unknown };

interface Transition {
  guard: Guard | null;
  steps: Step[];
  /** The states entered, top first (entry actions run in this order); empty when targetless. */
  enters: StateNodeInfo[];
  /** The active leaf after it; null for a targetless transition (actions only, no state left or entered). */
  leaf: StateNodeInfo | null;
}

/** One state node, with what a transition from or into it needs worked out once. */
export interface StateNodeInfo {
  readonly id: string;
  readonly value: StateValue;
  readonly final: boolean;
  readonly atomic: boolean;
  /** This node then its ancestors up to the root: where an event's transitions are looked for. */
  chain: StateNodeInfo[];
  on: Map<string, Transition[]>;
  always: Transition[];
  entry: Step[];
  hasAlways: boolean;
}

/**
 * An XState v5 machine definition compiled for the agent actor's hot path. The machines stay
 * XState machines (their definitions, unit tests and `transition()` are XState's); this runs the
 * same definition without XState's general algorithm, which works out exit and entry sets, state
 * values and eventless transitions from scratch on every event and cost more than all the rest of
 * a step. Only what the runtime's machines use is supported — compound and final states, guards,
 * `assign`, named effect slots with params, entry actions, eventless transitions, `reenter` and
 * `#id` targets — and a machine using anything else is refused when compiled, so the two engines
 * cannot silently disagree. `test/machines/compiled-machine.test.ts` drives both with the same
 * random event sequences and requires the same states, contexts and effects.
 */
export class CompiledMachine {
  readonly id: string;
  private readonly nodes = new Map<XNode, StateNodeInfo>();
  private readonly root: StateNodeInfo;
  private readonly initialEnters: StateNodeInfo[];
  private readonly initialLeaf: StateNodeInfo;
  private readonly contextFactory: unknown;

  constructor(readonly machine: AnyStateMachine) {
    this.id = machine.id;
    const xroot = machine.root as unknown as XNode;
    this.contextFactory = (machine.config as { context?: unknown }).context;
    this.visit(xroot, null);
    this.root = this.nodes.get(xroot)!;
    for (const [x, info] of this.nodes) this.link(x, info);
    for (const info of this.nodes.values()) info.hasAlways = info.chain.some((n) => n.always.length > 0);
    const descent = this.initialDescent(xroot);
    this.initialEnters = [this.root, ...descent];
    this.initialLeaf = descent.at(-1) ?? this.root;
  }

  private visit(x: XNode, parent: StateNodeInfo | null): void {
    if (x.type === 'parallel' || x.type === 'history' || x.history) throw this.unsupported(x, `${x.type} states`);
    if (x.invoke.length > 0 || x.after.length > 0) throw this.unsupported(x, 'invoked actors and delayed transitions');
    if (x.exit.length > 0) throw this.unsupported(x, 'exit actions');
    if (x.type === 'final' && x.parent?.parent) throw this.unsupported(x, 'final states below the top level');
    if (x.initial && x.initial.actions.length > 0) throw this.unsupported(x, 'initial transition actions');
    const info: StateNodeInfo = {
      id: x.id,
      value: valueOf(x.path),
      final: x.type === 'final',
      atomic: x.type === 'atomic' || x.type === 'final',
      chain: [],
      on: new Map(),
      always: [],
      entry: [],
      hasAlways: false,
    };
    info.chain = parent ? [info, ...parent.chain] : [info];
    this.nodes.set(x, info);
    for (const child of Object.values(x.states)) this.visit(child, info);
  }

  private link(x: XNode, info: StateNodeInfo): void {
    info.entry = x.entry.map((a) => this.step(x, a));
    for (const [type, list] of x.transitions) {
      if (type.includes('*')) throw this.unsupported(x, `wildcard event descriptors (${type})`);
      info.on.set(type, list.map((t) => this.compile(t)));
    }
    info.always = (x.always ?? []).map((t) => this.compile(t));
  }

  private compile(t: XTransition): Transition {
    const guard = this.guard(t);
    const steps = t.actions.map((a) => this.step(t.source, a));
    if (!t.target || t.target.length === 0) return { guard, steps, enters: [], leaf: null };
    if (t.target.length > 1) throw this.unsupported(t.source, 'transitions with several targets');
    const target = t.target[0]!;
    const domain = transitionDomain(t.source, target, t.reenter);
    if (!domain) throw this.unsupported(t.source, 'root re-entering transitions');
    // no exit actions (refused above), so leaving states is only dropping them from the active leaf
    const enters = [...pathFrom(domain, target).map((n) => this.nodes.get(n)!), ...this.initialDescent(target)];
    // a transition from an atomic state to itself (not re-entering) enters nothing and stays there
    return { guard, steps, enters, leaf: enters.at(-1) ?? this.nodes.get(target)! };
  }

  private guard(t: XTransition): Guard | null {
    if (t.guard === undefined) return null;
    if (typeof t.guard !== 'function') throw this.unsupported(t.source, 'named or parameterized guards');
    if ('check' in t.guard) throw this.unsupported(t.source, 'built-in guards (and, or, not, stateIn)');
    return t.guard as Guard;
  }

  private step(source: XNode, a: unknown): Step {
    if (typeof a === 'function') {
      const built = a as { type?: string; assignment?: unknown };
      if (built.type === 'xstate.assign') return { kind: 'assign', assignment: built.assignment as never };
      throw this.unsupported(source, `the action ${built.type ?? 'inline function'}`);
    }
    const named = typeof a === 'string' ? { type: a } : (a as { type: string; params?: unknown });
    const impl = (this.machine.implementations.actions as Record<string, unknown>)[named.type];
    if (typeof impl !== 'function' || 'resolve' in impl) throw this.unsupported(source, `the action ${named.type}`);
    return { kind: 'effect', name: named.type, params: named.params };
  }

  /** The initial child of each compound node from `x` down (not `x` itself). */
  private initialDescent(x: XNode): StateNodeInfo[] {
    const out: StateNodeInfo[] = [];
    let n = x;
    while (n.type === 'compound') {
      n = n.initial!.target[0]!;
      out.push(this.nodes.get(n)!);
    }
    return out;
  }

  private unsupported(x: XNode, what: string): Error {
    return new Error(`machine ${this.machine.id}: state ${x.id} uses ${what}, which the compiled engine does not run`);
  }

  /** The snapshot `getInitialSnapshot(input)` gives: context from input, initial states entered. */
  initial(input: unknown, sink: EffectSink | null): CompiledSnapshot {
    const factory = this.contextFactory;
    const initEvent = { type: 'xstate.init', input };
    const context =
      typeof factory === 'function'
        ? (factory as (a: object) => object)({ input, self: undefined, spawn: noSpawn })
        : (factory ?? {});
    let ctx = context;
    for (const node of this.initialEnters) ctx = run(node.entry, ctx, initEvent, sink);
    return this.settle(this.initialLeaf, ctx, initEvent, sink);
  }

  /** The next snapshot after `event`; effects go to `sink` in XState's order. */
  transition(snapshot: CompiledSnapshot, event: { type: string }, sink: EffectSink | null): CompiledSnapshot {
    if (snapshot.status !== 'active') return snapshot;
    const t = select(snapshot.node, event, snapshot.context);
    if (!t) return snapshot.node.hasAlways ? this.settle(snapshot.node, snapshot.context, event, sink, snapshot) : snapshot;
    const [leaf, ctx] = apply(t, snapshot.node, snapshot.context, event, sink);
    return this.settle(leaf, ctx, event, sink);
  }

  /** Takes eventless transitions until none is enabled; marks the machine done in a final state. */
  private settle(leaf: StateNodeInfo, ctx: any, event: object, sink: EffectSink | null, unchanged?: CompiledSnapshot): CompiledSnapshot {
    let node = leaf;
    let context = ctx;
    let moved = unchanged === undefined;
    while (!(node.final && node.chain.length === 2) && node.hasAlways) {
      const t = selectAlways(node, context, event);
      if (!t) break;
      [node, context] = apply(t, node, context, event, sink);
      moved = true;
    }
    if (!moved) return unchanged!;
    const done = node.final && node.chain.length === 2;
    return { node, context, status: done ? 'done' : 'active', value: node.value };
  }

  /** The snapshot XState's `getPersistedSnapshot` would write for this one. */
  persist(s: CompiledSnapshot): PersistedMachineSnapshot {
    return { status: s.status, value: s.value, historyValue: {}, context: s.context, children: {} };
  }

  /** Restores a persisted snapshot (written by either engine). */
  restore(p: { status?: string; value: StateValue; context: unknown }): CompiledSnapshot {
    let x = this.machine.root as unknown as XNode;
    let v: StateValue = p.value;
    for (;;) {
      const key = typeof v === 'string' ? v : Object.keys(v)[0]!;
      const child = x.states[key];
      if (!child) throw new Error(`machine ${this.id}: a snapshot names state ${JSON.stringify(p.value)}, which it does not have`);
      x = child;
      if (typeof v === 'string') break;
      v = (v as Record<string, StateValue>)[key]!;
    }
    // a state that has since become compound (a snapshot of an older definition) is entered at its initial leaf
    const node = this.initialDescent(x).at(-1) ?? this.nodes.get(x)!;
    return { node, context: p.context, status: p.status === 'done' ? 'done' : 'active', value: node.value };
  }
}

function noSpawn(): never {
  throw new Error('the compiled engine does not spawn actors');
}

function valueOf(path: string[]): StateValue {
  if (path.length === 0) return {};
  let v: StateValue = path[path.length - 1]!;
  for (let i = path.length - 2; i >= 0; i--) v = { [path[i]!]: v };
  return v;
}

function isDescendant(x: XNode, of: XNode): boolean {
  for (let p = x.parent; p; p = p.parent) if (p === of) return true;
  return false;
}

/** XState's `getTransitionDomain` for one target (no history states). */
function transitionDomain(source: XNode, target: XNode, reenter: boolean): XNode | undefined {
  if (!reenter && (target === source || isDescendant(target, source))) return source;
  // the least common proper ancestor of target and source
  for (let a = target.parent; a; a = a.parent) if (isDescendant(source, a)) return a;
  return reenter ? undefined : rootOf(source);
}

function rootOf(x: XNode): XNode {
  let r = x;
  while (r.parent) r = r.parent;
  return r;
}

/** The nodes strictly below `domain` down to `target`, top first. */
function pathFrom(domain: XNode, target: XNode): XNode[] {
  const out: XNode[] = [];
  for (let n: XNode | undefined = target; n && n !== domain; n = n.parent) out.unshift(n);
  return out;
}

function select(leaf: StateNodeInfo, event: { type: string }, context: any): Transition | null {
  for (const node of leaf.chain) {
    const list = node.on.get(event.type);
    if (!list) continue;
    for (const t of list) if (t.guard === null || t.guard({ context, event })) return t;
  }
  return null;
}

function selectAlways(leaf: StateNodeInfo, context: any, event: object): Transition | null {
  for (const node of leaf.chain) for (const t of node.always) if (t.guard === null || t.guard({ context, event })) return t;
  return null;
}

/** One microstep: leave the active nodes below the domain, run the actions, enter the targets. */
function apply(t: Transition, leaf: StateNodeInfo, context: any, event: object, sink: EffectSink | null): [StateNodeInfo, any] {
  let ctx = run(t.steps, context, event, sink);
  if (t.leaf === null) return [leaf, ctx];
  for (const node of t.enters) ctx = run(node.entry, ctx, event, sink);
  return [t.leaf, ctx];
}

/** Runs actions in order: each `assign` makes a new context the following actions see. */
function run(steps: Step[], context: any, event: object, sink: EffectSink | null): any {
  let ctx = context;
  for (const s of steps) {
    if (s.kind === 'assign') {
      const a = s.assignment;
      const args = { context: ctx, event, spawn: noSpawn, self: undefined, system: undefined };
      let partial: Record<string, unknown>;
      if (typeof a === 'function') partial = a(args) as Record<string, unknown>;
      else {
        partial = {};
        for (const key of Object.keys(a)) {
          const p = a[key];
          partial[key] = typeof p === 'function' ? (p as (x: object) => unknown)(args) : p;
        }
      }
      ctx = Object.assign({}, ctx, partial);
    } else if (sink) {
      const p = s.params;
      sink({ name: s.name, params: typeof p === 'function' ? p({ context: ctx, event }) : p });
    }
  }
  return ctx;
}
