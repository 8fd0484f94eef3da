/* Unit tests of daemon/backend/backend.c's pure parts: the daemon a WHO answer names.
 * SPDX-License-Identifier: MIT */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/backend/backend.h"

/* backend_who_daemon() of daemon, as "host pid" ("" -1 when none). */
static const char *who_of(const char *daemon) {
    static char out[BACKEND_WHO_DAEMON_MAX + 32];
    backend_who_t w = {.owner = "u:1"};
    char host[BACKEND_WHO_DAEMON_MAX];
    long long pid = 7;
    snprintf(w.daemon, sizeof(w.daemon), "%s", daemon);
    backend_who_daemon(&w, host, sizeof(host), &pid);
    snprintf(out, sizeof(out), "%s %lld", host, pid);
    return out;
}

START_TEST(test_who_daemon_registered) {
    ck_assert_str_eq(who_of("dlockd:web1:4242"), "web1 4242");
    ck_assert_str_eq(who_of("dlockd:a:b:c:1"), "a:b:c 1"); /* the last colon ends the host */
    ck_assert_str_eq(who_of("dlockd:h:9223372036854775807"), "h 9223372036854775807");
}
END_TEST

/* Redisson and other tools register nothing, or not as a dlockd: no host,
 * no pid; a malformed pid is not read leniently. */
START_TEST(test_who_daemon_none_or_bad) {
    ck_assert_str_eq(who_of(""), " -1");
    ck_assert_str_eq(who_of("redisson"), " -1");
    ck_assert_str_eq(who_of("dlockd:"), " -1");
    ck_assert_str_eq(who_of("dlockd::12"), " -1");     /* no host */
    ck_assert_str_eq(who_of("dlockd:h:"), " -1");      /* no pid */
    ck_assert_str_eq(who_of("dlockd:h:12x"), " -1");   /* trailing bytes */
    ck_assert_str_eq(who_of("dlockd:h:0"), " -1");
    ck_assert_str_eq(who_of("dlockd:h:-5"), " -1");
    ck_assert_str_eq(who_of("dlockd:h: 5"), " -1");
    ck_assert_str_eq(who_of("dlockd:h:99999999999999999999"), " -1"); /* out of range */
    ck_assert_str_eq(who_of("xdlockd:h:5"), " -1");
}
END_TEST

static Suite *backend_suite(void) {
    Suite *s = suite_create("backend");
    TCase *tc = tcase_create("who");
    tcase_add_test(tc, test_who_daemon_registered);
    tcase_add_test(tc, test_who_daemon_none_or_bad);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(backend_suite());
    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
