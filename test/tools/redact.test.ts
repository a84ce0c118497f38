import { createHash, generateKeyPairSync, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { createRedactor, MIN_SECRET_VALUE_CHARS } from '../../src/tools/redact.js';

const r = createRedactor();
const redact = (text: string): string => r.redact(text).text;

// Fake credentials in the shapes real ones have; none of them is live.
const OPENAI = 'sk-abcdEFGH1234ijklMNOP5678qrstUVWX9012yzab';
const OPENAI_PROJECT = 'sk-proj-Ab3dEf6hIj9lMn2pQr5tUv8xYz1_aB4dE7gH0jK3mN6pQ9sT2vW5yZ8-bC1eF4';
const GITHUB = 'ghp_0123456789abcdefghijABCDEFGHIJ012345';
const JWT = 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U';

describe('createRedactor: secret patterns', () => {
  it.each([
    ['OpenAI key', `key: ${OPENAI} end`, 'key: [REDACTED:openai_key] end'],
    ['OpenAI project key', `OPENAI=${OPENAI_PROJECT}`, 'OPENAI=[REDACTED:openai_key]'],
    ['Anthropic key', 'sk-ant-api03-abcdEFGH1234ijklMNOP5678', '[REDACTED:openai_key]'],
    ['AWS access key ID', 'id AKIAIOSFODNN7EXAMPLE, session ASIAY34FZKBOKMUTVV7A', 'id [REDACTED:aws_access_key], session [REDACTED:aws_access_key]'],
    ['AWS secret key (credentials file)', 'aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY', 'aws_secret_access_key = [REDACTED:aws_secret_key]'],
    ['AWS secret key (env)', 'AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY', 'AWS_SECRET_ACCESS_KEY=[REDACTED:aws_secret_key]'],
    ['AWS secret key (CLI JSON)', '"SecretAccessKey": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",', '"SecretAccessKey": "[REDACTED:aws_secret_key]",'],
    ['Authorization: Bearer', 'Authorization: Bearer abc123.def456-ghi_789', 'Authorization: Bearer [REDACTED:bearer]'],
    ['Authorization: Basic', 'curl -H "Authorization: Basic dXNlcjpwYXNzd29yZDEy"', 'curl -H "Authorization: Basic [REDACTED:authorization]"'],
    ['bare bearer', 'using bearer 0123456789abcdef0123 now', 'using bearer [REDACTED:bearer] now'],
    ['GitHub classic token', `token ${GITHUB}`, 'token [REDACTED:github_token]'],
    ['GitHub OAuth and server tokens', 'gho_0123456789abcdefghijABCDEFGHIJ012345 ghs_0123456789abcdefghijABCDEFGHIJ012345', '[REDACTED:github_token] [REDACTED:github_token]'],
    ['GitHub fine-grained token', 'github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz', '[REDACTED:github_token]'],
    ['Slack token', 'SLACK xoxb-123456789012-abcdefghijKLMN', 'SLACK [REDACTED:slack_token]'],
    ['JWT', `jwt=${JWT}; next`, 'jwt=[REDACTED:jwt]; next'],
    ['env assignment', 'DB_PASSWORD=hunter2\n', 'DB_PASSWORD=[REDACTED:password]\n'],
    ['exported, quoted', 'export API_TOKEN="a b c"', 'export API_TOKEN="[REDACTED:token]"'],
    ['ini assignment runs to the line end', '  password = my pass phrase   \nnext', '  password = [REDACTED:password]   \nnext'],
    ['connection string', 'psql "host=db password=s3cret user=x"', 'psql "host=db password=[REDACTED:password] user=x"'],
    ['query string', 'GET /cb?token=abc123&x=1', 'GET /cb?token=[REDACTED:token]&x=1'],
    ['CLI flag', 'mysql --password=s3cr3t -u root', 'mysql --password=[REDACTED:password] -u root'],
    ['JSON key', '{"client_secret": "abc\\"def", "token_type": "bearer"}', '{"client_secret": "[REDACTED:secret]", "token_type": "bearer"}'],
  ])('%s', (_name, input, expected) => {
    expect(redact(input)).toBe(expected);
  });

  it('redacts a whole PEM private key block, and a block cut before its END line to the end', () => {
    const pem = '-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA3\nq0bX9\n-----END RSA PRIVATE KEY-----';
    expect(redact(`before\n${pem}\nafter`)).toBe('before\n[REDACTED:private_key]\nafter');
    expect(redact('-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA')).toBe('[REDACTED:private_key]');
    expect(redact('-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkq\n-----END PUBLIC KEY-----')).toContain('MIIBIjANBgkq');
  });

  it('counts one redaction for a secret two rules both see', () => {
    expect(r.redact(`GITHUB_TOKEN=${GITHUB}`)).toEqual({ text: 'GITHUB_TOKEN=[REDACTED:github_token]', count: 1 });
    // on a tie the more specific rule names the kind
    expect(r.redact(`Authorization: Bearer ${JWT}`)).toEqual({ text: 'Authorization: Bearer [REDACTED:jwt]', count: 1 });
  });

  it('is idempotent: redacted text has nothing left to redact', () => {
    const once = redact(`A=${OPENAI}\npassword=x1\n${JWT}\nAuthorization: Bearer abc123def456`);
    expect(r.redact(once)).toEqual({ text: once, count: 0 });
  });

  it('reports merged spans for masking', () => {
    const text = `x ${GITHUB} y`;
    expect(r.spans(text)).toEqual([{ start: 2, end: 2 + GITHUB.length, kind: 'github_token' }]);
  });
});

describe('createRedactor: no false positives', () => {
  it.each([
    ['words containing sk-', 'skeleton task-id risk-assessment-for-the-whole-project-plan ask-questions-before-acting'],
    ['a git sha and a UUID', 'commit 3f786850e387550fdab836ed7e6dc881de23001b id 123e4567-e89b-12d3-a456-426614174000'],
    ['prose', 'Enter your password to continue. The bearer of this letter. Authorization: required for admins. Tokens are counted.'],
    ['code', 'const token = getToken();\nself.token = token\nf(token=token, password=password)\ninterface X { token: string }'],
    ['references and non-secret names', 'TOKEN=${GITHUB_TOKEN}\nPASSWORD=%DB_PASS%\nPWD=/home/me\nmax_tokens=100\npassword_file=/etc/pw\nsecret=None'],
    ['base64 and hex blobs', 'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=='],
    ['npm and git output', 'added 120 packages in 3s\n + sk-tools@1.2.0\nHEAD is now at 1a2b3c4 Fix token refresh'],
  ])('%s', (_name, text) => {
    expect(r.redact(text)).toEqual({ text, count: 0 });
  });
});

describe('createRedactor: configured values', () => {
  it('redacts every exact occurrence, longest value first, regex characters literally', () => {
    const cfg = createRedactor(['p4ss.w0rd+(x)', 'hunter2-long-value', 'hunter2-long-value-extended']);
    expect(cfg.redact('a p4ss.w0rd+(x) b p4ssXw0rd+(x)').text).toBe('a [REDACTED:configured] b p4ssXw0rd+(x)');
    expect(cfg.redact('hunter2-long-value-extended and hunter2-long-value')).toEqual({
      text: '[REDACTED:configured] and [REDACTED:configured]',
      count: 2,
    });
  });

  it(`ignores values shorter than ${MIN_SECRET_VALUE_CHARS} characters, which are ordinary words too`, () => {
    const cfg = createRedactor(['admin', 'true', '1234567']);
    expect(cfg.redact('admin says true 1234567').count).toBe(0);
  });
});

describe('createRedactor: large and hostile input', () => {
  const FIVE_MB = 5 * 1024 * 1024;
  const fill = (unit: string): string => unit.repeat(Math.ceil(FIVE_MB / unit.length)).slice(0, FIVE_MB);

  // Each string repeats a prefix some pattern starts with, without ever completing it (or
  // completing it many times): a backtracking pattern would take minutes; these finish.
  it.each([
    ['sk- prefixes', fill('sk-aaaaaaaaaaaaaaaaaa ')],
    ['eyJ without dots', fill('eyJ')],
    ['PEM headers without END', fill('-----BEGIN RSA PRIVATE KEY-----')],
    ['name characters', fill('a.b-c_')],
    ['unclosed quoted values', fill('password="')],
    ['bearer and authorization', fill('Authorization: bearer ')],
    ['an ini line of blanks', `\npassword = a${' '.repeat(FIVE_MB)}b`],
    ['base64 lines', fill('MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\n')],
    ['base64 lines with a tool prefix', fill('key.pem:12: MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIB\n')],
    ['newlines', fill('\n')],
    ['armour lines', fill('-----BEGIN CERTIFICATE-----\n-----END PRIVATE KEY-----\nAb1\n')],
    ['one line without a break', fill('Ab1+')],
  ])('completes on 5 MB of %s', (_name, text) => {
    const out = r.redact(text);
    expect(out.text.length).toBeGreaterThan(0);
  }, 60_000);

  it('works on bytes decoded as text, replacement characters included', () => {
    const bytes = Buffer.concat([Buffer.from([0xff, 0xfe, 0xc3]), Buffer.from(` ${GITHUB} `), Buffer.from([0xe2, 0x82])]);
    const out = r.redact(bytes.toString('utf8'));
    expect(out.count).toBe(1);
    expect(out.text).toContain('[REDACTED:github_token]');
    expect(out.text).toContain('\uFFFD');
  });
});

describe('createRedactor: key bodies without their armour', () => {
  // Keys made at test time, never committed: real bodies in the shapes tools print them.
  const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const pkcs8 = rsa.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const pkcs1 = rsa.privateKey.export({ type: 'pkcs1', format: 'pem' }).toString();
  const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'sec1', format: 'pem' }).toString();
  const spki = rsa.publicKey.export({ type: 'spki', format: 'pem' }).toString();
  // node cannot write OpenSSH's format; its body is base64 of `openssh-key-v1\0` and binary, 70 a line
  const openssh = wrap(Buffer.concat([Buffer.from('openssh-key-v1\0none\0'), randomBytes(1200)]).toString('base64'), 70);
  const fileLines = (pem: string): string[] => pem.trimEnd().split('\n');
  const bodyOf = (pem: string): string[] => fileLines(pem).filter((l) => !l.startsWith('-----'));
  /** `sed -n 'from,top'` (1-based, inclusive). */
  const sed = (pem: string, from: number, to: number): string => fileLines(pem).slice(from - 1, to).join('\n');

  function expectNoBodyLine(out: string, body: string[]): void {
    // every body line at least 8 long: shorter ones could occur by chance in the rest of the text
    for (const line of body.filter((l) => l.length >= 8)) expect(out).not.toContain(line);
  }

  it.each([
    ['PKCS#8 RSA, lines 3-6', () => sed(pkcs8, 3, 6), () => pkcs8],
    ['PKCS#8 RSA, lines 8-12 with the last full line', () => sed(pkcs8, 8, 12), () => pkcs8],
    ['PKCS#1 RSA, lines 10-12', () => sed(pkcs1, 10, 12), () => pkcs1],
    ['EC P-256, its two full lines', () => sed(ec, 2, 3), () => ec],
    ['OpenSSH, four 70-character lines', () => openssh.split('\n').slice(4, 8).join('\n'), () => openssh],
  ])('redacts a slice from the middle: %s', (_name, slice, whole) => {
    const out = r.redact(slice());
    expect(out).toEqual({ text: '[REDACTED:key_block]', count: 1 });
    expectNoBodyLine(out.text, bodyOf(whole()));
  });

  it("keeps read_file's header and redacts the lines it pages", () => {
    const out = redact(`[lines 8-12 of 28 in key.pem; pass offset=13 to read more]\n${sed(pkcs8, 8, 12)}`);
    expect(out).toBe('[lines 8-12 of 28 in key.pem; pass offset=13 to read more]\n[REDACTED:key_block]');
  });

  it('redacts `grep -v -- -----` of a whole key as one block, short last line included', () => {
    const out = r.redact(`${bodyOf(pkcs8).join('\n')}\n`);
    expect(out).toEqual({ text: '[REDACTED:key_block]\n', count: 1 });
    expect(redact(bodyOf(openssh).join('\n'))).toBe('[REDACTED:key_block]');
  });

  it('redacts body lines behind the prefixes of grep -n, rg, search and cat -n', () => {
    const body = bodyOf(pkcs8).slice(2, 6);
    const shapes = [
      body.map((l, i) => `${i + 3}:${l}`),
      body.map((l, i) => `key.pem:${i + 3}:${l}`),
      body.map((l, i) => `key.pem:${i + 3}: ${l}`),
      body.map((l, i) => `${String(i + 3).padStart(6)}\t${l}`),
      body.map((l, i) => `${i + 3}-${l}`),
    ];
    for (const lines of shapes) {
      const out = redact(lines.join('\n'));
      expect(out).toContain('[REDACTED:key_block]');
      expectNoBodyLine(out, body);
    }
  });

  it('redacts even one line or a short last line next to a private-key armour line, whole or cut', () => {
    const lines = fileLines(pkcs8);
    const last = lines.length - 1;
    // tail -n 3: the last full line, the short last line, END
    expect(redact(sed(pkcs8, last - 1, last + 1))).toBe('[REDACTED:key_block]\n-----END PRIVATE KEY-----');
    // the END line alone shows what the line before it is
    expect(redact(sed(pkcs8, last, last + 1))).toBe('[REDACTED:key_block]\n-----END PRIVATE KEY-----');
    // a BEGIN line cut by a byte range (`tail -c`, a preview) before the first body line
    expect(redact(`RIVATE KEY-----\n${lines[1]}`)).toBe('RIVATE KEY-----\n[REDACTED:key_block]');
    expect(redact(`-----BEGIN RSA PRIV\n${lines[1]}`)).toBe('-----BEGIN RSA PRIV\n[REDACTED:key_block]');
    // a whole BEGIN line and one body line (`head -2`): the private_key rule's, redacted to the end
    expect(redact(sed(pkcs8, 1, 2))).toBe('[REDACTED:private_key]');
  });

  it('redacts one long base64 line (a key blob) by itself, and not one line of a key', () => {
    const der = rsa.privateKey.export({ type: 'pkcs8', format: 'der' }).toString('base64');
    expect(redact(`$ base64 -w0 key.der\n${der}\n`)).toBe('$ base64 -w0 key.der\n[REDACTED:key_block]\n');
    // a single 64-character line could be a token or a digest; alone it says nothing of a key
    const one = bodyOf(pkcs8)[5]!;
    expect(redact(one)).toBe(one);
  });

  it('keeps certificate and public key bodies whose armour says what they are, but not a slice of one', () => {
    expect(r.redact(spki)).toEqual({ text: spki, count: 0 });
    // cut before the BEGIN line: its END line still names it
    expect(r.redact(sed(spki, 3, 9)).count).toBe(0);
    expect(r.redact(`-----BEGIN CERTIFICATE-----\n${bodyOf(pkcs8).slice(0, 5).join('\n')}\n-----END CERTIFICATE-----`).count).toBe(0);
    // with no armour, a public key's lines are as random as a private key's: redacted
    expect(redact(sed(spki, 2, 5))).toBe('[REDACTED:key_block]');
  });

  it('redacts the key of a bundle whose cert armour is next to it', () => {
    // `grep -v PRIVATE` of a certificate followed by its key
    const cert = `-----BEGIN CERTIFICATE-----\n${bodyOf(spki).join('\n')}\n-----END CERTIFICATE-----`;
    const out = redact(`${cert}\n${bodyOf(pkcs8).join('\n')}\n`);
    expect(out).toBe(`${cert}\n[REDACTED:key_block]\n`);
  });

  it.each([
    // hex digests are [0-9a-f]: one case only, so never strong; `git rev-list` prints them a line each
    ['sha256 hex digests, one a line', Array.from({ length: 6 }, (_, i) => createHash('sha256').update(String(i)).digest('hex')).join('\n')],
    ['git shas, one a line', Array.from({ length: 6 }, (_, i) => createHash('sha1').update(String(i)).digest('hex')).join('\n')],
    ['upper-case hex fingerprints', 'ABCDEF0123456789ABCDEF0123456789ABCDEF01\n0123456789ABCDEF0123456789ABCDEF01234567'],
    [
      'git log',
      'commit 3f786850e387550fdab836ed7e6dc881de23001b\nAuthor: A Person <a@example.com>\nDate:   Tue Dec 1 08:00:00 2026 +0000\n\n    Fix the token refresh\n',
    ],
    // short tokens of base64 characters are words, IDs and short digests: under 40 they are no key line
    ['short base64-looking tokens', 'dGhpcyBpcyBhIHRva2Vu\nQWxhZGRpbjpvcGVuIHNlc2FtZQ==\nYWJjZGVmZ2hpamtsbW5vcA'],
    ['words a line', 'Overview\nInstallation\nUsage\nLicense'],
    [
      'TypeScript',
      "import { createHash } from 'node:crypto';\nexport function digest(s: string): string {\n  return createHash('sha256').update(s).digest('base64');\n}\nconst veryLongIdentifierNameWithoutAnyDigitsInIt = digest;",
    ],
    // content hashes of public packages, and each line has quotes and blanks: no body line
    [
      "a lockfile's integrity fields",
      `    "node_modules/zod": {\n      "version": "3.23.8",\n      "integrity": "sha512-${createHash('sha512').update('zod').digest('base64')}",\n      "integrity": "sha512-${createHash('sha512').update('vitest').digest('base64')}",\n`,
    ],
    ['minified JS', 'var a=function(b){return b.map(function(c){return c*2})};module.exports={a:a,b:"QWxhZGRpbjpvcGVuIHNlc2FtZQ"};'],
    ['an e-mail quote and markdown rules', '-----Original Message-----\nHello\nThanks\n-----\nRegards'],
    ['prose', 'The key is rotated every week. Its body is sixty-four characters a line, base64 encoded.'],
  ])('leaves %s alone', (_name, text) => {
    expect(r.redact(text)).toEqual({ text, count: 0 });
  });

  it('is idempotent on redacted key blocks', () => {
    const once = redact(`${sed(pkcs8, 3, 6)}\nok\n${bodyOf(openssh).join('\n')}`);
    expect(r.redact(once)).toEqual({ text: once, count: 0 });
  });
});

function wrap(s: string, width: number): string {
  const out: string[] = [];
  for (let i = 0; i < s.length; i += width) out.push(s.slice(i, i + width));
  return out.join('\n');
}
