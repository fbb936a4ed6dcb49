// Small helpers for the generated Markdown pages: table cells and text that may hold <, | or `code`.

/** Text for Markdown prose or a table cell: `|` escaped, and `<` outside code spans (so <disk> is not HTML). */
export function inline(text: string): string {
  return text
    .split(/(`[^`]*`)/)
    .map((part, i) => (i % 2 === 1 ? part : part.replaceAll('<', '&lt;')))
    .join('')
    .replaceAll('|', '\\|')
    .replaceAll('\n', ' ');
}

/** A code span holding `text`, safe in a table cell. */
export function code(text: string): string {
  const fence = text.includes('`') ? '``' : '`';
  const pad = text.includes('`') ? ' ' : '';
  return `${fence}${pad}${text.replaceAll('|', '\\|')}${pad}${fence}`;
}

/** A Markdown table: a header row and rows of cells (already escaped). */
export function table(head: string[], rows: string[][]): string {
  return [`| ${head.join(' | ')} |`, `| ${head.map(() => '---').join(' | ')} |`, ...rows.map((r) => `| ${r.join(' | ')} |`)].join('\n');
}

/** A fenced block of plain text (the generated pages hold no shell blocks: examples are text). */
export function textBlock(text: string): string {
  return `\`\`\`text\n${text.replace(/\n+$/, '')}\n\`\`\``;
}

/** The GitHub anchor of a heading. */
export function anchor(heading: string): string {
  return heading
    .toLowerCase()
    .replace(/[^a-z0-9 _-]/g, '')
    .replaceAll(' ', '-');
}
