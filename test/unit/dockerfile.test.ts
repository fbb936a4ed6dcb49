// The Dockerfile is generated from scripts/lib/image-spec.ts, the one definition of what goes into each
// image (the local cluster builds from it too): the committed file must be what the generator writes.
import test from 'ava';
import { readFileSync } from 'node:fs';
import { DOCKERFILE, renderDockerfile } from '../../scripts/dockerfile.ts';
import { IMAGES } from '../../scripts/lib/image-spec.ts';

test('the committed Dockerfile is the one generated from image-spec.ts (run node scripts/dockerfile.ts after editing it)', (t) => {
  t.is(readFileSync(DOCKERFILE, 'utf8'), renderDockerfile());
});

test('every image of the spec is a Dockerfile target with its user and entrypoint', (t) => {
  const text = renderDockerfile();
  for (const img of IMAGES) {
    const stage = text.slice(text.indexOf(` AS ${img.target}\n`));
    t.regex(stage, new RegExp(`^USER ${img.user}$`, 'm'));
    t.regex(stage, new RegExp(`^ENTRYPOINT \\["/nodejs/bin/node", "/app/${img.main}"\\]$`, 'm'));
  }
});
