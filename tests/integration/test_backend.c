/* Integration tests of dlockd's way to Redis: TLS, refused ports, host names, client names.
 * SPDX-License-Identifier: MIT
 *
 * Real redis-servers on private TCP ports (TLS-only ones with certificates
 * made at test time by the openssl command) and the real dlockd. */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/support/harness.h"

/* The first line redis-cli prints for a command to server r (static). */
static const char *rcli(int r, const char *command) {
    static char line[4096];
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "redis-cli -s %s %s", h_redis_sock_index(r), command);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    if (fgets(line, sizeof(line), p) == NULL) line[0] = '\0';
    line[strcspn(line, "\n")] = '\0';
    pclose(p);
    return line;
}

/* Sends LOCK until the ERR BACKEND reply mentions text; returns that reply
 * (static). Redis is never reachable in the tests that use this. */
static const char *await_backend_error(int index, const char *name, const char *text) {
    static char got[H_LINE_MAX];
    long long end = h_now_ms() + H_WAIT_MS;
    h_conn_t *c = h_connect_index(index);
    for (;;) {
        h_send(c, "LOCK %s\n", name);
        const char *line = h_recv(c, H_WAIT_MS);
        ck_assert_msg(line != NULL, "no reply to LOCK");
        ck_assert_msg(strncmp(line, "ERR BACKEND ", 12) == 0, "not ERR BACKEND: '%s'", line);
        snprintf(got, sizeof(got), "%s", line);
        if (strstr(line, text) != NULL) break;
        ck_assert_msg(h_now_ms() < end, "ERR BACKEND never said '%s'; last: '%s'", text, got);
        usleep(10000);
    }
    h_close(c);
    return got;
}

static int start_dlockd(const char *redis_conf) {
    char text[4096];
    snprintf(text, sizeof(text),
             "[server]\nadmin_uids = 0\nlog_level = debug\n"
             "[redis]\ncommand_timeout_ms = 2000\n%s",
             redis_conf);
    /* Waits for PING, which answers before Redis does. */
    return h_dlockd_start_conf(text);
}

static void lock_unlock(int index) {
    h_conn_t *c = h_connect_index(index);
    h_send(c, "LOCK tls-a\n");
    H_EXPECT_PREFIX(c, "OK ");
    h_send(c, "STATUS tls-a\n");
    H_EXPECT_PREFIX(c, "OK MINE 1 ");
    h_send(c, "UNLOCK tls-a\n");
    H_EXPECT(c, "OK 0");
    h_close(c);
}

/* ---- TLS ------------------------------------------------------------------ */

START_TEST(tls_locks_work_over_a_tls_only_redis) {
    char conf[2048];
    h_tls_make_certs(h_dir());
    int r = h_redis_start_tls(0, h_dir(), 0);
    snprintf(conf, sizeof(conf), "url = rediss://127.0.0.1:%d\ntls_ca_file = %s/ca.crt\n",
             h_redis_port(r), h_dir());
    int d = start_dlockd(conf);
    h_await_redis(d, 1);
    lock_unlock(d);
    /* The log says TLS, and Redis sees who we are. */
    ck_assert_int_ge(h_log_count(d, "connection to tls 127.0.0.1"), 1);
}
END_TEST

START_TEST(tls_wrong_ca_is_refused_with_the_reason) {
    char conf[2048];
    h_tls_make_certs(h_dir());
    int r = h_redis_start_tls(0, h_dir(), 0);
    snprintf(conf, sizeof(conf), "url = rediss://127.0.0.1:%d\ntls_ca_file = %s/other-ca.crt\n",
             h_redis_port(r), h_dir());
    int d = start_dlockd(conf);
    const char *line = await_backend_error(d, "w", "certificate verify failed");
    ck_assert_msg(strstr(line, "TLS: ") != NULL, "reply does not say TLS: '%s'", line);
    h_await_log(d, "certificate verify failed", 1);
    /* Nothing reached Redis: no lock exists there. */
    ck_assert_str_eq(rcli(r, "EXISTS dlock:w"), "0");
    ck_assert_str_eq(rcli(r, "PING"), "PONG"); /* and the server was there */
}
END_TEST

START_TEST(tls_wrong_server_name_is_refused) {
    char conf[2048];
    h_tls_make_certs(h_dir());
    int r = h_redis_start_tls(0, h_dir(), 0);
    snprintf(conf, sizeof(conf),
             "url = rediss://127.0.0.1:%d\ntls_ca_file = %s/ca.crt\n"
             "tls_server_name = wrong.example\n",
             h_redis_port(r), h_dir());
    int d = start_dlockd(conf);
    const char *line = await_backend_error(d, "n", "certificate verify failed");
    ck_assert_msg(strstr(line, "hostname mismatch") != NULL, "no hostname mismatch: '%s'", line);
}
END_TEST

START_TEST(tls_client_certificate) {
    char conf[2048];
    h_tls_make_certs(h_dir());
    int r = h_redis_start_tls(0, h_dir(), 1);
    /* Without a client certificate Redis drops the handshake. */
    snprintf(conf, sizeof(conf), "url = rediss://127.0.0.1:%d\ntls_ca_file = %s/ca.crt\n",
             h_redis_port(r), h_dir());
    int bare = start_dlockd(conf);
    await_backend_error(bare, "c", "redis not connected: ");
    /* With one, it works. */
    snprintf(conf, sizeof(conf),
             "url = rediss://localhost:%d\ntls_ca_file = %s/ca.crt\n"
             "tls_cert_file = %s/client.crt\ntls_key_file = %s/client.key\n",
             h_redis_port(r), h_dir(), h_dir(), h_dir());
    int d = start_dlockd(conf);
    h_await_redis(d, 1);
    lock_unlock(d);
}
END_TEST

START_TEST(tls_unreadable_ca_file_fails_at_start) {
    char conf[2048];
    snprintf(conf, sizeof(conf),
             "[redis]\nurl = rediss://127.0.0.1:1\ntls_ca_file = %s/missing.crt\n", h_dir());
    int index;
    pid_t pid = h_dlockd_spawn(conf, NULL, &index);
    ck_assert_int_gt(pid, 0);
    int status = h_dlockd_stop(index, 0); /* signal 0: only wait for its exit */
    ck_assert_msg(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 1,
                  "dlockd did not exit 1 (status %d)", status);
    h_await_log(index, "TLS", 1);
}
END_TEST

/* ---- plain TCP -------------------------------------------------------------- */

START_TEST(refused_port_is_reported_and_retried_at_the_backoff_pace) {
    char conf[2048];
    int port = h_free_port();
    /* A connect timeout far beyond the test: only a refusal reported at
     * once lets dlockd try again, and it does so at the backoff's pace. */
    snprintf(conf, sizeof(conf), "url = redis://127.0.0.1:%d\nconnect_timeout_ms = 600000\n",
             port);
    int d = start_dlockd(conf);
    await_backend_error(d, "r", "connection refused");
    /* 50, 100, 200, 400 ms ...: four tries of each connection well within
     * the bound, where a timeout would allow one. */
    h_await_log(d, "connection refused", 8);
}
END_TEST

START_TEST(host_names_resolve_and_clients_are_named) {
    char conf[2048];
    int r = h_redis_start_tcp(0, NULL);
    snprintf(conf, sizeof(conf), "url = redis://localhost:%d\n", h_redis_port(r));
    int d = start_dlockd(conf);
    h_await_redis(d, 1);
    lock_unlock(d);
    /* CLIENT SETNAME dlockd:<host>:<pid> on both connections. */
    char want[64];
    snprintf(want, sizeof(want), ":%d", (int)h_dlockd_pid(d));
    int named = 0;
    FILE *p = NULL;
    char cmd[512], line[4096];
    snprintf(cmd, sizeof(cmd), "redis-cli -s %s CLIENT LIST", h_redis_sock_index(r));
    p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    while (fgets(line, sizeof(line), p) != NULL) {
        char *name = strstr(line, " name=dlockd:");
        if (name != NULL && strstr(name, want) != NULL) named++;
    }
    pclose(p);
    ck_assert_int_eq(named, 2);
}
END_TEST

START_TEST(unknown_host_is_reported) {
    /* An empty label: the resolver fails it without asking any DNS server,
     * so the test needs no network and cannot wait on one. */
    int d = start_dlockd("url = redis://no-such-host..invalid:6379\n");
    await_backend_error(d, "u", "redis not connected: cannot resolve no-such-host..invalid");
}
END_TEST

static Suite *backend_suite(void) {
    Suite *s = suite_create("backend");
    TCase *tc = tcase_create("tls");
    tcase_add_checked_fixture(tc, h_setup, h_teardown);
    tcase_add_test(tc, tls_locks_work_over_a_tls_only_redis);
    tcase_add_test(tc, tls_wrong_ca_is_refused_with_the_reason);
    tcase_add_test(tc, tls_wrong_server_name_is_refused);
    tcase_add_test(tc, tls_client_certificate);
    tcase_add_test(tc, tls_unreadable_ca_file_fails_at_start);
    suite_add_tcase(s, tc);
    tc = tcase_create("tcp");
    tcase_add_checked_fixture(tc, h_setup, h_teardown);
    tcase_add_test(tc, refused_port_is_reported_and_retried_at_the_backoff_pace);
    tcase_add_test(tc, host_names_resolve_and_clients_are_named);
    tcase_add_test(tc, unknown_host_is_reported);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return h_main(backend_suite());
}
