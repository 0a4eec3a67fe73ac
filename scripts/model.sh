#!/usr/bin/env bash
# Checks the Promela model of the apply protocol (apply/model/apply.pml) with spin: the model
# exhaustively for properties P1-P4 (safety, two runs with different fault budgets) and P5
# (liveness under weak fairness), and each broken variant must be rejected. A model run fails
# when its search is incomplete, when the liveness run has no never claim (or no fairness), and
# when a statement of the Replica process is reached by none of the model runs (spin's
# "unreached" lists): a dead branch proves nothing. Installs spin (Debian's package) when it is
# missing. One summary line per run; exits non-zero on any failure. Works in a temp dir
# (MODEL_KEEP=1 keeps it): no pan binary or trail file is left in the repo.
#
# Env: MODEL_SAFETY_BUDGETS, MODEL_SHARED_BUDGETS and MODEL_LIVE_BUDGETS override the fault
# budgets (-D flags) of the three runs of the model, e.g. MODEL_SAFETY_BUDGETS="-DMAXRB=2
# -DMAXCRASH=1 -DMAXTXF=1" for the deeper run in apply/model/README.md (minutes and gigabytes,
# not for CI; raise MODEL_MEMLIM).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
MODEL="$REPO/apply/model/apply.pml"
# Group apply doubled the state space: one crash in CI; MAXCRASH=2 passes in minutes
# (apply/model/README.md). Every fault at once does not fit in 3 GB, so the second order under
# A's transaction id (MAXSHARE) and the caller leaving its group (MAXDL) get a safety run of their
# own, without Redis outages and failed commits (which the first run covers). The liveness run
# leaves out the group's failing item, the second order and the caller leaving its group (with
# MAXDL=1 it had not finished after 83 M states and 10 minutes).
SAFETY_BUDGETS="${MODEL_SAFETY_BUDGETS:--DMAXRB=1 -DMAXCRASH=1 -DMAXTXF=1 -DMAXOUT=1 -DMAXGF=1 -DMAXSHARE=0 -DMAXDL=0}"
SHARED_BUDGETS="${MODEL_SHARED_BUDGETS:--DMAXRB=1 -DMAXCRASH=1 -DMAXTXF=0 -DMAXOUT=0 -DMAXGF=1 -DMAXSHARE=1 -DMAXDL=1}"
LIVE_BUDGETS="${MODEL_LIVE_BUDGETS:--DMAXRB=1 -DMAXCRASH=1 -DMAXTXF=1 -DMAXOUT=1 -DMAXGF=0 -DMAXSHARE=0 -DMAXDL=0}"
MEMLIM="${MODEL_MEMLIM:-3072}" # MB: pan stops (and the run fails) past it

log() { printf 'model.sh: %s\n' "$*" >&2; }

if ! command -v spin >/dev/null 2>&1; then
  log "installing spin (apt-get)"
  SUDO=()
  [ "$(id -u)" = 0 ] || SUDO=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${SUDO[@]}" apt-get install -y -q --no-install-recommends spin >/dev/null 2>&1 ||
    { "${SUDO[@]}" apt-get update -q >/dev/null && "${SUDO[@]}" apt-get install -y -q --no-install-recommends spin >/dev/null; }
fi
command -v spin >/dev/null || { log "spin is not installed"; exit 1; }
command -v gcc >/dev/null || { log "gcc is needed to build spin's verifier"; exit 1; }

WORK="$(mktemp -d "${TMPDIR:-/tmp}/paygw-model.XXXXXX")"
cleanup() { if [ "${MODEL_KEEP:-}" = 1 ]; then log "kept $WORK"; else rm -rf "$WORK"; fi; }
trap cleanup EXIT
cp "$MODEL" "$WORK/apply.pml"
cd "$WORK"

FAILED=0

# unreached OUT: the statements of proctype Replica that spin lists as unreached in pan's output
# OUT, one per line, sorted ("-end-" of its endless loop left out).
unreached() {
  awk '/^unreached in proctype Replica/ { f = 1; next }
    f && (/^unreached in / || /^\t\(/) { f = 0 }
    f && !/-end-/ { sub(/^\t/, ""); print }' "$1" | sort -u
}

# run NAME EXPECT SPINFLAGS CCFLAGS PANFLAGS: EXPECT is "pass" (a complete search, errors: 0)
# or "reject" (at least one assertion violated). With -a in PANFLAGS (a liveness run), the
# search must also have had the never claim and weak fairness. A pass run adds its unreached
# Replica statements to $WORK/unreached.*.
PASSES=0
run() {
  local name="$1" expect="$2" spinflags="$3" ccflags="$4" panflags="$5" out="$WORK/$1.out"
  local start end secs
  rm -f pan pan.* apply.pml.trail
  # shellcheck disable=SC2086 # the flags are word lists
  if ! spin -a $spinflags apply.pml >"$out" 2>&1; then
    log "$name: spin -a failed"; cat "$out" >&2; FAILED=1; return
  fi
  # shellcheck disable=SC2086
  if ! gcc -w $ccflags -o pan pan.c >>"$out" 2>&1; then
    log "$name: gcc failed"; tail -20 "$out" >&2; FAILED=1; return
  fi
  start=$(date +%s.%N)
  # shellcheck disable=SC2086
  ./pan $panflags >>"$out" 2>&1 || true
  end=$(date +%s.%N)
  secs=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')

  local stored depth errors verdict
  stored=$(awk '/states, stored/ { print $1; exit }' "$out")
  depth=$(sed -n 's/.*depth reached \([0-9]*\),.*/\1/p' "$out" | head -1)
  errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' "$out" | head -1)
  if [ "$expect" = pass ]; then
    if [ "${errors:-x}" != 0 ]; then
      verdict="FAIL (expected errors: 0)"
    elif grep -qE 'out of memory|MEMLIM|depth too small|[Ss]earch not completed' "$out" ||
      ! grep -q 'Full statespace search' "$out"; then
      verdict="FAIL (incomplete search)"
    elif [[ " $panflags " == *" -a "* ]] && ! { grep -qE 'never claim[[:space:]]+\+' "$out" &&
      grep -qE 'acceptance +cycles[[:space:]]+\+ \(fairness enabled\)' "$out"; }; then
      verdict="FAIL (no never claim or no fairness: the liveness property was not checked)"
    else
      verdict="ok"
      unreached "$out" >"$WORK/unreached.$PASSES"
      PASSES=$((PASSES + 1))
    fi
  else
    if [ "${errors:-0}" -ge 1 ] 2>/dev/null && grep -q 'assertion violated' "$out"; then
      verdict="ok, rejected: $(grep -m1 -o 'assertion violated (.*)' "$out" | sed 's/ (at depth.*//')"
    else
      verdict="FAIL (a broken variant passed)"
    fi
  fi
  printf '%-38s states stored %10s  depth %4s  %6ss  errors: %s  %s\n' \
    "$name" "${stored:-?}" "${depth:-?}" "$secs" "${errors:-?}" "$verdict"
  case "$verdict" in ok*) ;; *) FAILED=1; grep -E 'violated|error|pan:' "$out" | head -10 >&2 ;; esac
}

# The model: P1-P4 everywhere in the state space (two runs), then P5 with weak fairness.
run "model: P1-P4 (safety)" pass "$SAFETY_BUDGETS" "-O2 -DSAFETY -DCOLLAPSE -DMEMLIM=$MEMLIM" "-m200000"
run "model: P1-P4, shared txn id, deadline" pass "$SHARED_BUDGETS" "-O2 -DSAFETY -DCOLLAPSE -DMEMLIM=$MEMLIM" "-m200000"
run "model: P5 <>success (weak fairness)" pass "-DLIVE $LIVE_BUDGETS" "-O2 -DCOLLAPSE -DNFAIR=3 -DMEMLIM=$MEMLIM" "-a -f -m200000"
# Every statement of the replica must be reached by at least one of the model runs.
if [ "$PASSES" = 3 ]; then
  cp "$WORK/unreached.0" "$WORK/unreached.all"
  for i in 1 2; do
    comm -12 "$WORK/unreached.all" "$WORK/unreached.$i" >"$WORK/unreached.tmp"
    mv "$WORK/unreached.tmp" "$WORK/unreached.all"
  done
  if [ -s "$WORK/unreached.all" ]; then
    log "statements of proctype Replica reached by no model run (a dead branch):"
    sed 's/^/  /' "$WORK/unreached.all" >&2
    FAILED=1
  else
    printf '%-38s every statement reached by some model run\n' "model: proctype Replica"
  fi
fi
# Broken variants, each against the property that must catch it.
BROKEN_BUDGETS="-DMAXRB=1 -DMAXCRASH=1 -DMAXTXF=1 -DMAXOUT=1"
run "broken MARK_BEFORE_COMMIT vs P3" reject "-DMARK_BEFORE_COMMIT -DONLY_P3 $BROKEN_BUDGETS" "-O0 -DSAFETY" "-m200000"
run "broken MARK_BEFORE_COMMIT vs P2" reject "-DMARK_BEFORE_COMMIT -DONLY_P2 $BROKEN_BUDGETS" "-O0 -DSAFETY" "-m200000"
run "broken NO_EPOCH vs P4" reject "-DNO_EPOCH -DONLY_P4 $BROKEN_BUDGETS" "-O0 -DSAFETY" "-m200000"
run "broken MARK_NS_AT_WRITE vs P4" reject "-DMARK_NS_AT_WRITE -DONLY_P4 $BROKEN_BUDGETS" "-O0 -DSAFETY" "-m200000"
run "broken GROUP_FAIL_SUCCESS vs P2" reject "-DGROUP_FAIL_SUCCESS -DONLY_P2 $BROKEN_BUDGETS" "-O0 -DSAFETY" "-m200000"

if [ "$FAILED" != 0 ]; then
  log "FAILED (MODEL_KEEP=1 keeps the pan outputs and trails)"
  exit 1
fi
log "all runs as expected"
