/* The world of the lock manager's unit tests: conf, manual clock, fake backend, clients, requests.
 * SPDX-License-Identifier: MIT
 *
 * Shared by tests/unit/test_lockmgr*.c (one per lock kind, and the core):
 * the fixture (setup, teardown), the clients that record their replies and
 * !LOST events, the requests of every kind, and the expectations more than
 * one of those files uses. */
#include "tests/unit/lockmgr_support.h"

#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/log.h"

/* ---- the world: conf, clock, fake backend, lock manager ---------------------- */

conf_t conf;
timers_t *tm;
fake_t *fb;
lockmgr_t *mgr;
int in_request;                  /* inside lockmgr_request() now */
int done_calls;                  /* lockmgr_shutdown's done */
static int in_done;
uint64_t seq;                    /* orders replies and events of all clients */

client_t clients[MAX_CLIENTS];
size_t nclients;

const char *reply_type_name(lock_reply_type_t k) {
    static const char *const names[] = {"GRANTED", "VALUE", "TIMEOUT", "FREE",
                                        "TAKEN",   "MINE",  "RW",      "SEM",
                                        "HELD",    "LEADER", "LIST",   "ERROR"};
    return (unsigned)k < sizeof(names) / sizeof(names[0]) ? names[k] : "?";
}

static void record(client_t *c, const lock_reply_t *r) {
    ck_assert_msg(c->pending == 1, "client %" PRIu64 ": a %s reply with no request in flight",
                  c->id, reply_type_name(r->type));
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
    if (r->type == LOCK_REPLY_LEADER && r->leader != NULL) { /* the same */
        snprintf(c->names[k], DETAIL_LEN, "%.*s", (int)r->leader_len, r->leader);
        c->replies[k].leader = c->names[k];
    }
    if (r->type == LOCK_REPLY_LIST) { /* valid during the callback only */
        ck_assert_uint_le(r->count, LIST_KEEP);
        memcpy(c->lists[k], r->list, r->count * sizeof(r->list[0]));
        c->replies[k].list = c->lists[k];
    }
    if (r->name != NULL) { /* valid during the callback only */
        snprintf(c->names[k], DETAIL_LEN, "%.*s", (int)r->len, r->name);
        c->replies[k].name = c->names[k];
    }
    c->nreplies++;
}


static void on_reply(void *data, void *call, const lock_reply_t *r) {
    client_t *c = data;
    ck_assert_msg(call == c, "client %" PRIu64 ": a reply for another call", c->id);
    ck_assert_msg(!in_request, "client %" PRIu64 ": %s reply callback inside lockmgr_request",
                  c->id, reply_type_name(r->type));
    ck_assert_msg(!c->dropped, "client %" PRIu64 ": reply after lockmgr_owner_drop", c->id);
    record(c, r);
    if (c->drop_in_callback) drop(c);
}

void (*support_on_leader)(client_t *c, const lock_event_t *ev);

static void on_event(void *data, const lock_event_t *ev) {
    client_t *c = data;
    const char *name = ev->name;
    size_t len = ev->len;
    lock_loss_t why = ev->why;
    if (ev->type == LOCK_EVENT_LEADER) {
        ck_assert_msg(support_on_leader != NULL, "client %" PRIu64 ": !LEADER %.*s unasked",
                      c->id, (int)len, name);
        support_on_leader(c, ev);
        return;
    }
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

client_t *client_uid(uid_t uid) {
    ck_assert_uint_lt(nclients, MAX_CLIENTS);
    client_t *c = &clients[nclients++];
    memset(c, 0, sizeof(*c));
    c->id = nclients; /* 1, 2, ... like the sessions' ids */
    c->uid = uid;
    c->o = lockmgr_owner_new(mgr, c->id, uid, on_reply, on_event, c);
    ck_assert_ptr_nonnull(c->o);
    return c;
}

client_t *client(void) {
    return client_uid(1000);
}

void drop(client_t *c) {
    ck_assert(!c->dropped);
    lockmgr_owner_drop(mgr, c->o);
    c->dropped = 1;
    c->o = NULL;
}

void setup(void) {
    char err[CONF_ERR_LEN];
    conf_free(&conf); /* a test may set up afresh (test_free_stops_timers) */
    conf_defaults(&conf);
    conf.lease_ms = LEASE;
    conf.renew_every_ms = 0;
    ck_assert_msg(conf_finish(&conf, err, sizeof(err)) == 0, "conf_finish: %s", err);
    ck_assert_uint_eq(conf.renew_every_ms, EVERY);
    log_set_level(CONF_LOG_ERROR);
    nclients = 0;
    done_calls = 0;
    support_on_leader = NULL;
    tm = timers_new_manual(T0);
    ck_assert_ptr_nonnull(tm);
    fb = fake_new(tm);
    mgr = lockmgr_new(&conf, tm, fake_backend(fb));
    ck_assert_ptr_nonnull(mgr);
}

/* As the daemon stops: owners gone (drops from inside callbacks finish
 * from a timer), the backend closed (its pending ops still find the
 * manager), then the manager and the clock. */
void teardown(void) {
    for (size_t i = 0; i < nclients; i++)
        if (!clients[i].dropped) drop(&clients[i]);
    timers_run_due(tm);
    fake_close(fb);
    lockmgr_free(mgr);
    timers_free(tm);
    conf_free(&conf);
}

/* ---- requests and what comes back -------------------------------------------- */

/* Sends r for c; returns 1 when lockmgr_request() answered it at once (the
 * reply is then in the client's log like any other). */
static int send_request(client_t *c, const lock_request_t *r) {
    lock_reply_t now;
    ck_assert_msg(!c->dropped && c->pending == 0,
                  "client %" PRIu64 ": a request while one is in flight", c->id);
    memset(&now, 0x5a, sizeof(now));
    c->sent++;
    c->pending = 1;
    in_request = 1;
    int at_once = lockmgr_request(mgr, c->o, r, c, &now);
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

/* One request of mode (LOCK, TRYLOCK, UNLOCK; LOCK_MODE_MUTEX for the
 * others) with permits (a semaphore's). */
int request_permits(client_t *c, lock_verb_t verb, lock_mode_t mode,
                           const char *name, uint32_t wait_ms, uint32_t lease_ms,
                           uint32_t permits) {
    lock_request_t r = {.verb = verb,
                        .mode = mode,
                        .name = name,
                        .len = strlen(name),
                        .wait_ms = wait_ms,
                        .lease_ms = lease_ms,
                        .count = permits};
    return send_request(c, &r);
}

int request_own(client_t *c, lock_mode_t mode, unsigned op, const char *name, uint32_t count) {
    lock_request_t r = {.verb = LOCK_VERB_OWN,
                        .mode = mode,
                        .op = (uint8_t)op,
                        .name = name,
                        .len = strlen(name),
                        .count = count};
    return send_request(c, &r);
}

int request_multi(client_t *c, lock_verb_t verb, const char *const *names, size_t n,
                  uint32_t wait_ms, uint32_t lease_ms) {
    lock_name_t nm[LOCKMGR_MNAMES_MAX + 1];
    ck_assert_uint_le(n, LOCKMGR_MNAMES_MAX + 1);
    for (size_t i = 0; i < n; i++) {
        nm[i].name = names[i];
        nm[i].len = strlen(names[i]);
    }
    lock_request_t r = {.verb = verb, .mode = LOCK_MODE_MULTI, .wait_ms = wait_ms,
                        .lease_ms = lease_ms, .names = nm, .nnames = n};
    lock_reply_t now;
    ck_assert_msg(!c->dropped && c->pending == 0,
                  "client %" PRIu64 ": a request while one is in flight", c->id);
    c->sent++;
    c->pending = 1;
    in_request = 1;
    int at_once = lockmgr_request(mgr, c->o, &r, c, &now);
    in_request = 0;
    if (at_once) record(c, &now);
    else ck_assert_msg(lockmgr_owner_waiting(c->o), "request in flight but not waiting");
    return at_once;
}

int request_mode(client_t *c, lock_verb_t verb, lock_mode_t mode, const char *name,
                        uint32_t wait_ms, uint32_t lease_ms) {
    return request_permits(c, verb, mode, name, wait_ms, lease_ms, 0);
}

int request(client_t *c, lock_verb_t verb, const char *name, uint32_t wait_ms,
                   uint32_t lease_ms) {
    return request_mode(c, verb, LOCK_MODE_MUTEX, name, wait_ms, lease_ms);
}

int lock_req(client_t *c, const char *name, uint32_t lease_ms) {
    return request(c, LOCK_VERB_LOCK, name, 0, lease_ms);
}

int unlock_req(client_t *c, const char *name) {
    return request(c, LOCK_VERB_UNLOCK, name, 0, 0);
}

size_t replies_left(const client_t *c) {
    return c->nreplies - c->rhead;
}

lock_reply_t next_reply(client_t *c) {
    ck_assert_msg(replies_left(c) > 0, "client %" PRIu64 ": no reply (sent %u, answered %u)",
                  c->id, c->sent, c->answered);
    return c->replies[c->rhead++ % MAX_LOG];
}

void no_reply(const client_t *c) {
    ck_assert_msg(replies_left(c) == 0, "client %" PRIu64 ": unexpected %s reply", c->id,
                  reply_type_name(c->replies[c->rhead % MAX_LOG].type));
}

uint64_t expect_granted(client_t *c, long long holds) {
    lock_reply_t r = next_reply(c);
    ck_assert_msg(r.type == LOCK_REPLY_GRANTED, "client %" PRIu64 ": %s (%s), want GRANTED",
                  c->id, reply_type_name(r.type), r.detail ? r.detail : "");
    ck_assert_int_eq(r.holds, holds);
    /* no check of the fence here: a read grant's is the counter as it is,
     * 0 before any write (PROTOCOL.md) */
    return r.fence;
}

void expect_value(client_t *c, long long v) {
    lock_reply_t r = next_reply(c);
    ck_assert_msg(r.type == LOCK_REPLY_VALUE, "client %" PRIu64 ": %s (%s), want VALUE %lld",
                  c->id, reply_type_name(r.type), r.detail ? r.detail : "", v);
    ck_assert_int_eq(r.value, v);
}

void expect_timeout(client_t *c, long long ttl) {
    lock_reply_t r = next_reply(c);
    ck_assert_msg(r.type == LOCK_REPLY_TIMEOUT, "client %" PRIu64 ": %s, want TIMEOUT", c->id,
                  reply_type_name(r.type));
    ck_assert_int_eq(r.ttl_ms, ttl);
}

lock_reply_t expect_error(client_t *c, lock_err_t err) {
    lock_reply_t r = next_reply(c);
    ck_assert_msg(r.type == LOCK_REPLY_ERROR, "client %" PRIu64 ": %s, want ERROR %d", c->id,
                  reply_type_name(r.type), (int)err);
    ck_assert_int_eq(r.err, err);
    return r;
}

void expect_event(client_t *c, const char *name, lock_loss_t why) {
    ck_assert_msg(c->ehead < c->nevents, "client %" PRIu64 ": no !LOST %s", c->id, name);
    ck_assert_str_eq(c->events[c->ehead % MAX_LOG].name, name);
    ck_assert_int_eq(c->events[c->ehead % MAX_LOG].why, why);
    c->ehead++;
}

void no_event(const client_t *c) {
    ck_assert_msg(c->ehead == c->nevents, "client %" PRIu64 ": unexpected !LOST %s (%d)", c->id,
                  c->events[c->ehead % MAX_LOG].name, (int)c->events[c->ehead % MAX_LOG].why);
}

/* LOCK on a name the fake grants; returns the fence. */
uint64_t lock_ok(client_t *c, const char *name, uint32_t lease_ms) {
    ck_assert_int_eq(lock_req(c, name, lease_ms), 0);
    fake_settle(fb);
    uint64_t fence = expect_granted(c, 1);
    ck_assert_uint_gt(fence, 0); /* it raised the counter */
    return fence;
}

lockmgr_stats_t stats(void) {
    lockmgr_stats_t s;
    lockmgr_stats(mgr, &s);
    return s;
}

size_t submitted(backend_op_type_t kind) {
    return (size_t)fake_stats(fb)->submitted[kind];
}

uint64_t now(void) {
    return timers_now(tm);
}

/* The op at position i of the fake's queue is kind on name for c. */
void queued_is(size_t i, backend_op_type_t kind, const char *name, const client_t *c) {
    const backend_op_t *op = fake_queued_op(fb, i);
    ck_assert_msg(op != NULL, "no op at queue position %zu (%zu queued)", i, fake_queued(fb));
    ck_assert_int_eq(op->type, kind);
    ck_assert_uint_eq(op->len, strlen(name));
    ck_assert_int_eq(memcmp(op->name, name, op->len), 0);
    if (c != NULL) ck_assert_uint_eq(op->owner, c->id);
}

/* ---- time, the watchdog, shutdown ------------------------------------------- */

/* The fake answers everything as it comes, for ms, in steps of 10. */
void run_for(uint64_t ms) {
    for (uint64_t t = 0; t < ms; t += 10) {
        timers_advance(tm, 10);
        fake_settle(fb);
    }
}

/* c's hold on name is kept by the watchdog: renewed with the conf's lease
 * for many leases, no !LOST, Redis's TTL never below one period's worth. */
void run_until_reply(const client_t *c, uint64_t until) {
    while (replies_left(c) == 0 && now() < until) {
        timers_advance(tm, 1);
        fake_settle(fb);
    }
}

void stays_watchdog(client_t *c, const char *name) {
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

static void on_done(lockmgr_t *m, void *data) {
    ck_assert_ptr_eq(m, mgr);
    ck_assert_ptr_eq(data, &done_calls);
    ck_assert_msg(!in_done, "done called from inside lockmgr_shutdown");
    done_calls++;
}

void shutdown_now(void) {
    in_done = 1;
    lockmgr_shutdown(mgr, on_done, &done_calls);
    in_done = 0;
}

/* ---- requests of each kind, and checks more than one kind's tests make ------- */

int rlock_req(client_t *c, const char *name, uint32_t lease_ms) {
    return request_mode(c, LOCK_VERB_LOCK, LOCK_MODE_READ, name, 0, lease_ms);
}

int wlock_req(client_t *c, const char *name, uint32_t lease_ms) {
    return request_mode(c, LOCK_VERB_LOCK, LOCK_MODE_WRITE, name, 0, lease_ms);
}

int runlock_req(client_t *c, const char *name) {
    return request_mode(c, LOCK_VERB_UNLOCK, LOCK_MODE_READ, name, 0, 0);
}

int wunlock_req(client_t *c, const char *name) {
    return request_mode(c, LOCK_VERB_UNLOCK, LOCK_MODE_WRITE, name, 0, 0);
}

uint64_t rlock_ok(client_t *c, const char *name, uint32_t lease_ms) {
    ck_assert_int_eq(rlock_req(c, name, lease_ms), 0);
    fake_settle(fb);
    return expect_granted(c, 1);
}

uint64_t wlock_ok(client_t *c, const char *name, uint32_t lease_ms) {
    ck_assert_int_eq(wlock_req(c, name, lease_ms), 0);
    fake_settle(fb);
    uint64_t fence = expect_granted(c, 1);
    ck_assert_uint_gt(fence, 0); /* it raised the counter */
    return fence;
}

/* The op at position i of the fake's queue is kind of mode on name for c. */
void queued_mode_is(size_t i, backend_op_type_t kind, backend_mode_t mode,
                           const char *name, const client_t *c) {
    queued_is(i, kind, name, c);
    ck_assert_int_eq(fake_queued_op(fb, i)->mode, mode);
}

/* READ and WRITE are one kind: either names it. */
static int kind_group(int mode) {
    return mode == LOCK_MODE_WRITE ? LOCK_MODE_READ : mode;
}

void why_is(const lock_reply_t *r, lock_why_t why, int mode) {
    ck_assert_int_eq(r->why, why);
    if (mode >= 0) ck_assert_int_eq(kind_group((int)r->mode), kind_group(mode));
}

int acquire_req(client_t *c, const char *name, uint32_t permits, uint32_t lease_ms) {
    return request_permits(c, LOCK_VERB_LOCK, LOCK_MODE_SEM, name, 0, lease_ms, permits);
}

int tryacquire_req(client_t *c, const char *name, uint32_t permits, uint32_t wait_ms,
                          uint32_t lease_ms) {
    return request_permits(c, LOCK_VERB_TRYLOCK, LOCK_MODE_SEM, name, wait_ms, lease_ms, permits);
}

int release_req(client_t *c, const char *name, uint32_t permits) {
    return request_permits(c, LOCK_VERB_UNLOCK, LOCK_MODE_SEM, name, 0, 0, permits);
}

int seminit_req(client_t *c, const char *name, uint32_t size) {
    return request_permits(c, LOCK_VERB_OWN, LOCK_MODE_SEM, name, 0, 0, size);
}

/* c's ids of name in Redis are exactly 1..n, all unexpired. */
void sem_ids_are(const client_t *c, const char *name, long long n) {
    ck_assert_msg(fake_sem_ids_are(fb, name, c->id, n),
                  "client %" PRIu64 ": %zu ids of %s in Redis, want exactly 1..%lld unexpired",
                  c->id, fake_sem_ids(fb, name, c->id), name, n);
}

/* ACQUIRE that the fake grants at once: c holds held permits then. */
void acquire_ok(client_t *c, const char *name, uint32_t permits, uint32_t lease_ms,
                       long long held) {
    ck_assert_int_eq(acquire_req(c, name, permits, lease_ms), 0);
    fake_settle(fb);
    expect_value(c, held);
    sem_ids_are(c, name, held);
}

/* Ops of kind for c in the log from position from on. */
size_t logged_for(size_t from, backend_op_type_t kind, const client_t *c) {
    size_t n = 0;
    for (size_t i = from; i < fake_log_len(fb); i++)
        if (fake_log(fb, i)->kind == kind && fake_log(fb, i)->owner == c->id) n++;
    return n;
}

int fairlock_req(client_t *c, const char *name, uint32_t lease_ms) {
    return request_mode(c, LOCK_VERB_LOCK, LOCK_MODE_FAIR, name, 0, lease_ms);
}

int tryfair_req(client_t *c, const char *name, uint32_t wait_ms, uint32_t lease_ms) {
    return request_mode(c, LOCK_VERB_TRYLOCK, LOCK_MODE_FAIR, name, wait_ms, lease_ms);
}

/* FAIRLOCK that the fake grants: the fence. */
uint64_t fair_ok(client_t *c, const char *name, uint32_t lease_ms) {
    ck_assert_int_eq(fairlock_req(c, name, lease_ms), 0);
    fake_settle(fb);
    uint64_t fence = expect_granted(c, 1);
    ck_assert_uint_gt(fence, 0); /* it raised the counter */
    return fence;
}

/* ---- running a suite --------------------------------------------------------- */

int lockmgr_test_run(Suite *s) {
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
