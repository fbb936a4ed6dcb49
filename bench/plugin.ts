// `npm run bench:plugin`: how fast the krew executable answers `kubectl nodedisks list` next to its two
// references, on one control plane with SIZES NodeDisks (default 9 and 300, NodeDisks with a status):
//   - `kubectl get nodedisks` (the control plane's kubectl);
//   - a bare Node plugin through the same kubectl: the same Node binary as a single executable with an
//     empty main script, so kubectl's plugin dispatch plus Node's own start and exit;
//   - `kubectl nodedisks list` with the krew release executable (built here for this machine, as
//     `npm run release` builds it, into a temporary directory), and `kubectl nodedisks status`.
// The goal (issue 24): list within 1.15× of the higher of the first two, at each size.
//
//   SIZES=9,300 RUNS=40 npm run bench:plugin        PLUGINS=before:/tmp/old,after:krew npm run bench:plugin
//
// PLUGINS lists the builds to measure as name:dir (a directory holding kubectl-nodedisks), `krew` for the
// one built here (the default; the first build is the one the ratio and the goal are about). Every command
// runs twice as a warm-up (kubectl's discovery cache; the krew executable's code cache, in an
// XDG_CACHE_HOME of each build's own), then RUNS rounds in which every command runs once, in a new random
// order each round, so load from other jobs falls on all alike. Wall time from this process's clock,
// spawn to exit; CPU (user+sys of kubectl and the plugin it execs: rusage, through GNU time, in its 10 ms
// steps, hence also the mean); output to /dev/null. INSTRUCTIONS=N adds the median of N valgrind counts
// of the bare plugin and of each build's `list`, run directly (no kubectl). Each run appends a record to
// bench/results/plugin.jsonl (bench/lib/results.ts).
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { isAbsolute, join } from 'node:path';
import { NodeDiskClient } from '../api/client.ts';
import { ControlPlane } from '../hack/controlplane/controlplane.ts';
import { REPO_ROOT } from '../hack/lib/paths.ts';
import { loadKubeConfig } from '../lib/kube/kubeconfig.ts';
import { RestClient } from '../lib/kube/rest.ts';
import { populateReported } from './lib/fleet.ts';
import { haveValgrind, instructions } from './lib/instructions.ts';
import { bareNodePlugin, krewExecutable } from './lib/plugin-builds.ts';
import { type Figures, startRecord } from './lib/results.ts';
import { quantile, timingSummary } from './lib/samples.ts';

const SIZES = (process.env.SIZES ?? '9,300').split(',').map(Number);
const RUNS = Number(process.env.RUNS ?? 40);
const INSTRUCTIONS = Number(process.env.INSTRUCTIONS ?? 0);
const GOAL = 1.15;
if (INSTRUCTIONS > 0 && !haveValgrind()) throw new Error('INSTRUCTIONS=N needs valgrind on PATH');
const SPECS = (process.env.PLUGINS ?? 'krew').split(',').map((spec) => {
  const at = spec.indexOf(':');
  const [name, dir] = at < 0 ? [spec, spec] : [spec.slice(0, at), spec.slice(at + 1)];
  return { name: name!, dir: dir! };
});

interface Sample {
  wallMs: number;
  cpuMs: number;
}

const work = mkdtempSync(join(tmpdir(), 'bench-plugin-'));
const loadavg = () => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');

function measure(cmd: string, args: string[], env: NodeJS.ProcessEnv): Promise<Sample> {
  const report = join(work, 'time.txt');
  return new Promise((resolve, reject) => {
    const started = performance.now();
    execFile('/usr/bin/time', ['-o', report, '-f', '%U %S', cmd, ...args], { env, maxBuffer: 512 * 1024 * 1024 }, (err, _out, stderr) => {
      const wallMs = performance.now() - started;
      if (err) return reject(new Error(`${cmd} ${args.join(' ')}: ${stderr.slice(0, 2000)}`));
      if (stderr) return reject(new Error(`${cmd} ${args.join(' ')} printed on stderr: ${stderr.slice(0, 2000)}`));
      const [user, sys] = readFileSync(report, 'utf8').trim().split('\n').pop()!.split(' ').map(Number);
      resolve({ wallMs, cpuMs: (user! + sys!) * 1000 });
    });
  });
}

const summary = (s: Sample[]) => ({
  ...timingSummary(s),
  runs: s.length,
});
type Summary = ReturnType<typeof summary>;

function shuffle<T>(xs: T[]): T[] {
  const a = [...xs];
  for (let i = a.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [a[i], a[j]] = [a[j]!, a[i]!];
  }
  return a;
}

const log = (line: string) => console.error(line);
const record = startRecord('plugin', { sizes: SIZES.join(','), runs: RUNS, instructions: INSTRUCTIONS, plugins: SPECS.map((s) => `${s.name}:${s.dir}`).join(',') });
const loadAtStart = loadavg();
let cp: ControlPlane | undefined;
try {
  const builds: { name: string; dir: string }[] = [];
  for (const s of SPECS) {
    const dir = s.dir === 'krew' ? await krewExecutable(join(work, `build-${s.name}`), log) : isAbsolute(s.dir) ? s.dir : join(REPO_ROOT, s.dir);
    builds.push({ name: s.name, dir });
  }
  const bare = await bareNodePlugin(join(work, 'bare-node'), log);
  cp = await ControlPlane.start();
  const kubectl = cp.binaries.kubectl;
  const kubeconfig = cp.admin().kubeconfig;
  const client = new NodeDiskClient(new RestClient(loadKubeConfig({ kubeconfig })));
  // Only the plugins get a cache directory of their own (the krew executable's code cache): the control
  // plane's build cache is under XDG_CACHE_HOME too.
  const envFor = (dir: string, cache?: string) => ({ ...process.env, PATH: `${dir}:${process.env.PATH}`, KUBECONFIG: kubeconfig, ...(cache ? { XDG_CACHE_HOME: cache } : {}) });
  const caches = builds.map((_, i) => {
    const c = join(work, `cache-${i}`);
    mkdirSync(c, { mode: 0o700 });
    return c;
  });
  const commands = [
    { key: 'get', label: 'kubectl get nodedisks', args: ['get', 'nodedisks'], env: envFor(bare) },
    { key: 'bare', label: 'bare Node plugin', args: ['nodedisks', 'list'], env: envFor(bare) },
    ...builds.flatMap((b, i) => [
      { key: `${b.name}-list`, label: `${b.name}: kubectl nodedisks list`, args: ['nodedisks', 'list'], env: envFor(b.dir, caches[i]) },
      { key: `${b.name}-status`, label: `${b.name}: kubectl nodedisks status`, args: ['nodedisks', 'status'], env: envFor(b.dir, caches[i]) },
    ]),
  ];

  console.log(`Kubernetes ${cp.binaries.kubernetesVersion}, kubectl ${kubectl}; node ${process.version}; NodeDisks with a status over 200 nodes`);
  console.log(`builds: ${builds.map((b) => `${b.name} = ${b.dir}`).join(', ')}; bare Node plugin = ${bare}`);
  console.log(`${RUNS} rounds after two warm-up runs, commands in a new random order each round; wall: median (p90); CPU: median; mean; load average at start ${loadAtStart}`);
  const cell = (s: Summary) => `${s.wallMs.toFixed(0)} (${s.wallP90.toFixed(0)}) ms \\| ${s.cpuMs.toFixed(0)}; ${s.cpuMean.toFixed(0)} ms`;
  const head = builds.map((b) => `${b.name}: kubectl nodedisks list | list / max(get, bare) | ${b.name}: status`).join(' | ');
  console.log(`| NodeDisks | kubectl get nodedisks | bare Node plugin | ${head} | load |`);
  console.log(`| --- | --- | --- | ${builds.map(() => '--- | --- | ---').join(' | ')} | --- |`);

  const figures: Figures = {};
  let created = 0;
  for (const size of SIZES) {
    await populateReported(client, created, size, 16);
    created = size;
    const samples = new Map<string, Sample[]>(commands.map((c) => [c.key, []]));
    for (let w = 0; w < 2; w++) for (const c of commands) await measure(kubectl, c.args, c.env);
    for (let r = 0; r < RUNS; r++) {
      for (const c of shuffle(commands)) samples.get(c.key)!.push(await measure(kubectl, c.args, c.env));
    }
    const s = new Map([...samples].map(([k, v]) => [k, summary(v)]));
    const get = s.get('get')!;
    const bareS = s.get('bare')!;
    const floor = Math.max(get.wallMs, bareS.wallMs);
    const perBuild = builds.map((b) => {
      const list = s.get(`${b.name}-list`)!;
      return { name: b.name, list, status: s.get(`${b.name}-status`)!, ratio: list.wallMs / floor };
    });
    const cells = perBuild.map((p) => `${cell(p.list)} | **${p.ratio.toFixed(2)}** (goal ≤ ${GOAL}) | ${cell(p.status)}`).join(' | ');
    console.log(`| ${size} | ${cell(get)} | ${cell(bareS)} | ${cells} | ${loadavg()} |`);

    const counts: Record<string, number> = {};
    if (INSTRUCTIONS > 0) {
      const direct = [
        { key: 'bare', exe: join(bare, 'kubectl-nodedisks'), env: envFor(bare) },
        ...builds.map((b, i) => ({ key: `${b.name}-list`, exe: join(b.dir, 'kubectl-nodedisks'), env: envFor(b.dir, caches[i]) })),
      ];
      const n: Record<string, number[]> = Object.fromEntries(direct.map((d) => [d.key, []]));
      for (let i = 0; i < INSTRUCTIONS; i++) for (const d of direct) n[d.key]!.push(await instructions(d.exe, ['list'], d.env));
      for (const d of direct) counts[d.key] = quantile(n[d.key]!, 0.5);
      console.log(
        `|  | instructions, direct runs (millions, median of ${INSTRUCTIONS}) | ${counts.bare!.toFixed(0)} M | ${builds.map((b) => `${counts[`${b.name}-list`]!.toFixed(0)} M |  | `).join(' | ')} | ${loadavg()} |`,
      );
    }
    figures[String(size)] = {
      get,
      bare: bareS,
      builds: perBuild.map((p) => ({ name: p.name, list: p.list, status: p.status, listOverFloor: p.ratio, goalMet: p.ratio <= GOAL })),
      instructionsM: counts,
      load: loadavg(),
    };
  }
  console.log(`load average at end ${loadavg()}`);
  record.save({ kubernetes: cp.binaries.kubernetesVersion, goal: GOAL, loadAtStart, loadAtEnd: loadavg(), sizes: figures });
} finally {
  await cp?.stop();
  rmSync(work, { recursive: true, force: true });
}
