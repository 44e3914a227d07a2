#!/usr/bin/env bash
# second-dockerd.sh - a second Docker engine on this machine, for the
# many-engines tests (tests/sandbox_engines.rs) and for trying
# [[sandbox.engines]] by hand.
#
#   scripts/second-dockerd.sh start    start it (idempotent) and load the images
#   scripts/second-dockerd.sh stop     stop it (SIGTERM, then wait; its containers stop too)
#   scripts/second-dockerd.sh status   exit 0 when it answers
#
# It is started the way scripts/ensure-docker.sh starts the first engine
# (--bridge=none --iptables=false, detached with setsid/nohup), with
# everything of its own under $AGENTD_DOCKERD2_DIR: --data-root, --exec-root
# (where dockerd starts its own managed containerd, so it does not share the
# first engine's), --pidfile and the unix socket. Its log is DIR/dockerd.log.
#
# Environment:
#   AGENTD_DOCKERD2_DIR      its folder (default /tmp/agentd-dockerd2). Keep the
#                            path short: unix socket paths are limited to 108 bytes.
#   AGENTD_DOCKERD2_TCP      also listen on tcp://HOST:PORT with --tlsverify (e.g.
#                            127.0.0.1:23760); needs the three files below.
#   AGENTD_DOCKERD2_TLS_DIR  folder with ca.pem, server-cert.pem, server-key.pem.
#   AGENTD_DOCKERD2_IMAGES   images copied from the first engine (default
#                            agentd-sandbox-tiny:latest; space-separated).
#   AGENTD_DOCKER_WAIT       seconds to wait for it to answer (default 60).
set -euo pipefail

log() { printf 'second-dockerd: %s\n' "$*" >&2; }
die() { printf 'second-dockerd: ERROR: %s\n' "$*" >&2; exit 1; }

DIR="${AGENTD_DOCKERD2_DIR:-/tmp/agentd-dockerd2}"
SOCK="$DIR/docker.sock"
PIDFILE="$DIR/dockerd.pid"
LOGFILE="$DIR/dockerd.log"
WAIT_SECS="${AGENTD_DOCKER_WAIT:-60}"
IMAGES="${AGENTD_DOCKERD2_IMAGES:-agentd-sandbox-tiny:latest}"

answers() {
    timeout 10 docker -H "unix://$SOCK" version --format '{{.Server.Version}}' >/dev/null 2>&1
}

running_pid() {
    local pid
    [ -r "$PIDFILE" ] || return 1
    pid="$(cat "$PIDFILE" 2>/dev/null || true)"
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null \
        && [ "$(cat /proc/"$pid"/comm 2>/dev/null)" = dockerd ] || return 1
    printf '%s\n' "$pid"
}

start() {
    [ "$(id -u)" -eq 0 ] || die "starting a dockerd needs root"
    command -v dockerd >/dev/null 2>&1 || die "dockerd not found (scripts/ensure-docker.sh installs it)"
    mkdir -p "$DIR/data" "$DIR/exec"
    if ! answers; then
        if running_pid >/dev/null; then
            log "dockerd (pid $(running_pid)) is starting; waiting for it"
        else
            local args=(--bridge=none --iptables=false --ip6tables=false
                --data-root "$DIR/data" --exec-root "$DIR/exec" --pidfile "$PIDFILE"
                -H "unix://$SOCK")
            if [ -n "${AGENTD_DOCKERD2_TCP:-}" ]; then
                local tls="${AGENTD_DOCKERD2_TLS_DIR:-}"
                [ -n "$tls" ] || die "AGENTD_DOCKERD2_TCP needs AGENTD_DOCKERD2_TLS_DIR"
                for f in ca.pem server-cert.pem server-key.pem; do
                    [ -r "$tls/$f" ] || die "$tls/$f is missing"
                done
                args+=(-H "tcp://${AGENTD_DOCKERD2_TCP}" --tlsverify
                    --tlscacert "$tls/ca.pem" --tlscert "$tls/server-cert.pem"
                    --tlskey "$tls/server-key.pem")
            fi
            log "starting: dockerd ${args[*]} (log: $LOGFILE)"
            setsid nohup dockerd "${args[@]}" </dev/null >>"$LOGFILE" 2>&1 &
        fi
        local i
        for ((i = 0; i < WAIT_SECS; i++)); do
            answers && break
            sleep 1
        done
        if ! answers; then
            tail -n 40 "$LOGFILE" >&2 || true
            die "the second dockerd did not answer on unix://$SOCK within ${WAIT_SECS}s"
        fi
    fi
    for image in $IMAGES; do
        if ! docker -H "unix://$SOCK" image inspect "$image" >/dev/null 2>&1; then
            log "loading $image"
            docker save "$image" | docker -H "unix://$SOCK" load >/dev/null \
                || die "cannot copy $image into the second engine (scripts/build-images.sh builds it)"
        fi
    done
    log "answers on unix://$SOCK${AGENTD_DOCKERD2_TCP:+ and tcp://$AGENTD_DOCKERD2_TCP (TLS)}"
}

stop() {
    local pid i
    pid="$(running_pid)" || { log "not running"; return 0; }
    log "stopping dockerd pid $pid"
    kill -TERM "$pid"
    for ((i = 0; i < 60; i++)); do
        kill -0 "$pid" 2>/dev/null || { log "stopped"; return 0; }
        sleep 1
    done
    die "dockerd pid $pid did not stop within 60s"
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    status) answers ;;
    *) die "usage: $0 start|stop|status" ;;
esac
