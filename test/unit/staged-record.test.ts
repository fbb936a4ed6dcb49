// The staged record's text (api/staged-record.ts), which the agent and the CSI node side read from a disk
// dir nobody trusts: a record round-trips; anything else of its shape is no record, a staging path with
// control characters (it reaches the agent's report and people's terminals) among them.
import test from 'ava';
import { formatStagedRecord, parseStagedRecord, type StagedRecord } from '../../api/staged-record.ts';

const RECORD: StagedRecord = {
  stagingPath: '/var/lib/kubelet/plugins/kubernetes.io/csi/nodedisks.localtest.example.com/0123/globalmount',
  device: '/dev/loop3',
  rdev: '7:3',
  diskseq: '42',
  bootId: 'c0ffee00-0000-4000-8000-000000000001',
  image: { ino: '18446744073709551557', dev: '254:0' },
};

test('a record round-trips, its inode exact past 2^53; one without a diskseq (an older kernel) too', (t) => {
  t.deepEqual(parseStagedRecord(formatStagedRecord(RECORD)), RECORD);
  const older: StagedRecord = { ...RECORD, diskseq: undefined };
  t.false(formatStagedRecord(older).includes('diskseq'));
  t.deepEqual(parseStagedRecord(formatStagedRecord(older)), older);
});

test('text of another shape is no record: bad JSON, a relative or hostile staging path, a device that is no loop device, numbers that are not numbers', (t) => {
  const variant = (patch: Record<string, unknown>) => JSON.stringify({ ...RECORD, ...patch });
  for (const text of [
    'not json',
    'null',
    '[]',
    variant({ stagingPath: 'relative/path' }),
    variant({ stagingPath: '/var/lib/kubelet/\x1b[31mred' }),
    variant({ stagingPath: '/var/lib/kubelet/a\nb' }),
    variant({ stagingPath: `/${'a'.repeat(5000)}` }),
    variant({ device: '/dev/sda' }),
    variant({ device: '/dev/loop3/../sda' }),
    variant({ rdev: '7' }),
    variant({ diskseq: 42 }),
    variant({ bootId: '' }),
    variant({ image: { ino: '12a', dev: '254:0' } }),
    variant({ image: null }),
  ]) {
    t.is(parseStagedRecord(text), undefined, text.slice(0, 80));
  }
});
