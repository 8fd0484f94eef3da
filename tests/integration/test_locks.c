/* Integration tests of lock semantics against a real redis-server: reentrancy,
 * fences, waiting, FIFO, disconnects, watchdog, leases, RENEW, FORCEUNLOCK.
 * SPDX-License-Identifier: MIT */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/support/harness.h"

/* Short leases keep the watchdog tests quick. */
#define SHORT_LEASE "[lock]\nlease_ms = 300\n"

static unsigned long long fence_of(const char *reply) {
    ck_assert_msg(reply != NULL, "no reply where a grant was expected");
    ck_assert_msg(strncmp(reply, "OK ", 3) == 0, "not a grant: '%s'", reply);
    return strtoull(reply + 3, NULL, 10);
}

/* Sends LOCK name and returns the fence of the grant. */
static unsigned long long lock_ok(h_conn_t *c, const char *name) {
    h_send(c, "LOCK %s\n", name);
    const char *r = h_recv(c, H_WAIT_MS);
    ck_assert_msg(r != NULL, "no reply to LOCK %s", name);
    return fence_of(r);
}

START_TEST(reentrancy_and_fences) {
    h_redis_start();
    int d = h_dlockd_start(NULL);
    h_conn_t *a = h_connect_index(d), *b = h_connect_index(d);
    unsigned long long f1 = lock_ok(a, "x");
    ck_assert_uint_gt(f1, 0);
    h_send(a, "LOCK x\n");
    const char *r = h_recv(a, H_WAIT_MS);
    ck_assert_ptr_nonnull(r);
    char want[64];
    snprintf(want, sizeof(want), "OK %llu 2", f1);
    ck_assert_str_eq(r, want); /* a reentrant grant keeps the fence */
    h_send(a, "TRYLOCK x 0\n");
    snprintf(want, sizeof(want), "OK %llu 3", f1);
    H_EXPECT(a, want);
    h_send(a, "UNLOCK x\n");
    H_EXPECT(a, "OK 2");
    h_send(a, "UNLOCK x\nUNLOCK x\n");
    H_EXPECT(a, "OK 1");
    H_EXPECT(a, "OK 0");
    h_send(a, "UNLOCK x\n");
    H_EXPECT_PREFIX(a, "ERR NOTHELD ");
    unsigned long long f2 = lock_ok(b, "x");
    ck_assert_uint_gt(f2, f1);
    h_send(b, "UNLOCK x\n");
    H_EXPECT(b, "OK 0");
    unsigned long long f3 = lock_ok(a, "x");
    ck_assert_uint_gt(f3, f2);
    h_close(a);
    h_close(b);
}
END_TEST

START_TEST(pipelined_lock_unlock) {
    h_redis_start();
    int d = h_dlockd_start(NULL);
    h_conn_t *a = h_connect_index(d);
    h_send(a, "LOCK p\nUNLOCK p\nLOCK p\nSTATUS p\nUNLOCK p\nSTATUS p\nPING\n");
    unsigned long long f1 = fence_of(h_recv(a, H_WAIT_MS));
    H_EXPECT(a, "OK 0");
    unsigned long long f2 = fence_of(h_recv(a, H_WAIT_MS));
    ck_assert_uint_gt(f2, f1);
    H_EXPECT_PREFIX(a, "OK MINE 1 ");
    H_EXPECT(a, "OK 0");
    H_EXPECT(a, "OK FREE");
    H_EXPECT(a, "OK PONG");
    h_close(a);
}
END_TEST

START_TEST(status_states) {
    h_redis_start();
    int d = h_dlockd_start(NULL);
    h_conn_t *a = h_connect_index(d), *b = h_connect_index(d);
    h_send(a, "STATUS s\n");
    H_EXPECT(a, "OK FREE");
    unsigned long long f = lock_ok(a, "s");
    h_send(a, "STATUS s\n");
    const char *r = h_recv(a, H_WAIT_MS);
    unsigned holds;
    long long ttl;
    unsigned long long fence;
    ck_assert_int_eq(sscanf(r, "OK MINE %u %lld %llu", &holds, &ttl, &fence), 3);
    ck_assert_uint_eq(holds, 1);
    ck_assert_int_gt(ttl, 0);
    ck_assert_uint_eq(fence, f);
    h_send(b, "STATUS s\n");
    r = h_recv(b, H_WAIT_MS);
    ck_assert_int_eq(sscanf(r, "OK TAKEN %lld", &ttl), 1);
    ck_assert_int_gt(ttl, 0);
    h_close(a);
    h_close(b);
}
END_TEST

START_TEST(trylock_waits_then_times_out) {
    h_redis_start();
    int d = h_dlockd_start(NULL);
    h_conn_t *a = h_connect_index(d), *b = h_connect_index(d);
    lock_ok(a, "t");
    long long t0 = h_now_ms();
    h_send(b, "TRYLOCK t\n");
    const char *r = h_recv(b, H_WAIT_MS);
    long long ttl;
    ck_assert_int_eq(sscanf(r, "TIMEOUT %lld", &ttl), 1);
    ck_assert_int_gt(ttl, 0);
    t0 = h_now_ms();
    h_send(b, "TRYLOCK t 300\n");
    r = h_recv(b, H_WAIT_MS);
    long long waited = h_now_ms() - t0;
    ck_assert_msg(r && strncmp(r, "TIMEOUT ", 8) == 0, "got '%s'", r ? r : "nothing");
    ck_assert_int_ge(waited, 290);
    ck_assert_int_lt(waited, 5000);
    /* Released during the wait: granted before the wait runs out. */
    h_send(b, "TRYLOCK t 5000\n");
    h_send(a, "UNLOCK t\n");
    H_EXPECT(a, "OK 0");
    r = h_recv(b, H_WAIT_MS);
    ck_assert_msg(r && strncmp(r, "OK ", 3) == 0, "got '%s'", r ? r : "nothing");
    h_close(a);
    h_close(b);
}
END_TEST

START_TEST(wakeup_follows_release) {
    h_redis_start();
    int d = h_dlockd_start(NULL);
    h_conn_t *a = h_connect_index(d), *b = h_connect_index(d), *adm = h_connect_index(d);
    lock_ok(a, "w");
    h_send(b, "LOCK w\n");
    h_await_waiters(adm, 1);
    long long t0 = h_now_us();
    h_send(a, "UNLOCK w\n");
    const char *r = h_recv(b, H_WAIT_MS);
    long long us = h_now_us() - t0;
    ck_assert_msg(r && strncmp(r, "OK ", 3) == 0, "got '%s'", r ? r : "nothing");
    /* The default lease is 30 s: anything near it would mean a missed wake-up. */
    ck_assert_msg(us < 1000000, "hand-off took %lld us", us);
    H_EXPECT(a, "OK 0");
    h_close(a);
    h_close(b);
    h_close(adm);
}
END_TEST

START_TEST(fifo_four_waiters) {
    h_redis_start();
    int d = h_dlockd_start(NULL);
    h_conn_t *a = h_connect_index(d), *adm = h_connect_index(d), *w[4];
    lock_ok(a, "q");
    for (int i = 0; i < 4; i++) {
        w[i] = h_connect_index(d);
        h_send(w[i], "LOCK q\n");
        h_await_waiters(adm, i + 1);
    }
    /* The holder unlocks and at once asks again: it queues behind all four. */
    h_send(a, "UNLOCK q\nLOCK q\n");
    H_EXPECT(a, "OK 0");
    unsigned long long last = 0;
    for (int i = 0; i < 4; i++) {
        unsigned long long f = fence_of(h_recv(w[i], H_WAIT_MS));
        ck_assert_uint_gt(f, last);
        last = f;
        for (int j = i + 1; j < 4; j++) h_expect_silence(w[j], 20, "unexpected line");
        h_expect_silence(a, 20, "unexpected line");
        h_send(w[i], "UNLOCK q\n");
        H_EXPECT(w[i], "OK 0");
    }
    ck_assert_uint_gt(fence_of(h_recv(a, H_WAIT_MS)), last);
    for (int i = 0; i < 4; i++) h_close(w[i]);
    h_close(a);
    h_close(adm);
}
END_TEST

START_TEST(disconnect_releases_holder) {
    h_redis_start();
    int d = h_dlockd_start(NULL);
    h_conn_t *a = h_connect_index(d), *b = h_connect_index(d), *adm = h_connect_index(d);
    lock_ok(a, "h");
    lock_ok(a, "h2");
    lock_ok(a, "h2"); /* two holds: all go with the connection */
    h_send(b, "LOCK h\n");
    h_await_waiters(adm, 1);
    h_close(a);
    const char *r = h_recv(b, H_WAIT_MS);
    ck_assert_msg(r && strncmp(r, "OK ", 3) == 0, "got '%s'", r ? r : "nothing");
    long long end = h_now_ms() + H_WAIT_MS;
    while (strcmp(h_redis_cli("EXISTS dlock:h2"), "0") != 0) {
        ck_assert_msg(h_now_ms() < end, "h2 never released");
        usleep(1000);
    }
    ck_assert_int_eq(h_info_value(adm, "locks_held"), 1);
    h_close(b);
    h_close(adm);
}
END_TEST

START_TEST(disconnect_removes_waiter) {
    h_redis_start();
    int d = h_dlockd_start(NULL);
    h_conn_t *a = h_connect_index(d), *b = h_connect_index(d), *c = h_connect_index(d);
    h_conn_t *adm = h_connect_index(d);
    lock_ok(a, "r");
    h_send(b, "LOCK r\n");
    h_await_waiters(adm, 1);
    h_send(c, "LOCK r\n");
    h_await_waiters(adm, 2);
    long long grants = h_info_value(adm, "grants");
    h_close(b);
    h_await_waiters(adm, 1);
    h_send(a, "UNLOCK r\n");
    H_EXPECT(a, "OK 0");
    const char *r = h_recv(c, H_WAIT_MS);
    ck_assert_msg(r && strncmp(r, "OK ", 3) == 0, "got '%s'", r ? r : "nothing");
    /* Exactly one grant since: c's. b was never granted. */
    ck_assert_int_eq(h_info_value(adm, "grants"), grants + 1);
    h_close(a);
    h_close(c);
    h_close(adm);
}
END_TEST

START_TEST(half_close_still_answered) {
    h_redis_start();
    int d = h_dlockd_start(NULL);
    h_conn_t *a = h_connect_index(d), *b = h_connect_index(d);
    h_send(a, "LOCK hc\nSTATUS hc\n");
    shutdown(a->fd, SHUT_WR);
    fence_of(h_recv(a, H_WAIT_MS));
    H_EXPECT_PREFIX(a, "OK MINE 1 ");
    ck_assert_int_eq(h_eof(a, H_WAIT_MS), 1);
    /* Closed after answering: the lock went with it. */
    h_send(b, "TRYLOCK hc 5000\n");
    fence_of(h_recv(b, H_WAIT_MS));
    h_close(a);
    h_close(b);
}
END_TEST

START_TEST(half_closed_waiter_then_gone_is_noticed) {
    h_redis_start();
    int d = h_dlockd_start(NULL);
    h_conn_t *a = h_connect_index(d), *b = h_connect_index(d), *c = h_connect_index(d);
    h_conn_t *adm = h_connect_index(d);
    lock_ok(a, "busy");
    /* b takes k, then waits for busy, and stops sending (as socat does). */
    h_send(b, "LOCK k\nLOCK busy\n");
    shutdown(b->fd, SHUT_WR);
    fence_of(h_recv(b, H_WAIT_MS));
    h_await_waiters(adm, 1);
    /* Now b goes away for good: its wait ends and k is released. */
    h_close(b);
    h_await_waiters(adm, 0);
    h_send(c, "TRYLOCK k 5000\n");
    fence_of(h_recv(c, H_WAIT_MS));
    h_close(a);
    h_close(c);
    h_close(adm);
}
END_TEST

START_TEST(watchdog_keeps_lock) {
    h_redis_start();
    int d = h_dlockd_start(SHORT_LEASE);
    h_conn_t *a = h_connect_index(d), *b = h_connect_index(d);
    lock_ok(a, "dog");
    /* Five leases pass: no !LOST, and it is still ours. */
    h_expect_silence(a, 1500, "unexpected line");
    h_send(a, "STATUS dog\n");
    H_EXPECT_PREFIX(a, "OK MINE 1 ");
    h_send(b, "TRYLOCK dog\n");
    H_EXPECT_PREFIX(b, "TIMEOUT ");
    ck_assert_int_ge(h_info_value(b, "renewals"), 3);
    h_close(a);
    h_close(b);
}
END_TEST

/* The watchdog renews many locks in a few script calls per round, not one
 * per lock (the batch script takes up to 500). */
START_TEST(watchdog_renews_in_batches) {
    h_redis_start();
    int d = h_dlockd_start("[lock]\nlease_ms = 600\n"); /* a round every 200 ms */
    h_conn_t *a = h_connect_index(d), *b = h_connect_index(d);
    enum { LOCKS = 200 };
    for (int i = 0; i < LOCKS; i++) h_send(a, "LOCK many%d\n", i);
    for (int i = 0; i < LOCKS; i++) H_EXPECT_PREFIX(a, "OK ");
    long long renewals = h_info_value(b, "renewals"), calls = h_redis_calls("evalsha");
    h_expect_silence(a, 1000, "unexpected line");
    renewals = h_info_value(b, "renewals") - renewals;
    calls = h_redis_calls("evalsha") - calls;
    /* About five rounds of 200 renewals; the registry's refresh (one call
     * a round) counts too. One call per lock would make about 1000. */
    ck_assert_msg(renewals >= 2 * LOCKS, "only %lld renewals", renewals);
    ck_assert_msg(calls * 20 <= renewals, "%lld script calls for %lld renewals", calls,
                  renewals);
    h_close(a);
    h_close(b);
}
END_TEST

START_TEST(lease_expiry_is_lost) {
    h_redis_start();
    int d = h_dlockd_start(NULL);
    h_conn_t *a = h_connect_index(d), *b = h_connect_index(d);
    long long t0 = h_now_ms();
    h_send(a, "LOCK e 300\n");
    fence_of(h_recv(a, H_WAIT_MS));
    H_EXPECT(a, "!LOST e expired");
    ck_assert_int_ge(h_now_ms() - t0, 250);
    h_send(a, "UNLOCK e\n");
    H_EXPECT_PREFIX(a, "ERR NOTHELD ");
    h_send(b, "TRYLOCK e 2000\n");
    fence_of(h_recv(b, H_WAIT_MS));
    h_close(a);
    h_close(b);
}
END_TEST

START_TEST(external_delete_is_lost) {
    h_redis_start();
    int d = h_dlockd_start(SHORT_LEASE);
    h_conn_t *a = h_connect_index(d);
    lock_ok(a, "gone");
    ck_assert_str_eq(h_redis_cli("DEL dlock:gone"), "1");
    H_EXPECT(a, "!LOST gone expired");
    h_close(a);
}
END_TEST

START_TEST(renew_extends) {
    h_redis_start();
    int d = h_dlockd_start(NULL);
    h_conn_t *a = h_connect_index(d);
    h_send(a, "LOCK rn 400\n");
    fence_of(h_recv(a, H_WAIT_MS));
    h_send(a, "RENEW rn 3000\n");
    H_EXPECT(a, "OK 3000");
    h_expect_silence(a, 700, "unexpected line"); /* past the first lease */
    h_send(a, "STATUS rn\n");
    const char *r = h_recv(a, H_WAIT_MS);
    unsigned holds;
    long long ttl;
    ck_assert_int_eq(sscanf(r, "OK MINE %u %lld", &holds, &ttl), 2);
    ck_assert_int_gt(ttl, 1000);
    h_send(a, "RENEW nothere\n");
    H_EXPECT_PREFIX(a, "ERR NOTHELD ");
    h_send(a, "LOCK wd\nRENEW wd\n");
    fence_of(h_recv(a, H_WAIT_MS));
    H_EXPECT(a, "OK 30000");
    h_close(a);
}
END_TEST

/* The two cases of mixing leases and watchdog mode that used to surprise:
 * RENEW w <lease> on a watchdog lock made it a lock with that lease, which
 * then expired; a reentrant LOCK x without a lease on a lock taken with a
 * lease kept that lease, and the lock expired under the reentrant holder.
 * Now RENEW renews a watchdog lock as it is, and a reentrant grant takes
 * the longest of the modes asked for, the watchdog being the longest. */
START_TEST(lease_and_watchdog_mix) {
    h_redis_start();
    int d = h_dlockd_start(SHORT_LEASE);
    h_conn_t *a = h_connect_index(d), *b = h_connect_index(d);
    lock_ok(a, "w");
    h_send(a, "RENEW w 2000\n");
    H_EXPECT(a, "OK 300"); /* the watchdog's lease, not the one given */
    h_send(a, "LOCK w 100\n");
    fence_of(h_recv(a, H_WAIT_MS));
    long long t = atoll(h_redis_cli("PTTL dlock:w"));
    ck_assert_msg(t > 0 && t <= 300, "PTTL %lld", t);

    h_send(a, "LOCK x 400\n");
    unsigned long long f = fence_of(h_recv(a, H_WAIT_MS));
    h_send(a, "LOCK x\n");
    char want[64];
    snprintf(want, sizeof(want), "OK %llu 2", f);
    H_EXPECT(a, want);
    /* Well past 2 s and the 400 ms lease: both still held, no !LOST. */
    h_expect_silence(a, 2500, "unexpected line");
    h_send(a, "STATUS w\nSTATUS x\n");
    H_EXPECT_PREFIX(a, "OK MINE 2 ");
    H_EXPECT_PREFIX(a, "OK MINE 2 ");
    h_send(b, "TRYLOCK w\nTRYLOCK x\n");
    H_EXPECT_PREFIX(b, "TIMEOUT ");
    H_EXPECT_PREFIX(b, "TIMEOUT ");
    /* x is kept by the watchdog now: RENEW answers its lease. */
    h_send(a, "RENEW x\n");
    H_EXPECT(a, "OK 300");
    h_send(a, "UNLOCK x\nUNLOCK x\n");
    H_EXPECT(a, "OK 1");
    H_EXPECT(a, "OK 0");
    /* Two leases: the longer one, from the reentry on. */
    h_send(a, "LOCK y 5000\nLOCK y 200\n");
    fence_of(h_recv(a, H_WAIT_MS));
    fence_of(h_recv(a, H_WAIT_MS));
    h_expect_silence(a, 500, "unexpected line");
    t = atoll(h_redis_cli("PTTL dlock:y"));
    ck_assert_msg(t > 4000 && t <= 5000, "PTTL %lld", t);
    ck_assert_int_eq(h_info_value(b, "lost"), 0);
    h_close(a);
    h_close(b);
}
END_TEST

START_TEST(forceunlock_and_denied) {
    h_redis_start();
    int d = h_dlockd_start(NULL); /* tests run as root: admin */
    h_conn_t *a = h_connect_index(d), *adm = h_connect_index(d), *w = h_connect_index(d);
    lock_ok(a, "f");
    h_send(w, "LOCK f\n");
    h_await_waiters(adm, 1);
    h_send(adm, "FORCEUNLOCK f\n");
    H_EXPECT(adm, "OK 1");
    H_EXPECT(a, "!LOST f forced");
    fence_of(h_recv(w, H_WAIT_MS)); /* the waiter got it */
    h_send(a, "UNLOCK f\n");
    H_EXPECT_PREFIX(a, "ERR NOTHELD ");
    h_send(adm, "FORCEUNLOCK nolock\n");
    H_EXPECT(adm, "OK 0");

    /* A peer that is neither root nor in admin_uids is refused. */
    int d2 = h_dlockd_start("[server]\nadmin_uids = 4242\nsocket_mode = 0666\n");
    const char *got = h_request_as(d2, 65534, "FORCEUNLOCK f");
    ck_assert_msg(strncmp(got, "ERR DENIED ", 11) == 0, "uid 65534 got '%s'", got);
    h_send(w, "STATUS f\n");
    H_EXPECT_PREFIX(w, "OK MINE 1 ");
    h_close(a);
    h_close(adm);
    h_close(w);
}
END_TEST

START_TEST(forced_elsewhere_is_reported_forced) {
    h_redis_start();
    int d1 = h_dlockd_start(SHORT_LEASE), d2 = h_dlockd_start(NULL);
    h_conn_t *a = h_connect_index(d1), *adm = h_connect_index(d2);
    lock_ok(a, "fe");
    h_send(adm, "FORCEUNLOCK fe\n");
    H_EXPECT(adm, "OK 1");
    /* The holder's daemon learns it at its next renewal. */
    H_EXPECT(a, "!LOST fe forced");
    h_close(a);
    h_close(adm);
}
END_TEST

START_TEST(limits) {
    h_redis_start();
    int d = h_dlockd_start("[lock]\nmax_locks_per_client = 2\nmax_waiters = 1\n");
    h_conn_t *a = h_connect_index(d), *b = h_connect_index(d), *c = h_connect_index(d);
    h_conn_t *adm = h_connect_index(d);
    lock_ok(a, "l1");
    lock_ok(a, "l2");
    h_send(a, "LOCK l3\n");
    H_EXPECT_PREFIX(a, "ERR LIMIT ");
    lock_ok(a, "l1"); /* reentry is no new lock */
    h_send(b, "LOCK l1\n");
    h_await_waiters(adm, 1);
    h_send(c, "LOCK l2\n");
    H_EXPECT_PREFIX(c, "ERR LIMIT ");
    h_send(c, "PING\n");
    H_EXPECT(c, "OK PONG");
    h_close(a);
    fence_of(h_recv(b, H_WAIT_MS));
    h_close(b);
    h_close(c);
    h_close(adm);
}
END_TEST

START_TEST(names_are_case_sensitive_and_arbitrary) {
    h_redis_start();
    int d = h_dlockd_start(NULL);
    h_conn_t *a = h_connect_index(d), *b = h_connect_index(d);
    lock_ok(a, "Case");
    lock_ok(b, "case");
    /* Names with braces and quotes are passed as data, never as code. */
    ck_assert_str_eq(h_redis_cli("SET sentinel 1"), "OK");
    const char *evil = "{tag}x'\"]]--;redis.call('flushall')";
    lock_ok(a, evil);
    h_send(a, "STATUS %s\n", evil);
    H_EXPECT_PREFIX(a, "OK MINE 1 ");
    ck_assert_str_eq(h_redis_cli("EXISTS sentinel"), "1");
    ck_assert_str_eq(h_redis_cli("EXISTS dlock:Case dlock:case"), "2");
    h_close(a);
    h_close(b);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("locks");
    TCase *tc = tcase_create("locks");
    tcase_add_checked_fixture(tc, h_setup, h_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, reentrancy_and_fences);
    tcase_add_test(tc, pipelined_lock_unlock);
    tcase_add_test(tc, status_states);
    tcase_add_test(tc, trylock_waits_then_times_out);
    tcase_add_test(tc, wakeup_follows_release);
    tcase_add_test(tc, fifo_four_waiters);
    tcase_add_test(tc, disconnect_releases_holder);
    tcase_add_test(tc, disconnect_removes_waiter);
    tcase_add_test(tc, half_close_still_answered);
    tcase_add_test(tc, half_closed_waiter_then_gone_is_noticed);
    tcase_add_test(tc, watchdog_keeps_lock);
    tcase_add_test(tc, watchdog_renews_in_batches);
    tcase_add_test(tc, lease_expiry_is_lost);
    tcase_add_test(tc, external_delete_is_lost);
    tcase_add_test(tc, renew_extends);
    tcase_add_test(tc, lease_and_watchdog_mix);
    tcase_add_test(tc, forceunlock_and_denied);
    tcase_add_test(tc, forced_elsewhere_is_reported_forced);
    tcase_add_test(tc, limits);
    tcase_add_test(tc, names_are_case_sensitive_and_arbitrary);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return h_main(suite());
}
