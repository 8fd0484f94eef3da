/* Unit tests of daemon/backend/resp_write: the bytes of RESP headers, bulk strings and commands.
 * SPDX-License-Identifier: MIT */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/backend/resp_write.h"
#include "daemon/util/buf.h"

/* Room with a guard byte after what a write may take: a write past its
 * RESP_WRITE_ROOM shows as a changed guard. */
#define GUARD 0x5a

static void expect(const char *got, size_t n, const char *want, size_t wantlen) {
    ck_assert_uint_eq(n, wantlen);
    ck_assert_msg(memcmp(got, want, n) == 0, "wrote \"%.*s\", want \"%.*s\"", (int)n, got,
                  (int)wantlen, want);
}

#define EXPECT(got, n, lit) expect((got), (n), (lit), sizeof(lit) - 1)

START_TEST(test_head) {
    char p[RESP_WRITE_ROOM(0) + 1];
    size_t n = resp_write_head(p, '*', 0);
    EXPECT(p, n, "*0\r\n");
    n = resp_write_head(p, '$', 12345);
    EXPECT(p, n, "$12345\r\n");
    memset(p, GUARD, sizeof(p));
    n = resp_write_head(p, '*', SIZE_MAX);
    ck_assert_uint_le(n, RESP_WRITE_ROOM(0));
    ck_assert_int_eq((unsigned char)p[RESP_WRITE_ROOM(0)], GUARD);
}
END_TEST

START_TEST(test_bulk) {
    char p[RESP_WRITE_ROOM(8) + 1];
    size_t n = resp_write_bulk(p, "", 0);
    EXPECT(p, n, "$0\r\n\r\n");
    n = resp_write_bulk(p, NULL, 0); /* nothing to copy: no pointer needed */
    EXPECT(p, n, "$0\r\n\r\n");
    /* Binary-safe: CR, LF and NUL are bytes like any other. */
    n = resp_write_bulk(p, "a\r\nb\0c", 6);
    EXPECT(p, n, "$6\r\na\r\nb\0c\r\n");
    memset(p, GUARD, sizeof(p));
    n = resp_write_bulk(p, "12345678", 8);
    EXPECT(p, n, "$8\r\n12345678\r\n");
    ck_assert_uint_le(n, RESP_WRITE_ROOM(8));
    ck_assert_int_eq((unsigned char)p[RESP_WRITE_ROOM(8)], GUARD);
}
END_TEST

START_TEST(test_u64) {
    char p[RESP_WRITE_ROOM(20) + 1];
    size_t n = resp_write_u64(p, 0);
    EXPECT(p, n, "$1\r\n0\r\n");
    n = resp_write_u64(p, 10);
    EXPECT(p, n, "$2\r\n10\r\n");
    n = resp_write_u64(p, 2000);
    EXPECT(p, n, "$4\r\n2000\r\n");
    memset(p, GUARD, sizeof(p));
    n = resp_write_u64(p, UINT64_MAX);
    EXPECT(p, n, "$20\r\n18446744073709551615\r\n");
    ck_assert_int_eq((unsigned char)p[RESP_WRITE_ROOM(20)], GUARD);
}
END_TEST

/* A bulk string written in place (its head, its bytes, its end) is the
 * same bytes as resp_write_bulk's. */
START_TEST(test_in_place) {
    char a[64], b[64];
    size_t k = resp_write_head(a, '$', 9);
    memcpy(a + k, "lock:{ab}", 9);
    k += 9;
    ck_assert_uint_eq(resp_write_end(a + k), 2);
    k += 2;
    size_t n = resp_write_bulk(b, "lock:{ab}", 9);
    expect(a, k, b, n);
}
END_TEST

START_TEST(test_command) {
    buf_t out;
    memset(&out, 0, sizeof(out));
    const char *argv[] = {"SET", "k", ""};
    ck_assert_int_eq(resp_write_command(&out, 3, argv, NULL), 0);
    EXPECT(buf_start(&out), out.len, "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n");
    /* Appended after what is there; lengths given: binary values. */
    const char *bin[] = {"HGET", "h\0x", "f"};
    const size_t len[] = {4, 3, 1};
    ck_assert_int_eq(resp_write_command(&out, 3, bin, len), 0);
    EXPECT(buf_start(&out), out.len,
           "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n*3\r\n$4\r\nHGET\r\n$3\r\nh\0x\r\n$1\r\nf\r\n");
    buf_free(&out);
}
END_TEST

/* Ten arguments and more: the counts have two digits, and a long value's
 * length too. */
START_TEST(test_command_counts) {
    buf_t out;
    char big[1000];
    const char *argv[12];
    memset(&out, 0, sizeof(out));
    memset(big, 'x', sizeof(big));
    for (int i = 0; i < 11; i++) argv[i] = "a";
    argv[11] = big;
    size_t len[12];
    for (int i = 0; i < 11; i++) len[i] = 1;
    len[11] = sizeof(big);
    ck_assert_int_eq(resp_write_command(&out, 12, argv, len), 0);
    const char *s = buf_start(&out);
    ck_assert_uint_eq(out.len, 5 + 11 * 7 + 7 + sizeof(big) + 2);
    ck_assert(memcmp(s, "*12\r\n$1\r\na\r\n", 12) == 0);
    ck_assert(memcmp(s + 5 + 11 * 7, "$1000\r\nxxx", 10) == 0);
    ck_assert(memcmp(s + out.len - 3, "x\r\n", 3) == 0);
    buf_free(&out);
}
END_TEST

static Suite *resp_write_suite(void) {
    Suite *s = suite_create("resp_write");
    TCase *tc = tcase_create("resp_write");
    tcase_add_test(tc, test_head);
    tcase_add_test(tc, test_bulk);
    tcase_add_test(tc, test_u64);
    tcase_add_test(tc, test_in_place);
    tcase_add_test(tc, test_command);
    tcase_add_test(tc, test_command_counts);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(resp_write_suite());
    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
