// What doctor can tell of a nats-server's fsync, version by version (README "Durability contract").
import { describe, expect, it } from 'vitest';
import { durabilityCheck } from '../../src/cli/doctor-checks.js';

describe('the durability check', () => {
  it('warns before 2.10: the server fsyncs every 2 minutes and cannot be told otherwise', () => {
    for (const version of ['2.9.10', '2.9.25', '2.8.4']) {
      for (const embedded of [true, false]) {
        const r = durabilityCheck(version, embedded, null);
        expect(r).toMatchObject({ check: 'durability', status: 'warning', detail: expect.stringContaining(`nats-server ${version} fsyncs every 2 minutes and cannot be told otherwise`) });
        expect(r.fix).toMatch(/sync_interval: always/);
      }
    }
  });

  it('from 2.10, by URL: ok when it cannot tell or the server says always, a warning when it says otherwise', () => {
    expect(durabilityCheck('2.10.3', false, null)).toMatchObject({ status: 'ok', detail: expect.stringContaining('cannot read its settings to tell') });
    expect(durabilityCheck('2.11.0', false, { always: true })).toMatchObject({ status: 'ok', detail: expect.stringContaining('sync_interval: always') });
    expect(durabilityCheck('2.10.3', false, { always: false, intervalNs: 10e9 })).toMatchObject({ status: 'warning', detail: expect.stringContaining('fsyncs every 10 s, not at every commit') });
    expect(durabilityCheck('2.10.3', false, { always: false })).toMatchObject({ status: 'warning', detail: expect.stringContaining('every 2 minutes (the default)') });
  });

  it('from 2.10, embedded: a warning, since the config actorloop writes leaves sync_interval at its default', () => {
    expect(durabilityCheck('2.12.1', true, null)).toMatchObject({ status: 'warning', detail: expect.stringContaining('default sync_interval') });
  });
});
