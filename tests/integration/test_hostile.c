/* Integration tests of a hostile Redis: replies and data no real lock in Redis holds must not abort or exhaust dlockd.
 * SPDX-License-Identifier: MIT
 *
 * Each case makes Redis say something dlockd never wrote: a semaphore whose
 * count is near 2^63, and, through tests/support/respproxy.c (a proxy that
 * passes every command on to the test's redis-server but answers SCAN
 * itself), a reply claiming 2^31 - 1 elements and a SCAN that never ends.
 * dlockd must answer ERR BACKEND, stay up and serve again. The sanitized
 * daemon runs them too: a sanitizer report fails the test. (An election's
 * value with a blank and a newline is test_list's.) */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/harness.h"
#include "tests/support/respproxy.h"

/* Sends request and returns its reply line (copied into out), failing the
 * test when none comes within H_WAIT_MS. */
static const char *ask(h_conn_t *c, const char *request, char *out, size_t len) {
    h_send(c, "%s\n", request);
    const char *r = h_recv(c, H_WAIT_MS);
    ck_assert_msg(r != NULL, "%s: no reply (is dlockd still up? see its log)", request);
    snprintf(out, len, "%s", r);
    return out;
}

/* ---- a semaphore's count near 2^63 -------------------------------------------- */

/* Anyone may SET a semaphore's count in Redis (Redisson's layout is a
 * string): 2^63 - 1 is a valid Redis integer, but sem.lua counts in Lua's
 * doubles, so the grant's "permits available" comes back as 2^63 - 3 or,
 * rounded, as -2^63; dlockd summed it with what it gave back. */
START_TEST(semaphore_count_near_2_63) {
    int d = h_dlockd_start_kept("hostile", NULL);
    h_conn_t *a = h_connect_index(d);
    char r1[256], r2[256], r3[256];
    ck_assert_str_eq(h_redis_cli("SET dlock:huge 9223372036854775807"), "OK");
    ask(a, "ACQUIRE huge 2", r1, sizeof(r1));
    ck_assert_str_eq(h_redis_cli("SET dlock:huge 9223372036854775807"), "OK");
    ask(a, "ACQUIRE huge 1", r2, sizeof(r2));
    /* What a grant left in dlockd's count of the free permits, plus 3. */
    ask(a, "RELEASE huge 3", r3, sizeof(r3));
    h_expect_reply(a, "PING", "OK PONG");
    /* Out of range: refused as a bad reply, the permits given back. */
    ck_assert_msg(strncmp(r1, "ERR BACKEND ", 12) == 0, "ACQUIRE huge 2: %s", r1);
    ck_assert_msg(strncmp(r2, "ERR BACKEND ", 12) == 0, "ACQUIRE huge 1: %s", r2);
    ck_assert_msg(strncmp(r3, "ERR NOTHELD", 11) == 0, "RELEASE huge 3: %s", r3);
    long long end = h_now_ms() + H_WAIT_MS;
    while (strcmp(h_redis_cli("ZCARD {dlock:huge}:timeout"), "0") != 0) {
        ck_assert_msg(h_now_ms() < end, "the refused grants' ids are still in Redis");
        usleep(10000);
    }
    ck_assert_str_eq(h_redis_cli("GET dlock:huge"), "9223372036854775807");
    /* A count Redis can keep is served as before. */
    ck_assert_str_eq(h_redis_cli("SET dlock:huge 3"), "OK");
    h_expect_reply(a, "ACQUIRE huge 2", "OK 2");
    h_expect_reply(a, "RELEASE huge 2", "OK 0");
    h_close(a);
    h_keep_passed();
}
END_TEST

/* ---- through the proxy ------------------------------------------------------------ */

/* command_timeout_ms of the daemons behind the proxy. */
#define PROXIED_TIMEOUT_MS 200

/* A dlockd whose Redis is the proxy in front of the test's redis-server,
 * with command_timeout_ms timeout_ms. */
static int start_proxied(int timeout_ms) {
    char conf[2048];
    snprintf(conf, sizeof(conf),
             "[server]\nadmin_uids = 0\n"
             "[redis]\nurl = unix://%s\ncommand_timeout_ms = %d\nconnect_timeout_ms = 500\n",
             rp_start(h_redis_sock()), timeout_ms);
    int d = h_dlockd_start_conf(conf);
    h_keep_log(d, "hostile.%s.dlockd%d", tcase_name(), d);
    h_await_redis(d, 1);
    return d;
}

/* LIST's reply on c: its header, and its entry lines counted (their first
 * word checked); returns the header. */
static const char *expect_list(h_conn_t *c, const char *request, const char *want) {
    static char head[256];
    h_send(c, "%s\n", request);
    const char *r = h_recv(c, H_WAIT_MS);
    ck_assert_msg(r != NULL, "%s: no reply", request);
    snprintf(head, sizeof(head), "%s", r);
    ck_assert_msg(strncmp(head, want, strlen(want)) == 0, "%s: got '%s', wanted '%s...'", request,
                  head, want);
    int n;
    if (sscanf(head, "OK LIST %d", &n) == 1)
        for (int i = 0; i < n; i++) {
            r = h_recv(c, H_WAIT_MS);
            ck_assert_msg(r != NULL && strncmp(r, "= ", 2) == 0, "%s: entry %d: %s", request, i,
                          r ? r : "(none)");
        }
    return head;
}

/* A reply whose array claims 2^31 - 1 elements, to LIST's SCAN: the reader
 * (hiredis 0.14's, which sets no limit) made room for all of them at once,
 * 16 GB. */
START_TEST(reply_claiming_2_31_elements) {
    int d = start_proxied(PROXIED_TIMEOUT_MS);
    h_conn_t *c = h_connect_index(d);
    expect_list(c, "LOCK held", "OK ");
    rp_mode(RP_SCAN_HUGE);
    long long t0 = h_now_ms();
    const char *head = expect_list(c, "LIST *", "ERR BACKEND ");
    ck_assert_msg(strstr(head, "RESP_ELEMENTS_MAX") != NULL, "LIST: %s", head);
    ck_assert_msg(h_now_ms() - t0 < PROXIED_TIMEOUT_MS + 2000, "LIST took %lld ms",
                  h_now_ms() - t0);
    ck_assert_int_eq(rp_scans(), 1);
    /* The connection went, not the daemon: it connects again and serves. */
    rp_mode(RP_PASS);
    h_await_redis(d, 1);
    expect_list(c, "LIST *", "OK LIST 1 0");
    h_expect_reply(c, "UNLOCK held", "OK 0");
    h_close(c);
    h_keep_passed();
}
END_TEST

/* A SCAN that never comes back to cursor 0: LIST ended only when Redis did.
 * Each SCAN answered RP_SLOW_US late, so that the deadline comes first,
 * and most likely with a SCAN in flight, whose page (a key that names no
 * lock) comes after the answer: the listing must not look at it. */
START_TEST(list_scan_that_never_ends) {
    int d = start_proxied(PROXIED_TIMEOUT_MS);
    h_conn_t *c = h_connect_index(d);
    expect_list(c, "LOCK held", "OK ");
    rp_mode(RP_SCAN_SLOW);
    long long t0 = h_now_ms();
    const char *head = expect_list(c, "LIST *", "ERR BACKEND ");
    long long took = h_now_ms() - t0;
    ck_assert_msg(strstr(head, "LIST did not end within 3000 ms") != NULL, "LIST: %s", head);
    /* LIST_DEADLINE_TIMEOUTS (15) x command_timeout_ms */
    ck_assert_msg(took >= 15 * PROXIED_TIMEOUT_MS - 100 && took < 15 * PROXIED_TIMEOUT_MS + 2000,
                  "LIST answered after %lld ms", took);
    ck_assert_msg(rp_scans() > 10, "%ld SCANs", rp_scans());
    /* The SCAN in flight at the deadline comes back (and goes nowhere). */
    long scans = rp_scans();
    usleep(2 * RP_SLOW_US);
    h_expect_reply(c, "PING", "OK PONG");
    ck_assert_int_le(rp_scans(), scans + 1);
    /* The connection is fine: the next LIST ends as Redis's SCAN does. */
    rp_mode(RP_PASS);
    expect_list(c, "LIST *", "OK LIST 1 0");
    h_expect_reply(c, "PING", "OK PONG");
    h_close(c);
    h_keep_passed();
}
END_TEST

/* The same, answered at once: LIST_SCAN_ROUNDS_MAX calls (100,000; a few
 * seconds, sanitized), well within the deadline (150 s with
 * command_timeout_ms 10000). */
START_TEST(list_scan_rounds_capped) {
    int d = start_proxied(10000);
    h_conn_t *c = h_connect_index(d);
    rp_mode(RP_SCAN_ENDLESS);
    h_send(c, "LIST *\n");
    const char *head = h_recv(c, 100000);
    ck_assert_msg(head != NULL, "LIST: no reply within 100 s");
    ck_assert_msg(strncmp(head, "ERR BACKEND ", 12) == 0 &&
                      strstr(head, "SCAN did not come back to cursor 0 within "
                                   "LIST_SCAN_ROUNDS_MAX calls") != NULL,
                  "LIST: %s", head);
    ck_assert_int_eq(rp_scans(), 100000);
    rp_mode(RP_PASS);
    expect_list(c, "LIST *", "OK LIST 0 0");
    h_close(c);
    h_keep_passed();
}
END_TEST

static void setup(void) {
    h_setup();
    h_redis_start();
}

static Suite *hostile_suite(void) {
    const struct {
        const char *name;
        const TTest *test;
        int timeout_s;
    } cases[] = {
        {"semaphore", semaphore_count_near_2_63, 60},
        {"reader", reply_claiming_2_31_elements, 60},
        {"scan", list_scan_that_never_ends, 60},
        {"rounds", list_scan_rounds_capped, 150},
    };
    Suite *s = suite_create("hostile");
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        TCase *tc = tcase_create(cases[i].name);
        tcase_add_checked_fixture(tc, setup, h_teardown);
        tcase_set_timeout(tc, cases[i].timeout_s);
        tcase_add_test(tc, cases[i].test);
        suite_add_tcase(s, tc);
    }
    return s;
}

int main(void) {
    return h_main(hostile_suite());
}
