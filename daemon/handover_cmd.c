/* Live restore: dlockd --upgrade, which asks the running dlockd to hand over and says how it went.
 * SPDX-License-Identifier: MIT */
#include "handover.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "daemon/handover_chan.h"

/* INFO from the dlockd on socket: its pid, upgrades and failures. 0, or -1. */
static int ask_info(const char *path, long *pid, unsigned long long *ups,
                    unsigned long long *fails) {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    char buf[4096];
    size_t len = 0;
    if (strlen(path) >= sizeof(sa.sun_path)) return -1;
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    /* A daemon handing over answers once it is done (or has given up). */
    struct timeval tv = {.tv_sec = HANDOVER_REQUEST_WAIT_MS / 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        chan_write_all(fd, "INFO\n", 5, chan_now_ms() + HANDOVER_REQUEST_WAIT_MS) != 0) {
        close(fd);
        return -1;
    }
    while (len + 1 < sizeof(buf)) {
        ssize_t n = read(fd, buf + len, sizeof(buf) - 1 - len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        len += (size_t)n;
        if (memchr(buf, '\n', len) != NULL) break;
    }
    close(fd);
    buf[len] = '\0';
    const char *p = strstr(buf, " pid="), *u = strstr(buf, " upgrades="),
               *f = strstr(buf, " upgrade_failures=");
    if (strncmp(buf, "OK ", 3) != 0 || p == NULL || u == NULL || f == NULL) return -1;
    *pid = strtol(p + 5, NULL, 10);
    *ups = strtoull(u + 10, NULL, 10);
    *fails = strtoull(f + 18, NULL, 10);
    return *pid > 0 ? 0 : -1;
}

int handover_request(const char *path) {
    long pid, npid = 0;
    unsigned long long ups, fails, nups = 0, nfails = 0;
    if (ask_info(path, &pid, &ups, &fails) != 0) {
        fprintf(stderr, "dlockd: no dlockd on %s says its pid in INFO (none runs, or one too "
                "old to hand over: restart it)\n", path);
        return 1;
    }
    if (kill((pid_t)pid, SIGUSR2) != 0) {
        fprintf(stderr, "dlockd: cannot signal pid %ld: %s\n", pid, strerror(errno));
        return 1;
    }
    uint64_t deadline = chan_now_ms() + HANDOVER_REQUEST_WAIT_MS;
    while (chan_now_ms() < deadline) {
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL); /* polls the daemon's answer: nothing to wait on */
        if (ask_info(path, &npid, &nups, &nfails) != 0) continue; /* frozen, or handing over */
        if (nups > ups) {
            printf("dlockd: pid %ld handed over to pid %ld\n", pid, npid);
            return 0;
        }
        if (nfails > fails) {
            fprintf(stderr, "dlockd: hand-over failed, pid %ld serves on; see its log\n", pid);
            return 1;
        }
    }
    fprintf(stderr, "dlockd: no outcome from pid %ld in %d ms; see its log\n", pid,
            HANDOVER_REQUEST_WAIT_MS);
    return 1;
}
