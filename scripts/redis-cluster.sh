#!/usr/bin/env bash
# A local 6-node Redis Cluster (3 masters, 3 replicas) for the guard's cluster tests, from Debian's
# redis-server (scripts/services.sh installs it), without systemd or Docker.
#
#   scripts/redis-cluster.sh up       start the nodes (again) and create the cluster if it is new
#   scripts/redis-cluster.sh down     stop the nodes and delete their state
#   scripts/redis-cluster.sh status   print cluster_state as each node sees it
#
# Ports: REDIS_CLUSTER_PORT (default 7101) and the next five, on 127.0.0.1. State (data, nodes.conf,
# logs, pid files redis-<port>.pid) lives in <repo>/.redis-cluster/ (.redis-cluster-<port>/ for other
# ports; git-ignored). up is idempotent:
# a node already running is left alone, a node that died (a killed master) is started again and
# rejoins from its nodes.conf, as a replica of the master that replaced it.
set -euo pipefail

BASE="${REDIS_CLUSTER_PORT:-7101}"
START_TIMEOUT="${REDIS_CLUSTER_START_TIMEOUT:-30}"

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
STATE="$REPO/.redis-cluster"
[ "$BASE" = 7101 ] || STATE="$REPO/.redis-cluster-$BASE" # another cluster (make chaos-cluster's)
PORTS=()
for i in 0 1 2 3 4 5; do PORTS+=("$((BASE + i))"); done

NAME=redis-cluster
# shellcheck source=scripts/lib.sh
source "$REPO/scripts/lib.sh"

cli() { # port args...
  local p="$1"
  shift
  redis-cli -h "$HOST" -p "$p" "$@"
}

# The pid of the node on port if it runs (and is redis-server).
node_running() { # port
  live_pid "$STATE/redis-$1.pid" redis-server
}

start_node() { # port
  local p="$1" dir="$STATE/$1"
  if node_running "$p" >/dev/null; then
    return
  fi
  if [ "$(cli "$p" ping 2>/dev/null || true)" = PONG ]; then
    die "port $p answers but is not a node of $STATE (set REDIS_CLUSTER_PORT)"
  fi
  mkdir -p "$dir"
  redis-server --bind "$HOST" --port "$p" --protected-mode no \
    --cluster-enabled yes --cluster-config-file "$dir/nodes.conf" --cluster-node-timeout 2000 \
    --cluster-replica-validity-factor 0 \
    --dir "$dir" --save "" --appendonly no \
    --daemonize yes --pidfile "$STATE/redis-$p.pid" --logfile "$STATE/redis-$p.log" 9>&- # the node must not inherit the lock
}

wait_pong() { # port
  local i
  for ((i = 0; i < START_TIMEOUT * 10; i++)); do
    [ "$(cli "$1" ping 2>/dev/null || true)" = PONG ] && return
    sleep 0.1
  done
  tail -n 20 "$STATE/redis-$1.log" >&2 || true
  die "node $1 did not answer within ${START_TIMEOUT}s"
}

info_field() { # port field
  cli "$1" cluster info 2>/dev/null | tr -d '\r' | sed -n "s/^$2://p"
}

cluster_ok() { # every node sees 6 nodes and state ok
  local p
  for p in "${PORTS[@]}"; do
    [ "$(info_field "$p" cluster_state)" = ok ] || return 1
    [ "$(info_field "$p" cluster_known_nodes)" = 6 ] || return 1
  done
}

up() {
  command -v redis-server >/dev/null && command -v redis-cli >/dev/null ||
    die "redis-server and redis-cli are needed: scripts/services.sh up installs them"
  mkdir -p "$STATE"
  local p
  for p in "${PORTS[@]}"; do start_node "$p"; done
  for p in "${PORTS[@]}"; do wait_pong "$p"; done
  if [ "$(info_field "${PORTS[0]}" cluster_known_nodes)" = 1 ] && [ "$(info_field "${PORTS[0]}" cluster_slots_assigned)" = 0 ]; then
    log "creating the cluster on ports ${PORTS[*]}"
    local addrs=()
    for p in "${PORTS[@]}"; do addrs+=("$HOST:$p"); done
    redis-cli --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes >"$STATE/create.log" 2>&1 ||
      { cat "$STATE/create.log" >&2; die "redis-cli --cluster create failed"; }
  fi
  local i
  for ((i = 0; i < START_TIMEOUT * 10; i++)); do
    if cluster_ok; then
      log "up: ${PORTS[0]}-${PORTS[5]}, cluster_state ok"
      return
    fi
    sleep 0.1
  done
  status >&2 || true
  die "the cluster did not reach cluster_state:ok within ${START_TIMEOUT}s"
}

down() {
  local p pid i
  for p in "${PORTS[@]}"; do
    if pid="$(node_running "$p")"; then
      kill "$pid" 2>/dev/null || true
      for ((i = 0; i < 50; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$pid" 2>/dev/null || true
    fi
  done
  rm -rf "$STATE"
  log "down"
}

status() {
  local p
  for p in "${PORTS[@]}"; do
    printf '%s %s %s\n' "$p" "$(info_field "$p" cluster_state || true)" "$(cli "$p" role 2>/dev/null | head -1 || true)"
  done
}

# One caller at a time: test binaries of several packages may run up at once.
mkdir -p "$(dirname "$STATE")"
exec 9>"$STATE.lock"
flock 9

case "${1:-}" in
up) up ;;
down) down ;;
status) status ;;
*) die "usage: $0 up|down|status" ;;
esac
