// `npm run bench:scale:plugin`: `kubectl nodedisks list` through kubectl against `kubectl get nodedisks`
// at 9, 300 and SCALE_N NodeDisks (default 1000) spread round robin over 200 nodes, on one real control
// plane: median and p90 of the wall time, of the CPU time (user+sys, steadier than wall time on a shared
// machine; also its mean) and the peak RSS of each, CPU and RSS from GNU time (`/usr/bin/time`; for the
// plugin that is the kubectl process that execs it).
//
//   SCALE_N=10000,50000 RUNS=3 PLUGINS=bundle:dist/bin,sea:/tmp/sea npm run bench:scale:plugin
//
// PLUGINS names directories holding a `kubectl-nodedisks` executable (default: the bundle, dist/bin),
// so a build from before a change, or the single executable krew installs, can be measured in the same
// run as kubectl. Both sides use the control plane's kubectl; output goes to /dev/null. Each command
// runs once as a warm-up (kubectl's discovery cache, Node's compile cache, the krew executable's code
// cache in an XDG_CACHE_HOME of each plugin's own), then the commands take turns, RUNS times, so load from
// other jobs falls on all of them alike.
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
import { startRecord } from './lib/results.ts';
import { timingSummary } from './lib/samples.ts';

// SCALE_N may list several sizes (10000,50000): one population grows through all of them.
const SIZES = [...new Set([9, 300, ...(process.env.SCALE_N ?? '1000').split(',').map(Number)])].sort((a, b) => a - b);
const RUNS = Number(process.env.RUNS ?? 5);
const NODES = 200;
const PLUGINS = (process.env.PLUGINS ?? 'bundle:dist/bin').split(',').map((spec) => {
  const [name, dir] = spec.includes(':') ? [spec.slice(0, spec.indexOf(':')), spec.slice(spec.indexOf(':') + 1)] : [spec, spec];
  return { name: name!, dir: isAbsolute(dir!) ? dir! : join(REPO_ROOT, dir!) };
});

interface Sample {
  wallMs: number;
  cpuMs: number;
  rssMiB: number;
}

const work = mkdtempSync(join(tmpdir(), 'bench-scale-plugin-'));

/**
 * One run under GNU time: user+sys CPU (in its 10 ms steps) and peak RSS of the process (and what it
 * execs); the wall time is this process's clock from spawn to exit, to the fraction of a millisecond
 * (GNU time's is in 10 ms steps too, as coarse as the differences between builds).
 */
function measure(cmd: string, args: string[], env: NodeJS.ProcessEnv): Promise<Sample> {
  const report = join(work, 'time.txt');
  return new Promise((resolve, reject) => {
    const started = performance.now();
    execFile('/usr/bin/time', ['-o', report, '-f', '%e %U %S %M', cmd, ...args], { env, maxBuffer: 2 * 1024 * 1024 * 1024 }, (err, _out, stderr) => {
      const wallMs = performance.now() - started;
      if (err) return reject(new Error(`${cmd} ${args.join(' ')}: ${stderr.slice(0, 2000)}`));
      const [, user, sys, rssKiB] = readFileSync(report, 'utf8').trim().split('\n').pop()!.split(' ').map(Number);
      resolve({ wallMs, cpuMs: (user! + sys!) * 1000, rssMiB: rssKiB! / 1024 });
    });
  });
}

const summary = (s: Sample[]) => ({
  ...timingSummary(s),
  rssMiB: Math.max(...s.map((x) => x.rssMiB)),
});

const record = startRecord('scale-plugin', { sizes: SIZES.join(','), runs: RUNS, nodes: NODES, plugins: PLUGINS.map((p) => p.name).join(',') });
const cp = await ControlPlane.start();
try {
  const kubectl = cp.binaries.kubectl;
  const client = new NodeDiskClient(new RestClient(loadKubeConfig({ kubeconfig: cp.admin().kubeconfig })));
  // Each plugin has a cache directory of its own (the krew executable's code cache, docs/adr/0027), empty
  // at the start and filled by the warm-up run; only the plugin gets it, not this process (the control
  // plane's build cache is under XDG_CACHE_HOME too).
  const envFor = (dir: string, cache = work) => ({ ...process.env, PATH: `${dir}:${process.env.PATH}`, KUBECONFIG: cp.admin().kubeconfig, XDG_CACHE_HOME: cache });
  const uptime = () => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
  console.log(`Kubernetes ${cp.binaries.kubernetesVersion}, kubectl ${kubectl}; NodeDisks over ${NODES} nodes; median and p90 of ${RUNS} runs after a warm-up; load average at start ${uptime()}`);
  console.log(`plugins: ${PLUGINS.map((p) => `${p.name} = ${p.dir}`).join(', ')}`);
  const head = PLUGINS.map((p) => `${p.name}: wall (p90) | ratio | CPU (p90; mean) | RSS`).join(' | ');
  console.log(`| NodeDisks | kubectl get: wall (p90) | CPU (p90; mean) | RSS | ${head} | load |`);
  console.log(`| --- | --- | --- | --- | ${PLUGINS.map(() => '--- | --- | --- | ---').join(' | ')} | --- |`);
  let created = 0;
  const rows: { nodeDisks: number; load: number; kubectlGet: ReturnType<typeof summary>; plugins: Record<string, ReturnType<typeof summary>> }[] = [];
  for (const size of SIZES) {
    const started = Date.now();
    await populateReported(client, created, size);
    created = size;
    if (size > 300) console.error(`populated ${size} NodeDisks in ${((Date.now() - started) / 1000).toFixed(0)} s`);
    const commands = [
      { args: ['get', 'nodedisks'], env: envFor(PLUGINS[0]!.dir) },
      ...PLUGINS.map((p, i) => {
        const cache = join(work, `cache-${size}-${i}`);
        mkdirSync(cache, { mode: 0o700 });
        return { args: ['nodedisks', 'list'], env: envFor(p.dir, cache) };
      }),
    ];
    const samples: Sample[][] = commands.map(() => []);
    for (const c of commands) await measure(kubectl, c.args, c.env);
    for (let r = 0; r < RUNS; r++) {
      for (const [i, c] of commands.entries()) samples[i]!.push(await measure(kubectl, c.args, c.env));
    }
    const [get, ...plugins] = samples.map(summary);
    const ms = (x: number) => `${x.toFixed(0)} ms`;
    const mib = (x: number) => `${x.toFixed(0)} MiB`;
    const cells = plugins
      .map((p) => `${ms(p.wallMs)} (${ms(p.wallP90)}) | ${(p.wallMs / get!.wallMs).toFixed(2)} | ${ms(p.cpuMs)} (${ms(p.cpuP90)}; ${ms(p.cpuMean)}) | ${mib(p.rssMiB)}`)
      .join(' | ');
    console.log(`| ${size} | ${ms(get!.wallMs)} (${ms(get!.wallP90)}) | ${ms(get!.cpuMs)} (${ms(get!.cpuP90)}; ${ms(get!.cpuMean)}) | ${mib(get!.rssMiB)} | ${cells} | ${uptime()} |`);
    rows.push({ nodeDisks: size, load: Number(uptime().split(' ')[0]), kubectlGet: get!, plugins: Object.fromEntries(plugins.map((p, i) => [PLUGINS[i]!.name, p])) });
  }
  record.save({ kubernetes: cp.binaries.kubernetesVersion, sizes: rows });
} finally {
  await cp.stop();
  rmSync(work, { recursive: true, force: true });
}
