// What a test needs of a running `actorloop serve`, read the way its owner reads it: the base URL
// it prints on stdout, the page URL with the token it prints once on stderr (what a person opens
// in a browser), and the token the owner's programs find in its data dir.
import { findGatewayToken } from '../../src/server/gateway-token.js';

/** The base URL (`http://127.0.0.1:<port>`, no trailing slash) once serve printed it, else null. */
export function servedUrl(stdout: string): string | null {
  const first = stdout.split('\n')[0] ?? '';
  return stdout.includes('\n') && first !== '' ? first.replace(/\/$/, '') : null;
}

/** The page URL with the token (`http://…/?token=…`) once serve printed it on stderr, else null. */
export function servedPageUrl(stderr: string): string | null {
  return /open the page at (\S+)/.exec(stderr)?.[1] ?? null;
}

/** The `Authorization` header of the owner of `dataDir`: the token serve keeps there. */
export function ownerAuth(dataDir: string): Record<string, string> {
  const { token, file } = findGatewayToken(dataDir);
  if (token === null) throw new Error(`no gateway token at ${file}: start serve on this data dir first`);
  return { authorization: `Bearer ${token}` };
}
