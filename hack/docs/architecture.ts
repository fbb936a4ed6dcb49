// docs/pictures/architecture.svg from docs/pictures/architecture.dot, with Graphviz compiled to
// WebAssembly (@viz-js/viz): no system package, no browser, the same SVG on every machine (ADR 37).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { instance } from '@viz-js/viz';
import type { GeneratedFile } from '../lib/generated-files.ts';
import { REPO_ROOT } from '../lib/paths.ts';

export const ARCHITECTURE_DOT = 'docs/pictures/architecture.dot';
export const ARCHITECTURE_SVG = 'docs/pictures/architecture.svg';

/** The SVG of a Graphviz source, with a comment naming the source and the command. */
export async function renderDot(dot: string, source: string): Promise<string> {
  const viz = await instance();
  const result = viz.render(dot, { format: 'svg' });
  if (result.status !== 'success') {
    throw new Error(`${source}: Graphviz could not render it: ${result.errors.map((e) => e.message).join('; ')}`);
  }
  // The comment goes after the XML declaration, which must stay first.
  return result.output.replace(/^(<\?xml[^>]*>\n)?/, (decl) => `${decl}<!-- Generated from ${source} by npm run generate: do not edit. -->\n`);
}

export async function architectureFiles(): Promise<GeneratedFile[]> {
  const dot = readFileSync(join(REPO_ROOT, ARCHITECTURE_DOT), 'utf8');
  return [{ path: ARCHITECTURE_SVG, content: await renderDot(dot, ARCHITECTURE_DOT) }];
}
