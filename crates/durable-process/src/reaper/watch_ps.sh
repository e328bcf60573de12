# The watcher of one agent run where there is no `/proc` (macOS); run as
# `sh -c <this> durable-agent-watcher <mark> <ps options>`, the options those
# that make `ps` list every process with its environment after its command
# (`-axwwE` on macOS). It waits for its input to close (the program ended
# this agent process, or the program died), then stops every process whose
# environment holds `DURABLE_AGENT_RUN=<mark>` (as a word of `ps`'s line) and
# every process whose parent is one of those (transitively): each is
# stopped (SIGSTOP) as it is found, and once a scan finds nothing new, all
# get SIGTERM and go on, with a second to end cleanly, then SIGKILL.
# `ps` shows no session there: a call that cleared
# its environment and left its parent is not found.
read -r _ || :
mark="DURABLE_AGENT_RUN=$1"
env_options=$2
me=$$
held=" "
round=0
while [ "$round" -lt 100 ]; do
  round=$((round + 1))
  table=$(ps -axww -o pid= -o ppid= 2>/dev/null)
  # shellcheck disable=SC2086
  marked=$(ps $env_options -o pid= -o command= 2>/dev/null |
    awk -v m="$mark" '{ for (i = 2; i <= NF; i++) if ($i == m) { print $1; break } }')
  found=" "
  for p in $marked; do
    [ "$p" = "$me" ] || found="$found$p "
  done
  grew=1
  while [ -n "$grew" ]; do
    grew=
    while read -r p parent; do
      [ -n "$p" ] || continue
      [ "$p" = "$me" ] && continue
      case "$found" in *" $p "*) continue ;; esac
      case "$found" in
        *" $parent "*)
          found="$found$p "
          grew=1
          ;;
      esac
    done <<EOF
$table
EOF
  done
  new=
  for p in $found; do
    case "$held" in *" $p "*) continue ;; esac
    kill -STOP "$p" 2>/dev/null && held="$held$p " && new=1
  done
  [ -z "$new" ] && break
done
# A moment to end cleanly: TERM, then on again (a stopped process sees
# TERM only once continued); what is left after a second is killed.
for p in $held; do
  kill -TERM "$p" 2>/dev/null
  kill -CONT "$p" 2>/dev/null
done
waited=0
while [ "$waited" -lt 10 ]; do
  alive=
  for p in $held; do
    kill -0 "$p" 2>/dev/null && alive=1 && break
  done
  [ -z "$alive" ] && break
  sleep 0.1 2>/dev/null || sleep 1
  waited=$((waited + 1))
done
for p in $held; do
  kill -KILL "$p" 2>/dev/null
done
exit 0
