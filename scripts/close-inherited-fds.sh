# Sourced by scripts/up.sh before it starts the stack's daemons: close every file descriptor this shell
# inherited above stderr. `flock /tmp/roster-default-stack.lock make up` hands flock's descriptor down;
# a daemon keeping it holds the machine-wide lock for as long as the stack runs, and the `make down` that
# would stop it (under the same lock) then waits forever. 255 is the descriptor bash reads the script from.
for inherited_fd in $(ls /proc/$$/fd); do
  case $inherited_fd in
    0 | 1 | 2 | 255) ;;
    *) eval "exec $inherited_fd>&-" 2>/dev/null || true ;;
  esac
done
unset inherited_fd
