#!/usr/bin/env bash
# install.sh - one command from a checkout to a working agentd.
#
# Builds agentd and its bundled plugins (release), installs the binary and
# the plugins, makes sure a Docker engine answers and the sandbox images
# exist, writes a commented starter configuration if there is none (an
# existing one is never touched), and with --service installs and starts
# the systemd units. Idempotent: run it again after `git pull` to upgrade.
#
#   scripts/install.sh                    # as root: system layout; else your own
#   scripts/install.sh --service          # ... and start it under systemd
#   OPENAI_BASE_URL=http://127.0.0.1:11434/v1 scripts/install.sh --model qwen2.5:7b
#   sudo env OPENAI_API_KEY=sk-... scripts/install.sh --service   # sudo drops them otherwise
#
# Layout (system: as root, or --system; user: otherwise, or --user):
#   binary          /usr/local/bin/agentd          ~/.local/bin/agentd         (--prefix)
#   bundled plugins /usr/local/lib/agentd/plugins  ~/.local/lib/agentd/plugins (beside the binary)
#   config          /etc/agentd/agentd.toml        ~/.config/agentd/agentd.toml (--config)
#   state, plugins  /var/lib/agentd[/plugins]      ~/.local/state/agentd[/plugins] (--state-dir)
# The bundled plugins also go into the daemon's plugins folder as
# `agentd paths --config FILE` reports it: an existing configuration's
# [daemon] plugins_dir or state_dir wins over the table above.
#
# Options:
#   --prefix DIR      where bin/ and lib/ go
#   --config FILE     the configuration file to write if missing
#   --state-dir DIR   the daemon's state folder (written into a new config);
#                     refused with a system --service, whose unit may write
#                     only /var/lib/agentd
#   --system|--user   choose the layout instead of going by the user id
#   --service         install and start the systemd units (system, or
#                     `systemctl --user` for a user install)
#   --model NAME      the model for a new config (default: the server's
#                     usual one for OpenAI, else left for you to set)
#   --binary FILE     install this agentd instead of building one (a
#                     packager's own build, or the test suite's)
#   --no-docker       do not install or start Docker, nor build the images
# Environment read for a new config: OPENAI_BASE_URL (the endpoint) and
# OPENAI_API_KEY (stored in a 0600 file beside the config, never in it).
set -euo pipefail
# Before the arguments are shifted away and before the cd: the hints and
# usage below need both.
args_shown=
[ $# -eq 0 ] || args_shown="$(printf ' %q' "$@")"
caller_pwd="$(pwd)"
script="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
cd "$(dirname "$script")/.."
repo="$(pwd)"

say() { printf 'install: %s\n' "$*"; }
die() { printf 'install: ERROR: %s\n' "$*" >&2; exit 1; }
# toml_str VALUE: VALUE as a TOML basic string ("...", \ and " escaped).
toml_str() { local v="${1//\\/\\\\}"; v="${v//\"/\\\"}"; printf '"%s"' "$v"; }
# sd_exe PATH, sd_arg VALUE: the program and an argument of a systemd
# Exec*= line, double-quoted with % (specifiers) doubled. An argument also
# gets \ and " escaped and $ (variables) doubled; the program is taken as
# it is, and systemd refuses one with a quote or a backslash (checked
# before anything is installed).
sd_exe() { printf '"%s"' "${1//%/%%}"; }
sd_arg() {
  local v="${1//\\/\\\\}"; v="${v//\"/\\\"}"; v="${v//%/%%}"; v="${v//\$/\$\$}"
  printf '"%s"' "$v"
}
usage() { sed -n '2,/^set -euo/p' "$script" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }

mode=
prefix=
config=
state_dir=
service=
model=
binary=
docker=1
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix="${2:?--prefix needs a folder}"; shift ;;
    --config) config="${2:?--config needs a file}"; shift ;;
    --state-dir) state_dir="${2:?--state-dir needs a folder}"; shift ;;
    --system) mode=system ;;
    --user) mode=user ;;
    --service) service=1 ;;
    --model) model="${2:?--model needs a name}"; shift ;;
    --binary) binary="${2:?--binary needs a file}"; shift ;;
    --no-docker) docker= ;;
    -h|--help) usage ;;
    *) printf 'install: unknown option %s\n' "$1" >&2; usage ;;
  esac
  shift
done

# Paths given relative to where the script was called from.
abs() { case "$1" in ""|/*) printf '%s' "$1" ;; *) printf '%s/%s' "$caller_pwd" "$1" ;; esac; }
prefix="$(abs "$prefix")"; config="$(abs "$config")"
state_dir="$(abs "$state_dir")"; binary="$(abs "$binary")"

if [ -z "$mode" ]; then
  if [ "$(id -u)" = 0 ]; then mode=system; else mode=user; fi
fi
# Refused before anything is built or installed. The system unit runs the
# daemon with ProtectSystem=strict and StateDirectory=agentd: the only
# folder it can write is /var/lib/agentd, made and owned for it by systemd.
# Any other state folder would be read-only to it, and root's.
if [ "$mode" = system ] && [ -n "$service" ] && [ -n "$state_dir" ]; then
  if [ "$(realpath -ms -- "$state_dir")" != /var/lib/agentd ]; then
    die "--state-dir $state_dir cannot be used with a system --service: the unit runs agentd with ProtectSystem=strict and StateDirectory=agentd, so /var/lib/agentd is the only folder it may write, and $state_dir would be read-only to it (and root's). Drop --state-dir (the state goes to /var/lib/agentd), or install without --service and write your own unit (ReadWritePaths=, the folder owned by the daemon's user)."
  fi
fi
if [ "$mode" = system ] && [ "$(id -u)" != 0 ]; then
  die "a system install needs root: sudo $(printf '%q' "$script")$args_shown"
fi
# --service needs a service manager to talk to; find out before changing
# anything.
if [ -n "$service" ]; then
  command -v systemctl >/dev/null 2>&1 || die "--service needs systemd (systemctl is missing)"
  if [ "$mode" = system ]; then
    [ -d /run/systemd/system ] ||
      die "--service needs systemd running as the init system (/run/systemd/system is missing): install without --service and start agentd yourself"
  elif ! systemctl --user show-environment >/dev/null 2>&1; then
    die "systemctl --user cannot reach your user's service manager (no user bus: e.g. a shell from 'sudo su $(id -un)', or ssh without lingering). Run 'loginctl enable-linger $(id -un)' and log in again through a real session (ssh or a console login), or set XDG_RUNTIME_DIR=/run/user/$(id -u) if that session exists; or install without --service"
  fi
fi
if [ "$mode" = system ]; then
  prefix="${prefix:-/usr/local}"
  config="${config:-/etc/agentd/agentd.toml}"
  default_state=/var/lib/agentd
else
  prefix="${prefix:-$HOME/.local}"
  config="${config:-${XDG_CONFIG_HOME:-$HOME/.config}/agentd/agentd.toml}"
  default_state="${XDG_STATE_HOME:-$HOME/.local/state}/agentd"
fi
bin_dir="$prefix/bin"
bundle_dir="$prefix/lib/agentd/plugins"
config_dir="$(dirname "$config")"
if [ -n "$service" ]; then
  case "$bin_dir" in
    *[\"\'\\]*) die "systemd refuses a program path with a quote or a backslash in it ($bin_dir/agentd): choose another --prefix" ;;
  esac
fi
made_config_dir=
did=()

# --- build ---------------------------------------------------------------
# Under sudo the build is the invoking user's when the checkout is theirs:
# with their toolchain (sudo's secure_path hides ~/.cargo/bin, and root
# running their rustup would leave root's files in their home), and
# target/ stays theirs instead of root's. Only installing is root's.
build_user=
if [ "$(id -u)" = 0 ] && [ -n "${SUDO_USER:-}" ] && [ "$SUDO_USER" != root ] &&
   [ "$(stat -c %u "$repo")" = "$(id -u "$SUDO_USER" 2>/dev/null)" ]; then
  build_user="$SUDO_USER"
  sudo_home="$(getent passwd "$SUDO_USER" | cut -d: -f6)"
  if [ -n "$sudo_home" ] && [ -x "$sudo_home/.cargo/bin/cargo" ]; then
    PATH="$sudo_home/.cargo/bin:$PATH"
  fi
  built=(plugins/target)
  [ -n "$binary" ] || built+=(target)
  for t in "${built[@]}"; do
    if [ -e "$t" ] && [ -n "$(find "$t" ! -user "$build_user" -print -quit)" ]; then
      die "$repo/$t holds files that are not $build_user's (an earlier install built as root); the build runs as $build_user: sudo chown -R $build_user: $repo/$t, then run this again"
    fi
  done
fi
as_builder() { # as_builder COMMAND...: COMMAND as the build user, with this PATH
  if [ -z "$build_user" ]; then
    "$@"
  elif command -v runuser >/dev/null 2>&1; then
    runuser -u "$build_user" -- env PATH="$PATH" "$@"
  else
    sudo -u "$build_user" -H env PATH="$PATH" "$@"
  fi
}
if ! as_builder sh -c 'command -v cargo' >/dev/null 2>&1; then
  if [ -n "${SUDO_USER:-}" ] && [ -z "$build_user" ]; then
    die "cargo is missing from root's PATH (under sudo, $SUDO_USER's ~/.cargo/bin is used only to build in a checkout of theirs, and $repo is not): install Rust with https://rustup.rs (rustup), or build in your own checkout, then run this again"
  fi
  die "cargo is missing${build_user:+ for $build_user}: install Rust with https://rustup.rs (rustup), then run this again"
fi
if ! as_builder rustup target list --installed 2>/dev/null | grep -qx wasm32-wasip2; then
  say "adding the wasm32-wasip2 target"
  as_builder rustup target add wasm32-wasip2
fi
if [ -z "$binary" ]; then
  say "building agentd${build_user:+ as $build_user} (release; about 8 minutes on 2 cores the first time)"
  as_builder cargo build --release --locked --bin agentd
  binary=target/release/agentd
fi
[ -x "$binary" ] || die "$binary is not an executable"
say "building the bundled plugins${build_user:+ as $build_user}"
as_builder scripts/build-plugins.sh --bundled >/dev/null

# --- install -------------------------------------------------------------
# Copy, then rename over: a running daemon (or a shell running agentd)
# keeps the old file and never sees half a new one.
put() { # put MODE SOURCE DEST
  install -m "$1" "$2" "$3.installing"
  mv -f "$3.installing" "$3"
}
mkdir -p "$bin_dir" "$bundle_dir"
put 0755 "$binary" "$bin_dir/agentd"
did+=("installed $bin_dir/agentd")
# The units' Documentation= points here.
install -d "$prefix/share/doc/agentd"
put 0644 README.md "$prefix/share/doc/agentd/README.md"
for wasm in $(scripts/build-plugins.sh --list-bundled); do
  put 0644 "plugins/target/wasm32-wasip2/release/$wasm.wasm" "$bundle_dir/$wasm.wasm"
done
did+=("installed the bundled plugins into $bundle_dir")

# --- the starter configuration -------------------------------------------
key_file="$config_dir/llm-api-key"
if [ -e "$config" ]; then
  did+=("kept the existing configuration $config")
else
  # A folder that exists (say --config /tmp/agentd.toml) is someone else's:
  # its mode and group stay as they are.
  if [ ! -d "$config_dir" ]; then
    install -d -m 0750 "$config_dir"
    made_config_dir=1
  fi
  base_url="${OPENAI_BASE_URL:-}"
  if [ -z "$base_url" ] && [ -n "${OPENAI_API_KEY:-}" ]; then
    base_url=https://api.openai.com/v1
  fi
  if [ -z "$model" ] && [ "$base_url" = https://api.openai.com/v1 ]; then
    model=gpt-4o
  fi
  if [ -n "${OPENAI_API_KEY:-}" ] && [ ! -e "$key_file" ]; then
    (umask 077 && printf '%s\n' "$OPENAI_API_KEY" >"$key_file")
    did+=("wrote the API key to $key_file (mode 0600)")
  fi
  line() { # line VALUE TEXT: TEXT, commented out when VALUE is empty
    if [ -n "$1" ]; then printf '%s\n' "$2"; else printf '# %s\n' "$2"; fi
  }
  tmp="$config.installing"
  {
    echo "# agentd's configuration, written by scripts/install.sh on $(date -u +%Y-%m-%d)."
    echo "# Every key is in README.md, \"Configuration\". Check the setup with: agentd doctor"
    echo "# install.sh never overwrites this file."
    echo
    echo "[llm]"
    echo "# The OpenAI-compatible endpoint. Until one is set, runs end at once"
    echo "# with these examples. OpenAI: https://api.openai.com/v1 (with a key);"
    echo "# Ollama: http://127.0.0.1:11434/v1; llama.cpp's llama-server:"
    echo "# http://127.0.0.1:8080/v1."
    line "$base_url" "base_url = $(toml_str "${base_url:-http://127.0.0.1:11434/v1}")"
    line "$model" "model = $(toml_str "${model:-qwen2.5:7b}")"
    line "$([ -e "$key_file" ] && echo y)" 'api_key_file = "llm-api-key"   # beside this file, or a systemd credential'
    echo
    echo "[daemon]"
    line "$state_dir" "state_dir = $(toml_str "${state_dir:-$default_state}")"
    if [ "$mode" = system ]; then
      # The group exists once --service has made it; naming one that does
      # not exist would stop the daemon from starting.
      line "$service" 'socket_group = "agentd-users"   # who may use the CLI (see README, "Running as a service")'
    fi
    echo "# max_concurrent_runs = 64"
    echo
    echo "[sandbox]"
    echo "# image = \"agentd-sandbox:latest\"   # built by scripts/build-images.sh"
  } >"$tmp"
  chmod 0640 "$tmp"
  mv -f "$tmp" "$config"
  did+=("wrote a starter configuration $config")
  if [ -n "$base_url" ] && [ -z "$model" ]; then
    did+=("warning: no --model for $base_url: the model line in $config is left commented out, so agentd asks that server for gpt-4o; set [llm] model there to one it serves (for Ollama: ollama list)")
  fi
  if [ "$(id -u)" = 0 ] && [ -n "${SUDO_USER:-}" ] && [ -z "${OPENAI_API_KEY:-}${OPENAI_BASE_URL:-}" ]; then
    did+=("note: sudo drops OPENAI_API_KEY and OPENAI_BASE_URL from the environment (neither reached this script), so $config names no endpoint: edit its [llm], or delete it and run again with them passed through: sudo env OPENAI_API_KEY=sk-... $(printf '%q' "$script")$args_shown")
  fi
fi

# --- where the daemon keeps things --------------------------------------
# Asked of the installed agentd, from the configuration as it now is (an
# existing one may set [daemon] plugins_dir or state_dir): one NAME=PATH
# line each for config, state_dir, plugins_dir and socket.
paths_err="$(mktemp)"
if ! paths_out="$("$bin_dir/agentd" paths --config "$config" 2>"$paths_err")"; then
  msg="$(cat "$paths_err")"
  rm -f "$paths_err"
  die "$config does not load (fix it, then run this again); $bin_dir/agentd paths says: $msg"
fi
rm -f "$paths_err"
daemon_state=
plugins_dir=
while IFS='=' read -r k v; do
  case "$k" in
    state_dir) daemon_state="$v" ;;
    plugins_dir) plugins_dir="$v" ;;
  esac
done <<<"$paths_out"
if [ -z "$plugins_dir" ] || [ -z "$daemon_state" ]; then
  die "agentd paths --config $config did not name a plugins_dir and a state_dir: is $bin_dir/agentd this version's?"
fi
if [ "$mode" = system ] && [ -n "$service" ] && [ "${daemon_state%/}" != /var/lib/agentd ]; then
  did+=("warning: $config sets [daemon] state_dir = $daemon_state, which the service cannot write (ProtectSystem=strict): remove that line to use /var/lib/agentd, or give the unit ReadWritePaths=$daemon_state in a drop-in (systemctl edit agentd) and chown the folder to agentd")
fi

# The daemon's own plugins folder gets the bundled plugins too (and a
# daemon started on an empty one would copy them in itself). Bundled files
# are replaced by this version's; plugins of other names are the
# operator's and stay.
install -d -m 0755 "$plugins_dir"
for wasm in $(scripts/build-plugins.sh --list-bundled); do
  put 0644 "$bundle_dir/$wasm.wasm" "$plugins_dir/$wasm.wasm"
done
did+=("installed the bundled plugins into $plugins_dir")

# --- docker and the sandbox images ---------------------------------------
if [ -n "$docker" ]; then
  if [ "$(id -u)" = 0 ] || docker version >/dev/null 2>&1; then
    if [ "$mode" = system ] && [ -n "$service" ]; then
      # The service wants docker.service (After=, Wants=): use that engine
      # rather than start a second, one-off dockerd beside it.
      AGENTD_DOCKER_USE_SYSTEMD=1 scripts/ensure-docker.sh
    else
      scripts/ensure-docker.sh
    fi
    scripts/build-images.sh --no-ensure
    did+=("checked the Docker engine and the sandbox images")
  else
    say "warning: this user cannot reach a Docker engine; as root run: $repo/scripts/ensure-docker.sh && $repo/scripts/build-images.sh, and add $(id -un) to the docker group"
  fi
fi

# --- systemd -------------------------------------------------------------
unit_exec="$(sd_exe "$bin_dir/agentd") serve --config $(sd_arg "$config")"
# render_unit SOURCE DEST: SOURCE with this install's ExecStart= and, when
# it has one, LoadCredential=llm-api-key: (commented out without a key
# file); written whole, then renamed over DEST. No sed: the paths may hold
# any character.
render_unit() {
  local l
  while IFS= read -r l || [ -n "$l" ]; do
    case "$l" in
      ExecStart=*) printf 'ExecStart=%s\n' "$unit_exec" ;;
      LoadCredential=llm-api-key:*)
        # Specifiers are expanded here too; the rest of the line is the path.
        if [ -e "$key_file" ]; then
          printf 'LoadCredential=llm-api-key:%s\n' "${key_file//%/%%}"
        else
          printf '#%s\n' "$l"
        fi ;;
      SupplementaryGroups=docker)
        # A group that does not exist stops the unit from starting.
        if getent group docker >/dev/null; then
          printf '%s\n' "$l"
        else
          printf '# Left out by install.sh: there was no docker group. Run it again\n'
          printf '# once Docker is installed.\n#%s\n' "$l"
        fi ;;
      *) printf '%s\n' "$l" ;;
    esac
  done <"$1" >"$2.installing"
  chmod 0644 "$2.installing"
  mv -f "$2.installing" "$2"
}
if [ -n "$service" ]; then
  if [ "$mode" = system ]; then
    getent group agentd-users >/dev/null || groupadd --system agentd-users
    getent passwd agentd >/dev/null ||
      useradd --system --user-group --home-dir /var/lib/agentd --shell /usr/sbin/nologin agentd
    if getent group docker >/dev/null; then
      usermod -aG docker agentd
    else
      did+=("warning: there is no docker group: the unit is installed without SupplementaryGroups=docker, so the daemon cannot reach a Docker engine's socket; once Docker is installed, run this again")
    fi
    # The daemon reads the configuration through its group; the folder only
    # when this script made it, or it is the usual /etc/agentd.
    chgrp agentd "$config"
    if [ -n "$made_config_dir" ] || [ "$config_dir" = /etc/agentd ]; then
      chgrp agentd "$config_dir"
    fi
    if [ -e "$key_file" ]; then
      chown root:root "$key_file" && chmod 0600 "$key_file"
    fi
    # The unit passes the key as a credential only when there is one.
    render_unit dist/systemd/agentd.service /etc/systemd/system/agentd.service
    install -m 0644 dist/systemd/agentd.socket /etc/systemd/system/agentd.socket
    # An upgrade: a daemon already running would go on with the old binary
    # and units until restarted. try-restart restarts it only if it runs.
    systemctl daemon-reload
    systemctl enable agentd.socket agentd.service
    systemctl try-restart agentd.service
    systemctl start agentd.socket agentd.service
    if [ -n "${SUDO_USER:-}" ] && [ "$SUDO_USER" != root ]; then
      usermod -aG agentd-users "$SUDO_USER"
      did+=("added $SUDO_USER to agentd-users (log in again to use the CLI without sudo)")
    fi
    did+=("installed and (re)started agentd.socket and agentd.service")
    if ! grep -q '^socket_group *= *"agentd-users"' "$config"; then
      did+=("note: $config does not set [daemon] socket_group = \"agentd-users\": until it does, only root and the agentd user may use the socket")
    fi
  else
    units="${XDG_CONFIG_HOME:-$HOME/.config}/systemd/user"
    mkdir -p "$units"
    render_unit dist/systemd/user/agentd.service "$units/agentd.service"
    systemctl --user daemon-reload
    systemctl --user enable agentd.service
    systemctl --user try-restart agentd.service
    systemctl --user start agentd.service
    did+=("installed and (re)started the user unit $units/agentd.service")
  fi
fi

# --- what was done, and what next ----------------------------------------
for d in "${did[@]}"; do say "$d"; done
case ":$PATH:" in
  *":$bin_dir:"*) agentd="agentd" ;;
  *) agentd="$bin_dir/agentd"; say "note: $bin_dir is not on PATH" ;;
esac
echo
if [ -z "$service" ]; then
  echo "next: start the daemon ($agentd serve --config $(printf '%q' "$config") &), or install it as a service with --service; then"
fi
echo "next: $agentd doctor && $agentd run manus \"Write fizzbuzz.py, run it, show the output.\""
