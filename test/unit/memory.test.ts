// The memory limit of the controller's container, read from its cgroup (v1 and v2), and the check that
// the V8 heap was sized to fit it (docs/adr/0023).
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { cgroupMemoryLimit, heapProblem } from '../../lib/runtime/memory.ts';

function fakeRoot(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'nodedisks-cgroup-'));
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(join(root, path, '..'), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  return root;
}
const MiB = 2 ** 20;

test("cgroup v1: memory.limit_in_bytes of the process's own memory cgroup", (t) => {
  const root = fakeRoot({
    'proc/self/cgroup': '12:pids:/x\n4:memory:/kubepods/pod1/c1\n1:cpu,cpuacct:/kubepods\n',
    'sys/fs/cgroup/memory/memory.limit_in_bytes': '9223372036854771712',
    'sys/fs/cgroup/memory/kubepods/memory.limit_in_bytes': '9223372036854771712',
    'sys/fs/cgroup/memory/kubepods/pod1/memory.limit_in_bytes': String(512 * MiB),
    'sys/fs/cgroup/memory/kubepods/pod1/c1/memory.limit_in_bytes': String(256 * MiB),
  });
  t.teardown(() => rmSync(root, { recursive: true }));
  t.is(cgroupMemoryLimit(root), 256 * MiB);
});

test('cgroup v2: memory.max, the smallest along the path; "max" everywhere is no limit', (t) => {
  const limited = fakeRoot({
    'proc/self/cgroup': '0::/kubepods.slice/pod1/c1\n',
    'sys/fs/cgroup/kubepods.slice/memory.max': 'max',
    'sys/fs/cgroup/kubepods.slice/pod1/memory.max': String(200 * MiB),
    'sys/fs/cgroup/kubepods.slice/pod1/c1/memory.max': 'max',
  });
  const unlimited = fakeRoot({ 'proc/self/cgroup': '0::/\n', 'sys/fs/cgroup/memory.max': 'max' });
  t.teardown(() => {
    for (const r of [limited, unlimited]) rmSync(r, { recursive: true });
  });
  t.is(cgroupMemoryLimit(limited), 200 * MiB);
  t.is(cgroupMemoryLimit(unlimited), undefined);
});

test('a container (cgroup namespace, path "/") reads its limit at the top of the hierarchy', (t) => {
  const root = fakeRoot({ 'proc/self/cgroup': '0::/\n', 'sys/fs/cgroup/memory.max': String(256 * MiB) });
  t.teardown(() => rmSync(root, { recursive: true }));
  t.is(cgroupMemoryLimit(root), 256 * MiB);
});

test('a heap that may grow to the whole limit is a problem named with its fix; a sized one is not', (t) => {
  // Node's default under a 256 MiB cgroup: a heap limit of ~259 MiB (measured).
  t.regex(heapProblem(256 * MiB, 0.75, 259 * MiB) ?? '', /V8 heap may grow to 259 MiB under a memory limit of 256 MiB.*--max-old-space-size-percentage=50/);
  // With --max-old-space-size-percentage=50: ~131 MiB (measured).
  t.is(heapProblem(256 * MiB, 0.75, 131 * MiB), undefined);
  t.is(heapProblem(undefined, 0.75, 4096 * MiB), undefined);
});
