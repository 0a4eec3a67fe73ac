#!/usr/bin/env bash
# Installs Debian's `chromium` for the console's browser test (console/), which drives it
# headless through chromedp. No daemon, no sandbox setup: the test starts the binary itself.
#
#   scripts/chromium.sh        install if `chromium` is not on PATH; print its path
set -euo pipefail
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

NAME=chromium
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if command -v chromium >/dev/null 2>&1; then
  command -v chromium
  exit 0
fi

command -v apt-get >/dev/null 2>&1 || die "chromium is missing and apt-get is not available; install it by hand"

install() {
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold chromium
}
log "apt-get install chromium"
if ! install >/tmp/paygw-chromium-apt.log 2>&1; then
  log "install failed; apt-get update, then again"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null || die "apt-get update failed"
  install >/tmp/paygw-chromium-apt.log 2>&1 || { tail -n 40 /tmp/paygw-chromium-apt.log >&2; die "apt-get install chromium failed"; }
fi
command -v chromium >/dev/null 2>&1 || die "installed, but chromium is not on PATH"
command -v chromium
