#!/usr/bin/env bash
# Faults with nothing lost: 3 paygw replicas on their own MariaDB and Redis (loopback only),
# channel-like senders, and in turn a duplicate storm, Redis SIGKILL, replica SIGKILLs,
# a MariaDB restart and a replica SIGTERM; then invariants checked from the database.
#
#   scripts/chaos.sh           full run (10k orders per fault; figures into docs/reliability.md)
#   scripts/chaos.sh --short   the CI version (1k orders, each fault once; inside make test)
#
# Env: CHAOS_MYSQL_PORT (3407) and CHAOS_REDIS_PORT (6479): the run's own instances, started and
# stopped here through scripts/services.sh, so the shared 3306/6379 are never touched.
# CHAOS_TIMEOUT bounds the whole run (seconds; 110 short, 900 full). PAYGW_BIN uses a given
# binary instead of building ./cmd/paygw. CHAOS_KEEP=1 keeps the work directory.
# Extra arguments go to paygw-chaos (see go run ./cmd/paygw-chaos --help).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "$REPO"

SHORT=
ARGS=()
for a in "$@"; do
  case "$a" in
    --short) SHORT=1; ARGS+=(--short) ;;
    *) ARGS+=("$a") ;;
  esac
done

MYSQL_PORT="${CHAOS_MYSQL_PORT:-3407}"
REDIS_PORT="${CHAOS_REDIS_PORT:-6479}"
if [ -n "$SHORT" ]; then TIMEOUT="${CHAOS_TIMEOUT:-110}"; else TIMEOUT="${CHAOS_TIMEOUT:-900}"; fi

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
  MYSQL_PORT="$MYSQL_PORT" REDIS_PORT="$REDIS_PORT" scripts/services.sh down >/dev/null 2>&1 ||
    log "services.sh down for $MYSQL_PORT/$REDIS_PORT failed"
  if [ "$STATUS" -eq 0 ] && [ -z "${CHAOS_KEEP:-}" ]; then
    rm -rf "$WORK"
  else
    log "work directory (configs, replica logs) kept in $WORK"
  fi
}
trap cleanup EXIT
trap 'log interrupted; exit 130' INT TERM

for p in "$MYSQL_PORT" "$REDIS_PORT"; do
  case "$p" in 3306 | 6379) log "refusing to run chaos on the shared port $p"; exit 2 ;; esac
done

BIN="${PAYGW_BIN:-}"
if [ -z "$BIN" ]; then
  BIN="$WORK/paygw"
  log "building ./cmd/paygw"
  go build -o "$BIN" ./cmd/paygw
fi
go build -o "$WORK/paygw-chaos" ./cmd/paygw-chaos

log "own MariaDB :$MYSQL_PORT and Redis :$REDIS_PORT"
MYSQL_PORT="$MYSQL_PORT" REDIS_PORT="$REDIS_PORT" scripts/services.sh up

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
