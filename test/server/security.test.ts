// Who may use the gateway, over real HTTP and WebSocket: a non-loopback bind without a token is
// refused at start; with a token every /v1 request and upgrade needs it, and the page opened once
// with `?token=` keeps it in an HttpOnly cookie and loses it from its address; a WebSocket from
// another origin is refused; a page that rebinds its DNS name to loopback is not answered; no CORS
// unless configured; a turn.submit asking for a looser run mode than the config's is refused.
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import WebSocket from 'ws';
import { gatewayCommands } from '../../src/cli/gateway-runtime.js';
import type { Gateway } from '../../src/server/gateway.js';
import { openGatewayFixture, RpcClient, type GatewayFixture } from './gateway-fixture.js';

const TOKEN = 'test-token-0123456789abcdef';

let fx: GatewayFixture;

beforeAll(async () => {
  fx = await openGatewayFixture();
}, 60_000);

afterAll(async () => {
  await fx?.stop();
}, 60_000);

/** Opens a WebSocket and says how the upgrade went: open, or the HTTP status that refused it. */
function upgrade(url: string, headers: Record<string, string>): Promise<number | 'open'> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers });
    ws.once('open', () => {
      ws.close();
      resolve('open');
    });
    ws.once('unexpected-response', (_req, res) => {
      resolve(res.statusCode ?? 0);
      ws.terminate();
    });
    ws.once('error', (err) => {
      // a refusal already resolved; anything else is the test's failure
      if (!/Unexpected server response/.test(String(err))) reject(err);
    });
  });
}

/** A GET with a Host header of the caller's choosing (fetch may not set it). */
function getWithHost(g: Gateway, path: string, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: g.port, path, headers: { host } }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.once('error', reject);
    req.end();
  });
}

describe('binding', () => {
  test('a non-loopback address without a token refuses to start', async () => {
    await expect(fx.gateway({ host: '0.0.0.0' })).rejects.toMatchObject({ code: 'gateway.token_required' });
  });

  test('a non-loopback address with a token starts and wants the token', async () => {
    const g = await fx.gateway({ host: '0.0.0.0', token: TOKEN });
    const res = await fetch(`http://127.0.0.1:${g.port}/v1/actors`);
    expect(res.status).toBe(401);
    await g.close();
  });

  test('without a token, a request naming another host is not answered (DNS rebinding)', async () => {
    const g = await fx.gateway();
    expect(await getWithHost(g, '/v1/actors', `evil.example:${g.port}`)).toBe(403);
    expect(await getWithHost(g, '/v1/actors', `localhost:${g.port}`)).toBe(200);
    expect(await upgrade(`ws://127.0.0.1:${g.port}/v1/rpc`, { host: `evil.example:${g.port}`, origin: `http://evil.example:${g.port}` })).toBe(403);
    await g.close();
  });
});

describe('the token', () => {
  let g: Gateway;
  beforeAll(async () => {
    g = await fx.gateway({ token: TOKEN });
  });
  afterAll(async () => {
    await g.close();
  });

  test('a /v1 request without it, or with another, gets 401', async () => {
    for (const path of ['/v1/actors', '/v1/machines', '/v1/schema', '/v1/actors/agt_x', '/v1/actors/agt_x/events', '/v1/nothing']) {
      const res = await fetch(`${g.url}${path}`);
      expect(res.status, path).toBe(401);
      expect(res.headers.get('www-authenticate')).toContain('Bearer');
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe('gateway.unauthorized');
    }
    expect((await fetch(`${g.url}/v1/actors`, { headers: { authorization: 'Bearer wrong-token-0123456789abc' } })).status).toBe(401);
    expect((await fetch(`${g.url}/v1/actors`, { method: 'POST' })).status).toBe(401);
  });

  test('the page itself (the package\'s build, no data) is served without it, so a page opened from a link loads and then reads /v1 with its cookie', async () => {
    const page = await fetch(`${g.url}/`);
    expect(page.status).toBe(200);
    expect(page.headers.get('set-cookie')).toBeNull();
    expect(await page.text()).not.toContain('agt_');
  });

  test('the bearer header and the query each let a request in', async () => {
    expect((await fetch(`${g.url}/v1/actors`, { headers: { authorization: `Bearer ${TOKEN}` } })).status).toBe(200);
    expect((await fetch(`${g.url}/v1/actors?token=${TOKEN}`)).status).toBe(200);
  });

  test('the page opened with ?token= sets an HttpOnly, SameSite=Strict cookie for this port and sends the browser on without the token; the cookie lets /v1 and the WebSocket in', async () => {
    const opened = await fetch(`${g.url}/?actor=agt_x&token=${TOKEN}`, { redirect: 'manual' });
    expect(opened.status).toBe(303);
    expect(opened.headers.get('location')).toBe('/?actor=agt_x');
    const cookie = opened.headers.get('set-cookie')!;
    expect(cookie.split(';')[0]).toBe(`actorloop_token_${g.port}=${TOKEN}`);
    expect(cookie).toContain('HttpOnly');
    expect(cookie).toContain('SameSite=Strict');
    const jar = cookie.split(';')[0]!;
    expect((await fetch(`${g.url}/v1/actors`, { headers: { cookie: jar } })).status).toBe(200);
    expect(await upgrade(`${g.url.replace('http', 'ws')}/v1/rpc`, { cookie: jar })).toBe('open');
    // another gateway's cookie (another port) is not this one's
    expect((await fetch(`${g.url}/v1/actors`, { headers: { cookie: `actorloop_token_1=${TOKEN}` } })).status).toBe(401);
    // a wrong token in the page's URL sets nothing
    const wrong = await fetch(`${g.url}/?token=wrong-token-0123456789abc`, { redirect: 'manual' });
    expect(wrong.status).toBe(401);
    expect(wrong.headers.get('set-cookie')).toBeNull();
    // the redirect stays on this gateway whatever the path says
    const sly = await fetch(`${g.url}//evil.example/?token=${TOKEN}`, { redirect: 'manual' });
    expect(sly.headers.get('location')).toBe('/evil.example/');
  });

  test('a WebSocket upgrade without it is refused with 401', async () => {
    const url = `${g.url.replace('http', 'ws')}/v1/rpc`;
    expect(await upgrade(url, {})).toBe(401);
    expect(await upgrade(url, { authorization: 'Bearer wrong-token-0123456789abc' })).toBe(401);
    expect(await upgrade(url, { authorization: `Bearer ${TOKEN}` })).toBe('open');
    expect(await upgrade(`${url}?token=${TOKEN}`, {})).toBe('open');
  });
});

describe('run modes', () => {
  test('turn.submit asking for a looser run mode than the config\'s is refused, naming the flag; as strict or stricter goes on', async () => {
    const g = await fx.gateway();
    const rpc = await RpcClient.open(`${g.url.replace('http', 'ws')}/v1/rpc`);
    try {
      expect(fx.rt.config.approvalMode).toBe('ask');
      for (const approve of ['full-auto', 'auto-edit']) {
        const a = await rpc.answer('turn.submit', { task: 'anything', approve, model: 'scripted:/nonexistent.json' });
        expect(a.error!.code, approve).toBe(1);
        expect(a.error!.data.code).toBe('gateway.looser_policy');
        expect(a.error!.message).toContain(`approve "${approve}" is looser than this gateway's approval_mode "ask"`);
        expect(a.error!.message).toContain('actorloop serve --allow-looser-policy');
      }
      // the next turn of an agent is checked the same way
      const next = await rpc.answer('turn.submit', { task: 'anything', agentId: 'agt_01J0000000000000000000000A', approve: 'full-auto' });
      expect(next.error!.data.code).toBe('gateway.looser_policy');
      for (const approve of ['ask', 'deny-all']) {
        const a = await rpc.answer('turn.submit', { task: 'anything', approve, model: 'scripted:/nonexistent.json' });
        expect(a.error!.data.code, approve).toBe('gateway.no_host');
      }
      expect((await rpc.call('actors.list')).actors).toEqual([]);
    } finally {
      await rpc.close();
      await g.close();
    }
  });

  test('a gateway started allowing it takes a looser run mode', async () => {
    const g = await fx.gateway({ commands: gatewayCommands(fx.rt, { allowLooserPolicy: true }) });
    const rpc = await RpcClient.open(`${g.url.replace('http', 'ws')}/v1/rpc`);
    try {
      const a = await rpc.answer('turn.submit', { task: 'anything', approve: 'full-auto', model: 'scripted:/nonexistent.json' });
      expect(a.error!.data.code).toBe('gateway.no_host');
    } finally {
      await rpc.close();
      await g.close();
    }
  });
});

describe('origins', () => {
  test('a cross-origin WebSocket is refused; its own origin and none (a program) are not', async () => {
    const g = await fx.gateway();
    const url = `${g.url.replace('http', 'ws')}/v1/rpc`;
    expect(await upgrade(url, { origin: 'http://evil.example' })).toBe(403);
    expect(await upgrade(url, { origin: `http://127.0.0.1:${g.port}` })).toBe('open');
    expect(await upgrade(url, {})).toBe('open');
    expect(await upgrade(`${g.url.replace('http', 'ws')}/elsewhere`, {})).toBe(404);
    const res = await fetch(`${g.url}/v1/actors`, { headers: { origin: 'http://evil.example' } });
    expect(res.headers.get('access-control-allow-origin')).toBeNull();
    await g.close();
  });

  test('an origin configured is let in, with CORS headers for it alone', async () => {
    const g = await fx.gateway({ corsOrigins: ['http://dash.example'] });
    expect(await upgrade(`${g.url.replace('http', 'ws')}/v1/rpc`, { origin: 'http://dash.example' })).toBe('open');
    const ok = await fetch(`${g.url}/v1/actors`, { headers: { origin: 'http://dash.example' } });
    expect(ok.headers.get('access-control-allow-origin')).toBe('http://dash.example');
    const other = await fetch(`${g.url}/v1/actors`, { headers: { origin: 'http://evil.example' } });
    expect(other.headers.get('access-control-allow-origin')).toBeNull();
    await g.close();
    // with a token: the preflight (no credentials) is answered, the request itself needs the token
    const t = await fx.gateway({ corsOrigins: ['http://dash.example'], token: TOKEN });
    const preflight = await fetch(`${t.url}/v1/actors`, {
      method: 'OPTIONS', headers: { origin: 'http://dash.example', 'access-control-request-method': 'GET', 'access-control-request-headers': 'authorization' },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get('access-control-allow-headers')?.toLowerCase()).toContain('authorization');
    expect((await fetch(`${t.url}/v1/actors`, { headers: { origin: 'http://dash.example' } })).status).toBe(401);
    expect((await fetch(`${t.url}/v1/actors`, { headers: { origin: 'http://dash.example', authorization: `Bearer ${TOKEN}` } })).status).toBe(200);
    await t.close();
  });
});

describe('no host running', () => {
  test('turn.submit answers that a host must be started, and nothing is submitted', async () => {
    const g = await fx.gateway();
    const rpc = await RpcClient.open(`${g.url.replace('http', 'ws')}/v1/rpc`);
    try {
      const a = await rpc.answer('turn.submit', { task: 'anything', model: 'scripted:/nonexistent.json' });
      expect(a.error!.code).toBe(1);
      expect(a.error!.data.code).toBe('gateway.no_host');
      expect(a.error!.message).toContain('actorloop host');
      expect((await rpc.call('actors.list')).actors).toEqual([]);
    } finally {
      await rpc.close();
      await g.close();
    }
  });
});
