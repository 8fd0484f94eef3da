#!/usr/bin/env bash
# `make bench`: dlockd's benchmark report. Not a test: it never fails because
# a target is missed (exit 0 with "fail" rows); it exits non-zero only when
# the harness itself breaks (a tool missing, dlockd not starting, output it
# cannot parse).
#
#   bash tests/bench/run.sh [DLOCKD_BIN [DLOCK_BENCH_BIN]]
#       defaults: build/dlockd build/dlock-bench
#
# Everything runs on this machine, in a temporary directory, on Unix sockets:
# its own redis-server (--port 0, no persistence) and its own dlockd
# instances; a trap stops them and removes the directory however the run
# ends. In order:
#   1. Redis ceiling: dlockd's acquire script with redis-benchmark (EVALSHA,
#      50 clients, pipeline 16). The Lua text is the build's composed
#      acquire script (<build>/gen/lua/acquire.lua, made from
#      daemon/backend/lua/); its SHA1 must equal the one dlockd itself loads (checked with
#      SCRIPT EXISTS after a SCRIPT FLUSH and a dlockd start), so the bench
#      always measures the script dlockd really runs.
#   2. dlockd uncontended throughput: 50 connections, LOCK/UNLOCK pairs
#      (dlock-bench throughput: one process, async), against the Redis
#      ceiling of 1. (target >= 0.9); the CPU per pair of dlockd and Redis.
#   3. Peers on the same Redis, each compared with dlockd in its own shape:
#      - 8 processes, one blocking connection each, a name of its own:
#        redis-py's Lock (tests/bench/peers.py redispy) against dlockd's
#        Python client (peers.py dlockpy: dlock.Client lock/unlock, target
#        >= 2x redis-py) and against libdlock (dlock-bench blocking:
#        dlock_lock/dlock_unlock, info);
#      - one process, 50 async loops: node redlock and redis-semaphore (one
#        ioredis connection) against 2.: pairs/s (info), and Redis's CPU
#        per pair under dlockd against the leanest node peer's (target
#        <= 1.1x); dlockd's own Node and Go clients against the best (>= 1.0x),
#        its Java client (50 threads on one client, reported); a marked place
#        for the asyncio client against redis-py's asyncio Lock (>= 1.5x);
#      - tagged requests on ONE connection (dlock-bench hol, tagged): 100
#        tagged waits released in random order, release -> grant p99 (<= 2
#        ms); dlockd's CPU per pair with 50 tagged loops on one connection
#        against 50 connections, rounds conns/tagged/tagged/conns (<= 1.1x).
#      The node packages are installed with npm into <build>/bench/node (a
#      scratch copy of tests/bench/node), never into the source tree; without
#      npm, or python3-redis, their rows say skipped.
#   4. Hand-off latency: one daemon, and two daemons sharing the Redis; Redis
#      PING round trip for reference.
#   5. Scale: 10000 connections x 10 watchdog locks with lease_ms 3000; RSS,
#      CPU and renewal traffic over a quiet window.
#   6. Herd: 1000 waiters on one lock, each passing it on at once.
#   7. Replicas, the price of WAIT: the throughput of 2. again, over TCP, on
#      a primary with one replica (redis-server --replicaof), with
#      replicas_ack = auto (WAIT for the replica) and with 0 (no WAIT), in
#      four rounds: auto, 0, 0, auto.
#   8. Failover: a primary, two replicas and three redis-sentinel processes
#      (tests/chaos/sentinel.py; down-after-milliseconds 1000), a dlockd
#      with `sentinels`, two clients looping TRYLOCK <fresh> 0 and LOCK
#      <fresh>; SIGKILL the primary; the time to the first grant afterwards,
#      next to Sentinel's own (SIGKILL -> +switch-master on its pub/sub). A
#      fresh topology for each of BENCH_FAILOVER_RUNS runs.
#   9. Cluster: a Redis Cluster of 3 primaries (no replicas, TCP, made with
#      redis-cli --cluster create) against one standalone redis-server on
#      TCP: the throughput of 2. through one dlockd on each, in four rounds
#      standalone, cluster, cluster, standalone; the Redis commands per
#      pair (INFO commandstats, summed over the primaries); then 3000
#      watchdog locks with lease_ms 3000 on the cluster: renewal EVALSHA
#      calls per round on each primary.
#  10. Quorum: three independent redis-servers (TCP, no persistence) as a
#      Redlock `quorum` of 3 (lease_ms = rejoin_delay_ms = 3000; INFO polled
#      until redis_nodes_up=3) against one standalone redis-server on TCP:
#      the throughput of 2. through one dlockd on each, in four rounds
#      standalone, quorum, quorum, standalone; the Redis commands per grant
#      (INFO commandstats, summed over the nodes) and the fence raise ops
#      among them; then the hand-off of 4. (one daemon) on each.
#  11. Lock kinds: its own redis-server (Unix socket) and dlockd: 50
#      connections taking and dropping read locks of ONE name (RLOCK/RUNLOCK:
#      they share it, each grant a Redis round trip with a timeout key per
#      hold), and 50 connections taking and giving back one permit of ONE
#      semaphore (ACQUIRE 1/RELEASE 1) of 50 permits (nobody waits) and of
#      10 (40 wait), against the throughput of 2. (50 names, LOCK/UNLOCK) on
#      the same daemon, in five rounds: plain, read, sem, sem10, plain. Then
#      a fair lock's hand-off with 99 connections queued behind its holder
#      (dlock-bench fair: FAIRLOCK, UNLOCK and queue again, BENCH_FAIR_ROUNDS
#      hand-offs, default 2000), and with one.
#  12. Fleet: BENCH_FLEET_HOSTS (32) dlockd processes, the "hosts", on the
#      redis-server of 1-6, each with BENCH_FLEET_CLIENTS (8) client
#      processes (dlock-bench fleet: one libdlock connection each, LOCK and
#      UNLOCK of a name drawn among 65536 shared ones, then among 16 hot
#      ones); the peers with as many client processes talking to Redis:
#      redis-py's Lock (peers.py --names: a process each) and the node
#      peers (bench.js --names: a process per host, a loop per client).
#      Sampled during each run: Redis connections, used_memory above the
#      baseline, pub/sub channels, patterns and subscriptions; Redis CPU
#      and commands per pair (hand-off) from /proc and commandstats.
#      Targets, as ratios: connections >= 8x fewer than the best peer,
#      Redis CPU per pair <= 0.5x redis-py's, hand-offs per command sent
#      >= 3x redis-py's (16 hot names). Then, with the same daemons, issue
#      40's shape: FL_ONE_HOSTS (8) daemons x FL_ONE_CLIENTS (2) clients on
#      one name, and the herd of 6. on the first daemon. Issue 40's targets
#      (wake one daemon per release), side by side: failed tries per
#      hand-off (16 hot names) <= 1.5; commands sent per hand-off on one
#      name (EVALSHA + (UN)SUBSCRIBE) <= 3.5, with the grants per client
#      (min / max); Redis CPU per hot hand-off <= redis-py's; hot
#      hand-offs/s >= 1.3x redis-py's and >= before the issue
#      (FL_HOT_BEFORE); hot hand-off p99 <= 0.5x redis-py's; Redis commands
#      run per pair of the 65536 names within 0.1 of before (FL_RUN_BEFORE);
#      the herd's commands sent per hand-off <= 1.0.
#  15. Multi-name locks: 50 connections, each MLOCK of 4 names of its own
#      then MUNLOCK of them (dlock-bench throughput -m multi -p 4, no
#      contention), against LOCK/UNLOCK pairs (2.) on the same daemon, in
#      four rounds plain, multi, multi, plain; the ratio of sets/s to
#      pairs/s (target: a 4-name set costs at most 2x one lock, >= 0.5),
#      and the Redis commands sent per set and per pair (commandstats).
#  13. Access rules: the throughput of 2. (50 connections, LOCK/UNLOCK
#      pairs) through a dlockd with 50 [access] rules against one with
#      none, rounds none/rules/rules/none/rules/none/none/rules, the load generator as a uid that
#      is not root (BENCH_ACCESS_UID, 65534, through setpriv when the bench
#      runs as root). Target: >= 0.95x.
#  17. Live restore (issue 39): a dlockd of its own on the redis-server of
#      1-6 (max_locks_per_uid raised past 100,000): BENCH_UPGRADE_CONNS
#      (10000) connections holding 10 locks each and BENCH_UPGRADE_WAITERS
#      (1000) more each waiting for one of them (LOCK of a held name), while
#      4 probe connections time LOCK/UNLOCK pairs of names of their own
#      (dlock-bench upgrade); SIGUSR2 to the daemon (INFO's pid) after 1 s,
#      INFO polled every 10 ms until upgrades goes up (or upgrade_failures:
#      a failed hand-over must change nothing, so the checks below still
#      run, against the old process), the probes 1 s more.
#      The pause: the longest probe request in progress at some moment from
#      the signal to that INFO (target <= 200 ms); INFO's upgrade_ms (the
#      whole hand-over) and upgrade_state_bytes; then the checks that
#      nothing was lost: each holder's STATUS answers with the fence it was
#      granted (every connection open), locks_held and waiters as before,
#      no !LOST, and each waiter granted (a greater fence) once its holder
#      UNLOCKs. The old process must exit 0; the new one, no child of the
#      bench, is stopped by its pid.
#
# Knobs (environment): BENCH_SECONDS (throughput, 10), BENCH_PEER_SECONDS
# (8), BENCH_SCALE_WINDOW (30), BENCH_SCALE_CONNS (10000), BENCH_HERD_CLIENTS
# (1000), BENCH_REPL_SECONDS (7., per round, 5), BENCH_FAILOVER_RUNS (8., 3),
# BENCH_CLUSTER_SECONDS (9., per round, 5), BENCH_QUORUM_SECONDS (10., per
# round, 5), BENCH_KIND_SECONDS (11., per round, 5), BENCH_FAIR_ROUNDS (11., 2000),
# BENCH_TAGS_SECONDS (3., tagged CPU rounds, 4), BENCH_HOL_ROUNDS (3., 10),
# BENCH_FLEET_HOSTS (12., 32), BENCH_FLEET_CLIENTS (12., per host, 8),
# BENCH_FLEET_SECONDS (12., per run, 4), BENCH_FLEET_ONE_SECONDS (12., one
# name, 5), BENCH_FLEET_HOT_BEFORE and BENCH_FLEET_RUN_BEFORE (12., the
# figures before issue 40), BENCH_ACCESS_SECONDS (13., per round, 5),
# BENCH_ACCESS_UID (13., 65534), BENCH_ELECT_ROUNDS (14., 400),
# BENCH_MULTI_SECONDS (15., per round, 5),
# BENCH_LIST_LOCKS (16., 100000), BENCH_LIST_SECONDS (16., per probe run, 5),
# BENCH_UPGRADE_CONNS (17., 10000), BENCH_UPGRADE_WAITERS (17., 1000),
# BENCH_BUILD_DIR (default: the directory of DLOCK_BENCH_BIN),
# BENCH_ONLY (unset: every section; else a comma-separated list of the
# sections to run, among 1-3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 and 17, e.g.
# BENCH_ONLY=1-3,11: sections 1 to 3 run together, as 2 and 3 are set
# against the figures of 1 and 2; the report's rows are numbered in the
# order they ran).
# SPDX-License-Identifier: MIT
set -u -o pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$here/../.." && pwd)
root=$(cd "$here/../.." && pwd)
invocation="$0${*:+ $*}"
DLOCKD=${1:-build/dlockd}
BENCH=${2:-build/dlock-bench}
TP_S=${BENCH_SECONDS:-10}
PEER_S=${BENCH_PEER_SECONDS:-8}
SCALE_WIN=${BENCH_SCALE_WINDOW:-30}
SCALE_C=${BENCH_SCALE_CONNS:-10000}
SCALE_L=10
SCALE_LEASE=3000
HERD_C=${BENCH_HERD_CLIENTS:-1000}
REPL_S=${BENCH_REPL_SECONDS:-5}
FO_RUNS=${BENCH_FAILOVER_RUNS:-3}
FO_DOWN_AFTER_MS=1000
CL_S=${BENCH_CLUSTER_SECONDS:-5}
CL_N=3
CL_DOG_CONNS=300
CL_DOG_LOCKS=10
CL_DOG_LEASE=3000
CL_DOG_WIN=5
QU_S=${BENCH_QUORUM_SECONDS:-5}
QU_N=3
QU_LEASE=3000
QU_HANDOFFS=2000
KI_S=${BENCH_KIND_SECONDS:-5}
# 3, tagged requests: seconds of each CPU-per-pair round; rounds of 100
# releases for the head-of-line row
TG_S=${BENCH_TAGS_SECONDS:-4}
HOL_ROUNDS=${BENCH_HOL_ROUNDS:-10}
# 13: seconds of each access-rules round, and the uid the load generator
# runs as when the bench runs as root
AC_S=${BENCH_ACCESS_SECONDS:-4}
AC_UID=${BENCH_ACCESS_UID:-65534}
KI_NAME=catalog
KI_FAIR_N=${BENCH_FAIR_ROUNDS:-2000}
FL_HOSTS=${BENCH_FLEET_HOSTS:-32}
FL_CLIENTS=${BENCH_FLEET_CLIENTS:-8}
FL_S=${BENCH_FLEET_SECONDS:-4}
FL_NAMES=65536
FL_HOT=16
FL_SAMPLE_S=0.5
# 12, issue 40's shape: daemons x clients on one name, seconds measured
FL_ONE_HOSTS=8
FL_ONE_CLIENTS=2
FL_ONE_S=${BENCH_FLEET_ONE_SECONDS:-5}
# 12, the figures before issue 40 (wake one daemon per release) that its
# targets keep: hot hand-offs/s, and Redis commands run per pair in the
# uncontended fleet (within FL_RUN_TOL). Measured with BENCH_ONLY=12 on
# the 2-core machine just before (tests/bench/README.md).
FL_HOT_BEFORE=${BENCH_FLEET_HOT_BEFORE:-5770}
FL_RUN_BEFORE=${BENCH_FLEET_RUN_BEFORE:-7.916}
FL_RUN_TOL=0.1
EL_ROUNDS=${BENCH_ELECT_ROUNDS:-400}
ML_S=${BENCH_MULTI_SECONDS:-5}
# 16: locks in Redis, LIST's limit, rounds timed, seconds of each probe run
LS_N=${BENCH_LIST_LOCKS:-100000}
LS_LIMIT=1000
LS_ROUNDS=20
LS_S=${BENCH_LIST_SECONDS:-5}
# 17: holders, locks each, waiters, probes, seconds of probing before the
# signal and after the hand-over, the pause's target (ms)
UP_C=${BENCH_UPGRADE_CONNS:-10000}
UP_L=10
UP_W=${BENCH_UPGRADE_WAITERS:-1000}
UP_P=4
UP_WIN=1
UP_PAUSE_MS=200
ONLY=${BENCH_ONLY-}
PY=/usr/bin/python3
T=""
PIDS=()

# ---- plumbing -------------------------------------------------------------

say() { printf '%s\n' "$*" >&2; }
fatal() {
    say "bench: HARNESS FAILURE: $*"
    exit 1
}

# shellcheck disable=SC2317 # called by the trap
cleanup() {
    local pid i
    trap - EXIT INT TERM
    for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null; done
    for pid in "${PIDS[@]}"; do
        for ((i = 0; i < 50; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    done
    [ -n "$T" ] && rm -rf "$T"
}
trap cleanup EXIT
trap 'say "bench: interrupted"; exit 130' INT TERM

# stop_pids PID...: SIGTERM each server a section started, reap it, forget it.
stop_pids() {
    local pid
    for pid in "$@"; do
        kill -TERM "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
        forget_pid "$pid"
    done
}

# A child that has been reaped leaves the cleanup list.
forget_pid() {
    local p keep=()
    for p in "${PIDS[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
    PIDS=("${keep[@]}")
}

isnum() { [[ ${1-} =~ ^[0-9]+(\.[0-9]+)?$ ]]; }
# kv "key=value ..." key
kv() { awk -v k="$2" '{ for (i = 1; i <= NF; i++) { n = index($i, "="); if (n && substr($i, 1, n - 1) == k) { print substr($i, n + 1); exit } } }' <<<"$1"; }
calc() { awk "BEGIN { printf \"%.${2:-2}f\", ($1) }"; }
# holds "a op b" with awk arithmetic
holds() { awk "BEGIN { exit !(($1) $2 ($3)) }"; }
need() {
    isnum "${1-}" || fatal "$2: expected a number, got '${1-}'"
}
# want N: section N runs (every section does without BENCH_ONLY).
want() { [ -z "$ONLY" ] || [[ ",$ONLY," == *",$1,"* ]]; }

PROBLEMS=()
problem() {
    say "bench: DAEMON PROBLEM: $*"
    PROBLEMS+=("$*")
}

# ---- the table --------------------------------------------------------------

R_NUM=() R_MEAS=() R_VAL=() R_TGT=() R_RES=()
nrow=0
row() { # measure value target result
    nrow=$((nrow + 1))
    R_NUM+=("$nrow") R_MEAS+=("$1") R_VAL+=("$2") R_TGT+=("$3") R_RES+=("$4")
}
info() { row "$1" "$2" "-" "info"; }
# check measure value unit op target: a figure with a target
check() {
    local m=$1 v=$2 unit=$3 op=$4 t=$5 res
    if ! isnum "$v"; then
        row "$m" "$v" "$op $t$unit" "fail"
        return
    fi
    if holds "$v" "$op" "$t"; then res=pass; else res=fail; fi
    row "$m" "$v$unit" "$op $t$unit" "$res"
}
# failed measure reason target: the measurement could not be made
failed() { row "$1" "ERROR: $2" "$3" "fail"; }
skipped() { row "$1" "$2" "${3:--}" "skipped"; }

# ---- processes --------------------------------------------------------------

rcli() { redis-cli -s "$RSOCK" "$@"; }

declare -A DPID=() DSOCK=()
# start_dlockd NAME [extra config text] [[redis] section body; default: url of our redis]
start_dlockd() {
    local name=$1 extra=${2-} redis=${3-}
    local sock="$T/$name.sock" conf="$T/$name.conf"
    [ -n "$redis" ] || redis="url = unix://$RSOCK"
    # max_clients_per_uid too: every load generator runs as one uid (5000
    # by default refused the scale section's connection 5000).
    printf '[server]\nsocket=%s\nmax_clients = 15000\nmax_clients_per_uid = 15000\n[redis]\n%s\n%s' \
        "$sock" "$redis" "$extra" >"$conf"
    chmod 600 "$conf" # dlockd refuses, as root, a file others can write
    "$DLOCKD" -c "$conf" 2>>"$T/dlockd-$name.log" &
    DPID[$name]=$!
    DSOCK[$name]=$sock
    PIDS+=("$!")
    if ! "$BENCH" wait -s "$sock" -t 10000 2>>"$T/dlockd-$name.log"; then
        say "--- dlockd $name log:"
        tail -n 20 "$T/dlockd-$name.log" >&2
        fatal "dlockd $name did not start (or never reached redis=up)"
    fi
}

# True if dlockd NAME still runs; reports a crash once.
dlockd_alive() {
    local name=$1 pid=${DPID[$1]-} rc
    [ -n "$pid" ] || return 1
    kill -0 "$pid" 2>/dev/null && return 0
    wait "$pid"
    rc=$?
    forget_pid "$pid"
    problem "dlockd $name died (exit status $rc$( ((rc > 128)) && echo ", signal $((rc - 128))")); last log lines: $(tail -n 3 "$T/dlockd-$name.log" | tr '\n' '|')"
    DPID[$name]=""
    return 1
}

stop_dlockd() {
    local name=$1 pid=${DPID[$1]-} i rc
    [ -n "$pid" ] || return 0
    dlockd_alive "$name" || return 0
    kill -TERM "$pid"
    for ((i = 0; i < 100; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
        problem "dlockd $name did not stop within 10 s of SIGTERM (killed)"
        kill -KILL "$pid"
    fi
    wait "$pid"
    rc=$?
    forget_pid "$pid"
    ((rc == 0 || rc == 137)) || problem "dlockd $name exited with status $rc after SIGTERM"
    DPID[$name]=""
}

ensure_dlockd() { # NAME [extra config]
    dlockd_alive "$1" || start_dlockd "$@"
}

# run_bench LABEL LIMIT_S args...: OUT gets stdout. Returns 1 after a
# daemon problem (recorded), exits on a harness failure.
OUT=""
run_bench() {
    local label=$1 limit=$2 rc=0
    shift 2
    OUT=$(timeout -k 5 "$limit" "$BENCH" "$@" 2>"$T/bench-$label.err") || rc=$?
    case $rc in
    0) return 0 ;;
    3) problem "$label: $(tr '\n' ' ' <"$T/bench-$label.err")" ;;
    124 | 137) problem "$label: dlock-bench $1 did not finish within ${limit} s (daemon hangs?)" ;;
    *) fatal "$label: dlock-bench $1 failed (exit $rc): $(cat "$T/bench-$label.err")" ;;
    esac
    local name
    for name in "${!DPID[@]}"; do dlockd_alive "$name" >/dev/null; done
    return 1
}

flush_redis() { rcli FLUSHALL >/dev/null || fatal "FLUSHALL failed"; }

clk_tck=$(getconf CLK_TCK)
cpu_ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat" 2>/dev/null; }
# "<user ticks> <kernel ticks> <read syscalls + write syscalls>" of PID
# (/proc/PID/io counts read-like and write-like calls; epoll_wait is not).
cpu_split() {
    { awk '{ sub(/^.*\) /, ""); printf "%s %s ", $12, $13 }' "/proc/$1/stat" &&
        awk -F': ' '/^sysc[rw]:/ { n += $2 } END { print n + 0 }' "/proc/$1/io"; } 2>/dev/null
}
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status" 2>/dev/null; }
now_s() { date +%s.%N; }

free_ports() { "$PY" -c 'import socket, sys
s = [socket.socket() for _ in range(int(sys.argv[1]))]
for x in s: x.bind(("127.0.0.1", 0))
print(" ".join(str(x.getsockname()[1]) for x in s))' "$1"; }

# cmdstats PORT...: "<command> <calls>" lines of INFO commandstats, summed
# over the redis-servers at 127.0.0.1:PORT...
cmdstats() {
    local p
    for p in "$@"; do redis-cli -h 127.0.0.1 -p "$p" INFO commandstats; done |
        awk -F'[:=,]' '/^cmdstat_/ { n[substr($1, 9)] += $3 } END { for (c in n) print c, n[c] }'
}
# evalsha_stat: "<calls> <usec> <inner calls> <inner usec>" on the main
# redis-server: EVALSHA's, and those of the commands run inside scripts
# (SCRIPT_INNER: their redis.call()s and the time spent in them).
evalsha_stat() {
    rcli INFO commandstats |
        awk -F'[:=,]' -v inner="$SCRIPT_INNER" '
            BEGIN { n = split(inner, a, " "); for (i = 1; i <= n; i++) in_script["cmdstat_" a[i]] = 1 }
            /^cmdstat_evalsha:/ { c = $3; u = $5 }
            $1 in in_script { ic += $3; iu += $5 }
            END { print c + 0, u + 0, ic + 0, iu + 0 }'
}
# calls_of COMMAND SNAPSHOT: the calls of COMMAND in a cmdstats snapshot.
calls_of() { awk -v c="$1" '$1 == c { n = $2 } END { print n + 0 }' <<<"$2"; }
# delta_of COMMAND BEFORE AFTER: its calls between two cmdstats snapshots.
delta_of() { echo $(($(calls_of "$1" "$3") - $(calls_of "$1" "$2"))); }
# cmd_delta BEFORE AFTER: "total=N sent=N evalsha=N" between two cmdstats
# snapshots: every command Redis ran, those sent by a client (the total
# without SCRIPT_INNER), and EVALSHA; not the INFO that took the snapshots.
cmd_delta() {
    awk -v inner="$SCRIPT_INNER" 'BEGIN { n = split(inner, a, " "); for (i = 1; i <= n; i++) in_script[a[i]] = 1 }
        FNR == NR { b[$1] += $2; next }
        { a[$1] += $2 }
        END {
            for (c in a) {
                if (c == "info") continue
                d = a[c] - b[c]; total += d
                if (!(c in in_script)) sent += d
                if (c == "evalsha") ev += d
            }
            printf "total=%d sent=%d evalsha=%d\n", total, sent, ev
        }' <(echo "$1") <(echo "$2")
}
slash() { local IFS=/; echo "$*"; }

# hold_locks LABEL SOCK CONNS LOCKS: dlock-bench scale in the background
# (HOLD_PID): CONNS connections holding LOCKS watchdog locks each until
# release_locks. Waits until all are granted (HOLD_READY: its "ready"
# line); returns 1, a problem recorded, if they were not.
hold_locks() {
    local label=$1 i
    "$BENCH" scale -s "$2" -c "$3" -l "$4" -H 600 >"$T/$label.out" 2>"$T/$label.err" &
    HOLD_PID=$!
    PIDS+=("$HOLD_PID")
    for ((i = 0; i < 1200; i++)); do
        grep -q '^ready' "$T/$label.out" && break
        kill -0 "$HOLD_PID" 2>/dev/null || break
        sleep 0.1
    done
    HOLD_READY=$(grep '^ready' "$T/$label.out")
    [ -n "$HOLD_READY" ] && return 0
    kill -TERM "$HOLD_PID" 2>/dev/null
    wait "$HOLD_PID"
    forget_pid "$HOLD_PID"
    problem "$label: locks were not all granted: $(tr '\n' ' ' <"$T/$label.err")"
    return 1
}
# release_locks LABEL: ends hold_locks's load generator (SIGTERM: it closes
# its connections); HOLD_LOST gets the !LOST events it saw.
release_locks() {
    local label=$1 rc
    kill -TERM "$HOLD_PID" 2>/dev/null
    wait "$HOLD_PID"
    rc=$?
    forget_pid "$HOLD_PID"
    ((rc == 0)) || problem "$label: the load generator failed while holding: $(tr '\n' ' ' <"$T/$label.err")"
    HOLD_LOST=$(kv "$(grep '^done' "$T/$label.out")" lost_events)
}

# redispy_ready: py_ok=1 when /usr/bin/python3 has redis-py (installed with
# apt-get the first time it is missing), else 0.
py_ok=""
redispy_ready() {
    local sudo=""
    [ -n "$py_ok" ] && return
    py_ok=1
    if ! "$PY" -c 'import redis' 2>/dev/null; then
        say "bench: installing python3-redis"
        [ "$(id -u)" = 0 ] || sudo=sudo
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q python3-redis >"$T/apt.log" 2>&1 ||
            say "bench: apt-get install python3-redis failed: $(tail -n 3 "$T/apt.log")"
        "$PY" -c 'import redis' 2>/dev/null || py_ok=0
    fi
}

# node_peers_ready: node_ok=1 when the node peers are installed in node_dir
# (a scratch copy of tests/bench/node, npm install run there once), else 0.
node_ok=""
node_peers_ready() {
    [ -n "$node_ok" ] && return
    node_dir="$BUILD_DIR/bench/node"
    node_ok=0
    if command -v node >/dev/null && command -v npm >/dev/null; then
        mkdir -p "$node_dir" && cp "$here/node/package.json" "$here/node/bench.js" "$node_dir/" &&
            (cd "$node_dir" && timeout 90 npm install --no-audit --no-fund --loglevel=error \
                --fetch-retries=1 --fetch-retry-mintimeout=1000 --fetch-retry-maxtimeout=3000 \
                --fetch-timeout=20000 >"$T/npm.log" 2>&1) && node_ok=1
        ((node_ok)) || say "bench: npm install in $node_dir failed or timed out: $(grep -v nodedir "$T/npm.log" 2>/dev/null | tail -n 3 | tr '\n' ' ')"
    fi
}

# ---- preflight --------------------------------------------------------------

cd "$root" || fatal "cannot cd to $root"
[[ -z $ONLY || $ONLY =~ ^(1-3|[4-9]|1[0-7])(,(1-3|[4-9]|1[0-7]))*$ ]] ||
    fatal "BENCH_ONLY='$ONLY': expected a comma-separated list of 1-3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17"
[ -x "$DLOCKD" ] || fatal "no dlockd binary at $DLOCKD (make build/dlockd)"
[ -x "$BENCH" ] || fatal "no dlock-bench binary at $BENCH"
# The commands dlockd's scripts run inside Redis (redis.call, and the
# publish command passed in ARGV): Redis 7 counts them in commandstats too,
# but they are not round trips. Read from the scripts, as in section 1.
SCRIPT_INNER="publish spublish $(cat daemon/backend/lua/*.lua daemon/backend/lua/part/*.lua | grep -o "redis\.p\?call('[a-z]*'" | cut -d"'" -f2 | sort -u | tr '\n' ' ')"
for tool in redis-server redis-cli redis-benchmark awk sha1sum timeout; do
    command -v "$tool" >/dev/null || fatal "$tool is missing"
done
DLOCKD=$(cd "$(dirname "$DLOCKD")" && pwd)/$(basename "$DLOCKD")
BENCH=$(cd "$(dirname "$BENCH")" && pwd)/$(basename "$BENCH")
BUILD_DIR=${BENCH_BUILD_DIR:-$(dirname "$BENCH")}
T=$(mktemp -d /tmp/dlockd-bench.XXXXXX) || fatal "mktemp failed"
RSOCK="$T/redis.sock"
ulimit -n "$(ulimit -Hn)" 2>/dev/null
started=$(date +%s)

say "== dlockd benchmark (temp dir $T)"
redis-server --port 0 --unixsocket "$RSOCK" --unixsocketperm 700 --save "" --appendonly no \
    --dir "$T" --logfile "$T/redis.log" &
REDIS_PID=$!
PIDS+=("$!")
for ((i = 0; i < 500; i++)); do rcli PING >/dev/null 2>&1 && break; sleep 0.01; done
rcli PING >/dev/null 2>&1 || fatal "redis-server did not start: $(tail -n 5 "$T/redis.log")"
redis_version=$(rcli INFO server | awk -F: '/^redis_version/ { sub(/\r/, "", $2); print $2 }')

# ---- 1. Redis ceiling ---------------------------------------------------------

# Sections 1 to 6 share the redis-server on the Unix socket and dlockd main
# (each starts it when it needs it); 2 and 3 use the figures of 1 and 2.
if want 1-3; then
    say "== 1/17 Redis ceiling: dlockd's acquire script under redis-benchmark"
    # The acquire script as the build composed it from daemon/backend/lua/.
    cp "$(dirname "$DLOCKD")/gen/lua/acquire.lua" "$T/acquire.lua" 2>/dev/null
    [ -s "$T/acquire.lua" ] || fatal "no $(dirname "$DLOCKD")/gen/lua/acquire.lua: build dlockd first"
    SHA=$(rcli -x SCRIPT LOAD <"$T/acquire.lua")
    [ "$SHA" = "$(sha1sum <"$T/acquire.lua" | cut -c1-40)" ] || fatal "SCRIPT LOAD returned '$SHA'"
    rcli CONFIG RESETSTAT >/dev/null
    bench_csv=$(redis-benchmark -s "$RSOCK" -c 50 -P 16 -n 500000 -r 100000 --csv \
        EVALSHA "$SHA" 2 'dlock:k__rand_int__' 'redisson_lock_token:{dlock:k__rand_int__}' 30000 \
        'owner:__rand_int__' 2>"$T/redis-benchmark.err") || fatal "redis-benchmark failed: $(cat "$T/redis-benchmark.err")"
    ceil_calls=$(tail -n 1 <<<"$bench_csv" | awk -F'"' '{ print $4 }')
    need "$ceil_calls" "redis-benchmark --csv rps"
    ceil_calls=$(calc "$ceil_calls" 0)
    ceil_pairs=$(calc "$ceil_calls / 2" 0)
    info "Redis ceiling: acquire-script EVALSHA calls/s (50 clients, -P 16)" "$ceil_calls/s"
    info "Redis ceiling pairs/s (= calls/s / 2)" "$ceil_pairs/s"
    # Which way the script went: hset = new grant, pttl = taken, hincrby = reentry.
    mix=$(rcli INFO commandstats | awk -F'[=,:]' '/^cmdstat_(hset|pttl|hincrby):/ { sub(/^cmdstat_/, "", $1); n[$1] = $3; t += $3 }
        END { if (t) printf "%.0f%% granted / %.0f%% taken / %.0f%% reentered", 100 * n["hset"] / t, 100 * n["pttl"] / t, 100 * n["hincrby"] / t }')
    info "Redis ceiling: outcome mix of the benchmark's acquire calls" "${mix:-unknown}"

    # dlockd must load exactly this script.
    rcli SCRIPT FLUSH >/dev/null
    flush_redis
    start_dlockd main
    [ "$(rcli SCRIPT EXISTS "$SHA")" = 1 ] ||
        fatal "the build's gen/lua/acquire.lua is not the script dlockd loads"

# ---- 2. uncontended throughput ------------------------------------------------

    say "== 2/17 dlockd uncontended throughput: 50 connections, ${TP_S} s"
    tp="" redis_pair_us=""
    ev0=$(evalsha_stat) ds0=$(cpu_split "${DPID[main]}")
    c0=$(now_s) d0=$(cpu_ticks "${DPID[main]}") r0=$(cpu_ticks "$REDIS_PID")
    if run_bench throughput $((TP_S + 40)) throughput -s "${DSOCK[main]}" -c 50 -d "$TP_S" -w 1; then
        c1=$(now_s) d1=$(cpu_ticks "${DPID[main]}") r1=$(cpu_ticks "$REDIS_PID")
        ev1=$(evalsha_stat) ds1=$(cpu_split "${DPID[main]}")
        tp=$(kv "$OUT" pairs_per_sec)
        need "$tp" "throughput pairs_per_sec"
        info "dlockd uncontended LOCK+UNLOCK pairs/s (50 connections)" "$tp/s"
        info "dlockd pair latency p50 / p99 (50 connections)" "$(kv "$OUT" pair_p50_us) / $(kv "$OUT" pair_p99_us) us"
        if isnum "$d1" && isnum "$r1"; then
            info "CPU during it, % of one core: dlockd / redis-server / load generator" \
                "$(calc "($d1 - $d0) / $clk_tck / ($c1 - $c0) * 100" 0) / $(calc "($r1 - $r0) / $clk_tck / ($c1 - $c0) * 100" 0) / $(calc "$(kv "$OUT" client_cpu_pct)" 0) %"
            # CPU time per pair: steadier than pairs/s on a shared machine.
            # Every pair of the run counts (all_pairs, warm-up included),
            # as the CPU does from before the load generator started.
            all=$(kv "$OUT" all_pairs)
            if isnum "$all" && ((all > 0)); then
                # Information, with their floors below: the absolute targets
                # (5 and 6 us) are retired; what is set against a peer is
                # Redis's CPU per pair (section 3, the leanest node peer).
                info "dlockd CPU per LOCK+UNLOCK pair (50 connections; floor: its syscalls, 2 rows below)" \
                    "$(calc "($d1 - $d0) / $clk_tck * 1000000 / $all" 1) us"
                redis_pair_us=$(calc "($r1 - $r0) / $clk_tck * 1000000 / $all" 1)
                info "redis-server CPU per LOCK+UNLOCK pair (50 connections; floor: its redis.call()s, 4 rows below)" \
                    "$redis_pair_us us"
                # The floors: what the syscalls alone cost dlockd, and what
                # the commands inside the scripts cost Redis.
                read -r du0 dk0 dn0 <<<"$ds0"
                read -r du1 dk1 dn1 <<<"$ds1"
                if isnum "${dn1-}" && ((dn1 > dn0)); then
                    info "dlockd CPU per pair: user / kernel" \
                        "$(calc "($du1 - $du0) / $clk_tck * 1000000 / $all" 1) / $(calc "($dk1 - $dk0) / $clk_tck * 1000000 / $all" 1) us"
                    info "dlockd read+write syscalls per pair; kernel CPU per syscall (the floor: their product)" \
                        "$(calc "($dn1 - $dn0) / $all" 2); $(calc "($dk1 - $dk0) / $clk_tck * 1000000 / ($dn1 - $dn0)" 2) us"
                fi
                read -r evc0 evu0 inc0 inu0 <<<"$ev0"
                read -r evc1 evu1 inc1 inu1 <<<"$ev1"
                if ((evc1 > evc0)); then
                    info "Redis: EVALSHA calls per pair; script time per lock operation (commandstats)" \
                        "$(calc "($evc1 - $evc0) / $all" 2); $(calc "($evu1 - $evu0) / (2 * $all)" 2) us"
                    info "Redis per pair: redis.call()s; time inside them; the rest of the scripts' time" \
                        "$(calc "($inc1 - $inc0) / $all" 2); $(calc "($inu1 - $inu0) / $all" 2) us; $(calc "($evu1 - $evu0 - $inu1 + $inu0) / $all" 2) us"
                fi
            fi
        fi
        check "dlockd pairs/s / Redis ceiling pairs/s" "$(calc "$tp / $ceil_pairs" 2)" "" ">=" 0.9
    else
        failed "dlockd uncontended pairs/s (50 connections)" "see problems" "-"
        failed "dlockd pairs/s / Redis ceiling pairs/s" "no throughput" ">= 0.9"
    fi
    flush_redis

# ---- 3. peers -------------------------------------------------------------------

    say "== 3/17 peers on the same Redis: 8 processes (redis-py, dlockd's Python and C clients); 50 async loops (node)"
    ensure_dlockd main
    # 8 processes, one connection each, each looping on a name of its own.
    redispy_ready
    peer_py="" peer_py_cpu=""
    if ((py_ok)); then
        peer_out=$(timeout -k 5 $((PEER_S + 60)) "$PY" "$here/peers.py" redispy --socket "$RSOCK" \
            --procs 8 --seconds "$PEER_S" 2>"$T/peers.err") || fatal "peers.py failed: $(cat "$T/peers.err")"
        peer_py=$(kv "$peer_out" pairs_per_sec) peer_py_cpu=$(kv "$peer_out" cpu_us_per_pair)
        need "$peer_py" "peers.py pairs_per_sec"
        info "redis-py Lock pairs/s (8 processes)" "$peer_py/s"
    else
        skipped "redis-py Lock pairs/s (8 processes)" "skipped (python3-redis unavailable)"
    fi
    flush_redis
    # dlockd's Python client (clients/python/dlock.py), the same loop.
    dpy="" dpy_cpu=""
    if dpy_out=$(timeout -k 5 $((PEER_S + 60)) "$PY" "$here/peers.py" dlockpy --socket "${DSOCK[main]}" \
        --procs 8 --seconds "$PEER_S" 2>"$T/peers-dlockpy.err"); then
        dpy=$(kv "$dpy_out" pairs_per_sec) dpy_cpu=$(kv "$dpy_out" cpu_us_per_pair)
        need "$dpy" "peers.py dlockpy pairs_per_sec"
        info "dlockd Python client (dlock.py) pairs/s (8 processes)" "$dpy/s"
    else
        problem "peers.py dlockpy failed: $(tail -n 3 "$T/peers-dlockpy.err" | tr '\n' ' ')"
        failed "dlockd Python client (dlock.py) pairs/s (8 processes)" "see problems" "-"
        dlockd_alive main >/dev/null
    fi
    label="dlockd Python client / redis-py Lock (8 processes each)"
    if ((!py_ok)); then
        skipped "$label" "skipped (python3-redis unavailable)" ">= 2x"
    elif isnum "$dpy"; then
        check "$label" "$(calc "$dpy / $peer_py" 2)" "x" ">=" 2
    else
        failed "$label" "no dlockd Python client figure" ">= 2x"
    fi
    flush_redis
    # libdlock's blocking calls (dlock-bench blocking), the same loop.
    ensure_dlockd main
    dc="" dc_cpu=""
    if run_bench blocking $((PEER_S + 60)) blocking -s "${DSOCK[main]}" -c 8 -d "$PEER_S" -w 1; then
        dc=$(kv "$OUT" pairs_per_sec) dc_cpu=$(kv "$OUT" client_cpu_us_per_pair)
        need "$dc" "blocking pairs_per_sec"
        info "dlockd C client (libdlock, blocking) pairs/s (8 processes)" "$dc/s"
        if isnum "$peer_py"; then
            info "dlockd C client / redis-py Lock (8 processes each)" "$(calc "$dc / $peer_py" 2)x"
        fi
    else
        failed "dlockd C client (libdlock, blocking) pairs/s (8 processes)" "see problems" "-"
    fi
    info "client CPU per pair, 8 processes: libdlock / dlock.py / redis-py Lock" \
        "${dc_cpu:--} / ${dpy_cpu:--} / ${peer_py_cpu:--} us"
    flush_redis

    # One process, 50 async loops: node against dlock-bench throughput (2.).
    node_peers_ready
    best_node="" best_node_name="" lean_node="" lean_node_name=""
    for peer in redlock semaphore; do
        label="node redlock (5.0.0-beta.2) pairs/s (50 loops, 1 ioredis conn)"
        [ "$peer" = semaphore ] && label="node redis-semaphore Mutex pairs/s (50 loops, 1 ioredis conn)"
        if ((!node_ok)); then
            skipped "$label" "skipped (npm unavailable)"
            continue
        fi
        r0=$(cpu_ticks "$REDIS_PID")
        nout=$(cd "$node_dir" && timeout -k 5 $((PEER_S + 60)) node bench.js "$peer" --socket "$RSOCK" \
            --loops 50 --seconds "$PEER_S" 2>"$T/node-$peer.err") || fatal "node bench.js $peer failed: $(cat "$T/node-$peer.err")"
        r1=$(cpu_ticks "$REDIS_PID")
        v=$(kv "$nout" pairs_per_sec)
        need "$v" "node $peer pairs_per_sec"
        info "$label" "$v/s"
        all=$(kv "$nout" all_pairs)
        if isnum "$all" && ((all > 0)) && isnum "$r1"; then
            v_cpu=$(calc "($r1 - $r0) / $clk_tck * 1000000 / $all" 1)
            info "redis-server CPU per pair, node $peer (dlockd: row \"redis-server CPU per LOCK+UNLOCK pair\")" \
                "$v_cpu us"
            if [ -z "$lean_node" ] || holds "$v_cpu" "<" "$lean_node"; then lean_node=$v_cpu lean_node_name=$peer; fi
        fi
        isnum "$tp" && info "dlockd (50 connections) / node $peer" "$(calc "$tp / $v" 2)x"
        if [ -z "$best_node" ] || holds "$v" ">" "$best_node"; then best_node=$v best_node_name=$peer; fi
        flush_redis
    done
    # Redis is the bottleneck of both shapes, so pairs/s is information;
    # the target is Redis's CPU per pair, while dlockd carries Redisson's
    # hash layout and a fence (7 redis.call()s a pair) and the node peers
    # a SET NX PX and a compare-and-delete.
    if ((node_ok)) && isnum "$tp" && isnum "$best_node"; then
        info "dlockd / best node peer ($best_node_name), pairs/s" "$(calc "$tp / $best_node" 2)x"
    fi
    label="Redis CPU per pair: dlockd (50 connections) / leanest node peer"
    if ((!node_ok)); then
        skipped "$label" "skipped (npm unavailable)" "<= 1.1x"
    elif isnum "$redis_pair_us" && isnum "$lean_node"; then
        check "$label ($lean_node_name: $lean_node us)" "$(calc "$redis_pair_us / $lean_node" 2)" "x" "<=" 1.1
    else
        failed "$label" "no CPU figure" "<= 1.1x"
    fi

    # dlockd's own clients in the peers' shape: one process, 50 async loops
    # (Node), goroutines (Go) or threads (Java), ONE connection to dlockd, a
    # name each.
    # $1 label, $2... the command; sets cl_v (pairs/s) and prints the rows;
    # cl_shape says what ran.
    cl_shape="50 loops, 1 connection"
    client_row() {
        local label=$1 out d0 d1 r0 r1 all
        shift
        d0=$(cpu_ticks "${DPID[main]}") r0=$(cpu_ticks "$REDIS_PID")
        out=$(timeout -k 5 $((PEER_S + 60)) "$@" 2>"$T/client-row.err") ||
            { problem "$label: $(tail -n 3 "$T/client-row.err" | tr '\n' ' ')"; cl_v=""; return; }
        d1=$(cpu_ticks "${DPID[main]}") r1=$(cpu_ticks "$REDIS_PID")
        cl_v=$(kv "$out" pairs_per_sec) all=$(kv "$out" all_pairs)
        need "$cl_v" "$label pairs_per_sec"
        info "$label pairs/s ($cl_shape)" "$cl_v/s"
        if isnum "$all" && ((all > 0)); then
            info "$label: CPU per pair, dlockd / redis-server" \
                "$(calc "($d1 - $d0) / $clk_tck * 1000000 / $all" 1) / $(calc "($r1 - $r0) / $clk_tck * 1000000 / $all" 1) us"
        fi
        flush_redis
    }
    if command -v node >/dev/null; then
        client_row "dlockd Node client" node "$ROOT/clients/node/bench.js" --socket "${DSOCK[main]}" \
            --loops 50 --seconds "$PEER_S"
        if ((node_ok)) && isnum "$cl_v"; then
            check "dlockd Node client / best node peer ($best_node_name)" \
                "$(calc "$cl_v / $best_node" 2)" "x" ">=" 1.0
        else
            skipped "dlockd Node client / best node peer" "skipped (no peer or no client figure)" ">= 1.0x"
        fi
    else
        skipped "dlockd Node client pairs/s" "skipped (no node)"
    fi
    if [ -x "$BUILD_DIR/go/bin/dlock-bench-go" ]; then
        client_row "dlockd Go client" "$BUILD_DIR/go/bin/dlock-bench-go" -s "${DSOCK[main]}" -c 50 \
            -d "$PEER_S" -w 1
        if ((node_ok)) && isnum "$cl_v"; then
            check "dlockd Go client / best node peer ($best_node_name)" \
                "$(calc "$cl_v / $best_node" 2)" "x" ">=" 1.0
        else
            skipped "dlockd Go client / best node peer" "skipped (no peer or no client figure)" ">= 1.0x"
        fi
    else
        skipped "dlockd Go client pairs/s" "skipped (make clients-go)"
        skipped "dlockd Go client / best node peer" "skipped (make clients-go)" ">= 1.0x"
    fi
    # Java: threads, not loops; its figure is reported (no target).
    if [ -f "$BUILD_DIR/dlock-tests.jar" ] && command -v java >/dev/null; then
        cl_shape="50 threads, 1 connection"
        client_row "dlockd Java client" java -cp "$BUILD_DIR/dlock.jar:$BUILD_DIR/dlock-tests.jar" \
            io.github.dlockd.dlock.bench.Bench \
            --socket "${DSOCK[main]}" --threads 50 --seconds "$PEER_S"
        cl_shape="50 loops, 1 connection"
        if ((node_ok)) && isnum "$cl_v"; then
            info "dlockd Java client / best node peer ($best_node_name)" "$(calc "$cl_v / $best_node" 2)x"
        fi
    else
        skipped "dlockd Java client pairs/s" "skipped (make clients-java)"
    fi

    # dlockd's asyncio client, 50 tasks on one dlock_asyncio client, against
    # redis-py's asyncio Lock (redis.asyncio.lock.Lock, 50 tasks, one
    # connection pool), on the same Redis, one after the other
    # (asyncio_peers.py): pairs/s of each, dlockd's and redis-server's CPU
    # per pair under the client (client_row), and the ratio, target >= 1.5x.
    aio_label="dlockd asyncio client / redis-py asyncio Lock (50 tasks each)"
    if ! "$PY" -c 'import redis.asyncio' 2>/dev/null; then
        skipped "$aio_label" "skipped (python3-redis without redis.asyncio)" ">= 1.5x"
    elif ! aio_out=$(timeout -k 5 $((PEER_S + 60)) "$PY" "$here/asyncio_peers.py" redisaio \
            --socket "$RSOCK" --tasks 50 --seconds "$PEER_S" 2>"$T/aio.err"); then
        failed "$aio_label" "redis-py asyncio: $(tail -n 3 "$T/aio.err" | tr '\n' ' ')" ">= 1.5x"
    else
        aio_peer=$(kv "$aio_out" pairs_per_sec)
        need "$aio_peer" "asyncio_peers.py redisaio pairs_per_sec"
        info "redis-py asyncio Lock pairs/s (50 tasks, 1 connection pool)" "$aio_peer/s"
        flush_redis
        cl_shape="50 tasks, 1 connection"
        client_row "dlockd asyncio client" "$PY" "$here/asyncio_peers.py" dlockaio \
            --socket "${DSOCK[main]}" --tasks 50 --seconds "$PEER_S"
        cl_shape="50 loops, 1 connection"
        if isnum "$cl_v" && isnum "$aio_peer"; then
            check "$aio_label" "$(calc "$cl_v / $aio_peer" 2)" "x" ">=" 1.5
        else
            failed "$aio_label" "no figure" ">= 1.5x"
        fi
    fi

    # Tagged requests, the protocol itself (dlock-bench speaks it): no
    # head-of-line blocking, and what one connection carrying 50 loops
    # costs dlockd per pair against 50 connections.
    ensure_dlockd main
    if run_bench hol 120 hol -s "${DSOCK[main]}" -c 100 -n "$HOL_ROUNDS" -w 1; then
        check "no head-of-line blocking: release -> grant p99 (100 tagged waits on ONE connection, released one at a time in random order, seed $(kv "$OUT" seed); $(kv "$OUT" samples) grants)" \
            "$(calc "$(kv "$OUT" p99_us) / 1000" 3)" " ms" "<=" 2
        info "no head-of-line blocking: release -> grant p50 / max" \
            "$(calc "$(kv "$OUT" p50_us) / 1000" 3) / $(calc "$(kv "$OUT" max_us) / 1000" 3) ms"
    else
        failed "no head-of-line blocking: release -> grant p99 (100 tagged waits on one connection)" \
            "see problems" "<= 2 ms"
    fi
    flush_redis
    # Rounds conns, tagged, tagged, conns: a load that drifts during the
    # section weighs on both alike. CPU from /proc over each whole run,
    # divided by every pair it made (all_pairs, warm-up included).
    tg_v_conns=() tg_v_tagged=() tg_lat=""
    declare -A tg_d=([conns]=0 [tagged]=0) tg_r=([conns]=0 [tagged]=0) tg_n=([conns]=0 [tagged]=0) tg_ev=([conns]=0 [tagged]=0)
    for round in conns tagged tagged conns; do
        tg_args=(throughput -s "${DSOCK[main]}" -c 50 -d "$TG_S" -w 1)
        [ "$round" = tagged ] && tg_args=(tagged -s "${DSOCK[main]}" -c 50 -d "$TG_S" -w 1)
        ensure_dlockd main
        read -r evc0 _ <<<"$(evalsha_stat)"
        d0=$(cpu_ticks "${DPID[main]}") r0=$(cpu_ticks "$REDIS_PID")
        if run_bench "tags-$round" $((TG_S + 40)) "${tg_args[@]}"; then
            d1=$(cpu_ticks "${DPID[main]}") r1=$(cpu_ticks "$REDIS_PID")
            read -r evc1 _ <<<"$(evalsha_stat)"
            v=$(kv "$OUT" pairs_per_sec) all=$(kv "$OUT" all_pairs)
            need "$v" "tags $round pairs_per_sec"
            need "$all" "tags $round all_pairs"
            say "bench: $round round: $v pairs/s, dlockd $((d1 - d0)) ticks for $all pairs"
            if [ "$round" = tagged ]; then
                tg_v_tagged+=("$v")
                tg_lat="$(kv "$OUT" pair_p50_us) / $(kv "$OUT" pair_p99_us) us"
            else
                tg_v_conns+=("$v")
            fi
            tg_d[$round]=$((tg_d[$round] + d1 - d0)) tg_r[$round]=$((tg_r[$round] + r1 - r0))
            tg_n[$round]=$((tg_n[$round] + all)) tg_ev[$round]=$((tg_ev[$round] + evc1 - evc0))
        fi
        flush_redis
    done
    label="dlockd CPU per pair: ONE connection with 50 tagged loops / 50 connections"
    if ((${#tg_v_conns[@]} == 2 && ${#tg_v_tagged[@]} == 2 && tg_n[conns] > 0 && tg_n[tagged] > 0)); then
        info "one connection, 50 tagged loops (dlock-bench tagged) / 50 connections: pairs/s (rounds ${tg_v_tagged[*]} / ${tg_v_conns[*]})" \
            "$(calc "(${tg_v_tagged[0]} + ${tg_v_tagged[1]}) / 2" 0)/s / $(calc "(${tg_v_conns[0]} + ${tg_v_conns[1]}) / 2" 0)/s"
        info "one connection, 50 tagged loops: pair latency p50 / p99" "$tg_lat"
        tg_dt=$(calc "${tg_d[tagged]} / $clk_tck * 1000000 / ${tg_n[tagged]}" 2)
        tg_dc=$(calc "${tg_d[conns]} / $clk_tck * 1000000 / ${tg_n[conns]}" 2)
        info "dlockd CPU per pair, one connection with 50 tagged loops / 50 connections" "$tg_dt / $tg_dc us"
        info "redis-server CPU per pair; EVALSHA calls per pair: one connection, 50 tagged loops / 50 connections" \
            "$(calc "${tg_r[tagged]} / $clk_tck * 1000000 / ${tg_n[tagged]}" 1) / $(calc "${tg_r[conns]} / $clk_tck * 1000000 / ${tg_n[conns]}" 1) us; $(calc "${tg_ev[tagged]} / ${tg_n[tagged]}" 3) / $(calc "${tg_ev[conns]} / ${tg_n[conns]}" 3)"
        if holds "${tg_d[conns]}" ">" 0; then
            check "$label" "$(calc "$tg_dt / $tg_dc" 2)" "x" "<=" 1.1
        else
            failed "$label" "no dlockd CPU measured over the 50-connection rounds" "<= 1.1x"
        fi
    else
        failed "$label" "see problems" "<= 1.1x"
    fi
fi

# ---- 4. hand-off ----------------------------------------------------------------

if want 4; then
    say "== 4/17 hand-off latency"
    ensure_dlockd main
    if run_bench handoff-local 120 handoff -s "${DSOCK[main]}" -n 2000; then
        check "hand-off, one daemon: p50 (UNLOCK written -> waiter's OK read)" "$(kv "$OUT" p50_us)" " us" "<=" 150
        check "hand-off, one daemon: p99" "$(kv "$OUT" p99_us)" " us" "<=" 2000
    else
        failed "hand-off, one daemon: p50" "see problems" "<= 150 us"
        failed "hand-off, one daemon: p99" "see problems" "<= 2000 us"
    fi
    flush_redis
    start_dlockd second
    if run_bench handoff-cross 120 handoff -s "${DSOCK[main]}" -S "${DSOCK[second]}" -R "$RSOCK" -n 1000; then
        check "hand-off across two daemons (shared Redis): p50" "$(kv "$OUT" p50_us)" " us" "<=" 400
        info "hand-off across two daemons: p99" "$(kv "$OUT" p99_us) us"
    else
        failed "hand-off across two daemons: p50" "see problems" "<= 400 us"
    fi
    stop_dlockd second
    if run_bench redisping 60 redisping -s "$RSOCK" -n 10000; then
        info "Redis PING round trip p50 / p99 (reference)" "$(kv "$OUT" p50_us) / $(kv "$OUT" p99_us) us"
    else
        failed "Redis PING round trip p50" "see problems" "-"
    fi
    flush_redis
fi

# ---- 5. scale -------------------------------------------------------------------

if want 5; then
    say "== 5/17 scale: $SCALE_C connections x $SCALE_L locks, lease ${SCALE_LEASE} ms, ${SCALE_WIN} s window"
    stop_dlockd main # nothing but the scale daemon talks to Redis now
    flush_redis
    start_dlockd scale "$(printf '[lock]\nlease_ms = %s\n' "$SCALE_LEASE")"
    spid=${DPID[scale]}
    evalsha_calls() { rcli INFO commandstats | awk -F'[=,:]' '/^cmdstat_evalsha:/ { print $3; f = 1 } END { if (!f) print 0 }'; }

    locks=$((SCALE_C * SCALE_L))
    scale_ok=1
    hold_locks scale "${DSOCK[scale]}" "$SCALE_C" "$SCALE_L" || scale_ok=0
    if ((scale_ok)); then
        ready=$HOLD_READY
        info "scale: connect $SCALE_C / grant $locks locks (s)" "$(kv "$ready" connect_s) / $(kv "$ready" grant_s) s"
        sleep 2 # let the grant burst's first renewals pass
        rss_max=0
        t0=$(now_s) ticks0=$(cpu_ticks "$spid") ev0=$(evalsha_calls)
        ren0=$(kv "$("$BENCH" info -s "${DSOCK[scale]}")" renewals)
        end=$(calc "$t0 + $SCALE_WIN" 3)
        while holds "$(now_s)" "<" "$end"; do
            r=$(rss_kb "$spid") || break
            ((r > rss_max)) && rss_max=$r
            sleep 0.5
        done
        t1=$(now_s) ticks1=$(cpu_ticks "$spid") ev1=$(evalsha_calls)
        ren1=$(kv "$("$BENCH" info -s "${DSOCK[scale]}")" renewals)
        r=$(rss_kb "$spid") && ((r > rss_max)) && rss_max=$r
        el=$(calc "$t1 - $t0" 3)
        release_locks scale
        lost=$HOLD_LOST
        if ! dlockd_alive scale; then
            scale_ok=0
        else
            for x in "$ticks0" "$ticks1" "$ev0" "$ev1" "$rss_max" "$ren0" "$ren1"; do need "$x" "scale sample"; done
        fi
    fi
    if ((scale_ok)); then
        check "scale: dlockd RSS max, $locks locks on $SCALE_C connections" "$(calc "$rss_max / 1024" 1)" " MiB" "<=" 150
        check "scale: dlockd CPU, % of one core (idle holders, renewing)" "$(calc "($ticks1 - $ticks0) / $clk_tck / $el * 100" 2)" " %" "<=" 5
        renew_cps=$(calc "($ev1 - $ev0) / $el" 1)
        info "scale: renewal EVALSHA commands/s (lease ${SCALE_LEASE} ms, renew every $((SCALE_LEASE / 3)) ms)" "$renew_cps/s"
        check "scale: renewal commands per 100 locks per renew interval" "$(calc "$renew_cps * ($SCALE_LEASE / 3000) / ($locks / 100)" 3)" "" "<=" 1
        info "scale: locks renewed per second (dlockd INFO renewals)" "$(calc "($ren1 - $ren0) / $el" 0)/s"
        if isnum "${lost-}"; then
            check "scale: !LOST events while holding (check)" "$lost" "" "==" 0
        else
            failed "scale: !LOST events while holding (check)" "no count" "== 0"
        fi
        # All connections are gone: every lock must be released.
        tr0=$(now_s) released=0
        for ((i = 0; i < 600; i++)); do
            dlockd_alive scale || break
            held=$(kv "$("$BENCH" info -s "${DSOCK[scale]}" 2>/dev/null)" locks_held)
            [ "$held" = 0 ] && { released=1; break; }
            sleep 0.1
        done
        if ((released)); then
            info "scale: time to release $locks locks after all clients closed" "$(calc "$(now_s) - $tr0" 2) s"
        else
            problem "scale: dlockd still holds locks 60 s after every client closed (locks_held=${held-?})"
            failed "scale: release after the clients closed" "locks_held=${held-?}" "-"
        fi
    else
        for m in "RSS max:<= 150 MiB" "CPU:<= 5 %" "renewal commands per 100 locks per interval:<= 1"; do
            failed "scale: ${m%%:*}" "see problems" "${m#*:}"
        done
    fi
    stop_dlockd scale
    flush_redis
fi

# ---- 6. herd --------------------------------------------------------------------

if want 6; then
    say "== 6/17 herd: $HERD_C waiters on one lock"
    ensure_dlockd main
    if run_bench herd 120 herd -s "${DSOCK[main]}" -c "$HERD_C" -R "$RSOCK"; then
        hms=$(kv "$OUT" herd_ms) sent=$(kv "$OUT" redis_sent_commands) total=$(kv "$OUT" redis_total_commands)
        need "$sent" "herd redis_sent_commands"
        need "$total" "herd redis_total_commands"
        check "herd: holder's UNLOCK -> last of $HERD_C waiters' OK" "$hms" " ms" "<" 2000
        check "herd: Redis commands dlockd sent per hand-off (EVALSHA etc.)" "$(calc "$sent / $HERD_C" 2)" "" "<=" 3
        info "herd: total_commands_processed per hand-off (incl. redis.call inside scripts)" "$(calc "$total / $HERD_C" 2)"
        herd_detail=$(tr ' ' '\n' <<<"$OUT" | grep '^redis_' | grep -v -e _sent_ -e _total_ | sed 's/^redis_//' | tr '\n' ' ')
    else
        failed "herd: time for all $HERD_C waiters to pass" "see problems" "< 2000 ms"
        failed "herd: Redis commands per hand-off" "see problems" "<= 3"
    fi
    stop_dlockd main
fi
stop_dlockd main # left running by 1-3 or 4 without 6

# ---- 7. replicas: the price of WAIT ---------------------------------------------

if want 7; then
    say "== 7/17 replicas: pairs/s on a primary with one replica (TCP), replicas_ack auto/0/0/auto, ${REPL_S} s each"
    read -r RP_PORT RR_PORT <<<"$(free_ports 2)"
    need "$RP_PORT" "a free TCP port"
    need "$RR_PORT" "a free TCP port"
    rcp() { redis-cli -h 127.0.0.1 -p "$RP_PORT" "$@"; }
    mkdir -p "$T/repl-primary" "$T/repl-replica"
    redis-server --port "$RP_PORT" --bind 127.0.0.1 --save "" --appendonly no --dir "$T/repl-primary" \
        --repl-diskless-sync yes --repl-diskless-sync-delay 0 --logfile "$T/repl-primary.log" &
    RP_PID=$!
    PIDS+=("$!")
    redis-server --port "$RR_PORT" --bind 127.0.0.1 --save "" --appendonly no --dir "$T/repl-replica" \
        --replicaof 127.0.0.1 "$RP_PORT" --logfile "$T/repl-replica.log" &
    RR_PID=$!
    PIDS+=("$!")
    for ((i = 0; i < 1000; i++)); do
        rcp INFO replication 2>/dev/null | grep -q 'state=online' && break
        sleep 0.01
    done
    rcp INFO replication 2>/dev/null | grep -q 'state=online' ||
        fatal "the replica did not come online: $(tail -n 5 "$T/repl-replica.log")"
    cmdcalls() { calls_of "$1" "$(cmdstats "$RP_PORT")"; }
    # Rounds in the order auto, 0, 0, auto, so that a drift of the machine's
    # load over the section weighs on both modes alike; each mode's figures are
    # the means of its two rounds.
    declare -A REPL_TP=() REPL_P50=() REPL_P99=() REPL_W=() REPL_E=() REPL_N=()
    round=0
    for mode in auto 0 0 auto; do
        round=$((round + 1))
        start_dlockd "repl-$mode" "" "$(printf 'url = redis://127.0.0.1:%s/0\nreplicas_ack = %s' "$RP_PORT" "$mode")"
        sleep 1.5 # dlockd learns the replica from ROLE about once a second
        w0=$(cmdcalls wait) e0=$(cmdcalls evalsha)
        if run_bench "repl-$mode-$round" $((REPL_S + 40)) throughput -s "${DSOCK[repl-$mode]}" -c 50 -d "$REPL_S" -w 1; then
            w1=$(cmdcalls wait) e1=$(cmdcalls evalsha)
            v=$(kv "$OUT" pairs_per_sec) p50=$(kv "$OUT" pair_p50_us) p99=$(kv "$OUT" pair_p99_us)
            need "$v" "repl-$mode pairs_per_sec"
            need "$p50" "repl-$mode pair_p50_us"
            need "$p99" "repl-$mode pair_p99_us"
            REPL_TP[$mode]=$(calc "${REPL_TP[$mode]-0} + $v" 0)
            REPL_P50[$mode]=$(calc "${REPL_P50[$mode]-0} + $p50" 0)
            REPL_P99[$mode]=$(calc "${REPL_P99[$mode]-0} + $p99" 0)
            REPL_W[$mode]=$((${REPL_W[$mode]-0} + w1 - w0))
            REPL_E[$mode]=$((${REPL_E[$mode]-0} + e1 - e0))
            REPL_N[$mode]=$((${REPL_N[$mode]-0} + 1))
        fi
        stop_dlockd "repl-$mode"
        rcp FLUSHALL >/dev/null
    done
    for mode in auto 0; do
        label="replicas: dlockd pairs/s, primary + 1 replica (TCP, 50 connections), replicas_ack = $mode"
        if [ "${REPL_N[$mode]-0}" = 2 ]; then
            REPL_TP[$mode]=$(calc "${REPL_TP[$mode]} / 2" 0)
            info "$label" "${REPL_TP[$mode]}/s"
            info "replicas: pair latency p50 / p99; WAIT / EVALSHA commands, replicas_ack = $mode" \
                "$(calc "${REPL_P50[$mode]} / 2" 0) / $(calc "${REPL_P99[$mode]} / 2" 0) us; ${REPL_W[$mode]} / ${REPL_E[$mode]}"
        else
            REPL_TP[$mode]=""
            failed "$label" "see problems" "-"
        fi
    done
    if isnum "${REPL_TP[auto]-}" && isnum "${REPL_TP[0]-}"; then
        info "replicas: price of WAIT, pairs/s with replicas_ack = auto / with 0" "$(calc "${REPL_TP[auto]} / ${REPL_TP[0]}" 2)"
    fi
    stop_pids "$RP_PID" "$RR_PID"
fi

# ---- 8. failover --------------------------------------------------------------------

if want 8; then
    say "== 8/17 failover: SIGKILL the primary under Sentinel, $FO_RUNS runs (down-after-milliseconds $FO_DOWN_AFTER_MS)"
    fo_rc=0
    fo_out=$(timeout -k 5 $((FO_RUNS * 60 + 30)) "$PY" - "$root" "$DLOCKD" "$T" "$FO_RUNS" "$FO_DOWN_AFTER_MS" \
        2>"$T/failover.err" <<'PYEOF'
# One dlockd on a fresh Sentinel topology per run. Exit 3: dlockd misbehaved;
# 4: the Sentinel topology did (did not come up, did not fail over).
import os, statistics, sys, threading, time
root, dlockd, tmp, runs, down_after = sys.argv[1:6]
runs, down_after = int(runs), int(down_after)
sys.path[:0] = [os.path.join(root, "tests", "chaos"), os.path.join(root, "clients", "python")]
import dlock, sentinel

def say(text):
    print(text, file=sys.stderr, flush=True)

class Loop(threading.Thread):
    """TRYLOCK <fresh> 0 or LOCK <fresh>, then UNLOCK, forever; grants gets
    (t_sent, t_granted)."""
    def __init__(self, path, op):
        super().__init__(daemon=True)
        self.path, self.op, self.grants, self.errors = path, op, [], 0
        self.stop = threading.Event()
    def run(self):
        c, n = None, 0
        while not self.stop.is_set():
            if c is None:
                try:
                    c = dlock.Client(self.path, timeout=10.0)
                except dlock.ConnectFailed:
                    time.sleep(0.01)
                    continue
            n += 1
            name = "fo-%s-%d" % (self.op, n)
            t0 = time.monotonic()
            try:
                if self.op == "TRYLOCK":
                    c.trylock(name, 0)
                else:
                    c.lock(name)
                self.grants.append((t0, time.monotonic()))
                c.unlock(name)
            except dlock.BackendError:
                self.errors += 1
                time.sleep(0.005)
            except (dlock.DlockError, OSError):
                self.errors += 1
                c.close()
                c = None
                time.sleep(0.005)

def first_after(loop, t):
    return next((g for s, g in list(loop.grants) if s >= t), None)

res = []
for r in range(runs):
    d = os.path.join(tmp, "failover-%d" % r)
    os.makedirs(d)
    topo = sentinel.Topology(d, name="dlock-bench", down_after_ms=down_after)
    try:
        try:
            topo.start(timeout=30)
        except sentinel.TopologyError as e:
            say("sentinel: %s" % e)
            sys.exit(4)
        sock = os.path.join(d, "dlockd.sock")
        conf = os.path.join(d, "dlockd.conf")
        with open(conf, "w") as f:
            f.write("[server]\nsocket = %s\n[redis]\nsentinels = %s\nmaster_name = dlock-bench\n"
                    % (sock, " ".join(topo.sentinel_addrs())))
        os.chmod(conf, 0o600)
        dp = topo.spawn([dlockd, "-c", conf], "dlockd.log")
        up, deadline = False, time.monotonic() + 10
        while not up and time.monotonic() < deadline and dp.poll() is None:
            try:
                with dlock.Client(sock, timeout=2) as c:
                    up = c.info().get("redis") == "up"
            except (dlock.DlockError, OSError):
                pass
            time.sleep(0.02)
        if not up:
            with open(os.path.join(d, "dlockd.log")) as f:
                say("dlockd did not start or never reached redis=up: %s"
                    % " | ".join(f.read().splitlines()[-5:]))
            sys.exit(3)
        loops = [Loop(sock, "TRYLOCK"), Loop(sock, "LOCK")]
        for l in loops:
            l.start()
        deadline = time.monotonic() + 10
        while any(len(l.grants) < 20 for l in loops) and time.monotonic() < deadline:
            time.sleep(0.01)
        if any(len(l.grants) < 20 for l in loops):
            say("dlockd grants nothing before the failover")
            sys.exit(3)
        t_kill = topo.kill(topo.primary)
        sw = topo.wait_switch(t_kill, 30)
        if sw is None:
            say("sentinel: no +switch-master within 30 s of the SIGKILL")
            sys.exit(4)
        deadline = sw[0] + 30
        firsts = [None, None]
        while time.monotonic() < deadline and None in firsts:
            firsts = [first_after(l, t_kill) for l in loops]
            time.sleep(0.01)
        for l in loops:
            l.stop.set()
        if None in firsts:
            say("no grant within 30 s of +switch-master (TRYLOCK %s, LOCK %s)" % tuple(
                "-" if x is None else "%.0f ms" % ((x - t_kill) * 1000) for x in firsts))
            sys.exit(3)
        x = dict(switch=(sw[0] - t_kill) * 1000, grant=(min(firsts) - t_kill) * 1000,
                 trylock=(firsts[0] - t_kill) * 1000, lock=(firsts[1] - t_kill) * 1000)
        res.append(x)
        say("  run %d: SIGKILL -> +switch-master %.0f ms, first grant %.0f ms (TRYLOCK %.0f, LOCK %.0f)"
            % (r + 1, x["switch"], x["grant"], x["trylock"], x["lock"]))
        dp.terminate()
        try:
            dp.wait(10)
        except Exception:
            pass
    finally:
        topo.stop()
out = ["runs=%d down_after_ms=%d" % (runs, down_after)]
for k in ("switch", "grant", "trylock", "lock"):
    v = [x[k] for x in res]
    out.append("%s_ms=%s %s_med_ms=%.0f %s_max_ms=%.0f" % (k, ",".join("%.0f" % y for y in v),
               k, statistics.median(v), k, max(v)))
v = [x["grant"] - x["switch"] for x in res]
out.append("lag_med_ms=%.0f lag_max_ms=%.0f" % (statistics.median(v), max(v)))
print(" ".join(out))
PYEOF
    ) || fo_rc=$?
    sed 's/^/bench: /' "$T/failover.err" >&2
    case $fo_rc in
    0)
        for k in grant_med_ms grant_max_ms switch_med_ms switch_max_ms lag_med_ms lag_max_ms; do
            need "$(kv "$fo_out" "$k")" "failover $k"
        done
        info "failover: SIGKILL primary -> first grant, median / max of $FO_RUNS (down-after-milliseconds $FO_DOWN_AFTER_MS)" \
            "$(kv "$fo_out" grant_med_ms) / $(kv "$fo_out" grant_max_ms) ms"
        info "failover: Sentinel's own time, SIGKILL -> +switch-master, median / max" \
            "$(kv "$fo_out" switch_med_ms) / $(kv "$fo_out" switch_max_ms) ms"
        info "failover: dlockd's share, +switch-master -> first grant, median / max" \
            "$(kv "$fo_out" lag_med_ms) / $(kv "$fo_out" lag_max_ms) ms"
        ;;
    3)
        problem "failover: $(grep -v '^  run ' "$T/failover.err" | tail -n 3 | tr '\n' ' ')"
        failed "failover: SIGKILL primary -> first grant (down-after-milliseconds $FO_DOWN_AFTER_MS)" "see problems" "-"
        ;;
    4)
        failed "failover: SIGKILL primary -> first grant (down-after-milliseconds $FO_DOWN_AFTER_MS)" \
            "$(grep '^sentinel: ' "$T/failover.err" | tail -n 1 | cut -c 1-120)" "-"
        ;;
    124 | 137) fatal "failover: the measurement did not finish in time: $(tail -n 3 "$T/failover.err" | tr '\n' ' ')" ;;
    *) fatal "failover: harness failure (exit $fo_rc): $(tail -n 3 "$T/failover.err" | tr '\n' ' ')" ;;
    esac
fi

# ---- 9. cluster -----------------------------------------------------------------------

if want 9; then
    say "== 9/17 cluster: $CL_N primaries against one standalone redis-server (TCP), rounds standalone/cluster/cluster/standalone, ${CL_S} s each; the watchdog on the cluster"
    # The most ops in one script call, and in one watchdog batch.
    SCRIPTS_BATCH=$(awk '$1 == "#define" && $2 == "SCRIPTS_BATCH_MAX" { print $3 }' daemon/backend/scripts.h)
    RENEW_BATCH=$(awk '$1 == "#define" && $2 == "LOCKMGR_RENEW_BATCH" { print $3 }' daemon/lock/lockmgr.h)
    need "$SCRIPTS_BATCH" "SCRIPTS_BATCH_MAX in daemon/backend/scripts.h"
    need "$RENEW_BATCH" "LOCKMGR_RENEW_BATCH in daemon/lock/lockmgr.h"
    read -r -a cl_free <<<"$(free_ports $((2 * CL_N + 1)))"
    ((${#cl_free[@]} == 2 * CL_N + 1)) || fatal "free_ports gave '${cl_free[*]}'"
    for p in "${cl_free[@]}"; do need "$p" "a free TCP port"; done
    CL_PORTS=("${cl_free[@]:0:CL_N}") CL_BUS=("${cl_free[@]:CL_N:CL_N}") CS_PORT=${cl_free[2 * CL_N]}
    CL_ADDRS=()
    for p in "${CL_PORTS[@]}"; do CL_ADDRS+=("127.0.0.1:$p"); done
    CL_PIDS=()
    for ((i = 0; i < CL_N; i++)); do
        d="$T/cluster-$i"
        mkdir -p "$d"
        redis-server --port "${CL_PORTS[i]}" --bind 127.0.0.1 --save "" --appendonly no --dir "$d" \
            --cluster-enabled yes --cluster-config-file "$d/nodes.conf" --cluster-port "${CL_BUS[i]}" \
            --logfile "$d/redis.log" &
        CL_PIDS+=("$!")
        PIDS+=("$!")
    done
    mkdir -p "$T/cluster-standalone"
    redis-server --port "$CS_PORT" --bind 127.0.0.1 --save "" --appendonly no --dir "$T/cluster-standalone" \
        --logfile "$T/cluster-standalone/redis.log" &
    CS_PID=$!
    PIDS+=("$!")
    for p in "${CL_PORTS[@]}" "$CS_PORT"; do
        for ((i = 0; i < 500; i++)); do redis-cli -h 127.0.0.1 -p "$p" PING >/dev/null 2>&1 && break; sleep 0.01; done
        redis-cli -h 127.0.0.1 -p "$p" PING >/dev/null 2>&1 || fatal "redis-server on port $p did not start"
    done
    # What keeps the cluster from being ready, or nothing: every node says
    # cluster_state:ok, serves all slots, knows all nodes, and every node's
    # CLUSTER SLOTS is the same.
    cluster_lacks() {
        local p ci sl first=""
        for p in "${CL_PORTS[@]}"; do
            ci=$(redis-cli -h 127.0.0.1 -p "$p" CLUSTER INFO 2>&1 | tr -d '\r')
            for want in cluster_state:ok cluster_slots_ok:16384 "cluster_known_nodes:$CL_N"; do
                grep -qx "$want" <<<"$ci" || {
                    echo "port $p: no $want"
                    return
                }
            done
            sl=$(redis-cli -h 127.0.0.1 -p "$p" CLUSTER SLOTS 2>&1)
            if [ -z "$first" ]; then
                first=$sl
            elif [ "$sl" != "$first" ]; then
                echo "port $p's CLUSTER SLOTS differs from port ${CL_PORTS[0]}'s"
                return
            fi
        done
    }
    cl_why=""
    t_create=$(now_s)
    if ! timeout -k 5 60 redis-cli --cluster create "${CL_ADDRS[@]}" --cluster-yes \
        >"$T/cluster-create.log" 2>&1; then
        cl_why="redis-cli --cluster create failed: $(tail -n 2 "$T/cluster-create.log" | tr '\n' ' ')"
    else
        end=$(calc "$(now_s) + 30" 3)
        while cl_why=$(cluster_lacks) && [ -n "$cl_why" ] && holds "$(now_s)" "<" "$end"; do sleep 0.1; done
        [ -n "$cl_why" ] && cl_why="not ready 30 s after redis-cli --cluster create: $cl_why"
    fi
    if [ -z "$cl_why" ]; then
        say "bench: cluster of $CL_N primaries ready in $(calc "$(now_s) - $t_create" 1) s"
        start_dlockd cl-cluster "" "cluster = ${CL_ADDRS[*]}"
        for ((i = 0; i < 100; i++)); do
            up=$(kv "$("$BENCH" info -s "${DSOCK[cl-cluster]}")" redis_nodes_up)
            [ "$up" = "$CL_N" ] && break
            sleep 0.1
        done
        [ "$up" = "$CL_N" ] || cl_why="dlockd: redis_nodes_up=$up after 10 s, not $CL_N"
    fi
    if [ -z "$cl_why" ]; then
        start_dlockd cl-standalone "" "url = redis://127.0.0.1:$CS_PORT/0"
        # Rounds in the order standalone, cluster, cluster, standalone (as in
        # section 7); each mode's figures are the sums or means of its two.
        declare -A CL_TP=() CL_ALL=() CL_TOT=() CL_SENT=() CL_EV=() CL_DCPU=() CL_RCPU=() CL_NR=()
        cl_node_ev=()
        round=0
        for mode in standalone cluster cluster standalone; do
            round=$((round + 1))
            if [ "$mode" = cluster ]; then ports=("${CL_PORTS[@]}") rpids=("${CL_PIDS[@]}"); else ports=("$CS_PORT") rpids=("$CS_PID"); fi
            dpid=${DPID[cl-$mode]}
            snap0=() snap1=()
            for p in "${ports[@]}"; do snap0+=("$(cmdstats "$p")"); done
            c0=$(now_s) d0=$(cpu_ticks "$dpid") r0=0
            for p in "${rpids[@]}"; do r0=$((r0 + $(cpu_ticks "$p"))); done
            if run_bench "cluster-$mode-$round" $((CL_S + 40)) throughput -s "${DSOCK[cl-$mode]}" -c 50 -d "$CL_S" -w 1; then
                c1=$(now_s) d1=$(cpu_ticks "$dpid") r1=0
                for p in "${rpids[@]}"; do r1=$((r1 + $(cpu_ticks "$p"))); done
                for p in "${ports[@]}"; do snap1+=("$(cmdstats "$p")"); done
                v=$(kv "$OUT" pairs_per_sec) all=$(kv "$OUT" all_pairs)
                need "$v" "cluster-$mode pairs_per_sec"
                need "$all" "cluster-$mode all_pairs"
                need "$d1" "dlockd CPU ticks"
                say "bench:   round $round, $mode: $v pairs/s"
                delta=$(cmd_delta "$(printf '%s\n' "${snap0[@]}")" "$(printf '%s\n' "${snap1[@]}")")
                CL_TP[$mode]=$(calc "${CL_TP[$mode]-0} + $v" 0)
                CL_ALL[$mode]=$((${CL_ALL[$mode]-0} + all))
                CL_TOT[$mode]=$((${CL_TOT[$mode]-0} + $(kv "$delta" total)))
                CL_SENT[$mode]=$((${CL_SENT[$mode]-0} + $(kv "$delta" sent)))
                CL_EV[$mode]=$((${CL_EV[$mode]-0} + $(kv "$delta" evalsha)))
                CL_DCPU[$mode]=$(calc "${CL_DCPU[$mode]-0} + ($d1 - $d0) / $clk_tck / ($c1 - $c0) * 100" 1)
                CL_RCPU[$mode]=$(calc "${CL_RCPU[$mode]-0} + ($r1 - $r0) / $clk_tck / ($c1 - $c0) * 100" 1)
                CL_NR[$mode]=$((${CL_NR[$mode]-0} + 1))
                if [ "$mode" = cluster ]; then
                    for ((i = 0; i < CL_N; i++)); do
                        cl_node_ev[i]=$((${cl_node_ev[i]-0} + $(delta_of evalsha "${snap0[i]}" "${snap1[i]}")))
                    done
                fi
            fi
        done
        # The fence counters stay: one key per name on the primary that owns it.
        cl_names=()
        for p in "${CL_PORTS[@]}"; do cl_names+=("$(redis-cli -h 127.0.0.1 -p "$p" --scan --pattern 'redisson_lock_token:*' | wc -l)"); done
        stop_dlockd cl-standalone
        stop_dlockd cl-cluster
        if [ "${CL_NR[cluster]-0}" = 2 ] && [ "${CL_NR[standalone]-0}" = 2 ]; then
            for mode in standalone cluster; do
                CL_TP[$mode]=$(calc "${CL_TP[$mode]} / 2" 0)
                CL_DCPU[$mode]=$(calc "${CL_DCPU[$mode]} / 2" 0)
                CL_RCPU[$mode]=$(calc "${CL_RCPU[$mode]} / 2" 0)
            done
            info "cluster pairs/s: dlockd on $CL_N primaries (TCP, 50 connections; names per primary $(slash "${cl_names[@]}"))" "${CL_TP[cluster]}/s"
            info "cluster: standalone pairs/s in the same run (one redis-server, TCP, 50 connections)" "${CL_TP[standalone]}/s"
            check "cluster pairs/s / standalone pairs/s (2 CPUs: parity, not scaling)" \
                "$(calc "${CL_TP[cluster]} / ${CL_TP[standalone]}" 2)" "" ">=" 0.9
            info "cluster: CPU, % of one core, dlockd / redis-server(s): standalone; cluster" \
                "${CL_DCPU[standalone]} / ${CL_RCPU[standalone]}; ${CL_DCPU[cluster]} / ${CL_RCPU[cluster]} %"
            for mode in standalone cluster; do
                CL_TOT[$mode]=$(calc "${CL_TOT[$mode]} / ${CL_ALL[$mode]}" 2)
                CL_SENT[$mode]=$(calc "${CL_SENT[$mode]} / ${CL_ALL[$mode]}" 3)
                CL_EV[$mode]=$(calc "${CL_EV[$mode]} / ${CL_ALL[$mode]}" 3)
            done
            info "Redis commands per pair, all Redis ran (incl. redis.call in scripts): standalone / cluster" \
                "${CL_TOT[standalone]} / ${CL_TOT[cluster]}"
            info "EVALSHA calls per pair: standalone / cluster (cluster EVALSHA per primary: $(slash "${cl_node_ev[@]}"))" \
                "${CL_EV[standalone]} / ${CL_EV[cluster]}"
            check "Redis commands dlockd sent per pair, cluster (standalone: ${CL_SENT[standalone]}; <= $CL_N x that)" \
                "${CL_SENT[cluster]}" "" "<=" "$(calc "$CL_N * ${CL_SENT[standalone]}" 3)"
        else
            failed "cluster pairs/s / standalone pairs/s" "see problems" ">= 0.9"
            failed "Redis commands dlockd sent per pair: cluster" "see problems" "<= $CL_N x standalone's"
        fi

        # The watchdog: CL_DOG_CONNS x CL_DOG_LOCKS locks, renewed every
        # lease/3; per primary, the renewal EVALSHA calls per round.
        for p in "${CL_PORTS[@]}"; do redis-cli -h 127.0.0.1 -p "$p" FLUSHALL >/dev/null; done
        dog_locks=$((CL_DOG_CONNS * CL_DOG_LOCKS))
        start_dlockd cl-dog "$(printf '[lock]\nlease_ms = %s\n' "$CL_DOG_LEASE")" "cluster = ${CL_ADDRS[*]}"
        dog_label="cluster watchdog: renewal EVALSHA per round, worst primary ($dog_locks locks; <= one per watchdog batch)"
        if hold_locks cluster-dog "${DSOCK[cl-dog]}" "$CL_DOG_CONNS" "$CL_DOG_LOCKS"; then
            sleep 2 # let the grant burst's first renewals pass
            dog_keys=() snap0=() snap1=()
            for p in "${CL_PORTS[@]}"; do
                dog_keys+=("$(redis-cli -h 127.0.0.1 -p "$p" --scan --pattern 'dlock:*' | wc -l)")
            done
            for p in "${CL_PORTS[@]}"; do snap0+=("$(cmdstats "$p")"); done
            sleep "$CL_DOG_WIN"
            for p in "${CL_PORTS[@]}"; do snap1+=("$(cmdstats "$p")"); done
            release_locks cluster-dog
            dog_calls=() dog_ideal=() dog_worst=0 dog_ok=1
            for ((i = 0; i < CL_N; i++)); do
                # The registry's primary also runs the register script (one
                # hgetall each): not a renewal. Rounds: renewals / locks.
                ev=$(($(delta_of evalsha "${snap0[i]}" "${snap1[i]}") - $(delta_of hgetall "${snap0[i]}" "${snap1[i]}")))
                ren=$(delta_of hexists "${snap0[i]}" "${snap1[i]}")
                if ((dog_keys[i] == 0 || ren == 0)); then
                    dog_ok=0
                    dog_calls+=("-")
                else
                    dog_calls+=("$(calc "$ev * ${dog_keys[i]} / $ren" 1)")
                    holds "${dog_calls[i]}" ">" "$dog_worst" && dog_worst=${dog_calls[i]}
                fi
                dog_ideal+=("$(((dog_keys[i] + SCRIPTS_BATCH - 1) / SCRIPTS_BATCH))")
            done
            [ "${HOLD_LOST-}" = 0 ] || problem "cluster watchdog: ${HOLD_LOST:-?} !LOST events while holding"
            info "cluster watchdog: locks per primary; renewal EVALSHA per round per primary (ideal: ceil(locks/$SCRIPTS_BATCH))" \
                "$(slash "${dog_keys[@]}"); $(slash "${dog_calls[@]}") ($(slash "${dog_ideal[@]}"))"
            if ((dog_ok)); then
                check "$dog_label" "$dog_worst" "" "<=" $(((dog_locks + RENEW_BATCH - 1) / RENEW_BATCH))
            else
                failed "$dog_label" "no renewals on a primary" "<= $(((dog_locks + RENEW_BATCH - 1) / RENEW_BATCH))"
            fi
        else
            failed "$dog_label" "see problems" "<= $(((dog_locks + RENEW_BATCH - 1) / RENEW_BATCH))"
        fi
        stop_dlockd cl-dog
    else
        stop_dlockd cl-cluster
        say "bench: cluster: $cl_why"
        failed "cluster pairs/s / standalone pairs/s" "${cl_why:0:120}" ">= 0.9"
        failed "Redis commands dlockd sent per pair: cluster" "no cluster" "<= $CL_N x standalone's"
        failed "cluster watchdog: renewal EVALSHA per round, worst primary" "no cluster" "-"
    fi
    stop_pids "${CL_PIDS[@]}" "$CS_PID"
fi

# ---- 10. quorum ------------------------------------------------------------------------

if want 10; then
    say "== 10/17 quorum: $QU_N independent redis-servers against one standalone redis-server (TCP), rounds standalone/quorum/quorum/standalone, ${QU_S} s each; hand-off on both"
    read -r -a qu_free <<<"$(free_ports $((QU_N + 1)))"
    ((${#qu_free[@]} == QU_N + 1)) || fatal "free_ports gave '${qu_free[*]}'"
    for p in "${qu_free[@]}"; do need "$p" "a free TCP port"; done
    QU_PORTS=("${qu_free[@]:0:QU_N}") QS_PORT=${qu_free[QU_N]}
    QU_PIDS=() QU_URLS=()
    for ((i = 0; i < QU_N; i++)); do
        d="$T/quorum-$i"
        mkdir -p "$d"
        redis-server --port "${QU_PORTS[i]}" --bind 127.0.0.1 --save "" --appendonly no --dir "$d" \
            --logfile "$d/redis.log" &
        QU_PIDS+=("$!")
        PIDS+=("$!")
        QU_URLS+=("redis://127.0.0.1:${QU_PORTS[i]}/0")
    done
    mkdir -p "$T/quorum-standalone"
    redis-server --port "$QS_PORT" --bind 127.0.0.1 --save "" --appendonly no --dir "$T/quorum-standalone" \
        --logfile "$T/quorum-standalone/redis.log" &
    QS_PID=$!
    PIDS+=("$!")
    for p in "${QU_PORTS[@]}" "$QS_PORT"; do
        for ((i = 0; i < 500; i++)); do redis-cli -h 127.0.0.1 -p "$p" PING >/dev/null 2>&1 && break; sleep 0.01; done
        redis-cli -h 127.0.0.1 -p "$p" PING >/dev/null 2>&1 || fatal "redis-server on port $p did not start"
    done
    # The same lease on both daemons: QU_LEASE, also the quorum's
    # rejoin_delay_ms (a lease may not be longer). The redis-servers have
    # just started (uptime 0), so the quorum dlockd counts each only
    # rejoin_delay_ms later: start_dlockd waits for a majority (redis=up),
    # then INFO is polled until all QU_N count.
    qu_lock=$(printf '[lock]\nlease_ms = %s\n' "$QU_LEASE")
    t_start=$(now_s)
    start_dlockd qu-quorum "$qu_lock" "$(printf 'quorum = %s\nrejoin_delay_ms = %s' "${QU_URLS[*]}" "$QU_LEASE")"
    qu_why="" up=""
    end=$(calc "$(now_s) + $QU_LEASE / 1000 + 10" 3)
    while up=$(kv "$("$BENCH" info -s "${DSOCK[qu-quorum]}" 2>/dev/null)" redis_nodes_up) &&
        [ "$up" != "$QU_N" ] && holds "$(now_s)" "<" "$end"; do
        sleep 0.1
    done
    [ "$up" = "$QU_N" ] || qu_why="dlockd: redis_nodes_up=${up:-?} $((QU_LEASE / 1000 + 10)) s after redis=up, not $QU_N"
    if [ -z "$qu_why" ]; then
        say "bench: quorum dlockd counts all $QU_N nodes $(calc "$(now_s) - $t_start" 1) s after its start (rejoin_delay_ms $QU_LEASE)"
        start_dlockd qu-standalone "$qu_lock" "url = redis://127.0.0.1:$QS_PORT/0"
        # Rounds in the order standalone, quorum, quorum, standalone (as in
        # sections 7 and 9); each mode's figures are the sums or means of its
        # two. Per grant: dlockd's INFO grants over the run, warm-up included.
        declare -A QU_TP=() QU_GR=() QU_TOT=() QU_SENT=() QU_EV=() QU_RAISE=() QU_WROTE=() QU_DCPU=() QU_RCPU=() QU_NR=()
        qu_node_tot=() qu_node_ev=()
        round=0
        for mode in standalone quorum quorum standalone; do
            round=$((round + 1))
            if [ "$mode" = quorum ]; then ports=("${QU_PORTS[@]}") rpids=("${QU_PIDS[@]}"); else ports=("$QS_PORT") rpids=("$QS_PID"); fi
            dpid=${DPID[qu-$mode]}
            snap0=() snap1=()
            for p in "${ports[@]}"; do snap0+=("$(cmdstats "$p")"); done
            g0=$(kv "$("$BENCH" info -s "${DSOCK[qu-$mode]}")" grants)
            c0=$(now_s) d0=$(cpu_ticks "$dpid") r0=0
            for p in "${rpids[@]}"; do r0=$((r0 + $(cpu_ticks "$p"))); done
            if run_bench "quorum-$mode-$round" $((QU_S + 40)) throughput -s "${DSOCK[qu-$mode]}" -c 50 -d "$QU_S" -w 1; then
                c1=$(now_s) d1=$(cpu_ticks "$dpid") r1=0
                for p in "${rpids[@]}"; do r1=$((r1 + $(cpu_ticks "$p"))); done
                for p in "${ports[@]}"; do snap1+=("$(cmdstats "$p")"); done
                g1=$(kv "$("$BENCH" info -s "${DSOCK[qu-$mode]}")" grants)
                v=$(kv "$OUT" pairs_per_sec)
                need "$v" "quorum-$mode pairs_per_sec"
                need "$g0" "dlockd INFO grants"
                need "$g1" "dlockd INFO grants"
                need "$d1" "dlockd CPU ticks"
                say "bench:   round $round, $mode: $v pairs/s"
                all0=$(printf '%s\n' "${snap0[@]}") all1=$(printf '%s\n' "${snap1[@]}")
                delta=$(cmd_delta "$all0" "$all1")
                # Fence raises, from what the scripts run inside Redis: a
                # grant runs hset once (so does the register script, with
                # one hgetall), a quorum node's get and set once each, a
                # standalone grant getset instead; a raise runs get once where
                # its owner still holds the lock, and set where the counter
                # was lower.
                acq=$(($(delta_of hset "$all0" "$all1") - $(delta_of hgetall "$all0" "$all1") -
                    $(delta_of getset "$all0" "$all1")))
                QU_RAISE[$mode]=$((${QU_RAISE[$mode]-0} + $(delta_of get "$all0" "$all1") - acq))
                QU_WROTE[$mode]=$((${QU_WROTE[$mode]-0} + $(delta_of set "$all0" "$all1") - acq))
                QU_TP[$mode]=$(calc "${QU_TP[$mode]-0} + $v" 0)
                QU_GR[$mode]=$((${QU_GR[$mode]-0} + g1 - g0))
                QU_TOT[$mode]=$((${QU_TOT[$mode]-0} + $(kv "$delta" total)))
                QU_SENT[$mode]=$((${QU_SENT[$mode]-0} + $(kv "$delta" sent)))
                QU_EV[$mode]=$((${QU_EV[$mode]-0} + $(kv "$delta" evalsha)))
                QU_DCPU[$mode]=$(calc "${QU_DCPU[$mode]-0} + ($d1 - $d0) / $clk_tck / ($c1 - $c0) * 100" 1)
                QU_RCPU[$mode]=$(calc "${QU_RCPU[$mode]-0} + ($r1 - $r0) / $clk_tck / ($c1 - $c0) * 100" 1)
                QU_NR[$mode]=$((${QU_NR[$mode]-0} + 1))
                if [ "$mode" = quorum ]; then
                    for ((i = 0; i < QU_N; i++)); do
                        qu_node_tot[i]=$((${qu_node_tot[i]-0} + $(kv "$(cmd_delta "${snap0[i]}" "${snap1[i]}")" total)))
                        qu_node_ev[i]=$((${qu_node_ev[i]-0} + $(delta_of evalsha "${snap0[i]}" "${snap1[i]}")))
                    done
                fi
            fi
        done
        # The hand-off of section 4 (one daemon), on each.
        declare -A QU_HO=()
        for mode in standalone quorum; do
            if run_bench "quorum-handoff-$mode" 120 handoff -s "${DSOCK[qu-$mode]}" -n "$QU_HANDOFFS"; then
                need "$(kv "$OUT" p50_us)" "quorum-handoff-$mode p50_us"
                need "$(kv "$OUT" p99_us)" "quorum-handoff-$mode p99_us"
                QU_HO[$mode]="$(kv "$OUT" p50_us) / $(kv "$OUT" p99_us) us"
            fi
        done
        stop_dlockd qu-standalone
        stop_dlockd qu-quorum
        if [ "${QU_NR[quorum]-0}" = 2 ] && [ "${QU_NR[standalone]-0}" = 2 ] && ((${QU_GR[quorum]-0} > 0 && ${QU_GR[standalone]-0} > 0)); then
            for mode in standalone quorum; do
                QU_TP[$mode]=$(calc "${QU_TP[$mode]} / 2" 0)
                QU_DCPU[$mode]=$(calc "${QU_DCPU[$mode]} / 2" 0)
                QU_RCPU[$mode]=$(calc "${QU_RCPU[$mode]} / 2" 0)
            done
            info "quorum pairs/s: dlockd on a quorum of $QU_N redis-servers (TCP, 50 connections, lease_ms $QU_LEASE)" "${QU_TP[quorum]}/s"
            info "quorum: standalone pairs/s in the same run (one redis-server, TCP, 50 connections, lease_ms $QU_LEASE)" "${QU_TP[standalone]}/s"
            check "quorum pairs/s / standalone pairs/s (every op on $QU_N nodes, 2 CPUs; loose target, report first)" \
                "$(calc "${QU_TP[quorum]} / ${QU_TP[standalone]}" 2)" "" ">=" 0.3
            info "quorum: CPU, % of one core, dlockd / redis-server(s): standalone; quorum" \
                "${QU_DCPU[standalone]} / ${QU_RCPU[standalone]}; ${QU_DCPU[quorum]} / ${QU_RCPU[quorum]} %"
            for ((i = 0; i < QU_N; i++)); do
                qu_node_tot[i]=$(calc "${qu_node_tot[i]} / ${QU_GR[quorum]}" 2)
                qu_node_ev[i]=$(calc "${qu_node_ev[i]} / ${QU_GR[quorum]}" 3)
            done
            for mode in standalone quorum; do
                QU_TOT[$mode]=$(calc "${QU_TOT[$mode]} / ${QU_GR[$mode]}" 2)
                QU_SENT[$mode]=$(calc "${QU_SENT[$mode]} / ${QU_GR[$mode]}" 3)
                QU_EV[$mode]=$(calc "${QU_EV[$mode]} / ${QU_GR[$mode]}" 3)
                QU_RAISE[$mode]=$(calc "${QU_RAISE[$mode]} * 1000 / ${QU_GR[$mode]}" 2)
                QU_WROTE[$mode]=$(calc "${QU_WROTE[$mode]} * 1000 / ${QU_GR[$mode]}" 2)
            done
            info "Redis commands per grant, all Redis ran (incl. redis.call in scripts): standalone / quorum (sum of $QU_N nodes; per node $(slash "${qu_node_tot[@]}"))" \
                "${QU_TOT[standalone]} / ${QU_TOT[quorum]}"
            info "Redis commands dlockd sent per grant: standalone / quorum (sum of $QU_N nodes)" \
                "${QU_SENT[standalone]} / ${QU_SENT[quorum]}"
            info "EVALSHA calls per grant: standalone / quorum (sum of $QU_N nodes; per node $(slash "${qu_node_ev[@]}"))" \
                "${QU_EV[standalone]} / ${QU_EV[quorum]}"
            info "quorum: fence raise ops per 1000 grants, sum of $QU_N nodes: run where the lock was held / counter written (standalone: ${QU_RAISE[standalone]})" \
                "${QU_RAISE[quorum]} / ${QU_WROTE[quorum]}"
        else
            failed "quorum pairs/s / standalone pairs/s" "see problems" ">= 0.3"
            failed "Redis commands per grant: quorum" "see problems" "-"
        fi
        for mode in quorum standalone; do
            label="quorum: hand-off, one daemon, on the quorum: p50 / p99 (UNLOCK written -> waiter's OK read)"
            [ "$mode" = standalone ] && label="quorum: standalone hand-off in the same run (one daemon, TCP): p50 / p99"
            if [ -n "${QU_HO[$mode]-}" ]; then
                info "$label" "${QU_HO[$mode]}"
            else
                failed "$label" "see problems" "-"
            fi
        done
    else
        stop_dlockd qu-quorum
        say "bench: quorum: $qu_why"
        failed "quorum pairs/s / standalone pairs/s" "${qu_why:0:120}" ">= 0.3"
        failed "Redis commands per grant: quorum" "no quorum" "-"
        failed "quorum: hand-off, one daemon: p50 / p99" "no quorum" "-"
    fi
    stop_pids "${QU_PIDS[@]}" "$QS_PID"
fi

# ---- 11. lock kinds ----------------------------------------------------------------

if want 11; then
    say "== 11/17 lock kinds: read locks of one name and a semaphore's permits (50 connections) against LOCK/UNLOCK of 50 names, rounds plain/read/sem/sem10/plain, ${KI_S} s each"
    d="$T/kinds"
    mkdir -p "$d"
    redis-server --port 0 --unixsocket "$d/redis.sock" --unixsocketperm 700 --save "" --appendonly no \
        --dir "$d" --logfile "$d/redis.log" &
    KI_PID=$!
    PIDS+=("$!")
    for ((i = 0; i < 500; i++)); do redis-cli -s "$d/redis.sock" PING >/dev/null 2>&1 && break; sleep 0.01; done
    redis-cli -s "$d/redis.sock" PING >/dev/null 2>&1 || fatal "the lock kinds' redis-server did not start"
    start_dlockd kinds "" "url = unix://$d/redis.sock"
    ki_plain=() ki_read="" ki_lat="" ki_sem="" ki_sem_lat="" ki_sem10="" ki_sem10_lat=""
    for round in plain read sem sem10 plain; do
        ki_args=()
        [ "$round" = read ] && ki_args=(-m read -k "$KI_NAME")
        # a semaphore of 50 permits (nobody waits), and of 10 (40 wait)
        [ "$round" = sem ] && ki_args=(-m sem -k "$KI_NAME-sem" -p 50)
        [ "$round" = sem10 ] && ki_args=(-m sem -k "$KI_NAME-sem10" -p 10)
        if run_bench "kinds-$round" $((KI_S + 40)) throughput -s "${DSOCK[kinds]}" -c 50 -d "$KI_S" -w 1 "${ki_args[@]}"; then
            v=$(kv "$OUT" pairs_per_sec)
            need "$v" "kinds $round pairs_per_sec"
            say "bench: kinds $round round: $v pairs/s"
            if [ "$round" = read ]; then
                ki_read=$v
                ki_lat="$(kv "$OUT" pair_p50_us) / $(kv "$OUT" pair_p99_us) us"
            elif [ "$round" = sem ]; then
                ki_sem=$v
                ki_sem_lat="$(kv "$OUT" pair_p50_us) / $(kv "$OUT" pair_p99_us) us"
            elif [ "$round" = sem10 ]; then
                ki_sem10=$v
                ki_sem10_lat="$(kv "$OUT" pair_p50_us) / $(kv "$OUT" pair_p99_us) us"
            else
                ki_plain+=("$v")
            fi
        fi
    done
    if [ -n "$ki_read" ] && ((${#ki_plain[@]} == 2)); then
        plain=$(calc "(${ki_plain[0]} + ${ki_plain[1]}) / 2" 0)
        info "read locks: RLOCK+RUNLOCK pairs/s (50 readers, one name)" "$ki_read/s"
        info "read locks: pair latency p50 / p99 (50 readers, one name)" "$ki_lat"
        check "read pairs/s (one name) / LOCK pairs/s (50 names), same daemon" "$(calc "$ki_read / $plain" 2)" "" ">=" 0.5
    else
        failed "read locks: RLOCK+RUNLOCK pairs/s (50 readers, one name)" "see problems" "-"
        failed "read pairs/s (one name) / LOCK pairs/s (50 names), same daemon" "no throughput" ">= 0.5"
    fi
    if [ -n "$ki_sem" ] && [ -n "$ki_sem10" ] && ((${#ki_plain[@]} == 2)); then
        plain=$(calc "(${ki_plain[0]} + ${ki_plain[1]}) / 2" 0)
        info "semaphore: ACQUIRE 1+RELEASE 1 pairs/s (50 connections, 50 permits)" "$ki_sem/s"
        info "semaphore: pair latency p50 / p99 (50 permits)" "$ki_sem_lat"
        info "semaphore: ACQUIRE 1+RELEASE 1 pairs/s (50 connections, 10 permits)" "$ki_sem10/s"
        info "semaphore: pair latency p50 / p99 (10 permits, 40 waiting)" "$ki_sem10_lat"
        check "semaphore pairs/s (50 permits, one name) / LOCK pairs/s (50 names)" "$(calc "$ki_sem / $plain" 2)" "" ">=" 0.5
    else
        failed "semaphore: ACQUIRE 1+RELEASE 1 pairs/s (50 connections)" "see problems" "-"
        failed "semaphore pairs/s (50 permits, one name) / LOCK pairs/s (50 names)" "no throughput" ">= 0.5"
    fi
    # a fair lock with 100 connections: 99 queued behind the holder
    if run_bench kinds-fair $((KI_S * 10 + 60)) fair -s "${DSOCK[kinds]}" -c 100 -n "$KI_FAIR_N" -k "$KI_NAME-fair"; then
        info "fair lock: hand-off p50 / p99, 99 waiters queued (UNLOCK written -> next OK read)" \
            "$(kv "$OUT" p50_us) / $(kv "$OUT" p99_us) us"
    else
        failed "fair lock: hand-off p50 / p99, 99 waiters queued (UNLOCK written -> next OK read)" "see problems" "-"
    fi
    if run_bench kinds-fair1 $((KI_S * 10 + 60)) fair -s "${DSOCK[kinds]}" -c 2 -n "$KI_FAIR_N" -k "$KI_NAME-fair1"; then
        info "fair lock: hand-off p50 / p99, 1 waiter" "$(kv "$OUT" p50_us) / $(kv "$OUT" p99_us) us"
    else
        failed "fair lock: hand-off p50 / p99, 1 waiter" "see problems" "-"
    fi
    stop_dlockd kinds
    stop_pids "$KI_PID"
fi

# ---- 12. a fleet on one Redis -----------------------------------------------------

# lua_calls FILE...: the commands the Lua in FILEs runs with redis.call() or
# redis.pcall(), lower case, one line: what Redis counts in commandstats
# but no client sent.
lua_calls() {
    cat "$@" 2>/dev/null | grep -oi "redis\.p\?call(['\"][a-z]*" | sed "s/.*['\"]//" |
        tr '[:upper:]' '[:lower:]' | sort -u | tr '\n' ' '
}
# fleet_delta BEFORE AFTER INNER: "total=N sent=N pttl=N evalsha=N subs=N
# cmdus=N" between two commandstats snapshots of the main redis-server:
# every command run, those a client sent (the total without INNER), the
# acquire script's taken path (pttl), EVALSHA, (UN)SUBSCRIBE, and the
# microseconds Redis spent in the commands sent (a script's own calls are
# inside its EVALSHA's); the sampler's INFO and CLIENT LIST left out.
fleet_delta() {
    awk -v inner="$3" 'BEGIN { n = split(inner, a, " "); for (i = 1; i <= n; i++) in_script[a[i]] = 1 }
        FNR == NR { b[$1] += $2; bu[$1] += $3; next }
        { a[$1] += $2; au[$1] += $3 }
        END {
            for (c in a) {
                if (c == "info" || c == "client|list") continue
                d = a[c] - b[c]; total += d
                if (!(c in in_script)) { sent += d; us += au[c] - bu[c] }
                if (c == "pttl") pt += d
                if (c == "evalsha") ev += d
                if (c == "subscribe" || c == "unsubscribe") su += d
            }
            printf "total=%d sent=%d pttl=%d evalsha=%d subs=%d cmdus=%d\n", total, sent, pt, ev, su, us
        }' <(echo "$1") <(echo "$2")
}
# main_cmdstats: "<command> <calls> <usec>" lines of the main redis-server.
main_cmdstats() { rcli INFO commandstats | awk -F'[:=,]' '/^cmdstat_/ { print substr($1, 9), $3, $5 }'; }
# fleet_watch PID...: samples the main redis-server every FL_SAMPLE_S until
# every PID has exited; the maxima: FW_CONN (connected_clients, the
# sampler's own connection left out), FW_MEM (used_memory), FW_CH, FW_PAT
# (pubsub_channels, pubsub_patterns), FW_SUBS (subscriptions of all
# clients: CLIENT LIST's sub + psub + ssub).
fleet_watch() {
    local p alive line x
    FW_CONN=0 FW_MEM=0 FW_CH=0 FW_PAT=0 FW_SUBS=0
    for (( ; ; )); do
        alive=0
        for p in "$@"; do kill -0 "$p" 2>/dev/null && { alive=1; break; }; done
        ((alive)) || break
        line=$(rcli INFO | awk -F: '/^(connected_clients|used_memory|pubsub_channels|pubsub_patterns):/ {
            sub(/\r/, "", $2); printf "%s=%s ", $1, $2 }')
        x=$(kv "$line" connected_clients) && isnum "$x" && ((x - 1 > FW_CONN)) && FW_CONN=$((x - 1))
        x=$(kv "$line" used_memory) && isnum "$x" && ((x > FW_MEM)) && FW_MEM=$x
        x=$(kv "$line" pubsub_channels) && isnum "$x" && ((x > FW_CH)) && FW_CH=$x
        x=$(kv "$line" pubsub_patterns) && isnum "$x" && ((x > FW_PAT)) && FW_PAT=$x
        x=$(rcli CLIENT LIST | awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^s?p?sub=/) { split($i, a, "="); n += a[2] } } END { print n + 0 }')
        isnum "$x" && ((x > FW_SUBS)) && FW_SUBS=$x
        sleep "$FL_SAMPLE_S"
    done
}
used_memory() { rcli INFO memory | awk -F: '/^used_memory:/ { sub(/\r/, "", $2); print $2 }'; }
# pct_of FILE P: the nearest-rank P-th percentile of FILE's numbers.
pct_of() { sort -n "$1" | awk -v p="$2" '{ v[NR] = $1 } END { if (!NR) { print "-"; exit } r = int(p / 100 * NR + 0.999999); if (r < 1) r = 1; if (r > NR) r = NR; print v[r] }'; }

# fleet_phase KIND MODE: one fleet run of KIND (dlockd, redispy, redlock,
# semaphore) on MODE's names (spread: FL_NAMES, hot: FL_HOT; one, dlockd
# only: FL_ONE_HOSTS daemons x FL_ONE_CLIENTS clients on one name for
# FL_ONE_S s); the fleet's dlockd instances run already for dlockd. Sets
# FP[KIND-MODE-field] for conn mem ch pat subs (sampled); tp p50 p99 all
# (the load generator's), gmin gmax (dlockd: the fewest and most pairs of
# one client); cpu, and total sent pttl evalsha subs (commands: X-n, and X
# per pair), or FP[KIND-MODE-err] to why there is no figure.
declare -A FP=()
fleet_phase() {
    local kind=$1 mode=$2 k="$1-$2" names=$FL_HOT inner base s0 s1 r0 r1 rc=0 out pids=() h st
    local hosts=$FL_HOSTS clients=$FL_CLIENTS secs=$FL_S d
    [ "$mode" = spread ] && names=$FL_NAMES
    [ "$mode" = one ] && names=1 hosts=$FL_ONE_HOSTS clients=$FL_ONE_CLIENTS secs=$FL_ONE_S
    local np=$((hosts * clients)) lim=$((secs + 90))
    flush_redis
    base=${FL_BASE:-$(used_memory)}
    d="$T/fleet-$k"
    mkdir -p "$d"
    case $kind in
    dlockd)
        inner=$SCRIPT_INNER
        s0=$(main_cmdstats) r0=$(cpu_ticks "$REDIS_PID")
        timeout -k 5 "$lim" "$BENCH" fleet -s "$T/fleet-" -N "$hosts" -c "$clients" -d "$secs" -w 1 \
            -K "$names" >"$d/out" 2>"$d/err" &
        pids=("$!")
        ;;
    redispy)
        inner=$(lua_calls "$("$PY" -c 'import redis.lock; print(redis.lock.__file__)')")
        s0=$(main_cmdstats) r0=$(cpu_ticks "$REDIS_PID")
        timeout -k 5 "$lim" "$PY" "$here/peers.py" redispy --socket "$RSOCK" --procs "$np" \
            --seconds "$secs" --names "$names" >"$d/out" 2>"$d/err" &
        pids=("$!")
        ;;
    redlock | semaphore)
        if [ "$kind" = redlock ]; then
            inner=$(lua_calls "$node_dir"/node_modules/redlock/dist/cjs/*.js)
        else
            inner=$(lua_calls "$node_dir"/node_modules/redis-semaphore/lib/mutex/*.js)
        fi
        # One node process per host, a loop per client, all starting at
        # one moment once every process had time to load and connect.
        st=$(($(date +%s%3N) + 2000 + 150 * hosts))
        for ((h = 0; h < hosts; h++)); do
            (cd "$node_dir" && exec timeout -k 5 "$lim" node bench.js "$kind" --socket "$RSOCK" \
                --loops "$clients" --seconds "$secs" --names "$names" --start-at "$st" \
                --samples "$d/lat-$h") >"$d/out-$h" 2>"$d/err-$h" &
            pids+=("$!")
        done
        while (($(date +%s%3N) < st)); do sleep 0.05; done
        s0=$(main_cmdstats) r0=$(cpu_ticks "$REDIS_PID")
        ;;
    esac
    PIDS+=("${pids[@]}")
    fleet_watch "${pids[@]}"
    for h in "${pids[@]}"; do
        wait "$h" || rc=$?
        forget_pid "$h"
    done
    r1=$(cpu_ticks "$REDIS_PID") s1=$(main_cmdstats)
    if ((rc != 0)); then
        FP[$k-err]="exit $rc: $(cat "$d"/err* | tail -n 2 | tr '\n' ' ' | cut -c1-100)"
        problem "fleet $k: ${FP[$k-err]}"
        return
    fi
    if [ "$kind" = redlock ] || [ "$kind" = semaphore ]; then
        cat "$d"/out-* >"$d/out"
        cat "$d"/lat-* >"$d/lat"
        FP[$k-tp]=$(awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^pairs_per_sec=/) { split($i, a, "="); n += a[2] } } END { print n + 0 }' "$d/out")
        FP[$k-all]=$(awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^all_pairs=/) { split($i, a, "="); n += a[2] } } END { print n + 0 }' "$d/out")
        FP[$k-p50]=$(pct_of "$d/lat" 50) FP[$k-p99]=$(pct_of "$d/lat" 99)
    else
        out=$(cat "$d/out")
        FP[$k-tp]=$(kv "$out" pairs_per_sec) FP[$k-all]=$(kv "$out" all_pairs)
        FP[$k-p50]=$(kv "$out" pair_p50_us) FP[$k-p99]=$(kv "$out" pair_p99_us)
        FP[$k-gmin]=$(kv "$out" grants_min) FP[$k-gmax]=$(kv "$out" grants_max)
    fi
    need "${FP[$k-tp]}" "fleet $k pairs_per_sec"
    need "${FP[$k-all]}" "fleet $k all_pairs"
    need "$r1" "redis-server CPU ticks"
    ((FP[$k-all] > 0)) || { FP[$k-err]="no pairs"; return; }
    delta=$(fleet_delta "$s0" "$s1" "$inner")
    FP[$k-conn]=$FW_CONN FP[$k-ch]=$FW_CH FP[$k-pat]=$FW_PAT FP[$k-subscribed]=$FW_SUBS
    FP[$k-mem]=$(calc "($FW_MEM - $base) / 1048576" 2)
    FP[$k-cpu]=$(calc "($r1 - $r0) / $clk_tck * 1000000 / ${FP[$k-all]}" 1)
    for x in total sent pttl evalsha subs cmdus; do
        FP[$k-$x-n]=$(kv "$delta" "$x")
        need "${FP[$k-$x-n]}" "fleet $k commandstats"
        FP[$k-$x]=$(calc "${FP[$k-$x-n]} / ${FP[$k-all]}" 3)
    done
    say "bench:   fleet $k: ${FP[$k-tp]} pairs/s, ${FW_CONN} Redis connections, Redis ${FP[$k-cpu]} us and ${FP[$k-sent]} commands sent per pair"
}

# herd_sent OUT: the commands a client sent in `dlock-bench herd`'s
# per-command deltas (redis_<command>=N), those dlockd's scripts run inside
# Redis (SCRIPT_INNER) left out: the Lua decides, not a list in the C. ROLE
# is left out too: every daemon polls its server's role each second
# (NODE_ROLE_POLL_MS), hand-offs or not, and the fleet's 32 daemons would
# add 0.02 per hand-off to a herd that lasts a fraction of a second.
herd_sent() {
    tr ' ' '\n' <<<"$1" | awk -F= -v inner="$SCRIPT_INNER" '
        BEGIN { n = split(inner, a, " "); for (i = 1; i <= n; i++) in_script["redis_" a[i]] = 1 }
        /^redis_/ && $1 != "redis_total_commands" && $1 != "redis_sent_commands" && $1 != "redis_role" && !($1 in in_script) { s += $2 }
        END { print s + 0 }'
}
# fleet_herd: the herd of 6. (HERD_C waiters on one name, one daemon) on
# the fleet's first daemon, while the others stay connected: FP[herd-sent]
# (commands sent per hand-off) and FP[herd-ms], or FP[herd-err].
fleet_herd() {
    flush_redis
    if run_bench fleet-herd 120 herd -s "${DSOCK[fleet-0]}" -c "$HERD_C" -R "$RSOCK" -k fleet-herd; then
        local sent
        sent=$(herd_sent "$OUT")
        need "$sent" "fleet herd: commands sent"
        FP[herd-sent]=$(calc "$sent / $HERD_C" 2)
        FP[herd-ms]=$(kv "$OUT" herd_ms)
        say "bench:   fleet herd: $HERD_C waiters on fleet-0 in ${FP[herd-ms]} ms, ${FP[herd-sent]} commands sent per hand-off"
    else
        FP[herd-err]="see problems"
    fi
}

if want 12; then
    say "== 12/17 fleet: $FL_HOSTS hosts x $FL_CLIENTS client processes on one Redis (dlockd, redis-py, node peers), on $FL_NAMES names and on $FL_HOT hot names, ${FL_S} s each"
    stop_dlockd main
    redispy_ready
    node_peers_ready
    kinds=(dlockd)
    ((py_ok)) && kinds+=(redispy)
    ((node_ok)) && kinds+=(redlock semaphore)
    declare -A FL_LABEL=([dlockd]="dlockd" [redispy]="redis-py Lock" [redlock]="node redlock" [semaphore]="node redis-semaphore")
    for kind in "${kinds[@]}"; do
        FL_BASE=""
        if [ "$kind" = dlockd ]; then
            flush_redis
            FL_BASE=$(used_memory) # before the hosts' daemons connect
            for ((h = 0; h < FL_HOSTS; h++)); do start_dlockd "fleet-$h"; done
        fi
        fleet_phase "$kind" spread
        fleet_phase "$kind" hot
        if [ "$kind" = dlockd ]; then
            # the one-name shape needs FL_ONE_HOSTS daemons, the fleet may have fewer
            for ((h = FL_HOSTS; h < FL_ONE_HOSTS; h++)); do start_dlockd "fleet-$h"; done
            fleet_phase dlockd one
            fleet_herd
            for ((h = 0; h < FL_HOSTS || h < FL_ONE_HOSTS; h++)); do stop_dlockd "fleet-$h"; done
        fi
    done
    flush_redis
    shape="$FL_HOSTS hosts x $FL_CLIENTS client processes"
    for kind in dlockd redispy redlock semaphore; do
        lab=${FL_LABEL[$kind]}
        if [ "$kind" = redispy ] && ((!py_ok)); then
            skipped "fleet: $lab" "skipped (python3-redis unavailable)"
            continue
        fi
        if { [ "$kind" = redlock ] || [ "$kind" = semaphore ]; } && ((!node_ok)); then
            skipped "fleet: $lab" "skipped (npm unavailable)"
            continue
        fi
        k="$kind-spread"
        if [ -n "${FP[$k-err]-}" ]; then
            failed "fleet ($shape, $FL_NAMES names): $lab" "${FP[$k-err]}" "-"
        else
            info "fleet ($FL_NAMES names): $lab: Redis connections; used_memory above baseline; pub/sub channels / patterns / subscriptions" \
                "${FP[$k-conn]}; ${FP[$k-mem]} MiB; ${FP[$k-ch]} / ${FP[$k-pat]} / ${FP[$k-subscribed]}"
            info "fleet ($FL_NAMES names): $lab: pairs/s; pair p50 / p99; Redis CPU per pair; Redis commands sent / run per pair" \
                "${FP[$k-tp]}/s; ${FP[$k-p50]} / ${FP[$k-p99]} us; ${FP[$k-cpu]} us; ${FP[$k-sent]} / ${FP[$k-total]}"
        fi
        k="$kind-hot"
        if [ -n "${FP[$k-err]-}" ]; then
            failed "fleet, $FL_HOT hot names: $lab" "${FP[$k-err]}" "-"
        else
            if [ "$kind" = dlockd ]; then
                # dlockd does not poll: a try that found the lock taken
                # runs the acquire script's pttl; a waiter subscribes.
                what="failed tries / (UN)SUBSCRIBEs"
                tries="$(calc "${FP[$k-pttl]}" 2) / $(calc "${FP[$k-subs]}" 2)"
            else
                # An uncontended pair sends 2 commands (take, release);
                # what is above that is the library's retries or polls.
                what="retries or polls"
                tries=$(calc "(${FP[$k-sent-n]} - 2 * ${FP[$k-all]}) / ${FP[$k-all]}" 2)
            fi
            info "fleet, $FL_HOT hot names: $lab: hand-offs/s; p50 / p99; Redis connections; pub/sub channels / subscriptions" \
                "${FP[$k-tp]}/s; ${FP[$k-p50]} / ${FP[$k-p99]} us; ${FP[$k-conn]}; ${FP[$k-ch]} / ${FP[$k-subscribed]}"
            info "fleet, $FL_HOT hot names: $lab: Redis commands sent / run per hand-off; $what per hand-off; Redis CPU per hand-off (of it in commands, commandstats)" \
                "$(calc "${FP[$k-sent]}" 2) / $(calc "${FP[$k-total]}" 2); $tries; ${FP[$k-cpu]} us ($(calc "${FP[$k-cmdus]}" 1) us)"
        fi
    done
    # The targets, as ratios of one run.
    ok_d=0 ok_p=0
    [ -z "${FP[dlockd-spread-err]-}" ] && isnum "${FP[dlockd-spread-conn]-}" && ok_d=1
    ((py_ok)) && [ -z "${FP[redispy-spread-err]-}" ] && isnum "${FP[redispy-spread-conn]-}" && ok_p=1
    best="" best_kind=""
    for kind in redispy redlock semaphore; do
        v=${FP[$kind-spread-conn]-}
        if [ -n "${FP[$kind-spread-err]-}" ] || ! isnum "$v"; then continue; fi
        if [ -z "$best" ] || ((v < best)); then best=$v best_kind=$kind; fi
    done
    label="fleet: Redis connections, best peer / dlockd"
    if ((ok_d)) && [ -n "$best" ] && ((FP[dlockd-spread-conn] > 0)); then
        check "$label (${FL_LABEL[$best_kind]}: $best; dlockd: ${FP[dlockd-spread-conn]})" \
            "$(calc "$best / ${FP[dlockd-spread-conn]}" 2)" "x" ">=" 8
        # The floor: dlockd keeps two connections per host (commands and
        # pub/sub); a library keeps one per process that talks to Redis.
        info "fleet: floor: Redis connections per host, dlockd / redis-py (one a client process) / node (one process a host)" \
            "$(calc "${FP[dlockd-spread-conn]} / $FL_HOSTS" 1) / $(calc "${FP[redispy-spread-conn]:-0} / $FL_HOSTS" 1) / $(calc "${FP[semaphore-spread-conn]:-${FP[redlock-spread-conn]:-0}} / $FL_HOSTS" 1)"
    else
        failed "$label" "no figures" ">= 8x"
    fi
    label="fleet: Redis CPU per pair, dlockd / redis-py"
    if ((ok_d && ok_p)); then
        check "$label (${FP[dlockd-spread-cpu]} / ${FP[redispy-spread-cpu]} us)" \
            "$(calc "${FP[dlockd-spread-cpu]} / ${FP[redispy-spread-cpu]}" 2)" "x" "<=" 0.5
        # The floor: the commands Redis runs per pair, scripts' included.
        info "fleet: floor: Redis commands run per pair (redis.call()s included), dlockd / redis-py; dlockd's EVALSHA per pair" \
            "${FP[dlockd-spread-total]} / ${FP[redispy-spread-total]}; ${FP[dlockd-spread-evalsha]}"
    else
        skipped "$label" "skipped (no redis-py or no figures)" "<= 0.5x"
    fi
    label="fleet, $FL_HOT hot names: hand-offs per Redis command sent, dlockd / redis-py"
    if [ -z "${FP[dlockd-hot-err]-}" ] && ((py_ok)) && [ -z "${FP[redispy-hot-err]-}" ] &&
        holds "${FP[dlockd-hot-sent]:-0}" ">" 0 && holds "${FP[redispy-hot-sent]:-0}" ">" 0; then
        check "$label ($(calc "1 / ${FP[dlockd-hot-sent]}" 2) / $(calc "1 / ${FP[redispy-hot-sent]}" 2))" \
            "$(calc "${FP[redispy-hot-sent]} / ${FP[dlockd-hot-sent]}" 2)" "x" ">=" 3
        info "fleet, $FL_HOT hot names: floor: dlockd's commands sent per hand-off: EVALSHA / (UN)SUBSCRIBE / the rest" \
            "${FP[dlockd-hot-evalsha]} / ${FP[dlockd-hot-subs]} / $(calc "(${FP[dlockd-hot-sent-n]} - ${FP[dlockd-hot-evalsha-n]} - ${FP[dlockd-hot-subs-n]}) / ${FP[dlockd-hot-all]}" 3)"
    else
        skipped "$label" "skipped (no redis-py or no figures)" ">= 3x"
    fi
    # Issue 40 (wake one daemon per release): its targets, side by side.
    hot="fleet, $FL_HOT hot names"
    ok_h=0 ok_hp=0
    [ -z "${FP[dlockd-hot-err]-}" ] && isnum "${FP[dlockd-hot-all]-}" && ok_h=1
    ((ok_h && py_ok)) && [ -z "${FP[redispy-hot-err]-}" ] && isnum "${FP[redispy-hot-all]-}" && ok_hp=1
    if ((ok_h)); then
        check "$hot: dlockd's failed tries per hand-off" "$(calc "${FP[dlockd-hot-pttl]}" 2)" "" "<=" 1.5
    else
        failed "$hot: dlockd's failed tries per hand-off" "no figures" "<= 1.5"
    fi
    one="fleet, $FL_ONE_HOSTS daemons x $FL_ONE_CLIENTS clients on one name"
    k=dlockd-one
    if [ -z "${FP[$k-err]-}" ] && isnum "${FP[$k-all]-}"; then
        check "$one: commands dlockd sent per hand-off (EVALSHA + (UN)SUBSCRIBE)" \
            "$(calc "(${FP[$k-evalsha-n]} + ${FP[$k-subs-n]}) / ${FP[$k-all]}" 2)" "" "<=" 3.5
        info "$one: grants per client in $FL_ONE_S s, min / max; hand-offs/s; p50 / p99; failed tries / EVALSHA / (UN)SUBSCRIBEs per hand-off; Redis CPU per hand-off (in commands)" \
            "${FP[$k-gmin]} / ${FP[$k-gmax]}; ${FP[$k-tp]}/s; ${FP[$k-p50]} / ${FP[$k-p99]} us; $(calc "${FP[$k-pttl]}" 2) / $(calc "${FP[$k-evalsha]}" 2) / $(calc "${FP[$k-subs]}" 2); ${FP[$k-cpu]} us ($(calc "${FP[$k-cmdus]}" 1) us)"
    else
        failed "$one: commands dlockd sent per hand-off (EVALSHA + (UN)SUBSCRIBE)" "${FP[$k-err]:-no figures}" "<= 3.5"
    fi
    if ((ok_hp)); then
        check "$hot: Redis CPU per hand-off, dlockd / redis-py (${FP[dlockd-hot-cpu]} / ${FP[redispy-hot-cpu]} us)" \
            "$(calc "${FP[dlockd-hot-cpu]} / ${FP[redispy-hot-cpu]}" 2)" "x" "<=" 1.0
        check "$hot: hand-offs/s, dlockd / redis-py (${FP[dlockd-hot-tp]} / ${FP[redispy-hot-tp]})" \
            "$(calc "${FP[dlockd-hot-tp]} / ${FP[redispy-hot-tp]}" 2)" "x" ">=" 1.3
        check "$hot: hand-off p99, dlockd / redis-py ($(calc "${FP[dlockd-hot-p99]} / 1000" 0) / $(calc "${FP[redispy-hot-p99]} / 1000" 0) ms)" \
            "$(calc "${FP[dlockd-hot-p99]} / ${FP[redispy-hot-p99]}" 2)" "x" "<=" 0.5
    else
        for label in "Redis CPU per hand-off, dlockd / redis-py:<= 1.0x" "hand-offs/s, dlockd / redis-py:>= 1.3x" \
            "hand-off p99, dlockd / redis-py:<= 0.5x"; do
            skipped "$hot: ${label%%:*}" "skipped (no redis-py or no figures)" "${label#*:}"
        done
    fi
    if ((ok_h)); then
        check "$hot: dlockd's hand-offs/s against before issue 40" "${FP[dlockd-hot-tp]}" "/s" ">=" "$FL_HOT_BEFORE"
    else
        failed "$hot: dlockd's hand-offs/s against before issue 40" "no figures" ">= $FL_HOT_BEFORE/s"
    fi
    label="fleet ($FL_NAMES names): Redis commands run per pair (redis.call()s included), dlockd, against before issue 40"
    if ((ok_d)); then
        v=${FP[dlockd-spread-total]}
        if holds "$v - $FL_RUN_BEFORE" "<=" "$FL_RUN_TOL" && holds "$FL_RUN_BEFORE - $v" "<=" "$FL_RUN_TOL"; then
            res=pass
        else
            res=fail
        fi
        row "$label" "$v" "$FL_RUN_BEFORE +- $FL_RUN_TOL" "$res"
    else
        failed "$label" "no figures" "$FL_RUN_BEFORE +- $FL_RUN_TOL"
    fi
    label="fleet: single-daemon herd of $HERD_C (fleet-0, the other daemons connected): Redis commands dlockd sent per hand-off"
    if [ -z "${FP[herd-err]-}" ] && isnum "${FP[herd-sent]-}"; then
        check "$label" "${FP[herd-sent]}" "" "<=" 1.0
    else
        failed "$label" "${FP[herd-err]:-no figures}" "<= 1.0"
    fi
fi

# ---- 13. access rules ---------------------------------------------------------------
# The throughput of 2. with 50 [access] rules against none, on one Redis, in
# four rounds: none, rules, rules, none. The load generator runs as a uid
# that is not root (root administers whatever the rules say, so its requests
# would not be matched): as itself when it is not root, else as uid
# AC_UID through setpriv, from a copy in a directory it can reach.
if want 13; then
    say "== 13/17 access rules: LOCK+UNLOCK pairs/s with 50 [access] rules against none, rounds none/rules/rules/none/rules/none/none/rules, ${AC_S} s each"
    ac_run=("$BENCH")
    if [ "$(id -u)" = 0 ]; then
        command -v setpriv >/dev/null || fatal "section 13 needs setpriv (util-linux) to run as uid $AC_UID"
        chmod 711 "$T"
        mkdir -p "$T/pub"
        chmod 755 "$T/pub"
        cp "$BENCH" "$T/pub/dlock-bench"
        chmod 755 "$T/pub/dlock-bench"
        ac_run=(setpriv --reuid="$AC_UID" --regid="$AC_UID" --clear-groups "$T/pub/dlock-bench")
        ac_uid=$AC_UID
    else
        ac_uid=$(id -u)
    fi
    # 48 rules for other users and a group, a rule for everyone, and the
    # load generator's own (its names are k<N>) last.
    ac_rules="[access]"$'\n'
    for ((i = 0; i < 48; i++)); do
        ac_rules+="uid:$((71000 + i)) = lock svc$i/* svc$i-batch/* shared/svc$i-*"$'\n'
    done
    ac_rules+="gid:71999 = read *"$'\n'"* = read status/*"$'\n'"uid:$ac_uid = lock k* tmp/*"$'\n'
    ac_server=$'[server]\nsocket_mode = 0666\n'
    start_dlockd acnone "$ac_server"
    start_dlockd acrules "$ac_server$ac_rules"
    nrules=$(grep -c ' = ' "$T/acrules.conf")
    ((nrules >= 50)) || fatal "section 13: $nrules rules in acrules.conf, wanted 50"
    ac_none=() ac_with=() ac_cpu_none=0 ac_cpu_with=0 ac_pairs_none=0 ac_pairs_with=0
    # ABBA BAAB: each configuration runs as often early as late, so that
    # a machine whose load drifts during the section favours neither.
    for round in none rules rules none rules none none rules; do
        name=acnone
        [ "$round" = rules ] && name=acrules
        t0=$(cpu_ticks "${DPID[$name]}")
        if OUT=$(timeout -k 5 $((AC_S + 40)) "${ac_run[@]}" throughput -s "${DSOCK[$name]}" -c 50 -d "$AC_S" -w 1 2>"$T/bench-access-$round.err"); then
            t1=$(cpu_ticks "${DPID[$name]}")
            v=$(kv "$OUT" pairs_per_sec) all=$(kv "$OUT" all_pairs)
            need "$v" "access $round pairs_per_sec"
            need "$all" "access $round all_pairs"
            say "bench: access $round round: $v pairs/s"
            if [ "$round" = rules ]; then
                ac_with+=("$v")
                ac_cpu_with=$((ac_cpu_with + t1 - t0)) ac_pairs_with=$((ac_pairs_with + all))
            else
                ac_none+=("$v")
                ac_cpu_none=$((ac_cpu_none + t1 - t0)) ac_pairs_none=$((ac_pairs_none + all))
            fi
        else
            problem "access $round: $(tr '\n' ' ' <"$T/bench-access-$round.err")"
        fi
    done
    denied=$(grep -c ' denied ' "$T/dlockd-acrules.log")
    ((denied == 0)) || problem "access: $denied requests denied under the bench's rules"
    if ((${#ac_none[@]} == 4 && ${#ac_with[@]} == 4)); then
        none=$(calc "(${ac_none[0]} + ${ac_none[1]} + ${ac_none[2]} + ${ac_none[3]}) / 4" 0)
        with=$(calc "(${ac_with[0]} + ${ac_with[1]} + ${ac_with[2]} + ${ac_with[3]}) / 4" 0)
        info "access: LOCK+UNLOCK pairs/s, no rules / 50 rules (uid $ac_uid, 50 connections; rounds ${ac_none[*]} / ${ac_with[*]})" "$none/s / $with/s"
        if ((ac_pairs_none > 0 && ac_pairs_with > 0)); then
            # CPU time per pair: steadier than pairs/s on a shared machine.
            info "access: dlockd CPU per pair, no rules / 50 rules" \
                "$(calc "$ac_cpu_none / $clk_tck * 1000000 / $ac_pairs_none" 2) / $(calc "$ac_cpu_with / $clk_tck * 1000000 / $ac_pairs_with" 2) us"
        fi
        check "access: pairs/s with 50 [access] rules / with none" "$(calc "$with / $none" 3)" "" ">=" 0.95
    else
        failed "access: pairs/s with 50 [access] rules / with none" "see problems" ">= 0.95"
    fi
    stop_dlockd acnone
    stop_dlockd acrules
fi

# ---- 14. election hand-over ---------------------------------------------------------

if want 14; then
    say "== 14/17 election hand-over: a leader's connection closes (tests/bench/elect.py, $EL_ROUNDS rounds)"
    flush_redis
    ensure_dlockd main
    start_dlockd second
    if OUT=$(timeout -k 5 120 "$PY" "$here/elect.py" "${DSOCK[main]}" "${DSOCK[second]}" "$RSOCK" \
        "$EL_ROUNDS" 2>"$T/bench-elect.err"); then
        check "election hand-over, same daemon: p99 (leader's close -> next leader's OK)" \
            "$(calc "$(kv "$OUT" same_p99_us) / 1000" 2)" " ms" "<=" 100
        info "election hand-over, same daemon: p50" "$(calc "$(kv "$OUT" same_p50_us) / 1000" 2) ms"
        check "election hand-over, another daemon: p99" "$(calc "$(kv "$OUT" other_p99_us) / 1000" 2)" \
            " ms" "<=" 500
        info "election hand-over, another daemon: p50" "$(calc "$(kv "$OUT" other_p50_us) / 1000" 2) ms"
        info "election hand-over to an observer on the other daemon (!LEADER read): p50 / p99" \
            "$(calc "$(kv "$OUT" observer_p50_us) / 1000" 2) / $(calc "$(kv "$OUT" observer_p99_us) / 1000" 2) ms"
    else
        problem "election bench: $(tail -n 3 "$T/bench-elect.err" | tr '\n' ' ')"
        failed "election hand-over, same daemon: p99" "see problems" "<= 100 ms"
        failed "election hand-over, another daemon: p99" "see problems" "<= 500 ms"
    fi
    stop_dlockd second
    stop_dlockd main
    flush_redis
fi

# ---- 15. multi-name locks -----------------------------------------------------------
# MLOCK 4 + MUNLOCK 4 sets of names of each connection's own against
# LOCK/UNLOCK pairs, on the main Redis and daemon; the commands each costs
# Redis from commandstats around each round.
if want 15; then
    say "== 15/17 multi-name locks: MLOCK 4 + MUNLOCK sets/s against LOCK+UNLOCK pairs/s (50 connections, no contention), rounds plain/multi/multi/plain, ${ML_S} s each"
    flush_redis
    ensure_dlockd main
    ml_stats() { rcli INFO commandstats | awk -F'[:=,]' '/^cmdstat_/ { print substr($1, 9), $3 }'; }
    ml_plain=() ml_multi=() ml_lat="" ml_sent_plain=0 ml_n_plain=0 ml_sent_multi=0 ml_n_multi=0
    ml_cpu_plain=0 ml_cpu_multi=0 ml_dcpu_plain=0 ml_dcpu_multi=0
    for round in plain multi multi plain; do
        ml_args=()
        [ "$round" = multi ] && ml_args=(-m multi -p 4)
        before=$(ml_stats) r0=$(cpu_ticks "$REDIS_PID") d0=$(cpu_ticks "${DPID[main]}")
        if run_bench "multi-$round" $((ML_S + 40)) throughput -s "${DSOCK[main]}" -c 50 -d "$ML_S" -w 1 "${ml_args[@]}"; then
            after=$(ml_stats) r1=$(cpu_ticks "$REDIS_PID") d1=$(cpu_ticks "${DPID[main]}")
            v=$(kv "$OUT" pairs_per_sec) all=$(kv "$OUT" all_pairs)
            need "$v" "multi $round pairs_per_sec"
            need "$all" "multi $round all_pairs"
            sent=$(kv "$(cmd_delta "$before" "$after")" sent)
            say "bench: multi $round round: $v/s, $sent commands sent for $all"
            if [ "$round" = multi ]; then
                ml_multi+=("$v")
                ml_lat="$(kv "$OUT" pair_p50_us) / $(kv "$OUT" pair_p99_us) us"
                ml_sent_multi=$((ml_sent_multi + sent)) ml_n_multi=$((ml_n_multi + all))
                ml_cpu_multi=$((ml_cpu_multi + r1 - r0)) ml_dcpu_multi=$((ml_dcpu_multi + d1 - d0))
            else
                ml_plain+=("$v")
                ml_sent_plain=$((ml_sent_plain + sent)) ml_n_plain=$((ml_n_plain + all))
                ml_cpu_plain=$((ml_cpu_plain + r1 - r0)) ml_dcpu_plain=$((ml_dcpu_plain + d1 - d0))
            fi
        fi
    done
    if ((${#ml_plain[@]} == 2 && ${#ml_multi[@]} == 2)); then
        plain=$(calc "(${ml_plain[0]} + ${ml_plain[1]}) / 2" 0)
        multi=$(calc "(${ml_multi[0]} + ${ml_multi[1]}) / 2" 0)
        info "multi-name locks: MLOCK 4 + MUNLOCK sets/s / LOCK+UNLOCK pairs/s (50 connections; rounds ${ml_multi[*]} / ${ml_plain[*]})" "$multi/s / $plain/s"
        info "multi-name locks: set latency p50 / p99" "$ml_lat"
        info "multi-name locks: 4 names as 4 LOCK+UNLOCK pairs would go (pairs/s / 4)" "$(calc "$plain / 4" 0)/s"
        if ((ml_n_multi > 0 && ml_n_plain > 0)); then
            info "multi-name locks: Redis commands sent per set / per pair" \
                "$(calc "$ml_sent_multi / $ml_n_multi" 2) / $(calc "$ml_sent_plain / $ml_n_plain" 2)"
            info "multi-name locks: Redis CPU per set / per pair" \
                "$(calc "$ml_cpu_multi * 1000000 / $clk_tck / $ml_n_multi" 1) / $(calc "$ml_cpu_plain * 1000000 / $clk_tck / $ml_n_plain" 1) us"
            info "multi-name locks: dlockd CPU per set / per pair" \
                "$(calc "$ml_dcpu_multi * 1000000 / $clk_tck / $ml_n_multi" 1) / $(calc "$ml_dcpu_plain * 1000000 / $clk_tck / $ml_n_plain" 1) us"
        fi
        check "multi-name locks: 4-name sets/s / single-lock pairs/s (a set costs <= 2x a lock)" "$(calc "$multi / $plain" 2)" "" ">=" 0.5
    else
        failed "multi-name locks: 4-name sets/s / single-lock pairs/s" "see problems" ">= 0.5"
    fi
    flush_redis
fi

# ---- 16. LIST over 100,000 locks ------------------------------------------------------
# 100,000 Redisson-style lock hashes (one owner field, a 10-minute PEXPIRE)
# written by a Lua loop (tests/bench/list.py populate): holding that many
# through dlockd would have its watchdog renew 100,000 leases. LIST * 1000
# stops once it has 1001 names; a pattern that matches nothing walks the
# whole keyspace. Then a probe connection's LOCK times alone and while
# another connection runs LIST * 1000 back to back.
if want 16; then
    say "== 16/17 LIST over $LS_N locks: LIST * $LS_LIMIT ($LS_ROUNDS rounds), a full walk, LOCK p99 while listing (${LS_S} s)"
    flush_redis
    ensure_dlockd main
    if OUT=$(timeout -k 5 300 "$PY" "$here/list.py" populate "$RSOCK" "$LS_N" 2>"$T/bench-list.err"); then
        info "list: keys in Redis (Redisson-style hashes written by a Lua loop)" "$(kv "$OUT" keys)"
    else
        problem "list populate: $(tail -n 3 "$T/bench-list.err" | tr '\n' ' ')"
    fi
    if OUT=$(timeout -k 5 300 "$PY" "$here/list.py" measure "${DSOCK[main]}" "$LS_ROUNDS" '*' "$LS_LIMIT" 2>>"$T/bench-list.err"); then
        [ "$(kv "$OUT" entries)" = "$LS_LIMIT" ] || problem "list: LIST * $LS_LIMIT told $(kv "$OUT" entries) entries"
        check "list: LIST * $LS_LIMIT over $LS_N locks, slowest of $LS_ROUNDS" "$(kv "$OUT" max_ms)" " ms" "<=" 1000
        info "list: LIST * $LS_LIMIT, p50" "$(kv "$OUT" p50_ms) ms"
    else
        problem "list measure: $(tail -n 3 "$T/bench-list.err" | tr '\n' ' ')"
        failed "list: LIST * $LS_LIMIT over $LS_N locks, slowest of $LS_ROUNDS" "see problems" "<= 1000 ms"
    fi
    if OUT=$(timeout -k 5 300 "$PY" "$here/list.py" measure "${DSOCK[main]}" 5 'nomatch/*' "$LS_LIMIT" 2>>"$T/bench-list.err"); then
        info "list: LIST nomatch/* (walks all $LS_N keys, none listed), p50 / slowest of 5" \
            "$(kv "$OUT" p50_ms) / $(kv "$OUT" max_ms) ms"
    else
        problem "list walk: $(tail -n 3 "$T/bench-list.err" | tr '\n' ' ')"
    fi
    if OUT=$(timeout -k 5 120 "$PY" "$here/list.py" contend "${DSOCK[main]}" "$LS_S" '*' "$LS_LIMIT" 2>>"$T/bench-list.err"); then
        check "list: another client's LOCK p99 while LIST * $LS_LIMIT runs back to back" \
            "$(kv "$OUT" listing_p99_ms)" " ms" "<=" 10
        info "list: that LOCK's p50 / max while listing; p50 / p99 with no LIST" \
            "$(kv "$OUT" listing_p50_ms) / $(kv "$OUT" listing_max_ms) ms; $(kv "$OUT" alone_p50_ms) / $(kv "$OUT" alone_p99_ms) ms"
    else
        problem "list contend: $(tail -n 3 "$T/bench-list.err" | tr '\n' ' ')"
        failed "list: another client's LOCK p99 while LIST * $LS_LIMIT runs back to back" "see problems" "<= 10 ms"
    fi
    flush_redis
fi

# ---- 17. live restore: the pause of a hand-over ------------------------------------------
# Issue 39. The daemon that takes over is no child of this shell: the old
# process exits 0 and is reaped here; the new one is found by INFO's pid
# and stopped by it (gone: no such process, or a zombie nobody here reaps).
pid_gone() {
    local st
    kill -0 "$1" 2>/dev/null || return 0
    st=$(awk '{ sub(/^.*\) /, ""); print $1 }' "/proc/$1/stat" 2>/dev/null)
    [ "$st" = Z ] || [ -z "$st" ]
}
if want 17; then
    say "== 17/17 live restore: SIGUSR2 to a dlockd with $UP_C connections x $UP_L locks and $UP_W waiting, $UP_P probes timing LOCK/UNLOCK pairs"
    stop_dlockd main
    flush_redis
    start_dlockd upgrade "$(printf '[server]\nmax_locks_per_uid = %s\n' $((2 * UP_C * UP_L)))"
    up_old=${DPID[upgrade]}
    # Out of DPID: run_bench's liveness sweep would call its exit 0 a death.
    DPID[upgrade]=""
    up_locks=$((UP_C * UP_L))
    up_ok=0 rc=0
    OUT=$(timeout -k 5 120 "$BENCH" upgrade -s "${DSOCK[upgrade]}" -c "$UP_C" -l "$UP_L" -n "$UP_W" \
        -p "$UP_P" -w "$UP_WIN" 2>"$T/bench-upgrade.err") || rc=$?
    case $rc in
    0) up_ok=1 ;;
    3) problem "live restore: $(tr '\n' ' ' <"$T/bench-upgrade.err")" ;;
    124 | 137) problem "live restore: dlock-bench upgrade did not finish within 120 s (daemon hangs?)" ;;
    *) fatal "live restore: dlock-bench upgrade failed (exit $rc): $(cat "$T/bench-upgrade.err")" ;;
    esac
    [ -s "$T/bench-upgrade.err" ] && ((up_ok)) && say "bench: live restore: $(tr '\n' ' ' <"$T/bench-upgrade.err")"
    up_new=$(kv "$("$BENCH" info -s "${DSOCK[upgrade]}" 2>/dev/null)" pid)
    if ((up_ok)); then
        v=$(kv "$OUT" pause_ms)
        need "$v" "upgrade pause_ms"
        check "live restore: the hand-over took (INFO upgrades up by one, upgrade_failures not)" \
            "$(kv "$OUT" handed_over)" "" "==" 1
        [ "$(kv "$OUT" handed_over)" = 1 ] ||
            problem "live restore: the hand-over failed (upgrade_failures=$(kv "$OUT" upgrade_failures)): $(grep -h 'upgrade failed' "$T/dlockd-upgrade.log" | tail -n 1)"
        check "live restore: pause, the longest probe request across the hand-over ($UP_C connections, $up_locks locks, $UP_W waiting)" \
            "$v" " ms" "<=" "$UP_PAUSE_MS"
        info "live restore: INFO upgrade_ms (the whole hand-over); SIGUSR2 -> the INFO saying it ended" \
            "$(kv "$OUT" upgrade_ms) ms; $(kv "$OUT" handover_seen_ms) ms"
        info "live restore: INFO upgrade_state_bytes" "$(kv "$OUT" upgrade_state_bytes) B"
        info "live restore: probe requests before the signal p50 / p99 / max; max after the hand-over" \
            "$(kv "$OUT" base_p50_ms) / $(kv "$OUT" base_p99_ms) / $(kv "$OUT" base_max_ms); $(kv "$OUT" after_max_ms) ms"
        info "live restore: connect $UP_C / grant $up_locks locks (s)" "$(kv "$OUT" connect_s) / $(kv "$OUT" grant_s) s"
        check "live restore: holders open and holding after it (STATUS: OK MINE, the fence granted before)" \
            "$(kv "$OUT" status_ok)" "" "==" "$UP_C"
        check "live restore: INFO locks_held after it (the probes' released)" "$(kv "$OUT" locks_held)" "" "==" "$up_locks"
        check "live restore: INFO waiters after it" "$(kv "$OUT" waiters)" "" "==" "$UP_W"
        check "live restore: waiters granted, a greater fence, once their holders UNLOCKed" \
            "$(kv "$OUT" waiters_granted)" "" "==" "$UP_W"
        check "live restore: !LOST (and any other event) on any connection (check)" "$(kv "$OUT" lost_events)" "" "==" 0
    else
        failed "live restore: pause, the longest probe request across the hand-over" "see problems" "<= $UP_PAUSE_MS ms"
        failed "live restore: holders open and holding after it" "see problems" "== $UP_C"
    fi
    # The old process: gone with exit 0 once the new one took over.
    if isnum "$up_new" && [ "$up_new" != "$up_old" ]; then
        PIDS+=("$up_new")
        for ((i = 0; i < 100; i++)); do pid_gone "$up_old" && break; sleep 0.1; done
        if pid_gone "$up_old"; then
            wait "$up_old"
            rc=$?
            ((rc == 0)) || problem "live restore: the old dlockd (pid $up_old) exited with status $rc after the hand-over"
        else
            problem "live restore: the old dlockd (pid $up_old) still runs 10 s after pid $up_new took over (killed)"
            kill -KILL "$up_old"
            wait "$up_old"
        fi
        forget_pid "$up_old"
        kill -TERM "$up_new"
        for ((i = 0; i < 100; i++)); do pid_gone "$up_new" && break; sleep 0.1; done
        if ! pid_gone "$up_new"; then
            problem "live restore: the new dlockd (pid $up_new) did not stop within 10 s of SIGTERM (killed)"
            kill -KILL "$up_new"
        fi
        forget_pid "$up_new"
    else
        # No hand-over happened: the daemon is still the one started here.
        DPID[upgrade]=$up_old
        stop_dlockd upgrade
    fi
    flush_redis
fi

# ---- report ---------------------------------------------------------------------

for name in "${!DPID[@]}"; do dlockd_alive "$name" >/dev/null; done
elapsed=$(($(date +%s) - started))
model=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
mem=$(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)

echo
echo "dlockd benchmark report"
echo "  machine : $(nproc) CPUs, ${model:-unknown CPU model}, $mem RAM, kernel $(uname -sr)"
echo "  software: redis-server $redis_version, $("$DLOCKD" --version 2>&1 | head -n 1), node $(node --version 2>/dev/null || echo none), $("$PY" -c 'import redis; print("redis-py", redis.__version__)' 2>/dev/null || echo 'redis-py none')"
echo "  command : $invocation${ONLY:+ (BENCH_ONLY=$ONLY)}"
echo "  run time: ${elapsed} s"
echo
w1=2 w2=7 w3=5 w4=6
for ((i = 0; i < nrow; i++)); do
    ((${#R_NUM[i]} > w1)) && w1=${#R_NUM[i]}
    ((${#R_MEAS[i]} > w2)) && w2=${#R_MEAS[i]}
    ((${#R_VAL[i]} > w3)) && w3=${#R_VAL[i]}
    ((${#R_TGT[i]} > w4)) && w4=${#R_TGT[i]}
done
fmt="%-${w1}s  %-${w2}s  %${w3}s  %-${w4}s  %s\n"
# shellcheck disable=SC2059
printf "$fmt" "#" "measure" "value" "target" "result"
# shellcheck disable=SC2059
printf "$fmt" "$(printf '%*s' "$w1" '' | tr ' ' -)" "$(printf '%*s' "$w2" '' | tr ' ' -)" \
    "$(printf '%*s' "$w3" '' | tr ' ' -)" "$(printf '%*s' "$w4" '' | tr ' ' -)" "------"
for ((i = 0; i < nrow; i++)); do
    # shellcheck disable=SC2059
    printf "$fmt" "${R_NUM[i]}" "${R_MEAS[i]}" "${R_VAL[i]}" "${R_TGT[i]}" "${R_RES[i]}"
done
npass=0 nfail=0
for r in "${R_RES[@]}"; do
    [ "$r" = pass ] && npass=$((npass + 1))
    [ "$r" = fail ] && nfail=$((nfail + 1))
done
echo
echo "targets: $npass pass, $nfail fail"
echo
echo "notes:"
echo "  - ceiling: redis-benchmark draws each __rand_int__ independently, so many calls find"
echo "    their random key already held by another random owner and take the script's short"
echo "    'taken' path (see the outcome-mix row); a pair is counted as two acquire calls."
echo "    dlockd's own pair is one acquire script plus one release script."
echo "  - load generators, dlockd and redis-server share this machine's $(nproc) CPUs."
echo "  - 8 processes (redis-py Lock, dlock.py, libdlock): each process one connection, looping"
echo "    LOCK+UNLOCK on a name of its own after a common start; pairs/s is the sum of the"
echo "    processes' rates, client CPU per pair their own CPU time over the pairs they counted."
echo "  - Redis 7 counts every redis.call() made inside a script in total_commands_processed;"
echo "    'commands dlockd sent' is that total minus the calls made inside dlockd's scripts"
echo "    (per-command deltas: ${herd_detail:-n/a})."
echo "  - cluster: the per-pair Redis figures are INFO commandstats deltas, summed over the"
echo "    primaries and without the INFO calls that read them, from just before to just after"
echo "    each load-generator run, divided by the pairs of the whole run (warm-up included)."
echo "  - quorum: per grant = the same commandstats deltas, summed over the $QU_N nodes, divided by"
echo "    dlockd's INFO grants over the run. A fence raise is an op in the batch script's EVALSHA"
echo "    like the others, so it shows as an op, not as a call: raises = get calls - quorum"
echo "    grants (hset calls - getset calls, the register script's excluded), written = set"
echo "    calls - the same."
echo "  - fleet: per pair (hand-off) = redis-server's /proc CPU and commandstats deltas from just"
echo "    before to just after each run, over every pair it made (warm-up included); commands"
echo "    sent = all minus those the client's own Lua runs; connections, used_memory and pub/sub"
echo "    are the maxima of samples every ${FL_SAMPLE_S} s, the sampler's own left out."
echo "  - hand-off clock: CLOCK_MONOTONIC just before the holder's UNLOCK write() to just after"
echo "    the read() that returns the waiter's OK. The waiter is known to be queued (INFO"
echo "    waiters=1) and, across daemons, subscribed (PUBSUB NUMSUB) before the UNLOCK."
if ((${#PROBLEMS[@]})); then
    echo
    echo "daemon problems seen:"
    for p in "${PROBLEMS[@]}"; do echo "  - $p"; done
fi
logs=$(cat "$T"/dlockd-*.log 2>/dev/null | grep -E ' (warn|error|crit|alert|emerg): ' |
    sed -E 's/^[0-9-]+ [0-9:.]+ //; s/[0-9]+/N/g' | sort | uniq -c | sort -rn | head -n 15)
if [ -n "$logs" ]; then
    echo
    echo "dlockd log warnings/errors (count, line):"
    sed 's/^/  /' <<<"$logs"
fi
exit 0
