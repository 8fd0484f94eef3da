/* Integration tests of the wake queue (issue 40): a release of a hot plain lock wakes one daemon, not every one.
 * SPDX-License-Identifier: MIT
 *
 * Eight daemons on one Redis, a waiter on each for one name. Tries are
 * counted on a MONITOR connection: each acquire of the name carries its
 * fence counter's key, redisson_lock_token:{dlock:<name>}, alone or in a
 * batch. */
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/support/harness.h"
#include "tests/support/redisson.h"

#define NAME "h"
#define KEY "dlock:h"
#define CHANNEL "redisson_lock__channel:{dlock:h}"
#define TOKEN "redisson_lock_token:{dlock:h}"
#define QUEUE "dlock_wq:{dlock:h}"
#define DAEMONS 8
/* The fallback the daemons are given: command_timeout_ms. */
#define FALLBACK_MS 1500
/* What a grant may take beyond the fallback on a busy 2-core machine. */
#define SLACK_MS 2500

static void setup(void) {
    h_setup();
}


#define PASSED() h_keep_passed()

static int start_d(const char *extra) {
    int d = h_dlockd_start(extra);
    h_keep_log(d, "%s.dlockd%d", tcase_name(), d);
    h_await_redis(d, 1);
    return d;
}

/* ---- the Redis that has the name ---------------------------------------------
 * h_redis_start()'s, or on a Cluster the primary of the name's slot, whose
 * channel is sharded (SPUBLISH, SSUBSCRIBE). */

static const char *node_sock; /* NULL: h_redis_sock() */
static int sharded;

static void teardown(void) {
    node_sock = NULL;
    sharded = 0;
    h_teardown();
}

/* redis-cli on the name's node, as h_redis_argv. */
static const char *node_argv(const char *const args[]) {
    const char *argv[32] = {"redis-cli", "-s", node_sock ? node_sock : h_redis_sock()};
    size_t n = 3;
    for (size_t i = 0; args[i] != NULL; i++) argv[n++] = args[i];
    argv[n] = NULL;
    return h_run(argv);
}

/* Waits until the name's channel has n subscribers. */
static void await_subscribers(int n) {
    const char *a[] = {"PUBSUB", sharded ? "SHARDNUMSUB" : "NUMSUB", CHANNEL, NULL};
    long long end = h_now_ms() + H_WAIT_MS;
    for (;;) {
        const char *out = node_argv(a), *nl = strrchr(out, '\n');
        if (nl != NULL && atoi(nl + 1) >= n) return;
        ck_assert_msg(h_now_ms() < end, "%s never had %d subscribers: '%s'", CHANNEL, n, out);
        usleep(2000);
    }
}

/* A dlockd on the running cluster, every primary up. */
static int start_cluster_d(void) {
    char text[4096];
    snprintf(text, sizeof(text), "[redis]\ncluster = %s\ncommand_timeout_ms = %d\n",
             h_cluster_addrs(), FALLBACK_MS);
    int d = h_dlockd_start_conf(text);
    h_keep_log(d, "%s.dlockd%d", tcase_name(), d);
    h_conn_t *c = h_connect_index(d);
    long long end = h_now_ms() + H_WAIT_MS;
    for (;;) {
        long long n = h_info_value(c, "redis_nodes"), up = h_info_value(c, "redis_nodes_up");
        if (n > 0 && n == up) break;
        ck_assert_msg(h_now_ms() < end, "dlockd %d: %lld of %lld primaries up", d, up, n);
        usleep(10000);
    }
    h_close(c);
    return d;
}

/* A cluster of three primaries; the name's node found. */
static void cluster_start(void) {
    h_cluster_start(3, 0);
    int port = h_cluster_slot_owner(h_cluster_keyslot(KEY));
    for (int i = 0; i < h_cluster_node_count(); i++)
        if (h_cluster_port(i) == port) node_sock = h_redis_sock_index(h_cluster_index(i));
    ck_assert_msg(node_sock != NULL, "no node has %s's slot", KEY);
    sharded = 1;
}

/* Daemons whose fallback is FALLBACK_MS. */
static int start_fallback(void) {
    char conf[128];
    snprintf(conf, sizeof(conf), "[redis]\ncommand_timeout_ms = %d\n", FALLBACK_MS);
    return start_d(conf);
}

static long long queue_len(void) {
    const char *a[] = {"ZCARD", QUEUE, NULL};
    return atoll(node_argv(a));
}

static void await_queue(long long n) {
    long long end = h_now_ms() + H_WAIT_MS;
    while (queue_len() != n) {
        ck_assert_msg(h_now_ms() < end, "the wake queue never had %lld daemons: %lld", n,
                      queue_len());
        usleep(2000);
    }
}

/* 1 if l is a grant ("OK <fence> <holds>"). */
static int is_grant(const char *l) {
    return l != NULL && strncmp(l, "OK ", 3) == 0 && strchr(l + 3, ' ') != NULL;
}

static void lock_now(h_conn_t *c) {
    h_send(c, "LOCK " NAME "\n");
    const char *l = h_reply(c, H_WAIT_MS, H_EVENTS_SKIP);
    ck_assert_msg(is_grant(l), "LOCK " NAME ": got '%s'", l ? l : "(nothing)");
}

static void unlock(h_conn_t *c) {
    h_send(c, "UNLOCK " NAME "\n");
    const char *l = h_reply(c, H_WAIT_MS, H_EVENTS_SKIP);
    ck_assert_msg(l != NULL && strcmp(l, "OK 0") == 0, "UNLOCK: got '%s'", l ? l : "(nothing)");
}

/* ---- counting on MONITOR --------------------------------------------------- */

typedef struct {
    h_conn_t *c;
    long long tries;    /* acquires of the name seen */
    long long releases; /* releases of the name seen (its channel's key) */
    long long commands; /* commands of the daemons seen */
    long long reads;    /* election reads of the name (its leader's record) */
} monitor_t;

static void monitor_start(monitor_t *m) {
    memset(m, 0, sizeof(*m));
    m->c = h_connect(node_sock ? node_sock : h_redis_sock());
    h_send(m->c, "MONITOR\r\n");
    const char *l = h_recv(m->c, H_WAIT_MS);
    ck_assert_msg(l != NULL && strncmp(l, "+OK", 3) == 0, "MONITOR: '%s'", l ? l : "(nothing)");
}

static long long count_in(const char *l, const char *what) {
    long long n = 0;
    for (const char *p = l; (p = strstr(p, what)) != NULL; p += strlen(what)) n++;
    return n;
}

/* Reads MONITOR's lines for up to ms, counting; stops early once until
 * (if not NULL) has been seen. 1 if it was. */
static int monitor_read(monitor_t *m, int ms, const char *until) {
    long long end = h_now_ms() + ms;
    for (;;) {
        long long left = end - h_now_ms();
        if (left <= 0) return 0;
        const char *l = h_recv(m->c, (int)left);
        if (l == NULL) return 0;
        if (until != NULL && strstr(l, until) != NULL) return 1;
        /* redis-cli's own commands (the test's) come from "unix:" too: only
         * the daemons run scripts and pub/sub */
        if (strstr(l, "\"EVALSHA\"") || strstr(l, "\"EVAL\"") || strstr(l, "SUBSCRIBE\"")) {
            m->commands++;
            m->tries += count_in(l, "\"" TOKEN "\"");
            m->releases += count_in(l, "\"" CHANNEL "\"");
            m->reads += count_in(l, "\"dlock_leader:{" KEY "}\"");
        }
    }
}

/* Everything the daemons sent before now has been counted. */
static void monitor_sync(monitor_t *m) {
    static int seq;
    char mark[32];
    snprintf(mark, sizeof(mark), "herd-mark-%d", ++seq);
    const char *a[] = {"ECHO", mark, NULL};
    node_argv(a);
    ck_assert_msg(monitor_read(m, H_WAIT_MS, mark), "MONITOR never showed %s", mark);
}

/* Waiter i's LOCK on daemon d: it tries, is refused, joins the wake queue
 * (at n), subscribes, and tries once more when the subscription is in
 * force; all of that seen before the next. */
static h_conn_t *queue_waiter(monitor_t *m, int d, long long n) {
    h_conn_t *c = h_connect_index(d);
    long long before = m->tries;
    h_send(c, "LOCK " NAME "\n");
    await_queue(n);
    await_subscribers((int)n);
    long long end = h_now_ms() + H_WAIT_MS;
    while (m->tries < before + 2) {
        ck_assert_msg(h_now_ms() < end, "waiter %lld: %lld tries seen, wanted 2", n,
                      m->tries - before);
        monitor_read(m, 50, NULL);
    }
    return c;
}

/* The one of c[from..to) that has a line within ms, -1 if none. */
static int first_ready(h_conn_t **c, int from, int to, int ms) {
    struct pollfd p[DAEMONS];
    int n = 0;
    for (int i = from; i < to; i++) {
        if (c[i] != NULL && c[i]->len > 0 && memchr(c[i]->buf, '\n', c[i]->len) != NULL) return i;
        p[n++] = (struct pollfd){.fd = c[i] ? c[i]->fd : -1, .events = POLLIN};
    }
    if (poll(p, (nfds_t)n, ms) <= 0) return -1;
    for (int i = 0; i < n; i++)
        if (p[i].revents) return from + i;
    return -1;
}

/* ---- each release gives one try --------------------------------------------- */

/* The hand-offs between the daemons d[], a waiter on each, counted. */
static void one_try_each(const int *d, const char *what) {
    monitor_t m;
    monitor_start(&m);
    h_conn_t *c[DAEMONS];
    c[0] = h_connect_index(d[0]);
    lock_now(c[0]);
    for (int i = 1; i < DAEMONS; i++) c[i] = queue_waiter(&m, d[i], i);
    monitor_sync(&m);

    /* The hand-offs, in the order the daemons queued. */
    long long tries0 = m.tries, cmds0 = m.commands;
    for (int i = 1; i < DAEMONS; i++) {
        unlock(c[i - 1]);
        const char *l = h_reply(c[i], H_WAIT_MS, H_EVENTS_SKIP);
        ck_assert_msg(is_grant(l), "hand-off %d: daemon %d got '%s'", i, i, l ? l : "(nothing)");
        /* nobody behind it got it */
        for (int j = i + 1; j < DAEMONS; j++)
            ck_assert_msg(c[j]->len == 0, "daemon %d answered out of turn", j);
    }
    unlock(c[DAEMONS - 1]);
    monitor_sync(&m);
    long long tries = m.tries - tries0, cmds = m.commands - cmds0;
    fprintf(stderr, "%s: %d hand-offs, %lld tries (%lld failed), %lld commands "
                    "(%.2f per hand-off)\n",
            what, DAEMONS - 1, tries, tries - (DAEMONS - 1), cmds, (double)cmds / (DAEMONS - 1));
    ck_assert_msg(tries == DAEMONS - 1, "%lld tries for %d hand-offs: a release woke more than one",
                  tries, DAEMONS - 1);
    /* a refusal by a plain lock's holder says no election leads the name */
    ck_assert_msg(m.reads == 0, "%lld election reads of a plain lock's name", m.reads);
    ck_assert_int_eq(queue_len(), 0);
    for (int i = 0; i < DAEMONS; i++) h_close(c[i]);
    h_close(m.c);
}

START_TEST(each_release_one_try) {
    h_redis_start();
    int d[DAEMONS];
    for (int i = 0; i < DAEMONS; i++) d[i] = start_d(NULL);
    one_try_each(d, "each_release_one_try");
    PASSED();
}
END_TEST

/* With nobody waiting, a release asks the wake queue nothing: the
 * uncontended LOCK/UNLOCK runs what it ran before the queue (a ZPOPMIN in
 * every release cost the fleet 1.08 commands a pair); a refusal marks the
 * lock's hash (dlock:wq), and then the release does. */
START_TEST(uncontended_release_asks_no_queue) {
    h_redis_start();
    int d = start_d(NULL), d2 = start_d(NULL);
    h_conn_t *a = h_connect_index(d), *b = h_connect_index(d2);
    monitor_t m;
    monitor_start(&m);
    for (int i = 0; i < 20; i++) {
        h_send(a, "LOCK " NAME "\r\n");
        H_EXPECT_PREFIX(a, "OK ");
        h_expect_reply(a, "UNLOCK " NAME, "OK 0");
    }
    const char *e[] = {"ECHO", "herd-pop-mark", NULL};
    node_argv(e);
    long long pops = 0;
    const char *l;
    while ((l = h_recv(m.c, H_WAIT_MS)) != NULL && strstr(l, "herd-pop-mark") == NULL)
        pops += count_in(l, "\"zpopmin\"") + count_in(l, "\"ZPOPMIN\"");
    ck_assert_msg(l != NULL, "MONITOR never showed the mark");
    ck_assert_msg(pops == 0, "20 uncontended releases popped the wake queue %lld times", pops);
    /* Contended once: b's refusal (another daemon's) marks the hash, and
     * the release names b's daemon, which is granted. */
    h_send(a, "LOCK " NAME "\r\n");
    H_EXPECT_PREFIX(a, "OK ");
    h_send(b, "LOCK " NAME "\r\n");
    const char *q[] = {"HGET", KEY, "dlock:wq", NULL};
    long long end = h_now_ms() + H_WAIT_MS;
    while (strcmp(node_argv(q), "1") != 0) {
        ck_assert_msg(h_now_ms() < end, "a refused LOCK never marked the hash");
        usleep(10000); /* poll interval, bounded by H_WAIT_MS */
    }
    h_expect_reply(a, "UNLOCK " NAME, "OK 0");
    H_EXPECT_PREFIX(b, "OK ");
    PASSED();
}
END_TEST

/* The same on a Cluster: the queue in the name's slot, the wake number
 * and the '0' sent with SPUBLISH to the shard's subscribers. */
START_TEST(each_release_one_try_cluster) {
    cluster_start();
    int d[DAEMONS];
    for (int i = 0; i < DAEMONS; i++) d[i] = start_cluster_d();
    one_try_each(d, "each_release_one_try_cluster");
    PASSED();
}
END_TEST

/* ---- commands per hand-off, clients looping ------------------------------------ */

#define LOOPERS 2      /* clients per daemon */
#define LOOP_HANDOFFS 400

/* Eight daemons, two clients on each looping LOCK / UNLOCK of one name (the
 * issue's small shape): what the daemons send per hand-off, counted on
 * MONITOR. A hand-off is a release, a grant and the next LOCK's refused
 * try (its wait's first: it reads nothing, no election leading the name),
 * and a daemon's subscribe and unsubscribe when its waiters come and go:
 * at most 3.5 commands (the target). */
START_TEST(looping_commands_per_handoff) {
    h_redis_start();
    int d[DAEMONS];
    for (int i = 0; i < DAEMONS; i++) d[i] = start_d(NULL);
    monitor_t m;
    monitor_start(&m);
    h_conn_t *c[DAEMONS * LOOPERS];
    long long grants = 0, per[DAEMONS * LOOPERS] = {0};
    for (int i = 0; i < DAEMONS * LOOPERS; i++) {
        c[i] = h_connect_index(d[i % DAEMONS]);
        h_send(c[i], "LOCK " NAME "\n");
    }
    long long end = h_now_ms() + 60000;
    while (grants < LOOP_HANDOFFS) {
        ck_assert_msg(h_now_ms() < end, "%lld hand-offs in 60 s", grants);
        struct pollfd p[DAEMONS * LOOPERS];
        for (int i = 0; i < DAEMONS * LOOPERS; i++) p[i] = (struct pollfd){c[i]->fd, POLLIN, 0};
        if (poll(p, DAEMONS * LOOPERS, 5) > 0) {
            for (int i = 0; i < DAEMONS * LOOPERS; i++) {
                if (!p[i].revents) continue;
                const char *l = h_recv(c[i], H_WAIT_MS);
                ck_assert_msg(l != NULL, "client %d: no line", i);
                if (is_grant(l)) {
                    grants++;
                    per[i]++;
                    h_send(c[i], "UNLOCK " NAME "\nLOCK " NAME "\n");
                } else {
                    ck_assert_msg(strcmp(l, "OK 0") == 0, "client %d: '%s'", i, l);
                }
            }
        }
        monitor_read(&m, 1, NULL);
    }
    monitor_sync(&m);
    long long lo = per[0], hi = per[0];
    for (int i = 1; i < DAEMONS * LOOPERS; i++) {
        if (per[i] < lo) lo = per[i];
        if (per[i] > hi) hi = per[i];
    }
    double cmds = (double)m.commands / (double)grants;
    fprintf(stderr, "looping: %lld hand-offs, %.2f commands per hand-off (%.2f tries, %.2f "
                    "releases, %.2f election reads), grants per client %lld to %lld\n",
            grants, cmds, (double)m.tries / (double)grants, (double)m.releases / (double)grants,
            (double)m.reads / (double)grants, lo, hi);
    ck_assert_msg(m.reads == 0, "%lld election reads of a plain lock's name", m.reads);
    ck_assert_msg(cmds <= 3.5, "%.2f commands per hand-off", cmds);
    for (int i = 0; i < DAEMONS * LOOPERS; i++) h_close(c[i]);
    h_close(m.c);
    PASSED();
}
END_TEST

/* ---- the woken daemon stopped, then killed ------------------------------------ */

/* Waits for a grant on any of c[from..to) within ms; its index, after
 * checking no other got one. */
static int await_grant(h_conn_t **c, int from, int to, int ms, const char *what) {
    int i = first_ready(c, from, to, ms);
    ck_assert_msg(i >= 0, "%s: no grant within %d ms", what, ms);
    const char *l = h_reply(c[i], H_WAIT_MS, H_EVENTS_SKIP);
    ck_assert_msg(is_grant(l), "%s: daemon %d got '%s'", what, i, l ? l : "(nothing)");
    return i;
}

START_TEST(woken_daemon_stopped_then_killed) {
    h_redis_start();
    int d[DAEMONS];
    for (int i = 0; i < DAEMONS; i++) d[i] = start_fallback();
    monitor_t m;
    monitor_start(&m);
    h_conn_t *c[DAEMONS];
    c[0] = h_connect_index(d[0]);
    lock_now(c[0]);
    for (int i = 1; i < DAEMONS; i++) c[i] = queue_waiter(&m, d[i], i);
    h_close(m.c);

    /* Daemon 1 is first: paused, it cannot take its turn. */
    kill(h_dlockd_pid(d[1]), SIGSTOP);
    long long t0 = h_now_ms();
    unlock(c[0]);
    int g = await_grant(c, 2, DAEMONS, FALLBACK_MS + SLACK_MS, "daemon 1 paused");
    long long took = h_now_ms() - t0;
    fprintf(stderr, "woken daemon paused: daemon %d got the lock after %lld ms (bound %d ms)\n", g,
            took, FALLBACK_MS);
    /* the others waited for daemon 1's turn to pass: they did not all try at once */
    ck_assert_msg(took >= FALLBACK_MS - 100, "granted after %lld ms, before the fallback", took);
    h_dlockd_stop(d[1], SIGKILL);

    /* The next in the queue (the first of 2.. that did not win) is killed
     * before its turn comes. */
    int next = 2;
    while (next == g) next++;
    h_dlockd_stop(d[next], SIGKILL); /* not a clean stop: the harness forgets it */
    h_close(c[next]);
    c[next] = NULL;
    t0 = h_now_ms();
    unlock(c[g]);
    int g2 = first_ready(c, 2, DAEMONS, FALLBACK_MS + SLACK_MS); /* a closed slot polls as fd -1 */
    ck_assert_msg(g2 >= 0, "daemon %d killed: no grant within %d ms", next, FALLBACK_MS + SLACK_MS);
    const char *l = h_reply(c[g2], H_WAIT_MS, H_EVENTS_SKIP);
    ck_assert_msg(is_grant(l), "daemon %d got '%s'", g2, l ? l : "(nothing)");
    took = h_now_ms() - t0;
    fprintf(stderr, "woken daemon killed: daemon %d got the lock after %lld ms (bound %d ms)\n",
            g2, took, FALLBACK_MS);
    ck_assert_int_ne(g2, g);
    ck_assert_int_le(took, FALLBACK_MS + SLACK_MS);

    /* The rest still get it, in turn, each at once. */
    int left = 0;
    for (int i = 2; i < DAEMONS; i++)
        if (c[i] != NULL && i != g && i != g2) left++;
    int holder = g2;
    for (int k = 0; k < left; k++) {
        t0 = h_now_ms();
        unlock(c[holder]);
        h_close(c[holder]);
        c[holder] = NULL;
        holder = await_grant(c, 2, DAEMONS, FALLBACK_MS + SLACK_MS, "the rest");
        ck_assert_msg(h_now_ms() - t0 < FALLBACK_MS, "daemon %d's turn took %lld ms", holder,
                      h_now_ms() - t0);
    }
    for (int i = 0; i < DAEMONS; i++)
        if (c[i] != NULL && i != 1) h_close(c[i]);
    PASSED();
}
END_TEST

/* ---- a daemon whose waiters all left ------------------------------------------ */

/* Waits until the name's channel has no subscriber. */
static void await_no_subscribers(void) {
    const char *a[] = {"PUBSUB", sharded ? "SHARDNUMSUB" : "NUMSUB", CHANNEL, NULL};
    long long end = h_now_ms() + H_WAIT_MS;
    for (;;) {
        const char *out = node_argv(a), *nl = strrchr(out, '\n');
        if (nl != NULL && atoi(nl + 1) == 0) return;
        ck_assert_msg(h_now_ms() < end, "%s kept its subscribers: '%s'", CHANNEL, out);
        usleep(2000);
    }
}

/* A daemon whose one waiter leaves without a grant (its TRYLOCK's wait
 * runs out, a CANCEL, its connection closing) is taken out of the wake
 * queue: the next release names the daemon that still waits, which gets
 * the lock at once, not after a fallback. */
START_TEST(waiter_left_out_of_queue) {
    h_redis_start();
    int d[3];
    for (int i = 0; i < 3; i++) d[i] = start_fallback();
    monitor_t m;
    monitor_start(&m);
    h_conn_t *holder = h_connect_index(d[0]);
    lock_now(holder);
    const char *ways[] = {"TRYLOCK's wait runs out", "CANCEL", "the connection closes"};
    for (int way = 0; way < 3; way++) {
        /* daemon 1's waiter queues, then leaves */
        h_conn_t *leaver = way == 0 ? h_connect_index(d[1]) : queue_waiter(&m, d[1], 1);
        if (way == 0) {
            h_send(leaver, "TRYLOCK " NAME " 300\n");
            await_queue(1);
            const char *l = h_reply(leaver, H_WAIT_MS, H_EVENTS_SKIP);
            ck_assert_msg(l != NULL && strncmp(l, "TIMEOUT", 7) == 0, "TRYLOCK: '%s'",
                          l ? l : "(nothing)");
        } else if (way == 1) {
            h_send(leaver, "CANCEL\n");
            const char *l = h_reply(leaver, H_WAIT_MS, H_EVENTS_SKIP);
            ck_assert_msg(l != NULL && strncmp(l, "ERR CANCELLED", 13) == 0, "LOCK: '%s'",
                          l ? l : "(nothing)");
            l = h_reply(leaver, H_WAIT_MS, H_EVENTS_SKIP);
            ck_assert_msg(l != NULL && strcmp(l, "OK 1") == 0, "CANCEL: '%s'", l ? l : "(nothing)");
        }
        h_close(leaver);
        await_no_subscribers(); /* daemon 1 has let the name go */
        monitor_sync(&m);
        /* daemon 2's waiter queues, and the holder releases */
        h_conn_t *c = h_connect_index(d[2]);
        long long before = m.tries;
        h_send(c, "LOCK " NAME "\n");
        await_subscribers(1);
        long long end = h_now_ms() + H_WAIT_MS;
        while (m.tries < before + 2) {
            ck_assert_msg(h_now_ms() < end, "daemon 2's waiter: %lld tries seen, wanted 2",
                          m.tries - before);
            monitor_read(&m, 50, NULL);
        }
        long long t0 = h_now_ms();
        unlock(holder);
        const char *l = h_reply(c, FALLBACK_MS + SLACK_MS, H_EVENTS_SKIP);
        long long took = h_now_ms() - t0;
        ck_assert_msg(is_grant(l), "%s: daemon 2 got '%s'", ways[way], l ? l : "(nothing)");
        fprintf(stderr, "waiter_left_out_of_queue: %s; the next waiter's grant took %lld ms\n",
                ways[way], took);
        ck_assert_msg(took < FALLBACK_MS, "%s: the next waiter's grant took %lld ms (a whole "
                      "fallback: the release named the daemon that no longer waits)",
                      ways[way], took);
        unlock(c);
        h_close(c);
        lock_now(holder);
    }
    h_close(holder);
    h_close(m.c);
    PASSED();
}
END_TEST

/* ---- a TRYLOCK that times out after its turn went to another daemon ----------- */

/* A TRYLOCK waiting behind a hold of its own daemon: the release names
 * another daemon's turn, so the TRYLOCK's try right behind it is refused
 * without a holder (the lock is free, the turn another's). When its wait
 * runs out, the other daemon holds the lock: TIMEOUT says that holder's
 * lease left, not -1 (no expiry). */
START_TEST(trylock_after_a_yield_reports_ttl) {
    h_redis_start();
    int d0 = start_d(NULL), d1 = start_d(NULL);
    monitor_t m;
    monitor_start(&m);
    h_conn_t *holder = h_connect_index(d0), *tryer = h_connect_index(d0), *adm;
    lock_now(holder);
    h_conn_t *other = queue_waiter(&m, d1, 1);
    h_send(tryer, "TRYLOCK " NAME " 1000\n");
    adm = h_connect_index(d0);
    long long end = h_now_ms() + H_WAIT_MS;
    while (h_info_value(adm, "waiters") != 1) {
        ck_assert_msg(h_now_ms() < end, "the TRYLOCK never waited");
        usleep(2000);
    }
    unlock(holder);
    const char *l = h_reply(other, H_WAIT_MS, H_EVENTS_SKIP);
    ck_assert_msg(is_grant(l), "daemon 1's turn: '%s'", l ? l : "(nothing)");
    l = h_reply(tryer, H_WAIT_MS, H_EVENTS_SKIP);
    long long ttl = -9;
    ck_assert_msg(l != NULL && sscanf(l, "TIMEOUT %lld", &ttl) == 1, "TRYLOCK: '%s'",
                  l ? l : "(nothing)");
    fprintf(stderr, "trylock_after_a_yield_reports_ttl: '%s'\n", l);
    ck_assert_msg(ttl > 0 && ttl <= 30000, "TRYLOCK timed out with '%s' while daemon 1 holds "
                  "with a lease of 30000 ms", l);
    h_close(adm);
    h_close(tryer);
    h_close(holder);
    h_close(other);
    h_close(m.c);
    PASSED();
}
END_TEST

/* ---- Redisson, both ways ------------------------------------------------------ */

static const char *redisson_try_lock(const char *field) {
    const char *a[] = {"--no-raw", "EVAL", redisson_lock, "1", KEY, "30000", field, NULL};
    return h_redis_argv(a);
}

static const char *redisson_unlock_h(const char *field) {
    const char *a[] = {"--no-raw", "EVAL", redisson_unlock, "2", KEY, CHANNEL, "0", "30000", field,
                       NULL};
    return h_redis_argv(a);
}

/* A RESP line from a raw Redis connection, without its CR. */
static const char *resp_line(h_conn_t *c) {
    const char *l = h_recv(c, H_WAIT_MS);
    ck_assert_msg(l != NULL, "no RESP line from redis");
    size_t n = strlen(c->line);
    if (n > 0 && c->line[n - 1] == '\r') c->line[n - 1] = '\0';
    return c->line;
}

/* The next message's payload on a raw subscriber. */
static const char *sub_message(h_conn_t *sub) {
    static char out[64];
    ck_assert_str_eq(resp_line(sub), "*3");
    resp_line(sub);
    ck_assert_str_eq(resp_line(sub), "message");
    resp_line(sub);
    ck_assert_str_eq(resp_line(sub), CHANNEL);
    resp_line(sub);
    snprintf(out, sizeof(out), "%s", resp_line(sub));
    return out;
}

START_TEST(redisson_holder_and_waiter_mixed) {
    h_redis_start();
    int d[3];
    for (int i = 0; i < 3; i++) d[i] = start_fallback();
    monitor_t m;
    monitor_start(&m);

    /* A Redisson waiter: subscribed, as RedissonLock is while it waits. */
    h_conn_t *sub = h_connect(h_redis_sock());
    h_send(sub, "SUBSCRIBE " CHANNEL "\r\n");
    ck_assert_str_eq(resp_line(sub), "*3");
    for (int i = 0; i < 5; i++) resp_line(sub);

    /* dlockd holds; dlockd waiters on daemons 1 and 2 queue. */
    h_conn_t *c[3];
    c[0] = h_connect_index(d[0]);
    lock_now(c[0]);
    c[1] = queue_waiter(&m, d[1], 1);
    c[2] = queue_waiter(&m, d[2], 2);
    h_close(m.c);
    h_redis_await_subscribers(CHANNEL, 3);

    /* dlockd's release wakes the Redisson waiter too: its '0' comes after
     * the wake number, which Redisson's LongCodec reads as a number it
     * does not know. */
    unlock(c[0]);
    const char *w = sub_message(sub);
    ck_assert_msg(strlen(w) == 16 && strspn(w, "0123456789") == 16, "wake number: '%s'", w);
    ck_assert_str_eq(sub_message(sub), "0");
    /* Daemon 1's turn: the Redisson waiter, woken, finds it taken. */
    const char *l = h_reply(c[1], H_WAIT_MS, H_EVENTS_SKIP);
    ck_assert_msg(is_grant(l), "daemon 1: '%s'", l ? l : "(nothing)");
    long long pttl = 0;
    const char *r = redisson_try_lock("javauuid:1");
    ck_assert_msg(sscanf(r, "(integer) %lld", &pttl) == 1 && pttl > 0, "Redisson: '%s'", r);

    /* Daemon 1 releases and names daemon 2; Redisson takes the lock
     * before daemon 2 can: daemon 2 is refused and queues again. */
    h_send(c[1], "UNLOCK " NAME "\n");
    w = sub_message(sub);
    ck_assert_msg(strlen(w) == 16 && strspn(w, "0123456789") == 16, "wake number: '%s'", w);
    ck_assert_str_eq(sub_message(sub), "0");
    long long end = h_now_ms() + H_WAIT_MS;
    while (strcmp(r = redisson_try_lock("javauuid:1"), "(nil)") != 0) {
        /* daemon 2 may win the race: then it is granted, and that is fine too */
        if (c[2]->len > 0 || first_ready(c, 2, 3, 0) == 2) break;
        ck_assert_msg(h_now_ms() < end, "Redisson never got the lock: '%s'", r);
        usleep(1000);
    }
    l = h_reply(c[1], H_WAIT_MS, H_EVENTS_SKIP);
    ck_assert_msg(l != NULL && strcmp(l, "OK 0") == 0, "UNLOCK: '%s'", l ? l : "(nothing)");
    if (strcmp(r, "(nil)") == 0) {
        /* Redisson holds: daemon 2 waits, and Redisson's release (a bare
         * '0') wakes it at once. */
        await_queue(1);
        h_expect_silence(c[2], 200, "daemon 2 granted while Redisson holds");
        long long t0 = h_now_ms();
        ck_assert_str_eq(redisson_unlock_h("javauuid:1"), "(integer) 1");
        l = h_reply(c[2], H_WAIT_MS, H_EVENTS_SKIP);
        ck_assert_msg(is_grant(l), "daemon 2 after Redisson's unlock: '%s'", l ? l : "(nothing)");
        ck_assert_msg(h_now_ms() - t0 < FALLBACK_MS, "daemon 2 waited %lld ms after Redisson's "
                      "unlock", h_now_ms() - t0);
        fprintf(stderr, "Redisson held between the turns; its release woke daemon 2\n");
    } else {
        l = h_reply(c[2], H_WAIT_MS, H_EVENTS_SKIP);
        ck_assert_msg(is_grant(l), "daemon 2: '%s'", l ? l : "(nothing)");
        fprintf(stderr, "daemon 2 took its turn before Redisson's try\n");
    }
    for (int i = 0; i < 3; i++) h_close(c[i]);
    h_close(sub);
    PASSED();
}
END_TEST

/* ---- no daemon starves --------------------------------------------------------- */

/* n clients of daemon d keep handing name to each other until stop_fd
 * closes; each grant is a byte on out_fd. */
static void churn(int d, int n, int stop_fd, int out_fd) {
    h_conn_t *c[16];
    for (int i = 0; i < n; i++) {
        c[i] = h_connect_index(d);
        h_send(c[i], "LOCK " NAME "\n");
    }
    for (;;) {
        struct pollfd pfd[17];
        for (int i = 0; i < n; i++) pfd[i] = (struct pollfd){.fd = c[i]->fd, .events = POLLIN};
        pfd[n] = (struct pollfd){.fd = stop_fd, .events = POLLIN};
        if (poll(pfd, (nfds_t)n + 1, 10000) <= 0 || pfd[n].revents) _exit(0);
        for (int i = 0; i < n; i++) {
            if (!pfd[i].revents) continue;
            const char *l = h_recv(c[i], 1000);
            if (l == NULL) _exit(1);
            if (is_grant(l)) {
                if (write(out_fd, "g", 1) != 1) _exit(1);
                h_send(c[i], "UNLOCK " NAME "\nLOCK " NAME "\n");
            }
        }
    }
}

/* Grants the churn reported so far (reads what is there). */
static long long churn_grants(int fd, long long *seen) {
    char b[4096];
    ssize_t n;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    while (poll(&p, 1, 0) > 0 && (n = read(fd, b, sizeof(b))) > 0) *seen += n;
    return *seen;
}

START_TEST(single_waiter_not_starved) {
    h_redis_start();
    int busy = start_fallback(), lone = start_fallback();
    int stop[2], grants[2];
    ck_assert_int_eq(pipe(stop), 0);
    ck_assert_int_eq(pipe(grants), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(stop[1]);
        close(grants[0]);
        churn(busy, 12, stop[0], grants[1]);
    }
    close(stop[0]);
    close(grants[1]);
    long long seen = 0, end = h_now_ms() + H_WAIT_MS;
    while (churn_grants(grants[0], &seen) < 200) {
        ck_assert_msg(h_now_ms() < end, "the churn never started");
        usleep(2000);
    }
    h_conn_t *c = h_connect_index(lone);
    long long worst = 0;
    for (int round = 0; round < 10; round++) {
        long long before = churn_grants(grants[0], &seen), t0 = h_now_ms();
        h_send(c, "LOCK " NAME "\n");
        const char *l = h_reply(c, FALLBACK_MS + SLACK_MS, H_EVENTS_SKIP);
        long long took = h_now_ms() - t0;
        ck_assert_msg(is_grant(l), "round %d: the lone waiter got '%s' after %lld ms", round,
                      l ? l : "(nothing)", took);
        if (took > worst) worst = took;
        long long mid = churn_grants(grants[0], &seen);
        /* the other daemon's waiters kept cycling meanwhile */
        usleep(20000);
        unlock(c);
        end = h_now_ms() + H_WAIT_MS;
        while (churn_grants(grants[0], &seen) < mid + 20) {
            ck_assert_msg(h_now_ms() < end, "round %d: the churn stopped", round);
            usleep(1000);
        }
        fprintf(stderr, "round %d: the lone waiter's turn came after %lld ms, %lld grants of the "
                        "other daemon meanwhile\n",
                round, took, mid - before);
    }
    ck_assert_msg(worst < FALLBACK_MS, "the lone waiter waited up to %lld ms", worst);
    close(stop[1]);
    waitpid(pid, NULL, 0);
    close(grants[0]);
    h_close(c);
    PASSED();
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("herd");
    TCase *tc = tcase_create("herd");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 90);
    tcase_add_test(tc, each_release_one_try);
    tcase_add_test(tc, uncontended_release_asks_no_queue);
    tcase_add_test(tc, looping_commands_per_handoff);
    tcase_add_test(tc, woken_daemon_stopped_then_killed);
    tcase_add_test(tc, waiter_left_out_of_queue);
    tcase_add_test(tc, trylock_after_a_yield_reports_ttl);
    tcase_add_test(tc, redisson_holder_and_waiter_mixed);
    tcase_add_test(tc, single_waiter_not_starved);
    suite_add_tcase(s, tc);
    TCase *cl = tcase_create("cluster");
    tcase_add_checked_fixture(cl, setup, teardown);
    tcase_set_timeout(cl, 120);
    tcase_add_test(cl, each_release_one_try_cluster);
    suite_add_tcase(s, cl);
    return s;
}

int main(void) {
    return h_main(suite());
}
