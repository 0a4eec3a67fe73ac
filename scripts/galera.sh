#!/usr/bin/env bash
# A 3-node MariaDB Galera cluster on loopback for tests, from Debian's galera-4, without systemd.
#
#   scripts/galera.sh up          start every node that is not running (installing if missing)
#   scripts/galera.sh down        stop the nodes this script started (node 3, 2, then 1)
#   scripts/galera.sh kill N      SIGKILL node N (1..3)
#   scripts/galera.sh restart N   start node N again (stopping it first if it runs), by IST
#   scripts/galera.sh status      each node's wsrep state and the cluster size
#
# Node i listens for SQL on 127.0.0.1:$((GALERA_PORT+i-1)) (default 3311..3313), for group
# communication on 4571..4573, IST on 4581..4583 and rsync SST on 4591..4593. Root logs in over
# TCP without a password, like scripts/services.sh. The other ports follow GALERA_PORT (see below);
# GALERA_GCOMM_PORT, GALERA_IST_PORT and GALERA_SST_PORT set them outright. State lives in <repo>/.galera/ (.galera-<GALERA_PORT>/ for
# other ports; git-ignored), or in /var/tmp/paygw-galera-<checksum of the repo path>[-<port>] when
# the nodes' user cannot reach the repo.
# A cluster that already answers on those ports (started elsewhere) is used as is, never stopped.
#
# As root, the nodes run as user mysql with datadirs it owns: the rsync SST daemon drops to nobody and
# cannot read a root-owned datadir. A node that was killed is first run with --wsrep-recover and
# then started with --wsrep-start-position, so it rejoins by IST instead of a full SST. When no
# node runs, node 1 bootstraps a new cluster (--wsrep-new-cluster), the others join it.
set -euo pipefail

GALERA_PORT="${GALERA_PORT:-3311}"
# The other ports follow GALERA_PORT, three apart per SQL port: 3311 -> 4571, 4581, 4591 (the tests'),
# 3321 -> 4601, 4611, 4621 (make chaos-cluster's). Each can still be set on its own.
GCOMM_PORT="${GALERA_GCOMM_PORT:-$((4571 + 3 * (GALERA_PORT - 3311)))}"
IST_PORT="${GALERA_IST_PORT:-$((GCOMM_PORT + 10))}"
SST_PORT="${GALERA_SST_PORT:-$((GCOMM_PORT + 20))}"
NODES=3
START_TIMEOUT="${GALERA_START_TIMEOUT:-120}"
PROVIDER=/usr/lib/galera/libgalera_smm.so
# As root the nodes run as mysql (see above); as anyone else, as that user, who owns everything.
if [ "$(id -u)" -eq 0 ]; then RUN_USER=mysql; else RUN_USER="$(id -un)"; fi

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
NAME=galera
# shellcheck source=scripts/lib.sh
source "$REPO/scripts/lib.sh"

# The default ports' cluster (the tests') keeps its state in .galera; another set of ports (make
# chaos-cluster's) in .galera-<port>, so two clusters never share a datadir.
SUFFIX=
[ "$GALERA_PORT" = 3311 ] || SUFFIX="-$GALERA_PORT"
DIR="$REPO/.galera$SUFFIX"
# The nodes' user must reach their state. A checkout under a private directory (mktemp -d makes it
# 0700) is out of mysql's reach; the state then lives in /var/tmp, one directory per checkout.
if [ "$RUN_USER" != "$(id -un)" ] && ! runuser -u "$RUN_USER" -- test -x "$REPO" 2>/dev/null; then
  DIR="/var/tmp/paygw-galera-$(printf '%s' "$REPO" | cksum | cut -d' ' -f1)$SUFFIX"
fi

node_dir() { echo "$DIR/node$1"; }
node_data() { echo "$DIR/node$1/data"; }
node_cnf() { echo "$DIR/node$1/my.cnf"; }
node_pid() { echo "$DIR/node$1/mariadbd.pid"; }
node_log() { echo "$DIR/node$1/error.log"; }
node_sock() { echo "$DIR/node$1/mysqld.sock"; }
node_port() { echo $((GALERA_PORT + $1 - 1)); }

# The pid of node i's mariadbd if it runs (and is one).
node_running() { # i
  live_pid "$(node_pid "$1")" mariadbd mysqld
}

sql_tcp() { # i args...
  local i="$1"
  shift
  mariadb --no-defaults --protocol=TCP -h"$HOST" -P"$(node_port "$i")" -uroot --connect-timeout=3 "$@"
}

sql_sock() { # i args...
  local i="$1"
  shift
  mariadb --no-defaults --protocol=SOCKET --socket="$(node_sock "$i")" -uroot --connect-timeout=3 "$@"
}

wsrep_status() { # i name -> value
  sql_tcp "$1" -N -B -e "SHOW GLOBAL STATUS LIKE '$2'" 2>/dev/null | cut -f2
}

# ---------------------------------------------------------------- install

# chown to the user the nodes run as; a no-op when that is us.
own() { # paths...
  [ "$(id -u)" -ne 0 ] || chown "$@"
}

ensure_installed() {
  if [ -e "$PROVIDER" ] && command -v mariadbd >/dev/null 2>&1 &&
    command -v mariadb-install-db >/dev/null 2>&1 && command -v mariadb >/dev/null 2>&1 &&
    command -v rsync >/dev/null 2>&1 && command -v wsrep_sst_rsync >/dev/null 2>&1; then
    return 0
  fi
  command -v apt-get >/dev/null 2>&1 || die "galera-4 / mariadb-server missing and apt-get is not available"
  mkdir -p "$DIR"
  log "apt-get update"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q >"$DIR/apt.log" 2>&1 || { show_log "$DIR/apt.log"; die "apt-get update failed"; }
  # Keep the packages' init scripts from starting a system-wide MariaDB.
  local created_policy=
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    as_root sh -c 'printf "#!/bin/sh\nexit 101\n" >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d'
    created_policy=1
  fi
  log "apt-get install galera-4 mariadb-server mariadb-client rsync"
  local rc=0
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold \
    galera-4 mariadb-server mariadb-client rsync >>"$DIR/apt.log" 2>&1 || rc=$?
  [ -z "$created_policy" ] || as_root rm -f /usr/sbin/policy-rc.d
  [ "$rc" -eq 0 ] || { show_log "$DIR/apt.log"; die "apt-get install failed"; }
  [ -e "$PROVIDER" ] || die "$PROVIDER missing after installing galera-4"
}

# ---------------------------------------------------------------- nodes

write_cnf() { # i
  local i="$1" addrs="" j
  for ((j = 1; j <= NODES; j++)); do addrs+="${addrs:+,}$HOST:$((GCOMM_PORT + j - 1))"; done
  mkdir -p "$(node_data "$i")"
  cat >"$(node_cnf "$i")" <<CNF
[mysqld]
user=$RUN_USER
datadir=$(node_data "$i")
port=$(node_port "$i")
bind-address=$HOST
socket=$(node_sock "$i")
pid-file=$(node_pid "$i")
log-error=$(node_log "$i")
skip-name-resolve
character-set-server=utf8mb4
max-connections=300
innodb-buffer-pool-size=256M
innodb-log-file-size=64M
innodb-flush-log-at-trx-commit=2
innodb-autoinc-lock-mode=2
default-storage-engine=InnoDB
binlog-format=ROW
performance-schema=OFF
wsrep-on=ON
wsrep-provider=$PROVIDER
wsrep-cluster-name=paygw_galera_$GALERA_PORT
wsrep-cluster-address=gcomm://$addrs
wsrep-node-name=node$i
wsrep-node-address=$HOST:$((GCOMM_PORT + i - 1))
wsrep-provider-options=gmcast.listen_addr=tcp://$HOST:$((GCOMM_PORT + i - 1));ist.recv_addr=$HOST:$((IST_PORT + i - 1));gcache.size=128M
wsrep-sst-method=rsync
wsrep-sst-receive-address=$HOST:$((SST_PORT + i - 1))
wsrep-slave-threads=4
CNF
  own -R "$RUN_USER:$RUN_USER" "$(node_dir "$i")"
}

init_datadir() { # i
  local i="$1" data
  data="$(node_data "$i")"
  log "node $i: initialising $data"
  rm -rf "$data"
  mkdir -p "$data"
  own "$RUN_USER:$RUN_USER" "$data"
  mariadb-install-db --no-defaults --user="$RUN_USER" --datadir="$data" \
    --auth-root-authentication-method=normal --skip-test-db --skip-name-resolve \
    >"$(node_dir "$i")/install.log" 2>&1 || { show_log "$(node_dir "$i")/install.log"; die "mariadb-install-db failed"; }
  own -R "$RUN_USER:$RUN_USER" "$data"
}

# The position a node's datadir holds, uuid:seqno, by mariadbd --wsrep-recover; "" if none.
recover_position() { # i
  local i="$1" rlog pos
  rlog="$(node_dir "$i")/recover.log"
  rm -f "$rlog"
  touch "$rlog" && own "$RUN_USER:$RUN_USER" "$rlog"
  mariadbd --defaults-file="$(node_cnf "$i")" --wsrep-recover --log-error="$rlog" \
    </dev/null >/dev/null 2>&1 || { show_log "$rlog"; return 0; }
  pos="$(sed -n 's/.*WSREP: Recovered position: *\([0-9a-f-]*:-\{0,1\}[0-9]*\).*/\1/p' "$rlog" | tail -n1)"
  case "$pos" in *:-1 | 00000000-0000-0000-0000-000000000000:* | "") ;; *) echo "$pos" ;; esac
}

start_node() { # i mode(bootstrap|join)
  local i="$1" mode="$2" args=() pos pid
  rm -f "$(node_sock "$i")" "$(node_sock "$i").lock" "$(node_pid "$i")"
  if [ "$mode" = bootstrap ]; then
    args+=(--wsrep-new-cluster)
    # This node starts the cluster: it is the one to bootstrap from, even after a kill.
    [ ! -f "$(node_data "$i")/grastate.dat" ] ||
      sed -i 's/^safe_to_bootstrap:.*/safe_to_bootstrap: 1/' "$(node_data "$i")/grastate.dat"
  fi
  if [ -d "$(node_data "$i")/mysql" ]; then
    pos="$(recover_position "$i")"
    if [ -n "$pos" ]; then
      log "node $i: recovered position $pos"
      args+=(--wsrep-start-position="$pos")
    fi
  fi
  port_open "$(node_port "$i")" && die "port $(node_port "$i") is in use by something else"
  log "node $i: starting ($mode) on $HOST:$(node_port "$i")"
  touch "$(node_log "$i")" && own "$RUN_USER:$RUN_USER" "$(node_log "$i")"
  nohup setsid mariadbd --defaults-file="$(node_cnf "$i")" "${args[@]}" \
    </dev/null >>"$(node_log "$i")" 2>&1 9>&- &
  pid=$!
  echo "$pid" >"$(node_pid "$i")"
  own "$RUN_USER:$RUN_USER" "$(node_pid "$i")"
}

# Waits until node i answers as root over TCP and reports Synced.
wait_synced() { # i
  local i="$1" pid k state=""
  pid="$(tr -dc '0-9' <"$(node_pid "$i")")"
  for ((k = 0; k < START_TIMEOUT * 4; k++)); do
    if ! alive "$pid"; then
      show_log "$(node_log "$i")"
      die "node $i exited during start-up (log: $(node_log "$i"))"
    fi
    state="$(wsrep_status "$i" wsrep_local_state_comment || true)"
    [ "$state" = Synced ] && { log "node $i: Synced (pid $pid)"; return 0; }
    sleep 0.25
  done
  show_log "$(node_log "$i")"
  die "node $i not Synced within ${START_TIMEOUT}s (state '${state}', log: $(node_log "$i"))"
}

# Root over TCP without a password, granted on the bootstrap node (replicated to the others).
grant_root() { # i
  local i="$1" k
  for ((k = 0; k < START_TIMEOUT * 4; k++)); do
    sql_sock "$i" -N -e 'SELECT 1' >/dev/null 2>&1 && break
    sleep 0.25
  done
  sql_sock "$i" -e "
    CREATE USER IF NOT EXISTS 'root'@'127.0.0.1';
    ALTER USER 'root'@'127.0.0.1' IDENTIFIED BY '';
    GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;
    FLUSH PRIVILEGES;" || { show_log "$(node_log "$i")"; die "node $i: could not grant root@127.0.0.1"; }
}

any_running() {
  local j
  for ((j = 1; j <= NODES; j++)); do node_running "$j" >/dev/null && return 0; done
  return 1
}

check_node() { # i
  [[ "$1" =~ ^[1-9][0-9]*$ ]] && [ "$1" -le "$NODES" ] || die "node must be 1..$NODES, not '$1'"
}

# ---------------------------------------------------------------- commands

# Every node answers root over TCP, Synced, in a cluster of all of them.
cluster_answers() {
  local j
  for ((j = 1; j <= NODES; j++)); do
    [ "$(wsrep_status "$j" wsrep_local_state_comment)" = Synced ] || return 1
    [ "$(wsrep_status "$j" wsrep_cluster_size)" = "$NODES" ] || return 1
  done
}

cmd_up() {
  ensure_installed
  local i
  if ! any_running && command -v mariadb >/dev/null 2>&1 && cluster_answers; then
    log "a cluster not started here already answers on $HOST:$(node_port 1)..$(node_port "$NODES"); using it"
    return 0
  fi
  for ((i = 1; i <= NODES; i++)); do write_cnf "$i"; done
  if ! any_running; then
    [ -d "$(node_data 1)/mysql" ] || init_datadir 1
    start_node 1 bootstrap
    grant_root 1
    wait_synced 1
  fi
  for ((i = 1; i <= NODES; i++)); do
    node_running "$i" >/dev/null && continue
    start_node "$i" join
    wait_synced "$i"
  done
  for ((i = 1; i <= NODES; i++)); do wait_synced "$i"; done
  sql_tcp 1 -e 'CREATE DATABASE IF NOT EXISTS paygw CHARACTER SET utf8mb4' || die "could not create database paygw"
  log "up: cluster size $(wsrep_status 1 wsrep_cluster_size); root@tcp($HOST:$(node_port 1))/ .. root@tcp($HOST:$(node_port "$NODES"))/"
}

stop_node() { # i
  local pid
  if pid="$(node_running "$1")"; then
    stop_pid "node $1" "$pid"
  fi
  rm -f "$(node_pid "$1")"
}

cmd_down() {
  local i
  for ((i = NODES; i >= 1; i--)); do stop_node "$i"; done
  log "down"
}

cmd_kill() { # i
  check_node "$1"
  local pid k
  pid="$(node_running "$1")" || die "node $1 is not running"
  log "node $1: SIGKILL (pid $pid)"
  kill -KILL "$pid"
  for ((k = 0; k < 40; k++)); do alive "$pid" || break; sleep 0.25; done
}

cmd_restart() { # i
  check_node "$1"
  ensure_installed
  any_running || die "no node runs: use up"
  stop_node "$1"
  write_cnf "$1"
  start_node "$1" join
  wait_synced "$1"
}

cmd_status() {
  local i rc=0 pid
  for ((i = 1; i <= NODES; i++)); do
    pid="$(node_running "$i" || true)"
    if [ -n "$pid" ] && [ "$(wsrep_status "$i" wsrep_local_state_comment)" = Synced ]; then
      log "node $i $HOST:$(node_port "$i") Synced, cluster size $(wsrep_status "$i" wsrep_cluster_size), cert failures $(wsrep_status "$i" wsrep_local_cert_failures) (pid $pid)"
    else
      log "node $i $HOST:$(node_port "$i") NOT synced${pid:+ (pid $pid)}"
      rc=1
    fi
  done
  return "$rc"
}

main() {
  local cmd="${1:-}"
  case "$cmd" in
    up | down | status) [ $# -eq 1 ] || cmd="" ;;
    kill | restart) [ $# -eq 2 ] || cmd="" ;;
    *) cmd="" ;;
  esac
  [ -n "$cmd" ] || { echo "usage: $0 up|down|status|kill N|restart N   (env GALERA_PORT, default 3311)" >&2; exit 2; }
  mkdir -p "$DIR"
  if command -v flock >/dev/null 2>&1; then
    exec 9>"$DIR/.lock"
    flock -w 300 9 || die "timed out waiting for another scripts/galera.sh"
  fi
  shift
  "cmd_$cmd" "$@"
}

main "$@"
