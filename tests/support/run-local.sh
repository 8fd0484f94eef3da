#!/bin/sh
# `make run`: a private redis-server and dlockd in the foreground on ./run/.
# SPDX-License-Identifier: MIT
# Ctrl-C stops both. With REDIS_URL set, no redis-server is started.
set -eu
bin=${1:-build/dlockd}
dir=$(pwd)/run
mkdir -p "$dir"
redis_pid=""
dlockd_pid=""

cleanup() {
    trap - INT TERM EXIT
    [ -n "$dlockd_pid" ] && kill "$dlockd_pid" 2>/dev/null && wait "$dlockd_pid" 2>/dev/null
    [ -n "$redis_pid" ] && kill "$redis_pid" 2>/dev/null && wait "$redis_pid" 2>/dev/null
    rm -f "$dir/redis.sock"
    exit 0
}
trap cleanup INT TERM EXIT

if [ -z "${REDIS_URL:-}" ]; then
    rm -f "$dir/redis.sock"
    redis-server --port 0 --unixsocket "$dir/redis.sock" --unixsocketperm 700 \
        --save "" --appendonly no --dir "$dir" --logfile "$dir/redis.log" &
    redis_pid=$!
    i=0
    until redis-cli -s "$dir/redis.sock" ping >/dev/null 2>&1; do
        i=$((i + 1))
        if [ $i -gt 500 ] || ! kill -0 "$redis_pid" 2>/dev/null; then
            echo "make run: redis-server did not start; see $dir/redis.log" >&2
            exit 1
        fi
        sleep 0.01
    done
    REDIS_URL="unix://$dir/redis.sock"
fi

cat > "$dir/dlockd.conf" <<CONF
; written by make run
[server]
socket = run/dlockd.sock
socket_mode = 0600
admin_uids = $(id -u)
[redis]
url = $REDIS_URL
CONF
chmod 600 "$dir/dlockd.conf" # dlockd refuses, as root, a file others can write

cat <<MSG
dlockd on run/dlockd.sock, Redis at $REDIS_URL. Talk to it with:
    socat - UNIX-CONNECT:run/dlockd.sock
Ctrl-C stops both.
MSG
"$bin" -c "$dir/dlockd.conf" &
dlockd_pid=$!
wait "$dlockd_pid" || true
dlockd_pid=""
