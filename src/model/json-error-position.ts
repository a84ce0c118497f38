/** Where JSON text first fails to parse: offset, 1-based line and column, and what was found. */
export interface JsonErrorPosition {
  offset: number;
  line: number;
  column: number;
  /** `unexpected 'x'` or `unexpected end of input`. */
  problem: string;
}

class Fail {
  constructor(readonly at: number) {}
}

const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
const ESCAPES = '"\\/bfnrt';
const HEX4 = /^[0-9a-fA-F]{4}$/;

/**
 * Finds the first syntax error in `text`, or null when it is valid JSON. Node 20's
 * `JSON.parse` messages only sometimes carry a position, so a script error could not point
 * at the fault reliably without this small strict scanner.
 */
export function jsonErrorPosition(text: string): JsonErrorPosition | null {
  let i = 0;
  const fail = (): never => {
    throw new Fail(i);
  };
  const ws = (): void => {
    while (i < text.length && ' \t\n\r'.includes(text[i]!)) i++;
  };
  const str = (): void => {
    i++; // opening quote
    for (;;) {
      const c = text[i];
      if (c === undefined) fail();
      if (c === '"') {
        i++;
        return;
      }
      if (c === '\\') {
        const e = text[i + 1];
        if (e === 'u') {
          if (!HEX4.test(text.slice(i + 2, i + 6))) fail();
          i += 6;
        } else if (e !== undefined && ESCAPES.includes(e)) i += 2;
        else {
          i++;
          fail();
        }
        continue;
      }
      if (c!.charCodeAt(0) < 0x20) fail();
      i++;
    }
  };
  const container = (close: '}' | ']'): void => {
    i++;
    ws();
    if (text[i] === close) {
      i++;
      return;
    }
    for (;;) {
      ws();
      if (close === '}') {
        if (text[i] !== '"') fail();
        str();
        ws();
        if (text[i] !== ':') fail();
        i++;
      }
      value();
      ws();
      if (text[i] === ',') {
        i++;
        continue;
      }
      if (text[i] === close) {
        i++;
        return;
      }
      fail();
    }
  };
  const value = (): void => {
    ws();
    const c = text[i];
    if (c === '{') return container('}');
    if (c === '[') return container(']');
    if (c === '"') return str();
    if (c === '-' || (c !== undefined && c >= '0' && c <= '9')) {
      NUMBER.lastIndex = i;
      if (!NUMBER.test(text)) fail();
      i = NUMBER.lastIndex;
      return;
    }
    for (const literal of ['true', 'false', 'null']) {
      if (text.startsWith(literal, i)) {
        i += literal.length;
        return;
      }
    }
    fail();
  };

  try {
    value();
    ws();
    if (i < text.length) fail();
    return null;
  } catch (err) {
    if (!(err instanceof Fail)) throw err;
    return locate(text, err.at);
  }
}

function locate(text: string, offset: number): JsonErrorPosition {
  const before = text.slice(0, offset);
  const line = before.split('\n').length;
  const column = offset - (before.lastIndexOf('\n') + 1) + 1;
  const found = text[offset];
  const problem = found === undefined ? 'unexpected end of input' : `unexpected ${JSON.stringify(found)}`;
  return { offset, line, column, problem };
}
