#!/bin/sh
# conformance.sh: the shell client's conformance adapter (tests/conformance/README.md).
# SPDX-License-Identifier: MIT
#
# One background job per client, sourcing dlock.sh, reads that client's
# commands from a FIFO and runs them one at a time. The shell library has
# no cancel call: `cancel` ends the client's job (its connection, and every
# lock it took, end with it). dlock.sh sees events at its next call, so a
# ticker makes an idle job with live handles ask dlock_status every 0.1 s.
# Ids (rid, cid, hid) are letters, digits and _.

here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d "${TMPDIR:-/tmp}/dlock-conf-sh.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
clients=''

say() {
    printf '%s\n' "$*"
}

# ---- a client's job --------------------------------------------------------

# The job's handles: $handles lists them; h_<hid>_name, _kind, _lease, _live.
handles=''
hname='' hkind='' hlease='' hlive='' hnames='' held='' last=0 cid='' oname='' olive=''
name='' h='' esc=''

hset() { # hid name kind lease [names: an mlock's]
    eval "h_$1_name=\$2 h_$1_kind=\$3 h_$1_lease=\$4 h_$1_live=1 h_$1_names=\${5-}"
    case " $handles " in *" $1 "*) ;; *) handles="$handles $1" ;; esac
}

hget() { # hid: hname hkind hlease hlive hnames
    eval "hname=\${h_$1_name-} hkind=\${h_$1_kind-} hlease=\${h_$1_lease-} hlive=\${h_$1_live-}"
    eval "hnames=\${h_$1_names-}"
}

# lost NAME REASON: every live handle of NAME (any with NAME "") is lost.
lost() {
    for h in $handles; do
        hget "$h"
        mine=
        case " $hnames " in *" $1 "*) mine=1 ;; esac
        if [ "$hlive" = 1 ] && { [ -z "$1" ] || [ "$hname" = "$1" ] || [ -n "$mine" ]; }; then
            eval "h_${h}_live=0"
            say "* lost $h $2"
        fi
    done
}

# The job's observations: $observations lists them; o_<oid>_name, _live.
observations=''

# After each call: the loss dlock.sh saw, if any, and the leader changes.
events() {
    while dlock_lost_event; do
        lost "${DLOCK_LOST%% *}" "${DLOCK_LOST#* }"
    done
    DLOCK_LOST=
    while dlock_leader_event; do
        for o in $observations; do
            eval "oname=\${o_${o}_name-} olive=\${o_${o}_live-}"
            if [ "$olive" = 1 ] && [ "$oname" = "$DLOCK_LEADER_NAME" ]; then
                say "* leader $o $DLOCK_LEADER"
            fi
        done
    done
}

# name_arg WORD: lock's <name> in $name; "%" and hex digits stand for its
# bytes ("%" alone: the empty name).
name_arg() {
    case $1 in
    %*) ;;
    *)
        name=$1
        return
        ;;
    esac
    h=${1#%} esc=''
    while [ -n "$h" ]; do
        esc="$esc\\$(printf '%03o' "$((0x${h%"${h#??}"}))")"
        h=${h#??}
    done
    # shellcheck disable=SC2059 # the format is the octal escapes
    name=$(printf "${esc}x")
    name=${name%x}
}

# answer RID RC [OK-WORDS...]: ok, timeout, or err from DLOCK_REPLY.
answer() {
    r=$1 rc=$2
    shift 2
    events
    case $rc in
    0) say "$r ok${*:+ $*}" ;;
    1) say "$r timeout" ;;
    3)
        say "$r err closed the connection to dlockd is gone"
        lost '' closed
        ;;
    *)
        code=${DLOCK_REPLY#ERR }
        text=${code#* }
        code=${code%% *}
        case $code in
        NAME) kind=name ;; ARGS) kind=args ;; KIND) kind=kind ;; NOTHELD) kind=notheld ;;
        LIMIT) kind=limit ;; DENIED) kind=denied ;; BACKEND) kind=backend ;;
        *) kind=other ;;
        esac
        say "$r err $kind $text"
        ;;
    esac
}

client_job() { # rid cid socket; commands on fd 3
    # shellcheck source=clients/shell/dlock.sh
    . "$here/dlock.sh"
    sock=$3
    [ "$sock" = - ] && sock=''
    if ! dlock_open ${sock:+"$sock"} 2>"$dir/$2.err"; then
        msg=$(grep 'cannot connect' "$dir/$2.err" | head -n 1)
        say "$1 err connect ${msg#dlock: }"
        exit 0
    fi
    say "$1 ok"
    read -r me _ </proc/self/stat
    (while kill -0 "$me" 2>/dev/null && sleep 0.1; do say tick; done) >&3 8>&- 9>&- &
    while IFS=' ' read -r r op a1 a2 a3 a4 a5 <&3; do
        rc=0
        case $op in
        '') # a tick: look for events while a handle or an observation lives
            for h in $handles; do
                hget "$h"
                if [ "$hlive" = 1 ]; then
                    dlock_status "$hname" >/dev/null 2>&1
                    events
                    break
                fi
            done
            for o in $observations; do
                eval "olive=\${o_${o}_live-}"
                if [ "$olive" = 1 ]; then
                    dlock_cmd PING >/dev/null 2>&1
                    events
                    break
                fi
            done
            ;;
        elect) # cid hid name value lease
            dlock_elect "$a3" "$a4" "$a5" 2>/dev/null || rc=$?
            [ "$rc" = 0 ] && hset "$a2" "$a3" elect "$a5"
            answer "$r" "$rc" "$DLOCK_FENCE"
            ;;
        resign)
            hget "$a1"
            dlock_resign "$hname" 2>/dev/null || rc=$?
            [ "$rc" = 0 ] && eval "h_${a1}_live=0"
            answer "$r" "$rc" "$DLOCK_WAS"
            ;;
        leader) # cid name
            dlock_leader "$a2" 2>/dev/null || rc=$?
            answer "$r" "$rc" "$DLOCK_LEADER"
            ;;
        observe) # cid oid name
            dlock_observe "$a3" 2>/dev/null || rc=$?
            if [ "$rc" = 0 ]; then
                eval "o_${a2}_name=\$a3 o_${a2}_live=1"
                observations="$observations $a2"
            fi
            answer "$r" "$rc" "$DLOCK_LEADER"
            ;;
        unobserve) # oid
            eval "oname=\${o_${a1}_name-}"
            dlock_unobserve "$oname" 2>/dev/null || rc=$?
            events
            [ "$rc" = 0 ] && eval "o_${a1}_live=0"
            answer "$r" "$rc"
            ;;
        lock | rlock | wlock | fairlock)
            name_arg "$a3"
            "dlock_$op" "$name" "$a4" 2>/dev/null || rc=$?
            [ "$rc" = 0 ] && hset "$a2" "$name" "$op" "$a4"
            answer "$r" "$rc" "$DLOCK_FENCE" "$DLOCK_HOLDS"
            ;;
        mlock | trymlock) # cid hid [wait] lease name...: a4 a5 hold the rest
            if [ "$op" = mlock ]; then
                nums=$a3 names="$a4${a5:+ $a5}"
            else
                nums="$a3 $a4" names=$a5
            fi
            set -f
            # shellcheck disable=SC2086 # names and numbers are single words
            set -- $names
            n=$#
            # shellcheck disable=SC2086
            "dlock_$op" "$n" "$@" $nums 2>/dev/null || rc=$?
            set +f
            [ "$rc" = 0 ] && hset "$a2" "$1" mlock "${nums##* }" "$names"
            answer "$r" "$rc" "$DLOCK_FENCES"
            ;;
        munlock)
            hget "$a1"
            set -f
            # shellcheck disable=SC2086
            set -- $hnames
            set +f
            dlock_munlock "$#" "$@" 2>/dev/null || rc=$?
            case $DLOCK_REPLY in
            'ERR NOTHELD'*)
                # One is gone (lost): MUNLOCK released nothing, so each
                # name still held goes on its own (dlock.sh says so).
                rc=0 left=''
                for n in "$@"; do
                    if dlock_unlock "$n" 2>/dev/null; then
                        left="$left $DLOCK_HOLDS"
                    else
                        left="$left 0"
                    fi
                done
                DLOCK_HOLDS=${left# }
                ;;
            esac
            [ "$rc" = 0 ] && eval "h_${a1}_live=0"
            answer "$r" "$rc" "$DLOCK_HOLDS"
            ;;
        trylock)
            dlock_trylock "$a3" "$a4" "$a5" 2>/dev/null || rc=$?
            [ "$rc" = 0 ] && hset "$a2" "$a3" lock "$a5"
            answer "$r" "$rc" "$DLOCK_FENCE" "$DLOCK_HOLDS"
            ;;
        reenter)
            hget "$a1"
            "dlock_$hkind" "$hname" "$hlease" 2>/dev/null || rc=$?
            answer "$r" "$rc" "$DLOCK_FENCE" "$DLOCK_HOLDS"
            ;;
        unlock)
            hget "$a1"
            case $hkind in rlock) f=dlock_runlock ;; wlock) f=dlock_wunlock ;; *) f=dlock_unlock ;; esac
            $f "$hname" 2>/dev/null || rc=$?
            [ "$rc" = 0 ] && [ "$DLOCK_HOLDS" = 0 ] && eval "h_${a1}_live=0"
            answer "$r" "$rc" "$DLOCK_HOLDS"
            ;;
        renew)
            hget "$a1"
            dlock_renew "$hname" "$a2" 2>/dev/null || rc=$?
            answer "$r" "$rc" "$DLOCK_TTL"
            ;;
        release)
            hget "$a1"
            dlock_release "$hname" "$a2" 2>/dev/null || rc=$?
            [ "$rc" = 0 ] && [ "$DLOCK_HOLDS" = 0 ] && eval "h_${a1}_live=0"
            answer "$r" "$rc" "$DLOCK_HOLDS"
            ;;
        seminit)
            dlock_seminit "$a2" "$a3" 2>/dev/null || rc=$?
            answer "$r" "$rc" "$DLOCK_SET"
            ;;
        acquire)
            dlock_acquire "$a3" "$a4" "$a5" 2>/dev/null || rc=$?
            [ "$rc" = 0 ] && hset "$a2" "$a3" sem "$a5"
            answer "$r" "$rc" "$DLOCK_HOLDS"
            ;;
        latchset) # cid name count
            dlock_latchset "$a2" "$a3" 2>/dev/null || rc=$?
            answer "$r" "$rc" "$DLOCK_SET"
            ;;
        countdown | latchcount | await) # cid name
            "dlock_$op" "$a2" 2>/dev/null || rc=$?
            if [ "$op" = await ]; then answer "$r" "$rc"; else answer "$r" "$rc" "$DLOCK_COUNT"; fi
            ;;
        tryawait) # cid name wait: a timeout tells the count
            dlock_tryawait "$a2" "$a3" 2>/dev/null || rc=$?
            if [ "$rc" = 1 ]; then
                events
                say "$r timeout $DLOCK_COUNT"
            else
                answer "$r" "$rc"
            fi
            ;;
        status)
            dlock_status "$a2" 2>/dev/null || rc=$?
            case $DLOCK_STATE in
            MINE) set -- MINE "$DLOCK_HOLDS" "$DLOCK_TTL" "$DLOCK_FENCE" ;;
            TAKEN) set -- TAKEN "$DLOCK_TTL" ;;
            READ | WRITE) set -- "$DLOCK_STATE" "$DLOCK_READERS" "$DLOCK_HOLDS" "$DLOCK_TTL" ;;
            SEM) set -- SEM "$DLOCK_AVAILABLE" "$DLOCK_HOLDS" ;;
            *) set -- "$DLOCK_STATE" ;;
            esac
            answer "$r" "$rc" "$@"
            ;;
        list) # cid pattern limit ("-": dlockd's default)
            if [ "$a3" = - ]; then
                dlock_list "$a2" 2>/dev/null || rc=$?
            else
                dlock_list "$a2" "$a3" 2>/dev/null || rc=$?
            fi
            set -- "$DLOCK_COUNT" "$DLOCK_MORE"
            while read -r ln lk _ lf lh _; do
                [ -n "$ln" ] && set -- "$@" "$ln" "$lk" "$lf" "${lh%%,*}"
            done <<EOF
$DLOCK_LIST
EOF
            answer "$r" "$rc" "$@"
            ;;
        ping)
            dlock_cmd PING 2>/dev/null || rc=$?
            answer "$r" "$rc"
            ;;
        close)
            dlock_close
            events
            lost '' closed
            say "$r ok"
            ;;
        contend) # cid tasks names rounds prefix: the blocking client serves
            # one call at a time, so the tasks take their turns one by one.
            grants=0 overlaps=0 nonrising=0 round=0
            while [ "$rc" = 0 ] && [ "$round" -lt "$a4" ]; do
                t=0
                while [ "$rc" = 0 ] && [ "$t" -lt "$a2" ]; do
                    k=$(((t + round) % a3))
                    dlock_lock "$a5$k" 2>/dev/null || rc=$?
                    [ "$rc" = 0 ] || break
                    grants=$((grants + 1))
                    eval "held=\${held_$k-} last=\${last_$k-0}"
                    [ -n "$held" ] && overlaps=$((overlaps + 1))
                    [ "$DLOCK_FENCE" -gt "$last" ] || nonrising=$((nonrising + 1))
                    eval "held_$k=$t last_$k=$DLOCK_FENCE"
                    eval "held_$k="
                    dlock_unlock "$a5$k" 2>/dev/null || rc=$?
                    t=$((t + 1))
                done
                round=$((round + 1))
            done
            answer "$r" "$rc" "$grants" "$overlaps" "$nonrising"
            ;;
        quit)
            dlock_close
            exit 0
            ;;
        *) say "$r err other unknown command $op" ;;
        esac
    done
}

# ---- the main loop ---------------------------------------------------------

# send CID LINE: to the client's job (unless it ended).
send() {
    eval "pid=\${pid_$1-}"
    if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then
        say "${2%% *} err closed the client is closed"
        return
    fi
    # Read-write: opening a FIFO only to write blocks until a reader opens
    # it, for ever if the client's job ended after the check above.
    printf '%s\n' "$2" 1<>"$dir/$1.in"
}

say "* ready"
while IFS=' ' read -r rid op a1 a2 rest; do
    case $op in
    connect)
        mkfifo "$dir/$a1.in"
        client_job "$rid" "$a1" "$a2" 3<>"$dir/$a1.in" &
        eval "pid_$a1=\$!"
        clients="$clients $a1"
        ;;
    cancel)
        say "$rid ok"
        eval "cid=\${rc_$a1-}"
        eval "pid=\${pid_$cid-}"
        if [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null; then
            wait "$pid" 2>/dev/null
            eval "pid_$cid="
            say "$a1 err cancelled the client's job was ended"
        fi
        ;;
    reenter | unlock | renew | release | resign | munlock)
        eval "cid=\${hc_$a1-}"
        eval "rc_$rid=\$cid"
        send "$cid" "$rid $op $a1 $a2"
        ;;
    unobserve)
        eval "cid=\${oc_$a1-}"
        eval "rc_$rid=\$cid"
        send "$cid" "$rid $op $a1"
        ;;
    *)
        case $op in
        lock | rlock | wlock | fairlock | trylock | acquire | elect | mlock | trymlock)
            eval "hc_$a2=\$a1" ;;
        observe) eval "oc_$a2=\$a1" ;;
        esac
        eval "rc_$rid=\$a1"
        send "$a1" "$rid $op $a1 $a2${rest:+ $rest}"
        ;;
    esac
done
for c in $clients; do
    eval "pid=\${pid_$c-}"
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        printf 'q quit\n' 1<>"$dir/$c.in"
        wait "$pid"
    fi
done
exit 0
