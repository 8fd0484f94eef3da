/* Unit tests of daemon/lock on a fake backend: grants, waits, watchdog, leases, semaphores, fair locks.
 * SPDX-License-Identifier: MIT
 *
 * No Redis, no sockets, no real time: the lock manager runs on a manual
 * clock (timers_new_manual) over tests/unit/fake_backend, whose ops are
 * answered only when a test calls fake_run(). Every client records its
 * replies and !LOST events; the callbacks check that no reply comes twice,
 * none comes inside lockmgr_request(), and none reaches a dropped owner. */
#include "daemon/lock/lockmgr.h"

#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf/conf.h"
#include "daemon/log.h"
#include "daemon/util/timers.h"
#include "tests/unit/fake_backend.h"

/* conf: a short lease, so renew_every_ms = 1000 and the loss margin is 300. */
#define LEASE 3000u
#define EVERY (LEASE / 3)
#define MARGIN (LEASE / LOCKMGR_LOSS_MARGIN_DIV)
#define T0 1000000u              /* the manual clock's start */

/* Under CK_FORK every ck_assert that passes writes its place to Check's
 * pipe; the checks run at every step of the mixes call Check only on failure. */
#define EXPECT(cond, ...)                       \
    do {                                        \
        if (!(cond)) ck_abort_msg(__VA_ARGS__); \
    } while (0)

#define MAX_CLIENTS 64
#define MAX_LOG 256              /* replies and events kept unread, per client */
#define DETAIL_LEN 128

/* ---- the world: conf, clock, fake backend, lock manager ---------------------- */

static conf_t conf;
static timers_t *tm;
static fake_t *fb;
static lockmgr_t *mgr;
static int in_request;           /* inside lockmgr_request() now */
static int done_calls;           /* lockmgr_shutdown's done */
static int in_done;
static uint64_t seq;             /* orders replies and events of all clients */

/* One connection as the lock manager sees it, with what it was told. */
typedef struct client_s {
    lock_owner_t *o;
    uint64_t id;
    uid_t uid;
    int dropped;
    int drop_in_callback;        /* drops itself from its next callback, as a
                                    session does when its output overflows */
    int pending;                 /* a request without its reply yet */
    unsigned sent;               /* requests */
    unsigned answered;           /* replies, at once or later */
    /* rings: entry n at [n % MAX_LOG] */
    lock_reply_t replies[MAX_LOG];
    char details[MAX_LOG][DETAIL_LEN];
    uint64_t rseq[MAX_LOG];
    size_t nreplies, rhead;
    struct {
        char name[64];
        lock_loss_t why;
        uint64_t at;             /* on the manual clock */
        uint64_t seq;
    } events[MAX_LOG];
    size_t nevents, ehead;
} client_t;

static client_t clients[MAX_CLIENTS];
static size_t nclients;

static const char *kind_name(lock_reply_kind_t k) {
    static const char *const names[] = {"GRANTED", "VALUE", "TIMEOUT", "FREE", "TAKEN",
                                        "MINE",    "RW",    "SEM",     "HELD", "ERROR"};
    return (unsigned)k < sizeof(names) / sizeof(names[0]) ? names[k] : "?";
}

static void record(client_t *c, const lock_reply_t *r) {
    ck_assert_msg(c->pending == 1, "client %" PRIu64 ": a %s reply with no request in flight",
                  c->id, kind_name(r->kind));
    ck_assert_uint_lt(c->nreplies - c->rhead, MAX_LOG);
    c->pending = 0;
    c->answered++;
    size_t k = c->nreplies % MAX_LOG;
    c->replies[k] = *r;
    c->rseq[k] = ++seq;
    if (r->detail != NULL) {
        snprintf(c->details[k], DETAIL_LEN, "%s", r->detail);
        c->replies[k].detail = c->details[k];
    }
    c->nreplies++;
}

static void drop(client_t *c);

static void on_reply(void *data, const lock_reply_t *r) {
    client_t *c = data;
    ck_assert_msg(!in_request, "client %" PRIu64 ": %s reply callback inside lockmgr_request",
                  c->id, kind_name(r->kind));
    ck_assert_msg(!c->dropped, "client %" PRIu64 ": reply after lockmgr_owner_drop", c->id);
    record(c, r);
    if (c->drop_in_callback) drop(c);
}

static void on_event(void *data, const char *name, size_t len, lock_loss_t why) {
    client_t *c = data;
    ck_assert_msg(!in_request, "client %" PRIu64 ": !LOST %.*s inside lockmgr_request", c->id,
                  (int)len, name);
    ck_assert_msg(!c->dropped, "client %" PRIu64 ": event after lockmgr_owner_drop", c->id);
    ck_assert_uint_lt(c->nevents - c->ehead, MAX_LOG);
    size_t k = c->nevents % MAX_LOG;
    snprintf(c->events[k].name, sizeof(c->events[0].name), "%.*s", (int)len, name);
    c->events[k].why = why;
    c->events[k].at = timers_now(tm);
    c->events[k].seq = ++seq;
    c->nevents++;
    if (c->drop_in_callback) drop(c);
}

static client_t *client_uid(uid_t uid) {
    ck_assert_uint_lt(nclients, MAX_CLIENTS);
    client_t *c = &clients[nclients++];
    memset(c, 0, sizeof(*c));
    c->id = nclients; /* 1, 2, ... like the sessions' ids */
    c->uid = uid;
    c->o = lockmgr_owner_new(mgr, c->id, uid, on_reply, on_event, c);
    ck_assert_ptr_nonnull(c->o);
    return c;
}

static client_t *client(void) {
    return client_uid(1000);
}

static void drop(client_t *c) {
    ck_assert(!c->dropped);
    lockmgr_owner_drop(mgr, c->o);
    c->dropped = 1;
    c->o = NULL;
}

static void setup(void) {
    char err[CONF_ERR_LEN];
    conf_defaults(&conf);
    conf.lease_ms = LEASE;
    conf.renew_every_ms = 0;
    ck_assert_msg(conf_finish(&conf, err, sizeof(err)) == 0, "conf_finish: %s", err);
    ck_assert_uint_eq(conf.renew_every_ms, EVERY);
    log_set_level(CONF_LOG_ERROR);
    nclients = 0;
    done_calls = 0;
    tm = timers_new_manual(T0);
    ck_assert_ptr_nonnull(tm);
    fb = fake_new(tm);
    mgr = lockmgr_new(&conf, tm, fake_backend(fb));
    ck_assert_ptr_nonnull(mgr);
}

/* As the daemon stops: owners gone (drops from inside callbacks finish
 * from a timer), the backend closed (its pending ops still find the
 * manager), then the manager and the clock. */
static void teardown(void) {
    for (size_t i = 0; i < nclients; i++)
        if (!clients[i].dropped) drop(&clients[i]);
    timers_run_due(tm);
    fake_close(fb);
    lockmgr_free(mgr);
    timers_free(tm);
}

/* ---- requests and what comes back -------------------------------------------- */

/* Sends one request of mode (LOCK, TRYLOCK, UNLOCK; LOCK_MODE_MUTEX for the
 * others) with permits (a semaphore's); returns 1 when lockmgr_request()
 * answered it at once (the reply is then in the client's log like any
 * other). */
static int request_permits(client_t *c, lock_req_kind_t kind, lock_mode_t mode,
                           const char *name, uint32_t wait_ms, uint32_t lease_ms,
                           uint32_t permits) {
    lock_request_t r = {.kind = kind,
                        .mode = mode,
                        .name = name,
                        .len = strlen(name),
                        .wait_ms = wait_ms,
                        .lease_ms = lease_ms,
                        .permits = permits};
    lock_reply_t now;
    ck_assert_msg(!c->dropped && c->pending == 0,
                  "client %" PRIu64 ": a request while one is in flight", c->id);
    memset(&now, 0x5a, sizeof(now));
    c->sent++;
    c->pending = 1;
    in_request = 1;
    int at_once = lockmgr_request(mgr, c->o, &r, &now);
    in_request = 0;
    ck_assert_msg(at_once == 0 || at_once == 1, "lockmgr_request returned %d", at_once);
    if (at_once) {
        record(c, &now);
    } else {
        ck_assert_msg(c->pending == 1, "client %" PRIu64 ": answered through the callback "
                      "inside lockmgr_request", c->id);
        ck_assert_msg(lockmgr_owner_waiting(c->o), "request in flight but not waiting");
    }
    return at_once;
}

static int request_mode(client_t *c, lock_req_kind_t kind, lock_mode_t mode, const char *name,
                        uint32_t wait_ms, uint32_t lease_ms) {
    return request_permits(c, kind, mode, name, wait_ms, lease_ms, 0);
}

static int request(client_t *c, lock_req_kind_t kind, const char *name, uint32_t wait_ms,
                   uint32_t lease_ms) {
    return request_mode(c, kind, LOCK_MODE_MUTEX, name, wait_ms, lease_ms);
}

static int lock_req(client_t *c, const char *name, uint32_t lease_ms) {
    return request(c, LOCK_REQ_LOCK, name, 0, lease_ms);
}

static int unlock_req(client_t *c, const char *name) {
    return request(c, LOCK_REQ_UNLOCK, name, 0, 0);
}

static size_t replies_left(const client_t *c) {
    return c->nreplies - c->rhead;
}

static lock_reply_t next_reply(client_t *c) {
    ck_assert_msg(replies_left(c) > 0, "client %" PRIu64 ": no reply (sent %u, answered %u)",
                  c->id, c->sent, c->answered);
    return c->replies[c->rhead++ % MAX_LOG];
}

static void no_reply(const client_t *c) {
    ck_assert_msg(replies_left(c) == 0, "client %" PRIu64 ": unexpected %s reply", c->id,
                  kind_name(c->replies[c->rhead % MAX_LOG].kind));
}

static uint64_t expect_granted(client_t *c, long long holds) {
    lock_reply_t r = next_reply(c);
    ck_assert_msg(r.kind == LOCK_REPLY_GRANTED, "client %" PRIu64 ": %s (%s), want GRANTED",
                  c->id, kind_name(r.kind), r.detail ? r.detail : "");
    ck_assert_int_eq(r.holds, holds);
    ck_assert_uint_gt(r.fence, 0);
    return r.fence;
}

static void expect_value(client_t *c, long long v) {
    lock_reply_t r = next_reply(c);
    ck_assert_msg(r.kind == LOCK_REPLY_VALUE, "client %" PRIu64 ": %s (%s), want VALUE %lld",
                  c->id, kind_name(r.kind), r.detail ? r.detail : "", v);
    ck_assert_int_eq(r.value, v);
}

static void expect_timeout(client_t *c, long long ttl) {
    lock_reply_t r = next_reply(c);
    ck_assert_msg(r.kind == LOCK_REPLY_TIMEOUT, "client %" PRIu64 ": %s, want TIMEOUT", c->id,
                  kind_name(r.kind));
    ck_assert_int_eq(r.ttl_ms, ttl);
}

static lock_reply_t expect_error(client_t *c, lock_err_t err) {
    lock_reply_t r = next_reply(c);
    ck_assert_msg(r.kind == LOCK_REPLY_ERROR, "client %" PRIu64 ": %s, want ERROR %d", c->id,
                  kind_name(r.kind), (int)err);
    ck_assert_int_eq(r.err, err);
    return r;
}

static void expect_event(client_t *c, const char *name, lock_loss_t why) {
    ck_assert_msg(c->ehead < c->nevents, "client %" PRIu64 ": no !LOST %s", c->id, name);
    ck_assert_str_eq(c->events[c->ehead % MAX_LOG].name, name);
    ck_assert_int_eq(c->events[c->ehead % MAX_LOG].why, why);
    c->ehead++;
}

static void no_event(const client_t *c) {
    ck_assert_msg(c->ehead == c->nevents, "client %" PRIu64 ": unexpected !LOST %s (%d)", c->id,
                  c->events[c->ehead % MAX_LOG].name, (int)c->events[c->ehead % MAX_LOG].why);
}

/* LOCK on a name the fake grants; returns the fence. */
static uint64_t lock_ok(client_t *c, const char *name, uint32_t lease_ms) {
    ck_assert_int_eq(lock_req(c, name, lease_ms), 0);
    fake_settle(fb);
    return expect_granted(c, 1);
}

static lockmgr_stats_t stats(void) {
    lockmgr_stats_t s;
    lockmgr_stats(mgr, &s);
    return s;
}

static size_t submitted(backend_op_kind_t kind) {
    return (size_t)fake_stats(fb)->submitted[kind];
}

static uint64_t now(void) {
    return timers_now(tm);
}

/* The op at position i of the fake's queue is kind on name for c. */
static void queued_is(size_t i, backend_op_kind_t kind, const char *name, const client_t *c) {
    const backend_op_t *op = fake_queued_op(fb, i);
    ck_assert_msg(op != NULL, "no op at queue position %zu (%zu queued)", i, fake_queued(fb));
    ck_assert_int_eq(op->kind, kind);
    ck_assert_uint_eq(op->len, strlen(name));
    ck_assert_int_eq(memcmp(op->name, name, op->len), 0);
    if (c != NULL) ck_assert_uint_eq(op->owner, c->id);
}

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
    ck_assert_uint_eq(fence, FAKE_FENCE_START);
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
    ck_assert_uint_eq(g, FAKE_FENCE_START);
    ck_assert_int_eq(unlock_req(a, "f"), 1);
    expect_value(a, 0);
    fake_settle(fb);
    fake_take(fb, "f", "other", 100);
    timers_advance(tm, 100); /* the foreign hold expires */
    uint64_t f5 = lock_ok(a, "f", 0);
    ck_assert_uint_eq(f5, f3 + 2);
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

    ck_assert_int_eq(request(b, LOCK_REQ_TRYLOCK, "t", 0, 0), 1);
    expect_timeout(b, LEASE - 500); /* the local holder's lease left */
    ck_assert_uint_eq(fake_log_len(fb), ops); /* no backend call */
    ck_assert_uint_eq(stats().timeouts, 1);
    ck_assert_uint_eq(stats().waiters, 0);
}
END_TEST

START_TEST(test_trylock_zero_foreign_holder) {
    client_t *b = client();
    fake_take(fb, "t", "other", 4000);
    ck_assert_int_eq(request(b, LOCK_REQ_TRYLOCK, "t", 0, 0), 0);
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
    ck_assert_int_eq(request(b, LOCK_REQ_TRYLOCK, "t", 700, 0), 0);
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
    ck_assert_int_eq(request(b, LOCK_REQ_TRYLOCK, "t", 500, 0), 0);
    fake_settle(fb);
    ck_assert(fake_watched(fb, "t"));
    timers_advance(tm, 499);
    no_reply(b);
    timers_advance(tm, 1);
    expect_timeout(b, 10000); /* as Redis last said */
    ck_assert(!fake_watched(fb, "t"));
    ck_assert_uint_eq(stats().waiters, 0);
    ck_assert_uint_eq(stats().timeouts, 1);
    timers_advance(tm, 20000); /* the retry timer went with the waiter */
    ck_assert_uint_eq(fake_queued(fb), 0);
}
END_TEST

START_TEST(test_trylock_wait_granted_in_time) {
    client_t *b = client();
    fake_take(fb, "t", "other", 300);
    ck_assert_int_eq(request(b, LOCK_REQ_TRYLOCK, "t", 1000, 0), 0);
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
    ck_assert_int_eq(request(a, LOCK_REQ_RENEW, "m", 0, 9000), 1);
    expect_error(a, LOCK_ERR_ARGS);
}
END_TEST

START_TEST(test_renew_request) {
    client_t *a = client();
    lock_ok(a, "x", 2000);
    timers_advance(tm, 1500);
    ck_assert_int_eq(request(a, LOCK_REQ_RENEW, "x", 0, 5000), 0);
    queued_is(0, BACKEND_RENEW, "x", a);
    ck_assert_uint_eq(fake_queued_op(fb, 0)->lease_ms, 5000);
    fake_run(fb);
    expect_value(a, 5000);
    ck_assert_int_eq(fake_pttl(fb, "x"), 5000);
    timers_advance(tm, 4999);
    no_event(a);
    /* RENEW without a lease takes the hold's own. */
    ck_assert_int_eq(request(a, LOCK_REQ_RENEW, "x", 0, 0), 0);
    ck_assert_uint_eq(fake_queued_op(fb, 0)->lease_ms, 5000);
    fake_run(fb);
    expect_value(a, 5000);
    timers_advance(tm, 4999);
    no_event(a);
    timers_advance(tm, 1);
    expect_event(a, "x", LOCK_LOST_EXPIRED);

    ck_assert_int_eq(request(a, LOCK_REQ_RENEW, "x", 0, 0), 1);
    expect_error(a, LOCK_ERR_NOTHELD);
    ck_assert_int_eq(request(a, LOCK_REQ_RENEW, "nothere", 0, 0), 1);
    expect_error(a, LOCK_ERR_NOTHELD);

    lock_ok(a, "wd", 0);
    ck_assert_int_eq(request(a, LOCK_REQ_RENEW, "wd", 0, 0), 0);
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
    return request(c, LOCK_REQ_RENEW, name, 0, lease_ms);
}

/* The fake answers everything as it comes, for ms, in steps of 10. */
static void run_for(uint64_t ms) {
    for (uint64_t t = 0; t < ms; t += 10) {
        timers_advance(tm, 10);
        fake_settle(fb);
    }
}

/* c's hold on name is kept by the watchdog: renewed with the conf's lease
 * for many leases, no !LOST, Redis's TTL never below one period's worth. */
static void stays_watchdog(client_t *c, const char *name) {
    size_t mark = fake_log_len(fb);
    for (int step = 0; step < 40; step++) { /* 4 leases */
        run_for(300);
        no_event(c);
        EXPECT(fake_pttl(fb, name) > (long long)(LEASE - EVERY - 400),
               "%s: PTTL %lld, not kept by the watchdog", name, fake_pttl(fb, name));
    }
    ck_assert_uint_ge(fake_log_count(fb, mark, BACKEND_RENEW), 4 * LEASE / EVERY - 1);
    for (size_t i = mark; i < fake_log_len(fb); i++)
        EXPECT(fake_log(fb, i)->kind != BACKEND_RENEW || fake_log(fb, i)->lease_ms == LEASE,
               "renewal %zu with lease %u", i, fake_log(fb, i)->lease_ms);
    ck_assert_int_gt(fake_holds(fb, c->id, name), 0);
}

/* The issue's first case: RENEW w 2000 on a watchdog lock made it a 2 s
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
            if (try) ck_assert_int_eq(request(a, LOCK_REQ_TRYLOCK, name, 0, leases[i]), 0);
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

/* The issue's second case: a reentrant LOCK without a lease on a hold with
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
        if (try) ck_assert_int_eq(request(a, LOCK_REQ_TRYLOCK, name, 1000, 0), 0);
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
    ck_assert_int_eq(request(a, LOCK_REQ_TRYLOCK, "down", 0, 2000), 0);
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
    ck_assert_int_eq(request(a, LOCK_REQ_RENEW, "x", 0, 0), 0);
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
    ck_assert_uint_eq(f, FAKE_FENCE_START + 1);
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
    ck_assert_int_eq(request(c, LOCK_REQ_TRYLOCK, "x", 100, 0), 0);
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
    ck_assert_int_eq(request(a, LOCK_REQ_STATUS, "s", 0, 0), 0);
    queued_is(0, BACKEND_STATUS, "s", a);
    fake_run(fb);
    lock_reply_t r = next_reply(a);
    ck_assert_int_eq(r.kind, LOCK_REPLY_FREE);

    fake_take(fb, "s", "other", 5000);
    timers_advance(tm, 1000);
    ck_assert_int_eq(request(a, LOCK_REQ_STATUS, "s", 0, 0), 0);
    fake_run(fb);
    r = next_reply(a);
    ck_assert_int_eq(r.kind, LOCK_REPLY_TAKEN);
    ck_assert_int_eq(r.ttl_ms, 4000);

    uint64_t fence = lock_ok(b, "m", 0);
    ck_assert_int_eq(lock_req(b, "m", 0), 0);
    fake_run(fb);
    expect_granted(b, 2);
    timers_advance(tm, 400);
    ck_assert_int_eq(request(b, LOCK_REQ_STATUS, "m", 0, 0), 0);
    fake_run(fb);
    r = next_reply(b);
    ck_assert_int_eq(r.kind, LOCK_REPLY_MINE);
    ck_assert_int_eq(r.holds, 2);
    ck_assert_int_eq(r.ttl_ms, LEASE - 400);
    ck_assert_uint_eq(r.fence, fence);

    /* Someone else's lock, from this daemon: TAKEN. */
    ck_assert_int_eq(request(a, LOCK_REQ_STATUS, "m", 0, 0), 0);
    fake_run(fb);
    r = next_reply(a);
    ck_assert_int_eq(r.kind, LOCK_REPLY_TAKEN);
    ck_assert_int_eq(r.ttl_ms, LEASE - 400);

    /* MINE here but gone in Redis: !LOST, and the truth. */
    fake_expire(fb, "m");
    ck_assert_int_eq(request(b, LOCK_REQ_STATUS, "m", 0, 0), 0);
    fake_run(fb);
    expect_event(b, "m", LOCK_LOST_EXPIRED);
    r = next_reply(b);
    ck_assert_int_eq(r.kind, LOCK_REPLY_FREE);
}
END_TEST

START_TEST(test_force_denied_for_non_admin) {
    client_t *a = client(), *u = client_uid(1000);
    lock_ok(a, "f", 0);
    size_t ops = fake_log_len(fb);
    ck_assert_int_eq(request(u, LOCK_REQ_FORCE, "f", 0, 0), 1);
    lock_reply_t r = expect_error(u, LOCK_ERR_DENIED);
    ck_assert_ptr_nonnull(r.detail);
    ck_assert_uint_eq(fake_log_len(fb), ops);
    no_event(a);
    ck_assert_uint_eq(lockmgr_owner_held(a->o), 1);
}
END_TEST

START_TEST(test_force_by_root) {
    client_t *a = client(), *w = client(), *root = client_uid(0);
    lock_ok(a, "f", 0);
    ck_assert_int_eq(lock_req(w, "f", 0), 0);
    ck_assert_int_eq(request(root, LOCK_REQ_FORCE, "f", 0, 0), 0);
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
    ck_assert_int_eq(request(root, LOCK_REQ_FORCE, "free", 0, 0), 0);
    fake_run(fb);
    expect_value(root, 0);
}
END_TEST

START_TEST(test_force_by_admin_uid) {
    client_t *adm = client_uid(4242), *other = client_uid(4343);
    conf.admin_uids[conf.admin_uids_count++] = 4242;
    fake_take(fb, "f", "other", 5000);
    ck_assert_int_eq(request(adm, LOCK_REQ_FORCE, "f", 0, 0), 0);
    fake_run(fb);
    expect_value(adm, 1);
    ck_assert_int_eq(fake_pttl(fb, "f"), -2);
    ck_assert_int_eq(request(other, LOCK_REQ_FORCE, "f", 0, 0), 1);
    expect_error(other, LOCK_ERR_DENIED);
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
    ck_assert_ptr_nonnull(r.detail);
    ck_assert_ptr_nonnull(strstr(r.detail, "max_locks_per_client"));
    ck_assert_int_eq(request(a, LOCK_REQ_TRYLOCK, "l3", 0, 0), 1);
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
    ck_assert_ptr_nonnull(strstr(r.detail, "max_waiters"));
    ck_assert_uint_eq(stats().waiters, 2);
    drop(b);
    ck_assert_int_eq(lock_req(d, "w", 0), 0);
    ck_assert_uint_eq(stats().waiters, 2);
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
    ck_assert_int_eq(request(a, LOCK_REQ_TRYLOCK, "x", 100, 0), 1);
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

/* ---- WHO ----------------------------------------------------------------------------- */

/* A holder of this daemon is named from memory, with its pid and uid; a
 * holder elsewhere is asked of Redis, and one no dlockd registered (the
 * fake registers none) has no host or pid. */
START_TEST(test_who) {
    client_t *a = client_uid(4242), *b = client();
    lockmgr_owner_set_pid(a->o, 777);
    lock_ok(a, "w", 0);
    size_t before = fake_stats(fb)->submitted[BACKEND_WHO];
    ck_assert_int_eq(request(b, LOCK_REQ_WHO, "w", 0, 0), 1);
    lock_reply_t r = next_reply(b);
    ck_assert_int_eq(r.kind, LOCK_REPLY_HELD);
    ck_assert_int_eq(r.holder_pid, 777);
    ck_assert_int_eq(r.holder_uid, 4242);
    ck_assert_int_eq(r.holder_dlockd_pid, (long long)getpid());
    ck_assert_str_ne(r.holder_host, "");
    ck_assert_int_gt(r.ttl_ms, 0);
    ck_assert_uint_eq(fake_stats(fb)->submitted[BACKEND_WHO], before); /* no Redis */

    fake_take(fb, "x", "someone-else:1", 5000);
    ck_assert_int_eq(request(b, LOCK_REQ_WHO, "x", 0, 0), 0);
    fake_run(fb);
    r = next_reply(b);
    ck_assert_int_eq(r.kind, LOCK_REPLY_HELD);
    ck_assert_int_eq(r.ttl_ms, 5000);
    ck_assert_int_eq(r.holder_dlockd_pid, -1);
    ck_assert_int_eq(r.holder_pid, -1);
    ck_assert_int_eq(r.holder_uid, -1);

    ck_assert_int_eq(request(b, LOCK_REQ_WHO, "free", 0, 0), 0);
    fake_run(fb);
    ck_assert_int_eq(next_reply(b).kind, LOCK_REPLY_FREE);
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
    ck_assert_int_eq(request(a, LOCK_REQ_TRYLOCK, "u", 0, 0), 0);
    fake_unack_next(fb, UNACKED);
    fake_run(fb);
    lock_reply_t r = expect_error(a, LOCK_ERR_BACKEND);
    ck_assert_str_eq(r.detail, UNACKED);
    fake_settle(fb);
    ck_assert_int_eq(fake_pttl(fb, "u"), -2);
    /* A wait that runs out after refusals says why, not TIMEOUT. */
    ck_assert_int_eq(request(a, LOCK_REQ_TRYLOCK, "u", 150, 0), 0);
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

/* ---- shutdown ---------------------------------------------------------------- */

static void on_done(lockmgr_t *m, void *data) {
    ck_assert_ptr_eq(m, mgr);
    ck_assert_ptr_eq(data, &done_calls);
    ck_assert_msg(!in_done, "done called from inside lockmgr_shutdown");
    done_calls++;
}

static void shutdown_now(void) {
    in_done = 1;
    lockmgr_shutdown(mgr, on_done, &done_calls);
    in_done = 0;
}

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
    lock_req_kind_t kind;
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
        EXPECT(i >= 0, "client %" PRIu64 ": a %s reply to no request", c->id, kind_name(r.kind));
        switch (r.kind) {
        case LOCK_REPLY_GRANTED:
            EXPECT(m->kind == LOCK_REQ_LOCK || m->kind == LOCK_REQ_TRYLOCK,
                   "GRANTED for request kind %d", (int)m->kind);
            EXPECT(r.holds == m->holds[i] + 1,
                   "client %" PRIu64 ": GRANTED %s holds %lld, had %lld", c->id, mix_names[i],
                   r.holds, m->holds[i]);
            m->holds[i] = r.holds;
            break;
        case LOCK_REPLY_VALUE:
            if (m->kind == LOCK_REQ_UNLOCK) {
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
                   kind_name(r.kind), mix_names[i], m->holds[i]);
            break;
        case LOCK_REPLY_ERROR:
            if (m->kind == LOCK_REQ_FORCE && r.err == LOCK_ERR_BACKEND) force_unknown[i] = 1;
            if (r.err == LOCK_ERR_NOTHELD && m->kind == LOCK_REQ_UNLOCK)
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

static void mix_request(mix_t *m, lock_req_kind_t kind, int i, uint32_t wait_ms,
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
    static const lock_req_kind_t kinds[] = {
        LOCK_REQ_LOCK,   LOCK_REQ_LOCK,  LOCK_REQ_TRYLOCK, LOCK_REQ_UNLOCK,
        LOCK_REQ_UNLOCK, LOCK_REQ_RENEW, LOCK_REQ_STATUS,  LOCK_REQ_FORCE};
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
                    mix_request(m, LOCK_REQ_UNLOCK, n, 0, 0);
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

/* ---- read/write locks ---------------------------------------------------------
 * RLOCK, WLOCK, RUNLOCK, WUNLOCK (and TRYRLOCK, TRYWLOCK) are LOCK, TRYLOCK
 * and UNLOCK of mode READ or WRITE; every backend op of theirs carries that
 * mode, and the fake answers it as script_rw would (fake_backend.h). */

static int rlock_req(client_t *c, const char *name, uint32_t lease_ms) {
    return request_mode(c, LOCK_REQ_LOCK, LOCK_MODE_READ, name, 0, lease_ms);
}

static int wlock_req(client_t *c, const char *name, uint32_t lease_ms) {
    return request_mode(c, LOCK_REQ_LOCK, LOCK_MODE_WRITE, name, 0, lease_ms);
}

static int runlock_req(client_t *c, const char *name) {
    return request_mode(c, LOCK_REQ_UNLOCK, LOCK_MODE_READ, name, 0, 0);
}

static int wunlock_req(client_t *c, const char *name) {
    return request_mode(c, LOCK_REQ_UNLOCK, LOCK_MODE_WRITE, name, 0, 0);
}

static uint64_t rlock_ok(client_t *c, const char *name, uint32_t lease_ms) {
    ck_assert_int_eq(rlock_req(c, name, lease_ms), 0);
    fake_settle(fb);
    return expect_granted(c, 1);
}

static uint64_t wlock_ok(client_t *c, const char *name, uint32_t lease_ms) {
    ck_assert_int_eq(wlock_req(c, name, lease_ms), 0);
    fake_settle(fb);
    return expect_granted(c, 1);
}

/* c's field in the fake's lock hash (a reader's; a writer's adds ":write"). */
static const char *field_of(const client_t *c) {
    static char buf[4][32];
    static unsigned k;
    char *f = buf[k++ % 4];
    snprintf(f, sizeof(buf[0]), "o%" PRIu64, c->id);
    return f;
}

/* The op at position i of the fake's queue is kind of mode on name for c. */
static void queued_mode_is(size_t i, backend_op_kind_t kind, backend_mode_t mode,
                           const char *name, const client_t *c) {
    queued_is(i, kind, name, c);
    ck_assert_int_eq(fake_queued_op(fb, i)->mode, mode);
}

/* Entry i of the op log is kind of mode on name for c. */
static void logged_is(size_t i, backend_op_kind_t kind, backend_mode_t mode, const char *name,
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
    ck_assert_msg(r.kind == LOCK_REPLY_RW, "client %" PRIu64 ": %s (%s), want RW", c->id,
                  kind_name(r.kind), r.detail ? r.detail : "");
    ck_assert_int_eq(r.mode, mode);
    ck_assert_int_eq(r.holders, holders);
    ck_assert_int_eq(r.holds, holds);
    ck_assert_int_eq(r.ttl_ms, ttl);
}

static void detail_has(const lock_reply_t *r, const char *text) {
    ck_assert_msg(r->detail != NULL && strstr(r->detail, text) != NULL,
                  "detail \"%s\" lacks \"%s\"", r->detail ? r->detail : "(null)", text);
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
    ck_assert_int_eq(request_mode(t, LOCK_REQ_TRYLOCK, LOCK_MODE_READ, "rq", 0, 0), 0);
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
    ck_assert_int_eq(request_mode(u, LOCK_REQ_TRYLOCK, LOCK_MODE_READ, "rq2", 0, 0), 1);
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
    ck_assert_ptr_nonnull(strstr(r.detail, "max_locks_per_client"));
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
    ck_assert_uint_eq(fa, FAKE_FENCE_START - 1); /* not raised */
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
    ck_assert_int_eq(request_mode(t, LOCK_REQ_TRYLOCK, LOCK_MODE_READ, "q", 0, 0), 1);
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
    ck_assert_int_eq(request_mode(r, LOCK_REQ_TRYLOCK, LOCK_MODE_READ, "lq", 500, 0), 0);
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
    ck_assert_uint_eq(f, FAKE_FENCE_START);
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
    ck_assert_int_eq(request(a, LOCK_REQ_STATUS, "d", 0, 0), 0);
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
    detail_has(&r, "upgrade");
    ck_assert_int_eq(request_mode(a, LOCK_REQ_TRYLOCK, LOCK_MODE_WRITE, "u", 500, 0), 1);
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
    detail_has(&r, "plain");
    ck_assert_int_eq(wlock_req(b, "p", 0), 1);
    expect_error(b, LOCK_ERR_KIND);
    ck_assert_int_eq(request_mode(b, LOCK_REQ_TRYLOCK, LOCK_MODE_READ, "p", 0, 0), 1);
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
    detail_has(&r, "read/write");
    ck_assert_int_eq(request(d, LOCK_REQ_TRYLOCK, "q", 100, 0), 1);
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
    detail_has(&r, "plain");
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
    detail_has(&r, "read/write");
    ck_assert_uint_eq(stats().waiters, 0);
    fake_settle(fb);
    ck_assert_uint_eq(fake_queued(fb), 0);
    ck_assert_int_eq(fake_holds_field(fb, "other", "y"), 1);
    ck_assert_int_eq(fake_holds(fb, b->id, "y"), 0);
    ck_assert_uint_eq(fake_watch_calls(fb, "y"), 0);
    /* and a TRYWLOCK on a foreign plain lock */
    fake_take(fb, "x", "other", 5000);
    ck_assert_int_eq(request_mode(b, LOCK_REQ_TRYLOCK, LOCK_MODE_WRITE, "x", 1000, 0), 0);
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

    ck_assert_int_eq(request(a, LOCK_REQ_STATUS, "s", 0, 0), 0);
    queued_mode_is(0, BACKEND_STATUS, BACKEND_READ, "s", a);
    fake_run(fb);
    expect_rw(a, LOCK_MODE_READ, 2, 2, LEASE - 400);
    ck_assert_int_eq(request(c, LOCK_REQ_STATUS, "s", 0, 0), 0); /* holds nothing */
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
    ck_assert_int_eq(request(c, LOCK_REQ_STATUS, "s", 0, 0), 0);
    fake_run(fb);
    ck_assert_int_eq(next_reply(c).kind, LOCK_REPLY_FREE);

    wlock_ok(w, "s", 0);
    ck_assert_int_eq(request(w, LOCK_REQ_STATUS, "s", 0, 0), 0);
    queued_mode_is(0, BACKEND_STATUS, BACKEND_WRITE, "s", w);
    fake_run(fb);
    expect_rw(w, LOCK_MODE_WRITE, 1, 1, LEASE);
    ck_assert_int_eq(request(c, LOCK_REQ_STATUS, "s", 0, 0), 0);
    fake_run(fb);
    expect_rw(c, LOCK_MODE_WRITE, 1, 0, LEASE);
    /* A downgraded writer: its write holds, and the mode is still WRITE. */
    ck_assert_int_eq(wlock_req(w, "s", 0), 0);
    fake_run(fb);
    expect_granted(w, 2);
    ck_assert_int_eq(rlock_req(w, "s", 0), 0);
    fake_run(fb);
    expect_granted(w, 1);
    ck_assert_int_eq(request(w, LOCK_REQ_STATUS, "s", 0, 0), 0);
    fake_run(fb);
    expect_rw(w, LOCK_MODE_WRITE, 1, 2, LEASE);
    no_event(w);

    /* Foreign readers only. */
    fake_take_rw(fb, "f", "x1", BACKEND_READ, 5000);
    fake_take_rw(fb, "f", "x2", BACKEND_READ, 5000);
    ck_assert_int_eq(request(c, LOCK_REQ_STATUS, "f", 0, 0), 0);
    fake_run(fb);
    expect_rw(c, LOCK_MODE_READ, 2, 0, 5000);

    /* A read hold Redis no longer has: !LOST, and the truth. */
    rlock_ok(b, "g", 0);
    fake_expire(fb, "g");
    ck_assert_int_eq(request(b, LOCK_REQ_STATUS, "g", 0, 0), 0);
    fake_run(fb);
    expect_event(b, "g", LOCK_LOST_EXPIRED);
    ck_assert_int_eq(next_reply(b).kind, LOCK_REPLY_FREE);
    ck_assert_uint_eq(lockmgr_owner_held(b->o), 0);
}
END_TEST

/* A topology without BACKEND_CAP_RW (quorum): read/write requests get ERR
 * KIND at once; plain locks work as ever. */
START_TEST(test_rw_needs_backend_cap) {
    client_t *a = client();
    fake_set_caps(fb, fake_backend(fb)->caps & ~BACKEND_CAP_RW);

    ck_assert_int_eq(rlock_req(a, "c", 0), 1);
    lock_reply_t r = expect_error(a, LOCK_ERR_KIND);
    detail_has(&r, "fake");
    ck_assert_int_eq(wlock_req(a, "c", 0), 1);
    expect_error(a, LOCK_ERR_KIND);
    ck_assert_int_eq(request_mode(a, LOCK_REQ_TRYLOCK, LOCK_MODE_READ, "c", 100, 0), 1);
    expect_error(a, LOCK_ERR_KIND);
    ck_assert_int_eq(request_mode(a, LOCK_REQ_TRYLOCK, LOCK_MODE_WRITE, "c", 0, 0), 1);
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
    for (int i = 0; i < 3; i++) ck_assert_uint_eq(expect_granted(r[i], 1), FAKE_FENCE_START);
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
    ck_assert_int_eq(request(root, LOCK_REQ_FORCE, "fr", 0, 0), 0);
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
                  replies_left(a) && a->replies[a->rhead % MAX_LOG].kind == LOCK_REPLY_GRANTED
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

/* ---- semaphores ----------------------------------------------------------------
 * SEMINIT, ACQUIRE, TRYACQUIRE and RELEASE are LOCK_REQ_SEMINIT, LOCK,
 * TRYLOCK and UNLOCK of mode SEM with permits; the fake answers them as
 * script_sem and LUA_SEM_RENEW would (fake_backend.h). A connection's
 * permits of a name are one hold, its ids <owner>:1 .. <owner>:count in
 * Redis; more permits extend it, RELEASE gives back the top ones. The
 * cases check, where it matters, that Redis's permits available plus its
 * ids stay the size (sem_consistent) and that every permit a connection
 * believes it holds is an unexpired id of its own (sem_ids_are). */

static int acquire_req(client_t *c, const char *name, uint32_t permits, uint32_t lease_ms) {
    return request_permits(c, LOCK_REQ_LOCK, LOCK_MODE_SEM, name, 0, lease_ms, permits);
}

static int tryacquire_req(client_t *c, const char *name, uint32_t permits, uint32_t wait_ms,
                          uint32_t lease_ms) {
    return request_permits(c, LOCK_REQ_TRYLOCK, LOCK_MODE_SEM, name, wait_ms, lease_ms, permits);
}

static int release_req(client_t *c, const char *name, uint32_t permits) {
    return request_permits(c, LOCK_REQ_UNLOCK, LOCK_MODE_SEM, name, 0, 0, permits);
}

static int seminit_req(client_t *c, const char *name, uint32_t size) {
    return request_permits(c, LOCK_REQ_SEMINIT, LOCK_MODE_SEM, name, 0, 0, size);
}

/* c's ids of name in Redis are exactly 1..n, all unexpired. */
static void sem_ids_are(const client_t *c, const char *name, long long n) {
    ck_assert_msg(fake_sem_ids_are(fb, name, c->id, n),
                  "client %" PRIu64 ": %zu ids of %s in Redis, want exactly 1..%lld unexpired",
                  c->id, fake_sem_ids(fb, name, c->id), name, n);
}

/* Redis's permits available plus its ids (of anyone, expired too) are the size. */
static void sem_consistent(const char *name, long long size) {
    long long avail = fake_sem_available(fb, name);
    size_t card = fake_sem_card(fb, name);
    ck_assert_msg(avail + (long long)card == size, "%s: %lld available + %zu ids, size %lld",
                  name, avail, card, size);
}

/* ACQUIRE that the fake grants at once: c holds held permits then. */
static void acquire_ok(client_t *c, const char *name, uint32_t permits, uint32_t lease_ms,
                       long long held) {
    ck_assert_int_eq(acquire_req(c, name, permits, lease_ms), 0);
    fake_settle(fb);
    expect_value(c, held);
    sem_ids_are(c, name, held);
}

static void expect_sem(client_t *c, long long available, long long mine) {
    lock_reply_t r = next_reply(c);
    ck_assert_msg(r.kind == LOCK_REPLY_SEM, "client %" PRIu64 ": %s (%s), want SEM", c->id,
                  kind_name(r.kind), r.detail ? r.detail : "");
    ck_assert_int_eq(r.holders, available);
    ck_assert_int_eq(r.holds, mine);
}

static void sem_status_is(client_t *c, const char *name, long long available, long long mine) {
    ck_assert_int_eq(request(c, LOCK_REQ_STATUS, name, 0, 0), 0);
    fake_run(fb);
    expect_sem(c, available, mine);
}

/* The op at position i of the fake's queue is a semaphore op of kind on
 * name for c, of permits after base. A renewal's ids are always 1..permits
 * (LUA_SEM_RENEW reads no base; the watchdog leaves the field unset). */
static void sem_queued(size_t i, backend_op_kind_t kind, const char *name, const client_t *c,
                       uint32_t base, uint32_t permits) {
    queued_mode_is(i, kind, BACKEND_SEM, name, c);
    if (kind != BACKEND_RENEW) ck_assert_uint_eq(fake_queued_op(fb, i)->permit_base, base);
    ck_assert_uint_eq(fake_queued_op(fb, i)->permits, permits);
}

/* Ops of kind for c in the log from position from on. */
static size_t logged_for(size_t from, backend_op_kind_t kind, const client_t *c) {
    size_t n = 0;
    for (size_t i = from; i < fake_log_len(fb); i++)
        if (fake_log(fb, i)->kind == kind && fake_log(fb, i)->owner == c->id) n++;
    return n;
}

/* SEMINIT sets the size once; of a lock (in Redis, or held here) it is ERR KIND. */
START_TEST(test_sem_seminit) {
    client_t *a = client(), *b = client();
    ck_assert_int_eq(seminit_req(a, "s", 5), 0);
    sem_queued(0, BACKEND_SEMINIT, "s", a, 0, 5);
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
    detail_has(&r, "plain");
    ck_assert_int_eq(fake_holds_field(fb, "other", "p"), 1);
    ck_assert_int_eq(fake_sem_available(fb, "p"), -1);

    lock_ok(b, "q", 0); /* a lock held here: refused before Redis */
    size_t ops = fake_log_len(fb);
    ck_assert_int_eq(seminit_req(a, "q", 5), 1);
    r = expect_error(a, LOCK_ERR_KIND);
    detail_has(&r, "plain");
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
    ck_assert_int_eq(request(c, LOCK_REQ_STATUS, "nothing", 0, 0), 0);
    fake_run(fb);
    ck_assert_int_eq(next_reply(c).kind, LOCK_REPLY_FREE);
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
    detail_has(&r, "max_locks_per_client");
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
    detail_has(&r, "holds 2 permits");
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
    detail_has(&r, "semaphore");
    ck_assert_int_eq(rlock_req(b, "s", 0), 1);
    expect_error(b, LOCK_ERR_KIND);
    ck_assert_int_eq(wlock_req(b, "s", 0), 1);
    expect_error(b, LOCK_ERR_KIND);
    ck_assert_int_eq(request(b, LOCK_REQ_TRYLOCK, "s", 100, 0), 1);
    expect_error(b, LOCK_ERR_KIND);
    ck_assert_int_eq(unlock_req(a, "s"), 1);
    r = expect_error(a, LOCK_ERR_KIND);
    detail_has(&r, "RELEASE gives");
    ck_assert_int_eq(runlock_req(a, "s"), 1);
    expect_error(a, LOCK_ERR_KIND);
    ck_assert_int_eq(request(b, LOCK_REQ_WHO, "s", 0, 0), 1);
    r = expect_error(b, LOCK_ERR_KIND);
    detail_has(&r, "no one holder");

    ck_assert_int_eq(acquire_req(b, "p", 1, 0), 1);
    r = expect_error(b, LOCK_ERR_KIND);
    detail_has(&r, "plain");
    ck_assert_int_eq(tryacquire_req(b, "p", 1, 0, 0), 1);
    expect_error(b, LOCK_ERR_KIND);
    ck_assert_int_eq(seminit_req(b, "p", 3), 1);
    expect_error(b, LOCK_ERR_KIND);
    ck_assert_int_eq(release_req(c, "p", 1), 1);
    r = expect_error(c, LOCK_ERR_KIND);
    detail_has(&r, "UNLOCK");
    ck_assert_int_eq(acquire_req(b, "r", 1, 0), 1);
    r = expect_error(b, LOCK_ERR_KIND);
    detail_has(&r, "read/write");
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
    detail_has(&r, "semaphore");
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
    detail_has(&r, "plain");
    ck_assert_uint_eq(stats().waiters, 0);
    ck_assert_uint_eq(fake_queued(fb), 0);
    ck_assert_uint_eq(fake_watch_calls(fb, "z"), 0);
    ck_assert_int_eq(fake_holds_field(fb, "other", "z"), 1);
    ck_assert_int_eq(fake_sem_available(fb, "z"), -1);

    fake_take_rw(fb, "y", "other", BACKEND_WRITE, 5000);
    ck_assert_int_eq(tryacquire_req(a, "y", 1, 1000, 0), 0);
    fake_run(fb);
    r = expect_error(a, LOCK_ERR_KIND);
    detail_has(&r, "read/write");
    timers_advance(tm, 1000);
    fake_settle(fb);
    no_reply(a);
    ck_assert_uint_eq(stats().timeouts, 0);

    fake_seminit(fb, "q", 2);
    ck_assert_int_eq(lock_req(b, "q", 0), 0);
    fake_run(fb);
    r = expect_error(b, LOCK_ERR_KIND);
    detail_has(&r, "semaphore");
    ck_assert_int_eq(rlock_req(b, "q", 0), 0);
    fake_run(fb);
    expect_error(b, LOCK_ERR_KIND);
    ck_assert_int_eq(request_mode(b, LOCK_REQ_TRYLOCK, LOCK_MODE_WRITE, "q", 0, 0), 0);
    fake_run(fb);
    expect_error(b, LOCK_ERR_KIND);
    ck_assert_int_eq(request(b, LOCK_REQ_WHO, "q", 0, 0), 0);
    fake_run(fb);
    r = expect_error(b, LOCK_ERR_KIND);
    detail_has(&r, "no one holder");
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
    detail_has(&r, "permits are 1 to 10000");
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
    detail_has(&r, "at most 10000");
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

/* A topology without BACKEND_CAP_SEM (the quorum): ERR KIND, nothing sent. */
START_TEST(test_sem_needs_backend_cap) {
    client_t *a = client();
    fake_set_caps(fb, fake_backend(fb)->caps & ~BACKEND_CAP_SEM);
    ck_assert_int_eq(acquire_req(a, "c", 1, 0), 1);
    lock_reply_t r = expect_error(a, LOCK_ERR_KIND);
    detail_has(&r, "semaphores are not available with fake");
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
    ck_assert_int_eq(request(root, LOCK_REQ_FORCE, "s", 0, 0), 0);
    fake_run(fb);
    expect_value(root, 1);
    expect_event(a, "s", LOCK_LOST_FORCED);
    expect_event(b, "s", LOCK_LOST_FORCED);
    ck_assert_uint_eq(fake_sem_card(fb, "s"), 0);
    ck_assert_int_eq(fake_sem_available(fb, "s"), 5);
    ck_assert_uint_eq(stats().locks_held, 0);
    ck_assert_int_eq(request(root, LOCK_REQ_FORCE, "s", 0, 0), 0);
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
    ck_assert_int_eq(request(a, LOCK_REQ_RENEW, "s", 0, 5000), 0);
    sem_queued(0, BACKEND_RENEW, "s", a, 0, 2);
    ck_assert_uint_eq(fake_queued_op(fb, 0)->lease_ms, 5000);
    fake_run(fb);
    expect_value(a, 5000);
    ck_assert_int_eq(fake_sem_id_pttl(fb, "s", a->id, 1), 5000);
    ck_assert_int_eq(fake_sem_id_pttl(fb, "s", a->id, 2), 5000);
    timers_advance(tm, 4000);
    no_event(a);
    fake_sem_del_id(fb, "s", a->id, 1);
    ck_assert_int_eq(request(a, LOCK_REQ_RENEW, "s", 0, 0), 0);
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

static int fairlock_req(client_t *c, const char *name, uint32_t lease_ms) {
    return request_mode(c, LOCK_REQ_LOCK, LOCK_MODE_FAIR, name, 0, lease_ms);
}

static int tryfair_req(client_t *c, const char *name, uint32_t wait_ms, uint32_t lease_ms) {
    return request_mode(c, LOCK_REQ_TRYLOCK, LOCK_MODE_FAIR, name, wait_ms, lease_ms);
}

/* FAIRLOCK that the fake grants: the fence. */
static uint64_t fair_ok(client_t *c, const char *name, uint32_t lease_ms) {
    ck_assert_int_eq(fairlock_req(c, name, lease_ms), 0);
    fake_settle(fb);
    return expect_granted(c, 1);
}

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

    ck_assert_int_eq(request(a, LOCK_REQ_STATUS, "f", 0, 0), 0);
    queued_mode_is(0, BACKEND_STATUS, BACKEND_FAIR, "f", a);
    fake_run(fb);
    lock_reply_t r = next_reply(a);
    ck_assert_int_eq(r.kind, LOCK_REPLY_MINE);
    ck_assert_int_eq(r.holds, 2);
    ck_assert_uint_eq(r.fence, fence);
    ck_assert_int_eq(request(b, LOCK_REQ_STATUS, "f", 0, 0), 0);
    fake_run(fb);
    r = next_reply(b);
    ck_assert_int_eq(r.kind, LOCK_REPLY_TAKEN);
    ck_assert_int_eq(request(b, LOCK_REQ_WHO, "f", 0, 0), 1); /* held here: from memory */
    ck_assert_int_eq(next_reply(b).kind, LOCK_REPLY_HELD);

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
    ck_assert_uint_eq(asks(mark, c), 1); /* its watch in force */
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
    ck_assert_uint_eq(asks(mark, c), 1); /* the watch moved to c: in force, it asks */
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
    ck_assert_int_eq(request(root, LOCK_REQ_FORCE, "f", 0, 0), 0);
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
 * BACKEND_CAP_FAIR: ERR KIND. In Redis, a FAIRLOCK of a read/write lock or
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
    detail_has(&r, "f is held as a fair lock (FAIRLOCK, UNLOCK)");
    ck_assert_int_eq(request(b, LOCK_REQ_TRYLOCK, "f", 0, 0), 1);
    expect_error(b, LOCK_ERR_KIND);
    ck_assert_int_eq(rlock_req(b, "f", 0), 1);
    expect_error(b, LOCK_ERR_KIND);
    ck_assert_int_eq(wlock_req(b, "f", 0), 1);
    expect_error(b, LOCK_ERR_KIND);
    ck_assert_int_eq(acquire_req(b, "f", 1, 0), 1);
    expect_error(b, LOCK_ERR_KIND);
    ck_assert_int_eq(fairlock_req(b, "p", 0), 1);
    r = expect_error(b, LOCK_ERR_KIND);
    detail_has(&r, "p is held as a plain lock (LOCK, UNLOCK)");
    ck_assert_int_eq(tryfair_req(b, "p", 0, 0), 1);
    expect_error(b, LOCK_ERR_KIND);
    ck_assert_int_eq(tryfair_req(b, "p", 100, 0), 1);
    expect_error(b, LOCK_ERR_KIND);
    ck_assert_int_eq(fairlock_req(b, "r", 0), 1);
    r = expect_error(b, LOCK_ERR_KIND);
    detail_has(&r, "read/write");
    ck_assert_int_eq(fairlock_req(b, "s", 0), 1);
    r = expect_error(b, LOCK_ERR_KIND);
    detail_has(&r, "semaphore");
    ck_assert_uint_eq(fake_log_len(fb), ops);

    /* Waited for only. */
    ck_assert_int_eq(fake_fair_acquire_field(fb, "w", "x", -1, LEASE), BACKEND_GRANTED);
    ck_assert_int_eq(fairlock_req(b, "w", 0), 0);
    fake_settle(fb);
    ops = fake_log_len(fb);
    ck_assert_int_eq(lock_req(c, "w", 0), 1);
    r = expect_error(c, LOCK_ERR_KIND);
    detail_has(&r, "fair lock");
    ck_assert_uint_eq(fake_log_len(fb), ops);
    no_reply(b);

    /* Other kinds in Redis. */
    fake_take_rw(fb, "y", "other", BACKEND_WRITE, 5000);
    ck_assert_int_eq(fairlock_req(d, "y", 0), 0);
    fake_settle(fb);
    r = expect_error(d, LOCK_ERR_KIND);
    detail_has(&r, "read/write");
    fake_seminit(fb, "z", 2);
    ck_assert_int_eq(tryfair_req(d, "z", 1000, 0), 0);
    fake_settle(fb);
    r = expect_error(d, LOCK_ERR_KIND);
    detail_has(&r, "semaphore");
    queue_is("y", "");
    queue_is("z", "");
    ck_assert_uint_eq(leaves(0, d), 0);
    ck_assert(!fake_watched(fb, "y"));
    ck_assert(!fake_watched(fb, "z"));

    /* A topology without fair locks (the quorum). */
    fake_set_caps(fb, fake_backend(fb)->caps & ~BACKEND_CAP_FAIR);
    ops = fake_log_len(fb);
    ck_assert_int_eq(fairlock_req(e, "q", 0), 1);
    r = expect_error(e, LOCK_ERR_KIND);
    detail_has(&r, "fair locks are not available with fake");
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
    detail_has(&r, "fair lock");
    ck_assert_int_eq(wunlock_req(a, "f"), 1);
    r = expect_error(a, LOCK_ERR_KIND);
    detail_has(&r, "fair lock");
    ck_assert_int_eq(release_req(a, "f", 1), 1);
    r = expect_error(a, LOCK_ERR_KIND);
    detail_has(&r, "fair lock");
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

/* Owners without a client_t (their replies are counted, nothing more),
 * for a crowd of waiters; ids from BARE_ID on. */
#define BARE_ID 1000
static unsigned bare_replies;

static void on_bare_reply(void *data, const lock_reply_t *r) {
    (void)data;
    (void)r;
    ck_assert_msg(!in_request, "a reply callback inside lockmgr_request");
    bare_replies++;
}

static void on_bare_event(void *data, const char *name, size_t len, lock_loss_t why) {
    (void)data;
    (void)name;
    (void)len;
    (void)why;
    ck_abort_msg("!LOST for an owner that holds nothing");
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
    lock_request_t req = {.kind = LOCK_REQ_LOCK, .mode = LOCK_MODE_FAIR, .name = "f", .len = 1};
    for (int i = 0; i < N; i++) {
        lock_reply_t at_once;
        w[i] = lockmgr_owner_new(mgr, BARE_ID + (uint64_t)i, 1000, on_bare_reply, on_bare_event,
                                 NULL);
        ck_assert_ptr_nonnull(w[i]);
        in_request = 1;
        ck_assert_int_eq(lockmgr_request(mgr, w[i], &req, &at_once), 0);
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
    tcase_add_test(tc, test_force_denied_for_non_admin);
    tcase_add_test(tc, test_force_by_root);
    tcase_add_test(tc, test_force_by_admin_uid);

    TC("limits");
    tcase_add_test(tc, test_limit_locks_per_client);
    tcase_add_test(tc, test_limit_waiters);
    tcase_add_test(tc, test_backend_down_at_once);

    TC("shutdown");
    tcase_add_test(tc, test_shutdown_idle);
    tcase_add_test(tc, test_shutdown_waits_for_everything);
    tcase_add_test(tc, test_shutdown_while_down);

    TC("rwlock");
    tcase_add_test(tc, test_rw_readers_share_writer_waits);
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

    TC("fair");
    tcase_add_test(tc, test_fair_grant_reentry_unlock);
    tcase_add_test(tc, test_fair_fifo_local);
    tcase_add_test(tc, test_fair_fifo_with_foreign_waiters);
    tcase_add_test(tc, test_fair_only_head_woken);
    tcase_add_test(tc, test_fair_watch_follows_head);
    tcase_add_test(tc, test_fair_keep_alive);
    tcase_add_test(tc, test_fair_trylock_times_out_leaves);
    tcase_add_test(tc, test_fair_owner_drop_leaves);
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
    tcase_add_test(tc, test_fair_many_waiters_take_places);
    tcase_add_test(tc, test_fair_lost_answer_asks_again);
    tcase_add_test(tc, test_fair_try_zero_reentry_takes_no_place);

    TC("replies");
    tcase_add_loop_test(tc, test_every_request_one_reply, 0, MIX_SEEDS);
    tcase_add_loop_test(tc, test_shutdown_after_mix, 0, MIX_SEEDS);
#undef TC
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(lockmgr_suite());
    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
