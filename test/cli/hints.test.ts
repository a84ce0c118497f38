// The command lines the CLI prints for a person: the printing command's --data-dir and --nats when
// they are not the defaults, arguments quoted for a POSIX shell, placeholders last.
import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { cliLine, placeholder, shellQuote, whereFlags, type WhereConfig } from '../../src/cli/hints.js';

const defaults: WhereConfig = { sources: { data_dir: 'default' }, dataDir: '/home/me/.local/share/actorloop', natsUrl: null };

describe('cliLine', () => {
  it('is the bare command when the data dir is the built-in one and no server was named', () => {
    expect(whereFlags(defaults)).toEqual([]);
    expect(cliLine(defaults, 'approve', 'agt_1', 'apr_2')).toBe('actorloop approve agt_1 apr_2');
  });

  it('carries --data-dir however it was set (flag, environment, a file) and --nats whenever a server was named', () => {
    for (const source of ['flag', 'env', 'user', 'workspace'] as const) {
      expect(whereFlags({ ...defaults, sources: { data_dir: source }, dataDir: '/d' })).toEqual(['--data-dir', '/d']);
    }
    expect(cliLine({ ...defaults, natsUrl: 'nats://127.0.0.1:4222' }, 'resume', 'agt_1')).toBe('actorloop resume agt_1 --nats nats://127.0.0.1:4222');
    expect(cliLine({ sources: { data_dir: 'flag' }, dataDir: '/d', natsUrl: 'nats://h:1' }, 'deny', 'agt_1', 'apr_2', placeholder('[--reason "<why>"]')))
      .toBe('actorloop deny agt_1 apr_2 --data-dir /d --nats nats://h:1 [--reason "<why>"]');
  });

  it('quotes what a shell would split or expand, so the shell reads back the same words', () => {
    const odd = ["/tmp/my data", "it's", '$HOME', 'a;b', '*', ''];
    for (const arg of odd) {
      expect(execFileSync('sh', ['-c', `printf %s ${shellQuote(arg)}`], { encoding: 'utf8' })).toBe(arg);
    }
    expect(shellQuote('/tmp/plain-dir_1.x')).toBe('/tmp/plain-dir_1.x');
    expect(cliLine({ ...defaults, sources: { data_dir: 'flag' }, dataDir: '/tmp/my data' }, 'resume', 'agt_1')).toBe("actorloop resume agt_1 --data-dir '/tmp/my data'");
  });

  it('through a gateway: --gateway with its token file, or with the data dir the token is read from when it is not the default', () => {
    const gw = { url: 'http://127.0.0.1:7420', tokenFile: null };
    expect(whereFlags({ ...defaults, gateway: gw })).toEqual(['--gateway', 'http://127.0.0.1:7420']);
    expect(whereFlags({ ...defaults, sources: { data_dir: 'env' }, dataDir: '/d', gateway: gw })).toEqual(['--gateway', 'http://127.0.0.1:7420', '--data-dir', '/d']);
    expect(whereFlags({ ...defaults, sources: { data_dir: 'env' }, dataDir: '/d', natsUrl: 'nats://h:1', gateway: { ...gw, tokenFile: '/t' } }))
      .toEqual(['--gateway', 'http://127.0.0.1:7420', '--gateway-token-file', '/t']);
  });
});
