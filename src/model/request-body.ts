import { createHash, type Hash } from 'node:crypto';
import type { HistoryItem } from '../protocol/history.js';
import type { BlobDelta } from '../protocol/blob-delta.js';

/**
 * A request body whose one array (the messages, the input items) grows at its end from one step
 * of a turn to the next, while everything around it stays: keys before it, elements before the
 * history's (a system message), keys after it. Keys are written in order; undefined values are
 * left out, as `JSON.stringify` leaves them out.
 */
export interface BodyLayout {
  head: Record<string, unknown>;
  key: string;
  lead: unknown[];
  tail: Record<string, unknown>;
}

/** A history item as the wire's array elements (one item may be several, or none). */
export type WireItems = (item: HistoryItem) => unknown[];

/** The body, written at once: exactly `JSON.stringify` of head, the array and tail in that order. */
export function writeBody(layout: BodyLayout, items: readonly HistoryItem[], wire: WireItems): string {
  const body: Record<string, unknown> = Object.assign({}, layout.head);
  body[layout.key] = [...layout.lead, ...items.flatMap(wire)];
  return JSON.stringify(Object.assign(body, layout.tail));
}

interface Written {
  /** The body up to the array's last element so far. */
  open: string;
  /** The history items in it, by identity. */
  items: HistoryItem[];
  /** The text after the head, one string per item (joined with commas). */
  text: string;
  /** sha256 of `open + text`, to be continued. */
  hash: Hash;
  /** Array elements written so far (lead and items'): whether the next one needs a comma. */
  elements: number;
  /** UTF-8 bytes of `open + text`. */
  bytes: number;
  /** The digest of the body written with them. */
  digest: string;
}

/** A body as `GrowingBody` writes it: the bytes, their digest and size, and what it continues. */
export interface WrittenBody {
  body: string;
  digest: string;
  /** UTF-8 length of `body`. */
  bytes: number;
  /** When the last body's bytes up to the end of its array are this one's too: that body, and the rest. */
  delta?: BlobDelta;
}

/**
 * Writes the bodies of one turn's requests and their digests, doing the work for the items a step
 * added and not for the whole history again (that made preparing a request quadratic in a turn's
 * length: a tenth of a 20-step turn's CPU, most of a long one's). Each item's wire JSON is kept
 * while the item lives, and the sha256 state after the last body's array is continued (a copy,
 * `Hash.copy`). The bytes are exactly `writeBody`'s: a test compares them on random histories.
 */
export class GrowingBody {
  private readonly json = new WeakMap<HistoryItem, string>();
  private last: Written | null = null;

  constructor(private readonly wire: WireItems) {}

  private itemJson(item: HistoryItem): string {
    let s = this.json.get(item);
    if (s === undefined) {
      s = this.wire(item).map((x) => JSON.stringify(x)).join(',');
      this.json.set(item, s);
    }
    return s;
  }

  /** The body of `items` in `layout`, its `sha256:` digest and size, and what of the last body it continues. */
  write(layout: BodyLayout, items: readonly HistoryItem[]): WrittenBody {
    const headJson = JSON.stringify(layout.head);
    const lead = layout.lead.map((x) => JSON.stringify(x)).join(',');
    const open = `${headJson === '{}' ? '{' : `${headJson.slice(0, -1)},`}${JSON.stringify(layout.key)}:[${lead}`;
    const tailJson = JSON.stringify(layout.tail);
    const close = tailJson === '{}' ? ']}' : `],${tailJson.slice(1)}`;

    const prev = this.last;
    let from = 0;
    let hash: Hash;
    let text = '';
    let elements = layout.lead.length;
    let bytes: number;
    const continues = prev !== null && prev.open === open && prev.items.length <= items.length && prev.items.every((x, i) => x === items[i]);
    if (continues) {
      from = prev.items.length;
      hash = prev.hash.copy();
      text = prev.text;
      elements = prev.elements;
      bytes = prev.bytes;
    } else {
      hash = createHash('sha256').update(open);
      bytes = Buffer.byteLength(open);
    }
    // what this body adds to the last one's bytes up to the end of its array
    let added = '';
    for (let i = from; i < items.length; i++) {
      const s = this.itemJson(items[i]!);
      if (s === '') continue;
      const piece = elements > 0 ? `,${s}` : s;
      hash.update(piece);
      added += piece;
      elements += 1;
    }
    text += added;
    const shared = bytes;
    bytes += Buffer.byteLength(added);
    const kept = hash.copy();
    const digest = `sha256:${hash.update(close).digest('hex')}`;
    const written: WrittenBody = { body: open + text + close, digest, bytes: bytes + Buffer.byteLength(close) };
    if (continues) written.delta = { base: prev.digest, bytes: shared, suffix: added + close };
    this.last = { open, items: items.slice(), text, hash: kept, elements, bytes, digest };
    return written;
  }
}
