/* Unit tests of daemon/lock's count-down latches on a fake backend.
 * SPDX-License-Identifier: MIT
 *
 * The world they run in (clients, requests, the fake) is tests/unit/lockmgr_support.c. */
#include "tests/unit/lockmgr_support.h"

#include <check.h>
#include <stddef.h>

#include "daemon/lock/lockmgr.h"
#include "tests/unit/fake_backend.h"

/* ---- count-down latches -----------------------------------------------------------
 * LATCHSET, COUNTDOWN and LATCHCOUNT are LOCK_VERB_OWN requests of mode
 * LATCH (latch.c's LATCH_OP_SET, _COUNTDOWN, _COUNT: one backend call
 * each, latch.lua's 'i', 'r' and 's'); AWAIT and TRYAWAIT are its LOCK
 * and TRYLOCK, waits whose attempt is a look at the count (latch.lua's
 * 'a': GRANTED at 0, else TAKEN with the count). One look serves every
 * waiter queued when it went; the cases count the looks (ACQUIREs of mode
 * LATCH submitted). Another daemon's or Redisson's changes are made in
 * the model directly (fake_latch_*), and their messages delivered by
 * fake_publish: the lock manager's own COUNTDOWN needs none. */

/* latch.c's LATCH_OP_* (lock_request_t.op of mode LATCH). */
enum { OP_SET = 0, OP_COUNTDOWN = 1, OP_COUNT = 2 };

#define NWAIT 5 /* waiters of the many-waiter cases */

static int latchset_req(client_t *c, const char *name, uint32_t count) {
    return request_own(c, LOCK_MODE_LATCH, OP_SET, name, count);
}

static int countdown_req(client_t *c, const char *name) {
    return request_own(c, LOCK_MODE_LATCH, OP_COUNTDOWN, name, 0);
}

static int latchcount_req(client_t *c, const char *name) {
    return request_own(c, LOCK_MODE_LATCH, OP_COUNT, name, 0);
}

static int await_req(client_t *c, const char *name) {
    return request_mode(c, LOCK_VERB_LOCK, LOCK_MODE_LATCH, name, 0, 0);
}

static int tryawait_req(client_t *c, const char *name, uint32_t wait_ms) {
    return request_mode(c, LOCK_VERB_TRYLOCK, LOCK_MODE_LATCH, name, wait_ms, 0);
}

/* A request of the latch's own answered by Redis with v. */
static void own_is(client_t *c, int at_once, long long v) {
    ck_assert_int_eq(at_once, 0);
    fake_settle(fb);
    expect_value(c, v);
}

static void latchset_ok(client_t *c, const char *name, uint32_t count, long long v) {
    own_is(c, latchset_req(c, name, count), v);
}

static void countdown_ok(client_t *c, const char *name, long long left) {
    own_is(c, countdown_req(c, name), left);
}

static void latchcount_is(client_t *c, const char *name, long long count) {
    own_is(c, latchcount_req(c, name), count);
}

/* Looks at the count submitted so far. */
static size_t looks(void) {
    return fake_log_count_mode(fb, 0, BACKEND_ACQUIRE, BACKEND_LATCH);
}

/* Waits answered OK 0 (a latch's AWAIT and TRYAWAIT are answered VALUE 0). */
static void released(client_t *c) {
    expect_value(c, 0);
}

/* c's AWAIT of name, settled: it waits on (the count is not 0). */
static void await_waits(client_t *c, const char *name) {
    ck_assert_int_eq(await_req(c, name), 0);
    fake_settle(fb);
    no_reply(c);
}

/* LATCHSET sets the count once (OK 1), then OK 0 and the count unchanged;
 * 0 and past the protocol's largest number are ERR ARGS, sent nowhere. */
START_TEST(test_latch_latchset) {
    client_t *a = client(), *b = client();
    ck_assert_int_eq(latchset_req(a, "l", 3), 0);
    queued_mode_is(0, BACKEND_INIT, BACKEND_LATCH, "l", a);
    ck_assert_uint_eq(fake_queued_op(fb, 0)->count, 3);
    fake_run(fb);
    expect_value(a, 1);
    ck_assert_int_eq(fake_latch_count(fb, "l"), 3);
    ck_assert(fake_latch_marked(fb, "l"));
    ck_assert_uint_eq(fake_latch_messages(fb, "l"), 1); /* Redisson's NEW_COUNT */
    ck_assert_int_eq(fake_latch_last_message(fb, "l"), '1');
    latchset_ok(b, "l", 9, 0);
    ck_assert_int_eq(fake_latch_count(fb, "l"), 3);
    ck_assert_uint_eq(fake_latch_messages(fb, "l"), 1);

    /* One Redisson set (no mark) is a latch all the same. */
    ck_assert_int_eq(fake_latch_redisson_set(fb, "r", 2), 1);
    latchset_ok(a, "r", 5, 0);
    ck_assert_int_eq(fake_latch_count(fb, "r"), 2);

    size_t ops = fake_log_len(fb);
    ck_assert_int_eq(latchset_req(a, "z", 0), 1);
    expect_error(a, LOCK_ERR_ARGS);
    ck_assert_int_eq(latchset_req(a, "z", 2147483648u), 1);
    expect_error(a, LOCK_ERR_ARGS);
    ck_assert_uint_eq(fake_log_len(fb), ops);
    ck_assert_int_eq(fake_latch_count(fb, "z"), -1);
    latchset_ok(a, "z", 2147483647u, 1);
    ck_assert_int_eq(fake_latch_count(fb, "z"), 2147483647);
    ck_assert_uint_eq(stats().locks_held, 0); /* a latch has no holder */
    ck_assert_uint_eq(lockmgr_owner_held(a->o), 0);
}
END_TEST

/* COUNTDOWN answers the count left; the one that reaches 0 deletes the
 * latch and its mark and publishes '0'; of no latch it answers 0 and
 * changes and publishes nothing. */
START_TEST(test_latch_countdown) {
    client_t *a = client(), *b = client();
    latchset_ok(a, "l", 3, 1);
    ck_assert_int_eq(countdown_req(b, "l"), 0);
    queued_mode_is(0, BACKEND_RELEASE, BACKEND_LATCH, "l", b);
    fake_run(fb);
    expect_value(b, 2);
    ck_assert_int_eq(fake_latch_count(fb, "l"), 2);
    ck_assert_uint_eq(fake_latch_messages(fb, "l"), 1); /* LATCHSET's only */
    countdown_ok(a, "l", 1);
    countdown_ok(b, "l", 0);
    ck_assert_int_eq(fake_latch_count(fb, "l"), -1);
    ck_assert(!fake_latch_marked(fb, "l"));
    ck_assert_uint_eq(fake_latch_messages(fb, "l"), 2);
    ck_assert_int_eq(fake_latch_last_message(fb, "l"), '0'); /* ZERO_COUNT */

    countdown_ok(a, "l", 0); /* gone: nothing changes */
    countdown_ok(a, "never", 0);
    ck_assert_int_eq(fake_latch_count(fb, "l"), -1);
    ck_assert_int_eq(fake_latch_count(fb, "never"), -1);
    ck_assert(!fake_latch_marked(fb, "never"));
    ck_assert_uint_eq(fake_latch_messages(fb, "l"), 2);
    ck_assert_uint_eq(fake_latch_messages(fb, "never"), 0);

    /* One that Redisson set counts down alike. */
    ck_assert_int_eq(fake_latch_redisson_set(fb, "r", 2), 1);
    countdown_ok(a, "r", 1);
    countdown_ok(a, "r", 0);
    ck_assert_int_eq(fake_latch_count(fb, "r"), -1);
    ck_assert_uint_eq(stats().waiters, 0);
}
END_TEST

/* LATCHCOUNT: the count, 0 when there is none; it changes nothing. */
START_TEST(test_latch_latchcount) {
    client_t *a = client();
    ck_assert_int_eq(latchcount_req(a, "l"), 0);
    queued_mode_is(0, BACKEND_STATUS, BACKEND_LATCH, "l", a);
    fake_run(fb);
    expect_value(a, 0);
    ck_assert_int_eq(fake_latch_count(fb, "l"), -1);
    latchset_ok(a, "l", 4, 1);
    latchcount_is(a, "l", 4);
    ck_assert_int_eq(fake_latch_countdown(fb, "l"), 3); /* another daemon's */
    latchcount_is(a, "l", 3);
    ck_assert_int_eq(fake_latch_redisson_countdown(fb, "l"), 2);
    latchcount_is(a, "l", 2);
    ck_assert_int_eq(fake_latch_redisson_set(fb, "r", 7), 1);
    latchcount_is(a, "r", 7);
    ck_assert_int_eq(fake_latch_count(fb, "r"), 7);
    ck_assert_uint_eq(fake_latch_messages(fb, "l"), 1);
}
END_TEST

/* AWAIT (and TRYAWAIT, with or without a wait) of a latch that is 0 or
 * none: one look, OK 0, no watch, nothing made in Redis. */
START_TEST(test_latch_await_at_once) {
    client_t *a = client(), *b = client();
    ck_assert_int_eq(await_req(a, "l"), 0);
    no_reply(a);
    queued_mode_is(0, BACKEND_ACQUIRE, BACKEND_LATCH, "l", a);
    ck_assert_uint_eq(stats().waiters, 1);
    fake_run(fb);
    released(a);
    ck_assert_uint_eq(looks(), 1);
    ck_assert_uint_eq(fake_watch_calls(fb, "l"), 0);
    ck_assert_int_eq(fake_latch_count(fb, "l"), -1);
    ck_assert_uint_eq(stats().waiters, 0);
    ck_assert_uint_eq(stats().locks_held, 0);
    ck_assert_uint_eq(lockmgr_owner_held(a->o), 0);

    ck_assert_int_eq(tryawait_req(a, "l", 0), 0);
    fake_settle(fb);
    released(a);
    ck_assert_int_eq(tryawait_req(b, "l", 500), 0);
    fake_settle(fb);
    released(b);

    /* Counted down to 0: gone, so 0. */
    latchset_ok(a, "m", 1, 1);
    countdown_ok(a, "m", 0);
    ck_assert_int_eq(await_req(b, "m"), 0);
    fake_settle(fb);
    released(b);
    ck_assert_uint_eq(looks(), 4);
    ck_assert_uint_eq(fake_watch_calls(fb, "l") + fake_watch_calls(fb, "m"), 0);
    timers_advance(tm, 5 * LOCKMGR_NO_TTL_RETRY_MS); /* no retry turn left behind */
    ck_assert_uint_eq(fake_queued(fb), 0);
}
END_TEST

/* Many AWAITs: the first looks for itself; those that came while its look
 * was in flight share one look (their last's); after that, one look (the
 * watch's confirmation) serves them all. The last COUNTDOWN of this
 * daemon releases them all with ONE look and no message. */
START_TEST(test_latch_many_await_one_look_local_countdown) {
    client_t *a = client(), *w[NWAIT];
    latchset_ok(a, "l", 2, 1);
    for (int i = 0; i < NWAIT; i++) w[i] = client();
    for (int i = 0; i < NWAIT; i++) ck_assert_int_eq(await_req(w[i], "l"), 0);
    ck_assert_uint_eq(fake_queued(fb), 1); /* one look, the first's */
    queued_mode_is(0, BACKEND_ACQUIRE, BACKEND_LATCH, "l", w[0]);
    ck_assert_uint_eq(stats().waiters, NWAIT);
    fake_run(fb); /* 2: w[0] waits; the others' look goes, their last's */
    ck_assert_uint_eq(fake_queued(fb), 1);
    queued_mode_is(0, BACKEND_ACQUIRE, BACKEND_LATCH, "l", w[NWAIT - 1]);
    ck_assert(fake_watched(fb, "l"));
    ck_assert_int_eq(fake_watch_mode(fb, "l"), BACKEND_LATCH);
    fake_settle(fb); /* ... and the watch's confirmation: one more for all */
    ck_assert_uint_eq(looks(), 3);
    for (int i = 0; i < NWAIT; i++) no_reply(w[i]);

    uint64_t published = fake_stats(fb)->published;
    size_t mark = looks();
    countdown_ok(a, "l", 1); /* not 0: no look */
    ck_assert_uint_eq(looks(), mark);
    for (int i = 0; i < NWAIT; i++) no_reply(w[i]);
    ck_assert_int_eq(countdown_req(a, "l"), 0);
    fake_run(fb); /* 0: one look goes for them all */
    expect_value(a, 0);
    ck_assert_uint_eq(fake_queued(fb), 1);
    queued_mode_is(0, BACKEND_ACQUIRE, BACKEND_LATCH, "l", w[NWAIT - 1]);
    for (int i = 0; i < NWAIT; i++) no_reply(w[i]);
    fake_run(fb);
    for (int i = 0; i < NWAIT; i++) released(w[i]);
    ck_assert_uint_eq(looks(), mark + 1);
    ck_assert_uint_eq(fake_stats(fb)->published, published); /* no message delivered */
    ck_assert_uint_eq(stats().waiters, 0);
    ck_assert(!fake_watched(fb, "l"));
    fake_settle(fb);
    timers_advance(tm, 5 * LOCKMGR_NO_TTL_RETRY_MS);
    ck_assert_uint_eq(fake_queued(fb), 0);
    ck_assert_uint_eq(looks(), mark + 1);
}
END_TEST

/* Another client's countdown to 0 (another daemon's, Redisson's), done in
 * Redis: its message brings one look, which releases every waiter here.
 * A message before 0 (a new count) brings a look that finds it not 0. */
START_TEST(test_latch_released_by_message) {
    client_t *w[NWAIT];
    ck_assert_int_eq(fake_latch_redisson_set(fb, "l", 2), 1);
    for (int i = 0; i < NWAIT; i++) {
        w[i] = client();
        await_waits(w[i], "l");
    }
    size_t mark = looks();
    ck_assert_int_eq(fake_latch_redisson_countdown(fb, "l"), 1);
    fake_settle(fb);
    ck_assert_uint_eq(looks(), mark); /* not 0: Redisson publishes nothing */
    ck_assert_int_eq(fake_publish(fb, "l"), 1); /* a message all the same (a '1') */
    ck_assert_uint_eq(fake_queued(fb), 1);
    fake_settle(fb);
    ck_assert_uint_eq(looks(), mark + 1);
    for (int i = 0; i < NWAIT; i++) no_reply(w[i]);

    ck_assert_int_eq(fake_latch_redisson_countdown(fb, "l"), 0);
    ck_assert_int_eq(fake_latch_last_message(fb, "l"), '0');
    fake_settle(fb);
    for (int i = 0; i < NWAIT; i++) no_reply(w[i]); /* the message is not here yet */
    ck_assert_int_eq(fake_publish(fb, "l"), 1);
    ck_assert_uint_eq(fake_queued(fb), 1);
    fake_run(fb);
    for (int i = 0; i < NWAIT; i++) released(w[i]);
    ck_assert_uint_eq(looks(), mark + 2);
    ck_assert(!fake_watched(fb, "l"));
    ck_assert_uint_eq(stats().waiters, 0);

    /* Another daemon's COUNTDOWN (latch.lua's, its mark deleted too). */
    ck_assert_int_eq(fake_latch_set(fb, "m", 1), 1);
    for (int i = 0; i < 2; i++) await_waits(w[i], "m");
    ck_assert(fake_latch_marked(fb, "m"));
    ck_assert_int_eq(fake_latch_countdown(fb, "m"), 0);
    ck_assert(!fake_latch_marked(fb, "m"));
    ck_assert_int_eq(fake_publish(fb, "m"), 1);
    fake_settle(fb);
    released(w[0]);
    released(w[1]);
}
END_TEST

/* A latch deleted by hand publishes nothing: the waiters look again once
 * a second (LOCKMGR_NO_TTL_RETRY_MS) all the same, one look for all. */
START_TEST(test_latch_retry_without_message) {
    client_t *a = client(), *b = client(), *c = client();
    latchset_ok(a, "l", 5, 1);
    await_waits(b, "l");
    await_waits(c, "l");
    size_t mark = looks();
    timers_advance(tm, LOCKMGR_NO_TTL_RETRY_MS);
    ck_assert_uint_eq(looks(), mark + 1);
    fake_settle(fb);
    no_reply(b);
    no_reply(c);
    fake_latch_del(fb, "l");
    timers_advance(tm, LOCKMGR_NO_TTL_RETRY_MS - 1);
    ck_assert_uint_eq(looks(), mark + 1);
    timers_advance(tm, 1);
    ck_assert_uint_eq(looks(), mark + 2);
    fake_settle(fb);
    released(b);
    released(c);
    ck_assert_uint_eq(stats().waiters, 0);
}
END_TEST

/* A message that comes while a look is in flight (the look may have run
 * before the change it tells of): the waiters look again at once, not a
 * second later. */
START_TEST(test_latch_message_during_look) {
    client_t *a = client(), *b = client(), *c = client();
    latchset_ok(a, "l", 1, 1);
    await_waits(b, "l");
    await_waits(c, "l");
    size_t mark = looks();
    timers_advance(tm, LOCKMGR_NO_TTL_RETRY_MS); /* the retry turn's look */
    ck_assert_uint_eq(looks(), mark + 1);
    ck_assert_int_eq(fake_publish(fb, "l"), 1); /* while it is in flight */
    ck_assert_uint_eq(looks(), mark + 1);
    ck_assert_uint_eq(fake_run_one(fb), 1); /* it read 1 */
    ck_assert_uint_eq(looks(), mark + 2);   /* ... and they look again now */
    queued_mode_is(0, BACKEND_ACQUIRE, BACKEND_LATCH, "l", c);
    ck_assert_int_eq(fake_latch_countdown(fb, "l"), 0); /* the change the message told */
    fake_run(fb);
    released(b);
    released(c);
}
END_TEST

/* TRYAWAIT 0: one look, TIMEOUT <count> at once after it, no watch; the
 * same with AWAITs waiting (its own look, not TIMEOUT -1 unasked). */
START_TEST(test_latch_tryawait_zero) {
    client_t *a = client(), *b = client(), *c = client(), *d = client(), *e = client();
    latchset_ok(a, "l", 3, 1);
    ck_assert_int_eq(tryawait_req(b, "l", 0), 0);
    queued_mode_is(0, BACKEND_ACQUIRE, BACKEND_LATCH, "l", b);
    fake_run(fb);
    expect_timeout(b, 3);
    ck_assert_uint_eq(fake_watch_calls(fb, "l"), 0);
    ck_assert_uint_eq(stats().waiters, 0);
    ck_assert_uint_eq(stats().timeouts, 1);
    countdown_ok(a, "l", 2);
    ck_assert_int_eq(tryawait_req(b, "l", 0), 0);
    fake_settle(fb);
    expect_timeout(b, 2);

    await_waits(c, "l");
    size_t mark = looks();
    ck_assert_int_eq(tryawait_req(b, "l", 0), 0);
    ck_assert_uint_eq(fake_queued(fb), 1);
    queued_mode_is(0, BACKEND_ACQUIRE, BACKEND_LATCH, "l", b);
    fake_run(fb);
    expect_timeout(b, 2);
    ck_assert_uint_eq(looks(), mark + 1);
    no_reply(c);
    ck_assert_uint_eq(stats().waiters, 1);
    countdown_ok(a, "l", 1);
    ck_assert_int_eq(tryawait_req(b, "l", 0), 0);
    fake_settle(fb);
    expect_timeout(b, 1);

    /* Two that come while one look is in flight share the next: the one
     * that is not its waiter learns the count from it too. */
    ck_assert_int_eq(tryawait_req(b, "l", 0), 0); /* its look in flight */
    ck_assert_int_eq(tryawait_req(d, "l", 0), 0);
    ck_assert_int_eq(tryawait_req(e, "l", 0), 0);
    mark = looks();
    fake_run(fb); /* b's: TIMEOUT 1; then one look for d and e, e's */
    expect_timeout(b, 1);
    ck_assert_uint_eq(fake_queued(fb), 1);
    queued_mode_is(0, BACKEND_ACQUIRE, BACKEND_LATCH, "l", e);
    fake_run(fb);
    expect_timeout(d, 1);
    expect_timeout(e, 1);
    ck_assert_uint_eq(looks(), mark + 1);
    no_reply(c);
    ck_assert_uint_eq(stats().waiters, 1);
    countdown_ok(a, "l", 0);
    fake_settle(fb);
    released(c);
}
END_TEST

/* TRYAWAIT with a wait: TIMEOUT with the count as last read when the wait
 * runs out (a count down that does not reach 0 publishes nothing), OK 0
 * if the count reaches 0 before. */
START_TEST(test_latch_tryawait_wait_times_out) {
    client_t *a = client(), *b = client(), *c = client(), *d = client();
    latchset_ok(a, "l", 2, 1);
    ck_assert_int_eq(tryawait_req(b, "l", 500), 0);
    fake_settle(fb);
    ck_assert(fake_watched(fb, "l"));
    timers_advance(tm, 499);
    fake_settle(fb);
    no_reply(b);
    timers_advance(tm, 1);
    expect_timeout(b, 2);
    ck_assert(!fake_watched(fb, "l"));
    ck_assert_uint_eq(stats().waiters, 0);
    ck_assert_uint_eq(stats().timeouts, 1);
    timers_advance(tm, 5 * LOCKMGR_NO_TTL_RETRY_MS); /* its retry turn went with it */
    ck_assert_uint_eq(fake_queued(fb), 0);

    ck_assert_int_eq(tryawait_req(b, "l", 300), 0);
    fake_settle(fb);
    ck_assert_int_eq(fake_latch_countdown(fb, "l"), 1); /* no message */
    timers_advance(tm, 300);
    expect_timeout(b, 2); /* what it read 300 ms ago */

    ck_assert_int_eq(tryawait_req(b, "l", 5000), 0);
    fake_settle(fb);
    timers_advance(tm, 1000); /* the retry turn: it reads 1 */
    fake_settle(fb);
    no_reply(b);
    timers_advance(tm, 3999);
    fake_settle(fb);
    no_reply(b);
    timers_advance(tm, 1);
    expect_timeout(b, 1); /* what the retry turn's look read */

    /* Two that come while a look is in flight share the next look, the
     * later one's: the earlier one's TIMEOUT tells the count it read too. */
    ck_assert_int_eq(await_req(c, "l"), 0);
    ck_assert_int_eq(tryawait_req(b, "l", 300), 0);
    ck_assert_int_eq(tryawait_req(d, "l", 300), 0);
    fake_run(fb); /* c's look: 1; the next is d's */
    ck_assert_uint_eq(fake_queued(fb), 1);
    queued_mode_is(0, BACKEND_ACQUIRE, BACKEND_LATCH, "l", d);
    fake_settle(fb);
    timers_advance(tm, 300);
    expect_timeout(b, 1);
    expect_timeout(d, 1);
    no_reply(c);

    ck_assert_int_eq(tryawait_req(b, "l", 5000), 0);
    fake_settle(fb);
    timers_advance(tm, 100);
    countdown_ok(a, "l", 0);
    released(b);
    released(c);
    timers_advance(tm, 5000);
    ck_assert_uint_eq(replies_left(b), 0);
    ck_assert_uint_eq(stats().timeouts, 5);
}
END_TEST

/* CANCEL of one AWAIT among several: ERR CANCELLED, the others wait on
 * and are released as before; of the one whose look is in flight too. */
START_TEST(test_latch_cancel_one) {
    client_t *a = client(), *b = client(), *c = client(), *d = client(), *e = client();
    latchset_ok(a, "l", 1, 1);
    await_waits(b, "l");
    await_waits(c, "l");
    await_waits(d, "l");
    ck_assert_int_eq(lockmgr_cancel(mgr, c->o, c), 1);
    lock_reply_t r = expect_error(c, LOCK_ERR_CANCELLED);
    ck_assert_int_eq(r.why, LOCK_WHY_NONE);
    ck_assert_int_eq(lockmgr_cancel(mgr, c->o, c), 0); /* nothing waits now */
    ck_assert_uint_eq(stats().waiters, 2);
    ck_assert_uint_eq(stats().cancelled, 1);
    ck_assert(fake_watched(fb, "l"));
    timers_advance(tm, LOCKMGR_NO_TTL_RETRY_MS);
    fake_settle(fb);
    no_reply(b);
    no_reply(d);

    /* e's look in flight (its own: it came last), then withdrawn. */
    ck_assert_int_eq(await_req(e, "l"), 0);
    queued_mode_is(0, BACKEND_ACQUIRE, BACKEND_LATCH, "l", e);
    ck_assert_int_eq(lockmgr_cancel(mgr, e->o, e), 1);
    expect_error(e, LOCK_ERR_CANCELLED);
    fake_settle(fb);
    no_reply(b);
    no_reply(d);
    ck_assert_uint_eq(stats().waiters, 2);

    size_t mark = looks();
    countdown_ok(a, "l", 0);
    released(b);
    released(d);
    ck_assert_uint_eq(looks(), mark + 1);
    ck_assert_uint_eq(replies_left(c), 0);
    ck_assert_uint_eq(replies_left(e), 0);
    ck_assert_uint_eq(stats().waiters, 0);
    ck_assert(!fake_watched(fb, "l"));
}
END_TEST

/* A waiter that comes while a look is in flight is not answered by that
 * look (it may have run before the waiter asked): it gets its own. Here
 * the look finds no latch, a LATCHSET follows it, and the later AWAIT,
 * answered by the first look, would have missed the new count. */
START_TEST(test_latch_arrival_during_look_looks_itself) {
    client_t *a = client(), *b = client(), *c = client();
    ck_assert_int_eq(await_req(b, "l"), 0);
    ck_assert_int_eq(latchset_req(a, "l", 1), 0);
    ck_assert_int_eq(await_req(c, "l"), 0); /* after the LATCHSET, in the client's order */
    ck_assert_uint_eq(fake_queued(fb), 2);  /* b's look, the LATCHSET; no look of c's yet */
    queued_mode_is(0, BACKEND_ACQUIRE, BACKEND_LATCH, "l", b);
    queued_mode_is(1, BACKEND_INIT, BACKEND_LATCH, "l", a);
    size_t mark = fake_log_len(fb);
    fake_run(fb);
    released(b);
    expect_value(a, 1);
    no_reply(c);
    ck_assert_uint_eq(logged_for(mark, BACKEND_ACQUIRE, c), 1);
    fake_settle(fb);
    no_reply(c); /* its own look found 1 */
    ck_assert_uint_eq(stats().waiters, 1);
    countdown_ok(a, "l", 0);
    released(c);

    /* The same when the look finds a count: the waiter that came meanwhile
     * looks itself at once, rather than waiting with the look's waiter for
     * a message. */
    latchset_ok(a, "m", 1, 1);
    ck_assert_int_eq(await_req(b, "m"), 0);
    ck_assert_int_eq(await_req(c, "m"), 0);
    fake_run(fb); /* b's look: 1 */
    ck_assert_uint_eq(fake_queued(fb), 1);
    queued_mode_is(0, BACKEND_ACQUIRE, BACKEND_LATCH, "m", c);
    fake_settle(fb);
    no_reply(b);
    no_reply(c);
    countdown_ok(a, "m", 0);
    released(b);
    released(c);
}
END_TEST

/* An owner dropped while it awaits leaves nothing: no waiter, no watch, no
 * retry turn, no local kind on the name; nor when its look is in flight. */
START_TEST(test_latch_owner_drop) {
    client_t *a = client(), *b = client(), *c = client();
    latchset_ok(a, "l", 2, 1);
    await_waits(b, "l");
    ck_assert(fake_watched(fb, "l"));
    drop(b);
    ck_assert_uint_eq(stats().waiters, 0);
    ck_assert(!fake_watched(fb, "l"));
    size_t ops = fake_log_len(fb);
    timers_advance(tm, 5 * LOCKMGR_NO_TTL_RETRY_MS);
    fake_settle(fb);
    ck_assert_uint_eq(fake_log_len(fb), ops);

    ck_assert_int_eq(await_req(c, "l"), 0);
    queued_mode_is(0, BACKEND_ACQUIRE, BACKEND_LATCH, "l", c);
    drop(c);
    ck_assert_uint_eq(stats().waiters, 0);
    fake_settle(fb); /* TAKEN for nobody: no watch, no answer */
    ck_assert_uint_eq(fake_watch_calls(fb, "l"), 1);
    ck_assert(!fake_watched(fb, "l"));
    ops = fake_log_len(fb);
    timers_advance(tm, 5 * LOCKMGR_NO_TTL_RETRY_MS);
    ck_assert_uint_eq(fake_log_len(fb), ops);
    ck_assert_int_eq(fake_latch_count(fb, "l"), 2); /* nothing changed in Redis */

    /* The name is no latch of this daemon's any more: once Redis has none,
     * it may be locked. */
    ck_assert_int_eq(fake_latch_countdown(fb, "l"), 1);
    ck_assert_int_eq(fake_latch_countdown(fb, "l"), 0);
    lock_ok(a, "l", 0);
    ck_assert_uint_eq(stats().locks_held, 1);
}
END_TEST

/* ERR KIND both ways: a latch's request of a name locked (here, or in
 * Redis), and another kind's of a latch (waited for here, or in Redis),
 * nothing changed anywhere. */
START_TEST(test_latch_kind_errors) {
    client_t *a = client(), *b = client(), *c = client();
    lock_reply_t r;

    /* Held here as a plain lock: refused before Redis. */
    lock_ok(a, "p", 0);
    size_t ops = fake_log_len(fb);
    ck_assert_int_eq(await_req(b, "p"), 1);
    r = expect_error(b, LOCK_ERR_KIND);
    why_is(&r, LOCK_WHY_HELD_AS, LOCK_MODE_MUTEX);
    ck_assert_int_eq(tryawait_req(b, "p", 0), 1);
    expect_error(b, LOCK_ERR_KIND);
    ck_assert_int_eq(latchset_req(b, "p", 2), 1);
    r = expect_error(b, LOCK_ERR_KIND);
    why_is(&r, LOCK_WHY_HELD_AS, LOCK_MODE_MUTEX);
    ck_assert_int_eq(countdown_req(b, "p"), 1);
    expect_error(b, LOCK_ERR_KIND);
    ck_assert_int_eq(latchcount_req(b, "p"), 1);
    expect_error(b, LOCK_ERR_KIND);
    ck_assert_uint_eq(fake_log_len(fb), ops);
    ck_assert_uint_eq(stats().waiters, 0);

    /* Held in Redis as a lock (another daemon's): latch.lua says so. */
    fake_take(fb, "q", "other", 5000);
    ck_assert_int_eq(await_req(b, "q"), 0);
    fake_settle(fb);
    r = expect_error(b, LOCK_ERR_KIND);
    why_is(&r, LOCK_WHY_HELD_AS, LOCK_MODE_MUTEX);
    ck_assert_uint_eq(fake_watch_calls(fb, "q"), 0);
    ck_assert_int_eq(latchset_req(b, "q", 2), 0);
    fake_settle(fb);
    r = expect_error(b, LOCK_ERR_KIND);
    why_is(&r, LOCK_WHY_HELD_AS, LOCK_MODE_MUTEX);
    ck_assert_int_eq(countdown_req(b, "q"), 0);
    fake_settle(fb);
    expect_error(b, LOCK_ERR_KIND);
    ck_assert_int_eq(latchcount_req(b, "q"), 0);
    fake_settle(fb);
    expect_error(b, LOCK_ERR_KIND);
    ck_assert_int_eq(tryawait_req(b, "q", 0), 0);
    fake_settle(fb);
    expect_error(b, LOCK_ERR_KIND);
    ck_assert_int_eq(fake_holds_field(fb, "other", "q"), 1);
    ck_assert_uint_eq(stats().waiters, 0);

    /* A semaphore with permits held is a semaphore. */
    fake_seminit(fb, "s", 3);
    fake_sem_take(fb, "s", "other", 1, 5000);
    ck_assert_int_eq(await_req(b, "s"), 0);
    fake_settle(fb);
    r = expect_error(b, LOCK_ERR_KIND);
    why_is(&r, LOCK_WHY_HELD_AS, LOCK_MODE_SEM);
    ck_assert_int_eq(fake_sem_available(fb, "s"), 2);

    /* Waited for here as a latch: another kind's request is refused
     * before Redis. */
    latchset_ok(a, "l", 1, 1);
    await_waits(b, "l");
    ops = fake_log_len(fb);
    ck_assert_int_eq(lock_req(c, "l", 0), 1);
    r = expect_error(c, LOCK_ERR_KIND);
    why_is(&r, LOCK_WHY_HELD_AS, LOCK_MODE_LATCH);
    ck_assert_int_eq(acquire_req(c, "l", 1, 0), 1);
    r = expect_error(c, LOCK_ERR_KIND);
    why_is(&r, LOCK_WHY_HELD_AS, LOCK_MODE_LATCH);
    ck_assert_int_eq(rlock_req(c, "l", 0), 1);
    expect_error(c, LOCK_ERR_KIND);
    ck_assert_uint_eq(fake_log_len(fb), ops);

    /* A latch of Redis's only (dlockd's mark): its acquire script says so. */
    ck_assert_int_eq(fake_latch_set(fb, "m", 2), 1);
    ck_assert_int_eq(lock_req(c, "m", 0), 0);
    fake_settle(fb);
    r = expect_error(c, LOCK_ERR_KIND);
    why_is(&r, LOCK_WHY_HELD_AS, LOCK_MODE_LATCH);
    ck_assert_uint_eq(stats().locks_held, 1); /* a's "p" */
    ck_assert_int_eq(fake_latch_count(fb, "m"), 2);
    ck_assert(fake_latch_marked(fb, "m"));
    no_reply(b);
    countdown_ok(a, "l", 0);
    released(b);
}
END_TEST

/* A topology without BACKEND_CAP_ONE_COPY (the quorum): every latch
 * request is ERR KIND (UNSUPPORTED), nothing sent, nothing waits. */
START_TEST(test_latch_needs_backend_cap) {
    client_t *a = client();
    fake_set_caps(fb, fake_backend(fb)->caps & ~BACKEND_CAP_ONE_COPY);
    lock_reply_t r;
    ck_assert_int_eq(latchset_req(a, "l", 2), 1);
    r = expect_error(a, LOCK_ERR_KIND);
    why_is(&r, LOCK_WHY_UNSUPPORTED, LOCK_MODE_LATCH);

    ck_assert_str_eq(r.detail, "fake");
    ck_assert_int_eq(countdown_req(a, "l"), 1);
    r = expect_error(a, LOCK_ERR_KIND);
    why_is(&r, LOCK_WHY_UNSUPPORTED, LOCK_MODE_LATCH);
    ck_assert_int_eq(latchcount_req(a, "l"), 1);
    r = expect_error(a, LOCK_ERR_KIND);
    why_is(&r, LOCK_WHY_UNSUPPORTED, LOCK_MODE_LATCH);
    ck_assert_int_eq(await_req(a, "l"), 1);
    r = expect_error(a, LOCK_ERR_KIND);
    why_is(&r, LOCK_WHY_UNSUPPORTED, LOCK_MODE_LATCH);
    ck_assert_int_eq(tryawait_req(a, "l", 0), 1);
    expect_error(a, LOCK_ERR_KIND);
    ck_assert_int_eq(tryawait_req(a, "l", 100), 1);
    expect_error(a, LOCK_ERR_KIND);
    ck_assert_uint_eq(fake_log_len(fb), 0);
    ck_assert_uint_eq(stats().waiters, 0);
    lock_ok(a, "l", 0); /* locks still work */
}
END_TEST

/* ---- the suite --------------------------------------------------------------- */

/* An AWAIT queued behind a TRYAWAIT 0 whose look was refused waits for
 * the latch's message like any refused waiter: it was left parked with no
 * watch and no retry turn ("client 2: no reply"). */
START_TEST(test_latch_once_look_keeps_others_waiting) {
    client_t *x = client(), *a = client(), *t = client();
    ck_assert_int_eq(fake_latch_set(fb, "l", 1), 1);
    ck_assert_int_eq(tryawait_req(x, "l", 0), 0); /* its look in flight */
    ck_assert_int_eq(await_req(a, "l"), 0);
    ck_assert_int_eq(tryawait_req(t, "l", 0), 0);
    fake_settle(fb);
    expect_timeout(x, 1);
    expect_timeout(t, 1);
    no_reply(a);
    ck_assert_int_eq(fake_latch_countdown(fb, "l"), 0); /* another daemon's: '0' published */
    ck_assert_int_eq(fake_publish(fb, "l"), 1);        /* a watch hears it */
    fake_settle(fb);
    released(a);
}
END_TEST

/* An AWAIT holds nothing: its latch opening is no new hold, whatever the
 * uid holds by then (both got ERR LIMIT, max locks per uid). */
START_TEST(test_latch_open_past_hold_limits) {
    client_t *a1 = client(), *a2 = client(), *b = client();
    conf.max_locks_per_uid = 1;
    ck_assert_int_eq(fake_latch_set(fb, "l", 1), 1);
    ck_assert_int_eq(await_req(a1, "l"), 0);
    ck_assert_int_eq(await_req(a2, "l"), 0);
    fake_settle(fb);
    lock_ok(b, "x", 0); /* the uid's one lock */
    ck_assert_int_eq(fake_latch_countdown(fb, "l"), 0);
    ck_assert_int_eq(fake_publish(fb, "l"), 1);
    fake_settle(fb);
    released(a1);
    released(a2);
}
END_TEST

/* The first waiter's look in flight, the waiter withdrawn (cancelled,
 * or its owner dropped): one queued behind it, before any watch, is not
 * left without one. */
START_TEST(test_latch_withdrawn_look_keeps_others_waiting) {
    for (int dropped = 0; dropped <= 1; dropped++) {
        client_t *x = client(), *a = client();
        const char *name = dropped ? "l1" : "l0";
        ck_assert_int_eq(fake_latch_set(fb, name, 1), 1);
        ck_assert_int_eq(await_req(x, name), 0); /* its look in flight */
        ck_assert_int_eq(await_req(a, name), 0);
        if (dropped) {
            drop(x);
        } else {
            ck_assert_int_eq(lockmgr_cancel(mgr, x->o, x), 1);
            expect_error(x, LOCK_ERR_CANCELLED);
        }
        fake_settle(fb);
        no_reply(a);
        ck_assert_int_eq(fake_latch_countdown(fb, name), 0); /* another daemon's */
        ck_assert_int_eq(fake_publish(fb, name), 1);
        fake_settle(fb);
        released(a);
    }
}
END_TEST

static Suite *lockmgr_latch_suite(void) {
    Suite *s = suite_create("lockmgr_latch");
    TCase *tc;
#define TC(name) \
    tc = tcase_create(name); \
    tcase_add_checked_fixture(tc, setup, teardown); \
    suite_add_tcase(s, tc)

    TC("latch");
    tcase_add_test(tc, test_latch_latchset);
    tcase_add_test(tc, test_latch_countdown);
    tcase_add_test(tc, test_latch_latchcount);
    tcase_add_test(tc, test_latch_await_at_once);
    tcase_add_test(tc, test_latch_many_await_one_look_local_countdown);
    tcase_add_test(tc, test_latch_released_by_message);
    tcase_add_test(tc, test_latch_retry_without_message);
    tcase_add_test(tc, test_latch_message_during_look);
    tcase_add_test(tc, test_latch_tryawait_zero);
    tcase_add_test(tc, test_latch_tryawait_wait_times_out);
    tcase_add_test(tc, test_latch_cancel_one);
    tcase_add_test(tc, test_latch_arrival_during_look_looks_itself);
    tcase_add_test(tc, test_latch_owner_drop);
    tcase_add_test(tc, test_latch_kind_errors);
    tcase_add_test(tc, test_latch_needs_backend_cap);
    tcase_add_test(tc, test_latch_once_look_keeps_others_waiting);
    tcase_add_test(tc, test_latch_open_past_hold_limits);
    tcase_add_test(tc, test_latch_withdrawn_look_keeps_others_waiting);
#undef TC
    return s;
}

int main(void) {
    return lockmgr_test_run(lockmgr_latch_suite());
}
