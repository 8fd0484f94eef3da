#!/bin/sh
# example.sh: a nightly report that must never be written by two hosts at once.
# SPDX-License-Identifier: MIT
#
# Run it on as many machines as you like (with a dlockd each, sharing one
# Redis): one at a time holds "nightly-report" and writes the report, the
# others wait. The fence dlockd hands out rises with every grant, so the file
# name says which grant wrote it, and whoever consumes the reports can refuse
# one whose fence is lower than the highest it has seen (a writer that
# stalled, lost its lock and woke up too late).
#
#   DLOCK_SOCKET=/run/dlockd/dlockd.sock REPORT_DIR=/srv/reports ./example.sh
#
# To skip the run when another host is already at it, instead of waiting,
# use `dlock_trylock nightly-report` and exit when it returns 1.
set -eu

here=$(dirname -- "$0")
# shellcheck source-path=SCRIPTDIR source=dlock.sh disable=SC1091
. "${DLOCK_LIB:-$here/dlock.sh}"

report_dir=${REPORT_DIR:-${TMPDIR:-/tmp}}

# One connection for the whole script: the locks live as long as it does.
dlock_open "${DLOCK_SOCKET:-/run/dlockd/dlockd.sock}" || exit 1

# Waits as long as another holder keeps the lock. Without a lease the lock
# lives while this script runs: dlockd renews it for us.
dlock_lock nightly-report || exit 1
fence=$DLOCK_FENCE
echo "example: got nightly-report, fence $fence"

# The work. Write under a temporary name, publish with a rename.
out="$report_dir/nightly-report.$fence.txt"
tmp="$out.tmp.$$"
{
    echo "nightly report"
    echo "fence: $fence"
    echo "host: $(uname -n)"
    echo "date: $(date -u '+%Y-%m-%dT%H:%M:%SZ')"
} >"$tmp"
sleep 1 # stands for the real work

# Before publishing, make sure the lock was not lost meanwhile (a !LOST
# event is only seen at the next request; STATUS is that request).
if ! dlock_status nightly-report || [ "$DLOCK_STATE" != MINE ] ||
    [ "$DLOCK_FENCE" != "$fence" ]; then
    echo "example: lost nightly-report before publishing; not publishing" >&2
    rm -f "$tmp"
    exit 1
fi
mv -f "$tmp" "$out"
echo "example: wrote $out"

dlock_unlock nightly-report
dlock_close
