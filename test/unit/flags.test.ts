import test from 'ava';
import { HelpRequested, parseFlags } from '../../lib/runtime/flags.ts';
import { parseAgentConfig } from '../../agent/config.ts';
import { parseControllerConfig } from '../../controller/config.ts';

const flags = {
  name: { type: 'string', default: 'dflt', describe: 'a name' },
  path: { type: 'string' },
  count: { type: 'number', default: 5 },
  on: { type: 'boolean', default: true },
} as const;
const usage = { program: 'prog', about: 'About it.' };

test('daemon flags: --name=value and --name value, numbers, defaults', (t) => {
  t.deepEqual(parseFlags([], flags, usage), { name: 'dflt', path: undefined, count: 5, on: true });
  t.deepEqual(parseFlags(['--name=a=b', '--path', '/x', '--count=7'], flags, usage), { name: 'a=b', path: '/x', count: 7, on: true });
  t.is(parseFlags(['--name='], flags, usage).name, '', 'an explicit empty value is a value');
  t.true(Number.isNaN(parseFlags(['--count=many'], flags, usage).count), 'left to the caller to refuse, naming the flag');
});

test('daemon flags: booleans as --on, --on=false, --on false and --no-on', (t) => {
  t.false(parseFlags(['--no-on'], flags, usage).on);
  t.false(parseFlags(['--on=false'], flags, usage).on);
  t.false(parseFlags(['--on', 'false'], flags, usage).on);
  t.true(parseFlags(['--no-on', '--on'], flags, usage).on, 'the last one given wins');
  t.throws(() => parseFlags(['--on=yes'], flags, usage), { message: '--on takes true or false, got "yes"' });
  t.throws(() => parseFlags(['--no-on=true'], flags, usage), { message: /--no-on takes no value/ });
  t.throws(() => parseFlags(['--no-name'], flags, usage), { message: 'Unknown argument: no-name' }, 'only booleans have a --no- form');
});

test('daemon flags: unknown flags, stray arguments and missing values are refused', (t) => {
  t.throws(() => parseFlags(['--nope=1'], flags, usage), { message: 'Unknown argument: nope' });
  t.throws(() => parseFlags(['stray'], flags, usage), { message: 'Unknown argument: stray' });
  t.throws(() => parseFlags(['-n'], flags, usage), { message: 'Unknown argument: -n' });
  t.throws(() => parseFlags(['--path'], flags, usage), { message: 'Not enough arguments following: path' });
  t.throws(() => parseFlags(['--path', '--count=1'], flags, usage), { message: 'Not enough arguments following: path' });
});

test('daemon flags: --help prints every flag with its type and default, then stops', (t) => {
  const write = process.stdout.write;
  let out = '';
  process.stdout.write = ((s: string) => {
    out += s;
    return true;
  }) as typeof process.stdout.write;
  try {
    t.throws(() => parseFlags(['--count=1', '--help'], flags, usage), { instanceOf: HelpRequested });
  } finally {
    process.stdout.write = write;
  }
  t.regex(out, /^prog \[flags\]\n\nAbout it\.\n\nFlags:\n/);
  t.regex(out, /--name +a name \[string\] \[default: "dflt"\]/);
  t.regex(out, /--count +\[number\] \[default: 5\]/);
  t.regex(out, /--help +Show this help/);
});

test('the daemons read their booleans as the manifests and tests pass them', (t) => {
  t.false(parseControllerConfig(['--leader-elect=false', '--node-lifecycle=false']).leaderElect);
  t.true(parseControllerConfig(['--leader-elect=true']).leaderElect);
  t.false(parseControllerConfig(['--no-watch-list']).watchList);
  t.false(parseAgentConfig(['--node-name=n1', '--watch-list=false'], {}).watchList);
  t.is(parseAgentConfig(['--node-name', 'n1', '--http-address', ':9090'], {}).httpAddress, ':9090');
});
