// What one tool run costs the process that starts it: the node side runs a tool (mount, losetup, blkid,
// mkfs) several times per volume, and Node starts each with a fork of its whole process, on its main
// thread. Spawns RUNS runs of /bin/true from this process with a small heap and again with HEAP_MIB more
// held live, and prints the main thread's CPU and the wall time per run. Then BURST runs started at once,
// as a burst of CSI calls starts them, from the main thread, from a worker thread and through csi-node's tool
// runner (csi/toolrunner, ADR 48: a small process that forks instead; one request a line on a pipe): how late the main
// thread's 1 ms timer fell (what every other call on the node waits), the process's CPU (and the helper's)
// and the memory a worker or the helper costs. `npm run bench:spawn` (with V8's defaults: Node strips this file's types with WebAssembly,
// which --jitless turns off).
import { execFile, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';
import { Worker } from 'node:worker_threads';
import { ensureToolRunner } from '../hack/csi/tools.ts';
import { startRecord } from './lib/results.ts';

const run = promisify(execFile);
const RUNS = Number(process.env.RUNS ?? 200);
const HEAP_MIB = Number(process.env.HEAP_MIB ?? 80);
const BURST = Number(process.env.BURST ?? 200);
const record = startRecord('spawn-cost', { runs: RUNS, heapMiB: HEAP_MIB, burst: BURST, nodeOptions: process.env.NODE_OPTIONS ?? '' });

async function measure(): Promise<{ rssMiB: number; cpuMsPerRun: number; wallMsPerRun: number }> {
  await run('/bin/true');
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  for (let i = 0; i < RUNS; i++) await run('/bin/true');
  const cpu = process.cpuUsage(cpu0);
  return {
    rssMiB: Math.round(process.memoryUsage().rss / 2 ** 20),
    cpuMsPerRun: Number(((cpu.user + cpu.system) / 1000 / RUNS).toFixed(2)),
    wallMsPerRun: Number(((performance.now() - t0) / RUNS).toFixed(2)),
  };
}

const small = await measure();
// Objects held live, as a process with a cache and a gRPC server holds them.
const held: { i: number; s: string }[] = [];
while (process.memoryUsage().rss < (small.rssMiB + HEAP_MIB) * 2 ** 20) for (let i = 0; i < 10_000; i++) held.push({ i, s: `x${i}` });
const large = await measure();
console.log(`| RSS | main thread CPU per run | wall time per run |`);
console.log(`| --- | --- | --- |`);
for (const m of [small, large]) console.log(`| ${m.rssMiB} MiB | ${m.cpuMsPerRun} ms | ${m.wallMsPerRun} ms |`);

type Runner = (file: string) => Promise<unknown>;

/** BURST runs of /bin/true started at once; the main thread's lateness is sampled by a 1 ms timer meanwhile. */
async function burst(runner: Runner) {
  await runner('/bin/true');
  let last = performance.now();
  let worstMs = 0;
  let totalMs = 0;
  const tick = setInterval(() => {
    const now = performance.now();
    const late = Math.max(0, now - last - 1);
    worstMs = Math.max(worstMs, late);
    totalMs += late;
    last = now;
  }, 1);
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  await Promise.all(Array.from({ length: BURST }, () => runner('/bin/true')));
  const wallMs = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  clearInterval(tick);
  const round = (x: number) => Math.round(x);
  return { wallMs: round(wallMs), processCpuMs: round((cpu.user + cpu.system) / 1000), mainLateWorstMs: round(worstMs), mainLateTotalMs: round(totalMs) };
}

const fromMain = await burst((file) => run(file));
const rssBeforeWorker = process.memoryUsage().rss;
const worker = new Worker(
  `const { parentPort } = require('node:worker_threads');
   const { execFile } = require('node:child_process');
   parentPort.on('message', (m) => execFile(m.file, [], (err) => parentPort.postMessage({ id: m.id, error: err ? String(err) : null })));`,
  { eval: true },
);
const pending = new Map<number, () => void>();
let nextId = 0;
worker.on('message', (m: { id: number }) => {
  pending.get(m.id)?.();
  pending.delete(m.id);
});
const fromWorker = await burst(
  (file) =>
    new Promise<void>((resolve) => {
      pending.set(++nextId, resolve);
      worker.postMessage({ id: nextId, file });
    }),
);
const workerRssMiB = Number(((process.memoryUsage().rss - rssBeforeWorker) / 2 ** 20).toFixed(1));
await worker.terminate();
// The helper: started once (one fork of this process), then every run is its fork, answered over the pipe.
const helperBin = await ensureToolRunner();
const helper = spawn(helperBin, [], { stdio: ['pipe', 'pipe', 'inherit'] });
const answers = new Map<number, () => void>();
createInterface({ input: helper.stdout }).on('line', (line) => {
  const a = JSON.parse(line) as { id: number };
  answers.get(a.id)?.();
  answers.delete(a.id);
});
/** user + system CPU of a process, in ms, from /proc (clock ticks of 10 ms). */
const procCpuMs = (pid: number) => {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) * 10;
};
const helperCpu0 = procCpuMs(helper.pid!);
const viaHelper = await burst(
  (file) =>
    new Promise<void>((resolve) => {
      answers.set(++nextId, resolve);
      helper.stdin.write(`${JSON.stringify({ id: nextId, file, args: [], timeoutMs: 60_000 })}\n`);
    }),
);
const helperCpuMs = procCpuMs(helper.pid!) - helperCpu0;
const helperRssMiB = Number((Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${helper.pid}/status`, 'utf8'))?.[1] ?? 0) / 1024).toFixed(1));
helper.stdin.end();
await new Promise((resolve) => helper.once('close', resolve));
console.log(`\n${BURST} runs at once (NODE_OPTIONS=${process.env.NODE_OPTIONS ?? ''}):`);
console.log(`| started from | wall | process CPU | main thread late, worst / total | RSS added |`);
console.log(`| --- | --- | --- | --- | --- |`);
console.log(`| main thread | ${fromMain.wallMs} ms | ${fromMain.processCpuMs} ms | ${fromMain.mainLateWorstMs} / ${fromMain.mainLateTotalMs} ms | |`);
console.log(`| a worker thread | ${fromWorker.wallMs} ms | ${fromWorker.processCpuMs} ms | ${fromWorker.mainLateWorstMs} / ${fromWorker.mainLateTotalMs} ms | ${workerRssMiB} MiB |`);
console.log(
  `| a helper process | ${viaHelper.wallMs} ms | ${viaHelper.processCpuMs} ms (+ the helper's ${helperCpuMs} ms) | ${viaHelper.mainLateWorstMs} / ${viaHelper.mainLateTotalMs} ms | ${helperRssMiB} MiB (its own) |`,
);
record.save({ small, large, held: held.length, fromMain, fromWorker, workerRssMiB, viaHelper: { ...viaHelper, helperCpuMs, helperRssMiB } });
