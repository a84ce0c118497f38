import { timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';

// Who may talk to the gateway (design §11): every request under /v1 and every WebSocket upgrade
// carries the bearer token, also on loopback, since another user of the machine reaches loopback
// too. A browser page passes it once as `/?token=…`, which sets an HttpOnly, SameSite=Strict
// cookie its later requests carry (the page's script never sees the token).

/**
 * The cookie a page visit with `?token=` sets, named for the gateway's port: cookies do not tell
 * ports apart, and two gateways of one machine (two data dirs, two tokens) must not overwrite
 * each other's.
 */
export function tokenCookie(port: number): string {
  return `actorloop_token_${port}`;
}

/** The `Set-Cookie` value that keeps the token for the page: sent back only to this host, never to a script. */
export function tokenCookieHeader(port: number, token: string): string {
  return `${tokenCookie(port)}=${encodeURIComponent(token)}; Path=/; HttpOnly; SameSite=Strict`;
}

/** True for an address only this machine can reach. */
export function isLoopback(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '');
  return h === 'localhost' || h === '::1' || /^127(?:\.\d{1,3}){3}$/.test(h);
}

/** The bearer token of a request: the Authorization header, else `token` in the query, else the cookie named `cookieName`. */
export function tokenOf(headers: IncomingHttpHeaders | Headers, url: URL, cookieName: string): string | null {
  const get = (name: string): string | null => {
    if (headers instanceof Headers) return headers.get(name);
    const v = headers[name];
    return Array.isArray(v) ? (v[0] ?? null) : (v ?? null);
  };
  const auth = get('authorization');
  const bearer = auth?.match(/^Bearer\s+(.+)$/i)?.[1]?.trim();
  if (bearer) return bearer;
  const query = url.searchParams.get('token');
  if (query) return query;
  const cookie = get('cookie');
  for (const part of cookie?.split(';') ?? []) {
    const [k, ...v] = part.trim().split('=');
    if (k === cookieName) return decodeURIComponent(v.join('='));
  }
  return null;
}

/** Compares a given token with the gateway's in constant time. */
export function tokenMatches(given: string | null, token: string): boolean {
  if (given === null) return false;
  const a = Buffer.from(given);
  const b = Buffer.from(token);
  return a.length === b.length && timingSafeEqual(a, b);
}

/**
 * Whether a request's `Host` may be served: with no token the gateway answers only names of
 * loopback (a page elsewhere that rebinds its DNS name to 127.0.0.1 would send its own name).
 */
export function hostAllowed(hostHeader: string | null, tokenSet: boolean): boolean {
  if (tokenSet) return true;
  if (!hostHeader) return false;
  const name = hostHeader.startsWith('[') ? hostHeader.slice(0, hostHeader.indexOf(']') + 1) : hostHeader.split(':')[0]!;
  return isLoopback(name);
}

/**
 * Whether a WebSocket upgrade's `Origin` may open it: none (a program, not a browser), the
 * gateway's own origin (the page it serves: `http://` + the request's Host), or one configured.
 */
export function originAllowed(origin: string | null, hostHeader: string | null, allowed: readonly string[]): boolean {
  if (origin === null) return true;
  if (allowed.includes(origin)) return true;
  if (!hostHeader) return false;
  try {
    const o = new URL(origin);
    return (o.protocol === 'http:' || o.protocol === 'https:') && o.host === hostHeader;
  } catch {
    return false;
  }
}
