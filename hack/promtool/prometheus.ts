// A real Prometheus server (the pinned Debian build beside promtool, ./promtool.ts) for the scrape tests:
// on 127.0.0.1, with its config, rules and TSDB in a temp dir of its own, run under lifeline.sh (it dies
// with the test process) and stopped by its PID. For the local cluster (hack/cluster) it runs inside one
// of the cluster's network namespaces, where the pods' host-network ports are, and its HTTP API is
// reached as the cluster reaches its API server: a relay in that namespace from a unix socket in the
// server's dir, and a forwarder on the host's 127.0.0.1 to that socket (nothing of the host's network changes).
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { dump } from 'js-yaml';
import { splice } from '../cluster/splice.ts';
import { freePort } from '../controlplane/controlplane.ts';
import { ServerProcess } from '../lib/process.ts';
import { ensurePromtool, prometheusDir } from './promtool.ts';

const ENTER = fileURLToPath(new URL('../cluster/enter.sh', import.meta.url));
const RELAY = fileURLToPath(new URL('../cluster/relay.ts', import.meta.url));

export interface ScrapeJob {
  job: string;
  /** host:port of each /metrics endpoint, with the target labels each gets (what a PodMonitor's relabelling would add). */
  targets: { address: string; labels?: Record<string, string> }[];
}

export interface PrometheusOptions {
  jobs: ScrapeJob[];
  /** Rule groups, as in a rule file (or a PrometheusRule's spec.groups). */
  groups?: unknown[];
  /** Scrape and rule evaluation interval (default 1s). */
  interval?: string;
  /**
   * Run inside this network namespace (/run/netns/<name>) of the local cluster, joining its cgroup
   * `cgroup` (so the cluster's teardown would end it too), instead of on the host's 127.0.0.1.
   */
  netns?: { name: string; cgroup: string };
}

/** What Prometheus' HTTP API answers under `data` for a query. */
export interface Sample {
  metric: Record<string, string>;
  value?: [number, string];
  values?: [number, string][];
}

export interface Alert {
  labels: Record<string, string>;
  annotations: Record<string, string>;
  state: 'pending' | 'firing';
  activeAt: string;
  value: string;
}

const BOOT_ATTEMPTS = 5;

export class Prometheus {
  readonly url: string;
  readonly dir: string;
  private readonly proc: ServerProcess;
  private readonly reach: Reach | undefined;
  /** How long the last start took until /-/ready answered, in ms. */
  startedInMs = 0;

  private constructor(dir: string, port: number, proc: ServerProcess, reach?: Reach) {
    this.dir = dir;
    this.url = `http://127.0.0.1:${reach?.port ?? port}`;
    this.proc = proc;
    this.reach = reach;
  }

  /** Starts Prometheus and waits until it is ready (TSDB open, rules loaded, scraping). */
  static async start(o: PrometheusOptions): Promise<Prometheus> {
    await ensurePromtool();
    const dir = await mkdtemp(join(tmpdir(), 'nodedisks-prometheus-'));
    const interval = o.interval ?? '1s';
    await writeFile(join(dir, 'rules.yaml'), dump({ groups: o.groups ?? [] }));
    await writeFile(
      join(dir, 'prometheus.yml'),
      dump({
        global: { scrape_interval: interval, evaluation_interval: interval, scrape_timeout: interval },
        rule_files: ['rules.yaml'],
        scrape_configs: o.jobs.map((j) => ({ job_name: j.job, static_configs: j.targets.map((t) => ({ targets: [t.address], labels: t.labels ?? {} })) })),
      }),
    );
    let lastError: Error | undefined;
    // A port picked free can be taken before Prometheus binds it: then it exits, and we try another.
    for (let attempt = 0; attempt < BOOT_ATTEMPTS; attempt++) {
      // Free on the host; in a cluster namespace, only likely so (the retry covers it).
      const port = await freePort();
      const proc = new ServerProcess('prometheus', join(dir, 'prometheus.log'));
      const started = Date.now();
      const argv = [
        join(prometheusDir(), 'prometheus'),
        `--config.file=${join(dir, 'prometheus.yml')}`,
        `--storage.tsdb.path=${join(dir, 'data')}`,
        `--web.listen-address=127.0.0.1:${port}`,
        '--log.level=info',
      ];
      // enter.sh execs nsenter, which execs Prometheus: lifeline's child is the server itself.
      if (o.netns) proc.start(ENTER, [o.netns.cgroup, `netns:${o.netns.name}`, ...argv]);
      else proc.start(argv[0]!, argv.slice(1));
      const reach = o.netns ? await Reach.start(dir, o.netns, port) : undefined;
      const p = new Prometheus(dir, port, proc, reach);
      try {
        await p.waitReady(60_000);
        p.startedInMs = Date.now() - started;
        return p;
      } catch (err) {
        lastError = err as Error;
        await proc.stop();
        await reach?.stop();
        if (!/address already in use/.test(proc.logsOfThisRun())) break;
      }
    }
    const log = new ServerProcess('prometheus', join(dir, 'prometheus.log')).logs(8 * 1024);
    await rm(dir, { recursive: true, force: true });
    throw new Error(`Prometheus did not start: ${lastError?.message}\n${log}`);
  }

  private async waitReady(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    const exited = this.proc.whenExited().then((code) => code);
    let done = false;
    void exited.then(() => {
      done = true;
    });
    for (;;) {
      if (done) throw new Error(`prometheus exited (${await exited})`);
      const ok = await fetch(`${this.url}/-/ready`)
        .then((r) => r.ok)
        .catch(() => false);
      if (ok) return;
      if (Date.now() > deadline) throw new Error(`prometheus not ready after ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** The server's log (the last `maxBytes`): print it when a test fails. */
  logs(maxBytes = 16 * 1024): string {
    return this.proc.logs(maxBytes);
  }

  private async api<T>(path: string, params: Record<string, string | string[]> = {}): Promise<T> {
    const body = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) for (const x of Array.isArray(v) ? v : [v]) body.append(k, x);
    const res = await fetch(`${this.url}${path}`, { method: 'POST', body, headers: { 'content-type': 'application/x-www-form-urlencoded' } });
    const json = (await res.json()) as { status: string; data: T; error?: string; errorType?: string };
    if (json.status !== 'success') throw new Error(`Prometheus ${path} ${JSON.stringify(params)}: ${json.errorType}: ${json.error}`);
    return json.data;
  }

  /** An instant query's result vector. Throws on an invalid expression. */
  async query(expr: string): Promise<Sample[]> {
    const data = await this.api<{ resultType: string; result: Sample[] | [number, string] }>('/api/v1/query', { query: expr });
    if (data.resultType === 'scalar' || data.resultType === 'string') return [{ metric: {}, value: data.result as [number, string] }];
    return data.result as Sample[];
  }

  /** The series a selector matches in the TSDB head (every series scraped since the start). */
  series(selector: string): Promise<Record<string, string>[]> {
    return this.api<Record<string, string>[]>('/api/v1/series', { 'match[]': selector });
  }

  /** The alerts pending or firing now. */
  async alerts(): Promise<Alert[]> {
    const res = await fetch(`${this.url}/api/v1/alerts`);
    const json = (await res.json()) as { data: { alerts: Alert[] } };
    return json.data.alerts;
  }

  /** Scrape targets and their health. */
  async targets(): Promise<{ labels: Record<string, string>; health: string; lastError: string; scrapeUrl: string }[]> {
    const res = await fetch(`${this.url}/api/v1/targets?state=active`);
    const json = (await res.json()) as { data: { activeTargets: { labels: Record<string, string>; health: string; lastError: string; scrapeUrl: string }[] } };
    return json.data.activeTargets;
  }

  /** Stops the server (SIGTERM to its PID, SIGKILL after 10 s) and its relay, and removes its dir. */
  async stop(): Promise<void> {
    await this.proc.stop();
    await this.reach?.stop();
    await rm(this.dir, { recursive: true, force: true });
  }
}

/** The way in from the host to a server in a namespace: host 127.0.0.1:<port> -> unix socket -> (namespace) 127.0.0.1:<target>. */
class Reach {
  readonly port: number;
  private readonly relay: ServerProcess;
  private readonly server: Server;
  private readonly sockets: Set<Socket>;

  private constructor(port: number, relay: ServerProcess, server: Server, sockets: Set<Socket>) {
    this.port = port;
    this.relay = relay;
    this.server = server;
    this.sockets = sockets;
  }

  static async start(dir: string, netns: { name: string; cgroup: string }, target: number): Promise<Reach> {
    const socket = join(dir, 'api.sock');
    const relay = new ServerProcess('prometheus-relay', join(dir, 'relay.log'));
    relay.start(ENTER, [netns.cgroup, `netns:${netns.name}`, process.execPath, RELAY, socket, '127.0.0.1', String(target)]);
    // fetch keeps connections alive: closing the forwarder ends them, or close() would wait for them.
    const sockets = new Set<Socket>();
    const server = createServer((client) => {
      sockets.add(client);
      client.on('close', () => sockets.delete(client));
      splice(client, createConnection(socket));
    });
    const port = await new Promise<number>((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as { port: number }).port)));
    return new Reach(port, relay, server, sockets);
  }

  async stop(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    for (const s of this.sockets) s.destroy();
    await closed;
    await this.relay.stop();
  }
}
