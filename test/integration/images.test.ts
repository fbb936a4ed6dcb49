// The local cluster's images (hack/cluster/images.ts, from hack/lib/image-spec.ts) are reproducible:
// the same checkout gives the same manifest digests, build after build. Needs dist/ (npm run build,
// which npm test runs first).
import test from 'ava';
import { buildImages } from '../../hack/cluster/images.ts';
import { IMAGES } from '../../hack/lib/image-spec.ts';

test('building the images twice from the same checkout gives the same digests', async (t) => {
  t.timeout(10 * 60_000);
  // The pause binary is not built by npm test; any fixed executable stands in for it here.
  const first = (await buildImages('/bin/true')).map((i) => `${i.name} ${i.digest} ${i.layerBytes}`);
  const second = (await buildImages('/bin/true')).map((i) => `${i.name} ${i.digest} ${i.layerBytes}`);
  t.is(first.length, IMAGES.length + 1);
  t.deepEqual(second, first);
  t.log(first.join('\n'));
});
