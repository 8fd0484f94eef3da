/* Integration tests of CANCEL: a wait withdrawn, the grant that raced it, and what is not a wait.
 * SPDX-License-Identifier: MIT */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/harness.h"

/* a holds name; b sends request then CANCEL right behind it: the wait is
 * withdrawn, b holds nothing, and once a lets go the name is free. */
static void cancel_behind(const char *hold, const char *request, const char *name,
                          const char *release, const char *take) {
    h_redis_start();
    int d = h_dlockd_start(NULL);
    h_conn_t *a = h_connect_index(d), *b = h_connect_index(d), *c = h_connect_index(d);
    h_send(a, "%s\n", hold);
    H_EXPECT_PREFIX(a, "OK ");
    h_send(b, "%s\n", request);
    h_await_waiters(c, 1);
    h_send(b, "CANCEL\n");
    H_EXPECT_PREFIX(b, "ERR CANCELLED ");
    H_EXPECT(b, "OK 1");
    h_await_waiters(c, 0);
    h_send(a, "%s\n", release);
    H_EXPECT(a, "OK 0");
    /* b is not queued any more: c gets the name, b is told nothing */
    h_send(c, "%s %s 0\n", take, name);
    H_EXPECT_PREFIX(c, "OK ");
    h_expect_silence(b, 200, "b's cancelled wait must not be granted");
    h_expect_reply(b, "PING", "OK PONG");
    h_close(a);
    h_close(b);
    h_close(c);
}

START_TEST(cancel_withdraws_lock) {
    cancel_behind("LOCK x", "LOCK x", "x", "UNLOCK x", "TRYLOCK");
}
END_TEST

START_TEST(cancel_withdraws_trylock_with_wait) {
    cancel_behind("LOCK x", "TRYLOCK x 60000", "x", "UNLOCK x", "TRYLOCK");
}
END_TEST

START_TEST(cancel_withdraws_fairlock) {
    cancel_behind("FAIRLOCK f", "FAIRLOCK f", "f", "UNLOCK f", "TRYFAIRLOCK");
}
END_TEST

/* Sent in one write with the request it cancels: the same. */
START_TEST(cancel_in_the_same_write) {
    h_redis_start();
    int d = h_dlockd_start(NULL);
    h_conn_t *a = h_connect_index(d), *b = h_connect_index(d);
    h_send(a, "LOCK x\n");
    H_EXPECT_PREFIX(a, "OK ");
    h_send(b, "LOCK x\r\n\nCANCEL\nPING\n");
    H_EXPECT_PREFIX(b, "ERR CANCELLED ");
    H_EXPECT(b, "OK 1");
    H_EXPECT(b, "OK PONG");
    h_send(b, "STATUS x\n");
    H_EXPECT_PREFIX(b, "OK TAKEN ");
    h_close(a);
    h_close(b);
}
END_TEST

/* c gets name within H_WAIT_MS: a withdrawn acquire that was in Redis is
 * undone when its answer comes back, and that release wakes c's wait. */
static void await_free(h_conn_t *c, const char *name) {
    h_send(c, "TRYLOCK %s %d\n", name, H_WAIT_MS);
    H_EXPECT_PREFIX(c, "OK ");
    h_send(c, "UNLOCK %s\n", name);
    H_EXPECT(c, "OK 0");
}

/* CANCEL with nothing waiting, or after the grant raced it: OK 0, and the
 * lock granted stays held (the client releases it). A free name's LOCK
 * waits for Redis's answer: a CANCEL right behind it withdraws it, and
 * the grant Redis made is undone. */
START_TEST(cancel_too_late_or_idle) {
    h_redis_start();
    int d = h_dlockd_start(NULL);
    h_conn_t *b = h_connect_index(d), *c = h_connect_index(d);
    h_expect_reply(b, "CANCEL", "OK 0");
    h_send(b, "LOCK x\n");
    H_EXPECT_PREFIX(b, "OK ");
    h_expect_reply(b, "CANCEL", "OK 0"); /* the grant came first */
    h_expect_reply(b, "UNLOCK x", "OK 0");
    h_send(b, "LOCK y\nCANCEL\n"); /* withdrawn while Redis runs it */
    H_EXPECT_PREFIX(b, "ERR CANCELLED ");
    H_EXPECT(b, "OK 1");
    await_free(c, "y");
    h_close(c);
    h_expect_reply(b, "cancel", "OK 0"); /* the word is case-insensitive */
    h_expect_reply(b, "CANCEL now", "ERR ARGS CANCEL [#<tag>]");
    h_close(b);
}
END_TEST

/* CANCEL only withdraws the wait it follows: behind another request it
 * comes in its turn, after the wait ended, and says 0. */
START_TEST(cancel_not_next_is_not_applied) {
    h_redis_start();
    int d = h_dlockd_start(NULL);
    h_conn_t *a = h_connect_index(d), *b = h_connect_index(d), *c = h_connect_index(d);
    h_send(a, "LOCK x\n");
    H_EXPECT_PREFIX(a, "OK ");
    h_send(b, "LOCK x\nPING\nCANCEL\n");
    h_await_waiters(c, 1);
    h_expect_silence(b, 200, "the wait goes on: CANCEL is not right behind it");
    h_send(a, "UNLOCK x\n");
    H_EXPECT(a, "OK 0");
    H_EXPECT_PREFIX(b, "OK ");
    H_EXPECT(b, "OK PONG");
    H_EXPECT(b, "OK 0");
    h_close(a);
    h_close(b);
    h_close(c);
}
END_TEST

/* A semaphore's ACQUIRE and a reader's RLOCK are waits too. */
START_TEST(cancel_withdraws_acquire_and_rlock) {
    h_redis_start();
    int d = h_dlockd_start(NULL);
    h_conn_t *a = h_connect_index(d), *b = h_connect_index(d), *c = h_connect_index(d);
    h_expect_reply(a, "SEMINIT s 1", "OK 1");
    h_expect_reply(a, "ACQUIRE s 1", "OK 1");
    h_send(b, "ACQUIRE s 1\n");
    h_await_waiters(c, 1);
    h_send(b, "CANCEL\n");
    H_EXPECT_PREFIX(b, "ERR CANCELLED ");
    H_EXPECT(b, "OK 1");
    h_send(a, "WLOCK r\n");
    H_EXPECT_PREFIX(a, "OK ");
    h_send(b, "RLOCK r\n");
    h_await_waiters(c, 1);
    h_send(b, "CANCEL\n");
    H_EXPECT_PREFIX(b, "ERR CANCELLED ");
    H_EXPECT(b, "OK 1");
    h_expect_reply(b, "STATUS s", "OK SEM 0 0");
    long long cancelled = h_info_value(c, "cancelled");
    ck_assert_int_eq(cancelled, 2);
    h_close(a);
    h_close(b);
    h_close(c);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("cancel");
    TCase *tc = tcase_create("cancel");
    tcase_add_checked_fixture(tc, h_setup, h_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, cancel_withdraws_lock);
    tcase_add_test(tc, cancel_withdraws_trylock_with_wait);
    tcase_add_test(tc, cancel_withdraws_fairlock);
    tcase_add_test(tc, cancel_in_the_same_write);
    tcase_add_test(tc, cancel_too_late_or_idle);
    tcase_add_test(tc, cancel_not_next_is_not_applied);
    tcase_add_test(tc, cancel_withdraws_acquire_and_rlock);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return h_main(suite());
}
