/* Integration tests of multi-name locks (MLOCK, TRYMLOCK, MUNLOCK) against a real Redis:
 * all or nothing, wake-ups, no deadlock, no starvation, a dead client, bad input (quorum's:
 * test_mlock_quorum.c; Cluster's: test_mlock_cluster.c).
 * SPDX-License-Identifier: MIT */
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/support/harness.h"
#include "tests/support/mlock_steps.h"
#include "tests/support/redisson.h"

#define FOREIGN "c0ffee00-0000-4000-8000-000000000000:1"
/* How long a wake-up may take on a busy machine (make test). */
#define PROMPT_MS 3000

static void keep_log(int d) {
    h_keep_log(d, "mlock.%s.dlockd%d", tcase_name(), d);
}

static long long key_exists(const char *name) {
    char key[300];
    snprintf(key, sizeof(key), "dlock:%s", name);
    const char *a[] = {"EXISTS", key, NULL};
    return strtoll(h_redis_argv(a), NULL, 10);
}

/* Waits until none of the names is a key in Redis. */
static void await_gone(const char *const *names, size_t n) {
    long long until = h_now_ms() + H_WAIT_MS;
    for (;;) {
        size_t left = 0;
        for (size_t i = 0; i < n; i++) left += key_exists(names[i]) != 0;
        if (left == 0) return;
        ck_assert_msg(h_now_ms() < until, "%zu names still held in Redis", left);
        usleep(20000);
    }
}

/* ---- standalone ------------------------------------------------------------ */

/* A Redisson RLock on one of three names keeps MLOCK waiting with none of
 * the three taken; Redisson's unlock (its publish) brings the grant. */
START_TEST(all_or_nothing_against_redisson) {
    h_redis_start();
    int d = h_dlockd_start(NULL);
    keep_log(d);
    h_conn_t *c = h_connect_index(d), *adm = h_connect_index(d);
    const char *lk[] = {"EVAL", redisson_lock, "1", "dlock:m2", "30000", FOREIGN, NULL};
    h_redis_argv(lk);
    ck_assert_int_eq(key_exists("m2"), 1);
    h_send(c, "MLOCK 3 m1 m2 m3\n");
    h_await_waiters(adm, 1); /* one request waiting, with a place in each queue */
    h_expect_silence(c, 300, "MLOCK while Redisson holds m2");
    ck_assert_int_eq(key_exists("m1"), 0);
    ck_assert_int_eq(key_exists("m3"), 0);
    long long t0 = h_now_ms();
    const char *ul[] = {"EVAL", redisson_unlock, "2", "dlock:m2",
                        "redisson_lock__channel:{dlock:m2}", "0", "30000", FOREIGN, NULL};
    h_redis_argv(ul);
    unsigned long long f[3];
    expect_granted(c, 3, f, PROMPT_MS, "MLOCK once Redisson unlocked m2");
    printf("mlock: granted %lld ms after Redisson's unlock\n", h_now_ms() - t0);
    ck_assert_int_eq(key_exists("m1") + key_exists("m2") + key_exists("m3"), 3);
    /* each is an ordinary plain lock now */
    expect_prefix(c, "STATUS m2", "OK MINE 1 ");
    expect_prefix(adm, "WHO m3", "OK HELD ");
    h_send(c, "LOCK m1\n");
    char want[64];
    snprintf(want, sizeof(want), "OK %llu 2", f[0]);
    ck_assert_str_eq(h_reply(c, H_WAIT_MS, H_EVENTS_SKIP), want);
    h_expect_reply(c, "MUNLOCK 3 m3 m2 m1", "OK 0 0 1");
    h_expect_reply(c, "UNLOCK m1", "OK 0");
    const char *all[] = {"m1", "m2", "m3"};
    await_gone(all, 3);
    h_close(adm);
    h_close(c);
    h_keep_passed();
}
END_TEST

/* Held here by others: the grant comes when the last is freed, not
 * before; a set's reentry gives the hold's own fence. */
START_TEST(grant_when_last_freed) {
    h_redis_start();
    int d = h_dlockd_start(NULL);
    keep_log(d);
    h_conn_t *a = h_connect_index(d), *b = h_connect_index(d), *c = h_connect_index(d);
    h_conn_t *adm = h_connect_index(d);
    expect_prefix(a, "LOCK a", "OK ");
    expect_prefix(b, "LOCK b", "OK ");
    expect_prefix(c, "LOCK r", "OK ");
    h_send(c, "MLOCK 3 a r b\n");
    h_await_waiters(adm, 1); /* the set waits (r, a reentry, has no place) */
    h_expect_reply(a, "UNLOCK a", "OK 0");
    h_expect_silence(c, 300, "MLOCK while b is held");
    ck_assert_int_eq(key_exists("a"), 0);
    long long t0 = h_now_ms();
    h_expect_reply(b, "UNLOCK b", "OK 0");
    unsigned long long f[3];
    expect_granted(c, 3, f, PROMPT_MS, "MLOCK once the last name was freed");
    printf("mlock: granted %lld ms after the last name's UNLOCK\n", h_now_ms() - t0);
    h_expect_reply(c, "UNLOCK r", "OK 1");
    h_expect_reply(c, "MUNLOCK 3 a r b", "OK 0 0 0");
    const char *all[] = {"a", "b", "r"};
    await_gone(all, 3);
    h_close(adm);
    h_close(c);
    h_close(b);
    h_close(a);
    h_keep_passed();
}
END_TEST

/* Two clients lock {a,b} and {b,a} 1,000 times each: neither deadlocks,
 * and they never hold the set together. */
START_TEST(opposite_orders_no_deadlock) {
    enum { ROUNDS = 1000 };
    h_redis_start();
    int d = h_dlockd_start(NULL);
    keep_log(d);
    long long took = opposite_orders(d, d, "a", "b", ROUNDS);
    printf("mlock: 2 x %d opposite-order sets in %lld ms\n", ROUNDS, took);
    const char *all[] = {"a", "b"};
    await_gone(all, 2);
    h_keep_passed();
}
END_TEST

/* One client loops LOCK name, a few ms held, UNLOCK, a ms apart. */
static pid_t alternate(int d, const char *name, int seconds) {
    pid_t pid = fork();
    if (pid != 0) return pid;
    h_conn_t *c = h_connect_index(d);
    long long until = h_now_ms() + seconds * 1000LL;
    while (h_now_ms() < until) {
        h_send(c, "LOCK %s\n", name);
        const char *l = h_recv(c, H_WAIT_MS);
        if (l == NULL || strncmp(l, "OK ", 3) != 0) _exit(1);
        usleep(5000);
        h_send(c, "UNLOCK %s\n", name);
        l = h_recv(c, H_WAIT_MS);
        if (l == NULL || strcmp(l, "OK 0") != 0) _exit(2);
        usleep(1000);
    }
    _exit(0);
}

/* A multi-locker of {a,b} is granted within 2 s while two other clients
 * alternate on a and on b: it keeps its place in each name's queue. */
START_TEST(no_starvation_behind_single_lockers) {
    h_redis_start();
    int d = h_dlockd_start(NULL);
    keep_log(d);
    pid_t pa = alternate(d, "a", 10), pb = alternate(d, "b", 10);
    usleep(500000); /* both alternating */
    h_conn_t *c = h_connect_index(d);
    unsigned long long f[2];
    long long t0 = h_now_ms();
    h_send(c, "MLOCK 2 a b\n");
    expect_granted(c, 2, f, 2000, "MLOCK 2 a b among alternating single lockers");
    long long took = h_now_ms() - t0;
    printf("mlock: {a,b} granted in %lld ms among two alternating single lockers\n", took);
    ck_assert_int_le(took, 2000);
    usleep(20000);
    h_expect_reply(c, "MUNLOCK 2 a b", "OK 0 0");
    for (int k = 0; k < 2; k++) {
        int st;
        pid_t p = k ? pb : pa;
        ck_assert_int_eq(waitpid(p, &st, 0), p);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "alternator %d: exit %d", k,
                      WEXITSTATUS(st));
    }
    h_close(c);
    h_keep_passed();
}
END_TEST

/* A client that dies holding a set frees all of it, and one that dies
 * waiting leaves nothing of it behind. */
START_TEST(dead_client_frees_set) {
    h_redis_start();
    int d = h_dlockd_start(NULL);
    keep_log(d);
    h_conn_t *c = h_connect_index(d), *w = h_connect_index(d), *adm = h_connect_index(d);
    unsigned long long f[3];
    h_send(c, "MLOCK 3 d1 d2 d3 60000\n");
    expect_granted(c, 3, f, H_WAIT_MS, "MLOCK 3 d1 d2 d3");
    h_send(w, "MLOCK 2 d3 d4\n");
    h_await_waiters(adm, 1);
    h_close(w); /* dies waiting */
    h_await_waiters(adm, 0);
    ck_assert_int_eq(key_exists("d4"), 0);
    h_close(c); /* dies holding */
    const char *all[] = {"d1", "d2", "d3", "d4"};
    await_gone(all, 4);
    h_close(adm);
    h_keep_passed();
}
END_TEST

/* CANCEL of a waiting MLOCK: nothing of the set stays held. */
START_TEST(cancel_leaves_nothing) {
    h_redis_start();
    int d = h_dlockd_start(NULL);
    keep_log(d);
    h_conn_t *h = h_connect_index(d), *c = h_connect_index(d);
    expect_prefix(h, "LOCK k2", "OK ");
    h_send(c, "MLOCK 2 k1 k2\n");
    h_expect_silence(c, 200, "MLOCK while k2 is held");
    h_send(c, "CANCEL\n");
    const char *l = h_recv(c, H_WAIT_MS);
    ck_assert_msg(l && strncmp(l, "ERR CANCELLED", 13) == 0, "got '%s'", l ? l : "-");
    ck_assert_str_eq(h_recv(c, H_WAIT_MS), "OK 1");
    ck_assert_int_eq(key_exists("k1"), 0);
    expect_prefix(c, "STATUS k1", "OK FREE");
    /* k1 is free for others at once */
    expect_prefix(c, "TRYLOCK k1", "OK ");
    h_close(c);
    h_close(h);
    h_keep_passed();
}
END_TEST

/* CANCEL right behind a waiting MLOCK whose acquire may be in Redis (the
 * holder's UNLOCK just sent it): once CANCEL is answered, no later request
 * of any connection sees a name of the set held. */
START_TEST(cancel_in_flight_leaves_nothing) {
    enum { ROUNDS = 200 };
    h_redis_start();
    int d = h_dlockd_start(NULL);
    keep_log(d);
    h_conn_t *h = h_connect_index(d), *c = h_connect_index(d), *k = h_connect_index(d);
    int cancelled = 0;
    for (int i = 0; i < ROUNDS; i++) {
        char n[3][32], req[128];
        for (int j = 0; j < 3; j++) snprintf(n[j], sizeof(n[j]), "ci%c%d", 'a' + j, i);
        snprintf(req, sizeof(req), "LOCK %s", n[2]);
        expect_prefix(h, req, "OK ");
        h_send(c, "MLOCK 3 %s %s %s\n", n[0], n[1], n[2]);
        h_await_waiters(k, 1); /* the set counts once */
        snprintf(req, sizeof(req), "UNLOCK %s", n[2]);
        h_expect_reply(h, req, "OK 0");
        h_send(c, "CANCEL\n");
        const char *l = h_recv(c, H_WAIT_MS);
        ck_assert_msg(l != NULL, "round %d: no answer to MLOCK", i);
        if (strncmp(l, "ERR CANCELLED", 13) == 0) {
            cancelled++;
            H_EXPECT(c, "OK 1");
        } else {
            unsigned long long f[3];
            ck_assert_msg(parse_fences(l, 3, f), "round %d: got '%s'", i, l);
            H_EXPECT(c, "OK 0"); /* too late: nothing to cancel */
            snprintf(req, sizeof(req), "MUNLOCK 3 %s %s %s", n[0], n[1], n[2]);
            h_expect_reply(c, req, "OK 0 0 0");
        }
        for (int j = 0; j < 3; j++) {
            snprintf(req, sizeof(req), "STATUS %s", n[j]);
            h_send(k, "%s\n", req);
            const char *st = h_reply(k, H_WAIT_MS, H_EVENTS_SKIP);
            ck_assert_msg(st != NULL && strncmp(st, "OK FREE", 7) == 0,
                          "round %d: %s after the set's CANCEL: got '%s'", i, req,
                          st ? st : "-");
        }
    }
    printf("mlock: %d of %d rounds cancelled\n", cancelled, ROUNDS);
    h_close(k);
    h_close(c);
    h_close(h);
    h_keep_passed();
}
END_TEST

/* Bad input, kinds and limits. */
START_TEST(bad_input) {
    h_redis_start();
    int d = h_dlockd_start("[lock]\nmax_locks_per_client = 3\n");
    keep_log(d);
    h_conn_t *c = h_connect_index(d);
    expect_prefix(c, "MLOCK 0 a", "ERR ARGS");
    expect_prefix(c, "MLOCK 65 a", "ERR ARGS");
    expect_prefix(c, "MLOCK 3 a b", "ERR ARGS");
    expect_prefix(c, "MLOCK 1 a b c", "ERR ARGS");
    expect_prefix(c, "MLOCK 2 a a", "ERR ARGS");
    expect_prefix(c, "TRYMLOCK 3 a b a 10", "ERR ARGS");
    expect_prefix(c, "MUNLOCK 2 a", "ERR ARGS");
    expect_prefix(c, "MLOCK 2 a \x01", "ERR NAME");
    expect_prefix(c, "MLOCK 4 a b c d", "ERR LIMIT");
    expect_prefix(c, "RLOCK r", "OK ");
    expect_prefix(c, "MLOCK 2 x r", "ERR KIND r is held as a read/write lock");
    ck_assert_int_eq(key_exists("x"), 0);
    unsigned long long f[2];
    h_send(c, "MLOCK 2 x y\n");
    expect_granted(c, 2, f, H_WAIT_MS, "MLOCK 2 x y");
    expect_prefix(c, "MUNLOCK 2 x z", "ERR NOTHELD z ");
    expect_prefix(c, "MUNLOCK 1 r", "ERR KIND");
    expect_prefix(c, "STATUS x", "OK MINE 1 "); /* nothing released */
    h_expect_reply(c, "MUNLOCK 2 y x", "OK 0 0");
    h_close(c);
    h_keep_passed();
}
END_TEST

/* Each new name's fence is its counter plus one when the counter is ahead
 * of Redis's clock, and the counters keep the fences given; a counter of
 * another type fails the set before anything is written. */
START_TEST(fences_from_counters) {
    h_redis_start();
    int d = h_dlockd_start(NULL);
    keep_log(d);
    h_conn_t *c = h_connect_index(d);
    const char *ahead[] = {"SET", "redisson_lock_token:{dlock:fb}", "9000000000000000", NULL};
    h_redis_argv(ahead);
    unsigned long long f[3];
    h_send(c, "MLOCK 3 fa fb fc\n");
    expect_granted(c, 3, f, H_WAIT_MS, "MLOCK 3 fa fb fc");
    ck_assert_uint_eq(f[1], 9000000000000001ULL);
    ck_assert(f[0] > 0 && f[0] < f[1] && f[2] > 0 && f[2] < f[1]);
    const char *names[] = {"fa", "fb", "fc"};
    for (int i = 0; i < 3; i++) {
        char key[64];
        snprintf(key, sizeof(key), "redisson_lock_token:{dlock:%s}", names[i]);
        const char *get[] = {"GET", key, NULL};
        ck_assert_uint_eq(strtoull(h_redis_argv(get), NULL, 10), f[i]);
    }
    h_expect_reply(c, "MUNLOCK 3 fa fb fc", "OK 0 0 0");
    const char *wrong[] = {"HSET", "redisson_lock_token:{dlock:fd}", "x", "1", NULL};
    h_redis_argv(wrong);
    expect_prefix(c, "MLOCK 2 fe fd", "ERR ");
    ck_assert_int_eq(key_exists("fe"), 0);
    ck_assert_int_eq(key_exists("fd"), 0);
    const char *fixed[] = {"DEL", "redisson_lock_token:{dlock:fd}", NULL};
    h_redis_argv(fixed);
    h_send(c, "MLOCK 2 fe fd\n");
    expect_granted(c, 2, f, H_WAIT_MS, "MLOCK 2 fe fd once the counter is a counter");
    h_expect_reply(c, "MUNLOCK 2 fe fd", "OK 0 0");
    h_close(c);
    h_keep_passed();
}
END_TEST

/* A name held with a lease, sent in a set as a reentry, whose lease ends
 * here while the script waits in Redis, which (counting the lease from
 * when the LOCK ran, late) still has it and grants the set (issue 36, bug
 * 3): the daemon crashed on the hold that was no longer there. The lease's
 * release is on its way behind the script: the holder hears !LOST, and the
 * set asks for the name anew and is granted, one hold of each in Redis. */
START_TEST(held_name_lapses_while_set_in_flight) {
    h_redis_start();
    int d = h_dlockd_start("[redis]\ncommand_timeout_ms = 15000\n");
    keep_log(d);
    h_conn_t *a = h_connect_index(d);
    /* The LOCK runs 1.5 s late: Redis keeps x 1.5 s past our lease. */
    ck_assert_str_eq(h_redis_cli("CLIENT PAUSE 20000 WRITE"), "OK");
    h_send(a, "LOCK lx 4000\n");
    usleep(1500 * 1000);
    ck_assert_str_eq(h_redis_cli("CLIENT UNPAUSE"), "OK");
    unsigned long long g[2]; /* fence, holds */
    expect_granted(a, 2, g, H_WAIT_MS, "LOCK lx 4000");
    ck_assert_str_eq(h_redis_cli("CLIENT PAUSE 20000 WRITE"), "OK");
    h_send(a, "MLOCK 2 lx ly\n");
    h_expect_event(a, "!LOST lx expired", 6000, "lx's lease, with the set in Redis");
    ck_assert_str_eq(h_redis_cli("CLIENT UNPAUSE"), "OK");
    unsigned long long f[2];
    expect_granted(a, 2, f, H_WAIT_MS, "MLOCK 2 lx ly, lx asked for anew");
    ck_assert_uint_gt(f[0], g[0]); /* a new grant of lx */
    expect_prefix(a, "STATUS lx", "OK MINE 1 ");
    ck_assert_str_eq(h_redis_cli("HLEN dlock:lx"), "1");
    ck_assert_str_eq(h_redis_cli("HVALS dlock:lx"), "1");
    h_expect_reply(a, "MUNLOCK 2 lx ly", "OK 0 0");
    const char *all[] = {"lx", "ly"};
    await_gone(all, 2);
    h_close(a);
    h_keep_passed();
}
END_TEST

/* A holds x, B waits for it on the same daemon; another daemon's
 * FORCEUNLOCK takes x away, and A's MLOCK of x and y finds it gone
 * (issue 36, bug 4): B was never woken (STATUS FREE, waiters 2). Now A
 * hears !LOST x forced, B is granted at once, and A's set waits behind B. */
START_TEST(forced_held_name_wakes_waiter) {
    h_redis_start();
    /* renewals 20 s apart: the holder's daemon learns of the force only
     * from the set */
    int d1 = h_dlockd_start("[lock]\nlease_ms = 60000\n"), d2 = h_dlockd_start(NULL);
    keep_log(d1);
    h_conn_t *a = h_connect_index(d1), *b = h_connect_index(d1), *adm = h_connect_index(d1);
    h_conn_t *other = h_connect_index(d2);
    expect_prefix(a, "LOCK fx", "OK ");
    h_send(b, "LOCK fx\n");
    h_await_waiters(adm, 1);
    h_expect_reply(other, "FORCEUNLOCK fx", "OK 1");
    h_send(a, "MLOCK 2 fx fy\n");
    const char *l = h_reply(b, PROMPT_MS, H_EVENTS_FAIL);
    ck_assert_msg(l != NULL && strncmp(l, "OK ", 3) == 0, "B waiting for fx: got '%s'",
                  l ? l : "nothing");
    h_expect_event(a, "!LOST fx forced", H_WAIT_MS, "fx forced away by another daemon");
    h_expect_silence(a, 300, "MLOCK while B holds fx");
    ck_assert_int_eq(h_info_value(adm, "waiters"), 1);
    h_expect_reply(b, "UNLOCK fx", "OK 0");
    unsigned long long f[2];
    expect_granted(a, 2, f, PROMPT_MS, "MLOCK once B unlocked fx");
    h_expect_reply(a, "MUNLOCK 2 fx fy", "OK 0 0");
    const char *all[] = {"fx", "fy"};
    await_gone(all, 2);
    ck_assert_int_eq(h_info_value(adm, "waiters"), 0);
    h_close(other);
    h_close(adm);
    h_close(b);
    h_close(a);
    h_keep_passed();
}
END_TEST

/* A's set of x (held: a reentry) and y waits for y, held on another
 * daemon; B waits for x here. Another daemon's FORCEUNLOCK takes x away
 * and A's daemon hears of it at x's next renewal: !LOST x forced, B gets
 * x. y's release then wakes the set, which asks for x anew, behind B. B's
 * UNLOCK wakes that place, but the set, refused for y, took it for no
 * news and waited on, every name free, until y's retry turn (the lease y
 * had when it refused the set, 60 s here). */
START_TEST(forced_reentry_requeued_behind_waiter) {
    h_redis_start();
    /* renewals every second: A's daemon hears of the force at once */
    int d1 = h_dlockd_start("[lock]\nlease_ms = 3000\n"), d2 = h_dlockd_start(NULL);
    keep_log(d1);
    h_conn_t *a = h_connect_index(d1), *b = h_connect_index(d1), *adm = h_connect_index(d1);
    h_conn_t *c = h_connect_index(d2), *other = h_connect_index(d2);
    expect_prefix(a, "LOCK rx", "OK ");
    expect_prefix(c, "LOCK ry 60000", "OK ");
    h_send(a, "MLOCK 2 rx ry\n");
    h_await_waiters(adm, 1);
    h_expect_silence(a, 200, "MLOCK while C holds ry");
    h_send(b, "LOCK rx\n");
    h_await_waiters(adm, 2);
    h_expect_reply(other, "FORCEUNLOCK rx", "OK 1");
    h_expect_event(a, "!LOST rx forced", H_WAIT_MS, "rx forced away by another daemon");
    const char *l = h_reply(b, PROMPT_MS, H_EVENTS_FAIL);
    ck_assert_msg(l != NULL && strncmp(l, "OK ", 3) == 0, "B waiting for rx: got '%s'",
                  l ? l : "nothing");
    h_expect_reply(c, "UNLOCK ry", "OK 0");
    h_expect_silence(a, 300, "MLOCK while B holds rx");
    h_expect_reply(b, "UNLOCK rx", "OK 0");
    unsigned long long f[2];
    expect_granted(a, 2, f, PROMPT_MS, "MLOCK once B unlocked rx (ry free since)");
    h_expect_reply(a, "MUNLOCK 2 rx ry", "OK 0 0");
    const char *all[] = {"rx", "ry"};
    await_gone(all, 2);
    ck_assert_int_eq(h_info_value(adm, "waiters"), 0);
    h_close(other);
    h_close(c);
    h_close(adm);
    h_close(b);
    h_close(a);
    h_keep_passed();
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("mlock");
    TCase *tc = tcase_create("standalone");
    tcase_add_checked_fixture(tc, h_setup, h_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, all_or_nothing_against_redisson);
    tcase_add_test(tc, grant_when_last_freed);
    tcase_add_test(tc, opposite_orders_no_deadlock);
    tcase_add_test(tc, no_starvation_behind_single_lockers);
    tcase_add_test(tc, dead_client_frees_set);
    tcase_add_test(tc, cancel_leaves_nothing);
    tcase_add_test(tc, cancel_in_flight_leaves_nothing);
    tcase_add_test(tc, bad_input);
    tcase_add_test(tc, fences_from_counters);
    tcase_add_test(tc, held_name_lapses_while_set_in_flight);
    tcase_add_test(tc, forced_held_name_wakes_waiter);
    tcase_add_test(tc, forced_reentry_requeued_behind_waiter);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    return h_main(suite());
}
