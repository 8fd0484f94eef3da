#!/bin/sh
# Tests of the shell client clients/shell/dlock.sh against a real dlockd.
# SPDX-License-Identifier: MIT
#
#   DLOCKD_BIN=build/dlockd sh tests/shell/test_dlock_sh.sh
#
# Starts a private redis-server and dlockd on Unix sockets in a temporary
# directory (removed at exit, both servers stopped), runs the client scenario
# under dash (or sh) and under bash when it exists, then the one-shot socat
# claim of the README and clients/shell/example.sh. Prints "ok - ..." or
# "not ok - ..." per check and "N passed, M failed" as the last line; exits 1
# if anything failed.
#
# The same file is the scenario: `SHELL $0 --scenario LIB SOCK` runs the
# client checks in the shell SHELL.

# Snippets for other shells are single-quoted on purpose.
# shellcheck disable=SC2016
set -u

# ---------------------------------------------------------------- scenario --

sc_ok() { printf 'ok - %s: %s\n' "$SC_SHELL" "$1"; }
sc_nok() { printf 'not ok - %s: %s\n' "$SC_SHELL" "$1"; }
# sc_check DESC COMMAND...: ok when COMMAND succeeds.
sc_check() {
    sc_desc=$1
    shift
    if "$@"; then sc_ok "$sc_desc"; else sc_nok "$sc_desc"; fi
}
is_digits() { case ${1-} in '' | *[!0-9]*) return 1 ;; *) return 0 ;; esac; }
# refused COMMAND...: COMMAND returns 2 (its message on stderr dropped).
refused() {
    rf_rc=0
    "$@" 2>/dev/null || rf_rc=$?
    [ "$rf_rc" -eq 2 ]
}

# oneshot LINE: one request on a fresh connection; prints the reply.
oneshot() {
    printf '%s\n' "$1" | socat -t 5 - "UNIX-CONNECT:$SOCK"
}
# wait_free NAME: STATUS NAME from another connection says OK FREE, within
# about 2 s (the release of a closed connection takes a Redis round trip).
wait_free() {
    wf_i=0
    while [ "$(oneshot "STATUS $1")" != "OK FREE" ]; do
        wf_i=$((wf_i + 1))
        if [ "$wf_i" -ge 20 ]; then return 1; fi
        sleep 0.1
    done
}
# await_waiters N: INFO from another connection counts N waiting requests,
# within about 5 s (else 1).
await_waiters() {
    aw_i=0
    until oneshot INFO | grep -q " waiters=$1 "; do
        aw_i=$((aw_i + 1))
        if [ "$aw_i" -ge 250 ]; then return 1; fi
        sleep 0.02
    done
}
# fair_waiter ID FILE: another process that waits for the fair lock $F and,
# once granted, appends "ID FENCE" to FILE while it holds it, then lets go;
# its pid is $!.
fair_waiter() {
    "$SC_SH" -c '. "$1" && dlock_open "$2" || exit 9
        dlock_fairlock "$F" && echo "$3 $DLOCK_FENCE" >>"$4"
        dlock_unlock "$F"' sh "$LIB" "$SOCK" "$1" "$2" >/dev/null 2>&1 &
}
# other SNIPPET: run SNIPPET in a separate process of the same shell, with
# the library sourced and $SOCK open; prints what the snippet prints.
other() {
    "$SC_SH" -c '. "$1" && dlock_open "$2" || exit 9
'"$1" sh "$LIB" "$SOCK"
}

scenario() {
    LIB=$1 SOCK=$2 SC_SH=$3 SC_SHELL=$4
    # shellcheck source=clients/shell/dlock.sh disable=SC1091
    . "$LIB"

    # -- opening
    rc=0
    dlock_open "$SOCK.missing" 2>"$TMPDIR/open.err" || rc=$?
    sc_check "dlock_open of a missing socket fails with 3" [ "$rc" -eq 3 ]
    out=$(cat "$TMPDIR/open.err")
    want="dlock: cannot connect to dlockd at $SOCK.missing: No such file or directory (is dlockd running?)"
    sc_check "dlock_open of a missing socket names it and hints (got '$out')" [ "$out" = "$want" ]
    rc=0
    dlock_cmd PING 2>/dev/null || rc=$?
    sc_check "dlock_cmd without a connection returns 3" [ "$rc" -eq 3 ]
    rc=0
    dlock_open "$SOCK" || rc=$?
    sc_check "dlock_open connects and PINGs" [ "$rc" -eq 0 ]
    rc=0
    dlock_open "$SOCK" 2>/dev/null || rc=$?
    sc_check "a second dlock_open in the same process is refused" [ "$rc" -eq 2 ]
    rc=0
    dlock_cmd PING || rc=$?
    sc_check "dlock_cmd PING: 0 and OK PONG" [ "$rc.$DLOCK_REPLY" = "0.OK PONG" ]
    rc=0
    dlock_cmd BOGUS || rc=$?
    case $rc.$DLOCK_REPLY in
    "2.ERR UNKNOWN"*) sc_ok "dlock_cmd of an unknown command: 2 and ERR UNKNOWN" ;;
    *) sc_nok "dlock_cmd of an unknown command: 2 and ERR UNKNOWN (rc $rc, '$DLOCK_REPLY')" ;;
    esac

    # -- lock, and a second connection that cannot have it
    rc=0
    dlock_lock x || rc=$?
    fence1=$DLOCK_FENCE
    sc_check "dlock_lock x returns 0" [ "$rc" -eq 0 ]
    sc_check "the fence is digits ($fence1)" is_digits "$fence1"
    sc_check "holds is 1" [ "$DLOCK_HOLDS" = 1 ]

    out=$(other 'dlock_trylock x 0; echo "$? $DLOCK_REPLY"')
    case $out in
    "1 TIMEOUT "*) sc_ok "another process: dlock_trylock x 0 gets TIMEOUT ($out)" ;;
    *) sc_nok "another process: dlock_trylock x 0 gets TIMEOUT (got '$out')" ;;
    esac
    out=$(other 'dlock_trylock x 150 5000; echo "$? $DLOCK_TTL"')
    case $out in
    "1 "*) sc_check "another process: dlock_trylock x 150 waits, then TIMEOUT with a ttl ($out)" is_digits "${out#1 }" ;;
    *) sc_nok "another process: dlock_trylock x 150 waits, then TIMEOUT (got '$out')" ;;
    esac
    # A subshell with its own dlock_open is a separate owner too.
    out=$( (dlock_open "$SOCK" && dlock_trylock x 0; echo "$?") 2>&1)
    sc_check "a subshell's own dlock_open is another owner: TIMEOUT (got '$out')" [ "$out" = 1 ]
    rc=0
    dlock_cmd PING || rc=$?
    sc_check "the parent's connection still works after the subshell closed its own" \
        [ "$rc.$DLOCK_REPLY" = "0.OK PONG" ]

    rc=0
    dlock_status x || rc=$?
    sc_check "dlock_status x is MINE with our fence" \
        [ "$rc.$DLOCK_STATE.$DLOCK_HOLDS.$DLOCK_FENCE" = "0.MINE.1.$fence1" ]
    sc_check "dlock_status x reports a lease ttl" is_digits "$DLOCK_TTL"
    out=$(other 'dlock_status x; echo "$? $DLOCK_STATE"')
    sc_check "another process: dlock_status x is TAKEN (got '$out')" [ "$out" = "0 TAKEN" ]

    rc=0
    dlock_lock x || rc=$?
    sc_check "reentrant dlock_lock x: same fence, 2 holds" \
        [ "$rc.$DLOCK_FENCE.$DLOCK_HOLDS" = "0.$fence1.2" ]
    rc=0
    dlock_unlock x || rc=$?
    sc_check "dlock_unlock x leaves 1 hold" [ "$rc.$DLOCK_HOLDS" = "0.1" ]
    rc=0
    dlock_unlock x || rc=$?
    sc_check "dlock_unlock x leaves 0 holds" [ "$rc.$DLOCK_HOLDS" = "0.0" ]
    rc=0
    dlock_unlock x 2>/dev/null || rc=$?
    case $rc.$DLOCK_REPLY in
    "2.ERR NOTHELD"*) sc_ok "a third dlock_unlock x: 2 and ERR NOTHELD" ;;
    *) sc_nok "a third dlock_unlock x: 2 and ERR NOTHELD (rc $rc, '$DLOCK_REPLY')" ;;
    esac

    out=$(other 'dlock_trylock x 2000; echo "$? $DLOCK_FENCE"')
    case $out in
    "0 "*)
        fence2=${out#0 }
        if is_digits "$fence2" && [ "$fence2" -gt "$fence1" ]; then
            sc_ok "another process now gets x, with a higher fence ($fence2 > $fence1)"
        else
            sc_nok "another process now gets x, with a higher fence (got '$fence2', had $fence1)"
        fi
        ;;
    *) sc_nok "another process now gets x (got '$out')" ;;
    esac

    # -- argument checks happen before sending, and the connection survives
    rc=0
    dlock_lock "a b" 2>/dev/null || rc=$?
    sc_check "a name with a space is refused with 2" [ "$rc" -eq 2 ]
    sc_check "its DLOCK_REPLY shows the name ('$DLOCK_REPLY')" [ "$DLOCK_REPLY" = \
        'ERR NAME bad lock name "a b": only printable ASCII without spaces is allowed' ]
    rc=0
    dlock_lock "" 2>/dev/null || rc=$?
    sc_check "an empty name is refused with 2" [ "$rc" -eq 2 ]
    sc_check "its DLOCK_REPLY shows the name ('$DLOCK_REPLY')" \
        [ "$DLOCK_REPLY" = 'ERR NAME bad lock name "": must be 1 to 255 bytes' ]
    rc=0
    dlock_lock "$(printf 'ctl\001"\134')" 2>/dev/null || rc=$?
    sc_check "a name with a control byte: 2, the bytes escaped ('$DLOCK_REPLY')" \
        [ "$rc.$DLOCK_REPLY" = '2.ERR NAME bad lock name "ctl\x01\"\\": only printable ASCII without spaces is allowed' ]

    # -- a LEASE_MS with a fraction is rounded up to whole ms (issue 42)
    rc=0
    dlock_lock lsub 0.5 || rc=$?
    sc_check "dlock_lock lsub 0.5 is granted (a 1 ms lease)" [ "$rc" -eq 0 ]
    sc_check "and lsub runs out: FREE to another connection" wait_free lsub
    rc=0
    dlock_mlock 2 lsa lsb 0.5 || rc=$?
    sc_check "dlock_mlock 2 lsa lsb 0.5 is granted (a 1 ms lease)" [ "$rc" -eq 0 ]
    sc_check "and both run out" eval 'wait_free lsa && wait_free lsb'
    rc=0
    dlock_lock lr 60000 || rc=$?
    dlock_renew lr 2999.001 || rc=$?
    sc_check "dlock_renew lr 2999.001 sets 3000 ms ($rc, $DLOCK_TTL)" [ "$rc.$DLOCK_TTL" = "0.3000" ]
    dlock_renew lr 0010.0 || rc=$?
    sc_check "dlock_renew lr 0010.0 sets 10 ms ($rc, $DLOCK_TTL)" [ "$rc.$DLOCK_TTL" = "0.10" ]
    for bad in 1. .5 1e3 1.5.2 -1 2147483647.1; do
        sc_check "LEASE_MS '$bad' is refused with 2" refused dlock_renew lr "$bad"
    done
    dlock_unlock lr 2>/dev/null || :
    n255=$(printf '%0255d' 0)
    rc=0
    dlock_status "${n255}1" 2>/dev/null || rc=$?
    sc_check "a 256-character name is refused with 2" [ "$rc" -eq 2 ]
    rc=0
    dlock_status "$n255" || rc=$?
    sc_check "a 255-character name is accepted (FREE)" [ "$rc.$DLOCK_STATE" = "0.FREE" ]
    rc=0
    dlock_trylock x 12x 2>/dev/null || rc=$?
    sc_check "a WAIT_MS that is not a number is refused with 2" [ "$rc" -eq 2 ]
    rc=0
    dlock_lock x 1 2 2>/dev/null || rc=$?
    sc_check "too many arguments are refused with 2" [ "$rc" -eq 2 ]
    rc=0
    dlock_cmd "$(printf 'PING\nPING')" 2>/dev/null || rc=$?
    sc_check "a request with a line break is refused with 2" [ "$rc" -eq 2 ]
    rc=0
    dlock_cmd PING || rc=$?
    sc_check "the connection is in step after the refusals" [ "$rc.$DLOCK_REPLY" = "0.OK PONG" ]

    # -- read/write locks
    rc=0
    dlock_rlock rw || rc=$?
    rfence=$DLOCK_FENCE
    sc_check "dlock_rlock rw returns 0 with 1 hold and a fence ($rfence)" \
        [ "$rc.$DLOCK_HOLDS" = "0.1" ]
    sc_check "the read fence is digits" is_digits "$rfence"
    out=$(other 'dlock_tryrlock rw 0; echo "$? $DLOCK_FENCE"; dlock_status rw
        echo "$DLOCK_STATE $DLOCK_READERS $DLOCK_HOLDS"')
    sc_check "another process reads rw too, with the same fence, and sees 2 readers (got '$(echo "$out" | tr '\n' ' ')')" \
        [ "$out" = "0 $rfence
READ 2 1" ]
    out=$(other 'dlock_trywlock rw 0; echo "$? $DLOCK_TTL"')
    case $out in
    "1 "*) sc_check "another process: dlock_trywlock rw 0 gets TIMEOUT with a ttl ($out)" is_digits "${out#1 }" ;;
    *) sc_nok "another process: dlock_trywlock rw 0 gets TIMEOUT (got '$out')" ;;
    esac
    rc=0
    dlock_wlock rw 2>/dev/null || rc=$?
    case $rc.$DLOCK_REPLY in
    "2.ERR KIND upgrade"*) sc_ok "dlock_wlock of a name we read (an upgrade): 2 and ERR KIND" ;;
    *) sc_nok "dlock_wlock of a name we read (an upgrade): 2 and ERR KIND (rc $rc, '$DLOCK_REPLY')" ;;
    esac
    rc=0
    dlock_unlock rw 2>/dev/null || rc=$?
    case $rc.$DLOCK_REPLY in
    "2.ERR KIND "*) sc_ok "dlock_unlock of a read hold: 2 and ERR KIND" ;;
    *) sc_nok "dlock_unlock of a read hold: 2 and ERR KIND (rc $rc, '$DLOCK_REPLY')" ;;
    esac
    rc=0
    dlock_status rw || rc=$?
    sc_check "dlock_status rw: READ, 1 reader, 1 hold, a ttl" \
        [ "$rc.$DLOCK_STATE.$DLOCK_READERS.$DLOCK_HOLDS" = "0.READ.1.1" ]
    sc_check "dlock_status rw reports a ttl ($DLOCK_TTL)" is_digits "$DLOCK_TTL"
    # A writer that waits for our read hold, granted once we let go.
    wout="$TMPDIR/w.out"
    "$SC_SH" -c '. "$1" && dlock_open "$2" || exit 9
        dlock_wlock rw && echo "got $DLOCK_FENCE"
        dlock_status rw; echo "$DLOCK_STATE $DLOCK_HOLDS"' sh "$LIB" "$SOCK" >"$wout" 2>&1 &
    wpid=$!
    i=0
    waiting=''
    while [ "$i" -lt 250 ]; do
        if oneshot INFO | grep -q ' waiters=1 '; then waiting=1 && break; fi
        i=$((i + 1))
        sleep 0.02
    done
    if [ -s "$wout" ]; then waiting="granted early: $(cat "$wout")"; fi
    sc_check "a dlock_wlock of another process waits while we read ($waiting)" \
        [ "$waiting" = 1 ]
    rc=0
    dlock_runlock rw || rc=$?
    sc_check "dlock_runlock rw leaves 0 holds" [ "$rc.$DLOCK_HOLDS" = "0.0" ]
    wait "$wpid"
    out=$(cat "$wout")
    case $out in
    "got "*"
WRITE 1")
        wfence=${out#got }
        wfence=${wfence%%"$_dlock_nl"*}
        if is_digits "$wfence" && [ "$wfence" -gt "$rfence" ]; then
            sc_ok "the waiting writer got rw once we let go, with a higher fence"
        else
            sc_nok "the waiting writer got rw, with a higher fence (got '$wfence', read $rfence)"
        fi
        ;;
    *) sc_nok "the waiting writer got rw once we let go (got '$(echo "$out" | tr '\n' ' ')')" ;;
    esac
    rc=0
    dlock_runlock rw 2>/dev/null || rc=$?
    case $rc.$DLOCK_REPLY in
    "2.ERR NOTHELD"*) sc_ok "a second dlock_runlock rw: 2 and ERR NOTHELD" ;;
    *) sc_nok "a second dlock_runlock rw: 2 and ERR NOTHELD (rc $rc, '$DLOCK_REPLY')" ;;
    esac
    rc=0
    dlock_wlock rw && dlock_trywlock rw 0 || rc=$?
    wfence=$DLOCK_FENCE
    sc_check "dlock_wlock, then a reentrant dlock_trywlock: 2 holds" [ "$rc.$DLOCK_HOLDS" = "0.2" ]
    out=$(other 'dlock_tryrlock rw 100; echo "$?"; dlock_status rw
        echo "$DLOCK_STATE $DLOCK_HOLDS"')
    sc_check "another process cannot read while we write (got '$(echo "$out" | tr '\n' ' ')')" \
        [ "$out" = "1
WRITE 0" ]
    rc=0
    dlock_rlock rw || rc=$?
    sc_check "a writer reads too, with the writer's fence" [ "$rc.$DLOCK_FENCE" = "0.$wfence" ]
    rc=0
    dlock_wunlock rw && dlock_wunlock rw || rc=$?
    sc_check "then stops writing (a downgrade)" [ "$rc.$DLOCK_HOLDS" = "0.0" ]
    dlock_status rw
    sc_check "after the downgrade rw is READ with our 1 hold" \
        [ "$DLOCK_STATE.$DLOCK_HOLDS" = "READ.1" ]
    dlock_runlock rw
    out=$(other 'dlock_trywlock rw 2000; echo "$?"')
    sc_check "another process can write rw now (got '$out')" [ "$out" = 0 ]
    # A plain lock's name refuses read/write requests, and the reverse.
    dlock_lock pk
    out=$(other 'dlock_rlock pk; echo "$? $DLOCK_REPLY"' 2>/dev/null)
    case $out in
    "2 ERR KIND "*) sc_ok "another process: dlock_rlock of a plain lock: 2 and ERR KIND" ;;
    *) sc_nok "another process: dlock_rlock of a plain lock: 2 and ERR KIND (got '$out')" ;;
    esac
    rc=0
    dlock_runlock pk 2>/dev/null || rc=$?
    sc_check "dlock_runlock of a plain hold: 2" [ "$rc" -eq 2 ]
    dlock_unlock pk
    rc=0
    dlock_rlock "a b" 2>/dev/null || rc=$?
    sc_check "dlock_rlock of a name with a space is refused with 2" [ "$rc" -eq 2 ]
    rc=0
    dlock_trywlock rw 12x 2>/dev/null || rc=$?
    sc_check "dlock_trywlock with a WAIT_MS that is not a number is refused with 2" [ "$rc" -eq 2 ]
    rc=0
    dlock_wunlock 2>/dev/null || rc=$?
    sc_check "dlock_wunlock without a name is refused with 2" [ "$rc" -eq 2 ]

    # -- semaphores (a name per shell: a semaphore's permits stay set; the
    # processes that other starts get it from the environment)
    S=sem-$SC_SHELL
    export S
    rc=0
    dlock_seminit "$S" 3 || rc=$?
    sc_check "dlock_seminit $S 3: 0, set now" [ "$rc.$DLOCK_SET" = "0.1" ]
    rc=0
    dlock_seminit "$S" 5 || rc=$?
    sc_check "a second dlock_seminit $S: 0, already set" [ "$rc.$DLOCK_SET" = "0.0" ]
    out=$(other 'dlock_seminit "$S" 9; echo "$? $DLOCK_SET"')
    sc_check "another process: dlock_seminit $S changes nothing (got '$out')" [ "$out" = "0 0" ]
    rc=0
    dlock_acquire "$S" 2 || rc=$?
    sc_check "dlock_acquire $S 2: 2 held" [ "$rc.$DLOCK_HOLDS" = "0.2" ]
    rc=0
    dlock_status "$S" || rc=$?
    sc_check "dlock_status $S: SEM, 1 available, 2 ours ('$DLOCK_REPLY')" \
        [ "$rc.$DLOCK_STATE.$DLOCK_AVAILABLE.$DLOCK_HOLDS" = "0.SEM.1.2" ]
    out=$(other 'dlock_tryacquire "$S" 2 0; echo "$? $DLOCK_TTL"; dlock_status "$S"
        echo "$DLOCK_STATE $DLOCK_AVAILABLE $DLOCK_HOLDS"')
    case $out in
    "1 "*"
SEM 1 0") sc_ok "another process: dlock_tryacquire $S 2 0 gets TIMEOUT, and sees 1 free" ;;
    *) sc_nok "another process: dlock_tryacquire $S 2 0 gets TIMEOUT, and sees 1 free (got '$(echo "$out" | tr '\n' ' ')')" ;;
    esac
    out=$(other 'dlock_tryacquire "$S" 2 150; echo "$?"')
    sc_check "another process: dlock_tryacquire $S 2 150 waits, then TIMEOUT (got '$out')" \
        [ "$out" = 1 ]
    rc=0
    dlock_tryacquire "$S" 1 || rc=$?
    sc_check "a holder takes one more: 3 held" [ "$rc.$DLOCK_HOLDS" = "0.3" ]
    rc=0
    dlock_release "$S" 4 2>/dev/null || rc=$?
    case $rc.$DLOCK_REPLY in
    "2.ERR NOTHELD"*) sc_ok "dlock_release of more than we hold: 2 and ERR NOTHELD" ;;
    *) sc_nok "dlock_release of more than we hold: 2 and ERR NOTHELD (rc $rc, '$DLOCK_REPLY')" ;;
    esac
    dlock_status "$S"
    sc_check "nothing was released ('$DLOCK_REPLY')" \
        [ "$DLOCK_STATE.$DLOCK_AVAILABLE.$DLOCK_HOLDS" = "SEM.0.3" ]
    # Another process waiting for two gets them once we give two back, and
    # gives them back when it exits.
    sout="$TMPDIR/s.out"
    "$SC_SH" -c '. "$1" && dlock_open "$2" || exit 9
        dlock_tryacquire "$S" 2 10000 && echo "got $DLOCK_HOLDS"' sh "$LIB" "$SOCK" >"$sout" 2>&1 &
    spid=$!
    i=0
    waiting=''
    while [ "$i" -lt 250 ]; do
        if oneshot INFO | grep -q ' waiters=1 '; then waiting=1 && break; fi
        i=$((i + 1))
        sleep 0.02
    done
    if [ -s "$sout" ]; then waiting="granted early: $(cat "$sout")"; fi
    sc_check "a dlock_tryacquire of another process waits while none is free ($waiting)" \
        [ "$waiting" = 1 ]
    rc=0
    dlock_release "$S" 2 || rc=$?
    sc_check "dlock_release $S 2 leaves 1 held" [ "$rc.$DLOCK_HOLDS" = "0.1" ]
    wait "$spid"
    out=$(cat "$sout")
    sc_check "the waiting process got its two (got '$out')" [ "$out" = "got 2" ]
    rc=0
    dlock_tryacquire "$S" 2 5000 || rc=$?
    sc_check "its two are back once it exited: 3 held" [ "$rc.$DLOCK_HOLDS" = "0.3" ]
    rc=0
    dlock_release "$S" 3 || rc=$?
    sc_check "dlock_release $S 3 leaves none held" [ "$rc.$DLOCK_HOLDS" = "0.0" ]
    # A semaphore's name refuses the lock functions, a lock's name these.
    rc=0
    dlock_lock "$S" 2>/dev/null || rc=$?
    case $rc.$DLOCK_REPLY in
    "2.ERR KIND "*) sc_ok "dlock_lock of a semaphore: 2 and ERR KIND" ;;
    *) sc_nok "dlock_lock of a semaphore: 2 and ERR KIND (rc $rc, '$DLOCK_REPLY')" ;;
    esac
    rc=0
    dlock_tryrlock "$S" 2>/dev/null || rc=$?
    sc_check "dlock_tryrlock of a semaphore: 2 ('$DLOCK_REPLY')" [ "$rc" -eq 2 ]
    dlock_lock pk2
    out=$(other 'dlock_acquire pk2 1; echo "$? $DLOCK_REPLY"' 2>/dev/null)
    case $out in
    "2 ERR KIND "*) sc_ok "another process: dlock_acquire of a plain lock: 2 and ERR KIND" ;;
    *) sc_nok "another process: dlock_acquire of a plain lock: 2 and ERR KIND (got '$out')" ;;
    esac
    out=$(other 'dlock_seminit pk2 2; echo "$?"' 2>/dev/null)
    sc_check "another process: dlock_seminit of a plain lock: 2 (got '$out')" [ "$out" = 2 ]
    rc=0
    dlock_release pk2 1 2>/dev/null || rc=$?
    sc_check "dlock_release of a plain hold: 2 ('$DLOCK_REPLY')" [ "$rc" -eq 2 ]
    dlock_unlock pk2
    # Arguments are checked before sending.
    sc_check "dlock_acquire without PERMITS is refused with 2" refused dlock_acquire "$S"
    sc_check "dlock_acquire with PERMITS not a number is refused with 2" refused dlock_acquire "$S" x
    sc_check "dlock_acquire with too many arguments is refused with 2" refused dlock_acquire "$S" 1 2 3
    sc_check "dlock_acquire of a name with a space is refused with 2" refused dlock_acquire "a b" 1
    sc_check "dlock_tryacquire with a WAIT_MS that is not a number is refused with 2" \
        refused dlock_tryacquire "$S" 1 12x
    sc_check "dlock_release without PERMITS is refused with 2" refused dlock_release "$S"
    sc_check "dlock_seminit without PERMITS is refused with 2" refused dlock_seminit "$S"
    rc=0
    dlock_acquire "$S" 0 2>/dev/null || rc=$?
    case $rc.$DLOCK_REPLY in
    "2.ERR ARGS"*) sc_ok "dlock_acquire $S 0: 2 and dlockd's ERR ARGS" ;;
    *) sc_nok "dlock_acquire $S 0: 2 and dlockd's ERR ARGS (rc $rc, '$DLOCK_REPLY')" ;;
    esac
    # Permits with a lease: lost when it runs out, and given back.
    rc=0
    dlock_acquire "$S" 1 200 || rc=$?
    sc_check "dlock_acquire $S 1 200 (a lease)" [ "$rc.$DLOCK_HOLDS" = "0.1" ]
    out=$(other 'dlock_tryacquire "$S" 3 5000; echo "$?"')
    sc_check "another process gets all three once the lease ran out (got '$out')" [ "$out" = 0 ]
    i=0
    while [ "$DLOCK_LOST" != "$S expired" ] && [ "$i" -lt 50 ]; do
        dlock_cmd PING 2>/dev/null
        i=$((i + 1))
        sleep 0.1
    done
    sc_check "DLOCK_LOST is '$S expired' (got '$DLOCK_LOST')" [ "$DLOCK_LOST" = "$S expired" ]
    rc=0
    dlock_release "$S" 1 2>/dev/null || rc=$?
    sc_check "dlock_release of the lost permit: 2 (NOTHELD)" [ "$rc" -eq 2 ]

    # -- fair locks (a name per shell; the processes that other starts get
    # it from the environment)
    F=fair-$SC_SHELL
    export F
    forder="$TMPDIR/fair.order"
    rc=0
    dlock_fairlock "$F" || rc=$?
    ffence=$DLOCK_FENCE
    sc_check "dlock_fairlock $F: 0 and 1 hold" [ "$rc.$DLOCK_HOLDS" = "0.1" ]
    sc_check "the fair lock's fence is digits ($ffence)" is_digits "$ffence"
    rc=0
    dlock_fairlock "$F" && dlock_tryfairlock "$F" || rc=$?
    sc_check "reentrant dlock_fairlock and dlock_tryfairlock: same fence, 3 holds" \
        [ "$rc.$DLOCK_FENCE.$DLOCK_HOLDS" = "0.$ffence.3" ]
    rc=0
    dlock_status "$F" || rc=$?
    sc_check "dlock_status $F: MINE, 3 holds, our fence ('$DLOCK_REPLY')" \
        [ "$rc.$DLOCK_STATE.$DLOCK_HOLDS.$DLOCK_FENCE" = "0.MINE.3.$ffence" ]
    out=$(other 'dlock_tryfairlock "$F"; echo "$? $DLOCK_TTL"; dlock_status "$F"
        echo "$DLOCK_STATE"')
    case $out in
    "1 "*"
TAKEN") sc_ok "another process: dlock_tryfairlock $F gets TIMEOUT, and sees it TAKEN" ;;
    *) sc_nok "another process: dlock_tryfairlock $F gets TIMEOUT, and sees it TAKEN (got '$(echo "$out" | tr '\n' ' ')')" ;;
    esac
    # A waiter whose dlock_tryfairlock timed out keeps its connection (it
    # waits for $F-hold next) but has no place left in $F's queue: once we
    # let go, another process's one try, refused while anyone queues, gets
    # $F.
    dlock_lock "$F-hold"
    tout="$TMPDIR/try.out"
    "$SC_SH" -c '. "$1" && dlock_open "$2" || exit 9
        dlock_tryfairlock "$F" 150; echo "timeout $?"
        dlock_lock "$F-hold" && echo "got hold"' sh "$LIB" "$SOCK" >"$tout" 2>&1 &
    tpid=$!
    i=0
    until grep -q '^timeout' "$tout" 2>/dev/null || [ "$i" -ge 250 ]; do
        i=$((i + 1))
        sleep 0.02
    done
    sc_check "another process: dlock_tryfairlock $F 150 waits, then TIMEOUT ($(head -n 1 "$tout"))" \
        grep -q '^timeout 1$' "$tout"
    rc=0
    dlock_unlock "$F" && dlock_unlock "$F" && dlock_unlock "$F" || rc=$?
    sc_check "three dlock_unlock $F leave 0 holds" [ "$rc.$DLOCK_HOLDS" = "0.0" ]
    out=$(other 'dlock_tryfairlock "$F"; echo "$? $DLOCK_FENCE"')
    case $out in
    "0 "*)
        if is_digits "${out#0 }" && [ "${out#0 }" -gt "$ffence" ]; then
            sc_ok "the timed-out waiter left no place: one try of another process gets $F"
        else
            sc_nok "the timed-out waiter left no place: a higher fence (got '$out', had $ffence)"
        fi
        ;;
    *) sc_nok "the timed-out waiter left no place: one try of another process gets $F (got '$out')" ;;
    esac
    dlock_unlock "$F-hold"
    wait "$tpid"
    sc_check "the timed-out waiter then got $F-hold" grep -q '^got hold$' "$tout"
    # Three waiters of other processes, each queued before the next comes,
    # get $F in that order, each while the one before no longer holds it.
    dlock_fairlock "$F"
    ffence=$DLOCK_FENCE
    : >"$forder"
    fpids=''
    queued=''
    for n in 1 2 3; do
        fair_waiter "w$n" "$forder"
        fpids="$fpids $!"
        await_waiters "$n" && queued="$queued $n"
    done
    sc_check "three dlock_fairlock of other processes queue one by one ($queued)" \
        [ "$queued" = " 1 2 3" ]
    sc_check "and wait while we hold $F" [ ! -s "$forder" ]
    dlock_unlock "$F"
    for p in $fpids; do wait "$p"; done
    ids=''
    prev=$ffence
    rising=1
    while read -r w f; do
        ids="$ids $w"
        if ! is_digits "$f" || [ "$f" -le "$prev" ]; then rising=''; fi
        prev=$f
    done <"$forder"
    sc_check "they got $F in the order they came (got '$ids')" [ "$ids" = " w1 w2 w3" ]
    sc_check "with rising fences ($(tr '\n' ' ' <"$forder"))" [ -n "$rising" ]
    # A waiter killed while it waits leaves the queue: the next one goes.
    dlock_fairlock "$F"
    : >"$forder"
    fair_waiter w1 "$forder"
    pid1=$!
    await_waiters 1
    fair_waiter w2 "$forder"
    pid2=$!
    sc_check "two dlock_fairlock of other processes queue" await_waiters 2
    kill -9 "$pid1" 2>/dev/null
    wait "$pid1" 2>/dev/null
    sc_check "the first one, killed while it waits, leaves the queue" await_waiters 1
    # The next one goes at once: not after the dead one's place ends
    # (lease_ms, 30 s).
    dlock_unlock "$F"
    i=0
    until [ -s "$forder" ] || [ "$i" -ge 250 ]; do
        i=$((i + 1))
        sleep 0.02
    done
    fw=$(cut -d ' ' -f 1 "$forder" | tr '\n' ' ')
    sc_check "the waiter behind the killed one got $F within 5 s (got '$fw')" [ "$fw" = "w2 " ]
    wait "$pid2"
    # One kind per name on one dlockd.
    dlock_fairlock "$F"
    rc=0
    dlock_lock "$F" 2>/dev/null || rc=$?
    case $rc.$DLOCK_REPLY in
    "2.ERR KIND $F is held as a fair lock"*) sc_ok "dlock_lock of our fair lock: 2 and ERR KIND" ;;
    *) sc_nok "dlock_lock of our fair lock: 2 and ERR KIND (rc $rc, '$DLOCK_REPLY')" ;;
    esac
    out=$(other 'dlock_trylock "$F" 100; echo "$? $DLOCK_REPLY"' 2>/dev/null)
    case $out in
    "2 ERR KIND "*) sc_ok "another process: dlock_trylock of a fair lock: 2 and ERR KIND" ;;
    *) sc_nok "another process: dlock_trylock of a fair lock: 2 and ERR KIND (got '$out')" ;;
    esac
    dlock_unlock "$F"
    dlock_lock pk3
    out=$(other 'dlock_fairlock pk3; echo "$? $DLOCK_REPLY"' 2>/dev/null)
    case $out in
    "2 ERR KIND pk3 is held as a plain lock"*) sc_ok "another process: dlock_fairlock of a plain lock: 2 and ERR KIND" ;;
    *) sc_nok "another process: dlock_fairlock of a plain lock: 2 and ERR KIND (got '$out')" ;;
    esac
    out=$(other 'dlock_tryfairlock pk3 100; echo "$?"' 2>/dev/null)
    sc_check "another process: dlock_tryfairlock of a plain lock: 2 (got '$out')" [ "$out" = 2 ]
    dlock_unlock pk3
    # Arguments are checked before sending.
    sc_check "dlock_fairlock without a name is refused with 2" refused dlock_fairlock
    sc_check "dlock_fairlock of a name with a space is refused with 2" refused dlock_fairlock "a b"
    sc_check "dlock_fairlock with too many arguments is refused with 2" \
        refused dlock_fairlock "$F" 1 2
    sc_check "dlock_fairlock with a LEASE_MS that is not a number is refused with 2" \
        refused dlock_fairlock "$F" x
    sc_check "dlock_tryfairlock with a WAIT_MS that is not a number is refused with 2" \
        refused dlock_tryfairlock "$F" 12x
    sc_check "dlock_tryfairlock with too many arguments is refused with 2" \
        refused dlock_tryfairlock "$F" 1 2 3
    dlock_status "$F"
    sc_check "after all that $F is FREE ('$DLOCK_REPLY')" [ "$DLOCK_STATE" = FREE ]

    # -- a lease that runs out: !LOST is seen at the next request
    rc=0
    dlock_lock z 200 || rc=$?
    sc_check "dlock_lock z 200 (a lease)" [ "$rc" -eq 0 ]
    sleep 0.6
    rc=0
    dlock_status z 2>"$TMPDIR/lost.err" || rc=$?
    sc_check "after the lease z is FREE" [ "$rc.$DLOCK_STATE" = "0.FREE" ]
    sc_check "DLOCK_LOST is 'z expired' (got '$DLOCK_LOST')" [ "$DLOCK_LOST" = "z expired" ]
    sc_check "the loss was reported on stderr" grep -q "lost lock z (expired)" "$TMPDIR/lost.err"
    rc=0
    dlock_renew z 2>/dev/null || rc=$?
    sc_check "dlock_renew of the lost lock: 2 (NOTHELD)" [ "$rc" -eq 2 ]
    # Every loss is kept in order for dlock_lost_event, though DLOCK_LOST
    # says only the last: two !LOST lines read in one call were one (the
    # conformance adapter missed h0's loss in sub_ms_lease).
    while dlock_lost_event; do :; done
    _dlock_event '!LOST y1 expired' 2>/dev/null
    _dlock_event '!LOST y2 forced' 2>/dev/null
    sc_check "DLOCK_LOST is the last loss ('$DLOCK_LOST')" [ "$DLOCK_LOST" = "y2 forced" ]
    l1='' l2='' rc=0
    dlock_lost_event && l1=$DLOCK_LOST
    dlock_lost_event && l2=$DLOCK_LOST
    dlock_lost_event || rc=$?
    sc_check "dlock_lost_event gives y1 then y2, then 1 ('$l1', '$l2', $rc)" \
        [ "$l1|$l2|$rc" = "y1 expired|y2 forced|1" ]
    rc=0
    dlock_lock r 5000 && dlock_renew r 60000 || rc=$?
    if [ "$rc" -eq 0 ] && is_digits "$DLOCK_TTL" && [ "$DLOCK_TTL" -gt 5000 ]; then
        sc_ok "dlock_renew r 60000 answers a ttl above 5000 ($DLOCK_TTL)"
    else
        sc_nok "dlock_renew r 60000 answers a ttl above 5000 (rc $rc, '$DLOCK_REPLY')"
    fi
    dlock_unlock r

    # -- a holder killed with SIGKILL (no EXIT trap runs) releases its locks
    dlock_lock x
    bout="$TMPDIR/b.out"
    "$SC_SH" -c '. "$1" && dlock_open "$2" || exit 9
        dlock_lock k && echo held
        dlock_lock x   # blocks: the parent holds x
        echo "should not get here"' sh "$LIB" "$SOCK" >"$bout" 2>&1 &
    bpid=$!
    i=0
    until grep -q held "$bout" 2>/dev/null || [ "$i" -ge 50 ]; do
        i=$((i + 1))
        sleep 0.1
    done
    sc_check "a killed holder: it took k" grep -q held "$bout"
    sleep 0.2 # let its LOCK x reach dlockd and wait there
    kill -9 "$bpid" 2>/dev/null
    wait "$bpid" 2>/dev/null
    rc=0
    dlock_trylock k 3000 || rc=$?
    sc_check "after kill -9 of the holder, k is ours within 3 s" [ "$rc" -eq 0 ]
    dlock_unlock k
    dlock_status x
    sc_check "x stays ours" [ "$DLOCK_STATE" = MINE ]

    # -- leader election
    rc=0
    dlock_elect el node-a:1 || rc=$?
    sc_check "dlock_elect el returns 0 with a fence ($DLOCK_FENCE)" is_digits "$DLOCK_FENCE"
    el_f=$DLOCK_FENCE
    other 'dlock_leader el && echo "$DLOCK_LEADER|$DLOCK_LEADER_FENCE|$DLOCK_LEADER_VALUE"' >"$TMPDIR/el.out" 2>&1
    sc_check "another connection's dlock_leader el: $el_f node-a:1 ($(cat "$TMPDIR/el.out"))" \
        [ "$(cat "$TMPDIR/el.out")" = "$el_f node-a:1|$el_f|node-a:1" ]
    dlock_resign el
    sc_check "dlock_resign el: DLOCK_WAS 1 ($DLOCK_WAS)" [ "$DLOCK_WAS" = 1 ]
    dlock_resign el
    sc_check "dlock_resign el again: DLOCK_WAS 0 ($DLOCK_WAS)" [ "$DLOCK_WAS" = 0 ]
    dlock_leader el
    sc_check "dlock_leader el after resigning: NONE ($DLOCK_LEADER)" [ "$DLOCK_LEADER" = NONE ]
    sc_check "dlock_elect with a value with a blank returns 2" refused dlock_elect el "a b"
    sc_check "dlock_elect with a 300-byte value returns 2" \
        refused dlock_elect el "$(printf '%0300d' 0)"
    sc_check "dlock_elect without a value returns 2" refused dlock_elect el
    dlock_lock ek
    sc_check "dlock_elect of a lock's name returns 2" refused dlock_elect ek v
    sc_check "... with ERR KIND ($DLOCK_REPLY)" eval 'case $DLOCK_REPLY in "ERR KIND"*) true ;; *) false ;; esac'
    dlock_unlock ek
    dlock_observe eo
    sc_check "dlock_observe eo: NONE ($DLOCK_LEADER)" [ "$DLOCK_LEADER" = NONE ]
    # Another process leads eo until told (a FIFO), then exits: its
    # connection's end resigns. It leads until this side has seen it, since
    # dlockd may leave a leadership untold that ends at once (PROTOCOL.md).
    eo_d=$(mktemp -d "${TMPDIR:-/tmp}/dlock-eo.XXXXXX")
    mkfifo "$eo_d/go"
    other "dlock_elect eo v2 && echo \"\$DLOCK_FENCE\" >'$eo_d/fence' && read -r _ <'$eo_d/go'" \
        >/dev/null 2>&1 &
    eo_pid=$!
    dlock_wait_leader
    eo_seen="$DLOCK_LEADER_NAME $DLOCK_LEADER"
    echo go >"$eo_d/go"
    wait "$eo_pid"
    eo_f=$(cat "$eo_d/fence")
    rm -rf "$eo_d"
    sc_check "dlock_wait_leader: eo led by $eo_f v2 ($eo_seen)" [ "$eo_seen" = "eo $eo_f v2" ]
    dlock_wait_leader
    sc_check "dlock_wait_leader: eo NONE after its leader exited ($DLOCK_LEADER)" \
        [ "$DLOCK_LEADER_NAME $DLOCK_LEADER" = "eo NONE" ]
    rc=0
    dlock_leader_event || rc=$?
    sc_check "dlock_leader_event with nothing pending returns 1" [ "$rc" -eq 1 ]
    dlock_unobserve eo
    sc_check "dlock_unobserve eo: DLOCK_WAS 1 ($DLOCK_WAS)" [ "$DLOCK_WAS" = 1 ]
    other 'dlock_elect eo v3' >/dev/null 2>&1
    dlock_cmd PING
    rc=0
    dlock_leader_event || rc=$?
    sc_check "no change of eo after dlock_unobserve" [ "$rc" -eq 1 ]

    # -- several names at once
    rc=0
    dlock_mlock 3 ma mb mc || rc=$?
    # shellcheck disable=SC2086 # the fences, one word each
    set -- $DLOCK_FENCES
    sc_check "dlock_mlock 3 ma mb mc: 0 and 3 fences ($DLOCK_FENCES)" \
        [ "$rc.$#" = "0.3" ]
    out=$(other 'dlock_trymlock 2 mz mb 50; echo "$? $DLOCK_REPLY"')
    case $out in
    "1 TIMEOUT "*) sc_ok "another process: dlock_trymlock of a set with a held name times out" ;;
    *) sc_nok "another process: dlock_trymlock of a set with a held name times out (got '$out')" ;;
    esac
    out=$(oneshot "STATUS mz")
    sc_check "the timed-out set's other name is FREE ($out)" [ "$out" = "OK FREE" ]
    dlock_lock ma >/dev/null
    rc=0
    dlock_munlock 3 mc ma mb || rc=$?
    sc_check "dlock_munlock 3 mc ma mb: holds left 0 1 0 ($rc, $DLOCK_HOLDS)" \
        [ "$rc.$DLOCK_HOLDS" = "0.0 1 0" ]
    rc=0
    dlock_munlock 2 ma mb 2>/dev/null || rc=$?
    case $rc.$DLOCK_REPLY in
    "2.ERR NOTHELD"*) sc_ok "dlock_munlock of a name not held: 2, ERR NOTHELD" ;;
    *) sc_nok "dlock_munlock of a name not held: 2, ERR NOTHELD (rc $rc, '$DLOCK_REPLY')" ;;
    esac
    dlock_unlock ma >/dev/null
    rc=0
    dlock_trymlock 2 ma mb 0 5000 || rc=$?
    sc_check "dlock_trymlock 2 ma mb 0 5000 of a free set: 0" [ "$rc" -eq 0 ]
    dlock_munlock 2 ma mb >/dev/null
    sc_check "dlock_mlock 0 is refused" refused dlock_mlock 0 0
    sc_check "dlock_mlock 65 is refused" refused dlock_mlock 65 a
    sc_check "dlock_mlock with a name twice is refused" refused dlock_mlock 3 a b a
    sc_check "dlock_mlock with fewer names than N is refused" refused dlock_mlock 3 a b
    sc_check "dlock_mlock with a bad lease is refused" refused dlock_mlock 2 a b x1
    sc_check "dlock_trymlock with a word too many is refused" refused dlock_trymlock 1 a 0 0 0
    rc=0
    dlock_mlock 2 a 'b c' 2>/dev/null || rc=$?
    case $rc.$DLOCK_REPLY in
    "2.ERR NAME"*) sc_ok "dlock_mlock with a bad name: 2, ERR NAME" ;;
    *) sc_nok "dlock_mlock with a bad name: 2, ERR NAME (rc $rc, '$DLOCK_REPLY')" ;;
    esac
    out=$(oneshot "STATUS a")
    sc_check "a refused dlock_mlock took nothing ($out)" [ "$out" = "OK FREE" ]

    # -- count-down latches (a name per shell; each is counted down to 0,
    # which deletes it)
    L=latch-$SC_SHELL
    export L
    rc=0
    dlock_latchcount "$L" || rc=$?
    sc_check "dlock_latchcount of no latch: 0, count 0" [ "$rc.$DLOCK_COUNT" = "0.0" ]
    rc=0
    dlock_latchset "$L" 2 || rc=$?
    sc_check "dlock_latchset $L 2: 0, set now" [ "$rc.$DLOCK_SET" = "0.1" ]
    out=$(other 'dlock_latchset "$L" 5; echo "$? $DLOCK_SET"; dlock_latchcount "$L"
        echo "$DLOCK_COUNT"')
    sc_check "another process: dlock_latchset $L 5 changes nothing (got '$(echo "$out" | tr '\n' ' ')')" \
        [ "$out" = "0 0
2" ]
    rc=0
    dlock_tryawait "$L" || rc=$?
    sc_check "dlock_tryawait $L: 1, the count 2 in DLOCK_COUNT" [ "$rc.$DLOCK_COUNT" = "1.2" ]
    rc=0
    dlock_tryawait "$L" 150 || rc=$?
    sc_check "dlock_tryawait $L 150: waits, then 1 with the count 2" [ "$rc.$DLOCK_COUNT" = "1.2" ]
    # Another process awaits it: released by the last count-down, not the first.
    lout="$TMPDIR/l.out"
    : >"$lout"
    "$SC_SH" -c '. "$1" && dlock_open "$2" || exit 9
        dlock_await "$L" && echo "opened"' sh "$LIB" "$SOCK" >"$lout" 2>&1 &
    lpid=$!
    sc_check "a dlock_await of another process waits in dlockd" await_waiters 1
    rc=0
    dlock_countdown "$L" || rc=$?
    sc_check "dlock_countdown $L: 0, 1 left" [ "$rc.$DLOCK_COUNT" = "0.1" ]
    out="$(oneshot INFO | grep -o ' waiters=[0-9]* ')$(cat "$lout")"
    sc_check "the awaiting process still waits after the first count-down ('$out')" \
        [ "$out" = " waiters=1 " ]
    rc=0
    dlock_countdown "$L" || rc=$?
    sc_check "dlock_countdown $L again: 0, none left" [ "$rc.$DLOCK_COUNT" = "0.0" ]
    wait "$lpid"
    out=$(cat "$lout")
    sc_check "the awaiting process was released (got '$out')" [ "$out" = opened ]
    rc=0
    dlock_await "$L" || rc=$?
    sc_check "dlock_await of the opened latch: 0 at once" [ "$rc" -eq 0 ]
    rc=0
    dlock_tryawait "$L" 0 || rc=$?
    sc_check "dlock_tryawait of the opened latch: 0" [ "$rc" -eq 0 ]
    rc=0
    dlock_countdown "$L" || rc=$?
    sc_check "dlock_countdown of no latch: 0, count 0" [ "$rc.$DLOCK_COUNT" = "0.0" ]
    # A latch's name refuses the lock functions, a lock's name these.
    dlock_latchset "$L" 1
    rc=0
    dlock_lock "$L" 2>/dev/null || rc=$?
    case $rc.$DLOCK_REPLY in
    "2.ERR KIND "*) sc_ok "dlock_lock of a latch: 2 and ERR KIND" ;;
    *) sc_nok "dlock_lock of a latch: 2 and ERR KIND (rc $rc, '$DLOCK_REPLY')" ;;
    esac
    dlock_lock pk3
    rc=0
    dlock_await pk3 2>/dev/null || rc=$?
    case $rc.$DLOCK_REPLY in
    "2.ERR KIND "*) sc_ok "dlock_await of a plain lock: 2 and ERR KIND" ;;
    *) sc_nok "dlock_await of a plain lock: 2 and ERR KIND (rc $rc, '$DLOCK_REPLY')" ;;
    esac
    rc=0
    dlock_latchset pk3 1 2>/dev/null || rc=$?
    sc_check "dlock_latchset of a plain lock: 2 ('$DLOCK_REPLY')" [ "$rc" -eq 2 ]
    dlock_unlock pk3
    dlock_countdown "$L"
    # Arguments are checked before sending.
    sc_check "dlock_latchset without COUNT is refused with 2" refused dlock_latchset "$L"
    sc_check "dlock_latchset with COUNT 0 is refused with 2" refused dlock_latchset "$L" 0
    sc_check "dlock_latchset with COUNT 2147483648 is refused with 2" \
        refused dlock_latchset "$L" 2147483648
    sc_check "dlock_latchset with COUNT not a number is refused with 2" refused dlock_latchset "$L" x
    sc_check "dlock_countdown of a name with a space is refused with 2" refused dlock_countdown "a b"
    sc_check "dlock_await with two arguments is refused with 2" refused dlock_await "$L" 1
    sc_check "dlock_tryawait with a WAIT_MS that is not a number is refused with 2" \
        refused dlock_tryawait "$L" 1x
    rc=0
    dlock_latchcount "$L" || rc=$?
    sc_check "the refused calls set nothing: count 0" [ "$rc.$DLOCK_COUNT" = "0.0" ]

    # -- listing: every kind under one prefix
    lp=ls$$
    dlock_lock "$lp-lock"
    ls_f=$DLOCK_FENCE
    dlock_rlock "$lp-read"
    dlock_seminit "$lp-sem" 3
    dlock_acquire "$lp-sem" 2
    dlock_elect "$lp-elect" node-a:1
    ls_e=$DLOCK_FENCE
    rc=0
    dlock_list "$lp-*" || rc=$?
    sc_check "dlock_list $lp-*: 0, 4 locks, no more ($rc $DLOCK_COUNT $DLOCK_MORE)" \
        [ "$rc.$DLOCK_COUNT.$DLOCK_MORE" = "0.4.0" ]
    sc_check "DLOCK_LIST has 4 lines" [ "$(printf '%s' "$DLOCK_LIST" | wc -l)" -eq 4 ]
    # name:kind:fence:holders/the first holder's count:value, in name order
    got=$(printf '%s' "$DLOCK_LIST" | while read -r n k _ f h _ v; do
        c=${h%/*}
        printf '%s ' "${n#"$lp"-}:$k:$f:${h%%,*}/${c##*/}:$v"; done)
    case $got in
    "elect:elect:$ls_e:1/1:node-a:1 lock:lock:$ls_f:1/1:- read:read:"*":1/1:- sem:sem:-:1/2:1 ")
        sc_ok "each name, kind, fence, holder and value ($got)" ;;
    *) sc_nok "each name, kind, fence, holder and value (got '$got')" ;;
    esac
    rc=0
    dlock_list "$lp-*" 2 || rc=$?
    sc_check "dlock_list $lp-* 2: 2 locks, more ($rc $DLOCK_COUNT $DLOCK_MORE)" \
        [ "$rc.$DLOCK_COUNT.$DLOCK_MORE.$(printf '%s' "$DLOCK_LIST" | wc -l)" = "0.2.1.2" ]
    rc=0
    dlock_list "$lp-none*" || rc=$?
    sc_check "dlock_list of no match: 0 locks, DLOCK_LIST empty" \
        [ "$rc.$DLOCK_COUNT.$DLOCK_MORE.$DLOCK_LIST" = "0.0.0." ]
    rc=0
    dlock_list || rc=$?
    sc_check "dlock_list with no pattern lists them all ($DLOCK_COUNT)" \
        [ "$rc" -eq 0 ] && [ "$DLOCK_COUNT" -ge 4 ]
    sc_check "dlock_list with a limit of 0 returns 2" refused dlock_list "$lp-*" 0
    sc_check "dlock_list with a limit of 1001 returns 2" refused dlock_list "$lp-*" 1001
    sc_check "dlock_list with a pattern with a blank returns 2" refused dlock_list "a b"
    sc_check "dlock_list with a 256-byte pattern returns 2" \
        refused dlock_list "$(printf '%0256d' 0)"
    sc_check "dlock_list with three arguments returns 2" refused dlock_list "$lp-*" 1 2
    rc=0
    dlock_cmd LIST "$lp-*" 0 || rc=$?
    sc_check "dlockd itself refuses LIST with a limit of 0 ($DLOCK_REPLY)" \
        eval 'case $rc.$DLOCK_REPLY in "2.ERR ARGS"*) true ;; *) false ;; esac'
    rc=0
    dlock_cmd PING || rc=$?
    sc_check "the connection is in step after the listings" [ "$rc.$DLOCK_REPLY" = "0.OK PONG" ]
    dlock_unlock "$lp-lock"
    dlock_runlock "$lp-read"
    dlock_release "$lp-sem" 2
    dlock_resign "$lp-elect"

    # -- dlock_close releases
    rc=0
    dlock_close || rc=$?
    sc_check "dlock_close returns 0" [ "$rc" -eq 0 ]
    sc_check "after dlock_close, another connection's STATUS x says OK FREE" wait_free x
    rc=0
    dlock_cmd PING 2>/dev/null || rc=$?
    sc_check "dlock_cmd after dlock_close returns 3" [ "$rc" -eq 3 ]
    rc=0
    dlock_close || rc=$?
    sc_check "a second dlock_close is a no-op" [ "$rc" -eq 0 ]
    rc=0
    dlock_open "$SOCK" && dlock_trylock x 0 || rc=$?
    sc_check "dlock_open works again after dlock_close" [ "$rc" -eq 0 ]
    dlock_close

    # -- the EXIT trap closes for a script that just ends
    other 'dlock_lock e && echo "$DLOCK_FENCE"' >/dev/null
    sc_check "a script that exits without dlock_close leaves e FREE" wait_free e

    # -- set -eu scripts work (TIMEOUT handled with ||)
    out=$("$SC_SH" -eu -c '. "$1"; dlock_open "$2"; dlock_lock s
        dlock_trylock x 0 || echo "busy $?"
        dlock_unlock s; dlock_close; echo done' sh "$LIB" "$SOCK" 2>&1)
    sc_check "under set -eu ($(echo "$out" | tr '\n' ' '))" [ "$out" = "done" ]

    # -- nothing left behind in TMPDIR (the FIFOs' directory)
    left=$(find "$TMPDIR" -name 'dlock.*' | head -n 3)
    sc_check "no FIFO directory left in TMPDIR ($left)" [ -z "$left" ]

    sc_ok "scenario ran to the end"
}

if [ "${1-}" = --scenario ]; then
    shift
    scenario "$@"
    exit 0
fi

# ----------------------------------------------------------------- harness --

ROOT=$(cd "$(dirname -- "$0")/../.." && pwd)
LIB=$ROOT/clients/shell/dlock.sh
DLOCKD_BIN=${DLOCKD_BIN:-$ROOT/build/dlockd}
passed=0
failed=0
redis_pid=''
dlockd_pid=''

T=$(mktemp -d "${TMPDIR:-/tmp}/dlock-sh-test.XXXXXX") || exit 1
SOCK=$T/d.sock

cleanup() {
    status=$?
    trap - EXIT HUP INT TERM
    if [ -n "$dlockd_pid" ]; then
        kill "$dlockd_pid" 2>/dev/null
        wait "$dlockd_pid" 2>/dev/null
    fi
    if [ -n "$redis_pid" ]; then
        kill "$redis_pid" 2>/dev/null
        wait "$redis_pid" 2>/dev/null
    fi
    rm -rf "$T"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

# tally FILE: echo the ok/not ok lines of FILE and count them.
tally() {
    while IFS= read -r line; do
        case $line in
        "ok - "*) passed=$((passed + 1)) ;;
        "not ok - "*) failed=$((failed + 1)) ;;
        esac
        printf '%s\n' "$line"
    done <"$1"
}
ok() { printf 'ok - %s\n' "$1"; passed=$((passed + 1)); }
nok() { printf 'not ok - %s\n' "$1"; failed=$((failed + 1)); }
bail() {
    nok "$1"
    for f in "$T"/*.log; do
        [ -s "$f" ] && sed "s|^|# ${f##*/}: |" "$f" | tail -n 20
    done
    echo "$passed passed, $failed failed"
    exit 1
}

for tool in redis-server redis-cli socat; do
    command -v "$tool" >/dev/null 2>&1 || bail "$tool is not installed"
done
[ -x "$DLOCKD_BIN" ] || bail "no dlockd binary at $DLOCKD_BIN (make build/dlockd)"

redis-server --port 0 --unixsocket "$T/redis.sock" --save "" --appendonly no \
    --dir "$T" >"$T/redis.log" 2>&1 &
redis_pid=$!
i=0
until [ "$(redis-cli -s "$T/redis.sock" ping 2>/dev/null)" = PONG ]; do
    i=$((i + 1))
    if [ "$i" -ge 100 ] || ! kill -0 "$redis_pid" 2>/dev/null; then
        bail "redis-server did not start"
    fi
    sleep 0.1
done

printf '[server]\nsocket = %s\n[redis]\nurl = unix://%s\n' "$SOCK" "$T/redis.sock" >"$T/dlockd.conf"
chmod 600 "$T/dlockd.conf" # dlockd refuses, as root, a file others can write
"$DLOCKD_BIN" -c "$T/dlockd.conf" >"$T/dlockd.log" 2>&1 &
dlockd_pid=$!
i=0
until [ "$(printf 'PING\n' | socat - "UNIX-CONNECT:$SOCK" 2>/dev/null)" = "OK PONG" ]; do
    i=$((i + 1))
    if [ "$i" -ge 100 ] || ! kill -0 "$dlockd_pid" 2>/dev/null; then
        bail "dlockd did not start"
    fi
    sleep 0.1
done

# The shells: dash (else sh), and bash when there is one.
shells=''
if command -v dash >/dev/null 2>&1; then shells='dash'; else shells='sh'; fi
if command -v bash >/dev/null 2>&1; then shells="$shells bash"; fi
# A hung scenario must not hang `make test`.
limit=''
if command -v timeout >/dev/null 2>&1; then limit="timeout 120"; fi

for sh in $shells; do
    mkdir "$T/tmp-$sh"
    # shellcheck disable=SC2086 # $limit is empty or two words
    TMPDIR="$T/tmp-$sh" $limit "$sh" "$0" --scenario "$LIB" "$SOCK" "$sh" "$sh" \
        >"$T/scenario-$sh.out" 2>"$T/scenario-$sh.err"
    rc=$?
    before=$failed
    tally "$T/scenario-$sh.out"
    if ! grep -q "^ok - $sh: scenario ran to the end" "$T/scenario-$sh.out"; then
        nok "$sh: the scenario stopped early (exit $rc)"
    fi
    if [ "$failed" -ne "$before" ] && [ -s "$T/scenario-$sh.err" ]; then
        sed "s|^|# $sh stderr: |" "$T/scenario-$sh.err"
    fi
done

# A socket the user may not use: dlock_open names it and says what to do.
# As root, run as nobody (the socket is 0660 and root's, its directory is
# opened up to be searched) a copy of the library in a directory of its
# own, since the tree may be out of nobody's reach (a clone in root's home
# or in a mktemp -d directory, mode 0700); as anyone else, a path in a
# directory that cannot be searched.
perm_sock=''
perm_run=''
perm_lib=$LIB
if [ "$(id -u)" = 0 ]; then
    if command -v setpriv >/dev/null 2>&1; then
        chmod 0711 "$T"
        mkdir "$T/tmp-nobody" && chmod 1777 "$T/tmp-nobody"
        mkdir "$T/pub" && chmod 0755 "$T/pub"
        perm_lib=$T/pub/dlock.sh
        cp "$LIB" "$perm_lib" && chmod 0644 "$perm_lib"
        perm_sock=$SOCK
        perm_run="setpriv --reuid=65534 --regid=65534 --clear-groups"
    fi
else
    mkdir "$T/closed" && chmod 0 "$T/closed"
    mkdir "$T/tmp-nobody"
    perm_sock=$T/closed/d.sock
fi
if [ -n "$perm_sock" ]; then
    # shellcheck disable=SC2086 # $perm_run is empty or several words
    out=$(TMPDIR="$T/tmp-nobody" $perm_run sh -c '. "$1" || exit 9
        dlock_open "$2"; echo "rc $?"' sh "$perm_lib" "$perm_sock" 2>&1)
    want="dlock: cannot connect to dlockd at $perm_sock: Permission denied (add yourself to the dlockd group, or check socket_mode)
rc 3"
    if [ "$out" = "$want" ]; then
        ok "dlock_open of a socket we may not use: 3, names it and hints"
    else
        nok "dlock_open of a socket we may not use: 3, names it and hints (got '$out')"
    fi
else
    ok "dlock_open of a socket we may not use # SKIP as root without setpriv"
fi

# The README's claim: a one-shot socat takes the lock and lets go at once.
out=$(echo "LOCK y" | socat - "UNIX-CONNECT:$SOCK")
case $out in
"OK "*" 1") ok "one-shot 'echo LOCK y | socat' is granted y ($out)" ;;
*) nok "one-shot 'echo LOCK y | socat' is granted y (got '$out')" ;;
esac
out=$(printf 'STATUS y\n' | socat -t 5 - "UNIX-CONNECT:$SOCK")
if [ "$out" = "OK FREE" ]; then
    ok "right after the one-shot socat, y is FREE"
else
    nok "right after the one-shot socat, y is FREE (got '$out')"
fi

# The worked example.
mkdir "$T/reports"
DLOCK_SOCKET=$SOCK REPORT_DIR=$T/reports TMPDIR=$T sh "$ROOT/clients/shell/example.sh" \
    >"$T/example.out" 2>&1
rc=$?
if [ "$rc" -eq 0 ]; then
    ok "example.sh exits 0"
else
    nok "example.sh exits 0 (exit $rc)"
    sed 's|^|# example: |' "$T/example.out"
fi
set -- "$T"/reports/nightly-report.*.txt
report=${1##*/}
fence=${report#nightly-report.}
fence=${fence%.txt}
if [ $# -eq 1 ] && is_digits "$fence" && grep -q "^fence: $fence\$" "$1"; then
    ok "example.sh wrote a report named by its fence ($report)"
else
    nok "example.sh wrote a report named by its fence (got $*)"
fi
out=$(printf 'STATUS nightly-report\n' | socat -t 5 - "UNIX-CONNECT:$SOCK")
if [ "$out" = "OK FREE" ]; then
    ok "after example.sh, nightly-report is FREE"
else
    nok "after example.sh, nightly-report is FREE (got '$out')"
fi

if ! kill -0 "$dlockd_pid" 2>/dev/null; then
    nok "dlockd is still running at the end"
    sed 's|^|# dlockd: |' "$T/dlockd.log" | tail -n 20
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
