#!/usr/bin/env bash
# Installs Debian's `chromium` for the console's browser test (console/), which drives it
# headless through chromedp. No daemon, no sandbox setup: the test starts the binary itself.
#
#   scripts/chromium.sh        install if `chromium` is not on PATH; print its path
set -euo pipefail

NAME=chromium
# shellcheck source=scripts/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

apt_install chromium
