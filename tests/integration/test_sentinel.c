/* Integration tests of dlockd behind Redis Sentinel: discovery, failovers
 * (a killed primary, a forced one under load), the old primary coming back,
 * Sentinels going away, the configuration checks, discovery and a
 * failover with everything over TLS, passwords on the Sentinels and on
 * the servers, and the signs of a failover that come with the connection
 * kept: READONLY from a primary turned replica, LOADING from one that
 * loads its data again.
 * SPDX-License-Identifier: MIT
 *
 * Each test builds its own set (a primary, two replicas, three Sentinels on
 * private ports; see h_sentinels_start), since a failover changes the
 * topology. Waits are bounded by H_WAIT_MS, or H_FAILOVER_MS for whatever
 * waits on Sentinel. */
#include <check.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/support/harness.h"

/* ---- failure reports ------------------------------------------------------
 * Check ends a failed test with exit() and h_main() removes the run's
 * directory, so the logs of each dlockd and Sentinel are hard-linked to
 * H_KEEP_DIR/sentinel.<test>.<what>.log and the links removed when the test
 * passes. */

/* Keeps dlockd d's log, and the Sentinels' the first time. */
static void keep_logs(const char *test, int d) {
    if (h_kept() == 0)
        for (int i = 0; i < h_sentinel_count(); i++)
            h_keep_log(h_sentinel_index(i), "sentinel.%s.sentinel%d", test, i);
    h_keep_log(d, "sentinel.%s.dlockd%d", test, d);
}

#define KEEP(d) keep_logs(__func__, (d))

static void setup(void) {
    h_setup();
}

/* ---- clients that remember their events ----------------------------------- */

typedef struct {
    h_conn_t *c;
    char events[4096]; /* every event line seen, each ending in '\n' */
} cl_t;

static cl_t *cl_open(int d) {
    cl_t *c = calloc(1, sizeof(*c));
    ck_assert_ptr_nonnull(c);
    c->c = h_connect_index(d);
    return c;
}

static void cl_close(cl_t *c) {
    if (c == NULL) return;
    h_close(c->c);
    free(c);
}

static void note_event(cl_t *c, const char *line) {
    size_t n = strlen(c->events);
    snprintf(c->events + n, sizeof(c->events) - n, "%s\n", line);
}

/* The next reply line, noting events on the way; NULL on timeout. */
static const char *cl_reply(cl_t *c, int timeout_ms) {
    long long end = h_now_ms() + timeout_ms;
    for (;;) {
        long long left = end - h_now_ms();
        const char *l = h_recv(c->c, left > 0 ? (int)left : 0);
        if (l == NULL || l[0] != '!') return l;
        note_event(c, l);
    }
}

/* Reads whatever lines are there already; they must all be events. */
static void cl_drain(cl_t *c, const char *who) {
    const char *l;
    while ((l = h_recv(c->c, 0)) != NULL) {
        ck_assert_msg(l[0] == '!', "%s: unexpected line '%s' with no request in flight", who, l);
        note_event(c, l);
    }
}

/* 1 if c got a !LOST event for name. */
static int cl_lost(const cl_t *c, const char *name) {
    char want[300];
    snprintf(want, sizeof(want), "!LOST %s ", name);
    return strstr(c->events, want) != NULL;
}

/* The fence of an "OK <fence> <holds>" grant, checking holds; 0 if line is
 * not a grant. */
static unsigned long long grant_fence(const char *line, long long holds) {
    unsigned long long fence;
    long long h;
    char tail;
    if (line == NULL || sscanf(line, "OK %llu %lld%c", &fence, &h, &tail) != 2) return 0;
    if (h != holds || fence == 0) return 0;
    return fence;
}

/* LOCK name, which must be granted at once (1 hold); returns the fence. */
static unsigned long long lock_ok(cl_t *c, const char *name) {
    h_send(c->c, "LOCK %s\n", name);
    const char *l = cl_reply(c, H_WAIT_MS);
    ck_assert_msg(l != NULL, "LOCK %s: no reply within %d ms", name, H_WAIT_MS);
    unsigned long long f = grant_fence(l, 1);
    ck_assert_msg(f > 0, "LOCK %s: got '%s', wanted 'OK <fence> 1'", name, l);
    return f;
}

static void unlock_ok(cl_t *c, const char *name) {
    h_send(c->c, "UNLOCK %s\n", name);
    const char *l = cl_reply(c, H_WAIT_MS);
    ck_assert_msg(l != NULL, "UNLOCK %s: no reply", name);
    ck_assert_msg(strcmp(l, "OK 0") == 0, "UNLOCK %s: got '%s', wanted 'OK 0'", name, l);
}

/* LOCK name until it is granted, retrying on ERR BACKEND (Redis away for a
 * while) until end_ms; returns the fence. */
static unsigned long long lock_until(cl_t *c, const char *name, long long end_ms,
                                     const char *why) {
    char last[H_LINE_MAX] = "(nothing)";
    for (;;) {
        long long left = end_ms - h_now_ms();
        ck_assert_msg(left > 0, "%s: LOCK %s not granted in time; last reply '%s'", why, name,
                      last);
        h_send(c->c, "LOCK %s\n", name);
        const char *l = cl_reply(c, (int)left + 2000);
        ck_assert_msg(l != NULL, "%s: LOCK %s: no reply at all (last before: '%s')", why, name,
                      last);
        unsigned long long f = grant_fence(l, 1);
        if (f > 0) return f;
        ck_assert_msg(strncmp(l, "ERR BACKEND", 11) == 0, "%s: LOCK %s: got '%s'", why, name, l);
        snprintf(last, sizeof(last), "%s", l);
        usleep(100000);
    }
}

static long long info_num(int d, const char *key) {
    const char *l = h_info_line(d);
    char pat[64];
    snprintf(pat, sizeof(pat), " %s=", key);
    const char *p = strstr(l, pat);
    return p ? atoll(p + strlen(pat)) : -1;
}

/* What the line dlockd logs when it adopts a primary contains
 * ("primary is now 127.0.0.1:<port>", or "primary of <name> is now ..."). */
#define ADOPTED "is now 127.0.0.1:"

static const char *adopted(int port) {
    static char text[64];
    snprintf(text, sizeof(text), ADOPTED "%d", port);
    return text;
}

/* Waits until redis server r has key (EXISTS 1). */
static void await_key(int r, const char *key) {
    long long end = h_now_ms() + H_WAIT_MS;
    for (;;) {
        const char *v = h_redis_tcp(h_redis_port(r), "EXISTS %s", key);
        if (v != NULL && strcmp(v, "1") == 0) return;
        ck_assert_msg(h_now_ms() < end, "redis %d (port %d) never had %s: '%s'", r,
                      h_redis_port(r), key, v ? v : "(no answer)");
        usleep(20000);
    }
}

/* ---- 1. normal use -------------------------------------------------------- */

START_TEST(normal_use_through_discovery) {
    int p = h_sentinels_start(2, 3);
    int d = h_dlockd_start_sentinel("[lock]\nlease_ms = 1000\n");
    KEEP(d);
    const char *inf = h_info_line(d);
    ck_assert_msg(strstr(inf, " backend=sentinel") != NULL, "INFO lacks backend=sentinel: '%s'",
                  inf);
    ck_assert_msg(strstr(inf, " redis=up ") != NULL, "INFO lacks redis=up: '%s'", inf);
    h_await_log(d, adopted(h_redis_port(p)), 1);

    cl_t *a = cl_open(d), *b = cl_open(d);
    unsigned long long f1 = lock_ok(a, "n");
    await_key(p, "dlock:n"); /* it went to the primary the Sentinels name */

    /* b waits behind a, and is granted when a lets go. */
    h_send(b->c, "LOCK n\n");
    const char *early = cl_reply(b, 300);
    ck_assert_msg(early == NULL, "LOCK n answered '%s' while another client holds it", early);
    unlock_ok(a, "n");
    const char *l = cl_reply(b, H_WAIT_MS);
    ck_assert_msg(l != NULL, "the waiter was not granted within %d ms of the unlock", H_WAIT_MS);
    unsigned long long f2 = grant_fence(l, 1);
    ck_assert_msg(f2 > f1, "waiter's grant '%s': wanted OK with a fence above %llu", l, f1);

    /* b holds it in watchdog mode (lease 1000 ms) through more than three
     * leases: every STATUS on the way says it is b's, with its fence. */
    long long granted = h_now_ms();
    long long renewals0 = info_num(d, "renewals");
    int checks = 0;
    while (h_now_ms() - granted < 3300) {
        h_send(b->c, "STATUS n\n");
        l = cl_reply(b, H_WAIT_MS);
        ck_assert_msg(l != NULL, "STATUS n: no reply");
        unsigned long long fence;
        int holds;
        long long ttl;
        ck_assert_msg(sscanf(l, "OK MINE %d %lld %llu", &holds, &ttl, &fence) == 3 && holds == 1 &&
                          fence == f2,
                      "STATUS n %lld ms into the hold: '%s', wanted 'OK MINE 1 <ttl> %llu'",
                      h_now_ms() - granted, l, f2);
        ck_assert_msg(ttl > 0 && ttl <= 1000, "STATUS n: ttl %lld outside (0, 1000]", ttl);
        checks++;
        usleep(250000);
    }
    ck_assert_msg(b->events[0] == '\0', "events during the hold: %s", b->events);
    long long renewals = info_num(d, "renewals") - renewals0;
    ck_assert_msg(renewals >= 3, "only %lld renewals in 3.3 s of a 1000 ms lease", renewals);
    await_key(p, "dlock:n");

    /* And back to a: the fence rises again. */
    h_send(a->c, "LOCK n\n");
    unlock_ok(b, "n");
    l = cl_reply(a, H_WAIT_MS);
    unsigned long long f3 = grant_fence(l, 1);
    ck_assert_msg(f3 > f2, "third grant '%s': wanted a fence above %llu", l ? l : "(none)", f2);
    unlock_ok(a, "n");
    ck_assert_int_eq(h_log_count(d, ADOPTED), 1);
    cl_close(a);
    cl_close(b);
    h_keep_passed();
}
END_TEST

/* ---- 2. the primary dies -------------------------------------------------- */

START_TEST(primary_killed_with_holders_and_waiters) {
    int p = h_sentinels_start(2, 3);
    int old = h_redis_port(p);
    /* Two daemons: a waiter on the other daemon is woken through Redis
     * (pub/sub on the new primary), one on the same daemon locally. */
    const char *conf = "[lock]\nlease_ms = 10000\n";
    int d1 = h_dlockd_start_sentinel(conf);
    int d2 = h_dlockd_start_sentinel(conf);
    KEEP(d1);
    KEEP(d2);

    /* Fences handed out before the failover. */
    unsigned long long before = 0;
    cl_t *warm = cl_open(d2);
    for (int i = 0; i < 5; i++) {
        unsigned long long f = lock_ok(warm, "k1");
        ck_assert_msg(f > before, "fence did not rise: %llu after %llu", f, before);
        before = f;
        unlock_ok(warm, "k1");
    }
    cl_close(warm);

    cl_t *h1 = cl_open(d1), *h2 = cl_open(d1);
    cl_t *w1 = cl_open(d2), *w2 = cl_open(d1);
    unsigned long long f = lock_ok(h1, "k1");
    before = f > before ? f : before;
    f = lock_ok(h2, "k2");
    before = f > before ? f : before;
    h_send(w1->c, "LOCK k1\n");
    h_send(w2->c, "LOCK k2\n");
    ck_assert_msg(cl_reply(w1, 300) == NULL, "LOCK k1 on d2 answered while h1 holds it");
    ck_assert_msg(cl_reply(w2, 100) == NULL, "LOCK k2 answered while h2 holds it");
    /* Both replicas have the locks, so whichever is promoted has them. */
    await_key(h_replica(0), "dlock:k1");
    await_key(h_replica(0), "dlock:k2");
    await_key(h_replica(1), "dlock:k1");
    await_key(h_replica(1), "dlock:k2");

    long long killed = h_now_ms();
    h_redis_stop_index(p, SIGKILL);
    int np = h_await_failover(old, H_FAILOVER_MS);
    fprintf(stderr, "primary_killed: sentinels promoted port %d after %lld ms\n", np,
            h_now_ms() - killed);

    /* Service resumes on the promoted replica, through both daemons. */
    cl_t *n1 = cl_open(d1), *n2 = cl_open(d2);
    unsigned long long g1 = lock_until(n1, "fresh1", killed + H_FAILOVER_MS, "d1 after the kill");
    unsigned long long g2 = lock_until(n2, "fresh2", killed + H_FAILOVER_MS, "d2 after the kill");
    fprintf(stderr, "primary_killed: new grants %lld ms after the kill\n", h_now_ms() - killed);
    ck_assert_msg(g1 > before && g2 > before,
                  "fences after the failover (%llu, %llu) not above those before (%llu)", g1, g2,
                  before);
    h_await_log_ms(d1, adopted(np), 1, H_FAILOVER_MS);
    h_await_log_ms(d2, adopted(np), 1, H_FAILOVER_MS);
    await_key(h_redis_index_of_port(np), "dlock:fresh1");

    /* Each holder still holds (and its waiter is not served yet) or was
     * told it lost the lock; each waiter is then served, with a fence
     * above every earlier one. */
    struct {
        cl_t *holder, *waiter;
        const char *name;
    } pairs[] = {{h1, w1, "k1"}, {h2, w2, "k2"}};
    for (int i = 0; i < 2; i++) {
        cl_t *h = pairs[i].holder, *w = pairs[i].waiter;
        const char *name = pairs[i].name;
        cl_drain(h, name);
        const char *l;
        long long end = h_now_ms() + H_WAIT_MS;
        for (;;) { /* STATUS may meet the end of the switch: ERR BACKEND, then again */
            h_send(h->c, "STATUS %s\n", name);
            l = cl_reply(h, H_WAIT_MS);
            ck_assert_msg(l != NULL, "STATUS %s: no reply", name);
            if (strncmp(l, "ERR BACKEND", 11) != 0 || h_now_ms() > end) break;
            usleep(100000);
        }
        int lost = cl_lost(h, name);
        if (!lost) {
            ck_assert_msg(strncmp(l, "OK MINE 1 ", 10) == 0,
                          "holder of %s got no !LOST but STATUS says '%s'", name, l);
            const char *early = cl_reply(w, 0);
            ck_assert_msg(early == NULL, "waiter for %s got '%s' while its holder still holds it",
                          name, early);
        }
        h_send(h->c, "UNLOCK %s\n", name);
        l = cl_reply(h, H_WAIT_MS);
        ck_assert_msg(l != NULL, "UNLOCK %s: no reply", name);
        if (lost || cl_lost(h, name)) {
            ck_assert_msg(strncmp(l, "ERR NOTHELD", 11) == 0,
                          "UNLOCK %s after '%s': got '%s', wanted ERR NOTHELD", name, h->events, l);
        } else {
            ck_assert_msg(strcmp(l, "OK 0") == 0, "UNLOCK %s (never lost): got '%s'", name, l);
        }
        fprintf(stderr, "primary_killed: holder of %s %s\n", name,
                lost ? h->events : "kept it through the failover");
        l = cl_reply(w, H_FAILOVER_MS);
        ck_assert_msg(l != NULL, "waiter for %s not served within %d ms", name, H_FAILOVER_MS);
        unsigned long long wf = grant_fence(l, 1);
        ck_assert_msg(wf > 0, "waiter for %s got '%s', wanted 'OK <fence> 1'", name, l);
        ck_assert_msg(wf > before, "waiter for %s: fence %llu not above %llu from before the "
                      "failover", name, wf, before);
        unlock_ok(w, name);
    }

    /* Read/write locks on the promoted primary (its scripts loaded on the
     * new connection): a reader of one daemon keeps the other's writer
     * waiting until its release wakes it, with a fence above all before. */
    h_send(n1->c, "RLOCK rw\n");
    const char *l = cl_reply(n1, H_WAIT_MS);
    ck_assert_msg(l != NULL && strncmp(l, "OK ", 3) == 0, "RLOCK rw: %s", l ? l : "(none)");
    h_send(n2->c, "WLOCK rw\n");
    ck_assert_msg(cl_reply(n2, 300) == NULL, "WLOCK rw answered while d1 reads it");
    h_send(n1->c, "RUNLOCK rw\n");
    l = cl_reply(n1, H_WAIT_MS);
    ck_assert_msg(l != NULL && strcmp(l, "OK 0") == 0, "RUNLOCK rw: %s", l ? l : "(none)");
    l = cl_reply(n2, H_FAILOVER_MS);
    ck_assert_msg(l != NULL && grant_fence(l, 1) > before, "WLOCK rw after the read: %s",
                  l ? l : "(none)");

    /* A semaphore and a fair lock there too: the other daemon's waiter is
     * woken by the release, on redisson_sc:{..} and on its own channel. */
    h_send(n1->c, "SEMINIT sem 1\n");
    l = cl_reply(n1, H_WAIT_MS);
    ck_assert_msg(l != NULL && strcmp(l, "OK 1") == 0, "SEMINIT sem: %s", l ? l : "(none)");
    h_send(n1->c, "ACQUIRE sem 1\n");
    l = cl_reply(n1, H_WAIT_MS);
    ck_assert_msg(l != NULL && strcmp(l, "OK 1") == 0, "ACQUIRE sem: %s", l ? l : "(none)");
    h_send(n2->c, "ACQUIRE sem 1\n");
    ck_assert_msg(cl_reply(n2, 300) == NULL, "ACQUIRE sem answered while d1 holds the permit");
    h_send(n1->c, "RELEASE sem 1\n");
    l = cl_reply(n1, H_WAIT_MS);
    ck_assert_msg(l != NULL && strcmp(l, "OK 0") == 0, "RELEASE sem: %s", l ? l : "(none)");
    l = cl_reply(n2, H_FAILOVER_MS);
    ck_assert_msg(l != NULL && strcmp(l, "OK 1") == 0, "ACQUIRE sem after the release: %s",
                  l ? l : "(none)");
    h_send(n1->c, "FAIRLOCK fair\n");
    l = cl_reply(n1, H_WAIT_MS);
    ck_assert_msg(l != NULL && grant_fence(l, 1) > before, "FAIRLOCK fair: %s", l ? l : "(none)");
    h_send(n2->c, "FAIRLOCK fair\n");
    ck_assert_msg(cl_reply(n2, 300) == NULL, "FAIRLOCK fair answered while d1 holds it");
    h_send(n1->c, "UNLOCK fair\n");
    l = cl_reply(n1, H_WAIT_MS);
    ck_assert_msg(l != NULL && strcmp(l, "OK 0") == 0, "UNLOCK fair: %s", l ? l : "(none)");
    l = cl_reply(n2, H_FAILOVER_MS);
    ck_assert_msg(l != NULL && grant_fence(l, 1) > before, "FAIRLOCK fair after the UNLOCK: %s",
                  l ? l : "(none)");
    cl_close(h1);
    cl_close(h2);
    cl_close(w1);
    cl_close(w2);
    cl_close(n1);
    cl_close(n2);
    h_keep_passed();
}
END_TEST

/* ---- 3. the old primary comes back ------------------------------------------ */

START_TEST(old_primary_returns_as_replica) {
    int p = h_sentinels_start(2, 3);
    int old = h_redis_port(p);
    int d = h_dlockd_start_sentinel(NULL);
    KEEP(d);
    cl_t *c = cl_open(d);
    unsigned long long last = lock_ok(c, "before");
    unlock_ok(c, "before");

    long long killed = h_now_ms();
    h_redis_stop_index(p, SIGKILL);
    int np = h_await_failover(old, H_FAILOVER_MS);
    last = lock_until(c, "during", killed + H_FAILOVER_MS, "after the kill");
    unlock_ok(c, "during");
    h_await_log_ms(d, adopted(np), 1, H_FAILOVER_MS);

    /* It comes back empty, on its port, saying it is a primary, until the
     * Sentinels make it a replica; meanwhile and after, locks keep working,
     * on the new primary. */
    h_redis_restart_index(p);
    long long end = h_now_ms() + H_FAILOVER_MS;
    int round = 0, after_slave = 0;
    while (after_slave < 5) {
        char name[32];
        snprintf(name, sizeof(name), "after%d", round++);
        unsigned long long f = lock_ok(c, name);
        ck_assert_msg(f > last, "fence %llu for %s not above %llu", f, name, last);
        last = f;
        const char *v = h_redis_tcp(np, "EXISTS dlock:%s", name);
        ck_assert_msg(v != NULL && strcmp(v, "1") == 0,
                      "%s is held but not on the new primary (port %d): '%s'", name, np,
                      v ? v : "(no answer)");
        unlock_ok(c, name);
        if (after_slave > 0 || strcmp(h_redis_role(p), "slave") == 0) after_slave++;
        ck_assert_msg(h_now_ms() < end, "the old primary (port %d) is not a replica within %d ms",
                      old, H_FAILOVER_MS);
        usleep(50000);
    }
    ck_assert_str_eq(h_redis_role(p), "slave");
    ck_assert_msg(h_log_count(d, adopted(old)) == 1,
                  "dlockd adopted the old primary again (%d lines '%s')",
                  h_log_count(d, adopted(old)), adopted(old));
    const char *inf = h_info_line(d);
    ck_assert_msg(strstr(inf, " redis=up ") != NULL, "INFO: '%s'", inf);
    cl_close(c);
    h_keep_passed();
}
END_TEST

/* ---- 4. Sentinels go away ----------------------------------------------------- */

/* Warn or error lines of dlockd d's log that mention text (any case). */
static int complaints(int d, const char *text) {
    FILE *f = fopen(h_dlockd_log(d), "r");
    char line[4096];
    int n = 0;
    if (f == NULL) return 0;
    while (fgets(line, sizeof(line), f) != NULL)
        if ((strstr(line, " warn: ") || strstr(line, " error: ")) && strcasestr(line, text)) n++;
    fclose(f);
    return n;
}

static void lock_cycle(int d, const char *name) {
    cl_t *c = cl_open(d);
    lock_ok(c, name);
    unlock_ok(c, name);
    cl_close(c);
}

START_TEST(sentinels_down_primary_keeps_serving) {
    const char *const undemotable[] = {H_UNDEMOTABLE, NULL};
    int p = h_sentinels_start_args(2, 3, undemotable);
    int old = h_redis_port(p);
    int d1 = h_dlockd_start_sentinel(NULL);
    KEEP(d1);

    /* One of three down: nothing changes, and a daemon started now finds
     * the primary through the other two. */
    h_sentinel_stop(0, SIGKILL);
    lock_cycle(d1, "one-down");
    int d2 = h_dlockd_start_sentinel(NULL);
    KEEP(d2);
    h_await_log(d2, adopted(old), 1);
    lock_cycle(d2, "one-down");

    /* Both still follow a failover. The old primary stays a primary
     * (Sentinel cannot demote it), so only the remaining Sentinels can
     * tell the daemons, whichever Sentinel they listened to before. */
    h_sentinel_failover();
    int np = h_await_failover(old, H_FAILOVER_MS);
    h_await_log_ms(d1, adopted(np), 1, H_FAILOVER_MS);
    h_await_log_ms(d2, adopted(np), 1, H_FAILOVER_MS);
    ck_assert_msg(strcmp(h_redis_role(p), "master") == 0, "the old primary was demoted after "
                  "all: ROLE '%s'", h_redis_role(p));
    for (int d = 0; d < 2; d++) {
        cl_t *c = cl_open(d == 0 ? d1 : d2);
        const char *name = d == 0 ? "moved1" : "moved2";
        char key[32];
        snprintf(key, sizeof(key), "dlock:%s", name);
        lock_until(c, name, h_now_ms() + H_WAIT_MS, "after the failover with a Sentinel down");
        const char *on_new = h_redis_tcp(np, "EXISTS %s", key);
        ck_assert_msg(on_new != NULL && strcmp(on_new, "1") == 0,
                      "dlockd %d: %s is not on the new primary (port %d): '%s'", d, key, np,
                      on_new ? on_new : "(no answer)");
        const char *on_old = h_redis_tcp(old, "EXISTS %s", key);
        ck_assert_msg(on_old != NULL && strcmp(on_old, "0") == 0,
                      "dlockd %d: %s is on the old primary (port %d): '%s'", d, key, old,
                      on_old ? on_old : "(no answer)");
        unlock_ok(c, name);
        cl_close(c);
    }
    int adoptions[2] = {h_log_count(d1, ADOPTED), h_log_count(d2, ADOPTED)};

    /* All down: the known primary keeps serving both, for a while. */
    int before[2][3], before_all[2];
    char addr[3][32];
    for (int i = 0; i < 3; i++) {
        snprintf(addr[i], sizeof(addr[i]), "127.0.0.1:%d", h_sentinel_port(i));
        before[0][i] = complaints(d1, addr[i]);
        before[1][i] = complaints(d2, addr[i]);
    }
    before_all[0] = complaints(d1, "sentinel");
    before_all[1] = complaints(d2, "sentinel");
    h_sentinel_stop(1, SIGKILL);
    h_sentinel_stop(2, SIGKILL);
    cl_t *holder = cl_open(d1);
    lock_ok(holder, "held");
    long long start = h_now_ms();
    int rounds = 0;
    while (h_now_ms() - start < 6000) {
        char name[32];
        snprintf(name, sizeof(name), "all-down%d", rounds % 4);
        cl_t *c = cl_open(rounds % 2 ? d2 : d1);
        lock_ok(c, name);
        unlock_ok(c, name);
        cl_close(c);
        rounds++;
        usleep(200000);
    }
    h_send(holder->c, "STATUS held\n");
    const char *l = cl_reply(holder, H_WAIT_MS);
    ck_assert_msg(l != NULL && strncmp(l, "OK MINE 1 ", 10) == 0,
                  "STATUS held with all Sentinels down: '%s'", l ? l : "(no reply)");
    ck_assert_msg(holder->events[0] == '\0', "events with all Sentinels down: %s",
                  holder->events);
    unlock_ok(holder, "held");
    for (int d = 0; d < 2; d++) {
        int index = d == 0 ? d1 : d2;
        const char *inf = h_info_line(index);
        ck_assert_msg(strstr(inf, " redis=up ") != NULL, "dlockd %d with all Sentinels down: "
                      "INFO '%s'", index, inf);
        ck_assert_msg(h_log_count(index, ADOPTED) == adoptions[d],
                      "dlockd %d adopted a primary again with the Sentinels down", index);
        /* Retrying the Sentinels is fine; a line for every try is not. */
        for (int i = 0; i < 3; i++) {
            int n = complaints(index, addr[i]) - before[d][i];
            ck_assert_msg(n <= 3, "dlockd %d logged %d warnings about sentinel %s in 6 s", index,
                          n, addr[i]);
        }
        int n = complaints(index, "sentinel") - before_all[d];
        ck_assert_msg(n <= 6, "dlockd %d logged %d warnings about Sentinels in the 6 s they "
                      "were all down", index, n);
        fprintf(stderr, "sentinels_down: dlockd %d logged %d warnings about Sentinels in 6 s\n",
                index, n);
    }
    cl_close(holder);
    h_keep_passed();
}
END_TEST

/* ---- 5. forced failover under load --------------------------------------- */

#define LOADERS     4
#define CMD_TIMEOUT 2000
#define ANSWER_MS   (CMD_TIMEOUT + 5000)

/* Each loader client cycles LOCK load<i> / UNLOCK load<i> on dlockd d,
 * checking that every request is answered within ANSWER_MS and that every
 * new grant of its name has a larger fence. A byte on ctl marks the
 * failover done; from then on each loader must complete 5 cycles. A
 * !LOST of a lock being unlocked is counted, not failed (a grant the
 * promoted replica had not received). The result goes to out as one line:
 * "ok cycles=.. errors=.. lost=.. max_ms=.." or "fail <why>". Runs in a
 * child process. */
static void load(int d, int ctl, int out) {
    struct {
        h_conn_t *c;
        int locking;              /* 1: LOCK sent, 0: UNLOCK sent, -1: idle */
        long long sent, retry_at;
        unsigned long long fence;
        int after;                /* cycles completed after the mark */
        int lost;                 /* got !LOST for the grant it is unlocking */
    } l[LOADERS];
    char result[512] = "";
    long long cycles = 0, errors = 0, losses = 0, max_ms = 0, mark_end = 0;
    int marked = 0;
    for (int i = 0; i < LOADERS; i++) {
        l[i].c = h_connect_index(d);
        h_send(l[i].c, "LOCK load%d\n", i);
        l[i].locking = 1;
        l[i].sent = h_now_ms();
        l[i].fence = 0;
        l[i].after = 0;
        l[i].lost = 0;
    }
    while (result[0] == '\0') {
        struct pollfd pfd[LOADERS + 1];
        for (int i = 0; i < LOADERS; i++) pfd[i] = (struct pollfd){.fd = l[i].c->fd, .events = POLLIN};
        pfd[LOADERS] = (struct pollfd){.fd = ctl, .events = POLLIN};
        poll(pfd, LOADERS + 1, 20);
        long long now = h_now_ms();
        if (pfd[LOADERS].revents) {
            char b;
            if (read(ctl, &b, 1) != 1) _exit(0); /* the parent gave up */
            marked = 1;
            mark_end = now + H_FAILOVER_MS;
        }
        for (int i = 0; i < LOADERS && result[0] == '\0'; i++) {
            if (l[i].locking == -1) {
                if (now < l[i].retry_at) continue;
                h_send(l[i].c, "LOCK load%d\n", i);
                l[i].locking = 1;
                l[i].sent = now;
                continue;
            }
            const char *line;
            char lost[64];
            snprintf(lost, sizeof(lost), "!LOST load%d ", i);
            while ((line = h_recv(l[i].c, 0)) != NULL && line[0] == '!') {
                if (strncmp(line, lost, strlen(lost)) == 0 && l[i].locking == 0) {
                    l[i].lost = 1; /* possible, if the grant had not reached the promoted replica */
                    losses++;
                } else {
                    snprintf(result, sizeof(result), "fail loader %d got the event '%s'", i,
                             line);
                }
            }
            if (result[0] != '\0') break;
            if (line == NULL) {
                if (now - l[i].sent > ANSWER_MS)
                    snprintf(result, sizeof(result), "fail loader %d: no answer to %s within %d ms",
                             i, l[i].locking ? "LOCK" : "UNLOCK", ANSWER_MS);
                continue;
            }
            long long took = now - l[i].sent;
            if (took > max_ms) max_ms = took;
            if (l[i].locking) {
                unsigned long long f = grant_fence(line, 1);
                if (f == 0) {
                    if (strncmp(line, "ERR BACKEND", 11) != 0) {
                        snprintf(result, sizeof(result), "fail loader %d: LOCK got '%s'", i, line);
                        break;
                    }
                    errors++;
                    l[i].locking = -1;
                    l[i].retry_at = now + 50;
                    continue;
                }
                if (f <= l[i].fence) {
                    snprintf(result, sizeof(result), "fail loader %d: fence %llu after %llu", i,
                             f, l[i].fence);
                    break;
                }
                l[i].fence = f;
                h_send(l[i].c, "UNLOCK load%d\n", i);
                l[i].locking = 0;
                l[i].sent = now;
            } else {
                if (strcmp(line, "OK 0") != 0 &&
                    !(l[i].lost && strncmp(line, "ERR NOTHELD", 11) == 0)) {
                    snprintf(result, sizeof(result), "fail loader %d: UNLOCK got '%s'", i, line);
                    break;
                }
                cycles++;
                l[i].lost = 0;
                if (marked) l[i].after++;
                h_send(l[i].c, "LOCK load%d\n", i);
                l[i].locking = 1;
                l[i].sent = now;
            }
        }
        if (result[0] != '\0') break;
        if (marked) {
            int done = 1;
            for (int i = 0; i < LOADERS; i++) done &= l[i].after >= 5;
            if (done)
                snprintf(result, sizeof(result), "ok cycles=%lld errors=%lld lost=%lld max_ms=%lld",
                         cycles, errors, losses, max_ms);
            else if (now > mark_end)
                snprintf(result, sizeof(result), "fail loaders did not complete 5 cycles each "
                         "within %d ms of the failover", H_FAILOVER_MS);
        }
    }
    size_t n = strlen(result);
    result[n] = '\n';
    if (write(out, result, n + 1) < 0) _exit(1);
    _exit(0);
}

START_TEST(forced_failover_under_load) {
    int p = h_sentinels_start(2, 3);
    int old = h_redis_port(p);
    char conf[256];
    snprintf(conf, sizeof(conf), "[redis]\ncommand_timeout_ms = %d\n", CMD_TIMEOUT);
    int d = h_dlockd_start_sentinel(conf);
    KEEP(d);
    int ctl[2], res[2];
    ck_assert_int_eq(pipe(ctl), 0);
    ck_assert_int_eq(pipe(res), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(ctl[1]);
        close(res[0]);
        load(d, ctl[0], res[1]);
    }
    close(ctl[0]);
    close(res[1]);
    /* Let the load run before the failover. */
    long long end = h_now_ms() + H_WAIT_MS;
    while (info_num(d, "grants") < 50) {
        ck_assert_msg(h_now_ms() < end, "the load never got going");
        usleep(20000);
    }
    long long t0 = h_now_ms();
    h_sentinel_failover();
    int np = h_await_failover(old, H_FAILOVER_MS);
    h_await_log_ms(d, adopted(np), 1, H_FAILOVER_MS);
    fprintf(stderr, "forced_failover: port %d promoted, dlockd on it %lld ms after the "
            "request\n", np, h_now_ms() - t0);
    ck_assert_int_eq(write(ctl[1], "m", 1), 1);

    /* The loaders' verdict. */
    char result[600];
    size_t len = 0;
    struct pollfd pfd = {.fd = res[0], .events = POLLIN};
    end = h_now_ms() + H_FAILOVER_MS + ANSWER_MS + 5000;
    while (len == 0 || result[len - 1] != '\n') {
        long long left = end - h_now_ms();
        ck_assert_msg(left > 0 && poll(&pfd, 1, (int)left) == 1, "the loaders never reported");
        ssize_t n = read(res[0], result + len, sizeof(result) - 1 - len);
        ck_assert_msg(n > 0, "the loaders died without a report");
        len += (size_t)n;
    }
    result[len - 1] = '\0';
    close(ctl[1]);
    close(res[0]);
    int status;
    waitpid(pid, &status, 0);
    fprintf(stderr, "forced_failover: loaders: %s\n", result);
    ck_assert_msg(strncmp(result, "ok ", 3) == 0, "%s", result);

    /* After it, locks are taken on the new primary. */
    cl_t *c = cl_open(d);
    lock_ok(c, "after");
    const char *v = h_redis_tcp(np, "EXISTS dlock:after");
    ck_assert_msg(v != NULL && strcmp(v, "1") == 0, "the lock is not on the new primary: '%s'",
                  v ? v : "(no answer)");
    unlock_ok(c, "after");
    cl_close(c);
    h_keep_passed();
}
END_TEST

/* ---- 6. configuration ------------------------------------------------------ */

/* out starts with "<h_dir()>/t.conf:<line>:". */
static void names_file_and_line(const char *out, const char *what) {
    char want[700];
    snprintf(want, sizeof(want), "%s/t.conf:", h_dir());
    const char *p = strstr(out, want);
    ck_assert_msg(p != NULL, "%s: '%s' does not name %s<line>:", what, out, want);
    p += strlen(want);
    int digits = 0;
    while (*p >= '0' && *p <= '9') p++, digits++;
    ck_assert_msg(digits > 0 && *p == ':', "%s: '%s' has no line number after %s", what, out,
                  want);
}

START_TEST(config_sentinels_checked) {
    char out[1024];
    const char *good = "[redis]\nsentinels = 127.0.0.1:26379 127.0.0.1:26380 127.0.0.1:26381\n"
                       "master_name = mymaster\n";
    ck_assert_msg(h_dlockd_test_conf(good, out, sizeof(out)) == 0,
                  "sentinels with master_name refused: '%s'", out);
    const char *with_auth = "[redis]\nsentinels = 127.0.0.1:26379\nmaster_name = m\n"
                            "sentinel_username = u\nsentinel_password = p\n";
    ck_assert_msg(h_dlockd_test_conf(with_auth, out, sizeof(out)) == 0,
                  "sentinel_username/sentinel_password refused: '%s'", out);

    const char *both = "[redis]\nurl = redis://127.0.0.1:6379\n"
                       "sentinels = 127.0.0.1:26379\nmaster_name = m\n";
    ck_assert_msg(h_dlockd_test_conf(both, out, sizeof(out)) != 0,
                  "url plus sentinels accepted: '%s'", out);
    names_file_and_line(out, "url plus sentinels");

    const char *nameless = "[redis]\nsentinels = 127.0.0.1:26379 127.0.0.1:26380\n";
    ck_assert_msg(h_dlockd_test_conf(nameless, out, sizeof(out)) != 0,
                  "sentinels without master_name accepted: '%s'", out);
    names_file_and_line(out, "sentinels without master_name");
    h_keep_passed();
}
END_TEST

/* ---- 7. all of it over TLS ----------------------------------------------------- */

/* Waits until server r has key, or not (want "1" or "0"), asking over its
 * Unix socket (the set is TLS-only on TCP). */
static void await_key_unix(int r, const char *key, const char *want) {
    long long end = h_now_ms() + H_WAIT_MS;
    for (;;) {
        const char *v = h_redis_unix(r, "EXISTS %s", key);
        if (v != NULL && strcmp(v, want) == 0) return;
        ck_assert_msg(h_now_ms() < end, "redis %d (TLS port %d): EXISTS %s '%s', wanted %s", r,
                      h_redis_port(r), key, v ? v : "(no answer)", want);
        usleep(20000);
    }
}

/* "primary is now 127.0.0.1:<port> (" (static): adopted(), exactly. */
static const char *adopted_exactly(int port) {
    static char text[80];
    snprintf(text, sizeof(text), "primary is now 127.0.0.1:%d (", port);
    return text;
}

START_TEST(everything_over_tls) {
    const char *certs = h_dir();
    h_tls_make_certs(certs);
    /* TLS-only servers and Sentinels, each TLS port requiring a client
     * certificate from whoever connects, Sentinels and replicas included. */
    int p = h_tls_sentinels_start(2, 3, certs, 1);
    int old = h_redis_port(p);
    char tls[2048], conf[4096];

    /* One daemon trusts an unrelated CA: it never finds a primary. It runs
     * through the whole test, failover included. */
    snprintf(conf, sizeof(conf),
             "[server]\nadmin_uids = 0\n"
             "[redis]\nsentinels = %s\nmaster_name = %s\ntls = yes\n"
             "tls_ca_file = %s/other-ca.crt\n"
             "tls_cert_file = %s/client.crt\ntls_key_file = %s/client.key\n"
             "command_timeout_ms = 1000\nconnect_timeout_ms = 500\n",
             h_sentinel_addrs(), H_MASTER_NAME, certs, certs, certs);
    int bad = h_dlockd_start_conf(conf);
    KEEP(bad);
    h_conn_t *bc = h_connect_index(bad);
    char got[H_LINE_MAX] = "(nothing)";
    long long end = h_now_ms() + H_WAIT_MS;
    for (;;) {
        h_send(bc, "LOCK w\n");
        const char *l = h_recv(bc, H_WAIT_MS);
        ck_assert_msg(l != NULL, "wrong CA: no reply to LOCK (last '%s')", got);
        ck_assert_msg(strncmp(l, "ERR BACKEND ", 12) == 0, "wrong CA: LOCK got '%s'", l);
        snprintf(got, sizeof(got), "%s", l);
        if (strstr(l, "certificate verify failed") != NULL) break;
        ck_assert_msg(h_now_ms() < end, "wrong CA: ERR BACKEND never names the certificate "
                      "verify failure; last '%s'", got);
        usleep(20000);
    }
    ck_assert_msg(strstr(got, "TLS: ") != NULL, "wrong CA: reply does not say TLS: '%s'", got);
    h_close(bc);
    h_await_log(bad, "certificate verify failed", 1);
    fprintf(stderr, "tls: wrong CA: %s\n", got);

    /* The right CA: discovery over TLS, and locks on the TLS primary. */
    snprintf(tls, sizeof(tls),
             "tls = yes\ntls_ca_file = %s/ca.crt\n"
             "tls_cert_file = %s/client.crt\ntls_key_file = %s/client.key\n"
             "[lock]\nlease_ms = 10000\n",
             certs, certs, certs);
    long long t0 = h_now_ms();
    int d = h_dlockd_start_sentinel(tls);
    KEEP(d);
    const char *inf = h_info_line(d);
    ck_assert_msg(strstr(inf, " backend=sentinel") != NULL, "INFO lacks backend=sentinel: '%s'",
                  inf);
    ck_assert_msg(strstr(inf, " redis=up ") != NULL, "INFO lacks redis=up: '%s'", inf);
    h_await_log(d, adopted_exactly(old), 1);
    ck_assert_int_ge(h_log_count(d, "connection to tls primary of " H_MASTER_NAME " up"), 1);
    fprintf(stderr, "tls: dlockd up on TLS port %d %lld ms after its start\n", old,
            h_now_ms() - t0);

    cl_t *c = cl_open(d);
    unsigned long long before = 0;
    for (int i = 0; i < 3; i++) {
        unsigned long long f = lock_ok(c, "t");
        ck_assert_msg(f > before, "fence did not rise: %llu after %llu", f, before);
        before = f;
        await_key_unix(p, "dlock:t", "1");
        unlock_ok(c, "t");
        await_key_unix(p, "dlock:t", "0");
    }

    /* The primary dies: the Sentinels fail over (among themselves, over
     * TLS), and the daemon follows. */
    long long killed = h_now_ms();
    h_redis_stop_index(p, SIGKILL);
    int np = h_tls_await_failover(old, H_FAILOVER_MS);
    long long promoted = h_now_ms() - killed;
    unsigned long long after = lock_until(c, "t2", killed + H_FAILOVER_MS, "after the kill");
    fprintf(stderr, "tls: sentinels promoted TLS port %d %lld ms after the kill, new grant "
            "after %lld ms\n", np, promoted, h_now_ms() - killed);
    ck_assert_msg(after > before, "fence after the failover %llu not above %llu from before",
                  after, before);
    h_await_log_ms(d, adopted_exactly(np), 1, H_FAILOVER_MS);
    await_key_unix(h_redis_index_of_port(np), "dlock:t2", "1");
    unlock_ok(c, "t2");
    inf = h_info_line(d);
    ck_assert_msg(strstr(inf, " redis=up ") != NULL, "INFO after the failover: '%s'", inf);
    cl_close(c);

    /* The distrustful daemon never had a primary, nor redis=up. */
    inf = h_info_line(bad);
    ck_assert_msg(strstr(inf, " redis=down ") != NULL, "wrong CA: INFO '%s'", inf);
    ck_assert_int_eq(h_log_count(bad, ADOPTED), 0);
    h_keep_passed();
}
END_TEST

/* ---- 8. passwords: the Sentinels' and the servers' ---------------------------- */

#define DATA_PW     "data-pw-5821"
#define SENTINEL_PW "sentinel-pw-9374"

/* A config for this set's Sentinels with these passwords (static). */
static const char *auth_conf(const char *data_pw, const char *sentinel_pw) {
    static char text[4096];
    snprintf(text, sizeof(text),
             "[server]\nadmin_uids = 0\n"
             "[redis]\nsentinels = %s\nmaster_name = %s\n"
             "password = %s\nsentinel_password = %s\n"
             "command_timeout_ms = 1000\nconnect_timeout_ms = 500\n",
             h_sentinel_addrs(), H_MASTER_NAME, data_pw, sentinel_pw);
    return text;
}

/* LOCK on dlockd d until its ERR BACKEND contains want (every reply must
 * be an ERR BACKEND); returns that reply (static). */
static const char *backend_error(int d, const char *want, const char *what) {
    static char got[H_LINE_MAX];
    h_conn_t *c = h_connect_index(d);
    snprintf(got, sizeof(got), "(nothing)");
    long long end = h_now_ms() + H_WAIT_MS;
    for (;;) {
        h_send(c, "LOCK w\n");
        const char *l = h_recv(c, H_WAIT_MS);
        ck_assert_msg(l != NULL, "%s: no reply to LOCK (last '%s')", what, got);
        ck_assert_msg(strncmp(l, "ERR BACKEND ", 12) == 0, "%s: LOCK got '%s'", what, l);
        snprintf(got, sizeof(got), "%s", l);
        if (strstr(got, want) != NULL) break;
        ck_assert_msg(h_now_ms() < end, "%s: ERR BACKEND never says '%s'; last '%s'", what, want,
                      got);
        usleep(20000);
    }
    h_close(c);
    return got;
}

START_TEST(sentinel_and_data_passwords) {
    /* Every server requires DATA_PW (replicas and Sentinels use it with
     * them), every Sentinel SENTINEL_PW (the others use it). */
    h_set_auth(DATA_PW, SENTINEL_PW);
    int p = h_sentinels_start(2, 3);
    int port = h_redis_port(p);
    long long sentinels_up = h_now_ms();

    /* All four at once: right; the right Sentinel password from the
     * environment over a wrong one in the file; a wrong Sentinel password;
     * a wrong server password. */
    int d = h_dlockd_start_conf(auth_conf(DATA_PW, SENTINEL_PW));
    setenv("DLOCKD_SENTINEL_PASSWORD", SENTINEL_PW, 1);
    int e = h_dlockd_start_conf(auth_conf(DATA_PW, "wrong-sentinel-pw"));
    unsetenv("DLOCKD_SENTINEL_PASSWORD");
    int bs = h_dlockd_start_conf(auth_conf(DATA_PW, "wrong-sentinel-pw"));
    int bd = h_dlockd_start_conf(auth_conf("wrong-data-pw", SENTINEL_PW));
    KEEP(d);
    KEEP(e);
    KEEP(bs);
    KEEP(bd);

    /* 1. Both right: discovery, and locks on the primary. */
    h_await_redis(d, 1);
    const char *inf = h_info_line(d);
    ck_assert_msg(strstr(inf, " backend=sentinel") != NULL && strstr(inf, " redis=up ") != NULL,
                  "right passwords: INFO '%s'", inf);
    h_await_log(d, adopted_exactly(port), 1);
    cl_t *c = cl_open(d);
    unsigned long long f1 = lock_ok(c, "pw");
    await_key(p, "dlock:pw");
    unlock_ok(c, "pw");
    cl_close(c);

    /* 2. DLOCKD_SENTINEL_PASSWORD overrides sentinel_password. */
    h_await_redis(e, 1);
    h_await_log(e, adopted_exactly(port), 1);
    c = cl_open(e);
    unsigned long long f2 = lock_ok(c, "pw");
    ck_assert_msg(f2 > f1, "fence through the second daemon %llu not above %llu", f2, f1);
    unlock_ok(c, "pw");
    cl_close(c);

    /* 3. A wrong Sentinel password: no Sentinel answers, no primary. */
    const char *got = backend_error(bs, "AUTH failed: ", "wrong sentinel_password");
    fprintf(stderr, "auth: wrong sentinel_password: %s\n", got);
    char want[128];
    snprintf(want, sizeof(want), "ERR BACKEND no primary of %s found yet: 127.0.0.1:",
             H_MASTER_NAME);
    ck_assert_msg(strncmp(got, want, strlen(want)) == 0, "wrong sentinel_password: '%s', "
                  "wanted '%s<port>: AUTH failed: ...'", got, want);
    ck_assert_msg(strstr(got, "WRONGPASS") != NULL || strstr(got, "invalid password") != NULL,
                  "wrong sentinel_password: '%s' does not say the password was wrong", got);
    h_await_log(bs, "no Sentinel answered for " H_MASTER_NAME, 1);

    /* 4. A wrong server password: the primary is found, never reached. */
    h_await_log(bd, adopted_exactly(port), 1);
    got = backend_error(bd, "handshake failed: ", "wrong password");
    fprintf(stderr, "auth: wrong password: %s\n", got);
    ck_assert_msg(strstr(got, "WRONGPASS") != NULL, "wrong password: '%s' lacks WRONGPASS", got);
    h_await_log(bd, "handshake failed: WRONGPASS", 1);

    /* Still so, seconds later; and the right ones still up. */
    inf = h_info_line(bs);
    ck_assert_msg(strstr(inf, " redis=down ") != NULL, "wrong sentinel_password: INFO '%s'", inf);
    ck_assert_int_eq(h_log_count(bs, ADOPTED), 0);
    inf = h_info_line(bd);
    ck_assert_msg(strstr(inf, " redis=down ") != NULL, "wrong password: INFO '%s'", inf);
    ck_assert_int_eq(h_log_count(bd, ADOPTED), 1);
    const int good[] = {d, e};
    for (int i = 0; i < 2; i++) {
        inf = h_info_line(good[i]);
        ck_assert_msg(strstr(inf, " redis=up ") != NULL, "dlockd %d: INFO '%s'", good[i], inf);
    }

    /* The Sentinels work together: once they have known each other for
     * longer than down-after-milliseconds (1000), none takes another, or
     * the primary, for down (a refused AUTH would have it so). */
    long long end = h_now_ms() + H_WAIT_MS;
    char last[H_LINE_MAX] = "";
    for (int i = 0; i < h_sentinel_count();) {
        const char *m = h_sentinel_cmd(i, "SENTINEL master %s", H_MASTER_NAME);
        int ok = m != NULL && strstr(m, "flags\nmaster\n") != NULL;
        snprintf(last, sizeof(last), "SENTINEL master: %s", m ? m : "(no answer)");
        if (ok) {
            m = h_sentinel_cmd(i, "SENTINEL sentinels %s", H_MASTER_NAME);
            int others = 0;
            for (const char *l = m ? strstr(m, "flags\nsentinel\n") : NULL; l != NULL;
                 l = strstr(l + 1, "flags\nsentinel\n"))
                others++;
            ok = others == h_sentinel_count() - 1;
            snprintf(last, sizeof(last), "SENTINEL sentinels: %s", m ? m : "(no answer)");
        }
        if (ok && h_now_ms() >= sentinels_up + 1500) {
            i++;
            continue;
        }
        ck_assert_msg(h_now_ms() < end, "sentinel %d: not all healthy; %s", i, last);
        usleep(50000);
    }

    /* No password is logged. */
    const int all[] = {d, e, bs, bd};
    const char *const secrets[] = {DATA_PW, SENTINEL_PW, "wrong-sentinel-pw", "wrong-data-pw"};
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++)
            ck_assert_msg(h_log_count(all[i], secrets[j]) == 0, "'%s' is in %s", secrets[j],
                          h_dlockd_log(all[i]));
    h_keep_passed();
}
END_TEST

/* ---- 9. signs of a failover: READONLY and LOADING ------------------------ */

/* How long a request may take to be answered while the primary changes
 * under the daemon: its command_timeout_ms (1000, h_dlockd_start_sentinel)
 * and a generous margin for a busy machine. */
#define SIGN_ANSWER_MS (1000 + 4000)

/* The reply to the request just sent on c, which must come within
 * SIGN_ANSWER_MS and be a whole line of printable text (no bytes from
 * freed memory); *took_ms says how long it took. */
static const char *answer_in_time(cl_t *c, const char *what, long long *took_ms) {
    long long t = h_now_ms();
    const char *l = cl_reply(c, SIGN_ANSWER_MS);
    *took_ms = h_now_ms() - t;
    ck_assert_msg(l != NULL, "%s: no answer within %d ms", what, SIGN_ANSWER_MS);
    for (const char *p = l; *p != '\0'; p++)
        ck_assert_msg(*p >= 0x20 && *p < 0x7f, "%s: byte 0x%02x at %d of its reply '%s'", what,
                      (unsigned char)*p, (int)(p - l), l);
    return l;
}

/* Lines of dlockd d's log that contain both a and b. */
static int log_lines_with(int d, const char *a, const char *b) {
    FILE *f = fopen(h_dlockd_log(d), "r");
    char line[4096];
    int n = 0;
    if (f == NULL) return 0;
    while (fgets(line, sizeof(line), f) != NULL)
        if (strstr(line, a) != NULL && strstr(line, b) != NULL) n++;
    fclose(f);
    return n;
}

/* What node.c logs when Redis answers a script call with one of the signs
 * of a failover (READONLY, LOADING, MASTERDOWN), after Redis's own text,
 * and when ROLE says the node is a replica. */
#define LOOKING   ": looking for the primary again"
#define SAW_SLAVE "not the primary (ROLE says slave)" LOOKING

/* Holder c still holds name under fence, and was told nothing else. */
static void still_held(cl_t *c, const char *name, unsigned long long fence) {
    char want[300];
    cl_drain(c, name);
    ck_assert_msg(c->events[0] == '\0', "the holder of %s got events: %s", name, c->events);
    h_send(c->c, "STATUS %s\n", name);
    const char *l = cl_reply(c, H_WAIT_MS);
    ck_assert_msg(l != NULL, "STATUS %s: no reply", name);
    unsigned long long f;
    int holds;
    long long ttl;
    snprintf(want, sizeof(want), "OK MINE 1 <ttl> %llu", fence);
    ck_assert_msg(sscanf(l, "OK MINE %d %lld %llu", &holds, &ttl, &f) == 3 && holds == 1 &&
                      f == fence,
                  "STATUS %s: '%s', wanted '%s'", name, l, want);
}

/* TRYLOCK name (no wait) on c, again while it answers ERR BACKEND (up to
 * H_WAIT_MS): it must be granted at once, with a fence above before; a
 * release of it that was given up would leave it taken in Redis until its
 * lease ends (TIMEOUT <ttl>). Returns the fence. */
static unsigned long long trylock_free(int d, cl_t *c, const char *name,
                                       unsigned long long before, const char *why) {
    long long end = h_now_ms() + H_WAIT_MS, took;
    char what[128];
    snprintf(what, sizeof(what), "TRYLOCK %s (%s)", name, why);
    for (;;) {
        h_send(c->c, "TRYLOCK %s\n", name);
        const char *l = answer_in_time(c, what, &took);
        unsigned long long f = grant_fence(l, 1);
        char failed[128];
        snprintf(failed, sizeof(failed), "release of %s failed", name);
        if (strncmp(l, "ERR BACKEND ", 12) != 0 || h_now_ms() > end) {
            ck_assert_msg(f > before, "%s: '%s', wanted 'OK <fence> 1' above %llu: its release "
                          "did not reach Redis (%d log lines '%s')", what, l, before,
                          h_log_count(d, failed), failed);
            return f;
        }
        usleep(100000);
    }
}

#define SIGN_CLIENTS 4

START_TEST(readonly_primary_turned_replica) {
    int p = h_sentinels_start(2, 3);
    int old = h_redis_port(p);
    int r1 = h_replica(0);
    int d = h_dlockd_start_sentinel("[lock]\nlease_ms = 10000\n");
    KEEP(d);
    h_await_log(d, adopted(old), 1);
    /* replicas_ack is auto: each batch of writes is followed by a WAIT. */
    h_await_log(d, "2 replicas online", 1);

    cl_t *c[SIGN_CLIENTS];
    for (int i = 0; i < SIGN_CLIENTS; i++) c[i] = cl_open(d);
    unsigned long long before = 0;
    for (int i = 0; i < 3; i++) {
        unsigned long long f = lock_ok(c[0], "ro");
        ck_assert_msg(f > before, "fence did not rise: %llu after %llu", f, before);
        before = f;
        unlock_ok(c[0], "ro");
    }
    cl_t *holder = cl_open(d);
    const char *l;
    unsigned long long held = lock_ok(holder, "held");
    ck_assert_msg(held > before, "fence did not rise: %llu after %llu", held, before);
    before = held;
    /* And one with a lease of its own (no watchdog), let go of in the
     * middle of it: the release must reach the new primary. */
    cl_t *rel = cl_open(d);
    h_send(rel->c, "LOCK rel 30000\n");
    l = cl_reply(rel, H_WAIT_MS);
    unsigned long long relf = grant_fence(l, 1);
    ck_assert_msg(relf > before, "LOCK rel 30000: '%s', wanted a fence above %llu",
                  l ? l : "(no reply)", before);
    before = relf;
    for (int i = 0; i < 2; i++) {
        await_key(h_replica(i), "dlock:held");
        await_key(h_replica(i), "dlock:rel");
    }

    /* The primary becomes a replica behind the Sentinels' backs. Redis 7
     * keeps its clients on REPLICAOF: the daemon's connection stays, and
     * its next write meets READONLY. Replica 0 is made a primary first, so
     * that the old one follows it rather than one of its own replicas.
     * Meanwhile the daemon is stopped (a few ms, well within its ROLE poll
     * of every second) and LOCKs from several clients wait for it: it
     * reads them all at once and sends them in one call of the batch
     * script, whose operations each say READONLY, followed by a WAIT. */
    pid_t dpid = h_dlockd_pid(d);
    ck_assert_int_eq(kill(dpid, SIGSTOP), 0);
    char r_noone[256], r_replicaof[256];
    const char *r = h_redis_tcp(h_redis_port(r1), "REPLICAOF NO ONE");
    snprintf(r_noone, sizeof(r_noone), "%s", r ? r : "(no answer)");
    r = h_redis_tcp(old, "REPLICAOF 127.0.0.1 %d", h_redis_port(r1));
    snprintf(r_replicaof, sizeof(r_replicaof), "%s", r ? r : "(no answer)");
    long long t0 = h_now_ms();
    for (int i = 0; i < SIGN_CLIENTS; i++) h_send(c[i]->c, "LOCK ro%d\n", i);
    h_send(rel->c, "UNLOCK rel\n");
    ck_assert_int_eq(kill(dpid, SIGCONT), 0);
    ck_assert_msg(strcmp(r_noone, "OK") == 0, "REPLICAOF NO ONE on replica 0: '%s'", r_noone);
    ck_assert_msg(strcmp(r_replicaof, "OK") == 0, "REPLICAOF on the primary: '%s'", r_replicaof);

    /* Each is answered in time, saying why: READONLY (or, had the ROLE
     * poll come first, that the node is not the primary). */
    long long worst = 0, took;
    char batch[H_LINE_MAX] = "";
    for (int i = 0; i < SIGN_CLIENTS; i++) {
        char what[64];
        snprintf(what, sizeof(what), "LOCK ro%d (batched, right after REPLICAOF)", i);
        l = answer_in_time(c[i], what, &took);
        ck_assert_msg(strncmp(l, "ERR BACKEND ", 12) == 0 &&
                          (strstr(l, "READONLY") != NULL || strstr(l, "not the primary") != NULL),
                      "%s: got '%s', wanted ERR BACKEND with READONLY", what, l);
        if (i == 0) snprintf(batch, sizeof(batch), "%s", l);
        if (took > worst) worst = took;
    }
    l = cl_reply(rel, H_WAIT_MS); /* answered at once, whatever Redis says */
    ck_assert_msg(l != NULL && strcmp(l, "OK 0") == 0, "UNLOCK rel: '%s'", l ? l : "(no reply)");
    /* Then one alone: its own script, READONLY for the whole call (unless
     * the daemon has left that node already). */
    h_send(c[0]->c, "LOCK alone\n");
    l = answer_in_time(c[0], "LOCK alone (right after REPLICAOF)", &took);
    ck_assert_msg(strncmp(l, "ERR BACKEND ", 12) == 0, "LOCK alone: got '%s', wanted ERR BACKEND",
                  l);
    fprintf(stderr, "readonly: batched LOCKs answered within %lld ms: '%s'\n", worst, batch);
    fprintf(stderr, "readonly: a LOCK alone answered in %lld ms: '%s'\n", took, l);

    /* It saw the sign: READONLY, or (if its ROLE poll came first) ROLE. */
    long long end = h_now_ms() + H_WAIT_MS;
    while (log_lines_with(d, "READONLY", LOOKING) + h_log_count(d, SAW_SLAVE) == 0) {
        ck_assert_msg(h_now_ms() < end, "dlockd logged neither READONLY...%s nor %s", LOOKING,
                      SAW_SLAVE);
        usleep(10000);
    }
    fprintf(stderr, "readonly: dlockd logged READONLY %d times, ROLE says slave %d times, "
            "by %lld ms after REPLICAOF\n", log_lines_with(d, "READONLY", LOOKING),
            h_log_count(d, SAW_SLAVE), h_now_ms() - t0);

    /* While the Sentinels still name the old primary, LOCKs are answered
     * in time; none is granted there. */
    for (int round = 0; round < 3; round++) {
        h_send(c[0]->c, "LOCK ro0\n");
        l = answer_in_time(c[0], "LOCK ro0 (meanwhile)", &took);
        unsigned long long f = grant_fence(l, 1);
        if (f > 0) { /* the daemon is on the new primary already */
            ck_assert_msg(f > before, "fence %llu meanwhile not above %llu", f, before);
            ck_assert_msg(h_sentinel_primary_port() != old, "LOCK ro0 granted ('%s') while "
                          "the Sentinels name the old primary, now a replica", l);
            before = f;
            unlock_ok(c[0], "ro0");
            break;
        }
        ck_assert_msg(strncmp(l, "ERR BACKEND ", 12) == 0, "LOCK ro0 meanwhile: '%s'", l);
        if (round == 0) fprintf(stderr, "readonly: meanwhile, in %lld ms: '%s'\n", took, l);
        usleep(100000);
    }

    /* The Sentinels notice (the old primary says it is a replica) and fail
     * over; the daemon follows to whichever they then name. */
    int np = h_await_failover(old, H_FAILOVER_MS);
    fprintf(stderr, "readonly: the Sentinels agree on port %d (replica 0 was %d) %lld ms after "
            "REPLICAOF\n", np, h_redis_port(r1), h_now_ms() - t0);
    unsigned long long after = lock_until(c[1], "after", t0 + H_FAILOVER_MS, "after REPLICAOF");
    fprintf(stderr, "readonly: LOCK granted again %lld ms after REPLICAOF\n", h_now_ms() - t0);
    ck_assert_msg(after > before, "fence after %llu not above %llu from before", after, before);
    h_await_log_ms(d, adopted(np), 1, H_FAILOVER_MS);
    await_key(h_redis_index_of_port(np), "dlock:after");
    unlock_ok(c[1], "after");

    /* The release of rel went out with the batch that met READONLY: it
     * was retried on the new primary (which got rel from the old one) by
     * now, since releases go before any later request. Had it been given
     * up, rel would stay taken there for the rest of its 30 s lease. */
    unsigned long long f = trylock_free(d, c[3], "rel", before, "released as READONLY came");
    before = f;
    unlock_ok(c[3], "rel");

    /* Whatever the Sentinels settle on, the daemon keeps serving it. */
    for (int i = 0; i < 5; i++) {
        f = lock_until(c[2], "settled", h_now_ms() + H_FAILOVER_MS, "after the failover");
        ck_assert_msg(f > after, "fence %llu not above %llu", f, after);
        after = f;
        unlock_ok(c[2], "settled");
    }

    /* The lock held across it went along with the data, or its holder was
     * told it is gone. */
    cl_drain(holder, "held");
    h_send(holder->c, "UNLOCK held\n");
    l = cl_reply(holder, H_WAIT_MS);
    ck_assert_msg(l != NULL, "UNLOCK held: no reply");
    if (cl_lost(holder, "held"))
        ck_assert_msg(strncmp(l, "ERR NOTHELD", 11) == 0, "UNLOCK held after '%s': '%s'",
                      holder->events, l);
    else
        ck_assert_msg(strcmp(l, "OK 0") == 0, "UNLOCK held (never lost): '%s'", l);
    fprintf(stderr, "readonly: holder %s\n", holder->events[0] ? holder->events : "kept it");
    const char *inf = h_info_line(d);
    ck_assert_msg(strstr(inf, " redis=up ") != NULL, "INFO: '%s'", inf);
    for (int i = 0; i < SIGN_CLIENTS; i++) cl_close(c[i]);
    cl_close(holder);
    cl_close(rel);
    h_keep_passed();
}
END_TEST

/* A connection to 127.0.0.1:port with text sent on it, not waiting for a
 * reply; returns the descriptor. */
static int send_raw_tcp(int port, const char *text) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ck_assert_msg(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "connect to %d: %s", port,
                  strerror(errno));
    size_t len = strlen(text);
    ck_assert_msg(write(fd, text, len) == (ssize_t)len, "write to %d: %s", port, strerror(errno));
    return fd;
}

/* 1 if the server on port says it is loading its dataset. */
static int loading(int port) {
    const char *r = h_redis_tcp(port, "INFO persistence");
    return r != NULL && strstr(r, "loading:1") != NULL;
}

START_TEST(loading_primary_reloads) {
    /* DEBUG RELOAD saves the dataset and loads it again, on the same
     * server: its clients stay, and every command that cannot run while it
     * loads gets LOADING, EVALSHA and SCRIPT LOAD among them (ROLE, SELECT
     * and INFO still answer). */
    const char *const debug[] = {"--enable-debug-command", "yes", NULL};
    int p = h_sentinels_start_args(2, 3, debug);
    int port = h_redis_port(p);
    int d = h_dlockd_start_sentinel("[lock]\nlease_ms = 20000\n");
    KEEP(d);
    h_await_log(d, adopted(port), 1);

    cl_t *c = cl_open(d), *holder = cl_open(d);
    unsigned long long before = 0;
    for (int i = 0; i < 3; i++) {
        unsigned long long f = lock_ok(c, "ld");
        ck_assert_msg(f > before, "fence did not rise: %llu after %llu", f, before);
        before = f;
        unlock_ok(c, "ld");
    }
    unsigned long long held = lock_ok(holder, "held");
    ck_assert_msg(held > before, "fence did not rise: %llu after %llu", held, before);
    before = held;
    /* One with a lease of its own, let go of while the primary loads. */
    cl_t *rel = cl_open(d);
    h_send(rel->c, "LOCK rel 30000\n");
    const char *l = cl_reply(rel, H_WAIT_MS);
    unsigned long long relf = grant_fence(l, 1);
    ck_assert_msg(relf > before, "LOCK rel 30000: '%s', wanted a fence above %llu",
                  l ? l : "(no reply)", before);
    before = relf;

    /* A dataset that takes seconds to load (3000 keys, 1 ms each), with the
     * server answering its clients every KB it reads. */
    const char *r = h_redis_tcp(port, "DEBUG POPULATE 3000 filler 64");
    ck_assert_msg(r != NULL && strcmp(r, "OK") == 0, "DEBUG POPULATE: '%s'", r ? r : "(none)");
    r = h_redis_tcp(port, "CONFIG SET key-load-delay 1000");
    ck_assert_msg(r != NULL && strcmp(r, "OK") == 0, "key-load-delay: '%s'", r ? r : "(none)");
    r = h_redis_tcp(port, "CONFIG SET loading-process-events-interval-bytes 1024");
    ck_assert_msg(r != NULL && strcmp(r, "OK") == 0, "loading-process-events-interval-bytes: "
                  "'%s'", r ? r : "(none)");

    long long t0 = h_now_ms();
    int rfd = send_raw_tcp(port, "DEBUG RELOAD\r\n");
    long long end = t0 + H_WAIT_MS;
    while (!loading(port)) {
        ck_assert_msg(h_now_ms() < end, "the primary never said loading:1 after DEBUG RELOAD");
        usleep(10000);
    }
    long long loading_at = h_now_ms() - t0;

    /* A LOCK now meets LOADING: answered at once, and the daemon goes
     * looking for the primary (and finds the same one). */
    long long took;
    h_send(c->c, "LOCK ld\n");
    l = answer_in_time(c, "LOCK ld (loading)", &took);
    int still = loading(port);
    ck_assert_msg(strncmp(l, "ERR BACKEND ", 12) == 0, "LOCK ld while loading: '%s'", l);
    fprintf(stderr, "loading: loading:1 %lld ms after DEBUG RELOAD; a LOCK answered in %lld ms "
            "(still loading: %d): '%s'\n", loading_at, took, still, l);
    end = h_now_ms() + H_WAIT_MS;
    while (log_lines_with(d, "LOADING", LOOKING) == 0) {
        ck_assert_msg(h_now_ms() < end, "dlockd never logged LOADING...%s", LOOKING);
        usleep(10000);
    }

    h_send(rel->c, "UNLOCK rel\n"); /* answered at once; the release waits for Redis */
    l = cl_reply(rel, H_WAIT_MS);
    ck_assert_msg(l != NULL && strcmp(l, "OK 0") == 0, "UNLOCK rel: '%s'", l ? l : "(no reply)");

    /* While it loads, LOCKs are answered in time, and not granted. */
    int meanwhile = 0;
    while (loading(port)) {
        h_send(c->c, "LOCK ld\n");
        l = answer_in_time(c, "LOCK ld (still loading)", &took);
        if (grant_fence(l, 1) > 0 && !loading(port)) { /* it was done by then */
            unlock_ok(c, "ld");
            break;
        }
        ck_assert_msg(strncmp(l, "ERR BACKEND ", 12) == 0, "LOCK ld while loading: '%s'", l);
        if (meanwhile++ == 0) fprintf(stderr, "loading: meanwhile, in %lld ms: '%s'\n", took, l);
        ck_assert_msg(h_now_ms() < t0 + H_FAILOVER_MS, "still loading after %d ms",
                      H_FAILOVER_MS);
        usleep(100000);
    }
    long long loaded = h_now_ms() - t0;

    /* Then the same primary serves again, fences still rising; the lock
     * let go of while it loaded is free, and the one held across it is
     * still held. */
    unsigned long long after = lock_until(c, "after", t0 + H_FAILOVER_MS, "after the reload");
    fprintf(stderr, "loading: done loading by %lld ms after DEBUG RELOAD (%d LOCKs meanwhile), "
            "granted again at %lld ms\n", loaded, meanwhile, h_now_ms() - t0);
    ck_assert_msg(after > before, "fence after the reload %llu not above %llu", after, before);
    await_key(p, "dlock:after");
    unlock_ok(c, "after");
    unsigned long long f = trylock_free(d, c, "rel", after, "released while loading");
    unlock_ok(c, "rel");
    ck_assert_msg(f > after, "fence %llu not above %llu", f, after);
    still_held(holder, "held", held);
    unlock_ok(holder, "held");
    ck_assert_int_eq(h_sentinel_primary_port(), port);
    ck_assert_int_eq(h_log_count(d, ADOPTED), 1);

    struct pollfd pfd = {.fd = rfd, .events = POLLIN};
    char ok[64] = "";
    ck_assert_msg(poll(&pfd, 1, H_WAIT_MS) == 1 && read(rfd, ok, sizeof(ok) - 1) > 0 &&
                      strncmp(ok, "+OK", 3) == 0,
                  "DEBUG RELOAD: '%s'", ok);
    close(rfd);
    fprintf(stderr, "loading: dlockd logged LOADING %d times, at error level %d times\n",
            log_lines_with(d, "LOADING", LOOKING), log_lines_with(d, " error: ", "LOADING"));
    cl_close(c);
    cl_close(holder);
    cl_close(rel);
    h_keep_passed();
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("sentinel");
    /* One case per test, so that one can be run alone: CK_RUN_CASE=failover. */
    const struct {
        const char *name;
        const TTest *test;
    } cases[] = {
        {"discovery", normal_use_through_discovery},
        {"failover", primary_killed_with_holders_and_waiters},
        {"old-primary", old_primary_returns_as_replica},
        {"sentinels-down", sentinels_down_primary_keeps_serving},
        {"forced-failover", forced_failover_under_load},
        {"config", config_sentinels_checked},
        {"tls", everything_over_tls},
        {"auth", sentinel_and_data_passwords},
        {"readonly", readonly_primary_turned_replica},
        {"loading", loading_primary_reloads},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        TCase *tc = tcase_create(cases[i].name);
        tcase_add_checked_fixture(tc, setup, h_teardown);
        tcase_set_timeout(tc, 120);
        tcase_add_test(tc, cases[i].test);
        suite_add_tcase(s, tc);
    }
    return s;
}

int main(void) {
    return h_main(suite());
}
