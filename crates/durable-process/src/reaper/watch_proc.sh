# The watcher of one agent run, on Linux (`/proc`); run as
# `sh -c <this> durable-agent-watcher <mark>`. It waits for its input to close
# (the program ended this agent process, or the program died, however),
# then stops what ran under that process: every process whose environment holds
# `DURABLE_AGENT_RUN=<mark>`, every process whose parent is one of those
# (transitively), and every member of a session led by one of those (a
# call that cleared its environment still runs in its call's session).
# Each is stopped (SIGSTOP) as it is found, so none can fork or leave its
# session while the rest are looked for; once a scan finds nothing new,
# all get SIGTERM and go on, with a second to end cleanly; what is left
# then, and what it started meanwhile, is stopped and killed (SIGKILL). A
# process is signalled only while its pid and start time are those it
# had when it was held, so a pid taken since by another is never hit.
read -r _ || :
mark="DURABLE_AGENT_RUN=$1"
me=$$
# GNU grep and BusyBox read NUL-separated variables in one pass (-z); else
# (or with `per-process` as the second argument, for the tests) one
# `tr | grep` per process.
if [ "${2:-}" != per-process ] && printf 'a\0' | grep -qxzF a 2>/dev/null; then fast=1; else fast=; fi
# A process's start time (field 22 of its stat): with its pid, it names
# the process, so a pid taken by another since is never signalled.
start_of() {
  stat=
  read -r stat < "/proc/$1/stat" 2>/dev/null || return 0
  rest=${stat##*) }
  # shellcheck disable=SC2086
  set -- $rest
  echo "${20}"
}
# Signals each held process that is still the one that was held.
signal_held() {
  for e in $starts; do
    p=${e%%:*}
    [ "$(start_of "$p")" = "${e#*:}" ] && kill "-$1" "$p" 2>/dev/null
  done
}
# Whether a held process is still there.
any_held() {
  for e in $starts; do
    p=${e%%:*}
    [ "$(start_of "$p")" = "${e#*:}" ] && return 0
  done
  return 1
}
held=" "
starts=
scan() {
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
      kill -STOP "$p" 2>/dev/null || continue
      held="$held$p "
      starts="$starts$p:$(start_of "$p") "
      new=1
    done
    [ -z "$new" ] && break
  done
}
scan
# A moment to end cleanly (a tool's `git` removes its lock file): TERM,
# then on again, since a stopped process sees TERM only once continued.
signal_held TERM
signal_held CONT
waited=0
while any_held && [ "$waited" -lt 10 ]; do
  sleep 0.1 2>/dev/null || sleep 1
  waited=$((waited + 1))
done
# What is left, and what it started meanwhile, is stopped, then killed.
signal_held STOP
scan
signal_held KILL
exit 0
