/* Unit tests of daemon/reply.c: the words of the lock manager's answers.
 * SPDX-License-Identifier: MIT */
#include "daemon/reply.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

/* The LOCK_WORD_* flags of cmd's row in its kind's table, as session.c
 * finds them (0: a command of the session's own). */
static unsigned flags_of(proto_cmd_t cmd) {
    const lock_word_t *w;
    for (size_t i = 0; (w = lockmgr_word(i)) != NULL; i++)
        if (strcmp(w->word, proto_cmd_name(cmd)) == 0) return w->flags;
    return 0;
}

/* The line r makes for verb cmd, without its LF, in a static buffer. */
static const char *line_of(proto_cmd_t cmd, const lock_reply_t *r) {
    static char out[PROTO_REPLY_LIST_MAX];
    size_t cap = r->type == LOCK_REPLY_LIST ? PROTO_REPLY_LIST_MAX : PROTO_REPLY_MAX;
    int n = reply_format(out, cap, flags_of(cmd), r);
    ck_assert_int_gt(n, 0);
    ck_assert_int_eq(out[n - 1], '\n');
    ck_assert_uint_eq(strlen(out), (size_t)n);
    out[n - 1] = '\0';
    return out;
}

START_TEST(test_grants) {
    lock_reply_t r = {.type = LOCK_REPLY_GRANTED, .fence = 1732313241000001ULL, .holds = 2};
    ck_assert_str_eq(line_of(PROTO_CMD_LOCK, &r), "OK 1732313241000001 2");
    ck_assert_str_eq(line_of(PROTO_CMD_FAIRLOCK, &r), "OK 1732313241000001 2");
    /* a leader holds once: its grant is the fence alone */
    ck_assert_str_eq(line_of(PROTO_CMD_ELECT, &r), "OK 1732313241000001");
    uint64_t fences[] = {7, 9, 18446744073709551615ULL};
    lock_reply_t l = {.type = LOCK_REPLY_LIST, .list = fences, .count = 3};
    ck_assert_str_eq(line_of(PROTO_CMD_MLOCK, &l), "OK 7 9 18446744073709551615");
}
END_TEST

START_TEST(test_values_and_status) {
    lock_reply_t r = {.type = LOCK_REPLY_VALUE, .value = 3};
    ck_assert_str_eq(line_of(PROTO_CMD_UNLOCK, &r), "OK 3");
    r = (lock_reply_t){.type = LOCK_REPLY_TIMEOUT, .ttl_ms = 2000};
    ck_assert_str_eq(line_of(PROTO_CMD_TRYLOCK, &r), "TIMEOUT 2000");
    r = (lock_reply_t){.type = LOCK_REPLY_TIMEOUT, .ttl_ms = -1};
    ck_assert_str_eq(line_of(PROTO_CMD_TRYLOCK, &r), "TIMEOUT -1");
    r = (lock_reply_t){.type = LOCK_REPLY_FREE};
    ck_assert_str_eq(line_of(PROTO_CMD_STATUS, &r), "OK FREE");
    r = (lock_reply_t){.type = LOCK_REPLY_TAKEN, .ttl_ms = 28699};
    ck_assert_str_eq(line_of(PROTO_CMD_STATUS, &r), "OK TAKEN 28699");
    r = (lock_reply_t){.type = LOCK_REPLY_MINE, .holds = 2, .ttl_ms = 100, .fence = 5};
    ck_assert_str_eq(line_of(PROTO_CMD_STATUS, &r), "OK MINE 2 100 5");
    r = (lock_reply_t){.type = LOCK_REPLY_RW, .mode = LOCK_MODE_READ, .holders = 3, .holds = 1,
                       .ttl_ms = 10};
    ck_assert_str_eq(line_of(PROTO_CMD_STATUS, &r), "OK READ 3 1 10");
    r.mode = LOCK_MODE_WRITE;
    ck_assert_str_eq(line_of(PROTO_CMD_STATUS, &r), "OK WRITE 3 1 10");
    r = (lock_reply_t){.type = LOCK_REPLY_SEM, .holders = 4, .holds = 2};
    ck_assert_str_eq(line_of(PROTO_CMD_STATUS, &r), "OK SEM 4 2");
}
END_TEST

START_TEST(test_who_and_leader) {
    lock_reply_t r = {.type = LOCK_REPLY_HELD, .ttl_ms = 900, .holder_host = "h1",
                      .holder_dlockd_pid = 12, .holder_pid = 34, .holder_uid = 0};
    ck_assert_str_eq(line_of(PROTO_CMD_WHO, &r), "OK HELD 900 h1 12 34 0");
    /* what is not known is "-": another daemon's client, a holder not of a dlockd */
    r = (lock_reply_t){.type = LOCK_REPLY_HELD, .ttl_ms = 5, .holder_host = "",
                       .holder_dlockd_pid = -1, .holder_pid = -1, .holder_uid = -1};
    ck_assert_str_eq(line_of(PROTO_CMD_WHO, &r), "OK HELD 5 - - - -");
    r = (lock_reply_t){.type = LOCK_REPLY_LEADER, .fence = 8, .leader = "10.0.0.1:80",
                       .leader_len = 11};
    ck_assert_str_eq(line_of(PROTO_CMD_LEADER, &r), "OK 8 10.0.0.1:80");
    r = (lock_reply_t){.type = LOCK_REPLY_LEADER};
    ck_assert_str_eq(line_of(PROTO_CMD_OBSERVE, &r), "OK NONE");
}
END_TEST

START_TEST(test_errors) {
    lock_reply_t r = {.type = LOCK_REPLY_ERROR, .err = LOCK_ERR_NOTHELD};
    ck_assert_str_eq(line_of(PROTO_CMD_UNLOCK, &r),
                     "ERR NOTHELD this connection does not hold that lock");
    r = (lock_reply_t){.type = LOCK_REPLY_ERROR, .err = LOCK_ERR_NOTHELD, .name = "b", .len = 1};
    ck_assert_str_eq(line_of(PROTO_CMD_MUNLOCK, &r),
                     "ERR NOTHELD b is not held by this connection");
    r = (lock_reply_t){.type = LOCK_REPLY_ERROR, .err = LOCK_ERR_LIMIT,
                       .why = LOCK_WHY_MAX_LOCKS_UID};
    ck_assert_str_eq(line_of(PROTO_CMD_LOCK, &r), "ERR LIMIT max_locks_per_uid reached");
    r = (lock_reply_t){.type = LOCK_REPLY_ERROR, .err = LOCK_ERR_CANCELLED};
    ck_assert_str_eq(line_of(PROTO_CMD_LOCK, &r), "ERR CANCELLED the wait was cancelled");
    r = (lock_reply_t){.type = LOCK_REPLY_ERROR, .err = LOCK_ERR_KIND, .why = LOCK_WHY_HELD_AS,
                       .mode = LOCK_MODE_SEM, .name = "s1", .len = 2};
    ck_assert_str_eq(line_of(PROTO_CMD_LOCK, &r),
                     "ERR KIND s1 is a semaphore (SEMINIT, ACQUIRE, RELEASE)");
    r = (lock_reply_t){.type = LOCK_REPLY_ERROR, .err = LOCK_ERR_KIND,
                       .why = LOCK_WHY_RELEASE_AS, .mode = LOCK_MODE_FAIR};
    ck_assert_str_eq(line_of(PROTO_CMD_RUNLOCK, &r),
                     "ERR KIND held as a fair lock: UNLOCK releases it");
    r = (lock_reply_t){.type = LOCK_REPLY_ERROR, .err = LOCK_ERR_KIND,
                       .why = LOCK_WHY_UNSUPPORTED, .mode = LOCK_MODE_ELECT,
                       .detail = "quorum"};
    ck_assert_str_eq(line_of(PROTO_CMD_ELECT, &r),
                     "ERR KIND elections are not available with quorum");
    r = (lock_reply_t){.type = LOCK_REPLY_ERROR, .err = LOCK_ERR_ARGS,
                       .why = LOCK_WHY_PERMITS_RANGE, .limit = 10000};
    ck_assert_str_eq(line_of(PROTO_CMD_ACQUIRE, &r), "ERR ARGS permits are 1 to 10000");
    r = (lock_reply_t){.type = LOCK_REPLY_ERROR, .err = LOCK_ERR_BACKEND,
                       .why = LOCK_WHY_BACKEND, .detail = "redis unavailable: 1 of 3 nodes up"};
    ck_assert_str_eq(line_of(PROTO_CMD_LOCK, &r),
                     "ERR BACKEND redis unavailable: 1 of 3 nodes up");
    ck_assert_int_eq(reply_err(LOCK_ERR_DENIED), PROTO_ERR_DENIED);
}
END_TEST

/* Every why has words, or says NULL on purpose (the code's own text). */
START_TEST(test_every_why_worded) {
    char buf[PROTO_REPLY_MAX];
    for (int w = LOCK_WHY_BACKEND; w <= LOCK_WHY_MAX_OBSERVES; w++) {
        lock_reply_t r = {.type = LOCK_REPLY_ERROR, .err = LOCK_ERR_LIMIT, .why = (lock_why_t)w,
                          .mode = LOCK_MODE_MUTEX, .name = "x", .len = 1, .detail = "d"};
        const char *t = reply_error_words(&r, buf, sizeof(buf));
        ck_assert_msg(t != NULL && t[0] != '\0', "why %d has no words", w);
    }
}
END_TEST

/* A backend's long text is cut, the line stays one line within the cap. */
START_TEST(test_long_detail_cut) {
    char detail[2 * PROTO_REPLY_MAX];
    memset(detail, 'e', sizeof(detail) - 1);
    detail[sizeof(detail) - 1] = '\0';
    detail[10] = '\n'; /* a control byte in Redis's text never splits the reply */
    lock_reply_t r = {.type = LOCK_REPLY_ERROR, .err = LOCK_ERR_BACKEND, .why = LOCK_WHY_BACKEND,
                      .detail = detail};
    char out[PROTO_REPLY_MAX];
    int n = reply_format(out, sizeof(out), flags_of(PROTO_CMD_LOCK), &r);
    ck_assert_int_gt(n, 0);
    ck_assert_int_le(n, PROTO_ERROR_MAX);
    ck_assert_ptr_eq(memchr(out, '\n', (size_t)n - 1), NULL);
    ck_assert(memcmp(out + n - 4, "...\n", 4) == 0);
}
END_TEST

START_TEST(test_loss_reasons) {
    ck_assert_str_eq(reply_loss_reason(LOCK_LOST_EXPIRED), "expired");
    ck_assert_str_eq(reply_loss_reason(LOCK_LOST_FORCED), "forced");
    ck_assert_str_eq(reply_loss_reason(LOCK_LOST_BACKEND), "backend");
}
END_TEST

int main(void) {
    Suite *s = suite_create("reply");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_grants);
    tcase_add_test(tc, test_values_and_status);
    tcase_add_test(tc, test_who_and_leader);
    tcase_add_test(tc, test_errors);
    tcase_add_test(tc, test_every_why_worded);
    tcase_add_test(tc, test_long_detail_cut);
    tcase_add_test(tc, test_loss_reasons);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
