// Every shell block in README.md and docs/ says how it is kept true: run against the demo (npm test), run
// on the local cluster (npm run test:e2e), or skipped with the reason. And the parser and normaliser that
// the docs tests compare with, on the cases the docs use, and the bash session that runs them.
import test from 'ava';
import { REPO_ROOT } from '../../hack/lib/paths.ts';
import { allShellBlocks, findShellBlocks, markerProblem, normaliseLine, outputMatches, parseSteps } from '../harness/docs-blocks.ts';
import { runDocBlocks } from '../harness/docs-run.ts';

test('every shell block in README.md and docs/ carries a known docs-test marker', (t) => {
  const blocks = allShellBlocks(REPO_ROOT);
  t.true(blocks.length > 0, 'no shell block found at all: the finder is broken');
  const problems = blocks.map(markerProblem).filter((p) => p !== undefined);
  if (problems.length > 0) t.fail(`${problems.length} shell block(s) without a known marker:\n${problems.join('\n')}`);
  else t.pass();
});

test('skip markers give a reason a reader can act on, not just "skip"', (t) => {
  const thin = allShellBlocks(REPO_ROOT).filter((b) => b.marker?.kind === 'skip' && b.marker.reason.split(/\s+/).length < 3);
  t.deepEqual(
    thin.map((b) => `${b.file}:${b.line}`),
    [],
  );
});

const md = (...lines: string[]) => lines.join('\n');

test('shell blocks are found with their marker and line; other languages and indented fences are read right', (t) => {
  const text = md(
    '# T',
    '<!-- docs-test: demo -->',
    '```sh',
    'echo a',
    '```',
    '```yaml',
    '```sh',
    'not a block: inside yaml',
    '```',
    '<!-- docs-test: skip: needs Docker and minikube -->',
    '```console',
    '$ docker ps',
    '```',
    '- a list item:',
    '  <!-- docs-test: cluster -->',
    '  ```bash',
    '  kubectl get nodes',
    '  ```',
    '````sh',
    '```',
    '````',
  );
  const blocks = findShellBlocks(text, 'x.md');
  t.deepEqual(
    blocks.map((b) => [b.line, b.info, b.marker, b.body]),
    [
      [3, 'sh', { kind: 'demo' }, ['echo a']],
      [11, 'console', { kind: 'skip', reason: 'needs Docker and minikube' }, ['$ docker ps']],
      [16, 'bash', { kind: 'cluster' }, ['kubectl get nodes']],
      [19, 'sh', undefined, ['```']],
    ],
  );
});

test('a block with no marker, an unknown one or a skip without reason is named by file:line with the fix', (t) => {
  const text = md('```sh', 'ls', '```', '', '<!-- docs-test: maybe -->', '```sh', 'ls', '```', '<!-- docs-test: skip -->', '```shell', 'ls', '```');
  const problems = findShellBlocks(text, 'docs/x.md').map(markerProblem);
  t.is(problems.length, 3);
  t.regex(problems[0]!, /^docs\/x\.md:1: a ```sh block with no docs-test marker; put one of <!-- docs-test: demo -->, .* on the line just before the fence$/);
  t.regex(problems[1]!, /^docs\/x\.md:6: unknown marker <!-- docs-test: maybe -->/);
  t.regex(problems[2]!, /^docs\/x\.md:10: unknown marker <!-- docs-test: skip --> \(a skip needs its reason after "skip:"\)/);
});

test('a marker with a blank line before the fence does not count', (t) => {
  const [b] = findShellBlocks(md('<!-- docs-test: demo -->', '', '```sh', 'ls', '```'), 'x.md');
  t.is(b?.marker, undefined);
});

test('$ lines are commands, continued by a trailing backslash, with the lines after them as expected output', (t) => {
  const [b] = findShellBlocks(
    md(
      '<!-- docs-test: demo -->',
      '```console',
      '# a comment before any command',
      '$ kubectl get nodedisks \\',
      '    -o name',
      'nodedisk.localtest.example.com/a',
      '...',
      '$ true',
      '$ echo hi',
      'hi',
      '',
      '```',
    ),
    'x.md',
  );
  t.deepEqual(parseSteps(b!), [
    { line: 4, command: 'kubectl get nodedisks \\\n    -o name', expected: ['nodedisk.localtest.example.com/a', '...'] },
    { line: 8, command: 'true', expected: [] },
    { line: 9, command: 'echo hi', expected: ['hi'] },
  ]);
});

test('a block with no $ line is one script whose output is not compared', (t) => {
  const [b] = findShellBlocks(md('<!-- docs-test: demo -->', '```sh', '# comment', 'A=1', 'echo $A', '```'), 'x.md');
  t.deepEqual(parseSteps(b!), [{ line: 3, command: '# comment\nA=1\necho $A', expected: undefined }]);
});

test('ages, durations, times, uids, resource versions and random suffixes are normalised; sizes and names are not', (t) => {
  t.is(
    normaliseLine('node-disk-node-disks-dev-m02-disk1   node-disks-dev-m02   disk1   Available   Available           67108864   True               3s'),
    'node-disk-node-disks-dev-m02-disk1 node-disks-dev-m02 disk1 Available Available 67108864 True <age>',
  );
  t.is(normaliseLine('x   2m10s'), normaliseLine('x 45h'));
  t.is(normaliseLine('  creationTimestamp: "2026-12-01T22:14:32Z"'), 'creationTimestamp: "<time>"');
  t.is(normaliseLine('  resourceVersion: "4711"'), 'resourceVersion: "<rv>"');
  t.is(normaliseLine('{"resourceVersion":"12"}'), '{"resourceVersion":"<rv>"}');
  t.is(normaliseLine('  uid: 0f97f285-4155-e4d4-8a1b-0123456789ab'), 'uid: <uid>');
  t.is(normaliseLine('node-disks-operator-76cc5d65df-6wjbk   1/1'), 'node-disks-operator-<suffix> 1/1');
  t.is(normaliseLine('node-disks-agent-fh2lq'), 'node-disks-agent-<suffix>');
  t.is(normaliseLine('node-disks-agent'), 'node-disks-agent', 'a word is not a suffix');
  t.is(normaliseLine('64Mi 32Mi 1Gi disk1.img node-disks-dev-m03 24.21.0'), '64Mi 32Mi 1Gi disk1.img node-disks-dev-m03 24.21.0');
  t.is(normaliseLine('Available  Available 67108864'), 'Available Available 67108864');
});

test('output matches the shown lines after normalising, with ... for any lines', (t) => {
  t.true(outputMatches(['a 3s', 'b'], 'a   10m\nb\n'));
  t.false(outputMatches(['a', 'b'], 'a\nc\n'));
  t.false(outputMatches(['a'], 'a\nb\n'), 'extra lines fail');
  t.true(outputMatches(['a', '...'], 'a\nb\nc\n'));
  t.true(outputMatches(['...', 'c'], 'a\nb\nc\n'));
  t.true(outputMatches(['a', '...', 'c'], 'a\nc\n'), '... matches no line too');
  t.false(outputMatches(['a', '...', 'd'], 'a\nb\nc\n'));
  t.true(outputMatches([], ''));
  t.false(outputMatches([], 'something\n'), 'a command shown with no output must print none');
});

test('one bash session per file: variables carry from block to block, a mismatch names file:line with both outputs, a failing command stops the file', async (t) => {
  const blocks = findShellBlocks(
    md(
      '<!-- docs-test: demo -->',
      '```console',
      '$ X=hello',
      '$ echo "$X   world 5s"',
      'hello world 3m',
      '```',
      '<!-- docs-test: demo -->',
      '```sh',
      'echo "$X" > /dev/null',
      '```',
      '<!-- docs-test: demo -->',
      '```console',
      '$ echo other',
      'shown',
      '$ false',
      '$ echo never',
      'never',
      '```',
    ),
    'docs/x.md',
  );
  const run = await runDocBlocks('docs/x.md', blocks, { cwd: REPO_ROOT, env: { PATH: process.env.PATH }, timeoutMs: 30_000 });
  t.is(run.steps, 6);
  t.is(run.failures.length, 2, run.failures.join('\n'));
  t.is(run.failures[0], 'docs/x.md:13: printed something else than the docs show\n  command:\n    echo other\n  shown in the docs:\n    shown\n  printed:\n    other');
  t.regex(run.failures[1]!, /^docs\/x\.md:15: the session stopped here \(exit 1\)\n {2}command:\n {4}false\n/);
});

test('an unset variable stops the session too (bash -u), as the convention says', async (t) => {
  const blocks = findShellBlocks(md('<!-- docs-test: demo -->', '```sh', 'echo "$NOT_SET_ANYWHERE"', '```'), 'x.md');
  const run = await runDocBlocks('x.md', blocks, { cwd: REPO_ROOT, env: { PATH: process.env.PATH }, timeoutMs: 30_000 });
  t.is(run.failures.length, 1);
  t.regex(run.failures[0]!, /NOT_SET_ANYWHERE: unbound variable/);
});
