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
