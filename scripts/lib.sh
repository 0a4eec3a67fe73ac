# shellcheck shell=bash
# Functions shared by the scripts that run local servers (services.sh, galera.sh,
# redis-cluster.sh) and install tools (prometheus.sh, chromium.sh). Set NAME (the log prefix)
# and START_TIMEOUT (seconds a server has to start or stop) before calling them.

# The servers listen on loopback only.
HOST=127.0.0.1
# mariadbd, mariadb-install-db and runuser live in /usr/sbin, not always on PATH.
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

log() { printf '%s: %s\n' "$NAME" "$*" >&2; }
die() { printf '%s: ERROR: %s\n' "$NAME" "$*" >&2; exit 1; }

show_log() { # file
  if [ -s "$1" ]; then
    printf '%s: ---- last lines of %s ----\n' "$NAME" "$1" >&2
    tail -n 40 "$1" >&2
    printf '%s: ----\n' "$NAME" >&2
  fi
}

port_open() { # port
  (exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null
}

# Process exists and is not a zombie (an unreaped, killed server).
alive() { # pid
  local st
  kill -0 "$1" 2>/dev/null || return 1
  st="$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)" || return 0
  [ "$st" != Z ] && [ "$st" != X ]
}

# pid from a pid file if that process is alive and is one of the expected programs (its comm
# starts with one of the names).
live_pid() { # pidfile comm...
  local file="$1" pid comm c
  shift
  [ -s "$file" ] || return 1
  pid="$(tr -dc '0-9' <"$file")"
  [ -n "$pid" ] && alive "$pid" || return 1
  comm="$(cat "/proc/$pid/comm" 2>/dev/null || true)"
  for c in "$@"; do
    case "$comm" in "$c"*) printf '%s\n' "$pid" && return 0 ;; esac
  done
  return 1
}

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"
  elif command -v sudo >/dev/null 2>&1; then sudo "$@"
  else die "need root (or sudo) to run: $*"; fi
}

# SIGTERM, then SIGKILL if the process is still there after START_TIMEOUT seconds.
stop_pid() { # name pid
  local name="$1" pid="$2" i
  log "stopping $name (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < START_TIMEOUT * 4; i++)); do
    alive "$pid" || break
    sleep 0.25
  done
  if alive "$pid"; then
    log "$name (pid $pid) did not exit in ${START_TIMEOUT}s; sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    sleep 0.5
  fi
}

# Installs Debian's package for a command unless the command is on PATH, without recommends
# and keeping existing config files; apt-get update only if the first install fails. Prints
# the command's path.
apt_install() { # command [package]
  local cmd="$1" pkg="${2:-$1}" aptlog="/tmp/paygw-$1-apt.log"
  if command -v "$cmd" >/dev/null 2>&1; then command -v "$cmd"; return 0; fi
  command -v apt-get >/dev/null 2>&1 || die "$cmd is missing and apt-get is not available; install $pkg by hand"
  _apt_get_install() {
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "$pkg"
  }
  log "apt-get install $pkg"
  if ! _apt_get_install >"$aptlog" 2>&1; then
    log "install failed; apt-get update, then again"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null || die "apt-get update failed"
    _apt_get_install >"$aptlog" 2>&1 || { tail -n 40 "$aptlog" >&2; die "apt-get install $pkg failed"; }
  fi
  command -v "$cmd" >/dev/null 2>&1 || die "installed, but $cmd is not on PATH"
  command -v "$cmd"
}
