/* Integration tests of the server through its real socket: framing, replies,
 * limits, startup and shutdown.
 * SPDX-License-Identifier: MIT */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/support/harness.h"

/* The value of key=... in an INFO reply, or -1. */
static long long info_value(h_conn_t *c, const char *key) {
    h_send(c, "INFO\n");
    const char *line = h_recv(c, H_WAIT_MS);
    ck_assert_ptr_nonnull(line);
    ck_assert_msg(strncmp(line, "OK ", 3) == 0, "INFO said '%s'", line);
    char pat[64];
    snprintf(pat, sizeof(pat), " %s=", key);
    const char *p = strstr(line, pat);
    return p ? atoll(p + strlen(pat)) : -1;
}

START_TEST(ping_quit) {
    int d = h_dlockd_start(NULL);
    h_conn_t *c = h_connect_index(d);
    h_send(c, "PING\n");
    H_EXPECT(c, "OK PONG");
    h_send(c, "ping\r\n");
    H_EXPECT(c, "OK PONG");
    h_send(c, "QUIT\nPING\n");
    H_EXPECT(c, "OK BYE");
    ck_assert_int_eq(h_eof(c, H_WAIT_MS), 1);
    h_close(c);
}
END_TEST

START_TEST(info_fields) {
    int d = h_dlockd_start(NULL);
    h_conn_t *c = h_connect_index(d);
    h_conn_t *c2 = h_connect_index(d);
    h_send(c, "INFO\n");
    const char *line = h_recv(c, H_WAIT_MS);
    ck_assert_ptr_nonnull(line);
    const char *keys[] = {"OK version=", " uptime_s=", " connections=2 ", " locks_held=0 ",
                          " waiters=0 ", " redis=", " requests=", " errors="};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        ck_assert_msg(strstr(line, keys[i]) != NULL, "'%s' lacks '%s'", line, keys[i]);
    ck_assert_msg(strchr(line, '\r') == NULL, "INFO is one line");
    h_close(c2);
    h_close(c);
}
END_TEST

START_TEST(pipelining_in_order) {
    int d = h_dlockd_start(NULL);
    h_conn_t *c = h_connect_index(d);
    h_send(c, "PING\nBOGUS\n\n  \t \nLOCK\nPING\nINFO\nQUIT\n");
    H_EXPECT(c, "OK PONG");
    H_EXPECT_PREFIX(c, "ERR UNKNOWN ");
    H_EXPECT_PREFIX(c, "ERR ARGS ");
    H_EXPECT(c, "OK PONG");
    H_EXPECT_PREFIX(c, "OK version=");
    H_EXPECT(c, "OK BYE");
    ck_assert_int_eq(h_eof(c, H_WAIT_MS), 1);
    h_close(c);
}
END_TEST

START_TEST(split_writes) {
    int d = h_dlockd_start(NULL);
    h_conn_t *c = h_connect_index(d);
    const char *req = "PING\nSTATUS bad\x01name\n";
    for (const char *p = req; *p; p++) h_send_raw(c, p, 1);
    H_EXPECT(c, "OK PONG");
    H_EXPECT_PREFIX(c, "ERR NAME ");
    h_close(c);
}
END_TEST

START_TEST(toolong_closes) {
    int d = h_dlockd_start("[server]\nmax_line = 100\n");
    h_conn_t *c = h_connect_index(d);
    char line[200];
    memset(line, 'A', sizeof(line));
    h_send(c, "PING\n");
    h_send_raw(c, line, sizeof(line));
    H_EXPECT(c, "OK PONG");
    H_EXPECT_PREFIX(c, "ERR TOOLONG ");
    ck_assert_int_eq(h_eof(c, H_WAIT_MS), 1);
    h_close(c);
    /* A line of exactly max_line bytes is fine. */
    c = h_connect_index(d);
    char ok[101];
    memset(ok, ' ', 100);
    memcpy(ok + 96, "PING", 4);
    ok[100] = '\n';
    h_send_raw(c, ok, sizeof(ok));
    H_EXPECT(c, "OK PONG");
    h_close(c);
}
END_TEST

START_TEST(garbage_and_nul) {
    int d = h_dlockd_start(NULL);
    h_conn_t *c = h_connect_index(d);
    const char garbage[] = "\x00\x01\xff\xfe\n"
                           "LOCK a\x00b\n"
                           "PING\x00\n"
                           "TRYLOCK x -1\n"
                           "TRYLOCK x 99999999999\n"
                           "LOCK x 1 2\n";
    h_send_raw(c, garbage, sizeof(garbage) - 1);
    H_EXPECT_PREFIX(c, "ERR UNKNOWN ");
    H_EXPECT_PREFIX(c, "ERR NAME ");
    H_EXPECT_PREFIX(c, "ERR UNKNOWN ");
    H_EXPECT_PREFIX(c, "ERR ARGS ");
    H_EXPECT_PREFIX(c, "ERR ARGS ");
    H_EXPECT_PREFIX(c, "ERR ARGS ");
    h_send(c, "PING\n");
    H_EXPECT(c, "OK PONG");
    /* And another client was never disturbed. */
    h_conn_t *c2 = h_connect_index(d);
    h_send(c2, "PING\n");
    H_EXPECT(c2, "OK PONG");
    h_close(c2);
    h_close(c);
}
END_TEST

/* Connects until the daemon accepts (it may still count a connection that
 * just closed, such as the harness's readiness check). */
static h_conn_t *connect_accepted(int d) {
    long long end = h_now_ms() + H_WAIT_MS;
    for (;;) {
        h_conn_t *c = h_connect_index(d);
        /* A refused connection may be closed before PING gets there. */
        if (send(c->fd, "PING\n", 5, MSG_NOSIGNAL) != 5) {}
        const char *r = h_recv(c, H_WAIT_MS);
        if (r != NULL && strcmp(r, "OK PONG") == 0) return c;
        h_close(c);
        ck_assert_msg(h_now_ms() < end, "never accepted");
        usleep(10000);
    }
}

START_TEST(max_clients_limit) {
    int d = h_dlockd_start("[server]\nmax_clients = 2\n");
    h_conn_t *a = connect_accepted(d);
    h_conn_t *b = connect_accepted(d);
    h_conn_t *c = h_connect_index(d);
    H_EXPECT_PREFIX(c, "ERR LIMIT ");
    ck_assert_int_eq(h_eof(c, H_WAIT_MS), 1);
    h_close(c);
    /* A freed slot is usable again. */
    h_close(b);
    c = connect_accepted(d);
    ck_assert_int_eq(info_value(a, "rejected") >= 1, 1);
    h_close(c);
    h_close(a);
}
END_TEST

START_TEST(output_cap_closes_nonreader) {
    int d = h_dlockd_start("[server]\nmax_output = 4096\n");
    h_conn_t *c = h_connect_index(d);
    /* Ask for far more output than the socket buffers and the cap hold,
     * never reading. The daemon must cut us off rather than buffer it. */
    char req[5 * 1000];
    for (size_t i = 0; i < sizeof(req); i += 5) memcpy(req + i, "INFO\n", 5);
    long long end = h_now_ms() + H_WAIT_MS;
    int closed = 0;
    while (!closed && h_now_ms() < end) {
        ssize_t n = write(c->fd, req, sizeof(req));
        if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) closed = 1;
    }
    ck_assert_msg(closed, "daemon kept a client that does not read");
    h_close(c);
    h_conn_t *c2 = h_connect_index(d);
    ck_assert_int_eq(info_value(c2, "output_overflows"), 1);
    h_close(c2);
}
END_TEST

START_TEST(lock_without_redis_is_backend_error) {
    int d = h_dlockd_start(NULL); /* no redis-server was started */
    h_conn_t *c = h_connect_index(d);
    h_send(c, "LOCK a\n");
    H_EXPECT_PREFIX(c, "ERR BACKEND ");
    h_send(c, "PING\n");
    H_EXPECT(c, "OK PONG");
    h_close(c);
}
END_TEST

START_TEST(sigterm_exits_zero) {
    int d = h_dlockd_start(NULL);
    h_conn_t *c = h_connect_index(d);
    int status = h_dlockd_stop(d, SIGTERM);
    ck_assert_msg(status != -1 && WIFEXITED(status), "dlockd did not exit");
    ck_assert_int_eq(WEXITSTATUS(status), 0);
    ck_assert_int_eq(h_eof(c, H_WAIT_MS), 1);
    ck_assert_int_eq(access(h_dlockd_sock(d), F_OK), -1);
    h_close(c);
}
END_TEST

START_TEST(clients_for_admins_only) {
    int d = h_dlockd_start("[server]\nsocket_mode = 0666\nadmin_uids = 4242\n");
    h_conn_t *a = h_connect_index(d), *b = h_connect_index(d);
    /* The harness's readiness check may still be counted for a moment. */
    const char *l;
    long long end = h_now_ms() + H_WAIT_MS;
    for (;;) {
        h_send(a, "CLIENTS\n");
        l = h_recv(a, H_WAIT_MS);
        ck_assert_ptr_nonnull(l);
        if (strncmp(l, "OK clients=2 shown=2 ", 21) == 0) break;
        ck_assert_msg(h_now_ms() < end, "%s", l);
        usleep(2000);
    }
    char me[64];
    snprintf(me, sizeof(me), ":%d:0:0:0:", (int)getpid());
    ck_assert_msg(strstr(l, me) != NULL, "'%s' lacks this process (%s)", l, me);
    const char *r = h_request_as(d, 65534, "CLIENTS");
    ck_assert_msg(strncmp(r, "ERR DENIED ", 11) == 0, "uid 65534 got '%s'", r);
    h_close(b);
    h_close(a);
}
END_TEST

START_TEST(socket_mode_applied) {
    int d = h_dlockd_start("[server]\nsocket_mode = 0600\n");
    struct stat st;
    ck_assert_int_eq(stat(h_dlockd_sock(d), &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0600);
    /* With a group: that group, and the mode as asked. */
    int g = h_dlockd_start("[server]\nsocket_mode = 0660\nsocket_group = 4242\n");
    ck_assert_int_eq(stat(h_dlockd_sock(g), &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0660);
    ck_assert_int_eq(st.st_gid, 4242);
}
END_TEST

START_TEST(stale_socket_removed_live_refused) {
    int d = h_dlockd_start(NULL);
    /* A second daemon on the same live path must refuse to start. */
    char conf[1024];
    snprintf(conf, sizeof(conf), "[server]\nsocket = %s\n", h_dlockd_sock(d));
    char path[600];
    snprintf(path, sizeof(path), "%s/second.conf", h_dir());
    FILE *f = fopen(path, "w");
    fputs(conf, f);
    fclose(f);
    char cmd[2048];
    snprintf(cmd, sizeof(cmd), "%s -c %s 2>/dev/null", getenv("DLOCKD_BIN") ? getenv("DLOCKD_BIN") : "build/dlockd", path);
    int rc = system(cmd);
    ck_assert_int_eq(WEXITSTATUS(rc), 1);
    /* Killed hard, the daemon leaves its socket file; a new one takes it over. */
    h_dlockd_stop(d, SIGKILL);
    ck_assert_int_eq(access(h_dlockd_sock(d), F_OK), 0);
    int again = h_dlockd_start_at(h_dlockd_sock(d), NULL);
    h_conn_t *c = h_connect_index(again);
    h_send(c, "PING\n");
    H_EXPECT(c, "OK PONG");
    h_close(c);
}
END_TEST

static int run_t(const char *conf_text, char *out, size_t outlen) {
    char path[600], cmd[2048];
    snprintf(path, sizeof(path), "%s/t.conf", h_dir());
    FILE *f = fopen(path, "w");
    fputs(conf_text, f);
    fclose(f);
    snprintf(cmd, sizeof(cmd), "%s -t -c %s 2>&1", getenv("DLOCKD_BIN") ? getenv("DLOCKD_BIN") : "build/dlockd", path);
    FILE *p = popen(cmd, "r");
    out[0] = '\0';
    if (fgets(out, (int)outlen, p) == NULL) out[0] = '\0';
    int rc = pclose(p);
    return WEXITSTATUS(rc);
}

START_TEST(config_test_mode) {
    char out[1024], want[700];
    ck_assert_int_eq(run_t("[lock]\nlease_ms = 5000\n", out, sizeof(out)), 0);
    ck_assert_int_eq(run_t("[lock]\n\nlease_ms = 5x\n", out, sizeof(out)), 1);
    snprintf(want, sizeof(want), "%s/t.conf:3:", h_dir());
    ck_assert_msg(strstr(out, want) != NULL, "'%s' does not name %s", out, want);
    ck_assert_int_eq(run_t("[nosuch]\nkey = 1\n", out, sizeof(out)), 1);
    ck_assert_msg(strstr(out, "unknown section") != NULL, "%s", out);
    /* A missing -c file is an error. */
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "%s -t -c %s/none.conf 2>/dev/null",
             getenv("DLOCKD_BIN") ? getenv("DLOCKD_BIN") : "build/dlockd", h_dir());
    ck_assert_int_eq(WEXITSTATUS(system(cmd)), 1);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("server");
    TCase *tc = tcase_create("socket");
    tcase_add_checked_fixture(tc, h_setup, h_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, ping_quit);
    tcase_add_test(tc, info_fields);
    tcase_add_test(tc, pipelining_in_order);
    tcase_add_test(tc, split_writes);
    tcase_add_test(tc, toolong_closes);
    tcase_add_test(tc, garbage_and_nul);
    tcase_add_test(tc, max_clients_limit);
    tcase_add_test(tc, output_cap_closes_nonreader);
    tcase_add_test(tc, lock_without_redis_is_backend_error);
    tcase_add_test(tc, sigterm_exits_zero);
    tcase_add_test(tc, socket_mode_applied);
    tcase_add_test(tc, clients_for_admins_only);
    tcase_add_test(tc, stale_socket_removed_live_refused);
    tcase_add_test(tc, config_test_mode);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return h_main(suite());
}
