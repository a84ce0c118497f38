import type { Out } from './output.js';

// Lines laid out in columns are cut to the terminal's width when a person reads them there: a
// line wider than the terminal wraps and breaks the columns under it (and a redraw in place would
// move up too few rows). A pipe gets the full text, whatever its reader's width.

/** The width of `out`'s terminal in columns, or null when stdout is not a terminal (or does not say). */
export function terminalColumns(out: Out): number | null {
  if (out.stdout.isTTY !== true) return null;
  const columns = (out.stdout as { columns?: number }).columns;
  return columns !== undefined && columns > 1 ? columns : null;
}

/** `text` cut to `width` characters, its last one an ellipsis when anything was cut. */
export function cut(text: string, width: number): string {
  return text.length > width ? `${text.slice(0, Math.max(0, width - 1))}…` : text;
}

/**
 * `line` as it fits a terminal of `columns` (null: not a terminal, the full line). One column is
 * kept free: a line exactly as wide as the terminal puts the cursor on the next row by itself.
 */
export function fitLine(line: string, columns: number | null): string {
  return columns === null ? line : cut(line, columns - 1);
}
