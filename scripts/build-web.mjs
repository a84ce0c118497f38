// Builds the visualizer page (web/) into dist/web: index.html, one JS bundle, one CSS file. The
// page is served by the gateway and works offline: nothing in it is fetched from elsewhere.
import { build } from 'esbuild';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const out = join(root, 'dist', 'web');

/**
 * The projection fold is bundled for the browser (design §11). Its protocol imports bring
 * `node:crypto` along for ID making and digests, which the fold never calls: a stand-in that
 * throws says so if that ever changes.
 */
const nodeCryptoStandIn = {
  name: 'node-crypto-stand-in',
  setup(b) {
    b.onResolve({ filter: /^node:crypto$/ }, () => ({ path: 'node:crypto', namespace: 'stand-in' }));
    b.onLoad({ filter: /.*/, namespace: 'stand-in' }, () => ({
      contents: 'const no = () => { throw new Error("node:crypto is not in the browser: the page folds events, it makes no IDs or digests"); };\n' +
        'export const randomFillSync = no, createHash = no, hash = no, randomBytes = no, randomUUID = no;\nexport default { randomFillSync, createHash, hash, randomBytes, randomUUID };\n',
      loader: 'js',
    }));
  },
};

/**
 * The same protocol modules make a few byte buffers at load (ID prefixes); a browser has no
 * `Buffer`, so the bundle carries a stand-in for the two calls they make at load, as bytes.
 */
const bufferStandIn = 'const Buffer = { alloc: (n) => new Uint8Array(n), from: (s) => Uint8Array.from(String(s), (c) => c.charCodeAt(0) & 255) };';

await mkdir(out, { recursive: true });
const result = await build({
  entryPoints: { app: join(root, 'web', 'src', 'main.tsx') },
  bundle: true,
  format: 'esm',
  platform: 'browser',
  target: 'es2022',
  jsx: 'automatic',
  jsxImportSource: 'preact',
  minify: true,
  sourcemap: false,
  outdir: out,
  plugins: [nodeCryptoStandIn],
  banner: { js: bufferStandIn },
  logLevel: 'warning',
  metafile: true,
});
const html = (await readFile(join(root, 'web', 'index.html'), 'utf8'));
await writeFile(join(out, 'index.html'), html);
const bytes = Object.entries(result.metafile.outputs).map(([f, o]) => `${f.replace(`${root}/`, '')} ${o.bytes} B`);
process.stdout.write(`web: ${bytes.join(', ')}\n`);
