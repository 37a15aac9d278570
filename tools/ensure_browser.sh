#!/usr/bin/env bash
# Make sure a headless browser for the search-page test is installed: Debian's chromium and chromium-driver.
# Used by `make test`. Installs them with apt-get when missing (needs root, as in CI); otherwise says what to run.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
    exit 0
fi
echo "ensure_browser: chromium/chromedriver missing; the browser test needs them." >&2
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "ensure_browser: installing Debian packages chromium and chromium-driver with apt-get (a few minutes)..." >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null
    echo "ensure_browser: installed $(chromium --version 2>/dev/null || echo chromium)" >&2
else
    echo "ensure_browser: not root or no apt-get: run 'sudo apt-get install chromium chromium-driver';" >&2
    echo "ensure_browser: the browser test will be skipped until then." >&2
fi
