/* Unit tests of daemon/lock's elections (elect.c, observe.c) on a fake backend.
 * SPDX-License-Identifier: MIT
 *
 * The world they run in (clients, requests, the fake) is
 * tests/unit/lockmgr_support.c; the fake answers an election's ops as
 * elect.lua would (fake_backend.c, model_run_elect): a fair lock's queue
 * and hash, the leader's record beside it. Channel messages are the
 * test's to deliver (fake_publish). Observers' events are recorded here. */
#include "tests/unit/lockmgr_support.h"

#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/lock/elect.h"
#include "daemon/lock/lockmgr.h"
#include "tests/unit/fake_backend.h"

/* !LEADER events, in order, for every client. */
#define MAX_TOLD 64
static struct {
    client_t *c;
    char name[64];
    uint64_t fence;
    char value[64];
} told[MAX_TOLD];
static size_t ntold, told_head;
static client_t *leave_in_event; /* unobserves the name from inside its !LEADER */

/* A client of the test's own (not in clients[]) whose answer, when
 * leave_in_reply is set, ends its observations and drops it from inside
 * the answer, as a session closing past max_output once did. */
static client_t leaver;
static int leave_in_reply;
static const char *leaver_name; /* what it asked about last */

/* An election's own request by c (ELECT_OP_RESIGN, ELECT_OP_UNOBSERVE),
 * answered at once: 1 or 0. Its call is none of c's others. */
static long long own_req(client_t *c, int op, const char *name) {
    static int own_call;
    lock_request_t r = {.verb = LOCK_VERB_OWN, .mode = LOCK_MODE_ELECT, .op = (uint8_t)op,
                        .name = name, .len = strlen(name)};
    lock_reply_t now;
    int outer = in_request;
    in_request = 1;
    int at_once = lockmgr_request(mgr, c->o, &r, &own_call, &now);
    in_request = outer;
    ck_assert_int_eq(at_once, 1);
    ck_assert_int_eq(now.type, LOCK_REPLY_VALUE);
    return now.value;
}

static long long resign(client_t *c, const char *name) {
    return own_req(c, ELECT_OP_RESIGN, name);
}

static long long unobserve(client_t *c, const char *name) {
    return own_req(c, ELECT_OP_UNOBSERVE, name);
}

static void on_leader(client_t *c, const lock_event_t *ev) {
    const char *name = ev->name, *value = ev->value;
    size_t len = ev->len, vlen = ev->value_len;
    uint64_t fence = ev->fence;
    ck_assert_msg(!in_request, "!LEADER inside lockmgr_request");
    ck_assert_msg(!c->dropped, "!LEADER to client %" PRIu64 " after lockmgr_owner_drop", c->id);
    ck_assert_uint_lt(ntold, MAX_TOLD);
    told[ntold].c = c;
    snprintf(told[ntold].name, sizeof(told[0].name), "%.*s", (int)len, name);
    told[ntold].fence = fence;
    snprintf(told[ntold].value, sizeof(told[0].value), "%.*s", (int)vlen, value);
    ntold++;
    if (c == leave_in_event) {
        char n[64];
        snprintf(n, sizeof(n), "%.*s", (int)len, name);
        unobserve(c, n);
    }
    if (c->drop_in_callback) drop(c);
}

static void leaver_on_reply(void *data, void *call, const lock_reply_t *r) {
    client_t *c = data;
    ck_assert_ptr_eq(call, c);
    ck_assert_msg(!in_request, "the leaver's reply inside lockmgr_request");
    ck_assert_msg(!c->dropped, "a reply to the leaver after lockmgr_owner_drop");
    c->replies[c->nreplies++ % MAX_LOG] = *r;
    if (!leave_in_reply) return;
    unobserve(c, leaver_name);
    lockmgr_owner_drop(mgr, c->o);
    c->dropped = 1;
}

static void leaver_on_event(void *data, const lock_event_t *ev) {
    (void)data;
    ck_abort_msg("event %d of %.*s to the leaver", (int)ev->type, (int)ev->len, ev->name);
}

static client_t *leaver_new(void) {
    leaver.id = MAX_CLIENTS + 1; /* unlike every client()'s */
    leaver.o = lockmgr_owner_new(mgr, leaver.id, 1000, leaver_on_reply, leaver_on_event, &leaver);
    ck_assert_ptr_nonnull(leaver.o);
    return &leaver;
}

/* A LEADER or OBSERVE of name by the leaver: 0, answered later. */
static int leaver_req(lock_verb_t verb, const char *name) {
    lock_request_t r = {.verb = verb, .mode = LOCK_MODE_ELECT, .name = name, .len = strlen(name)};
    lock_reply_t now;
    leaver_name = name;
    in_request = 1;
    int at_once = lockmgr_request(mgr, leaver.o, &r, &leaver, &now);
    in_request = 0;
    return at_once;
}

static void elect_setup(void) {
    setup();
    ntold = told_head = 0;
    leave_in_event = NULL;
    memset(&leaver, 0, sizeof(leaver));
    leave_in_reply = 0;
    support_on_leader = on_leader;
}

/* The owners go (their observations with them), then the manager. */
static void elect_teardown(void) {
    if (leaver.o != NULL && !leaver.dropped) lockmgr_owner_drop(mgr, leaver.o);
    teardown();
}

/* INFO's observers and observed. */
static void observing(uint64_t observers, uint64_t observed) {
    lockmgr_elect_stats_t es;
    lockmgr_elect_stats(mgr, &es);
    ck_assert_uint_eq(es.observers, observers);
    ck_assert_uint_eq(es.observed, observed);
}

/* lockmgr_support's clients record with themselves as data. */
static client_t *observer(void) {
    return client();
}

static int elect_req(client_t *c, const char *name, const char *value, uint32_t lease_ms) {
    lock_request_t r = {.verb = LOCK_VERB_LOCK, .mode = LOCK_MODE_ELECT, .name = name,
                        .len = strlen(name), .lease_ms = lease_ms, .value = value,
                        .value_len = strlen(value)};
    lock_reply_t now;
    c->sent++;
    c->pending = 1;
    in_request = 1;
    int at_once = lockmgr_request(mgr, c->o, &r, c, &now);
    in_request = 0;
    if (at_once) {
        c->pending = 0;
        c->answered++;
        size_t k = c->nreplies % MAX_LOG;
        c->replies[k] = now;
        c->nreplies++;
    }
    return at_once;
}

static int read_req(client_t *c, lock_verb_t verb, const char *name) {
    return request_mode(c, verb, LOCK_MODE_ELECT, name, 0, 0);
}

/* The next reply of c is a leader: fence (0: NONE) and value. */
static void expect_leader(client_t *c, uint64_t fence, const char *value) {
    lock_reply_t r = next_reply(c);
    ck_assert_msg(r.type == LOCK_REPLY_LEADER, "client %" PRIu64 ": %s, want LEADER", c->id,
                  reply_type_name(r.type));
    ck_assert_uint_eq(r.fence, fence);
    if (fence) ck_assert_str_eq(r.leader, value);
}

/* The next !LEADER told is to c, of name, fence (0: NONE), value. */
static void expect_told(const client_t *c, const char *name, uint64_t fence, const char *value) {
    ck_assert_msg(told_head < ntold, "no !LEADER told, want %" PRIu64 " to client %" PRIu64,
                  fence, c->id);
    ck_assert_ptr_eq(told[told_head].c, c);
    ck_assert_str_eq(told[told_head].name, name);
    ck_assert_uint_eq(told[told_head].fence, fence);
    if (fence) ck_assert_str_eq(told[told_head].value, value);
    told_head++;
}

static void nothing_told(void) {
    ck_assert_msg(told_head == ntold, "%zu !LEADER more told (first: %s %" PRIu64 ")",
                  ntold - told_head, told[told_head].name, told[told_head].fence);
}

/* c campaigns for name and the fake grants it: the fence. */
static uint64_t elect_ok(client_t *c, const char *name, const char *value) {
    ck_assert_int_eq(elect_req(c, name, value, 0), 0);
    fake_run(fb);
    return expect_granted(c, 1);
}

/* ---- campaigning ------------------------------------------------------------------ */

/* An ELECT is an acquire of mode ELECT carrying the value and a place's
 * length; the grant's fence answers it; an ELECT again by the leader is
 * answered at once with the same fence, asking Redis nothing. */
START_TEST(grant_carries_value_and_fence) {
    client_t *a = client(), *b = client();
    ck_assert_int_eq(elect_req(a, "e", "10.0.0.5:8080", 0), 0);
    queued_mode_is(0, BACKEND_ACQUIRE, BACKEND_ELECT, "e", a);
    const backend_op_t *op = fake_queued_op(fb, 0);
    ck_assert_uint_eq(op->value_len, 13);
    ck_assert_int_eq(memcmp(op->value, "10.0.0.5:8080", 13), 0);
    ck_assert_uint_eq(op->queue_ms, LEASE);
    fake_run(fb);
    uint64_t f = expect_granted(a, 1);
    size_t acquires = submitted(BACKEND_ACQUIRE);
    ck_assert_int_eq(elect_req(a, "e", "other", 0), 1);
    ck_assert_uint_eq(expect_granted(a, 1), f);
    ck_assert_uint_eq(submitted(BACKEND_ACQUIRE), acquires);
    ck_assert_int_eq(read_req(b, LOCK_VERB_LEADER, "e"), 0);
    fake_run(fb);
    expect_leader(b, f, "10.0.0.5:8080");
    /* kept by the watchdog: still leading after leases */
    run_for(3 * LEASE);
    no_event(a);
    ck_assert_int_eq(resign(a, "e"), 1);
    ck_assert_int_eq(resign(a, "e"), 0);
    fake_run(fb);
    ck_assert_int_eq(read_req(b, LOCK_VERB_LEADER, "e"), 0);
    fake_run(fb);
    expect_leader(b, 0, NULL);
}
END_TEST

/* Candidates queue in Redis as they come; a resignation's message lets
 * the next one take over with a higher fence; values stay each one's. */
START_TEST(resign_hands_over_in_order) {
    client_t *a = client(), *b = client(), *c = client();
    uint64_t fa = elect_ok(a, "e", "A");
    ck_assert_int_eq(elect_req(b, "e", "B", 0), 0);
    ck_assert_int_eq(elect_req(c, "e", "C", 0), 0);
    fake_run(fb);
    no_reply(b);
    no_reply(c);
    ck_assert_str_eq(fake_fair_queue(fb, "e"), "o2 o3");
    ck_assert_int_eq(fake_watch_mode(fb, "e"), BACKEND_ELECT);
    ck_assert_int_eq(resign(a, "e"), 1);
    fake_run(fb);
    ck_assert_int_eq(fake_publish(fb, "e"), 1);
    fake_run(fb);
    uint64_t fb_ = expect_granted(b, 1);
    ck_assert_uint_gt(fb_, fa);
    no_reply(c);
    drop(b); /* the leader's connection closes: released, and the next here
                asks right behind the release */
    fake_run(fb);
    ck_assert_uint_gt(expect_granted(c, 1), fb_);
    ck_assert_int_eq(resign(a, "e"), 0); /* never again */
}
END_TEST

/* A candidate that stops waiting leaves its place at once. */
START_TEST(cancelled_candidate_leaves_its_place) {
    client_t *a = client(), *b = client();
    (void)elect_ok(a, "e", "A");
    ck_assert_int_eq(elect_req(b, "e", "B", 0), 0);
    fake_run(fb);
    ck_assert_str_eq(fake_fair_queue(fb, "e"), "o2");
    fake_run(fb); /* the watch's confirmation's try, refused */
    ck_assert_uint_eq(fake_queued(fb), 0);
    ck_assert_int_eq(lockmgr_cancel(mgr, b->o, b), 1);
    expect_error(b, LOCK_ERR_CANCELLED);
    queued_mode_is(0, BACKEND_LEAVE, BACKEND_ELECT, "e", b);
    fake_run(fb);
    ck_assert_str_eq(fake_fair_queue(fb, "e"), "");
    lockmgr_elect_stats_t es;
    lockmgr_elect_stats(mgr, &es);
    ck_assert_uint_eq(es.candidates, 0);
}
END_TEST

/* A candidate that stops waiting with its acquire in flight keeps its
 * value a while (the topology may send that acquire again), but it is no
 * ELECT waiting here: INFO's candidates drops at once (it stayed 1 for
 * command_timeout_ms + ELECT_VALUE_GRACE_MS, which the stateful fuzzer saw
 * at its end as candidates=1 with every client closed). Campaigning again
 * meanwhile counts again. */
START_TEST(candidate_left_in_flight_not_counted) {
    client_t *a = client(), *b = client();
    lockmgr_elect_stats_t es;
    (void)elect_ok(a, "e", "A");
    ck_assert_int_eq(elect_req(b, "e", "B", 0), 0);
    lockmgr_elect_stats(mgr, &es);
    ck_assert_uint_eq(es.candidates, 1);
    ck_assert_int_eq(lockmgr_cancel(mgr, b->o, b), 1); /* its acquire in flight */
    expect_error(b, LOCK_ERR_CANCELLED);
    lockmgr_elect_stats(mgr, &es);
    ck_assert_uint_eq(es.candidates, 0);
    fake_settle(fb);
    ck_assert_str_eq(fake_fair_queue(fb, "e"), "");
    ck_assert_int_eq(elect_req(b, "e", "B2", 0), 0);
    lockmgr_elect_stats(mgr, &es);
    ck_assert_uint_eq(es.candidates, 1);
    ck_assert_int_eq(lockmgr_cancel(mgr, b->o, b), 1);
    expect_error(b, LOCK_ERR_CANCELLED);
    lockmgr_elect_stats(mgr, &es);
    ck_assert_uint_eq(es.candidates, 0);
    fake_settle(fb);
    run_for(5000); /* past every grace */
    lockmgr_elect_stats(mgr, &es);
    ck_assert_uint_eq(es.candidates, 0);
}
END_TEST

/* A leased leader not renewed loses its leadership as a lock's holder
 * does; the watchdog's leader whose key is gone, likewise. */
START_TEST(lost_leadership) {
    client_t *a = client(), *b = client();
    ck_assert_int_eq(elect_req(a, "l", "A", 500), 0);
    fake_run(fb);
    (void)expect_granted(a, 1);
    run_for(600);
    expect_event(a, "l", LOCK_LOST_EXPIRED);
    (void)elect_ok(b, "w", "B");
    fake_expire(fb, "w");
    run_for(EVERY + 10);
    expect_event(b, "w", LOCK_LOST_EXPIRED);
}
END_TEST

/* ERR KIND both ways, and an UNLOCK of a leadership. */
START_TEST(kinds_do_not_mix) {
    client_t *a = client(), *b = client();
    (void)elect_ok(a, "e", "A");
    ck_assert_int_eq(lock_req(b, "e", 0), 1);
    lock_reply_t r = expect_error(b, LOCK_ERR_KIND);
    why_is(&r, LOCK_WHY_HELD_AS, LOCK_MODE_ELECT);
    ck_assert_int_eq(unlock_req(a, "e"), 1);
    r = expect_error(a, LOCK_ERR_KIND);
    why_is(&r, LOCK_WHY_RELEASE_AS, LOCK_MODE_ELECT);
    (void)lock_ok(b, "m", 0);
    ck_assert_int_eq(elect_req(a, "m", "A", 0), 1);
    r = expect_error(a, LOCK_ERR_KIND);
    why_is(&r, LOCK_WHY_HELD_AS, LOCK_MODE_MUTEX);
    /* another daemon's plain lock: Redis says */
    fake_take(fb, "x", "other", 10000);
    ck_assert_int_eq(elect_req(a, "x", "A", 0), 0);
    fake_run(fb);
    r = expect_error(a, LOCK_ERR_KIND);
    ck_assert_int_eq(read_req(a, LOCK_VERB_LEADER, "x"), 0);
    fake_run(fb);
    r = expect_error(a, LOCK_ERR_KIND);
}
END_TEST

/* ---- observing -------------------------------------------------------------------- */

/* OBSERVE answers as LEADER; the name's watch (mode ELECT) is shared; a
 * message is read again and told; UNOBSERVE ends it; a second OBSERVE
 * of the same name answers without a second stream. */
START_TEST(observers_told_each_leader) {
    client_t *a = client(), *b = client(), *o1 = observer(), *o2 = observer();
    ck_assert_int_eq(read_req(o1, LOCK_VERB_OBSERVE, "e"), 0);
    fake_run(fb);
    expect_leader(o1, 0, NULL);
    ck_assert_int_eq(read_req(o2, LOCK_VERB_OBSERVE, "e"), 0);
    fake_run(fb);
    expect_leader(o2, 0, NULL);
    ck_assert_int_eq(fake_watched(fb, "e"), 1);
    ck_assert_int_eq(fake_watch_mode(fb, "e"), BACKEND_ELECT);
    ck_assert_uint_eq(fake_watch_calls(fb, "e"), 1);
    fake_run(fb); /* the watch's confirmation: a read, nobody leads yet */
    nothing_told();
    uint64_t fa = elect_ok(a, "e", "A");
    ck_assert_int_eq(fake_publish(fb, "e"), 1);
    fake_run(fb);
    expect_told(o2, "e", fa, "A"); /* newest observer first */
    expect_told(o1, "e", fa, "A");
    nothing_told();
    /* the same message again: no news */
    ck_assert_int_eq(fake_publish(fb, "e"), 1);
    fake_run(fb);
    nothing_told();
    /* observed again: answered, no second stream */
    ck_assert_int_eq(read_req(o1, LOCK_VERB_OBSERVE, "e"), 0);
    fake_run(fb);
    expect_leader(o1, fa, "A");
    lockmgr_elect_stats_t es;
    lockmgr_elect_stats(mgr, &es);
    ck_assert_uint_eq(es.observers, 2);
    ck_assert_uint_eq(es.observed, 1);
    ck_assert_int_eq(unobserve(o2, "e"), 1);
    ck_assert_int_eq(unobserve(o2, "e"), 0);
    /* b waits; a resigns; the release's message: NONE, b's grant's: B */
    ck_assert_int_eq(elect_req(b, "e", "B", 0), 0);
    fake_run(fb);
    ck_assert_int_eq(resign(a, "e"), 1);
    fake_run(fb);
    ck_assert_int_eq(fake_publish(fb, "e"), 1);
    fake_run(fb); /* b asked right behind the release: granted; the read sees it */
    uint64_t fb_ = expect_granted(b, 1);
    expect_told(o1, "e", fb_, "B");
    ck_assert_int_eq(fake_publish(fb, "e"), 1); /* b's grant's message: no news */
    fake_run(fb);
    nothing_told();
    unobserve(o1, "e");
    lockmgr_elect_stats(mgr, &es);
    ck_assert_uint_eq(es.observers, 0);
    /* b's own candidacy ended with its grant: nothing watches e now */
    ck_assert_int_eq(fake_watched(fb, "e"), 0);
}
END_TEST

/* Expiry publishes nothing: the observers' daemon reads again when the
 * leader's lease ends. */
START_TEST(expiry_read_at_the_leases_end) {
    client_t *o = observer();
    fake_take(fb, "e", "other", 1000); /* a hash whose field is not a leader's */
    ck_assert_int_eq(read_req(o, LOCK_VERB_OBSERVE, "e"), 0);
    fake_run(fb);
    expect_error(o, LOCK_ERR_KIND);
    fake_expire(fb, "e");
    client_t *a = client();
    ck_assert_int_eq(elect_req(a, "e", "A", 400), 0);
    fake_run(fb);
    uint64_t fa = expect_granted(a, 1);
    ck_assert_int_eq(read_req(o, LOCK_VERB_OBSERVE, "e"), 0);
    fake_run(fb);
    expect_leader(o, fa, "A");
    fake_run(fb); /* the watch's confirmation's read */
    nothing_told();
    run_for(450); /* no message: the lease's end */
    expect_told(o, "e", 0, NULL);
    nothing_told();
}
END_TEST

/* An observer that joins a name whose watch is in force already (its
 * local candidates') gets no confirmation: its answer plans the next
 * read (the leader's lease end), which tells it of the next leader
 * though no message comes. */
START_TEST(observer_joining_a_watched_name_reads_at_the_leases_end) {
    client_t *a = client(), *b = client(), *o = observer();
    ck_assert_int_eq(elect_req(a, "j", "A", 400), 0);
    fake_run(fb);
    uint64_t fa = expect_granted(a, 1);
    ck_assert_int_eq(elect_req(b, "j", "B", 0), 0);
    fake_run(fb);
    fake_run(fb); /* the watch's confirmation: b tries again, refused */
    no_reply(b);
    unsigned watches = fake_watch_calls(fb, "j");
    ck_assert_int_eq(read_req(o, LOCK_VERB_OBSERVE, "j"), 0);
    fake_run(fb);
    expect_leader(o, fa, "A");
    ck_assert_uint_eq(fake_watch_calls(fb, "j"), watches); /* the same watch */
    run_for(450); /* a's lease ends: b's retry turn, and the observer's read */
    uint64_t fb_ = expect_granted(b, 1);
    expect_event(a, "j", LOCK_LOST_EXPIRED);
    run_for(10);
    expect_told(o, "j", fb_, "B");
    nothing_told();
}
END_TEST

/* Redis unanswered for a lease: NONE (the leader here lost its lead too,
 * !LOST backend, and gives it up once Redis is back); its next grant is
 * told with a higher fence. */
START_TEST(none_after_a_lease_without_redis) {
    client_t *a = client(), *o = observer();
    uint64_t fa = elect_ok(a, "e", "A");
    ck_assert_int_eq(read_req(o, LOCK_VERB_OBSERVE, "e"), 0);
    fake_run(fb);
    expect_leader(o, fa, "A");
    fake_run(fb);
    nothing_told();
    fake_set_up(fb, 0);
    run_for(LEASE / 2);
    nothing_told();
    run_for(LEASE);
    expect_told(o, "e", 0, NULL);
    nothing_told();
    expect_event(a, "e", LOCK_LOST_BACKEND);
    fake_set_up(fb, 1);
    run_for(1000);
    nothing_told(); /* still nobody */
    ck_assert_int_eq(read_req(a, LOCK_VERB_LEADER, "e"), 0);
    fake_run(fb);
    expect_leader(a, 0, NULL);
    uint64_t f2 = elect_ok(a, "e", "A2");
    ck_assert_uint_gt(f2, fa);
    ck_assert_int_eq(fake_publish(fb, "e"), 1);
    fake_run(fb);
    expect_told(o, "e", f2, "A2");
    nothing_told();
}
END_TEST

/* max_observes_per_client: ERR LIMIT above it, not for a name observed. */
START_TEST(observe_limit) {
    conf.max_observes_per_client = 2;
    client_t *o = observer();
    const char *names[] = {"n1", "n2", "n1"};
    for (size_t i = 0; i < 3; i++) {
        ck_assert_int_eq(read_req(o, LOCK_VERB_OBSERVE, names[i]), 0);
        fake_run(fb);
        expect_leader(o, 0, NULL);
    }
    ck_assert_int_eq(read_req(o, LOCK_VERB_OBSERVE, "n3"), 1);
    lock_reply_t r = expect_error(o, LOCK_ERR_LIMIT);
    ck_assert_int_eq(r.why, LOCK_WHY_MAX_OBSERVES);
    ck_assert_int_eq(r.limit, 2);
    ck_assert_int_eq(unobserve(o, "n2"), 1);
    ck_assert_int_eq(read_req(o, LOCK_VERB_OBSERVE, "n3"), 0);
    fake_run(fb);
    expect_leader(o, 0, NULL);
}
END_TEST

/* An observer whose connection goes while its read is in flight, and one
 * that leaves from inside its own event: nothing is told after, nothing
 * breaks. */
START_TEST(observers_leave_mid_flight) {
    client_t *a = client(), *o1 = observer(), *o2 = observer();
    ck_assert_int_eq(read_req(o1, LOCK_VERB_OBSERVE, "e"), 0);
    unobserve(o1, "e");
    drop(o1);
    fake_run(fb);
    ck_assert_int_eq(read_req(o2, LOCK_VERB_OBSERVE, "e"), 0);
    fake_run(fb);
    expect_leader(o2, 0, NULL);
    fake_run(fb);
    uint64_t fa = elect_ok(a, "e", "A");
    ck_assert_int_eq(fake_publish(fb, "e"), 1);
    unobserve(o2, "e"); /* its read in flight */
    fake_run(fb);
    nothing_told();
    (void)fa;
    ck_assert_int_eq(fake_watched(fb, "e"), 0);
}
END_TEST

/* HOLD_GONE for a candidate's acquire (the election script never says it:
 * a reply rewritten on its way) may hide its leadership: undone in Redis,
 * and the candidate asks again and leads (issue 36, bug 8). */
START_TEST(hold_gone_candidate_retried) {
    client_t *a = client(), *o = observer();
    ck_assert_int_eq(read_req(o, LOCK_VERB_OBSERVE, "g"), 0);
    fake_settle(fb); /* the name's watch in force */
    expect_leader(o, 0, NULL);
    ck_assert_int_eq(elect_req(a, "g", "A", 0), 0);
    fake_rewrite_next(fb, BACKEND_HOLD_GONE);
    fake_run(fb);
    no_reply(a);
    run_until_reply(a, now() + 5 * LEASE);
    uint64_t f = expect_granted(a, 1);
    ck_assert_int_eq(fake_holds(fb, a->id, "g"), 1);
    ck_assert_uint_eq(stats().waiters, 0);
    ck_assert_int_eq(fake_publish(fb, "g"), 1); /* the grant's message */
    fake_settle(fb);
    expect_told(o, "g", f, "A");
}
END_TEST

/* ---- observers that go from inside an answer or an event (issue 36) ---------------- */

/* An OBSERVE of a led name nobody observes here, answered to an owner
 * that ends its observations and drops itself from inside the answer:
 * the name's watch, made for it, went there while leader_done still used
 * it (heap-use-after-free); it goes once the answer and the tells are
 * over. The same for LEADER from the name's only observer. */
START_TEST(observer_leaves_inside_its_answer) {
    client_t *a = client();
    uint64_t fa = elect_ok(a, "e", "A");
    fake_run(fb);
    ck_assert_int_eq(fake_watched(fb, "e"), 0);
    client_t *l = leaver_new();
    leave_in_reply = 1;
    ck_assert_int_eq(leaver_req(LOCK_VERB_OBSERVE, "e"), 0);
    fake_run(fb);
    ck_assert_uint_eq(l->nreplies, 1);
    ck_assert_int_eq(l->replies[0].type, LOCK_REPLY_LEADER);
    ck_assert_uint_eq(l->replies[0].fence, fa);
    timers_run_due(tm);
    observing(0, 0);
    fake_run(fb);
    ck_assert_int_eq(fake_watched(fb, "e"), 0);
    nothing_told();
    /* LEADER from the only observer */
    memset(&leaver, 0, sizeof(leaver));
    leave_in_reply = 0;
    l = leaver_new();
    ck_assert_int_eq(leaver_req(LOCK_VERB_OBSERVE, "e"), 0);
    fake_run(fb);
    fake_run(fb); /* the watch's confirmation */
    ck_assert_uint_eq(l->nreplies, 1);
    observing(1, 1);
    leave_in_reply = 1;
    ck_assert_int_eq(leaver_req(LOCK_VERB_LEADER, "e"), 0);
    fake_run(fb);
    ck_assert_uint_eq(l->nreplies, 2);
    ck_assert_uint_eq(l->replies[1].fence, fa);
    timers_run_due(tm);
    observing(0, 0);
    ck_assert_int_eq(fake_watched(fb, "e"), 0);
    nothing_told();
}
END_TEST

/* An observer dropped from inside its OBSERVE's answer (the drop finishes
 * from a timer): its observation goes with it. It stayed on the freed
 * owner, counted in observers, and the name's next leader was told to
 * freed memory (heap-use-after-free in tell_one). */
START_TEST(observer_dropped_inside_its_answer) {
    client_t *a = client(), *o = observer();
    o->drop_in_callback = 1;
    ck_assert_int_eq(read_req(o, LOCK_VERB_OBSERVE, "e"), 0);
    fake_run(fb);
    ck_assert(o->dropped);
    timers_run_due(tm);
    fake_run(fb);
    observing(0, 0);
    uint64_t fa = elect_ok(a, "e", "A");
    fake_publish(fb, "e");
    fake_run(fb);
    nothing_told();
    (void)fa;
}
END_TEST

/* An observer dropped from inside a !LEADER of one name while its OBSERVE
 * of another is answered in the same round: the dropped owner gains no
 * observation (it gained one, on an owner freed by the timer next), and
 * the one it had goes when the drop finishes. */
START_TEST(dropped_observer_gains_no_observation) {
    client_t *a = client(), *b = client(), *o = observer();
    uint64_t fa = elect_ok(a, "n1", "A");
    ck_assert_int_eq(read_req(o, LOCK_VERB_OBSERVE, "n1"), 0);
    fake_run(fb);
    expect_leader(o, fa, "A");
    fake_run(fb); /* the watch's confirmation */
    observing(1, 1);
    /* a resigns; its message is not delivered: b's read finds out first */
    ck_assert_int_eq(resign(a, "n1"), 1);
    fake_run(fb);
    ck_assert_int_eq(read_req(b, LOCK_VERB_LEADER, "n1"), 0);
    ck_assert_int_eq(read_req(o, LOCK_VERB_OBSERVE, "n2"), 0);
    o->drop_in_callback = 1;
    fake_run(fb); /* b's answer tells o NONE, and o drops; then o's answer */
    expect_leader(b, 0, NULL);
    expect_told(o, "n1", 0, NULL);
    ck_assert(o->dropped);
    observing(1, 1); /* n1's, until the drop finishes; nothing of n2 */
    timers_run_due(tm);
    fake_run(fb);
    observing(0, 0);
    ck_assert_int_eq(fake_watched(fb, "n1"), 0);
    ck_assert_int_eq(fake_watched(fb, "n2"), 0);
    (void)elect_ok(a, "n2", "A2");
    fake_publish(fb, "n2");
    fake_run(fb);
    nothing_told();
}
END_TEST

/* A LEADER read tells an observer of a new view, and the observer leaves
 * from inside that !LEADER: the name, nobody's now, goes with its watch
 * once the tells are over. tell() kept it meanwhile, but leader_done
 * never freed it after: the watch stayed, observed stayed 1. */
START_TEST(observer_leaves_inside_a_reads_tell) {
    client_t *a = client(), *b = client(), *o = observer();
    uint64_t fa = elect_ok(a, "e", "A");
    ck_assert_int_eq(read_req(o, LOCK_VERB_OBSERVE, "e"), 0);
    fake_run(fb);
    expect_leader(o, fa, "A");
    fake_run(fb); /* the watch's confirmation */
    ck_assert_int_eq(resign(a, "e"), 1);
    fake_run(fb); /* its message is not delivered */
    leave_in_event = o;
    ck_assert_int_eq(read_req(b, LOCK_VERB_LEADER, "e"), 0);
    fake_run(fb);
    expect_leader(b, 0, NULL);
    expect_told(o, "e", 0, NULL);
    observing(0, 0);
    ck_assert_int_eq(fake_watched(fb, "e"), 0);
    run_for(2 * LEASE); /* no read is planned for a name gone */
    nothing_told();
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("lockmgr_elect");
    TCase *tc = tcase_create("elect");
    tcase_add_checked_fixture(tc, elect_setup, elect_teardown);
    tcase_add_test(tc, grant_carries_value_and_fence);
    tcase_add_test(tc, resign_hands_over_in_order);
    tcase_add_test(tc, cancelled_candidate_leaves_its_place);
    tcase_add_test(tc, candidate_left_in_flight_not_counted);
    tcase_add_test(tc, lost_leadership);
    tcase_add_test(tc, kinds_do_not_mix);
    tcase_add_test(tc, observers_told_each_leader);
    tcase_add_test(tc, expiry_read_at_the_leases_end);
    tcase_add_test(tc, observer_joining_a_watched_name_reads_at_the_leases_end);
    tcase_add_test(tc, none_after_a_lease_without_redis);
    tcase_add_test(tc, observe_limit);
    tcase_add_test(tc, observers_leave_mid_flight);
    tcase_add_test(tc, hold_gone_candidate_retried);
    tcase_add_test(tc, observer_leaves_inside_its_answer);
    tcase_add_test(tc, observer_dropped_inside_its_answer);
    tcase_add_test(tc, dropped_observer_gains_no_observation);
    tcase_add_test(tc, observer_leaves_inside_a_reads_tell);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return lockmgr_test_run(suite());
}
