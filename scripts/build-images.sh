#!/usr/bin/env bash
# build-images.sh - build agentd's sandbox images locally from Debian packages.
#
# Nothing is pulled from an image registry:
#   agentd-sandbox-tiny:latest  FROM scratch + Debian's static busybox (with
#                               applet symlinks), /tmp, /workspace, passwd/group.
#                               A few MB; used by the tests.
#
# Both images have the user agentd runs commands as by default
# ([sandbox] user = "sandbox"): sandbox, uid 1000, gid 1000, home /workspace.
# An image that already exists but lacks it gets it as a new layer (its
# /etc/passwd and /etc/group plus one line each; nothing else changes).
#   agentd-sandbox:latest       Debian (bookworm) minbase root filesystem made
#                               with debootstrap, plus bash, python3, procps.
#                               The default image. Takes a few minutes.
#
# Usage: scripts/build-images.sh [--tiny-only | --default-only] [--force] [--no-ensure]
#   --tiny-only     build only agentd-sandbox-tiny:latest
#   --default-only  build only agentd-sandbox:latest (alias: --full-only)
#   --force         rebuild even when the image already exists
#   --no-ensure     do not run scripts/ensure-docker.sh first; just require
#                   that `docker version` answers
#
# Environment:
#   AGENTD_TINY_IMAGE      tag of the tiny image   (default agentd-sandbox-tiny:latest)
#   AGENTD_DEFAULT_IMAGE   tag of the default image (default agentd-sandbox:latest)
#   AGENTD_DEB_SUITE       Debian suite for debootstrap (default bookworm)
#   AGENTD_DEB_MIRROR      Debian mirror for debootstrap (default: the one apt
#                          uses, read from /etc/apt/sources.list{,.d/*})
#   AGENTD_DEB_INCLUDE     packages added by debootstrap
#                          (default python3-minimal,python3,procps)
set -euo pipefail

log() { printf 'build-images: %s\n' "$*" >&2; }
die() { printf 'build-images: ERROR: %s\n' "$*" >&2; exit 1; }

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TINY_IMAGE="${AGENTD_TINY_IMAGE:-agentd-sandbox-tiny:latest}"
DEFAULT_IMAGE="${AGENTD_DEFAULT_IMAGE:-agentd-sandbox:latest}"
SUITE="${AGENTD_DEB_SUITE:-bookworm}"
INCLUDE="${AGENTD_DEB_INCLUDE:-python3-minimal,python3,procps}"

BUILD_TINY=1
BUILD_DEFAULT=1
FORCE=0
ENSURE=1
usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
    case "$1" in
        --tiny-only) BUILD_TINY=1; BUILD_DEFAULT=0 ;;
        --default-only | --full-only) BUILD_TINY=0; BUILD_DEFAULT=1 ;;
        --force) FORCE=1 ;;
        --no-ensure) ENSURE=0 ;;
        -h | --help) usage; exit 0 ;;
        *) usage >&2; die "unknown option: $1" ;;
    esac
    shift
done

# ------------------------------------------------------------------ helpers
SUDO=()
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        SUDO=(sudo -n)
    fi
fi
as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"
    elif [ ${#SUDO[@]} -gt 0 ]; then "${SUDO[@]}" "$@"
    else die "this step needs root: $*"
    fi
}

TMP_DIRS=()
# Unmount anything debootstrap may have left mounted below a temp dir before
# deleting it (never rm -rf through a live /proc or /dev mount).
cleanup() {
    local d m
    for d in "${TMP_DIRS[@]+"${TMP_DIRS[@]}"}"; do
        [ -n "$d" ] && [ -d "$d" ] || continue
        # deepest mount points first
        while read -r m; do
            [ -n "$m" ] || continue
            as_root umount -l "$m" 2>/dev/null || true
        done < <(awk -v p="$d/" 'index($2, p) == 1 { print $2 }' /proc/mounts | sort -r)
        if awk -v p="$d/" 'index($2, p) == 1 { f = 1 } END { exit !f }' /proc/mounts; then
            log "WARNING: mounts remain below $d; not deleting it"
            continue
        fi
        as_root rm -rf --one-file-system "$d" || log "WARNING: could not remove $d"
    done
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# make_tmp NAME: create a temp dir, registered for cleanup, in $TMP_RET.
# (Not via $(...): a subshell could not register it for cleanup.)
TMP_RET=""
make_tmp() {
    TMP_RET="$(mktemp -d "${TMPDIR:-/tmp}/agentd-$1.XXXXXX")" || die "mktemp failed"
    TMP_DIRS+=("$TMP_RET")
}

image_exists() { docker image inspect "$1" >/dev/null 2>&1; }

image_id() { docker image inspect --format '{{.Id}}' "$1" 2>/dev/null || true; }

# After a --force rebuild, drop the previous image if nothing else uses it
# (it would otherwise linger as <none>:<none>).
remove_old_image() { # remove_old_image <old id> <tag>
    local old="$1" new
    [ -n "$old" ] || return 0
    new="$(image_id "$2")"
    if [ -n "$new" ] && [ "$new" != "$old" ]; then
        docker image rm "$old" >/dev/null 2>&1 || true
    fi
}

image_size() {
    docker image inspect --format '{{.Size}}' "$1" 2>/dev/null \
        | awk '{ printf "%.1f MB", $1 / 1000 / 1000 }'
}

APT_UPDATED=0
apt_update_once() {
    if [ "$APT_UPDATED" -eq 0 ]; then
        log "apt-get update"
        as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q >&2 || die "apt-get update failed"
        APT_UPDATED=1
    fi
}

need_pkg_cmd() { # need_pkg_cmd <command> <debian package>
    command -v "$1" >/dev/null 2>&1 && return 0
    [ -x "/usr/sbin/$1" ] && return 0
    command -v apt-get >/dev/null 2>&1 || die "'$1' is missing; install the Debian package '$2'"
    apt_update_once
    log "installing $2 (for $1)"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$2" >&2 \
        || die "apt-get install $2 failed"
}

# ------------------------------------------------------------------ engine
if [ "$ENSURE" -eq 1 ] && [ -x "$SCRIPT_DIR/ensure-docker.sh" ]; then
    "$SCRIPT_DIR/ensure-docker.sh" || die "no docker engine (scripts/ensure-docker.sh failed)"
fi
command -v docker >/dev/null 2>&1 || die "docker CLI not found; run scripts/ensure-docker.sh"
docker version --format '{{.Server.Version}}' >/dev/null 2>&1 \
    || die "the docker engine does not answer 'docker version'; run scripts/ensure-docker.sh"

# ============================================================ tiny image
# Sets BB to a statically linked Debian busybox: the installed busybox-static,
# or one extracted from `apt-get download busybox-static` (host left alone).
BB=""
find_static_busybox() {
    local st
    st="$(dpkg-query -W -f='${Status}' busybox-static 2>/dev/null || true)"
    if [ "$st" = "install ok installed" ] && [ -x /bin/busybox ]; then
        BB=/bin/busybox
        return 0
    fi
    command -v apt-get >/dev/null 2>&1 || die "busybox-static is not installed and apt-get is missing"
    local d deb
    make_tmp busybox; d="$TMP_RET"
    log "busybox-static not installed; fetching it with apt-get download"
    if ! (cd "$d" && apt-get download busybox-static >&2); then
        apt_update_once
        (cd "$d" && apt-get download busybox-static >&2) || die "apt-get download busybox-static failed"
    fi
    deb="$(ls "$d"/busybox-static_*.deb 2>/dev/null | head -n 1)"
    [ -n "$deb" ] || die "busybox-static .deb not found after download"
    dpkg-deb -x "$deb" "$d/root"
    [ -x "$d/root/bin/busybox" ] || die "no bin/busybox in $deb"
    BB="$d/root/bin/busybox"
}

build_tiny() {
    local img="$TINY_IMAGE"
    if image_exists "$img" && [ "$FORCE" -eq 0 ]; then
        log "$img exists ($(image_size "$img")); skipping (use --force to rebuild)"
        return 0
    fi
    local t0=$SECONDS bb ctx root old
    old="$(image_id "$img")"
    find_static_busybox; bb="$BB"
    if ldd "$bb" >/dev/null 2>&1; then
        die "$bb is dynamically linked; a FROM scratch image needs Debian's busybox-static"
    fi

    # Applets the agentd tools rely on.
    local required=(sh timeout tar sleep head cat mkdir ls kill setsid)
    local have missing=() a
    have=" $("$bb" --list | tr '\n' ' ') "
    for a in "${required[@]}"; do
        case "$have" in *" $a "*) ;; *) missing+=("$a") ;; esac
    done
    if [ ${#missing[@]} -gt 0 ]; then
        log "WARNING: busybox ($bb) lacks applets needed by agentd tools: ${missing[*]}"
    else
        log "busybox has all required applets: ${required[*]}"
    fi

    make_tmp tiny; ctx="$TMP_RET"
    root="$ctx/rootfs"
    mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,etc,root,workspace,tmp,var/tmp,home,proc,sys,dev}
    chmod 1777 "$root/tmp" "$root/var/tmp"
    chmod 0700 "$root/root"
    cp "$bb" "$root/bin/busybox"
    chmod 0755 "$root/bin/busybox"

    # Equivalent of `busybox --install -s`: one symlink per applet at its
    # canonical location (--list-full gives e.g. usr/bin/timeout).
    local p n=0
    while read -r p; do
        [ -n "$p" ] || continue
        case "$p" in bin/busybox | linuxrc) continue ;; esac
        mkdir -p "$root/$(dirname "$p")"
        # -L too: the links point at /bin/busybox inside the image, which
        # need not exist on this host, so -e alone sees them as missing.
        [ -e "$root/$p" ] || [ -L "$root/$p" ] || ln -s /bin/busybox "$root/$p"
        n=$((n + 1))
    done < <("$bb" --list-full 2>/dev/null || "$bb" --list | sed 's|^|bin/|')
    [ -e "$root/bin/sh" ] || [ -L "$root/bin/sh" ] || ln -s /bin/busybox "$root/bin/sh"

    cat >"$root/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
sandbox:x:1000:1000:agentd sandbox:/workspace:/bin/sh
EOF
    cat >"$root/etc/group" <<'EOF'
root:x:0:
nobody:x:65534:
nogroup:x:65534:
sandbox:x:1000:
EOF
    chmod 0644 "$root/etc/passwd" "$root/etc/group"

    cat >"$ctx/Dockerfile" <<'EOF'
FROM scratch
COPY rootfs/ /
ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
WORKDIR /workspace
LABEL org.opencontainers.image.title="agentd-sandbox-tiny" \
      org.opencontainers.image.description="agentd test sandbox: FROM scratch + Debian busybox-static"
CMD ["/bin/sh"]
EOF
    log "building $img ($n applet links) from $ctx"
    if ! docker build --pull=false -t "$img" "$ctx" >&2; then
        # Some client/engine pairs have a broken BuildKit path; the classic
        # builder is enough for FROM scratch + COPY.
        log "docker build failed; retrying with the classic builder (DOCKER_BUILDKIT=0)"
        DOCKER_BUILDKIT=0 docker build -t "$img" "$ctx" >&2 || die "docker build of $img failed"
    fi
    remove_old_image "$old" "$img"
    log "built $img ($(image_size "$img")) in $((SECONDS - t0))s"
}

# ========================================================= default image
# The Debian mirror apt already uses (first one carrying the suite), from
# one-line sources.list files or deb822 .sources files.
detect_mirror() {
    local f uri
    local files=()
    [ -f /etc/apt/sources.list ] && files+=(/etc/apt/sources.list)
    for f in /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] && files+=("$f")
    done
    [ ${#files[@]} -gt 0 ] || return 1
    uri="$(awk -v suite="$SUITE" '
        # one-line format: deb [opts] URI suite components...
        FILENAME ~ /\.list$/ && $1 == "deb" {
            i = 2
            if ($i ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
            if ($(i + 1) == suite) { print $i; exit }
            next
        }
        # deb822 format: paragraphs of Types/URIs/Suites
        FILENAME ~ /\.sources$/ {
            if (FNR == 1 || $0 ~ /^[ \t]*$/) { uris = ""; suites = ""; types = ""; enabled = 1 }
            if (tolower($1) == "types:") types = $0
            if (tolower($1) == "uris:") uris = $2
            if (tolower($1) == "enabled:" && tolower($2) == "no") enabled = 0
            if (tolower($1) == "suites:") { suites = " " $0 " " }
            if (uris != "" && suites != "" && types ~ /[ \t]deb([ \t]|$)/ && enabled \
                && index(suites, " " suite " ") > 0) { print uris; exit }
        }
    ' "${files[@]}")"
    [ -n "$uri" ] || return 1
    printf '%s\n' "$uri"
}

build_default() {
    local img="$DEFAULT_IMAGE"
    if image_exists "$img" && [ "$FORCE" -eq 0 ]; then
        log "$img exists ($(image_size "$img")); skipping (use --force to rebuild)"
        return 0
    fi
    [ "$(id -u)" -eq 0 ] || [ ${#SUDO[@]} -gt 0 ] || die "debootstrap needs root (or passwordless sudo)"
    need_pkg_cmd debootstrap debootstrap

    local mirror="${AGENTD_DEB_MIRROR:-}"
    if [ -z "$mirror" ]; then
        mirror="$(detect_mirror)" || die "cannot find a Debian mirror for suite '$SUITE' in /etc/apt/sources.list{,.d/*}; set AGENTD_DEB_MIRROR"
    fi
    # debootstrap fetches with wget, which ignores apt's proxy configuration.
    if [ -z "${http_proxy:-}" ] && command -v apt-config >/dev/null 2>&1; then
        local proxy=""
        eval "$(apt-config shell proxy Acquire::http::Proxy)"
        if [ -n "$proxy" ] && [ "$proxy" != DIRECT ]; then export http_proxy="$proxy"; fi
    fi

    local t0=$SECONDS work root old
    old="$(image_id "$img")"
    make_tmp rootfs; work="$TMP_RET"
    root="$work/root"
    log "debootstrap --variant=minbase --include=$INCLUDE $SUITE $root $mirror (a few minutes)"
    if ! as_root debootstrap --variant=minbase --include="$INCLUDE" \
        "$SUITE" "$root" "$mirror" >"$work/debootstrap.log" 2>&1; then
        tail -n 30 "$work/debootstrap.log" >&2 || true
        [ -f "$root/debootstrap/debootstrap.log" ] && tail -n 30 "$root/debootstrap/debootstrap.log" >&2
        die "debootstrap failed (mirror $mirror)"
    fi
    log "debootstrap done in $((SECONDS - t0))s; trimming the root filesystem"

    # Make sure debootstrap left nothing mounted inside the tree.
    local m
    while read -r m; do as_root umount -l "$m" || true; done \
        < <(awk -v p="$root/" 'index($2, p) == 1 { print $2 }' /proc/mounts | sort -r)

    as_root chroot "$root" /usr/bin/apt-get clean >/dev/null 2>&1 || true
    as_root sh -c "
        set -e
        cd '$root'
        rm -rf var/lib/apt/lists/* var/cache/apt/*.bin var/cache/apt/archives/*.deb \
               var/log/*.log var/log/apt/* tmp/* var/tmp/* debootstrap
        # Docker provides these at run time.
        rm -f etc/hostname etc/resolv.conf etc/hosts
        : > etc/resolv.conf
        find dev -mindepth 1 -delete 2>/dev/null || true
        mkdir -p workspace proc sys dev
        chmod 1777 tmp var/tmp
        grep -q '^sandbox:' etc/group || echo 'sandbox:x:1000:' >> etc/group
        grep -q '^sandbox:' etc/passwd \
            || echo 'sandbox:x:1000:1000:agentd sandbox:/workspace:/bin/bash' >> etc/passwd
    "
    # Sanity: the image must have bash and python3.
    [ -x "$root/bin/bash" ] || die "no /bin/bash in the root filesystem"
    [ -e "$root/usr/bin/python3" ] || die "no /usr/bin/python3 in the root filesystem"

    log "importing into $img"
    as_root tar --numeric-owner --xattrs -C "$root" -c . | docker import \
        -c 'CMD ["/bin/bash"]' \
        -c 'WORKDIR /workspace' \
        -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        -c 'ENV LANG=C.UTF-8' \
        -c "LABEL org.opencontainers.image.title=agentd-sandbox org.opencontainers.image.description=\"agentd sandbox: Debian $SUITE minbase + bash, python3, procps\"" \
        -m "agentd-sandbox: debootstrap $SUITE minbase + $INCLUDE" \
        - "$img" >/dev/null || die "docker import of $img failed"
    remove_old_image "$old" "$img"
    log "built $img ($(image_size "$img")) in $((SECONDS - t0))s"
}

# ================================================== the sandbox user
# ensure_sandbox_user IMAGE SHELL: give an image built before the images had
# the `sandbox` user (uid 1000) that user, as one more layer holding its
# /etc/passwd and /etc/group with a line added. No RUN step: nothing runs
# in the image, so this needs no network and works for FROM scratch too.
ensure_sandbox_user() {
    local img="$1" shell="$2" ctx cid old
    image_exists "$img" || return 0
    make_tmp user; ctx="$TMP_RET"
    cid="$(docker create "$img" /bin/sh)" || die "docker create $img failed"
    if ! docker cp "$cid:/etc/passwd" "$ctx/passwd" >/dev/null \
        || ! docker cp "$cid:/etc/group" "$ctx/group" >/dev/null; then
        docker rm -f "$cid" >/dev/null 2>&1 || true
        die "cannot read /etc/passwd and /etc/group of $img"
    fi
    docker rm -f "$cid" >/dev/null 2>&1 || true
    if grep -q '^sandbox:' "$ctx/passwd"; then
        log "$img has the sandbox user"
        return 0
    fi
    grep -q '^sandbox:' "$ctx/group" || echo 'sandbox:x:1000:' >>"$ctx/group"
    echo "sandbox:x:1000:1000:agentd sandbox:/workspace:$shell" >>"$ctx/passwd"
    chmod 0644 "$ctx/passwd" "$ctx/group"
    printf 'FROM %s\nCOPY passwd group /etc/\n' "$img" >"$ctx/Dockerfile"
    old="$(image_id "$img")"
    log "adding the sandbox user (uid 1000) to $img"
    if ! docker build --pull=false -t "$img" "$ctx" >&2; then
        DOCKER_BUILDKIT=0 docker build -t "$img" "$ctx" >&2 || die "docker build of $img failed"
    fi
    remove_old_image "$old" "$img"
}

# ------------------------------------------------------------------ main
[ "$BUILD_TINY" -eq 1 ] && build_tiny
[ "$BUILD_TINY" -eq 1 ] && ensure_sandbox_user "$TINY_IMAGE" /bin/sh
[ "$BUILD_DEFAULT" -eq 1 ] && build_default
[ "$BUILD_DEFAULT" -eq 1 ] && ensure_sandbox_user "$DEFAULT_IMAGE" /bin/bash
log "done:"
for img in "$TINY_IMAGE" "$DEFAULT_IMAGE"; do
    if image_exists "$img"; then log "  $img  $(image_size "$img")"; fi
done
