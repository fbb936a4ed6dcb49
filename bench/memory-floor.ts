// The agent's and the controller's memory against the runtime's floor (issue 24): the bundles run as
// they ship (dist/, the DaemonSet's NODE_OPTIONS, the image's node flags), against a real control plane;
// the agent with DISKS disk images on its node, read once every disk is Available and SETTLE seconds
// have passed; the controller idle with CONTROLLER_DISKS NodeDisks; a bare Node started with the same
// flags next to each. Each figure is the median of RUNS fresh processes.
// `npm run bench:memory` (DISKS=300, CONTROLLER_DISKS=9, RUNS=5, SETTLE=20). Other builds or flags, to
// measure a cut: AGENT_VARIANTS / CONTROLLER_VARIANTS="name=<node flags and VAR=value env>;…", where
// `shipped` is the flags as the manifests have them, e.g.
// AGENT_VARIANTS="shipped;optsize=--jitless --max-semi-space-size=1 --optimize-for-size".
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { load as parseYaml } from 'js-yaml';
import { NodeDiskClient } from '../api/client.ts';
import { DEFAULT_DISK_DIR } from '../api/constants.ts';
import { loadKubeConfig } from '../lib/kube/kubeconfig.ts';
import { RestClient } from '../lib/kube/rest.ts';
import { ControlPlane } from '../hack/controlplane/controlplane.ts';
import { IMAGES } from '../hack/lib/image-spec.ts';
import { REPO_ROOT } from '../hack/lib/paths.ts';
import { Program, seedDisks } from '../hack/lib/programs.ts';
import { eventually } from '../hack/lib/wait.ts';
import { GOALS } from './lib/memory-goals.ts';
import { startRecord } from './lib/results.ts';

const DISKS = Number(process.env.DISKS ?? 300);
const CONTROLLER_DISKS = Number(process.env.CONTROLLER_DISKS ?? 9);
const RUNS = Number(process.env.RUNS ?? 5);
const SETTLE_S = Number(process.env.SETTLE ?? 20);
const AGENT_BUNDLE = process.env.AGENT_BUNDLE ?? join(REPO_ROOT, 'dist/agent/node-disks-agent.mjs');
const CONTROLLER_BUNDLE = process.env.CONTROLLER_BUNDLE ?? join(REPO_ROOT, 'dist/controller/node-disks-operator.mjs');
/** The controller's container limit (kustomize/controller), which --max-old-space-size-percentage reads in a pod. */
const CONTROLLER_LIMIT_MIB = 256;

interface Launch {
  flags: string[];
  env: Record<string, string>;
  /** Another build of the program (BUNDLE=<path> in a variant), e.g. an older commit's. */
  bundle?: string;
}

/** The agent as the DaemonSet runs it: its NODE_OPTIONS (the image has no node flags of its own). */
function shippedAgent(): Launch {
  const ds = parseYaml(readFileSync(join(REPO_ROOT, 'kustomize/agent/daemonset.yaml'), 'utf8')) as {
    spec: { template: { spec: { containers: { env?: { name: string; value?: string }[] }[] } } };
  };
  const env: Record<string, string> = {};
  for (const e of ds.spec.template.spec.containers[0]!.env ?? []) if (e.value !== undefined) env[e.name] = e.value;
  return { flags: [...IMAGES.find((i) => i.target === 'agent')!.nodeFlags], env };
}

/**
 * The controller as the image's entrypoint runs it. Outside a pod there is no memory limit for
 * --max-old-space-size-percentage to take a share of: the same share of the Deployment's limit instead.
 */
function shippedController(): Launch {
  const flags = IMAGES.find((i) => i.target === 'operator')!.nodeFlags.map((f) => {
    const pct = /^--max-old-space-size-percentage=(\d+)$/.exec(f)?.[1];
    return pct ? `--max-old-space-size=${Math.floor((CONTROLLER_LIMIT_MIB * Number(pct)) / 100)}` : f;
  });
  return { flags, env: {} };
}

/** "name=--flag VAR=value …;…": node flags and environment variables of each variant. */
function variants(spec: string | undefined, shipped: Launch): { name: string; launch: Launch }[] {
  return (spec ?? 'shipped')
    .split(';')
    .map((v) => v.trim())
    .filter(Boolean)
    .map((v) => {
      const [name, rest] = v.includes('=') ? [v.slice(0, v.indexOf('=')), v.slice(v.indexOf('=') + 1)] : [v, undefined];
      if (rest === undefined) {
        if (name !== 'shipped') throw new Error(`variant ${name}: give its flags as ${name}=<flags>, or name it shipped`);
        return { name, launch: shipped };
      }
      const launch: Launch = { flags: [], env: {} };
      for (const t of rest.split(/\s+/).filter(Boolean)) {
        const env = /^([A-Z_][A-Z0-9_]*)=(.*)$/.exec(t);
        if (env?.[1] === 'BUNDLE') launch.bundle = env[2]!;
        else if (env) launch.env[env[1]!] = env[2]!;
        else launch.flags.push(t);
      }
      return { name, launch };
    });
}

interface Memory {
  rss: number;
  anon: number;
  file: number;
}

function memoryOf(pid: number): Memory {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const mib = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1]) / 1024;
  return { rss: mib('VmRSS'), anon: mib('RssAnon'), file: mib('RssFile') };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;
const medianMemory = (ms: Memory[]): Memory => ({ rss: median(ms.map((m) => m.rss)), anon: median(ms.map((m) => m.anon)), file: median(ms.map((m) => m.file)) });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const fmt = (m: Memory) => `${m.rss.toFixed(1)} MiB (${m.anon.toFixed(1)} anon / ${m.file.toFixed(1)} file)`;

/** What any Kubernetes client with a /metrics endpoint loads: TLS for the API server, an HTTP server, fs. */
const CLIENT_FLOOR = "require('https'); require('fs/promises'); require('http').createServer().listen(0, '127.0.0.1');";

/**
 * A Node process started with `launch` that only waits: the runtime's own floor under those flags, or
 * with `script`, the floor of a program that loads those modules and does nothing with them.
 */
async function bare(launch: Launch, logFile: string, prelude = ''): Promise<Memory> {
  const script = `${prelude}setInterval(() => {}, 1 << 30)`;
  const p = new Program('bare', logFile, script, []);
  p.start(process.execPath, [...launch.flags, '-e', script], { ...process.env, ...launch.env });
  try {
    await sleep(3000);
    return memoryOf((await p.programPid())!);
  } finally {
    await p.stop();
  }
}

/** The heap figures of a program's /metrics (prom-client's nodejs_* gauges), in MiB. */
async function heapOf(p: Program): Promise<{ heapUsed: number; heapTotal: number; external: number }> {
  const port = /"httpPort":(\d+)/.exec(p.logs(Number.MAX_SAFE_INTEGER))?.[1];
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const g = (name: string) => Number(new RegExp(`^${name} (\\S+)`, 'm').exec(text)?.[1] ?? Number.NaN) / 2 ** 20;
  return { heapUsed: g('nodejs_heap_size_used_bytes'), heapTotal: g('nodejs_heap_size_total_bytes'), external: g('nodejs_external_memory_bytes') };
}

const record = startRecord('memory-floor', { disks: DISKS, controllerDisks: CONTROLLER_DISKS, runs: RUNS, settleS: SETTLE_S });
const cp = await ControlPlane.start();
const work = await mkdtemp(join(tmpdir(), 'nodedisks-memory-'));
const figures: Record<string, { rss: number; anon: number; file: number; bare: number; clientFloor: number; heapUsed: number; heapTotal: number; flags: string }> = {};
let seq = 0;
try {
  const admin = new NodeDiskClient(new RestClient(loadKubeConfig({ kubeconfig: cp.admin().kubeconfig })));
  const availableOn = async (node: string) => {
    let n = 0;
    for await (const page of admin.listPages({ fieldSelector: `spec.nodeName=${node},status.node.phase=Available` })) n += page.items.length;
    return n;
  };
  /** One agent on a fresh node with `disks` images, until they are all Available; the caller stops it. */
  const agentOn = async (launch: Launch, diskDir: string, disks: number): Promise<Program> => {
    const node = `mem-node-${++seq}`;
    const identity = await cp.agent(node);
    const bundle = launch.bundle ?? AGENT_BUNDLE;
    const p = new Program(`agent-${node}`, join(work, `${node}.log`), bundle, []);
    p.start(
      process.execPath,
      [...launch.flags, bundle, `--kubeconfig=${identity.kubeconfig}`, `--node-name=${node}`, `--disk-dir=${diskDir}`, `--host-disk-dir=${DEFAULT_DISK_DIR}`, '--http-address=127.0.0.1:0'],
      { ...process.env, ...launch.env },
    );
    await eventually(`${disks} disks Available on ${node}`, async () => (await availableOn(node)) === disks, 900_000, 500);
    return p;
  };

  const rows: string[] = [];
  const measure = async (what: 'agent' | 'controller', name: string, launch: Launch, start: () => Promise<Program>) => {
    const ms: Memory[] = [];
    const heaps: { heapUsed: number; heapTotal: number }[] = [];
    for (let i = 0; i < RUNS; i++) {
      const p = await start();
      try {
        await sleep(SETTLE_S * 1000);
        ms.push(memoryOf((await p.programPid())!));
        heaps.push(await heapOf(p));
      } finally {
        await p.stop();
      }
    }
    const m = medianMemory(ms);
    const b = medianMemory(await Promise.all([0, 1, 2].map(async (i) => await bare(launch, join(work, `bare-${what}-${name}-${i}.log`)))));
    const c = medianMemory(await Promise.all([0, 1, 2].map(async (i) => await bare(launch, join(work, `floor-${what}-${name}-${i}.log`), CLIENT_FLOOR))));
    const heapUsed = median(heaps.map((h) => h.heapUsed));
    const heapTotal = median(heaps.map((h) => h.heapTotal));
    const flags = [
      ...(launch.bundle ? [`BUNDLE=${launch.bundle.replace(`${REPO_ROOT}/`, '')}`] : []),
      ...Object.entries(launch.env).map(([k, v]) => (v.includes(' ') ? `${k}="${v}"` : `${k}=${v}`)),
      ...launch.flags,
    ].join(' ');
    const goal = what === 'agent' ? GOALS.agentMiB : GOALS.controllerMiB;
    figures[`${what}:${name}`] = { rss: m.rss, anon: m.anon, file: m.file, bare: b.rss, clientFloor: c.rss, heapUsed, heapTotal, flags };
    rows.push(
      `| ${what} ${name} (${flags || 'no flags'}) | ${fmt(m)} | ${Math.min(...ms.map((x) => x.rss)).toFixed(1)}–${Math.max(...ms.map((x) => x.rss)).toFixed(1)} | ${heapUsed.toFixed(1)} / ${heapTotal.toFixed(1)} MiB | ${fmt(b)} | ${fmt(c)} | ≤ ${goal} MiB${m.rss <= goal ? ' (met)' : ' (missed)'} |`,
    );
    console.error(rows.at(-1));
  };

  const diskDir = join(work, 'disks');
  await seedDisks(diskDir, DISKS, 64 * 1024 * 1024);
  const shipped = shippedAgent();

  // The controller idle: CONTROLLER_DISKS NodeDisks of one agent's node, reconciled, nothing changing.
  const fewDir = join(work, 'few-disks');
  await seedDisks(fewDir, CONTROLLER_DISKS, 64 * 1024 * 1024);
  const fewAgent = await agentOn(shipped, fewDir, CONTROLLER_DISKS);
  try {
    const identity = await cp.controller();
    for (const { name, launch } of variants(process.env.CONTROLLER_VARIANTS, shippedController())) {
      await measure('controller', name, launch, async () => {
        const id = `controller-mem-${++seq}`;
        const bundle = launch.bundle ?? CONTROLLER_BUNDLE;
        const p = new Program(id, join(work, `${id}.log`), bundle, []);
        p.start(
          process.execPath,
          [...launch.flags, bundle, `--kubeconfig=${identity.kubeconfig}`, '--leader-elect=true', '--http-address=127.0.0.1:0', `--identity=${id}`, '--node-lifecycle=false'],
          { ...process.env, ...launch.env },
        );
        await eventually(
          `${id} leads and is ready`,
          async () => {
            const port = /"httpPort":(\d+)/.exec(p.logs(Number.MAX_SAFE_INTEGER))?.[1];
            return (
              port !== undefined &&
              (await fetch(`http://127.0.0.1:${port}/readyz`).then(
                (r) => r.ok,
                () => false,
              ))
            );
          },
          120_000,
          250,
        );
        return p;
      });
    }
  } finally {
    await fewAgent.stop();
  }

  for (const { name, launch } of variants(process.env.AGENT_VARIANTS, shipped)) {
    await measure('agent', name, launch, async () => await agentOn(launch, diskDir, DISKS));
  }

  console.log(`memory against the runtime's floor: agent with ${DISKS} disks, controller idle with ${CONTROLLER_DISKS} NodeDisks; median of ${RUNS} fresh processes, ${SETTLE_S} s after ready`);
  console.log('| program, flags | RSS (VmRSS) | range | V8 heap used / total | bare Node, same flags | Node + https, http server, fs/promises | goal |');
  console.log('| --- | --- | --- | --- | --- | --- | --- |');
  for (const r of rows) console.log(r);
} finally {
  await cp.stop();
  await rm(work, { recursive: true, force: true });
}
record.save({ kubernetes: cp.binaries.kubernetesVersion, goals: GOALS, ...figures });
