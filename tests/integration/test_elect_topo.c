/* Integration tests of elections on Sentinel and Cluster: a failover and a slot migration while observed.
 * SPDX-License-Identifier: MIT
 *
 * Two daemons, a leader on one and a candidate on the other, observers on
 * both. After the topology changed under them the leader still leads, its
 * resignation hands over with a higher fence, every observer's fences rose
 * (the same one again only after a NONE) and LEADER agrees everywhere: no
 * stale leader is left. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/elect_steps.h"
#include "tests/support/harness.h"

#define LEASE "[lock]\nlease_ms = 3000\n"

/* The scenario after the change: LEADER agrees on both daemons, RESIGN
 * hands over, every observer sees the new leader in fence order. */
static void hand_over_after(h_conn_t *a, h_conn_t *b, h_conn_t *o[2], const char *name,
                            unsigned long long f1, unsigned long long last[2]) {
    char want[128];
    snprintf(want, sizeof(want), "OK %llu A", f1);
    for (int i = 0; i < 2; i++) h_expect_reply(o[i], "UNOBSERVE none", "OK 0");
    h_send(a, "LEADER %s\n", name);
    const char *l = h_reply(a, H_WAIT_MS, H_EVENTS_FAIL);
    ck_assert_msg(l && strcmp(l, want) == 0, "LEADER after the change: %s", l);
    h_send(a, "RESIGN %s\n", name);
    l = h_reply(a, H_WAIT_MS, H_EVENTS_FAIL);
    ck_assert_msg(l && strcmp(l, "OK 1") == 0, "RESIGN after the change: %s", l);
    unsigned long long f2 = ok_fence(h_reply(b, H_WAIT_MS, H_EVENTS_FAIL), "b's ELECT");
    ck_assert_uint_gt(f2, f1);
    for (int i = 0; i < 2; i++) await_leader(o[i], name, f2, "B", &last[i]);
    snprintf(want, sizeof(want), "OK %llu B", f2);
    for (int i = 0; i < 2; i++) {
        h_send(o[i], "LEADER %s\n", name);
        /* events still queued (a NONE, the same leader again) come first */
        const char *r;
        while ((r = h_recv(o[i], H_WAIT_MS)) != NULL && r[0] == '!') {
            char v[300];
            unsigned long long f = 0;
            if (sscanf(r, "!LEADER %*s %llu %299s", &f, v) == 2)
                ck_assert_msg(f >= last[i], "fence %llu after %llu", f, last[i]);
        }
        ck_assert_msg(r && strcmp(r, want) == 0, "LEADER on observer %d: %s", i, r);
    }
}

static void campaign(int d0, int d1, const char *name, h_conn_t **a, h_conn_t **b,
                     h_conn_t *o[2], unsigned long long *f1, unsigned long long last[2]) {
    *a = h_connect_index(d0);
    *b = h_connect_index(d1);
    o[0] = h_connect_index(d0);
    o[1] = h_connect_index(d1);
    for (int i = 0; i < 2; i++) {
        h_send(o[i], "OBSERVE %s\n", name);
        const char *r = h_reply(o[i], H_WAIT_MS, H_EVENTS_FAIL);
        ck_assert_msg(r && strcmp(r, "OK NONE") == 0, "OBSERVE: %s", r);
        last[i] = 0;
    }
    *f1 = elect(*a, name, "A");
    for (int i = 0; i < 2; i++) await_leader(o[i], name, *f1, "A", &last[i]);
    h_send(*b, "ELECT %s B\n", name);
    h_await_waiters(o[1], 1);
}

START_TEST(cluster_slot_migrated_while_observed) {
    h_cluster_start(3, 0);
    char text[4096];
    int d[2];
    for (int i = 0; i < 2; i++) {
        snprintf(text, sizeof(text),
                 "[redis]\ncluster = %s\ncommand_timeout_ms = 2000\nconnect_timeout_ms = 500\n"
                 LEASE, h_cluster_addrs());
        d[i] = h_dlockd_start_conf(text);
        h_keep_log(d[i], "elect_topo.%s.dlockd%d", tcase_name(), d[i]);
        h_conn_t *c = h_connect_index(d[i]);
        long long end = h_now_ms() + H_WAIT_MS;
        while (h_info_value(c, "redis_nodes_up") < 3) {
            ck_assert_msg(h_now_ms() < end, "dlockd %d: primaries not up", d[i]);
            usleep(10000);
        }
        h_close(c);
    }
    const char *name = "{el}x";
    int slot = h_cluster_keyslot("dlock:{el}x");
    int from = h_cluster_slot_owner(slot);
    int to = h_cluster_port(0) == from ? h_cluster_port(1) : h_cluster_port(0);
    h_conn_t *a, *b, *o[2];
    unsigned long long f1, last[2];
    campaign(d[0], d[1], name, &a, &b, o, &f1, last);
    long long t0 = h_now_ms();
    h_cluster_migrate(slot, to);
    printf("elect: slot %d moved from %d to %d in %lld ms while observed\n", slot, from, to,
           h_now_ms() - t0);
    hand_over_after(a, b, o, name, f1, last);
    h_close(a);
    h_close(b);
    h_close(o[0]);
    h_close(o[1]);
    h_keep_passed();
}
END_TEST

START_TEST(sentinel_failover_while_observed) {
    int p = h_sentinels_start(1, 3);
    int d0 = h_dlockd_start_sentinel(LEASE), d1 = h_dlockd_start_sentinel(LEASE);
    h_keep_log(d0, "elect_topo.%s.dlockd%d", tcase_name(), d0);
    h_keep_log(d1, "elect_topo.%s.dlockd%d", tcase_name(), d1);
    h_conn_t *a, *b, *o[2];
    unsigned long long f1, last[2];
    campaign(d0, d1, "sf", &a, &b, o, &f1, last);
    h_await_replicas(p, 1, H_WAIT_MS);
    int old = h_redis_port(p);
    long long t0 = h_now_ms();
    h_sentinel_failover();
    int now = h_await_failover(old, H_FAILOVER_MS);
    printf("elect: failover from %d to %d in %lld ms while observed\n", old, now,
           h_now_ms() - t0);
    h_await_redis(d0, 1);
    h_await_redis(d1, 1);
    hand_over_after(a, b, o, "sf", f1, last);
    h_close(a);
    h_close(b);
    h_close(o[0]);
    h_close(o[1]);
    h_keep_passed();
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("elect_topo");
    TCase *tc = tcase_create("elect_topo");
    tcase_add_checked_fixture(tc, h_setup, h_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, cluster_slot_migrated_while_observed);
    tcase_add_test(tc, sentinel_failover_while_observed);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    return h_main(suite());
}
