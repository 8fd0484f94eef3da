#!/bin/sh
# make package-test: builds the Debian packages (make deb), installs them on
# this machine with dpkg -i, checks what they installed, runs the installed
# daemon with a client holding a lock and a dlock command under another,
# upgrades dlockd's package and checks that postinst handed the daemon over
# (issue 39: nothing lost), then purges them and checks that nothing of them
# is left. Needs root, dpkg and redis-server; the machine needs no running
# systemd (none is started). Cleans up on failure too.
# SPDX-License-Identifier: MIT
#
# Environment: BUILD (make's build dir, default build), DEB_DIR (default
# $BUILD/deb), MAKE (default make), DLOCKD_PACKAGE_TEST=skip to skip.
set -eu

cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
DEB_DIR=${DEB_DIR:-$BUILD/deb}
MAKE=${MAKE:-make}
PKGS="dlockd dlock libdlock0 libdlock-dev python3-dlock"
CONF=/etc/dlockd/dlockd.conf

pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok   $1"; }
nok() { fail=$((fail + 1)); echo "FAIL $1"; }
check() { # check DESCRIPTION COMMAND...
    d=$1; shift
    if "$@" >"$T/out" 2>&1; then ok "$d"; else nok "$d"; sed 's/^/     /' "$T/out" | tail -n 20; fi
}
skip() { echo "package-test: skipped: $1"; echo "0 passed, 0 failed, 1 skipped"; exit 0; }

[ "${DLOCKD_PACKAGE_TEST:-}" = skip ] && skip "DLOCKD_PACKAGE_TEST=skip"
command -v dpkg >/dev/null 2>&1 || skip "no dpkg (not a Debian machine)"
[ "$(id -u)" = 0 ] || skip "dpkg -i needs root (run make package-test as root)"

# Never replace or purge an installation that this test did not make.
for p in $PKGS; do
    if dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null | grep -qv '^not-installed$'; then
        echo "package-test: $p is already on this machine (not installed by this test);" \
             "it is left alone: dpkg --purge it, or set DLOCKD_PACKAGE_TEST=skip" >&2
        echo "0 passed, 1 failed"
        exit 1
    fi
done

T=$(mktemp -d /tmp/dlockd-pkgtest.XXXXXX)
user_before=0; getent passwd dlockd >/dev/null && user_before=1
group_before=0; getent group dlockd >/dev/null && group_before=1
run_before=0; [ -e /run/dlockd ] && run_before=1

cleanup() {
    rc=$?
    trap - EXIT INT TERM
    up_stop
    # Whatever happened, take the packages off again.
    installed=""
    for p in $PKGS; do
        if dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null | grep -qv '^not-installed$'; then
            installed="$installed $p"
        fi
    done
    if [ -n "$installed" ]; then
        echo "cleanup: dpkg --purge$installed"
        dpkg --purge $installed >"$T/cleanup-purge.log" 2>&1 || cat "$T/cleanup-purge.log"
    fi
    # Debian leaves a package's system user behind on purge; this test made
    # the user, so it takes it away again.
    if [ "$user_before" = 0 ] && getent passwd dlockd >/dev/null; then userdel dlockd 2>/dev/null || true; fi
    if [ "$group_before" = 0 ] && getent group dlockd >/dev/null; then groupdel dlockd 2>/dev/null || true; fi
    if [ "$run_before" = 0 ] && [ -d /run/dlockd ]; then rmdir /run/dlockd 2>/dev/null || true; fi
    rm -rf "$T"
    exit "$rc"
}
# The processes of the upgrade test (6.), stopped by cleanup whatever
# happened: its redis-server, the first daemon and whatever daemon serves
# on the socket now (a hand-over's new one), the client and the dlock
# command. Each by its pid.
rpid='' dpid='' newpid='' hpid='' cpid=''
SOCK=/run/dlockd/dlockd.sock
# gone PID: no such process, or a zombie that nobody reaped yet.
gone() { [ ! -e "/proc/$1" ] || [ "$(sed 's/.*) //; s/ .*//' "/proc/$1/stat" 2>/dev/null)" = Z ]; }
# wait_for SECONDS COMMAND...: runs COMMAND every 0.1 s until it succeeds;
# fails after SECONDS.
wait_for() {
    w_end=$(($(date +%s) + $1)); shift
    until "$@" >/dev/null 2>&1; do
        [ "$(date +%s)" -lt "$w_end" ] || return 1
        sleep 0.1
    done
}
# The value of KEY in the INFO of the daemon on $SOCK ("" if none answers).
info() { /usr/bin/dlock -S "$SOCK" --info 2>/dev/null | tr ' ' '\n' | sed -n "s/^$1=//p"; }
# stop PID...: SIGTERM, then SIGKILL what is not gone within 20 s.
stop() {
    for p in "$@"; do gone "$p" || kill -TERM "$p" 2>/dev/null || true; done
    for p in "$@"; do wait_for 20 gone "$p" || kill -KILL "$p" 2>/dev/null || true; done
}
up_stop() {
    [ -n "$dpid" ] || return 0
    daemons="$dpid $newpid $(pgrep -P "$dpid" 2>/dev/null || true)"
    [ -x /usr/bin/dlock ] && daemons="$daemons $(info pid)"
    # The daemons first, while Redis still answers their releases.
    stop $daemons
    [ -z "$hpid$cpid" ] || stop $hpid $cpid
    [ -z "$rpid" ] || stop "$rpid"
    dpid=
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# 1. Build.
start=$(date +%s)
if "$MAKE" --no-print-directory BUILD="$BUILD" DEB_DIR="$DEB_DIR" deb >"$T/make-deb.log" 2>&1; then
    ok "make deb ($(($(date +%s) - start)) s)"
else
    nok "make deb"; tail -n 40 "$T/make-deb.log"; echo "$pass passed, $fail failed"; exit 1
fi
version=$(sed -n 's/^VERSION *:= *//p' Makefile)
debs=""
for p in $PKGS; do
    f=$(ls "$DEB_DIR"/"${p}"_*.deb 2>/dev/null | head -n 1)
    if [ -n "$f" ]; then debs="$debs $f"; else nok "$DEB_DIR has ${p}_*.deb"; fi
done
check "debian/changelog's version is the Makefile's ($version)" \
    sh -c "dpkg-deb -f $(ls "$DEB_DIR"/dlockd_*.deb | head -n 1) Version | grep -qx '$version'"

# 2. Lintian: no errors (warnings are printed).
if command -v lintian >/dev/null 2>&1; then
    lintian --tag-display-limit 0 $debs >"$T/lintian.log" 2>&1 || true
    grep -E '^[EWI]: ' "$T/lintian.log" | sed 's/^/     lintian: /' || true
    check "lintian reports no errors" sh -c "! grep -q '^E: ' '$T/lintian.log'"
else
    nok "lintian is installed (make deps-deb)"
fi

# Every path the packages hold, and which of them existed before.
for f in $debs; do dpkg-deb --fsys-tarfile "$f" | tar -tf - ; done | sed 's|^\./|/|; s|/$||' |
    grep -v '^$' | grep -v '^/$' | sort -u >"$T/paths"
: >"$T/new-paths"
while read -r path; do
    [ -e "$path" ] || [ -L "$path" ] || echo "$path" >>"$T/new-paths"
done <"$T/paths"

check "the packages hold $(wc -l <"$T/paths") paths, $(wc -l <"$T/new-paths") of them new here" \
    test -s "$T/new-paths"

# 3. Install.
if dpkg -i $debs >"$T/dpkg-i.log" 2>&1; then ok "dpkg -i$(for f in $debs; do printf ' %s' "${f##*/}"; done)"
else nok "dpkg -i"; cat "$T/dpkg-i.log"; echo "$pass passed, $fail failed"; exit 1; fi
for p in $PKGS; do
    check "dpkg -s $p: installed" sh -c "dpkg-query -W -f='\${db:Status-Status}' $p | grep -qx installed"
done

# 4. What dpkg -L says each package has.
listed() { # listed PACKAGE PATH...
    p=$1; shift
    dpkg -L "$p" >"$T/list-$p"
    for path in "$@"; do grep -qx "$path" "$T/list-$p" || { echo "$path not in dpkg -L $p"; return 1; }; done
}
unit=$(dpkg -L dlockd | grep '/systemd/system/dlockd.service$' | head -n 1)
ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
check "dpkg -L dlockd" listed dlockd /usr/sbin/dlockd "$CONF" /usr/lib/sysusers.d/dlockd.conf \
    /usr/lib/tmpfiles.d/dlockd.conf /usr/share/man/man8/dlockd.8.gz \
    /usr/share/man/man5/dlockd.conf.5.gz /usr/share/doc/dlockd/copyright
check "dpkg -L dlockd: the unit in systemd's unit directory ($unit)" \
    sh -c "[ '$unit' = \"\$(pkg-config --variable=systemdsystemunitdir systemd)/dlockd.service\" ]"
check "dpkg -L dlock" listed dlock /usr/bin/dlock /usr/share/man/man1/dlock.1.gz /usr/share/dlock/dlock.sh
check "dpkg -L libdlock0" listed libdlock0 "/usr/lib/$ma/libdlock.so.0"
check "dpkg -L libdlock-dev" listed libdlock-dev /usr/include/dlock.h "/usr/lib/$ma/libdlock.so" \
    "/usr/lib/$ma/libdlock.a" "/usr/lib/$ma/pkgconfig/dlock.pc"
check "dpkg -L python3-dlock" listed python3-dlock /usr/lib/python3/dist-packages/dlock.py \
    /usr/lib/python3/dist-packages/dlock_asyncio.py
check "$CONF is a conffile of dlockd" sh -c "dpkg-query -W -f='\${Conffiles}' dlockd | grep -q ' $CONF '"

# 5. The installed things work.
check "the unit runs the installed daemon" grep -qx 'ExecStart=/usr/sbin/dlockd -c /etc/dlockd/dlockd.conf' "$unit"
check "user and group dlockd exist (systemd-sysusers in postinst)" \
    sh -c 'getent passwd dlockd && getent group dlockd'
check "$CONF is root:dlockd 0640" sh -c "[ \"\$(stat -c '%U:%G %a' $CONF)\" = 'root:dlockd 640' ]"
check "/usr/sbin/dlockd -t -c $CONF" /usr/sbin/dlockd -t -c "$CONF"
check "/usr/sbin/dlockd --version says $version" sh -c "/usr/sbin/dlockd --version | grep -q '$version'"
check "/usr/bin/dlock --help" /usr/bin/dlock --help
check "/usr/bin/dlock links no libdlock.so (static)" sh -c '! ldd /usr/bin/dlock | grep -q libdlock'
check "python3 -c 'import dlock' (from dist-packages)" \
    sh -c "cd / && /usr/bin/python3 -I -c 'import dlock, sys; sys.exit(dlock.__file__ != \"/usr/lib/python3/dist-packages/dlock.py\")'"
check "python3 -c 'import dlock_asyncio' (from dist-packages)" \
    sh -c "cd / && /usr/bin/python3 -I -c 'import dlock_asyncio'"
cat >"$T/app.c" <<'EOF'
#include <dlock.h>
#include <stdio.h>
int main(void) { printf("%s\n", dlock_strerror(DLOCK_ETIMEOUT)); return 0; }
EOF
check "cc \$(pkg-config --cflags --libs dlock) links libdlock.so.0 and runs" \
    sh -c "cc -o '$T/app' '$T/app.c' \$(pkg-config --cflags --libs dlock) && ldd '$T/app' | grep -q 'libdlock.so.0 => [/a-z]*/lib/$ma/libdlock.so.0' && '$T/app'"
check "dlock.sh can be sourced" sh -c '. /usr/share/dlock/dlock.sh && command -v dlock_open'

# 6. An upgrade of dlockd's package hands the running daemon over (issue
# 39). The installed daemon runs by hand, as user dlockd, on the
# configuration's socket (no systemd here: postinst's path "the
# configuration's socket is there"), with a Redis of its own; a client
# holds a lock and a dlock command runs under another. The upgrade is the
# same .deb with a higher version (dpkg-deb -R, Version changed, dpkg-deb
# -b: no second build); dpkg replaces every file, so the daemon's path names
# a new file, as in a real upgrade. postinst must hand over: a new pid
# serving from the new file, upgrades=1, the client's hold and fence kept,
# the command still running, and exiting 0 when it ends.
U=$T/up
HOLD=pkgtest-held
CMDLOCK=pkgtest-cmd
TAB=$(printf '\t')
newversion="$version+handover1"
mkdir "$U"
chmod 0711 "$T" # user dlockd reaches Redis's socket in $U
cat >"$U/holder.py" <<'EOF'
# One connection holding a lock across the upgrade: LOCK, then (on SIGUSR1)
# STATUS and UNLOCK. Writes "REQUEST<TAB>LINE" for every line the daemon
# sends (an event, as !LOST, too) to OUT.
import signal, socket, sys

path, name, out = sys.argv[1:]
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1])
s = socket.socket(socket.AF_UNIX)
s.settimeout(60)
s.connect(path)
r = s.makefile("r", encoding="ascii", newline="\n")
log = open(out, "w")


def ask(line):
    s.sendall(line.encode() + b"\n")
    while True:
        reply = r.readline()
        log.write("%s\t%s" % (line, reply or "EOF\n"))
        log.flush()
        if not reply:
            sys.exit(1)
        if not reply.startswith("!"):
            return


ask("LOCK " + name)
if signal.sigtimedwait([signal.SIGUSR1], 600) is None:
    sys.exit(2)
ask("STATUS " + name)
ask("UNLOCK " + name)
EOF
redis_up() { [ "$(info redis)" = up ]; }
holding() { grep -q "^LOCK $HOLD${TAB}OK " "$U/holder.out"; }
cmd_holds() {
    ! gone "$cpid" && /usr/bin/dlock -S "$SOCK" --who "$CMDLOCK" | grep -q "^OK HELD [0-9]* [^ ]* [^ ]* $cpid "
}

upgrade_test() {
    if [ -e "$SOCK" ]; then
        nok "no daemon on $SOCK before the upgrade test (something is there: left alone)"
        return 1
    fi
    redis-server --port 0 --unixsocket "$U/redis.sock" --unixsocketperm 777 --save '' \
        --appendonly no --dir "$U" --logfile "$U/redis.log" &
    rpid=$!
    if ! wait_for 30 redis-cli -s "$U/redis.sock" ping; then
        nok "redis-server answers on $U/redis.sock"; cat "$U/redis.log"; return 1
    fi
    setpriv --reuid=dlockd --regid=dlockd --init-groups \
        /usr/sbin/dlockd -c "$CONF" -r "unix://$U/redis.sock" >"$U/dlockd.log" 2>&1 &
    dpid=$!
    if wait_for 30 redis_up; then ok "/usr/sbin/dlockd -c $CONF runs as user dlockd (pid $dpid) on $SOCK"
    else nok "/usr/sbin/dlockd -c $CONF answers on $SOCK with Redis up"; cat "$U/dlockd.log"; return 1; fi

    python3 -I "$U/holder.py" "$SOCK" "$HOLD" "$U/holder.out" &
    hpid=$!
    if ! wait_for 30 holding; then nok "a client holds $HOLD"; cat "$U/holder.out"; return 1; fi
    fence=$(sed -n "s/^LOCK $HOLD${TAB}OK \([0-9]*\) 1\$/\1/p" "$U/holder.out")
    ok "a client holds $HOLD (fence $fence)"
    mkfifo "$U/cmd.go"
    /usr/bin/dlock -S "$SOCK" "$CMDLOCK" \
        sh -c 'echo "$DLOCK_FENCE" >"$1/cmd.fence"; read -r x <"$1/cmd.go"; exit 0' sh "$U" \
        >"$U/dlock.out" 2>&1 &
    cpid=$!
    if ! wait_for 30 test -s "$U/cmd.fence"; then nok "dlock $CMDLOCK runs its command"; cat "$U/dlock.out"; return 1; fi
    ok "dlock $CMDLOCK runs its command (fence $(cat "$U/cmd.fence"), dlock pid $cpid)"
    check "INFO before: pid=$dpid upgrades=0" sh -c "[ '$(info pid)' = '$dpid' ] && [ '$(info upgrades)' = 0 ]"
    ino=$(stat -c %i /usr/sbin/dlockd)

    deb=$(ls "$DEB_DIR"/dlockd_*.deb | head -n 1)
    newdeb="$U/dlockd_${newversion}_$(dpkg-deb -f "$deb" Architecture).deb"
    if dpkg-deb -R "$deb" "$U/pkg" && sed -i "s/^Version: .*/Version: $newversion/" "$U/pkg/DEBIAN/control" &&
        dpkg-deb --root-owner-group -b "$U/pkg" "$newdeb" >/dev/null; then
        ok "dlockd $newversion: ${deb##*/} repacked with a higher version"
    else nok "dpkg-deb: repack ${deb##*/} as $newversion"; return 1; fi

    start=$(date +%s)
    if dpkg -i "$newdeb" >"$U/dpkg-up.log" 2>&1; then ok "dpkg -i ${newdeb##*/} ($(($(date +%s) - start)) s)"
    else nok "dpkg -i ${newdeb##*/}"; cat "$U/dpkg-up.log"; return 1; fi
    sed 's/^/     dpkg: /' "$U/dpkg-up.log" | grep -i 'dlockd:' || true
    check "dpkg -s dlockd: $newversion" sh -c "dpkg-query -W -f='\${Version}' dlockd | grep -qx '$newversion'"
    check "postinst handed over: 'dlockd: pid $dpid handed over to pid ...'" \
        grep -q "pid $dpid handed over to pid [0-9]" "$U/dpkg-up.log"
    newpid=$(info pid)
    check "INFO after: a new pid ($newpid), upgrades=1, upgrade_failures=0 (upgrade_ms=$(info upgrade_ms), upgrade_state_bytes=$(info upgrade_state_bytes))" \
        sh -c "[ -n '$newpid' ] && [ '$newpid' != '$dpid' ] && [ '$(info upgrades)' = 1 ] && [ '$(info upgrade_failures)' = 0 ]"
    check "INFO after: version=$version (the binary's; the repack changed the package's)" \
        sh -c "[ '$(info version)' = '$version' ]"
    check "pid $newpid runs the new /usr/sbin/dlockd (inode $ino replaced by dpkg)" \
        sh -c "[ \"\$(stat -c %i /usr/sbin/dlockd)\" != '$ino' ] && [ \"\$(stat -L -c %i /proc/$newpid/exe)\" = \"\$(stat -c %i /usr/sbin/dlockd)\" ]"
    check "its log: 'upgrade: took over from pid $dpid'" grep -q "upgrade: took over from pid $dpid" "$U/dlockd.log"
    grep 'upgrade' "$U/dlockd.log" | sed 's/^/     dlockd: /'
    if [ -z "$newpid" ] || [ "$newpid" = "$dpid" ]; then
        nok "the old daemon (pid $dpid) exits after the hand-over (it serves on)"
    elif wait_for 30 gone "$dpid"; then
        rc=0; wait "$dpid" || rc=$?
        check "the old daemon (pid $dpid) exited 0" test "$rc" = 0
    else nok "the old daemon (pid $dpid) exits after the hand-over"; fi

    kill -USR1 "$hpid"
    rc=0; wait "$hpid" || rc=$?; hpid=
    check "the client's connection stayed open, no event (!LOST) came" \
        sh -c "[ $rc = 0 ] && ! grep -q '${TAB}!' '$U/holder.out' && ! grep -q '${TAB}EOF' '$U/holder.out'"
    check "STATUS $HOLD after: OK MINE 1 <ttl> $fence (the same hold and fence)" \
        grep -q "^STATUS $HOLD${TAB}OK MINE 1 [0-9]* $fence\$" "$U/holder.out"
    check "UNLOCK $HOLD after: OK 0" grep -qx "UNLOCK $HOLD${TAB}OK 0" "$U/holder.out"
    [ $fail = 0 ] || sed 's/^/     /' "$U/holder.out"

    check "dlock $CMDLOCK still runs, and holds it: WHO names its pid $cpid" cmd_holds
    if timeout 30 sh -c 'echo done >"$1"' sh "$U/cmd.go"; then
        rc=0; wait "$cpid" || rc=$?; cpid=
        check "dlock $CMDLOCK exits 0 when its command ends (79: the lock was lost)" test "$rc" = 0
    else nok "dlock $CMDLOCK's command reads $U/cmd.go"; fi
    [ -z "$cpid" ] || sed 's/^/     dlock: /' "$U/dlock.out"
    check "$CMDLOCK is free after" sh -c "/usr/bin/dlock -S '$SOCK' --status '$CMDLOCK' | grep -qx 'OK FREE'"

    stop "${newpid:-$dpid}"
    check "the daemon (pid ${newpid:-$dpid}) stops on SIGTERM and takes its socket away" \
        sh -c "! [ -e '$SOCK' ]"
    [ $fail = 0 ] || sed 's/^/     dlockd: /' "$U/dlockd.log"
}
upgrade_test || true
up_stop

# 7. Purge, and nothing of the packages is left.
if dpkg --purge $PKGS >"$T/purge.log" 2>&1; then ok "dpkg --purge $PKGS"
else nok "dpkg --purge"; cat "$T/purge.log"; fi
for p in $PKGS; do
    check "dpkg -s $p: not installed" sh -c "! dpkg-query -W -f='\${db:Status-Status}' $p 2>/dev/null | grep -qv '^not-installed\$'"
done
: >"$T/left"
while read -r path; do
    if [ -e "$path" ] || [ -L "$path" ]; then echo "$path" >>"$T/left"; fi
done <"$T/new-paths"
for path in /etc/dlockd /run/dlockd /etc/systemd/system/multi-user.target.wants/dlockd.service \
    /var/lib/systemd/deb-systemd-helper-enabled/dlockd.service \
    /var/lib/systemd/deb-systemd-helper-enabled/multi-user.target.wants/dlockd.service; do
    if [ "$path" = /run/dlockd ] && [ "$run_before" = 1 ]; then continue; fi
    if [ -e "$path" ] || [ -L "$path" ]; then echo "$path" >>"$T/left"; fi
done
ls /usr/lib/python3/dist-packages/__pycache__/dlock.* >>"$T/left" 2>/dev/null || true
check "nothing the packages installed or made is left" sh -c "! [ -s '$T/left' ] || { cat '$T/left'; false; }"
if [ "$user_before" = 0 ]; then
    # Debian policy: a package's system user may own files elsewhere, so it
    # stays after purge (cleanup removes it, as this test made it).
    check "user dlockd stays after purge (Debian's practice)" getent passwd dlockd
fi

echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
