#!/usr/bin/env bash
# Installs Prometheus (Debian's `prometheus` package) for the metrics test, without systemd:
# the test runs the binary itself with a temporary config and data dir, so no daemon is started.
#
#   scripts/prometheus.sh        install if `prometheus` is not on PATH; print its path
set -euo pipefail
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

NAME=prometheus
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if command -v prometheus >/dev/null 2>&1; then
  command -v prometheus
  exit 0
fi

command -v apt-get >/dev/null 2>&1 || die "prometheus is missing and apt-get is not available; install it by hand"

# Keep the package's init script from starting a system-wide daemon on :9090.
created_policy=
if [ ! -e /usr/sbin/policy-rc.d ]; then
  as_root sh -c 'printf "#!/bin/sh\nexit 101\n" >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d'
  created_policy=1
fi
cleanup() { [ -z "$created_policy" ] || as_root rm -f /usr/sbin/policy-rc.d; }
trap cleanup EXIT

install() {
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold prometheus
}
log "apt-get install prometheus"
if ! install >/tmp/paygw-prometheus-apt.log 2>&1; then
  log "install failed; apt-get update, then again"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null || die "apt-get update failed"
  install >/tmp/paygw-prometheus-apt.log 2>&1 || { tail -n 40 /tmp/paygw-prometheus-apt.log >&2; die "apt-get install prometheus failed"; }
fi
command -v prometheus >/dev/null 2>&1 || die "installed, but prometheus is not on PATH"
command -v prometheus
