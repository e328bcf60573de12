# The watcher of one agent run, on Linux (`/proc`); run as
# `sh -c <this> durable-agent-watcher <mark>`. It waits for its input to close
# (the program ended this agent process, or the program died, however),
# then stops what ran under that process: every process whose environment holds
# `DURABLE_AGENT_RUN=<mark>`, every process whose parent is one of those
# (transitively), and every member of a session led by one of those (a
# call that cleared its environment still runs in its call's session).
# Each is stopped (SIGSTOP) as it is found, so none can fork or leave its
# session while the rest are looked for; once a scan finds nothing new,
# all are killed (SIGKILL).
read -r _ || :
mark="DURABLE_AGENT_RUN=$1"
me=$$
# GNU grep and BusyBox read NUL-separated variables in one pass (-z); else
# (or with `per-process` as the second argument, for the tests) one
# `tr | grep` per process.
if [ "${2:-}" != per-process ] && printf 'a\0' | grep -qxzF a 2>/dev/null; then fast=1; else fast=; fi
held=" "
round=0
while [ "$round" -lt 100 ]; do
  round=$((round + 1))
  # The processes: "pid ppid session" lines (the name in `stat` may hold
  # spaces and parentheses: read after its last `) `).
  table=
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    [ "$p" = "$me" ] && continue
    stat=
    read -r stat < "$d/stat" 2>/dev/null || continue
    rest=${stat##*) }
    # shellcheck disable=SC2086
    set -- $rest
    table="$table$p $2 $4
"
  done
  # Those carrying the mark (another user's environment is unreadable: not ours).
  marked=
  if [ -n "$fast" ]; then
    for f in $(grep -lsxzF -- "$mark" /proc/[0-9]*/environ 2>/dev/null); do
      f=${f#/proc/}
      marked="$marked ${f%/environ}"
    done
  else
    for d in /proc/[0-9]*; do
      if tr '\0' '\n' < "$d/environ" 2>/dev/null | grep -qxF -- "$mark"; then
        marked="$marked ${d#/proc/}"
      fi
    done
  fi
  found=" "
  for p in $marked; do
    [ "$p" = "$me" ] || found="$found$p "
  done
  # What runs under them: children, and members of their sessions.
  grew=1
  while [ -n "$grew" ]; do
    grew=
    while read -r p parent session; do
      [ -n "$p" ] || continue
      case "$found" in *" $p "*) continue ;; esac
      case "$found" in
        *" $parent "* | *" $session "*)
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
for p in $held; do
  kill -KILL "$p" 2>/dev/null
done
exit 0
