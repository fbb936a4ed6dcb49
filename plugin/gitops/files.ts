// The files `kubectl nodedisks gitops` writes into a GitOps repository, edited the way a person would edit
// them: what is in git is reviewed text, so comments, key order, quoting and layout stay as they were and a
// change shows as the few lines it is. Loaded only by the gitops command (the `yaml` library is not part of
// the plugin's start-up; docs/adr/0022-gitops-files-and-krew-archives.md).
//
// - kustomization.yaml: new `resources:` entries are spliced into the original text at the positions the
//   parser reports, so every other byte is kept (even spacing no serializer reproduces).
// - <name>.yaml: the few fields the tool owns are set in the parsed document, which keeps comments, order
//   and quoting; the rest of the file is the user's.
import { isMap, isNode, isScalar, isSeq, parseDocument, Scalar, stringify, type Document, type Node, type YAMLMap } from 'yaml';
import { usageError } from '../errors.ts';

const NEW_KUSTOMIZATION = 'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n';

function parse(src: string, path: string): Document.Parsed {
  const doc = parseDocument(src, { prettyErrors: false });
  const problem = doc.errors[0];
  if (problem) throw usageError(`${path} is not valid YAML (${problem.message.split('\n')[0]}); fix it or choose another --dir`);
  return doc;
}

/** How a new list entry is written: quoted like its neighbour, so a list stays in one style. */
function entryText(file: string, neighbour: Node | undefined): string {
  if (isScalar(neighbour) && neighbour.type === Scalar.QUOTE_DOUBLE) return `"${file}"`;
  if (isScalar(neighbour) && neighbour.type === Scalar.QUOTE_SINGLE) return `'${file}'`;
  return file;
}

/** The text of a new kustomization.yaml listing `files`. */
export function newKustomization(files: string[]): string {
  return `${NEW_KUSTOMIZATION}resources:\n${[...files]
    .sort()
    .map((f) => `  - ${f}\n`)
    .join('')}`;
}

/**
 * The kustomization's root map, refusing what is not a Kustomization, and a `namespace:` unless it is
 * `namespace` (the namespace of the claims being written): kustomize would move every resource into it,
 * a cluster-scoped NodeDisk too (kustomize does not know the CRD's scope), a claim of another namespace.
 */
function kustomizationRoot(doc: Document.Parsed, path: string, namespace: string | undefined): YAMLMap {
  const root = doc.contents;
  if (!isMap(root)) throw usageError(`${path} is not a Kustomization (not a YAML mapping); choose another --dir`);
  if (root.has('namespace')) {
    const node = root.get('namespace', true);
    const set: unknown = isScalar(node) ? node.value : node;
    if (namespace === undefined) throw usageError(`${path} sets a namespace; NodeDisks are cluster-scoped, remove it or use another --dir`);
    if (set !== namespace)
      throw usageError(
        `${path} sets namespace ${JSON.stringify(set)}, which kustomize would give the claim instead of ${JSON.stringify(namespace)}: pass -n ${String(set)}, or use another --dir`,
      );
  }
  return root;
}

/**
 * Adds `files` to the `resources:` of a kustomization's text and returns the new text: the original with
 * only the new entries' lines inserted. In a sorted list they go where they sort; entries already listed
 * are left alone. Refuses (usage error) what is not a Kustomization or sets a namespace other than
 * `namespace` (given for claims only).
 */
export function addResources(src: string, files: string[], path: string, namespace?: string): string {
  const doc = parse(src, path);
  if (doc.contents === null) return `${src}${src === '' || src.endsWith('\n') ? '' : '\n'}${newKustomization(files)}`;
  const root = kustomizationRoot(doc, path, namespace);
  const pair = root.items.find((p) => isScalar(p.key) && p.key.value === 'resources');
  const value = pair?.value as Node | null | undefined;

  if (!pair || value === null || value === undefined || (isScalar(value) && value.value === null && value.source === '')) {
    // No list yet: add one after the last line of the document (or after `resources:` if it is empty).
    const add = [...new Set(files)].sort();
    const lines = add.map((f) => `  - ${f}\n`).join('');
    if (pair && isScalar(pair.key) && pair.key.range) {
      const eol = lineEnd(src, pair.key.range[1]);
      return `${src.slice(0, eol)}\n${lines.replace(/\n$/, '')}${src.slice(eol)}`;
    }
    const end = root.range?.[2] ?? src.length;
    const at = lineEnd(src, Math.max(end - 1, 0)) + 1;
    const before = src.slice(0, Math.min(at, src.length));
    return `${before}${before === '' || before.endsWith('\n') ? '' : '\n'}resources:\n${lines}${src.slice(Math.min(at, src.length))}`;
  }
  if (!isSeq(value)) throw usageError(`${path}: resources is not a list; fix it or choose another --dir`);
  const listed = value.items.map((i) => (isScalar(i) ? String(i.value) : ''));
  const add = [...new Set(files)].filter((f) => !listed.includes(f)).sort();
  if (add.length === 0) return src;

  if (value.flow) {
    // resources: [a.yaml, b.yaml]: the new entries go before the closing bracket.
    const close = src.lastIndexOf(']', (value.range?.[1] ?? 0) - 1);
    if (close < 0) throw usageError(`${path}: cannot find the end of the resources list; fix it or choose another --dir`);
    const last = value.items[value.items.length - 1] as Node | undefined;
    const text = add.map((f) => entryText(f, last)).join(', ');
    const lastEnd = last?.range?.[1];
    return lastEnd === undefined ? `${src.slice(0, close)}${text}${src.slice(close)}` : `${src.slice(0, lastEnd)}, ${text}${src.slice(lastEnd)}`;
  }

  // A block list: each new entry is a line like its neighbour's ("  - x.yaml"), inserted before the first
  // entry that sorts after it, or after the last entry.
  const inserts = new Map<number, string>();
  for (const f of add) {
    const i = listed.findIndex((l) => l > f);
    const neighbour = value.items[i < 0 ? value.items.length - 1 : i] as Node;
    const start = neighbour.range?.[0] ?? 0;
    const lineStart = src.lastIndexOf('\n', start - 1) + 1;
    const prefix = src.slice(lineStart, start);
    if (!/^[ \t]*-[ \t]+$/.test(prefix)) throw usageError(`${path}: the resources list is laid out in a way this tool does not edit; put each entry on its own "- " line`);
    let at = lineStart;
    if (i < 0) {
      const eol = lineEnd(src, neighbour.range?.[1] ?? start);
      at = eol < src.length ? eol + 1 : eol;
    }
    const line = `${prefix}${entryText(f, neighbour)}\n`;
    inserts.set(at, (inserts.get(at) ?? '') + (at === src.length && !src.endsWith('\n') ? `\n${line}` : line));
  }
  let out = src;
  for (const at of [...inserts.keys()].sort((a, b) => b - a)) out = out.slice(0, at) + inserts.get(at)! + out.slice(at);
  return out;
}

/**
 * Removes `files` from the `resources:` of a kustomization's text: in a block list the entry's whole line
 * (a comment on that line goes with it), in a flow list the entry and one comma. Every other byte is kept;
 * an entry that is not listed is no change.
 */
export function removeResources(src: string, files: string[], path: string, namespace?: string): string {
  const doc = parse(src, path);
  if (doc.contents === null) return src;
  const root = kustomizationRoot(doc, path, namespace);
  const value = root.items.find((p) => isScalar(p.key) && p.key.value === 'resources')?.value as Node | null | undefined;
  if (!isSeq(value)) return src;
  const cuts: [number, number][] = [];
  value.items.forEach((item, i) => {
    if (!isScalar(item) || !files.includes(String(item.value)) || !item.range) return;
    const [start, end] = item.range;
    if (value.flow) {
      // "a, b, c": the entry and the comma after it, or, for the last one, the comma before it.
      const next = value.items[i + 1] as Node | undefined;
      const prev = value.items[i - 1] as Node | undefined;
      if (next?.range) cuts.push([start, next.range[0]]);
      else if (prev?.range) cuts.push([prev.range[1], end]);
      else cuts.push([start, end]);
      return;
    }
    const lineStart = src.lastIndexOf('\n', start - 1) + 1;
    if (!/^[ \t]*-[ \t]+$/.test(src.slice(lineStart, start))) throw usageError(`${path}: the resources list is laid out in a way this tool does not edit; put each entry on its own "- " line`);
    const eol = lineEnd(src, end);
    cuts.push([lineStart, eol < src.length ? eol + 1 : eol]);
  });
  let out = src;
  for (const [a, b] of cuts.sort((x, y) => y[0] - x[0])) out = out.slice(0, a) + out.slice(b);
  return out;
}

/** The index of the newline that ends the line holding `pos` (or the end of the text). */
function lineEnd(src: string, pos: number): number {
  const eol = src.indexOf('\n', pos);
  return eol < 0 ? src.length : eol;
}

/** What one file must say; `undefined` removes the field. Paths are in the object (a NodeDisk or a claim). */
export type Owned = [path: string[], value: unknown][];

/**
 * A disk's overlay file: new, `header` + the object; existing, the same file with the owned fields set
 * (or removed) and everything else (other labels, comments, quoting) kept.
 */
export function writeDiskFile(existing: string | undefined, path: string, header: string, object: Record<string, unknown>, owned: Owned): string {
  if (existing === undefined) return header + stringify(object, { lineWidth: 0 });
  const doc = parse(existing, path);
  if (!isMap(doc.contents)) throw usageError(`${path} exists and is not a ${String(object.kind)}; move it away or choose another --dir`);
  const { name, namespace } = object.metadata as { name: string; namespace?: string };
  if (doc.getIn(['kind']) !== object.kind || doc.getIn(['metadata', 'name']) !== name || (namespace !== undefined && doc.getIn(['metadata', 'namespace']) !== namespace)) {
    const what = namespace === undefined ? `NodeDisk ${name}` : `${String(object.kind)} ${namespace}/${name}`;
    throw usageError(`${path} exists and is not the overlay of ${what}; move it away or choose another --dir`);
  }
  for (const [keys, v] of owned) {
    const now = doc.getIn(keys, true);
    // A map or list that already says this is left as written (its layout, its comments).
    if (v !== null && typeof v === 'object' && isNode(now) && JSON.stringify(now.toJSON()) === JSON.stringify(v)) continue;
    if (v !== undefined) doc.setIn(keys, v);
    else if (doc.hasIn(keys)) {
      doc.deleteIn(keys);
      // Leave no empty map behind (labels: {} or spec: {}), which would be a change of its own.
      for (let n = keys.length - 1; n > 0; n--) {
        const parent = doc.getIn(keys.slice(0, n), true) as YAMLMap | undefined;
        if (isMap(parent) && parent.items.length === 0) doc.deleteIn(keys.slice(0, n));
      }
    }
  }
  return doc.toString({ lineWidth: 0 });
}

/** An existing file of the overlay as plain data (for comparing what it says with what is asked). */
export function readObject(existing: string, path: string): unknown {
  return parse(existing, path).toJS();
}
