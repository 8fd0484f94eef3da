/* Tests of clock_skew.c: TIME parsing, rates and the bound.
 * SPDX-License-Identifier: MIT */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "conf/conf.h"
#include "daemon/backend/clock_skew.h"

static int parse(const char *s, const char *u, uint64_t *out) {
    return clock_skew_parse_time(s, strlen(s), u, strlen(u), out);
}

START_TEST(test_parse_time) {
    uint64_t v = 0;
    ck_assert_int_eq(parse("1795808346", "123456", &v), 0);
    ck_assert_uint_eq(v, 1795808346123456ULL);
    ck_assert_int_eq(parse("0", "0", &v), 0);
    ck_assert_uint_eq(v, 0);
    ck_assert_int_eq(parse("", "1", &v), -1);
    ck_assert_int_eq(parse("1", "", &v), -1);
    ck_assert_int_eq(parse("-1", "1", &v), -1);
    ck_assert_int_eq(parse("1 ", "1", &v), -1);
    ck_assert_int_eq(parse("1", "1000000", &v), -1);          /* not a microsecond part */
    ck_assert_int_eq(parse("99999999999999999999", "1", &v), -1);
}
END_TEST

static clock_skew_sample_t sample(uint64_t sent, uint64_t got, uint64_t node) {
    clock_skew_sample_t s = {.sent_us = sent, .got_us = got, .node_us = node};
    return s;
}

START_TEST(test_rate_same_clock) {
    clock_skew_sample_t a = sample(1000, 1200, 50000100), b = sample(1001000, 1001200, 51000100);
    int64_t ppm = 99, err = 0;
    ck_assert_int_eq(clock_skew_rate(&a, &b, &ppm, &err), 0);
    ck_assert_int_eq(ppm, 0);
    ck_assert_int_le(err, 201);            /* 200 us of round trip over 1 s */
    ck_assert_int_ge(err, 200);
}
END_TEST

START_TEST(test_rate_fast_and_slow) {
    int64_t ppm = 0, err = 0;
    /* 1.5 s of the node's clock in 1 s of ours */
    clock_skew_sample_t a = sample(0, 0, 7000000), b = sample(1000000, 1000000, 8500000);
    ck_assert_int_eq(clock_skew_rate(&a, &b, &ppm, &err), 0);
    ck_assert_int_eq(ppm, 500000);
    /* 0.99 s: slow by 1 % */
    b.node_us = 7990000;
    ck_assert_int_eq(clock_skew_rate(&a, &b, &ppm, &err), 0);
    ck_assert_int_eq(ppm, -10000);
}
END_TEST

START_TEST(test_rate_needs_a_window) {
    int64_t ppm = 0, err = 0;
    clock_skew_sample_t a = sample(0, 10, 0), b = sample(50000, 50010, 50000);
    ck_assert_int_eq(clock_skew_rate(&a, &b, &ppm, &err), -1);
    ck_assert_int_eq(clock_skew_rate(&b, &a, &ppm, &err), -1);     /* b before a */
    b = sample(10, 5, 0);                                           /* got before sent */
    ck_assert_int_eq(clock_skew_rate(&a, &b, &ppm, &err), -1);
}
END_TEST

START_TEST(test_bound) {
    ck_assert_int_eq(clock_skew_bound_ppm(CONF_DRIFT_AUTO, 60000), 10000);
    ck_assert_int_eq(clock_skew_bound_ppm(100, 10000), 10000);      /* 100 ms of 10 s */
    ck_assert_int_eq(clock_skew_bound_ppm(0, 10000), 0);
    ck_assert_int_eq(clock_skew_bound_ppm(5, 0), 1000000);
}
END_TEST

START_TEST(test_judge) {
    ck_assert_int_eq(clock_skew_judge(500000, 1000, 10000), 1);
    ck_assert_int_eq(clock_skew_judge(-500000, 1000, 10000), 1);
    ck_assert_int_eq(clock_skew_judge(5500, 1000, 10000), 0);
    ck_assert_int_eq(clock_skew_judge(9500, 1000, 10000), -1);     /* cannot tell */
    ck_assert_int_eq(clock_skew_judge(20000, 15000, 10000), -1);   /* too noisy */
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("clock_skew");
    TCase *tc = tcase_create("all");
    tcase_add_test(tc, test_parse_time);
    tcase_add_test(tc, test_rate_same_clock);
    tcase_add_test(tc, test_rate_fast_and_slow);
    tcase_add_test(tc, test_rate_needs_a_window);
    tcase_add_test(tc, test_bound);
    tcase_add_test(tc, test_judge);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(suite());
    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
