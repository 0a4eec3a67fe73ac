#!/usr/bin/env bash
# Local MariaDB + Redis for tests and the demo, without systemd or Docker.
#
#   scripts/services.sh up       start (installing via apt-get if missing)
#   scripts/services.sh down     stop what this script started
#   scripts/services.sh status   show whether both answer
#   scripts/services.sh up mariadb | down mariadb
#                                the MariaDB alone (a test's own server; Redis is left alone)
#
# Ports: MYSQL_PORT (default 3306), REDIS_PORT (default 6379), always on
# 127.0.0.1. MARIADB_BUFFER_POOL (default 2G) sizes InnoDB's buffer pool of a server this
# script starts (6G for the 100 M-row growth bench, whose unique index is 2.9 GiB). A server
# that already answers on a port (MariaDB/MySQL as root without password, Redis with PONG) is
# used as is and never stopped.
# State lives in <repo>/.services/ (git-ignored), one data dir per port.
set -euo pipefail

MYSQL_PORT="${MYSQL_PORT:-3306}"
REDIS_PORT="${REDIS_PORT:-6379}"
MARIADB_BUFFER_POOL="${MARIADB_BUFFER_POOL:-2G}"
START_TIMEOUT="${SERVICES_START_TIMEOUT:-60}"

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
SVC="$REPO/.services"

MY_DATA="$SVC/mariadb-$MYSQL_PORT"
MY_PID="$SVC/mariadb-$MYSQL_PORT.pid"
MY_LOG="$SVC/mariadb-$MYSQL_PORT.log"
MY_SOCK="$SVC/mysqld-$MYSQL_PORT.sock"
if [ "${#MY_SOCK}" -ge 100 ]; then
  # unix socket paths are limited to ~107 bytes; keep it short and per-repo.
  MY_SOCK="/tmp/paygw-$(printf '%s' "$REPO" | sha1sum | cut -c1-12)-$MYSQL_PORT.sock"
fi
MY_MARKER="$MY_DATA/.paygw-initialised"

RD_DIR="$SVC/redis-$REDIS_PORT"
RD_PID="$SVC/redis-$REDIS_PORT.pid"
RD_LOG="$SVC/redis-$REDIS_PORT.log"

NAME=services
# shellcheck source=scripts/lib.sh
source "$REPO/scripts/lib.sh"

mysql_client() {
  if command -v mariadb >/dev/null 2>&1; then echo mariadb
  elif command -v mysql >/dev/null 2>&1; then echo mysql
  else return 1; fi
}

mysql_tcp() { # args...
  "$(mysql_client)" --no-defaults --protocol=TCP -h"$HOST" -P"$MYSQL_PORT" -uroot \
    --connect-timeout=3 "$@"
}

mysql_sock() {
  "$(mysql_client)" --no-defaults --protocol=SOCKET --socket="$MY_SOCK" -uroot \
    --connect-timeout=3 "$@"
}

mysql_ok() { mysql_tcp -N -e 'SELECT 1' >/dev/null 2>&1; }

redis_ok() {
  [ "$(redis-cli -h "$HOST" -p "$REDIS_PORT" ping 2>/dev/null || true)" = PONG ]
}

# ---------------------------------------------------------------- install

APT_UPDATED=

apt_install() { # packages...
  command -v apt-get >/dev/null 2>&1 ||
    die "missing $*, and apt-get is not available; install them by hand"
  local created_policy=
  if [ -z "$APT_UPDATED" ]; then
    log "apt-get update"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null ||
      die "apt-get update failed"
    APT_UPDATED=1
  fi
  # Keep the packages' own init scripts from starting system-wide
  # daemons on the default ports (which would clash with ours).
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    as_root sh -c 'printf "#!/bin/sh\nexit 101\n" >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d'
    created_policy=1
  fi
  log "apt-get install $*"
  local rc=0
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
    --no-install-recommends -o Dpkg::Options::=--force-confdef \
    -o Dpkg::Options::=--force-confold "$@" >"$SVC/apt.log" 2>&1 || rc=$?
  [ -z "$created_policy" ] || as_root rm -f /usr/sbin/policy-rc.d
  if [ "$rc" -ne 0 ]; then
    show_log "$SVC/apt.log"
    die "apt-get install $* failed"
  fi
}

ensure_clients() {
  local pkgs=()
  mysql_client >/dev/null || pkgs+=(mariadb-client)
  command -v redis-cli >/dev/null 2>&1 || pkgs+=(redis-tools)
  [ "${#pkgs[@]}" -eq 0 ] || apt_install "${pkgs[@]}"
}

# ---------------------------------------------------------------- mariadb

mariadb_init() {
  local installer
  installer="$(command -v mariadb-install-db || command -v mysql_install_db)" ||
    die "mariadb-install-db not found"
  log "initialising MariaDB data dir $MY_DATA"
  rm -rf "$MY_DATA"
  mkdir -p "$MY_DATA"
  if ! "$installer" --no-defaults --user="$(id -un)" --datadir="$MY_DATA" \
      --auth-root-authentication-method=normal --skip-test-db \
      --skip-name-resolve >"$SVC/mariadb-$MYSQL_PORT-install.log" 2>&1; then
    show_log "$SVC/mariadb-$MYSQL_PORT-install.log"
    die "mariadb-install-db failed"
  fi
  touch "$MY_MARKER"
}

mariadb_up() {
  if mysql_ok; then
    log "MariaDB already answers on $HOST:$MYSQL_PORT"
    return 0
  fi

  local pid
  if pid="$(live_pid "$MY_PID" mariadbd mysqld)"; then
    log "MariaDB (pid $pid) is running but not answering yet; waiting"
  else
    rm -f "$MY_PID"
    if port_open "$MYSQL_PORT"; then
      die "port $MYSQL_PORT is in use, but root without password cannot log in over TCP (a system MariaDB/MySQL?). Stop it or set MYSQL_PORT to a free port."
    fi
    if ! command -v mariadbd >/dev/null 2>&1 || ! command -v mariadb-install-db >/dev/null 2>&1; then
      apt_install mariadb-server mariadb-client
    fi
    # Missing marker = never initialised or interrupted half-way: start over.
    if [ ! -f "$MY_MARKER" ] || [ ! -d "$MY_DATA/mysql" ]; then
      mariadb_init
    fi
    rm -f "$MY_SOCK" "$MY_SOCK.lock"
    log "starting MariaDB on $HOST:$MYSQL_PORT (data $MY_DATA)"
    : >>"$MY_LOG"
    nohup setsid mariadbd --no-defaults \
      --user="$(id -un)" \
      --datadir="$MY_DATA" \
      --port="$MYSQL_PORT" \
      --bind-address="$HOST" \
      --socket="$MY_SOCK" \
      --pid-file="$MY_PID" \
      --log-error="$MY_LOG" \
      --skip-name-resolve \
      --character-set-server=utf8mb4 \
      --max-connections=500 \
      --max-allowed-packet=64M \
      --innodb-buffer-pool-size="$MARIADB_BUFFER_POOL" \
      --innodb-log-file-size=256M \
      --innodb-flush-log-at-trx-commit=1 \
      --table-open-cache=4000 \
      --skip-log-bin \
      --performance-schema=OFF \
      </dev/null >>"$MY_LOG" 2>&1 9>&- &
    pid=$!
    echo "$pid" >"$MY_PID"
  fi

  local i
  for ((i = 0; i < START_TIMEOUT * 4; i++)); do
    if ! alive "$pid"; then
      show_log "$MY_LOG"
      rm -f "$MY_PID"
      die "MariaDB exited during start-up (log: $MY_LOG)"
    fi
    mysql_sock -N -e 'SELECT 1' >/dev/null 2>&1 && break
    sleep 0.25
  done
  if ! mysql_sock -N -e 'SELECT 1' >/dev/null 2>&1; then
    show_log "$MY_LOG"
    die "MariaDB did not answer on $MY_SOCK within ${START_TIMEOUT}s (pid $pid, log: $MY_LOG)"
  fi

  # root from 127.0.0.1 over TCP, no password, all privileges.
  mysql_sock -e "
    CREATE USER IF NOT EXISTS 'root'@'127.0.0.1';
    ALTER USER 'root'@'127.0.0.1' IDENTIFIED BY '';
    GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;
    FLUSH PRIVILEGES;" ||
    die "could not grant privileges to root@127.0.0.1"
  mysql_ok || {
    show_log "$MY_LOG"
    die "MariaDB is up but root@$HOST:$MYSQL_PORT cannot log in over TCP"
  }
  log "MariaDB ready on $HOST:$MYSQL_PORT (pid $pid)"
}

# ---------------------------------------------------------------- redis

redis_up() {
  if redis_ok; then
    log "Redis already answers on $HOST:$REDIS_PORT"
    return 0
  fi
  local pid
  if pid="$(live_pid "$RD_PID" redis-server)"; then
    log "Redis (pid $pid) is running but not answering yet; waiting"
  else
    rm -f "$RD_PID"
    if port_open "$REDIS_PORT"; then
      die "port $REDIS_PORT is in use, but it does not answer PING with PONG. Stop it or set REDIS_PORT to a free port."
    fi
    command -v redis-server >/dev/null 2>&1 || apt_install redis-server
    mkdir -p "$RD_DIR"
    log "starting Redis on $HOST:$REDIS_PORT"
    : >>"$RD_LOG"
    if ! redis-server --daemonize yes --save "" --appendonly no \
        --bind "$HOST" --port "$REDIS_PORT" --dir "$RD_DIR" \
        --logfile "$RD_LOG" --pidfile "$RD_PID" </dev/null >>"$RD_LOG" 2>&1 9>&-; then
      show_log "$RD_LOG"
      die "redis-server failed to start (log: $RD_LOG)"
    fi
  fi
  local i
  for ((i = 0; i < START_TIMEOUT * 4; i++)); do
    redis_ok && break
    sleep 0.25
  done
  if ! redis_ok; then
    show_log "$RD_LOG"
    die "Redis did not answer PONG on $HOST:$REDIS_PORT within ${START_TIMEOUT}s (log: $RD_LOG)"
  fi
  pid="$(live_pid "$RD_PID" redis-server || echo '?')"
  log "Redis ready on $HOST:$REDIS_PORT (pid $pid)"
}

# ---------------------------------------------------------------- down

stop_pidfile() { # name pidfile comm...
  local name="$1" file="$2" pid
  shift 2
  if ! pid="$(live_pid "$file" "$@")"; then
    [ ! -e "$file" ] || { rm -f "$file"; log "$name: removed stale pid file"; }
    log "$name: not started by this script, nothing to stop"
    return 0
  fi
  stop_pid "$name" "$pid"
  rm -f "$file"
  log "$name stopped"
}

# ---------------------------------------------------------------- main

ONLY=

cmd_up() {
  ensure_clients
  mariadb_up
  mysql_tcp -e 'CREATE DATABASE IF NOT EXISTS paygw CHARACTER SET utf8mb4' ||
    die "could not create database paygw"
  if [ "$ONLY" = mariadb ]; then
    log "up: mysql root@tcp($HOST:$MYSQL_PORT)/"
    return
  fi
  redis_up
  log "up: mysql root@tcp($HOST:$MYSQL_PORT)/  redis $HOST:$REDIS_PORT"
}

cmd_down() {
  stop_pidfile "MariaDB on port $MYSQL_PORT" "$MY_PID" mariadbd mysqld
  rm -f "$MY_SOCK" "$MY_SOCK.lock"
  [ "$ONLY" = mariadb ] || stop_pidfile "Redis on port $REDIS_PORT" "$RD_PID" redis-server
}

cmd_status() {
  local rc=0 own
  own="$(live_pid "$MY_PID" mariadbd 2>/dev/null || true)"
  if mysql_client >/dev/null && mysql_ok; then
    log "MariaDB $HOST:$MYSQL_PORT reachable${own:+ (started here, pid $own)}"
  else
    log "MariaDB $HOST:$MYSQL_PORT NOT reachable"; rc=1
  fi
  own="$(live_pid "$RD_PID" redis-server 2>/dev/null || true)"
  if command -v redis-cli >/dev/null 2>&1 && redis_ok; then
    log "Redis   $HOST:$REDIS_PORT reachable${own:+ (started here, pid $own)}"
  else
    log "Redis   $HOST:$REDIS_PORT NOT reachable"; rc=1
  fi
  return "$rc"
}

main() {
  local cmd="${1:-}"
  case "$cmd:${2:-}" in
    up: | down: | status: | up:mariadb | down:mariadb) ONLY="${2:-}" ;;
    *) echo "usage: $0 up|down|status   (env MYSQL_PORT, REDIS_PORT); up|down mariadb for the MariaDB alone" >&2; exit 2 ;;
  esac
  mkdir -p "$SVC"
  # Serialise concurrent invocations (e.g. two `make test` at once).
  if command -v flock >/dev/null 2>&1; then
    exec 9>"$SVC/.lock"
    flock -w 180 9 || die "timed out waiting for another scripts/services.sh"
  fi
  "cmd_$cmd"
}

main "$@"
