import * as crypto from 'node:crypto';

/**
 * JSON with object keys sorted at every level (array-index keys first, as a JS object orders
 * them), so equal values give equal bytes. Written in one
 * pass, as `JSON.stringify` of a key-sorted copy would write it (the copy cost an allocation per
 * object and array, on every plan digest and idempotency key): undefined and function values are
 * left out of objects and written `null` in arrays, non-finite numbers are `null`, and any other
 * object (a Date, a Map) is a plain object of its own enumerable keys.
 */
export function canonicalJson(value: unknown): string {
  return write(value, false) as string;
}

/**
 * The keys in the order the key-sorted copy had them: a JS object lists array-index keys first,
 * in numeric order, then the others in the order they were added (here: sorted). Digests made
 * with that order are in logs and approvals, so it stays.
 */
function orderedKeys(value: object): string[] {
  const keys = Object.keys(value).sort();
  let indices: string[] | null = null;
  for (const k of keys) if (isIndex(k)) (indices ??= []).push(k);
  if (indices === null) return keys;
  indices.sort((x, y) => Number(x) - Number(y));
  return [...indices, ...keys.filter((k) => !isIndex(k))];
}

function isIndex(key: string): boolean {
  const c = key.charCodeAt(0);
  // most keys start with a letter: no regex for them
  if (!(c >= 48 && c <= 57)) return false;
  return /^(?:0|[1-9]\d*)$/.test(key) && Number(key) < 4_294_967_295;
}

/** One value as canonical JSON; undefined when it has none (undefined, a function, a symbol). */
function write(value: unknown, inArray: boolean): string | undefined {
  if (value === null) return 'null';
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return JSON.stringify(value);
    case 'number':
      return Number.isFinite(value) ? JSON.stringify(value) : 'null';
    case 'bigint':
      // as JSON.stringify does
      return JSON.stringify(value);
    case 'object': {
      if (Array.isArray(value)) {
        let out = '[';
        for (let i = 0; i < value.length; i++) {
          if (i > 0) out += ',';
          out += write(value[i], true) ?? 'null';
        }
        return `${out}]`;
      }
      const keys = orderedKeys(value);
      let out = '{';
      let first = true;
      for (const key of keys) {
        const v = write((value as Record<string, unknown>)[key], false);
        if (v === undefined) continue;
        out += `${first ? '' : ','}${JSON.stringify(key)}:${v}`;
        first = false;
      }
      return `${out}}`;
    }
    default:
      return inArray ? 'null' : undefined;
  }
}

/** `sha256:<hex>` of a string or bytes: the name of a content-addressed blob. */
export function sha256Digest(content: string | Uint8Array): string {
  return `sha256:${sha256Hex(content)}`;
}

// One-shot `crypto.hash` (Node ≥ 20.12) makes no Hash object: about half the cost for the short
// inputs hashed on every step (plan digests, idempotency keys, derived IDs). Older 20.x falls back.
const oneShot = (crypto as { hash?: (alg: string, data: string | Uint8Array, enc: string) => unknown }).hash;

/** SHA-256 of a string (as UTF-8) or bytes, as lowercase hex. */
export function sha256Hex(content: string | Uint8Array): string {
  return oneShot ? (oneShot('sha256', content, 'hex') as string) : crypto.createHash('sha256').update(content).digest('hex');
}

/** SHA-256 of a string (as UTF-8), as bytes. */
export function sha256Bytes(content: string): Buffer {
  return oneShot ? (oneShot('sha256', content, 'buffer') as Buffer) : crypto.createHash('sha256').update(content).digest();
}
