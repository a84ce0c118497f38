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
 * `node:crypto` along: the fold makes no random IDs (a stand-in that throws says so if that ever
 * changes), but it derives one: a job's ID from the `start_job` call that started it, a SHA-256.
 * The browser's own SHA-256 is asynchronous, so the stand-in carries a small synchronous one for
 * `createHash('sha256')` (the digests of a fold are of short strings).
 */
const SHA256 = `
const K = new Uint32Array([0x428a2f98,0x71374491,0xb5c0fbcf,0xe9b5dba5,0x3956c25b,0x59f111f1,0x923f82a4,0xab1c5ed5,0xd807aa98,0x12835b01,0x243185be,0x550c7dc3,0x72be5d74,0x80deb1fe,0x9bdc06a7,0xc19bf174,0xe49b69c1,0xefbe4786,0x0fc19dc6,0x240ca1cc,0x2de92c6f,0x4a7484aa,0x5cb0a9dc,0x76f988da,0x983e5152,0xa831c66d,0xb00327c8,0xbf597fc7,0xc6e00bf3,0xd5a79147,0x06ca6351,0x14292967,0x27b70a85,0x2e1b2138,0x4d2c6dfc,0x53380d13,0x650a7354,0x766a0abb,0x81c2c92e,0x92722c85,0xa2bfe8a1,0xa81a664b,0xc24b8b70,0xc76c51a3,0xd192e819,0xd6990624,0xf40e3585,0x106aa070,0x19a4c116,0x1e376c08,0x2748774c,0x34b0bcb5,0x391c0cb3,0x4ed8aa4a,0x5b9cca4f,0x682e6ff3,0x748f82ee,0x78a5636f,0x84c87814,0x8cc70208,0x90befffa,0xa4506ceb,0xbef9a3f7,0xc67178f2]);
function sha256(bytes) {
  const n = bytes.length, total = ((n + 9 + 63) >> 6) << 6, m = new Uint8Array(total);
  m.set(bytes); m[n] = 0x80;
  const dv = new DataView(m.buffer); dv.setUint32(total - 4, (n * 8) >>> 0); dv.setUint32(total - 8, Math.floor(n / 0x20000000));
  const h = new Uint32Array([0x6a09e667,0xbb67ae85,0x3c6ef372,0xa54ff53a,0x510e527f,0x9b05688c,0x1f83d9ab,0x5be0cd19]), w = new Uint32Array(64);
  const r = (x, k) => (x >>> k) | (x << (32 - k));
  for (let o = 0; o < total; o += 64) {
    for (let i = 0; i < 16; i++) w[i] = dv.getUint32(o + i * 4);
    for (let i = 16; i < 64; i++) {
      const s0 = r(w[i-15], 7) ^ r(w[i-15], 18) ^ (w[i-15] >>> 3), s1 = r(w[i-2], 17) ^ r(w[i-2], 19) ^ (w[i-2] >>> 10);
      w[i] = (w[i-16] + s0 + w[i-7] + s1) >>> 0;
    }
    let [a, b, c, d, e, f, g, hh] = h;
    for (let i = 0; i < 64; i++) {
      const t1 = (hh + (r(e, 6) ^ r(e, 11) ^ r(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i]) >>> 0;
      const t2 = ((r(a, 2) ^ r(a, 13) ^ r(a, 22)) + ((a & b) ^ (a & c) ^ (b & c))) >>> 0;
      hh = g; g = f; f = e; e = (d + t1) >>> 0; d = c; c = b; b = a; a = (t1 + t2) >>> 0;
    }
    h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += hh;
  }
  const out = new Uint8Array(32), ov = new DataView(out.buffer);
  for (let i = 0; i < 8; i++) ov.setUint32(i * 4, h[i]);
  return out;
}
export const createHash = (alg) => {
  if (alg !== 'sha256') no();
  const parts = [];
  const hasher = {
    update(c) { parts.push(typeof c === 'string' ? new TextEncoder().encode(c) : c); return hasher; },
    digest(enc) {
      const all = new Uint8Array(parts.reduce((s, p) => s + p.length, 0));
      let at = 0; for (const p of parts) { all.set(p, at); at += p.length; }
      const d = sha256(all);
      return enc === 'hex' ? Array.from(d, (x) => x.toString(16).padStart(2, '0')).join('') : d;
    },
  };
  return hasher;
};
`;
const nodeCryptoStandIn = {
  name: 'node-crypto-stand-in',
  setup(b) {
    b.onResolve({ filter: /^node:crypto$/ }, () => ({ path: 'node:crypto', namespace: 'stand-in' }));
    b.onLoad({ filter: /.*/, namespace: 'stand-in' }, () => ({
      contents: 'const no = () => { throw new Error("node:crypto is not in the browser: the page folds events, it makes no random IDs"); };\n' +
        SHA256 +
        'export const randomFillSync = no, randomBytes = no, randomUUID = no;\nexport const hash = undefined;\nexport default { randomFillSync, createHash, hash, randomBytes, randomUUID };\n',
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
