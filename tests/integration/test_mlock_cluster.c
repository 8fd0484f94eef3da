/* Integration tests of multi-name locks on Redis Cluster: one slot atomic, several slots in order and undone.
 * SPDX-License-Identifier: MIT
 *
 * Names sharing a slot (a common {tag}) are granted by one script, as on
 * standalone; names in several slots one script per slot, in the order
 * slot then name, what was taken undone when a later slot refuses. Each
 * test builds its own cluster on private ports (h_cluster_start). A
 * foreign holder is a raw HSET of an RLock hash, released by DEL and an
 * SPUBLISH on its channel, as Redisson's unlock does in sharded mode. */
#include <check.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon/backend/keys.h"
#include "tests/support/harness.h"
#include "tests/support/mlock_steps.h"

#define FOREIGN "c0ffee00-0000-4000-8000-000000000000:1"
/* How long a wake-up may take on a busy machine (make test). */
#define PROMPT_MS 5000
/* Opposite-order rounds per client. */
#define ROUNDS 300

static void keep_log(int d) {
    h_keep_log(d, "mlock_cluster.%s.dlockd%d", tcase_name(), d);
}

/* A dlockd on the running cluster; waits until every primary is up. */
static int start_dlockd(void) {
    char text[4096];
    snprintf(text, sizeof(text),
             "[server]\nadmin_uids = 0\n"
             "[redis]\ncluster = %s\n"
             "command_timeout_ms = 2000\nconnect_timeout_ms = 500\n",
             h_cluster_addrs());
    int d = h_dlockd_start_conf(text);
    h_conn_t *c = h_connect_index(d);
    long long end = h_now_ms() + H_WAIT_MS;
    for (;;) {
        long long n = h_info_value(c, "redis_nodes"), up = h_info_value(c, "redis_nodes_up");
        if (n > 0 && n == up) break;
        ck_assert_msg(h_now_ms() < end, "dlockd %d: %lld of %lld primaries up", d, up, n);
        usleep(10000);
    }
    h_close(c);
    keep_log(d);
    return d;
}

static int slot_of(const char *name) {
    char key[KEYS_KEY_MAX];
    return (int)keys_slot(key, keys_lock(key, "dlock:", name, strlen(name)));
}

static int owner_of(const char *name) {
    return h_cluster_slot_owner(slot_of(name));
}

/* Two names on two different primaries, lo's slot below hi's. */
static void two_primaries(const char *stem, char *lo, char *hi, size_t cap) {
    char a[64], b[64];
    snprintf(a, sizeof(a), "%sa", stem);
    for (int i = 0; i < 100000; i++) {
        snprintf(b, sizeof(b), "%sb%d", stem, i);
        if (owner_of(b) != owner_of(a)) break;
    }
    ck_assert_int_ne(owner_of(a), owner_of(b));
    int swap = slot_of(a) > slot_of(b);
    snprintf(lo, cap, "%s", swap ? b : a);
    snprintf(hi, cap, "%s", swap ? a : b);
}

static long long exists(const char *name) {
    const char *r = h_cluster_cmd(owner_of(name), "EXISTS dlock:%s", name);
    ck_assert_msg(r != NULL && (r[0] == '0' || r[0] == '1'), "EXISTS dlock:%s: %s", name,
                  r ? r : "-");
    return r[0] == '1';
}

/* A foreign RLock hold of name (30 s). */
static void foreign_take(const char *name) {
    int p = owner_of(name);
    h_cluster_cmd(p, "HSET dlock:%s " FOREIGN " 1", name);
    h_cluster_cmd(p, "PEXPIRE dlock:%s 30000", name);
    ck_assert_int_eq(exists(name), 1);
}

/* ... and its release, published on the name's channel. */
static void foreign_release(const char *name) {
    char key[KEYS_KEY_MAX], chan[KEYS_COMPANION_MAX];
    size_t klen = keys_lock(key, "dlock:", name, strlen(name));
    chan[keys_companion(chan, KEYS_CHANNEL, key, klen)] = '\0';
    int p = owner_of(name);
    h_cluster_cmd(p, "DEL dlock:%s", name);
    h_cluster_cmd(p, "SPUBLISH %s 0", chan);
}

/* Script calls the primary on port has run (INFO commandstats). */
static long long evalsha_calls(int port) {
    const char *r = h_cluster_cmd(port, "INFO commandstats");
    const char *at = r ? strstr(r, "cmdstat_evalsha:calls=") : NULL;
    return at ? strtoll(at + strlen("cmdstat_evalsha:calls="), NULL, 10) : 0;
}

static void await_gone(const char *const *names, size_t n) {
    long long until = h_now_ms() + H_WAIT_MS;
    for (;;) {
        size_t left = 0;
        for (size_t i = 0; i < n; i++) left += exists(names[i]) != 0;
        if (left == 0) return;
        ck_assert_msg(h_now_ms() < until, "%zu names still held in Redis", left);
        usleep(20000);
    }
}

/* Three names of one slot: a foreign hold of one keeps MLOCK waiting
 * with none taken; its release brings the whole grant. */
START_TEST(same_slot_atomic) {
    h_cluster_start(3, 0);
    int d = start_dlockd();
    h_conn_t *c = h_connect_index(d), *adm = h_connect_index(d);
    const char *all[] = {"{t}m1", "{t}m2", "{t}m3"};
    foreign_take("{t}m2");
    h_send(c, "MLOCK 3 {t}m1 {t}m2 {t}m3\n");
    h_await_waiters(adm, 1); /* the set counts once */
    h_expect_silence(c, 300, "MLOCK while a foreign RLock holds {t}m2");
    ck_assert_int_eq(exists("{t}m1") + exists("{t}m3"), 0);
    long long t0 = h_now_ms();
    foreign_release("{t}m2");
    unsigned long long f[3];
    expect_granted(c, 3, f, PROMPT_MS, "MLOCK once {t}m2 was released");
    printf("mlock_cluster: one slot: granted %lld ms after the release\n", h_now_ms() - t0);
    ck_assert_int_eq(exists("{t}m1") + exists("{t}m2") + exists("{t}m3"), 3);
    expect_prefix(c, "STATUS {t}m2", "OK MINE 1 ");
    h_expect_reply(c, "MUNLOCK 3 {t}m1 {t}m2 {t}m3", "OK 0 0 0");
    await_gone(all, 3);
    h_close(adm);
    h_close(c);
    h_keep_passed();
}
END_TEST

/* Names on two primaries: granted whole; refused by the later slot, the
 * earlier one is given back before the answer (a reentry keeps its
 * hold), and a waiting set holds nothing until the release. */
START_TEST(cross_slot_grant_and_undo) {
    h_cluster_start(3, 0);
    int d = start_dlockd();
    h_conn_t *c = h_connect_index(d), *adm = h_connect_index(d);
    char lo[64], hi[64], req[256];
    two_primaries("x", lo, hi, sizeof(lo));
    const char *all[] = {lo, hi};

    /* both free: one grant */
    unsigned long long f[2];
    h_send(c, "MLOCK 2 %s %s\n", hi, lo);
    expect_granted(c, 2, f, H_WAIT_MS, "MLOCK of two free names in two slots");
    ck_assert_int_eq(exists(lo) + exists(hi), 2);
    snprintf(req, sizeof(req), "MUNLOCK 2 %s %s", lo, hi);
    h_expect_reply(c, req, "OK 0 0");
    await_gone(all, 2);

    /* the later slot held: refused, and the earlier slot's name is free
     * once the answer came */
    foreign_take(hi);
    for (int i = 0; i < 20; i++) {
        snprintf(req, sizeof(req), "TRYMLOCK 2 %s %s", lo, hi);
        expect_prefix(c, req, "TIMEOUT ");
        ck_assert_msg(exists(lo) == 0, "round %d: %s left held by a refused attempt", i, lo);
    }
    /* a reentry keeps its hold: one before, one after */
    snprintf(req, sizeof(req), "LOCK %s", lo);
    expect_prefix(c, req, "OK ");
    snprintf(req, sizeof(req), "TRYMLOCK 2 %s %s", lo, hi);
    expect_prefix(c, req, "TIMEOUT ");
    snprintf(req, sizeof(req), "STATUS %s", lo);
    expect_prefix(c, req, "OK MINE 1 ");
    ck_assert_int_eq(exists(lo), 1);
    snprintf(req, sizeof(req), "UNLOCK %s", lo);
    h_expect_reply(c, req, "OK 0");
    await_gone(all, 1);

    /* a waiting set holds nothing: lo stays free while it waits */
    h_send(c, "MLOCK 2 %s %s\n", lo, hi);
    h_await_waiters(adm, 1); /* the set counts once */
    await_gone(all, 1);
    h_expect_silence(c, 300, "MLOCK while the later slot is held");
    /* ... and it does not try again at its own undo's release of lo
     * (its channel): a handful of calls at most, no loop */
    long long calls = evalsha_calls(owner_of(lo));
    h_expect_silence(c, 500, "MLOCK while the later slot is held");
    calls = evalsha_calls(owner_of(lo)) - calls;
    printf("mlock_cluster: %lld script calls on the earlier slot's primary in 500 ms of wait\n",
           calls);
    ck_assert_int_le(calls, 4);
    await_gone(all, 1);
    long long t0 = h_now_ms();
    foreign_release(hi);
    expect_granted(c, 2, f, PROMPT_MS, "MLOCK once the later slot's name was released");
    printf("mlock_cluster: two slots: granted %lld ms after the release\n", h_now_ms() - t0);
    ck_assert_int_eq(exists(lo) + exists(hi), 2);
    snprintf(req, sizeof(req), "MUNLOCK 2 %s %s", hi, lo);
    h_expect_reply(c, req, "OK 0 0");
    await_gone(all, 2);
    h_close(adm);
    h_close(c);
    h_keep_passed();
}
END_TEST

/* Two clients of two daemons lock {a,b} and {b,a}, a and b in two slots,
 * ROUNDS times each: no deadlock, never both inside. */
START_TEST(opposite_orders_no_deadlock) {
    h_cluster_start(3, 0);
    int d[2] = {start_dlockd(), start_dlockd()};
    char lo[64], hi[64];
    two_primaries("o", lo, hi, sizeof(lo));
    long long took = opposite_orders(d[0], d[1], lo, hi, ROUNDS);
    printf("mlock_cluster: 2 x %d opposite-order two-slot sets on two daemons in %lld ms\n",
           ROUNDS, took);
    const char *all[] = {lo, hi};
    await_gone(all, 2);
    h_keep_passed();
}
END_TEST

/* A client that dies holding a two-slot set frees it all: a waiter of
 * another daemon gets it; one that dies waiting leaves nothing. */
START_TEST(dead_client_frees_set) {
    h_cluster_start(3, 0);
    int d0 = start_dlockd(), d1 = start_dlockd();
    h_conn_t *c = h_connect_index(d0), *w = h_connect_index(d1), *adm = h_connect_index(d1);
    char lo[64], hi[64], third[64];
    two_primaries("d", lo, hi, sizeof(lo));
    snprintf(third, sizeof(third), "dz");
    unsigned long long f[3];
    h_send(c, "MLOCK 2 %s %s 60000\n", lo, hi);
    expect_granted(c, 2, f, H_WAIT_MS, "MLOCK of two slots");
    h_send(w, "MLOCK 3 %s %s %s\n", hi, third, lo);
    h_await_waiters(adm, 1); /* the set counts once */
    h_expect_silence(w, 300, "MLOCK while another client holds two of its names");
    h_close(c); /* dies holding */
    expect_granted(w, 3, f, PROMPT_MS, "MLOCK once the holder died");
    h_conn_t *x = h_connect_index(d1);
    h_send(x, "MLOCK 1 %s\n", third);
    h_await_waiters(adm, 1);
    h_close(x); /* dies waiting */
    h_await_waiters(adm, 0);
    h_close(w); /* dies holding */
    const char *all[] = {lo, hi, third};
    await_gone(all, 3);
    h_close(adm);
    h_keep_passed();
}
END_TEST

/* The later slot moves to another primary while a set waits for it: the
 * grant comes whole from the new owner, and the release frees both. */
START_TEST(slot_moves_during_wait) {
    h_cluster_start(3, 0);
    int d = start_dlockd();
    h_conn_t *c = h_connect_index(d), *adm = h_connect_index(d);
    char lo[64], hi[64], req[256];
    two_primaries("m", lo, hi, sizeof(lo));
    int from = owner_of(hi), to = -1;
    for (int i = 0; i < h_cluster_node_count(); i++)
        if (h_cluster_port(i) != from) to = h_cluster_port(i);
    foreign_take(hi);
    h_send(c, "MLOCK 2 %s %s\n", lo, hi);
    h_await_waiters(adm, 1); /* the set counts once */
    h_cluster_migrate(slot_of(hi), to);
    ck_assert_int_eq(owner_of(hi), to);
    ck_assert_int_eq(exists(hi), 1); /* the foreign hold moved with it */
    /* The watch moved with the slot and its waiter tried again there:
     * refused, lo is given back (taken only for the attempt's moment). */
    const char *first[] = {lo};
    await_gone(first, 1);
    foreign_release(hi);
    unsigned long long f[2];
    expect_granted(c, 2, f, H_WAIT_MS, "MLOCK after the later slot moved");
    ck_assert_int_eq(exists(lo) + exists(hi), 2);
    snprintf(req, sizeof(req), "MUNLOCK 2 %s %s", lo, hi);
    h_expect_reply(c, req, "OK 0 0");
    const char *all[] = {lo, hi};
    await_gone(all, 2);
    h_close(adm);
    h_close(c);
    h_keep_passed();
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("mlock_cluster");
    TCase *tc = tcase_create("cluster");
    tcase_add_checked_fixture(tc, h_setup, h_teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, same_slot_atomic);
    tcase_add_test(tc, cross_slot_grant_and_undo);
    tcase_add_test(tc, opposite_orders_no_deadlock);
    tcase_add_test(tc, dead_client_frees_set);
    tcase_add_test(tc, slot_moves_during_wait);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    return h_main(suite());
}
