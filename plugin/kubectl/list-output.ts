// `kubectl nodedisks list` of a selection, read page by page: each page is turned into the text it
// prints (table cells, names, JSON or YAML of each item, jsonpath output) as it arrives and then dropped,
// so memory grows with the printed text, not with the objects (docs/benchmarks.md).
// Like kubectl, everything is printed once the last page is in: one table aligned across all pages, one
// List document, and nothing at all when a page fails half way (docs/adr/0025-plugin-start-and-stream.md).
import type { NodeDisk } from '../../api/v1alpha1/types.ts';
import { goJson, sortKeys } from './goformat.ts';
import { JsonPathError } from './jsonpath.ts';
import { customColumnRows, printNodeDisks, tableRows, withoutManagedFields, YAML_OPTIONS, type PrintOptions } from './printers.ts';
import { TabWriter } from './tabwriter.ts';
import { tableCellText } from '../escape.ts';
import { usageError } from '../errors.ts';

/** The API server's Table of NodeDisks (`as=Table;g=meta.k8s.io`, `includeObject=None`), as kubectl get asks. */
export interface ServerTable {
  columnDefinitions?: { name: string; priority?: number }[];
  rows?: { cells: unknown[] }[];
  metadata?: { continue?: string; resourceVersion?: string };
}

export interface ListOutput {
  /** Whether pages should come as the server's Table (the default and wide tables, names) rather than objects. */
  readonly wantsTable: boolean;
  /** Rows or items seen so far. */
  readonly count: number;
  addItems(items: NodeDisk[]): Promise<void>;
  addTable(table: ServerTable): void;
  /** Prints everything, in pieces (a 50,000 line table is not one string). */
  end(out: (text: string) => void): Promise<void>;
}

/** A Table cell as kubectl prints it: missing is blank, numbers and strings as they are, escaped for the terminal. */
const tableCell = (v: unknown): string => (v === null || v === undefined ? '' : tableCellText(typeof v === 'object' ? JSON.stringify(v) : String(v)));

/** Indents every line of one item's JSON or YAML but the first, to place it inside a List. */
const indent = (text: string, first: string, rest: string) => first + text.replace(/\n(?!$)/g, `\n${rest}`);

/** Prints `parts` joined, 1,000 at a time. */
function printJoined(out: (text: string) => void, parts: string[], sep = ''): void {
  for (let i = 0; i < parts.length; i += 1000) out((i ? sep : '') + parts.slice(i, i + 1000).join(sep));
}

export function listOutput(o: PrintOptions): ListOutput {
  const f = o.format;
  // The server's Table has every printer column and the name, but no labels (-L, --show-labels).
  const fromTable = f.kind === 'name' || ((f.kind === 'table' || f.kind === 'wide') && !o.showLabels && o.labelColumns.length === 0);
  const tab = new TabWriter();
  const texts: string[] = [];
  let count = 0;
  const header = (h: string[]) => {
    if (count === 0 && !o.noHeaders) tab.add([h]);
  };
  const flushTab = (out: (text: string) => void) => {
    for (const text of tab.flush()) out(text);
  };
  if (fromTable) {
    return {
      wantsTable: true,
      get count() {
        return count;
      },
      addItems: () => Promise.reject(new Error('this output reads Table pages')),
      addTable(t) {
        const defs = t.columnDefinitions ?? [];
        const rows = t.rows ?? [];
        if (rows.length === 0) return;
        if (f.kind === 'name') {
          const at = Math.max(
            0,
            defs.findIndex((c) => c.name === 'Name'),
          );
          texts.push(...rows.map((r) => `nodedisk.localtest.example.com/${tableCell(r.cells[at])}\n`));
        } else {
          const columns = defs.map((c, i) => ({ ...c, i })).filter((c) => f.kind === 'wide' || !c.priority);
          header(columns.map((c) => c.name.toUpperCase()));
          tab.add(rows.map((r) => columns.map((c) => tableCell(r.cells[c.i]))));
        }
        count += rows.length;
      },
      async end(out) {
        if (f.kind === 'name') printJoined(out, texts);
        else flushTab(out);
      },
    };
  }
  // Objects: each page becomes its printed text at once.
  let add: (items: NodeDisk[]) => void | Promise<void>;
  let finish: (out: (text: string) => void) => void | Promise<void>;
  switch (f.kind) {
    case 'json':
      add = (items) => void texts.push(...items.map((nd) => indent(goJson(withoutManagedFields(nd), '    '), '        ', '        ')));
      finish = (out) => {
        out(`{\n    "apiVersion": "v1",\n    "items": [${texts.length ? '\n' : ''}`);
        printJoined(out, texts, ',\n');
        out(`${texts.length ? '\n    ' : ''}],\n    "kind": "List",\n    "metadata": {\n        "resourceVersion": ""\n    }\n}\n`);
      };
      break;
    case 'yaml': {
      let dump: ((v: unknown, o: object) => string) | undefined;
      add = async (items) => {
        dump ??= (await import('js-yaml')).dump;
        texts.push(...items.map((nd) => indent(dump!(sortKeys(withoutManagedFields(nd)), YAML_OPTIONS), '- ', '  ')));
      };
      finish = (out) => {
        out(`apiVersion: v1\nitems:${texts.length ? '\n' : ' []\n'}`);
        printJoined(out, texts);
        out('kind: List\nmetadata:\n  resourceVersion: ""\n');
      };
      break;
    }
    case 'custom-columns':
      add = (items) => {
        header(f.columns.map((c) => c.header));
        tab.add(customColumnRows(items, f.columns, false));
      };
      finish = flushTab;
      break;
    case 'jsonpath': {
      const itemwise = f.itemwise?.();
      if (itemwise) {
        add = (items) => {
          try {
            for (const nd of items) itemwise.add(withoutManagedFields(nd));
          } catch (err) {
            if (err instanceof JsonPathError) throw usageError(`-o jsonpath: ${err.message}`);
            throw err;
          }
        };
        finish = (out) => out(itemwise.text());
      } else {
        // Slices, indexes and `..` need the whole List: keep the items, without their managedFields.
        const kept: NodeDisk[] = [];
        add = (items) => void kept.push(...items.map(withoutManagedFields));
        finish = (out) => printNodeDisks(kept, o, out);
      }
      break;
    }
    default:
      // The table with -L or --show-labels, which the server's Table has no cells for.
      add = (items) => {
        header(tableRows([], o, true)[0]!);
        tab.add(tableRows(items, o, false));
      };
      finish = flushTab;
  }
  return {
    wantsTable: false,
    get count() {
      return count;
    },
    async addItems(items) {
      if (items.length === 0) return;
      await add(items);
      count += items.length;
    },
    addTable: () => {
      throw new Error('this output reads objects');
    },
    async end(out) {
      await finish(out);
    },
  };
}
