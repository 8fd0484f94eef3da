/* Unit tests of daemon/lock's semaphores on a fake backend.
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

/* ---- semaphores ----------------------------------------------------------------
 * SEMINIT, ACQUIRE, TRYACQUIRE and RELEASE are LOCK_VERB_OWN, LOCK,
 * TRYLOCK and UNLOCK of mode SEM with permits; the fake answers them as
 * script_sem and LUA_SEM_RENEW would (fake_backend.h). A connection's
 * permits of a name are one hold, its ids <owner>:1 .. <owner>:count in
 * Redis; more permits extend it, RELEASE gives back the top ones. The
 * cases check, where it matters, that Redis's permits available plus its
 * ids stay the size (sem_consistent) and that every permit a connection
 * believes it holds is an unexpired id of its own (sem_ids_are). */

/* Redis's permits available plus its ids (of anyone, expired too) are the size. */
static void sem_consistent(const char *name, long long size) {
    long long avail = fake_sem_available(fb, name);
    size_t card = fake_sem_card(fb, name);
    ck_assert_msg(avail + (long long)card == size, "%s: %lld available + %zu ids, size %lld",
                  name, avail, card, size);
}

static void expect_sem(client_t *c, long long available, long long mine) {
    lock_reply_t r = next_reply(c);
    ck_assert_msg(r.type == LOCK_REPLY_SEM, "client %" PRIu64 ": %s (%s), want SEM", c->id,
                  reply_type_name(r.type), r.detail ? r.detail : "");
    ck_assert_int_eq(r.holders, available);
    ck_assert_int_eq(r.holds, mine);
}

static void sem_status_is(client_t *c, const char *name, long long available, long long mine) {
    ck_assert_int_eq(request(c, LOCK_VERB_STATUS, name, 0, 0), 0);
    fake_run(fb);
    expect_sem(c, available, mine);
}

/* The op at position i of the fake's queue is a semaphore op of kind on
 * name for c, of permits after base. A renewal's ids are always 1..permits
 * (LUA_SEM_RENEW reads no base; the watchdog leaves the field unset). */
static void sem_queued(size_t i, backend_op_type_t kind, const char *name, const client_t *c,
                       uint32_t base, uint32_t permits) {
    queued_mode_is(i, kind, BACKEND_SEM, name, c);
    if (kind != BACKEND_RENEW) ck_assert_uint_eq(fake_queued_op(fb, i)->base, base);
    ck_assert_uint_eq(fake_queued_op(fb, i)->count, permits);
}

/* SEMINIT sets the size once; of a lock (in Redis, or held here) it is ERR KIND. */
START_TEST(test_sem_seminit) {
    client_t *a = client(), *b = client();
    ck_assert_int_eq(seminit_req(a, "s", 5), 0);
    sem_queued(0, BACKEND_INIT, "s", a, 0, 5);
    fake_run(fb);
    expect_value(a, 1);
    ck_assert_int_eq(fake_sem_available(fb, "s"), 5);
    ck_assert_int_eq(fake_mode(fb, "s"), BACKEND_SEM);
    ck_assert_int_eq(seminit_req(b, "s", 9), 0);
    fake_run(fb);
    expect_value(b, 0);
    ck_assert_int_eq(fake_sem_available(fb, "s"), 5); /* unchanged */
    ck_assert_int_eq(seminit_req(a, "zero", 0), 0);   /* a size of 0 is a size */
    fake_run(fb);
    expect_value(a, 1);
    ck_assert_int_eq(fake_sem_available(fb, "zero"), 0);

    fake_take(fb, "p", "other", 5000); /* another daemon's lock */
    ck_assert_int_eq(seminit_req(a, "p", 5), 0);
    fake_run(fb);
    lock_reply_t r = expect_error(a, LOCK_ERR_KIND);
    why_is(&r, LOCK_WHY_HELD_AS, LOCK_MODE_MUTEX);
    ck_assert_int_eq(fake_holds_field(fb, "other", "p"), 1);
    ck_assert_int_eq(fake_sem_available(fb, "p"), -1);

    lock_ok(b, "q", 0); /* a lock held here: refused before Redis */
    size_t ops = fake_log_len(fb);
    ck_assert_int_eq(seminit_req(a, "q", 5), 1);
    r = expect_error(a, LOCK_ERR_KIND);
    why_is(&r, LOCK_WHY_HELD_AS, LOCK_MODE_MUTEX);
    ck_assert_uint_eq(fake_log_len(fb), ops);
    ck_assert_int_eq(fake_sem_available(fb, "q"), -1);
    ck_assert_uint_eq(stats().locks_held, 1);
}
END_TEST

/* A grant: ids 1..n, the count down by n, no watch; STATUS says what Redis
 * has available (expired ids counted) and what this connection holds. */
START_TEST(test_sem_grant_and_status) {
    client_t *a = client(), *b = client(), *c = client();
    fake_seminit(fb, "s", 5);
    ck_assert_int_eq(acquire_req(a, "s", 2, 0), 0);
    no_reply(a);
    sem_queued(0, BACKEND_ACQUIRE, "s", a, 0, 2);
    ck_assert_uint_eq(fake_queued_op(fb, 0)->lease_ms, LEASE); /* watchdog: the conf lease */
    ck_assert_uint_eq(stats().waiters, 1);
    fake_run(fb);
    expect_value(a, 2);
    sem_ids_are(a, "s", 2);
    ck_assert_int_eq(fake_sem_id_pttl(fb, "s", a->id, 2), LEASE);
    ck_assert_int_eq(fake_sem_available(fb, "s"), 3);
    ck_assert_uint_eq(lockmgr_owner_held(a->o), 1);
    ck_assert(!lockmgr_owner_waiting(a->o));
    lockmgr_stats_t st = stats();
    ck_assert_uint_eq(st.locks_held, 1);
    ck_assert_uint_eq(st.waiters, 0);
    ck_assert_uint_eq(st.grants, 1);
    ck_assert_uint_eq(fake_watch_calls(fb, "s"), 0);

    acquire_ok(b, "s", 1, 0, 1);
    sem_status_is(a, "s", 2, 2);
    sem_status_is(b, "s", 2, 1);
    sem_status_is(c, "s", 2, 0);
    fake_sem_expire_id(fb, "s", b->id, 1); /* expired: available, until taken back */
    sem_status_is(c, "s", 3, 0);
    ck_assert_uint_eq(fake_sem_card(fb, "s"), 3);
    sem_consistent("s", 5);
    ck_assert_int_eq(request(c, LOCK_VERB_STATUS, "nothing", 0, 0), 0);
    fake_run(fb);
    ck_assert_int_eq(next_reply(c).type, LOCK_REPLY_FREE);
    no_event(a);
    no_event(b);
}
END_TEST

/* More permits extend the hold (ids base+1..), which stays one hold of
 * max_locks_per_client. */
START_TEST(test_sem_more_permits_extend) {
    client_t *a = client();
    fake_seminit(fb, "s", 10);
    conf.max_locks_per_client = 1;
    acquire_ok(a, "s", 2, 0, 2);
    ck_assert_int_eq(acquire_req(a, "s", 3, 0), 0);
    sem_queued(0, BACKEND_ACQUIRE, "s", a, 2, 3);
    fake_run(fb);
    expect_value(a, 5);
    sem_ids_are(a, "s", 5);
    ck_assert_int_eq(fake_sem_available(fb, "s"), 5);
    ck_assert_uint_eq(lockmgr_owner_held(a->o), 1);
    ck_assert_uint_eq(stats().locks_held, 1);
    ck_assert_uint_eq(stats().grants, 2);

    /* At max_locks_per_client: more of it, yes; another name or a lock, no. */
    ck_assert_int_eq(acquire_req(a, "t", 1, 0), 1);
    lock_reply_t r = expect_error(a, LOCK_ERR_LIMIT);
    why_is(&r, LOCK_WHY_MAX_LOCKS, -1);
    ck_assert_int_eq(lock_req(a, "x", 0), 1);
    expect_error(a, LOCK_ERR_LIMIT);
    ck_assert_int_eq(tryacquire_req(a, "s", 5, 0, 0), 0);
    sem_queued(0, BACKEND_ACQUIRE, "s", a, 5, 5);
    fake_run(fb);
    expect_value(a, 10);
    sem_ids_are(a, "s", 10);
    ck_assert_int_eq(fake_sem_available(fb, "s"), 0);
    ck_assert_uint_eq(lockmgr_owner_held(a->o), 1);
    sem_consistent("s", 10);
}
END_TEST

/* RELEASE of some gives back the top ids at once; of all, the hold. */
START_TEST(test_sem_release_top_ids) {
    client_t *a = client();
    fake_seminit(fb, "s", 8);
    acquire_ok(a, "s", 5, 0, 5);
    size_t mark = fake_log_len(fb);
    ck_assert_int_eq(release_req(a, "s", 2), 1); /* answered at once */
    expect_value(a, 3);
    sem_queued(0, BACKEND_RELEASE, "s", a, 3, 2);
    fake_run(fb);
    sem_ids_are(a, "s", 3);
    ck_assert_int_eq(fake_sem_id_pttl(fb, "s", a->id, 4), -2);
    ck_assert_int_eq(fake_sem_available(fb, "s"), 5);
    ck_assert_uint_eq(lockmgr_owner_held(a->o), 1);
    sem_status_is(a, "s", 5, 3);

    ck_assert_int_eq(release_req(a, "s", 3), 1);
    expect_value(a, 0);
    sem_queued(0, BACKEND_RELEASE, "s", a, 0, 3);
    fake_run(fb);
    ck_assert_uint_eq(fake_sem_ids(fb, "s", a->id), 0);
    ck_assert_int_eq(fake_sem_available(fb, "s"), 8);
    ck_assert_uint_eq(lockmgr_owner_held(a->o), 0);
    ck_assert_uint_eq(stats().locks_held, 0);
    ck_assert_int_eq(release_req(a, "s", 1), 1);
    expect_error(a, LOCK_ERR_NOTHELD);
    ck_assert_uint_eq(fake_queued(fb), 0);
    ck_assert_uint_eq(fake_log_count(fb, mark, BACKEND_RELEASE), 2);
    sem_consistent("s", 8);
}
END_TEST

/* RELEASE of more than held: ERR NOTHELD, and nothing is given back. */
START_TEST(test_sem_release_more_than_held) {
    client_t *a = client(), *b = client();
    fake_seminit(fb, "s", 5);
    acquire_ok(a, "s", 2, 0, 2);
    size_t ops = fake_log_len(fb);
    ck_assert_int_eq(release_req(a, "s", 3), 1);
    lock_reply_t r = expect_error(a, LOCK_ERR_NOTHELD);
    why_is(&r, LOCK_WHY_PERMITS_HELD, -1);
    ck_assert_int_eq(r.limit, 2);
    ck_assert_int_eq(release_req(b, "s", 1), 1); /* holds none */
    expect_error(b, LOCK_ERR_NOTHELD);
    ck_assert_uint_eq(fake_log_len(fb), ops);
    sem_ids_are(a, "s", 2);
    ck_assert_uint_eq(lockmgr_owner_held(a->o), 1);
    sem_status_is(a, "s", 3, 2);
    ck_assert_int_eq(release_req(a, "s", 2), 1);
    expect_value(a, 0);
}
END_TEST

/* FIFO: a request for 4 at the head is not overtaken by a later one for 1
 * that would fit; only the head tries, again at every release, and gets
 * its permits once enough are back; then the next one goes. Nothing local
 * keeps a semaphore's waiter from trying (Redis counts the permits). */
START_TEST(test_sem_fifo_large_head) {
    client_t *a = client(), *b = client(), *c = client();
    fake_seminit(fb, "s", 5);
    acquire_ok(a, "s", 3, 0, 3);
    size_t mark = fake_log_len(fb);
    ck_assert_int_eq(acquire_req(b, "s", 4, 0), 0);
    sem_queued(0, BACKEND_ACQUIRE, "s", b, 0, 4); /* a's local hold does not hold it back */
    fake_run(fb);                                 /* TAKEN: it watches the channel */
    no_reply(b);
    ck_assert(fake_watched(fb, "s"));
    ck_assert_int_eq(fake_watch_mode(fb, "s"), BACKEND_SEM);
    fake_settle(fb);
    ck_assert_int_eq(acquire_req(c, "s", 1, 0), 0); /* 2 are free, but b is first */
    fake_settle(fb);
    no_reply(b);
    no_reply(c);
    ck_assert_uint_eq(stats().waiters, 2);

    ck_assert_int_eq(release_req(a, "s", 1), 1);
    expect_value(a, 2);
    sem_queued(0, BACKEND_RELEASE, "s", a, 2, 1); /* the release, then the head's try */
    sem_queued(1, BACKEND_ACQUIRE, "s", b, 0, 4);
    fake_settle(fb); /* 3 free: not enough */
    no_reply(b);
    no_reply(c);
    ck_assert_int_eq(release_req(a, "s", 2), 1);
    expect_value(a, 0);
    sem_queued(0, BACKEND_RELEASE, "s", a, 0, 2);
    sem_queued(1, BACKEND_ACQUIRE, "s", b, 0, 4);
    fake_run(fb);
    expect_value(b, 4);
    no_reply(c);
    sem_queued(0, BACKEND_ACQUIRE, "s", c, 0, 1); /* c's turn, at once */
    fake_run(fb);
    expect_value(c, 1);
    ck_assert_uint_eq(logged_for(mark, BACKEND_ACQUIRE, c), 1);
    ck_assert_uint_eq(fake_stats(fb)->max_inflight_kind[BACKEND_ACQUIRE], 1);
    ck_assert(!fake_watched(fb, "s"));
    sem_ids_are(b, "s", 4);
    sem_ids_are(c, "s", 1);
    ck_assert_int_eq(fake_sem_available(fb, "s"), 0);
    sem_consistent("s", 5);
}
END_TEST

/* TRYACQUIRE with wait 0: one try when nobody waits (Redis's ttl: the
 * first id's); behind a waiter TIMEOUT -1 without asking Redis. */
START_TEST(test_sem_tryacquire_zero) {
    client_t *a = client(), *b = client(), *c = client();
    fake_seminit(fb, "s", 2);
    acquire_ok(a, "s", 2, 0, 2);
    timers_advance(tm, 500);
    ck_assert_int_eq(tryacquire_req(b, "s", 1, 0, 0), 0);
    fake_run(fb);
    expect_timeout(b, LEASE - 500);
    ck_assert_uint_eq(fake_watch_calls(fb, "s"), 0); /* one try: no watch */

    ck_assert_int_eq(acquire_req(c, "s", 1, 0), 0);
    fake_settle(fb);
    size_t ops = fake_log_len(fb);
    ck_assert_int_eq(tryacquire_req(b, "s", 1, 0, 0), 1);
    expect_timeout(b, -1);
    ck_assert_uint_eq(fake_log_len(fb), ops);
    ck_assert_uint_eq(stats().timeouts, 2);
    ck_assert_uint_eq(stats().waiters, 1);
    no_reply(c);
    /* A semaphore whose size was never set: TIMEOUT -1, and nothing made. */
    ck_assert_int_eq(tryacquire_req(b, "never", 1, 0, 0), 0);
    fake_run(fb);
    expect_timeout(b, -1);
    ck_assert_int_eq(fake_sem_available(fb, "never"), -1);
    ck_assert_uint_eq(fake_sem_card(fb, "never"), 0);
}
END_TEST

/* TRYACQUIRE with a wait times out with the ttl Redis last said, not a
 * local holder's lease. */
START_TEST(test_sem_tryacquire_wait_times_out) {
    client_t *a = client(), *b = client();
    fake_seminit(fb, "s", 3);
    fake_sem_take(fb, "s", "other", 3, 10000);
    ck_assert_int_eq(tryacquire_req(b, "s", 1, 500, 0), 0);
    fake_settle(fb);
    ck_assert(fake_watched(fb, "s"));
    timers_advance(tm, 499);
    no_reply(b);
    timers_advance(tm, 1);
    expect_timeout(b, 10000);
    ck_assert(!fake_watched(fb, "s"));
    ck_assert_uint_eq(stats().waiters, 0);
    ck_assert_uint_eq(stats().timeouts, 1);
    timers_advance(tm, 20000); /* the retry timer went with the waiter */
    ck_assert_uint_eq(fake_queued(fb), 0);

    fake_seminit(fb, "t", 2);
    acquire_ok(a, "t", 2, 0, 2);
    timers_advance(tm, 200);
    ck_assert_int_eq(tryacquire_req(b, "t", 1, 300, 0), 0);
    fake_settle(fb);
    timers_advance(tm, 300);
    expect_timeout(b, LEASE - 200); /* what Redis said 300 ms ago */
    ck_assert_uint_eq(fake_sem_ids(fb, "t", b->id), 0);
}
END_TEST

/* An ACQUIRE of a semaphore never set waits (as Redisson's does), without
 * making it; a SEMINIT and its message let it go. */
START_TEST(test_sem_acquire_waits_for_seminit) {
    client_t *a = client(), *b = client();
    ck_assert_int_eq(acquire_req(a, "s", 2, 0), 0);
    fake_settle(fb);
    no_reply(a);
    ck_assert_int_eq(fake_sem_available(fb, "s"), -1);
    size_t acquires = submitted(BACKEND_ACQUIRE);
    timers_advance(tm, LOCKMGR_NO_TTL_RETRY_MS - 1);
    ck_assert_uint_eq(submitted(BACKEND_ACQUIRE), acquires);
    timers_advance(tm, 1);
    ck_assert_uint_eq(submitted(BACKEND_ACQUIRE), acquires + 1);
    fake_run(fb);
    no_reply(a);
    ck_assert_int_eq(seminit_req(b, "s", 3), 0);
    fake_run(fb);
    expect_value(b, 1);
    ck_assert_int_eq(fake_publish(fb, "s"), 1);
    fake_run(fb);
    expect_value(a, 2);
    sem_ids_are(a, "s", 2);
    sem_consistent("s", 3);
}
END_TEST

/* Closing a connection gives back all its permits and wakes the head. */
START_TEST(test_sem_owner_drop_gives_back) {
    client_t *a = client(), *b = client();
    fake_seminit(fb, "s", 5);
    acquire_ok(a, "s", 4, 0, 4);
    ck_assert_int_eq(acquire_req(b, "s", 3, 0), 0);
    fake_settle(fb);
    no_reply(b);
    drop(a);
    sem_queued(0, BACKEND_RELEASE, "s", a, 0, 4);
    sem_queued(1, BACKEND_ACQUIRE, "s", b, 0, 3);
    fake_run(fb);
    expect_value(b, 3);
    ck_assert_uint_eq(fake_sem_ids(fb, "s", a->id), 0);
    sem_ids_are(b, "s", 3);
    sem_consistent("s", 5);
    ck_assert_uint_eq(stats().locks_held, 1);
}
END_TEST

/* An owner that leaves while its ACQUIRE of more is in flight: its hold's
 * ids go behind it, and the grant it then gets is undone for exactly its
 * new ids, base+1..base+n. */
START_TEST(test_sem_owner_drop_acquire_in_flight) {
    client_t *a = client(), *b = client();
    fake_seminit(fb, "s", 10);
    acquire_ok(a, "s", 2, 0, 2);
    ck_assert_int_eq(acquire_req(a, "s", 3, 0), 0);
    sem_queued(0, BACKEND_ACQUIRE, "s", a, 2, 3);
    fake_hold(fb, 1);
    drop(a);
    ck_assert_uint_eq(fake_queued(fb), 2);
    sem_queued(1, BACKEND_RELEASE, "s", a, 0, 2);
    fake_hold(fb, 0);
    size_t mark = fake_log_len(fb);
    fake_run(fb); /* granted 1..5, then 1..2 released: the grant is undone */
    ck_assert_uint_eq(fake_queued(fb), 1);
    sem_queued(0, BACKEND_RELEASE, "s", a, 2, 3);
    fake_run(fb);
    ck_assert_uint_eq(fake_sem_ids(fb, "s", a->id), 0);
    ck_assert_int_eq(fake_sem_available(fb, "s"), 10);
    sem_consistent("s", 10);
    ck_assert_uint_eq(stats().locks_held, 0);
    fake_settle(fb);
    ck_assert_uint_eq(fake_log_count(fb, mark, BACKEND_RELEASE), 1);
    acquire_ok(b, "s", 10, 0, 10); /* every permit is back */
}
END_TEST

/* With a lease, permits end with it: !LOST expired, their ids released,
 * the head goes; no renewals. */
START_TEST(test_sem_lease_expires) {
    client_t *a = client(), *b = client();
    fake_seminit(fb, "s", 3);
    ck_assert_int_eq(acquire_req(a, "s", 2, 2000), 0);
    sem_queued(0, BACKEND_ACQUIRE, "s", a, 0, 2);
    ck_assert_uint_eq(fake_queued_op(fb, 0)->lease_ms, 2000);
    fake_run(fb);
    expect_value(a, 2);
    ck_assert_int_eq(fake_sem_id_pttl(fb, "s", a->id, 2), 2000);
    ck_assert_int_eq(acquire_req(b, "s", 2, 0), 0);
    fake_settle(fb);
    no_reply(b);
    timers_advance(tm, 1999);
    no_event(a);
    ck_assert_uint_eq(submitted(BACKEND_RENEW), 0);
    timers_advance(tm, 1);
    expect_event(a, "s", LOCK_LOST_EXPIRED);
    no_event(a);
    ck_assert_uint_eq(stats().lost, 1);
    ck_assert_uint_eq(lockmgr_owner_held(a->o), 0);
    sem_queued(0, BACKEND_RELEASE, "s", a, 0, 2);
    sem_queued(1, BACKEND_ACQUIRE, "s", b, 0, 2);
    fake_run(fb);
    expect_value(b, 2);
    ck_assert_uint_eq(fake_sem_ids(fb, "s", a->id), 0);
    sem_consistent("s", 3);
    ck_assert_int_eq(release_req(a, "s", 1), 1);
    expect_error(a, LOCK_ERR_NOTHELD);
}
END_TEST

/* The watchdog renews all of a hold's ids together: each renewal carries
 * the permits held now, after more were taken and after some went back. */
START_TEST(test_sem_watchdog_renews_permits) {
    client_t *a = client();
    fake_seminit(fb, "s", 10);
    acquire_ok(a, "s", 2, 0, 2);
    timers_advance(tm, EVERY);
    sem_queued(0, BACKEND_RENEW, "s", a, 0, 2);
    ck_assert_uint_eq(fake_queued_op(fb, 0)->lease_ms, LEASE);
    fake_run(fb);
    ck_assert_int_eq(fake_sem_id_pttl(fb, "s", a->id, 2), LEASE);
    acquire_ok(a, "s", 3, 0, 5);
    timers_advance(tm, EVERY);
    sem_queued(0, BACKEND_RENEW, "s", a, 0, 5);
    fake_run(fb);
    for (long long k = 1; k <= 5; k++) ck_assert_int_eq(fake_sem_id_pttl(fb, "s", a->id, k), LEASE);
    ck_assert_int_eq(release_req(a, "s", 4), 1);
    expect_value(a, 1);
    fake_run(fb);
    timers_advance(tm, EVERY);
    sem_queued(0, BACKEND_RENEW, "s", a, 0, 1);
    fake_run(fb);
    size_t mark = fake_log_len(fb);
    for (int step = 0; step < 40; step++) { /* 4 leases */
        run_for(300);
        no_event(a);
        sem_ids_are(a, "s", 1);
    }
    ck_assert_uint_ge(fake_log_count(fb, mark, BACKEND_RENEW), 4 * LEASE / EVERY - 1);
    for (size_t i = mark; i < fake_log_len(fb); i++)
        EXPECT(fake_log(fb, i)->kind != BACKEND_RENEW || fake_log(fb, i)->permits == 1,
               "renewal %zu of %u permits", i, fake_log(fb, i)->permits);
    sem_consistent("s", 10);
}
END_TEST

/* A renewal that finds one of the hold's ids gone: !LOST expired, and the
 * rest of its ids are given back (the head gets them). */
START_TEST(test_sem_watchdog_finds_ids_gone) {
    client_t *a = client(), *b = client();
    fake_seminit(fb, "s", 4);
    acquire_ok(a, "s", 3, 0, 3);
    ck_assert_int_eq(acquire_req(b, "s", 4, 0), 0);
    fake_settle(fb);
    no_reply(b);
    fake_sem_del_id(fb, "s", a->id, 2); /* taken from it, and given back */
    timers_advance(tm, EVERY);
    sem_queued(0, BACKEND_RENEW, "s", a, 0, 3);
    fake_run(fb);
    expect_event(a, "s", LOCK_LOST_EXPIRED);
    ck_assert_uint_eq(lockmgr_owner_held(a->o), 0);
    sem_queued(0, BACKEND_RELEASE, "s", a, 0, 3);
    sem_queued(1, BACKEND_ACQUIRE, "s", b, 0, 4);
    fake_run(fb);
    expect_value(b, 4);
    ck_assert_uint_eq(fake_sem_ids(fb, "s", a->id), 0);
    sem_consistent("s", 4);
}
END_TEST

/* An ACQUIRE of more that finds the earlier ids gone (HOLD_GONE): !LOST for
 * the old hold, its ids released, then a fresh grant of just the new ones. */
START_TEST(test_sem_hold_gone_on_more) {
    client_t *a = client();
    fake_seminit(fb, "s", 5);
    acquire_ok(a, "s", 2, 0, 2);
    fake_sem_expire_id(fb, "s", a->id, 1); /* expired in Redis, not yet taken back */
    ck_assert_int_eq(acquire_req(a, "s", 1, 0), 0);
    sem_queued(0, BACKEND_ACQUIRE, "s", a, 2, 1);
    fake_run(fb);
    expect_event(a, "s", LOCK_LOST_EXPIRED);
    no_reply(a);
    sem_queued(0, BACKEND_RELEASE, "s", a, 0, 2);
    sem_queued(1, BACKEND_ACQUIRE, "s", a, 0, 1);
    fake_run(fb);
    expect_value(a, 1);
    sem_ids_are(a, "s", 1);
    ck_assert_int_eq(fake_sem_available(fb, "s"), 4);
    sem_consistent("s", 5);
    ck_assert_uint_eq(lockmgr_owner_held(a->o), 1);
    ck_assert_uint_eq(stats().lost, 1);
}
END_TEST

/* The hold ends here (its lease) while its ACQUIRE of more is in flight,
 * and Redis, which still had the ids, grants it (sem_granted's base
 * mismatch): the new ids are given back too and it asks afresh; in the end
 * it holds exactly the new permits, ids 1..n. */
START_TEST(test_sem_hold_lost_while_acquire_in_flight) {
    client_t *a = client();
    fake_seminit(fb, "s", 10);
    ck_assert_int_eq(acquire_req(a, "s", 2, 1000), 0);
    fake_hold(fb, 1);
    timers_advance(tm, 100); /* Redis runs it late: its ids last till T0 + 1100 */
    fake_hold(fb, 0);
    fake_run(fb);
    expect_value(a, 2);
    ck_assert_int_eq(fake_sem_id_pttl(fb, "s", a->id, 1), 1000);
    timers_advance(tm, 500);
    ck_assert_int_eq(acquire_req(a, "s", 1, 1000), 0);
    sem_queued(0, BACKEND_ACQUIRE, "s", a, 2, 1);
    fake_hold(fb, 1);
    timers_advance(tm, 400); /* T0 + 1000: the lease is over here */
    expect_event(a, "s", LOCK_LOST_EXPIRED);
    ck_assert_uint_eq(fake_queued(fb), 2);
    sem_queued(1, BACKEND_RELEASE, "s", a, 0, 2);
    fake_hold(fb, 0);
    fake_run(fb); /* granted 1..3 (1..2 still there), then 1..2 released */
    no_reply(a);
    sem_queued(0, BACKEND_RELEASE, "s", a, 2, 1);
    sem_queued(1, BACKEND_ACQUIRE, "s", a, 0, 1);
    fake_run(fb);
    expect_value(a, 1);
    sem_ids_are(a, "s", 1);
    ck_assert_int_eq(fake_sem_available(fb, "s"), 9);
    sem_consistent("s", 10);
    ck_assert_uint_eq(lockmgr_owner_held(a->o), 1);
    no_event(a);
}
END_TEST

/* No answer to an attempt (it may have run): its possible grant is
 * released, ids base+1..base+n only; a waiter that already waited keeps
 * waiting and tries again when Redis is back, a TRYACQUIRE with wait 0 and
 * a first try get ERR BACKEND; a failed one (it did not run) needs no
 * release. */
START_TEST(test_sem_backend_down_on_attempt) {
    client_t *a = client(), *b = client();
    fake_seminit(fb, "s", 2);
    fake_sem_take(fb, "s", "other", 2, 1000);
    ck_assert_int_eq(acquire_req(a, "s", 1, 0), 0);
    fake_settle(fb);
    no_reply(a);
    timers_advance(tm, 1001); /* the other's ids expired: a tries, and gets one */
    sem_queued(0, BACKEND_ACQUIRE, "s", a, 0, 1);
    fake_lose_next(fb, "no reply within command_timeout_ms");
    fake_run(fb);
    no_reply(a);
    sem_queued(0, BACKEND_RELEASE, "s", a, 0, 1);
    fake_run(fb);
    ck_assert_uint_eq(fake_sem_ids(fb, "s", a->id), 0);
    sem_consistent("s", 2);
    ck_assert_uint_eq(stats().waiters, 1);
    fake_set_up(fb, 0);
    fake_set_up(fb, 1);
    fake_settle(fb);
    expect_value(a, 1);
    sem_ids_are(a, "s", 1);

    fake_seminit(fb, "t", 3);
    fake_lose_next(fb, "no reply within command_timeout_ms");
    ck_assert_int_eq(tryacquire_req(b, "t", 2, 0, 0), 0);
    fake_run(fb);
    lock_reply_t r = expect_error(b, LOCK_ERR_BACKEND);
    ck_assert_str_eq(r.detail, "no reply within command_timeout_ms");
    sem_queued(0, BACKEND_RELEASE, "t", b, 0, 2);
    fake_run(fb);
    ck_assert_uint_eq(fake_sem_ids(fb, "t", b->id), 0);
    ck_assert_int_eq(fake_sem_available(fb, "t"), 3);

    acquire_ok(b, "t", 1, 0, 1);
    fake_lose_next(fb, "no reply within command_timeout_ms");
    ck_assert_int_eq(acquire_req(b, "t", 2, 0), 0);
    fake_run(fb);
    expect_error(b, LOCK_ERR_BACKEND);
    sem_queued(0, BACKEND_RELEASE, "t", b, 1, 2); /* not its earlier id */
    fake_run(fb);
    sem_ids_are(b, "t", 1);
    ck_assert_int_eq(fake_sem_available(fb, "t"), 2);
    sem_status_is(b, "t", 2, 1);

    fake_fail_next(fb, BACKEND_FAILED, "ERR injected");
    ck_assert_int_eq(acquire_req(b, "t", 1, 0), 0);
    fake_run(fb);
    r = expect_error(b, LOCK_ERR_BACKEND);
    ck_assert_str_eq(r.detail, "ERR injected");
    ck_assert_uint_eq(fake_queued(fb), 0);
    sem_ids_are(b, "t", 1);
    sem_consistent("t", 3);

    fake_set_up(fb, 0); /* down: answered at once, nothing sent */
    size_t ops = fake_log_len(fb);
    ck_assert_int_eq(acquire_req(b, "t", 1, 0), 1);
    expect_error(b, LOCK_ERR_BACKEND);
    ck_assert_int_eq(tryacquire_req(b, "t", 1, 100, 0), 1);
    expect_error(b, LOCK_ERR_BACKEND);
    ck_assert_uint_eq(fake_log_len(fb), ops);
}
END_TEST

/* More permits join the hold with the longest of the leases asked for,
 * the watchdog counting as longer than any; the grant gives every id of
 * the hold that lease, from then on. */
START_TEST(test_sem_more_permits_lease_rule) {
    client_t *a = client(), *b = client(), *c = client();
    fake_seminit(fb, "w", 5);
    fake_seminit(fb, "l", 5);
    fake_seminit(fb, "m", 5);
    acquire_ok(a, "w", 1, 0, 1); /* watchdog, then a lease: stays watchdog */
    ck_assert_int_eq(acquire_req(a, "w", 1, 1000), 0);
    ck_assert_uint_eq(fake_queued_op(fb, 0)->lease_ms, LEASE);
    fake_run(fb);
    expect_value(a, 2);
    acquire_ok(b, "l", 1, 1000, 1); /* a lease, then a longer one: the longer, from now */
    timers_advance(tm, 500);
    ck_assert_int_eq(acquire_req(b, "l", 1, 2000), 0);
    ck_assert_uint_eq(fake_queued_op(fb, 0)->lease_ms, 2000);
    fake_run(fb);
    expect_value(b, 2);
    ck_assert_int_eq(fake_sem_id_pttl(fb, "l", b->id, 1), 2000);
    acquire_ok(c, "m", 1, 1000, 1); /* a lease, then none: a watchdog hold */
    ck_assert_int_eq(acquire_req(c, "m", 1, 0), 0);
    ck_assert_uint_eq(fake_queued_op(fb, 0)->lease_ms, LEASE);
    fake_run(fb);
    expect_value(c, 2);
    size_t mark = fake_log_len(fb);
    run_for(1990);
    no_event(a);
    no_event(b);
    no_event(c);
    run_for(10);
    expect_event(b, "l", LOCK_LOST_EXPIRED);
    run_for(2 * LEASE);
    no_event(a);
    no_event(c);
    sem_ids_are(a, "w", 2);
    sem_ids_are(c, "m", 2);
    ck_assert_uint_ge(logged_for(mark, BACKEND_RENEW, a), 4);
    ck_assert_uint_ge(logged_for(mark, BACKEND_RENEW, c), 4);
    for (size_t i = mark; i < fake_log_len(fb); i++)
        EXPECT(fake_log(fb, i)->kind != BACKEND_RENEW || fake_log(fb, i)->permits == 2,
               "renewal %zu of %u permits", i, fake_log(fb, i)->permits);
    ck_assert_uint_eq(fake_sem_ids(fb, "l", b->id), 0);
    sem_consistent("l", 5);
}
END_TEST

/* An ACQUIRE of more sets every id of the hold, the earlier ones too, to
 * the lease it asks for: without a lease, the configured one. When its
 * answer does not come (or is not acknowledged by the replicas), the
 * earlier ids may now end long before the hold's own lease: the hold must
 * not outlive them, or another connection gets permits this one still
 * believes it holds. */
START_TEST(test_sem_unanswered_more_may_shorten_lease) {
    client_t *a = client(), *b = client(), *c = client(), *d = client();
    fake_seminit(fb, "s", 2);
    fake_seminit(fb, "u", 2);
    acquire_ok(a, "s", 1, 20000, 1);
    acquire_ok(c, "u", 1, 20000, 1);
    timers_advance(tm, 1000);
    fake_lose_next(fb, "no reply within command_timeout_ms");
    ck_assert_int_eq(acquire_req(a, "s", 1, 0), 0);
    sem_queued(0, BACKEND_ACQUIRE, "s", a, 1, 1);
    ck_assert_uint_eq(fake_queued_op(fb, 0)->lease_ms, LEASE);
    fake_run(fb);
    expect_error(a, LOCK_ERR_BACKEND);
    sem_queued(0, BACKEND_RELEASE, "s", a, 1, 1); /* the undo: id 2 */
    fake_run(fb);
    fake_unack_next(fb, "replicas: acked 0 of 1");
    ck_assert_int_eq(tryacquire_req(c, "u", 1, 0, 0), 0);
    fake_run(fb);
    lock_reply_t r = expect_error(c, LOCK_ERR_BACKEND);
    ck_assert_str_eq(r.detail, "replicas: acked 0 of 1");
    sem_queued(0, BACKEND_RELEASE, "u", c, 1, 1);
    fake_settle(fb);
    sem_ids_are(a, "s", 1);
    sem_ids_are(c, "u", 1);
    ck_assert_int_eq(fake_sem_id_pttl(fb, "s", a->id, 1), LEASE); /* not 19000 any more */
    ck_assert_int_eq(fake_sem_id_pttl(fb, "u", c->id, 1), LEASE);
    timers_advance(tm, LEASE);
    ck_assert_msg(a->ehead < a->nevents && c->ehead < c->nevents,
                  "Redis let the permits go, yet the holders were not told (!LOST)");
    expect_event(a, "s", LOCK_LOST_EXPIRED);
    expect_event(c, "u", LOCK_LOST_EXPIRED);
    fake_settle(fb);
    ck_assert_int_eq(tryacquire_req(b, "s", 2, 0, 0), 0);
    ck_assert_int_eq(tryacquire_req(d, "u", 2, 0, 0), 0);
    fake_run(fb);
    expect_value(b, 2);
    expect_value(d, 2);
    ck_assert_uint_eq(lockmgr_owner_held(a->o), 0);
    ck_assert_uint_eq(lockmgr_owner_held(c->o), 0);
}
END_TEST

/* Lock requests on a semaphore held or waited for here, semaphore requests
 * on a lock held here, UNLOCK of permits and WHO of a semaphore: ERR KIND
 * at once, nothing sent, nothing changed. */
START_TEST(test_sem_kind_errors_local) {
    client_t *a = client(), *b = client(), *c = client(), *d = client(), *e = client();
    fake_seminit(fb, "s", 3);
    acquire_ok(a, "s", 1, 0, 1);
    lock_ok(c, "p", 0);
    rlock_ok(d, "r", 0);
    size_t ops = fake_log_len(fb);

    ck_assert_int_eq(lock_req(b, "s", 0), 1);
    lock_reply_t r = expect_error(b, LOCK_ERR_KIND);
    why_is(&r, LOCK_WHY_HELD_AS, LOCK_MODE_SEM);
    ck_assert_int_eq(rlock_req(b, "s", 0), 1);
    expect_error(b, LOCK_ERR_KIND);
    ck_assert_int_eq(wlock_req(b, "s", 0), 1);
    expect_error(b, LOCK_ERR_KIND);
    ck_assert_int_eq(request(b, LOCK_VERB_TRYLOCK, "s", 100, 0), 1);
    expect_error(b, LOCK_ERR_KIND);
    ck_assert_int_eq(unlock_req(a, "s"), 1);
    r = expect_error(a, LOCK_ERR_KIND);
    why_is(&r, LOCK_WHY_RELEASE_AS, LOCK_MODE_SEM);
    ck_assert_int_eq(runlock_req(a, "s"), 1);
    expect_error(a, LOCK_ERR_KIND);
    ck_assert_int_eq(request(b, LOCK_VERB_WHO, "s", 0, 0), 1);
    r = expect_error(b, LOCK_ERR_KIND);
    why_is(&r, LOCK_WHY_NO_HOLDER, LOCK_MODE_SEM);

    ck_assert_int_eq(acquire_req(b, "p", 1, 0), 1);
    r = expect_error(b, LOCK_ERR_KIND);
    why_is(&r, LOCK_WHY_HELD_AS, LOCK_MODE_MUTEX);
    ck_assert_int_eq(tryacquire_req(b, "p", 1, 0, 0), 1);
    expect_error(b, LOCK_ERR_KIND);
    ck_assert_int_eq(seminit_req(b, "p", 3), 1);
    expect_error(b, LOCK_ERR_KIND);
    ck_assert_int_eq(release_req(c, "p", 1), 1);
    r = expect_error(c, LOCK_ERR_KIND);
    why_is(&r, LOCK_WHY_RELEASE_AS, LOCK_MODE_MUTEX);
    ck_assert_int_eq(acquire_req(b, "r", 1, 0), 1);
    r = expect_error(b, LOCK_ERR_KIND);
    why_is(&r, LOCK_WHY_HELD_AS, LOCK_MODE_READ);
    ck_assert_uint_eq(fake_log_len(fb), ops);
    ck_assert_uint_eq(stats().waiters, 0);
    sem_ids_are(a, "s", 1);
    ck_assert_uint_eq(lockmgr_owner_held(a->o), 1);
    ck_assert_int_eq(fake_holds(fb, c->id, "p"), 1);
    ck_assert_uint_eq(lockmgr_owner_held(c->o), 1);

    /* Waited for only: a semaphore never set. */
    ck_assert_int_eq(acquire_req(b, "w", 1, 0), 0);
    fake_settle(fb);
    ops = fake_log_len(fb);
    ck_assert_int_eq(lock_req(e, "w", 0), 1);
    r = expect_error(e, LOCK_ERR_KIND);
    why_is(&r, LOCK_WHY_HELD_AS, LOCK_MODE_SEM);
    ck_assert_int_eq(rlock_req(e, "w", 0), 1);
    expect_error(e, LOCK_ERR_KIND);
    ck_assert_uint_eq(fake_log_len(fb), ops);
    no_reply(b);
    ck_assert_uint_eq(stats().waiters, 1);
}
END_TEST

/* The kinds differ in Redis only: WRONG_KIND from the scripts is ERR KIND,
 * the waiter gone (no watch, no retry, no release); a semaphore of another
 * daemon answers WHO with ERR KIND and STATUS with its permits. */
START_TEST(test_sem_wrong_kind_in_redis) {
    client_t *a = client(), *b = client();
    fake_take(fb, "z", "other", 5000);
    ck_assert_int_eq(acquire_req(a, "z", 1, 0), 0);
    sem_queued(0, BACKEND_ACQUIRE, "z", a, 0, 1);
    fake_run(fb);
    lock_reply_t r = expect_error(a, LOCK_ERR_KIND);
    why_is(&r, LOCK_WHY_HELD_AS, LOCK_MODE_MUTEX);
    ck_assert_uint_eq(stats().waiters, 0);
    ck_assert_uint_eq(fake_queued(fb), 0);
    ck_assert_uint_eq(fake_watch_calls(fb, "z"), 0);
    ck_assert_int_eq(fake_holds_field(fb, "other", "z"), 1);
    ck_assert_int_eq(fake_sem_available(fb, "z"), -1);

    fake_take_rw(fb, "y", "other", BACKEND_WRITE, 5000);
    ck_assert_int_eq(tryacquire_req(a, "y", 1, 1000, 0), 0);
    fake_run(fb);
    r = expect_error(a, LOCK_ERR_KIND);
    why_is(&r, LOCK_WHY_HELD_AS, LOCK_MODE_READ);
    timers_advance(tm, 1000);
    fake_settle(fb);
    no_reply(a);
    ck_assert_uint_eq(stats().timeouts, 0);

    fake_seminit(fb, "q", 2);
    ck_assert_int_eq(lock_req(b, "q", 0), 0);
    fake_run(fb);
    r = expect_error(b, LOCK_ERR_KIND);
    why_is(&r, LOCK_WHY_HELD_AS, LOCK_MODE_SEM);
    ck_assert_int_eq(rlock_req(b, "q", 0), 0);
    fake_run(fb);
    expect_error(b, LOCK_ERR_KIND);
    ck_assert_int_eq(request_mode(b, LOCK_VERB_TRYLOCK, LOCK_MODE_WRITE, "q", 0, 0), 0);
    fake_run(fb);
    expect_error(b, LOCK_ERR_KIND);
    ck_assert_int_eq(request(b, LOCK_VERB_WHO, "q", 0, 0), 0);
    fake_run(fb);
    r = expect_error(b, LOCK_ERR_KIND);
    why_is(&r, LOCK_WHY_NO_HOLDER, LOCK_MODE_SEM);
    sem_status_is(b, "q", 2, 0);
    fake_settle(fb);
    ck_assert_int_eq(fake_sem_available(fb, "q"), 2);
    ck_assert_uint_eq(fake_sem_card(fb, "q"), 0);
    ck_assert_uint_eq(submitted(BACKEND_RELEASE), 0);
    ck_assert_uint_eq(stats().waiters, 0);
    ck_assert_uint_eq(stats().locks_held, 0);
}
END_TEST

/* Permits 0 or above LOCKMGR_SEM_PERMITS_MAX: ERR ARGS before Redis; more
 * than that many held at once: ERR LIMIT; exactly that many is fine. */
START_TEST(test_sem_permits_bounds) {
    enum { MAX = LOCKMGR_SEM_PERMITS_MAX };
    client_t *a = client();
    fake_seminit(fb, "s", MAX + 5);
    ck_assert_int_eq(acquire_req(a, "s", 0, 0), 1);
    lock_reply_t r = expect_error(a, LOCK_ERR_ARGS);
    why_is(&r, LOCK_WHY_PERMITS_RANGE, -1);
    ck_assert_int_eq(r.limit, 10000);
    ck_assert_int_eq(tryacquire_req(a, "s", 0, 100, 0), 1);
    expect_error(a, LOCK_ERR_ARGS);
    ck_assert_int_eq(acquire_req(a, "s", MAX + 1, 0), 1);
    expect_error(a, LOCK_ERR_ARGS);
    ck_assert_int_eq(tryacquire_req(a, "s", MAX + 1, 0, 0), 1);
    expect_error(a, LOCK_ERR_ARGS);
    ck_assert_int_eq(release_req(a, "s", 0), 1);
    expect_error(a, LOCK_ERR_ARGS);
    ck_assert_int_eq(release_req(a, "s", MAX + 1), 1);
    expect_error(a, LOCK_ERR_ARGS);
    ck_assert_uint_eq(fake_log_len(fb), 0);
    ck_assert_uint_eq(stats().waiters, 0);

    acquire_ok(a, "s", 1, 0, 1);
    size_t ops = fake_log_len(fb);
    ck_assert_int_eq(acquire_req(a, "s", MAX, 0), 1);
    r = expect_error(a, LOCK_ERR_LIMIT);
    why_is(&r, LOCK_WHY_PERMITS_MAX, -1);
    ck_assert_int_eq(r.limit, 10000);
    ck_assert_uint_eq(fake_log_len(fb), ops);
    acquire_ok(a, "s", MAX - 1, 0, MAX);
    ck_assert_int_eq(fake_sem_available(fb, "s"), 5);
    ck_assert_int_eq(release_req(a, "s", MAX), 1);
    expect_value(a, 0);
    fake_run(fb);
    ck_assert_int_eq(fake_sem_available(fb, "s"), MAX + 5);
    sem_consistent("s", MAX + 5);
}
END_TEST

/* A topology without BACKEND_CAP_ONE_COPY (the quorum): ERR KIND, nothing sent. */
START_TEST(test_sem_needs_backend_cap) {
    client_t *a = client();
    fake_set_caps(fb, fake_backend(fb)->caps & ~BACKEND_CAP_ONE_COPY);
    ck_assert_int_eq(acquire_req(a, "c", 1, 0), 1);
    lock_reply_t r = expect_error(a, LOCK_ERR_KIND);
    why_is(&r, LOCK_WHY_UNSUPPORTED, LOCK_MODE_SEM);
    ck_assert_str_eq(r.detail, "fake");
    ck_assert_int_eq(tryacquire_req(a, "c", 1, 0, 0), 1);
    expect_error(a, LOCK_ERR_KIND);
    ck_assert_int_eq(tryacquire_req(a, "c", 1, 100, 0), 1);
    expect_error(a, LOCK_ERR_KIND);
    ck_assert_int_eq(seminit_req(a, "c", 3), 1);
    expect_error(a, LOCK_ERR_KIND);
    ck_assert_uint_eq(fake_log_len(fb), 0);
    ck_assert_uint_eq(stats().waiters, 0);
    lock_ok(a, "c", 0); /* locks still work */
}
END_TEST

/* Shutdown gives back every hold's ids, and undoes an acquire of more in
 * flight for exactly its new ids. */
START_TEST(test_sem_shutdown_releases) {
    client_t *a = client(), *b = client(), *c = client();
    fake_seminit(fb, "s", 10);
    acquire_ok(a, "s", 2, 0, 2);
    acquire_ok(b, "s", 3, 5000, 3);
    acquire_ok(c, "s", 1, 0, 1);
    ck_assert_int_eq(acquire_req(c, "s", 2, 0), 0);
    sem_queued(0, BACKEND_ACQUIRE, "s", c, 1, 2);
    size_t mark = fake_log_len(fb);
    shutdown_now();
    ck_assert_int_eq(done_calls, 0);
    ck_assert_uint_eq(stats().locks_held, 0);
    ck_assert_uint_eq(fake_queued(fb), 4);
    const client_t *who[3] = {a, b, c};
    const uint32_t held[3] = {2, 3, 1};
    for (int k = 0; k < 3; k++) {
        int found = 0;
        for (size_t i = 1; i < 4; i++) {
            const backend_op_t *op = fake_queued_op(fb, i);
            if (op->owner == who[k]->id) {
                sem_queued(i, BACKEND_RELEASE, "s", who[k], 0, held[k]);
                found++;
            }
        }
        ck_assert_int_eq(found, 1);
    }
    fake_run(fb); /* c's grant: undone, ids 2..3 */
    expect_error(c, LOCK_ERR_BACKEND);
    sem_queued(0, BACKEND_RELEASE, "s", c, 1, 2);
    fake_run(fb);
    ck_assert_int_eq(done_calls, 0);
    timers_run_due(tm);
    ck_assert_int_eq(done_calls, 1);
    ck_assert_uint_eq(fake_log_count(fb, mark, BACKEND_RELEASE), 4);
    ck_assert_uint_eq(fake_sem_card(fb, "s"), 0);
    ck_assert_int_eq(fake_sem_available(fb, "s"), 10);
    no_event(a);
    no_event(b);
    no_event(c);
    timers_advance(tm, 10 * LEASE);
    fake_settle(fb);
    ck_assert_uint_eq(submitted(BACKEND_RENEW), 0);
    no_event(b);
}
END_TEST

/* FORCEUNLOCK of a semaphore gives every permit back: OK 1, this daemon's
 * holders hear !LOST forced; then OK 0. */
START_TEST(test_sem_force) {
    client_t *root = client_uid(0), *a = client(), *b = client();
    fake_seminit(fb, "s", 5);
    acquire_ok(a, "s", 2, 0, 2);
    acquire_ok(b, "s", 1, 2000, 1);
    fake_sem_take(fb, "s", "other", 1, -1); /* a Redisson holder, no expiry */
    ck_assert_int_eq(request(root, LOCK_VERB_FORCE, "s", 0, 0), 0);
    fake_run(fb);
    expect_value(root, 1);
    expect_event(a, "s", LOCK_LOST_FORCED);
    expect_event(b, "s", LOCK_LOST_FORCED);
    ck_assert_uint_eq(fake_sem_card(fb, "s"), 0);
    ck_assert_int_eq(fake_sem_available(fb, "s"), 5);
    ck_assert_uint_eq(stats().locks_held, 0);
    ck_assert_int_eq(request(root, LOCK_VERB_FORCE, "s", 0, 0), 0);
    fake_run(fb);
    expect_value(root, 0);
    ck_assert_int_eq(release_req(a, "s", 1), 1);
    expect_error(a, LOCK_ERR_NOTHELD);
    timers_advance(tm, 5000); /* b's lease timer went with its hold */
    fake_settle(fb);
    no_event(a);
    no_event(b);
    acquire_ok(a, "s", 5, 0, 5);
    sem_consistent("s", 5);
}
END_TEST

/* RENEW of a semaphore hold with a lease resets all of its ids; when one
 * is gone, the holder hears !LOST, and, as the protocol says, every permit
 * it held is gone: the rest of its ids are given back, not left to their
 * lease. */
START_TEST(test_sem_renew_request) {
    client_t *a = client(), *b = client();
    fake_seminit(fb, "s", 4);
    acquire_ok(a, "s", 2, 2000, 2);
    timers_advance(tm, 1500);
    ck_assert_int_eq(request(a, LOCK_VERB_RENEW, "s", 0, 5000), 0);
    sem_queued(0, BACKEND_RENEW, "s", a, 0, 2);
    ck_assert_uint_eq(fake_queued_op(fb, 0)->lease_ms, 5000);
    fake_run(fb);
    expect_value(a, 5000);
    ck_assert_int_eq(fake_sem_id_pttl(fb, "s", a->id, 1), 5000);
    ck_assert_int_eq(fake_sem_id_pttl(fb, "s", a->id, 2), 5000);
    timers_advance(tm, 4000);
    no_event(a);
    fake_sem_del_id(fb, "s", a->id, 1);
    ck_assert_int_eq(request(a, LOCK_VERB_RENEW, "s", 0, 0), 0);
    fake_run(fb);
    expect_event(a, "s", LOCK_LOST_EXPIRED);
    expect_error(a, LOCK_ERR_NOTHELD);
    fake_settle(fb);
    ck_assert_msg(fake_sem_ids(fb, "s", a->id) == 0,
                  "after !LOST, %zu of the holder's ids are still taken in Redis",
                  fake_sem_ids(fb, "s", a->id));
    ck_assert_int_eq(tryacquire_req(b, "s", 4, 0, 0), 0);
    fake_run(fb);
    expect_value(b, 4);
    sem_consistent("s", 4);
}
END_TEST

/* A RELEASE whose call did not run waits for Redis; the same connection
 * takes fewer permits again meanwhile. Its grant makes the queued release
 * stale for the ids it covers again, not for the others: those must still
 * be given back, or the semaphore is short of them until their lease ends. */
START_TEST(test_sem_queued_release_after_new_grant) {
    client_t *a = client();
    fake_seminit(fb, "s", 10);
    acquire_ok(a, "s", 5, 0, 5);
    ck_assert_int_eq(release_req(a, "s", 5), 1);
    expect_value(a, 0);
    fake_fail_next(fb, BACKEND_DOWN, "connection reset"); /* not run: queued for a retry */
    fake_run(fb);
    ck_assert_uint_eq(fake_sem_ids(fb, "s", a->id), 5);
    ck_assert_int_eq(acquire_req(a, "s", 2, 0), 0);
    sem_queued(0, BACKEND_ACQUIRE, "s", a, 0, 2);
    fake_run(fb);
    expect_value(a, 2);
    fake_set_up(fb, 0); /* Redis comes back: queued releases go */
    fake_set_up(fb, 1);
    fake_settle(fb);
    sem_ids_are(a, "s", 2);
    ck_assert_int_eq(fake_sem_available(fb, "s"), 8);
    sem_consistent("s", 10);
}
END_TEST

/* A waiter behind another daemon's permits goes on their release message. */
START_TEST(test_sem_woken_by_publish) {
    client_t *a = client();
    fake_seminit(fb, "s", 2);
    fake_sem_take(fb, "s", "other", 2, -1); /* no expiry: only a release ends them */
    ck_assert_int_eq(acquire_req(a, "s", 1, 0), 0);
    fake_settle(fb);
    no_reply(a);
    ck_assert_int_eq(fake_watch_mode(fb, "s"), BACKEND_SEM);
    fake_sem_release_field(fb, "s", "other");
    ck_assert_int_eq(fake_publish(fb, "s"), 1);
    fake_run(fb);
    expect_value(a, 1);
    ck_assert(!fake_watched(fb, "s"));
    sem_consistent("s", 2);
}
END_TEST

/* Waiters behind the head try at once, in order, while the permits Redis
 * said were free after this daemon's last grant cover them and those
 * ahead (semaphore.c, sem_kick): one round trip each in a row would hold
 * the next back for nothing. One that does not fit waits its turn at the
 * head. */
START_TEST(test_sem_followers_try_with_the_head) {
    client_t *a = client(), *b = client(), *c = client(), *d = client();
    fake_seminit(fb, "s", 10);
    acquire_ok(a, "s", 2, 0, 2); /* Redis: 8 free after it */
    ck_assert_int_eq(acquire_req(b, "s", 3, 0), 0);
    ck_assert_int_eq(acquire_req(c, "s", 2, 0), 0);
    ck_assert_int_eq(acquire_req(d, "s", 4, 0), 0); /* 3 + 2 + 4 > 8: not yet */
    ck_assert_uint_eq(fake_queued(fb), 2);
    sem_queued(0, BACKEND_ACQUIRE, "s", b, 0, 3);
    sem_queued(1, BACKEND_ACQUIRE, "s", c, 0, 2);
    fake_run(fb);
    expect_value(b, 3);
    expect_value(c, 2);
    no_reply(d);
    sem_queued(0, BACKEND_ACQUIRE, "s", d, 0, 4); /* now the head: it tries, 3 free */
    ck_assert_uint_eq(fake_queued(fb), 1);
    fake_settle(fb);
    no_reply(d);
    ck_assert_int_eq(release_req(a, "s", 2), 1);
    expect_value(a, 0);
    fake_settle(fb);
    expect_value(d, 4);
    ck_assert_uint_eq(fake_stats(fb)->max_inflight_kind[BACKEND_ACQUIRE], 2);
    sem_ids_are(b, "s", 3);
    sem_ids_are(c, "s", 2);
    sem_ids_are(d, "s", 4);
    ck_assert_int_eq(fake_sem_available(fb, "s"), 1);
    sem_consistent("s", 10);
}
END_TEST

/* Waiters behind the head try together with it while the permits known
 * free cover them (semaphore.c, sem_kick); a refusal closes that window:
 * "a refused head keeps everyone behind it waiting from then on". A
 * release message that comes while the head and a follower are both in
 * flight may earn the head one more try, but must neither let the
 * follower go on trying (and overtake the refused head) nor keep them
 * retrying without end. */
START_TEST(test_sem_refused_head_holds_back_followers) {
    client_t *a = client(), *h = client(), *w = client();
    fake_seminit(fb, "s", 10);
    acquire_ok(a, "s", 5, 0, 5);
    fake_sem_take(fb, "s", "f1", 3, -1);
    fake_sem_take(fb, "s", "f2", 2, -1); /* none free now */
    ck_assert_int_eq(acquire_req(h, "s", 3, 0), 0);
    fake_settle(fb); /* refused: h watches the channel */
    ck_assert_int_eq(acquire_req(w, "s", 2, 0), 0);
    fake_settle(fb);
    no_reply(h);
    no_reply(w);
    ck_assert(fake_watched(fb, "s"));

    ck_assert_int_eq(release_req(a, "s", 5), 1);
    expect_value(a, 0);
    /* 5 given back: the head and the one behind it try at once */
    ck_assert_uint_eq(fake_queued(fb), 3);
    sem_queued(0, BACKEND_RELEASE, "s", a, 0, 5);
    sem_queued(1, BACKEND_ACQUIRE, "s", h, 0, 3);
    sem_queued(2, BACKEND_ACQUIRE, "s", w, 0, 2);
    fake_run_one(fb); /* the release runs; another daemon takes 4 of the 5 */
    fake_sem_take(fb, "s", "f3", 3, -1);
    fake_sem_take(fb, "s", "f4", 1, -1);
    ck_assert_int_eq(fake_publish(fb, "s"), 1); /* a message while both are in flight */
    fake_run(fb);                               /* both refused: 1 free */
    no_reply(h);
    no_reply(w);
    size_t mark = fake_log_len(fb);
    for (int i = 0; i < 5; i++) fake_run(fb);
    ck_assert_msg(logged_for(mark, BACKEND_ACQUIRE, w) == 0 &&
                      logged_for(mark, BACKEND_ACQUIRE, h) <= 1,
                  "after both were refused: %zu more tries of the head, %zu of the one behind",
                  logged_for(mark, BACKEND_ACQUIRE, h), logged_for(mark, BACKEND_ACQUIRE, w));
    fake_sem_release_field(fb, "s", "f4"); /* 2 free: enough for w, not for h */
    fake_settle(fb);
    no_reply(w); /* behind the refused head */
    no_reply(h);
    fake_sem_release_field(fb, "s", "f3");
    ck_assert_int_eq(fake_publish(fb, "s"), 1);
    fake_settle(fb);
    expect_value(h, 3);
    expect_value(w, 2);
    sem_consistent("s", 10);
}
END_TEST

/* ---- the suite --------------------------------------------------------------- */

static Suite *lockmgr_sem_suite(void) {
    Suite *s = suite_create("lockmgr_sem");
    TCase *tc;

#define TC(name) \
    tc = tcase_create(name); \
    tcase_add_checked_fixture(tc, setup, teardown); \
    suite_add_tcase(s, tc)

    TC("semaphore");
    tcase_add_test(tc, test_sem_seminit);
    tcase_add_test(tc, test_sem_grant_and_status);
    tcase_add_test(tc, test_sem_more_permits_extend);
    tcase_add_test(tc, test_sem_more_permits_lease_rule);
    tcase_add_test(tc, test_sem_release_top_ids);
    tcase_add_test(tc, test_sem_release_more_than_held);
    tcase_add_test(tc, test_sem_fifo_large_head);
    tcase_add_test(tc, test_sem_followers_try_with_the_head);
    tcase_add_test(tc, test_sem_tryacquire_zero);
    tcase_add_test(tc, test_sem_tryacquire_wait_times_out);
    tcase_add_test(tc, test_sem_acquire_waits_for_seminit);
    tcase_add_test(tc, test_sem_owner_drop_gives_back);
    tcase_add_test(tc, test_sem_owner_drop_acquire_in_flight);
    tcase_add_test(tc, test_sem_lease_expires);
    tcase_add_test(tc, test_sem_watchdog_renews_permits);
    tcase_add_test(tc, test_sem_watchdog_finds_ids_gone);
    tcase_add_test(tc, test_sem_hold_gone_on_more);
    tcase_add_test(tc, test_sem_hold_lost_while_acquire_in_flight);
    tcase_add_test(tc, test_sem_backend_down_on_attempt);
    tcase_add_test(tc, test_sem_unanswered_more_may_shorten_lease);
    tcase_add_test(tc, test_sem_kind_errors_local);
    tcase_add_test(tc, test_sem_wrong_kind_in_redis);
    tcase_add_test(tc, test_sem_permits_bounds);
    tcase_add_test(tc, test_sem_needs_backend_cap);
    tcase_add_test(tc, test_sem_shutdown_releases);
    tcase_add_test(tc, test_sem_force);
    tcase_add_test(tc, test_sem_renew_request);
    tcase_add_test(tc, test_sem_queued_release_after_new_grant);
    tcase_add_test(tc, test_sem_woken_by_publish);
    tcase_add_test(tc, test_sem_refused_head_holds_back_followers);
#undef TC
    return s;
}

int main(void) {
    return lockmgr_test_run(lockmgr_sem_suite());
}
