import { parseId, type IdKind } from '../protocol/ids.js';

/**
 * A commander parser for an ID argument or option: the ID is checked (`parseId`) as the command
 * line is read, so a malformed one is one line and exit 2 before any command opens the bus,
 * where it would become a subject or a key.
 */
export function idArgument(kind: IdKind): (text: string) => string {
  return (text) => parseId(kind, text);
}
