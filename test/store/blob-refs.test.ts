import { describe, expect, it } from 'vitest';
import type { z } from 'zod';
import { sealText } from '../../src/actors/agent/sealed-text.js';
import { INLINE_OUTPUT_BYTES, storeOutput } from '../../src/actors/agent/output-blobs.js';
import { sha256Digest } from '../../src/protocol/canonical-json.js';
import { EventDataSchemas, type ActorEvent, type EventType } from '../../src/protocol/events.js';
import { blobRefs } from '../../src/store/blob-refs.js';
import { createMemoryBlobStore } from '../../src/store/memory-blobs.js';
import { shapeObservation } from '../../src/tools/observation.js';
import { createRedactor } from '../../src/tools/redact.js';
import { LogBuilder } from '../actors/log-builder.js';

/** A field of an event's data that looks like it names a blob: `digest`, `*Digest`, `ref`, `*Ref`. */
const BLOBBY = /(^|[a-z])(digest|Digest|ref|Ref)$/;

/** Paths (`a.b`, `list[].c`) of the blobby fields in a zod schema, walked through wrappers, arrays and unions. */
function blobbyPaths(schema: z.ZodType, at = ''): string[] {
  const def = (schema as unknown as { _zod: { def: Record<string, unknown> & { type: string } } })._zod.def;
  switch (def.type) {
    case 'object': {
      const out: string[] = [];
      for (const [key, field] of Object.entries(def['shape'] as Record<string, z.ZodType>)) {
        const path = at === '' ? key : `${at}.${key}`;
        if (BLOBBY.test(key)) out.push(path);
        // a ref's own `digest` is the ref: named once, by the ref's path
        else out.push(...blobbyPaths(field, path));
      }
      return out;
    }
    case 'optional': case 'nullable': case 'default': case 'readonly': case 'nonoptional': case 'catch': case 'prefault':
      return blobbyPaths(def['innerType'] as z.ZodType, at);
    case 'array':
      return blobbyPaths(def['element'] as z.ZodType, `${at}[]`);
    case 'record':
      return blobbyPaths(def['valueType'] as z.ZodType, `${at}{}`);
    case 'union':
      return [...new Set((def['options'] as z.ZodType[]).flatMap((o) => blobbyPaths(o, at)))];
    case 'pipe':
      return blobbyPaths(def['in'] as z.ZodType, at);
    case 'lazy':
      throw new Error(`a lazy schema at ${at}: teach this walk to follow it`);
    default:
      return [];
  }
}

/** Fields that look like blob names and are not: what they hold, and why no blob is behind it. */
const NOT_BLOBS: Record<string, string> = {
  // the digest of the normalized plan the event itself records; an approval binds to it
  'policy/decided planDigest': 'plan digest',
  'approval/requested planDigest': 'plan digest',
  // versions of files as read (sha256 of their content), never stored as blobs: the text the model
  // was sent of each is the event's textRef
  'doc/loaded digest': 'file version',
  'skills/indexed skills[].digest': 'file version',
  'skill/loaded digest': 'file version (the body is the call\'s result)',
  'memory/loaded digest': 'file version',
  'memory/changed digest': 'file version',
  // the digest of each text a request was made of: the docs', skills' and memory's are named by their own events' textRef
  'request/prepared contributions[].digest': 'text digest',
  // a checkpoint holds its summary inline (it is what replaces the range); digest is that text's
  'checkpoint/committed digest': 'text digest of the inline summary',
  'checkpoint/committed files[].digest': 'file version',
};

const blobs = createMemoryBlobStore();
const redactor = createRedactor();
const big = (c: string) => c.repeat(INLINE_OUTPUT_BYTES + 1);

interface Case {
  /** `<type> <path>` of each blob field the event sets. */
  fields: string[];
  event: ActorEvent;
  /** The digests it names, each put to the blob store by the code that writes such an event. */
  digests: string[];
}

/**
 * One event of each kind that names a blob, each made as the runtime makes it: the digest comes
 * from the code that stores the blob (storeOutput, sealText, shapeObservation, the blob store).
 */
async function cases(): Promise<Case[]> {
  const b = new LogBuilder().receive('msg_1').startTurn('msg_1').startStep(1);
  const scope = { turn: b.turn, step: b.step };
  const out: Case[] = [];
  const add = (fields: string[], event: ActorEvent, digests: string[]) => out.push({ fields, event, digests });

  const body = '{"model":"m","messages":[]}';
  const requestDigest = await blobs.put(body, sha256Digest(body));
  add(['request/prepared digest'], b.push('request/prepared', { digest: requestDigest, bytes: body.length, messages: 1 }, scope), [requestDigest]);
  b.attempt = 'att_1';
  add(['attempt/start requestDigest'], b.push('attempt/start', { index: 1, requestDigest }, { ...scope, attempt: b.attempt }), [requestDigest]);

  const output = await storeOutput({ content: big('a'), toolCalls: [{ id: 'p0', name: 'write_file', arguments: big('b') }] }, blobs);
  const answer = output.contentRef!;
  const args = output.toolCalls[0]!.argumentsRef!;
  add(['assistant/accepted contentRef', 'assistant/accepted toolCalls[].argumentsRef'],
    b.push('assistant/accepted', { content: output.content, contentRef: answer, toolCalls: output.toolCalls, finishReason: 'tool_calls' }, { ...scope, attempt: b.attempt }),
    [answer.digest, args.digest]);
  add(['assistant/rejected contentRef'], b.push('assistant/rejected', { reason: 'no', content: output.content, contentRef: answer }, scope), [answer.digest]);
  const call = { ...scope, call: 'call_1' };
  add(['tool/call argumentsRef'], b.push('tool/call', {
    index: 0, providerId: 'p0', name: 'write_file', arguments: output.toolCalls[0]!.arguments, argumentsRef: args, status: 'valid',
    error: null, effects: 'possible', recovery: 'reconcile', withinBudget: true,
  }, call), [args.digest]);
  add(['tool/start argumentsRef'], b.push('tool/start', { name: 'write_file', input: {}, effects: 'possible', idempotencyKey: 'k', rerun: false, argumentsRef: args }, call), [args.digest]);

  const shaped = shapeObservation('x\n'.repeat(64 * 1024), { redactor });
  const art = shaped.artifact!;
  expect(await blobs.put(art.content)).toBe(art.digest);
  const sealed = await sealText(blobs, 'the observation of a sensitive answer');
  add(['tool/result artifact.digest', 'tool/result outputRef'], b.push('tool/result', {
    ok: true, output: shaped.output, error: null, durationMs: 1, artifact: { id: art.id, digest: art.digest, bytes: art.bytes, binary: art.binary },
    outputRef: sealed,
  }, call), [art.digest, sealed.digest]);

  const answerRef = await sealText(blobs, 'hunter2 hunter2');
  add(['ask/answered answerRef'], b.push('ask/answered', {
    questionId: 'q_1', messageId: 'msg_2', by: 'cli', outcome: 'answered', optionId: null, answer: '[sensitive]', answerRef,
  }, call), [answerRef.digest]);
  const contentRef = await sealText(blobs, '{"questionId":"q_1","text":"hunter2"}');
  add(['inbox/received contentRef'], b.push('inbox/received', {
    messageId: 'msg_2', kind: 'ask_answer', from: 'cli', content: '[sensitive]', request: null, contentRef,
  }), [contentRef.digest]);

  // a child's completion notice: the parent's door stored its worktree diff, the content names it
  const diff = 'diff --git a/x b/x\n';
  const diffDigest = await blobs.put(diff);
  const notice = {
    childId: 'agt_01CHILD0000000000000000000', name: 'helper', turn: 'turn_9', outcome: 'completed', reason: null, answer: 'done',
    artifacts: [{ id: 'art_1', digest: diffDigest, bytes: diff.length, what: 'diff of its worktree' }],
    usage: { inputTokens: 1, outputTokens: 1, estimated: false }, costUsd: null,
  };
  add([], b.push('inbox/received', { messageId: 'msg_3', kind: 'subagent_completed', from: notice.childId, content: JSON.stringify(notice), request: null }), [diffDigest]);

  // a job's output, stored before its terminal phase; its notice names it in the owner's log
  const jobOut = 'ok 12 tests\n'.repeat(100);
  const jobDigest = await blobs.put(jobOut);
  const jobOutput = { id: 'art_01JOB', digest: jobDigest, bytes: jobOut.length, binary: false };
  add(['job/phase end.output.digest'], b.push('job/phase', {
    from: 'running', phase: 'completed', reason: 'exited', message: null, attempt: 1,
    end: { exitCode: 0, signal: null, durationMs: 10, usage: null, costUsd: null, output: jobOutput, tail: 'ok 12 tests\n' },
  }), [jobDigest]);
  const jobNotice = {
    jobId: 'job_01JOB000000000000000000000', name: 'regress', phase: 'completed', reason: 'exited', message: null, attempts: 1,
    exitCode: 0, durationMs: 10, usage: null, output: jobOutput, tail: 'ok 12 tests\n',
  };
  add([], b.push('inbox/received', { messageId: 'msg_4', kind: 'job_notice', from: jobNotice.jobId, content: JSON.stringify(jobNotice), request: null }), [jobDigest]);

  // the texts the model was given of docs, the skill index, memory and retrieved excerpts
  const textRef = async (text: string) => ({ digest: await blobs.put(text, sha256Digest(text)), bytes: Buffer.byteLength(text) });
  const docText = await textRef('Project instructions from AGENTS.md:\n\nROOT RULE');
  add(['doc/loaded textRef'], b.push('doc/loaded', {
    path: '/ws/AGENTS.md', dir: '/ws', scope: 'project', digest: sha256Digest('ROOT RULE'), bytes: 9, truncated: false, placement: 'instructions', textRef: docText,
  }, scope), [docText.digest]);
  const index = await textRef('Skills:\n- notes: writes notes');
  add(['skills/indexed textRef'], b.push('skills/indexed', { skills: [{ name: 'notes', description: 'writes notes', path: '/ws/.agents/skills/notes/SKILL.md', scope: 'project', digest: sha256Digest('x') }], textRef: index }, scope), [index.digest]);
  const memText = await textRef('# Memory\n- tests run with node --test');
  add(['memory/loaded textRef'], b.push('memory/loaded', { file: 'memory', path: '/cfg/MEMORY.md', digest: sha256Digest('x'), bytes: 1, summarized: false, textRef: memText }, scope), [memText.digest]);
  const excerpts = await textRef('<untrusted_data source="retrieval:a.js:1-2">x</untrusted_data>');
  add(['retrieval/loaded textRef'], b.push('retrieval/loaded', { retriever: 'ripgrep', query: 'x', tokenBudget: 10, excerpts: [], textRef: excerpts }, scope), [excerpts.digest]);

  add(['turn/end answerRef'], b.push('turn/end', {
    outcome: 'completed', reason: null, answer: output.content, answerRef: answer, steps: 1, toolCalls: 1,
    usage: { inputTokens: 1, outputTokens: 1, estimated: false },
  }, { turn: b.turn }), [answer.digest]);
  return out;
}

describe('blobRefs', () => {
  it('finds the digest of every kind of event that names a blob, each one stored by the code that names it', async () => {
    for (const c of await cases()) {
      const found = blobRefs(c.event);
      expect(found, `${c.event.type} names ${c.digests.join(', ')}`).toEqual(c.digests.filter((d, i, all) => all.indexOf(d) === i));
      for (const d of found) expect(await blobs.has(d), `${d} of ${c.event.type} is a stored blob`).toBe(true);
    }
  });

  it('knows every digest and ref field of every event schema: a new one fails here until blobRefs lists it', async () => {
    const covered = new Set((await cases()).flatMap((c) => c.fields));
    const missing: string[] = [];
    for (const type of Object.keys(EventDataSchemas) as EventType[]) {
      for (const path of blobbyPaths(EventDataSchemas[type] as unknown as z.ZodType)) {
        const key = `${type} ${path}`;
        if (!covered.has(key) && NOT_BLOBS[key] === undefined) missing.push(key);
      }
    }
    expect(missing, 'fields that look like blob names: add them to blobRefs and a case here, or to NOT_BLOBS with why').toEqual([]);
  });

  it('names nothing for an event that holds no blob, and ignores a notice that does not parse', () => {
    const b = new LogBuilder().receive('msg_1');
    expect(blobRefs(b.events[0]!)).toEqual([]);
    const odd = b.push('inbox/received', { messageId: 'msg_2', kind: 'subagent_completed', from: 'agt_x', content: '{not json', request: null });
    expect(blobRefs(odd)).toEqual([]);
    const oddJob = b.push('inbox/received', { messageId: 'msg_3', kind: 'job_notice', from: 'job_x', content: '{"jobId":1}', request: null });
    expect(blobRefs(oddJob)).toEqual([]);
  });
});
