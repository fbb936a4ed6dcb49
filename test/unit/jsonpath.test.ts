import test from 'ava';
import { jsonpath } from '../../plugin/kubectl/jsonpath.ts';
import { age, iec } from '../../plugin/kubectl/format.ts';
import { table, TabWriter } from '../../plugin/kubectl/tabwriter.ts';

const data = {
  items: [
    {
      metadata: { name: 'a' },
      status: {
        conditions: [
          { type: 'Ready', status: 'True' },
          { type: 'Accepted', status: 'False' },
        ],
      },
    },
    { metadata: { name: 'b' }, status: { conditions: [{ type: 'Ready', status: 'False' }] } },
  ],
};

test('kubectl JSONPath: fields, wildcards, indexes, filters and ranges', (t) => {
  t.is(jsonpath('{.items[*].metadata.name}', data), 'a b');
  t.is(jsonpath('{.items[1].metadata.name}', data), 'b');
  t.is(jsonpath('{.items[0].status.conditions[?(@.type=="Ready")].status}', data), 'True');
  t.is(jsonpath('{range .items[*]}{.metadata.name}:{.status.conditions[0].status}{"\\n"}{end}', data), 'a:True\nb:False\n');
  // As kubectl: text outside {…} is printed as is; escapes work in {"quoted"} strings.
  t.is(jsonpath('name={.items[0].metadata.name}\\n{"\\t|"}', data), 'name=a\\n\t|');
  t.is(jsonpath('{.items[*].metadata.labels.example\\.com/team}', { items: [{ metadata: { labels: { 'example.com/team': 'db' } } }] }), 'db');
  t.is(jsonpath('{.items[0:2].metadata.name} {.items[-1:].metadata.name} {.items[0,1].metadata.name}', data), 'a b b a b');
  t.is(jsonpath('{..type}', data), 'Ready Accepted Ready');
  t.is(jsonpath('{.items[?(@.status.conditions[0].status=="False")].metadata.name}', data), 'b');
  t.is(jsonpath('{.n[?(@ > 2)]} {.n[?(@.x)]}', { n: [1, 3, 5] }), '3 5 ');
  t.is(jsonpath('{range .items[*]}{@.metadata.name}{end}', data), 'ab');
  t.is(jsonpath('{.items[0].metadata}', data), '{"name":"a"}');
  t.throws(() => jsonpath('{.items[}', data), { message: /unterminated array/ });
  t.throws(() => jsonpath('{.items[9]}', data), { message: /array index out of bounds: index 9, length 2/ });
  t.throws(() => jsonpath('{range .items[*]}x', data), { message: /\{range\} without \{end\}/ });
  t.throws(() => jsonpath('{end}', data), { message: /not in range, nothing to end/ });
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
  t.is(
    table(
      ['NAME', 'X'],
      [
        ['long-name', '1'],
        ['a', '22'],
      ],
    ),
    'NAME        X\nlong-name   1\na           22\n',
  );
  // One writer, two layouts: status's own table has no minimum width and no blanks at the ends of lines;
  // kubectl's pads every cell but the last to at least 6, blank ones included.
  t.is(table(['A', 'B', 'C'], [['x', 'y', '']]), 'A   B   C\nx   y\n');
  t.is(
    new TabWriter().format([
      ['A', 'B', 'C'],
      ['x', '', ''],
    ]),
    'A     B     C\nx           \n',
  );
});
