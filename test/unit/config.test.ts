import test from 'ava';
import { parseAgentConfig } from '../../agent/config.ts';
import { parseControllerConfig } from '../../controller/config.ts';
import { parseDuration } from '../../lib/runtime/duration.ts';
import { parseAddress } from '../../lib/runtime/server.ts';

test('NODE_NAME is required, with the fix in the message', (t) => {
  t.throws(() => parseAgentConfig([], {}), { message: /NODE_NAME is required: set it from the pod \(fieldRef spec\.nodeName\)/ });
});

test('the agent reads NODE_NAME and defaults like a DaemonSet expects', (t) => {
  const c = parseAgentConfig([], { NODE_NAME: 'node-a' });
  t.is(c.nodeName, 'node-a');
  t.is(c.diskDir, '/var/lib/node-disks-manager/disks');
  t.is(c.hostDiskDir, c.diskDir);
  t.is(c.heartbeatMs, 60_000, 'the heartbeat Lease is renewed every minute');
  t.is(c.leaseNamespace, 'node-disks-system');
  t.is(parseAgentConfig([], { NODE_NAME: 'node-a', POD_NAMESPACE: 'nd' }).leaseNamespace, 'nd');
  t.is(c.rescanMs, 60_000);
});

test('bad agent flags are rejected with the flag named', (t) => {
  t.throws(() => parseAgentConfig(['--node-name=Node_A'], {}), { message: /invalid NODE_NAME: node name "Node_A" is not a DNS subdomain/ });
  t.throws(() => parseAgentConfig(['--node-name=a', '--heartbeat=300'], {}), { message: /--heartbeat "300" needs a unit/ });
  t.throws(() => parseAgentConfig(['--node-name=a', '--host-disk-dir=rel/dir'], {}), { message: /--host-disk-dir must be an absolute path/ });
  t.throws(() => parseAgentConfig(['--node-name=a', '--bogus'], {}), { message: /Unknown argument: bogus/ });
  t.throws(() => parseAgentConfig(['--node-name=a', '--lease-namespace=Bad_NS'], {}), { message: /--lease-namespace "Bad_NS" is not a namespace name/ });
  t.throws(() => parseAgentConfig(['--node-name=a', '--heartbeat'], {}), { message: /Not enough arguments following: heartbeat/ });
  t.throws(() => parseAgentConfig(['--node-name=a', 'stray'], {}), { message: /Unknown argument: stray/ });
});

test('controller leader election timings must be ordered', (t) => {
  t.throws(() => parseControllerConfig(['--lease-duration=5s', '--renew-deadline=10s']), { message: /--lease-duration > --renew-deadline > --retry-period/ });
  t.like(parseControllerConfig([]), { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000, leaderElect: true, firstReportGraceMs: 5000 });
  t.like(parseControllerConfig(['--agent-report-grace=0']), { firstReportGraceMs: 0 });
});

test('durations read like Go durations', (t) => {
  t.is(parseDuration('1m30s'), 90_000);
  t.is(parseDuration('250ms'), 250);
  t.is(parseDuration('2h'), 7_200_000);
  t.throws(() => parseDuration('5 minutes'), { message: /invalid duration/ });
});

test('--http-address: host:port, :port or [ipv6]:port of this machine, port 0-65535', (t) => {
  t.deepEqual(parseAddress(':8080'), { host: '0.0.0.0', port: 8080 });
  t.deepEqual(parseAddress('127.0.0.1:0'), { host: '127.0.0.1', port: 0 });
  t.deepEqual(parseAddress('[::]:9090'), { host: '::', port: 9090 });
  t.deepEqual(parseAddress('localhost:8080'), { host: 'localhost', port: 8080 });
  t.throws(() => parseAddress('8080'), { message: /--http-address "8080": use host:port or :port/ });
  t.throws(() => parseAddress(':65536'), { message: /the port must be 0-65535/ });
  t.throws(() => parseAddress('203.0.113.9:8080'), { message: /203\.0\.113\.9 is not an address of this machine/ });
  t.throws(() => parseControllerConfig(['--http-address=:99999']), { message: /--http-address ":99999": the port must be 0-65535/ });
});

test('controller concurrency and client-side rate limit: defaults, and bad values refused with the flag named', (t) => {
  t.like(parseControllerConfig([]), { workers: 5, kubeApiQps: 500, kubeApiBurst: 1000 });
  t.like(parseControllerConfig(['--workers=8', '--kube-api-qps=50.5', '--kube-api-burst=100']), { workers: 8, kubeApiQps: 50.5, kubeApiBurst: 100 });
  t.throws(() => parseControllerConfig(['--workers=0']), { message: /--workers must be a positive integer/ });
  t.throws(() => parseControllerConfig(['--kube-api-qps=0']), { message: /--kube-api-qps must be a positive number of requests per second, got 0/ });
  t.throws(() => parseControllerConfig(['--kube-api-qps=fast']), { message: /--kube-api-qps must be a positive number/ });
  t.throws(() => parseControllerConfig(['--kube-api-burst=1.5']), { message: /--kube-api-burst must be a positive integer, got 1.5/ });
});

test('agent: --drive chooses drives (repeatable, nothing by default); a bad selector or a relative by-id dir is an error naming it', (t) => {
  t.deepEqual(parseAgentConfig([], { NODE_NAME: 'node-a' }).driveSelectors, []);
  const c = parseAgentConfig(['--drive=media=nvme', '--drive', 'by-id=wwn-0x5000c500*,min-size=1Ti'], { NODE_NAME: 'node-a' });
  t.deepEqual(
    c.driveSelectors.map((d) => d.text),
    ['media=nvme', 'by-id=wwn-0x5000c500*,min-size=1Ti'],
  );
  t.is(c.byIdDir, '/dev/disk/by-id');
  t.is(c.hostByIdDir, '/dev/disk/by-id');
  t.throws(() => parseAgentConfig(['--drive=media=tape'], { NODE_NAME: 'node-a' }), { message: /media is one of nvme, ssd, hdd, not "tape"/ });
  t.throws(() => parseAgentConfig(['--drive=size=1Ti'], { NODE_NAME: 'node-a' }), { message: /unknown term "size"/ });
  t.throws(() => parseAgentConfig(['--by-id-dir=dev/disk/by-id'], { NODE_NAME: 'node-a' }), { message: /--by-id-dir must be an absolute path/ });
});
