#!/usr/bin/env bash
# Checks the Prometheus alert rules (deploy/prometheus/alerts.yml) with promtool and runs their
# unit tests (deploy/prometheus/alerts_test.yml). Installs Debian's prometheus package when
# promtool is missing; its service is never started here. Exits non-zero on any failure.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
RULES="deploy/prometheus/alerts.yml"
TESTS="deploy/prometheus/alerts_test.yml"

log() { printf 'promtool.sh: %s\n' "$*" >&2; }
fail() { log "FAIL: $*"; exit 1; }

if ! command -v promtool >/dev/null 2>&1; then
  log "installing prometheus (apt-get) for promtool"
  SUDO=()
  [ "$(id -u)" = 0 ] || SUDO=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  # The package's maintainer scripts must not start the server: policy-rc.d answers 101
  # ("action not allowed") to invoke-rc.d, and without systemd as PID 1 nothing else starts it.
  POLICY=/usr/sbin/policy-rc.d
  ADDED_POLICY=0
  if [ ! -e "$POLICY" ]; then
    printf '#!/bin/sh\nexit 101\n' | "${SUDO[@]}" tee "$POLICY" >/dev/null
    "${SUDO[@]}" chmod 755 "$POLICY"
    ADDED_POLICY=1
  fi
  # Another apt-get on the machine holds the dpkg lock for a while: wait for it, not fail.
  APT_WAIT=(-o DPkg::Lock::Timeout=600)
  install_ok=0
  "${SUDO[@]}" apt-get "${APT_WAIT[@]}" install -y -q --no-install-recommends prometheus >/dev/null 2>&1 && install_ok=1 ||
    { "${SUDO[@]}" apt-get "${APT_WAIT[@]}" update -q >/dev/null &&
      "${SUDO[@]}" apt-get "${APT_WAIT[@]}" install -y -q --no-install-recommends prometheus >/dev/null && install_ok=1; } || true
  [ "$ADDED_POLICY" = 0 ] || "${SUDO[@]}" rm -f "$POLICY"
  [ "$install_ok" = 1 ] || fail "apt-get install prometheus failed"
fi
command -v promtool >/dev/null 2>&1 || fail "promtool is not installed"

cd "$REPO"
[ -f "$RULES" ] || fail "$RULES is missing"
[ -f "$TESTS" ] || fail "$TESTS is missing"

log "$(promtool --version 2>&1 | head -1)"
promtool check rules "$RULES" || fail "promtool check rules $RULES"
promtool test rules "$TESTS" || fail "promtool test rules $TESTS"
log "ok: $RULES checked, $TESTS passed"
