import { InvalidArgumentError, type Command } from 'commander';
import { Objm } from '@nats-io/obj';
import { openBus } from '../../bus/connection.js';
import { BLOB_BUCKET } from '../../bus/subjects.js';
import { byteSize } from '../../client/tool-summary.js';
import { loadConfig, type EffectiveConfig } from '../../config/config.js';
import { ActorloopError, StoreError, STORE_CODES } from '../../protocol/errors.js';
import { collectBlobGarbage, jetStreamLogScan, type BlobBucket, type BlobGcReport } from '../../store/blob-gc.js';
import type { CommandKit } from '../command-kit.js';
import { EXIT } from '../exit-codes.js';
import type { Out } from '../output.js';
import { busOptions, createLogger } from '../runtime.js';

/** How long a blob no log names is kept by default: a commit in flight names it soon. */
export const DEFAULT_GC_GRACE_MS = 60 * 60_000;

const UNITS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** `--grace`: a whole number with a unit (`90s`, `30m`, `1h`, `2d`); `0` keeps nothing for its age. */
export function parseGrace(value: string): number {
  const m = /^(\d+)(ms|s|m|h|d)?$/.exec(value.trim());
  if (!m || (m[2] === undefined && m[1] !== '0')) {
    throw new InvalidArgumentError(`--grace takes a duration such as 90s, 30m, 1h or 2d (or 0), got "${value}"`);
  }
  return Number(m[1]) * UNITS[m[2] ?? 'ms']!;
}

/** Adds `actorloop gc` to the program. */
export function registerGcCommand(program: Command, kit: CommandKit): Command {
  const { common, flags, act, out } = kit;
  return common(program.command('gc'))
    .description('remove from the blob store what no log names: blobs older than --grace that no retained log (nor a continuation it names) needs')
    .option('--grace <duration>', 'keep every blob younger than this, named or not: it may belong to a commit in flight (default 1h)', parseGrace)
    .option('--dry-run', 'list what would be removed, with sizes; remove nothing')
    .option('--json', 'one JSON object: what was (or would be) removed, what was kept')
    .action(act(async (o) => gcCommand(o, loadConfig(flags(o)), out)));
}

/**
 * `actorloop gc`: reads every retained log, keeps every blob they name (and the base chain of a
 * continuation) and every blob younger than the grace period, and removes the rest from the
 * blob bucket. It deletes, so it logs in as a host.
 */
export async function gcCommand(
  opts: { grace?: number; dryRun?: boolean; json?: boolean }, config: EffectiveConfig, out: Out,
): Promise<number> {
  const logger = createLogger(config);
  const bus = await openBus(busOptions(config, logger, 'actorloop-gc', 'host', false));
  try {
    const graceMs = opts.grace ?? DEFAULT_GC_GRACE_MS;
    const dryRun = opts.dryRun === true;
    const bucket = await openBucket(bus.js);
    if (!bucket) {
      if (opts.json) out.stdout.write(`${JSON.stringify({ dryRun, bucket: null, removed: [], removedBytes: 0 })}\n`);
      else out.stdout.write(`no blob bucket (${BLOB_BUCKET}) on this server: nothing to remove\n`);
      return EXIT.completed;
    }
    const report = await collectBlobGarbage(bucket, jetStreamLogScan(bus.js, bus.jsm), { graceMs, dryRun }).catch((err: unknown) => {
      throw err instanceof ActorloopError ? err : new StoreError(STORE_CODES.blobGcFailed, `gc stopped: ${(err as Error).message}`, { cause: err });
    });
    print(report, { dryRun, graceMs, json: opts.json === true }, out);
    return EXIT.completed;
  } finally {
    await bus.close();
  }
}

/** The blob bucket, or null when this server has none (no host wrote a blob to it yet). */
async function openBucket(js: ConstructorParameters<typeof Objm>[0]): Promise<BlobBucket | null> {
  try {
    return await new Objm(js).open(BLOB_BUCKET);
  } catch (err) {
    if ((err as Error).message === 'object store not found') return null;
    throw new StoreError(STORE_CODES.blobGcFailed, `cannot open the blob bucket ${BLOB_BUCKET}: ${(err as Error).message}`, { cause: err });
  }
}

function print(r: BlobGcReport, o: { dryRun: boolean; graceMs: number; json: boolean }, out: Out): void {
  if (o.json) {
    out.stdout.write(`${JSON.stringify({
      dryRun: o.dryRun, graceMs: o.graceMs, bucket: BLOB_BUCKET,
      removed: r.removed.map(({ name, size, mtime }) => ({ name, size, mtime })), removedBytes: r.removedBytes,
      keptNamed: r.keptNamed, keptYoung: r.keptYoung, missing: r.missing, commits: r.commits, events: r.events,
    })}\n`);
    return;
  }
  for (const b of r.removed) {
    out.stdout.write(`${o.dryRun ? 'would remove' : 'removed'} ${b.name}  ${byteSize(b.size)}  written ${b.mtime.slice(0, 19).replace('T', ' ')}\n`);
  }
  const count = `${r.removed.length} blob${r.removed.length === 1 ? '' : 's'} (${byteSize(r.removedBytes)})`;
  out.stdout.write(
    `${o.dryRun ? `would remove ${count}; nothing was removed` : `removed ${count}`}; kept ${r.keptNamed} named by the logs ` +
      `(${r.commits} commit${r.commits === 1 ? '' : 's'} read) and ${r.keptYoung} younger than ${graceText(o.graceMs)}\n`,
  );
  if (r.missing.length > 0) {
    const shown = r.missing.slice(0, 3).join(', ');
    out.stderr.write(
      `actorloop: ${r.missing.length} blob${r.missing.length === 1 ? '' : 's'} the logs name ${r.missing.length === 1 ? 'is' : 'are'} not in the blob bucket ` +
        `(${shown}${r.missing.length > 3 ? ', …' : ''}): the log alone cannot rebuild ${r.missing.length === 1 ? 'it' : 'them'}, and an agent that needs one stops with store.blob_missing\n`,
    );
  }
}

function graceText(ms: number): string {
  for (const [unit, size] of [['d', UNITS['d']!], ['h', UNITS['h']!], ['m', UNITS['m']!], ['s', UNITS['s']!]] as const) {
    if (ms >= size && ms % size === 0) return `${ms / size}${unit}`;
  }
  return `${ms}ms`;
}
