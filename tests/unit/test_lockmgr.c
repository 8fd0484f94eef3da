/* Unit tests of daemon/lock on a fake backend: grants, waits, watchdog, leases, owners, shutdown.
 * SPDX-License-Identifier: MIT
 *
 * The read/write locks, semaphores and fair locks have their own files
 * (test_lockmgr_rw.c, test_lockmgr_sem.c, test_lockmgr_fair.c); the world
 * they all run in is tests/unit/lockmgr_support.c. */
#include "tests/unit/lockmgr_support.h"

#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/lock/lockmgr.h"
#include "tests/unit/fake_backend.h"

/* ---- grants, fences, reentry, unlock ----------------------------------------- */

START_TEST(test_lock_grants_with_fence) {
    client_t *a = client();

    ck_assert_int_eq(lock_req(a, "a", 0), 0);
    no_reply(a);
    ck_assert_uint_eq(fake_queued(fb), 1);
    queued_is(0, BACKEND_ACQUIRE, "a", a);
    ck_assert_uint_eq(fake_queued_op(fb, 0)->lease_ms, LEASE); /* watchdog: the conf lease */
    ck_assert_uint_eq(stats().waiters, 1);

    ck_assert_uint_eq(fake_run(fb), 1);
    uint64_t fence = expect_granted(a, 1);
    ck_assert_uint_eq(fence, fake_fence_us(fb)); /* TIME, in microseconds */
    ck_assert_uint_eq(fence, fake_fence(fb, "a"));
    ck_assert_int_eq(fake_holds(fb, a->id, "a"), 1);
    ck_assert_int_eq(fake_pttl(fb, "a"), LEASE);
    ck_assert_uint_eq(lockmgr_owner_held(a->o), 1);
    ck_assert(!lockmgr_owner_waiting(a->o));
    lockmgr_stats_t s = stats();
    ck_assert_uint_eq(s.locks_held, 1);
    ck_assert_uint_eq(s.waiters, 0);
    ck_assert_uint_eq(s.grants, 1);
    ck_assert_int_eq(s.backend_up, 1);
    no_event(a);
}
END_TEST

START_TEST(test_fences_rise) {
    client_t *a = client(), *b = client();
    uint64_t f1 = lock_ok(a, "f", 0);
    ck_assert_int_eq(unlock_req(a, "f"), 1);
    expect_value(a, 0);
    uint64_t f2 = lock_ok(b, "f", 0);
    ck_assert_uint_gt(f2, f1);
    ck_assert_int_eq(unlock_req(b, "f"), 1);
    expect_value(b, 0);
    uint64_t f3 = lock_ok(a, "f", 0);
    ck_assert_uint_gt(f3, f2);
    /* Another name has its own counter; this one keeps rising after a
     * foreign grant too. */
    uint64_t g = lock_ok(b, "g", 0);
    ck_assert_uint_eq(g, fake_fence_us(fb)); /* from TIME, not after f's */
    ck_assert_int_eq(unlock_req(a, "f"), 1);
    expect_value(a, 0);
    fake_settle(fb);
    fake_take(fb, "f", "other", 100);
    uint64_t f4 = fake_fence(fb, "f"); /* the foreign grant's */
    ck_assert_uint_gt(f4, f3);
    timers_advance(tm, 100); /* the foreign hold expires */
    uint64_t f5 = lock_ok(a, "f", 0);
    ck_assert_uint_gt(f5, f4);
    ck_assert_uint_eq(stats().grants, 5);
}
END_TEST

START_TEST(test_reentrant_lock_and_unlock) {
    client_t *a = client();
    uint64_t fence = lock_ok(a, "r", 0);

    ck_assert_int_eq(lock_req(a, "r", 0), 0); /* reentry goes to Redis */
    queued_is(0, BACKEND_ACQUIRE, "r", a);
    no_reply(a);
    fake_run(fb);
    ck_assert_uint_eq(expect_granted(a, 2), fence);
    ck_assert_int_eq(fake_holds(fb, a->id, "r"), 2);
    ck_assert_uint_eq(lockmgr_owner_held(a->o), 1); /* one lock, two holds */
    ck_assert_uint_eq(stats().reentries, 1);
    ck_assert_uint_eq(stats().grants, 1);

    size_t mark = fake_log_len(fb);
    ck_assert_int_eq(unlock_req(a, "r"), 1);
    expect_value(a, 1);
    ck_assert_int_eq(unlock_req(a, "r"), 1);
    expect_value(a, 0);
    ck_assert_uint_eq(lockmgr_owner_held(a->o), 0);
    /* One hold less, then the release, in this order. */
    ck_assert_uint_eq(fake_log_len(fb), mark + 2);
    ck_assert_int_eq(fake_log(fb, mark)->kind, BACKEND_DROP);
    ck_assert_int_eq(fake_log(fb, mark + 1)->kind, BACKEND_RELEASE);
    ck_assert_uint_eq(fake_log(fb, mark + 1)->owner, a->id);
    ck_assert_int_eq(fake_holds(fb, a->id, "r"), 2);
    fake_run(fb);
    ck_assert_int_eq(fake_pttl(fb, "r"), -2);
    ck_assert_uint_eq(stats().locks_held, 0);

    ck_assert_int_eq(unlock_req(a, "r"), 1);
    expect_error(a, LOCK_ERR_NOTHELD);
    ck_assert_uint_eq(fake_queued(fb), 0);
}
END_TEST

/* ---- FIFO waiting ------------------------------------------------------------ */

/* Three waiters behind a foreign holder: they are served in arrival order
 * and only the head ever has an acquire in flight. */
START_TEST(test_fifo_three_waiters) {
    client_t *a = client(), *b = client(), *c = client();
    fake_take(fb, "q", "other", 5000);

    ck_assert_int_eq(lock_req(a, "q", 0), 0);
    ck_assert_int_eq(lock_req(b, "q", 0), 0);
    ck_assert_int_eq(lock_req(c, "q", 0), 0);
    ck_assert_uint_eq(fake_queued(fb), 1); /* the head only */
    queued_is(0, BACKEND_ACQUIRE, "q", a);
    fake_run(fb); /* TAKEN: the head watches the name */
    ck_assert(fake_watched(fb, "q"));
    ck_assert_uint_eq(fake_watch_calls(fb, "q"), 1);
    /* a plain holder's refusal: no election leads q, and nothing reads it */
    ck_assert_uint_eq(fake_queued(fb), 0);
    fake_run(fb); /* the watch is confirmed: one more try */
    ck_assert_uint_eq(fake_stats(fb)->confirms, 1);
    queued_is(0, BACKEND_ACQUIRE, "q", a);
    fake_settle(fb);
    no_reply(a);
    no_reply(b);
    no_reply(c);
    ck_assert_uint_eq(stats().waiters, 3);

    fake_expire(fb, "q"); /* the foreign holder unlocks */
    ck_assert_int_eq(fake_publish(fb, "q"), 1);
    queued_is(0, BACKEND_ACQUIRE, "q", a);
    fake_run(fb);
    uint64_t fence_a = expect_granted(a, 1);
    no_reply(b);
    no_reply(c);

    ck_assert_int_eq(unlock_req(a, "q"), 1);
    expect_value(a, 0);
    /* The release goes first, the next head's acquire right behind it. */
    ck_assert_uint_eq(fake_queued(fb), 2);
    queued_is(0, BACKEND_RELEASE, "q", a);
    queued_is(1, BACKEND_ACQUIRE, "q", b);
    fake_run(fb);
    uint64_t fence_b = expect_granted(b, 1);
    ck_assert_uint_gt(fence_b, fence_a);
    no_reply(c);

    ck_assert_int_eq(unlock_req(b, "q"), 1);
    expect_value(b, 0);
    queued_is(1, BACKEND_ACQUIRE, "q", c);
    fake_run(fb);
    ck_assert_uint_gt(expect_granted(c, 1), fence_b);
    ck_assert(!fake_watched(fb, "q")); /* the queue is empty: unwatched */
    ck_assert_uint_eq(fake_stats(fb)->max_inflight_kind[BACKEND_ACQUIRE], 1);
    ck_assert_uint_eq(stats().waiters, 0);
}
END_TEST

/* Waiters behind a local holder cost Redis nothing until it unlocks. */
START_TEST(test_fifo_behind_local_holder) {
    client_t *h = client(), *w[3] = {client(), client(), client()};
    lock_ok(h, "l", 0);
    size_t acquires = submitted(BACKEND_ACQUIRE);

    for (int i = 0; i < 3; i++) ck_assert_int_eq(lock_req(w[i], "l", 0), 0);
    ck_assert_uint_eq(submitted(BACKEND_ACQUIRE), acquires);
    ck_assert_uint_eq(fake_queued(fb), 0);
    ck_assert_uint_eq(fake_watch_calls(fb, "l"), 0);
    ck_assert_uint_eq(stats().waiters, 3);

    client_t *holder = h;
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(unlock_req(holder, "l"), 1);
        expect_value(holder, 0);
        for (int j = i; j < 3; j++) no_reply(w[j]);
        fake_run(fb);
        expect_granted(w[i], 1);
        for (int j = i + 1; j < 3; j++) no_reply(w[j]);
        ck_assert_uint_eq(stats().waiters, (uint64_t)(2 - i));
        holder = w[i];
    }
    ck_assert_uint_eq(fake_stats(fb)->max_inflight_kind[BACKEND_ACQUIRE], 1);
}
END_TEST

/* When our release woke waiters of other daemons, the next local hand-off
 * waits LOCKMGR_YIELD_MS for them. */
START_TEST(test_yield_to_remote_waiters) {
    client_t *a = client(), *b = client(), *c = client();
    fake_set_remote_waiters(fb, "y", 1);
    lock_ok(a, "y", 0);
    ck_assert_int_eq(lock_req(b, "y", 0), 0);
    ck_assert_int_eq(lock_req(c, "y", 0), 0);
    ck_assert_int_eq(unlock_req(a, "y"), 1);
    expect_value(a, 0);
    fake_run(fb); /* the release answers "others waiting"; b is granted */
    expect_granted(b, 1);

    ck_assert_int_eq(unlock_req(b, "y"), 1);
    expect_value(b, 0);
    ck_assert_uint_eq(fake_queued(fb), 1); /* the release only: c holds back */
    queued_is(0, BACKEND_RELEASE, "y", b);
    fake_run(fb);
    timers_advance(tm, LOCKMGR_YIELD_MS - 1);
    ck_assert_uint_eq(fake_queued(fb), 0);
    timers_advance(tm, 1);
    queued_is(0, BACKEND_ACQUIRE, "y", c);
    fake_run(fb);
    expect_granted(c, 1);
}
END_TEST

/* ---- TRYLOCK ----------------------------------------------------------------- */

START_TEST(test_trylock_zero_local_holder) {
    client_t *a = client(), *b = client();
    lock_ok(a, "t", 0);
    timers_advance(tm, 500);
    size_t ops = fake_log_len(fb);

    ck_assert_int_eq(request(b, LOCK_VERB_TRYLOCK, "t", 0, 0), 1);
    expect_timeout(b, LEASE - 500); /* the local holder's lease left */
    ck_assert_uint_eq(fake_log_len(fb), ops); /* no backend call */
    ck_assert_uint_eq(stats().timeouts, 1);
    ck_assert_uint_eq(stats().waiters, 0);
}
END_TEST

START_TEST(test_trylock_zero_foreign_holder) {
    client_t *b = client();
    fake_take(fb, "t", "other", 4000);
    ck_assert_int_eq(request(b, LOCK_VERB_TRYLOCK, "t", 0, 0), 0);
    fake_run(fb);
    expect_timeout(b, 4000);
    ck_assert_uint_eq(fake_watch_calls(fb, "t"), 0); /* one try: no watch */
    fake_settle(fb);
    ck_assert_uint_eq(submitted(BACKEND_ACQUIRE), 1);
    ck_assert_uint_eq(stats().waiters, 0);
}
END_TEST

START_TEST(test_trylock_wait_times_out_local) {
    client_t *a = client(), *b = client();
    lock_ok(a, "t", 0);
    ck_assert_int_eq(request(b, LOCK_VERB_TRYLOCK, "t", 700, 0), 0);
    timers_advance(tm, 699);
    no_reply(b);
    timers_advance(tm, 1);
    expect_timeout(b, LEASE - 700);
    ck_assert_uint_eq(submitted(BACKEND_ACQUIRE), 1); /* a's only */
    ck_assert_uint_eq(stats().waiters, 0);
    /* a goes on holding; its unlock wakes nobody. */
    ck_assert_int_eq(unlock_req(a, "t"), 1);
    expect_value(a, 0);
    fake_settle(fb);
    ck_assert_uint_eq(submitted(BACKEND_ACQUIRE), 1);
}
END_TEST

START_TEST(test_trylock_wait_times_out_foreign) {
    client_t *b = client();
    fake_take(fb, "t", "other", 10000);
    ck_assert_int_eq(request(b, LOCK_VERB_TRYLOCK, "t", 500, 0), 0);
    fake_settle(fb);
    ck_assert(fake_watched(fb, "t"));
    timers_advance(tm, 499);
    no_reply(b);
    timers_advance(tm, 1);
    expect_timeout(b, 10000); /* as Redis last said */
    ck_assert(!fake_watched(fb, "t"));
    ck_assert_uint_eq(stats().waiters, 0);
    ck_assert_uint_eq(stats().timeouts, 1);
    /* its daemon's place in the name's wake queue goes with it */
    ck_assert_uint_eq(fake_queued(fb), 1);
    ck_assert_int_eq(fake_queued_op(fb, 0)->type, BACKEND_LEAVE);
    ck_assert_int_eq(fake_queued_op(fb, 0)->mode, BACKEND_MUTEX);
    fake_settle(fb);
    timers_advance(tm, 20000); /* the retry timer went with the waiter */
    ck_assert_uint_eq(fake_queued(fb), 0);
}
END_TEST

START_TEST(test_trylock_wait_granted_in_time) {
    client_t *b = client();
    fake_take(fb, "t", "other", 300);
    ck_assert_int_eq(request(b, LOCK_VERB_TRYLOCK, "t", 1000, 0), 0);
    fake_settle(fb);
    timers_advance(tm, 301); /* the holder's TTL is over: b tries again */
    fake_settle(fb);
    expect_granted(b, 1);
    timers_advance(tm, 1000); /* the TRYLOCK deadline is gone */
    no_reply(b);
    ck_assert_uint_eq(stats().timeouts, 0);
}
END_TEST

/* ---- wake-ups ---------------------------------------------------------------- */

START_TEST(test_waiter_woken_by_publish) {
    client_t *a = client();
    fake_take(fb, "p", "other", -1); /* no expiry: only a release ends it */
    ck_assert_int_eq(lock_req(a, "p", 0), 0);
    fake_settle(fb);
    no_reply(a);
    size_t acquires = submitted(BACKEND_ACQUIRE);
    ck_assert_uint_eq(acquires, 2); /* the first try, and one when the watch held */

    ck_assert_int_eq(fake_publish(fb, "p"), 1); /* a release message, still taken */
    ck_assert_uint_eq(submitted(BACKEND_ACQUIRE), acquires + 1);
    fake_settle(fb);
    no_reply(a);

    uint64_t t = now();
    fake_expire(fb, "p");
    ck_assert_int_eq(fake_publish(fb, "p"), 1);
    fake_run(fb);
    expect_granted(a, 1);
    ck_assert_uint_eq(now(), t); /* no time passed */
    ck_assert(!fake_watched(fb, "p"));
    ck_assert_uint_eq(fake_stats(fb)->unwatch_calls, 1);
}
END_TEST

START_TEST(test_waiter_woken_by_ttl) {
    client_t *a = client();
    fake_take(fb, "e", "other", 2000);
    ck_assert_int_eq(lock_req(a, "e", 0), 0);
    fake_settle(fb);
    size_t acquires = submitted(BACKEND_ACQUIRE);
    timers_advance(tm, 2000);
    ck_assert_uint_eq(submitted(BACKEND_ACQUIRE), acquires);
    timers_advance(tm, 1); /* TTL + 1: expiry publishes nothing, the timer tries */
    ck_assert_uint_eq(submitted(BACKEND_ACQUIRE), acquires + 1);
    fake_run(fb);
    expect_granted(a, 1);
}
END_TEST

START_TEST(test_waiter_retries_without_ttl) {
    client_t *a = client();
    fake_take(fb, "n", "other", -1);
    ck_assert_int_eq(lock_req(a, "n", 0), 0);
    fake_settle(fb);
    size_t acquires = submitted(BACKEND_ACQUIRE);
    timers_advance(tm, LOCKMGR_NO_TTL_RETRY_MS - 1);
    ck_assert_uint_eq(submitted(BACKEND_ACQUIRE), acquires);
    timers_advance(tm, 1);
    ck_assert_uint_eq(submitted(BACKEND_ACQUIRE), acquires + 1);
    fake_expire(fb, "n");
    fake_run(fb);
    expect_granted(a, 1);
}
END_TEST

/* A waiter that already waited keeps waiting through a backend outage and
 * tries again when the backend is back. */
START_TEST(test_waiter_survives_outage) {
    client_t *a = client();
    fake_take(fb, "o", "other", 2000);
    ck_assert_int_eq(lock_req(a, "o", 0), 0);
    fake_settle(fb);
    fake_set_up(fb, 0);
    timers_advance(tm, 2001); /* its retry: not while down */
    ck_assert_uint_eq(fake_queued(fb), 0);
    no_reply(a);
    fake_set_up(fb, 1);
    fake_settle(fb);
    expect_granted(a, 1);
}
END_TEST

/* ---- the watchdog ------------------------------------------------------------ */

START_TEST(test_watchdog_batches) {
    client_t *c[4] = {client(), client(), client(), client()};
    const char *names[4] = {"w0", "w1", "w2", "w3"};
    for (int i = 0; i < 3; i++) ck_assert_int_eq(lock_req(c[i], names[i], 0), 0);
    fake_run(fb);
    for (int i = 0; i < 3; i++) expect_granted(c[i], 1);
    timers_advance(tm, 200);
    lock_ok(c[3], names[3], 0); /* due 200 later: within the slack, so taken along */

    timers_advance(tm, EVERY - 201);
    ck_assert_uint_eq(submitted(BACKEND_RENEW), 0);
    size_t mark = fake_log_len(fb);
    timers_advance(tm, 1);
    ck_assert_uint_eq(submitted(BACKEND_RENEW), 4);
    ck_assert_uint_eq(fake_queued(fb), 4);
    for (size_t i = 0; i < 4; i++) {
        const fake_rec_t *r = fake_log(fb, mark + i);
        ck_assert_int_eq(r->kind, BACKEND_RENEW);
        ck_assert_uint_eq(r->lease_ms, LEASE);
        ck_assert_uint_eq(r->at, T0 + EVERY);
        ck_assert_uint_eq(r->round, fake_log(fb, mark)->round);
    }
    fake_run(fb);
    ck_assert_uint_eq(stats().renewals, 4);
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(fake_pttl(fb, names[i]), LEASE);
        no_event(c[i]);
    }
    /* The next round comes one period later, again all four at once. */
    timers_advance(tm, EVERY - 1);
    ck_assert_uint_eq(submitted(BACKEND_RENEW), 4);
    timers_advance(tm, 1);
    ck_assert_uint_eq(submitted(BACKEND_RENEW), 8);
    ck_assert_uint_eq(fake_stats(fb)->max_inflight_kind[BACKEND_RENEW], 4);
}
END_TEST

/* More holds due at once than LOCKMGR_RENEW_INFLIGHT batches of
 * LOCKMGR_RENEW_BATCH take: the rest goes when a batch has come back. */
START_TEST(test_watchdog_big_batches) {
    enum { FULL = LOCKMGR_RENEW_BATCH * LOCKMGR_RENEW_INFLIGHT, N = FULL + 10 };
    client_t *a = client(), *b = client();
    char name[32];
    conf.max_locks_per_client = N;
    for (int i = 0; i < N; i += 2) { /* one request in flight per owner */
        snprintf(name, sizeof(name), "big%d", i);
        ck_assert_int_eq(lock_req(a, name, 0), 0);
        snprintf(name, sizeof(name), "big%d", i + 1);
        ck_assert_int_eq(lock_req(b, name, 0), 0);
        fake_run(fb);
        expect_granted(a, 1);
        expect_granted(b, 1);
    }
    timers_advance(tm, EVERY);
    ck_assert_uint_eq(fake_queued(fb), FULL);
    fake_run(fb);
    ck_assert_uint_eq(stats().renewals, FULL);
    ck_assert_uint_eq(fake_queued(fb), N - FULL); /* swept on by the first reply */
    fake_run(fb);
    ck_assert_uint_eq(stats().renewals, N);
    ck_assert_uint_eq(stats().locks_held, N);
    no_event(a);
    no_event(b);
}
END_TEST

START_TEST(test_watchdog_keeps_renewing) {
    client_t *a = client();
    lock_ok(a, "k", 0);
    for (int step = 0; step < 200; step++) { /* 20 s, over six leases */
        timers_advance(tm, 100);
        fake_run(fb);
        ck_assert_int_eq(fake_holds(fb, a->id, "k"), 1);
        ck_assert_int_gt(fake_pttl(fb, "k"), (long long)(LEASE - EVERY - 100));
    }
    no_event(a);
    ck_assert_uint_eq(submitted(BACKEND_RENEW), 20);
    ck_assert_uint_eq(stats().renewals, 20);
    ck_assert_uint_eq(lockmgr_owner_held(a->o), 1);
    ck_assert_uint_eq(stats().lost, 0);
}
END_TEST

/* Down from the grant on: !LOST backend exactly lease - lease/10 after it. */
START_TEST(test_watchdog_loss_deadline) {
    client_t *a = client(), *b = client();
    lock_ok(a, "d", 0);
    ck_assert_int_eq(lock_req(b, "d", 0), 0); /* waits behind a */
    fake_set_up(fb, 0);
    timers_advance(tm, LEASE - MARGIN - 1);
    no_event(a);
    ck_assert_uint_eq(submitted(BACKEND_RENEW), 0); /* none while down */
    timers_advance(tm, 1);
    ck_assert_uint_eq(now(), T0 + LEASE - MARGIN);
    expect_event(a, "d", LOCK_LOST_BACKEND);
    ck_assert_uint_eq(a->events[0].at, T0 + LEASE - MARGIN);
    no_event(a);
    ck_assert_uint_eq(lockmgr_owner_held(a->o), 0);
    ck_assert_uint_eq(stats().lost, 1);
    ck_assert_int_eq(unlock_req(a, "d"), 1);
    expect_error(a, LOCK_ERR_NOTHELD);
    /* The waiter goes when the backend is back (the key is gone by then). */
    no_reply(b);
    timers_advance(tm, MARGIN);
    fake_set_up(fb, 1);
    fake_settle(fb);
    expect_granted(b, 1);
}
END_TEST

/* The deadline counts from the last renewal Redis confirmed. */
START_TEST(test_watchdog_loss_from_last_renewal) {
    client_t *a = client();
    lock_ok(a, "d", 0);
    timers_advance(tm, EVERY);
    ck_assert_uint_eq(fake_queued(fb), 1);
    fake_run(fb); /* renewed as of T0 + EVERY */
    timers_advance(tm, 100);
    fake_set_up(fb, 0);
    timers_advance(tm, LEASE - MARGIN - 101);
    no_event(a);
    timers_advance(tm, 1);
    expect_event(a, "d", LOCK_LOST_BACKEND);
    ck_assert_uint_eq(a->events[0].at, T0 + EVERY + LEASE - MARGIN);
}
END_TEST

/* A renewal answered "down" while the backend stays up: retried soon; a
 * success in time keeps the hold. */
START_TEST(test_watchdog_renewal_retried) {
    client_t *a = client();
    lock_ok(a, "r", 0);
    timers_advance(tm, EVERY);
    fake_fail_next(fb, BACKEND_DOWN, "no reply within command_timeout_ms");
    fake_run(fb);
    ck_assert_uint_eq(submitted(BACKEND_RENEW), 1);
    timers_advance(tm, EVERY / 4 + 1);
    ck_assert_uint_eq(submitted(BACKEND_RENEW), 2);
    fake_run(fb);
    for (int step = 0; step < 30; step++) {
        timers_advance(tm, 100);
        fake_run(fb);
    }
    no_event(a);
    ck_assert_uint_eq(lockmgr_owner_held(a->o), 1);
}
END_TEST

START_TEST(test_watchdog_gone_is_expired) {
    client_t *a = client(), *b = client();
    lock_ok(a, "g", 0);
    ck_assert_int_eq(lock_req(b, "g", 0), 0);
    fake_expire(fb, "g");
    timers_advance(tm, EVERY);
    queued_is(0, BACKEND_RENEW, "g", a);
    fake_run(fb);
    expect_event(a, "g", LOCK_LOST_EXPIRED);
    ck_assert_uint_eq(lockmgr_owner_held(a->o), 0);
    /* Its release goes first (a quorum's minority may still hold its
     * field), then the waiter's acquire, at once. */
    queued_is(0, BACKEND_RELEASE, "g", a);
    queued_is(1, BACKEND_ACQUIRE, "g", b);
    fake_run(fb);
    expect_granted(b, 1);
}
END_TEST

START_TEST(test_watchdog_forced) {
    client_t *a = client();
    lock_ok(a, "g", 0);
    fake_force(fb, "g"); /* another daemon's FORCEUNLOCK */
    timers_advance(tm, EVERY);
    fake_run(fb);
    expect_event(a, "g", LOCK_LOST_FORCED);
    no_event(a);
}
END_TEST

/* ---- leases ------------------------------------------------------------------ */

START_TEST(test_lease_expires) {
    client_t *a = client(), *b = client();
    ck_assert_int_eq(lock_req(a, "l", 2000), 0);
    queued_is(0, BACKEND_ACQUIRE, "l", a);
    ck_assert_uint_eq(fake_queued_op(fb, 0)->lease_ms, 2000);
    fake_run(fb);
    expect_granted(a, 1);
    ck_assert_int_eq(lock_req(b, "l", 0), 0);
    timers_advance(tm, 1999);
    no_event(a);
    ck_assert_uint_eq(submitted(BACKEND_RENEW), 0); /* leases are not renewed */
    timers_advance(tm, 1);
    expect_event(a, "l", LOCK_LOST_EXPIRED);
    ck_assert_uint_eq(stats().lost, 1);
    /* Its release is sent (Redis may keep the key a moment longer), then
     * the waiter's acquire. */
    queued_is(0, BACKEND_RELEASE, "l", a);
    queued_is(1, BACKEND_ACQUIRE, "l", b);
    fake_run(fb);
    expect_granted(b, 1);
}
END_TEST

/* A topology with a clock drift allowance (a quorum) vouches for a lease
 * that much less: a lease ends, and a watchdog hold is given up, earlier. */
START_TEST(test_drift_shortens_leases) {
    client_t *a = client(), *b = client();
    fake_set_drift(fb, 40);
    ck_assert_int_eq(lock_req(a, "l", 2000), 0);
    fake_run(fb);
    expect_granted(a, 1);
    timers_advance(tm, 2000 - 40 - 1);
    no_event(a);
    timers_advance(tm, 1);
    expect_event(a, "l", LOCK_LOST_EXPIRED);
    fake_settle(fb);
    lock_ok(b, "d", 0);
    uint64_t t0 = now();
    fake_set_up(fb, 0);
    timers_advance(tm, LEASE - 40 - MARGIN - 1);
    no_event(b);
    timers_advance(tm, 1);
    expect_event(b, "d", LOCK_LOST_BACKEND);
    ck_assert_uint_eq(b->events[0].at, t0 + LEASE - 40 - MARGIN);
}
END_TEST

/* A topology with a longest lease (a quorum's rejoin delay) refuses longer
 * ones with ERR ARGS, before anything reaches it. */
START_TEST(test_lease_above_backend_max) {
    client_t *a = client();
    fake_backend(fb)->lease_max_ms = 5000;
    ck_assert_int_eq(lock_req(a, "m", 5001), 1);
    expect_error(a, LOCK_ERR_ARGS);
    ck_assert_uint_eq(submitted(BACKEND_ACQUIRE), 0);
    ck_assert_int_eq(lock_req(a, "m", 5000), 0);
    fake_run(fb);
    expect_granted(a, 1);
    ck_assert_int_eq(request(a, LOCK_VERB_RENEW, "m", 0, 9000), 1);
    expect_error(a, LOCK_ERR_ARGS);
}
END_TEST

START_TEST(test_renew_request) {
    client_t *a = client();
    lock_ok(a, "x", 2000);
    timers_advance(tm, 1500);
    ck_assert_int_eq(request(a, LOCK_VERB_RENEW, "x", 0, 5000), 0);
    queued_is(0, BACKEND_RENEW, "x", a);
    ck_assert_uint_eq(fake_queued_op(fb, 0)->lease_ms, 5000);
    fake_run(fb);
    expect_value(a, 5000);
    ck_assert_int_eq(fake_pttl(fb, "x"), 5000);
    timers_advance(tm, 4999);
    no_event(a);
    /* RENEW without a lease takes the hold's own. */
    ck_assert_int_eq(request(a, LOCK_VERB_RENEW, "x", 0, 0), 0);
    ck_assert_uint_eq(fake_queued_op(fb, 0)->lease_ms, 5000);
    fake_run(fb);
    expect_value(a, 5000);
    timers_advance(tm, 4999);
    no_event(a);
    timers_advance(tm, 1);
    expect_event(a, "x", LOCK_LOST_EXPIRED);

    ck_assert_int_eq(request(a, LOCK_VERB_RENEW, "x", 0, 0), 1);
    expect_error(a, LOCK_ERR_NOTHELD);
    ck_assert_int_eq(request(a, LOCK_VERB_RENEW, "nothere", 0, 0), 1);
    expect_error(a, LOCK_ERR_NOTHELD);

    lock_ok(a, "wd", 0);
    ck_assert_int_eq(request(a, LOCK_VERB_RENEW, "wd", 0, 0), 0);
    fake_run(fb);
    expect_value(a, LEASE);
}
END_TEST

/* ---- leases and watchdog mode mixed ----------------------------------------
 * The rule: a reentrant grant takes the longest of the modes asked for, the
 * watchdog counting as longer than any lease; RENEW of a watchdog hold
 * renews it now with lease_ms of the conf and ignores a lease given; RENEW
 * of a hold with a lease resets it to the lease given (which becomes its
 * own) or to its own. */

static int renew_req(client_t *c, const char *name, uint32_t lease_ms) {
    return request(c, LOCK_VERB_RENEW, name, 0, lease_ms);
}

/* The first case: RENEW w 2000 on a watchdog lock made it a 2 s
 * lease that then expired. It now renews the lock with the watchdog's own
 * lease and leaves it in watchdog mode, whatever the lease given. */
START_TEST(test_renew_watchdog_keeps_mode) {
    static const uint32_t leases[] = {0, 500, 2000, LEASE, 9000};
    client_t *a = client();
    for (size_t i = 0; i < sizeof(leases) / sizeof(leases[0]); i++) {
        char name[16];
        snprintf(name, sizeof(name), "wd%zu", i);
        lock_ok(a, name, 0);
        timers_advance(tm, EVERY / 2);
        ck_assert_int_eq(renew_req(a, name, leases[i]), 0);
        queued_is(0, BACKEND_RENEW, name, a);
        ck_assert_uint_eq(fake_queued_op(fb, 0)->lease_ms, LEASE); /* the watchdog's lease */
        fake_run(fb);
        expect_value(a, LEASE);
        ck_assert_int_eq(fake_pttl(fb, name), LEASE);
        /* Renewed now: the watchdog's next beat is a period after it. */
        size_t renewals = submitted(BACKEND_RENEW);
        timers_advance(tm, EVERY - 1);
        ck_assert_uint_eq(submitted(BACKEND_RENEW), renewals);
        timers_advance(tm, 1);
        ck_assert_uint_eq(submitted(BACKEND_RENEW), renewals + 1);
        fake_settle(fb);
        stays_watchdog(a, name);
        /* Still a watchdog hold: RENEW without a lease says the same. */
        ck_assert_int_eq(renew_req(a, name, 0), 0);
        fake_settle(fb);
        expect_value(a, LEASE);
        ck_assert_int_eq(unlock_req(a, name), 1);
        expect_value(a, 0);
        fake_settle(fb);
    }
    ck_assert_uint_eq(stats().lost, 0);
}
END_TEST

/* RENEW of a hold with a lease: to the lease given, shorter or longer,
 * which then is its own for RENEW without one. */
START_TEST(test_renew_lease_hold) {
    client_t *a = client();
    lock_ok(a, "l", 2000);
    timers_advance(tm, 1500);
    ck_assert_int_eq(renew_req(a, "l", 300), 0);
    ck_assert_uint_eq(fake_queued_op(fb, 0)->lease_ms, 300);
    fake_run(fb);
    expect_value(a, 300);
    ck_assert_int_eq(fake_pttl(fb, "l"), 300);
    timers_advance(tm, 200);
    ck_assert_int_eq(renew_req(a, "l", 0), 0); /* its own is 300 now */
    ck_assert_uint_eq(fake_queued_op(fb, 0)->lease_ms, 300);
    fake_run(fb);
    expect_value(a, 300);
    uint64_t t = now();
    timers_advance(tm, 299);
    no_event(a);
    ck_assert_uint_eq(submitted(BACKEND_RENEW), 2); /* never the watchdog's */
    timers_advance(tm, 1);
    expect_event(a, "l", LOCK_LOST_EXPIRED);
    ck_assert_uint_eq(a->events[0].at, t + 300);
}
END_TEST

/* Reentry on a watchdog hold, with or without a lease, with LOCK or
 * TRYLOCK: it stays a watchdog hold, and the reentry sets the watchdog's
 * lease in Redis, never the one asked for. */
START_TEST(test_reentry_on_watchdog_stays_watchdog) {
    static const uint32_t leases[] = {0, 500, 9000};
    client_t *a = client();
    for (size_t i = 0; i < sizeof(leases) / sizeof(leases[0]); i++) {
        for (int try = 0; try < 2; try++) {
            char name[16];
            snprintf(name, sizeof(name), "r%zu%d", i, try);
            uint64_t fence = lock_ok(a, name, 0);
            timers_advance(tm, 100);
            if (try) ck_assert_int_eq(request(a, LOCK_VERB_TRYLOCK, name, 0, leases[i]), 0);
            else ck_assert_int_eq(lock_req(a, name, leases[i]), 0);
            queued_is(0, BACKEND_ACQUIRE, name, a);
            ck_assert_uint_eq(fake_queued_op(fb, 0)->lease_ms, LEASE);
            fake_run(fb);
            ck_assert_uint_eq(expect_granted(a, 2), fence);
            ck_assert_int_eq(fake_pttl(fb, name), LEASE);
            stays_watchdog(a, name);
            /* One hold less changes nothing either. */
            ck_assert_int_eq(unlock_req(a, name), 1);
            expect_value(a, 1);
            stays_watchdog(a, name);
            ck_assert_int_eq(unlock_req(a, name), 1);
            expect_value(a, 0);
            fake_settle(fb);
        }
    }
    ck_assert_uint_eq(stats().lost, 0);
}
END_TEST

/* The second case: a reentrant LOCK without a lease on a hold with
 * a lease kept that lease, so the lock expired under the second holder. It
 * now makes it a watchdog hold. */
START_TEST(test_reentry_without_lease_makes_watchdog) {
    client_t *a = client(), *b = client();
    for (int try = 0; try < 2; try++) {
        const char *name = try ? "t" : "x";
        lock_ok(a, name, 2000);
        ck_assert_int_eq(lock_req(b, name, 0), 0); /* waits */
        fake_settle(fb);
        size_t renewals = submitted(BACKEND_RENEW);
        timers_advance(tm, 1500);
        ck_assert_uint_eq(submitted(BACKEND_RENEW), renewals); /* a lease hold */
        if (try) ck_assert_int_eq(request(a, LOCK_VERB_TRYLOCK, name, 1000, 0), 0);
        else ck_assert_int_eq(lock_req(a, name, 0), 0);
        queued_is(0, BACKEND_ACQUIRE, name, a);
        ck_assert_uint_eq(fake_queued_op(fb, 0)->lease_ms, LEASE);
        fake_run(fb);
        expect_granted(a, 2);
        ck_assert_int_eq(fake_pttl(fb, name), LEASE);
        stays_watchdog(a, name); /* well past the 2000 it was leased for */
        no_reply(b);
        /* RENEW treats it as the watchdog hold it is. */
        ck_assert_int_eq(renew_req(a, name, 700), 0);
        ck_assert_uint_eq(fake_queued_op(fb, 0)->lease_ms, LEASE);
        fake_settle(fb);
        expect_value(a, LEASE);
        ck_assert_int_eq(unlock_req(a, name), 1);
        expect_value(a, 1);
        stays_watchdog(a, name);
        ck_assert_int_eq(unlock_req(a, name), 1);
        expect_value(a, 0);
        fake_settle(fb);
        expect_granted(b, 1);
        ck_assert_int_eq(unlock_req(b, name), 1);
        expect_value(b, 0);
        fake_settle(fb);
    }
    ck_assert_uint_eq(stats().lost, 0);
}
END_TEST

/* Reentry with a lease on a hold with a lease: the longer of the two, from
 * the reentry on; never shortened by it. */
START_TEST(test_reentry_with_leases_takes_the_longer) {
    client_t *a = client();
    /* Longer asked: 5000 from the reentry. */
    lock_ok(a, "up", 2000);
    timers_advance(tm, 1000);
    uint64_t t = now();
    ck_assert_int_eq(lock_req(a, "up", 5000), 0);
    ck_assert_uint_eq(fake_queued_op(fb, 0)->lease_ms, 5000);
    fake_run(fb);
    expect_granted(a, 2);
    ck_assert_int_eq(fake_pttl(fb, "up"), 5000);
    timers_advance(tm, 4999);
    no_event(a);
    ck_assert_uint_eq(submitted(BACKEND_RENEW), 0);
    timers_advance(tm, 1);
    expect_event(a, "up", LOCK_LOST_EXPIRED);
    ck_assert_uint_eq(a->events[0].at, t + 5000);
    fake_settle(fb);

    /* Shorter asked: the hold's 5000 again, from the reentry; RENEW
     * without a lease keeps 5000 too. */
    lock_ok(a, "down", 5000);
    timers_advance(tm, 1000);
    t = now();
    ck_assert_int_eq(request(a, LOCK_VERB_TRYLOCK, "down", 0, 2000), 0);
    ck_assert_uint_eq(fake_queued_op(fb, 0)->lease_ms, 5000);
    fake_run(fb);
    expect_granted(a, 2);
    ck_assert_int_eq(fake_pttl(fb, "down"), 5000);
    timers_advance(tm, 2000);
    no_event(a);
    ck_assert_int_eq(renew_req(a, "down", 0), 0);
    ck_assert_uint_eq(fake_queued_op(fb, 0)->lease_ms, 5000);
    fake_run(fb);
    expect_value(a, 5000);
    t = now();
    timers_advance(tm, 4999);
    no_event(a);
    timers_advance(tm, 1);
    expect_event(a, "down", LOCK_LOST_EXPIRED);
    ck_assert_uint_eq(a->events[1].at, t + 5000);
}
END_TEST

/* Regression: a lost answer of a reentrant LOCK <lease> or a RENEW <lease>
 * that may still have run cut Redis's TTL to that lease while the hold
 * stayed on its old schedule. A watchdog hold now never sends a lease of
 * its own; a hold with a lease ends by the time Redis might drop it; a
 * longer lease, or an op that surely did not run, changes nothing. */
START_TEST(test_lost_answer_may_shorten_lease) {
    client_t *a = client();
    lock_ok(a, "wd", 0);
    timers_advance(tm, 100);
    ck_assert_int_eq(lock_req(a, "wd", 500), 0);
    ck_assert_uint_eq(fake_queued_op(fb, 0)->lease_ms, LEASE);
    fake_lose_next(fb, "no reply within command_timeout_ms");
    fake_run(fb);
    expect_error(a, LOCK_ERR_BACKEND);
    ck_assert_int_eq(fake_pttl(fb, "wd"), LEASE); /* it ran, with the watchdog's lease */
    ck_assert_int_eq(renew_req(a, "wd", 500), 0);
    fake_lose_next(fb, "no reply within command_timeout_ms");
    fake_run(fb);
    expect_error(a, LOCK_ERR_BACKEND);
    ck_assert_int_eq(fake_pttl(fb, "wd"), LEASE);
    stays_watchdog(a, "wd");
    ck_assert_int_eq(unlock_req(a, "wd"), 1);
    expect_value(a, 0);
    fake_settle(fb);

    /* A lease hold and a RENEW with a shorter lease. */
    uint64_t t = now();
    lock_ok(a, "l", 2000);
    ck_assert_int_eq(renew_req(a, "l", 300), 0);
    fake_lose_next(fb, "no reply within command_timeout_ms");
    fake_run(fb);
    expect_error(a, LOCK_ERR_BACKEND);
    timers_advance(tm, 299);
    no_event(a);
    timers_advance(tm, 1);
    expect_event(a, "l", LOCK_LOST_EXPIRED);
    ck_assert_uint_eq(a->events[0].at, t + 300);
    fake_settle(fb);

    /* A lease hold and a reentry without a lease (which would make it a
     * watchdog hold) sent the conf's lease, shorter than what the hold has
     * left: the hold keeps its mode, and ends when Redis may drop it. */
    t = now();
    lock_ok(a, "l9", 9000);
    size_t renewals = submitted(BACKEND_RENEW);
    ck_assert_int_eq(lock_req(a, "l9", 0), 0);
    fake_lose_next(fb, "no reply within command_timeout_ms");
    fake_run(fb);
    expect_error(a, LOCK_ERR_BACKEND);
    ck_assert_int_eq(fake_pttl(fb, "l9"), LEASE);
    timers_advance(tm, LEASE - 1);
    no_event(a);
    ck_assert_uint_eq(submitted(BACKEND_RENEW), renewals); /* still a lease hold */
    timers_advance(tm, 1);
    expect_event(a, "l9", LOCK_LOST_EXPIRED);
    ck_assert_uint_eq(a->events[1].at, t + LEASE);
    fake_settle(fb);

    /* A longer lease, or a lost answer that surely did not run: as before. */
    t = now();
    lock_ok(a, "l2", 2000);
    ck_assert_int_eq(renew_req(a, "l2", 9000), 0);
    fake_lose_next(fb, "no reply within command_timeout_ms");
    fake_run(fb);
    expect_error(a, LOCK_ERR_BACKEND);
    ck_assert_int_eq(renew_req(a, "l2", 100), 0);
    fake_fail_next(fb, BACKEND_FAILED, "ERR it did not run");
    fake_run(fb);
    expect_error(a, LOCK_ERR_BACKEND);
    ck_assert_int_eq(lock_req(a, "l2", 0), 0);
    fake_fail_next(fb, BACKEND_FAILED, "ERR it did not run");
    fake_run(fb);
    expect_error(a, LOCK_ERR_BACKEND);
    timers_advance(tm, 1999);
    no_event(a);
    timers_advance(tm, 1);
    expect_event(a, "l2", LOCK_LOST_EXPIRED);
    ck_assert_uint_eq(a->events[2].at, t + 2000);
}
END_TEST

/* A reentry or a RENEW with a lease on a watchdog hold, with the
 * watchdog's renewal queued behind it: both set the watchdog's lease, and
 * the hold stays on the watchdog's schedule. (Before, the request made it
 * a hold with the longer lease, which the renewal then cut short.) */
START_TEST(test_renewal_racing_a_reentry_or_renew) {
    client_t *a = client();
    for (int renew = 0; renew < 2; renew++) {
        const char *name = renew ? "x" : "y";
        lock_ok(a, name, 0);
        uint64_t t = now();
        timers_advance(tm, EVERY - 1);
        if (renew) ck_assert_int_eq(renew_req(a, name, 5000), 0);
        else ck_assert_int_eq(lock_req(a, name, 5000), 0);
        timers_advance(tm, 1); /* the watchdog's renewal goes behind it */
        queued_is(0, renew ? BACKEND_RENEW : BACKEND_ACQUIRE, name, a);
        queued_is(1, BACKEND_RENEW, name, a);
        ck_assert_uint_eq(fake_queued_op(fb, 0)->lease_ms, LEASE);
        ck_assert_uint_eq(fake_queued_op(fb, 1)->lease_ms, LEASE);
        fake_run(fb);
        if (renew) expect_value(a, LEASE);
        else expect_granted(a, 2);
        ck_assert_int_eq(fake_pttl(fb, name), LEASE);
        /* The next beat, a period after the renewal. */
        size_t renewals = submitted(BACKEND_RENEW);
        timers_advance(tm, t + 2 * EVERY - now() - 1);
        ck_assert_uint_eq(submitted(BACKEND_RENEW), renewals);
        timers_advance(tm, 1);
        ck_assert_uint_eq(submitted(BACKEND_RENEW), renewals + 1);
        fake_settle(fb);
        stays_watchdog(a, name);
        if (!renew) {
            ck_assert_int_eq(unlock_req(a, name), 1);
            expect_value(a, 1);
        }
        ck_assert_int_eq(unlock_req(a, name), 1);
        expect_value(a, 0);
        fake_settle(fb);
    }
    ck_assert_uint_eq(stats().lost, 0);
}
END_TEST

/* ---- a reload that changes lease_ms or renew_every_ms ------------------------ */

/* As main.c's reload does: the new values into the conf, then tell it. */
static void reload(uint32_t lease_ms, uint32_t renew_every_ms) {
    conf.lease_ms = lease_ms;
    conf.renew_every_ms = renew_every_ms;
    lockmgr_reconfigure(mgr);
}

/* Every renewal submitted from log position from on asked for lease_ms. */
static void renewals_leased(size_t from, uint32_t lease_ms) {
    for (size_t i = from; i < fake_log_len(fb); i++)
        if (fake_log(fb, i)->kind == BACKEND_RENEW)
            EXPECT(fake_log(fb, i)->lease_ms == lease_ms, "renewal %zu with lease %u, want %u", i,
                   fake_log(fb, i)->lease_ms, lease_ms);
}

/* New grants, their renewals and RENEW of watchdog holds take the new
 * lease; holds with a lease of their own are not concerned. */
START_TEST(test_reload_new_grants) {
    client_t *a = client();
    lock_ok(a, "lease", 2000);
    reload(6000, 2000);
    ck_assert_int_eq(lock_req(a, "n", 0), 0);
    ck_assert_uint_eq(fake_queued_op(fb, 0)->lease_ms, 6000);
    fake_run(fb);
    expect_granted(a, 1);
    ck_assert_int_eq(fake_pttl(fb, "n"), 6000);
    ck_assert_int_eq(renew_req(a, "n", 0), 0);
    ck_assert_uint_eq(fake_queued_op(fb, 0)->lease_ms, 6000);
    fake_run(fb);
    expect_value(a, 6000);
    /* The lease hold ends as it was leased, unrenewed. */
    size_t mark = fake_log_len(fb);
    timers_advance(tm, 1999);
    no_event(a);
    timers_advance(tm, 1);
    expect_event(a, "lease", LOCK_LOST_EXPIRED);
    fake_settle(fb);
    /* The watchdog hold: every 2000, with 6000, for a minute. */
    for (int step = 0; step < 200; step++) {
        run_for(300);
        EXPECT(fake_pttl(fb, "n") > 6000 - 2000 - 400, "PTTL %lld", fake_pttl(fb, "n"));
    }
    no_event(a);
    ck_assert_uint_ge(fake_log_count(fb, mark, BACKEND_RENEW), 29);
    ck_assert_uint_le(fake_log_count(fb, mark, BACKEND_RENEW), 31);
    renewals_leased(mark, 6000);
}
END_TEST

/* A longer lease: a watchdog hold leased with the old one is renewed at
 * once with the new one (else Redis would drop it before the next beat of
 * the new, slower schedule). */
START_TEST(test_reload_longer_lease_renews_held_at_once) {
    client_t *a = client();
    lock_ok(a, "old", 0);
    timers_advance(tm, 500);
    size_t mark = fake_log_len(fb);
    reload(30000, 10000);
    ck_assert_uint_eq(fake_queued(fb), 1);
    queued_is(0, BACKEND_RENEW, "old", a);
    ck_assert_uint_eq(fake_queued_op(fb, 0)->lease_ms, 30000);
    fake_run(fb);
    ck_assert_int_eq(fake_pttl(fb, "old"), 30000);
    /* Then every 10000. */
    timers_advance(tm, 10000 - 1);
    ck_assert_uint_eq(fake_log_count(fb, mark, BACKEND_RENEW), 1);
    timers_advance(tm, 1);
    ck_assert_uint_eq(fake_log_count(fb, mark, BACKEND_RENEW), 2);
    run_for(60000);
    no_event(a);
    ck_assert_int_gt(fake_pttl(fb, "old"), 30000 - 10000 - 100);
    renewals_leased(mark, 30000);
    ck_assert_uint_eq(stats().lost, 0);
}
END_TEST

/* A shorter lease: renewed at once with it, then on the new schedule. */
START_TEST(test_reload_shorter_lease_renews_held_at_once) {
    client_t *a = client();
    lock_ok(a, "old", 0);
    lock_ok(a, "old2", 0);
    timers_advance(tm, 500);
    size_t mark = fake_log_len(fb);
    reload(1000, 0 + 300);
    ck_assert_uint_eq(fake_queued(fb), 2);
    ck_assert_uint_eq(fake_queued_op(fb, 0)->lease_ms, 1000);
    ck_assert_uint_eq(fake_queued_op(fb, 1)->lease_ms, 1000);
    fake_run(fb);
    ck_assert_int_eq(fake_pttl(fb, "old"), 1000);
    ck_assert_int_eq(fake_pttl(fb, "old2"), 1000);
    for (int step = 0; step < 100; step++) {
        run_for(50);
        EXPECT(fake_pttl(fb, "old") > 1000 - 300 - 100, "PTTL %lld", fake_pttl(fb, "old"));
    }
    no_event(a);
    renewals_leased(mark, 1000);
    ck_assert_uint_ge(fake_log_count(fb, mark, BACKEND_RENEW), 2 * 5000 / 300);
}
END_TEST

/* While Redis is away a hold keeps the loss deadline of the lease Redis has
 * for it: a longer lease in the conf does not make it vouched for longer,
 * a shorter one does not give it up sooner. */
START_TEST(test_reload_while_down_keeps_deadlines) {
    client_t *a = client(), *b = client();
    lock_ok(a, "up", 0);
    lock_ok(b, "down", 0);
    fake_set_up(fb, 0);
    timers_advance(tm, 100);
    reload(30000, 10000);
    ck_assert_uint_eq(fake_queued(fb), 0);
    timers_advance(tm, LEASE - MARGIN - 101);
    no_event(a);
    no_event(b);
    timers_advance(tm, 1);
    expect_event(a, "up", LOCK_LOST_BACKEND);
    expect_event(b, "down", LOCK_LOST_BACKEND);
    ck_assert_uint_eq(a->events[0].at, T0 + LEASE - MARGIN);
    fake_set_up(fb, 1);
    fake_settle(fb);

    /* Back to a shorter one than the hold has. */
    reload(LEASE, 0 + EVERY);
    uint64_t t = now();
    lock_ok(a, "up", 0);
    fake_set_up(fb, 0);
    reload(1000, 300);
    timers_advance(tm, 1000);
    no_event(a);
    timers_advance(tm, LEASE - MARGIN - 1001);
    no_event(a);
    timers_advance(tm, 1);
    expect_event(a, "up", LOCK_LOST_BACKEND);
    ck_assert_uint_eq(a->events[1].at, t + LEASE - MARGIN);
}
END_TEST

/* Holds leased with different leases at once (a hold whose renewal with
 * the new lease failed, and a newer one): each is given up at its own
 * deadline, the later-confirmed but shorter one first. */
START_TEST(test_reload_mixed_leases_each_own_deadline) {
    client_t *a = client(), *b = client();
    lock_ok(a, "old", 0);                    /* T0, 3000: lost at T0 + 2700 */
    reload(1000, 300);
    queued_is(0, BACKEND_RENEW, "old", a);
    fake_fail_next(fb, BACKEND_FAILED, "ERR it did not run");
    fake_run(fb);
    timers_advance(tm, 10);
    lock_ok(b, "new", 0);                    /* T0 + 10, 1000: lost at T0 + 910 */
    fake_set_up(fb, 0);
    timers_advance(tm, 899);
    no_event(a);
    no_event(b);
    timers_advance(tm, 1);
    expect_event(b, "new", LOCK_LOST_BACKEND);
    ck_assert_uint_eq(b->events[0].at, T0 + 910);
    no_event(a);
    timers_advance(tm, LEASE - MARGIN - 910 - 1);
    no_event(a);
    timers_advance(tm, 1);
    expect_event(a, "old", LOCK_LOST_BACKEND);
    ck_assert_uint_eq(a->events[0].at, T0 + LEASE - MARGIN);
}
END_TEST

/* Ops in flight across the reload: a renewal and a grant sent with the old
 * lease, answered after it; each hold is then renewed with the new one. A
 * renewal with the new, shorter lease whose answer is lost may have cut
 * Redis's TTL: the hold counts from it. */
START_TEST(test_reload_with_ops_in_flight) {
    client_t *a = client(), *b = client();
    lock_ok(a, "r", 0);
    timers_advance(tm, EVERY);
    queued_is(0, BACKEND_RENEW, "r", a);     /* old lease */
    ck_assert_int_eq(lock_req(b, "g", 0), 0);
    queued_is(1, BACKEND_ACQUIRE, "g", b);
    ck_assert_uint_eq(fake_queued_op(fb, 1)->lease_ms, LEASE);
    reload(1000, 300);
    ck_assert_uint_eq(fake_queued(fb), 2);   /* r is being renewed already */
    size_t mark = fake_log_len(fb);
    fake_run(fb);
    expect_granted(b, 1);
    ck_assert_int_eq(fake_pttl(fb, "r"), LEASE);
    ck_assert_int_eq(fake_pttl(fb, "g"), LEASE);
    /* Both renewed at once with the new lease (g's goes once r's batch is
     * back: a batch's reply sweeps on). */
    fake_settle(fb);
    ck_assert_uint_eq(now(), T0 + EVERY);
    ck_assert_uint_eq(fake_log_count(fb, mark, BACKEND_RENEW), 2);
    renewals_leased(mark, 1000);
    ck_assert_int_eq(fake_pttl(fb, "r"), 1000);
    ck_assert_int_eq(fake_pttl(fb, "g"), 1000);
    run_for(3000);
    no_event(a);
    no_event(b);

    /* A hold leased with a long lease, whose renewal with the new short one
     * got no answer but ran. */
    reload(30000, 10000);
    fake_settle(fb);
    ck_assert_int_eq(fake_pttl(fb, "r"), 30000);
    reload(1000, 300);
    uint64_t t = now();
    fake_lose_next(fb, "no reply within command_timeout_ms");
    fake_lose_next(fb, "no reply within command_timeout_ms");
    fake_run(fb);
    ck_assert_int_eq(fake_pttl(fb, "r"), 1000);
    fake_set_up(fb, 0);
    timers_advance(tm, 900 - 1);
    no_event(a);
    timers_advance(tm, 1);
    expect_event(a, "r", LOCK_LOST_BACKEND);
    expect_event(b, "g", LOCK_LOST_BACKEND);
    ck_assert_uint_eq(a->events[0].at, t + 900);
}
END_TEST

/* renew_every_ms alone: the next beat is planned again. */
START_TEST(test_reload_renew_every) {
    client_t *a = client();
    lock_ok(a, "e", 0);
    timers_advance(tm, 100);
    reload(LEASE, 500);
    ck_assert_uint_eq(fake_queued(fb), 0);   /* the lease in Redis is right */
    timers_advance(tm, 399);
    ck_assert_uint_eq(submitted(BACKEND_RENEW), 0);
    timers_advance(tm, 1);
    ck_assert_uint_eq(submitted(BACKEND_RENEW), 1);
    fake_settle(fb);
    run_for(5000);
    ck_assert_uint_ge(submitted(BACKEND_RENEW), 10);
    ck_assert_uint_le(submitted(BACKEND_RENEW), 11);
    /* And slower again. */
    size_t mark = fake_log_len(fb);
    reload(LEASE, 2000);
    run_for(10000);
    ck_assert_uint_ge(fake_log_count(fb, mark, BACKEND_RENEW), 4);
    ck_assert_uint_le(fake_log_count(fb, mark, BACKEND_RENEW), 6);
    no_event(a);
}
END_TEST

/* RENEW of a hold that Redis no longer has: NOTHELD, and !LOST. */
START_TEST(test_renew_gone) {
    client_t *a = client();
    lock_ok(a, "x", 0);
    fake_expire(fb, "x");
    ck_assert_int_eq(request(a, LOCK_VERB_RENEW, "x", 0, 0), 0);
    fake_run(fb);
    expect_event(a, "x", LOCK_LOST_EXPIRED);
    expect_error(a, LOCK_ERR_NOTHELD);
    ck_assert_uint_eq(lockmgr_owner_held(a->o), 0);
}
END_TEST

/* ---- releases while the backend is away -------------------------------------- */

START_TEST(test_release_retried_when_back) {
    client_t *a = client();
    lock_ok(a, "rel", 0);
    fake_set_up(fb, 0);
    ck_assert_int_eq(unlock_req(a, "rel"), 1); /* answered at once, even now */
    expect_value(a, 0);
    ck_assert_uint_eq(submitted(BACKEND_RELEASE), 1);
    fake_run(fb); /* down */
    fake_run(fb);
    timers_advance(tm, 1000);
    fake_run(fb);
    ck_assert_uint_eq(submitted(BACKEND_RELEASE), 1); /* not before it is back */
    ck_assert_int_eq(fake_holds(fb, a->id, "rel"), 1);
    fake_set_up(fb, 1);
    ck_assert_uint_eq(submitted(BACKEND_RELEASE), 2);
    queued_is(0, BACKEND_RELEASE, "rel", a);
    fake_run(fb);
    ck_assert_int_eq(fake_pttl(fb, "rel"), -2);
    fake_set_up(fb, 0);
    fake_set_up(fb, 1);
    ck_assert_uint_eq(submitted(BACKEND_RELEASE), 2); /* done: not sent again */
}
END_TEST

START_TEST(test_release_given_up_after_lease) {
    client_t *a = client();
    lock_ok(a, "rel", 0);
    fake_set_up(fb, 0);
    ck_assert_int_eq(unlock_req(a, "rel"), 1);
    expect_value(a, 0);
    fake_run(fb);
    timers_advance(tm, LEASE - 1);
    fake_set_up(fb, 1); /* still within the lease: sent again, and lost again */
    ck_assert_uint_eq(submitted(BACKEND_RELEASE), 2);
    fake_fail_next(fb, BACKEND_DOWN, "connection reset");
    fake_run(fb);
    timers_advance(tm, 1);
    fake_set_up(fb, 0);
    fake_set_up(fb, 1);
    ck_assert_uint_eq(submitted(BACKEND_RELEASE), 3);
    fake_fail_next(fb, BACKEND_DOWN, "connection reset");
    fake_run(fb); /* past the lease: given up */
    fake_set_up(fb, 0);
    fake_set_up(fb, 1);
    ck_assert_uint_eq(submitted(BACKEND_RELEASE), 3);
    ck_assert_uint_eq(fake_queued(fb), 0);
}
END_TEST

/* A grant to the same owner makes its queued release stale. */
/* A release that got no answer (it ran, its reply was lost) waits for
 * Redis; the owner locks again, and while that acquire is in flight the
 * backend's state changes (a Cluster's other shard, a quorum's node): the
 * old release must not go out behind the acquire, where it would delete
 * the new grant. */
START_TEST(test_release_not_resent_behind_own_acquire) {
    client_t *a = client(), *b = client();
    lock_ok(a, "k", 0);
    fake_lose_next(fb, "no reply within command_timeout_ms");
    ck_assert_int_eq(unlock_req(a, "k"), 1);
    expect_value(a, 0);
    fake_run(fb); /* the release ran, its answer was lost: queued again */
    ck_assert_int_eq(lock_req(a, "k", 0), 0);
    ck_assert_uint_eq(fake_queued(fb), 1);
    queued_is(0, BACKEND_ACQUIRE, "k", a);
    backend_notify_state(fake_backend(fb));
    ck_assert_uint_eq(fake_queued(fb), 1); /* not behind the acquire */
    fake_settle(fb);
    expect_granted(a, 1);
    ck_assert_int_eq(fake_holds(fb, a->id, "k"), 1);
    /* Its grant made the old release stale: the next state change sends
     * nothing, and b waits behind a. */
    ck_assert_int_eq(lock_req(b, "k", 0), 0);
    backend_notify_state(fake_backend(fb));
    fake_settle(fb);
    no_reply(b);
    ck_assert_int_eq(fake_holds(fb, a->id, "k"), 1);
}
END_TEST

START_TEST(test_release_forgotten_by_new_grant) {
    client_t *a = client();
    lock_ok(a, "s", 0);
    ck_assert_int_eq(unlock_req(a, "s"), 1);
    expect_value(a, 0);
    fake_lose_next(fb, "no reply within command_timeout_ms"); /* ran, but no answer */
    fake_run(fb);
    uint64_t f = lock_ok(a, "s", 0);
    fake_set_up(fb, 0);
    fake_set_up(fb, 1);
    fake_settle(fb);
    ck_assert_uint_eq(submitted(BACKEND_RELEASE), 1);
    ck_assert_int_eq(fake_holds(fb, a->id, "s"), 1);
    ck_assert_uint_eq(f, fake_fence_us(fb) + 1); /* the second grant at this instant */
}
END_TEST

/* ---- owners leaving ---------------------------------------------------------- */

START_TEST(test_owner_drop_cancels_and_releases) {
    client_t *a = client(), *b = client(), *c = client();
    lock_ok(a, "x", 0);
    lock_ok(a, "y", 0);
    ck_assert_int_eq(lock_req(b, "x", 0), 0);
    ck_assert_int_eq(lock_req(c, "x", 0), 0);
    ck_assert_uint_eq(stats().waiters, 2);

    drop(b); /* its wait is cancelled */
    ck_assert_uint_eq(stats().waiters, 1);
    ck_assert_uint_eq(fake_queued(fb), 0);

    drop(a); /* both its locks are released; c, next, goes */
    ck_assert_uint_eq(stats().locks_held, 0);
    ck_assert_uint_eq(fake_log_count(fb, 0, BACKEND_RELEASE), 2);
    fake_run(fb);
    expect_granted(c, 1);
    ck_assert_int_eq(fake_pttl(fb, "y"), -2);
    ck_assert_int_eq(fake_holds(fb, c->id, "x"), 1);
    ck_assert_uint_eq(stats().waiters, 0);
}
END_TEST

/* An acquire in flight when its owner leaves: a grant is undone. */
START_TEST(test_owner_drop_acquire_in_flight) {
    client_t *a = client(), *b = client();
    ck_assert_int_eq(lock_req(a, "x", 0), 0);
    ck_assert_int_eq(lock_req(b, "x", 0), 0);
    queued_is(0, BACKEND_ACQUIRE, "x", a);
    fake_hold(fb, 1); /* Redis is slow to answer */
    ck_assert_uint_eq(fake_run(fb), 0);
    timers_advance(tm, 100);
    drop(a);
    ck_assert_uint_eq(fake_queued(fb), 1); /* nothing new until it answers */
    fake_hold(fb, 0);
    ck_assert_uint_eq(fake_run(fb), 1); /* granted to a: released, then b tries */
    ck_assert_int_eq(fake_pttl(fb, "x"), LEASE);
    queued_is(0, BACKEND_RELEASE, "x", a);
    queued_is(1, BACKEND_ACQUIRE, "x", b);
    fake_run(fb);
    expect_granted(b, 1);
    ck_assert_int_eq(fake_holds(fb, a->id, "x"), 0);
    ck_assert_uint_eq(stats().locks_held, 1);
}
END_TEST

/* A TAKEN answer for a departed owner needs no release. */
START_TEST(test_owner_drop_attempt_taken) {
    client_t *a = client();
    fake_take(fb, "x", "other", 1000);
    ck_assert_int_eq(lock_req(a, "x", 0), 0);
    drop(a);
    fake_settle(fb);
    ck_assert_uint_eq(submitted(BACKEND_RELEASE), 0);
    ck_assert_uint_eq(fake_watch_calls(fb, "x"), 0);
    timers_advance(tm, 5000);
    ck_assert_uint_eq(fake_queued(fb), 0);
}
END_TEST

/* A reentry in flight when its owner leaves: the release covers it. */
START_TEST(test_owner_drop_reentry_in_flight) {
    client_t *a = client();
    lock_ok(a, "x", 0);
    ck_assert_int_eq(lock_req(a, "x", 0), 0);
    drop(a);
    fake_settle(fb);
    ck_assert_int_eq(fake_pttl(fb, "x"), -2);
}
END_TEST

/* Regression: a session that closes from inside the lock manager's
 * callback (its output overflowed while a reply or !LOST was written)
 * drops its owner there; the lock manager went on using the owner, and
 * locks the drop could free, after the callback returned (use after free,
 * and an acquire sent for the departed owner). The drop now completes from
 * a timer once the callback has returned, and the owner hears nothing more. */
START_TEST(test_owner_drop_inside_its_callback) {
    client_t *a = client(), *b = client(), *c = client(), *d = client();

    /* From a GRANTED: the grant is released, the next waiter goes. */
    ck_assert_int_eq(lock_req(a, "x", 0), 0);
    ck_assert_int_eq(lock_req(b, "x", 0), 0);
    a->drop_in_callback = 1;
    fake_run(fb);
    expect_granted(a, 1);
    ck_assert(a->dropped);
    ck_assert_uint_eq(fake_queued(fb), 0); /* nothing from inside the callback */
    timers_run_due(tm);
    queued_is(0, BACKEND_RELEASE, "x", a);
    queued_is(1, BACKEND_ACQUIRE, "x", b);
    fake_run(fb);
    expect_granted(b, 1);
    ck_assert_uint_eq(fake_log_count(fb, 0, BACKEND_ACQUIRE), 2);

    /* From a TRYLOCK's TIMEOUT. */
    ck_assert_int_eq(request(c, LOCK_VERB_TRYLOCK, "x", 100, 0), 0);
    c->drop_in_callback = 1;
    timers_advance(tm, 100);
    expect_timeout(c, LEASE - 100);
    timers_run_due(tm);
    ck_assert_uint_eq(stats().waiters, 0);

    /* From the !LOST before a reentry starts again as a wait. */
    fake_expire(fb, "x");
    ck_assert_int_eq(lock_req(b, "x", 0), 0);
    b->drop_in_callback = 1;
    fake_run(fb);
    expect_event(b, "x", LOCK_LOST_EXPIRED);
    timers_run_due(tm);
    fake_settle(fb);
    timers_advance(tm, 10 * LEASE);
    fake_settle(fb);
    ck_assert_int_eq(fake_pttl(fb, "x"), -2);
    ck_assert_uint_eq(stats().waiters, 0);
    ck_assert_uint_eq(stats().locks_held, 0);

    /* From a !LOST by the watchdog, with another lock still held. */
    lock_ok(d, "y", 0);
    lock_ok(d, "z", 0);
    fake_expire(fb, "y");
    d->drop_in_callback = 1;
    timers_advance(tm, EVERY);
    fake_run(fb);
    expect_event(d, "y", LOCK_LOST_EXPIRED);
    timers_run_due(tm);
    fake_settle(fb);
    ck_assert_int_eq(fake_pttl(fb, "z"), -2);
    ck_assert_uint_eq(stats().locks_held, 0);
}
END_TEST

/* ---- STATUS, FORCE ----------------------------------------------------------- */

START_TEST(test_status) {
    client_t *a = client(), *b = client();
    ck_assert_int_eq(request(a, LOCK_VERB_STATUS, "s", 0, 0), 0);
    queued_is(0, BACKEND_STATUS, "s", a);
    fake_run(fb);
    lock_reply_t r = next_reply(a);
    ck_assert_int_eq(r.type, LOCK_REPLY_FREE);

    fake_take(fb, "s", "other", 5000);
    timers_advance(tm, 1000);
    ck_assert_int_eq(request(a, LOCK_VERB_STATUS, "s", 0, 0), 0);
    fake_run(fb);
    r = next_reply(a);
    ck_assert_int_eq(r.type, LOCK_REPLY_TAKEN);
    ck_assert_int_eq(r.ttl_ms, 4000);

    uint64_t fence = lock_ok(b, "m", 0);
    ck_assert_int_eq(lock_req(b, "m", 0), 0);
    fake_run(fb);
    expect_granted(b, 2);
    timers_advance(tm, 400);
    ck_assert_int_eq(request(b, LOCK_VERB_STATUS, "m", 0, 0), 0);
    fake_run(fb);
    r = next_reply(b);
    ck_assert_int_eq(r.type, LOCK_REPLY_MINE);
    ck_assert_int_eq(r.holds, 2);
    ck_assert_int_eq(r.ttl_ms, LEASE - 400);
    ck_assert_uint_eq(r.fence, fence);

    /* Someone else's lock, from this daemon: TAKEN. */
    ck_assert_int_eq(request(a, LOCK_VERB_STATUS, "m", 0, 0), 0);
    fake_run(fb);
    r = next_reply(a);
    ck_assert_int_eq(r.type, LOCK_REPLY_TAKEN);
    ck_assert_int_eq(r.ttl_ms, LEASE - 400);

    /* MINE here but gone in Redis: !LOST, and the truth. */
    fake_expire(fb, "m");
    ck_assert_int_eq(request(b, LOCK_VERB_STATUS, "m", 0, 0), 0);
    fake_run(fb);
    expect_event(b, "m", LOCK_LOST_EXPIRED);
    r = next_reply(b);
    ck_assert_int_eq(r.type, LOCK_REPLY_FREE);
}
END_TEST

/* Who may FORCEUNLOCK is the session's to check (conf/access.h): the lock
 * manager does what it is asked. */
START_TEST(test_force_not_checked_here) {
    client_t *a = client(), *u = client_uid(1000);
    lock_ok(a, "f", 0);
    ck_assert_int_eq(request(u, LOCK_VERB_FORCE, "f", 0, 0), 0);
    queued_is(0, BACKEND_FORCE, "f", u);
    fake_run(fb);
    expect_value(u, 1);
    expect_event(a, "f", LOCK_LOST_FORCED);
}
END_TEST

START_TEST(test_force_by_root) {
    client_t *a = client(), *w = client(), *root = client_uid(0);
    lock_ok(a, "f", 0);
    ck_assert_int_eq(lock_req(w, "f", 0), 0);
    ck_assert_int_eq(request(root, LOCK_VERB_FORCE, "f", 0, 0), 0);
    queued_is(0, BACKEND_FORCE, "f", root);
    fake_run(fb);
    expect_value(root, 1);
    expect_event(a, "f", LOCK_LOST_FORCED);
    ck_assert_uint_eq(lockmgr_owner_held(a->o), 0);
    fake_run(fb); /* the waiter got it */
    expect_granted(w, 1);
    /* a's watchdog does not come back to it. */
    for (int step = 0; step < 30; step++) {
        timers_advance(tm, 100);
        fake_run(fb);
    }
    no_event(a);
    no_event(w);
    /* Nothing to remove: 0. */
    ck_assert_int_eq(request(root, LOCK_VERB_FORCE, "free", 0, 0), 0);
    fake_run(fb);
    expect_value(root, 0);
}
END_TEST

START_TEST(test_force_by_admin_uid) {
    client_t *adm = client_uid(4242);
    conf.admin_uids[conf.admin_uids_count++] = 4242;
    fake_take(fb, "f", "other", 5000);
    ck_assert_int_eq(request(adm, LOCK_VERB_FORCE, "f", 0, 0), 0);
    fake_run(fb);
    expect_value(adm, 1);
    ck_assert_int_eq(fake_pttl(fb, "f"), -2);
}
END_TEST

/* ---- limits and an unavailable backend --------------------------------------- */

START_TEST(test_limit_locks_per_client) {
    client_t *a = client();
    conf.max_locks_per_client = 2;
    lock_ok(a, "l1", 0);
    lock_ok(a, "l2", 0);
    size_t ops = fake_log_len(fb);
    ck_assert_int_eq(lock_req(a, "l3", 0), 1);
    lock_reply_t r = expect_error(a, LOCK_ERR_LIMIT);
    why_is(&r, LOCK_WHY_MAX_LOCKS, -1);
    ck_assert_int_eq(request(a, LOCK_VERB_TRYLOCK, "l3", 0, 0), 1);
    expect_error(a, LOCK_ERR_LIMIT);
    ck_assert_uint_eq(fake_log_len(fb), ops);
    /* Reentry is not a new lock. */
    ck_assert_int_eq(lock_req(a, "l1", 0), 0);
    fake_run(fb);
    expect_granted(a, 2);
}
END_TEST

START_TEST(test_limit_waiters) {
    client_t *a = client(), *b = client(), *c = client(), *d = client();
    conf.max_waiters = 2;
    lock_ok(a, "w", 0);
    ck_assert_int_eq(lock_req(b, "w", 0), 0);
    ck_assert_int_eq(lock_req(c, "w", 0), 0);
    ck_assert_int_eq(lock_req(d, "w", 0), 1);
    lock_reply_t r = expect_error(d, LOCK_ERR_LIMIT);
    why_is(&r, LOCK_WHY_MAX_WAITERS, -1);
    ck_assert_uint_eq(stats().waiters, 2);
    drop(b);
    ck_assert_int_eq(lock_req(d, "w", 0), 0);
    ck_assert_uint_eq(stats().waiters, 2);
}
END_TEST

/* max_locks_per_uid counts the holds of all of one uid's owners; another
 * uid is not touched, and a released hold makes room. */
START_TEST(test_limit_locks_per_uid) {
    client_t *a = client_uid(1000), *b = client_uid(1000), *c = client_uid(1001);
    conf.max_locks_per_uid = 2;
    lock_ok(a, "u1", 0);
    lock_ok(b, "u2", 0);
    size_t ops = fake_log_len(fb);
    ck_assert_int_eq(lock_req(a, "u3", 0), 1);
    lock_reply_t r = expect_error(a, LOCK_ERR_LIMIT);
    why_is(&r, LOCK_WHY_MAX_LOCKS_UID, -1);
    ck_assert_uint_eq(fake_log_len(fb), ops);
    lock_ok(c, "u3", 0);
    /* Reentry is not a new lock. */
    ck_assert_int_eq(lock_req(a, "u1", 0), 0);
    fake_run(fb);
    expect_granted(a, 2);
    drop(b);
    lock_ok(a, "u4", 0);
}
END_TEST

/* max_waiters_per_uid: one uid's queued requests together. */
START_TEST(test_limit_waiters_per_uid) {
    client_t *h = client(), *a = client_uid(1000), *b = client_uid(1000),
             *c = client_uid(1001);
    conf.max_waiters_per_uid = 1;
    lock_ok(h, "w", 0);
    ck_assert_int_eq(lock_req(a, "w", 0), 0);
    ck_assert_int_eq(lock_req(b, "w", 0), 1);
    lock_reply_t r = expect_error(b, LOCK_ERR_LIMIT);
    why_is(&r, LOCK_WHY_MAX_WAITERS_UID, -1);
    ck_assert_int_eq(lock_req(c, "w", 0), 0); /* another uid waits */
    ck_assert_uint_eq(stats().waiters, 2);
    drop(a);
    ck_assert_int_eq(lock_req(b, "w", 0), 0);
}
END_TEST

START_TEST(test_backend_down_at_once) {
    client_t *a = client(), *b = client();
    lock_ok(b, "held", 0);
    fake_set_up(fb, 0);
    ck_assert_int_eq(lock_req(a, "x", 0), 1);
    lock_reply_t r = expect_error(a, LOCK_ERR_BACKEND);
    ck_assert_ptr_nonnull(r.detail);
    ck_assert_str_eq(r.detail, "fake: redis not connected");
    ck_assert_int_eq(request(a, LOCK_VERB_TRYLOCK, "x", 100, 0), 1);
    expect_error(a, LOCK_ERR_BACKEND);
    /* a reentry too */
    ck_assert_int_eq(lock_req(b, "held", 0), 1);
    expect_error(b, LOCK_ERR_BACKEND);
    ck_assert_uint_eq(fake_queued(fb), 0);
    lockmgr_stats_t s = stats();
    ck_assert_uint_eq(s.backend_errors, 3);
    ck_assert_int_eq(s.backend_up, 0);
    ck_assert_uint_eq(s.waiters, 0);
    ck_assert_str_eq(s.backend, "fake");
}
END_TEST

/* A first try that Redis fails is an error; a grant that may have happened
 * is released. */
START_TEST(test_acquire_errors) {
    client_t *a = client();
    fake_fail_next(fb, BACKEND_FAILED, "ERR something");
    ck_assert_int_eq(lock_req(a, "e", 0), 0);
    fake_run(fb);
    lock_reply_t r = expect_error(a, LOCK_ERR_BACKEND);
    ck_assert_str_eq(r.detail, "ERR something");
    ck_assert_uint_eq(submitted(BACKEND_RELEASE), 0); /* it did not run */

    fake_lose_next(fb, "no reply within command_timeout_ms");
    ck_assert_int_eq(lock_req(a, "e", 0), 0);
    fake_run(fb);
    expect_error(a, LOCK_ERR_BACKEND);
    ck_assert_int_eq(fake_holds(fb, a->id, "e"), 1); /* it ran after all */
    queued_is(0, BACKEND_RELEASE, "e", a);
    fake_run(fb);
    ck_assert_int_eq(fake_pttl(fb, "e"), -2);
    ck_assert_uint_eq(stats().locks_held, 0);
    ck_assert_uint_eq(stats().backend_errors, 2);
}
END_TEST

/* ---- answers a kind does not expect (issue 36, bug 8) -------------------------- */

/* HOLD_GONE for a plain acquire (the plain script never says it: a reply
 * rewritten on its way) may hide a grant: it is undone in Redis before the
 * waiter tries again, and the waiter is answered; the queue behind it goes
 * on. A TRYLOCK of 0 is answered ERR BACKEND at once. */
START_TEST(test_hold_gone_plain_retried) {
    client_t *a = client(), *b = client();
    ck_assert_int_eq(lock_req(a, "g", 0), 0);
    ck_assert_int_eq(lock_req(b, "g", 0), 0);
    fake_rewrite_next(fb, BACKEND_HOLD_GONE);
    fake_run(fb); /* granted in Redis, heard as HOLD_GONE */
    no_reply(a);
    run_until_reply(a, now() + 5 * LEASE);
    expect_granted(a, 1);
    ck_assert_int_eq(fake_holds(fb, a->id, "g"), 1);
    ck_assert_uint_eq(stats().waiters, 1);
    ck_assert_int_eq(unlock_req(a, "g"), 1);
    expect_value(a, 0);
    fake_settle(fb);
    expect_granted(b, 1);
    ck_assert_uint_eq(stats().waiters, 0);
    ck_assert_uint_eq(stats().locks_held, 1);
}
END_TEST

START_TEST(test_hold_gone_plain_trylock) {
    client_t *a = client(), *b = client();
    ck_assert_int_eq(request(a, LOCK_VERB_TRYLOCK, "g", 0, 0), 0);
    fake_rewrite_next(fb, BACKEND_HOLD_GONE);
    fake_run(fb);
    lock_reply_t r = expect_error(a, LOCK_ERR_BACKEND);
    ck_assert_ptr_nonnull(r.detail);
    fake_settle(fb);
    ck_assert_int_eq(fake_holds(fb, a->id, "g"), 0); /* the hidden grant undone */
    ck_assert_uint_eq(stats().waiters, 0);
    /* TRYLOCK with a wait: tries again, granted within it */
    ck_assert_int_eq(request(b, LOCK_VERB_TRYLOCK, "g", 2000, 0), 0);
    fake_rewrite_next(fb, BACKEND_HOLD_GONE);
    fake_run(fb);
    no_reply(b);
    run_until_reply(b, now() + 2000);
    expect_granted(b, 1);
    /* one whose wait ends first: ERR BACKEND, nothing held */
    ck_assert_int_eq(request(a, LOCK_VERB_TRYLOCK, "h", 50, 0), 0);
    fake_rewrite_next(fb, BACKEND_HOLD_GONE);
    fake_run(fb);
    run_until_reply(a, now() + 200); /* its wait ends before its next try */
    expect_error(a, LOCK_ERR_BACKEND);
    fake_settle(fb);
    ck_assert_int_eq(fake_holds(fb, a->id, "h"), 0);
    ck_assert_uint_eq(stats().waiters, 0);
}
END_TEST

/* The same answer for a waiter that left meanwhile: the grant it hides is
 * undone. */
START_TEST(test_hold_gone_orphan_undone) {
    client_t *a = client(), *b = client();
    ck_assert_int_eq(lock_req(a, "g", 0), 0);
    drop(a);
    fake_rewrite_next(fb, BACKEND_HOLD_GONE);
    fake_settle(fb);
    ck_assert_int_eq(fake_mode(fb, "g"), -1);
    lock_ok(b, "g", 0);
}
END_TEST

/* ---- max_locks_per_uid is a bound (issue 36, bug 5) ----------------------------- */

/* Six connections of one uid ask at once, each within the limit when it
 * comes: only the limit's worth are granted; the grants past it are given
 * back in Redis and answered ERR LIMIT. */
START_TEST(test_limit_locks_per_uid_at_once) {
    conf.max_locks_per_uid = 3;
    client_t *c[6];
    char name[6][16];
    for (int i = 0; i < 6; i++) {
        c[i] = client_uid(1000);
        snprintf(name[i], sizeof(name[i]), "p%d", i);
        ck_assert_int_eq(lock_req(c[i], name[i], 0), 0);
    }
    fake_settle(fb);
    int granted = 0, refused = 0;
    for (int i = 0; i < 6; i++) {
        lock_reply_t r = next_reply(c[i]);
        if (r.type == LOCK_REPLY_GRANTED) {
            granted++;
            ck_assert_int_eq(fake_holds(fb, c[i]->id, name[i]), 1);
            continue;
        }
        ck_assert_int_eq(r.type, LOCK_REPLY_ERROR);
        ck_assert_int_eq(r.err, LOCK_ERR_LIMIT);
        why_is(&r, LOCK_WHY_MAX_LOCKS_UID, -1);
        ck_assert_int_eq(fake_mode(fb, name[i]), -1);
        refused++;
    }
    ck_assert_int_eq(granted, 3);
    ck_assert_int_eq(refused, 3);
    ck_assert_uint_eq(stats().locks_held, 3);
    ck_assert_uint_eq(stats().waiters, 0);
}
END_TEST

/* A wait for a name another connection of the uid holds is no lock more
 * while it waits: it is granted once that one is released. */
START_TEST(test_limit_locks_per_uid_wait_behind_own) {
    conf.max_locks_per_uid = 1;
    client_t *a = client_uid(1000), *b = client_uid(1000);
    lock_ok(a, "q", 0);
    ck_assert_int_eq(lock_req(b, "q", 0), 1);
    lock_reply_t r = expect_error(b, LOCK_ERR_LIMIT);
    why_is(&r, LOCK_WHY_MAX_LOCKS_UID, -1);
    conf.max_locks_per_uid = 2;
    ck_assert_int_eq(lock_req(b, "q", 0), 0);
    conf.max_locks_per_uid = 1; /* a reload lowers it while b waits */
    ck_assert_int_eq(unlock_req(a, "q"), 1);
    expect_value(a, 0);
    fake_settle(fb);
    expect_granted(b, 1);
}
END_TEST

/* ---- a hold lost: the waiters here behind it go (issue 36, bug 4) ------------- */

/* A reentry that finds the name another kind's in Redis loses the hold:
 * the waiter queued behind it here tries, and is answered. */
START_TEST(test_reentry_wrong_kind_kicks_waiter) {
    client_t *a = client(), *b = client();
    lock_ok(a, "k", 0);
    ck_assert_int_eq(lock_req(b, "k", 0), 0);
    fake_settle(fb);
    no_reply(b);
    fake_take_rw(fb, "k", "x", BACKEND_WRITE, 5000);
    ck_assert_int_eq(lock_req(a, "k", 0), 0);
    fake_settle(fb);
    expect_error(a, LOCK_ERR_KIND);
    expect_event(a, "k", LOCK_LOST_EXPIRED);
    run_until_reply(b, now() + 2 * LEASE);
    expect_error(b, LOCK_ERR_KIND);
    ck_assert_uint_eq(stats().waiters, 0);
}
END_TEST

/* A reentry that found the hold gone and took the name anew, not
 * replicated in time: the hold is lost and the grant undone; the waiter
 * behind it here goes. */
START_TEST(test_reentry_unacked_kicks_waiter) {
    client_t *a = client(), *b = client();
    lock_ok(a, "u", 0);
    ck_assert_int_eq(lock_req(b, "u", 0), 0);
    fake_settle(fb);
    no_reply(b);
    fake_expire(fb, "u");
    ck_assert_int_eq(lock_req(a, "u", 0), 0);
    fake_unack_next(fb, "replicas: acked 0 of 1");
    fake_settle(fb);
    expect_error(a, LOCK_ERR_BACKEND);
    expect_event(a, "u", LOCK_LOST_EXPIRED);
    run_until_reply(b, now() + 2 * LEASE);
    expect_granted(b, 1);
    ck_assert_uint_eq(stats().waiters, 0);
}
END_TEST

/* ---- WHO ----------------------------------------------------------------------------- */

/* A holder of this daemon is named from memory, with its pid and uid; a
 * holder elsewhere is asked of Redis, and one no dlockd registered (the
 * fake registers none) has no host or pid. */
START_TEST(test_who) {
    client_t *a = client_uid(4242), *b = client();
    lockmgr_owner_set_pid(a->o, 777);
    lock_ok(a, "w", 0);
    size_t before = fake_stats(fb)->submitted[BACKEND_WHO];
    ck_assert_int_eq(request(b, LOCK_VERB_WHO, "w", 0, 0), 1);
    lock_reply_t r = next_reply(b);
    ck_assert_int_eq(r.type, LOCK_REPLY_HELD);
    ck_assert_int_eq(r.holder_pid, 777);
    ck_assert_int_eq(r.holder_uid, 4242);
    ck_assert_int_eq(r.holder_dlockd_pid, (long long)getpid());
    ck_assert_str_ne(r.holder_host, "");
    ck_assert_int_gt(r.ttl_ms, 0);
    ck_assert_uint_eq(fake_stats(fb)->submitted[BACKEND_WHO], before); /* no Redis */

    fake_take(fb, "x", "someone-else:1", 5000);
    ck_assert_int_eq(request(b, LOCK_VERB_WHO, "x", 0, 0), 0);
    fake_run(fb);
    r = next_reply(b);
    ck_assert_int_eq(r.type, LOCK_REPLY_HELD);
    ck_assert_int_eq(r.ttl_ms, 5000);
    ck_assert_int_eq(r.holder_dlockd_pid, -1);
    ck_assert_int_eq(r.holder_pid, -1);
    ck_assert_int_eq(r.holder_uid, -1);

    ck_assert_int_eq(request(b, LOCK_VERB_WHO, "free", 0, 0), 0);
    fake_run(fb);
    ck_assert_int_eq(next_reply(b).type, LOCK_REPLY_FREE);
}
END_TEST

/* ---- replicas that do not acknowledge (replicas_ack) ------------------------------ */

#define UNACKED "replicas: acked 0 of 1"

/* A grant its replicas did not acknowledge is undone; a LOCK waits on and
 * tries again after LOCKMGR_UNACKED_RETRY_MS. */
START_TEST(test_unacked_grant_undone_lock_waits) {
    client_t *a = client();
    ck_assert_int_eq(lock_req(a, "u", 0), 0);
    fake_unack_next(fb, UNACKED);
    fake_run(fb);
    no_reply(a);
    queued_is(0, BACKEND_RELEASE, "u", a); /* the undo */
    fake_run(fb);
    ck_assert_int_eq(fake_pttl(fb, "u"), -2);
    ck_assert_uint_eq(submitted(BACKEND_ACQUIRE), 1);
    timers_advance(tm, LOCKMGR_UNACKED_RETRY_MS - 1);
    ck_assert_uint_eq(submitted(BACKEND_ACQUIRE), 1);
    timers_advance(tm, 1);
    ck_assert_uint_eq(submitted(BACKEND_ACQUIRE), 2);
    fake_run(fb);
    expect_granted(a, 1);
    ck_assert_uint_eq(stats().locks_held, 1);
}
END_TEST

START_TEST(test_unacked_trylock) {
    client_t *a = client();
    /* No wait: the refusal is the answer. */
    ck_assert_int_eq(request(a, LOCK_VERB_TRYLOCK, "u", 0, 0), 0);
    fake_unack_next(fb, UNACKED);
    fake_run(fb);
    lock_reply_t r = expect_error(a, LOCK_ERR_BACKEND);
    ck_assert_str_eq(r.detail, UNACKED);
    fake_settle(fb);
    ck_assert_int_eq(fake_pttl(fb, "u"), -2);
    /* A wait that runs out after refusals says why, not TIMEOUT. */
    ck_assert_int_eq(request(a, LOCK_VERB_TRYLOCK, "u", 150, 0), 0);
    fake_unack_next(fb, UNACKED);
    fake_settle(fb);
    no_reply(a);
    timers_advance(tm, LOCKMGR_UNACKED_RETRY_MS);
    ck_assert_uint_eq(fake_queued(fb), 1); /* tries again */
    fake_unack_next(fb, UNACKED);
    fake_settle(fb);
    timers_advance(tm, 150 - LOCKMGR_UNACKED_RETRY_MS);
    r = expect_error(a, LOCK_ERR_BACKEND);
    ck_assert_str_eq(r.detail, UNACKED);
    fake_settle(fb);
    ck_assert_int_eq(fake_pttl(fb, "u"), -2);
    ck_assert_uint_eq(stats().waiters, 0);
}
END_TEST

/* Renewals that are not acknowledged fail; at the loss deadline the hold
 * is lost, for "backend", while the backend itself is up. */
START_TEST(test_unacked_renewals_lose_the_lock) {
    client_t *a = client();
    lock_ok(a, "u", 0);
    for (int i = 0; i < 16; i++) fake_unack_next(fb, UNACKED);
    for (uint64_t t = 0; t < LEASE - MARGIN; t += 50) {
        timers_advance(tm, 50);
        fake_run(fb);
    }
    expect_event(a, "u", LOCK_LOST_BACKEND);
    ck_assert_uint_eq(lockmgr_owner_held(a->o), 0);
}
END_TEST

/* ---- CANCEL --------------------------------------------------------------------- */

/* A queued wait withdrawn: ERR CANCELLED at once, out of the queue, the
 * owner goes on; the next waiter is served as if it had never come. */
START_TEST(test_cancel_queued_wait) {
    client_t *a = client(), *b = client(), *c = client();
    lock_ok(a, "x", 0);
    ck_assert_int_eq(lock_req(b, "x", 0), 0);
    ck_assert_int_eq(lock_req(c, "x", 0), 0);
    ck_assert_uint_eq(stats().waiters, 2);
    ck_assert_int_eq(lockmgr_cancel(mgr, b->o, b), 1);
    expect_error(b, LOCK_ERR_CANCELLED);
    ck_assert_uint_eq(stats().waiters, 1);
    ck_assert_uint_eq(stats().cancelled, 1);
    ck_assert_int_eq(lockmgr_cancel(mgr, b->o, b), 0); /* nothing waits now */
    ck_assert_int_eq(unlock_req(a, "x"), 1);
    expect_value(a, 0);
    fake_settle(fb);
    expect_granted(c, 1);
    no_reply(b);
    ck_assert_int_eq(fake_holds(fb, b->id, "x"), 0);
}
END_TEST

/* An acquire in Redis when its wait is withdrawn: the grant it brings
 * back is undone, and the owner hears nothing more. */
START_TEST(test_cancel_acquire_in_flight) {
    client_t *a = client();
    ck_assert_int_eq(lock_req(a, "x", 0), 0);
    queued_is(0, BACKEND_ACQUIRE, "x", a);
    ck_assert_int_eq(lockmgr_cancel(mgr, a->o, a), 1);
    expect_error(a, LOCK_ERR_CANCELLED);
    fake_settle(fb);
    ck_assert_int_eq(fake_holds(fb, a->id, "x"), 0);
    ck_assert_int_eq(fake_pttl(fb, "x"), -2);
    no_reply(a);
    no_event(a);
    ck_assert_uint_eq(stats().locks_held, 0);
    lock_ok(a, "x", 0); /* and it may ask again */
}
END_TEST

/* What does not wait is not withdrawn: its answer comes. */
START_TEST(test_cancel_not_a_wait) {
    client_t *a = client();
    ck_assert_int_eq(lockmgr_cancel(mgr, a->o, a), 0);
    ck_assert_int_eq(request(a, LOCK_VERB_STATUS, "x", 0, 0), 0);
    ck_assert_int_eq(lockmgr_cancel(mgr, a->o, a), 0);
    fake_settle(fb);
    lock_reply_t r = next_reply(a);
    ck_assert_int_eq(r.type, LOCK_REPLY_FREE);
    ck_assert_uint_eq(stats().cancelled, 0);
}
END_TEST

/* ---- shutdown ---------------------------------------------------------------- */

START_TEST(test_shutdown_idle) {
    shutdown_now();
    ck_assert_int_eq(done_calls, 0);
    timers_run_due(tm);
    ck_assert_int_eq(done_calls, 1);
    timers_advance(tm, 10000);
    ck_assert_int_eq(done_calls, 1);
}
END_TEST

START_TEST(test_shutdown_waits_for_everything) {
    client_t *a = client(), *b = client(), *c = client(), *d = client();
    lock_ok(a, "x", 0);
    lock_ok(b, "y", 5000);
    lock_ok(d, "w", 0);
    /* d's release does not get through: queued for a retry. */
    ck_assert_int_eq(unlock_req(d, "w"), 1);
    expect_value(d, 0);
    fake_fail_next(fb, BACKEND_DOWN, "connection reset");
    fake_run(fb);
    /* c's acquire is in flight. */
    ck_assert_int_eq(lock_req(c, "z", 0), 0);
    ck_assert_uint_eq(fake_queued(fb), 1);
    size_t renews = submitted(BACKEND_RENEW);

    shutdown_now();
    ck_assert_int_eq(done_calls, 0);
    /* Every hold's release and the queued one go out at once. */
    ck_assert_uint_eq(fake_queued(fb), 4);
    queued_is(0, BACKEND_ACQUIRE, "z", c);
    ck_assert_uint_eq(fake_log_count(fb, fake_log_len(fb) - 3, BACKEND_RELEASE), 3);
    ck_assert_uint_eq(stats().locks_held, 0);
    timers_run_due(tm);
    ck_assert_int_eq(done_calls, 0);

    /* Requests now are turned away. */
    ck_assert_int_eq(lock_req(d, "v", 0), 1);
    expect_error(d, LOCK_ERR_BACKEND);

    fake_run(fb); /* c's acquire was granted: answered an error, undone */
    expect_error(c, LOCK_ERR_BACKEND);
    queued_is(0, BACKEND_RELEASE, "z", c);
    timers_run_due(tm);
    ck_assert_int_eq(done_calls, 0);
    fake_run(fb);
    ck_assert_int_eq(done_calls, 0); /* from a timer, not from the reply */
    timers_run_due(tm);
    ck_assert_int_eq(done_calls, 1);

    const char *names[] = {"x", "y", "z", "w"};
    for (int i = 0; i < 4; i++) ck_assert_int_eq(fake_pttl(fb, names[i]), -2);
    /* Holders are told by their closing sockets, not with !LOST. */
    no_event(a);
    no_event(b);
    /* The watchdog and the leases are stopped. */
    timers_advance(tm, 10 * LEASE);
    fake_settle(fb);
    ck_assert_uint_eq(submitted(BACKEND_RENEW), renews);
    no_event(b);
    ck_assert_int_eq(done_calls, 1);
}
END_TEST

START_TEST(test_shutdown_while_down) {
    client_t *a = client();
    lock_ok(a, "x", 0);
    fake_set_up(fb, 0);
    shutdown_now();
    ck_assert_uint_eq(fake_queued(fb), 1);
    fake_run(fb); /* the release fails: no other chance */
    ck_assert_int_eq(done_calls, 0);
    timers_run_due(tm);
    ck_assert_int_eq(done_calls, 1);
    fake_set_up(fb, 1);
    ck_assert_uint_eq(fake_queued(fb), 0);
}
END_TEST

/* ---- exactly one reply per request ------------------------------------------- */

/* A deterministic mix of requests, outages, lost answers and time (one
 * seed per loop index), checking after every step that each request got at
 * most one reply, none inside lockmgr_request() (the callbacks check that),
 * that no two clients ever both believe they hold one name, and that Redis
 * still has every lock a client believes it holds (or another daemon could
 * take it); at the end every request has its reply. */
enum { MIX_CLIENTS = 6, MIX_NAMES = 3, MIX_STEPS = 5000, MIX_SEEDS = 12 };

static uint64_t mix_rng;
static int force_unknown[3];     /* a FORCEUNLOCK of the name may have run unseen */

static unsigned mix_rand(unsigned n) {
    mix_rng ^= mix_rng << 13;
    mix_rng ^= mix_rng >> 7;
    mix_rng ^= mix_rng << 17;
    return (unsigned)(mix_rng % n);
}

typedef struct mix_s {
    client_t *c;
    long long holds[MIX_NAMES];   /* what the client believes */
    int want;                     /* name of the request in flight, -1 none */
    lock_verb_t kind;
} mix_t;

static const char *const mix_names[MIX_NAMES] = {"m0", "m1", "m2"};

static int name_index(const char *name) {
    for (int i = 0; i < MIX_NAMES; i++)
        if (strcmp(name, mix_names[i]) == 0) return i;
    ck_abort_msg("unknown name %s", name);
    return -1;
}

/* Applies what a client was told, in the order it was told, to what it
 * believes. */
static void mix_absorb(mix_t *m) {
    client_t *c = m->c;
    for (;;) {
        int ev = c->ehead < c->nevents, rp = replies_left(c) > 0;
        if (!ev && !rp) return;
        if (ev && (!rp || c->events[c->ehead % MAX_LOG].seq < c->rseq[c->rhead % MAX_LOG])) {
            int i = name_index(c->events[c->ehead % MAX_LOG].name);
            EXPECT(m->holds[i] > 0, "client %" PRIu64 ": !LOST %s for a lock not held", c->id,
                   mix_names[i]);
            m->holds[i] = 0;
            c->ehead++;
            continue;
        }
        lock_reply_t r = next_reply(c);
        int i = m->want;
        EXPECT(i >= 0, "client %" PRIu64 ": a %s reply to no request", c->id, reply_type_name(r.type));
        switch (r.type) {
        case LOCK_REPLY_GRANTED:
            EXPECT(m->kind == LOCK_VERB_LOCK || m->kind == LOCK_VERB_TRYLOCK,
                   "GRANTED for request kind %d", (int)m->kind);
            EXPECT(r.holds == m->holds[i] + 1,
                   "client %" PRIu64 ": GRANTED %s holds %lld, had %lld", c->id, mix_names[i],
                   r.holds, m->holds[i]);
            m->holds[i] = r.holds;
            break;
        case LOCK_REPLY_VALUE:
            if (m->kind == LOCK_VERB_UNLOCK) {
                EXPECT(r.value == m->holds[i] - 1,
                       "client %" PRIu64 ": UNLOCK %s left %lld of %lld", c->id, mix_names[i],
                       r.value, m->holds[i]);
                m->holds[i] = r.value;
            }
            break;
        case LOCK_REPLY_MINE:
            EXPECT(r.holds == m->holds[i], "client %" PRIu64 ": MINE %s holds %lld, had %lld",
                   c->id, mix_names[i], r.holds, m->holds[i]);
            break;
        case LOCK_REPLY_FREE:
        case LOCK_REPLY_TAKEN:
            EXPECT(m->holds[i] == 0, "client %" PRIu64 ": %s %s while holding %lld", c->id,
                   reply_type_name(r.type), mix_names[i], m->holds[i]);
            break;
        case LOCK_REPLY_ERROR:
            if (m->kind == LOCK_VERB_FORCE && r.err == LOCK_ERR_BACKEND) force_unknown[i] = 1;
            if (r.err == LOCK_ERR_NOTHELD && m->kind == LOCK_VERB_UNLOCK)
                EXPECT(m->holds[i] == 0, "UNLOCK %s: NOTHELD with %lld holds", mix_names[i],
                       m->holds[i]);
            break;
        default:
            break;
        }
        m->want = -1;
    }
}

static void mix_check_exclusion(const mix_t *mx) {
    for (int i = 0; i < MIX_NAMES; i++) {
        int holders = 0;
        for (int k = 0; k < MIX_CLIENTS; k++)
            if (mx[k].holds[i] > 0) holders++;
        EXPECT(holders <= 1, "%d clients believe they hold %s at %" PRIu64, holders,
               mix_names[i], now());
        if (holders == 0) force_unknown[i] = 0;
        for (int k = 0; k < MIX_CLIENTS && !force_unknown[i]; k++)
            if (mx[k].holds[i] > 0)
                EXPECT(fake_holds(fb, mx[k].c->id, mix_names[i]) > 0,
                       "client %" PRIu64 " believes it holds %s at %" PRIu64
                       ", but Redis has no such hold",
                       mx[k].c->id, mix_names[i], now());
    }
}

static void mix_request(mix_t *m, lock_verb_t kind, int i, uint32_t wait_ms,
                        uint32_t lease_ms) {
    m->kind = kind;
    m->want = i;
    request(m->c, kind, mix_names[i], wait_ms, lease_ms);
}

static void mix_start(mix_t *mx, int seed) {
    mix_rng = 0x9e3779b97f4a7c15ull * (uint64_t)(seed + 1);
    memset(force_unknown, 0, sizeof(force_unknown));
    for (int k = 0; k < MIX_CLIENTS; k++) {
        memset(&mx[k], 0, sizeof(mx[k]));
        mx[k].c = client_uid(k == 0 ? 0 : 1000); /* the first may FORCEUNLOCK */
        mx[k].want = -1;
    }
}

/* Takes in what every client was told, replaces dropped ones with new
 * connections, and checks the invariants. */
static void mix_absorb_all(mix_t *mx) {
    for (int k = 0; k < MIX_CLIENTS; k++) {
        mix_absorb(&mx[k]);
        if (mx[k].c->dropped) {
            memset(mx[k].holds, 0, sizeof(mx[k].holds));
            mx[k].c = client_uid(k == 0 ? 0 : 1000);
            mx[k].want = -1;
        }
    }
    mix_check_exclusion(mx);
}

static void mix_steps(mix_t *mx, int steps) {
    static const lock_verb_t kinds[] = {
        LOCK_VERB_LOCK,   LOCK_VERB_LOCK,  LOCK_VERB_TRYLOCK, LOCK_VERB_UNLOCK,
        LOCK_VERB_UNLOCK, LOCK_VERB_RENEW, LOCK_VERB_STATUS,  LOCK_VERB_FORCE};
    for (int step = 0; step < steps; step++) {
        unsigned what = mix_rand(100);
        mix_t *m = &mx[mix_rand(MIX_CLIENTS)];
        int i = (int)mix_rand(MIX_NAMES);
        int up = backend_available(fake_backend(fb), NULL, 0);
        if (what < 40) {
            if (m->c->pending) continue;
            uint32_t wait = mix_rand(2) ? mix_rand(2000) : 0;
            uint32_t lease = mix_rand(4) == 0 ? 500 + mix_rand(3000) : 0;
            mix_request(m, kinds[mix_rand(sizeof(kinds) / sizeof(kinds[0]))], i, wait, lease);
        } else if (what < 72) {
            fake_run(fb);
        } else if (what < 86) {
            timers_advance(tm, mix_rand(700));
        } else if (what < 90) {
            fake_set_up(fb, mix_rand(3) != 0);
        } else if (what < 92) {
            fake_publish(fb, mix_names[i]);
        } else if (what < 93) {
            /* The first op's answer is lost, and the connection with it. */
            if (fake_queued(fb) == 0 || !up) continue;
            fake_lose_next(fb, "no reply within command_timeout_ms");
            fake_run(fb);
            fake_set_up(fb, 0);
        } else if (what < 94) {
            if (fake_queued(fb) == 0 || !up) continue;
            fake_fail_next(fb, BACKEND_FAILED, "ERR injected");
            fake_run(fb);
        } else if (what < 95) {
            size_t flagged = 0;
            for (int k = 0; k < MIX_CLIENTS; k++) flagged += (size_t)mx[k].c->drop_in_callback;
            if (nclients + flagged >= MAX_CLIENTS - 1) continue;
            if (mix_rand(2)) m->c->drop_in_callback = 1; /* at its next reply or !LOST */
            else drop(m->c);                             /* gone, even mid-request */
        } else {
            timers_run_due(tm);
        }
        mix_absorb_all(mx);
    }
    for (int k = 0; k < MIX_CLIENTS; k++) mx[k].c->drop_in_callback = 0;
}

START_TEST(test_every_request_one_reply) {
    mix_t mx[MIX_CLIENTS];
    mix_start(mx, _i);
    mix_steps(mx, MIX_STEPS);
    /* Settle: a reconnect (so waiters that lost an answer go on), then
     * clients let go of what they hold; holders stuck behind a wait of
     * their own lose their locks to FORCEUNLOCKs from elsewhere. */
    fake_set_up(fb, 0);
    fake_set_up(fb, 1);
    for (int round = 0; round < 200; round++) {
        fake_settle(fb);
        timers_advance(tm, 100);
        for (int k = 0; k < MIX_CLIENTS; k++) {
            mix_t *m = &mx[k];
            mix_absorb(m);
            for (int n = 0; n < MIX_NAMES; n++) {
                if (m->holds[n] > 0 && m->c->pending) {
                    fake_force(fb, mix_names[n]);
                    force_unknown[n] = 1;
                }
                while (m->holds[n] > 0 && !m->c->pending) {
                    mix_request(m, LOCK_VERB_UNLOCK, n, 0, 0);
                    mix_absorb(m);
                }
            }
        }
        mix_check_exclusion(mx);
    }
    fake_settle(fb);
    for (int k = 0; k < MIX_CLIENTS; k++) {
        client_t *c = mx[k].c;
        mix_absorb(&mx[k]);
        ck_assert_msg(c->pending == 0, "client %" PRIu64 ": a request never answered", c->id);
    }
    for (size_t k = 0; k < nclients; k++)
        ck_assert_uint_eq(clients[k].answered + (unsigned)clients[k].pending, clients[k].sent);
    ck_assert_uint_eq(stats().waiters, 0);
    ck_assert_uint_eq(stats().locks_held, 0);
}
END_TEST

/* Shutdown from wherever the mix left things: done comes exactly once,
 * from a timer, whether the backend is up or not. */
START_TEST(test_shutdown_after_mix) {
    mix_t mx[MIX_CLIENTS];
    mix_start(mx, 1000 + _i);
    mix_steps(mx, MIX_STEPS / 4);
    fake_settle(fb); /* renewals on their way may still be answered */
    mix_absorb_all(mx);
    size_t renews = submitted(BACKEND_RENEW);
    shutdown_now();
    ck_assert_int_eq(done_calls, 0);
    ck_assert_uint_eq(stats().locks_held, 0);
    /* Holders learn it from their closing connections, not from us. */
    for (int k = 0; k < MIX_CLIENTS; k++) memset(mx[k].holds, 0, sizeof(mx[k].holds));
    for (int round = 0; round < 50 && done_calls == 0; round++) {
        if (round == 20) fake_set_up(fb, mix_rand(2)); /* maybe a flap on the way */
        fake_settle(fb);
        mix_absorb_all(mx);
        ck_assert_int_eq(done_calls, 0); /* not from inside a reply */
        timers_run_due(tm);
        timers_advance(tm, mix_rand(300));
    }
    ck_assert_int_eq(done_calls, 1);
    fake_set_up(fb, 0);
    fake_set_up(fb, 1);
    timers_advance(tm, 10 * LEASE);
    fake_settle(fb);
    mix_absorb_all(mx);
    ck_assert_int_eq(done_calls, 1);
    ck_assert_uint_eq(submitted(BACKEND_RENEW), renews); /* the watchdog stopped */
}
END_TEST

/* ---- the manual clock -------------------------------------------------------- */

static int order[8], norder;
static timers_entry_t te[4];

static void on_te(timers_entry_t *t) {
    ck_assert_int_lt(norder, 8);
    order[norder++] = (int)(t - te);
    if (t == &te[0]) { /* arms more: due within the advance, and now */
        timers_start(tm, &te[2], 5, on_te);
        timers_start(tm, &te[3], 0, on_te);
    }
}

START_TEST(test_manual_clock) {
    ck_assert_uint_eq(now(), T0);
    timers_start(tm, &te[1], 30, on_te);
    timers_start(tm, &te[0], 10, on_te);
    timers_run_due(tm);
    ck_assert_int_eq(norder, 0);
    timers_advance(tm, 9);
    ck_assert_int_eq(norder, 0);
    ck_assert_uint_eq(now(), T0 + 9);
    timers_advance(tm, 100);
    ck_assert_uint_eq(now(), T0 + 109);
    ck_assert_int_eq(norder, 4);
    ck_assert_int_eq(order[0], 0);  /* at 10 */
    ck_assert_int_eq(order[1], 3);  /* armed at 10 for 10 */
    ck_assert_int_eq(order[2], 2);  /* armed at 10 for 15 */
    ck_assert_int_eq(order[3], 1);  /* at 30 */
    timers_start(tm, &te[1], 0, on_te);
    ck_assert_int_eq(norder, 4);
    timers_run_due(tm);
    ck_assert_int_eq(norder, 5);
    ck_assert_uint_eq(now(), T0 + 109);
}
END_TEST


/* Regression: lockmgr_free() freed waiters, queues and holds with their
 * timers still in the caller's timer heap, and timers_free()'s heap_clear
 * then wrote into freed memory (AddressSanitizer, in make test's
 * sanitized run, reports it). A leased hold (its expiry), a TRYLOCK
 * behind it (its deadline) and a refused waiter's retry turn are all
 * armed when the manager goes. */
START_TEST(test_free_stops_timers) {
    client_t *a = client(), *b = client(), *c = client();
    lock_ok(a, "h", 2000);
    ck_assert_int_eq(request(b, LOCK_VERB_TRYLOCK, "h", 5000, 0), 0);
    fake_take(fb, "x", "r1", 1000);
    ck_assert_int_eq(lock_req(c, "x", 0), 0);
    fake_settle(fb);
    no_reply(b);
    no_reply(c);
    fake_close(fb);
    fb = NULL;
    lockmgr_free(mgr);
    mgr = NULL;
    timers_free(tm);
    tm = NULL;
    /* The owners are the session's to free; then a fresh world for teardown. */
    for (size_t i = 0; i < nclients; i++) free(clients[i].o);
    setup();
}
END_TEST

/* ---- the suite --------------------------------------------------------------- */

static Suite *lockmgr_suite(void) {
    Suite *s = suite_create("lockmgr");
    TCase *tc;

#define TC(name) \
    tc = tcase_create(name); \
    tcase_add_checked_fixture(tc, setup, teardown); \
    suite_add_tcase(s, tc)

    TC("clock");
    tcase_add_test(tc, test_manual_clock);

    TC("grants");
    tcase_add_test(tc, test_lock_grants_with_fence);
    tcase_add_test(tc, test_fences_rise);
    tcase_add_test(tc, test_reentrant_lock_and_unlock);
    tcase_add_test(tc, test_acquire_errors);
    tcase_add_test(tc, test_hold_gone_plain_retried);
    tcase_add_test(tc, test_hold_gone_plain_trylock);
    tcase_add_test(tc, test_hold_gone_orphan_undone);
    tcase_add_test(tc, test_reentry_wrong_kind_kicks_waiter);
    tcase_add_test(tc, test_reentry_unacked_kicks_waiter);
    tcase_add_test(tc, test_who);
    tcase_add_test(tc, test_unacked_grant_undone_lock_waits);
    tcase_add_test(tc, test_unacked_trylock);
    tcase_add_test(tc, test_unacked_renewals_lose_the_lock);

    TC("waiting");
    tcase_add_test(tc, test_fifo_three_waiters);
    tcase_add_test(tc, test_fifo_behind_local_holder);
    tcase_add_test(tc, test_yield_to_remote_waiters);
    tcase_add_test(tc, test_trylock_zero_local_holder);
    tcase_add_test(tc, test_trylock_zero_foreign_holder);
    tcase_add_test(tc, test_trylock_wait_times_out_local);
    tcase_add_test(tc, test_trylock_wait_times_out_foreign);
    tcase_add_test(tc, test_trylock_wait_granted_in_time);
    tcase_add_test(tc, test_waiter_woken_by_publish);
    tcase_add_test(tc, test_waiter_woken_by_ttl);
    tcase_add_test(tc, test_waiter_retries_without_ttl);
    tcase_add_test(tc, test_waiter_survives_outage);

    TC("watchdog");
    tcase_add_test(tc, test_watchdog_batches);
    tcase_add_test(tc, test_watchdog_big_batches);
    tcase_add_test(tc, test_watchdog_keeps_renewing);
    tcase_add_test(tc, test_watchdog_loss_deadline);
    tcase_add_test(tc, test_watchdog_loss_from_last_renewal);
    tcase_add_test(tc, test_watchdog_renewal_retried);
    tcase_add_test(tc, test_watchdog_gone_is_expired);
    tcase_add_test(tc, test_watchdog_forced);

    TC("leases");
    tcase_add_test(tc, test_lease_expires);
    tcase_add_test(tc, test_drift_shortens_leases);
    tcase_add_test(tc, test_lease_above_backend_max);
    tcase_add_test(tc, test_renew_request);
    tcase_add_test(tc, test_renew_gone);
    tcase_add_test(tc, test_renew_watchdog_keeps_mode);
    tcase_add_test(tc, test_renew_lease_hold);
    tcase_add_test(tc, test_reentry_on_watchdog_stays_watchdog);
    tcase_add_test(tc, test_reentry_without_lease_makes_watchdog);
    tcase_add_test(tc, test_reentry_with_leases_takes_the_longer);
    tcase_add_test(tc, test_lost_answer_may_shorten_lease);
    tcase_add_test(tc, test_renewal_racing_a_reentry_or_renew);
    tcase_add_test(tc, test_reload_new_grants);
    tcase_add_test(tc, test_reload_longer_lease_renews_held_at_once);
    tcase_add_test(tc, test_reload_shorter_lease_renews_held_at_once);
    tcase_add_test(tc, test_reload_while_down_keeps_deadlines);
    tcase_add_test(tc, test_reload_mixed_leases_each_own_deadline);
    tcase_add_test(tc, test_reload_with_ops_in_flight);
    tcase_add_test(tc, test_reload_renew_every);

    TC("releases");
    tcase_add_test(tc, test_release_retried_when_back);
    tcase_add_test(tc, test_release_given_up_after_lease);
    tcase_add_test(tc, test_release_forgotten_by_new_grant);
    tcase_add_test(tc, test_release_not_resent_behind_own_acquire);

    TC("owners");
    tcase_add_test(tc, test_owner_drop_cancels_and_releases);
    tcase_add_test(tc, test_owner_drop_acquire_in_flight);
    tcase_add_test(tc, test_owner_drop_attempt_taken);
    tcase_add_test(tc, test_owner_drop_reentry_in_flight);
    tcase_add_test(tc, test_owner_drop_inside_its_callback);

    TC("status_force");
    tcase_add_test(tc, test_status);
    tcase_add_test(tc, test_force_not_checked_here);
    tcase_add_test(tc, test_force_by_root);
    tcase_add_test(tc, test_force_by_admin_uid);

    TC("limits");
    tcase_add_test(tc, test_limit_locks_per_client);
    tcase_add_test(tc, test_limit_waiters);
    tcase_add_test(tc, test_limit_locks_per_uid);
    tcase_add_test(tc, test_limit_waiters_per_uid);
    tcase_add_test(tc, test_limit_locks_per_uid_at_once);
    tcase_add_test(tc, test_limit_locks_per_uid_wait_behind_own);
    tcase_add_test(tc, test_backend_down_at_once);

    TC("shutdown");
    tcase_add_test(tc, test_cancel_queued_wait);
    tcase_add_test(tc, test_cancel_acquire_in_flight);
    tcase_add_test(tc, test_cancel_not_a_wait);
    tcase_add_test(tc, test_shutdown_idle);
    tcase_add_test(tc, test_free_stops_timers);
    tcase_add_test(tc, test_shutdown_waits_for_everything);
    tcase_add_test(tc, test_shutdown_while_down);

    TC("replies");
    tcase_add_loop_test(tc, test_every_request_one_reply, 0, MIX_SEEDS);
    tcase_add_loop_test(tc, test_shutdown_after_mix, 0, MIX_SEEDS);
#undef TC
    return s;
}

int main(void) {
    return lockmgr_test_run(lockmgr_suite());
}
