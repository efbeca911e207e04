#!/usr/bin/env bash
# The report tests open the HTML report in a real headless browser: Debian's chromium at
# /usr/bin/chromium. Part of the README's test command: installs it when it is missing and we
# are root with apt; otherwise stops at once with the exact command to run.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
  exit 0
fi
install="apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium"
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "setup: the report tests need Debian's chromium at /usr/bin/chromium; install it with:" >&2
  echo "    sudo sh -c '$install'" >&2
  exit 1
fi
echo "setup: installing Debian's chromium for the report tests (apt-get, about a minute)"
if ! (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null); then
  echo "setup: could not install chromium; run: sh -c '$install'" >&2
  exit 1
fi
echo "setup: $(/usr/bin/chromium --version 2>/dev/null || echo chromium) installed"
