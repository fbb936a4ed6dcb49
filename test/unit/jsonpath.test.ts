import test from 'ava';
import { jsonpath } from '../../plugin/jsonpath.ts';
import { age, iec, table } from '../../plugin/format.ts';

const data = {
  items: [
    { metadata: { name: 'a' }, status: { conditions: [{ type: 'Ready', status: 'True' }, { type: 'Accepted', status: 'False' }] } },
    { metadata: { name: 'b' }, status: { conditions: [{ type: 'Ready', status: 'False' }] } },
  ],
};

test('kubectl JSONPath: fields, wildcards, indexes, filters and ranges', (t) => {
  t.is(jsonpath('{.items[*].metadata.name}', data), 'a b');
  t.is(jsonpath('{.items[1].metadata.name}', data), 'b');
  t.is(jsonpath('{.items[0].status.conditions[?(@.type=="Ready")].status}', data), 'True');
  t.is(jsonpath('{range .items[*]}{.metadata.name}:{.status.conditions[0].status}{"\\n"}{end}', data), 'a:True\nb:False\n');
  t.is(jsonpath('name={.items[0].metadata.name}\\n', data), 'name=a\n');
  t.throws(() => jsonpath('{.items[}', data), { message: /unsupported JSONPath expression/ });
  t.throws(() => jsonpath('{range .items[*]}x', data), { message: /\{range\} without \{end\}/ });
});

test('ages, sizes and tables read like kubectl', (t) => {
  const now = Date.parse('2026-01-02T00:00:00Z');
  t.is(age('2026-01-01T23:59:15Z', now), '45s');
  t.is(age('2026-01-01T23:56:40Z', now), '3m20s');
  t.is(age('2026-01-01T19:00:00Z', now), '5h');
  t.is(age('2025-12-29T20:00:00Z', now), '3d4h');
  t.is(iec(67108864), '64Mi');
  t.is(iec(1610612736), '1.5Gi');
  t.is(iec(512), '512');
  t.is(table(['NAME', 'X'], [['long-name', '1'], ['a', '22']]), 'NAME        X\nlong-name   1\na           22\n');
});
