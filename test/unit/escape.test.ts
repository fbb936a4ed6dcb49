// Text from the cluster on the terminal (plugin/escape.ts): kubectl's EscapeTerminal and table cells,
// byte for byte (test/integration/plugin-trust.test.ts compares with the real kubectl), and the plugin's
// stricter escaping for its own views.
import test from 'ava';
import { escapeControl, escapeTerminal, tableCellText } from '../../plugin/escape.ts';

const OSC52 = '\x1b]52;c;ZXZpbA==\x07';

test("kubectl's EscapeTerminal: ESC becomes ^[ and CR \\r, nothing else changes", (t) => {
  t.is(escapeTerminal(`a${OSC52}b\x1b[2K\rc\td\ne\x07`), 'a^[]52;c;ZXZpbA==\x07b^[[2K\\rc\td\ne\x07');
  t.is(escapeTerminal('plain ünïcode'), 'plain ünïcode');
});

test("a table cell is cut at the first form feed, newline or carriage return, as kubectl's table printer cuts it", (t) => {
  t.is(tableCellText('first\nsecond'), 'first...');
  t.is(tableCellText('a\x1b[31mred\rfake'), 'a^[[31mred...');
  t.is(tableCellText('page\fbreak'), 'page...');
  t.is(tableCellText('whole'), 'whole');
});

test("the plugin's own views let no control character through, and keep only the newlines they are told to", (t) => {
  t.is(escapeControl(`x${OSC52}\x1b[2K\rReady: True`), 'x^[]52;c;ZXZpbA==\\x07^[[2K\\rReady: True');
  t.is(escapeControl('a\nb\tc\x00\x7f\u009b[2J'), 'a\\nb\\tc\\x00\\x7f\\x9b[2J');
  t.is(escapeControl('line one\nline two\x1b', true), 'line one\nline two^[');
  t.is(escapeControl('ünïcode ✓'), 'ünïcode ✓');
});
