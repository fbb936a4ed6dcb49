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
      const list = await session.client().list({ limit: 1000 });
      candidates = list.items.map((i) => i.metadata.name ?? '');
    } catch {
      candidates = [];
    }
  }
  session.io.out(candidates.filter((c) => c.startsWith(current)).map((c) => `${c}\n`).join('') + ':4\n');
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
