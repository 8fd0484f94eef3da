/* Unit tests of daemon/lock's read/write locks on a fake backend.
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

/* ---- read/write locks ---------------------------------------------------------
 * RLOCK, WLOCK, RUNLOCK, WUNLOCK (and TRYRLOCK, TRYWLOCK) are LOCK, TRYLOCK
 * and UNLOCK of mode READ or WRITE; every backend op of theirs carries that
 * mode, and the fake answers it as script_rw would (fake_backend.h). */

/* c's field in the fake's lock hash (a reader's; a writer's adds ":write"). */
static const char *field_of(const client_t *c) {
    static char buf[4][32];
    static unsigned k;
    char *f = buf[k++ % 4];
    snprintf(f, sizeof(buf[0]), "o%" PRIu64, c->id);
    return f;
}

/* Entry i of the op log is kind of mode on name for c. */
static void logged_is(size_t i, backend_op_type_t kind, backend_mode_t mode, const char *name,
                      const client_t *c) {
    const fake_rec_t *r = fake_log(fb, i);
    ck_assert_int_eq(r->kind, kind);
    ck_assert_int_eq(r->mode, mode);
    ck_assert_str_eq(r->name, name);
    if (c != NULL) ck_assert_uint_eq(r->owner, c->id);
}

static void expect_rw(client_t *c, lock_mode_t mode, long long holders, long long holds,
                      long long ttl) {
    lock_reply_t r = next_reply(c);
    ck_assert_msg(r.type == LOCK_REPLY_RW, "client %" PRIu64 ": %s (%s), want RW", c->id,
                  reply_type_name(r.type), r.detail ? r.detail : "");
    ck_assert_int_eq(r.mode, mode);
    ck_assert_int_eq(r.holders, holders);
    ck_assert_int_eq(r.holds, holds);
    ck_assert_int_eq(r.ttl_ms, ttl);
}

/* Readers share: one READ acquire each, both granted at once with the
 * counter as it is; a writer waits, without a try, until both RUNLOCK,
 * then gets a higher fence. */
/* A one-try TRYRLOCK shares with readers whose acquires are in flight:
 * only readers wait, so it goes ahead of no one it could not share with.
 * Behind a waiting writer it still answers TIMEOUT without trying. */
START_TEST(test_rw_tryrlock_shares_with_readers_in_flight) {
    client_t *a = client(), *t = client(), *w = client(), *u = client();

    ck_assert_int_eq(rlock_req(a, "rq", 0), 0);
    ck_assert_int_eq(request_mode(t, LOCK_VERB_TRYLOCK, LOCK_MODE_READ, "rq", 0, 0), 0);
    ck_assert_uint_eq(fake_queued(fb), 2);
    queued_mode_is(1, BACKEND_ACQUIRE, BACKEND_READ, "rq", t);
    fake_settle(fb);
    uint64_t fa = expect_granted(a, 1);
    ck_assert_uint_eq(expect_granted(t, 1), fa);

    fake_take_rw(fb, "rq2", "foreign:1", BACKEND_WRITE, 5000);
    ck_assert_int_eq(wlock_req(w, "rq2", 0), 0);
    fake_settle(fb);
    no_reply(w);
    size_t mark = fake_log_len(fb);
    ck_assert_int_eq(request_mode(u, LOCK_VERB_TRYLOCK, LOCK_MODE_READ, "rq2", 0, 0), 1);
    expect_timeout(u, -1);
    ck_assert_uint_eq(fake_queued(fb), 0);
    ck_assert_uint_eq(fake_log_len(fb), mark);
}
END_TEST

/* Read and write holds count against max_locks_per_client, a downgrade's
 * second hold of one name too; refused at once, with no op sent. */
START_TEST(test_rw_limit_locks_per_client) {
    client_t *a = client();
    conf.max_locks_per_client = 2;
    rlock_ok(a, "r1", 0);
    wlock_ok(a, "w1", 0);
    size_t ops = fake_log_len(fb);
    ck_assert_int_eq(rlock_req(a, "r2", 0), 1);
    expect_error(a, LOCK_ERR_LIMIT);
    ck_assert_int_eq(rlock_req(a, "w1", 0), 1); /* a downgrade: a third hold */
    lock_reply_t r = expect_error(a, LOCK_ERR_LIMIT);
    why_is(&r, LOCK_WHY_MAX_LOCKS, -1);
    ck_assert_uint_eq(fake_log_len(fb), ops);
    /* A reentry is not a new hold. */
    ck_assert_int_eq(rlock_req(a, "r1", 0), 0);
    fake_settle(fb);
    expect_granted(a, 2);
}
END_TEST

START_TEST(test_rw_readers_share_writer_waits) {
    client_t *a = client(), *b = client(), *w = client();

    ck_assert_int_eq(rlock_req(a, "rw", 0), 0);
    ck_assert_int_eq(rlock_req(b, "rw", 0), 0);
    ck_assert_uint_eq(fake_queued(fb), 2); /* readers at the head try together */
    queued_mode_is(0, BACKEND_ACQUIRE, BACKEND_READ, "rw", a);
    queued_mode_is(1, BACKEND_ACQUIRE, BACKEND_READ, "rw", b);
    ck_assert_uint_eq(fake_queued_op(fb, 0)->lease_ms, LEASE);
    ck_assert_uint_eq(fake_run(fb), 2);
    uint64_t fa = expect_granted(a, 1), fbb = expect_granted(b, 1);
    ck_assert_uint_eq(fa, 0); /* not raised: the counter as it is, none yet */
    ck_assert_uint_eq(fa, fake_fence(fb, "rw"));
    ck_assert_uint_eq(fbb, fa);
    ck_assert_int_eq(fake_mode(fb, "rw"), BACKEND_READ);
    ck_assert_int_eq(fake_readers(fb, "rw"), 2);
    ck_assert_int_eq(fake_holds_mode(fb, a->id, "rw", BACKEND_READ), 1);
    ck_assert_int_eq(fake_holds_mode(fb, b->id, "rw", BACKEND_READ), 1);
    ck_assert_uint_eq(fake_log_len(fb), 2);
    ck_assert_uint_eq(fake_log_count_mode(fb, 0, BACKEND_ACQUIRE, BACKEND_READ), 2);
    ck_assert_uint_eq(stats().locks_held, 2);
    ck_assert_uint_eq(stats().grants, 2);
    ck_assert_uint_eq(lockmgr_owner_held(a->o), 1);

    size_t mark = fake_log_len(fb);
    ck_assert_int_eq(wlock_req(w, "rw", 0), 0);
    ck_assert_uint_eq(fake_queued(fb), 0); /* local readers: no try */
    ck_assert_uint_eq(stats().waiters, 1);
    ck_assert_int_eq(runlock_req(a, "rw"), 1);
    expect_value(a, 0);
    ck_assert_uint_eq(fake_queued(fb), 1); /* a's release only: b still reads */
    queued_mode_is(0, BACKEND_RELEASE, BACKEND_READ, "rw", a);
    fake_settle(fb);
    no_reply(w);
    ck_assert_int_eq(fake_readers(fb, "rw"), 1);
    ck_assert_int_eq(fake_holds_mode(fb, a->id, "rw", BACKEND_READ), 0);

    ck_assert_int_eq(runlock_req(b, "rw"), 1);
    expect_value(b, 0);
    ck_assert_uint_eq(fake_queued(fb), 2);
    queued_mode_is(0, BACKEND_RELEASE, BACKEND_READ, "rw", b);
    queued_mode_is(1, BACKEND_ACQUIRE, BACKEND_WRITE, "rw", w);
    fake_run(fb);
    uint64_t fw = expect_granted(w, 1);
    ck_assert_uint_gt(fw, fa);
    ck_assert_uint_eq(fw, fake_fence(fb, "rw"));
    ck_assert_int_eq(fake_mode(fb, "rw"), BACKEND_WRITE);
    ck_assert_int_eq(fake_holds_mode(fb, w->id, "rw", BACKEND_WRITE), 1);
    ck_assert_uint_eq(fake_log_len(fb), mark + 3);
    logged_is(mark, BACKEND_RELEASE, BACKEND_READ, "rw", a);
    logged_is(mark + 1, BACKEND_RELEASE, BACKEND_READ, "rw", b);
    logged_is(mark + 2, BACKEND_ACQUIRE, BACKEND_WRITE, "rw", w);
    ck_assert_uint_eq(stats().waiters, 0);
    ck_assert_uint_eq(stats().grants, 3);
    ck_assert_uint_eq(fake_watch_calls(fb, "rw"), 0);
}
END_TEST

/* FIFO: a reader that comes after a waiting writer waits behind it, with
 * no acquire sent, though it could share the current reader's lock; a
 * one-try TRYRLOCK does not jump the queue either. The writer goes first. */
START_TEST(test_rw_reader_waits_behind_writer) {
    client_t *a = client(), *w = client(), *r = client(), *t = client();
    uint64_t fa = rlock_ok(a, "q", 0);
    size_t acquires = submitted(BACKEND_ACQUIRE);

    ck_assert_int_eq(wlock_req(w, "q", 0), 0);
    ck_assert_int_eq(rlock_req(r, "q", 0), 0);
    ck_assert_uint_eq(fake_queued(fb), 0);
    ck_assert_uint_eq(stats().waiters, 2);
    ck_assert_int_eq(request_mode(t, LOCK_VERB_TRYLOCK, LOCK_MODE_READ, "q", 0, 0), 1);
    expect_timeout(t, LEASE); /* the local holder's lease */
    fake_settle(fb);
    timers_advance(tm, 100);
    fake_settle(fb);
    ck_assert_uint_eq(submitted(BACKEND_ACQUIRE), acquires);
    no_reply(w);
    no_reply(r);

    ck_assert_int_eq(runlock_req(a, "q"), 1);
    expect_value(a, 0);
    ck_assert_uint_eq(fake_queued(fb), 2); /* the writer's try; not the reader's */
    queued_mode_is(0, BACKEND_RELEASE, BACKEND_READ, "q", a);
    queued_mode_is(1, BACKEND_ACQUIRE, BACKEND_WRITE, "q", w);
    fake_run(fb);
    uint64_t fw = expect_granted(w, 1);
    ck_assert_uint_gt(fw, fa);
    no_reply(r);
    ck_assert_uint_eq(fake_queued(fb), 0);
    fake_settle(fb);
    ck_assert_uint_eq(submitted(BACKEND_ACQUIRE), acquires + 1);
    ck_assert_uint_eq(stats().waiters, 1);

    ck_assert_int_eq(wunlock_req(w, "q"), 1);
    expect_value(w, 0);
    ck_assert_uint_eq(fake_queued(fb), 2);
    queued_mode_is(0, BACKEND_RELEASE, BACKEND_WRITE, "q", w);
    queued_mode_is(1, BACKEND_ACQUIRE, BACKEND_READ, "q", r);
    fake_run(fb);
    ck_assert_uint_eq(expect_granted(r, 1), fw); /* the counter as the write left it */
    ck_assert_int_eq(fake_mode(fb, "q"), BACKEND_READ);
    ck_assert_uint_eq(stats().waiters, 0);
}
END_TEST

/* FIFO across daemons: the writer waits for a foreign reader (Redis says
 * TAKEN); a local reader behind it, which Redis would let share, sends
 * nothing while the writer waits, through wake-ups and retries. */
START_TEST(test_rw_reader_behind_parked_writer) {
    client_t *w = client(), *r = client();
    fake_take_rw(fb, "x", "other", BACKEND_READ, 2000);

    ck_assert_int_eq(wlock_req(w, "x", 0), 0);
    fake_run(fb); /* TAKEN: w watches the name's read/write channel */
    ck_assert(fake_watched(fb, "x"));
    ck_assert_int_eq(fake_watch_mode(fb, "x"), BACKEND_READ);
    ck_assert_int_eq(rlock_req(r, "x", 0), 0);
    fake_settle(fb);
    ck_assert_int_eq(fake_publish(fb, "x"), 1); /* a wake-up: w tries, r does not */
    fake_settle(fb);
    timers_advance(tm, 1000);
    fake_settle(fb);
    no_reply(w);
    no_reply(r);
    for (size_t i = 0; i < fake_log_len(fb); i++)
        logged_is(i, BACKEND_ACQUIRE, BACKEND_WRITE, "x", w);
    ck_assert_uint_ge(fake_log_len(fb), 3);

    timers_advance(tm, 1001); /* the foreign reader's lease is over */
    fake_settle(fb);
    expect_granted(w, 1);
    no_reply(r);
    ck_assert_uint_eq(fake_log_count_mode(fb, 0, BACKEND_ACQUIRE, BACKEND_READ), 0);
    ck_assert_int_eq(wunlock_req(w, "x"), 1);
    expect_value(w, 0);
    fake_settle(fb);
    expect_granted(r, 1);
    ck_assert(!fake_watched(fb, "x"));
}
END_TEST

/* Readers queued behind a writer all go when it releases: one acquire
 * each, all in flight together, all granted; a writer behind them waits
 * for the last RUNLOCK. */
START_TEST(test_rw_readers_behind_writer_all_granted) {
    client_t *w = client(), *r[4] = {client(), client(), client(), client()}, *w2 = client();
    uint64_t fw = wlock_ok(w, "m", 0);
    for (int i = 0; i < 4; i++) ck_assert_int_eq(rlock_req(r[i], "m", 0), 0);
    ck_assert_int_eq(wlock_req(w2, "m", 0), 0);
    ck_assert_uint_eq(fake_queued(fb), 0);
    ck_assert_uint_eq(stats().waiters, 5);

    ck_assert_int_eq(wunlock_req(w, "m"), 1);
    expect_value(w, 0);
    ck_assert_uint_eq(fake_queued(fb), 5);
    queued_mode_is(0, BACKEND_RELEASE, BACKEND_WRITE, "m", w);
    for (size_t i = 0; i < 4; i++)
        queued_mode_is(1 + i, BACKEND_ACQUIRE, BACKEND_READ, "m", r[i]);
    fake_settle(fb);
    for (int i = 0; i < 4; i++) ck_assert_uint_eq(expect_granted(r[i], 1), fw);
    no_reply(w2);
    ck_assert_int_eq(fake_readers(fb, "m"), 4);
    ck_assert_uint_eq(fake_stats(fb)->max_inflight_kind[BACKEND_ACQUIRE], 4);
    ck_assert_uint_eq(stats().locks_held, 4);
    ck_assert_uint_eq(stats().waiters, 1);

    for (int i = 0; i < 4; i++) {
        no_reply(w2);
        ck_assert_int_eq(runlock_req(r[i], "m"), 1);
        expect_value(r[i], 0);
        fake_settle(fb);
    }
    ck_assert_uint_gt(expect_granted(w2, 1), fw);
    ck_assert_uint_eq(fake_log_count_mode(fb, 0, BACKEND_ACQUIRE, BACKEND_WRITE), 2);
    ck_assert_uint_eq(fake_log_count_mode(fb, 0, BACKEND_ACQUIRE, BACKEND_READ), 4);
}
END_TEST

/* Readers waiting behind a writer leave the queue, not from its head: a
 * TRYRLOCK's wait runs out, a reader's owner goes. Nothing is sent, the
 * writer waits on and goes first. (wait_end() of a waiter that is not the
 * head looks at the waiter it has just freed: AddressSanitizer stops this
 * test there.) */
START_TEST(test_rw_reader_leaves_queue) {
    client_t *a = client(), *w = client(), *r = client(), *s = client();
    rlock_ok(a, "lq", 0);
    ck_assert_int_eq(wlock_req(w, "lq", 0), 0);
    ck_assert_int_eq(request_mode(r, LOCK_VERB_TRYLOCK, LOCK_MODE_READ, "lq", 500, 0), 0);
    ck_assert_int_eq(rlock_req(s, "lq", 0), 0);
    ck_assert_uint_eq(stats().waiters, 3);
    size_t ops = fake_log_len(fb);

    timers_advance(tm, 500);
    expect_timeout(r, LEASE - 500);
    ck_assert_uint_eq(stats().waiters, 2);
    drop(s);
    ck_assert_uint_eq(stats().waiters, 1);
    fake_settle(fb);
    ck_assert_uint_eq(fake_log_len(fb), ops);
    no_reply(w);

    ck_assert_int_eq(runlock_req(a, "lq"), 1);
    expect_value(a, 0);
    fake_settle(fb);
    expect_granted(w, 1);
    ck_assert_uint_eq(stats().waiters, 0);
}
END_TEST

/* Read holds are reentrant: RLOCK twice holds 2 (each with its timeout key
 * in Redis); RUNLOCK drops one (a DROP of mode READ), the last RUNLOCK
 * releases (a RELEASE of mode READ). */
START_TEST(test_rw_read_reentry) {
    client_t *a = client();
    uint64_t f = rlock_ok(a, "re", 0);

    ck_assert_int_eq(rlock_req(a, "re", 0), 0);
    ck_assert_uint_eq(fake_queued(fb), 1);
    queued_mode_is(0, BACKEND_ACQUIRE, BACKEND_READ, "re", a);
    fake_run(fb);
    ck_assert_uint_eq(expect_granted(a, 2), f);
    ck_assert_int_eq(fake_holds_mode(fb, a->id, "re", BACKEND_READ), 2);
    ck_assert_int_eq(fake_timeout_pttl(fb, field_of(a), "re", 1), LEASE);
    ck_assert_int_eq(fake_timeout_pttl(fb, field_of(a), "re", 2), LEASE);
    ck_assert_uint_eq(lockmgr_owner_held(a->o), 1);
    ck_assert_uint_eq(stats().reentries, 1);
    ck_assert_uint_eq(stats().grants, 1);

    size_t mark = fake_log_len(fb);
    ck_assert_int_eq(runlock_req(a, "re"), 1);
    expect_value(a, 1);
    ck_assert_uint_eq(fake_log_len(fb), mark + 1);
    logged_is(mark, BACKEND_DROP, BACKEND_READ, "re", a);
    fake_run(fb);
    ck_assert_int_eq(fake_holds_mode(fb, a->id, "re", BACKEND_READ), 1);
    ck_assert_int_eq(fake_timeout_pttl(fb, field_of(a), "re", 2), -2);
    ck_assert_int_eq(fake_timeout_pttl(fb, field_of(a), "re", 1), LEASE);
    ck_assert_uint_eq(lockmgr_owner_held(a->o), 1);

    ck_assert_int_eq(runlock_req(a, "re"), 1);
    expect_value(a, 0);
    ck_assert_uint_eq(fake_log_len(fb), mark + 2);
    logged_is(mark + 1, BACKEND_RELEASE, BACKEND_READ, "re", a);
    fake_run(fb);
    ck_assert_int_eq(fake_pttl(fb, "re"), -2);
    ck_assert_int_eq(fake_mode(fb, "re"), -1);
    ck_assert_uint_eq(lockmgr_owner_held(a->o), 0);

    ck_assert_int_eq(runlock_req(a, "re"), 1);
    expect_error(a, LOCK_ERR_NOTHELD);
    ck_assert_uint_eq(fake_queued(fb), 0);
}
END_TEST

/* Downgrade: the writer's RLOCK is granted at once (not behind the writer
 * waiting for it) with the write's fence; after WUNLOCK it still reads, so
 * the other writer keeps waiting until its RUNLOCK. */
START_TEST(test_rw_downgrade) {
    client_t *a = client(), *b = client();
    uint64_t f = wlock_ok(a, "d", 0);
    ck_assert_uint_eq(f, fake_fence_us(fb));
    ck_assert_int_eq(wlock_req(b, "d", 0), 0);
    ck_assert_uint_eq(fake_queued(fb), 0);

    ck_assert_int_eq(rlock_req(a, "d", 0), 0);
    ck_assert_uint_eq(fake_queued(fb), 1);
    queued_mode_is(0, BACKEND_ACQUIRE, BACKEND_READ, "d", a);
    fake_run(fb);
    ck_assert_uint_eq(expect_granted(a, 1), f);
    ck_assert_uint_eq(lockmgr_owner_held(a->o), 2);
    ck_assert_int_eq(fake_holds_mode(fb, a->id, "d", BACKEND_READ), 1);
    ck_assert_int_eq(fake_holds_mode(fb, a->id, "d", BACKEND_WRITE), 1);
    ck_assert_int_eq(fake_mode(fb, "d"), BACKEND_WRITE);
    ck_assert_uint_eq(fake_fence(fb, "d"), f);
    no_reply(b);

    ck_assert_int_eq(wunlock_req(a, "d"), 1);
    expect_value(a, 0);
    ck_assert_uint_eq(fake_queued(fb), 1); /* the release; b waits for a's read */
    queued_mode_is(0, BACKEND_RELEASE, BACKEND_WRITE, "d", a);
    fake_settle(fb);
    no_reply(b);
    ck_assert_int_eq(fake_mode(fb, "d"), BACKEND_READ);
    ck_assert_int_eq(fake_holds_mode(fb, a->id, "d", BACKEND_READ), 1);
    ck_assert_int_eq(fake_holds_mode(fb, a->id, "d", BACKEND_WRITE), 0);
    ck_assert_uint_eq(lockmgr_owner_held(a->o), 1);
    ck_assert_uint_eq(fake_log_count(fb, 0, BACKEND_ACQUIRE), 2); /* a's two */
    ck_assert_int_eq(request(a, LOCK_VERB_STATUS, "d", 0, 0), 0);
    fake_run(fb);
    expect_rw(a, LOCK_MODE_READ, 1, 1, LEASE);

    ck_assert_int_eq(runlock_req(a, "d"), 1);
    expect_value(a, 0);
    queued_mode_is(0, BACKEND_RELEASE, BACKEND_READ, "d", a);
    queued_mode_is(1, BACKEND_ACQUIRE, BACKEND_WRITE, "d", b);
    fake_run(fb);
    ck_assert_uint_eq(expect_granted(b, 1), f + 1);
}
END_TEST

/* Upgrade: WLOCK (or TRYWLOCK) while holding a read hold would wait for
 * itself: ERR KIND at once, nothing sent, the read hold kept. */
START_TEST(test_rw_upgrade_refused) {
    client_t *a = client(), *b = client();
    rlock_ok(a, "u", 0);
    size_t ops = fake_log_len(fb);

    ck_assert_int_eq(wlock_req(a, "u", 0), 1);
    lock_reply_t r = expect_error(a, LOCK_ERR_KIND);
    why_is(&r, LOCK_WHY_UPGRADE, -1);
    ck_assert_int_eq(request_mode(a, LOCK_VERB_TRYLOCK, LOCK_MODE_WRITE, "u", 500, 0), 1);
    expect_error(a, LOCK_ERR_KIND);
    ck_assert_uint_eq(fake_log_len(fb), ops);
    ck_assert_uint_eq(stats().waiters, 0);
    ck_assert(!lockmgr_owner_waiting(a->o));
    ck_assert_uint_eq(lockmgr_owner_held(a->o), 1);
    ck_assert_int_eq(fake_holds_mode(fb, a->id, "u", BACKEND_READ), 1);

    /* Others still read along; once a has let go it may write after them. */
    rlock_ok(b, "u", 0);
    ck_assert_int_eq(runlock_req(a, "u"), 1);
    expect_value(a, 0);
    ck_assert_int_eq(wlock_req(a, "u", 0), 0);
    fake_settle(fb);
    no_reply(a);
    ck_assert_int_eq(runlock_req(b, "u"), 1);
    expect_value(b, 0);
    fake_settle(fb);
    expect_granted(a, 1);
}
END_TEST

/* A name is one kind of lock at a time, locally: read/write requests on a
 * plain lock and the reverse get ERR KIND at once, and so do RUNLOCK of a
 * plain hold and UNLOCK of a read hold; nothing is sent, nothing changes. */
START_TEST(test_rw_kind_mismatch_local) {
    client_t *a = client(), *b = client(), *c = client(), *d = client();
    lock_ok(a, "p", 0);
    size_t ops = fake_log_len(fb);

    ck_assert_int_eq(rlock_req(b, "p", 0), 1);
    lock_reply_t r = expect_error(b, LOCK_ERR_KIND);
    why_is(&r, LOCK_WHY_HELD_AS, LOCK_MODE_MUTEX);
    ck_assert_int_eq(wlock_req(b, "p", 0), 1);
    expect_error(b, LOCK_ERR_KIND);
    ck_assert_int_eq(request_mode(b, LOCK_VERB_TRYLOCK, LOCK_MODE_READ, "p", 0, 0), 1);
    expect_error(b, LOCK_ERR_KIND);
    ck_assert_int_eq(runlock_req(a, "p"), 1);
    expect_error(a, LOCK_ERR_KIND);
    ck_assert_int_eq(wunlock_req(a, "p"), 1);
    expect_error(a, LOCK_ERR_KIND);
    ck_assert_uint_eq(fake_log_len(fb), ops);
    ck_assert_int_eq(fake_holds(fb, a->id, "p"), 1);
    ck_assert_uint_eq(lockmgr_owner_held(a->o), 1);
    ck_assert_uint_eq(stats().waiters, 0);

    rlock_ok(c, "q", 0);
    ops = fake_log_len(fb);
    ck_assert_int_eq(lock_req(d, "q", 0), 1);
    r = expect_error(d, LOCK_ERR_KIND);
    why_is(&r, LOCK_WHY_HELD_AS, LOCK_MODE_READ);
    ck_assert_int_eq(request(d, LOCK_VERB_TRYLOCK, "q", 100, 0), 1);
    expect_error(d, LOCK_ERR_KIND);
    ck_assert_int_eq(unlock_req(c, "q"), 1);
    expect_error(c, LOCK_ERR_KIND);
    ck_assert_uint_eq(fake_log_len(fb), ops);
    ck_assert_int_eq(fake_holds_mode(fb, c->id, "q", BACKEND_READ), 1);
    ck_assert_uint_eq(lockmgr_owner_held(c->o), 1);

    /* A waiter makes the kind too: a plain LOCK waiting on "p" (no hold
     * of b's), then RLOCK of "p" by another. */
    ck_assert_int_eq(lock_req(b, "p", 0), 0);
    ck_assert_int_eq(rlock_req(d, "p", 0), 1);
    expect_error(d, LOCK_ERR_KIND);
    ck_assert_int_eq(unlock_req(a, "p"), 1);
    expect_value(a, 0);
    fake_settle(fb);
    expect_granted(b, 1);
}
END_TEST

/* The kinds differ in Redis only: another daemon's plain lock gets a
 * RLOCK ERR KIND from the backend's WRONG_KIND, and the waiter is gone (no
 * retry, no watch, no release, nothing left); the reverse likewise. */
START_TEST(test_rw_wrong_kind_in_redis) {
    client_t *a = client(), *b = client();
    fake_take(fb, "z", "other", 5000);

    ck_assert_int_eq(rlock_req(a, "z", 0), 0);
    queued_mode_is(0, BACKEND_ACQUIRE, BACKEND_READ, "z", a);
    fake_run(fb);
    lock_reply_t r = expect_error(a, LOCK_ERR_KIND);
    why_is(&r, LOCK_WHY_HELD_AS, LOCK_MODE_MUTEX);
    ck_assert(!lockmgr_owner_waiting(a->o));
    ck_assert_uint_eq(stats().waiters, 0);
    ck_assert_uint_eq(fake_queued(fb), 0);
    ck_assert_uint_eq(fake_watch_calls(fb, "z"), 0);
    ck_assert_int_eq(fake_holds_field(fb, "other", "z"), 1); /* unchanged */
    ck_assert_int_eq(fake_mode(fb, "z"), BACKEND_MUTEX);
    timers_advance(tm, 10000);
    fake_settle(fb);
    ck_assert_uint_eq(fake_log_len(fb), 1);
    no_reply(a);
    ck_assert_uint_eq(stats().backend_errors, 0);
    /* Nothing of the read/write attempt is left: a plain LOCK of it works. */
    lock_ok(a, "z", 0);

    fake_take_rw(fb, "y", "other", BACKEND_READ, 5000);
    ck_assert_int_eq(lock_req(b, "y", 0), 0);
    queued_mode_is(0, BACKEND_ACQUIRE, BACKEND_MUTEX, "y", b);
    fake_run(fb);
    r = expect_error(b, LOCK_ERR_KIND);
    why_is(&r, LOCK_WHY_HELD_AS, LOCK_MODE_READ);
    ck_assert_uint_eq(stats().waiters, 0);
    fake_settle(fb);
    ck_assert_uint_eq(fake_queued(fb), 0);
    ck_assert_int_eq(fake_holds_field(fb, "other", "y"), 1);
    ck_assert_int_eq(fake_holds(fb, b->id, "y"), 0);
    ck_assert_uint_eq(fake_watch_calls(fb, "y"), 0);
    /* and a TRYWLOCK on a foreign plain lock */
    fake_take(fb, "x", "other", 5000);
    ck_assert_int_eq(request_mode(b, LOCK_VERB_TRYLOCK, LOCK_MODE_WRITE, "x", 1000, 0), 0);
    fake_run(fb);
    expect_error(b, LOCK_ERR_KIND);
    timers_advance(tm, 1000);
    fake_settle(fb);
    no_reply(b);
    ck_assert_uint_eq(stats().timeouts, 0);
    ck_assert_uint_eq(stats().waiters, 0);
}
END_TEST

/* An owner that leaves with a read and a write hold of one name (a
 * downgrade) releases both, each with its mode; the writer waiting for it
 * is granted then. */
START_TEST(test_rw_owner_drop_releases_both) {
    client_t *a = client(), *b = client();
    uint64_t f = wlock_ok(a, "o", 0);
    ck_assert_int_eq(wlock_req(b, "o", 0), 0);
    ck_assert_int_eq(rlock_req(a, "o", 0), 0);
    fake_run(fb);
    expect_granted(a, 1);
    ck_assert_uint_eq(lockmgr_owner_held(a->o), 2);

    size_t mark = fake_log_len(fb);
    drop(a);
    ck_assert_uint_eq(stats().locks_held, 0);
    ck_assert_uint_eq(fake_log_len(fb), mark + 3);
    ck_assert_uint_eq(fake_log_count_mode(fb, mark, BACKEND_RELEASE, BACKEND_READ), 1);
    ck_assert_uint_eq(fake_log_count_mode(fb, mark, BACKEND_RELEASE, BACKEND_WRITE), 1);
    ck_assert_uint_eq(fake_log(fb, mark)->owner, a->id);
    ck_assert_uint_eq(fake_log(fb, mark + 1)->owner, a->id);
    logged_is(mark + 2, BACKEND_ACQUIRE, BACKEND_WRITE, "o", b);
    fake_run(fb);
    ck_assert_uint_eq(expect_granted(b, 1), f + 1);
    ck_assert_int_eq(fake_holds_mode(fb, a->id, "o", BACKEND_READ), 0);
    ck_assert_int_eq(fake_holds_mode(fb, a->id, "o", BACKEND_WRITE), 0);
    ck_assert_int_eq(fake_holds_mode(fb, b->id, "o", BACKEND_WRITE), 1);
    ck_assert_int_eq(fake_readers(fb, "o"), 0);
    ck_assert_uint_eq(stats().locks_held, 1);
}
END_TEST

/* The owner leaves while its downgrade's acquire is in flight: its drop
 * releases the write hold it had; the read hold Redis grants after that
 * must not stay behind either, and the writer waiting for the name gets it
 * at once rather than after the orphan's lease. */
START_TEST(test_rw_owner_drop_downgrade_in_flight) {
    client_t *a = client(), *b = client();
    wlock_ok(a, "o", 0);
    ck_assert_int_eq(wlock_req(b, "o", 0), 0);
    ck_assert_int_eq(rlock_req(a, "o", 0), 0);
    queued_mode_is(0, BACKEND_ACQUIRE, BACKEND_READ, "o", a);
    drop(a);
    fake_settle(fb);
    ck_assert_msg(fake_holds_mode(fb, a->id, "o", BACKEND_READ) == 0,
                  "the departed owner's read hold stays in Redis (PTTL %lld)",
                  fake_pttl(fb, "o"));
    expect_granted(b, 1);
}
END_TEST

/* A downgrade whose answer is lost (it ran: the read hold is in Redis)
 * answers ERR BACKEND and gives the owner no read hold; Redis must not
 * keep one either, as for any other acquire that may have run. */
START_TEST(test_rw_downgrade_lost_answer) {
    client_t *a = client(), *b = client();
    wlock_ok(a, "o", 0);
    fake_lose_next(fb, "no reply within command_timeout_ms");
    ck_assert_int_eq(rlock_req(a, "o", 0), 0);
    fake_run(fb);
    expect_error(a, LOCK_ERR_BACKEND);
    ck_assert_uint_eq(lockmgr_owner_held(a->o), 1); /* the write only */
    fake_settle(fb);
    ck_assert_msg(fake_holds_mode(fb, a->id, "o", BACKEND_READ) == 0,
                  "a read hold the owner does not have stays in Redis");
    /* Else, after WUNLOCK, the name stays read-locked by no one. */
    ck_assert_int_eq(wunlock_req(a, "o"), 1);
    expect_value(a, 0);
    ck_assert_int_eq(wlock_req(b, "o", 0), 0);
    fake_settle(fb);
    expect_granted(b, 1);
}
END_TEST

/* As test_release_not_resent_behind_own_acquire, for a downgrade: a read
 * release whose answer was lost waits for Redis; the owner takes the write
 * lock, then reads too, and while that downgrade's acquire is in flight
 * the backend's state changes: the old read release must not go out behind
 * it, where it would delete the new read hold. */
START_TEST(test_rw_release_not_resent_behind_downgrade) {
    client_t *a = client();
    rlock_ok(a, "k", 0);
    fake_lose_next(fb, "no reply within command_timeout_ms");
    ck_assert_int_eq(runlock_req(a, "k"), 1);
    expect_value(a, 0);
    fake_run(fb); /* the release ran, its answer was lost: queued again */
    wlock_ok(a, "k", 0);
    ck_assert_int_eq(rlock_req(a, "k", 0), 0);
    queued_mode_is(0, BACKEND_ACQUIRE, BACKEND_READ, "k", a);
    backend_notify_state(fake_backend(fb));
    ck_assert_msg(fake_queued(fb) == 1, "a stale read release went out behind the downgrade");
    fake_settle(fb);
    expect_granted(a, 1);
    ck_assert_int_eq(fake_holds_mode(fb, a->id, "k", BACKEND_READ), 1);
}
END_TEST

/* A watchdog read hold is renewed with RENEW ops of mode READ (a
 * downgraded owner's two holds each with its own mode) before its lease
 * runs out, the timeout keys with it; one Redis no longer has is lost
 * (expired) and released. */
START_TEST(test_rw_watchdog_renews_reads) {
    client_t *a = client(), *d = client();
    rlock_ok(a, "wr", 0);
    wlock_ok(d, "wd", 0);
    ck_assert_int_eq(rlock_req(d, "wd", 0), 0);
    fake_run(fb);
    expect_granted(d, 1);

    size_t mark = fake_log_len(fb);
    timers_advance(tm, EVERY - 1);
    ck_assert_uint_eq(fake_log_count(fb, mark, BACKEND_RENEW), 0);
    timers_advance(tm, 1);
    ck_assert_uint_eq(fake_queued(fb), 3);
    ck_assert_uint_eq(fake_log_count_mode(fb, mark, BACKEND_RENEW, BACKEND_READ), 2);
    ck_assert_uint_eq(fake_log_count_mode(fb, mark, BACKEND_RENEW, BACKEND_WRITE), 1);
    for (size_t i = mark; i < fake_log_len(fb); i++) {
        ck_assert_uint_eq(fake_log(fb, i)->lease_ms, LEASE);
        if (fake_log(fb, i)->owner == a->id) logged_is(i, BACKEND_RENEW, BACKEND_READ, "wr", a);
    }
    fake_run(fb);
    ck_assert_uint_eq(stats().renewals, 3);
    ck_assert_int_eq(fake_pttl(fb, "wr"), LEASE);
    ck_assert_int_eq(fake_timeout_pttl(fb, field_of(a), "wr", 1), LEASE);
    ck_assert_int_eq(fake_timeout_pttl(fb, field_of(d), "wd", 1), LEASE);

    for (int step = 0; step < 40; step++) { /* 4 leases */
        run_for(300);
        no_event(a);
        no_event(d);
        EXPECT(fake_timeout_pttl(fb, field_of(a), "wr", 1) > (long long)(LEASE - EVERY - 400),
               "read hold's timeout key PTTL %lld, not renewed",
               fake_timeout_pttl(fb, field_of(a), "wr", 1));
    }
    size_t renews = fake_log_count(fb, mark, BACKEND_RENEW);
    ck_assert_uint_ge(renews, 3 * (4 * LEASE / EVERY));
    ck_assert_uint_eq(fake_log_count_mode(fb, mark, BACKEND_RENEW, BACKEND_MUTEX), 0);
    ck_assert_uint_eq(fake_log_count_mode(fb, mark, BACKEND_RENEW, BACKEND_WRITE), renews / 3);
    ck_assert_int_eq(fake_holds_mode(fb, a->id, "wr", BACKEND_READ), 1);
    ck_assert_int_eq(fake_holds_mode(fb, d->id, "wd", BACKEND_READ), 1);
    ck_assert_int_eq(fake_holds_mode(fb, d->id, "wd", BACKEND_WRITE), 1);
    ck_assert_uint_eq(stats().lost, 0);

    /* Gone from Redis: the next renewal says so. */
    fake_expire(fb, "wr");
    mark = fake_log_len(fb);
    timers_advance(tm, EVERY);
    fake_run(fb);
    expect_event(a, "wr", LOCK_LOST_EXPIRED);
    ck_assert_uint_eq(lockmgr_owner_held(a->o), 0);
    ck_assert_uint_eq(fake_log_count_mode(fb, mark, BACKEND_RELEASE, BACKEND_READ), 1);
    no_event(d);
}
END_TEST

/* A read hold with a lease is never renewed, and expires with it. */
START_TEST(test_rw_read_lease_expires) {
    client_t *a = client(), *w = client();
    ck_assert_int_eq(rlock_req(a, "rl", 2000), 0);
    queued_mode_is(0, BACKEND_ACQUIRE, BACKEND_READ, "rl", a);
    ck_assert_uint_eq(fake_queued_op(fb, 0)->lease_ms, 2000);
    fake_run(fb);
    expect_granted(a, 1);
    ck_assert_int_eq(fake_timeout_pttl(fb, field_of(a), "rl", 1), 2000);
    ck_assert_int_eq(wlock_req(w, "rl", 0), 0);
    timers_advance(tm, 1999);
    fake_settle(fb);
    no_event(a);
    no_reply(w);
    ck_assert_uint_eq(submitted(BACKEND_RENEW), 0);
    timers_advance(tm, 1);
    expect_event(a, "rl", LOCK_LOST_EXPIRED);
    ck_assert_uint_eq(a->events[0].at, T0 + 2000);
    ck_assert_uint_eq(stats().lost_by[LOCK_LOST_EXPIRED], 1);
    ck_assert_uint_eq(lockmgr_owner_held(a->o), 0);
    queued_mode_is(0, BACKEND_RELEASE, BACKEND_READ, "rl", a);
    queued_mode_is(1, BACKEND_ACQUIRE, BACKEND_WRITE, "rl", w);
    fake_run(fb);
    expect_granted(w, 1);
    ck_assert_int_eq(runlock_req(a, "rl"), 1);
    expect_error(a, LOCK_ERR_NOTHELD);
}
END_TEST

/* STATUS of a read/write lock: RW with its mode, holders (readers, or 1
 * writer) and the asking owner's holds of that mode. */
START_TEST(test_rw_status) {
    client_t *a = client(), *b = client(), *c = client(), *w = client();
    rlock_ok(a, "s", 0);
    rlock_ok(b, "s", 0);
    ck_assert_int_eq(rlock_req(a, "s", 0), 0);
    fake_run(fb);
    expect_granted(a, 2);
    timers_advance(tm, 400);

    ck_assert_int_eq(request(a, LOCK_VERB_STATUS, "s", 0, 0), 0);
    queued_mode_is(0, BACKEND_STATUS, BACKEND_READ, "s", a);
    fake_run(fb);
    expect_rw(a, LOCK_MODE_READ, 2, 2, LEASE - 400);
    ck_assert_int_eq(request(c, LOCK_VERB_STATUS, "s", 0, 0), 0); /* holds nothing */
    fake_run(fb);
    expect_rw(c, LOCK_MODE_READ, 2, 0, LEASE - 400);
    no_event(a);

    ck_assert_int_eq(runlock_req(a, "s"), 1);
    expect_value(a, 1);
    ck_assert_int_eq(runlock_req(a, "s"), 1);
    expect_value(a, 0);
    ck_assert_int_eq(runlock_req(b, "s"), 1);
    expect_value(b, 0);
    fake_settle(fb);
    ck_assert_int_eq(request(c, LOCK_VERB_STATUS, "s", 0, 0), 0);
    fake_run(fb);
    ck_assert_int_eq(next_reply(c).type, LOCK_REPLY_FREE);

    wlock_ok(w, "s", 0);
    ck_assert_int_eq(request(w, LOCK_VERB_STATUS, "s", 0, 0), 0);
    queued_mode_is(0, BACKEND_STATUS, BACKEND_WRITE, "s", w);
    fake_run(fb);
    expect_rw(w, LOCK_MODE_WRITE, 1, 1, LEASE);
    ck_assert_int_eq(request(c, LOCK_VERB_STATUS, "s", 0, 0), 0);
    fake_run(fb);
    expect_rw(c, LOCK_MODE_WRITE, 1, 0, LEASE);
    /* A downgraded writer: its write holds, and the mode is still WRITE. */
    ck_assert_int_eq(wlock_req(w, "s", 0), 0);
    fake_run(fb);
    expect_granted(w, 2);
    ck_assert_int_eq(rlock_req(w, "s", 0), 0);
    fake_run(fb);
    expect_granted(w, 1);
    ck_assert_int_eq(request(w, LOCK_VERB_STATUS, "s", 0, 0), 0);
    fake_run(fb);
    expect_rw(w, LOCK_MODE_WRITE, 1, 2, LEASE);
    no_event(w);

    /* Foreign readers only. */
    fake_take_rw(fb, "f", "x1", BACKEND_READ, 5000);
    fake_take_rw(fb, "f", "x2", BACKEND_READ, 5000);
    ck_assert_int_eq(request(c, LOCK_VERB_STATUS, "f", 0, 0), 0);
    fake_run(fb);
    expect_rw(c, LOCK_MODE_READ, 2, 0, 5000);

    /* A read hold Redis no longer has: !LOST, and the truth. */
    rlock_ok(b, "g", 0);
    fake_expire(fb, "g");
    ck_assert_int_eq(request(b, LOCK_VERB_STATUS, "g", 0, 0), 0);
    fake_run(fb);
    expect_event(b, "g", LOCK_LOST_EXPIRED);
    ck_assert_int_eq(next_reply(b).type, LOCK_REPLY_FREE);
    ck_assert_uint_eq(lockmgr_owner_held(b->o), 0);
}
END_TEST

/* A topology without BACKEND_CAP_ONE_COPY (quorum): read/write requests get ERR
 * KIND at once; plain locks work as ever. */
START_TEST(test_rw_needs_backend_cap) {
    client_t *a = client();
    fake_set_caps(fb, fake_backend(fb)->caps & ~BACKEND_CAP_ONE_COPY);

    ck_assert_int_eq(rlock_req(a, "c", 0), 1);
    lock_reply_t r = expect_error(a, LOCK_ERR_KIND);
    why_is(&r, LOCK_WHY_UNSUPPORTED, LOCK_MODE_READ);
    ck_assert_str_eq(r.detail, "fake");
    ck_assert_int_eq(wlock_req(a, "c", 0), 1);
    expect_error(a, LOCK_ERR_KIND);
    ck_assert_int_eq(request_mode(a, LOCK_VERB_TRYLOCK, LOCK_MODE_READ, "c", 100, 0), 1);
    expect_error(a, LOCK_ERR_KIND);
    ck_assert_int_eq(request_mode(a, LOCK_VERB_TRYLOCK, LOCK_MODE_WRITE, "c", 0, 0), 1);
    expect_error(a, LOCK_ERR_KIND);
    ck_assert_uint_eq(fake_log_len(fb), 0);
    ck_assert_uint_eq(stats().waiters, 0);
    lock_ok(a, "c", 0);
    ck_assert_int_eq(fake_mode(fb, "c"), BACKEND_MUTEX);
}
END_TEST

/* A reader's RUNLOCK leaves the name to the other readers for as long as
 * their own read holds last (their timeout keys), not for the longest
 * lease it ever had: a local writer behind a foreign reader with a short
 * lease gets the lock once that lease is over. */
START_TEST(test_rw_writer_waits_for_foreign_reader_lease) {
    client_t *a = client(), *w = client();
    fake_take_rw(fb, "f", "other", BACKEND_READ, 500);
    rlock_ok(a, "f", 0);
    ck_assert_int_eq(fake_readers(fb, "f"), 2);
    ck_assert_int_eq(fake_pttl(fb, "f"), LEASE); /* grown to a's lease */
    ck_assert_int_eq(wlock_req(w, "f", 0), 0);
    timers_advance(tm, 100);
    ck_assert_int_eq(runlock_req(a, "f"), 1);
    expect_value(a, 0);
    fake_settle(fb); /* TAKEN by the foreign reader */
    no_reply(w);
    ck_assert_int_eq(fake_pttl(fb, "f"), 400);
    ck_assert(fake_watched(fb, "f"));
    timers_advance(tm, 400);
    fake_settle(fb);
    no_reply(w);
    timers_advance(tm, 1); /* its TTL + 1 */
    fake_settle(fb);
    expect_granted(w, 1);
    ck_assert_uint_eq(now(), T0 + 501);
}
END_TEST

/* Readers behind a foreign writer all try, are refused and wait; when the
 * writer's lease is over they all go at once, with its fence. */
START_TEST(test_rw_readers_behind_foreign_writer) {
    client_t *r[3] = {client(), client(), client()}, *w = client();
    fake_take_rw(fb, "fw", "other", BACKEND_WRITE, 1000);
    for (int i = 0; i < 3; i++) ck_assert_int_eq(rlock_req(r[i], "fw", 0), 0);
    ck_assert_uint_eq(fake_queued(fb), 3);
    fake_run(fb);
    ck_assert_uint_eq(fake_watch_calls(fb, "fw"), 1);
    ck_assert_int_eq(fake_watch_mode(fb, "fw"), BACKEND_READ);
    fake_settle(fb); /* the watch in force: they try once more */
    for (int i = 0; i < 3; i++) no_reply(r[i]);
    size_t acquires = submitted(BACKEND_ACQUIRE);
    ck_assert_uint_eq(acquires, 6);
    ck_assert_int_eq(wlock_req(w, "fw", 0), 0); /* behind them: no try */
    ck_assert_uint_eq(fake_queued(fb), 0);

    timers_advance(tm, 1001);
    ck_assert_uint_eq(fake_queued(fb), 3);
    fake_settle(fb);
    for (int i = 0; i < 3; i++) /* the foreign write's fence: reads raise none */
        ck_assert_uint_eq(expect_granted(r[i], 1), fake_fence(fb, "fw"));
    no_reply(w);
    ck_assert_int_eq(fake_readers(fb, "fw"), 3);
    ck_assert_uint_eq(submitted(BACKEND_ACQUIRE), acquires + 3);
    ck_assert_uint_eq(stats().waiters, 1);
}
END_TEST

/* FORCEUNLOCK of a read lock held by local readers: every one of them has
 * lost it; a writer waiting here goes. */
START_TEST(test_rw_force_readers) {
    client_t *a = client(), *b = client(), *w = client(), *root = client_uid(0);
    rlock_ok(a, "fr", 0);
    rlock_ok(b, "fr", 0);
    ck_assert_int_eq(wlock_req(w, "fr", 0), 0);
    ck_assert_int_eq(request(root, LOCK_VERB_FORCE, "fr", 0, 0), 0);
    fake_run(fb);
    expect_value(root, 1);
    expect_event(a, "fr", LOCK_LOST_FORCED);
    expect_event(b, "fr", LOCK_LOST_FORCED);
    ck_assert_uint_eq(stats().locks_held, 0);
    fake_settle(fb);
    expect_granted(w, 1);
    no_event(a);
    no_event(b);
}
END_TEST

/* A plain LOCK of a name whose read/write lock this owner still has a
 * read field in (its RUNLOCK's release did not reach Redis yet), with
 * another daemon reading too: the plain acquire script reenters the
 * owner's field without looking at 'mode', the lock manager clears that
 * "stale" field with a plain release, whose script deletes the whole hash
 * and with it the other reader's hold, and then grants the plain lock
 * while the other reader still reads. It must be ERR KIND, with the
 * foreign read hold intact. */
START_TEST(test_rw_plain_lock_over_own_stale_read) {
    client_t *a = client();
    fake_take_rw(fb, "k", "other", BACKEND_READ, 10000);
    rlock_ok(a, "k", 0);
    fake_fail_next(fb, BACKEND_DOWN, "connection reset"); /* did not run */
    ck_assert_int_eq(runlock_req(a, "k"), 1);
    expect_value(a, 0);
    fake_run(fb);
    ck_assert_int_eq(fake_holds_mode(fb, a->id, "k", BACKEND_READ), 1);

    ck_assert_int_eq(lock_req(a, "k", 0), 0);
    fake_settle(fb);
    ck_assert_msg(fake_holds_field(fb, "other", "k") == 1,
                  "the other daemon's read hold was deleted (%s)",
                  replies_left(a) && a->replies[a->rhead % MAX_LOG].type == LOCK_REPLY_GRANTED
                      ? "and the plain lock granted"
                      : "");
    expect_error(a, LOCK_ERR_KIND);
}
END_TEST

/* Regression: a release message that came while two readers' acquires
 * were in flight made each of them try again at every refusal, without
 * end: the queue's wake flag was only cleared by an attempt made while
 * none was in flight, which never happens while two take turns. One more
 * try each is what the message is worth. */
START_TEST(test_rw_wake_while_readers_in_flight) {
    client_t *r1 = client(), *r2 = client();
    fake_take_rw(fb, "x", "other", BACKEND_WRITE, -1);
    ck_assert_int_eq(rlock_req(r1, "x", 0), 0);
    fake_settle(fb);
    ck_assert_int_eq(rlock_req(r2, "x", 0), 0);
    fake_settle(fb);
    ck_assert_int_eq(fake_publish(fb, "x"), 1); /* both try */
    ck_assert_uint_eq(fake_queued(fb), 2);
    ck_assert_int_eq(fake_publish(fb, "x"), 1); /* another message while both are in flight */
    size_t mark = fake_log_len(fb);
    for (int i = 0; i < 6; i++) fake_run(fb);
    ck_assert_msg(fake_log_count(fb, mark, BACKEND_ACQUIRE) <= 2,
                  "%zu tries in 6 round trips after one message",
                  fake_log_count(fb, mark, BACKEND_ACQUIRE));
    no_reply(r1);
    no_reply(r2);
    fake_expire(fb, "x");
    ck_assert_int_eq(fake_publish(fb, "x"), 1);
    fake_settle(fb);
    expect_granted(r1, 1);
    expect_granted(r2, 1);
}
END_TEST


/* Regression: a reader granted just after a writer's lease ended stopped
 * the retry timer that a refused reader ahead of it was parked on, and
 * that reader then waited for a release that might never come. */
START_TEST(test_rw_late_reader_keeps_retry) {
    client_t *a = client(), *b = client();
    fake_take_rw(fb, "r", "x", BACKEND_WRITE, 1000);
    uint64_t t = now();
    ck_assert_int_eq(rlock_req(a, "r", 0), 0);
    fake_settle(fb);
    no_reply(a);
    run_for(1000); /* the writer's lease ends; a's retry turn is 1 ms on */
    ck_assert_int_eq(rlock_req(b, "r", 0), 0);
    fake_settle(fb);
    expect_granted(b, 1);
    run_until_reply(a, t + 2 * LEASE);
    expect_granted(a, 1);
    ck_assert_msg(now() <= t + 1001 + 10, "granted %" PRIu64 " ms after the lease began",
                  now() - t);
}
END_TEST

/* HOLD_GONE for a read or a write acquire (the read/write script never
 * says it: a reply rewritten on its way) may hide a grant: undone in
 * Redis, and the waiter tries again and is answered (issue 36, bug 8). */
START_TEST(test_rw_hold_gone_retried) {
    client_t *r = client(), *w = client();
    ck_assert_int_eq(rlock_req(r, "h", 0), 0);
    fake_rewrite_next(fb, BACKEND_HOLD_GONE);
    fake_run(fb);
    no_reply(r);
    run_until_reply(r, now() + 5 * LEASE);
    expect_granted(r, 1);
    ck_assert_int_eq(fake_holds_mode(fb, r->id, "h", BACKEND_READ), 1);
    ck_assert_int_eq(wlock_req(w, "i", 0), 0);
    fake_rewrite_next(fb, BACKEND_HOLD_GONE);
    fake_run(fb);
    no_reply(w);
    run_until_reply(w, now() + 5 * LEASE);
    expect_granted(w, 1);
    ck_assert_int_eq(fake_holds_mode(fb, w->id, "i", BACKEND_WRITE), 1);
    ck_assert_uint_eq(stats().waiters, 0);
    ck_assert_uint_eq(stats().locks_held, 2);
}
END_TEST

/* ---- the suite --------------------------------------------------------------- */

static Suite *lockmgr_rw_suite(void) {
    Suite *s = suite_create("lockmgr_rw");
    TCase *tc;

#define TC(name) \
    tc = tcase_create(name); \
    tcase_add_checked_fixture(tc, setup, teardown); \
    suite_add_tcase(s, tc)

    TC("rwlock");
    tcase_add_test(tc, test_rw_readers_share_writer_waits);
    tcase_add_test(tc, test_rw_late_reader_keeps_retry);
    tcase_add_test(tc, test_rw_limit_locks_per_client);
    tcase_add_test(tc, test_rw_tryrlock_shares_with_readers_in_flight);
    tcase_add_test(tc, test_rw_reader_waits_behind_writer);
    tcase_add_test(tc, test_rw_reader_behind_parked_writer);
    tcase_add_test(tc, test_rw_readers_behind_writer_all_granted);
    tcase_add_test(tc, test_rw_reader_leaves_queue);
    tcase_add_test(tc, test_rw_read_reentry);
    tcase_add_test(tc, test_rw_downgrade);
    tcase_add_test(tc, test_rw_upgrade_refused);
    tcase_add_test(tc, test_rw_kind_mismatch_local);
    tcase_add_test(tc, test_rw_wrong_kind_in_redis);
    tcase_add_test(tc, test_rw_owner_drop_releases_both);
    tcase_add_test(tc, test_rw_owner_drop_downgrade_in_flight);
    tcase_add_test(tc, test_rw_downgrade_lost_answer);
    tcase_add_test(tc, test_rw_release_not_resent_behind_downgrade);
    tcase_add_test(tc, test_rw_watchdog_renews_reads);
    tcase_add_test(tc, test_rw_read_lease_expires);
    tcase_add_test(tc, test_rw_status);
    tcase_add_test(tc, test_rw_needs_backend_cap);
    tcase_add_test(tc, test_rw_writer_waits_for_foreign_reader_lease);
    tcase_add_test(tc, test_rw_readers_behind_foreign_writer);
    tcase_add_test(tc, test_rw_force_readers);
    tcase_add_test(tc, test_rw_plain_lock_over_own_stale_read);
    tcase_add_test(tc, test_rw_wake_while_readers_in_flight);
    tcase_add_test(tc, test_rw_hold_gone_retried);
#undef TC
    return s;
}

int main(void) {
    return lockmgr_test_run(lockmgr_rw_suite());
}
