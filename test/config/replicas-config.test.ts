import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/config.js';
import { busOptions, createLogger } from '../../src/cli/runtime.js';
import { configFixture } from './config-fixture.js';

const setup = configFixture();

describe('the replicas setting', () => {
  it('is 1 by default and scales nothing; the user file, ACTORLOOP_REPLICAS and -c set it and ask to scale', async () => {
    const { ws, env } = await setup({ user: 'replicas = 3\nnats_url = "nats://a:4222, nats://b:4222,nats://c:4222"\n' });
    const plain = loadConfig({ cwd: ws }, { HOME: env.HOME });
    expect(plain.replicas).toBe(1);
    expect(busOptions(plain, createLogger(plain), 'x', 'client').replicas).toEqual({ replicas: 1, scale: false });

    const fromUser = loadConfig({ cwd: ws }, env);
    expect(fromUser.replicas).toBe(3);
    expect(fromUser.natsUrl).toBe('nats://a:4222, nats://b:4222,nats://c:4222');
    expect(busOptions(fromUser, createLogger(fromUser), 'x', 'client').replicas).toEqual({ replicas: 3, scale: true });
    expect(loadConfig({ cwd: ws }, { ...env, ACTORLOOP_REPLICAS: '5' }).replicas).toBe(5);
    expect(loadConfig({ cwd: ws, overrides: ['replicas=1'] }, { ...env, ACTORLOOP_REPLICAS: '5' }).replicas).toBe(1);
  });

  it('an untrusted workspace cannot set it; a trusted one can', async () => {
    const { ws, env } = await setup({ workspace: 'replicas = 5\n' });
    const untrusted = loadConfig({ cwd: ws }, env);
    expect(untrusted.replicas).toBe(1);
    expect(untrusted.ignoredKeys.join('\n')).toMatch(/replicas: an untrusted workspace cannot set it/);
    const trusted = await setup({ workspace: 'replicas = 3\n', user: '' });
    const { writeFile } = await import('node:fs/promises');
    await writeFile(trusted.userFile, `[workspaces.${JSON.stringify(trusted.ws)}]\ntrusted = true\n`);
    expect(loadConfig({ cwd: trusted.ws }, trusted.env).replicas).toBe(3);
  });

  it('refuses a value outside 1–5, saying what to set', async () => {
    const { ws, env } = await setup({});
    expect(() => loadConfig({ cwd: ws }, { ...env, ACTORLOOP_REPLICAS: '7' })).toThrow(/invalid setting replicas/);
    expect(() => loadConfig({ cwd: ws }, { ...env, ACTORLOOP_REPLICAS: 'three' })).toThrow(/invalid setting replicas/);
    const file = await setup({ user: 'replicas = 0\n' });
    expect(() => loadConfig({ cwd: file.ws }, file.env)).toThrow(/replicas/);
  });
});
