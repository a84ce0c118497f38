// The public surface, pinned: the names each entry exports (values and types, read by the
// compiler) against the lists below. A change to the API shows here, in a reviewed diff.
import { join } from 'node:path';
import ts from 'typescript';
import { describe, expect, test } from 'vitest';
import { REPO_ROOT } from './helpers/cli.js';

/** `actorloop`: the embedding API. */
const ROOT = [
  'ActorEvent', 'ActorloopError', 'AgentActorRef', 'AgentHandle', 'AgentOptions', 'AgentSnapshot', 'AgentStatus',
  'ApprovalMode', 'BadIdError', 'BusError', 'ClientEvent', 'ClientStatus', 'CompleteWhen', 'ConfigError', 'EventData',
  'EventType', 'ExecutionSemantics', 'FollowOptions', 'FollowTreeOptions', 'GoalOptions', 'InboxMessage', 'InspectObserver',
  'ModelAdapter', 'ModelError', 'NotFoundError', 'PolicyError', 'Projection', 'Runtime', 'RuntimeOptions', 'ScriptedModel',
  'StoreError', 'ToolContext', 'ToolDefinition', 'ToolError', 'ToolResult', 'TreeAgent', 'TreeClientEvent', 'TreeStatus',
  'TreeView', 'TreeWatchOptions', 'TurnEnded', 'TurnHandle', 'TurnOptions', 'TurnOutcome', 'TurnSettings', 'createRuntime',
  'createScriptedModel', 'followAgent', 'followTree', 'readTreeView', 'statusOf', 'watchTree',
];

/** `actorloop/host`: the kit for building hosts. */
const HOST = [
  'AgentContext', 'AgentEvent', 'AgentInput', 'AttemptContext', 'AttemptEvent', 'AttemptInput', 'BUILTIN_PRICES', 'BlobStore',
  'Bus', 'EffectiveConfig', 'EventSchema', 'FAULT_POINTS', 'FaultInjector', 'FaultRecord', 'FaultRecords', 'FaultSpec',
  'GitWorktrees', 'HostedAgent', 'Id', 'InboxMessageSchema', 'MemoryInboxes', 'MemoryLogs', 'MemoryPorts', 'ModelOutput',
  'ModelRequest', 'ModelStreamEvent', 'NatsServerHandle', 'OpenAIChatModel', 'OpenAIChatModelOptions', 'OpenAIResponsesModel',
  'PreparedRequest', 'Price', 'Projection', 'ROOT_NAME', 'ReconcileContext', 'ReconcileVerdict', 'ResourceLease',
  'ResourceLeaseStore', 'Script', 'ScriptResponse', 'ScriptSchema', 'StepContext', 'StepEvent', 'StepInput', 'Supervisor',
  'SupervisorOptions', 'SupervisorPorts', 'TREE_FAULT_POINTS', 'ToolCallContext', 'ToolCallEvent', 'ToolCallInput',
  'ToolRegistry', 'ToolSpec', 'TreeFold', 'TurnContext', 'TurnEvent', 'TurnInput', 'Violation', 'agentMachine',
  'attemptMachine', 'builtinTools', 'costOf', 'countTokens', 'createCachedBlobStore', 'createFaultInjector', 'createFileFaultRecords',
  'createGitWorktrees', 'createJetStreamLog', 'createJetStreamPorts', 'createKvResourceLeases', 'createLmdbBlobStore',
  'createLmdbSnapshots', 'createLogReader', 'createMemoryBlobStore', 'createMemoryDirectory', 'createMemoryFaultRecords',
  'createMemoryInboxes', 'createMemoryLeaseStore', 'createMemoryLogs', 'createMemoryPorts', 'createMemoryResourceLeases',
  'createModelAdapter', 'createObjectBlobStore', 'createOpenAIChatModel', 'createOpenAIResponsesModel', 'createToolRegistry', 'derivedId',
  'emptyProjection', 'ensureBlobBucket', 'ensureResourceLeaseBucket', 'foldEvent', 'formatViolations', 'isId', 'loadConfig', 'loadScript',
  'newId', 'openBus', 'openLmdbStore', 'parseEvent', 'parseFaultSpecs', 'parseId', 'priceFor', 'publishInbox',
  'startNatsServer', 'stepMachine', 'toolCallMachine', 'turnMachine', 'verifyLog',
];

/** What a host reads of an agent it hosts (`HostedAgent`). */
const HOSTED_AGENT = ['actorId', 'idle', 'projection', 'ref', 'rootId', 'whenAwaitingApproval', 'whenAwaitingQuestion', 'whenTurnEnds'];

/** Every name (value or type) the entry file exports, as the compiler sees it. */
function exportsOf(program: ts.Program, file: string): string[] {
  const checker = program.getTypeChecker();
  const source = program.getSourceFile(file);
  if (!source) throw new Error(`${file} is not in the program`);
  const module = checker.getSymbolAtLocation(source)!;
  return checker.getExportsOfModule(module).map((s) => s.getName()).sort();
}

describe('the public API', () => {
  const root = join(REPO_ROOT, 'src', 'index.ts');
  const host = join(REPO_ROOT, 'src', 'host.ts');
  const program = ts.createProgram([root, host], {
    module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, target: ts.ScriptTarget.ES2022, strict: true, noEmit: true,
  });

  test('actorloop exports the embedding API, at most 60 names', () => {
    const names = exportsOf(program, root);
    expect(names).toEqual([...ROOT].sort());
    expect(names.length).toBeLessThanOrEqual(60);
  });

  test('actorloop/host exports the host kit', () => {
    expect(exportsOf(program, host)).toEqual([...HOST].sort());
  });

  test('the agent actor is exported from neither: a host reads it as a HostedAgent', () => {
    for (const file of [root, host]) expect(exportsOf(program, file)).not.toContain('AgentActor');
    expect(exportsOf(program, root)).not.toContain('Supervisor');
    // what the host kit's Supervisor creates and rehydrates: no staging, recovery or pump in reach
    const checker = program.getTypeChecker();
    const source = program.getSourceFile(host)!;
    const supervisor = checker.getExportsOfModule(checker.getSymbolAtLocation(source)!).find((s) => s.getName() === 'Supervisor')!;
    const instance = checker.getTypeOfSymbolAtLocation(supervisor, source).getConstructSignatures()[0]!.getReturnType();
    const returned = (method: string) => checker.getTypeOfSymbolAtLocation(instance.getProperty(method)!, source).getCallSignatures()[0]!.getReturnType();
    const created = checker.getAwaitedType(returned('create'))!;
    const hydrated = checker.getTypeOfSymbolAtLocation(checker.getAwaitedType(returned('hydrate'))!.getProperty('actor')!, source);
    for (const agent of [created, hydrated]) expect(agent.getProperties().map((p) => p.getName()).sort()).toEqual([...HOSTED_AGENT].sort());
  });
}, 60_000);

test('package.json maps actorloop and actorloop/host to the built entries', async () => {
  const { readFile } = await import('node:fs/promises');
  const pkg = JSON.parse(await readFile(join(REPO_ROOT, 'package.json'), 'utf8')) as { exports: Record<string, unknown> };
  expect(pkg.exports).toEqual({
    '.': { types: './dist/index.d.ts', default: './dist/index.js' },
    './host': { types: './dist/host.d.ts', default: './dist/host.js' },
  });
});
