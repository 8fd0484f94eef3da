/* Unit tests of daemon/backend/quorum_vote: who counts, INFO server, and N nodes' answers merged.
 * SPDX-License-Identifier: MIT */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/backend/quorum_vote.h"

#define M(n) ((n) / 2 + 1) /* quorum_open's majority */

/* ---- building a node's answer ---------------------------------------------------- */

/* Not answered yet, counting. */
static quorum_vote_t pending(backend_op_type_t kind) {
    quorum_vote_t v;
    memset(&v, 0, sizeof(v));
    v.kind = kind;
    v.counts = 1;
    return v;
}

/* Answered with status (DOWN, FAILED: no result). */
static quorum_vote_t failed(backend_op_type_t kind, backend_status_t status) {
    quorum_vote_t v = pending(kind);
    v.done = 1;
    v.res.status = status;
    v.res.error = "boom";
    return v;
}

static quorum_vote_t answered(backend_op_type_t kind) {
    quorum_vote_t v = pending(kind);
    v.done = 1;
    v.res.status = BACKEND_OK;
    return v;
}

static quorum_vote_t grant(uint64_t fence) {
    quorum_vote_t v = answered(BACKEND_ACQUIRE);
    v.res.outcome = BACKEND_GRANTED;
    v.res.fence = fence;
    return v;
}

static quorum_vote_t taken(long long ttl_ms) {
    quorum_vote_t v = answered(BACKEND_ACQUIRE);
    v.res.outcome = BACKEND_TAKEN;
    v.res.ttl_ms = ttl_ms;
    return v;
}

static quorum_vote_t reentered(long long holds) {
    quorum_vote_t v = answered(BACKEND_ACQUIRE);
    v.res.outcome = BACKEND_REENTERED;
    v.res.holds = holds;
    return v;
}

static quorum_vote_t renewal(backend_renewal_t r) {
    quorum_vote_t v = answered(BACKEND_RENEW);
    v.res.renewal = r;
    return v;
}

static quorum_vote_t released(long long holds, int others) {
    quorum_vote_t v = answered(BACKEND_RELEASE);
    v.res.holds = holds;
    v.res.others_waiting = others;
    return v;
}

static quorum_vote_t status(long long ttl_ms, long long holds) {
    quorum_vote_t v = answered(BACKEND_STATUS);
    v.res.ttl_ms = ttl_ms;
    v.res.holds = holds;
    return v;
}

/* The same, from a node that does not count (rejoining, a duplicate). */
static quorum_vote_t outsider(quorum_vote_t v) {
    v.counts = 0;
    return v;
}

#define N(a) ((unsigned)(sizeof(a) / sizeof((a)[0])))

/* ---- which nodes count -------------------------------------------------------- */

START_TEST(test_counts_from_counts_at) {
    quorum_vote_node_t n = {.up = 1, .checked = 1, .counts_at = 5000};
    ck_assert_int_eq(quorum_vote_counts(&n, 4999), 0);
    ck_assert_str_eq(quorum_vote_node_state(&n, 4999), "rejoining");
    ck_assert_int_eq(quorum_vote_counts(&n, 5000), 1); /* from counts_at on */
    ck_assert_str_eq(quorum_vote_node_state(&n, 5000), "up");
    ck_assert_int_eq(quorum_vote_counts(&n, 5001), 1);
}
END_TEST

START_TEST(test_counts_needs_up_checked_unique) {
    quorum_vote_node_t n = {.up = 0, .checked = 1, .counts_at = 0};
    ck_assert_int_eq(quorum_vote_counts(&n, 100), 0);
    ck_assert_str_eq(quorum_vote_node_state(&n, 100), "down");
    n.up = 1;
    n.checked = 0;
    ck_assert_int_eq(quorum_vote_counts(&n, 100), 0);
    ck_assert_str_eq(quorum_vote_node_state(&n, 100), "checking");
    n.checked = 1;
    n.same_as = 2;
    ck_assert_int_eq(quorum_vote_counts(&n, 100), 0);
    ck_assert_str_eq(quorum_vote_node_state(&n, 100), "duplicate");
    n.same_as = 0;
    ck_assert_int_eq(quorum_vote_counts(&n, 100), 1);
}
END_TEST

START_TEST(test_counts_at_from_uptime) {
    /* Seconds are rounded down at start and now: up u s means started
     * after (u - 1) s ago at the latest; the delay runs from then. */
    ck_assert_uint_eq(quorum_vote_counts_at(100000, 0, 30000), 130000);
    ck_assert_uint_eq(quorum_vote_counts_at(100000, 1, 30000), 130000);
    ck_assert_uint_eq(quorum_vote_counts_at(100000, 2, 30000), 129000);
    ck_assert_uint_eq(quorum_vote_counts_at(100000, 31, 30000), 100000); /* counts now */
    ck_assert_uint_eq(quorum_vote_counts_at(100000, 32, 30000), 99000);
    /* Up longer than this clock has run: from its zero. */
    ck_assert_uint_eq(quorum_vote_counts_at(5000, 3600, 30000), 30000);
}
END_TEST

/* ---- INFO server --------------------------------------------------------------- */

static const char *info_text(const char *uptime) {
    static char buf[512];
    snprintf(buf, sizeof(buf),
             "# Server\r\nredis_version:7.0.15\r\nrun_id:0123456789abcdef0123456789abcdef01234567"
             "\r\ntcp_port:6379\r\nuptime_in_seconds:%s\r\nuptime_in_days:0\r\n",
             uptime);
    return buf;
}

START_TEST(test_info_good) {
    quorum_vote_info_t in;
    char err[128];
    ck_assert_int_eq(quorum_vote_info(info_text("12"), &in, err, sizeof(err)), 0);
    ck_assert_str_eq(in.run_id, "0123456789abcdef0123456789abcdef01234567");
    ck_assert_uint_eq(in.uptime_s, 12);
    ck_assert_int_eq(quorum_vote_info(info_text("0"), &in, err, sizeof(err)), 0);
    ck_assert_uint_eq(in.uptime_s, 0);
    /* The last line, without its \r\n, and with \n alone. */
    ck_assert_int_eq(quorum_vote_info("run_id:ab\nuptime_in_seconds:7", &in, err, sizeof(err)), 0);
    ck_assert_str_eq(in.run_id, "ab");
    ck_assert_uint_eq(in.uptime_s, 7);
    ck_assert_int_eq(quorum_vote_info("run_id:ab\r\nuptime_in_seconds:8\n", &in, err, sizeof(err)),
                     0);
    ck_assert_uint_eq(in.uptime_s, 8);
}
END_TEST

START_TEST(test_info_missing) {
    quorum_vote_info_t in;
    char err[128];
    ck_assert_int_eq(quorum_vote_info("# Server\r\nrun_id:ab\r\n", &in, err, sizeof(err)),
                     QUORUM_VOTE_INFO_MISSING);
    ck_assert_str_eq(err, "no uptime_in_seconds");
    ck_assert_int_eq(quorum_vote_info("uptime_in_seconds:5\r\n", &in, err, sizeof(err)),
                     QUORUM_VOTE_INFO_MISSING);
    ck_assert_str_eq(err, "no run_id");
    /* A key must begin its line and be followed by ':'. */
    ck_assert_int_eq(quorum_vote_info("run_id:ab\r\nxuptime_in_seconds:5\r\n"
                                      "uptime_in_seconds_x:5\r\n", &in, err, sizeof(err)),
                     QUORUM_VOTE_INFO_MISSING);
}
END_TEST

/* uptime_in_seconds is digits only, in range, up to the line's end: anything
 * else is an error, not the number its digits begin with. */
START_TEST(test_info_uptime_malformed) {
    const char *bad[] = {"12abc", "", " 12", "+12", "-1", "12 ", "0x10", "1e3", "12\tx",
                         "18446744073709552", /* QUORUM_VOTE_UPTIME_MAX + 1 */
                         "18446744073709551616", "99999999999999999999999999999"};
    quorum_vote_info_t in;
    char err[128];
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        ck_assert_msg(quorum_vote_info(info_text(bad[i]), &in, err, sizeof(err)) ==
                          QUORUM_VOTE_INFO_BAD,
                      "uptime_in_seconds:%s accepted (as %llu)", bad[i],
                      (unsigned long long)in.uptime_s);
        ck_assert_msg(strstr(err, "uptime_in_seconds") != NULL, "err: %s", err);
    }
    /* A \r that does not end the line is not its end. */
    ck_assert_int_eq(quorum_vote_info("run_id:ab\r\nuptime_in_seconds:12\rx\r\n", &in, err,
                                      sizeof(err)),
                     QUORUM_VOTE_INFO_BAD);
    /* The greatest taken. */
    ck_assert_int_eq(quorum_vote_info(info_text("18446744073709551"), &in, err, sizeof(err)), 0);
    ck_assert_uint_eq(in.uptime_s, QUORUM_VOTE_UPTIME_MAX);
}
END_TEST

/* ---- tally ----------------------------------------------------------------------- */

START_TEST(test_tally) {
    quorum_vote_t v[] = {grant(5), taken(100), failed(BACKEND_ACQUIRE, BACKEND_DOWN),
                         pending(BACKEND_ACQUIRE), outsider(grant(9)), reentered(1)};
    quorum_vote_tally_t t = quorum_vote_tally(v, N(v));
    ck_assert_uint_eq(t.yes, 2); /* the grant and the reentry; not the outsider */
    ck_assert_uint_eq(t.no, 1);
    ck_assert_uint_eq(t.silent, 1);
    ck_assert_uint_eq(t.pending, 1);
    ck_assert_uint_eq(t.answered, 3);
    /* Renew: only RENEWED is a yes; release: any answer is. */
    quorum_vote_t r[] = {renewal(BACKEND_RENEWED), renewal(BACKEND_GONE),
                         renewal(BACKEND_FORCED)};
    t = quorum_vote_tally(r, N(r));
    ck_assert_uint_eq(t.yes, 1);
    ck_assert_uint_eq(t.no, 2);
    quorum_vote_t l[] = {released(-1, 0), released(0, 0)};
    ck_assert_uint_eq(quorum_vote_tally(l, N(l)).yes, 2);
}
END_TEST

/* ---- acquire ------------------------------------------------------------------- */

START_TEST(test_acquire_majority_of_3) {
    quorum_vote_t v[] = {grant(7), grant(7), pending(BACKEND_ACQUIRE)};
    quorum_vote_acquire_t a = quorum_vote_acquire(v, 3, M(3));
    ck_assert_int_eq(a.what, QUORUM_VOTE_FENCE);
    ck_assert_uint_eq(a.fence, 7);
    ck_assert_int_eq(a.agree, 1);
    /* One grant, one taken, one out: not yet. */
    v[1] = taken(100);
    ck_assert_int_eq(quorum_vote_acquire(v, 3, M(3)).what, QUORUM_VOTE_WAIT);
    /* ... and when the last is taken too, or silent: failed. */
    v[2] = taken(100);
    ck_assert_int_eq(quorum_vote_acquire(v, 3, M(3)).what, QUORUM_VOTE_FAIL);
    v[2] = failed(BACKEND_ACQUIRE, BACKEND_DOWN);
    ck_assert_int_eq(quorum_vote_acquire(v, 3, M(3)).what, QUORUM_VOTE_FAIL);
}
END_TEST

START_TEST(test_acquire_majority_of_5_with_nodes_down) {
    quorum_vote_t v[] = {grant(3), failed(BACKEND_ACQUIRE, BACKEND_DOWN), grant(3),
                         failed(BACKEND_ACQUIRE, BACKEND_DOWN), pending(BACKEND_ACQUIRE)};
    /* 2 of 5 granted, 2 down, 1 out: it may still make 3. */
    ck_assert_int_eq(quorum_vote_acquire(v, 5, M(5)).what, QUORUM_VOTE_WAIT);
    v[4] = grant(3);
    ck_assert_int_eq(quorum_vote_acquire(v, 5, M(5)).what, QUORUM_VOTE_FENCE);
    v[4] = failed(BACKEND_ACQUIRE, BACKEND_FAILED);
    ck_assert_int_eq(quorum_vote_acquire(v, 5, M(5)).what, QUORUM_VOTE_FAIL);
}
END_TEST

START_TEST(test_acquire_not_counting_nodes_do_not_vote) {
    /* Two rejoining nodes granted: they neither make the majority nor set F. */
    quorum_vote_t v[] = {grant(4), outsider(grant(50)), grant(4), outsider(grant(60)),
                         taken(100)};
    ck_assert_int_eq(quorum_vote_acquire(v, 5, M(5)).what, QUORUM_VOTE_FAIL);
    v[4] = grant(5);
    quorum_vote_acquire_t a = quorum_vote_acquire(v, 5, M(5));
    ck_assert_int_eq(a.what, QUORUM_VOTE_FENCE);
    ck_assert_uint_eq(a.fence, 5);
    ck_assert_int_eq(a.agree, 0); /* only one counting node is at 5 */
    /* Of 3, one rejoining: the other two must both grant. */
    quorum_vote_t w[] = {grant(1), outsider(grant(1)), pending(BACKEND_ACQUIRE)};
    ck_assert_int_eq(quorum_vote_acquire(w, 3, M(3)).what, QUORUM_VOTE_WAIT);
    w[2] = taken(10);
    ck_assert_int_eq(quorum_vote_acquire(w, 3, M(3)).what, QUORUM_VOTE_FAIL);
}
END_TEST

START_TEST(test_acquire_split) {
    /* Two contenders with two nodes each, and one silent of 5: neither wins. */
    quorum_vote_t v[] = {grant(1), grant(1), taken(30), taken(30),
                         failed(BACKEND_ACQUIRE, BACKEND_DOWN)};
    ck_assert_int_eq(quorum_vote_acquire(v, 5, M(5)).what, QUORUM_VOTE_FAIL);
    /* 2 of 4 is a tie, not a majority (M(4) = 3). */
    quorum_vote_t w[] = {grant(1), grant(1), taken(30), taken(30)};
    ck_assert_int_eq(quorum_vote_acquire(w, 4, M(4)).what, QUORUM_VOTE_FAIL);
}
END_TEST

START_TEST(test_acquire_fence_max) {
    quorum_vote_t v[] = {grant(10), grant(7), grant(7)};
    quorum_vote_acquire_t a = quorum_vote_acquire(v, 3, M(3));
    ck_assert_int_eq(a.what, QUORUM_VOTE_FENCE);
    ck_assert_uint_eq(a.fence, 10);
    ck_assert_int_eq(a.agree, 0);
    v[1] = grant(12);
    a = quorum_vote_acquire(v, 3, M(3));
    ck_assert_uint_eq(a.fence, 12);
    ck_assert_int_eq(a.agree, 0);
    v[0] = grant(12);
    a = quorum_vote_acquire(v, 3, M(3));
    ck_assert_uint_eq(a.fence, 12);
    ck_assert_int_eq(a.agree, 1); /* two at F: the raise only evens the third */
}
END_TEST

START_TEST(test_acquire_reentered) {
    quorum_vote_t v[] = {reentered(2), reentered(3), grant(9)};
    quorum_vote_acquire_t a = quorum_vote_acquire(v, 3, M(3));
    ck_assert_int_eq(a.what, QUORUM_VOTE_REENTERED);
    ck_assert_int_eq(a.holds, 3);
    /* A reentry on a node that does not count still says so. */
    quorum_vote_t w[] = {grant(9), grant(9), outsider(reentered(1))};
    a = quorum_vote_acquire(w, 3, M(3));
    ck_assert_int_eq(a.what, QUORUM_VOTE_REENTERED);
    ck_assert_int_eq(a.holds, 1);
}
END_TEST

START_TEST(test_needs_raise) {
    quorum_vote_t below = grant(7), at = grant(10), above = grant(11);
    ck_assert_int_eq(quorum_vote_needs_raise(&below, 10, 0), 1);
    ck_assert_int_eq(quorum_vote_needs_raise(&below, 10, 1), 0); /* sent already */
    ck_assert_int_eq(quorum_vote_needs_raise(&at, 10, 0), 0);
    ck_assert_int_eq(quorum_vote_needs_raise(&above, 10, 0), 0);
    quorum_vote_t t = taken(5), p = pending(BACKEND_ACQUIRE),
                  d = failed(BACKEND_ACQUIRE, BACKEND_DOWN), r = reentered(1);
    ck_assert_int_eq(quorum_vote_needs_raise(&t, 10, 0), 0);
    ck_assert_int_eq(quorum_vote_needs_raise(&p, 10, 0), 0);
    ck_assert_int_eq(quorum_vote_needs_raise(&d, 10, 0), 0);
    ck_assert_int_eq(quorum_vote_needs_raise(&r, 10, 0), 0);
    /* A late grant below F from a rejoining node is raised too (PH_BACK). */
    quorum_vote_t o = outsider(grant(3));
    ck_assert_int_eq(quorum_vote_needs_raise(&o, 10, 0), 1);
}
END_TEST

START_TEST(test_raised) {
    ck_assert_uint_eq(quorum_vote_raised(BACKEND_OK, 1), QUORUM_VOTE_RAISED);
    ck_assert_uint_eq(quorum_vote_raised(BACKEND_OK, 0), QUORUM_VOTE_RAISE_NOT_HELD);
    ck_assert_uint_eq(quorum_vote_raised(BACKEND_DOWN, 1), QUORUM_VOTE_RAISE_NONE);
    ck_assert_uint_eq(quorum_vote_raised(BACKEND_FAILED, 0), QUORUM_VOTE_RAISE_NONE);
}
END_TEST

START_TEST(test_fence_check) {
    unsigned char sent[3] = {0, 1, 0}, raised[3] = {0, 0, 0};
    quorum_vote_t v[] = {grant(10), grant(7), grant(10)};
    /* Two at F already: granted, whatever the raise does. */
    ck_assert_int_eq(quorum_vote_fence_check(v, 3, M(3), 10, sent, raised, 1), QUORUM_VOTE_GRANT);
    /* One at F, one being raised: wait for it. */
    v[2] = taken(100);
    ck_assert_int_eq(quorum_vote_fence_check(v, 3, M(3), 10, sent, raised, 1), QUORUM_VOTE_WAIT);
    raised[1] = QUORUM_VOTE_RAISED;
    ck_assert_int_eq(quorum_vote_fence_check(v, 3, M(3), 10, sent, raised, 0), QUORUM_VOTE_GRANT);
    raised[1] = QUORUM_VOTE_RAISE_NOT_HELD; /* released meanwhile */
    ck_assert_int_eq(quorum_vote_fence_check(v, 3, M(3), 10, sent, raised, 0), QUORUM_VOTE_FAIL);
    raised[1] = QUORUM_VOTE_RAISE_NONE;
    ck_assert_int_eq(quorum_vote_fence_check(v, 3, M(3), 10, sent, raised, 0), QUORUM_VOTE_FAIL);
    /* One at F, the third not answered: it may still grant at F. */
    v[2] = pending(BACKEND_ACQUIRE);
    ck_assert_int_eq(quorum_vote_fence_check(v, 3, M(3), 10, sent, raised, 0), QUORUM_VOTE_WAIT);
    /* A raise not sent (no memory) counts as not done. */
    unsigned char none[3] = {0, 0, 0}, zero[3] = {0, 0, 0};
    v[2] = taken(100);
    ck_assert_int_eq(quorum_vote_fence_check(v, 3, M(3), 10, none, zero, 0), QUORUM_VOTE_FAIL);
    /* A raised node that does not count does not make the majority. */
    quorum_vote_t w[] = {grant(10), outsider(grant(7)), taken(5)};
    unsigned char up[3] = {0, QUORUM_VOTE_RAISED, 0}, s1[3] = {0, 1, 0};
    ck_assert_int_eq(quorum_vote_fence_check(w, 3, M(3), 10, s1, up, 0), QUORUM_VOTE_FAIL);
}
END_TEST

START_TEST(test_fence_check_of_5) {
    /* F = 20 on one node; two raised, one raise out, one down. */
    quorum_vote_t v[] = {grant(20), grant(15), grant(15), grant(15),
                         failed(BACKEND_ACQUIRE, BACKEND_DOWN)};
    unsigned char sent[5] = {0, 1, 1, 1, 0}, raised[5] = {0, QUORUM_VOTE_RAISED, 0, 0, 0};
    ck_assert_int_eq(quorum_vote_fence_check(v, 5, M(5), 20, sent, raised, 2), QUORUM_VOTE_WAIT);
    raised[2] = QUORUM_VOTE_RAISED;
    ck_assert_int_eq(quorum_vote_fence_check(v, 5, M(5), 20, sent, raised, 1), QUORUM_VOTE_GRANT);
    raised[2] = QUORUM_VOTE_RAISE_NOT_HELD;
    ck_assert_int_eq(quorum_vote_fence_check(v, 5, M(5), 20, sent, raised, 1), QUORUM_VOTE_WAIT);
    raised[3] = QUORUM_VOTE_RAISE_NONE;
    ck_assert_int_eq(quorum_vote_fence_check(v, 5, M(5), 20, sent, raised, 0), QUORUM_VOTE_FAIL);
}
END_TEST

START_TEST(test_lease_left_boundaries) {
    /* Granted only while elapsed + drift < lease. */
    ck_assert_int_eq(quorum_vote_lease_left(0, 10000, 102), 1);
    ck_assert_int_eq(quorum_vote_lease_left(9897, 10000, 102), 1);
    ck_assert_int_eq(quorum_vote_lease_left(9898, 10000, 102), 0);
    ck_assert_int_eq(quorum_vote_lease_left(9899, 10000, 102), 0);
    ck_assert_int_eq(quorum_vote_lease_left(0, 100, 100), 0);
    ck_assert_int_eq(quorum_vote_lease_left(0, 100, 99), 1);
    ck_assert_int_eq(quorum_vote_lease_left(UINT64_MAX - 200, 100, 0), 0);
    /* clock_drift_ms unset: lease/100 + 2. */
    ck_assert_uint_eq(quorum_vote_drift(CONF_DRIFT_AUTO, 10000), 102);
    ck_assert_uint_eq(quorum_vote_drift(CONF_DRIFT_AUTO, 99), 2);
    ck_assert_uint_eq(quorum_vote_drift(CONF_DRIFT_AUTO, 30000), 302);
    ck_assert_uint_eq(quorum_vote_drift(0, 10000), 0);
    ck_assert_uint_eq(quorum_vote_drift(50, 10000), 50);
}
END_TEST

START_TEST(test_straggle) {
    quorum_vote_t v[] = {grant(1), taken(100), pending(BACKEND_ACQUIRE)};
    ck_assert_int_eq(quorum_vote_straggle(v, 3, M(3)), 1);
    /* Nobody else holds it: wait for the straggler. */
    v[1] = failed(BACKEND_ACQUIRE, BACKEND_DOWN);
    ck_assert_int_eq(quorum_vote_straggle(v, 3, M(3)), 0);
    /* Everyone answered: nothing to wait for. */
    quorum_vote_t w[] = {grant(1), taken(100), taken(100)};
    ck_assert_int_eq(quorum_vote_straggle(w, 3, M(3)), 0);
    /* A rejoining node that has not answered is no straggler. */
    quorum_vote_t x[] = {grant(1), taken(100), outsider(pending(BACKEND_ACQUIRE)),
                         grant(1), pending(BACKEND_ACQUIRE)};
    ck_assert_int_eq(quorum_vote_straggle(x, 5, M(5)), 1);
    x[4] = grant(1);
    ck_assert_int_eq(quorum_vote_straggle(x, 5, M(5)), 0);
}
END_TEST

START_TEST(test_undo) {
    quorum_vote_t g = grant(1), t = taken(5), r = reentered(2), p = pending(BACKEND_ACQUIRE),
                  d = failed(BACKEND_ACQUIRE, BACKEND_DOWN),
                  f = failed(BACKEND_ACQUIRE, BACKEND_FAILED),
                  u = failed(BACKEND_ACQUIRE, BACKEND_UNACKED);
    ck_assert_int_eq(quorum_vote_undo(&g, 0), QUORUM_VOTE_UNDO_RELEASE);
    ck_assert_int_eq(quorum_vote_undo(&t, 0), QUORUM_VOTE_UNDO_NONE);
    ck_assert_int_eq(quorum_vote_undo(&r, 0), QUORUM_VOTE_UNDO_DROP);
    ck_assert_int_eq(quorum_vote_undo(&p, 0), QUORUM_VOTE_UNDO_RELEASE); /* it may run */
    ck_assert_int_eq(quorum_vote_undo(&d, 0), QUORUM_VOTE_UNDO_RELEASE); /* it may have run */
    ck_assert_int_eq(quorum_vote_undo(&f, 0), QUORUM_VOTE_UNDO_NONE);    /* it did not */
    ck_assert_int_eq(quorum_vote_undo(&u, 0), QUORUM_VOTE_UNDO_RELEASE); /* it ran */
    /* With a reentry somewhere, unknown answers keep the hold. */
    ck_assert_int_eq(quorum_vote_undo(&g, 1), QUORUM_VOTE_UNDO_RELEASE);
    ck_assert_int_eq(quorum_vote_undo(&r, 1), QUORUM_VOTE_UNDO_DROP);
    ck_assert_int_eq(quorum_vote_undo(&p, 1), QUORUM_VOTE_UNDO_NONE);
    ck_assert_int_eq(quorum_vote_undo(&d, 1), QUORUM_VOTE_UNDO_NONE);
    ck_assert_int_eq(quorum_vote_undo(&u, 1), QUORUM_VOTE_UNDO_NONE);
    ck_assert_int_eq(quorum_vote_undo(&t, 1), QUORUM_VOTE_UNDO_NONE);
    /* A rejoining node's grant is undone too. */
    quorum_vote_t o = outsider(grant(1));
    ck_assert_int_eq(quorum_vote_undo(&o, 0), QUORUM_VOTE_UNDO_RELEASE);
}
END_TEST

START_TEST(test_free_in) {
    /* Of 3, one free: the shortest holder's lease frees a majority. */
    quorum_vote_t v[] = {grant(1), taken(300), taken(100)};
    ck_assert_int_eq(quorum_vote_free_in(v, 3, M(3)), 100);
    /* Of 5, one free: the second shortest; no expiry (-1) sorts last. */
    quorum_vote_t w[] = {taken(500), taken(-1), grant(1), taken(200), taken(100)};
    ck_assert_int_eq(quorum_vote_free_in(w, 5, M(5)), 200);
    w[3] = taken(-1);
    ck_assert_int_eq(quorum_vote_free_in(w, 5, M(5)), 500);
    w[0] = taken(-1);
    ck_assert_int_eq(quorum_vote_free_in(w, 5, M(5)), -1);
    /* All taken of 3: the second shortest. */
    quorum_vote_t x[] = {taken(50), taken(40), taken(60)};
    ck_assert_int_eq(quorum_vote_free_in(x, 3, M(3)), 50);
}
END_TEST

START_TEST(test_free_in_split) {
    /* Free on a majority already (lost to a split): no TTL to wait for. */
    quorum_vote_t v[] = {grant(1), grant(1), taken(100)};
    ck_assert_int_eq(quorum_vote_free_in(v, 3, M(3)), QUORUM_VOTE_SPLIT);
    /* Too few answered to make a majority. */
    quorum_vote_t w[] = {grant(1), taken(100), failed(BACKEND_ACQUIRE, BACKEND_DOWN),
                         pending(BACKEND_ACQUIRE), outsider(taken(5))};
    ck_assert_int_eq(quorum_vote_free_in(w, 5, M(5)), QUORUM_VOTE_SPLIT);
    /* Nobody holds it. */
    quorum_vote_t x[] = {grant(1), failed(BACKEND_ACQUIRE, BACKEND_DOWN), grant(1)};
    ck_assert_int_eq(quorum_vote_free_in(x, 3, M(3)), QUORUM_VOTE_SPLIT);
}
END_TEST

/* ---- the other ops ----------------------------------------------------------- */

START_TEST(test_renew) {
    quorum_vote_t v[] = {renewal(BACKEND_RENEWED), renewal(BACKEND_RENEWED),
                         pending(BACKEND_RENEW)};
    ck_assert_int_eq(quorum_vote_renew(v, 3, M(3)), QUORUM_VOTE_RENEWED);
    v[1] = pending(BACKEND_RENEW);
    ck_assert_int_eq(quorum_vote_renew(v, 3, M(3)), QUORUM_VOTE_WAIT);
    v[1] = renewal(BACKEND_GONE);
    ck_assert_int_eq(quorum_vote_renew(v, 3, M(3)), QUORUM_VOTE_WAIT);
    v[2] = renewal(BACKEND_GONE);
    ck_assert_int_eq(quorum_vote_renew(v, 3, M(3)), QUORUM_VOTE_GONE);
    v[2] = renewal(BACKEND_FORCED);
    ck_assert_int_eq(quorum_vote_renew(v, 3, M(3)), QUORUM_VOTE_FORCED);
    /* One renewed, one silent: the silent one may have renewed it. */
    v[2] = failed(BACKEND_RENEW, BACKEND_DOWN);
    ck_assert_int_eq(quorum_vote_renew(v, 3, M(3)), QUORUM_VOTE_DOWN);
    v[0] = renewal(BACKEND_GONE);
    ck_assert_int_eq(quorum_vote_renew(v, 3, M(3)), QUORUM_VOTE_GONE);
}
END_TEST

START_TEST(test_renew_of_5) {
    quorum_vote_t v[] = {renewal(BACKEND_RENEWED), renewal(BACKEND_RENEWED),
                         outsider(renewal(BACKEND_RENEWED)), failed(BACKEND_RENEW, BACKEND_DOWN),
                         renewal(BACKEND_GONE)};
    /* 2 renewed and 1 silent among the 4 counting: maybe 3. */
    ck_assert_int_eq(quorum_vote_renew(v, 5, M(5)), QUORUM_VOTE_DOWN);
    v[3] = renewal(BACKEND_RENEWED);
    ck_assert_int_eq(quorum_vote_renew(v, 5, M(5)), QUORUM_VOTE_RENEWED);
}
END_TEST

START_TEST(test_clock_off_does_not_count) {
    quorum_vote_node_t n = {.up = 1, .checked = 1, .counts_at = 0};
    ck_assert_int_eq(quorum_vote_counts(&n, 10), 1);
    n.clock_off = 1;
    ck_assert_int_eq(quorum_vote_counts(&n, 10), 0);
    ck_assert_str_eq(quorum_vote_node_state(&n, 10), "clock");
    n.up = 0;
    ck_assert_str_eq(quorum_vote_node_state(&n, 10), "down");
}
END_TEST

/* A daemon cut off from a majority (those nodes stopped counting when their
 * replies went overdue): the two it still reaches renewed the lock, none
 * says it is gone. Not known (BACKEND_DOWN: !LOST backend at the loss
 * deadline), not gone (!LOST expired at once), found by netfaults.py. */
START_TEST(test_renew_cut_from_a_majority) {
    quorum_vote_t v[] = {renewal(BACKEND_RENEWED), renewal(BACKEND_RENEWED),
                         outsider(pending(BACKEND_RENEW)), outsider(pending(BACKEND_RENEW)),
                         outsider(pending(BACKEND_RENEW))};
    ck_assert_int_eq(quorum_vote_renew(v, 5, M(5)), QUORUM_VOTE_DOWN);
    /* A node restarted empty under the lock (its L gone, not counting),
     * two renewed, two never had it: still not known. */
    quorum_vote_t w[] = {outsider(renewal(BACKEND_GONE)), renewal(BACKEND_RENEWED),
                         renewal(BACKEND_RENEWED), renewal(BACKEND_GONE), renewal(BACKEND_GONE)};
    ck_assert_int_eq(quorum_vote_renew(w, 5, M(5)), QUORUM_VOTE_DOWN);
    /* Three counting nodes say gone: no majority can renew it. */
    w[1] = renewal(BACKEND_GONE);
    ck_assert_int_eq(quorum_vote_renew(w, 5, M(5)), QUORUM_VOTE_GONE);
}
END_TEST

START_TEST(test_release) {
    long long holds = 99;
    int others = 9;
    quorum_vote_t v[] = {released(-1, 0), pending(BACKEND_RELEASE), pending(BACKEND_RELEASE)};
    ck_assert_int_eq(quorum_vote_release(v, 3, M(3), &holds, &others), QUORUM_VOTE_WAIT);
    v[1] = failed(BACKEND_RELEASE, BACKEND_DOWN);
    ck_assert_int_eq(quorum_vote_release(v, 3, M(3), &holds, &others), QUORUM_VOTE_WAIT);
    v[2] = failed(BACKEND_RELEASE, BACKEND_DOWN);
    ck_assert_int_eq(quorum_vote_release(v, 3, M(3), &holds, &others), QUORUM_VOTE_DOWN);
    v[2] = released(2, 1);
    ck_assert_int_eq(quorum_vote_release(v, 3, M(3), &holds, &others), QUORUM_VOTE_DONE);
    ck_assert_int_eq(holds, 2);
    ck_assert_int_eq(others, 1);
    /* A majority that answered is enough: the third may come later. */
    quorum_vote_t w[] = {released(-1, 0), released(0, 0), pending(BACKEND_RELEASE)};
    ck_assert_int_eq(quorum_vote_release(w, 3, M(3), &holds, &others), QUORUM_VOTE_DONE);
    ck_assert_int_eq(holds, 0);
    ck_assert_int_eq(others, 0);
    /* Answers of a node that does not count do not make the majority. */
    quorum_vote_t x[] = {released(-1, 0), outsider(released(-1, 0)),
                         failed(BACKEND_DROP, BACKEND_DOWN)};
    ck_assert_int_eq(quorum_vote_release(x, 3, M(3), &holds, &others), QUORUM_VOTE_DOWN);
}
END_TEST

START_TEST(test_ask_all_and_status) {
    quorum_vote_t v[] = {status(500, 1), status(-1, 2), pending(BACKEND_STATUS)};
    ck_assert_int_eq(quorum_vote_ask_all(v, 3, M(3)), QUORUM_VOTE_WAIT);
    v[2] = failed(BACKEND_STATUS, BACKEND_DOWN);
    ck_assert_int_eq(quorum_vote_ask_all(v, 3, M(3)), QUORUM_VOTE_DONE);
    long long ttl, holds;
    quorum_vote_status(v, 3, M(3), &ttl, &holds);
    ck_assert_int_eq(ttl, 500); /* no expiry on one, 500 on the other: 500 on both */
    ck_assert_int_eq(holds, 1);
    v[0] = status(-1, 3);
    quorum_vote_status(v, 3, M(3), &ttl, &holds);
    ck_assert_int_eq(ttl, -1);
    ck_assert_int_eq(holds, 2);
    v[1] = status(-2, 0);
    quorum_vote_status(v, 3, M(3), &ttl, &holds);
    ck_assert_int_eq(ttl, -2); /* free on one of two */
    ck_assert_int_eq(holds, 0);
    v[1] = failed(BACKEND_STATUS, BACKEND_FAILED);
    ck_assert_int_eq(quorum_vote_ask_all(v, 3, M(3)), QUORUM_VOTE_DOWN);
    /* Of 5: the third greatest. */
    quorum_vote_t w[] = {status(100, 1), status(400, 1), outsider(status(900, 1)), status(300, 1),
                         status(200, 0)};
    ck_assert_int_eq(quorum_vote_ask_all(w, 5, M(5)), QUORUM_VOTE_DONE);
    quorum_vote_status(w, 5, M(5), &ttl, &holds);
    ck_assert_int_eq(ttl, 200);
    ck_assert_int_eq(holds, 1);
}
END_TEST

START_TEST(test_force) {
    quorum_vote_t v[] = {answered(BACKEND_FORCE), answered(BACKEND_FORCE),
                         outsider(answered(BACKEND_FORCE))};
    v[2].res.removed = 1;
    ck_assert_int_eq(quorum_vote_removed(v, 3), 0);
    v[1].res.removed = 1;
    ck_assert_int_eq(quorum_vote_removed(v, 3), 1);
}
END_TEST

START_TEST(test_who) {
    backend_who_t who[5], out;
    long long ttl;
    memset(who, 0, sizeof(who));
    quorum_vote_t v[] = {answered(BACKEND_WHO), answered(BACKEND_WHO), answered(BACKEND_WHO),
                         answered(BACKEND_WHO), failed(BACKEND_WHO, BACKEND_DOWN)};
    quorum_vote_who(v, who, 5, &out, &ttl);
    ck_assert_int_eq(ttl, -2);
    ck_assert_str_eq(out.owner, "");
    /* b on two nodes, a on one: b; its daemon from the first node naming it. */
    snprintf(who[0].owner, sizeof(who[0].owner), "a");
    snprintf(who[1].owner, sizeof(who[1].owner), "b");
    snprintf(who[3].owner, sizeof(who[3].owner), "b");
    snprintf(who[3].daemon, sizeof(who[3].daemon), "dlockd:h:1");
    v[1].res.ttl_ms = 700;
    v[3].res.ttl_ms = 650;
    quorum_vote_who(v, who, 5, &out, &ttl);
    ck_assert_str_eq(out.owner, "b");
    ck_assert_str_eq(out.daemon, "dlockd:h:1");
    ck_assert_int_eq(ttl, 700);
    /* A tie: the first node's holder. */
    v[3] = outsider(v[3]);
    quorum_vote_who(v, who, 5, &out, &ttl);
    ck_assert_str_eq(out.owner, "a");
}
END_TEST

/* ---- a multi-name acquire ------------------------------------------------------ */

static quorum_vote_t mset(quorum_vote_t v) {
    v.multi = 1;
    return v;
}

/* A set's refusal about name which. */
static quorum_vote_t mrefused(backend_outcome_t outcome, size_t which) {
    quorum_vote_t v = mset(answered(BACKEND_ACQUIRE));
    v.res.outcome = outcome;
    v.res.which = which;
    v.res.ttl_ms = 100;
    return v;
}

/* Only a grant of the whole set is a yes: a stale field (REENTERED)
 * changed nothing, and two such nodes make no majority. */
START_TEST(test_multi_yes) {
    quorum_vote_t v[3] = {mset(grant(0)), mrefused(BACKEND_REENTERED, 1),
                          mrefused(BACKEND_REENTERED, 0)};
    ck_assert(quorum_vote_yes(&v[0]));
    ck_assert(!quorum_vote_yes(&v[1]));
    ck_assert_int_eq(quorum_vote_acquire(v, 3, M(3)).what, QUORUM_VOTE_FAIL);
    /* two grants: the fence round, never REENTERED for a set */
    v[1] = mset(grant(0));
    ck_assert_int_eq(quorum_vote_acquire(v, 3, M(3)).what, QUORUM_VOTE_FENCE);
    /* one grant, one pending: wait */
    v[1] = mset(pending(BACKEND_ACQUIRE));
    ck_assert_int_eq(quorum_vote_acquire(v, 3, M(3)).what, QUORUM_VOTE_WAIT);
}
END_TEST

/* Each new name's F is the greatest counting grant's; a node agrees when
 * each of its new names has its F; a reentry's holds are not fences. */
START_TEST(test_multi_fences) {
    quorum_vote_t v[3] = {mset(grant(0)), mset(grant(0)), mset(taken(5))};
    uint64_t a[3] = {100, 2, 300}, b[3] = {200, 1, 250}, c[3] = {999, 9, 999};
    const uint64_t *values[3] = {a, b, c};
    uint64_t f[3];
    quorum_vote_multi_fences(v, values, 3, "nrn", 3, f);
    ck_assert_uint_eq(f[0], 200);
    ck_assert_uint_eq(f[1], 2);
    ck_assert_uint_eq(f[2], 300); /* c: taken there, not a grant */
    ck_assert(!quorum_vote_multi_agrees(a, "nrn", 3, f));
    ck_assert(!quorum_vote_multi_agrees(b, "nrn", 3, f));
    uint64_t d[3] = {200, 0, 300};
    ck_assert(quorum_vote_multi_agrees(d, "nrn", 3, f));
    /* a node that does not count gives no F */
    v[1].counts = 0;
    quorum_vote_multi_fences(v, values, 3, "nrn", 3, f);
    ck_assert_uint_eq(f[0], 100);
}
END_TEST

/* Undo: a grant is undone whole, an unknown answer by its new names, a
 * refusal or an error not at all. */
START_TEST(test_multi_undo) {
    quorum_vote_t g = mset(grant(0)), p = mset(pending(BACKEND_ACQUIRE));
    ck_assert_int_eq(quorum_vote_multi_undo(&g), QUORUM_VOTE_MUNDO_ALL);
    ck_assert_int_eq(quorum_vote_multi_undo(&p), QUORUM_VOTE_MUNDO_NEW);
    quorum_vote_t d = mset(failed(BACKEND_ACQUIRE, BACKEND_DOWN));
    ck_assert_int_eq(quorum_vote_multi_undo(&d), QUORUM_VOTE_MUNDO_NEW);
    quorum_vote_t e = mset(failed(BACKEND_ACQUIRE, BACKEND_FAILED));
    ck_assert_int_eq(quorum_vote_multi_undo(&e), QUORUM_VOTE_MUNDO_NONE);
    quorum_vote_t t = mrefused(BACKEND_TAKEN, 1), r = mrefused(BACKEND_REENTERED, 0);
    ck_assert_int_eq(quorum_vote_multi_undo(&t), QUORUM_VOTE_MUNDO_NONE);
    ck_assert_int_eq(quorum_vote_multi_undo(&r), QUORUM_VOTE_MUNDO_NONE);
}
END_TEST

/* A failed set's answer. */
START_TEST(test_multi_fail) {
    /* TAKEN about the name most refusing nodes name */
    quorum_vote_t v[3] = {mrefused(BACKEND_TAKEN, 2), mrefused(BACKEND_TAKEN, 1),
                          mrefused(BACKEND_TAKEN, 1)};
    quorum_vote_mfail_t f = quorum_vote_multi_fail(v, 3, M(3));
    ck_assert(!f.down);
    ck_assert_int_eq(f.outcome, BACKEND_TAKEN);
    ck_assert_uint_eq(f.which, 1);
    /* a tie: the first's */
    v[2] = mset(grant(0));
    f = quorum_vote_multi_fail(v, 3, M(3));
    ck_assert_uint_eq(f.which, 2);
    /* a kind on one node of 3 decides nothing: TAKEN */
    v[0] = mrefused(BACKEND_WRONG_KIND, 0);
    v[0].res.held = BACKEND_READ;
    f = quorum_vote_multi_fail(v, 3, M(3));
    ck_assert_int_eq(f.outcome, BACKEND_TAKEN);
    ck_assert_uint_eq(f.which, 1);
    /* ... on two it does */
    v[1] = v[0];
    f = quorum_vote_multi_fail(v, 3, M(3));
    ck_assert_int_eq(f.outcome, BACKEND_WRONG_KIND);
    ck_assert_int_eq(f.held, BACKEND_READ);
    ck_assert_uint_eq(f.which, 0);
    /* a hold gone on two goes first */
    v[2] = mrefused(BACKEND_HOLD_GONE, 2);
    v[1] = mrefused(BACKEND_HOLD_GONE, 2);
    f = quorum_vote_multi_fail(v, 3, M(3));
    ck_assert_int_eq(f.outcome, BACKEND_HOLD_GONE);
    ck_assert_uint_eq(f.which, 2);
    /* a stale field anywhere: REENTERED, to be cleared */
    quorum_vote_t w[3] = {mrefused(BACKEND_TAKEN, 0), mrefused(BACKEND_REENTERED, 1),
                          mset(grant(0))};
    w[1].res.holds = 3;
    f = quorum_vote_multi_fail(w, 3, M(3));
    ck_assert_int_eq(f.outcome, BACKEND_REENTERED);
    ck_assert_uint_eq(f.which, 1);
    ck_assert_int_eq(f.holds, 3);
    /* no counting node refused: DOWN; a node that does not count refuses nothing */
    quorum_vote_t x[3] = {mset(grant(0)), mset(failed(BACKEND_ACQUIRE, BACKEND_DOWN)),
                          mrefused(BACKEND_TAKEN, 0)};
    x[2].counts = 0;
    ck_assert(quorum_vote_multi_fail(x, 3, M(3)).down);
}
END_TEST

static Suite *quorum_vote_suite(void) {
    Suite *s = suite_create("quorum_vote");
    TCase *tc = tcase_create("counting");
    tcase_add_test(tc, test_counts_from_counts_at);
    tcase_add_test(tc, test_counts_needs_up_checked_unique);
    tcase_add_test(tc, test_counts_at_from_uptime);
    tcase_add_test(tc, test_info_good);
    tcase_add_test(tc, test_info_missing);
    tcase_add_test(tc, test_info_uptime_malformed);
    tcase_add_test(tc, test_tally);
    suite_add_tcase(s, tc);
    tc = tcase_create("acquire");
    tcase_add_test(tc, test_acquire_majority_of_3);
    tcase_add_test(tc, test_acquire_majority_of_5_with_nodes_down);
    tcase_add_test(tc, test_acquire_not_counting_nodes_do_not_vote);
    tcase_add_test(tc, test_acquire_split);
    tcase_add_test(tc, test_acquire_fence_max);
    tcase_add_test(tc, test_acquire_reentered);
    tcase_add_test(tc, test_needs_raise);
    tcase_add_test(tc, test_raised);
    tcase_add_test(tc, test_fence_check);
    tcase_add_test(tc, test_fence_check_of_5);
    tcase_add_test(tc, test_lease_left_boundaries);
    tcase_add_test(tc, test_straggle);
    tcase_add_test(tc, test_undo);
    tcase_add_test(tc, test_free_in);
    tcase_add_test(tc, test_free_in_split);
    suite_add_tcase(s, tc);
    tc = tcase_create("others");
    tcase_add_test(tc, test_renew);
    tcase_add_test(tc, test_renew_of_5);
    tcase_add_test(tc, test_renew_cut_from_a_majority);
    tcase_add_test(tc, test_clock_off_does_not_count);
    tcase_add_test(tc, test_release);
    tcase_add_test(tc, test_ask_all_and_status);
    tcase_add_test(tc, test_force);
    tcase_add_test(tc, test_who);
    tcase_add_test(tc, test_multi_yes);
    tcase_add_test(tc, test_multi_fences);
    tcase_add_test(tc, test_multi_undo);
    tcase_add_test(tc, test_multi_fail);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    SRunner *sr = srunner_create(quorum_vote_suite());
    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed_n = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed_n == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
