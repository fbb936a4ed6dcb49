// The process and Node.js runtime metrics (lib/runtime/process-metrics.ts): present and numeric, read at
// scrape time (they move with the process between two scrapes), nothing left running between scrapes,
// and /proc read right (a command name with spaces and parentheses; no /proc at all).
import { execFile } from 'node:child_process';
import { closeSync, mkdirSync, mkdtempSync, openSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import test from 'ava';
import { Registry } from 'prom-client';
import { PROCESS_METRIC_NAMES, registerProcessMetrics } from '../../lib/runtime/process-metrics.ts';
import { REPO_ROOT } from '../../hack/lib/paths.ts';

const run = promisify(execFile);
// A full collection on demand: external memory falls whenever a collection frees buffers that earlier tests
// left behind, so the test below collects them first and then sees only its own allocation.
setFlagsFromString('--expose-gc');
const collectGarbage = runInNewContext('gc') as () => void;

const registryOf = (proc?: string) => {
  const registry = new Registry();
  registerProcessMetrics(registry, proc);
  return registry;
};

/** name{labels} -> value, from one scrape of `registry` (by default a new one reading this process's /proc). */
async function values(registry = registryOf()): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const m of await registry.getMetricsAsJSON()) {
    for (const v of m.values) {
      const labels = Object.entries(v.labels);
      out.set(`${m.name}${labels.length ? `{${labels.map(([k, l]) => `${k}="${l}"`).join(',')}}` : ''}`, v.value);
    }
  }
  return out;
}

test('every process and runtime metric is there, with a finite value, under the names prom-client and client_golang use', async (t) => {
  const families = await registryOf().getMetricsAsJSON();
  t.deepEqual(
    families.map((f) => f.name),
    [...PROCESS_METRIC_NAMES],
  );
  for (const f of families) {
    t.true(f.values.length > 0, `${f.name} has samples`);
    for (const s of f.values) t.true(Number.isFinite(s.value) && s.value >= 0, `${f.name} = ${s.value}`);
  }
  const v = await values();
  t.true(Math.abs(v.get('process_cpu_seconds_total')! - v.get('process_cpu_user_seconds_total')! - v.get('process_cpu_system_seconds_total')!) < 1e-9, 'user + system');
  t.true(v.get('process_resident_memory_bytes')! > 10 * 2 ** 20);
  t.true(v.get('process_virtual_memory_bytes')! >= v.get('process_resident_memory_bytes')!);
  t.true(v.get('process_max_fds')! >= v.get('process_open_fds')! && v.get('process_open_fds')! >= 3);
  t.true(v.get('nodejs_heap_size_used_bytes')! <= v.get('nodejs_heap_size_total_bytes')!);
  t.true(v.get('nodejs_heap_space_size_total_bytes{space="old"}')! > 0, 'heap spaces by short name: "old_space" is space="old"');
  t.true(v.has('nodejs_heap_space_size_used_bytes{space="new"}') && v.has('nodejs_heap_space_size_available_bytes{space="code"}'));
  const [major, minor, patch] = process.versions.node.split('.');
  t.is(v.get(`nodejs_version_info{version="${process.version}",major="${major}",minor="${minor}",patch="${patch}"}`), 1);
  const start = v.get('process_start_time_seconds')!;
  t.true(Math.abs(start - (Date.now() / 1000 - process.uptime())) <= 1, `start time ${start}`);
});

// Serial: the process's open files and timers are counted whole, and the file's other tests open pipes and set
// timers of their own when they run alongside.
test.serial('values are read at each scrape: CPU, open fds, external memory and active timers follow the process', async (t) => {
  const registry = registryOf();
  collectGarbage();
  const before = await values(registry);
  const timer = setInterval(() => {}, 60_000);
  const fds = [0, 1, 2].map(() => openSync(process.execPath, 'r'));
  const buffer = Buffer.alloc(8 * 2 ** 20, 1);
  const until = process.cpuUsage().user + 50_000;
  while (process.cpuUsage().user < until);
  const after = await values(registry);
  for (const fd of fds) closeSync(fd);
  clearInterval(timer);
  t.is((after.get('nodejs_active_resources{type="Timeout"}') ?? 0) - (before.get('nodejs_active_resources{type="Timeout"}') ?? 0), 1, 'one more timer keeps the loop alive');
  t.is(after.get('process_open_fds')! - before.get('process_open_fds')!, 3, 'three more files open');
  t.true(after.get('process_cpu_user_seconds_total')! - before.get('process_cpu_user_seconds_total')! >= 0.05);
  t.true(after.get('process_cpu_seconds_total')! - before.get('process_cpu_seconds_total')! >= 0.05);
  // The 8 MiB buffer, give or take the few bytes other external allocations move by meanwhile.
  const grew = after.get('nodejs_external_memory_bytes')! - before.get('nodejs_external_memory_bytes')!;
  t.true(grew >= buffer.length - 2 ** 20, `external memory grew by ${grew} bytes for a ${buffer.length}-byte buffer`);
  t.is(after.get('process_start_time_seconds'), before.get('process_start_time_seconds'), 'the start time does not move');
});

/**
 * The active libuv handles (timers, idle and check handles, referenced or not) of a fresh process, after
 * `code`: what would wake the process between scrapes. process.report lists them all, unreferenced too.
 */
async function activeHandlesAfter(code: string): Promise<string[]> {
  const probe = `${code}\nconsole.log(JSON.stringify(process.report.getReport().libuv.filter((h) => h.is_active).map((h) => h.type).sort()));`;
  const { stdout } = await run(process.execPath, ['--input-type=module', '-e', probe], { cwd: REPO_ROOT });
  return JSON.parse(stdout) as string[];
}

test('nothing runs between scrapes: no timer or handle left behind, none more than a bare Node has', async (t) => {
  const resources = () => process.getActiveResourcesInfo().sort().join(',');
  const before = resources();
  const registry = registryOf();
  await registry.metrics();
  await registry.metrics();
  t.is(resources(), before);
  const bare = await activeHandlesAfter('');
  const ours = await activeHandlesAfter(
    "import { Registry } from 'prom-client'; import { registerProcessMetrics } from './lib/runtime/process-metrics.ts';\n" +
      'const r = new Registry(); registerProcessMetrics(r); await r.metrics();',
  );
  t.deepEqual(ours, bare);
  // The same probe sees what prom-client's default metrics keep running (their event-loop delay monitor).
  const defaults = await activeHandlesAfter("import { Registry, collectDefaultMetrics } from 'prom-client'; const r = new Registry(); collectDefaultMetrics({ register: r }); await r.metrics();");
  t.true(defaults.filter((h) => h === 'timer').length > bare.filter((h) => h === 'timer').length, JSON.stringify({ defaults, bare }));
});

function fakeProc(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'nodedisks-proc-'));
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(join(dir, path, '..'), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  return dir;
}

test('/proc/self/stat: vsize is read after the command name, even one with spaces and parentheses', async (t) => {
  // Fields after ")": state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt utime stime
  // cutime cstime priority nice num_threads itrealvalue starttime vsize rss ...
  const after = 'S 1 1 1 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 7 0 12345 987654321 4000 18446744073709551615';
  const proc = fakeProc({
    stat: `4242 (node (x) y) ${after}\n`,
    limits: 'Limit                     Soft Limit           Hard Limit           Units     \nMax open files            65536                1048576              files     \n',
  });
  t.teardown(() => rmSync(proc, { recursive: true }));
  const v = await values(registryOf(proc));
  t.is(v.get('process_virtual_memory_bytes'), 987654321);
  t.is(v.get('process_max_fds'), 65536, 'the soft limit');
  t.false(v.has('process_open_fds'), 'no fd dir: left out');
});

test('without /proc (not Linux) the fd and virtual memory metrics are left out, the rest reported', async (t) => {
  const v = await values(registryOf('/nonexistent/proc/self'));
  for (const name of ['process_open_fds', 'process_max_fds', 'process_virtual_memory_bytes']) t.false(v.has(name), name);
  for (const name of ['process_cpu_seconds_total', 'process_resident_memory_bytes', 'nodejs_heap_size_used_bytes', 'process_start_time_seconds']) t.true(v.has(name), name);
});
