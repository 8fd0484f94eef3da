/* Integration tests of replica acknowledgement (WAIT) with a standalone
 * primary that has replicas: replicas_ack auto, 0 and N, stopped replicas,
 * renewals that are not acknowledged, and the configuration checks.
 * SPDX-License-Identifier: MIT
 *
 * A primary and two replicas on private TCP ports (h_replicas_start), no
 * Sentinels; dlockd uses url = redis://127.0.0.1:<primary>. Replicas are
 * "stopped" with SIGSTOP: they stay connected, so the primary still counts
 * them, but acknowledge nothing. */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/support/harness.h"

/* ---- failure reports (h_keep_log) ----------------------------------------- */

#define KEEP(d) h_keep_log((d), "replicas.%s.dlockd%d", __func__, (d))

static void setup(void) {
    h_setup();
}

/* ---- helpers -------------------------------------------------------------- */

static unsigned long long grant_fence(const char *line) {
    unsigned long long fence;
    long long h;
    char tail;
    if (line == NULL || sscanf(line, "OK %llu %lld%c", &fence, &h, &tail) != 2 || h != 1)
        return 0;
    return fence;
}

static unsigned long long lock_ok(h_conn_t *c, const char *req) {
    h_send(c, "%s\n", req);
    const char *l = h_reply(c, H_WAIT_MS, H_EVENTS_FAIL);
    ck_assert_msg(l != NULL, "%s: no reply within %d ms", req, H_WAIT_MS);
    unsigned long long f = grant_fence(l);
    ck_assert_msg(f > 0, "%s: got '%s', wanted 'OK <fence> 1'", req, l);
    return f;
}

static void unlock_ok(h_conn_t *c, const char *name) {
    h_send(c, "UNLOCK %s\n", name);
    const char *l = h_reply(c, H_WAIT_MS, H_EVENTS_FAIL);
    ck_assert_msg(l != NULL, "UNLOCK %s: no reply", name);
    ck_assert_msg(strcmp(l, "OK 0") == 0, "UNLOCK %s: got '%s', wanted 'OK 0'", name, l);
}

/* The reply to a request that must be refused for want of replicas. */
static void refused(h_conn_t *c, const char *req) {
    h_send(c, "%s\n", req);
    const char *l = h_reply(c, H_WAIT_MS, H_EVENTS_FAIL);
    ck_assert_msg(l != NULL, "%s with replicas stopped: no reply within %d ms", req, H_WAIT_MS);
    ck_assert_msg(strncmp(l, "ERR BACKEND replicas:", 21) == 0,
                  "%s with replicas stopped: got '%s', wanted 'ERR BACKEND replicas: ...'", req, l);
    fprintf(stderr, "%s -> %s\n", req, l);
}

/* How often the primary ran WAIT (INFO commandstats). */
static long long wait_calls(int r) {
    const char *s = h_redis_tcp(h_redis_port(r), "INFO commandstats");
    ck_assert_msg(s != NULL, "no INFO commandstats from redis %d", r);
    const char *p = strstr(s, "cmdstat_wait:calls=");
    return p ? atoll(p + strlen("cmdstat_wait:calls=")) : 0;
}

static const char *exists(int r, const char *key) {
    const char *v = h_redis_tcp(h_redis_port(r), "EXISTS %s", key);
    return v ? v : "(no answer)";
}

/* A refused grant is undone: the key goes from the primary, at once or
 * very soon after the reply (the reply may overtake the undo). */
static void await_undone(int r, const char *key) {
    long long t0 = h_now_ms();
    const char *v;
    int waited = 0;
    while (strcmp(v = exists(r, key), "0") != 0) {
        ck_assert_msg(h_now_ms() - t0 < 2000, "the refused grant was not undone: EXISTS %s = %s "
                      "2000 ms after the refusal", key, v);
        waited = 1;
        usleep(10000);
    }
    if (waited)
        fprintf(stderr, "note: %s was still there when the refusal came, gone %lld ms later\n",
                key, h_now_ms() - t0);
}

static void stop_replicas(int n) {
    for (int i = 0; i < n; i++) h_redis_signal_index(h_replica(i), SIGSTOP);
}

static void cont_replicas(int n) {
    for (int i = 0; i < n; i++) h_redis_signal_index(h_replica(i), SIGCONT);
}

/* ---- 1. auto -------------------------------------------------------------- */

START_TEST(auto_needs_a_replica_when_there_are_some) {
    int p = h_replicas_start(2);
    int d = h_dlockd_start_tcp(p, "[redis]\nreplicas_ack = auto\nreplicas_timeout_ms = 300\n");
    KEEP(d);
    const char *inf = h_info_line(d);
    ck_assert_msg(strstr(inf, " backend=standalone") != NULL, "INFO: '%s'", inf);

    /* With replicas answering, grants go through and are WAITed for. */
    h_conn_t *a = h_connect_index(d), *b = h_connect_index(d);
    long long w0 = wait_calls(p);
    lock_ok(a, "LOCK x");
    ck_assert_msg(wait_calls(p) > w0, "no WAIT after a grant, with replicas and "
                  "replicas_ack = auto");
    unlock_ok(a, "x");

    /* Both stopped: nothing is acknowledged. */
    stop_replicas(2);
    refused(a, "TRYLOCK t 0");
    await_undone(p, "dlock:t");
    h_send(a, "STATUS t\n");
    const char *l = h_reply(a, H_WAIT_MS, H_EVENTS_FAIL);
    ck_assert_msg(l != NULL && strcmp(l, "OK FREE") == 0, "STATUS t after the refusal: '%s'",
                  l ? l : "(no reply)");

    /* A TRYLOCK with a wait tries until its wait runs out. */
    long long t0 = h_now_ms();
    h_send(a, "TRYLOCK t2 1000\n");
    l = h_reply(a, H_WAIT_MS, H_EVENTS_FAIL);
    long long took = h_now_ms() - t0;
    ck_assert_msg(l != NULL, "TRYLOCK t2 1000: no reply within %d ms", H_WAIT_MS);
    ck_assert_msg(strncmp(l, "ERR BACKEND replicas:", 21) == 0 || strncmp(l, "TIMEOUT", 7) == 0,
                  "TRYLOCK t2 1000 with replicas stopped: got '%s'", l);
    ck_assert_msg(took >= 800, "TRYLOCK t2 1000 gave up after %lld ms: '%s'", took, l);
    ck_assert_msg(took < 1000 + 1000 + 3000, "TRYLOCK t2 1000 answered after %lld ms", took);

    /* A LOCK waits on... */
    h_send(b, "LOCK w\n");
    l = h_recv(b, 1500);
    ck_assert_msg(l == NULL, "LOCK w answered '%s' while no replica acknowledges", l);

    /* ...and is granted once the replicas answer again. */
    cont_replicas(2);
    l = h_reply(b, H_WAIT_MS, H_EVENTS_FAIL);
    ck_assert_msg(l != NULL, "LOCK w not granted within %d ms of the replicas' return", H_WAIT_MS);
    ck_assert_msg(grant_fence(l) > 0, "LOCK w: got '%s'", l);
    lock_ok(a, "TRYLOCK t 0");
    unlock_ok(a, "t");
    unlock_ok(b, "w");
    h_close(a);
    h_close(b);
    h_keep_passed();
}
END_TEST

/* Without replicas, auto waits for none; once one appears (ROLE is asked
 * again about every second) it does. */
START_TEST(auto_follows_the_replicas_there_are) {
    int p = h_replicas_start(0);
    int d = h_dlockd_start_tcp(p, "[redis]\nreplicas_timeout_ms = 300\n"); /* auto: the default */
    KEEP(d);
    h_conn_t *a = h_connect_index(d);
    long long w0 = wait_calls(p);
    lock_ok(a, "LOCK x");
    unlock_ok(a, "x");
    lock_ok(a, "TRYLOCK y 0");
    unlock_ok(a, "y");
    ck_assert_msg(wait_calls(p) == w0, "WAIT sent to a primary without replicas (%lld calls)",
                  wait_calls(p) - w0);

    int r = h_replica_start(p);
    h_await_replicas(p, 1, H_WAIT_MS);
    long long end = h_now_ms() + H_WAIT_MS;
    for (;;) {
        long long before = wait_calls(p);
        lock_ok(a, "LOCK x");
        unlock_ok(a, "x");
        if (wait_calls(p) > before) break;
        ck_assert_msg(h_now_ms() < end, "no WAIT within %d ms of a replica appearing", H_WAIT_MS);
        usleep(100000);
    }
    h_redis_signal_index(r, SIGSTOP);
    refused(a, "TRYLOCK z 0");
    h_redis_signal_index(r, SIGCONT);
    lock_ok(a, "TRYLOCK z 0");
    unlock_ok(a, "z");
    h_close(a);
    h_keep_passed();
}
END_TEST

/* ---- 2. replicas_ack = 0 ------------------------------------------------------ */

START_TEST(zero_does_not_wait) {
    int p = h_replicas_start(2);
    int d = h_dlockd_start_tcp(p, "[redis]\nreplicas_ack = 0\nreplicas_timeout_ms = 300\n");
    KEEP(d);
    h_conn_t *a = h_connect_index(d);
    long long w0 = wait_calls(p);
    stop_replicas(2);
    lock_ok(a, "TRYLOCK x 0");
    lock_ok(a, "LOCK y");
    lock_ok(a, "TRYLOCK z 500");
    unlock_ok(a, "x");
    unlock_ok(a, "y");
    unlock_ok(a, "z");
    ck_assert_int_eq(wait_calls(p), w0);
    cont_replicas(2);
    h_close(a);
    h_keep_passed();
}
END_TEST

/* ---- 3. replicas_ack = 2 ------------------------------------------------------ */

START_TEST(two_needs_both) {
    int p = h_replicas_start(2);
    int d = h_dlockd_start_tcp(p, "[redis]\nreplicas_ack = 2\nreplicas_timeout_ms = 300\n");
    KEEP(d);
    h_conn_t *a = h_connect_index(d), *b = h_connect_index(d);
    lock_ok(a, "TRYLOCK r 0");
    unlock_ok(a, "r");

    /* One of the two stopped: refused, and a LOCK waits. */
    h_redis_signal_index(h_replica(0), SIGSTOP);
    refused(a, "TRYLOCK r 0");
    await_undone(p, "dlock:r");
    h_send(b, "LOCK r\n");
    const char *l = h_recv(b, 1500);
    ck_assert_msg(l == NULL, "LOCK r answered '%s' with one of two replicas stopped", l);

    /* It comes back: the LOCK is granted, and the rest works. */
    h_redis_signal_index(h_replica(0), SIGCONT);
    l = h_reply(b, H_WAIT_MS, H_EVENTS_FAIL);
    ck_assert_msg(l != NULL && grant_fence(l) > 0, "LOCK r after the replica's return: '%s'",
                  l ? l : "(no reply)");
    lock_ok(a, "TRYLOCK r2 0");
    unlock_ok(a, "r2");
    unlock_ok(b, "r");
    h_close(a);
    h_close(b);
    h_keep_passed();
}
END_TEST

/* ---- 4. renewals not acknowledged --------------------------------------------- */

START_TEST(unacknowledged_renewals_lose_the_lock) {
    int p = h_replicas_start(2);
    int d = h_dlockd_start_tcp(p, "[redis]\ncommand_timeout_ms = 1000\nreplicas_timeout_ms = 200\n"
                                  "[lock]\nlease_ms = 1000\n");
    KEEP(d);
    h_conn_t *a = h_connect_index(d);
    unsigned long long f = lock_ok(a, "LOCK x");

    /* Renewals acknowledged: held through three leases. */
    long long granted = h_now_ms();
    while (h_now_ms() - granted < 3300) {
        h_send(a, "STATUS x\n");
        const char *l = h_reply(a, H_WAIT_MS, H_EVENTS_FAIL);
        char want[64];
        snprintf(want, sizeof(want), " %llu", f);
        ck_assert_msg(l != NULL && strncmp(l, "OK MINE 1 ", 10) == 0 &&
                          strcmp(l + strlen(l) - strlen(want), want) == 0,
                      "STATUS x %lld ms into the hold: '%s'", h_now_ms() - granted,
                      l ? l : "(no reply)");
        usleep(250000);
    }

    /* Both replicas stopped: renewals fail, and before the lease could run
     * out in Redis the holder is told. */
    long long t0 = h_now_ms();
    stop_replicas(2);
    const char *ev = h_recv(a, 5000);
    long long took = h_now_ms() - t0;
    ck_assert_msg(ev != NULL, "no event within 5000 ms of the replicas stopping");
    ck_assert_msg(strcmp(ev, "!LOST x backend") == 0, "got '%s', wanted '!LOST x backend'", ev);
    fprintf(stderr, "!LOST x backend %lld ms after the replicas stopped\n", took);
    h_send(a, "UNLOCK x\n");
    const char *l = h_reply(a, H_WAIT_MS, H_EVENTS_FAIL);
    ck_assert_msg(l != NULL && strncmp(l, "ERR NOTHELD", 11) == 0, "UNLOCK x after !LOST: '%s'",
                  l ? l : "(no reply)");

    /* Back: the name can be taken again. */
    cont_replicas(2);
    unsigned long long g = lock_ok(a, "LOCK x");
    ck_assert_msg(g > f, "fence %llu after %llu", g, f);
    unlock_ok(a, "x");
    h_close(a);
    h_keep_passed();
}
END_TEST

/* ---- 5. configuration ------------------------------------------------------- */

/* conf_text is refused, with a message naming the file, and the line
 * (file:line:) when need_line; a rule between two keys may name only the
 * file (file: reason). */
static void bad(const char *conf_text, const char *what, int need_line) {
    char out[1024], want[700];
    ck_assert_msg(h_dlockd_test_conf(conf_text, out, sizeof(out)) != 0,
                  "%s accepted: '%s'", what, out);
    snprintf(want, sizeof(want), "%s/t.conf:", h_dir());
    const char *p = strstr(out, want);
    ck_assert_msg(p != NULL, "%s: '%s' does not name %s", what, out, want);
    p += strlen(want);
    int digits = 0;
    while (*p >= '0' && *p <= '9') p++, digits++;
    if (need_line || digits > 0)
        ck_assert_msg(digits > 0 && *p == ':', "%s: '%s' has no line number", what, out);
}

static void good(const char *conf_text, const char *what) {
    char out[1024];
    ck_assert_msg(h_dlockd_test_conf(conf_text, out, sizeof(out)) == 0,
                  "%s refused: '%s'", what, out);
}

START_TEST(config_replicas_checked) {
    good("[redis]\nreplicas_ack = auto\n", "replicas_ack = auto");
    good("[redis]\nreplicas_ack = 0\n", "replicas_ack = 0");
    good("[redis]\nreplicas_ack = 2\nreplicas_timeout_ms = 500\n", "replicas_ack = 2");
    good("[redis]\ncommand_timeout_ms = 1000\nreplicas_timeout_ms = 999\n",
         "replicas_timeout_ms just below command_timeout_ms");
    /* Unset, replicas_timeout_ms fits whatever command_timeout_ms is. */
    good("[redis]\ncommand_timeout_ms = 300\n", "command_timeout_ms = 300 alone");
    bad("[redis]\nreplicas_ack = some\n", "replicas_ack = some", 1);
    bad("[redis]\nreplicas_ack = -1\n", "replicas_ack = -1", 1);
    bad("[redis]\ncommand_timeout_ms = 1000\nreplicas_timeout_ms = 1000\n",
        "replicas_timeout_ms equal to command_timeout_ms", 0);
    bad("[redis]\ncommand_timeout_ms = 500\nreplicas_timeout_ms = 2000\n",
        "replicas_timeout_ms above command_timeout_ms", 0);
    h_keep_passed();
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("replicas");
    /* One case per test, so that one can be run alone: CK_RUN_CASE=lost. */
    const struct {
        const char *name;
        const TTest *test;
    } cases[] = {
        {"auto", auto_needs_a_replica_when_there_are_some},
        {"auto-follows", auto_follows_the_replicas_there_are},
        {"zero", zero_does_not_wait},
        {"two", two_needs_both},
        {"lost", unacknowledged_renewals_lose_the_lock},
        {"config", config_replicas_checked},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        TCase *tc = tcase_create(cases[i].name);
        tcase_add_checked_fixture(tc, setup, h_teardown);
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, cases[i].test);
        suite_add_tcase(s, tc);
    }
    return s;
}

int main(void) {
    return h_main(suite());
}
