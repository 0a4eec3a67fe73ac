#!/usr/bin/env bash
# Faults with nothing lost: 3 paygw replicas on their own MariaDB and Redis (loopback only),
# channel-like senders, and in turn a duplicate storm, Redis SIGKILL, replica SIGKILLs,
# a MariaDB restart and a replica SIGTERM, while the replicas deliver webhooks to a
# `paygw simulate webhook-sink --fail-rate 0.3` SIGKILLed in every phase; then invariants checked
# from the database, and the webhooks from what the sink recorded (docs/reliability.md).
#
#   scripts/chaos.sh           full run (10k orders per fault; figures into docs/reliability.md)
#   scripts/chaos.sh --short   the CI version (1k orders, each fault once; inside make test)
#   scripts/chaos.sh --cluster [--short]
#                              the same on a 3-node Galera cluster (replica i writes to node i) and a
#                              6-node Redis Cluster: storm, a Galera node SIGKILL (back by IST), a
#                              Redis master SIGKILL (failover), replica SIGKILLs (make chaos-cluster)
#
# Env: CHAOS_MYSQL_PORT (3407) and CHAOS_REDIS_PORT (6479): the run's own instances, started and
# stopped here through scripts/services.sh, so the shared 3306/6379 are never touched.
# With --cluster: CHAOS_GALERA_PORT (3321..3323; group communication, IST and SST ports follow)
# and CHAOS_REDIS_CLUSTER_PORT (7201..7206), started by scripts/galera.sh and
# scripts/redis-cluster.sh and stopped on exit, so the tests' clusters (3311, 7101) are never touched.
# CHAOS_TIMEOUT bounds the whole run (seconds; 300 short, 900 full; 480 and 1200 with --cluster). PAYGW_BIN uses a given
# binary instead of building ./cmd/paygw. CHAOS_KEEP=1 keeps the work directory.
# Extra arguments go to paygw-chaos (see go run ./cmd/paygw-chaos --help).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "$REPO"

SHORT=
CLUSTER=
ARGS=()
for a in "$@"; do
  case "$a" in
    --short) SHORT=1; ARGS+=(--short) ;;
    --cluster) CLUSTER=1; ARGS+=(--cluster) ;;
    *) ARGS+=("$a") ;;
  esac
done

MYSQL_PORT="${CHAOS_MYSQL_PORT:-3407}"
REDIS_PORT="${CHAOS_REDIS_PORT:-6479}"
if [ -n "$SHORT" ]; then TIMEOUT="${CHAOS_TIMEOUT:-300}"; else TIMEOUT="${CHAOS_TIMEOUT:-900}"; fi
if [ -n "$CLUSTER" ]; then
  if [ -n "$SHORT" ]; then TIMEOUT="${CHAOS_TIMEOUT:-480}"; else TIMEOUT="${CHAOS_TIMEOUT:-1200}"; fi
  export GALERA_PORT="${CHAOS_GALERA_PORT:-3321}" # galera.sh derives its other ports from it
  export REDIS_CLUSTER_PORT="${CHAOS_REDIS_CLUSTER_PORT:-7201}"
  ARGS+=(--galera scripts/galera.sh --galera-port "$GALERA_PORT" --redis-cluster-port "$REDIS_CLUSTER_PORT")
fi

log() { printf 'chaos.sh: %s\n' "$*" >&2; }

WORK="$(mktemp -d "${TMPDIR:-/tmp}/paygw-chaos.XXXXXX")"
CHILD=
STATUS=1
cleanup() {
  trap - EXIT INT TERM
  if [ -n "$CHILD" ] && kill -0 "$CHILD" 2>/dev/null; then
    kill -TERM "$CHILD" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$CHILD" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$CHILD" 2>/dev/null || true
    wait "$CHILD" 2>/dev/null || true
  fi
  if [ -n "$CLUSTER" ]; then
    scripts/galera.sh down >/dev/null 2>&1 || log "galera.sh down for $GALERA_PORT failed"
    scripts/redis-cluster.sh down >/dev/null 2>&1 || log "redis-cluster.sh down for $REDIS_CLUSTER_PORT failed"
  else
    MYSQL_PORT="$MYSQL_PORT" REDIS_PORT="$REDIS_PORT" scripts/services.sh down >/dev/null 2>&1 ||
      log "services.sh down for $MYSQL_PORT/$REDIS_PORT failed"
  fi
  if [ "$STATUS" -eq 0 ] && [ -z "${CHAOS_KEEP:-}" ]; then
    rm -rf "$WORK"
  else
    log "work directory (configs, replica logs) kept in $WORK"
  fi
}
trap cleanup EXIT
trap 'log interrupted; exit 130' INT TERM

for p in "$MYSQL_PORT" "$REDIS_PORT" "${GALERA_PORT:-}" "${REDIS_CLUSTER_PORT:-}"; do
  case "$p" in 3306 | 6379 | 3311 | 7101) log "refusing to run chaos on the shared port $p"; exit 2 ;; esac
done

BIN="${PAYGW_BIN:-}"
if [ -z "$BIN" ]; then
  BIN="$WORK/paygw"
  log "building ./cmd/paygw"
  go build -o "$BIN" ./cmd/paygw
fi
go build -o "$WORK/paygw-chaos" ./cmd/paygw-chaos

if [ -n "$CLUSTER" ]; then
  # redis-server comes from Debian through services.sh (which also starts the shared 3306/6379).
  command -v redis-server >/dev/null 2>&1 || scripts/services.sh up
  log "own Galera cluster :$GALERA_PORT.. and Redis Cluster :$REDIS_CLUSTER_PORT.."
  scripts/galera.sh up
  scripts/redis-cluster.sh up
else
  log "own MariaDB :$MYSQL_PORT and Redis :$REDIS_PORT"
  MYSQL_PORT="$MYSQL_PORT" REDIS_PORT="$REDIS_PORT" scripts/services.sh up
fi

if [ -z "$SHORT" ]; then ARGS+=(--doc docs/reliability.md); fi
# timeout(1) bounds the whole run; paygw-chaos stops its replicas on SIGTERM.
timeout --signal=TERM --kill-after=20 "$TIMEOUT" "$WORK/paygw-chaos" \
  --bin "$BIN" --services scripts/services.sh --work "$WORK" \
  --mysql-port "$MYSQL_PORT" --redis-port "$REDIS_PORT" "${ARGS[@]}" &
CHILD=$!
rc=0
wait "$CHILD" || rc=$?
CHILD=
if [ "$rc" -eq 124 ]; then log "timed out after ${TIMEOUT}s"; fi
STATUS=$rc
exit "$rc"
