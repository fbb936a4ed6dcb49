// The Dockerfile is generated from hack/lib/image-spec.ts, the one definition of what goes into each
// image (the local cluster builds from it too): the committed file must be what the generator writes.
import test from 'ava';
import { readFileSync } from 'node:fs';
import { DOCKERFILE, renderDockerfile } from '../../hack/dockerfile.ts';
import { IMAGES } from '../../hack/lib/image-spec.ts';

test('the committed Dockerfile is the one generated from image-spec.ts (run node hack/dockerfile.ts after editing it)', (t) => {
  t.is(readFileSync(DOCKERFILE, 'utf8'), renderDockerfile());
});

test('every image of the spec is a Dockerfile target with its user and entrypoint (the controller sizes its heap from the memory limit)', (t) => {
  const text = renderDockerfile();
  for (const img of IMAGES) {
    const stage = text.slice(text.indexOf(` AS ${img.target}\n`));
    t.regex(stage, new RegExp(`^USER ${img.user}$`, 'm'));
    const flags = img.nodeFlags.map((f) => `"${f}", `).join('');
    t.true(stage.includes(`\nENTRYPOINT ["/nodejs/bin/node", ${flags}"/app/${img.main}"]\n`), `${img.target}: ENTRYPOINT with ${flags || 'no flags'}`);
  }
});

test('the controller image starts node with half the memory limit as heap (docs/adr/0023)', (t) => {
  t.deepEqual(IMAGES.find((i) => i.target === 'operator')?.nodeFlags, ['--max-old-space-size-percentage=50']);
});

test('the agent image starts node optimizing for size, the one V8 flag NODE_OPTIONS refuses (docs/adr/0006)', (t) => {
  t.deepEqual(IMAGES.find((i) => i.target === 'agent')?.nodeFlags, ['--optimize-for-size']);
});
