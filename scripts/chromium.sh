#!/usr/bin/env bash
# Headless Chromium for the HTML report test (tests/report/test_html_browser.py): Debian's chromium,
# installed when missing and this runs as root (elsewhere the test is skipped with the reason).
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then
  echo "[chromium] present: $(command -v chromium)"
elif [[ "$(id -u)" == 0 ]]; then
  echo "[chromium] installing Debian's chromium for the HTML report test"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
else
  echo "[chromium] not installed and not root: the HTML report browser test will be skipped"
fi
