/* Resource attacks on the daemon: running out of descriptors, slow senders,
 * many idle connections. Each must leave everyone else served.
 * SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
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

static Suite *suite(void) {
    Suite *s = suite_create("limits");
    TCase *tc = tcase_create("limits");
    tcase_add_checked_fixture(tc, h_setup, h_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, out_of_descriptors_does_not_spin);
    tcase_add_test(tc, slow_sender_holds_nobody_up);
    tcase_add_test(tc, idle_connections_cost_bounded_memory);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return h_main(suite());
}
