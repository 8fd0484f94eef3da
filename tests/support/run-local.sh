#!/bin/sh
# `make run`: a private redis-server and dlockd in the foreground on ./run/.
# SPDX-License-Identifier: MIT
# Ctrl-C stops both. With REDIS_URL set, no redis-server is started. While
# one runs, a second in the same directory refuses to start (exit 1) and
# touches none of the first one's files. Exits with dlockd's status.
set -eu
bin=${1:-build/dlockd}
dir=$(pwd)/run
redis_pid=""
dlockd_pid=""

# 0 if something accepts connections on the Unix socket $1.
listening() {
    [ -S "$1" ] || return 1
    if command -v socat >/dev/null 2>&1; then
        socat -u OPEN:/dev/null "UNIX-CONNECT:$1" >/dev/null 2>&1
    elif command -v python3 >/dev/null 2>&1; then
        python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).connect(sys.argv[1])' \
            "$1" 2>/dev/null
    else
        return 0 # no way to tell: take it as live, and leave it alone
    fi
}

# The pid that INFO on the socket names ("" if nothing answers).
info_pid() {
    if command -v socat >/dev/null 2>&1; then
        printf 'INFO\n' | socat -t 2 - "UNIX-CONNECT:$dir/dlockd.sock" 2>/dev/null
    else
        python3 -c 'import socket, sys
s = socket.socket(socket.AF_UNIX); s.settimeout(2); s.connect(sys.argv[1])
s.sendall(b"INFO\n"); print(s.makefile().readline())' "$dir/dlockd.sock" 2>/dev/null
    fi | sed -n 's/.* pid=\([0-9]*\) .*/\1/p'
}

refuse() {
    echo "make run: another instance is already running in $dir ($1 answers);" \
         "stop it first (Ctrl-C where it runs)" >&2
    exit 1
}
if listening "$dir/dlockd.sock"; then refuse run/dlockd.sock; fi
if [ -z "${REDIS_URL:-}" ] && listening "$dir/redis.sock"; then refuse run/redis.sock; fi
mkdir -p "$dir"

# Stops what this script started and removes only its own files.
cleanup() {
    trap - INT TERM EXIT
    if [ -n "$dlockd_pid" ]; then
        kill "$dlockd_pid" 2>/dev/null || true
        wait "$dlockd_pid" 2>/dev/null || true
        # one that took over in a hand-over is no child: it releases its
        # locks before it goes, which Redis must be there for
        i=0
        while kill -0 "$dlockd_pid" 2>/dev/null && [ $i -lt 100 ]; do
            sleep 0.05
            i=$((i + 1))
        done
    fi
    if [ -n "$redis_pid" ]; then
        kill "$redis_pid" 2>/dev/null || true
        wait "$redis_pid" 2>/dev/null || true
        rm -f "$dir/redis.sock"
    fi
    exit "$1"
}
trap 'cleanup 0' INT TERM
trap 'cleanup $?' EXIT

if [ -z "${REDIS_URL:-}" ]; then
    rm -f "$dir/redis.sock" # stale: nothing answers on it (checked above)
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

# The clients look for /run/dlockd/dlockd.sock unless told; the line to tell
# them, quoted for sh when the path needs it.
sock=$dir/dlockd.sock
case $sock in
*[!A-Za-z0-9_./+:@%=,-]*) sock="'$(printf '%s' "$sock" | sed "s/'/'\\\\''/g")'" ;;
esac
cat <<MSG
dlockd on run/dlockd.sock, Redis at $REDIS_URL. Talk to it with:
    socat - UNIX-CONNECT:run/dlockd.sock
Point the clients (dlock, libdlock, Python, Go, Java, Node, dlock.sh) at it:
    export DLOCK_SOCKET=$sock
Ctrl-C stops both.
MSG
"$bin" -c "$dir/dlockd.conf" &
dlockd_pid=$!
status=0
wait "$dlockd_pid" || status=$?
# A hand-over (dlockd --upgrade, SIGUSR2) ends the process started here with
# status 0 once its successor serves, which is no child of this script:
# follow it (polled: only a parent can wait for a process).
last=$dlockd_pid
while [ "$status" -eq 0 ] && pid=$(info_pid) && [ -n "$pid" ] && [ "$pid" != "$last" ]; do
    echo "make run: dlockd pid $last handed over to pid $pid"
    dlockd_pid=$pid
    last=$pid
    while kill -0 "$pid" 2>/dev/null; do sleep 0.2; done
done
dlockd_pid=""
if [ "$status" -ne 0 ]; then
    echo "make run: dlockd exited with status $status" >&2
fi
exit "$status"
