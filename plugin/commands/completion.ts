// Shell completion. kubectl (1.26+) completes plugin arguments by running `kubectl_complete-nodedisks`,
// which calls `kubectl-nodedisks __complete …` and reads cobra's format: one candidate per line, then
// ":<directive>" (4 = no file completion). `completion bash|zsh` prints a script for the standalone binary.
import type { Session } from '../context.ts';

export const SUBCOMMANDS = ['list', 'get', 'status', 'reserve', 'release', 'wait', 'gitops', 'completion', 'version'];
const NAME_COMMANDS = new Set(['list', 'get', 'status', 'reserve', 'release', 'wait']);

export async function complete(session: Session, words: string[]): Promise<void> {
  const current = words.at(-1) ?? '';
  const before = words.slice(0, -1).filter((w) => !w.startsWith('-'));
  let candidates: string[] = [];
  if (before.length === 0) candidates = SUBCOMMANDS;
  else if (before[0] === 'gitops' && before.length === 1) candidates = ['reserve', 'release'];
  else if (before[0] === 'completion') candidates = ['bash', 'zsh'];
  else if (current.startsWith('--for=')) candidates = ['--for=phase=Reserved', '--for=phase=Available', '--for=condition=Ready'];
  else if (NAME_COMMANDS.has(before[0] ?? '') || before[0] === 'gitops') {
    try {
      candidates = await namesFor(session, flagValue(words.slice(0, -1), 'node'), current);
    } catch {
      candidates = [];
    }
  }
  session.io.out(candidates.filter((c) => c.startsWith(current)).map((c) => `${c}\n`).join('') + ':4\n');
}

/** Pages of a completion's list: large, as only names travel (a Table without objects, ~100 bytes a row). */
const PAGE = 5000;
/** Completion must answer while someone waits at a prompt: what is found by then is offered. */
const DEADLINE_MS = 5000;
/** Names read at most (10 pages of 5,000 at 50,000 NodeDisks). */
const MAX_NAMES = 200_000;

/**
 * NodeDisk names starting with `prefix`, of `node` when the command line names one (`--node X`): that is
 * a field selector, so the server sends only that node's disks. Every page is read (continue), up to a
 * bound and a deadline, so names past the first page are offered too.
 */
async function namesFor(session: Session, node: string | undefined, prefix: string): Promise<string[]> {
  const client = session.client();
  const deadline = Date.now() + DEADLINE_MS;
  const out: string[] = [];
  let cont: string | undefined;
  let read = 0;
  do {
    const page = await client.listNames({ ...(node ? { fieldSelector: `spec.nodeName=${node}` } : {}), limit: PAGE, continue: cont });
    read += page.names.length;
    for (const n of page.names) if (n.startsWith(prefix)) out.push(n);
    cont = page.continue;
  } while (cont && read < MAX_NAMES && Date.now() < deadline);
  return out;
}

/** The value of `--flag X` or `--flag=X` among the words typed so far (the last one wins, as in parsing). */
function flagValue(words: string[], flag: string): string | undefined {
  let value: string | undefined;
  words.forEach((w, i) => {
    if (w === `--${flag}` && i + 1 < words.length) value = words[i + 1];
    else if (w.startsWith(`--${flag}=`)) value = w.slice(flag.length + 3);
  });
  return value || undefined;
}

export function completionScript(shell: string): string {
  if (shell === 'zsh') {
    return `#compdef kubectl-nodedisks
_kubectl_nodedisks() {
  local -a out; out=("\${(@f)$(kubectl-nodedisks __complete "\${words[@]:1}" 2>/dev/null)}")
  compadd -- "\${out[@]:#:*}"
}
compdef _kubectl_nodedisks kubectl-nodedisks
`;
  }
  return `# bash completion for kubectl-nodedisks; source it: source <(kubectl-nodedisks completion bash)
_kubectl_nodedisks() {
  local IFS=$'\\n'
  COMPREPLY=( $(kubectl-nodedisks __complete "\${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null | grep -v '^:') )
}
complete -F _kubectl_nodedisks kubectl-nodedisks
`;
}
