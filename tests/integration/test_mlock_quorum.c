/* Integration tests of multi-name locks on the quorum topology: a majority for the whole set, fences, nodes lost.
 * SPDX-License-Identifier: MIT
 *
 * Each test starts 3 redis-servers on private ports (h_redis_start_tcp)
 * and its dlockds with "quorum = redis://... ...". A set is one mlock.lua
 * call per node, granted when a majority granted all of it; each name's
 * fence is the greatest the nodes returned, raised where less. A foreign
 * holder is Redisson's RLock script run on a majority of the nodes. Fresh
 * redis-servers count only after rejoin_delay_ms: every wait is on INFO
 * (redis_nodes_up), a reply or Redis's state, never a sleep. */
#include <check.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/support/harness.h"
#include "tests/support/mlock_steps.h"
#include "tests/support/redisson.h"

#define NODES       3
#define CMD_MS      1000    /* every dlockd's command_timeout_ms */
#define LEASE_MS    2000
#define REJOIN_MS   2000
#define SLACK_MS    3000    /* room for a busy machine on top of a bound */
#define PROMPT_MS   5000    /* how long a wake-up may take on a busy machine */
#define POLL_US     20000
/* Opposite-order rounds per client, as on standalone (one set and its
 * MUNLOCK: a call to each node each; about 2 s on two cores). */
#define ROUNDS      1000

#define FOREIGN "c0ffee00-0000-4000-8000-000000000000:1"

static int node[NODES];

static void keep_log(int d) {
    h_keep_log(d, "mlock_quorum.%s.dlockd%d", tcase_name(), d);
}

static void start_nodes(void) {
    for (int i = 0; i < NODES; i++) node[i] = h_redis_start_tcp(0, NULL);
}

/* A command on node i (words may hold spaces); NULL if no answer. */
static const char *ncmd(int i, const char *const argv[]) {
    return h_redis_unix_argv(node[i], argv);
}

/* EXISTS dlock:<name> on node i: 0 or 1, -1 if no answer. */
static int exists_on(int i, const char *name) {
    char key[300];
    snprintf(key, sizeof(key), "dlock:%s", name);
    const char *const a[] = {"EXISTS", key, NULL};
    const char *r = ncmd(i, a);
    return r == NULL || r[0] == '-' ? -1 : atoi(r);
}

/* The fence counter of name on node i, 0 if none. */
static unsigned long long counter_on(int i, const char *name) {
    char key[300];
    snprintf(key, sizeof(key), "redisson_lock_token:{dlock:%s}", name);
    const char *const a[] = {"GET", key, NULL};
    const char *r = ncmd(i, a);
    return r == NULL || r[0] < '0' || r[0] > '9' ? 0 : strtoull(r, NULL, 10);
}

/* Waits until none of the names is a key on any node in mask (bit i). */
static void await_gone(unsigned mask, const char *const *names, size_t n) {
    long long until = h_now_ms() + H_WAIT_MS;
    for (;;) {
        int left = 0;
        for (int i = 0; i < NODES; i++)
            for (size_t j = 0; j < n && (mask & (1u << i)); j++) left += exists_on(i, names[j]) != 0;
        if (left == 0) return;
        ck_assert_msg(h_now_ms() < until, "%d names still held on the nodes", left);
        usleep(POLL_US);
    }
}

/* Redisson's lock of name on node i for lease ms: "" granted, or the pttl. */
static const char *redisson_lock_on(int i, const char *name, int lease_ms) {
    char key[300], lease[24];
    snprintf(key, sizeof(key), "dlock:%s", name);
    snprintf(lease, sizeof(lease), "%d", lease_ms);
    const char *const a[] = {"EVAL", redisson_lock, "1", key, lease, FOREIGN, NULL};
    return ncmd(i, a);
}

static void redisson_unlock_on(int i, const char *name) {
    char key[300], chan[320];
    snprintf(key, sizeof(key), "dlock:%s", name);
    snprintf(chan, sizeof(chan), "redisson_lock__channel:{dlock:%s}", name);
    const char *const a[] = {"EVAL", redisson_unlock, "2", key, chan, "0", "30000", FOREIGN, NULL};
    ncmd(i, a);
}

/* A dlockd over the three nodes, once all three count. */
static int serving_dlockd(void) {
    char text[4096];
    size_t k = 0;
    char q[256];
    for (int i = 0; i < NODES; i++)
        k += (size_t)snprintf(q + k, sizeof(q) - k, "%sredis://127.0.0.1:%d", i ? " " : "",
                              h_redis_port(node[i]));
    snprintf(text, sizeof(text),
             "[server]\nadmin_uids = 0\n"
             "[redis]\nquorum = %s\ncommand_timeout_ms = %d\nconnect_timeout_ms = 500\n"
             "rejoin_delay_ms = %d\n[lock]\nlease_ms = %d\n",
             q, CMD_MS, REJOIN_MS, LEASE_MS);
    int d = h_dlockd_start_conf(text);
    keep_log(d);
    h_conn_t *c = h_connect_index(d);
    long long end = h_now_ms() + REJOIN_MS + H_WAIT_MS;
    while (h_info_value(c, "redis_nodes_up") != NODES) {
        ck_assert_msg(h_now_ms() < end, "dlockd %d: the nodes never all counted", d);
        usleep(POLL_US);
    }
    h_close(c);
    return d;
}

/* ---- tests ------------------------------------------------------------------- */

/* Redisson holds one of three names on a majority of the nodes: MLOCK
 * waits, with none of the three taken by it on any node once its attempt
 * is undone; Redisson's unlock brings the grant. */
START_TEST(all_or_nothing_against_redisson) {
    start_nodes();
    int d = serving_dlockd();
    h_conn_t *c = h_connect_index(d), *adm = h_connect_index(d);
    for (int i = 0; i < 2; i++) ck_assert_str_eq(redisson_lock_on(i, "m2", 30000), "");
    h_send(c, "MLOCK 3 m1 m2 m3\n");
    h_await_waiters(adm, 1);
    h_expect_silence(c, 300, "MLOCK while Redisson holds m2 on a majority");
    /* node 2 granted the whole set, undone: nothing of it anywhere */
    const char *mine[] = {"m1", "m3"};
    await_gone(0x7, mine, 2);
    const char *m2[] = {"m2"};
    await_gone(0x4, m2, 1);
    for (int i = 0; i < 2; i++) {
        const char *const a[] = {"HLEN", "dlock:m2", NULL};
        ck_assert_str_eq(ncmd(i, a), "1"); /* Redisson's field alone */
    }
    long long t0 = h_now_ms();
    for (int i = 0; i < 2; i++) redisson_unlock_on(i, "m2");
    unsigned long long f[3];
    expect_granted(c, 3, f, PROMPT_MS, "MLOCK once Redisson unlocked m2");
    printf("mlock_quorum: granted %lld ms after Redisson's unlock\n", h_now_ms() - t0);
    int held = 0;
    for (int i = 0; i < NODES; i++)
        held += exists_on(i, "m1") == 1 && exists_on(i, "m2") == 1 && exists_on(i, "m3") == 1;
    ck_assert_int_ge(held, 2);
    /* each is an ordinary plain lock now */
    expect_prefix(c, "STATUS m2", "OK MINE 1 ");
    h_expect_reply(c, "MUNLOCK 3 m3 m2 m1", "OK 0 0 0");
    const char *all[] = {"m1", "m2", "m3"};
    await_gone(0x7, all, 3);
    h_close(adm);
    h_close(c);
    h_keep_passed();
}
END_TEST

/* A refused set wakes at the refusing holder's lease end, with no release
 * published. */
START_TEST(refused_set_wakes_at_lease_end) {
    start_nodes();
    int d = serving_dlockd();
    h_conn_t *c = h_connect_index(d);
    for (int i = 0; i < NODES; i++) ck_assert_str_eq(redisson_lock_on(i, "e2", 1500), "");
    long long t0 = h_now_ms();
    h_send(c, "MLOCK 2 e1 e2\n");
    unsigned long long f[2];
    expect_granted(c, 2, f, 1500 + PROMPT_MS, "MLOCK once Redisson's lease on e2 ended");
    long long took = h_now_ms() - t0;
    printf("mlock_quorum: granted %lld ms after MLOCK, Redisson's lease 1500 ms\n", took);
    ck_assert_int_ge(took, 1000);
    h_expect_reply(c, "MUNLOCK 2 e1 e2", "OK 0 0");
    h_close(c);
    h_keep_passed();
}
END_TEST

/* Each name's fence is the greatest of the nodes' counters after the
 * grant, and a later LOCK of a name gets a greater one. Counters are
 * pushed ahead first on two nodes of three (any majority meets one),
 * below 2^53 (exact in Lua): f1 on nodes 0 and 1, f3 on nodes 1 and 2,
 * f2 agrees everywhere; the grant raises the node left behind. */
START_TEST(fences_greatest_of_nodes) {
    start_nodes();
    int d = serving_dlockd();
    h_conn_t *c = h_connect_index(d);
    const char *names[] = {"f1", "f2", "f3"};
    static const struct {
        int name, node;
        const char *value;
    } ahead[] = {{0, 0, "5000000000000000"}, {0, 1, "5000000000000000"},
                 {2, 1, "6000000000000000"}, {2, 2, "6000000000000000"}};
    for (size_t k = 0; k < sizeof(ahead) / sizeof(ahead[0]); k++) {
        char key[300];
        snprintf(key, sizeof(key), "redisson_lock_token:{dlock:%s}", names[ahead[k].name]);
        const char *const a[] = {"SET", key, ahead[k].value, NULL};
        ck_assert_str_eq(ncmd(ahead[k].node, a), "OK");
    }
    unsigned long long f[3];
    h_send(c, "MLOCK 3 f1 f2 f3\n");
    expect_granted(c, 3, f, H_WAIT_MS, "MLOCK 3 f1 f2 f3");
    ck_assert_uint_eq(f[0], 5000000000000001ULL);
    ck_assert_uint_eq(f[2], 6000000000000001ULL);
    ck_assert_uint_lt(f[1], 5000000000000000ULL);
    /* the node left behind is raised (in the grant's round, or right
     * behind it); then every counter is the fence */
    for (int j = 0; j < 3; j++) {
        long long until = h_now_ms() + H_WAIT_MS;
        for (;;) {
            unsigned long long most = 0, least = ~0ULL;
            for (int i = 0; i < NODES; i++) {
                unsigned long long v = counter_on(i, names[j]);
                if (v > most) most = v;
                if (v < least) least = v;
            }
            ck_assert_msg(most == f[j], "%s: fence %llu, the nodes' greatest counter %llu",
                          names[j], f[j], most);
            if (least == most) break;
            ck_assert_msg(h_now_ms() < until, "%s: a counter stays at %llu, below %llu",
                          names[j], least, most);
            usleep(POLL_US);
        }
    }
    h_expect_reply(c, "MUNLOCK 3 f1 f2 f3", "OK 0 0 0");
    for (int j = 0; j < 3; j++) {
        h_send(c, "LOCK %s\n", names[j]);
        const char *l = h_reply(c, H_WAIT_MS, H_EVENTS_SKIP);
        unsigned long long g = l ? strtoull(l + 3, NULL, 10) : 0;
        ck_assert_msg(l && strncmp(l, "OK ", 3) == 0 && g > f[j],
                      "LOCK %s after the set: got '%s', wanted a fence above %llu", names[j],
                      l ? l : "-", f[j]);
        h_send(c, "UNLOCK %s\n", names[j]);
        ck_assert_str_eq(h_reply(c, H_WAIT_MS, H_EVENTS_SKIP), "OK 0");
    }
    h_close(c);
    h_keep_passed();
}
END_TEST

/* Two clients on two daemons lock {a,b} and {b,a}: neither deadlocks, and
 * they never hold the set together. */
START_TEST(opposite_orders_no_deadlock) {
    start_nodes();
    int d[2] = {serving_dlockd(), serving_dlockd()};
    long long took = opposite_orders(d[0], d[1], "a", "b", ROUNDS);
    printf("mlock_quorum: 2 x %d opposite-order sets on two daemons in %lld ms\n", ROUNDS, took);
    ck_assert_int_lt(took, 60000);
    const char *all[] = {"a", "b"};
    await_gone(0x7, all, 2);
    h_keep_passed();
}
END_TEST

/* MLOCK of a set, timed; it must be granted within bound_ms. */
static long long mlock_within(h_conn_t *c, const char *names, size_t n, long long bound_ms,
                              const char *what) {
    unsigned long long f[8];
    long long t0 = h_now_ms();
    h_send(c, "MLOCK %zu %s\n", n, names);
    expect_granted(c, n, f, (int)bound_ms, what);
    long long took = h_now_ms() - t0;
    ck_assert_msg(took <= bound_ms, "%s: %lld ms", what, took);
    return took;
}

/* One node of 3 paused, then killed: a set is still granted within
 * command_timeout_ms and a margin, and after SIGCONT and a restart sets
 * go on. */
START_TEST(node_paused_or_killed) {
    start_nodes();
    int d = serving_dlockd();
    h_conn_t *c = h_connect_index(d), *adm = h_connect_index(d);
    const long long bound = CMD_MS + SLACK_MS;
    h_redis_signal_index(node[0], SIGSTOP);
    long long slowest = 0;
    for (int i = 0; i < 10; i++) {
        long long t = mlock_within(c, "p1 p2 p3", 3, bound, "MLOCK with node 0 paused");
        if (t > slowest) slowest = t;
        h_expect_reply(c, "MUNLOCK 3 p1 p2 p3", "OK 0 0 0");
    }
    printf("mlock_quorum: node 0 paused: 10 sets, slowest %lld ms\n", slowest);
    h_redis_signal_index(node[0], SIGCONT);
    mlock_within(c, "p1 p2 p3", 3, bound, "MLOCK after SIGCONT");
    h_expect_reply(c, "MUNLOCK 3 p1 p2 p3", "OK 0 0 0");

    h_redis_stop_index(node[1], SIGKILL);
    slowest = 0;
    for (int i = 0; i < 10; i++) {
        long long t = mlock_within(c, "p1 p2 p3", 3, bound, "MLOCK with node 1 killed");
        if (t > slowest) slowest = t;
        h_expect_reply(c, "MUNLOCK 3 p1 p2 p3", "OK 0 0 0");
    }
    printf("mlock_quorum: node 1 killed: 10 sets, slowest %lld ms\n", slowest);
    h_redis_restart_index(node[1]);
    mlock_within(c, "p1 p2 p3", 3, bound, "MLOCK right after node 1's restart");
    h_expect_reply(c, "MUNLOCK 3 p1 p2 p3", "OK 0 0 0");
    long long end = h_now_ms() + REJOIN_MS + H_WAIT_MS;
    while (h_info_value(adm, "redis_nodes_up") != NODES) {
        ck_assert_msg(h_now_ms() < end, "node 1 never counted again");
        usleep(POLL_US);
    }
    mlock_within(c, "p1 p2 p3", 3, bound, "MLOCK once node 1 counts again");
    h_expect_reply(c, "MUNLOCK 3 p1 p2 p3", "OK 0 0 0");
    const char *all[] = {"p1", "p2", "p3"};
    await_gone(0x7, all, 3);
    h_close(adm);
    h_close(c);
    h_keep_passed();
}
END_TEST

/* A client that dies holding a set frees it on every node, and one that
 * dies waiting leaves nothing of its set behind. */
START_TEST(dead_client_frees_set) {
    start_nodes();
    int d = serving_dlockd();
    h_conn_t *c = h_connect_index(d), *w = h_connect_index(d), *adm = h_connect_index(d);
    unsigned long long f[3];
    h_send(c, "MLOCK 3 d1 d2 d3\n");
    expect_granted(c, 3, f, H_WAIT_MS, "MLOCK 3 d1 d2 d3");
    h_send(w, "MLOCK 2 d3 d4\n");
    h_await_waiters(adm, 1);
    h_close(w); /* dies waiting */
    h_await_waiters(adm, 0);
    const char *d4[] = {"d4"};
    await_gone(0x7, d4, 1);
    h_close(c); /* dies holding */
    const char *all[] = {"d1", "d2", "d3", "d4"};
    await_gone(0x7, all, 4);
    h_close(adm);
    h_keep_passed();
}
END_TEST

/* Bad input and MUNLOCK as on standalone; reentries answer the holds'
 * own fences. */
START_TEST(bad_input_and_munlock) {
    start_nodes();
    int d = serving_dlockd();
    h_conn_t *c = h_connect_index(d);
    expect_prefix(c, "MLOCK 0 a", "ERR ARGS");
    expect_prefix(c, "MLOCK 65 a", "ERR ARGS");
    expect_prefix(c, "MLOCK 3 a b", "ERR ARGS");
    expect_prefix(c, "MLOCK 2 a a", "ERR ARGS");
    expect_prefix(c, "MUNLOCK 2 a", "ERR ARGS");
    unsigned long long f[2], g[3];
    h_send(c, "MLOCK 2 x y\n");
    expect_granted(c, 2, f, H_WAIT_MS, "MLOCK 2 x y");
    expect_prefix(c, "MUNLOCK 2 x z", "ERR NOTHELD z ");
    expect_prefix(c, "STATUS x", "OK MINE 1 "); /* nothing released */
    h_send(c, "MLOCK 3 y w x\n"); /* two reentries and a new name */
    expect_granted(c, 3, g, H_WAIT_MS, "MLOCK 3 y w x");
    ck_assert_uint_eq(g[0], f[1]);
    ck_assert_uint_eq(g[2], f[0]);
    expect_prefix(c, "STATUS x", "OK MINE 2 ");
    h_expect_reply(c, "MUNLOCK 3 x y w", "OK 1 1 0");
    h_expect_reply(c, "MUNLOCK 2 y x", "OK 0 0");
    const char *all[] = {"x", "y", "w"};
    await_gone(0x7, all, 3);
    expect_prefix(c, "TRYMLOCK 2 x y 0", "OK ");
    h_close(c);
    h_keep_passed();
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("mlock_quorum");
    TCase *tc = tcase_create("quorum");
    tcase_add_checked_fixture(tc, h_setup, h_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, all_or_nothing_against_redisson);
    tcase_add_test(tc, refused_set_wakes_at_lease_end);
    tcase_add_test(tc, fences_greatest_of_nodes);
    tcase_add_test(tc, opposite_orders_no_deadlock);
    tcase_add_test(tc, node_paused_or_killed);
    tcase_add_test(tc, dead_client_frees_set);
    tcase_add_test(tc, bad_input_and_munlock);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    return h_main(suite());
}
