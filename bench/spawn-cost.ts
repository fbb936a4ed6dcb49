// What one tool run costs the process that starts it: the node side runs a tool (mount, losetup, blkid,
// mkfs) several times per volume, and Node starts each with a fork of its whole process, on its main
// thread. Spawns RUNS runs of /bin/true from this process with a small heap and again with HEAP_MIB more
// held live, and prints the main thread's CPU and the wall time per run. `npm run bench:spawn`.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { startRecord } from './lib/results.ts';

const run = promisify(execFile);
const RUNS = Number(process.env.RUNS ?? 200);
const HEAP_MIB = Number(process.env.HEAP_MIB ?? 80);
const record = startRecord('spawn-cost', { runs: RUNS, heapMiB: HEAP_MIB });

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
record.save({ small, large, held: held.length });
