#!/usr/bin/env bash
# ensure-docker.sh - make sure a Docker engine answers, starting one if needed.
#
# Idempotent: when `docker version` already reaches a server it exits 0 at once.
# Otherwise (local engine only):
#   1. installs Debian's `docker.io` with apt-get if `dockerd` is missing
#      (service start-up during the install is suppressed with policy-rc.d, so
#      the packaged init script never brings up the default bridge);
#   2. starts `dockerd --bridge=none --iptables=false` in the background,
#      detached (setsid + nohup), logging to /var/log/agentd-dockerd.log
#      (or $TMPDIR/agentd-dockerd.log when /var/log is not writable);
#   3. waits up to $AGENTD_DOCKER_WAIT seconds (default 60) for it to answer,
#      and fails with the tail of its log if it does not.
#
# The engine is never started with Docker's default bridge network: containers
# get no network unless given one explicitly (agentd runs them --network none).
#
# Environment:
#   DOCKER_HOST                 respected. A tcp:// or ssh:// (remote) engine is
#                               only checked, never started. A unix:// socket
#                               other than the default is where a local dockerd
#                               is told to listen.
#   AGENTD_DOCKER_WAIT          seconds to wait for the engine (default 60).
#   AGENTD_DOCKERD_LOG          log file path for a dockerd started here.
#   AGENTD_DOCKERD_EXTRA_ARGS   extra arguments for dockerd (word-split).
#   AGENTD_DOCKER_USE_SYSTEMD=1 when systemd is PID 1, try `systemctl start
#                               docker` first. Off by default because the
#                               packaged unit uses the default bridge (docker0).
set -euo pipefail

log() { printf 'ensure-docker: %s\n' "$*" >&2; }
die() { printf 'ensure-docker: ERROR: %s\n' "$*" >&2; exit 1; }

WAIT_SECS="${AGENTD_DOCKER_WAIT:-60}"

# Does the server side of `docker version` answer?
engine_answers() {
    command -v docker >/dev/null 2>&1 || return 1
    local v
    v="$(timeout 15 docker version --format '{{.Server.Version}}' 2>/dev/null)" || return 1
    [ -n "$v" ]
}

report_ok() {
    local sv api
    sv="$(timeout 15 docker version --format '{{.Server.Version}}' 2>/dev/null || true)"
    api="$(timeout 15 docker version --format '{{.Server.APIVersion}}' 2>/dev/null || true)"
    log "docker engine answers (server ${sv:-?}, API ${api:-?}${DOCKER_HOST:+, DOCKER_HOST=$DOCKER_HOST})"
}

if engine_answers; then
    report_ok
    exit 0
fi

# ---------------------------------------------------------------- remote host
SOCKET=""
case "${DOCKER_HOST:-}" in
    "")
        SOCKET=/var/run/docker.sock ;;
    unix://*)
        SOCKET="${DOCKER_HOST#unix://}" ;;
    *)
        die "DOCKER_HOST=$DOCKER_HOST does not answer 'docker version'; it is not a local unix socket, so it will not be started from here"
        ;;
esac

# ------------------------------------------------------------ privileges
SUDO=()
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        SUDO=(sudo -n)
    else
        die "no docker engine answers and starting one needs root (run as root, or give passwordless sudo)"
    fi
fi

# -------------------------------------------------------------- install
APT_UPDATED=0
# fuser (psmisc) is used to wait for a busy apt lock; without it, do not wait.
command -v fuser >/dev/null 2>&1 || fuser() { return 1; }
apt_install() {
    command -v apt-get >/dev/null 2>&1 || die "apt-get not found; install $* by hand"
    # Wait for another apt/dpkg run rather than fighting over the lock.
    local i
    for i in $(seq 1 120); do
        if ! fuser /var/lib/dpkg/lock-frontend /var/lib/dpkg/lock /var/lib/apt/lists/lock >/dev/null 2>&1; then
            break
        fi
        [ "$i" -eq 1 ] && log "waiting for another apt/dpkg process to finish..."
        sleep 5
    done
    if [ "$APT_UPDATED" -eq 0 ]; then
        log "apt-get update"
        "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q \
            || die "apt-get update failed"
        APT_UPDATED=1
    fi
    # Keep the package's init script from starting dockerd with the default
    # bridge during installation (standard Debian policy-rc.d mechanism).
    local policy=/usr/sbin/policy-rc.d made_policy=0
    if [ ! -e "$policy" ]; then
        "${SUDO[@]}" sh -c "printf '#!/bin/sh\nexit 101\n' > $policy && chmod 755 $policy"
        made_policy=1
    fi
    log "apt-get install -y $*"
    local rc=0
    "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" || rc=$?
    if [ "$made_policy" -eq 1 ]; then "${SUDO[@]}" rm -f "$policy"; fi
    [ "$rc" -eq 0 ] || die "apt-get install $* failed (exit $rc)"
}

if ! command -v dockerd >/dev/null 2>&1 && [ ! -x /usr/sbin/dockerd ]; then
    apt_install docker.io
fi
DOCKERD="$(command -v dockerd 2>/dev/null || echo /usr/sbin/dockerd)"
[ -x "$DOCKERD" ] || die "dockerd not found after installing docker.io"
command -v docker >/dev/null 2>&1 || die "docker CLI not found (install docker.io or docker-ce-cli)"

# ---------------------------------------------------------------- wait helper
wait_for_engine() {
    local secs="$1" i
    for ((i = 0; i < secs; i++)); do
        if engine_answers; then return 0; fi
        sleep 1
    done
    return 1
}

# A dockerd that is already running (e.g. still starting up) - just wait for it.
dockerd_running() {
    local pidfile=/var/run/docker.pid pid
    if [ -r "$pidfile" ]; then
        pid="$(cat "$pidfile" 2>/dev/null || true)"
        if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null \
            && [ "$(cat /proc/"$pid"/comm 2>/dev/null)" = dockerd ]; then
            return 0
        fi
    fi
    return 1
}

# -------------------------------------------------------- systemd (opt-in)
if [ "${AGENTD_DOCKER_USE_SYSTEMD:-0}" = 1 ] \
    && [ "$(cat /proc/1/comm 2>/dev/null)" = systemd ] && command -v systemctl >/dev/null 2>&1; then
    log "systemd is PID 1; trying 'systemctl start docker'"
    if "${SUDO[@]}" systemctl start docker 2>&1 && wait_for_engine "$WAIT_SECS"; then
        report_ok
        exit 0
    fi
    log "systemctl start docker did not give an answering engine; launching dockerd directly"
fi

# ------------------------------------------------------------ start dockerd
if dockerd_running; then
    log "dockerd (pid $(cat /var/run/docker.pid)) is already running; waiting for it to answer"
    if wait_for_engine "$WAIT_SECS"; then report_ok; exit 0; fi
    die "dockerd pid $(cat /var/run/docker.pid) runs but does not answer on ${SOCKET} within ${WAIT_SECS}s (is it listening elsewhere? check DOCKER_HOST)"
fi

LOGFILE="${AGENTD_DOCKERD_LOG:-}"
if [ -z "$LOGFILE" ]; then
    if "${SUDO[@]}" sh -c 'touch /var/log/agentd-dockerd.log' 2>/dev/null; then
        LOGFILE=/var/log/agentd-dockerd.log
    else
        LOGFILE="${TMPDIR:-/tmp}/agentd-dockerd.log"
    fi
fi

ARGS=(--bridge=none --iptables=false --ip6tables=false)
if [ -n "${DOCKER_HOST:-}" ]; then
    ARGS+=(-H "unix://${SOCKET}")
fi
if [ -n "${AGENTD_DOCKERD_EXTRA_ARGS:-}" ]; then
    # shellcheck disable=SC2206
    ARGS+=(${AGENTD_DOCKERD_EXTRA_ARGS})
fi

log "starting: $DOCKERD ${ARGS[*]} (log: $LOGFILE)"
{ printf '\n=== %s ensure-docker: starting %s %s\n' "$(date -u +%FT%TZ)" "$DOCKERD" "${ARGS[*]}"; } \
    | "${SUDO[@]}" tee -a "$LOGFILE" >/dev/null
# setsid: own session/process group, so the engine outlives this script and
# whatever job-control group ran it; stdin from /dev/null so it holds no tty.
"${SUDO[@]}" setsid nohup "$DOCKERD" "${ARGS[@]}" </dev/null >>"$LOGFILE" 2>&1 &
DPID=$!

for ((i = 0; i < WAIT_SECS; i++)); do
    if engine_answers; then
        report_ok
        exit 0
    fi
    # The launcher (setsid/nohup exec into dockerd) died: no point waiting.
    if ! kill -0 "$DPID" 2>/dev/null && ! dockerd_running; then
        break
    fi
    sleep 1
done

log "dockerd did not answer within ${WAIT_SECS}s. Last lines of $LOGFILE:"
tail -n 40 "$LOGFILE" >&2 || true
die "could not start a docker engine (see $LOGFILE)"
