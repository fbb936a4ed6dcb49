import test from 'ava';
import { quantityBytes } from '../../api/quantity.ts';

test('binary, decimal and exponent quantities in bytes', (t) => {
  t.is(quantityBytes('32Mi'), 32 * 1024 * 1024);
  t.is(quantityBytes('1.5Gi'), 1.5 * 2 ** 30);
  t.is(quantityBytes('1G'), 1e9);
  t.is(quantityBytes('2e3'), 2000);
  t.is(quantityBytes('100'), 100);
  t.is(quantityBytes('0'), 0);
  t.is(quantityBytes('+4k'), 4000);
});

test('fractions of a byte round up, as Quantity.Value() does', (t) => {
  t.is(quantityBytes('1500m'), 2);
  t.is(quantityBytes('0.5'), 1);
});

test('text that is not a quantity', (t) => {
  for (const bad of ['', 'Mi', '32MiB', '32 Mi', '1.2.3', 'abc', '32mi']) t.is(quantityBytes(bad), undefined, bad);
});
