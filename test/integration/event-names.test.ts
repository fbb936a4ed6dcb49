// Events about NodeDisks whose names are long: the Event's own name must be a valid name too (at most 253
// characters), or the API server refuses every Event about them. The recorder against a real API server.
import test from 'ava';
import type { NodeDisk } from '../../api/v1alpha1/types.ts';
import { EventRecorder } from '../../controller/events.ts';
import { createLogger } from '../../lib/runtime/log.ts';
import { eventually } from '../../hack/lib/wait.ts';
import { restFor, useControlPlane } from './_controlplane.ts';

const controlPlane = useControlPlane(test);

const disk = (name: string): NodeDisk => ({
  apiVersion: 'localtest.example.com/v1alpha1',
  kind: 'NodeDisk',
  metadata: { name, uid: '00000000-0000-4000-8000-000000000001', resourceVersion: '1' },
  spec: { nodeName: 'n', diskID: 'd', path: '/d/d.img' },
});

interface Ev {
  metadata: { name: string };
  reason: string;
  regarding: { name: string };
}

for (const [what, name] of [
  ['a 253-character NodeDisk name', `${'a'.repeat(60)}.${'b'.repeat(60)}.${'c'.repeat(60)}.${'d'.repeat(60)}-${'e'.repeat(9)}`],
  ['a name just short enough for the plain form', 'n'.repeat(253 - 16)],
  ['a short name', 'node-a-disk1'],
] as const) {
  test.serial(`an Event about a NodeDisk with ${what} is recorded, named for it`, async (t) => {
    t.true(name.length <= 253);
    const warnings: string[] = [];
    const log = createLogger('test', { write: (l: string) => void warnings.push(l) });
    const rest = restFor(controlPlane().admin());
    const recorder = new EventRecorder(rest, 'test-instance', log);
    const reason = `R${name.length}`;
    await recorder.record(disk(name), 'Normal', reason, 'Reserve', 'a note');
    t.deepEqual(
      warnings.filter((l) => l.includes('could not record event')),
      [],
      'the API server took the Event',
    );
    const found = await eventually('the Event listed', async () => {
      const list = await rest.request<{ items: Ev[] }>('GET', '/apis/events.k8s.io/v1/namespaces/default/events');
      return list.items.find((e) => e.regarding.name === name && e.reason === reason);
    });
    t.true(found.metadata.name.length <= 253, found.metadata.name);
    // Named as client-go names them (<object>.<hex time>), the object's name shortened with a hash when that is too long.
    if (name.length <= 253 - 16) t.true(found.metadata.name.startsWith(`${name}.`), found.metadata.name);
    else t.regex(found.metadata.name, /^[a-z0-9.-]+-[0-9a-f]{10}\.[0-9a-f]+$/);
  });
}
