/* Unit tests of daemon/lock's multi-name locks (MLOCK, TRYMLOCK, MUNLOCK) on a fake backend.
 * SPDX-License-Identifier: MIT
 *
 * The world they run in (clients, requests, the fake) is tests/unit/lockmgr_support.c.
 * The fake answers a MULTI acquire as mlock.lua does: every name looked
 * at first, then all taken or none. x is another daemon's field. */
#include "tests/unit/lockmgr_support.h"

#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/lock/lockmgr.h"
#include "tests/unit/fake_backend.h"

#define N(...) ((const char *const[]){__VA_ARGS__}), \
               (sizeof((const char *const[]){__VA_ARGS__}) / sizeof(const char *))

static int mlock_req(client_t *c, const char *const *names, size_t n, uint32_t lease_ms) {
    return request_multi(c, LOCK_VERB_MLOCK, names, n, 0, lease_ms);
}

static int munlock_req(client_t *c, const char *const *names, size_t n) {
    return request_multi(c, LOCK_VERB_MUNLOCK, names, n, 0, 0);
}

/* The next reply is a LIST of n numbers, into out. */
static void expect_list(client_t *c, size_t n, uint64_t *out) {
    lock_reply_t r = next_reply(c);
    ck_assert_msg(r.type == LOCK_REPLY_LIST, "client %" PRIu64 ": %s, want LIST", c->id,
                  reply_type_name(r.type));
    ck_assert_uint_eq(r.count, n);
    if (out != NULL) memcpy(out, r.list, n * sizeof(*out));
}

static void expect_zeros(client_t *c, size_t n) {
    uint64_t v[LIST_KEEP];
    expect_list(c, n, v);
    for (size_t i = 0; i < n; i++) ck_assert_uint_eq(v[i], 0);
}

/* The whole set in one op; each name an ordinary plain hold. */
START_TEST(test_multi_one_op_plain_holds) {
    client_t *c = client(), *o = client();
    uint64_t f[3];
    ck_assert_int_eq(mlock_req(c, N("a", "b", "c"), 0), 0);
    ck_assert_uint_eq(fake_queued(fb), 1);
    queued_mode_is(0, BACKEND_ACQUIRE, BACKEND_MULTI, "a", c);
    ck_assert_uint_eq(fake_queued_op(fb, 0)->nnames, 3);
    fake_run(fb);
    expect_list(c, 3, f);
    ck_assert_uint_eq(f[0], fake_fence(fb, "a"));
    ck_assert_uint_eq(f[2], fake_fence(fb, "c"));
    ck_assert_int_eq(fake_holds(fb, c->id, "b"), 1);
    ck_assert_uint_eq(lockmgr_owner_held(c->o), 3);
    /* LOCK of one is a reentry; another connection waits */
    lock_req(c, "b", 0);
    fake_run(fb);
    ck_assert_uint_eq(expect_granted(c, 2), f[1]);
    lock_req(o, "c", 0);
    fake_run(fb);
    no_reply(o);
    ck_assert_int_eq(unlock_req(c, "a"), 1);
    expect_value(c, 0);
    ck_assert_int_eq(munlock_req(c, N("b", "c")), 1);
    uint64_t left[2];
    expect_list(c, 2, left);
    ck_assert_uint_eq(left[0], 1);
    ck_assert_uint_eq(left[1], 0);
    fake_run(fb);
    expect_granted(o, 1);
    ck_assert_int_eq(fake_holds(fb, c->id, "a"), 0);
    ck_assert_int_eq(fake_holds(fb, c->id, "c"), 0);
}
END_TEST

/* Refused by another daemon's hold of one name: nothing taken, every name
 * watched; that name's release brings the grant. */
START_TEST(test_multi_refused_holds_nothing) {
    client_t *c = client();
    fake_take(fb, "b", "x", 5000);
    mlock_req(c, N("a", "b", "c"), 0);
    fake_run(fb);
    no_reply(c);
    ck_assert_int_eq(fake_holds(fb, c->id, "a"), 0);
    ck_assert_int_eq(fake_holds(fb, c->id, "c"), 0);
    ck_assert(fake_watched(fb, "a") && fake_watched(fb, "b") && fake_watched(fb, "c"));
    fake_run(fb); /* the watches' confirmations: one more try each, refused */
    no_reply(c);
    size_t before = submitted(BACKEND_ACQUIRE);
    fake_expire(fb, "b");
    ck_assert_int_eq(fake_publish(fb, "b"), 1);
    fake_run(fb);
    expect_list(c, 3, NULL);
    ck_assert_uint_le(submitted(BACKEND_ACQUIRE), before + 1); /* no polling */
    ck_assert_int_eq(fake_holds(fb, c->id, "b"), 1);
    /* the grant ends the waiting: no watch left */
    ck_assert(!fake_watched(fb, "a") && !fake_watched(fb, "b"));
}
END_TEST

/* A release on the channel of a name that did not refuse the set (on
 * Cluster, the set's own undo of an earlier slot) brings no new try; the
 * refusing name's does. */
START_TEST(test_multi_retries_only_for_refusing_name) {
    client_t *c = client();
    fake_take(fb, "b", "x", 5000);
    mlock_req(c, N("a", "b"), 0);
    fake_run(fb);
    fake_run(fb); /* the watches' confirmations */
    no_reply(c);
    size_t before = submitted(BACKEND_ACQUIRE);
    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(fake_publish(fb, "a"), 1);
        fake_run(fb);
    }
    no_reply(c);
    ck_assert_uint_eq(submitted(BACKEND_ACQUIRE), before);
    fake_expire(fb, "b");
    ck_assert_int_eq(fake_publish(fb, "b"), 1);
    fake_run(fb);
    expect_list(c, 2, NULL);
    ck_assert_uint_eq(submitted(BACKEND_ACQUIRE), before + 1);
}
END_TEST

/* Without a release message, the refusing holder's lease end: a retry. */
START_TEST(test_multi_retry_at_holder_ttl) {
    client_t *c = client();
    fake_take(fb, "b", "x", 500);
    mlock_req(c, N("a", "b"), 0);
    fake_run(fb);
    fake_run(fb);
    no_reply(c);
    run_until_reply(c, now() + 1000);
    expect_list(c, 2, NULL);
}
END_TEST

/* A place in each name's FIFO: a LOCK of a free name behind a waiting set
 * waits for it; the set goes when its last name is freed here. */
START_TEST(test_multi_keeps_fifo_place) {
    client_t *h = client(), *m = client(), *s = client();
    lock_ok(h, "b", 0);
    mlock_req(m, N("a", "b"), 0);
    lock_req(s, "a", 0);
    fake_run(fb);
    no_reply(m);
    no_reply(s);          /* a is free, but the set came first */
    ck_assert_int_eq(fake_holds(fb, s->id, "a"), 0);
    unlock_req(h, "b");
    expect_value(h, 0);
    fake_run(fb);
    fake_run(fb);
    expect_list(m, 2, NULL);
    no_reply(s);
    munlock_req(m, N("a", "b"));
    expect_zeros(m, 2);
    fake_run(fb);
    expect_granted(s, 1);
}
END_TEST

/* {a,b} and {b,a}: the second waits, holding nothing, and goes after. */
START_TEST(test_multi_opposite_orders) {
    client_t *p = client(), *q = client();
    mlock_req(p, N("a", "b"), 0);
    mlock_req(q, N("b", "a"), 0);
    fake_run(fb);
    expect_list(p, 2, NULL);
    no_reply(q);
    ck_assert_int_eq(fake_holds(fb, q->id, "b"), 0);
    munlock_req(p, N("b", "a"));
    expect_zeros(p, 2);
    fake_run(fb);
    fake_run(fb);
    expect_list(q, 2, NULL);
}
END_TEST

/* A name the connection holds is a reentry: its fence, one hold more. */
START_TEST(test_multi_reentry) {
    client_t *c = client();
    uint64_t fa = lock_ok(c, "a", 0);
    uint64_t f[2];
    mlock_req(c, N("a", "b"), 0);
    ck_assert_str_eq(fake_queued_op(fb, 0)->reentry, "rn");
    fake_run(fb);
    expect_list(c, 2, f);
    ck_assert_uint_eq(f[0], fa);
    ck_assert_int_eq(fake_holds(fb, c->id, "a"), 2);
    ck_assert_uint_eq(lockmgr_owner_held(c->o), 2);
    munlock_req(c, N("a", "b"));
    uint64_t left[2];
    expect_list(c, 2, left);
    ck_assert_uint_eq(left[0], 1);
    ck_assert_uint_eq(left[1], 0);
}
END_TEST

/* CANCEL while queued, and while the attempt is in flight (its grant is
 * undone when it comes back). */
START_TEST(test_multi_cancel) {
    client_t *h = client(), *c = client();
    lock_ok(h, "b", 0);
    mlock_req(c, N("a", "b"), 0);
    ck_assert_int_eq(lockmgr_cancel(mgr, c->o, c), 1);
    expect_error(c, LOCK_ERR_CANCELLED);
    ck_assert_uint_eq(stats().waiters, 0);
    unlock_req(h, "b");
    expect_value(h, 0);
    mlock_req(c, N("a", "b"), 0);
    ck_assert_uint_eq(fake_queued(fb), 2); /* b's release, then the set */
    ck_assert_int_eq(lockmgr_cancel(mgr, c->o, c), 1);
    expect_error(c, LOCK_ERR_CANCELLED);
    fake_run(fb); /* granted in Redis, then released */
    fake_run(fb);
    ck_assert_int_eq(fake_holds(fb, c->id, "a"), 0);
    ck_assert_int_eq(fake_holds(fb, c->id, "b"), 0);
    ck_assert_uint_eq(lockmgr_owner_held(c->o), 0);
    lock_ok(h, "a", 0);
}
END_TEST

/* A connection that goes while waiting or holding leaves nothing. */
START_TEST(test_multi_drop) {
    client_t *h = client(), *w = client(), *c = client();
    lock_ok(h, "b", 0);
    mlock_req(w, N("a", "b"), 0);
    fake_run(fb);
    drop(w);
    ck_assert_uint_eq(stats().waiters, 0);
    mlock_req(c, N("c", "d"), 0);
    fake_run(fb);
    expect_list(c, 2, NULL);
    drop(c);
    fake_run(fb);
    ck_assert_int_eq(fake_mode(fb, "c"), -1);
    ck_assert_int_eq(fake_mode(fb, "d"), -1);
    ck_assert_int_eq(fake_mode(fb, "a"), -1);
}
END_TEST

/* TRYMLOCK: behind someone here, TIMEOUT at once with wait 0; with a
 * wait, at its end, holding nothing. */
START_TEST(test_multi_try) {
    client_t *h = client(), *c = client();
    lock_ok(h, "b", 2000);
    ck_assert_int_eq(request_multi(c, LOCK_VERB_TRYMLOCK, N("a", "b"), 0, 0), 1);
    lock_reply_t r = next_reply(c);
    ck_assert_int_eq(r.type, LOCK_REPLY_TIMEOUT);
    ck_assert_int_gt(r.ttl_ms, 0);
    ck_assert_int_eq(request_multi(c, LOCK_VERB_TRYMLOCK, N("a", "b"), 100, 0), 0);
    run_until_reply(c, now() + 200);
    r = next_reply(c);
    ck_assert_int_eq(r.type, LOCK_REPLY_TIMEOUT);
    ck_assert_uint_eq(stats().waiters, 0);
    ck_assert_int_eq(fake_holds(fb, c->id, "a"), 0);
    /* refused in Redis with wait 0: TIMEOUT with the holder's ttl */
    fake_take(fb, "z", "x", 700);
    ck_assert_int_eq(request_multi(c, LOCK_VERB_TRYMLOCK, N("y", "z"), 0, 0), 0);
    fake_run(fb);
    r = next_reply(c);
    ck_assert_int_eq(r.type, LOCK_REPLY_TIMEOUT);
    ck_assert_int_eq(r.ttl_ms, 700);
    ck_assert_int_eq(fake_holds(fb, c->id, "y"), 0);
}
END_TEST

/* MUNLOCK of a name not held releases nothing, naming it; another kind. */
START_TEST(test_multi_errors) {
    client_t *c = client();
    mlock_req(c, N("a", "b"), 0);
    fake_run(fb);
    expect_list(c, 2, NULL);
    ck_assert_int_eq(munlock_req(c, N("a", "zz")), 1);
    lock_reply_t r = expect_error(c, LOCK_ERR_NOTHELD);
    ck_assert_str_eq(r.name, "zz");
    ck_assert_uint_eq(lockmgr_owner_held(c->o), 2);
    rlock_ok(c, "r", 0);
    ck_assert_int_eq(mlock_req(c, N("q", "r"), 0), 1);
    r = expect_error(c, LOCK_ERR_KIND);
    ck_assert_str_eq(r.name, "r");
    ck_assert_int_eq(fake_mode(fb, "q"), -1);
    ck_assert_int_eq(munlock_req(c, N("r")), 1);
    expect_error(c, LOCK_ERR_KIND);
    /* in Redis as another kind: ERR KIND, nothing taken */
    fake_take_rw(fb, "w", "x", BACKEND_WRITE, 5000);
    mlock_req(c, N("v", "w"), 0);
    fake_run(fb);
    r = expect_error(c, LOCK_ERR_KIND);
    ck_assert_str_eq(r.name, "w");
    ck_assert_int_eq(fake_mode(fb, "v"), -1);
    /* n out of range */
    ck_assert_int_eq(request_multi(c, LOCK_VERB_MLOCK, NULL, 0, 0, 0), 1);
    expect_error(c, LOCK_ERR_ARGS);
}
END_TEST

/* A waiting MLOCK is one request waiting, whatever its names: INFO's
 * waiters, max_waiters and max_waiters_per_uid count it once. */
START_TEST(test_multi_waits_count_once) {
    client_t *h = client(), *a = client(), *b = client(), *c = client_uid(1001);
    conf.max_waiters = 3;
    conf.max_waiters_per_uid = 2;
    lock_ok(h, "b", 0);
    ck_assert_int_eq(mlock_req(a, N("a", "b", "c"), 0), 0);
    fake_run(fb);
    no_reply(a);
    ck_assert_uint_eq(stats().waiters, 1);
    ck_assert_int_eq(mlock_req(b, N("b", "d"), 0), 0); /* uid 1000's second */
    ck_assert_uint_eq(stats().waiters, 2);
    ck_assert_int_eq(lock_req(h, "d", 0), 1); /* its third: refused */
    lock_reply_t r = expect_error(h, LOCK_ERR_LIMIT);
    why_is(&r, LOCK_WHY_MAX_WAITERS_UID, -1);
    ck_assert_int_eq(mlock_req(c, N("b", "e", "f", "g"), 0), 0); /* the daemon's third */
    ck_assert_uint_eq(stats().waiters, 3);
    client_t *d = client_uid(1002);
    ck_assert_int_eq(lock_req(d, "b", 0), 1);
    r = expect_error(d, LOCK_ERR_LIMIT);
    why_is(&r, LOCK_WHY_MAX_WAITERS, -1);
    drop(c);
    ck_assert_uint_eq(stats().waiters, 2);
    /* the holder's release grants a's set: one waiter less */
    unlock_req(h, "b");
    expect_value(h, 0);
    fake_run(fb);
    fake_run(fb);
    expect_list(a, 3, NULL);
    ck_assert_uint_eq(stats().waiters, 1);
    ck_assert_int_eq(lockmgr_cancel(mgr, b->o, b), 1);
    expect_error(b, LOCK_ERR_CANCELLED);
    ck_assert_uint_eq(stats().waiters, 0);
}
END_TEST

START_TEST(test_multi_limit_and_topology) {
    conf.max_locks_per_client = 3;
    client_t *c = client();
    lock_ok(c, "a", 0);
    ck_assert_int_eq(mlock_req(c, N("a", "b", "c", "d"), 0), 1); /* 1 + 3 new > 3 */
    lock_reply_t r = expect_error(c, LOCK_ERR_LIMIT);
    ck_assert_int_eq(r.why, LOCK_WHY_MAX_LOCKS);
    mlock_req(c, N("a", "b", "c"), 0); /* a reentry and 2 new: 3 */
    fake_run(fb);
    expect_list(c, 3, NULL);
    fake_set_caps(fb, BACKEND_CAP_MONOTONIC_FENCE | BACKEND_CAP_WAKEUPS);
    ck_assert_int_eq(mlock_req(c, N("e"), 0), 1);
    r = expect_error(c, LOCK_ERR_KIND);
    ck_assert_int_eq(r.why, LOCK_WHY_UNSUPPORTED);
}
END_TEST

/* The set's holds share the lease (watchdog when none): each expires or is
 * renewed as its own plain lock; a lost one leaves the others. */
START_TEST(test_multi_lease_and_loss) {
    client_t *c = client();
    mlock_req(c, N("a", "b"), 500);
    fake_run(fb);
    expect_list(c, 2, NULL);
    ck_assert_int_le(fake_pttl(fb, "a"), 500);
    run_for(600);
    expect_event(c, "a", LOCK_LOST_EXPIRED);
    expect_event(c, "b", LOCK_LOST_EXPIRED);
    mlock_req(c, N("a", "b"), 0);
    fake_run(fb);
    expect_list(c, 2, NULL);
    fake_force(fb, "a");
    run_for(2 * EVERY);
    expect_event(c, "a", LOCK_LOST_FORCED);
    no_event(c);
    ck_assert_int_eq(fake_holds(fb, c->id, "b"), 1);
    ck_assert_uint_eq(lockmgr_owner_held(c->o), 1);
}
END_TEST

/* A reentry whose hold's lease ends here while the set's script is in
 * flight, and which Redis, counting the lease from when it ran, still
 * grants (issue 36, bug 3): the lease's release is on its way behind the
 * script and deletes that name, so the grant is undone and the name asked
 * for anew; the set is granted as two new holds, one of each in Redis. */
START_TEST(test_multi_reentry_lease_ends_in_flight) {
    client_t *a = client();
    ck_assert_int_eq(lock_req(a, "x", 500), 0);
    timers_advance(tm, 100); /* Redis runs it late: its lease ends 100 ms after ours */
    fake_run(fb);
    uint64_t fx = expect_granted(a, 1);
    timers_advance(tm, 300);
    ck_assert_int_eq(mlock_req(a, N("x", "y"), 0), 0);
    ck_assert_str_eq(fake_queued_op(fb, 0)->reentry, "rn");
    timers_advance(tm, 150); /* our lease is over; Redis's is not */
    expect_event(a, "x", LOCK_LOST_EXPIRED);
    ck_assert_uint_eq(lockmgr_owner_held(a->o), 0);
    fake_run(fb); /* the set, granted with x a reentry; then x's release */
    fake_settle(fb);
    uint64_t f[2];
    expect_list(a, 2, f);
    ck_assert_uint_gt(f[0], fx); /* a new grant of x, with its own fence */
    ck_assert_int_eq(fake_holds(fb, a->id, "x"), 1);
    ck_assert_int_eq(fake_holds(fb, a->id, "y"), 1);
    ck_assert_uint_eq(lockmgr_owner_held(a->o), 2);
    ck_assert_uint_eq(stats().waiters, 0);
    ck_assert_uint_eq(stats().locks_held, 2);
    no_event(a);
    munlock_req(a, N("x", "y"));
    expect_zeros(a, 2);
    fake_settle(fb);
    ck_assert_int_eq(fake_mode(fb, "x"), -1);
    ck_assert_int_eq(fake_mode(fb, "y"), -1);
}
END_TEST

/* The same with the connection gone before the set's new try: the undo
 * leaves nothing of the set in Redis. */
START_TEST(test_multi_reentry_lost_in_flight_then_drop) {
    client_t *a = client();
    ck_assert_int_eq(lock_req(a, "x", 500), 0);
    timers_advance(tm, 100);
    fake_run(fb);
    expect_granted(a, 1);
    timers_advance(tm, 300);
    mlock_req(a, N("x", "y"), 0);
    timers_advance(tm, 150);
    expect_event(a, "x", LOCK_LOST_EXPIRED);
    fake_run_one(fb); /* the set's grant only */
    no_reply(a);
    drop(a);
    fake_settle(fb);
    ck_assert_int_eq(fake_mode(fb, "x"), -1);
    ck_assert_int_eq(fake_mode(fb, "y"), -1);
    ck_assert_uint_eq(stats().waiters, 0);
    ck_assert_uint_eq(stats().locks_held, 0);
}
END_TEST

/* A TRYMLOCK of 0 tries once: a held name that lapsed during its try
 * makes it TIMEOUT, the grant undone. */
START_TEST(test_multi_try_zero_reentry_lapses) {
    client_t *a = client();
    ck_assert_int_eq(lock_req(a, "x", 500), 0);
    timers_advance(tm, 100);
    fake_run(fb);
    expect_granted(a, 1);
    timers_advance(tm, 300);
    ck_assert_int_eq(request_multi(a, LOCK_VERB_TRYMLOCK, N("x", "y"), 0, 0), 0);
    timers_advance(tm, 150);
    expect_event(a, "x", LOCK_LOST_EXPIRED);
    fake_settle(fb);
    lock_reply_t r = next_reply(a);
    ck_assert_int_eq(r.type, LOCK_REPLY_TIMEOUT);
    ck_assert_int_eq(fake_mode(fb, "x"), -1);
    ck_assert_int_eq(fake_mode(fb, "y"), -1);
    ck_assert_uint_eq(stats().waiters, 0);
    ck_assert_uint_eq(lockmgr_owner_held(a->o), 0);
}
END_TEST

/* A name held here that another daemon forced away, found by the set's
 * script (HOLD_GONE) (issue 36, bug 4): its holder hears !LOST forced,
 * the waiter queued behind that hold on this daemon is woken and granted,
 * and the set waits behind it for the name. */
START_TEST(test_multi_hold_gone_wakes_queue) {
    client_t *a = client(), *b = client();
    lock_ok(a, "x", 0);
    ck_assert_int_eq(lock_req(b, "x", 0), 0); /* behind a's hold, here */
    fake_settle(fb);
    no_reply(b);
    fake_force(fb, "x");
    ck_assert_int_eq(mlock_req(a, N("x", "y"), 0), 0);
    run_until_reply(b, now() + 5 * LEASE);
    expect_granted(b, 1);
    expect_event(a, "x", LOCK_LOST_FORCED);
    no_event(a);
    no_reply(a);
    ck_assert_uint_eq(stats().waiters, 1); /* the set */
    ck_assert_int_eq(fake_holds(fb, a->id, "y"), 0);
    ck_assert_int_eq(unlock_req(b, "x"), 1);
    expect_value(b, 0);
    fake_settle(fb);
    expect_list(a, 2, NULL);
    ck_assert_uint_eq(stats().waiters, 0);
    ck_assert_int_eq(fake_holds(fb, a->id, "x"), 1);
    ck_assert_uint_eq(lockmgr_owner_held(a->o), 2);
}
END_TEST

/* The same name expired rather than forced: !LOST expired; and with no
 * one else waiting, the set goes on at once. */
START_TEST(test_multi_hold_gone_expired) {
    client_t *a = client();
    lock_ok(a, "x", 0);
    fake_expire(fb, "x");
    mlock_req(a, N("x", "y"), 0);
    fake_settle(fb);
    expect_event(a, "x", LOCK_LOST_EXPIRED);
    expect_list(a, 2, NULL);
    ck_assert_int_eq(fake_holds(fb, a->id, "x"), 1);
    ck_assert_uint_eq(stats().waiters, 0);
}
END_TEST

/* A set refused for y (another's, for 60 s) holds x here; b waits for x
 * behind that hold. x's hold ends here (its lease; a FORCEUNLOCK heard at
 * a renewal goes the same way): b gets x. y's release wakes the set, which
 * asks for x anew behind b; b's UNLOCK brings its place to the head, and
 * the set tries. It took that for no news (y had refused it) and waited
 * on, every name free, until y's retry turn, 60 s on. */
START_TEST(test_multi_refused_set_requeued_behind_waiter) {
    client_t *a = client(), *b = client();
    lock_ok(a, "x", 500);
    fake_take(fb, "y", "other", 60000);
    ck_assert_int_eq(mlock_req(a, N("x", "y"), 0), 0);
    fake_settle(fb);
    no_reply(a);
    ck_assert_int_eq(lock_req(b, "x", 0), 0); /* behind a's hold, here */
    fake_settle(fb);
    no_reply(b);
    run_until_reply(b, now() + 1000);
    expect_event(a, "x", LOCK_LOST_EXPIRED);
    expect_granted(b, 1);
    fake_expire(fb, "y");
    ck_assert_int_eq(fake_publish(fb, "y"), 1);
    run_for(100);
    no_reply(a);
    ck_assert_uint_eq(stats().waiters, 1); /* the set, behind b's hold of x */
    ck_assert_int_eq(unlock_req(b, "x"), 1);
    expect_value(b, 0);
    run_until_reply(a, now() + 1000);
    expect_list(a, 2, NULL);
    ck_assert_uint_eq(stats().waiters, 0);
    ck_assert_int_eq(fake_holds(fb, a->id, "x"), 1);
    ck_assert_int_eq(fake_holds(fb, a->id, "y"), 1);
}
END_TEST

/* A set whose re-entered name's hold ends while it waits asks for that
 * name anew in its arrival order, not at the end of the queue: places of
 * two sets stay in the same order in every queue they share, or they wait
 * for each other for ever (the stateful fuzzer's long run: c272 re-entered
 * q0 and led p4's queue, c269 led q0's and waited behind c272 on p4; a
 * FORCEUNLOCK of q0 put c272's new place behind c269, every name free). */
START_TEST(test_multi_lost_reentry_keeps_arrival_order) {
    client_t *a = client(), *b = client();
    lock_ok(a, "x", 500);
    fake_take(fb, "y", "other", 60000);
    ck_assert_int_eq(mlock_req(a, N("x", "y"), 0), 0); /* x a reentry; y held elsewhere */
    fake_settle(fb);
    no_reply(a);
    ck_assert_int_eq(mlock_req(b, N("x", "y"), 0), 0); /* heads x's queue; behind a on y */
    fake_settle(fb);
    no_reply(b);
    run_for(1000); /* a's lease of x ends: it asks for x anew */
    expect_event(a, "x", LOCK_LOST_EXPIRED);
    fake_expire(fb, "y");
    ck_assert_int_eq(fake_publish(fb, "y"), 1);
    run_until_reply(a, now() + 1000);
    expect_list(a, 2, NULL); /* a came first: it gets both */
    no_reply(b);
    ck_assert_int_eq(munlock_req(a, N("x", "y")), 1);
    run_until_reply(b, now() + 1000);
    expect_list(b, 2, NULL);
    ck_assert_uint_eq(stats().waiters, 0);
}
END_TEST

/* max_locks_per_uid counts every name a set would add (issue 36, bug 5). */
START_TEST(test_multi_locks_per_uid) {
    conf.max_locks_per_uid = 3;
    client_t *a = client(), *b = client();
    size_t ops = fake_log_len(fb);
    ck_assert_int_eq(mlock_req(a, N("a", "b", "c", "d", "e"), 0), 1);
    lock_reply_t r = expect_error(a, LOCK_ERR_LIMIT);
    why_is(&r, LOCK_WHY_MAX_LOCKS_UID, -1);
    ck_assert_uint_eq(fake_log_len(fb), ops);
    lock_ok(b, "b", 0);
    ck_assert_int_eq(mlock_req(a, N("a", "c", "d"), 0), 1); /* 1 + 3 > 3 */
    r = expect_error(a, LOCK_ERR_LIMIT);
    why_is(&r, LOCK_WHY_MAX_LOCKS_UID, -1);
    mlock_req(a, N("a", "c"), 0);
    fake_run(fb);
    expect_list(a, 2, NULL);
    /* a reentry adds no lock */
    mlock_req(a, N("a", "c"), 0);
    fake_run(fb);
    expect_list(a, 2, NULL);
    ck_assert_uint_eq(stats().locks_held, 3);
}
END_TEST

/* Two sets of one uid at once, each within the limit alone: the grant that
 * would pass it is given back and answered ERR LIMIT (issue 36, bug 5). */
START_TEST(test_multi_locks_per_uid_at_once) {
    conf.max_locks_per_uid = 3;
    client_t *a = client(), *b = client();
    ck_assert_int_eq(mlock_req(a, N("a", "b"), 0), 0);
    ck_assert_int_eq(mlock_req(b, N("c", "d"), 0), 0);
    fake_settle(fb);
    expect_list(a, 2, NULL);
    lock_reply_t r = expect_error(b, LOCK_ERR_LIMIT);
    why_is(&r, LOCK_WHY_MAX_LOCKS_UID, -1);
    ck_assert_int_eq(fake_mode(fb, "c"), -1);
    ck_assert_int_eq(fake_mode(fb, "d"), -1);
    ck_assert_uint_eq(stats().locks_held, 2);
    ck_assert_uint_eq(stats().waiters, 0);
    ck_assert_uint_eq(lockmgr_owner_held(b->o), 0);
}
END_TEST

static Suite *lockmgr_multi_suite(void) {
    Suite *s = suite_create("lockmgr_multi");
    TCase *tc = tcase_create("multi");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_multi_one_op_plain_holds);
    tcase_add_test(tc, test_multi_refused_holds_nothing);
    tcase_add_test(tc, test_multi_retries_only_for_refusing_name);
    tcase_add_test(tc, test_multi_retry_at_holder_ttl);
    tcase_add_test(tc, test_multi_keeps_fifo_place);
    tcase_add_test(tc, test_multi_opposite_orders);
    tcase_add_test(tc, test_multi_reentry);
    tcase_add_test(tc, test_multi_cancel);
    tcase_add_test(tc, test_multi_drop);
    tcase_add_test(tc, test_multi_try);
    tcase_add_test(tc, test_multi_errors);
    tcase_add_test(tc, test_multi_limit_and_topology);
    tcase_add_test(tc, test_multi_waits_count_once);
    tcase_add_test(tc, test_multi_lease_and_loss);
    tcase_add_test(tc, test_multi_reentry_lease_ends_in_flight);
    tcase_add_test(tc, test_multi_reentry_lost_in_flight_then_drop);
    tcase_add_test(tc, test_multi_try_zero_reentry_lapses);
    tcase_add_test(tc, test_multi_hold_gone_wakes_queue);
    tcase_add_test(tc, test_multi_hold_gone_expired);
    tcase_add_test(tc, test_multi_refused_set_requeued_behind_waiter);
    tcase_add_test(tc, test_multi_lost_reentry_keeps_arrival_order);
    tcase_add_test(tc, test_multi_locks_per_uid);
    tcase_add_test(tc, test_multi_locks_per_uid_at_once);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return lockmgr_test_run(lockmgr_multi_suite());
}
