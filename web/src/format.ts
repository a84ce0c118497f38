import { costText } from '../../src/client/event-text.js';

// Numbers as the CLI writes them (thousands separated, `cost unknown` never `0`), and times and
// durations an operator reads at a glance.

export { costText };

/** `18,866 tok`. */
export function tokensText(n: number): string {
  return `${n.toLocaleString('en-US')} tok`;
}

/** `850 ms`, `4.2 s`, `3 min 12 s`, `2 h 5 min`. */
export function durationText(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s < 10 ? s.toFixed(1) : Math.round(s)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${Math.round(s - m * 60)} s`;
  const h = Math.floor(m / 60);
  return `${h} h ${m - h * 60} min`;
}

/** A moment as `2026-12-02 07:21:05` (local time: the operator's clock), or `—`. */
export function timeText(iso: string | null | undefined): string {
  if (!iso) return '—';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  const p = (n: number): string => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

/** The first line of a text, at most `max` characters. */
export function firstLine(text: string | null | undefined, max = 120): string {
  if (!text) return '';
  const line = text.split('\n', 1)[0]!.trim();
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}
