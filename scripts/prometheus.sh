#!/usr/bin/env bash
# Installs Prometheus (Debian's `prometheus` package) for the metrics test, without systemd:
# the test runs the binary itself with a temporary config and data dir, so no daemon is started.
#
#   scripts/prometheus.sh        install if `prometheus` is not on PATH; print its path
set -euo pipefail

NAME=prometheus
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

command -v prometheus >/dev/null 2>&1 && { command -v prometheus; exit 0; }

# Keep the package's init script from starting a system-wide daemon on :9090.
created_policy=
if [ ! -e /usr/sbin/policy-rc.d ]; then
  as_root sh -c 'printf "#!/bin/sh\nexit 101\n" >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d'
  created_policy=1
fi
cleanup() { [ -z "$created_policy" ] || as_root rm -f /usr/sbin/policy-rc.d; }
trap cleanup EXIT

apt_install prometheus
