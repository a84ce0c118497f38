// Every relative link of the user documentation resolves: a file that exists, and an anchor that
// a heading of the target file produces under GitHub's slug rules. Pages move between README.md
// and docs/, and a link left pointing at the old place is a dead end for the reader.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { expect, test } from 'vitest';
import { REPO_ROOT } from './helpers/cli.js';

/** The markdown files users read: the README, the pages under docs/, the benchmarks' README. */
function documents(root: string): string[] {
  const docs = join(root, 'docs');
  const pages = existsSync(docs) ? readdirSync(docs).filter((f) => f.endsWith('.md')).map((f) => join(docs, f)) : [];
  return [join(root, 'README.md'), ...pages, join(root, 'bench', 'README.md')].filter((f) => existsSync(f));
}

/** The text outside fenced code blocks and inline code, where a `[x](y)` is a link. */
function prose(markdown: string): string {
  let fenced = false;
  const lines: string[] = [];
  for (const line of markdown.split('\n')) {
    if (/^\s*(```|~~~)/.test(line)) {
      fenced = !fenced;
      lines.push('');
      continue;
    }
    lines.push(fenced ? '' : line.replace(/`[^`\n]*`/g, '``'));
  }
  return lines.join('\n');
}

/** GitHub's anchor for a heading: lowercase, punctuation dropped but '-' and '_', spaces to '-'. */
function slug(heading: string): string {
  return heading
    .trim()
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1')
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
    .replace(/ /g, '-');
}

/** The anchors a file's headings produce, a repeated one numbered as GitHub numbers it. */
function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  let fenced = false;
  for (const line of markdown.split('\n')) {
    if (/^\s*(```|~~~)/.test(line)) fenced = !fenced;
    if (fenced) continue;
    const m = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!m) continue;
    const base = slug(m[1]!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

/** Each relative link of the documents under root that leads nowhere, as "file: target (why)". */
function brokenLinks(root: string): string[] {
  const broken: string[] = [];
  const cache = new Map<string, Set<string>>();
  const anchorsOf = (file: string) => {
    if (!cache.has(file)) cache.set(file, anchors(readFileSync(file, 'utf8')));
    return cache.get(file)!;
  };
  for (const file of documents(root)) {
    const text = prose(readFileSync(file, 'utf8'));
    for (const m of text.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
      const target = m[1]!;
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // http:, https:, mailto:
      const [path, anchor] = target.split('#', 2) as [string, string | undefined];
      const dest = path === '' ? file : resolve(dirname(file), decodeURIComponent(path));
      const where = `${relative(root, file)}: ${target}`;
      if (!existsSync(dest)) {
        broken.push(`${where} (no such file)`);
        continue;
      }
      if (anchor !== undefined && dest.endsWith('.md') && !anchorsOf(dest).has(anchor.toLowerCase())) {
        broken.push(`${where} (no heading makes #${anchor})`);
      }
    }
  }
  return broken;
}

test('slugs follow GitHub: lowercase, punctuation dropped, spaces to dashes', () => {
  expect(slug('The inbox: steering, interrupts and questions')).toBe('the-inbox-steering-interrupts-and-questions');
  expect(slug('The gateway (`actorloop serve`)')).toBe('the-gateway-actorloop-serve');
  expect(slug('Script format (`--model scripted:<file.json>`)')).toBe('script-format---model-scriptedfilejson');
  expect(slug('Fan-out: subagents')).toBe('fan-out-subagents');
  expect(slug('snake_case and a→b')).toBe('snake_case-and-ab');
});

test('every relative link and anchor in README.md, docs/ and bench/README.md resolves', () => {
  expect(documents(REPO_ROOT).length).toBeGreaterThan(3);
  expect(brokenLinks(REPO_ROOT)).toEqual([]);
});
