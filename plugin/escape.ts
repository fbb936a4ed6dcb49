// Text from the cluster made safe for a terminal. Whoever can write a NodeDisk's status (an agent, a
// person with status access) must not be able to drive the terminal of whoever reads it: an OSC 52
// sequence sets the clipboard, CSI sequences move the cursor and erase lines, a carriage return
// overwrites what was printed.
//
// kubectl's human-readable printers (tables, custom-columns, describe) escape with cli-runtime's
// printers.EscapeTerminal: ESC becomes `^[` and CR `\r`, nothing else; JSON and YAML are data and need
// nothing (Go's JSON and YAML encoders escape control characters themselves, and so do ours), and
// -o jsonpath prints values raw, as kubectl does. The parity outputs of `list` do exactly that, so they
// stay byte-equal to kubectl's.

/** cli-runtime's printers.EscapeTerminal. */
export const escapeTerminal = (text: string): string => text.replace(/[\x1b\r]/g, (c) => (c === '\x1b' ? '^[' : '\\r'));

/**
 * A table cell as kubectl's table printer writes it: cut at the first form feed, newline or carriage
 * return (which would break the table) with "..." in its place, then escaped.
 */
export function tableCellText(text: string): string {
  const cut = text.search(/[\f\n\r]/);
  return cut < 0 ? escapeTerminal(text) : `${escapeTerminal(text.slice(0, cut))}...`;
}

/**
 * Stricter, for the plugin's own views (`status`, error messages): no control character at all reaches
 * the terminal. ESC and CR as kubectl writes them; every other C0 control, DEL and the C1 controls
 * (U+0080–U+009F: some terminals take U+009B as CSI) as a Go-style `\xNN`, so that a message cannot
 * ring the bell, start a line that looks like one of ours, or shift the layout with tabs. `keepNewlines`
 * is for a multi-line message of our own that quotes the server.
 */
export function escapeControl(text: string, keepNewlines = false): string {
  return text.replace(/[\x00-\x1f\x7f-\x9f]/g, (c) => {
    if (c === '\x1b') return '^[';
    if (c === '\r') return '\\r';
    if (c === '\n') return keepNewlines ? '\n' : '\\n';
    if (c === '\t') return '\\t';
    return `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`;
  });
}
