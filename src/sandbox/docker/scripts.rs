//! Small POSIX shell programs run inside the container.
//!
//! They only use what busybox, dash and bash all have (`/proc`, `read`,
//! `kill`, `tr`, `stat`), so they work in a `FROM scratch` busybox image as
//! well as in Debian. Arguments are passed as `"$1"`..., never spliced into
//! the program text.

/// Keeps the container alive until it is removed. `trap` makes SIGTERM end
/// it at once (no 10 s stop grace), `sleep & wait` keeps the shell able to
/// take the signal, and the work dir is made in case the image lacks it.
/// `$1` = work dir.
pub(crate) const KEEP_ALIVE: &str =
    "mkdir -p -- \"$1\" 2>/dev/null; trap 'exit 0' TERM; while :; do sleep 3600 & wait $!; done";

/// Starts the persistent shell: bash when the image has it (nicer for the
/// model), `sh` otherwise.
pub(crate) const SHELL_START: &str =
    "if command -v bash >/dev/null 2>&1; then exec bash; fi; exec sh";

/// Written to a fresh persistent shell before its first command:
/// - fds 7 and 8 keep the session's stdout/stderr for the end markers, so
///   they arrive even after the model's `exec >file`;
/// - commands run in a function (`__agentd_cmd` holds the text) so that the
///   SIGUSR1 trap can `return` from it: after a timeout the rest of the
///   command (`sleep 1000; echo never`, a busy `while` loop) is abandoned
///   while the shell and its state live on;
/// - `command eval` keeps a syntax error in the command from ending the
///   shell (it returns 2).
pub(crate) const SHELL_SETUP: &str = "exec 7>&1 8>&2
__agentd_run() { __agentd_in=1; command eval \"$__agentd_cmd\"; }
trap 'if [ -n \"$__agentd_in\" ]; then __agentd_in=; return 137; fi' USR1
";

/// SIGKILLs every process whose environment holds `$1` (`NAME=nonce`), i.e.
/// everything a tagged exec started, including orphans and forked
/// subshells. Several passes catch processes forked during a pass. Prints
/// how many were killed.
pub(crate) const KILL_TAGGED: &str = r#"tag=$1; n=0
for pass in 1 2 3; do
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    [ "$p" = "$$" ] && continue
    case "$(tr '\0' '\n' <"$d/environ" 2>/dev/null)" in
      *"$tag"*) kill -9 "$p" 2>/dev/null && n=$((n+1)) ;;
    esac
  done
done
echo "$n""#;

/// Stops the command running in the persistent shell `$1`: sends the shell
/// SIGUSR1 (its trap, see [`SHELL_SETUP`], abandons the rest of the
/// command once the running child is gone), then SIGKILLs the shell's
/// children started at or after clock tick `$2` (since boot, as in
/// /proc/PID/stat) with all their descendants. Neither the shell (so
/// `cd`/`export` survive) nor background jobs of earlier commands are
/// killed. Prints the pids killed.
pub(crate) const KILL_RECENT_CHILDREN: &str = r#"root=$1; min=$2
tbl=''
for f in /proc/[0-9]*/stat; do
  line=''
  read -r line <"$f" 2>/dev/null || continue
  pid=${line%% *}
  rest=${line##*) }
  set -- $rest
  [ $# -ge 20 ] || continue
  start=${20}
  tbl="$tbl $pid:$2:$start"
done
targets=' '
for e in $tbl; do
  pid=${e%%:*}; r=${e#*:}; ppid=${r%%:*}; start=${r#*:}
  if [ "$ppid" = "$root" ] && [ "$start" -ge "$min" ]; then targets="$targets$pid "; fi
done
changed=1
while [ "$changed" = 1 ]; do
  changed=0
  for e in $tbl; do
    pid=${e%%:*}; r=${e#*:}; ppid=${r%%:*}
    case "$targets" in *" $pid "*) continue ;; esac
    case "$targets" in *" $ppid "*) targets="$targets$pid "; changed=1 ;; esac
  done
done
kill -USR1 "$root"
[ "$targets" = ' ' ] || kill -9 $targets 2>/dev/null
echo $targets"#;

/// Lists directory `$1` at depth 1, one `d|f <size> <name>` line per entry
/// (a symlink counts as what it points to). Exit 20: not a directory,
/// 21: does not exist.
pub(crate) const LIST_DIR: &str = r#"if ! cd -- "$1" 2>/dev/null; then
  if [ -e "$1" ]; then echo "not a directory" >&2; exit 20; fi
  echo "no such directory" >&2; exit 21
fi
shift $#
for f in * .[!.]* ..?*; do
  if [ -d "$f" ]; then printf 'd 0 %s\n' "$f"
  elif [ -e "$f" ]; then set -- "$@" "$f"
  elif [ -L "$f" ]; then printf 'f 0 %s\n' "$f"
  fi
done
[ $# -eq 0 ] && exit 0
if command -v stat >/dev/null 2>&1; then
  stat -L -c 'f %s %n' -- "$@" 2>/dev/null
else
  for f; do printf 'f %s %s\n' "$(wc -c <"$f" 2>/dev/null || echo 0)" "$f"; done
fi
exit 0"#;

/// `mkdir -p "$1"`, for a write whose parent directory is missing.
pub(crate) const MKDIR_P: &str = r#"mkdir -p -- "$1""#;
