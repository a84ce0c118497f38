import { writeFile, rm, mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { freePort, startNatsServer, type NatsServerHandle } from '../../src/bus/nats-server.js';
import { tempDir } from './nats.js';

/** One node of a test cluster: its ports stay the same across a kill and a restart. */
export interface ClusterNode {
  /** The node's `server_name` (`n1`, `n2`, …): JetStream knows its peers by it. */
  name: string;
  url: string;
  port: number;
  clusterPort: number;
  monitorPort: number;
  storeDir: string;
  configFile: string;
  /** The running server, or null between `kill` and `restart`. */
  server: NatsServerHandle | null;
}

/** A JetStream cluster of real nats-servers on loopback. */
export interface TestCluster {
  nodes: ClusterNode[];
  /** Every node's client URL, comma-separated: what `NATS_URL` takes. */
  url: string;
  urls: string[];
  /** The node named so. */
  node(name: string): ClusterNode;
  /** The node whose client URL is `url` (as a connection's `getServer()` names it). */
  nodeAt(url: string): ClusterNode;
  /** SIGKILLs a node (no shutdown, no flush); resolves once the process is gone. */
  kill(name: string): Promise<void>;
  /** Starts a killed node again with its name, ports and store; resolves once it serves JetStream. */
  restart(name: string): Promise<void>;
  /** The name of the node leading a stream (`$JS.API.STREAM.INFO`), asked of any running node. */
  streamLeader(stream: string): Promise<string>;
  /** Waits until every running node is healthy with JetStream and the cluster has a meta leader. */
  waitHealthy(timeoutMs?: number): Promise<void>;
  /** Stops every node and removes their stores. */
  stop(): Promise<void>;
}

/** Options of `startTestCluster`. */
export interface TestClusterOptions {
  /** Nodes (default 3). */
  size?: number;
  /** The cluster's name (default `actorloop-test`). */
  name?: string;
  /** Where the nodes' stores and configs go (default a fresh temp dir, removed by `stop`). */
  dir?: string;
  /** How long to wait for the cluster to be healthy (default 30 s). */
  readyTimeoutMs?: number;
}

/** The config file of one node: its cluster block and monitor port (the rest is given as flags). */
export function clusterNodeConfig(node: Pick<ClusterNode, 'name' | 'clusterPort' | 'monitorPort'>, clusterName: string, routes: number[]): string {
  return [
    `server_name: ${node.name}`,
    `http: "127.0.0.1:${node.monitorPort}"`,
    'cluster {',
    `  name: ${clusterName}`,
    `  listen: "127.0.0.1:${node.clusterPort}"`,
    `  routes: [${routes.map((p) => `"nats-route://127.0.0.1:${p}"`).join(', ')}]`,
    '}',
    '',
  ].join('\n');
}

/**
 * Starts a 3-node (or `size`) JetStream cluster on free loopback ports with temp stores. A port
 * picked free can be taken before a node binds it (other tests run alongside): then the whole
 * cluster is started again on other ports, up to three times.
 */
export async function startTestCluster(opts: TestClusterOptions = {}): Promise<TestCluster> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(opts);
    } catch (err) {
      if (attempt >= 3 || !/address already in use/i.test((err as Error).message)) throw err;
    }
  }
}

/** Free loopback ports, all different (a port just released can be handed out again). */
async function distinctPorts(n: number): Promise<number[]> {
  const ports = new Set<number>();
  while (ports.size < n) ports.add(await freePort());
  return [...ports];
}

async function startOnce(opts: TestClusterOptions): Promise<TestCluster> {
  const size = opts.size ?? 3;
  const clusterName = opts.name ?? 'actorloop-test';
  const ownDir = opts.dir === undefined;
  const dir = opts.dir ?? (await tempDir('cluster'));
  // a retry starts from empty stores
  if (!ownDir) await rm(dir, { recursive: true, force: true });
  const nodes: ClusterNode[] = [];
  const ports = await distinctPorts(size * 3);
  for (let i = 1; i <= size; i++) {
    const [port, clusterPort, monitorPort] = ports.slice((i - 1) * 3, i * 3) as [number, number, number];
    const storeDir = join(dir, `n${i}`);
    nodes.push({
      name: `n${i}`, url: `nats://127.0.0.1:${port}`, port, clusterPort, monitorPort, storeDir,
      configFile: join(dir, `n${i}.conf`), server: null,
    });
  }
  for (const n of nodes) {
    await mkdir(n.storeDir, { recursive: true });
    await writeFile(n.configFile, clusterNodeConfig(n, clusterName, nodes.map((o) => o.clusterPort)));
  }
  const start = async (n: ClusterNode): Promise<void> => {
    n.server = await startNatsServer({ storeDir: n.storeDir, port: n.port, serverName: n.name, configFile: n.configFile });
  };
  const byName = (name: string): ClusterNode => {
    const n = nodes.find((o) => o.name === name);
    if (!n) throw new Error(`no cluster node ${name}`);
    return n;
  };
  const running = () => nodes.filter((n) => n.server !== null);

  const cluster: TestCluster = {
    nodes,
    urls: nodes.map((n) => n.url),
    url: nodes.map((n) => n.url).join(','),
    node: byName,
    nodeAt(url) {
      const port = Number(new URL(url.includes('://') ? url : `nats://${url}`).port);
      const n = nodes.find((o) => o.port === port);
      if (!n) throw new Error(`no cluster node at ${url}`);
      return n;
    },
    kill(name) {
      const n = byName(name);
      const s = n.server;
      n.server = null;
      if (!s) return Promise.resolve();
      process.kill(s.pid, 'SIGKILL');
      return s.stop();
    },
    async restart(name) {
      const n = byName(name);
      if (n.server) throw new Error(`${name} is still running; kill it first`);
      await start(n);
      await waitFor(() => healthy(n), 30_000, `${name} healthy with JetStream after its restart`);
    },
    async streamLeader(stream) {
      // a loaded machine, or a cluster just after a kill, may not answer at once: asked again for 30 s
      const deadline = Date.now() + 30_000;
      for (;;) {
        const leader = await (async () => {
          const nc = await connect({ servers: running().map((n) => n.url), timeout: 5_000, maxReconnectAttempts: 0 });
          try {
            const jsm = await jetstreamManager(nc, { timeout: 5_000 });
            return (await jsm.streams.info(stream)).cluster?.leader ?? null;
          } finally {
            await nc.close();
          }
        })().catch(() => null);
        if (leader) return leader;
        if (Date.now() > deadline) throw new Error(`stream ${stream} has no leader after 30 s`);
        await sleep(200);
      }
    },
    async waitHealthy(timeoutMs = opts.readyTimeoutMs ?? 30_000) {
      const live = running();
      await waitFor(async () => (await Promise.all(live.map(healthy))).every(Boolean), timeoutMs, 'every node healthy with JetStream');
      await waitFor(async () => (await metaLeader(live[0]!)) !== null, timeoutMs, 'a meta leader');
    },
    async stop() {
      await Promise.all(nodes.map(async (n) => {
        const s = n.server;
        n.server = null;
        await s?.stop();
      }));
      if (ownDir) await rm(dir, { recursive: true, force: true });
    },
  };
  try {
    await Promise.all(nodes.map(start));
    await cluster.waitHealthy();
  } catch (err) {
    await cluster.stop();
    throw err;
  }
  return cluster;
}

/** True when the node answers `/healthz?js-enabled-only=true` with 200. */
export async function healthy(n: Pick<ClusterNode, 'monitorPort'>): Promise<boolean> {
  try {
    const res = await fetch(`http://127.0.0.1:${n.monitorPort}/healthz?js-enabled-only=true`, { signal: AbortSignal.timeout(2_000) });
    return res.ok;
  } catch {
    return false;
  }
}

/** The meta leader's name as the node sees it (`/jsz`), or null. */
export async function metaLeader(n: Pick<ClusterNode, 'monitorPort'>): Promise<string | null> {
  try {
    const res = await fetch(`http://127.0.0.1:${n.monitorPort}/jsz`, { signal: AbortSignal.timeout(2_000) });
    const body = (await res.json()) as { meta_cluster?: { leader?: string } };
    return body.meta_cluster?.leader || null;
  } catch {
    return null;
  }
}

async function waitFor(check: () => Promise<boolean> | boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(100);
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
