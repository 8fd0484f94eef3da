#!/bin/sh
# make package-test: builds the Debian packages (make deb), installs them on
# this machine with dpkg -i, checks what they installed, then purges them and
# checks that nothing of them is left. Needs root and dpkg; the machine needs
# no running systemd (none is started). Cleans up on failure too.
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

# 6. Purge, and nothing of the packages is left.
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
