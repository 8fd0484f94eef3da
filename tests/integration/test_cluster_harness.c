/* Self-test of the harness's Redis Cluster support (tests/support): a
 * cluster of three primaries with a replica each, its slots, a key through
 * its owner, a slot moved to another primary with its key; a primary
 * killed and a replica taking over; the same cluster over TLS.
 * SPDX-License-Identifier: MIT
 *
 * Each test builds its own cluster on private ports (h_cluster_start);
 * teardown kills it. No dlockd runs here. */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/support/harness.h"

#define SLOTS 16384

/* Fills owner[] with the port of each slot's primary as CLUSTER NODES
 * (asked with redis-cli of the node on port) says, 0 for none, checking
 * that no slot is listed twice; returns how many primaries list slots. */
static int nodes_owners(int port, int owner[SLOTS]) {
    const char *r = h_cluster_cmd(port, "CLUSTER NODES");
    ck_assert_msg(r != NULL && r[0] != '-', "CLUSTER NODES on port %d: '%s'", port,
                  r ? r : "(no answer)");
    char text[8192];
    snprintf(text, sizeof(text), "%s", r);
    memset(owner, 0, SLOTS * sizeof(owner[0]));
    int primaries = 0;
    char *save_line = NULL;
    for (char *line = strtok_r(text, "\n", &save_line); line != NULL;
         line = strtok_r(NULL, "\n", &save_line)) {
        /* <id> <ip:port@cport> <flags> <master> <ping> <pong> <epoch> <link> <slot>... */
        char *save = NULL, *w = strtok_r(line, " ", &save);
        int field = 0, slots = 0, node_port = 0;
        const char *flags = "";
        for (; w != NULL; w = strtok_r(NULL, " ", &save), field++) {
            if (field == 1 && strchr(w, ':') != NULL) node_port = atoi(strchr(w, ':') + 1);
            if (field == 2) flags = w;
            if (field < 8 || w[0] == '[') continue; /* [slot->-id]: a migration */
            int a = atoi(w), b = strchr(w, '-') ? atoi(strchr(w, '-') + 1) : a;
            ck_assert_msg(a >= 0 && b < SLOTS && a <= b, "slot range '%s'", w);
            for (int s = a; s <= b; s++) {
                ck_assert_msg(owner[s] == 0, "slot %d listed twice", s);
                owner[s] = node_port;
            }
            slots = 1;
        }
        if (slots) {
            ck_assert_msg(strstr(flags, "master") != NULL, "a node with slots has flags %s",
                          flags);
            primaries++;
        }
    }
    return primaries;
}

/* Every slot has a primary in owner[]; h_cluster_slot_owner agrees on
 * some of them, and on slot. */
static void check_owners(const int owner[SLOTS], int slot) {
    for (int s = 0; s < SLOTS; s++) ck_assert_msg(owner[s] > 0, "slot %d has no owner", s);
    for (int s = 0; s < SLOTS; s += 1000)
        ck_assert_int_eq(h_cluster_slot_owner(s), owner[s]);
    ck_assert_int_eq(h_cluster_slot_owner(SLOTS - 1), owner[SLOTS - 1]);
    ck_assert_int_eq(h_cluster_slot_owner(slot), owner[slot]);
}

/* 1 if the node on port says it is a primary (ROLE, with redis-cli). */
static int is_primary(int port) {
    const char *r = h_cluster_cmd(port, "ROLE");
    return r != NULL && strncmp(r, "master\n", 7) == 0;
}

/* A primary's port other than not_port. */
static int other_primary(int not_port) {
    for (int i = 0; i < h_cluster_node_count(); i++) {
        int port = h_cluster_port(i);
        if (port != not_port && is_primary(port)) return port;
    }
    ck_abort_msg("no primary but port %d", not_port);
    return -1;
}

/* Runs verb key [value] on the node on port (redis-cli) and checks the reply. */
static void expect_reply(int port, const char *want, const char *verb, const char *key,
                         const char *value) {
    const char *r = h_cluster_cmd(port, "%s %s %s", verb, key, value ? value : "");
    ck_assert_msg(r != NULL, "no reply from port %d to %s %s", port, verb, key);
    ck_assert_msg(strcmp(r, want) == 0, "port %d, %s %s: got '%s', wanted '%s'", port, verb,
                  key, r, want);
}

START_TEST(start_slots_set_get_migrate) {
    h_set_auth("cluster-pw", NULL); /* so that MIGRATE needs its AUTH */
    long long t0 = h_now_ms();
    ck_assert_int_eq(h_cluster_start(3, 1), 0);
    long long started = h_now_ms() - t0;
    ck_assert_int_eq(h_cluster_node_count(), 6);
    for (int i = 0; i < 6; i++) {
        ck_assert_int_eq(h_redis_index_of_port(h_cluster_port(i)), h_cluster_index(i));
        ck_assert_int_eq(h_redis_port(h_cluster_index(i)), h_cluster_port(i));
    }

    /* every slot has exactly one owner, one of three primaries, and the
     * harness's owner is the one CLUSTER NODES names */
    static int owner[SLOTS];
    ck_assert_int_eq(nodes_owners(h_cluster_port(0), owner), 3);
    check_owners(owner, 0);
    for (int s = 0; s < SLOTS; s += 5000) ck_assert(is_primary(owner[s]));
    int seeds = 0;
    for (const char *p = h_cluster_addrs(); (p = strstr(p, "127.0.0.1:")) != NULL; p++) seeds++;
    ck_assert_int_eq(seeds, 3);

    /* a key through its owner; elsewhere MOVED */
    const char *key = "hx:{cluster}:key";
    int slot = h_cluster_keyslot(key);
    ck_assert_int_eq(slot, 14041); /* CRC16("cluster") % 16384 */
    int from = h_cluster_slot_owner(slot);
    expect_reply(from, "OK", "SET", key, "v1");
    expect_reply(from, "v1", "GET", key, NULL);
    int to = other_primary(from);
    char moved[64];
    snprintf(moved, sizeof(moved), "-MOVED %d 127.0.0.1:%d", slot, from);
    expect_reply(to, moved, "GET", key, NULL);

    /* the slot moved to another primary, watched in the middle */
    h_cluster_migrate_begin(slot, to);
    ck_assert_int_eq(h_cluster_slot_owner(slot), from);
    expect_reply(from, "v1", "GET", key, NULL); /* still there */
    expect_reply(to, moved, "GET", key, NULL);  /* no ASKING: MOVED */
    ck_assert_int_eq(h_cluster_migrate_keys(slot, to, 10), 1);
    char ask[64];
    snprintf(ask, sizeof(ask), "-ASK %d 127.0.0.1:%d", slot, to);
    expect_reply(from, ask, "GET", key, NULL);  /* gone: ASK the target */
    ck_assert_int_eq(h_cluster_migrate_keys(slot, to, 10), 0);
    h_cluster_migrate_end(slot, to);
    ck_assert_int_eq(h_cluster_slot_owner(slot), to);
    expect_reply(to, "v1", "GET", key, NULL);
    snprintf(moved, sizeof(moved), "-MOVED %d 127.0.0.1:%d", slot, to);
    expect_reply(from, moved, "GET", key, NULL);
    for (int i = 0; i < 6; i++) { /* the key is on the target alone of the primaries */
        int port = h_cluster_port(i);
        if (!is_primary(port)) continue;
        const char *r = h_cluster_cmd(port, "CLUSTER COUNTKEYSINSLOT %d", slot);
        ck_assert_ptr_nonnull(r);
        ck_assert_str_eq(r, port == to ? "1" : "0");
    }
    ck_assert_int_eq(nodes_owners(h_cluster_port(5), owner), 3); /* a replica's view */
    ck_assert_int_eq(owner[slot], to);
    check_owners(owner, slot);

    /* and back, in one go, with more keys than one MIGRATE takes */
    char k[64];
    for (int i = 0; i < 45; i++) {
        snprintf(k, sizeof(k), "hx:{cluster}:%d", i);
        expect_reply(to, "OK", "SET", k, "x");
    }
    h_cluster_migrate(slot, from);
    ck_assert_int_eq(h_cluster_slot_owner(slot), from);
    const char *n = h_cluster_cmd(from, "CLUSTER COUNTKEYSINSLOT %d", slot);
    ck_assert_ptr_nonnull(n);
    ck_assert_str_eq(n, "46");
    fprintf(stderr, "cluster: 3+3 nodes ready in %lld ms, all in %lld ms\n", started,
            h_now_ms() - t0);
}
END_TEST

START_TEST(primary_killed_replica_takes_over) {
    ck_assert_int_eq(h_cluster_start(3, 1), 0);
    const char *key = "hx:failover";
    int slot = h_cluster_keyslot(key);
    int old = h_cluster_slot_owner(slot);
    ck_assert_int_gt(old, 0);
    expect_reply(old, "OK", "SET", key, "before");
    h_redis_stop_index(h_redis_index_of_port(old), SIGKILL);
    long long t0 = h_now_ms();
    int now = h_cluster_await_failover(old, H_FAILOVER_MS);
    long long took = h_now_ms() - t0;
    ck_assert_int_ne(now, old);
    ck_assert_int_eq(h_cluster_slot_owner(slot), now);
    ck_assert(is_primary(now));
    expect_reply(now, "OK", "SET", key, "after");
    expect_reply(now, "after", "GET", key, NULL);
    ck_assert_ptr_null(h_cluster_cmd(old, "PING")); /* gone */
    char want[32];
    snprintf(want, sizeof(want), "127.0.0.1:%d", now);
    const char *seeds = h_cluster_addrs();
    ck_assert_msg(strstr(seeds, want) != NULL, "seeds '%s' lack %s", seeds, want);
    snprintf(want, sizeof(want), "127.0.0.1:%d", old);
    ck_assert_msg(strstr(seeds, want) == NULL, "seeds '%s' name %s", seeds, want);
    /* the old primary back, as itself: a replica of the new one */
    int index = h_redis_index_of_port(old);
    long long t1 = h_now_ms(), end = t1 + H_WAIT_MS;
    h_redis_restart_index(index);
    const char *role;
    while ((role = h_cluster_cmd(old, "ROLE")) == NULL || strncmp(role, "slave\n", 6) != 0) {
        ck_assert_msg(h_now_ms() < end, "port %d's ROLE is '%s' %d ms after its restart", old,
                      role ? role : "(no answer)", H_WAIT_MS);
        usleep(20000);
    }
    char primary[16];
    snprintf(primary, sizeof(primary), "%d", now);
    ck_assert_msg(strstr(role, primary) != NULL, "port %d's ROLE: '%s'", old, role);
    fprintf(stderr, "cluster: failover in %lld ms after the SIGKILL, old primary a replica "
            "%lld ms after its restart\n", took, h_now_ms() - t1);
}
END_TEST

START_TEST(tls_cluster) {
    char certs[256];
    snprintf(certs, sizeof(certs), "%s/certs", h_dir());
    ck_assert_int_eq(mkdir(certs, 0700), 0);
    h_tls_make_certs(certs);
    h_set_auth("tls-pw", NULL);
    long long t0 = h_now_ms();
    ck_assert_int_eq(h_tls_cluster_start(3, 1, certs), 0);
    long long started = h_now_ms() - t0;
    const char *key = "hx:tls";
    int slot = h_cluster_keyslot(key);
    int owner = h_cluster_slot_owner(slot);
    ck_assert_int_gt(owner, 0);
    ck_assert_int_eq(h_redis_port(h_redis_index_of_port(owner)), owner);
    expect_reply(owner, "OK", "SET", key, "over-tls"); /* redis-cli --tls */
    expect_reply(owner, "over-tls", "GET", key, NULL);
    int to = other_primary(owner);
    h_cluster_migrate(slot, to);                      /* MIGRATE over TLS */
    expect_reply(to, "over-tls", "GET", key, NULL);
    fprintf(stderr, "cluster: 3+3 TLS nodes ready in %lld ms\n", started);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("cluster-harness");
    const struct {
        const char *name;
        const TTest *test;
    } cases[] = {
        {"slots", start_slots_set_get_migrate},
        {"failover", primary_killed_replica_takes_over},
        {"tls", tls_cluster},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        TCase *tc = tcase_create(cases[i].name);
        tcase_add_checked_fixture(tc, h_setup, h_teardown);
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, cases[i].test);
        suite_add_tcase(s, tc);
    }
    return s;
}

int main(void) {
    return h_main(suite());
}
