#!/bin/sh
# The man pages render without a single groff warning.
# SPDX-License-Identifier: MIT
#
#   sh tests/docs/test_man_warnings.sh [PAGE...]
#
# Renders each page (by default conf/dlockd.conf.5, daemon/dlockd.8 and
# clients/cli/dlock.1) with groff and every warning on (-ww), else with
# man --warnings -l; groff exits 0 on warnings, so any output fails. Prints
# the warnings under the page's name; exits 1 if any page had one.

cd "$(dirname "$0")/../.." || exit 1
[ $# -gt 0 ] || set -- conf/dlockd.conf.5 daemon/dlockd.8 clients/cli/dlock.1

if command -v groff >/dev/null 2>&1; then
    render() { groff -ww -z -t -man -Tutf8 "$1" 2>&1; }
    how="groff -ww -z -t -man -Tutf8"
elif command -v man >/dev/null 2>&1; then
    render() { MANWIDTH=80 man --warnings -l "$1" 2>&1 >/dev/null; }
    how="man --warnings -l"
else
    echo "test_man_warnings: FAIL: neither groff nor man is installed" \
        "(apt-get install groff-base)" >&2
    exit 1
fi

failed=0
for page in "$@"; do
    if [ ! -f "$page" ]; then
        echo "test_man_warnings: FAIL: $page: no such file" >&2
        failed=1
        continue
    fi
    out=$(render "$page")
    if [ -n "$out" ]; then
        echo "test_man_warnings: FAIL: $page: $how warns:" >&2
        printf '%s\n' "$out" | sed 's/^/    /' >&2
        failed=1
    else
        echo "ok - $page ($how: no warnings)"
    fi
done
exit $failed
