package main

import (
	"fmt"
	"io"
)

// completion prints a completion script for the shell named in args, for
// both runnerguard and kubectl-runnerguard. Load it with
// `source <(runnerguard completion bash)`.
func completion(args []string, out io.Writer) error {
	if len(args) != 1 {
		return fmt.Errorf("%w: completion bash|zsh", errUsage)
	}
	switch args[0] {
	case "-h", "--help":
		_, err := fmt.Fprintf(out, "usage: %s completion bash|zsh\n\nLoad it with: source <(%s completion bash)\n", name(), name())
		return err
	case "bash":
		_, err := io.WriteString(out, bashCompletion)
		return err
	case "zsh":
		_, err := io.WriteString(out, "autoload -U +X bashcompinit && bashcompinit\n"+bashCompletion)
		return err
	}
	return fmt.Errorf("%w: completion bash|zsh, not %q", errUsage, args[0])
}

// bashCompletion completes the commands, their flags, and pod and
// namespace names through kubectl.
const bashCompletion = `# runnerguard completion (bash; zsh through bashcompinit)
_runnerguard() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} cmd=${COMP_WORDS[1]}
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=($(compgen -W "why deaths version completion serve help" -- "$cur")); return
  fi
  case "$prev" in
    -n|--namespace) COMPREPLY=($(compgen -W "$(kubectl get namespaces -o name 2>/dev/null | sed 's|^namespace/||')" -- "$cur")); return ;;
    -o) case "$cmd" in
          why) COMPREPLY=($(compgen -W "text json yaml" -- "$cur")) ;;
          deaths) COMPREPLY=($(compgen -W "text wide json" -- "$cur")) ;;
        esac; return ;;
  esac
  case "$cmd" in
    why)
      if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "-n --namespace -o --context --kubeconfig --config --help" -- "$cur"))
      else
        local ns="" i
        for ((i = 2; i < COMP_CWORD; i++)); do
          case "${COMP_WORDS[i]}" in -n|--namespace) ns="-n ${COMP_WORDS[i+1]}" ;; esac
        done
        COMPREPLY=($(compgen -W "$(kubectl get pods $ns -o name 2>/dev/null | sed 's|^pod/||')" -- "$cur"))
      fi ;;
    deaths) COMPREPLY=($(compgen -W "-n --namespace -A --all-namespaces --since -o --limit --context --kubeconfig --help" -- "$cur")) ;;
    completion) COMPREPLY=($(compgen -W "bash zsh" -- "$cur")) ;;
  esac
}
complete -F _runnerguard runnerguard kubectl-runnerguard
`
