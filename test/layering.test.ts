import { describe, expect, it } from 'vitest';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const SRC = resolve(dirname(fileURLToPath(import.meta.url)), '..', 'src');

/**
 * Design §2's layout table, "may import" column: the folders of `src/` each folder may import
 * (type-only imports count). `'*'` is "everything". This is the one copy of the table in the code.
 * `actors` may import "all of the above, ports": the rows above it, and the folders that own the
 * ports it drives (`model`: the model adapter; `tools`: the registry and its pipeline).
 */
const MAY_IMPORT: Record<string, readonly string[] | '*'> = {
  protocol: [],
  machines: ['protocol'],
  store: ['protocol', 'bus'],
  bus: ['protocol'],
  // and `jobs`: the hosting room hosts job actors beside agents (jobs imports nothing of actors)
  actors: ['protocol', 'machines', 'store', 'bus', 'model', 'tools', 'context', 'knowledge', 'jobs'],
  jobs: ['protocol', 'machines', 'store', 'bus', 'tools'],
  verify: ['protocol', 'store'],
  model: ['protocol'],
  tools: ['protocol'],
  context: ['protocol', 'model'],
  knowledge: ['protocol', 'store'],
  extensions: ['protocol', 'tools', 'model', 'config'],
  telemetry: ['protocol', 'store'],
  server: ['protocol', 'bus', 'store', 'client'],
  config: ['protocol'],
  // machines: `machine-definitions.ts` reads the machines' definitions for clients to draw
  client: ['protocol', 'bus', 'store', 'machines'],
  cli: '*',
};

/**
 * Packages a folder may import, where the design limits them: protocol "zod only" (§2), machines
 * xstate, zod and protocol, no `node:*` (STYLE "Machines are pure"). `node:crypto` in protocol is
 * the one exception: branded IDs are made there in one place (random bytes) and canonical digests
 * are computed there (sha256).
 */
const PACKAGES: Record<string, readonly string[]> = {
  protocol: ['zod', 'node:crypto'],
  machines: ['xstate', 'zod'],
};

/**
 * The rooms of `src/actors`, top first: a room imports only the rooms after it, so the agent's
 * parts stack without a cycle. `hosting` runs actors (supervisor, host, leases); `actor` is the
 * agent actor itself (its machines, commit pipeline, effect dispatch); `effects` carries out what
 * the machines ask (model calls, tools, the runtime's own tools); `tree` spawns and waits on
 * children; `goals` keeps goals and budgets; `agent` is the ground they all stand on (ports, turn
 * settings, the effect context, output blobs); `faults` is fault injection. `src/actors/*.ts`
 * (the embedding runtime) may import every room.
 */
const ACTOR_ROOMS = ['hosting', 'actor', 'effects', 'tree', 'goals', 'agent', 'faults'] as const;

/** Files one folder of `src/` may hold directly (design §2: "none over ~30 files"). */
const MAX_FILES_PER_FOLDER = 30;

/** Folders of `src/` that may read `process.env`: config loading, the one reader (STYLE, §2). */
const ENV_READERS = ['config'];

function tsFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    if (e.isDirectory()) return tsFiles(p);
    return e.name.endsWith('.ts') ? [p] : [];
  });
}

/** The module specifiers of a file's static imports and re-exports, side-effect and dynamic imports. */
function importsOf(text: string): string[] {
  const patterns = [
    /^(?:import|export)\b[^;]*?\bfrom\s*['"]([^'"]+)['"]/gm,
    /^import\s*['"]([^'"]+)['"]/gm,
    /\bimport\(\s*['"]([^'"]+)['"]\s*\)/g,
  ];
  return patterns.flatMap((re) => [...text.matchAll(re)].map((m) => m[1]!));
}

/** The top folder of `src/` a file lies in (`index` for `src/index.ts`). */
function folderOf(file: string): string {
  const [top, ...rest] = relative(SRC, file).split(sep);
  return rest.length === 0 ? 'index' : top!;
}

/** What an import is: a folder of `src/`, a package (its name), or outside `src/`. */
function targetOf(file: string, spec: string): { folder: string } | { pkg: string } | { outside: string } {
  if (!spec.startsWith('.')) {
    const parts = spec.split('/');
    return { pkg: spec.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]! };
  }
  const target = resolve(dirname(file), spec);
  const rel = relative(SRC, target);
  if (rel.startsWith('..')) return { outside: rel };
  return { folder: folderOf(target) };
}

/** Every import of `src/**\/*.ts` that the tables above do not allow, as `file: spec (why)`. */
function violations(): string[] {
  const found: string[] = [];
  for (const file of tsFiles(SRC)) {
    const from = folderOf(file);
    const name = relative(SRC, file);
    if (from !== 'index' && !(from in MAY_IMPORT)) {
      found.push(`${name}: folder ${from} is not in design §2's table`);
      continue;
    }
    for (const spec of importsOf(readFileSync(file, 'utf8'))) {
      const t = targetOf(file, spec);
      if ('outside' in t) found.push(`${name}: ${spec} (outside src/)`);
      else if ('folder' in t) {
        const allowed = from === 'index' ? '*' : MAY_IMPORT[from]!;
        if (t.folder !== from && allowed !== '*' && !allowed.includes(t.folder)) found.push(`${name}: ${spec} (${from} may not import ${t.folder})`);
      } else {
        const pkgs = PACKAGES[from];
        if (pkgs && !pkgs.includes(t.pkg)) found.push(`${name}: ${spec} (${from} may import only ${pkgs.join(', ')})`);
      }
    }
  }
  return found;
}

const WEB = resolve(SRC, '..', 'web', 'src');

/**
 * `web/` imports protocol types only (§2), and a few modules of code besides, bundled for the
 * browser so the page says what the CLI says from the same log with the same code (§11): the
 * projection fold, the status every client shows, the event describer `actorloop events` prints
 * with (and the escaping of the text it quotes), and a turn's reason in words. Packages: the UI
 * library and the layout.
 */
const WEB_MAY_IMPORT = {
  types: 'protocol',
  modules: ['store/projection.ts', 'store/job-projection.ts', 'client/status.ts', 'client/event-text.ts', 'client/terminal-text.ts', 'client/outcome-words.ts'],
  packages: ['preact', 'elkjs'],
};

/** Every import of `web/src` that the rule above does not allow. */
function webViolations(): string[] {
  const files = readdirSync(WEB).filter((f) => /\.tsx?$/.test(f)).map((f) => join(WEB, f));
  const found: string[] = [];
  for (const file of files) {
    const text = readFileSync(file, 'utf8');
    const typeOnly = new Set([...text.matchAll(/^import\s+type\b[^;]*?\bfrom\s*['"]([^'"]+)['"]/gm)].map((m) => m[1]!));
    for (const spec of importsOf(text)) {
      const name = relative(WEB, file);
      if (!spec.startsWith('.')) {
        const pkg = spec.split('/')[0]!;
        if (!WEB_MAY_IMPORT.packages.includes(pkg)) found.push(`${name}: ${spec} (web/ may import only ${WEB_MAY_IMPORT.packages.join(', ')})`);
        continue;
      }
      const target = resolve(dirname(file), spec);
      if (!relative(WEB, target).startsWith('..')) continue;
      const rel = relative(SRC, target).replace(/\.js$/, '.ts');
      if (rel.startsWith('..') || rel.startsWith('web')) found.push(`${name}: ${spec} (outside web/src and src/)`);
      else if (WEB_MAY_IMPORT.modules.includes(rel)) continue;
      else if (folderOf(resolve(SRC, rel)) === WEB_MAY_IMPORT.types && typeOnly.has(spec)) continue;
      else found.push(`${name}: ${spec} (web/ may import protocol types and ${WEB_MAY_IMPORT.modules.join(', ')})`);
    }
  }
  return found;
}

/** The room of `src/actors` a file lies in, or null (outside `src/actors`, or directly in it). */
function actorRoomOf(file: string): string | null {
  const parts = relative(SRC, file).split(sep);
  return parts[0] === 'actors' && parts.length > 2 ? parts[1]! : null;
}

/** Imports between rooms of `src/actors` that go up the stack (or to a room not in the list). */
function roomViolations(): string[] {
  const found: string[] = [];
  for (const file of tsFiles(join(SRC, 'actors'))) {
    const from = actorRoomOf(file);
    const name = relative(SRC, file);
    if (from === null) continue;
    const rank = ACTOR_ROOMS.indexOf(from as (typeof ACTOR_ROOMS)[number]);
    if (rank < 0) {
      found.push(`${name}: room ${from} is not in ACTOR_ROOMS`);
      continue;
    }
    for (const spec of importsOf(readFileSync(file, 'utf8'))) {
      if (!spec.startsWith('.')) continue;
      const target = resolve(dirname(file), spec);
      const to = actorRoomOf(target);
      if (to === null && folderOf(target) === 'actors') found.push(`${name}: ${spec} (a room imports the embedding runtime)`);
      if (to === null || to === from) continue;
      if (ACTOR_ROOMS.indexOf(to as (typeof ACTOR_ROOMS)[number]) <= rank) found.push(`${name}: ${spec} (${from} may import only ${ACTOR_ROOMS.slice(rank + 1).join(', ') || 'nothing'})`);
    }
  }
  return found;
}

/** Every file's relative imports as resolved `.ts` paths; `types` counts `import type` too. */
function importGraph(types: boolean): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  const files = new Set(tsFiles(SRC));
  for (const file of files) {
    const text = readFileSync(file, 'utf8');
    const typeOnly = new Set([...text.matchAll(/^(?:import|export)\s+type\b[^;]*?\bfrom\s*['"]([^'"]+)['"]/gm)].map((m) => m[1]!));
    const deps = importsOf(text)
      .filter((spec) => spec.startsWith('.') && (types || !typeOnly.has(spec)))
      .map((spec) => resolve(dirname(file), spec).replace(/\.js$/, '.ts'))
      .filter((t) => files.has(t));
    graph.set(file, deps);
  }
  return graph;
}

/** The import cycles of a graph: its strongly connected components of more than one file (Tarjan). */
function cycles(graph: Map<string, string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const c: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        c.push(relative(SRC, w));
      } while (w !== v);
      if (c.length > 1) found.push(c.sort());
    }
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return found;
}

/**
 * Folders whose files may import each other's types in a circle: the projection's folds
 * (`store/projection.ts` and the sub-folds that take the `Projection` they fold into). Value
 * imports never form a cycle anywhere.
 */
const TYPE_CYCLES_ALLOWED = ['store'];

const COMMANDS = join(SRC, 'cli', 'commands');

/**
 * Imports of one file of `src/cli/commands` by another: a file there is one command (or a closely
 * tied group), and what commands share lives in a module named for it outside `commands/`.
 */
function commandImports(): string[] {
  const found: string[] = [];
  for (const file of tsFiles(COMMANDS)) {
    for (const spec of importsOf(readFileSync(file, 'utf8'))) {
      if (!spec.startsWith('.')) continue;
      const target = resolve(dirname(file), spec);
      if (!relative(COMMANDS, target).startsWith('..')) found.push(`${relative(SRC, file)}: ${spec}`);
    }
  }
  return found;
}

/**
 * Where a process is put together: the one composition both the embedding runtime and the CLI
 * build on. Elsewhere no file makes a supervisor's ports, and a supervisor takes the options the
 * composition gives it (with the caller's own callbacks over them).
 */
const COMPOSITION = join(SRC, 'actors', 'composition.ts');

/** Code lines outside the composition that wire a supervisor by hand, as `file: line`. */
function wiringOutsideComposition(): string[] {
  const found: string[] = [];
  for (const file of tsFiles(SRC)) {
    if (file === COMPOSITION) continue;
    for (const line of readFileSync(file, 'utf8').split('\n')) {
      const code = line.trim();
      if (code.startsWith('*') || code.startsWith('/*') || code.startsWith('//') || code.startsWith('export function')) continue;
      const ports = /\bcreate(?:JetStream|Memory)Ports\(/.test(code);
      const supervisor = /\bnew Supervisor\(/.test(code) && !/\bnew Supervisor\(composition\.supervisorOptions\(/.test(code);
      if (ports || supervisor) found.push(`${relative(SRC, file)}: ${code}`);
    }
  }
  return found;
}

describe('layering (design §2)', () => {
  it('reads the import forms the code uses', () => {
    const text = [
      "import { a } from '../protocol/a.js';",
      'import type {\n  B,\n  C,\n} from "../store/b.js";',
      "export { d } from './d.js';",
      "import 'side-effect';",
      "const m = await import('../bus/m.js');",
      "export const x = 'from nowhere';",
    ].join('\n');
    expect(importsOf(text).sort()).toEqual(['../bus/m.js', '../protocol/a.js', '../store/b.js', './d.js', 'side-effect']);
  });

  it('every folder imports only what the table allows', () => {
    expect(tsFiles(SRC).length).toBeGreaterThan(50);
    expect(violations()).toEqual([]);
  });

  it('web/ imports protocol types, the projection fold, preact and elkjs only', () => {
    expect(readdirSync(WEB).length).toBeGreaterThan(5);
    expect(webViolations()).toEqual([]);
  });

  it('the rooms of src/actors stack: each imports only the rooms below it', () => {
    expect(tsFiles(join(SRC, 'actors')).filter((f) => actorRoomOf(f) !== null).length).toBeGreaterThan(40);
    expect(roomViolations()).toEqual([]);
  });

  it(`no folder of src/ holds more than ${MAX_FILES_PER_FOLDER} files directly`, () => {
    const crowded: string[] = [];
    const walk = (dir: string): void => {
      const entries = readdirSync(dir, { withFileTypes: true });
      const files = entries.filter((e) => e.isFile() && e.name.endsWith('.ts')).length;
      if (files > MAX_FILES_PER_FOLDER) crowded.push(`${relative(SRC, dir) || 'src'}: ${files} files`);
      for (const e of entries) if (e.isDirectory()) walk(join(dir, e.name));
    };
    walk(SRC);
    expect(crowded).toEqual([]);
  });

  it('finds a cycle when there is one', () => {
    const g = new Map([['/a', ['/b']], ['/b', ['/c']], ['/c', ['/a']], ['/d', ['/a']]]);
    expect(cycles(g).map((c) => c.length)).toEqual([3]);
  });

  it('no file imports a value from a file that imports it back, directly or around a circle', () => {
    expect(cycles(importGraph(false))).toEqual([]);
  });

  it(`no import cycle at all, type imports included, outside ${TYPE_CYCLES_ALLOWED.join(', ')}`, () => {
    const found = cycles(importGraph(true))
      .filter((c) => !c.every((f) => TYPE_CYCLES_ALLOWED.includes(f.split(sep)[0]!)));
    expect(found).toEqual([]);
  });

  it('no command of src/cli/commands imports another', () => {
    expect(tsFiles(COMMANDS).length).toBeGreaterThan(10);
    expect(commandImports()).toEqual([]);
  });

  it('a supervisor is wired only by the composition the embedding runtime and the CLI share', () => {
    expect(readFileSync(COMPOSITION, 'utf8')).toContain('export async function compose(');
    expect(wiringOutsideComposition()).toEqual([]);
  });

  it('only src/config reads process.env', () => {
    const readers = tsFiles(SRC)
      .filter((f) => !ENV_READERS.includes(folderOf(f)))
      .filter((f) => /\bprocess\s*(?:\.\s*env\b|\[\s*['"]env['"]\s*\])|\benv\b[^}=]*\}\s*=\s*(?:globalThis\.)?process\b/.test(readFileSync(f, 'utf8')))
      .map((f) => relative(SRC, f));
    expect(readers).toEqual([]);
  });
});
