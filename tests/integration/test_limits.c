/* Resource attacks on the daemon: running out of descriptors, slow senders,
 * many idle connections. Each must leave everyone else served.
 * SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <signal.h>
#include <unistd.h>

#include "tests/support/harness.h"

/* Connections opened in the idle test; memory per idle connection allowed. */
#define IDLE_CONNS 2000
#define IDLE_BYTES_MAX 4096

static long proc_field(pid_t pid, const char *file, const char *key) {
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    long v = -1;
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, key, strlen(key)) == 0) v = atol(line + strlen(key));
    fclose(f);
    return v;
}

/* utime + stime of pid, in clock ticks. */
static long cpu_ticks(pid_t pid) {
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    long utime = 0, stime = 0;
    /* fields after ") ": state ppid pgrp session tty tpgid flags minflt cminflt
     * majflt cmajflt utime stime */
    ck_assert_int_eq(sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %ld %ld",
                            &utime, &stime), 2);
    return utime + stime;
}

static int raw_connect(const char *path) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

static void raise_nofile(void) {
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
}

START_TEST(out_of_descriptors_does_not_spin) {
    raise_nofile();
    int d = h_dlockd_start(NULL);
    /* Give the running daemon a small descriptor limit. */
    struct rlimit small = {48, 48};
    ck_assert_int_eq(prlimit(h_dlockd_pid(d), RLIMIT_NOFILE, &small, NULL), 0);

    int fds[200], n = 0;
    for (int i = 0; i < 200; i++) {
        fds[i] = raw_connect(h_dlockd_sock(d));
        if (fds[i] >= 0) n++;
    }
    ck_assert_int_gt(n, 100); /* the kernel queues them; the daemon cannot take all */
    pid_t pid = h_dlockd_pid(d);
    long t0 = cpu_ticks(pid);
    usleep(1000000); /* measuring CPU use over a second is the point here */
    long used = cpu_ticks(pid) - t0;
    long hz = sysconf(_SC_CLK_TCK);
    ck_assert_msg(used < hz / 2, "dlockd used %ld of %ld ticks while out of descriptors",
                  used, hz);
    /* It did run out: libuv accepted and closed what it could not keep. */
    int dropped = 0;
    for (int i = 0; i < 200; i++) {
        char b;
        if (fds[i] >= 0 && recv(fds[i], &b, 1, MSG_DONTWAIT) == 0) dropped++;
    }
    ck_assert_msg(dropped > 0, "no connection was refused under a limit of 48 descriptors");
    for (int i = 0; i < 200; i++)
        if (fds[i] >= 0) close(fds[i]);
    /* Descriptors come back: service as usual. */
    long long end = h_now_ms() + H_WAIT_MS;
    for (;;) {
        h_conn_t *c = h_connect_index(d);
        if (send(c->fd, "PING\n", 5, MSG_NOSIGNAL) == 5) {
            const char *r = h_recv(c, 1000);
            if (r != NULL && strcmp(r, "OK PONG") == 0) {
                h_close(c);
                break;
            }
        }
        h_close(c);
        ck_assert_msg(h_now_ms() < end, "no service after descriptors came back");
        usleep(20000);
    }
}
END_TEST

START_TEST(slow_sender_holds_nobody_up) {
    int d = h_dlockd_start(NULL);
    h_conn_t *slow = h_connect_index(d), *other = h_connect_index(d);
    const char *req = "PING\n";
    for (const char *p = req; *p; p++) {
        h_send_raw(slow, p, 1);
        /* While the slow line is unfinished, others are answered at once. */
        long long t0 = h_now_ms();
        h_send(other, "PING\n");
        H_EXPECT(other, "OK PONG");
        ck_assert_int_lt(h_now_ms() - t0, 1000);
        if (*p != '\n') ck_assert_ptr_null(h_recv(slow, 100));
    }
    H_EXPECT(slow, "OK PONG");
    h_close(slow);
    h_close(other);
}
END_TEST

START_TEST(idle_connections_cost_bounded_memory) {
    raise_nofile();
    int d = h_dlockd_start(NULL);
    pid_t pid = h_dlockd_pid(d);
    h_conn_t *probe = h_connect_index(d);
    h_send(probe, "PING\n");
    H_EXPECT(probe, "OK PONG");
    long before = proc_field(pid, "status", "VmRSS:");
    static int fds[IDLE_CONNS];
    for (int i = 0; i < IDLE_CONNS; i++) {
        fds[i] = raw_connect(h_dlockd_sock(d));
        ck_assert_msg(fds[i] >= 0, "connection %d: %s", i, strerror(errno));
    }
    /* All accepted (INFO counts them), then measure. */
    long long end = h_now_ms() + H_WAIT_MS;
    for (;;) {
        h_send(probe, "INFO\n");
        const char *l = h_recv(probe, H_WAIT_MS);
        ck_assert_ptr_nonnull(l);
        const char *p = strstr(l, " connections=");
        if (p && atol(p + 13) == IDLE_CONNS + 1) break;
        ck_assert_msg(h_now_ms() < end, "not all connections accepted: %s", l);
        usleep(5000);
    }
    long after = proc_field(pid, "status", "VmRSS:");
    long per = (after - before) * 1024 / IDLE_CONNS;
    fprintf(stderr, "idle connections: %ld bytes of RSS each\n", per);
    ck_assert_msg(per < IDLE_BYTES_MAX, "%ld bytes per idle connection", per);
    for (int i = 0; i < IDLE_CONNS; i++) close(fds[i]);
    h_send(probe, "PING\n");
    H_EXPECT(probe, "OK PONG");
    h_close(probe);
}
END_TEST

/* Pipelines this many PINGs behind a waiting LOCK: 5 bytes each, well past
 * the 64 KiB (SESSION_INBUF_MAX) after which the daemon stops reading. */
#define PIPELINED_PINGS 20000
/* Enough PINGs to fill the socket behind what the daemon reads before it
 * pauses (its input limit plus a read chunk): 500 kB. */
#define FLOOD_PINGS 100000

static long long info_num(h_conn_t *c, const char *key) {
    h_send(c, "INFO\n");
    const char *l = h_recv(c, H_WAIT_MS);
    ck_assert_ptr_nonnull(l);
    char pat[64];
    snprintf(pat, sizeof(pat), " %s=", key);
    const char *p = strstr(l, pat);
    return p ? atoll(p + strlen(pat)) : -1;
}

static void await_waiters(h_conn_t *adm, long long want) {
    long long end = h_now_ms() + H_WAIT_MS;
    while (info_num(adm, "waiters") != want) {
        ck_assert_msg(h_now_ms() < end, "never saw %lld waiters", want);
        usleep(2000);
    }
}

/* Writes count PINGs (at most FLOOD_PINGS) from a child, since the daemon
 * stops reading and the socket fills; returns the child's pid. */
static pid_t write_pings(int fd, size_t count) {
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        static char buf[FLOOD_PINGS * 5];
        size_t len = count * 5;
        for (size_t i = 0; i < len; i += 5) memcpy(buf + i, "PING\n", 5);
        size_t off = 0;
        while (off < len) {
            ssize_t n = send(fd, buf + off, len - off, MSG_NOSIGNAL);
            if (n <= 0) _exit(1);
            off += (size_t)n;
        }
        _exit(0);
    }
    return pid;
}

START_TEST(input_behind_a_wait_is_kept_in_order) {
    h_redis_start();
    int d = h_dlockd_start(NULL);
    h_conn_t *holder = h_connect_index(d), *w = h_connect_index(d), *adm = h_connect_index(d);
    h_send(holder, "LOCK x\n");
    ck_assert_msg(strncmp(h_recv(holder, H_WAIT_MS), "OK ", 3) == 0, "no grant");
    h_send(w, "LOCK x\n");
    await_waiters(adm, 1);
    pid_t writer = write_pings(w->fd, PIPELINED_PINGS);
    /* The daemon pauses reading past its input limit; the writer blocks. */
    h_send(holder, "UNLOCK x\n");
    const char *l = h_recv(w, H_WAIT_MS);
    ck_assert_msg(l && strncmp(l, "OK ", 3) == 0, "waiter got '%s'", l ? l : "");
    for (int i = 0; i < PIPELINED_PINGS; i++) {
        l = h_recv(w, H_WAIT_MS);
        ck_assert_msg(l && strcmp(l, "OK PONG") == 0, "PING %d answered '%s'", i, l ? l : "");
    }
    int status;
    waitpid(writer, &status, 0);
    ck_assert_int_eq(WEXITSTATUS(status), 0);
    h_close(w);
    h_close(holder);
    h_close(adm);
}
END_TEST

START_TEST(gone_while_not_read_is_noticed) {
    h_redis_start();
    int d = h_dlockd_start(NULL);
    h_conn_t *holder = h_connect_index(d), *w = h_connect_index(d), *adm = h_connect_index(d);
    h_send(holder, "LOCK x\n");
    ck_assert_msg(strncmp(h_recv(holder, H_WAIT_MS), "OK ", 3) == 0, "no grant");
    h_send(w, "LOCK mine\nLOCK x\n");
    ck_assert_msg(strncmp(h_recv(w, H_WAIT_MS), "OK ", 3) == 0, "no grant of mine");
    await_waiters(adm, 1);
    /* More than the daemon takes in before it pauses (SESSION_INBUF_MAX and
     * a read chunk): with only 100 kB, what was left in the socket could
     * stay below the mark below. */
    pid_t writer = write_pings(w->fd, FLOOD_PINGS);
    /* Wait until the daemon has stopped reading: our send queue fills. */
    long long end = h_now_ms() + H_WAIT_MS;
    for (;;) {
        int queued = 0;
        ck_assert_int_eq(ioctl(w->fd, SIOCOUTQ, &queued), 0);
        if (queued >= 32768) break;
        ck_assert_msg(h_now_ms() < end, "the daemon kept reading (%d bytes queued)", queued);
        usleep(2000);
    }
    kill(writer, SIGKILL);
    waitpid(writer, NULL, 0);
    h_close(w);
    /* Its wait ends and its lock goes, though nothing is read from it. */
    await_waiters(adm, 0);
    h_send(adm, "TRYLOCK mine 5000\n");
    const char *l = h_recv(adm, H_WAIT_MS);
    ck_assert_msg(l && strncmp(l, "OK ", 3) == 0, "mine still held: '%s'", l ? l : "");
    h_close(holder);
    h_close(adm);
}
END_TEST

/* Keys dlock:<prefix>0 .. <prefix>n-1 in Redis. */
static long long keys_held(const char *prefix, int n) {
    char cmd[512];
    size_t k = (size_t)snprintf(cmd, sizeof(cmd), "EXISTS");
    for (int i = 0; i < n; i++)
        k += (size_t)snprintf(cmd + k, sizeof(cmd) - k, " dlock:%s%d", prefix, i);
    return strtoll(h_redis_cli("%s", cmd), NULL, 10);
}

/* max_locks_per_uid is a bound on what one uid holds (issue 36, bug 5): an
 * MLOCK counts every name it would add, and six connections asking at
 * once (their acquires all in Redis together) are granted only the
 * limit's worth; the grants past it are released and answered ERR LIMIT.
 * Both were granted whole before. */
START_TEST(locks_per_uid_is_a_bound) {
    enum { CONNS = 6, LIMIT = 3 };
    h_redis_start();
    int d = h_dlockd_start("[server]\nmax_locks_per_uid = 3\n"
                           "[redis]\ncommand_timeout_ms = 15000\n");
    h_conn_t *m = h_connect_index(d), *adm = h_connect_index(d), *c[CONNS];
    h_send(m, "MLOCK 5 m0 m1 m2 m3 m4\n");
    const char *l = h_recv(m, H_WAIT_MS);
    ck_assert_msg(l != NULL && strcmp(l, "ERR LIMIT max_locks_per_uid reached") == 0,
                  "MLOCK of 5 names at a limit of 3: got '%s'", l ? l : "nothing");
    ck_assert_int_eq(keys_held("m", 5), 0);
    /* all six acquires in Redis at once: it runs none until every one is there */
    ck_assert_str_eq(h_redis_cli("CLIENT PAUSE 20000 WRITE"), "OK");
    for (int i = 0; i < CONNS; i++) {
        c[i] = h_connect_index(d);
        h_send(c[i], "LOCK p%d\n", i);
    }
    h_await_waiters(adm, CONNS);
    ck_assert_str_eq(h_redis_cli("CLIENT UNPAUSE"), "OK");
    int granted = 0, refused = 0;
    for (int i = 0; i < CONNS; i++) {
        l = h_recv(c[i], H_WAIT_MS);
        ck_assert_msg(l != NULL, "LOCK p%d: no reply", i);
        if (strncmp(l, "OK ", 3) == 0) granted++;
        else if (strcmp(l, "ERR LIMIT max_locks_per_uid reached") == 0) refused++;
        else ck_abort_msg("LOCK p%d: got '%s'", i, l);
    }
    ck_assert_int_eq(granted, LIMIT);
    ck_assert_int_eq(refused, CONNS - LIMIT);
    ck_assert_int_eq(h_info_value(adm, "locks_held"), LIMIT);
    long long end = h_now_ms() + H_WAIT_MS;
    while (keys_held("p", CONNS) != LIMIT) { /* the refused grants' releases */
        ck_assert_msg(h_now_ms() < end, "%lld of p0..p5 held in Redis, want %d",
                      keys_held("p", CONNS), LIMIT);
        usleep(10000);
    }
    for (int i = 0; i < CONNS; i++) h_close(c[i]);
    h_close(adm);
    h_close(m);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("limits");
    TCase *tc = tcase_create("limits");
    tcase_add_checked_fixture(tc, h_setup, h_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, out_of_descriptors_does_not_spin);
    tcase_add_test(tc, slow_sender_holds_nobody_up);
    tcase_add_test(tc, idle_connections_cost_bounded_memory);
    tcase_add_test(tc, input_behind_a_wait_is_kept_in_order);
    tcase_add_test(tc, gone_while_not_read_is_noticed);
    tcase_add_test(tc, locks_per_uid_is_a_bound);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return h_main(suite());
}
