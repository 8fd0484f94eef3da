# shellcheck shell=sh
# dlock.sh: a dlockd client library for shell scripts (POSIX sh, dash, bash).
# SPDX-License-Identifier: MIT
#
# Source it, open ONE connection to dlockd, and take locks over it. The
# connection is the lock owner: every lock taken through it is held until it
# is unlocked, or until the connection closes (dlock_close, or the script
# exiting or dying), whichever comes first.
#
#   . /path/to/dlock.sh
#   dlock_open || exit 1                  # $DLOCK_SOCKET or /run/dlockd/dlockd.sock
#   dlock_lock nightly-report || exit 1   # waits as long as it takes
#   echo "fence $DLOCK_FENCE"             # hand this to what you protect
#   ... work ...
#   dlock_unlock nightly-report
#   dlock_close
#
# Why not simply `echo "LOCK x" | socat - UNIX-CONNECT:/run/dlockd/dlockd.sock`?
# That takes the lock and lets go of it at once: socat exits when its input
# ends, its exit closes the connection, and dlockd releases everything a
# connection held the moment it closes -- the connection is the owner. So
# this library starts ONE socat in the background for the whole script, its
# input and output connected to the shell through two FIFOs, and keeps it
# (and with it the connection) alive until dlock_close or the script's end.
#
# Functions (all return 0 on OK, 1 on TIMEOUT, 2 on ERR or a bad argument,
# 3 when there is no connection or it was lost). A LEASE_MS may have a
# fraction, rounded up to whole ms: a lease below 1 ms (0.5) is 1 ms, never
# 0, which is no lease (held while connected). A bad NAME's DLOCK_REPLY
# shows it: ERR NAME bad lock name "a b": only printable ASCII without spaces
# is allowed.
#   dlock_open [SOCKET]          connect; checks with PING that dlockd answers,
#                                else says why on stderr, naming the socket:
#                                "dlock: cannot connect to dlockd at SOCKET:
#                                No such file or directory (is dlockd running?)"
#   dlock_cmd WORD...            send one request line, reply in DLOCK_REPLY
#   dlock_lock NAME [LEASE_MS]   wait for the lock; sets DLOCK_FENCE, DLOCK_HOLDS
#   dlock_trylock NAME [WAIT_MS [LEASE_MS]]
#                                the same, or 1 after WAIT_MS (default 0) with
#                                the holder's remaining lease in DLOCK_TTL
#   dlock_unlock NAME            drop one hold (of a plain or a fair lock);
#                                holds left in DLOCK_HOLDS
#   dlock_renew NAME [LEASE_MS]  new remaining lease in DLOCK_TTL
#   dlock_status NAME            DLOCK_STATE=FREE|MINE|TAKEN|READ|WRITE|SEM
#                                (+ DLOCK_HOLDS, DLOCK_TTL, DLOCK_FENCE for
#                                MINE, DLOCK_TTL for TAKEN, of a plain or a
#                                fair lock; DLOCK_READERS, DLOCK_HOLDS (this
#                                connection's of that kind) and DLOCK_TTL
#                                for READ and WRITE;
#                                DLOCK_AVAILABLE (permits free) and
#                                DLOCK_HOLDS (permits held by this
#                                connection) for SEM)
# Read/write locks (any number of readers at once, or one writer), as
# dlock_lock, dlock_trylock and dlock_unlock:
#   dlock_rlock NAME [LEASE_MS]  dlock_tryrlock NAME [WAIT_MS [LEASE_MS]]
#   dlock_wlock NAME [LEASE_MS]  dlock_trywlock NAME [WAIT_MS [LEASE_MS]]
#   dlock_runlock NAME           dlock_wunlock NAME
# A read grant's DLOCK_FENCE is the name's fence as it is (0 before any
# write grant); a write grant raises it. A name is one kind of lock at a
# time: a plain lock's name refuses dlock_rlock, a read/write lock's
# dlock_lock, and a reader's dlock_wlock (an upgrade): 2, with "ERR KIND
# ..." in DLOCK_REPLY.
# Fair locks (waiters queue in Redis and get the lock in the order they
# came, across every dlockd and Redisson client of the name), as dlock_lock
# and dlock_trylock, released by dlock_unlock:
#   dlock_fairlock NAME [LEASE_MS]
#                                wait for its turn; sets DLOCK_FENCE,
#                                DLOCK_HOLDS
#   dlock_tryfairlock NAME [WAIT_MS [LEASE_MS]]
#                                the same, or 1 after WAIT_MS (default 0)
#                                with DLOCK_TTL; its place in the queue is
#                                gone then (WAIT_MS 0 takes none, and gives
#                                up when the lock is held or anyone waits)
# A waiter's place goes as soon as it stops waiting or its connection
# closes. On one dlockd a name is one kind at a time: the other lock
# functions on a name it holds or waits for as a fair lock, and these on a
# name held as another kind, return 2 with "ERR KIND ..." in DLOCK_REPLY.
# Counting semaphores (a name with a number of permits; each owner takes
# and gives back any number at a time; a semaphore's name refuses the lock
# functions and a lock's name these, with 2 and "ERR KIND ..."):
#   dlock_seminit NAME PERMITS   give the semaphore PERMITS permits, unless
#                                it has its permits already: DLOCK_SET is 1
#                                (set now) or 0 (unchanged)
#   dlock_acquire NAME PERMITS [LEASE_MS]
#                                wait until PERMITS (1-10000) are free and
#                                take them (also waits while the permits
#                                were never set); DLOCK_HOLDS is the
#                                permits this connection holds now
#   dlock_tryacquire NAME PERMITS [WAIT_MS [LEASE_MS]]
#                                the same, or 1 after WAIT_MS (default 0)
#                                with DLOCK_TTL from the TIMEOUT reply
#   dlock_release NAME PERMITS   give PERMITS back; DLOCK_HOLDS is the
#                                permits still held (2, with ERR NOTHELD and
#                                none released, when fewer are held)
# Count-down latches (a count set once and counted down by anyone; at 0
# the latch is gone and every waiter is released, on every dlockd of the
# Redis; a latch has no holder, and dlock_close changes no count; a latch's
# name refuses the lock functions and a lock's name these, with 2 and "ERR
# KIND ..."):
#   dlock_latchset NAME COUNT    set the count (1-2147483647) unless a
#                                latch of NAME exists: DLOCK_SET is 1 (set
#                                now) or 0 (unchanged)
#   dlock_countdown NAME         one less; DLOCK_COUNT is the count left
#                                (0: gone, its waiters released; also 0,
#                                changing nothing, when there was none)
#   dlock_await NAME             wait (as long as it takes) until the count
#                                is 0; at once when there is no latch
#   dlock_tryawait NAME [WAIT_MS]
#                                the same, or 1 after WAIT_MS (default 0:
#                                one look) with the count in DLOCK_COUNT
#   dlock_latchcount NAME        DLOCK_COUNT is the count (0: no latch)
# Several names at once, all or none (the wait holds none of them, so two
# scripts taking overlapping sets in any order cannot deadlock). N is how
# many names follow (1-64, none twice), as on the wire. Each name granted
# is an ordinary hold of this connection: dlock_unlock releases it,
# dlock_status shows it, and a name already held counts as a reentry.
#   dlock_mlock N NAME... [LEASE_MS]
#                                wait for all N; DLOCK_FENCES is their fences,
#                                space-separated, in the order given
#   dlock_trymlock N NAME... [WAIT_MS [LEASE_MS]]
#                                the same, or 1 after WAIT_MS (default 0),
#                                holding none, with DLOCK_TTL
#   dlock_munlock N NAME...      one hold less of each; DLOCK_HOLDS is the
#                                holds left, space-separated (2, with ERR
#                                NOTHELD and none released, when one is
#                                not held)
# A "!LOST NAME ..." is per name: the set's other names stay held, until
# dlock_unlock of each (dlock_munlock of the set then releases none).
# dlock_renew renews the permits held of a semaphore too, and a "!LOST
# NAME ..." of a semaphore means every permit held of it is gone.
# Leader election (one connection leads a name at a time; its VALUE, a word
# as a name is, is what others are told; its fence rises from leadership
# to leadership; an election's name refuses the lock functions, and a
# lock's name dlock_elect, with 2 and "ERR KIND ..."):
#   dlock_elect NAME VALUE [LEASE_MS]
#                                campaign and wait (as long as it takes)
#                                until this connection leads NAME; sets
#                                DLOCK_FENCE. Without LEASE_MS it leads
#                                while connected; a loss is "!LOST NAME ..."
#   dlock_resign NAME            stop leading (the next candidate leads at
#                                once) or campaigning: DLOCK_WAS is 1, or 0
#                                when it did neither
#   dlock_leader NAME            DLOCK_LEADER is "FENCE VALUE" or NONE, with
#                                DLOCK_LEADER_FENCE and DLOCK_LEADER_VALUE
#                                (empty for NONE)
#   dlock_observe NAME           as dlock_leader (the leader now); from then
#                                on dlockd tells every change, kept in order
#                                until taken with dlock_leader_event or
#                                dlock_wait_leader
#   dlock_unobserve NAME         no more changes of NAME: DLOCK_WAS is 1 if
#                                it was observed
#   dlock_leader_event           take the oldest change told and not yet
#                                taken: 0 with DLOCK_LEADER_NAME and
#                                DLOCK_LEADER* as dlock_leader sets them, 1
#                                if none is pending (it does not wait)
#   dlock_wait_leader            the same, waiting (as long as it takes) for
#                                a change when none is pending
#   dlock_lost_event             take the oldest loss read and not yet taken:
#                                0 with DLOCK_LOST "NAME REASON", 1 if none
#                                is pending (losses read in one call are
#                                each kept; it does not wait)
# Listing (every lock of every kind whose name matches a glob, across every
# dlockd and Redisson client of the Redis; only names this peer may read):
#   dlock_list [PATTERN [LIMIT]] PATTERN is Redis's glob (* ? [abc] \),
#                                default *; LIMIT 1 to 1000, default
#                                dlockd's (100). DLOCK_LIST has one line per
#                                lock, each ending in a newline, of seven
#                                words: NAME KIND TTL_MS FENCE HOLDERS
#                                WAITERS VALUE (as PROTOCOL.md's LIST entry,
#                                without its "= "); DLOCK_COUNT the lines,
#                                DLOCK_MORE 1 when more names match:
#       dlock_list 'job*' || exit 1
#       printf '%s' "$DLOCK_LIST" | while read -r name kind ttl fence holders _; do
#           echo "$name: $kind held by ${holders%%,*}"
#       done
#   dlock_close                  QUIT, wait for socat, clean up (releases all)
#
# Events: lines from dlockd starting with "!" are read while waiting for a
# reply. The last one is kept in DLOCK_EVENT (without the "!"); "!LOST name
# reason" also sets DLOCK_LOST="name reason" (the last; dlock_lost_event
# gives each in turn) and is reported on stderr. An
# event that arrives while the script does other work is seen at its next
# dlock_* call; call `dlock_status NAME` before a step that needs the lock.
#
# Things to know:
# - dlock_open sets `trap _dlock_atexit EXIT`. That REPLACES any EXIT trap the
#   script had, and chains to nothing. If you set your own EXIT trap after
#   dlock_open, call dlock_close from it -- or just call dlock_close
#   yourself, or let the process exit: when the shell dies, socat sees the end
#   of its input and exits, and dlockd releases the locks.
# - The connection uses two file descriptors, 8 (to socat) and 9 (from
#   socat); set DLOCK_WFD / DLOCK_RFD (single digits 3-9) before dlock_open
#   if the script uses those. Commands the script starts inherit them, as
#   with flock(1): if the script is killed while a child still runs, the
#   lock lives until that child exits too. Start long-lived background
#   children with `8>&- 9>&-` to avoid that.
# - One connection per shell process. A subshell inherits it: it may use it
#   while the parent waits (variables it sets do not reach the parent), but
#   two processes must never use it at once (e.g. `... &` and its parent).
#   A subshell that calls dlock_open gets a connection, and locks, of its
#   own, closed when it exits; the parent's stays untouched.
# - dash's `read` has no timeout, so a request blocks until dlockd answers
#   (LOCK waits as long as it takes, by design). In shells whose `read` has
#   -t (bash, ksh, zsh), dlock_open and dlock_close give up after
#   DLOCK_IO_TIMEOUT seconds (default 5) when dlockd does not answer.
# - Requires socat, mkfifo and mktemp.

# The DLOCK_* variables are this library's output, read by its users.
# shellcheck disable=SC2034

# Sourcing the file again keeps an open connection.
if [ -z "${_dlock_loaded-}" ]; then
    _dlock_loaded=1
    DLOCK_REPLY=''
    DLOCK_FENCE=''
    DLOCK_FENCES=''
    DLOCK_HOLDS=''
    DLOCK_TTL=''
    DLOCK_STATE=''
    DLOCK_READERS=''
    DLOCK_AVAILABLE=''
    DLOCK_SET=''
    DLOCK_LOST=''
    DLOCK_EVENT=''
    DLOCK_WAS=''
    DLOCK_LEADER=''
    DLOCK_LEADER_NAME=''
    DLOCK_LEADER_FENCE=''
    DLOCK_LEADER_VALUE=''
    DLOCK_LIST=''
    DLOCK_COUNT=''
    DLOCK_MORE=''
    _dlock_leaders=''
    _dlock_losses=''
    _dlock_pid=''
    _dlock_dir=''
    _dlock_owner=''
    _dlock_w=''
    _dlock_r=''
fi
_dlock_cr=$(printf '\r')
_dlock_nl='
'
# Does this shell's read know -t (bash, ksh, zsh, busybox; not dash)?
# shellcheck disable=SC3045 # a probe: fails where read has no -t
if (printf 'x\n' | read -r -t 1 _dlock_x) 2>/dev/null; then
    _dlock_read_t=1
else
    _dlock_read_t=
fi

_dlock_err() {
    printf 'dlock: %s\n' "$*" >&2
}

# The pid of the running process, also inside a subshell (where $$ is not).
_dlock_self() {
    if [ -n "${BASH_VERSION-}" ]; then
        # shellcheck disable=SC3028 # bash only, checked above
        _dlock_me=${BASHPID-$$}
    elif [ -r /proc/self/stat ] && read -r _dlock_me _dlock_x </proc/self/stat; then
        :
    else
        _dlock_me=$$
    fi
}

# _dlock_readline [TIMEOUT_S]: one line from socat into _dlock_l, CR dropped.
# Fails at end of input, or after TIMEOUT_S where read supports -t.
_dlock_readline() {
    if [ -n "${1-}" ] && [ -n "$_dlock_read_t" ]; then
        # shellcheck disable=SC3045 # only where the probe above found -t
        IFS= read -r -t "$1" _dlock_l <&"$_dlock_r" || return 1
    else
        IFS= read -r _dlock_l <&"$_dlock_r" || return 1
    fi
    _dlock_l=${_dlock_l%"$_dlock_cr"}
}

# Record an event line (starting with "!").
_dlock_event() {
    DLOCK_EVENT=${1#!}
    case $DLOCK_EVENT in
    "LOST "*)
        DLOCK_LOST=${DLOCK_EVENT#LOST }
        # Kept, in order, for dlock_lost_event: two losses read in one
        # call are two ("NAME REASON", one a line).
        _dlock_losses="$_dlock_losses$DLOCK_LOST$_dlock_nl"
        _dlock_err "lost lock ${DLOCK_LOST%% *} (${DLOCK_LOST#* })"
        ;;
    "LEADER "*)
        # Kept, in order, for dlock_leader_event: "NAME FENCE VALUE" or
        # "NAME NONE", one a line.
        _dlock_leaders="$_dlock_leaders${DLOCK_EVENT#LEADER }$_dlock_nl"
        ;;
    esac
}

# Send one line. Run in a subshell so that a dead socat (SIGPIPE) kills the
# subshell, not the script.
_dlock_send() {
    (printf '%s\n' "$1" >&"$_dlock_w") 2>/dev/null
}

# Tear the connection down: close our ends, reap socat, remove the directory.
_dlock_teardown() {
    if [ -n "$_dlock_w" ]; then
        eval "exec $_dlock_w>&- $_dlock_r<&-"
    fi
    if [ -n "$_dlock_pid" ]; then
        # socat exits by itself once its input has ended (within its 0.5 s
        # half-close timeout); kill it in case it hangs in connect.
        if [ "${1-}" = kill ]; then
            kill "$_dlock_pid" 2>/dev/null || :
        fi
        wait "$_dlock_pid" 2>/dev/null || :
    fi
    if [ -n "$_dlock_dir" ]; then
        rm -rf "$_dlock_dir"
    fi
    _dlock_pid='' _dlock_dir='' _dlock_owner='' _dlock_w='' _dlock_r=''
    _dlock_leaders=''   # changes of the connection's observations
    _dlock_losses=''    # ... and its losses
}

_dlock_gone() {
    _dlock_err "the connection to dlockd is gone; locks it held are released"
    _dlock_teardown kill
}

# _dlock_name NAME: 1 to 255 printable ASCII bytes, no blanks (dlockd checks
# the ASCII range itself; this keeps the request one line of the right words).
# A bad one's DLOCK_REPLY shows it, as the other clients' errors do.
_dlock_name() {
    case $1 in
    '' | *[![:graph:]]*) _dlock_x='only printable ASCII without spaces is allowed' ;;
    *) if [ "${#1}" -le 255 ]; then return 0; fi ;;
    esac
    if [ -z "$1" ] || [ "${#1}" -gt 255 ]; then _dlock_x='must be 1 to 255 bytes'; fi
    _dlock_shown "$1"
    DLOCK_REPLY="ERR NAME bad lock name $_dlock_shown: $_dlock_x"
    _dlock_err "bad lock name $_dlock_shown: $_dlock_x"
    return 2
}

# _dlock_shown NAME: NAME for a message, in _dlock_shown: in double quotes,
# each byte outside 0x20-0x7E as \xHH (" and \ as \" and \\), cut after 40
# bytes ("..." and its length after the quote).
_dlock_shown() {
    _dlock_shown=$(printf '%s' "$1" | LC_ALL=C od -An -v -tu1 | LC_ALL=C awk '
        { for (i = 1; i <= NF; i++) {
            n++
            if (n > 40) continue
            c = $i + 0
            if (c == 34 || c == 92) s = s "\\" sprintf("%c", c)
            else if (c < 32 || c > 126) s = s sprintf("\\x%02x", c)
            else s = s sprintf("%c", c)
        } }
        END { printf "\"%s\"", s; if (n > 40) printf "... (%d bytes)", n }')
}

# _dlock_num WHAT VALUE: decimal digits, 0 to 2147483647.
_dlock_num() {
    case $2 in
    '' | *[!0-9]* | ???????????*) ;;
    *) if [ "$2" -le 2147483647 ]; then return 0; fi ;;
    esac
    DLOCK_REPLY="ERR ARGS $1 must be a number from 0 to 2147483647"
    _dlock_err "bad $1 '$2'"
    return 2
}

# _dlock_lease VALUE: a lease in ms, 0 to 2147483647, as digits with maybe
# a fraction: _dlock_lease is it in whole ms, the fraction rounded up, so
# that a lease below 1 ms (0.5) is 1 ms and never 0, which is no lease
# (held while connected).
_dlock_lease() {
    _dlock_lease=${1%%.*} _dlock_f=0
    case $1 in *.*) _dlock_f=${1#*.} ;; esac
    case $_dlock_lease in
    '' | *[!0-9]* | ???????????*) _dlock_f=bad ;;
    esac
    case $_dlock_f in
    '' | *[!0-9]*) ;;
    *)
        while :; do # no leading 0: $((...)) would take it as octal
            case $_dlock_lease in
            0?*) _dlock_lease=${_dlock_lease#0} ;;
            *) break ;;
            esac
        done
        case $_dlock_f in *[1-9]*) _dlock_lease=$((_dlock_lease + 1)) ;; esac
        if [ "$_dlock_lease" -le 2147483647 ]; then return 0; fi
        ;;
    esac
    DLOCK_REPLY="ERR ARGS LEASE_MS must be a number from 0 to 2147483647 (a fraction is rounded up)"
    _dlock_err "bad LEASE_MS '$1'"
    return 2
}

# _dlock_argc MIN MAX COUNT USAGE
_dlock_argc() {
    if [ "$3" -ge "$1" ] && [ "$3" -le "$2" ]; then
        return 0
    fi
    DLOCK_REPLY="ERR ARGS usage: $4"
    _dlock_err "usage: $4"
    return 2
}

# dlock_open [SOCKET]
dlock_open() {
    if [ -n "$_dlock_pid" ]; then
        _dlock_self
        if [ "$_dlock_me" = "$_dlock_owner" ]; then
            _dlock_err "dlock_open: already open (call dlock_close first)"
            return 2
        fi
        # A subshell opening its own connection: forget the parent's, closing
        # only this process's copies of its descriptors.
        eval "exec $_dlock_w>&- $_dlock_r<&-"
        _dlock_pid='' _dlock_dir='' _dlock_owner='' _dlock_w='' _dlock_r=''
    fi
    _dlock_sock=${1:-${DLOCK_SOCKET:-/run/dlockd/dlockd.sock}}
    _dlock_w=${DLOCK_WFD:-8}
    _dlock_r=${DLOCK_RFD:-9}
    case $_dlock_w$_dlock_r in
    [3-9][3-9]) if [ "$_dlock_w" != "$_dlock_r" ]; then _dlock_x=ok; else _dlock_x=; fi ;;
    *) _dlock_x= ;;
    esac
    if [ -z "$_dlock_x" ]; then
        _dlock_err "DLOCK_WFD and DLOCK_RFD must be two different digits 3-9"
        _dlock_w='' _dlock_r=''
        return 2
    fi
    # socat would parse these as part of its address syntax.
    case $_dlock_sock in
    *[],:!\\\"\'\(\){}[]*)
        _dlock_err "socket path '$_dlock_sock' has characters socat cannot take (,:!\\\"'(){}[]); use a symlink"
        _dlock_w='' _dlock_r=''
        return 2
        ;;
    esac
    if ! command -v socat >/dev/null 2>&1; then
        _dlock_err "socat is not installed"
        _dlock_w='' _dlock_r=''
        return 3
    fi
    # Plainly missing: say so without starting socat. Anything else (a
    # directory on the way that cannot be searched, a socket that may not
    # be used) is for socat's connect() to tell.
    case $_dlock_sock in
    */*) _dlock_x=${_dlock_sock%/*} ;;
    *) _dlock_x=. ;;
    esac
    if [ -d "${_dlock_x:-/}" ] && [ -x "${_dlock_x:-/}" ] &&
        [ ! -e "$_dlock_sock" ] && [ ! -L "$_dlock_sock" ]; then
        _dlock_connect_err "No such file or directory"
        _dlock_w='' _dlock_r=''
        return 3
    fi
    _dlock_dir=$(mktemp -d "${TMPDIR:-/tmp}/dlock.XXXXXX") || {
        _dlock_err "mktemp -d failed"
        _dlock_dir='' _dlock_w='' _dlock_r=''
        return 3
    }
    if ! mkfifo -m 600 "$_dlock_dir/in" "$_dlock_dir/out"; then
        _dlock_err "mkfifo failed in $_dlock_dir"
        _dlock_teardown
        return 3
    fi
    # The background child opens "in" for reading, then "out" for writing;
    # the shell opens them in the same order, so neither open blocks forever.
    # shut-none: when the shell dies, socat's input ends; socat then must
    # not half-close the socket (shutdown SHUT_WR) but close it whole when
    # it exits (0.5 s later). dlockd 0.1.0 does not notice a half-closed
    # client that closes later while one of its requests waits: its locks
    # and its wait would stay until that request is granted.
    socat - "UNIX-CONNECT:$_dlock_sock,shut-none" <"$_dlock_dir/in" >"$_dlock_dir/out" 2>"$_dlock_dir/err" &
    _dlock_pid=$!
    eval "exec $_dlock_w>\"\$_dlock_dir/in\" $_dlock_r<\"\$_dlock_dir/out\""
    _dlock_self
    _dlock_owner=$_dlock_me
    trap _dlock_atexit EXIT
    if _dlock_send PING; then
        while _dlock_readline "${DLOCK_IO_TIMEOUT:-5}"; do
            case $_dlock_l in
            '!'*) _dlock_event "$_dlock_l" ;;
            "OK PONG")
                # Both ends are open: the names are no longer needed, and
                # nothing is left behind should the script be killed.
                rm -rf "$_dlock_dir"
                _dlock_dir=''
                DLOCK_REPLY=$_dlock_l DLOCK_LOST='' DLOCK_EVENT=''
                return 0
                ;;
            *) break ;;
            esac
        done
    fi
    DLOCK_REPLY=${_dlock_l-}
    # socat could not connect: say why as the other clients do, from its
    # "E connect(...): <reason>" line.
    _dlock_x=''
    if [ -s "$_dlock_dir/err" ]; then
        while IFS= read -r _dlock_e; do
            case $_dlock_e in
            *" E connect("*"): "*) _dlock_x=${_dlock_e##*): } ;;
            esac
        done <"$_dlock_dir/err"
    fi
    if [ -n "$_dlock_x" ]; then
        _dlock_connect_err "$_dlock_x"
    else
        if [ -s "$_dlock_dir/err" ]; then
            cat "$_dlock_dir/err" >&2
        fi
        _dlock_err "dlockd at $_dlock_sock did not answer PING${DLOCK_REPLY:+ (got: $DLOCK_REPLY)}"
    fi
    _dlock_teardown kill
    return 3
}

# _dlock_connect_err REASON: "cannot connect to dlockd at SOCKET: REASON",
# with a hint for the usual reasons.
_dlock_connect_err() {
    case $1 in
    "No such file or directory" | "Connection refused") _dlock_x=" (is dlockd running?)" ;;
    "Permission denied") _dlock_x=" (add yourself to the dlockd group, or check socket_mode)" ;;
    *) _dlock_x='' ;;
    esac
    _dlock_err "cannot connect to dlockd at $_dlock_sock: $1$_dlock_x"
}

# dlock_cmd WORD...: send the words as one request line; the reply line goes
# to DLOCK_REPLY. Returns 0 for OK, 1 for TIMEOUT, 2 for ERR, 3 when there is
# no connection.
dlock_cmd() {
    DLOCK_REPLY=
    if [ -z "$_dlock_pid" ]; then
        _dlock_err "not connected (call dlock_open first)"
        return 3
    fi
    if [ $# -eq 0 ]; then
        _dlock_err "dlock_cmd: no request"
        return 2
    fi
    # Join with single spaces whatever IFS is.
    _dlock_line=$1
    shift
    for _dlock_x in "$@"; do
        _dlock_line="$_dlock_line $_dlock_x"
    done
    case $_dlock_line in
    *"$_dlock_nl"* | *"$_dlock_cr"*)
        DLOCK_REPLY="ERR ARGS a request is one line"
        _dlock_err "dlock_cmd: a request must not contain a line break"
        return 2
        ;;
    esac
    # A blank line gets no reply: do not wait for one.
    case $_dlock_line in
    *[![:blank:]]*) ;;
    *)
        _dlock_err "dlock_cmd: empty request"
        return 2
        ;;
    esac
    if ! _dlock_send "$_dlock_line"; then
        _dlock_gone
        return 3
    fi
    while _dlock_readline; do
        case $_dlock_l in
        '!'*) _dlock_event "$_dlock_l" ;;
        OK | "OK "*)
            DLOCK_REPLY=$_dlock_l
            return 0
            ;;
        TIMEOUT | "TIMEOUT "*)
            DLOCK_REPLY=$_dlock_l
            return 1
            ;;
        *)
            # ERR, or anything else (not in the protocol): an error.
            DLOCK_REPLY=$_dlock_l
            return 2
            ;;
        esac
    done
    _dlock_gone
    return 3
}

# _dlock_run WORD...: dlock_cmd, and an ERR reported on stderr.
_dlock_run() {
    _dlock_rc=0
    dlock_cmd "$@" || _dlock_rc=$?
    if [ "$_dlock_rc" -eq 2 ]; then
        _dlock_err "$*: $DLOCK_REPLY"
    fi
    return "$_dlock_rc"
}

# Fill DLOCK_FENCE and DLOCK_HOLDS from "OK <fence> <holds>".
_dlock_granted() {
    _dlock_x=${DLOCK_REPLY#OK }
    DLOCK_FENCE=${_dlock_x%% *}
    DLOCK_HOLDS=${_dlock_x#* }
}

# _dlock_take VERB USAGE NAME [LEASE_MS]: LOCK, RLOCK, WLOCK or FAIRLOCK.
_dlock_take() {
    DLOCK_FENCE='' DLOCK_HOLDS=''
    _dlock_verb=$1 _dlock_usage=$2
    shift 2
    _dlock_argc 1 2 $# "$_dlock_usage" || return 2
    _dlock_name "$1" || return 2
    if [ $# -ge 2 ]; then
        _dlock_lease "$2" || return 2
        set -- "$1" "$_dlock_lease"
    fi
    _dlock_rc=0
    _dlock_run "$_dlock_verb" "$@" || _dlock_rc=$?
    if [ "$_dlock_rc" -eq 0 ]; then _dlock_granted; fi
    return "$_dlock_rc"
}

# _dlock_trytake VERB USAGE NAME [WAIT_MS [LEASE_MS]]: TRYLOCK, TRYRLOCK,
# TRYWLOCK or TRYFAIRLOCK.
_dlock_trytake() {
    DLOCK_FENCE='' DLOCK_HOLDS='' DLOCK_TTL=''
    _dlock_verb=$1 _dlock_usage=$2
    shift 2
    _dlock_argc 1 3 $# "$_dlock_usage" || return 2
    _dlock_name "$1" || return 2
    if [ $# -ge 2 ]; then _dlock_num WAIT_MS "$2" || return 2; fi
    if [ $# -ge 3 ]; then
        _dlock_lease "$3" || return 2
        set -- "$1" "$2" "$_dlock_lease"
    fi
    _dlock_rc=0
    _dlock_run "$_dlock_verb" "$@" || _dlock_rc=$?
    case $_dlock_rc in
    0) _dlock_granted ;;
    1) DLOCK_TTL=${DLOCK_REPLY#TIMEOUT } ;;
    esac
    return "$_dlock_rc"
}

# _dlock_drop VERB USAGE NAME: UNLOCK, RUNLOCK or WUNLOCK.
_dlock_drop() {
    DLOCK_HOLDS=
    _dlock_verb=$1 _dlock_usage=$2
    shift 2
    _dlock_argc 1 1 $# "$_dlock_usage" || return 2
    _dlock_name "$1" || return 2
    _dlock_rc=0
    _dlock_run "$_dlock_verb" "$@" || _dlock_rc=$?
    if [ "$_dlock_rc" -eq 0 ]; then DLOCK_HOLDS=${DLOCK_REPLY#OK }; fi
    return "$_dlock_rc"
}

# dlock_lock NAME [LEASE_MS]: wait for the lock (as long as it takes).
dlock_lock() {
    _dlock_take LOCK "dlock_lock NAME [LEASE_MS]" "$@"
}

# dlock_trylock NAME [WAIT_MS [LEASE_MS]]: 0 with the lock, 1 on TIMEOUT.
dlock_trylock() {
    _dlock_trytake TRYLOCK "dlock_trylock NAME [WAIT_MS [LEASE_MS]]" "$@"
}

# dlock_unlock NAME: drop one hold; DLOCK_HOLDS is what is left (0: free).
dlock_unlock() {
    _dlock_drop UNLOCK "dlock_unlock NAME" "$@"
}

# _dlock_mcheck NUMBERS USAGE N NAME... [NUMBER...]: N is 1-64, N distinct
# names follow, then at most as many numbers as NUMBERS names ("WAIT_MS
# LEASE_MS"). Words in a multi-lock request, as they go on the wire, in
# _dlock_mwords (a LEASE_MS in whole ms, as _dlock_lease makes it).
_dlock_mcheck() {
    _dlock_labels="$1 " _dlock_usage=$2 _dlock_mwords=${3-}
    shift 2
    case ${1-} in
    '' | *[!0-9]* | ???*) _dlock_mn=0 ;;
    *) _dlock_mn=$1 ;;
    esac
    if [ "$_dlock_mn" -lt 1 ] || [ "$_dlock_mn" -gt 64 ]; then
        DLOCK_REPLY="ERR ARGS a multi-lock takes 1 to 64 names"
        _dlock_err "bad number of names '${1-}' (1-64)"
        return 2
    fi
    shift
    case $_dlock_labels in
    ' ') _dlock_i=0 ;;
    *' '*' '*) _dlock_i=2 ;;
    *) _dlock_i=1 ;;
    esac
    _dlock_argc "$_dlock_mn" $((_dlock_mn + _dlock_i)) $# "$_dlock_usage" || return 2
    _dlock_seen=$_dlock_nl _dlock_i=0
    for _dlock_x in "$@"; do
        _dlock_i=$((_dlock_i + 1))
        if [ "$_dlock_i" -gt "$_dlock_mn" ]; then
            if [ "${_dlock_labels%% *}" = LEASE_MS ]; then
                _dlock_lease "$_dlock_x" || return 2
                _dlock_x=$_dlock_lease
            else
                _dlock_num "${_dlock_labels%% *}" "$_dlock_x" || return 2
            fi
            _dlock_mwords="$_dlock_mwords $_dlock_x"
            _dlock_labels=${_dlock_labels#* }
            continue
        fi
        _dlock_name "$_dlock_x" || return 2
        _dlock_mwords="$_dlock_mwords $_dlock_x"
        case $_dlock_seen in
        *"$_dlock_nl$_dlock_x$_dlock_nl"*)
            DLOCK_REPLY="ERR ARGS a name twice in one multi-lock"
            _dlock_err "lock '$_dlock_x' named twice"
            return 2
            ;;
        esac
        _dlock_seen="$_dlock_seen$_dlock_x$_dlock_nl"
    done
}

# dlock_mlock N NAME... [LEASE_MS]: wait for all N names (as long as it
# takes); DLOCK_FENCES is their fences in the order given.
dlock_mlock() {
    DLOCK_FENCES='' DLOCK_FENCE='' DLOCK_HOLDS=''
    _dlock_mcheck LEASE_MS "dlock_mlock N NAME... [LEASE_MS]" "$@" || return 2
    _dlock_rc=0
    _dlock_run MLOCK "$_dlock_mwords" || _dlock_rc=$?
    if [ "$_dlock_rc" -eq 0 ]; then DLOCK_FENCES=${DLOCK_REPLY#OK }; fi
    return "$_dlock_rc"
}

# dlock_trymlock N NAME... [WAIT_MS [LEASE_MS]]: 0 with all N names, 1 on
# TIMEOUT (holding none of them; DLOCK_TTL from the reply).
dlock_trymlock() {
    DLOCK_FENCES='' DLOCK_FENCE='' DLOCK_HOLDS='' DLOCK_TTL=''
    _dlock_mcheck "WAIT_MS LEASE_MS" "dlock_trymlock N NAME... [WAIT_MS [LEASE_MS]]" \
        "$@" || return 2
    _dlock_rc=0
    _dlock_run TRYMLOCK "$_dlock_mwords" || _dlock_rc=$?
    case $_dlock_rc in
    0) DLOCK_FENCES=${DLOCK_REPLY#OK } ;;
    1) DLOCK_TTL=${DLOCK_REPLY#TIMEOUT } ;;
    esac
    return "$_dlock_rc"
}

# dlock_munlock N NAME...: one hold less of each; DLOCK_HOLDS is the holds
# left, in the order given.
dlock_munlock() {
    DLOCK_HOLDS=''
    _dlock_mcheck "" "dlock_munlock N NAME..." "$@" || return 2
    _dlock_rc=0
    _dlock_run MUNLOCK "$@" || _dlock_rc=$?
    if [ "$_dlock_rc" -eq 0 ]; then DLOCK_HOLDS=${DLOCK_REPLY#OK }; fi
    return "$_dlock_rc"
}

# dlock_rlock NAME [LEASE_MS]: wait for a read hold (shared with readers).
dlock_rlock() {
    _dlock_take RLOCK "dlock_rlock NAME [LEASE_MS]" "$@"
}

# dlock_wlock NAME [LEASE_MS]: wait for a write hold (alone).
dlock_wlock() {
    _dlock_take WLOCK "dlock_wlock NAME [LEASE_MS]" "$@"
}

# dlock_tryrlock NAME [WAIT_MS [LEASE_MS]]: 0 with a read hold, 1 on TIMEOUT.
dlock_tryrlock() {
    _dlock_trytake TRYRLOCK "dlock_tryrlock NAME [WAIT_MS [LEASE_MS]]" "$@"
}

# dlock_trywlock NAME [WAIT_MS [LEASE_MS]]: 0 with a write hold, 1 on TIMEOUT.
dlock_trywlock() {
    _dlock_trytake TRYWLOCK "dlock_trywlock NAME [WAIT_MS [LEASE_MS]]" "$@"
}

# dlock_runlock NAME: drop one read hold; DLOCK_HOLDS is the read holds left.
dlock_runlock() {
    _dlock_drop RUNLOCK "dlock_runlock NAME" "$@"
}

# dlock_wunlock NAME: drop one write hold; DLOCK_HOLDS is the write holds left.
dlock_wunlock() {
    _dlock_drop WUNLOCK "dlock_wunlock NAME" "$@"
}

# dlock_fairlock NAME [LEASE_MS]: wait for a fair lock's turn (as long as it
# takes).
dlock_fairlock() {
    _dlock_take FAIRLOCK "dlock_fairlock NAME [LEASE_MS]" "$@"
}

# dlock_tryfairlock NAME [WAIT_MS [LEASE_MS]]: 0 with the fair lock, 1 on
# TIMEOUT (its place in the queue gone).
dlock_tryfairlock() {
    _dlock_trytake TRYFAIRLOCK "dlock_tryfairlock NAME [WAIT_MS [LEASE_MS]]" "$@"
}

# _dlock_semtake VERB USAGE NAME PERMITS [...]: ACQUIRE NAME PERMITS
# [LEASE_MS] or TRYACQUIRE NAME PERMITS [WAIT_MS [LEASE_MS]]; DLOCK_HOLDS is
# the permits held after the grant, DLOCK_TTL the TIMEOUT's.
_dlock_semtake() {
    DLOCK_HOLDS='' DLOCK_TTL=''
    _dlock_verb=$1 _dlock_usage=$2
    shift 2
    # How many words after PERMITS: WAIT_MS comes first in TRYACQUIRE's.
    if [ "$_dlock_verb" = TRYACQUIRE ]; then
        _dlock_max=4
    else
        _dlock_max=3
    fi
    _dlock_argc 2 "$_dlock_max" $# "$_dlock_usage" || return 2
    _dlock_name "$1" || return 2
    _dlock_num PERMITS "$2" || return 2
    if [ "$_dlock_verb" = ACQUIRE ] && [ $# -ge 3 ]; then
        _dlock_lease "$3" || return 2
        set -- "$1" "$2" "$_dlock_lease"
    elif [ $# -ge 3 ]; then
        _dlock_num WAIT_MS "$3" || return 2
    fi
    if [ $# -ge 4 ]; then
        _dlock_lease "$4" || return 2
        set -- "$1" "$2" "$3" "$_dlock_lease"
    fi
    _dlock_rc=0
    _dlock_run "$_dlock_verb" "$@" || _dlock_rc=$?
    case $_dlock_rc in
    0) DLOCK_HOLDS=${DLOCK_REPLY#OK } ;;
    1) DLOCK_TTL=${DLOCK_REPLY#TIMEOUT } ;;
    esac
    return "$_dlock_rc"
}

# dlock_seminit NAME PERMITS: DLOCK_SET is 1 when the permits were set now,
# 0 when the semaphore had them already (unchanged).
dlock_seminit() {
    DLOCK_SET=
    _dlock_argc 2 2 $# "dlock_seminit NAME PERMITS" || return 2
    _dlock_name "$1" || return 2
    _dlock_num PERMITS "$2" || return 2
    _dlock_rc=0
    _dlock_run SEMINIT "$@" || _dlock_rc=$?
    if [ "$_dlock_rc" -eq 0 ]; then DLOCK_SET=${DLOCK_REPLY#OK }; fi
    return "$_dlock_rc"
}

# dlock_acquire NAME PERMITS [LEASE_MS]: wait for PERMITS permits (as long
# as it takes); DLOCK_HOLDS is the permits this connection holds now.
dlock_acquire() {
    _dlock_semtake ACQUIRE "dlock_acquire NAME PERMITS [LEASE_MS]" "$@"
}

# dlock_tryacquire NAME PERMITS [WAIT_MS [LEASE_MS]]: 0 with the permits,
# 1 on TIMEOUT.
dlock_tryacquire() {
    _dlock_semtake TRYACQUIRE "dlock_tryacquire NAME PERMITS [WAIT_MS [LEASE_MS]]" "$@"
}

# dlock_release NAME PERMITS: give PERMITS back; DLOCK_HOLDS is what is
# still held.
dlock_release() {
    DLOCK_HOLDS=
    _dlock_argc 2 2 $# "dlock_release NAME PERMITS" || return 2
    _dlock_name "$1" || return 2
    _dlock_num PERMITS "$2" || return 2
    _dlock_rc=0
    _dlock_run RELEASE "$@" || _dlock_rc=$?
    if [ "$_dlock_rc" -eq 0 ]; then DLOCK_HOLDS=${DLOCK_REPLY#OK }; fi
    return "$_dlock_rc"
}

# dlock_latchset NAME COUNT: DLOCK_SET is 1 when the count was set now, 0
# when a latch of NAME existed (unchanged).
dlock_latchset() {
    DLOCK_SET=
    _dlock_argc 2 2 $# "dlock_latchset NAME COUNT" || return 2
    _dlock_name "$1" || return 2
    _dlock_num COUNT "$2" || return 2
    case $2 in
    *[1-9]*) ;;
    *)
        DLOCK_REPLY="ERR ARGS COUNT must be a number from 1 to 2147483647"
        _dlock_err "bad COUNT '$2'"
        return 2
        ;;
    esac
    _dlock_rc=0
    _dlock_run LATCHSET "$@" || _dlock_rc=$?
    if [ "$_dlock_rc" -eq 0 ]; then DLOCK_SET=${DLOCK_REPLY#OK }; fi
    return "$_dlock_rc"
}

# _dlock_latch VERB USAGE MAX NAME [WAIT_MS]: COUNTDOWN, LATCHCOUNT, AWAIT
# or TRYAWAIT; DLOCK_COUNT is the count of the OK or the TIMEOUT.
_dlock_latch() {
    DLOCK_COUNT=
    _dlock_verb=$1 _dlock_usage=$2 _dlock_max=$3
    shift 3
    _dlock_argc 1 "$_dlock_max" $# "$_dlock_usage" || return 2
    _dlock_name "$1" || return 2
    if [ $# -ge 2 ]; then _dlock_num WAIT_MS "$2" || return 2; fi
    _dlock_rc=0
    _dlock_run "$_dlock_verb" "$@" || _dlock_rc=$?
    case $_dlock_rc in
    0) DLOCK_COUNT=${DLOCK_REPLY#OK } ;;
    1) DLOCK_COUNT=${DLOCK_REPLY#TIMEOUT } ;;
    esac
    return "$_dlock_rc"
}

# dlock_countdown NAME: one less; DLOCK_COUNT is the count left.
dlock_countdown() {
    _dlock_latch COUNTDOWN "dlock_countdown NAME" 1 "$@"
}

# dlock_await NAME: wait (as long as it takes) until the latch's count is 0.
dlock_await() {
    _dlock_latch AWAIT "dlock_await NAME" 1 "$@"
}

# dlock_tryawait NAME [WAIT_MS]: 0 once the count is 0, 1 after WAIT_MS
# (default 0) with the count in DLOCK_COUNT.
dlock_tryawait() {
    _dlock_latch TRYAWAIT "dlock_tryawait NAME [WAIT_MS]" 2 "$@"
}

# dlock_latchcount NAME: DLOCK_COUNT is the count (0 when there is no latch).
dlock_latchcount() {
    _dlock_latch LATCHCOUNT "dlock_latchcount NAME" 1 "$@"
}

# dlock_renew NAME [LEASE_MS]: DLOCK_TTL is the new remaining lease.
dlock_renew() {
    DLOCK_TTL=
    _dlock_argc 1 2 $# "dlock_renew NAME [LEASE_MS]" || return 2
    _dlock_name "$1" || return 2
    if [ $# -ge 2 ]; then
        _dlock_lease "$2" || return 2
        set -- "$1" "$_dlock_lease"
    fi
    _dlock_rc=0
    _dlock_run RENEW "$@" || _dlock_rc=$?
    if [ "$_dlock_rc" -eq 0 ]; then DLOCK_TTL=${DLOCK_REPLY#OK }; fi
    return "$_dlock_rc"
}

# dlock_status NAME: DLOCK_STATE is FREE, MINE, TAKEN, READ, WRITE or SEM.
dlock_status() {
    DLOCK_STATE='' DLOCK_READERS='' DLOCK_AVAILABLE=
    _dlock_argc 1 1 $# "dlock_status NAME" || return 2
    _dlock_name "$1" || return 2
    _dlock_rc=0
    _dlock_run STATUS "$@" || _dlock_rc=$?
    if [ "$_dlock_rc" -ne 0 ]; then return "$_dlock_rc"; fi
    case $DLOCK_REPLY in
    "OK FREE") DLOCK_STATE=FREE ;;
    "OK MINE "*)
        DLOCK_STATE=MINE
        _dlock_x=${DLOCK_REPLY#OK MINE }
        DLOCK_HOLDS=${_dlock_x%% *}
        _dlock_x=${_dlock_x#* }
        DLOCK_TTL=${_dlock_x%% *}
        DLOCK_FENCE=${_dlock_x#* }
        ;;
    "OK TAKEN "*)
        DLOCK_STATE=TAKEN
        DLOCK_TTL=${DLOCK_REPLY#OK TAKEN }
        ;;
    "OK READ "* | "OK WRITE "*)
        # OK READ|WRITE <readers> <mine> <ttl_ms>
        _dlock_x=${DLOCK_REPLY#OK }
        DLOCK_STATE=${_dlock_x%% *}
        _dlock_x=${_dlock_x#* }
        DLOCK_READERS=${_dlock_x%% *}
        _dlock_x=${_dlock_x#* }
        DLOCK_HOLDS=${_dlock_x%% *}
        DLOCK_TTL=${_dlock_x#* }
        ;;
    "OK SEM "*)
        # OK SEM <available> <mine>
        DLOCK_STATE=SEM
        _dlock_x=${DLOCK_REPLY#OK SEM }
        DLOCK_AVAILABLE=${_dlock_x%% *}
        DLOCK_HOLDS=${_dlock_x#* }
        ;;
    *) DLOCK_STATE=${DLOCK_REPLY#OK } ;;
    esac
    return 0
}

# _dlock_set_leader WORDS: DLOCK_LEADER* from "FENCE VALUE" or "NONE".
_dlock_set_leader() {
    DLOCK_LEADER=$1
    case $1 in
    NONE) DLOCK_LEADER_FENCE='' DLOCK_LEADER_VALUE='' ;;
    *) DLOCK_LEADER_FENCE=${1%% *} DLOCK_LEADER_VALUE=${1#* } ;;
    esac
}

# dlock_elect NAME VALUE [LEASE_MS]: campaign; DLOCK_FENCE once leading.
dlock_elect() {
    DLOCK_FENCE=''
    _dlock_argc 2 3 $# "dlock_elect NAME VALUE [LEASE_MS]" || return 2
    _dlock_name "$1" || return 2
    case $2 in
    '' | *[![:graph:]]*) _dlock_x='' ;;
    *) if [ "${#2}" -le 255 ]; then _dlock_x=ok; else _dlock_x=''; fi ;;
    esac
    if [ -z "$_dlock_x" ]; then
        DLOCK_REPLY="ERR ARGS a leader's value is 1-255 printable characters without blanks"
        _dlock_err "bad leader value '$2'"
        return 2
    fi
    if [ $# -ge 3 ]; then
        _dlock_lease "$3" || return 2
        set -- "$1" "$2" "$_dlock_lease"
    fi
    _dlock_rc=0
    _dlock_run ELECT "$@" || _dlock_rc=$?
    if [ "$_dlock_rc" -eq 0 ]; then DLOCK_FENCE=${DLOCK_REPLY#OK }; fi
    return "$_dlock_rc"
}

# _dlock_yesno VERB USAGE NAME: RESIGN or UNOBSERVE; DLOCK_WAS is 1 or 0.
_dlock_yesno() {
    DLOCK_WAS=
    _dlock_verb=$1 _dlock_usage=$2
    shift 2
    _dlock_argc 1 1 $# "$_dlock_usage" || return 2
    _dlock_name "$1" || return 2
    _dlock_rc=0
    _dlock_run "$_dlock_verb" "$@" || _dlock_rc=$?
    if [ "$_dlock_rc" -eq 0 ]; then DLOCK_WAS=${DLOCK_REPLY#OK }; fi
    return "$_dlock_rc"
}

# dlock_resign NAME: DLOCK_WAS is 1 if it led or campaigned, else 0.
dlock_resign() {
    _dlock_yesno RESIGN "dlock_resign NAME" "$@"
}

# _dlock_ask VERB USAGE NAME: LEADER or OBSERVE, answered with the leader.
_dlock_ask() {
    DLOCK_LEADER='' DLOCK_LEADER_FENCE='' DLOCK_LEADER_VALUE=''
    _dlock_verb=$1 _dlock_usage=$2
    shift 2
    _dlock_argc 1 1 $# "$_dlock_usage" || return 2
    _dlock_name "$1" || return 2
    _dlock_rc=0
    _dlock_run "$_dlock_verb" "$@" || _dlock_rc=$?
    if [ "$_dlock_rc" -eq 0 ]; then
        DLOCK_LEADER_NAME=$1
        _dlock_set_leader "${DLOCK_REPLY#OK }"
    fi
    return "$_dlock_rc"
}

# dlock_leader NAME: DLOCK_LEADER is "FENCE VALUE" or NONE.
dlock_leader() {
    _dlock_ask LEADER "dlock_leader NAME" "$@"
}

# dlock_observe NAME: the leader now, as dlock_leader; changes follow as
# events, for dlock_leader_event and dlock_wait_leader.
dlock_observe() {
    _dlock_ask OBSERVE "dlock_observe NAME" "$@"
}

# dlock_unobserve NAME: DLOCK_WAS is 1 if NAME was observed.
dlock_unobserve() {
    _dlock_yesno UNOBSERVE "dlock_unobserve NAME" "$@"
}

# dlock_leader_event: the oldest leader change not yet taken (0), or 1.
# dlock_lost_event: the oldest loss not yet taken into DLOCK_LOST ("NAME
# REASON"), 0; 1 when none is left. DLOCK_LOST alone says the last loss
# read: losses of two names that came between two calls are both here.
dlock_lost_event() {
    if [ -z "$_dlock_losses" ]; then
        return 1
    fi
    DLOCK_LOST=${_dlock_losses%%"$_dlock_nl"*}
    _dlock_losses=${_dlock_losses#*"$_dlock_nl"}
    return 0
}

dlock_leader_event() {
    if [ -z "$_dlock_leaders" ]; then
        return 1
    fi
    _dlock_x=${_dlock_leaders%%"$_dlock_nl"*}
    _dlock_leaders=${_dlock_leaders#*"$_dlock_nl"}
    DLOCK_LEADER_NAME=${_dlock_x%% *}
    _dlock_set_leader "${_dlock_x#* }"
    return 0
}

# dlock_wait_leader: dlock_leader_event, reading from dlockd until a change
# comes. 3 when the connection is gone.
dlock_wait_leader() {
    if [ -z "$_dlock_pid" ]; then
        _dlock_err "not connected (call dlock_open first)"
        return 3
    fi
    while [ -z "$_dlock_leaders" ]; do
        if ! _dlock_readline; then
            _dlock_gone
            return 3
        fi
        case $_dlock_l in
        '!'*) _dlock_event "$_dlock_l" ;;
        esac
    done
    dlock_leader_event
}

# dlock_list [PATTERN [LIMIT]]: LIST; DLOCK_LIST (a line per lock),
# DLOCK_COUNT, DLOCK_MORE. The entry lines come right after "OK LIST <n>
# <more>" (no event between them): anything else there is a broken stream.
dlock_list() {
    DLOCK_LIST='' DLOCK_COUNT='' DLOCK_MORE=''
    _dlock_argc 0 2 $# "dlock_list [PATTERN [LIMIT]]" || return 2
    _dlock_pat=${1-*}
    case $_dlock_pat in
    '' | *[![:graph:]]*) _dlock_x='' ;;
    *) if [ "${#_dlock_pat}" -le 255 ]; then _dlock_x=ok; else _dlock_x=''; fi ;;
    esac
    if [ -z "$_dlock_x" ]; then
        DLOCK_REPLY="ERR ARGS a pattern is 1-255 printable characters without blanks"
        _dlock_err "bad pattern '$_dlock_pat'"
        return 2
    fi
    if [ $# -ge 2 ]; then
        _dlock_num LIMIT "$2" || return 2
        if [ "$2" -lt 1 ] || [ "$2" -gt 1000 ]; then
            DLOCK_REPLY="ERR ARGS LIMIT must be a number from 1 to 1000"
            _dlock_err "bad LIMIT '$2'"
            return 2
        fi
    fi
    _dlock_rc=0
    _dlock_run LIST "$_dlock_pat" ${2+"$2"} || _dlock_rc=$?
    if [ "$_dlock_rc" -ne 0 ]; then return "$_dlock_rc"; fi
    _dlock_x=${DLOCK_REPLY#OK LIST }
    DLOCK_COUNT=${_dlock_x%% *}
    DLOCK_MORE=${_dlock_x#* }
    case $DLOCK_REPLY:$DLOCK_COUNT:$DLOCK_MORE in
    "OK LIST "*:*[!0-9]*:* | "OK LIST "*::* | "OK LIST "*:?????*:*) _dlock_x='' ;;
    "OK LIST "*:*:0 | "OK LIST "*:*:1) _dlock_x=ok ;;
    *) _dlock_x='' ;;
    esac
    if [ -z "$_dlock_x" ]; then
        _dlock_err "bad LIST reply from dlockd: $DLOCK_REPLY"
        DLOCK_COUNT='' DLOCK_MORE=''
        _dlock_gone
        return 3
    fi
    _dlock_i=0
    while [ "$_dlock_i" -lt "$DLOCK_COUNT" ]; do
        if ! _dlock_readline; then
            DLOCK_LIST='' DLOCK_COUNT='' DLOCK_MORE=''
            _dlock_gone
            return 3
        fi
        case $_dlock_l in
        "= "*) DLOCK_LIST="$DLOCK_LIST${_dlock_l#= }$_dlock_nl" ;;
        *)
            _dlock_err "unexpected line in a LIST reply: $_dlock_l"
            DLOCK_LIST='' DLOCK_COUNT='' DLOCK_MORE=''
            _dlock_gone
            return 3
            ;;
        esac
        _dlock_i=$((_dlock_i + 1))
    done
    return 0
}

# dlock_close: QUIT (dlockd releases every lock of the connection), wait for
# socat, remove the temporary directory. Safe to call twice.
dlock_close() {
    if [ -z "$_dlock_pid" ]; then
        return 0
    fi
    _dlock_self
    if [ "$_dlock_me" != "$_dlock_owner" ]; then
        _dlock_err "dlock_close: the connection belongs to process $_dlock_owner, not to this subshell"
        return 2
    fi
    if _dlock_send QUIT; then
        # Wait for "OK BYE": once it is here dlockd has let go of the locks.
        while _dlock_readline "${DLOCK_IO_TIMEOUT:-5}"; do
            case $_dlock_l in
            '!'*) _dlock_event "$_dlock_l" ;;
            *) break ;;
            esac
        done
    fi
    _dlock_teardown
    return 0
}

# The EXIT trap set by dlock_open; only the process that opened closes.
_dlock_atexit() {
    if [ -n "$_dlock_pid" ]; then
        _dlock_self
        if [ "$_dlock_me" = "$_dlock_owner" ]; then
            dlock_close
        fi
    fi
}
