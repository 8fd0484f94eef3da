/* Integration tests of a hostile Redis: replies and data no real lock in Redis holds must not abort or exhaust dlockd.
 * SPDX-License-Identifier: MIT
 *
 * Each case makes Redis say something dlockd never wrote: a semaphore whose
 * count is near 2^63, an election's value with blanks and a newline, and,
 * through tests/support/respproxy.c (a proxy that passes every command on
 * to the test's redis-server but answers SCAN itself), a reply claiming
 * 2^31 - 1 elements and a SCAN that never ends. dlockd must answer
 * ERR BACKEND (or say the value safely), stay up and serve again. The
 * sanitized daemon runs them too: a sanitizer report fails the test. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/harness.h"

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

static void setup(void) {
    h_setup();
    h_redis_start();
}

static Suite *hostile_suite(void) {
    Suite *s = suite_create("hostile");
    TCase *tc = tcase_create("redis");
    tcase_add_checked_fixture(tc, setup, h_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, semaphore_count_near_2_63);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return h_main(hostile_suite());
}
