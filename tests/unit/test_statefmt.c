/* Unit tests of daemon/util/statefmt: the hand-over state's records, written and read back, and bad texts refused.
 * SPDX-License-Identifier: MIT */
#include "daemon/util/statefmt.h"

#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A record of every field type reads back as written, byte strings with
 * spaces, newlines, NULs and digits-and-colons inside. */
START_TEST(test_round_trip) {
    buf_t b = {0};
    statew_t w;
    static const char odd[] = "a b\n12:x\0y";
    statew_init(&w, &b);
    statew_rec(&w, "conn");
    statew_u64(&w, UINT64_MAX);
    statew_i64(&w, -42);
    statew_i64(&w, INT64_MIN + 1);
    statew_u64(&w, 0);
    statew_word(&w, "MUTEX");
    statew_bytes(&w, odd, sizeof(odd) - 1);
    statew_str(&w, "");
    statew_rec(&w, "end");
    ck_assert_int_eq(statew_finish(&w), 0);

    stater_t r;
    char word[STATE_WORD_MAX];
    const char *p;
    size_t len;
    stater_init(&r, buf_start(&b), b.len);
    ck_assert_int_eq(stater_rec(&r, word), 1);
    ck_assert_str_eq(word, "conn");
    ck_assert(stater_u64(&r) == UINT64_MAX);
    ck_assert(stater_i64(&r) == -42);
    ck_assert(stater_i64(&r) == INT64_MIN + 1);
    ck_assert(stater_u64(&r) == 0);
    stater_word(&r, word);
    ck_assert_str_eq(word, "MUTEX");
    stater_bytes(&r, &p, &len);
    ck_assert_uint_eq(len, sizeof(odd) - 1);
    ck_assert(memcmp(p, odd, len) == 0);
    stater_bytes(&r, &p, &len);
    ck_assert_uint_eq(len, 0);
    ck_assert(!stater_more(&r));
    ck_assert_int_eq(stater_rec(&r, word), 1);
    ck_assert_str_eq(word, "end");
    ck_assert_int_eq(stater_rec(&r, word), 0);
    ck_assert_int_eq(r.err, 0);
    buf_free(&b);
}
END_TEST

/* The text is as the format says, byte for byte. */
START_TEST(test_exact_text) {
    buf_t b = {0};
    statew_t w;
    statew_init(&w, &b);
    statew_rec(&w, "conn");
    statew_u64(&w, 7);
    statew_i64(&w, -30);
    statew_u64(&w, 1234567890123ULL);
    statew_str(&w, "ab");
    statew_rec(&w, "end");
    ck_assert_int_eq(statew_finish(&w), 0);
    static const char want[] = "conn 7 -30 1234567890123 2:ab\nend\n";
    ck_assert_uint_eq(b.len, sizeof(want) - 1);
    ck_assert(memcmp(buf_start(&b), want, b.len) == 0);
    buf_free(&b);
}
END_TEST

/* A reader that knows fewer fields skips the rest of a record, byte
 * strings with newlines included, and goes on with the next. */
START_TEST(test_unread_fields_skipped) {
    buf_t b = {0};
    statew_t w;
    statew_init(&w, &b);
    statew_rec(&w, "hold");
    statew_u64(&w, 7);
    statew_str(&w, "x\nhold 9\n");
    statew_u64(&w, 8);
    statew_rec(&w, "next");
    statew_u64(&w, 9);
    ck_assert_int_eq(statew_finish(&w), 0);

    stater_t r;
    char word[STATE_WORD_MAX];
    stater_init(&r, buf_start(&b), b.len);
    ck_assert_int_eq(stater_rec(&r, word), 1);
    ck_assert_uint_eq(stater_u64(&r), 7);
    ck_assert_int_eq(stater_rec(&r, word), 1);
    ck_assert_str_eq(word, "next");
    ck_assert_uint_eq(stater_u64(&r), 9);
    ck_assert_int_eq(stater_rec(&r, word), 0);
    ck_assert_int_eq(r.err, 0);
    buf_free(&b);
}
END_TEST

/* Each bad text is an error with a reason, never a read past the end. */
START_TEST(test_bad_texts) {
    static const struct {
        const char *text;
        int fields;        /* u64 fields to read from the first record */
        int bytes;         /* then a byte string */
    } cases[] = {
        {"conn 12", 1, 0},          /* no newline at the end */
        {"conn x\n", 1, 0},         /* a number missing */
        {"conn 99999999999999999999\n", 1, 0}, /* too large */
        {"conn 5:abc\n", 0, 1},     /* a byte string past the end */
        {"conn 3abc\n", 0, 1},      /* no ':' */
        {"conn\n", 1, 0},           /* a field missing */
        {"conn 1 2", 1, 0},         /* the unread rest never ends */
        {"conn 2:ab", 0, 1},        /* ends inside the record */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        stater_t r;
        char word[STATE_WORD_MAX];
        const char *p;
        size_t len;
        stater_init(&r, cases[i].text, strlen(cases[i].text));
        ck_assert_int_eq(stater_rec(&r, word), 1);
        for (int f = 0; f < cases[i].fields; f++) (void)stater_u64(&r);
        if (cases[i].bytes) stater_bytes(&r, &p, &len);
        while (stater_rec(&r, word)) {
        }
        ck_assert_msg(r.err, "case %zu (%s) was read without an error", i, cases[i].text);
        ck_assert(r.why[0] != '\0');
    }
}
END_TEST

/* A string that does not fit its room, or holds a NUL, is an error. */
START_TEST(test_str_bounds) {
    stater_t r;
    char word[STATE_WORD_MAX], out[4];
    static const char text[] = "s 4:abcd 2:a\0b\n";
    stater_init(&r, text, sizeof(text) - 1);
    ck_assert_int_eq(stater_rec(&r, word), 1);
    stater_str(&r, out, sizeof(out));
    ck_assert_int_eq(r.err, 1);
    stater_init(&r, "s 3:abc\n", 8);
    ck_assert_int_eq(stater_rec(&r, word), 1);
    stater_str(&r, out, sizeof(out));
    ck_assert_int_eq(r.err, 0);
    ck_assert_str_eq(out, "abc");
}
END_TEST

static Suite *statefmt_suite(void) {
    Suite *s = suite_create("statefmt");
    TCase *tc = tcase_create("records");
    tcase_add_test(tc, test_round_trip);
    tcase_add_test(tc, test_exact_text);
    tcase_add_test(tc, test_unread_fields_skipped);
    tcase_add_test(tc, test_bad_texts);
    tcase_add_test(tc, test_str_bounds);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(statefmt_suite());
    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
