// Start-up of builds of the plugin side by side, run directly (not through kubectl), on one real control
// plane with 9 and 300 NodeDisks: `version` (no API call) and `list`, with `kubectl get nodedisks` as the
// yardstick. Median wall time and CPU time (user+sys, steadier on a shared machine) from GNU time.
//
//   BUILDS=before:/tmp/old/kubectl-nodedisks,after:dist/bin/kubectl-nodedisks,after-first:@dist/bin/kubectl-nodedisks \
//   SIZES=9,300 RUNS=25 node bench/plugin-start.ts
//
// Each build runs with its own empty cache directories (XDG_CACHE_HOME for the single executable's code
// cache, NODE_COMPILE_CACHE for the bundle's), warmed by one run. A build written `@path` has them emptied
// before every run: its figures are those of a first run. The commands take turns, so load from other
// jobs falls on all of them alike; the load average is printed with each row.
//
// INSTRUCTIONS=N adds, per build, the median of N runs' instructions executed (valgrind's callgrind, all
// threads, children followed): the one figure a shared machine's load does not move. kubectl (Go) is not
// counted. Each such run takes seconds.
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { isAbsolute, join } from 'node:path';
import { NodeDiskClient } from '../api/client.ts';
import { loadKubeConfig } from '../lib/kube/kubeconfig.ts';
import { RestClient } from '../lib/kube/rest.ts';
import { ControlPlane } from '../hack/controlplane/controlplane.ts';
import { REPO_ROOT } from '../hack/lib/paths.ts';
import { populateReported } from './lib/fleet.ts';
import { instructions } from './lib/instructions.ts';

const SIZES = (process.env.SIZES ?? '9,300').split(',').map(Number);
const RUNS = Number(process.env.RUNS ?? 25);
const COMMANDS = (process.env.COMMANDS ?? 'version,list').split(',');
const INSTRUCTIONS = Number(process.env.INSTRUCTIONS ?? 0);
const work = mkdtempSync(join(tmpdir(), 'bench-plugin-start-'));
const BUILDS = (process.env.BUILDS ?? 'bundle:dist/bin/kubectl-nodedisks').split(',').map((spec, i) => {
  const at = spec.indexOf(':');
  const [name, raw] = at < 0 ? [spec, spec] : [spec.slice(0, at), spec.slice(at + 1)];
  const fresh = raw.startsWith('@');
  const path = fresh ? raw.slice(1) : raw;
  const caches = join(work, `caches-${i}`);
  return { name, exe: isAbsolute(path) ? path : join(REPO_ROOT, path), fresh, caches };
});

interface Sample {
  wallMs: number;
  cpuMs: number;
}

function measure(cmd: string, args: string[], env: NodeJS.ProcessEnv): Promise<Sample> {
  const report = join(work, 'time.txt');
  return new Promise((resolve, reject) => {
    execFile('/usr/bin/time', ['-o', report, '-f', '%e %U %S', cmd, ...args], { env, maxBuffer: 256 * 1024 * 1024 }, (err, _out, stderr) => {
      if (err) return reject(new Error(`${cmd} ${args.join(' ')}: ${stderr.slice(0, 2000)}`));
      if (stderr) return reject(new Error(`${cmd} ${args.join(' ')} printed on stderr: ${stderr.slice(0, 2000)}`));
      const [wall, user, sys] = readFileSync(report, 'utf8').trim().split('\n').pop()!.split(' ').map(Number);
      resolve({ wallMs: wall! * 1000, cpuMs: (user! + sys!) * 1000 });
    });
  });
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const loadavg = () => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');

const cp = await ControlPlane.start();
try {
  const kubeconfig = cp.admin().kubeconfig;
  const client = new NodeDiskClient(new RestClient(loadKubeConfig({ kubeconfig })));
  // NODE_COMPILE_CACHE only for a bundle (a shell launcher): set for a single executable, Node would
  // enable its compile cache at start for nothing (the executable's code is not loaded from files).
  const isBundle = (exe: string) => readFileSync(exe).subarray(0, 2).toString() === '#!';
  const envFor = (b: (typeof BUILDS)[number]) => ({
    ...process.env,
    KUBECONFIG: kubeconfig,
    XDG_CACHE_HOME: join(b.caches, 'xdg'),
    ...(isBundle(b.exe) ? { NODE_COMPILE_CACHE: join(b.caches, 'node') } : {}),
  });
  const prepare = (b: (typeof BUILDS)[number]) => {
    if (b.fresh) rmSync(b.caches, { recursive: true, force: true });
    mkdirSync(b.caches, { recursive: true });
  };
  console.log(`Kubernetes ${cp.binaries.kubernetesVersion}; direct runs; median of ${RUNS} runs after a warm-up, commands taking turns; load average at start ${loadavg()}`);
  console.log(`builds: ${BUILDS.map((b) => `${b.name} = ${b.exe}${b.fresh ? ' (first run: caches emptied before each run)' : ''}`).join(', ')}`);
  console.log(`| NodeDisks | command | kubectl get nodedisks: wall / CPU (mean) | ${BUILDS.map((b) => `${b.name}: wall / CPU (mean)`).join(' | ')} | load |`);
  console.log(`| --- | --- | --- | ${BUILDS.map(() => '---').join(' | ')} | --- |`);
  let created = 0;
  for (const [n, size] of SIZES.entries()) {
    await populateReported(client, created, size, 16);
    created = size;
    // `version` makes no API call: once is enough.
    for (const command of COMMANDS.filter((c) => n === 0 || c !== 'version')) {
      const runs = [
        { prepare: () => {}, cmd: cp.binaries.kubectl, args: command === 'version' ? ['version', '--client'] : ['get', 'nodedisks'], env: { ...process.env, KUBECONFIG: kubeconfig } },
        ...BUILDS.map((b) => ({ prepare: () => prepare(b), cmd: b.exe, args: [command], env: envFor(b) })),
      ];
      const samples: Sample[][] = runs.map(() => []);
      for (const r of runs) {
        r.prepare();
        await measure(r.cmd, r.args, r.env);
      }
      for (let i = 0; i < RUNS; i++) {
        for (const [j, r] of runs.entries()) {
          r.prepare();
          samples[j]!.push(await measure(r.cmd, r.args, r.env));
        }
      }
      // GNU time reports CPU in steps of 10 ms: the mean of the runs resolves what the median cannot.
      const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
      const cell = (s: Sample[]) => `${median(s.map((x) => x.wallMs)).toFixed(0)} / ${median(s.map((x) => x.cpuMs)).toFixed(0)} (${mean(s.map((x) => x.cpuMs)).toFixed(0)}) ms`;
      const label = command === 'version' ? 'version (kubectl: version --client)' : command;
      console.log(`| ${size} | ${label} | ${samples.map(cell).join(' | ')} | ${loadavg()} |`);
      if (INSTRUCTIONS > 0) {
        const counts: number[][] = BUILDS.map(() => []);
        for (let i = 0; i < INSTRUCTIONS; i++) {
          for (const [j, r] of runs.slice(1).entries()) {
            r.prepare();
            counts[j]!.push(await instructions(r.cmd, r.args, r.env));
          }
        }
        console.log(`| ${size} | ${label}: instructions (millions, median of ${INSTRUCTIONS}) | | ${counts.map((c) => median(c).toFixed(0)).join(' | ')} | ${loadavg()} |`);
      }
    }
  }
} finally {
  await cp.stop();
  rmSync(work, { recursive: true, force: true });
}
