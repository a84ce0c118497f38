import { resolve } from 'node:path';
import OpenAI, { APIConnectionError, APIConnectionTimeoutError, APIError } from 'openai';
import { secretOf, type EffectiveConfig } from '../../config/config.js';
import { parseModelSpec } from '../../model/model-spec.js';
import { loadScript } from '../../model/script.js';
import {
  configSkillsCheck, dataDirCheck, failed, lmdbCheck, messageOf, natsChecks, ok, warning, within, type CheckResult,
  toolingChecks,
} from '../doctor-checks.js';
import { EXIT } from '../exit-codes.js';
import type { Out } from '../output.js';
import { terminalText } from '../../client/terminal-text.js';
import { createLogger } from '../runtime.js';
import { DEFAULT_OPENAI_MODEL } from '../turn/turn-flags.js';

/** Flags of `actorloop doctor`. */
export interface DoctorOptions {
  model?: string;
  baseUrl?: string;
  json?: boolean;
}

/**
 * `actorloop doctor`: checks nats-server, JetStream, its durability (fsync) and the streams, the data dir, LMDB, the
 * sandbox, ripgrep, the policy and the skills, and the model endpoint; one line each. Exit 1 when any check failed; warnings do not fail.
 */
export async function doctorCommand(opts: DoctorOptions, config: EffectiveConfig, out: Out): Promise<number> {
  const logger = createLogger(config);
  const apiKey = secretOf(config, 'OPENAI_API_KEY');
  let anyFailed = false;
  const print = (results: CheckResult[]): void => {
    for (const r of results) {
      anyFailed ||= r.status === 'failed';
      const detail = mask(r.detail, apiKey);
      const fix = r.fix === null ? null : mask(r.fix, apiKey);
      if (opts.json) {
        out.stdout.write(`${JSON.stringify({ check: r.check, status: r.status, detail, fix })}\n`);
      } else {
        // a detail can quote what an endpoint answered: shown, not acted on
        out.stdout.write(`${r.status.padEnd(7)}  ${r.check}: ${terminalText(detail, 'block')}\n`);
        if (fix !== null) out.stdout.write(`         → ${terminalText(fix, 'block')}\n`);
      }
    }
  };
  print(await natsChecks(config, logger));
  print([await dataDirCheck(config.dataDir)]);
  print([await lmdbCheck(config.dataDir)]);
  print(await toolingChecks(config));
  print(await configSkillsCheck(config));
  print(await modelChecks(opts, config, apiKey));
  return anyFailed ? EXIT.failed : EXIT.completed;
}

/** Hides the API key (and anything shaped like one) in a line about to be printed. */
function mask(text: string, apiKey: string): string {
  let outText = text;
  // a very short "key" would mask ordinary letters; such a key is not a secret worth hiding
  if (apiKey.length >= 4) outText = outText.split(apiKey).join('***');
  return outText.replace(/\bsk-[A-Za-z0-9_-]{6,}/g, 'sk-***').replace(/Bearer\s+\S+/gi, 'Bearer ***');
}

const REQUEST_TIMEOUT_MS = 15_000;

/** The model checks: none configured, a script that loads, or an OpenAI-compatible endpoint probed. */
async function modelChecks(opts: DoctorOptions, config: EffectiveConfig, apiKey: string): Promise<CheckResult[]> {
  const baseUrl = opts.baseUrl ?? config.openaiBaseUrl;
  // the same choice `run` makes when --model is not given
  const spec = opts.model ?? config.defaultModel ?? (config.apiKeyEnv || baseUrl ? DEFAULT_OPENAI_MODEL : null);
  if (spec === null) {
    return [warning('model', 'none configured', 'pass --model (scripted:<file.json> or openai:<model>) or set OPENAI_API_KEY')];
  }
  let parsed: ReturnType<typeof parseModelSpec>;
  try {
    parsed = parseModelSpec(spec);
  } catch (err) {
    return [failed('model', messageOf(err), 'pass --model scripted:<file.json> or --model openai:<model>')];
  }
  switch (parsed.provider) {
    case 'scripted': {
      const file = resolve(parsed.file);
      try {
        const responses = await loadScript(file);
        return [ok('model', `script ${file} loads: ${responses.length} response${responses.length === 1 ? '' : 's'}`)];
      } catch (err) {
        return [failed('model', err instanceof Error ? err.message : String(err),
          (err as { hint?: string }).hint ?? 'pass --model scripted:<path to a JSON script> (see docs/script-format.md)')];
      }
    }
    case 'openai-responses':
      return [failed('model', `${spec}: the openai-responses adapter is not built yet`, 'use --model openai:<model> (Chat Completions) or scripted:<file.json>')];
    case 'openai':
      if (baseUrl !== null && !/^https?:\/\/\S+$/.test(baseUrl)) {
        return [failed('model', `base URL "${baseUrl}" is not an http(s) URL`, 'pass --base-url http://host:port/v1 (or set OPENAI_BASE_URL)')];
      }
      return probeOpenAI(parsed.model, baseUrl ?? 'https://api.openai.com/v1', apiKey);
  }
}

const PROBE_TOOL = 'doctor_echo';

/** Lists the models, then a streamed one-tool probe and a structured-output probe. */
async function probeOpenAI(model: string, baseURL: string, apiKey: string): Promise<CheckResult[]> {
  const client = new OpenAI({
    // A local compatible server may take no key; the client needs a non-empty one.
    apiKey: apiKey || 'none',
    // every option the SDK would read from the environment is given: config loading owns it
    baseURL,
    organization: null,
    project: null,
    webhookSecret: null,
    maxRetries: 0,
    timeout: REQUEST_TIMEOUT_MS,
    logLevel: 'off',
  });
  const where = displayUrl(baseURL);
  const failure = (check: string, err: unknown): CheckResult => endpointFailure(check, err, where, apiKey !== '');

  const results: CheckResult[] = [];
  try {
    const page = await within(client.models.list({ signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) }), REQUEST_TIMEOUT_MS + 1_000, `GET ${where}/models`);
    const ids = page.data.map((m) => m.id);
    if (ids.includes(model)) {
      results.push(ok('model', `${where} answers; it lists ${ids.length} model${ids.length === 1 ? '' : 's'}, ${model} among them`));
    } else {
      const some = ids.slice(0, 5).join(', ') + (ids.length > 5 ? ', ...' : '');
      results.push(warning('model', `${where} answers but does not list ${model} (it lists ${ids.length === 0 ? 'none' : some})`,
        ids.length === 0 ? 'check the model name with the server (some servers serve one model under any name)' : `pass --model openai:<one of: ${some}>`));
    }
  } catch (err) {
    // the probes would fail the same way: one line says it
    return [failure('model', err)];
  }

  results.push(...(await toolProbe(client, model, failure)));
  results.push(await structuredProbe(client, model, failure));
  return results;
}

async function toolProbe(client: OpenAI, model: string, failure: (check: string, err: unknown) => CheckResult): Promise<CheckResult[]> {
  const signal = AbortSignal.timeout(REQUEST_TIMEOUT_MS * 2);
  const calls: string[] = [];
  let usage: { prompt_tokens: number; completion_tokens: number } | null = null;
  let finish: string | null = null;
  try {
    await within((async () => {
      const stream = await client.chat.completions.create({
        model,
        messages: [
          { role: 'system', content: `You are a connectivity probe. Call the tool ${PROBE_TOOL} once with {"word": "ping"} and nothing else.` },
          { role: 'user', content: `Call ${PROBE_TOOL} now.` },
        ],
        tools: [{
          type: 'function',
          function: {
            name: PROBE_TOOL,
            description: 'Echoes a word back; used to check that tool calls work.',
            parameters: { type: 'object', properties: { word: { type: 'string' } }, required: ['word'] },
          },
        }],
        stream: true,
        stream_options: { include_usage: true },
      }, { signal });
      for await (const chunk of stream) {
        if (chunk.usage) usage = chunk.usage;
        const choice = chunk.choices?.find((c) => (c.index ?? 0) === 0);
        for (const tc of choice?.delta?.tool_calls ?? []) if (tc.function?.name) calls.push(tc.function.name);
        if (choice?.finish_reason) finish = choice.finish_reason;
      }
    })(), REQUEST_TIMEOUT_MS * 2 + 1_000, 'the tool-call probe');
  } catch (err) {
    return [failure('model tool call', err)];
  }
  const results: CheckResult[] = [];
  if (calls.includes(PROBE_TOOL)) {
    results.push(ok('model tool call', `${model} called ${PROBE_TOOL} in a streamed response`));
  } else {
    results.push(warning('model tool call',
      calls.length > 0 ? `${model} called ${calls.join(', ')} instead of ${PROBE_TOOL}` : `${model} answered without a tool call (finish reason ${finish ?? 'none'})`,
      'agents need tool calls: use a model that makes them (llama.cpp needs --jinja; vLLM --enable-auto-tool-choice with a --tool-call-parser)'));
  }
  const u = usage as { prompt_tokens: number; completion_tokens: number } | null;
  results.push(u
    ? ok('model usage', `usage came in the stream (${u.prompt_tokens} in, ${u.completion_tokens} out)`)
    : warning('model usage', 'no usage in the stream (stream_options.include_usage was asked for)', 'nothing breaks: token usage will be estimated; a server that reports usage gives exact counts'));
  return results;
}

async function structuredProbe(client: OpenAI, model: string, failure: (check: string, err: unknown) => CheckResult): Promise<CheckResult> {
  const check = 'model structured output';
  let content: string | null;
  try {
    const res = await within(client.chat.completions.create({
      model,
      messages: [
        { role: 'system', content: 'You are a connectivity probe. Answer with the JSON object {"ok": true}.' },
        { role: 'user', content: 'Is this endpoint working?' },
      ],
      response_format: {
        type: 'json_schema',
        json_schema: {
          name: 'doctor_probe',
          strict: true,
          schema: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'], additionalProperties: false },
        },
      },
    }, { signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) }), REQUEST_TIMEOUT_MS + 1_000, 'the structured-output probe');
    content = res.choices?.[0]?.message?.content ?? null;
  } catch (err) {
    if (err instanceof APIError && !(err instanceof APIConnectionError) && err.status !== undefined && err.status >= 400 && err.status < 500 && err.status !== 401 && err.status !== 403) {
      return warning(check, `the server refused response_format json_schema (${err.status}: ${oneLine(err.message)})`,
        'structured output is unavailable with this server or model; runs that do not ask for it are unaffected');
    }
    return failure(check, err);
  }
  let value: unknown;
  try {
    value = JSON.parse(content ?? '');
  } catch {
    return warning(check, `the answer is not JSON (${JSON.stringify(oneLine(content ?? '').slice(0, 60))}): the server may ignore response_format`,
      'structured output is unreliable with this server or model; llama.cpp and vLLM need a build with JSON-schema guided decoding');
  }
  const fits = typeof value === 'object' && value !== null && typeof (value as { ok?: unknown }).ok === 'boolean';
  return fits
    ? ok(check, 'the answer was valid JSON matching the schema')
    : warning(check, 'the answer was JSON that does not match the schema', 'structured output is not enforced by this server; validate answers (actorloop does)');
}

/** What went wrong talking to the endpoint, and the fix: the URL, the key, or the server. */
function endpointFailure(check: string, err: unknown, where: string, keySet: boolean): CheckResult {
  const urlFix = 'check --base-url (or OPENAI_BASE_URL): the server must be running and the URL end in /v1';
  if (err instanceof APIConnectionTimeoutError) return failed(check, `${where} did not answer within ${REQUEST_TIMEOUT_MS / 1000} s`, urlFix);
  if (err instanceof APIConnectionError) return failed(check, `cannot reach ${where}: ${causeChain(err)}`, urlFix);
  if (err instanceof APIError) {
    const status = err.status;
    const text = oneLine(err.message);
    if (status === 401 || status === 403) {
      return failed(check, `${where} refused the credentials (${text})`,
        keySet ? 'check OPENAI_API_KEY: it is set but the server does not accept it' : 'set OPENAI_API_KEY to a key this server accepts');
    }
    if (status === 404) return failed(check, `${where} answered 404 (${text})`, `${urlFix}; and that the model exists (pass --model openai:<a listed model>)`);
    return failed(check, `${where} answered ${status ?? 'an error'} (${text})`, 'check the server log; then --base-url and --model');
  }
  return failed(check, `${where}: ${messageOf(err)}`, urlFix);
}

/** A base URL without any user:password in it. */
function displayUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.username || u.password) {
      u.username = '***';
      u.password = '';
    }
    return u.toString().replace(/\/$/, '');
  } catch {
    return url;
  }
}

function causeChain(err: unknown): string {
  const parts: string[] = [];
  let e: unknown = err;
  for (let depth = 0; e instanceof Error && depth < 4; depth++) {
    const code = (e as NodeJS.ErrnoException).code;
    const text = e.message.replace(/\.$/, '');
    parts.push(code && !text.includes(code) ? `${text} (${code})` : text);
    e = e.cause;
  }
  return oneLine(parts.join(': ') || String(err));
}

function oneLine(text: string): string {
  const t = text.replace(/\s+/g, ' ').trim();
  return t.length > 200 ? `${t.slice(0, 197)}...` : t;
}
