/* Integration tests of the signals a daemon receives: SIGHUP reloads, SIGUSR1/2 change nothing.
 * SPDX-License-Identifier: MIT
 *
 * SIGTERM and SIGINT (release everything, exit 0) are tested with the Redis
 * faults in test_redis.c and by every test's teardown. */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/harness.h"

/* Sends sig and waits until the log has one more line with text. */
static void signal_and_await(int index, int sig, const char *text) {
    int before = h_log_count(index, text);
    ck_assert_int_eq(kill(h_dlockd_pid(index), sig), 0);
    h_await_log(index, text, before + 1);
}

/* Replaces the daemon's config file; the [redis] url the harness wrote stays. */
static void rewrite_conf(int index, const char *server_lock) {
    char old[512], url[512] = "";
    FILE *f = fopen(h_dlockd_conf(index), "r");
    ck_assert_ptr_nonnull(f);
    while (fgets(old, sizeof(old), f) != NULL)
        if (strncmp(old, "url = ", 6) == 0) snprintf(url, sizeof(url), "%s", old);
    fclose(f);
    ck_assert_msg(url[0] != '\0', "no url in %s", h_dlockd_conf(index));
    f = fopen(h_dlockd_conf(index), "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "[redis]\n%scommand_timeout_ms = 1000\nconnect_timeout_ms = 500\n%s", url,
            server_lock);
    fclose(f);
}

static void setup(void) {
    h_setup();
    h_redis_start();
}

START_TEST(sighup_applies_limits_and_log_level) {
    int d = h_dlockd_start("[server]\nlog_level = info\n[lock]\nmax_locks_per_client = 1\n");
    h_conn_t *c = h_connect_index(d);
    h_send(c, "LOCK a\n");
    H_EXPECT_PREFIX(c, "OK ");
    h_send(c, "LOCK b\n");
    H_EXPECT_PREFIX(c, "ERR LIMIT ");

    rewrite_conf(d, "[server]\nlog_level = debug\nadmin_uids = 0 4242\n"
                    "[lock]\nmax_locks_per_client = 2\n");
    signal_and_await(d, SIGHUP, "reloaded");
    /* The new limit, on the same connection, which kept its lock. */
    h_send(c, "LOCK b\n");
    H_EXPECT_PREFIX(c, "OK ");
    h_send(c, "STATUS a\n");
    H_EXPECT_PREFIX(c, "OK MINE 1 ");
    /* debug logging is on: a new client's arrival is logged. */
    int before = h_log_count(d, "connected (pid");
    h_conn_t *c2 = h_connect_index(d);
    h_send(c2, "PING\n");
    H_EXPECT(c2, "OK PONG");
    ck_assert_int_gt(h_log_count(d, "connected (pid"), before);
    h_close(c2);
    h_close(c);
}
END_TEST

START_TEST(sighup_with_a_broken_file_keeps_the_running_configuration) {
    int d = h_dlockd_start("[lock]\nmax_locks_per_client = 1\n");
    h_conn_t *c = h_connect_index(d);
    h_send(c, "LOCK a\n");
    H_EXPECT_PREFIX(c, "OK ");

    rewrite_conf(d, "[lock]\nmax_locks_per_client = 5\nno such line\n");
    signal_and_await(d, SIGHUP, "reload failed");
    /* The log names the file and the line. */
    char where[600];
    snprintf(where, sizeof(where), "%s:7:", h_dlockd_conf(d));
    ck_assert_msg(h_log_count(d, where) >= 1, "the log does not say %s", where);
    /* Nothing changed, everyone is still served. */
    h_send(c, "LOCK b\n");
    H_EXPECT_PREFIX(c, "ERR LIMIT ");
    h_send(c, "PING\n");
    H_EXPECT(c, "OK PONG");
    h_close(c);
}
END_TEST

START_TEST(sighup_names_what_needs_a_restart) {
    int d = h_dlockd_start(NULL);
    h_conn_t *c = h_connect_index(d);
    h_send(c, "LOCK a\n");
    H_EXPECT_PREFIX(c, "OK ");
    rewrite_conf(d, "key_prefix = other:\n[lock]\nlease_ms = 5000\n");
    signal_and_await(d, SIGHUP, "reloaded");
    /* The log names the keys (never their values). */
    ck_assert_int_ge(h_log_count(d, "[redis] changes only with a restart (key_prefix)"), 1);
    ck_assert_int_eq(h_log_count(d, "change only with a restart (locks held"), 0);
    ck_assert_int_ge(h_log_count(d, "reload: lease_ms 30000 -> 5000"), 1);
    /* Still the running prefix: the lock is where it was. */
    ck_assert_str_eq(h_redis_cli("EXISTS dlock:a"), "1");
    h_send(c, "UNLOCK a\n");
    H_EXPECT(c, "OK 0");
    h_close(c);
}
END_TEST

/* command_timeout_ms applies live: after a reload from 8000 to 300 ms, a
 * request to a Redis that hangs answers ERR BACKEND long before the old
 * deadline (the bound, 4 s, is generous on a busy machine yet half of it). */
START_TEST(sighup_applies_timeouts_live) {
    int d = h_dlockd_start("command_timeout_ms = 8000\n");
    rewrite_conf(d, "command_timeout_ms = 300\n");
    signal_and_await(d, SIGHUP, "command_timeout_ms 8000 -> 300");
    ck_assert_int_eq(h_log_count(d, "changes only with a restart"), 0);
    h_conn_t *c = h_connect_index(d);
    h_redis_signal(SIGSTOP);
    long long t0 = h_now_ms();
    h_send(c, "TRYLOCK t 0\n");
    const char *l = h_recv(c, H_WAIT_MS);
    long long took = h_now_ms() - t0;
    h_redis_signal(SIGCONT);
    ck_assert_msg(l != NULL && strncmp(l, "ERR BACKEND", 11) == 0, "TRYLOCK t 0 to a hung "
                  "Redis: '%s'", l ? l : "(no reply)");
    ck_assert_msg(took < 4000, "ERR BACKEND after %lld ms: the old 8000 ms deadline held", took);
    h_await_redis(d, 1);
    h_send(c, "LOCK t\n");
    H_EXPECT_PREFIX(c, "OK ");
    h_close(c);
}
END_TEST

/* A lowered command_timeout_ms covers a request sent behind one that went
 * under the old one: with Redis hung and a STATUS pending under 15 s, a
 * reload to 500 ms, then a STATUS on another connection answers ERR
 * BACKEND within the new deadline (and the first with it: the connection
 * drops), not when the first's 15 s run out. */
START_TEST(sighup_lowered_timeout_covers_requests_queued_behind) {
    int d = h_dlockd_start("command_timeout_ms = 15000\n");
    h_conn_t *a = h_connect_index(d), *b = h_connect_index(d);
    h_redis_signal(SIGSTOP);
    h_send(a, "STATUS s1\n");
    h_expect_silence(a, 200, "STATUS s1 to a hung Redis under 15 s");
    rewrite_conf(d, "command_timeout_ms = 500\n");
    signal_and_await(d, SIGHUP, "command_timeout_ms 15000 -> 500");
    long long t0 = h_now_ms();
    h_send(b, "STATUS s2\n");
    const char *l = h_recv(b, H_WAIT_MS);
    long long took = h_now_ms() - t0;
    char got[256];
    snprintf(got, sizeof(got), "%s", l ? l : "(no reply)");
    const char *first = h_recv(a, H_WAIT_MS);
    char got_a[256];
    snprintf(got_a, sizeof(got_a), "%s", first ? first : "(no reply)");
    h_redis_signal(SIGCONT);
    ck_assert_msg(strncmp(got, "ERR BACKEND", 11) == 0, "STATUS s2 to a hung Redis: '%s'", got);
    ck_assert_msg(took < 4000, "ERR BACKEND after %lld ms: the 15 s deadline ahead held", took);
    ck_assert_msg(strncmp(got_a, "ERR BACKEND", 11) == 0, "STATUS s1: '%s'", got_a);
    h_await_redis(d, 1);
    h_expect_reply(b, "STATUS s2", "OK FREE");
    h_close(b);
    h_close(a);
}
END_TEST

/* The checks across keys judge what will be in force, not the file alone:
 * replicas_ack changes only with a restart, so it stays 1 here, and
 * command_timeout_ms 400 under replicas_timeout_ms 1000 would have WAIT
 * hold the connection past every command's deadline. The file alone (with
 * replicas_ack 0) is valid; the reload fails and changes nothing. */
START_TEST(sighup_checks_keys_as_they_will_be_in_force) {
    int d = h_dlockd_start("replicas_ack = 1\nreplicas_timeout_ms = 500\n");
    h_keep_log(d, "signals.in_force.dlockd%d", d);
    rewrite_conf(d, "replicas_ack = 0\ncommand_timeout_ms = 400\nreplicas_timeout_ms = 1000\n");
    signal_and_await(d, SIGHUP, "reload");
    h_await_log(d, "reload failed", 1);
    ck_assert_int_eq(h_log_count(d, "replicas_timeout_ms (1000) must be below "
                                    "command_timeout_ms (400)"), 1);
    ck_assert_int_eq(h_log_count(d, "reloaded"), 0);
    ck_assert_int_eq(h_log_count(d, "command_timeout_ms 1000 -> 400"), 0);
    /* The same with a command_timeout_ms above it is applied (and says
     * that replicas_ack waits for a restart). */
    rewrite_conf(d, "replicas_ack = 0\ncommand_timeout_ms = 1500\nreplicas_timeout_ms = 1000\n");
    signal_and_await(d, SIGHUP, "reloaded");
    ck_assert_int_ge(h_log_count(d, "changes only with a restart (replicas_ack)"), 1);
    ck_assert_int_ge(h_log_count(d, "command_timeout_ms 1000 -> 1500"), 1);
    h_conn_t *c = h_connect_index(d);
    h_send(c, "PING\n");
    H_EXPECT(c, "OK PONG");
    h_close(c);
    h_keep_passed();
}
END_TEST

/* A lock's lease in Redis, from PTTL. */
static long long pttl(const char *name) {
    return atoll(h_redis_cli("PTTL dlock:%s", name));
}

/* Waits until PTTL of name is at most max (it was renewed with a lease that
 * short); fails after H_WAIT_MS. */
static void await_pttl_at_most(const char *name, long long max) {
    long long end = h_now_ms() + H_WAIT_MS, t;
    while ((t = pttl(name)) > max || t < 0) {
        ck_assert_msg(h_now_ms() < end, "PTTL of %s stays %lld, above %lld", name, t, max);
        usleep(5000);
    }
}

/* lease_ms and renew_every_ms apply live: new locks get the new lease, and
 * locks the watchdog keeps go on being renewed, with the new lease, and
 * never reported lost. Both ways: a longer lease (a watchdog lock leased
 * with the short one must be renewed before its short lease runs out, not
 * at the next beat of the new slower pace), then a shorter one. */
START_TEST(sighup_applies_lease_live) {
    int d = h_dlockd_start("[lock]\nlease_ms = 600\n");
    h_conn_t *c = h_connect_index(d);
    h_send(c, "LOCK old\n");
    H_EXPECT_PREFIX(c, "OK ");
    h_send(c, "LOCK leased 20000\n");
    H_EXPECT_PREFIX(c, "OK ");
    ck_assert_int_le(pttl("old"), 600);

    rewrite_conf(d, "[lock]\nlease_ms = 20000\n");
    signal_and_await(d, SIGHUP, "reload: lease_ms 600 -> 20000, renew_every_ms 200 -> 6666");
    h_send(c, "LOCK new\n");
    H_EXPECT_PREFIX(c, "OK ");
    long long t = pttl("new");
    ck_assert_msg(t > 15000 && t <= 20000, "new lock's PTTL %lld", t);
    h_send(c, "STATUS new\n");
    H_EXPECT_PREFIX(c, "OK MINE 1 ");
    /* The old one, renewed with the new lease at once. */
    h_expect_silence(c, 1500, "unexpected line"); /* over two of its old leases */
    t = pttl("old");
    ck_assert_msg(t > 15000 && t <= 20000, "old lock's PTTL %lld", t);

    /* Back to a short lease: everything the watchdog keeps gets it. */
    rewrite_conf(d, "[lock]\nlease_ms = 600\n");
    signal_and_await(d, SIGHUP, "reload: lease_ms 20000 -> 600, renew_every_ms 6666 -> 200");
    await_pttl_at_most("old", 600);
    await_pttl_at_most("new", 600);
    h_send(c, "LOCK newer\n");
    H_EXPECT_PREFIX(c, "OK ");
    ck_assert_int_le(pttl("newer"), 600);
    h_expect_silence(c, 1500, "unexpected line");
    h_send(c, "STATUS old\nSTATUS new\nSTATUS newer\n");
    H_EXPECT_PREFIX(c, "OK MINE 1 ");
    H_EXPECT_PREFIX(c, "OK MINE 1 ");
    H_EXPECT_PREFIX(c, "OK MINE 1 ");
    ck_assert_int_le(pttl("old"), 600);
    /* A lock with a lease of its own keeps it. */
    t = pttl("leased");
    ck_assert_msg(t > 10000 && t <= 20000, "leased lock's PTTL %lld", t);
    h_send(c, "INFO\n");
    const char *info = h_recv(c, H_WAIT_MS);
    ck_assert_ptr_nonnull(info);
    ck_assert_msg(strstr(info, " lost=0") != NULL, "INFO: %s", info);
    h_close(c);
}
END_TEST

/* SIGUSR2 hands over (test_upgrade); SIGUSR1 has no use, and must not
 * kill the daemon. */
START_TEST(sigusr1_changes_nothing) {
    int d = h_dlockd_start(NULL);
    h_conn_t *c = h_connect_index(d);
    h_send(c, "LOCK a\n");
    H_EXPECT_PREFIX(c, "OK ");
    ck_assert_int_eq(kill(h_dlockd_pid(d), SIGUSR1), 0);
    /* A request after it is answered, so it was handled (ignored). */
    h_send(c, "STATUS a\n");
    H_EXPECT_PREFIX(c, "OK MINE 1 ");
    h_send(c, "PING\n");
    H_EXPECT(c, "OK PONG");
    h_close(c);
}
END_TEST

START_TEST(sighup_without_a_file_reloads_the_defaults) {
    /* -c names a file that the test then removes: a reload that cannot
     * read it fails and keeps running. */
    int d = h_dlockd_start(NULL);
    ck_assert_int_eq(unlink(h_dlockd_conf(d)), 0);
    signal_and_await(d, SIGHUP, "reload failed");
    h_conn_t *c = h_connect_index(d);
    h_send(c, "PING\n");
    H_EXPECT(c, "OK PONG");
    h_close(c);
}
END_TEST

static Suite *signals_suite(void) {
    Suite *s = suite_create("signals");
    TCase *tc = tcase_create("signals");
    tcase_add_checked_fixture(tc, setup, h_teardown);
    tcase_add_test(tc, sighup_applies_limits_and_log_level);
    tcase_add_test(tc, sighup_with_a_broken_file_keeps_the_running_configuration);
    tcase_add_test(tc, sighup_names_what_needs_a_restart);
    tcase_add_test(tc, sighup_applies_lease_live);
    tcase_add_test(tc, sighup_applies_timeouts_live);
    tcase_add_test(tc, sighup_lowered_timeout_covers_requests_queued_behind);
    tcase_add_test(tc, sighup_checks_keys_as_they_will_be_in_force);
    tcase_add_test(tc, sigusr1_changes_nothing);
    tcase_add_test(tc, sighup_without_a_file_reloads_the_defaults);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return h_main(signals_suite());
}
