/* Unit tests of daemon/lock's fair locks on a fake backend.
 * SPDX-License-Identifier: MIT
 *
 * The world they run in (clients, requests, the fake) is tests/unit/lockmgr_support.c. */
#include "tests/unit/lockmgr_support.h"

#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/lock/lockmgr.h"
#include "tests/unit/fake_backend.h"

/* ---- fair locks ------------------------------------------------------------------
 * FAIRLOCK and TRYFAIRLOCK are LOCK and TRYLOCK of mode FAIR; UNLOCK (of
 * mode MUTEX) releases a fair hold. The fake answers them as script_fair
 * would (fake_backend.h): a plain lock's hash, and a queue of places in
 * Redis, each ending unless asked again; only the queue's head may take
 * the lock, and a release wakes only it, on its own channel. The lock
 * manager's waiters (fair.c) each ask as they come, taking their places;
 * the local head waits for its channel (the name's one watch), every
 * waiter asks again every renew_every_ms to keep its place, and one that
 * stops waiting leaves its place. Clients are o1, o2, ... in Redis, in
 * the order the case makes them; x, r, r1, r2 are other daemons' or
 * Redisson clients' fields. */

/* name's queue in Redis, place by place ("o2 r1 o3"). */
static void queue_is(const char *name, const char *want) {
    ck_assert_str_eq(fake_fair_queue(fb, name), want);
}

/* The one fair channel of name watched is c's (NULL: none is). */
static void watching(const char *name, const client_t *c) {
    size_t n = fake_fair_channels(fb, name);
    if (c == NULL) {
        ck_assert_msg(n == 0, "%s: %zu fair channels watched, want none", name, n);
        return;
    }
    ck_assert_msg(n == 1 && fake_fair_watching(fb, name, c->id),
                  "%s: %zu fair channels watched, want only client %" PRIu64 "'s (%s)", name, n,
                  c->id, fake_fair_watching(fb, name, c->id) ? "watched" : "not watched");
}

/* The op at position i of the fake's queue is c's fair ACQUIRE of name:
 * a place of lease_ms (the conf's) and LOCKMGR_FAIR_FOREIGN_WAIT_MS more
 * per Redisson place ahead, or none (once). */
static void fair_ask_queued(size_t i, const char *name, const client_t *c, int once) {
    queued_mode_is(i, BACKEND_ACQUIRE, BACKEND_FAIR, name, c);
    ck_assert_int_eq(fake_queued_op(fb, i)->once, once);
    if (once) return;
    ck_assert_uint_eq(fake_queued_op(fb, i)->queue_ms, LEASE);
    ck_assert_uint_eq(fake_queued_op(fb, i)->queue_foreign_ms, LOCKMGR_FAIR_FOREIGN_WAIT_MS);
}

/* A Redisson client's tryLock with Redisson's default wait. */
static int redisson_acquire(const char *name, const char *field, long long place_ms) {
    return fake_fair_redisson_acquire(fb, name, field, LEASE, place_ms,
                                      LOCKMGR_FAIR_FOREIGN_WAIT_MS);
}

/* c's acquires (its asks) in the log from position from on. */
static size_t asks(size_t from, const client_t *c) {
    return logged_for(from, BACKEND_ACQUIRE, c);
}

static size_t leaves(size_t from, const client_t *c) {
    return logged_for(from, BACKEND_LEAVE, c);
}

/* FAIRLOCK, the lock granted, STATUS and WHO from here, reentry, UNLOCK
 * dropping one hold then releasing: every Redis op of mode FAIR, no place
 * taken by a grant, no watch, no LEAVE. */
START_TEST(test_fair_grant_reentry_unlock) {
    client_t *a = client(), *b = client();
    ck_assert_int_eq(fairlock_req(a, "f", 0), 0);
    no_reply(a);
    ck_assert_uint_eq(fake_queued(fb), 1);
    fair_ask_queued(0, "f", a, 0);
    ck_assert_uint_eq(fake_queued_op(fb, 0)->lease_ms, LEASE); /* watchdog: the conf lease */
    ck_assert_uint_eq(stats().waiters, 1);
    fake_run(fb);
    uint64_t fence = expect_granted(a, 1);
    ck_assert_uint_eq(fence, fake_fence(fb, "f"));
    ck_assert_int_eq(fake_holds(fb, a->id, "f"), 1);
    ck_assert_int_eq(fake_pttl(fb, "f"), LEASE);
    queue_is("f", "");
    ck_assert_uint_eq(fake_watch_calls(fb, "f"), 0);
    ck_assert_uint_eq(stats().locks_held, 1);
    ck_assert_uint_eq(stats().waiters, 0);

    timers_advance(tm, 100);
    ck_assert_int_eq(fairlock_req(a, "f", 0), 0); /* reentry: one call */
    fair_ask_queued(0, "f", a, 0);
    fake_run(fb);
    ck_assert_uint_eq(expect_granted(a, 2), fence);
    ck_assert_int_eq(fake_holds(fb, a->id, "f"), 2);
    ck_assert_int_eq(fake_pttl(fb, "f"), LEASE);
    ck_assert_uint_eq(lockmgr_owner_held(a->o), 1);

    ck_assert_int_eq(request(a, LOCK_VERB_STATUS, "f", 0, 0), 0);
    queued_mode_is(0, BACKEND_STATUS, BACKEND_FAIR, "f", a);
    fake_run(fb);
    lock_reply_t r = next_reply(a);
    ck_assert_int_eq(r.type, LOCK_REPLY_MINE);
    ck_assert_int_eq(r.holds, 2);
    ck_assert_uint_eq(r.fence, fence);
    ck_assert_int_eq(request(b, LOCK_VERB_STATUS, "f", 0, 0), 0);
    fake_run(fb);
    r = next_reply(b);
    ck_assert_int_eq(r.type, LOCK_REPLY_TAKEN);
    ck_assert_int_eq(request(b, LOCK_VERB_WHO, "f", 0, 0), 1); /* held here: from memory */
    ck_assert_int_eq(next_reply(b).type, LOCK_REPLY_HELD);

    ck_assert_int_eq(unlock_req(a, "f"), 1);
    expect_value(a, 1);
    queued_mode_is(0, BACKEND_DROP, BACKEND_FAIR, "f", a);
    fake_run(fb);
    ck_assert_int_eq(fake_holds(fb, a->id, "f"), 1);
    ck_assert_int_eq(unlock_req(a, "f"), 1);
    expect_value(a, 0);
    queued_mode_is(0, BACKEND_RELEASE, BACKEND_FAIR, "f", a);
    fake_run(fb);
    ck_assert_int_eq(fake_pttl(fb, "f"), -2);
    ck_assert_uint_eq(stats().locks_held, 0);
    ck_assert_int_eq(unlock_req(a, "f"), 1);
    expect_error(a, LOCK_ERR_NOTHELD);
    ck_assert_uint_eq(submitted(BACKEND_LEAVE), 0);
    ck_assert_uint_eq(fake_watch_calls(fb, "f"), 0);
    no_event(a);
}
END_TEST

/* Waiters behind a local holder each ask as they come, all at once, and
 * take their places in arrival order; then only the head (its channel
 * watched) asks once more, when the watch is confirmed. Our own UNLOCK
 * lets the head ask at once, right behind the release; each grant moves
 * the watch to the next head. Grants in queue order, fences rising. */
START_TEST(test_fair_fifo_local) {
    client_t *a = client(), *b = client(), *c = client(), *d = client();
    uint64_t fa = fair_ok(a, "f", 0);
    size_t mark = fake_log_len(fb);
    ck_assert_int_eq(fairlock_req(b, "f", 0), 0);
    ck_assert_int_eq(fairlock_req(c, "f", 0), 0);
    ck_assert_int_eq(fairlock_req(d, "f", 0), 0);
    ck_assert_uint_eq(fake_queued(fb), 3); /* no one waits for an answer to ask */
    fair_ask_queued(0, "f", b, 0);
    fair_ask_queued(1, "f", c, 0);
    fair_ask_queued(2, "f", d, 0);
    fake_run(fb);
    queue_is("f", "o2 o3 o4");
    watching("f", b);
    fake_settle(fb);
    ck_assert_uint_eq(asks(mark, b), 2); /* its arrival, and its watch in force */
    ck_assert_uint_eq(asks(mark, c), 1);
    ck_assert_uint_eq(asks(mark, d), 1);
    queue_is("f", "o2 o3 o4");
    no_reply(b);
    no_reply(c);
    no_reply(d);
    ck_assert_uint_eq(stats().waiters, 3);

    mark = fake_log_len(fb);
    ck_assert_int_eq(unlock_req(a, "f"), 1);
    expect_value(a, 0);
    ck_assert_uint_eq(fake_queued(fb), 2); /* the head asks right behind the release */
    queued_mode_is(0, BACKEND_RELEASE, BACKEND_FAIR, "f", a);
    fair_ask_queued(1, "f", b, 0);
    fake_run(fb);
    uint64_t fb_ = expect_granted(b, 1);
    ck_assert_uint_gt(fb_, fa);
    no_reply(c);
    no_reply(d);
    queue_is("f", "o3 o4");
    watching("f", c);
    fake_settle(fb);
    ck_assert_uint_eq(asks(mark, b), 1);
    /* Its watch in force, and b's grant's wake-up of the next place (the
     * fake's watch hears it at once; Redis's may not yet). */
    ck_assert_uint_eq(asks(mark, c), 2);
    ck_assert_uint_eq(asks(mark, d), 0);

    ck_assert_int_eq(unlock_req(b, "f"), 1);
    expect_value(b, 0);
    fake_run(fb);
    uint64_t fc = expect_granted(c, 1);
    ck_assert_uint_gt(fc, fb_);
    no_reply(d);
    watching("f", d);
    fake_settle(fb);
    ck_assert_int_eq(unlock_req(c, "f"), 1);
    expect_value(c, 0);
    fake_run(fb);
    ck_assert_uint_gt(expect_granted(d, 1), fc);
    queue_is("f", "");
    watching("f", NULL);
    ck_assert(!fake_watched(fb, "f"));
    ck_assert_uint_eq(submitted(BACKEND_LEAVE), 0);
    ck_assert_uint_eq(fake_stats(fb)->stray_unwatches, 0);
    ck_assert_uint_eq(stats().waiters, 0);
}
END_TEST

/* First come, first served across daemons: a Redisson client's (r1) and
 * another daemon's (r2) waiters queue between ours, and each is served in
 * its turn. A place of ours behind a Redisson place lasts
 * LOCKMGR_FAIR_FOREIGN_WAIT_MS more, so that Redisson's grant, which
 * takes its wait off every place, does not end it. Our UNLOCK lets the
 * local head ask at once, but with r1 ahead it is not Redis's head:
 * TAKEN, and it waits (no asking again in a loop) until its own channel
 * wakes it. */
START_TEST(test_fair_fifo_with_foreign_waiters) {
    enum { WAIT = LOCKMGR_FAIR_FOREIGN_WAIT_MS };
    client_t *a = client(), *b = client(), *c = client();
    (void)a;
    ck_assert_int_eq(fake_fair_acquire_field(fb, "f", "x", -1, LEASE), BACKEND_GRANTED);
    ck_assert_int_eq(fairlock_req(b, "f", 0), 0);
    fake_settle(fb);
    ck_assert_int_eq(redisson_acquire("f", "r1", 10 * LEASE), BACKEND_TAKEN);
    ck_assert_int_eq(fairlock_req(c, "f", 0), 0);
    fake_settle(fb);
    ck_assert_int_eq(fake_fair_acquire_field(fb, "f", "r2", -1, 10 * LEASE), BACKEND_TAKEN);
    queue_is("f", "o2 r1 o3 r2");
    ck_assert_int_eq(fake_fair_place_pttl(fb, "f", b->id), LEASE);
    ck_assert_int_eq(fake_fair_place_pttl(fb, "f", c->id), LEASE + WAIT);
    ck_assert(fake_fair_is_dlockd(fb, "f", "o3") && !fake_fair_is_dlockd(fb, "f", "r1"));
    watching("f", b);

    /* x's release wakes the head, b, on its channel: it asks, and gets it. */
    size_t mark = fake_log_len(fb);
    ck_assert_int_eq(fake_fair_release_field(fb, "f", "x"), 0);
    ck_assert_uint_eq(fake_queued(fb), 1);
    fair_ask_queued(0, "f", b, 0);
    fake_run(fb);
    expect_granted(b, 1);
    no_reply(c);
    ck_assert_uint_eq(asks(mark, c), 0);
    queue_is("f", "r1 o3 r2");
    watching("f", c);
    fake_settle(fb); /* c's watch in force: it asks, b holds */

    /* b's UNLOCK: c asks at once, but r1 is Redis's head. */
    mark = fake_log_len(fb);
    ck_assert_int_eq(unlock_req(b, "f"), 1);
    expect_value(b, 0);
    queued_mode_is(0, BACKEND_RELEASE, BACKEND_FAIR, "f", b);
    fair_ask_queued(1, "f", c, 0);
    for (int i = 0; i < 5; i++) fake_run(fb);
    no_reply(c);
    ck_assert_uint_eq(asks(mark, c), 1);
    queue_is("f", "r1 o3 r2");
    ck_assert_int_eq(fake_fair_place_pttl(fb, "f", c->id), LEASE + WAIT);

    /* r1 takes it: Redisson's grant takes its wait off every place. */
    timers_advance(tm, 100);
    ck_assert_int_eq(redisson_acquire("f", "r1", 10 * LEASE), BACKEND_GRANTED);
    queue_is("f", "o3 r2");
    ck_assert_int_eq(fake_fair_place_pttl(fb, "f", c->id), LEASE - 100);
    fake_settle(fb);
    no_reply(c);
    ck_assert_uint_eq(asks(mark, c), 1);

    /* r1's release wakes c, ahead of r2. */
    ck_assert_int_eq(fake_fair_release_field(fb, "f", "r1"), 0);
    ck_assert_uint_eq(fake_queued(fb), 1);
    fake_run(fb);
    expect_granted(c, 1);
    queue_is("f", "r2");
    watching("f", NULL);
    ck_assert_int_eq(unlock_req(c, "f"), 1);
    expect_value(c, 0);
    fake_run(fb);
    ck_assert_int_eq(fake_fair_acquire_field(fb, "f", "r2", LEASE, 10 * LEASE), BACKEND_GRANTED);
    queue_is("f", "");
    ck_assert_uint_eq(submitted(BACKEND_LEAVE), 0);
}
END_TEST

/* A wake-up is the head's alone: a message on its channel lets it ask;
 * the waiters behind it, whose channels nobody here watches, do not ask,
 * and one whose keep-alive ask is in flight when the message comes is not
 * sent again because of it. The holder's release (another daemon's) wakes
 * the head, which is granted; the others still wait their turn. */
START_TEST(test_fair_only_head_woken) {
    client_t *a = client(), *b = client(), *c = client(), *d = client();
    (void)a;
    ck_assert_int_eq(fake_fair_acquire_field(fb, "f", "x", -1, LEASE), BACKEND_GRANTED);
    ck_assert_int_eq(fairlock_req(b, "f", 0), 0);
    ck_assert_int_eq(fairlock_req(c, "f", 0), 0);
    ck_assert_int_eq(fairlock_req(d, "f", 0), 0);
    fake_settle(fb);
    queue_is("f", "o2 o3 o4");
    watching("f", b);

    size_t mark = fake_log_len(fb);
    ck_assert_int_eq(fake_fair_publish(fb, "f", c->id), 0);
    ck_assert_int_eq(fake_fair_publish(fb, "f", d->id), 0);
    ck_assert_int_eq(fake_fair_publish(fb, "f", b->id), 1);
    ck_assert_uint_eq(fake_queued(fb), 1);
    fair_ask_queued(0, "f", b, 0);
    fake_settle(fb);
    ck_assert_uint_eq(asks(mark, b), 1);
    ck_assert_uint_eq(asks(mark, c), 0);
    ck_assert_uint_eq(asks(mark, d), 0);

    /* Keep-alive asks of all three in flight, then a message for the head. */
    timers_advance(tm, EVERY);
    mark = fake_log_len(fb);
    ck_assert_uint_eq(fake_queued(fb), 3);
    ck_assert_int_eq(fake_fair_publish(fb, "f", b->id), 1);
    fake_settle(fb);
    ck_assert_uint_eq(asks(mark, b), 1); /* TAKEN after a wake-up: the head asks again */
    ck_assert_uint_eq(asks(mark, c), 0);
    ck_assert_uint_eq(asks(mark, d), 0);
    queue_is("f", "o2 o3 o4");

    mark = fake_log_len(fb);
    ck_assert_int_eq(fake_fair_release_field(fb, "f", "x"), 0);
    fake_settle(fb);
    expect_granted(b, 1);
    no_reply(c);
    no_reply(d);
    ck_assert_uint_eq(asks(mark, b), 1);
    /* The watch moved to c: in force, it asks; and b's grant woke the next
     * place (the fake's watch hears it at once). */
    ck_assert_uint_eq(asks(mark, c), 2);
    ck_assert_uint_eq(asks(mark, d), 0);
    watching("f", c);
    queue_is("f", "o3 o4");
}
END_TEST

/* The name's one watch follows the local head: when the head's TRYFAIRLOCK
 * times out (it leaves its place: one LEAVE), the old head's channel is
 * unwatched and the new head's watched; a waiter behind it leaving
 * changes nothing there; the last one granted leaves nothing watched. */
START_TEST(test_fair_watch_follows_head) {
    client_t *a = client(), *b = client(), *c = client(), *d = client();
    fair_ok(a, "f", 0);
    ck_assert_int_eq(tryfair_req(b, "f", 500, 0), 0);
    ck_assert_int_eq(fairlock_req(c, "f", 0), 0);
    ck_assert_int_eq(fairlock_req(d, "f", 0), 0);
    fake_settle(fb);
    queue_is("f", "o2 o3 o4");
    watching("f", b);
    uint64_t watches = fake_stats(fb)->watch_calls, unwatches = fake_stats(fb)->unwatch_calls;

    size_t mark = fake_log_len(fb);
    timers_advance(tm, 500);
    expect_timeout(b, LEASE - 500); /* a's, held here */
    ck_assert_uint_eq(fake_queued(fb), 1);
    queued_mode_is(0, BACKEND_LEAVE, BACKEND_FAIR, "f", b);
    watching("f", c);
    ck_assert_uint_eq(fake_stats(fb)->unwatch_calls, unwatches + 1);
    ck_assert_uint_eq(fake_stats(fb)->watch_calls, watches + 1);
    fake_settle(fb);
    queue_is("f", "o3 o4");
    ck_assert_uint_eq(asks(mark, c), 1); /* its watch in force */
    ck_assert_uint_eq(asks(mark, d), 0);

    drop(d); /* behind the head: its place goes, the watch stays */
    ck_assert_uint_eq(fake_queued(fb), 1);
    queued_mode_is(0, BACKEND_LEAVE, BACKEND_FAIR, "f", d);
    fake_settle(fb);
    queue_is("f", "o3");
    watching("f", c);
    ck_assert_uint_eq(fake_stats(fb)->unwatch_calls, unwatches + 1);

    ck_assert_int_eq(unlock_req(a, "f"), 1);
    expect_value(a, 0);
    fake_settle(fb);
    expect_granted(c, 1);
    watching("f", NULL);
    ck_assert(!fake_watched(fb, "f"));
    ck_assert_uint_eq(fake_stats(fb)->stray_unwatches, 0);
    ck_assert_uint_eq(fake_log_count(fb, 0, BACKEND_LEAVE), 2);
}
END_TEST

/* Every waiter keeps its place by asking again each renew_every_ms: one ask
 * per waiter per period, each moving its place's end to lease_ms from now,
 * so that places never end however long the holder keeps the lock; a
 * waiter granted stops asking. */
START_TEST(test_fair_keep_alive) {
    client_t *a = client(), *b = client(), *c = client();
    (void)a;
    ck_assert_int_eq(fake_fair_acquire_field(fb, "f", "x", -1, LEASE), BACKEND_GRANTED);
    ck_assert_int_eq(fairlock_req(b, "f", 0), 0);
    ck_assert_int_eq(fairlock_req(c, "f", 0), 0);
    fake_settle(fb);
    queue_is("f", "o2 o3");
    ck_assert_int_eq(fake_fair_place_pttl(fb, "f", b->id), LEASE);
    ck_assert_int_eq(fake_fair_place_pttl(fb, "f", c->id), LEASE);
    for (int k = 0; k < 6; k++) { /* two leases */
        size_t mark = fake_log_len(fb);
        timers_advance(tm, EVERY - 1);
        ck_assert_uint_eq(fake_log_len(fb), mark);
        ck_assert_int_eq(fake_fair_place_pttl(fb, "f", b->id), LEASE - EVERY + 1);
        timers_advance(tm, 1);
        ck_assert_uint_eq(asks(mark, b), 1);
        ck_assert_uint_eq(asks(mark, c), 1);
        for (size_t i = 0; i < fake_queued(fb); i++)
            ck_assert_uint_eq(fake_queued_op(fb, i)->queue_ms, LEASE);
        fake_settle(fb);
        ck_assert_uint_eq(asks(mark, b), 1);
        ck_assert_uint_eq(asks(mark, c), 1);
        ck_assert_int_eq(fake_fair_place_pttl(fb, "f", b->id), LEASE);
        ck_assert_int_eq(fake_fair_place_pttl(fb, "f", c->id), LEASE);
        queue_is("f", "o2 o3");
    }
    no_reply(b);
    no_reply(c);

    ck_assert_int_eq(fake_fair_release_field(fb, "f", "x"), 0);
    fake_settle(fb);
    expect_granted(b, 1);
    size_t mark = fake_log_len(fb);
    run_for(3 * EVERY);
    ck_assert_uint_eq(asks(mark, b), 0);
    ck_assert_uint_ge(asks(mark, c), 3);
    queue_is("f", "o3");
    ck_assert_int_gt(fake_fair_place_pttl(fb, "f", c->id), LEASE - EVERY);
}
END_TEST

/* A TRYFAIRLOCK whose wait runs out leaves its place at once, exactly
 * once, the head's or one behind it; it asks no more. */
START_TEST(test_fair_trylock_times_out_leaves) {
    client_t *a = client(), *b = client(), *c = client(), *d = client();
    (void)a;
    ck_assert_int_eq(fake_fair_acquire_field(fb, "f", "x", 10 * LEASE, LEASE), BACKEND_GRANTED);
    ck_assert_int_eq(tryfair_req(b, "f", 500, 0), 0);
    ck_assert_int_eq(fairlock_req(c, "f", 0), 0);
    ck_assert_int_eq(tryfair_req(d, "f", 700, 0), 0);
    fake_settle(fb);
    queue_is("f", "o2 o3 o4");

    timers_advance(tm, 500);
    expect_timeout(b, 10 * LEASE); /* x's TTL as last seen */
    ck_assert_uint_eq(leaves(0, b), 1);
    fake_settle(fb);
    queue_is("f", "o3 o4");
    watching("f", c);
    timers_advance(tm, 200);
    expect_timeout(d, 10 * LEASE);
    ck_assert_uint_eq(leaves(0, d), 1);
    fake_settle(fb);
    queue_is("f", "o3");
    watching("f", c);

    size_t mark = fake_log_len(fb);
    run_for(3 * EVERY);
    ck_assert_uint_eq(asks(mark, b), 0);
    ck_assert_uint_eq(asks(mark, d), 0);
    ck_assert_uint_ge(asks(mark, c), 3);
    ck_assert_uint_eq(leaves(0, b), 1);
    ck_assert_uint_eq(leaves(0, d), 1);
    ck_assert_uint_eq(leaves(0, c), 0);
    queue_is("f", "o3");
    no_reply(b);
    no_reply(d);
    no_reply(c);
    ck_assert_uint_eq(stats().waiters, 1);
}
END_TEST

/* A waiter whose owner leaves gives its place up at once, exactly once;
 * when it was Redis's head and the lock is free (the holder's lease ran
 * out, which publishes nothing), its LEAVE wakes the next head, here ours,
 * whose channel the watch moved to. */
START_TEST(test_fair_owner_drop_leaves) {
    client_t *a = client(), *b = client(), *c = client();
    (void)a;
    ck_assert_int_eq(fake_fair_acquire_field(fb, "f", "x", -1, LEASE), BACKEND_GRANTED);
    ck_assert_int_eq(fairlock_req(b, "f", 0), 0);
    ck_assert_int_eq(fairlock_req(c, "f", 0), 0);
    fake_settle(fb);
    queue_is("f", "o2 o3");
    fake_expire(fb, "f"); /* x's hold ends: nothing published */
    size_t mark = fake_log_len(fb);
    drop(b);
    ck_assert_uint_eq(fake_queued(fb), 1);
    queued_mode_is(0, BACKEND_LEAVE, BACKEND_FAIR, "f", b);
    watching("f", c);
    fake_run(fb); /* the LEAVE wakes c */
    ck_assert_uint_eq(asks(mark, c), 1);
    fake_settle(fb);
    expect_granted(c, 1);
    queue_is("f", "");
    run_for(2 * EVERY);
    ck_assert_uint_eq(leaves(0, b), 1);
    ck_assert_uint_eq(asks(mark, b), 0);
    ck_assert_uint_eq(leaves(0, c), 0);
}
END_TEST

/* A cancelled wait leaves its place at once, as a departed owner's does,
 * and the next head's channel is watched. */
START_TEST(test_fair_cancel_leaves) {
    client_t *a = client(), *b = client(), *c = client();
    (void)a;
    ck_assert_int_eq(fake_fair_acquire_field(fb, "f", "x", -1, LEASE), BACKEND_GRANTED);
    ck_assert_int_eq(fairlock_req(b, "f", 0), 0);
    ck_assert_int_eq(fairlock_req(c, "f", 0), 0);
    fake_settle(fb);
    queue_is("f", "o2 o3");
    ck_assert_int_eq(lockmgr_cancel(mgr, b->o, b), 1);
    expect_error(b, LOCK_ERR_CANCELLED);
    queued_mode_is(0, BACKEND_LEAVE, BACKEND_FAIR, "f", b);
    fake_settle(fb);
    queue_is("f", "o3");
    watching("f", c);
    no_reply(b);
}
END_TEST

/* A waiter granted has no place left to give up: no LEAVE when it is
 * granted, when its TRYFAIRLOCK's wait would have run out, nor when its
 * owner leaves holding the lock (a RELEASE, and the next head asks at once). */
START_TEST(test_fair_granted_sends_no_leave) {
    client_t *a = client(), *b = client(), *c = client();
    fair_ok(a, "f", 0);
    ck_assert_int_eq(tryfair_req(b, "f", 2000, 0), 0);
    ck_assert_int_eq(fairlock_req(c, "f", 0), 0);
    fake_settle(fb);
    ck_assert_int_eq(unlock_req(a, "f"), 1);
    expect_value(a, 0);
    fake_settle(fb);
    expect_granted(b, 1);
    timers_advance(tm, 2000);
    fake_settle(fb);
    no_reply(b);
    size_t mark = fake_log_len(fb);
    drop(b);
    ck_assert_uint_eq(fake_queued(fb), 2);
    queued_mode_is(0, BACKEND_RELEASE, BACKEND_FAIR, "f", b);
    fair_ask_queued(1, "f", c, 0);
    fake_run(fb);
    expect_granted(c, 1);
    ck_assert_uint_eq(asks(mark, c), 1);
    ck_assert_uint_eq(submitted(BACKEND_LEAVE), 0);
    queue_is("f", "");
}
END_TEST

/* TRYFAIRLOCK 0 takes no place: with the lock held or waited for here it
 * answers TIMEOUT at once, sending nothing; otherwise it asks once with
 * 'o' (once): granted when the lock is free and no one queues, else
 * TIMEOUT (the holder's TTL, or when the head's place ends), leaving the
 * queue as it was, with no watch, no keep-alive and no LEAVE. */
START_TEST(test_fair_tryfairlock_zero) {
    client_t *a = client(), *b = client(), *c = client(), *d = client();
    ck_assert_int_eq(tryfair_req(a, "f", 0, 0), 0);
    fair_ask_queued(0, "f", a, 1);
    fake_run(fb);
    expect_granted(a, 1);
    queue_is("f", "");

    size_t ops = fake_log_len(fb);
    ck_assert_int_eq(tryfair_req(b, "f", 0, 0), 1); /* held here */
    expect_timeout(b, LEASE);
    ck_assert_int_eq(fake_fair_acquire_field(fb, "g", "x", -1, LEASE), BACKEND_GRANTED);
    ck_assert_int_eq(fairlock_req(c, "g", 0), 0);
    fake_settle(fb);
    ops = fake_log_len(fb);
    ck_assert_int_eq(tryfair_req(b, "g", 0, 0), 1); /* waited for here */
    expect_timeout(b, -1);
    ck_assert_uint_eq(fake_log_len(fb), ops);
    queue_is("g", "o3");

    ck_assert_int_eq(fake_fair_acquire_field(fb, "h", "x", 5000, LEASE), BACKEND_GRANTED);
    ck_assert_int_eq(tryfair_req(b, "h", 0, 0), 0); /* another daemon holds it */
    fair_ask_queued(0, "h", b, 1);
    fake_run(fb);
    expect_timeout(b, 5000);
    queue_is("h", "");

    ck_assert_int_eq(fake_fair_acquire_field(fb, "k", "x", 5000, LEASE), BACKEND_GRANTED);
    ck_assert_int_eq(fake_fair_acquire_field(fb, "k", "r", -1, 4000), BACKEND_TAKEN);
    fake_expire(fb, "k"); /* free, but r queues */
    ck_assert_int_eq(tryfair_req(b, "k", 0, 0), 0);
    fair_ask_queued(0, "k", b, 1);
    fake_run(fb);
    expect_timeout(b, 4000);
    queue_is("k", "r");

    size_t mark = fake_log_len(fb);
    run_for(2 * EVERY);
    ck_assert_uint_eq(asks(mark, b), 0);
    ck_assert_uint_eq(leaves(0, b), 0);
    ck_assert(!fake_watched(fb, "h"));
    ck_assert(!fake_watched(fb, "k"));
    ck_assert_uint_eq(stats().timeouts, 4);
    for (size_t i = 0; i < fake_log_len(fb); i++) {
        const fake_rec_t *rec = fake_log(fb, i);
        if (rec->kind == BACKEND_ACQUIRE && rec->owner == b->id) ck_assert_int_eq(rec->once, 1);
    }

    /* Its owner leaves while the one try is in flight: no place to leave. */
    ck_assert_int_eq(tryfair_req(d, "h", 0, 0), 0);
    drop(d);
    ck_assert_uint_eq(fake_queued(fb), 1);
    fair_ask_queued(0, "h", d, 1);
    fake_settle(fb);
    ck_assert_uint_eq(leaves(0, d), 0);
    queue_is("h", "");
}
END_TEST

/* An owner leaves while its first ask is in flight: its LEAVE follows the
 * ask. Granted: the grant is undone (a RELEASE), which wakes the next
 * head; TAKEN: the place it took is left. Either way no place of its stays. */
START_TEST(test_fair_owner_drop_ask_in_flight) {
    client_t *a = client(), *b = client(), *c = client();
    ck_assert_int_eq(fairlock_req(a, "f", 0), 0);
    ck_assert_int_eq(fairlock_req(b, "f", 0), 0);
    fake_hold(fb, 1);
    drop(a);
    ck_assert_uint_eq(fake_queued(fb), 3);
    fair_ask_queued(0, "f", a, 0);
    fair_ask_queued(1, "f", b, 0);
    queued_mode_is(2, BACKEND_LEAVE, BACKEND_FAIR, "f", a);
    watching("f", b);
    fake_hold(fb, 0);
    fake_settle(fb);
    expect_granted(b, 1);
    ck_assert_int_eq(fake_holds(fb, a->id, "f"), 0);
    ck_assert_uint_eq(logged_for(0, BACKEND_RELEASE, a), 1);
    queue_is("f", "");

    ck_assert_int_eq(fake_fair_acquire_field(fb, "g", "x", -1, LEASE), BACKEND_GRANTED);
    ck_assert_int_eq(fairlock_req(c, "g", 0), 0);
    fake_hold(fb, 1);
    drop(c);
    ck_assert_uint_eq(fake_queued(fb), 2);
    queued_mode_is(1, BACKEND_LEAVE, BACKEND_FAIR, "g", c);
    fake_hold(fb, 0);
    fake_settle(fb);
    queue_is("g", "");
    ck_assert_uint_eq(logged_for(0, BACKEND_RELEASE, c), 0);
    ck_assert_uint_eq(leaves(0, c), 1);
    ck_assert(!fake_watched(fb, "g"));
}
END_TEST

/* Our own UNLOCK lets the local head ask at once; when a waiter whose
 * daemon died is ahead of it in Redis, it waits, and gets the lock once
 * that place ends (the script drops it at the head). One that leaves
 * instead wakes it at once. */
START_TEST(test_fair_unlock_head_behind_dead_waiter) {
    client_t *a = client(), *b = client();
    fair_ok(a, "f", 0);
    ck_assert_int_eq(fake_fair_acquire_field(fb, "f", "r", -1, 2000), BACKEND_TAKEN);
    ck_assert_int_eq(fairlock_req(b, "f", 0), 0);
    fake_settle(fb);
    queue_is("f", "r o2");
    uint64_t t = now();
    ck_assert_int_eq(unlock_req(a, "f"), 1);
    expect_value(a, 0);
    fair_ask_queued(1, "f", b, 0);
    size_t mark = fake_log_len(fb);
    fake_settle(fb);
    no_reply(b);
    ck_assert_uint_eq(asks(mark, b), 0);
    while (replies_left(b) == 0 && now() < t + 3000) run_for(10);
    expect_granted(b, 1);
    ck_assert_uint_ge(now(), t + 2000);
    ck_assert_uint_le(now(), t + 2010);
    queue_is("f", "");

    ck_assert_int_eq(fake_fair_acquire_field(fb, "f", "r", -1, 10 * LEASE), BACKEND_TAKEN);
    ck_assert_int_eq(fairlock_req(a, "f", 0), 0);
    fake_settle(fb);
    queue_is("f", "r o1");
    ck_assert_int_eq(unlock_req(b, "f"), 1);
    expect_value(b, 0);
    fake_settle(fb);
    no_reply(a);
    fake_fair_leave_field(fb, "f", "r"); /* the lock is free: a is woken */
    ck_assert_uint_eq(fake_queued(fb), 1);
    fake_run(fb);
    expect_granted(a, 1);
    queue_is("f", "");
}
END_TEST

/* A fair hold with a lease ends as a lock's: !LOST expired, its release
 * sent; the local head, which waited for that lease (its retry turn, not
 * its keep-alive one), gets the lock at once. */
START_TEST(test_fair_lease_expires) {
    client_t *a = client(), *b = client();
    ck_assert_int_eq(fairlock_req(a, "f", 1500), 0);
    ck_assert_uint_eq(fake_queued_op(fb, 0)->lease_ms, 1500);
    fake_run(fb);
    expect_granted(a, 1);
    ck_assert_int_eq(fake_pttl(fb, "f"), 1500);
    ck_assert_int_eq(fairlock_req(b, "f", 0), 0);
    fake_settle(fb);
    uint64_t t = now();
    while (replies_left(b) == 0 && now() < t + 2 * LEASE) {
        timers_advance(tm, 1);
        fake_settle(fb);
        if (now() < t + 1500) no_event(a);
    }
    ck_assert_uint_eq(submitted(BACKEND_RENEW), 0); /* leases are not renewed */
    expect_event(a, "f", LOCK_LOST_EXPIRED);
    expect_granted(b, 1);
    ck_assert_uint_le(now(), t + 1501);
    ck_assert_uint_eq(logged_for(0, BACKEND_RELEASE, a), 1);
    ck_assert_int_eq(unlock_req(a, "f"), 1);
    expect_error(a, LOCK_ERR_NOTHELD);
}
END_TEST

/* The watchdog keeps a fair hold (renewals of mode FAIR, the conf's lease)
 * and gives it up as a lock's: gone in Redis, !LOST expired. */
START_TEST(test_fair_watchdog) {
    client_t *a = client(), *b = client();
    fair_ok(a, "f", 0);
    size_t mark = fake_log_len(fb);
    stays_watchdog(a, "f");
    ck_assert_uint_ge(fake_log_count_mode(fb, mark, BACKEND_RENEW, BACKEND_FAIR), 4 * LEASE / EVERY - 1);
    ck_assert_uint_eq(fake_log_count_mode(fb, mark, BACKEND_RENEW, BACKEND_FAIR),
                      fake_log_count(fb, mark, BACKEND_RENEW));
    fake_expire(fb, "f");
    run_for(EVERY + 10);
    expect_event(a, "f", LOCK_LOST_EXPIRED);
    ck_assert_uint_eq(stats().locks_held, 0);
    fair_ok(b, "f", 0);
}
END_TEST

/* FORCEUNLOCK of a fair lock held here: its holder hears !LOST forced, and
 * the script wakes the queue's head, which gets the lock. */
START_TEST(test_fair_force) {
    client_t *root = client_uid(0), *a = client(), *b = client();
    fair_ok(a, "f", 0);
    ck_assert_int_eq(fairlock_req(b, "f", 0), 0);
    fake_settle(fb);
    queue_is("f", "o3");
    size_t mark = fake_log_len(fb);
    ck_assert_int_eq(request(root, LOCK_VERB_FORCE, "f", 0, 0), 0);
    fake_run(fb);
    expect_value(root, 1);
    expect_event(a, "f", LOCK_LOST_FORCED);
    ck_assert_uint_eq(asks(mark, b), 1); /* woken on its channel */
    fake_run(fb);
    expect_granted(b, 1);
    queue_is("f", "");
    ck_assert_uint_eq(fake_stats(fb)->fair_wakes, 1);
}
END_TEST

/* A name is one kind here: LOCK, RLOCK, WLOCK, ACQUIRE (and the tries) of
 * a name held or waited for as a fair lock, FAIRLOCK of a plain, read/write
 * or semaphore one held here: ERR KIND at once, nothing sent; no
 * BACKEND_CAP_ONE_COPY: ERR KIND. In Redis, a FAIRLOCK of a read/write lock or
 * a semaphore is ERR KIND, taking no place and leaving none. */
START_TEST(test_fair_kinds) {
    client_t *a = client(), *b = client(), *c = client(), *d = client(), *e = client();
    fair_ok(a, "f", 0);
    lock_ok(c, "p", 0);
    rlock_ok(d, "r", 0);
    fake_seminit(fb, "s", 3);
    acquire_ok(e, "s", 1, 0, 1);
    size_t ops = fake_log_len(fb);

    ck_assert_int_eq(lock_req(b, "f", 0), 1);
    lock_reply_t r = expect_error(b, LOCK_ERR_KIND);
    why_is(&r, LOCK_WHY_HELD_AS, LOCK_MODE_FAIR);
    ck_assert_int_eq(r.len, 1);
    ck_assert_int_eq(r.name[0], 'f');
    ck_assert_int_eq(request(b, LOCK_VERB_TRYLOCK, "f", 0, 0), 1);
    expect_error(b, LOCK_ERR_KIND);
    ck_assert_int_eq(rlock_req(b, "f", 0), 1);
    expect_error(b, LOCK_ERR_KIND);
    ck_assert_int_eq(wlock_req(b, "f", 0), 1);
    expect_error(b, LOCK_ERR_KIND);
    ck_assert_int_eq(acquire_req(b, "f", 1, 0), 1);
    expect_error(b, LOCK_ERR_KIND);
    ck_assert_int_eq(fairlock_req(b, "p", 0), 1);
    r = expect_error(b, LOCK_ERR_KIND);
    why_is(&r, LOCK_WHY_HELD_AS, LOCK_MODE_MUTEX);
    ck_assert_int_eq(r.len, 1);
    ck_assert_int_eq(r.name[0], 'p');
    ck_assert_int_eq(tryfair_req(b, "p", 0, 0), 1);
    expect_error(b, LOCK_ERR_KIND);
    ck_assert_int_eq(tryfair_req(b, "p", 100, 0), 1);
    expect_error(b, LOCK_ERR_KIND);
    ck_assert_int_eq(fairlock_req(b, "r", 0), 1);
    r = expect_error(b, LOCK_ERR_KIND);
    why_is(&r, LOCK_WHY_HELD_AS, LOCK_MODE_READ);
    ck_assert_int_eq(fairlock_req(b, "s", 0), 1);
    r = expect_error(b, LOCK_ERR_KIND);
    why_is(&r, LOCK_WHY_HELD_AS, LOCK_MODE_SEM);
    ck_assert_uint_eq(fake_log_len(fb), ops);

    /* Waited for only. */
    ck_assert_int_eq(fake_fair_acquire_field(fb, "w", "x", -1, LEASE), BACKEND_GRANTED);
    ck_assert_int_eq(fairlock_req(b, "w", 0), 0);
    fake_settle(fb);
    ops = fake_log_len(fb);
    ck_assert_int_eq(lock_req(c, "w", 0), 1);
    r = expect_error(c, LOCK_ERR_KIND);
    why_is(&r, LOCK_WHY_HELD_AS, LOCK_MODE_FAIR);
    ck_assert_uint_eq(fake_log_len(fb), ops);
    no_reply(b);

    /* Other kinds in Redis. */
    fake_take_rw(fb, "y", "other", BACKEND_WRITE, 5000);
    ck_assert_int_eq(fairlock_req(d, "y", 0), 0);
    fake_settle(fb);
    r = expect_error(d, LOCK_ERR_KIND);
    why_is(&r, LOCK_WHY_HELD_AS, LOCK_MODE_READ);
    fake_seminit(fb, "z", 2);
    ck_assert_int_eq(tryfair_req(d, "z", 1000, 0), 0);
    fake_settle(fb);
    r = expect_error(d, LOCK_ERR_KIND);
    why_is(&r, LOCK_WHY_HELD_AS, LOCK_MODE_SEM);
    queue_is("y", "");
    queue_is("z", "");
    ck_assert_uint_eq(leaves(0, d), 0);
    ck_assert(!fake_watched(fb, "y"));
    ck_assert(!fake_watched(fb, "z"));

    /* A topology without fair locks (the quorum). */
    fake_set_caps(fb, fake_backend(fb)->caps & ~BACKEND_CAP_ONE_COPY);
    ops = fake_log_len(fb);
    ck_assert_int_eq(fairlock_req(e, "q", 0), 1);
    r = expect_error(e, LOCK_ERR_KIND);
    why_is(&r, LOCK_WHY_UNSUPPORTED, LOCK_MODE_FAIR);
    ck_assert_str_eq(r.detail, "fake");
    ck_assert_int_eq(tryfair_req(e, "q", 0, 0), 1);
    expect_error(e, LOCK_ERR_KIND);
    ck_assert_int_eq(tryfair_req(e, "q", 100, 0), 1);
    expect_error(e, LOCK_ERR_KIND);
    ck_assert_uint_eq(fake_log_len(fb), ops);
    lock_ok(e, "q", 0);
    ck_assert_uint_eq(stats().waiters, 1);
}
END_TEST

/* RUNLOCK, WUNLOCK or RELEASE of a fair hold: ERR KIND, saying what it is
 * held as and what releases it (PROTOCOL.md: "... is held as a fair lock
 * (FAIRLOCK, UNLOCK)"); the hold stays. */
START_TEST(test_fair_other_unlock_kind_text) {
    client_t *a = client();
    fair_ok(a, "f", 0);
    ck_assert_int_eq(runlock_req(a, "f"), 1);
    lock_reply_t r = expect_error(a, LOCK_ERR_KIND);
    why_is(&r, LOCK_WHY_RELEASE_AS, LOCK_MODE_FAIR);
    ck_assert_int_eq(wunlock_req(a, "f"), 1);
    r = expect_error(a, LOCK_ERR_KIND);
    why_is(&r, LOCK_WHY_RELEASE_AS, LOCK_MODE_FAIR);
    ck_assert_int_eq(release_req(a, "f", 1), 1);
    r = expect_error(a, LOCK_ERR_KIND);
    why_is(&r, LOCK_WHY_RELEASE_AS, LOCK_MODE_FAIR);
    ck_assert_uint_eq(lockmgr_owner_held(a->o), 1);
    ck_assert_int_eq(fake_holds(fb, a->id, "f"), 1);
}
END_TEST

/* Across daemons a fair lock's hash is a plain lock's: a plain LOCK waits
 * while another daemon holds it as a fair lock, and takes no place. */
START_TEST(test_fair_plain_lock_takes_no_place) {
    client_t *a = client();
    ck_assert_int_eq(fake_fair_acquire_field(fb, "f", "x", 2000, LEASE), BACKEND_GRANTED);
    ck_assert_int_eq(fake_fair_acquire_field(fb, "f", "r", -1, 10 * LEASE), BACKEND_TAKEN);
    ck_assert_int_eq(lock_req(a, "f", 0), 0);
    fake_settle(fb);
    no_reply(a);
    queue_is("f", "r");
    run_for(2010);
    expect_granted(a, 1); /* a plain LOCK goes ahead of the queue */
    queue_is("f", "r");
}
END_TEST

/* Redis away for longer than a place lasts: the head's place ended, and a
 * Redisson waiter came meanwhile (its script dropped the ended place at
 * the head). Back, every waiter asks again: the one whose place ended
 * takes a new one at the tail (lasting a Redisson wait more, for r ahead
 * of it), the other keeps its own; each is then served in Redis's order. */
START_TEST(test_fair_place_ended_while_away) {
    client_t *a = client(), *b = client(), *c = client();
    (void)a;
    ck_assert_int_eq(fake_fair_acquire_field(fb, "f", "x", -1, LEASE), BACKEND_GRANTED);
    ck_assert_int_eq(fairlock_req(b, "f", 0), 0);
    ck_assert_int_eq(fairlock_req(c, "f", 0), 0);
    fake_settle(fb);
    queue_is("f", "o2 o3");
    fake_set_up(fb, 0);
    fake_fair_expire_place(fb, "f", "o2");
    ck_assert_int_eq(redisson_acquire("f", "r", 10 * LEASE), BACKEND_TAKEN);
    queue_is("f", "o3 r");
    timers_advance(tm, EVERY); /* keep-alive turns while away: nothing sent */
    ck_assert_uint_eq(fake_queued(fb), 0);
    size_t mark = fake_log_len(fb);
    fake_set_up(fb, 1);
    ck_assert_uint_eq(asks(mark, b), 1);
    ck_assert_uint_eq(asks(mark, c), 1);
    fake_settle(fb);
    queue_is("f", "o3 r o2");
    ck_assert_int_eq(fake_fair_place_pttl(fb, "f", b->id), LEASE + LOCKMGR_FAIR_FOREIGN_WAIT_MS);
    ck_assert_int_eq(fake_fair_place_pttl(fb, "f", c->id), LEASE);
    no_reply(b);
    no_reply(c);

    /* x's release wakes c, Redis's head. */
    uint64_t t = now();
    ck_assert_int_eq(fake_fair_release_field(fb, "f", "x"), 0);
    while (replies_left(c) == 0 && now() < t + 2 * EVERY) run_for(10);
    expect_granted(c, 1);
    ck_assert_uint_le(now(), t + EVERY);
    no_reply(b);
    queue_is("f", "r o2");
    ck_assert_int_eq(unlock_req(c, "f"), 1);
    expect_value(c, 0);
    fake_settle(fb);
    no_reply(b); /* r first */
    ck_assert_int_eq(redisson_acquire("f", "r", 10 * LEASE), BACKEND_GRANTED);
    ck_assert_int_gt(fake_fair_place_pttl(fb, "f", b->id), 0); /* the grant's wait taken off */
    ck_assert_int_eq(fake_fair_release_field(fb, "f", "r"), 0);
    fake_settle(fb);
    expect_granted(b, 1);
    queue_is("f", "");
}
END_TEST

/* A waiter behind the head whose keep-alive ask was in flight when Redis
 * went away keeps asking once it is back: its place must not end while
 * its client waits (else later waiters, here a Redisson client's, would be
 * served before it). */
START_TEST(test_fair_outage_waiter_keeps_place) {
    client_t *a = client(), *b = client(), *c = client();
    (void)a;
    ck_assert_int_eq(fake_fair_acquire_field(fb, "f", "x", -1, LEASE), BACKEND_GRANTED);
    ck_assert_int_eq(fairlock_req(b, "f", 0), 0);
    ck_assert_int_eq(fairlock_req(c, "f", 0), 0);
    fake_settle(fb);
    timers_advance(tm, EVERY);
    ck_assert_uint_eq(fake_queued(fb), 2); /* both keep-alive asks in flight */
    fake_set_up(fb, 0);
    fake_run(fb); /* lost with the connection */
    fake_set_up(fb, 1);
    fake_settle(fb);
    size_t mark = fake_log_len(fb);
    run_for(2 * EVERY);
    ck_assert_msg(asks(mark, c) >= 1, "the waiter behind the head has not asked since Redis "
                  "came back (%zu asks by the head)", asks(mark, b));
    run_for(2 * LEASE);
    ck_assert_msg(fake_fair_place_pttl(fb, "f", c->id) > 0,
                  "its place ended %lld ms ago while it waits",
                  -fake_fair_place_pttl(fb, "f", c->id));
    ck_assert_int_eq(fake_fair_acquire_field(fb, "f", "r", -1, 10 * LEASE), BACKEND_TAKEN);
    ck_assert_int_eq(fake_fair_release_field(fb, "f", "x"), 0);
    fake_settle(fb);
    expect_granted(b, 1);
    ck_assert_int_eq(unlock_req(b, "f"), 1);
    expect_value(b, 0);
    fake_settle(fb);
    expect_granted(c, 1); /* before r, who came after */
    queue_is("f", "r");
}
END_TEST

/* Shutdown: a fair hold is released in Redis (mode FAIR); an ask granted
 * in flight is undone; waiters are answered by their closing sockets, not
 * kept alive meanwhile (no asks), and leave their places as they close. */
START_TEST(test_fair_shutdown) {
    client_t *a = client(), *b = client(), *c = client();
    fair_ok(a, "f", 0);
    ck_assert_int_eq(fairlock_req(b, "f", 0), 0);
    fake_settle(fb);
    ck_assert_int_eq(fairlock_req(c, "g", 0), 0); /* granted, in flight */
    shutdown_now();
    ck_assert_uint_eq(fake_queued(fb), 2);
    fair_ask_queued(0, "g", c, 0);
    queued_mode_is(1, BACKEND_RELEASE, BACKEND_FAIR, "f", a);
    ck_assert_uint_eq(stats().locks_held, 0);
    fake_run(fb);
    expect_error(c, LOCK_ERR_BACKEND);
    queued_mode_is(0, BACKEND_RELEASE, BACKEND_FAIR, "g", c);
    fake_run(fb);
    timers_run_due(tm);
    ck_assert_int_eq(done_calls, 1);
    ck_assert_int_eq(fake_pttl(fb, "f"), -2);
    ck_assert_int_eq(fake_pttl(fb, "g"), -2);
    queue_is("g", "");
    size_t mark = fake_log_len(fb);
    timers_advance(tm, 2 * EVERY);
    fake_settle(fb);
    ck_assert_uint_eq(asks(mark, b), 0);
    no_reply(b);
    no_event(a);
    drop(b);
    ck_assert_uint_eq(leaves(mark, b), 1);
    fake_settle(fb);
    queue_is("f", "");
}
END_TEST

/* Shutdown while a waiter's first ask is in flight, which Redis answers
 * TAKEN: the waiter is answered (ERR BACKEND) and stops waiting, so the
 * place that ask took must be left too. */
START_TEST(test_fair_shutdown_first_ask_taken_leaves) {
    client_t *a = client();
    ck_assert_int_eq(fake_fair_acquire_field(fb, "f", "x", -1, LEASE), BACKEND_GRANTED);
    ck_assert_int_eq(fairlock_req(a, "f", 0), 0);
    shutdown_now();
    fake_run(fb);
    expect_error(a, LOCK_ERR_BACKEND);
    fake_settle(fb);
    timers_run_due(tm);
    ck_assert_int_eq(done_calls, 1);
    ck_assert_msg(fake_fair_pos(fb, "f", a->id) < 0,
                  "the waiter was answered, but its place stays in Redis (queue \"%s\")",
                  fake_fair_queue(fb, "f"));
}
END_TEST

/* A waiter's owner leaves while Redis is away: its LEAVE gets no answer,
 * and goes again once Redis is back, as a release does; the place does
 * not stay at the queue's head for lease_ms, holding every other waiter
 * of the name up. */
START_TEST(test_fair_leave_retried_while_away) {
    client_t *a = client(), *b = client();
    (void)a;
    ck_assert_int_eq(fake_fair_acquire_field(fb, "f", "x", -1, LEASE), BACKEND_GRANTED);
    ck_assert_int_eq(fairlock_req(b, "f", 0), 0);
    fake_settle(fb);
    ck_assert_int_eq(fake_fair_acquire_field(fb, "f", "r", -1, LEASE), BACKEND_TAKEN);
    queue_is("f", "o2 r");
    fake_set_up(fb, 0);
    drop(b);
    ck_assert_uint_eq(leaves(0, b), 1);
    fake_settle(fb); /* BACKEND_DOWN */
    queue_is("f", "o2 r");
    size_t mark = fake_log_len(fb);
    fake_set_up(fb, 1);
    ck_assert_uint_eq(leaves(mark, b), 1);
    fake_settle(fb);
    queue_is("f", "r");
    /* Left once: no more LEAVEs, nor anything else of b's. */
    run_for(2 * EVERY);
    ck_assert_uint_eq(leaves(0, b), 2);
    ck_assert_uint_eq(asks(mark, b), 0);
    ck_assert_uint_eq(stats().waiters, 0);
}
END_TEST

/* A first ask whose answer is lost (it ran: Redis queued the waiter) is
 * answered ERR BACKEND, and its place is left, though Redis never said
 * TAKEN. An ask Redis refused with an error (it did not run) takes no
 * place and leaves none. */
START_TEST(test_fair_unanswered_first_ask_leaves) {
    client_t *a = client(), *b = client(), *c = client();
    (void)a;
    ck_assert_int_eq(fake_fair_acquire_field(fb, "f", "x", -1, LEASE), BACKEND_GRANTED);
    fake_lose_next(fb, "no reply within command_timeout_ms");
    ck_assert_int_eq(fairlock_req(b, "f", 0), 0);
    fake_run(fb);
    expect_error(b, LOCK_ERR_BACKEND);
    ck_assert_uint_eq(leaves(0, b), 1);
    fake_settle(fb);
    ck_assert_msg(fake_fair_pos(fb, "f", b->id) < 0,
                  "the waiter was answered, but its place stays in Redis (queue \"%s\")",
                  fake_fair_queue(fb, "f"));
    fake_fail_next(fb, BACKEND_FAILED, "ERR something");
    ck_assert_int_eq(fairlock_req(c, "f", 0), 0);
    fake_settle(fb);
    expect_error(c, LOCK_ERR_BACKEND);
    ck_assert_uint_eq(leaves(0, c), 0);
    queue_is("f", "");
    ck_assert_uint_eq(stats().waiters, 0);
}
END_TEST

/* A LEAVE that got no answer is not sent again once its owner waits for
 * the name again: the new wait's ask kept the place (ahead of r), and a
 * late LEAVE would send it to the queue's tail. */
START_TEST(test_fair_stale_leave_dropped) {
    client_t *a = client(), *b = client();
    (void)a;
    ck_assert_int_eq(fake_fair_acquire_field(fb, "f", "x", -1, LEASE), BACKEND_GRANTED);
    ck_assert_int_eq(fairlock_req(b, "f", 0), 0);
    fake_settle(fb);
    ck_assert_int_eq(fake_fair_acquire_field(fb, "f", "r", -1, LEASE), BACKEND_TAKEN);
    queue_is("f", "o2 r");
    ck_assert_int_eq(lockmgr_cancel(mgr, b->o, b), 1);
    expect_error(b, LOCK_ERR_CANCELLED);
    queued_mode_is(0, BACKEND_LEAVE, BACKEND_FAIR, "f", b);
    fake_fail_next(fb, BACKEND_DOWN, "no reply within command_timeout_ms");
    ck_assert_int_eq(fairlock_req(b, "f", 0), 0);
    fake_settle(fb);
    queue_is("f", "o2 r");
    size_t mark = fake_log_len(fb);
    fake_set_up(fb, 0);
    fake_set_up(fb, 1);
    fake_settle(fb);
    run_for(2 * EVERY);
    ck_assert_uint_eq(leaves(mark, b), 0);
    queue_is("f", "o2 r");
    ck_assert_int_eq(fake_fair_release_field(fb, "f", "x"), 0);
    fake_settle(fb);
    expect_granted(b, 1);
}
END_TEST

/* Owners without a client_t (their replies are counted, nothing more),
 * for a crowd of waiters; ids from BARE_ID on. */
#define BARE_ID 1000
static unsigned bare_replies;

static void on_bare_reply(void *data, void *call, const lock_reply_t *r) {
    (void)data;
    (void)call;
    (void)r;
    ck_assert_msg(!in_request, "a reply callback inside lockmgr_request");
    bare_replies++;
}

static void on_bare_event(void *data, const lock_event_t *ev) {
    (void)data;
    (void)ev;
    ck_abort_msg("an event for an owner that holds nothing");
}

/* More waiters come at once than acquires may be in flight
 * (LOCKMGR_READS_INFLIGHT): those held back ask as answers come back, so
 * that each has its place, in arrival order, before anyone who comes
 * after them, without waiting for a keep-alive turn. */
START_TEST(test_fair_many_waiters_take_places) {
    enum { N = LOCKMGR_READS_INFLIGHT + 8 };
    client_t *a = client(), *b = client();
    lock_owner_t *w[N];
    fair_ok(a, "f", 0);
    ck_assert_int_eq(fairlock_req(b, "f", 0), 0);
    fake_settle(fb); /* b: the head, its watch in force */
    lock_request_t req = {.verb = LOCK_VERB_LOCK, .mode = LOCK_MODE_FAIR, .name = "f", .len = 1};
    for (int i = 0; i < N; i++) {
        lock_reply_t at_once;
        w[i] = lockmgr_owner_new(mgr, BARE_ID + (uint64_t)i, 1000, on_bare_reply, on_bare_event,
                                 NULL);
        ck_assert_ptr_nonnull(w[i]);
        in_request = 1;
        ck_assert_int_eq(lockmgr_request(mgr, w[i], &req, w[i], &at_once), 0);
        in_request = 0;
    }
    ck_assert_uint_eq(fake_queued(fb), LOCKMGR_READS_INFLIGHT);
    fake_settle(fb);
    ck_assert_int_eq(fake_fair_acquire_field(fb, "f", "r", -1, 10 * LEASE), BACKEND_TAKEN);
    size_t places = fake_fair_queue_len(fb, "f");
    ck_assert_int_eq(fake_fair_pos(fb, "f", b->id), 0);
    for (int i = 0; i < N; i++) {
        long long pos = fake_fair_pos(fb, "f", BARE_ID + (uint64_t)i);
        ck_assert_msg(pos == i + 1, "waiter %d of %d: place %lld (%zu places), want %d", i + 1, N,
                      pos, places, i + 1);
    }
    ck_assert_int_eq(fake_fair_pos_field(fb, "f", "r"), N + 1);
    ck_assert_uint_eq(bare_replies, 0);
    for (int i = 0; i < N; i++) lockmgr_owner_drop(mgr, w[i]);
    fake_settle(fb);
    queue_is("f", "o2 r");
}
END_TEST

/* Answers lost (a reply that did not come in time; the ops ran): each
 * waiter, the head too, asks again at its next keep-alive turn, keeping
 * its place; the holder's lease then runs out, which publishes nothing,
 * and the head gets the lock. */
START_TEST(test_fair_lost_answer_asks_again) {
    client_t *a = client(), *b = client(), *c = client();
    (void)a;
    ck_assert_int_eq(fake_fair_acquire_field(fb, "f", "x", 5000, LEASE), BACKEND_GRANTED);
    ck_assert_int_eq(fairlock_req(b, "f", 0), 0);
    ck_assert_int_eq(fairlock_req(c, "f", 0), 0);
    fake_settle(fb);
    timers_advance(tm, EVERY);
    ck_assert_uint_eq(fake_queued(fb), 2);
    fake_lose_next(fb, "no reply within command_timeout_ms");
    fake_lose_next(fb, "no reply within command_timeout_ms");
    fake_run(fb);
    size_t mark = fake_log_len(fb);
    run_for(EVERY + 10);
    ck_assert_msg(asks(mark, b) >= 1 && asks(mark, c) >= 1,
                  "after a lost answer, %zu asks by the head and %zu by the waiter behind it "
                  "in renew_every_ms", asks(mark, b), asks(mark, c));
    while (replies_left(b) == 0 && now() < T0 + 5000 + 2 * EVERY) run_for(10);
    expect_granted(b, 1);
    ck_assert_uint_le(now(), T0 + 5000 + 10);
    ck_assert_int_gt(fake_fair_place_pttl(fb, "f", c->id), 0);
    no_reply(c);
}
END_TEST

/* TRYFAIRLOCK 0 takes no place, also from a holder whose hold Redis no
 * longer has (its reentry finds another holder): !LOST, TIMEOUT, and no
 * place of its left at the head of the queue to hold the others up. */
START_TEST(test_fair_try_zero_reentry_takes_no_place) {
    client_t *a = client();
    fair_ok(a, "f", 0);
    fake_expire(fb, "f");
    ck_assert_int_eq(fake_fair_acquire_field(fb, "f", "x", 5000, LEASE), BACKEND_GRANTED);
    ck_assert_int_eq(tryfair_req(a, "f", 0, 0), 0);
    fake_settle(fb);
    expect_event(a, "f", LOCK_LOST_EXPIRED);
    expect_timeout(a, 5000);
    ck_assert_msg(fake_fair_pos(fb, "f", a->id) < 0,
                  "TRYFAIRLOCK 0 left a place in Redis's queue (\"%s\")", fake_fair_queue(fb, "f"));
}
END_TEST

/* A reentry whose hold Redis no longer has, refused by a new holder, takes
 * a place in Redis's queue. When no wait of the owner goes on with it (the
 * owner left while the reentry was in flight; the reentry's answer was
 * lost), the place is left, not kept at the queue until lease_ms; when a
 * wait goes on, that wait has one place. */
START_TEST(test_fair_reentry_place_left) {
    client_t *a = client(), *b = client(), *c = client();
    /* The owner leaves with the reentry in flight. */
    fair_ok(a, "f", 0);
    fake_expire(fb, "f");
    ck_assert_int_eq(fake_fair_acquire_field(fb, "f", "x", 5000, LEASE), BACKEND_GRANTED);
    ck_assert_int_eq(fairlock_req(a, "f", 0), 0);
    drop(a);
    fake_settle(fb);
    ck_assert_msg(fake_fair_pos(fb, "f", a->id) < 0,
                  "a reentry's owner left, its place stays (\"%s\")", fake_fair_queue(fb, "f"));

    /* Its answer is lost: ERR BACKEND, and the place it may have taken goes. */
    fair_ok(b, "g", 0);
    fake_expire(fb, "g");
    ck_assert_int_eq(fake_fair_acquire_field(fb, "g", "x", 5000, LEASE), BACKEND_GRANTED);
    fake_lose_next(fb, "no reply within command_timeout_ms");
    ck_assert_int_eq(fairlock_req(b, "g", 0), 0);
    fake_settle(fb);
    expect_error(b, LOCK_ERR_BACKEND);
    ck_assert_msg(fake_fair_pos(fb, "g", b->id) < 0,
                  "a reentry got no answer, its place stays (\"%s\")", fake_fair_queue(fb, "g"));

    /* Refused, it waits on: one place, its wait's. */
    fair_ok(c, "h", 0);
    fake_expire(fb, "h");
    ck_assert_int_eq(fake_fair_acquire_field(fb, "h", "x", 5000, LEASE), BACKEND_GRANTED);
    ck_assert_int_eq(fairlock_req(c, "h", 0), 0);
    fake_settle(fb);
    expect_event(c, "h", LOCK_LOST_EXPIRED);
    no_reply(c);
    ck_assert_str_eq(fake_fair_queue(fb, "h"), "o3");
    ck_assert_int_eq(fake_fair_release_field(fb, "h", "x"), 0);
    fake_settle(fb);
    expect_granted(c, 1);
    queue_is("h", "");
}
END_TEST

/* Regression: a second local waiter that queues behind a refused head
 * stopped the queue's one retry timer, and the head then waited for the
 * next keep-alive (renew_every_ms) instead of the holder's lease. A
 * foreign holder's 1 s lease, a keep-alive far later: the head is granted
 * when the lease ends. */
START_TEST(test_fair_second_waiter_keeps_head_retry) {
    client_t *a = client(), *b = client();
    conf.renew_every_ms = LEASE - 500; /* places last LEASE: kept in time */
    fake_take(fb, "f", "x", 1000);
    uint64_t t = now();
    ck_assert_int_eq(fairlock_req(a, "f", 0), 0);
    fake_settle(fb);
    run_for(200);
    ck_assert_int_eq(fairlock_req(b, "f", 0), 0);
    fake_settle(fb);
    run_until_reply(a, t + 2 * LEASE);
    expect_granted(a, 1);
    ck_assert_msg(now() <= t + 1001 + 10, "granted %" PRIu64 " ms after the lease began",
                  now() - t);
    no_reply(b);
}
END_TEST

/* HOLD_GONE for a fair acquire (the fair script never says it: a reply
 * rewritten on its way) may hide a grant: undone in Redis, and the waiter
 * asks again and is answered (issue 36, bug 8). */
START_TEST(test_fair_hold_gone_retried) {
    client_t *a = client(), *b = client();
    ck_assert_int_eq(fairlock_req(a, "h", 0), 0);
    fake_rewrite_next(fb, BACKEND_HOLD_GONE);
    fake_run(fb); /* granted, heard as HOLD_GONE */
    no_reply(a);
    run_until_reply(a, now() + 5 * LEASE);
    expect_granted(a, 1);
    ck_assert_int_eq(fake_holds(fb, a->id, "h"), 1);
    queue_is("h", "");
    ck_assert_int_eq(fairlock_req(b, "h", 0), 0);
    fake_settle(fb);
    no_reply(b);
    ck_assert_int_eq(unlock_req(a, "h"), 1);
    expect_value(a, 0);
    run_until_reply(b, now() + 5 * LEASE);
    expect_granted(b, 1);
    ck_assert_uint_eq(stats().waiters, 0);
    queue_is("h", "");
}
END_TEST

/* ---- the suite --------------------------------------------------------------- */

static Suite *lockmgr_fair_suite(void) {
    Suite *s = suite_create("lockmgr_fair");
    TCase *tc;

#define TC(name) \
    tc = tcase_create(name); \
    tcase_add_checked_fixture(tc, setup, teardown); \
    suite_add_tcase(s, tc)

    TC("fair");
    tcase_add_test(tc, test_fair_grant_reentry_unlock);
    tcase_add_test(tc, test_fair_second_waiter_keeps_head_retry);
    tcase_add_test(tc, test_fair_fifo_local);
    tcase_add_test(tc, test_fair_fifo_with_foreign_waiters);
    tcase_add_test(tc, test_fair_only_head_woken);
    tcase_add_test(tc, test_fair_watch_follows_head);
    tcase_add_test(tc, test_fair_keep_alive);
    tcase_add_test(tc, test_fair_trylock_times_out_leaves);
    tcase_add_test(tc, test_fair_owner_drop_leaves);
    tcase_add_test(tc, test_fair_cancel_leaves);
    tcase_add_test(tc, test_fair_granted_sends_no_leave);
    tcase_add_test(tc, test_fair_tryfairlock_zero);
    tcase_add_test(tc, test_fair_owner_drop_ask_in_flight);
    tcase_add_test(tc, test_fair_unlock_head_behind_dead_waiter);
    tcase_add_test(tc, test_fair_lease_expires);
    tcase_add_test(tc, test_fair_watchdog);
    tcase_add_test(tc, test_fair_force);
    tcase_add_test(tc, test_fair_kinds);
    tcase_add_test(tc, test_fair_other_unlock_kind_text);
    tcase_add_test(tc, test_fair_plain_lock_takes_no_place);
    tcase_add_test(tc, test_fair_place_ended_while_away);
    tcase_add_test(tc, test_fair_outage_waiter_keeps_place);
    tcase_add_test(tc, test_fair_shutdown);
    tcase_add_test(tc, test_fair_shutdown_first_ask_taken_leaves);
    tcase_add_test(tc, test_fair_leave_retried_while_away);
    tcase_add_test(tc, test_fair_unanswered_first_ask_leaves);
    tcase_add_test(tc, test_fair_stale_leave_dropped);
    tcase_add_test(tc, test_fair_many_waiters_take_places);
    tcase_add_test(tc, test_fair_lost_answer_asks_again);
    tcase_add_test(tc, test_fair_try_zero_reentry_takes_no_place);
    tcase_add_test(tc, test_fair_reentry_place_left);
    tcase_add_test(tc, test_fair_hold_gone_retried);
#undef TC
    return s;
}

int main(void) {
    return lockmgr_test_run(lockmgr_fair_suite());
}
