/* Integration tests of dlockd on Redis Cluster: locks spread over every
 * primary, fences, wake-ups and the watchdog across two daemons, WHO with
 * the registry in another slot, names whose companions would leave the
 * lock's slot, a Redisson-style client (its own scripts and SSUBSCRIBE)
 * excluding and waking dlockd's clients both ways, classic pub/sub, a
 * slot with held locks and waiters migrated under load (and stalled before
 * the hand-over), a primary killed and its replica promoted, a primary
 * paused until replaced and back as a replica, and all of it over TLS with
 * a password.
 * SPDX-License-Identifier: MIT
 *
 * Each test builds its own cluster on private ports (h_cluster_start).
 * Waits are bounded by H_WAIT_MS, or H_FAILOVER_MS for a failover. A
 * wake-up is told from a retry at the lock's expiry by its lease: the
 * holders keep 30 s leases, and wake-ups must come within WAKE_MS. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "daemon/backend/keys.h"
#include "tests/support/harness.h"

/* A release's wake-up reaches a waiter of another daemon by then, with
 * room for a busy machine; a retry at the lease's end would take 30 s. */
#define WAKE_MS 5000

/* ---- failure reports (h_keep_log) ----------------------------------------- */

#define KEEP(d) h_keep_log((d), "cluster.%s.dlockd%d", __func__, (d))

static void setup(void) {
    h_setup();
}

/* ---- helpers ------------------------------------------------------------------ */

/* A dlockd on the running cluster; waits until every primary is up. */
static int start_dlockd(const char *extra) {
    char text[4096];
    snprintf(text, sizeof(text),
             "[server]\nadmin_uids = 0\n"
             "[redis]\ncluster = %s\n"
             "command_timeout_ms = 2000\nconnect_timeout_ms = 500\n%s",
             h_cluster_addrs(), extra ? extra : "");
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
    return d;
}

/* The slot of lock name under the default key_prefix. */
static int slot_of(const char *name) {
    char key[KEYS_KEY_MAX];
    return (int)keys_slot(key, keys_lock(key, "dlock:", name, strlen(name)));
}

/* A name "<stem><n>" whose slot the primary on port owns (or, with port
 * < 0, any other primary than -port). */
static const char *name_on(const char *stem, int port) {
    static char name[64];
    for (int i = 0; i < 100000; i++) {
        snprintf(name, sizeof(name), "%s%d", stem, i);
        int owner = h_cluster_slot_owner(slot_of(name));
        if ((port > 0 && owner == port) || (port < 0 && owner > 0 && owner != -port)) return name;
    }
    ck_abort_msg("no name on %d", port);
    return NULL;
}

static unsigned long long lock_ok(h_conn_t *c, const char *name) {
    h_send(c, "LOCK %s\n", name);
    const char *l = h_reply(c, H_WAIT_MS, H_EVENTS_SKIP_BUT_LOST);
    ck_assert_msg(l != NULL && strncmp(l, "OK ", 3) == 0, "LOCK %s: %s", name, l ? l : "(none)");
    return strtoull(l + 3, NULL, 10);
}

static void unlock_ok(h_conn_t *c, const char *name) {
    h_send(c, "UNLOCK %s\n", name);
    const char *l = h_reply(c, H_WAIT_MS, H_EVENTS_SKIP_BUT_LOST);
    ck_assert_msg(l != NULL && strncmp(l, "OK", 2) == 0, "UNLOCK %s: %s", name, l ? l : "(none)");
}

/* Runs redis-cli -p port args... without a shell (a script has spaces);
 * the output without its trailing newlines, in a static buffer. */
static const char *rcli(int port, const char *const args[]) {
    char p[16];
    const char *argv[32] = {"redis-cli", "-p", p};
    size_t n = 3;
    snprintf(p, sizeof(p), "%d", port);
    for (size_t i = 0; args[i] != NULL; i++) {
        ck_assert_uint_lt(n, sizeof(argv) / sizeof(argv[0]) - 1);
        argv[n++] = args[i];
    }
    argv[n] = NULL;
    return h_run(argv);
}

/* ---- spread, fences, wake-ups, the watchdog, WHO, unfit names --------------- */

START_TEST(locks_spread_over_every_primary) {
    h_cluster_start(3, 0);
    int d0 = start_dlockd(NULL), d1 = start_dlockd(NULL);
    int dog = start_dlockd("[lock]\nlease_ms = 1500\n");
    KEEP(d0);
    KEEP(d1);
    KEEP(dog);
    h_conn_t *a = h_connect_index(d0), *b = h_connect_index(d1);

    /* 30 names land on all three primaries, each lock key beside its
     * fence counter. */
    int per[3] = {0, 0, 0};
    char name[32];
    for (int i = 0; i < 30; i++) {
        snprintf(name, sizeof(name), "spread%d", i);
        unsigned long long f = lock_ok(a, name);
        ck_assert_uint_gt(f, 0);
        int owner = h_cluster_slot_owner(slot_of(name));
        const char *e = h_cluster_cmd(owner, "EXISTS dlock:%s", name);
        ck_assert_msg(e != NULL && strcmp(e, "1") == 0, "%s not on its owner %d: %s", name,
                      owner, e ? e : "(none)");
        for (int p = 0; p < 3; p++)
            if (owner == h_cluster_port(p)) per[p]++;
    }
    for (int p = 0; p < 3; p++)
        ck_assert_msg(per[p] > 0, "no lock on primary %d (%d/%d/%d)", h_cluster_port(p), per[0],
                      per[1], per[2]);
    for (int i = 0; i < 30; i++) {
        snprintf(name, sizeof(name), "spread%d", i);
        unlock_ok(a, name);
    }

    /* Fences rise on the same name, whichever daemon grants. */
    unsigned long long f1 = lock_ok(a, "fence");
    unlock_ok(a, "fence");
    unsigned long long f2 = lock_ok(b, "fence");
    ck_assert_uint_gt(f2, f1);
    unlock_ok(b, "fence");

    /* A waiter of the other daemon is woken by the release (sharded
     * pub/sub), long before the 30 s lease would let it retry. */
    lock_ok(a, "wake");
    h_send(b, "LOCK wake\n");
    ck_assert_ptr_null(h_reply(b, 300, H_EVENTS_SKIP_BUT_LOST));
    long long t0 = h_now_ms();
    unlock_ok(a, "wake");
    const char *l = h_reply(b, WAKE_MS, H_EVENTS_SKIP_BUT_LOST);
    ck_assert_msg(l != NULL && strncmp(l, "OK ", 3) == 0, "waiter: %s", l ? l : "(none)");
    printf("cluster: waiter of another daemon granted %lld ms after the release\n",
           h_now_ms() - t0);

    /* WHO on the other daemon names the holder's dlockd: the registry is
     * in a slot of its own, read with a second call. */
    h_send(a, "WHO wake\n");
    l = h_reply(a, H_WAIT_MS, H_EVENTS_SKIP_BUT_LOST);
    char want[64];
    snprintf(want, sizeof(want), " %d ", (int)h_dlockd_pid(d1));
    ck_assert_msg(l != NULL && strncmp(l, "OK HELD ", 8) == 0 && strstr(l, want) != NULL,
                  "WHO: %s (want the pid of dlockd %d)", l ? l : "(none)", d1);
    unlock_ok(b, "wake");

    /* The watchdog keeps a 1.5 s lease alive on its primary for 4 s. */
    h_conn_t *w = h_connect_index(dog);
    lock_ok(w, "dog");
    long long end = h_now_ms() + 4000;
    while (h_now_ms() < end) {
        const char *ev = h_recv(w, 100);
        ck_assert_msg(ev == NULL, "while held: %s", ev);
    }
    int owner = h_cluster_slot_owner(slot_of("dog"));
    const char *ttl = h_cluster_cmd(owner, "PTTL dlock:dog");
    ck_assert_msg(ttl != NULL && atoll(ttl) > 0, "PTTL dlock:dog on %d: %s", owner,
                  ttl ? ttl : "(none)");
    unlock_ok(w, "dog");

    /* Names whose companions would not share the lock's slot are refused
     * with a clear error, and the daemon goes on. */
    const char *bad[] = {"a{b", "x}y", "e{}f"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        h_send(a, "LOCK %s\n", bad[i]);
        l = h_reply(a, H_WAIT_MS, H_EVENTS_SKIP_BUT_LOST);
        ck_assert_msg(l != NULL && strncmp(l, "ERR BACKEND", 11) == 0 &&
                          strstr(l, "companion keys") != NULL,
                      "LOCK %s: %s", bad[i], l ? l : "(none)");
    }
    lock_ok(a, "{tag}fine");
    unlock_ok(a, "{tag}fine");

    /* Read/write locks on every primary: readers of both daemons share,
     * a writer waits for them, and a release (SPUBLISH on the name's
     * redisson_rwlock channel) wakes the other daemon's writer. */
    h_conn_t *r2 = h_connect_index(d1);
    for (int p = 0; p < 3; p++) {
        char rw[32];
        snprintf(rw, sizeof(rw), "%s", name_on("rw", h_cluster_port(p)));
        h_send(a, "RLOCK %s\n", rw);
        l = h_reply(a, H_WAIT_MS, H_EVENTS_SKIP_BUT_LOST);
        ck_assert_msg(l != NULL && strncmp(l, "OK ", 3) == 0, "RLOCK %s: %s", rw, l ? l : "-");
        h_send(r2, "RLOCK %s\n", rw);
        l = h_reply(r2, H_WAIT_MS, H_EVENTS_SKIP_BUT_LOST);
        ck_assert_msg(l != NULL && strncmp(l, "OK ", 3) == 0, "RLOCK %s on the other daemon: %s",
                      rw, l ? l : "-");
        h_send(b, "WLOCK %s\n", rw);
        ck_assert_ptr_null(h_reply(b, 300, H_EVENTS_SKIP_BUT_LOST));
        h_send(r2, "RUNLOCK %s\n", rw);
        H_EXPECT(r2, "OK 0");
        ck_assert_ptr_null(h_reply(b, 100, H_EVENTS_SKIP_BUT_LOST));
        t0 = h_now_ms();
        h_send(a, "RUNLOCK %s\n", rw);
        H_EXPECT(a, "OK 0");
        l = h_reply(b, WAKE_MS, H_EVENTS_SKIP_BUT_LOST);
        ck_assert_msg(l != NULL && strncmp(l, "OK ", 3) == 0, "WLOCK %s: %s", rw, l ? l : "-");
        printf("cluster: %s on %d: writer of another daemon granted %lld ms after the last "
               "reader's release\n", rw, h_cluster_port(p), h_now_ms() - t0);
        h_send(b, "WUNLOCK %s\n", rw);
        H_EXPECT(b, "OK 0");
    }
    h_close(r2);

    /* Semaphores and fair locks on every primary: the other daemon's
     * waiter is woken by the release's SPUBLISH, on the semaphore's
     * redisson_sc channel, or on the fair waiter's own channel
     * (redisson_lock__channel:{key}:<field>, published from the script). */
    for (int p = 0; p < 3; p++) {
        char sem[32], fair[32];
        snprintf(sem, sizeof(sem), "%s", name_on("sem", h_cluster_port(p)));
        snprintf(fair, sizeof(fair), "%s", name_on("fair", h_cluster_port(p)));
        h_send(a, "SEMINIT %s 1\n", sem);
        H_EXPECT(a, "OK 1");
        h_send(a, "ACQUIRE %s 1\n", sem);
        H_EXPECT(a, "OK 1");
        h_send(b, "ACQUIRE %s 1\n", sem);
        ck_assert_ptr_null(h_reply(b, 300, H_EVENTS_SKIP_BUT_LOST));
        t0 = h_now_ms();
        h_send(a, "RELEASE %s 1\n", sem);
        H_EXPECT(a, "OK 0");
        l = h_reply(b, WAKE_MS, H_EVENTS_SKIP_BUT_LOST);
        ck_assert_msg(l != NULL && strcmp(l, "OK 1") == 0, "ACQUIRE %s: %s", sem, l ? l : "-");
        printf("cluster: %s on %d: permit of another daemon granted %lld ms after the release\n",
               sem, h_cluster_port(p), h_now_ms() - t0);
        h_send(b, "RELEASE %s 1\n", sem);
        H_EXPECT(b, "OK 0");

        h_send(a, "FAIRLOCK %s\n", fair);
        l = h_reply(a, H_WAIT_MS, H_EVENTS_SKIP_BUT_LOST);
        ck_assert_msg(l != NULL && strncmp(l, "OK ", 3) == 0, "FAIRLOCK %s: %s", fair, l ? l : "-");
        h_send(b, "FAIRLOCK %s\n", fair);
        ck_assert_ptr_null(h_reply(b, 300, H_EVENTS_SKIP_BUT_LOST));
        t0 = h_now_ms();
        h_send(a, "UNLOCK %s\n", fair);
        H_EXPECT(a, "OK 0");
        l = h_reply(b, WAKE_MS, H_EVENTS_SKIP_BUT_LOST);
        ck_assert_msg(l != NULL && strncmp(l, "OK ", 3) == 0, "FAIRLOCK %s on the other daemon: %s",
                      fair, l ? l : "-");
        printf("cluster: %s on %d: fair waiter of another daemon granted %lld ms after the "
               "UNLOCK\n", fair, h_cluster_port(p), h_now_ms() - t0);
        h_send(b, "UNLOCK %s\n", fair);
        H_EXPECT(b, "OK 0");
    }

    /* INFO names the topology and counts the primaries. */
    ck_assert_int_eq(h_info_value(a, "redis_nodes"), 3);
    ck_assert_int_eq(h_info_value(a, "redis_nodes_up"), 3);
    h_close(w);
    h_close(a);
    h_close(b);
    h_keep_passed();
}
END_TEST

/* ---- a Redisson-style client --------------------------------------------------- */

/* Redisson's lock and (current) unlock scripts, as RedissonLock sends
 * them: the unlock takes the publish command (SPUBLISH in sharded mode)
 * and an unlock latch key. */
static const char rs_lock[] =
    "if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) "
    "then redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); "
    "return nil; end; return redis.call('pttl', KEYS[1]);";
static const char rs_unlock[] =
    "local val = redis.call('get', KEYS[3]); if val ~= false then return tonumber(val); end; "
    "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil; end; "
    "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); "
    "if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); "
    "redis.call('set', KEYS[3], 0, 'px', ARGV[5]); return 0; "
    "else redis.call('del', KEYS[1]); redis.call(ARGV[4], KEYS[2], ARGV[1]); "
    "redis.call('set', KEYS[3], 1, 'px', ARGV[5]); return 1; end;";

#define RS_FIELD "6f1d2c3b-0000-4000-8000-00000000beef:1"

static const char *rs_try_lock(int port, const char *key) {
    const char *a[] = {"--no-raw", "EVAL", rs_lock, "1", key, "30000", RS_FIELD, NULL};
    return rcli(port, a);
}

static const char *rs_unlock_key(int port, const char *key, const char *chan) {
    char latch[256];
    snprintf(latch, sizeof(latch), "redisson_unlock_latch:{%s}:42", key);
    const char *a[] = {"--no-raw", "EVAL", rs_unlock, "3", key, chan, latch, "0", "30000",
                       RS_FIELD, "SPUBLISH", "5000", NULL};
    return rcli(port, a);
}

START_TEST(redisson_client_and_dlockd_wake_each_other) {
    h_cluster_start(3, 0);
    int d = start_dlockd(NULL);
    KEEP(d);
    h_conn_t *c = h_connect_index(d);

    /* Redisson holds "rs"; a dlockd waiter waits, and Redisson's unlock
     * (SPUBLISH inside its script) wakes it. */
    int port = h_cluster_slot_owner(slot_of("rs"));
    const char *r = rs_try_lock(port, "dlock:rs");
    ck_assert_msg(strcmp(r, "(nil)") == 0, "Redisson's lock: %s", r);
    h_send(c, "LOCK rs\n");
    ck_assert_ptr_null(h_reply(c, 300, H_EVENTS_SKIP_BUT_LOST));
    long long t0 = h_now_ms();
    r = rs_unlock_key(port, "dlock:rs", "redisson_lock__channel:{dlock:rs}");
    ck_assert_msg(strcmp(r, "(integer) 1") == 0, "Redisson's unlock: %s", r);
    const char *l = h_reply(c, WAKE_MS, H_EVENTS_SKIP_BUT_LOST);
    ck_assert_msg(l != NULL && strncmp(l, "OK ", 3) == 0, "after Redisson's unlock: %s",
                  l ? l : "(none)");
    printf("cluster: dlockd waiter granted %lld ms after Redisson's SPUBLISH\n", h_now_ms() - t0);

    /* Now dlockd holds it: Redisson is refused, and its SSUBSCRIBE on the
     * lock's channel hears dlockd's release. */
    r = rs_try_lock(port, "dlock:rs");
    ck_assert_msg(strncmp(r, "(integer) ", 10) == 0 && atoll(r + 10) > 0,
                  "Redisson's lock while dlockd holds it: %s", r);
    char out[512];
    snprintf(out, sizeof(out), "%s/ssub.out", h_dir());
    pid_t sub = fork();
    ck_assert_int_ge(sub, 0);
    if (sub == 0) {
        char p[16];
        snprintf(p, sizeof(p), "%d", port);
        int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execlp("redis-cli", "redis-cli", "-p", p, "SSUBSCRIBE",
               "redisson_lock__channel:{dlock:rs}", (char *)NULL);
        _exit(127);
    }
    /* Subscribed once the server counts it. */
    long long end = h_now_ms() + H_WAIT_MS;
    for (;;) {
        const char *n = h_cluster_cmd(port, "PUBSUB SHARDNUMSUB redisson_lock__channel:{dlock:rs}");
        const char *nl = n ? strrchr(n, '\n') : NULL;
        if (nl != NULL && atoi(nl + 1) >= 1) break;
        ck_assert_msg(h_now_ms() < end, "Redisson's SSUBSCRIBE never counted: %s", n ? n : "-");
        usleep(10000);
    }
    unlock_ok(c, "rs");
    end = h_now_ms() + WAKE_MS;
    for (;;) {
        char buf[1024] = "";
        FILE *f = fopen(out, "r");
        if (f != NULL) {
            size_t n = fread(buf, 1, sizeof(buf) - 1, f);
            buf[n] = '\0';
            fclose(f);
        }
        if (strstr(buf, "smessage") != NULL) break;
        ck_assert_msg(h_now_ms() < end, "Redisson's subscriber heard nothing: %s", buf);
        usleep(10000);
    }
    kill(sub, SIGKILL);
    waitpid(sub, NULL, 0);
    r = rs_try_lock(port, "dlock:rs");
    ck_assert_msg(strcmp(r, "(nil)") == 0, "Redisson's lock after dlockd's release: %s", r);
    /* And dlockd is refused while Redisson holds it. */
    h_send(c, "TRYLOCK rs 0\n");
    l = h_reply(c, H_WAIT_MS, H_EVENTS_SKIP_BUT_LOST);
    ck_assert_msg(l != NULL && strncmp(l, "TIMEOUT ", 8) == 0, "TRYLOCK: %s", l ? l : "(none)");
    h_close(c);
    h_keep_passed();
}
END_TEST

START_TEST(classic_pubsub_when_asked) {
    h_cluster_start(3, 0);
    int d0 = start_dlockd("sharded_pubsub = no\n"), d1 = start_dlockd("sharded_pubsub = no\n");
    KEEP(d0);
    KEEP(d1);
    h_conn_t *a = h_connect_index(d0), *b = h_connect_index(d1);
    lock_ok(a, "classic");
    h_send(b, "LOCK classic\n");
    int port = h_cluster_slot_owner(slot_of("classic"));
    long long end = h_now_ms() + H_WAIT_MS;
    for (;;) {
        const char *n = h_cluster_cmd(port, "PUBSUB NUMSUB redisson_lock__channel:{dlock:classic}");
        const char *nl = n ? strrchr(n, '\n') : NULL;
        if (nl != NULL && atoi(nl + 1) >= 1) break;
        ck_assert_msg(h_now_ms() < end, "no SUBSCRIBE on the owner: %s", n ? n : "-");
        usleep(10000);
    }
    const char *s = h_cluster_cmd(port, "PUBSUB SHARDNUMSUB redisson_lock__channel:{dlock:classic}");
    ck_assert_msg(s != NULL && strrchr(s, '\n') != NULL && atoi(strrchr(s, '\n') + 1) == 0,
                  "sharded subscribers with sharded_pubsub = no: %s", s ? s : "-");
    unlock_ok(a, "classic");
    const char *l = h_reply(b, WAKE_MS, H_EVENTS_SKIP_BUT_LOST);
    ck_assert_msg(l != NULL && strncmp(l, "OK ", 3) == 0, "waiter: %s", l ? l : "(none)");
    h_close(a);
    h_close(b);
    h_keep_passed();
}
END_TEST

/* ---- resharding under load ------------------------------------------------------ */

#define LOAD_CLIENTS 4

/* Clients locking and unlocking names of one slot in turn; a shared
 * record of who holds what catches a double grant. */
typedef struct {
    h_conn_t *c;
    const char *name;
    int state;                /* 0 idle, 1 waiting for LOCK, 2 holding, 3 waiting for UNLOCK */
    long long sent;
    int grants;
    long long slowest;
} loader_t;

static int holder[2] = {-1, -1}; /* per load name: the client holding it */

/* Runs the clients for ms; with ms < 0, until every one is idle, sending
 * nothing new. */
static void pump(loader_t *ld, int n, int ms, const char *const names[2]) {
    long long end = h_now_ms() + (ms < 0 ? H_WAIT_MS : ms);
    for (;;) {
        int busy = 0;
        for (int i = 0; i < n; i++) busy += ld[i].state != 0;
        if (h_now_ms() >= end || (ms < 0 && busy == 0)) break;
        for (int i = 0; i < n; i++) {
            loader_t *x = &ld[i];
            int k = x->name == names[0] ? 0 : 1;
            if (x->state == 0 && ms < 0) continue;
            if (x->state == 0) {
                h_send(x->c, "LOCK %s\n", x->name);
                x->sent = h_now_ms();
                x->state = 1;
                continue;
            }
            const char *l = h_recv(x->c, 0);
            if (l == NULL) {
                /* Nothing may hang: a request is answered within its
                 * timeouts (command_timeout_ms 2 s, with retries). */
                if (x->state == 3)
                    ck_assert_msg(h_now_ms() - x->sent < H_WAIT_MS, "client %d: UNLOCK hangs", i);
                continue;
            }
            ck_assert_msg(l[0] != '!', "client %d: %s", i, l);
            long long took = h_now_ms() - x->sent;
            if (x->state == 1) {
                ck_assert_msg(strncmp(l, "OK ", 3) == 0, "client %d LOCK %s: %s", i, x->name, l);
                ck_assert_msg(holder[k] < 0, "%s granted to client %d while client %d holds it",
                              x->name, i, holder[k]);
                holder[k] = i;
                x->grants++;
                x->state = 2;
            } else if (x->state == 3) {
                ck_assert_msg(strncmp(l, "OK", 2) == 0, "client %d UNLOCK %s: %s", i, x->name, l);
                if (took > x->slowest) x->slowest = took;
                x->state = 0;
                continue;
            }
            /* holding: let go at once; the holder record clears first */
            holder[k] = -1;
            h_send(x->c, "UNLOCK %s\n", x->name);
            x->sent = h_now_ms();
            x->state = 3;
        }
        usleep(500);
    }
}

START_TEST(resharding_a_slot_with_held_locks_under_load) {
    h_cluster_start(3, 0);
    int d0 = start_dlockd("[lock]\nlease_ms = 3000\n"), d1 = start_dlockd("[lock]\nlease_ms = 3000\n");
    KEEP(d0);
    KEEP(d1);
    /* Every name shares the hash tag: one slot holds them all. */
    const char *held[2] = {"{mig}held0", "{mig}held1"};
    const char *names[2] = {"{mig}load0", "{mig}load1"};
    int slot = slot_of(held[0]);
    ck_assert_int_eq(slot_of(names[1]), slot);
    int from = h_cluster_slot_owner(slot);
    int to = h_cluster_port(0) == from ? h_cluster_port(1) : h_cluster_port(0);

    h_conn_t *h0 = h_connect_index(d0), *h1 = h_connect_index(d1);
    lock_ok(h0, held[0]);
    lock_ok(h1, held[1]);
    h_conn_t *waiter = h_connect_index(d1);
    h_send(waiter, "LOCK %s\n", held[0]);
    loader_t ld[LOAD_CLIENTS];
    memset(ld, 0, sizeof(ld));
    for (int i = 0; i < LOAD_CLIENTS; i++) {
        ld[i].c = h_connect_index(i % 2 ? d1 : d0);
        ld[i].name = names[i % 2];
    }
    holder[0] = holder[1] = -1;
    pump(ld, LOAD_CLIENTS, 300, names);

    /* The migration, in steps, with the load running between them: the
     * ASK and TRYAGAIN window is seen. */
    long long t0 = h_now_ms();
    h_cluster_migrate_begin(slot, to);
    long long took = h_now_ms() - t0;
    pump(ld, LOAD_CLIENTS, 300, names);
    t0 = h_now_ms();
    int moved = h_cluster_migrate_keys(slot, to, 2);
    took += h_now_ms() - t0;
    pump(ld, LOAD_CLIENTS, 300, names);
    t0 = h_now_ms();
    h_cluster_migrate_end(slot, to);
    took += h_now_ms() - t0;
    pump(ld, LOAD_CLIENTS, 1000, names);
    printf("cluster: slot %d went from %d to %d in %lld ms of migration steps (%d keys moved "
           "first, 300 ms of load between the steps) with 2 held locks, a waiter and %d "
           "clients at work\n", slot, from, to, took, moved, LOAD_CLIENTS);

    /* Back again, with a stall: every key moved, the slot not yet handed
     * over. Renewals and releases reach the keys on the importing node
     * through ASK, so the holders' 3 s leases outlive a 2.5 s stall. (New
     * grants in the slot wait for the hand-over: Redis answers TRYAGAIN
     * while a fence counter may be on either side; the load rests.) */
    pump(ld, LOAD_CLIENTS, -1, names);
    h_cluster_migrate_begin(slot, from);
    h_cluster_migrate_keys(slot, from, -1);
    long long stall_end = h_now_ms() + 2500;
    while (h_now_ms() < stall_end) {
        const char *ev = h_recv(h0, 50);
        ck_assert_msg(ev == NULL, "holder 0 during the stall: %s", ev);
        ev = h_recv(h1, 50);
        ck_assert_msg(ev == NULL, "holder 1 during the stall: %s", ev);
    }
    const char *st = h_cluster_cmd(to, "CLUSTER COUNTKEYSINSLOT %d", slot);
    ck_assert_msg(st != NULL && strcmp(st, "0") == 0, "keys left on the source: %s",
                  st ? st : "(none)");
    unlock_ok(h1, held[1]); /* a release through ASK */
    h_cluster_migrate_end(slot, from);
    st = h_cluster_cmd(from, "EXISTS dlock:%s", held[1]);
    ck_assert_msg(st != NULL && strcmp(st, "0") == 0, "%s after its release: %s", held[1],
                  st ? st : "(none)");
    lock_ok(h1, held[1]);
    pump(ld, LOAD_CLIENTS, 1000, names);
    to = from; /* where the keys are now */

    /* Holders kept their locks, and the watchdog renews them on the new
     * owner: 3 s leases, renewed every second, stay well above 1 s. */
    for (int i = 0; i < 2; i++) {
        h_conn_t *hc = i ? h1 : h0;
        ck_assert_ptr_null(h_recv(hc, 0)); /* no !LOST */
        h_send(hc, "STATUS %s\n", held[i]);
        const char *l = h_reply(hc, H_WAIT_MS, H_EVENTS_SKIP_BUT_LOST);
        ck_assert_msg(l != NULL && strncmp(l, "OK MINE", 7) == 0, "STATUS %s: %s", held[i],
                      l ? l : "(none)");
    }
    long long end = h_now_ms() + 3000;
    while (h_now_ms() < end) {
        const char *ttl = h_cluster_cmd(to, "PTTL dlock:%s", held[0]);
        ck_assert_msg(ttl != NULL && atoll(ttl) > 500, "PTTL of %s on the new owner: %s",
                      held[0], ttl ? ttl : "(none)");
        ck_assert_ptr_null(h_recv(h0, 0));
        pump(ld, LOAD_CLIENTS, 200, names);
    }
    /* The waiter waited through it, and the release wakes it. */
    ck_assert_ptr_null(h_recv(waiter, 0));
    unlock_ok(h0, held[0]);
    const char *l = h_reply(waiter, WAKE_MS, H_EVENTS_SKIP_BUT_LOST);
    ck_assert_msg(l != NULL && strncmp(l, "OK ", 3) == 0, "waiter: %s", l ? l : "(none)");
    for (int i = 0; i < LOAD_CLIENTS; i++) {
        ck_assert_msg(ld[i].grants > 3, "client %d: only %d grants", i, ld[i].grants);
        printf("cluster: load client %d: %d grants, slowest UNLOCK %lld ms\n", i, ld[i].grants,
               ld[i].slowest);
        h_close(ld[i].c);
    }
    h_close(waiter);
    h_close(h0);
    h_close(h1);
    h_keep_passed();
}
END_TEST

/* ---- a primary killed ------------------------------------------------------------- */

START_TEST(primary_killed_its_replica_takes_over) {
    h_cluster_start(3, 1);
    int d = start_dlockd(NULL);
    KEEP(d);
    h_conn_t *holder_c = h_connect_index(d), *waiter = h_connect_index(d),
             *fresh = h_connect_index(d), *c = h_connect_index(d), *info = h_connect_index(d);
    int victim = h_cluster_port(0); /* a primary at the start */
    char vname[64], oname[64], probe[64];
    snprintf(vname, sizeof(vname), "%s", name_on("v", victim));
    snprintf(oname, sizeof(oname), "%s", name_on("o", -victim));
    snprintf(probe, sizeof(probe), "%s", name_on("w", victim));
    unsigned long long f1 = lock_ok(holder_c, vname);
    h_send(waiter, "LOCK %s\n", vname);
    ck_assert_ptr_null(h_reply(waiter, 300, H_EVENTS_SKIP_BUT_LOST));

    int vindex = -1;
    for (int i = 0; i < h_cluster_node_count(); i++)
        if (h_cluster_port(i) == victim) vindex = h_cluster_index(i);
    h_redis_stop_index(vindex, SIGKILL);
    long long t0 = h_now_ms();

    /* The other shards never stop: a TRYLOCK there answers at once. */
    h_send(c, "TRYLOCK %s 0\n", oname);
    const char *l = h_reply(c, H_WAIT_MS, H_EVENTS_SKIP_BUT_LOST);
    long long other = h_now_ms() - t0;
    ck_assert_msg(l != NULL && strncmp(l, "OK ", 3) == 0, "TRYLOCK on a healthy shard: %s",
                  l ? l : "(none)");
    ck_assert_msg(other < 1500, "a healthy shard answered after %lld ms", other);
    unlock_ok(c, oname);

    /* A new request on the dead shard does not hang: it is answered
     * within command_timeout_ms (2 s) and some slack, ERR BACKEND naming
     * the node, or a grant if the replica took over meanwhile. */
    char port[16];
    snprintf(port, sizeof(port), ":%d", victim);
    long long sent = h_now_ms();
    h_send(fresh, "TRYLOCK %s-fresh 0\n", vname);
    l = h_reply(fresh, H_WAIT_MS, H_EVENTS_SKIP_BUT_LOST);
    long long took = h_now_ms() - sent;
    ck_assert_msg(l != NULL && (strncmp(l, "OK ", 3) == 0 ||
                                (strncmp(l, "ERR BACKEND", 11) == 0 && strstr(l, port) != NULL)),
                  "TRYLOCK on the dead shard: %s", l ? l : "(none)");
    ck_assert_msg(took < 2000 + 1500, "TRYLOCK on the dead shard answered after %lld ms", took);

    /* INFO says which primary is down (until the map drops it). */
    long long end = h_now_ms() + H_WAIT_MS;
    int named = 0;
    while (!named && h_now_ms() < end) {
        h_send(info, "INFO\n");
        l = h_recv(info, H_WAIT_MS);
        ck_assert_ptr_nonnull(l);
        const char *down = strstr(l, " redis_down=");
        named = down != NULL && strstr(down, port) != NULL;
        if (!named && strstr(l, " redis_nodes_up=3 ") != NULL) break; /* replaced already */
        usleep(5000);
    }
    ck_assert_msg(named || strstr(l, " redis_nodes_up=3 ") != NULL, "INFO: %s", l);

    /* The replica takes over; the holder keeps its lock (its 30 s lease
     * outlives the outage), and its release wakes the waiter, who waited
     * through it all, with a higher fence. */
    int promoted = h_cluster_await_failover(victim, H_FAILOVER_MS);
    long long failover = h_now_ms() - t0;
    /* Served again: a name on the shard nobody here holds is granted (a
     * TRYLOCK 0 of vname is answered here, without Redis: its holder and
     * waiter are ahead). */
    end = h_now_ms() + H_WAIT_MS;
    for (;;) {
        h_send(c, "TRYLOCK %s 0\n", probe);
        l = h_reply(c, H_WAIT_MS, H_EVENTS_SKIP_BUT_LOST);
        ck_assert_ptr_nonnull(l);
        if (strncmp(l, "OK ", 3) == 0) break;
        ck_assert_msg(strncmp(l, "ERR BACKEND", 11) == 0, "TRYLOCK after the failover: %s", l);
        ck_assert_msg(h_now_ms() < end, "the shard never came back: %s", l);
        usleep(50000);
    }
    long long back = h_now_ms() - t0;
    unlock_ok(c, probe);
    ck_assert_ptr_null(h_recv(holder_c, 0)); /* no !LOST */
    unlock_ok(holder_c, vname);
    l = h_reply(waiter, WAKE_MS, H_EVENTS_SKIP_BUT_LOST);
    ck_assert_msg(l != NULL && strncmp(l, "OK ", 3) == 0, "the waiter after the failover: %s",
                  l ? l : "(none)");
    ck_assert_uint_gt(strtoull(l + 3, NULL, 10), f1);
    ck_assert_int_eq(h_cluster_slot_owner(slot_of(vname)), promoted);
    printf("cluster: primary %d killed; %d promoted after %lld ms; its shard served again after "
           "%lld ms; a healthy shard answered in %lld ms\n", victim, promoted, failover, back,
           other);
    unlock_ok(waiter, vname);
    h_close(info);
    h_close(c);
    h_close(fresh);
    h_close(waiter);
    h_close(holder_c);
    h_keep_passed();
}
END_TEST

/* A release that waits out its shard's failover keeps its place: the same
 * client's next LOCK, sent after it, must not be granted first and then
 * deleted by it, which let another daemon in beside the holder. */
START_TEST(release_waiting_out_a_failover_keeps_its_place) {
    h_cluster_start(3, 1);
    /* Long enough for the release and the LOCK behind it to wait out the
     * failover (about 2.5 s). */
    const char *patient = "command_timeout_ms = 8000\n";
    int d0 = start_dlockd(patient), d1 = start_dlockd(patient);
    KEEP(d0);
    KEEP(d1);
    h_conn_t *c = h_connect_index(d0), *w = h_connect_index(d1);
    int victim = h_cluster_port(0), vindex = h_cluster_index(0);
    char name[64];
    snprintf(name, sizeof(name), "%s", name_on("r", victim));
    unsigned long long f1 = lock_ok(c, name);
    h_send(w, "LOCK %s\n", name);
    ck_assert_ptr_null(h_reply(w, 300, H_EVENTS_SKIP_BUT_LOST));

    h_redis_stop_index(vindex, SIGKILL);
    char down[64];
    snprintf(down, sizeof(down), "connection to 127.0.0.1:%d down", victim);
    h_await_log(d0, down, 1); /* dlockd saw it: the release cannot go out */
    unlock_ok(c, name);       /* answered at once; the release waits */

    /* The client LOCKs again, over and over, from the moment the shard
     * takes requests (ERR BACKEND until then): its first accepted LOCK
     * races the waiting release. Whoever gets the lock holds it 300 ms
     * while the other must not get it too, then lets go. */
    int c_state = 0; /* 0 LOCK to send, 1 LOCK out, 2 holding, 3 done */
    int w_state = 1; /* 1 LOCK out, 2 holding, 3 done */
    long long c_since = 0, w_since = 0, end = h_now_ms() + H_FAILOVER_MS + 2 * WAKE_MS;
    while (c_state != 3 || w_state != 3) {
        ck_assert_msg(h_now_ms() < end, "holder state %d, waiter state %d", c_state, w_state);
        if (c_state == 0) {
            h_send(c, "LOCK %s\n", name);
            c_state = 1;
        }
        const char *l;
        if (c_state == 1 && (l = h_recv(c, 5)) != NULL) {
            if (strncmp(l, "ERR BACKEND", 11) == 0) {
                c_state = 0;
            } else {
                ck_assert_msg(strncmp(l, "OK ", 3) == 0, "the holder's LOCK: %s", l);
                ck_assert_msg(w_state != 2, "granted to the holder while the waiter holds it");
                ck_assert_uint_gt(strtoull(l + 3, NULL, 10), f1);
                c_state = 2;
                c_since = h_now_ms();
            }
        }
        if (w_state == 1 && (l = h_recv(w, 5)) != NULL) {
            ck_assert_msg(strncmp(l, "OK ", 3) == 0, "the waiter's LOCK: %s", l);
            ck_assert_msg(c_state != 2, "granted to the waiter while the holder holds it");
            ck_assert_uint_gt(strtoull(l + 3, NULL, 10), f1);
            w_state = 2;
            w_since = h_now_ms();
        }
        if (c_state == 2 && h_now_ms() - c_since > 300) {
            unlock_ok(c, name);
            c_state = 3;
        }
        if (w_state == 2 && h_now_ms() - w_since > 300) {
            unlock_ok(w, name);
            w_state = 3;
        }
    }
    h_close(c);
    h_close(w);
    h_keep_passed();
}
END_TEST

/* ---- a primary paused --------------------------------------------------------------- */

START_TEST(primary_paused_then_back_as_a_replica) {
    h_cluster_start(3, 1);
    int d = start_dlockd(NULL);
    KEEP(d);
    h_conn_t *holder_c = h_connect_index(d), *c = h_connect_index(d);
    int victim = h_cluster_port(0), vindex = h_cluster_index(0);
    char vname[64], oname[64], probe[64];
    snprintf(vname, sizeof(vname), "%s", name_on("p", victim));
    snprintf(oname, sizeof(oname), "%s", name_on("q", -victim));
    snprintf(probe, sizeof(probe), "%s", name_on("r", victim));
    unsigned long long f1 = lock_ok(holder_c, vname);

    h_redis_signal_index(vindex, SIGSTOP);
    long long t0 = h_now_ms();
    /* A request on the paused primary is answered, ERR BACKEND, within
     * command_timeout_ms (2 s) and slack; the others at once. */
    h_send(c, "TRYLOCK %s-new 0\n", vname);
    const char *l = h_reply(c, H_WAIT_MS, H_EVENTS_SKIP_BUT_LOST);
    long long took = h_now_ms() - t0;
    ck_assert_msg(l != NULL && (strncmp(l, "ERR BACKEND", 11) == 0 || strncmp(l, "OK ", 3) == 0),
                  "TRYLOCK on the paused primary: %s", l ? l : "(none)");
    ck_assert_msg(took < 2000 + 1500, "answered after %lld ms", took);
    long long s0 = h_now_ms();
    h_send(c, "TRYLOCK %s 0\n", oname);
    l = h_reply(c, H_WAIT_MS, H_EVENTS_SKIP_BUT_LOST);
    ck_assert_msg(l != NULL && strncmp(l, "OK ", 3) == 0, "healthy shard: %s", l ? l : "(none)");
    ck_assert_msg(h_now_ms() - s0 < 1500, "a healthy shard answered after %lld ms",
                  h_now_ms() - s0);
    unlock_ok(c, oname);

    /* Its replica takes over; then the paused one wakes up, learns it was
     * replaced, and serves as a replica: dlockd, whose map may still name
     * it, is sent on by MOVED. The holder never lost its lock. */
    int promoted = h_cluster_await_failover(victim, H_FAILOVER_MS);
    h_redis_signal_index(vindex, SIGCONT);
    long long end = h_now_ms() + H_FAILOVER_MS;
    while (strcmp(h_redis_role(vindex), "slave") != 0) {
        ck_assert_msg(h_now_ms() < end, "the old primary is %s", h_redis_role(vindex));
        usleep(20000);
    }
    /* The shard is back once a name on it nobody here holds is granted (a
     * TRYLOCK 0 of vname would be answered here, without Redis: its holder
     * is ahead). */
    end = h_now_ms() + H_WAIT_MS;
    for (;;) {
        h_send(c, "TRYLOCK %s 0\n", probe);
        l = h_reply(c, H_WAIT_MS, H_EVENTS_SKIP_BUT_LOST);
        ck_assert_ptr_nonnull(l);
        if (strncmp(l, "OK ", 3) == 0) break;
        ck_assert_msg(strncmp(l, "ERR BACKEND", 11) == 0, "TRYLOCK after the failover: %s", l);
        ck_assert_msg(h_now_ms() < end, "the shard never came back: %s", l);
        usleep(50000);
    }
    unlock_ok(c, probe);
    ck_assert_ptr_null(h_recv(holder_c, 0)); /* no !LOST */
    unlock_ok(holder_c, vname);
    ck_assert_uint_gt(lock_ok(c, vname), f1);
    /* The node asked first may be the one just woken, whose view of the
     * slots can lag for a moment (no owner for the slot): ask until the
     * views settle. */
    end = h_now_ms() + H_WAIT_MS;
    while (h_cluster_slot_owner(slot_of(vname)) != promoted) {
        ck_assert_msg(h_now_ms() < end, "slot of %s: owner %d, wanted the promoted %d", vname,
                      h_cluster_slot_owner(slot_of(vname)), promoted);
        usleep(20000);
    }
    printf("cluster: primary %d paused; %d promoted, the old one back as a replica %lld ms "
           "after the pause\n", victim, promoted, h_now_ms() - t0);
    unlock_ok(c, vname);
    h_close(c);
    h_close(holder_c);
    h_keep_passed();
}
END_TEST

/* ---- TLS and a password ----------------------------------------------------------- */

START_TEST(tls_with_a_password) {
    char certs[512], extra[2048];
    snprintf(certs, sizeof(certs), "%s", h_dir());
    h_tls_make_certs(certs);
    h_set_auth("cluster-s3cret", NULL);
    h_tls_cluster_start(3, 0, certs);
    snprintf(extra, sizeof(extra),
             "password = cluster-s3cret\ntls = yes\ntls_ca_file = %s/ca.crt\n", certs);
    int d0 = start_dlockd(extra), d1 = start_dlockd(extra);
    KEEP(d0);
    KEEP(d1);
    h_conn_t *a = h_connect_index(d0), *b = h_connect_index(d1);
    lock_ok(a, "tls");
    h_send(b, "LOCK tls\n");
    ck_assert_ptr_null(h_reply(b, 300, H_EVENTS_SKIP_BUT_LOST));
    unlock_ok(a, "tls");
    const char *l = h_reply(b, WAKE_MS, H_EVENTS_SKIP_BUT_LOST);
    ck_assert_msg(l != NULL && strncmp(l, "OK ", 3) == 0, "waiter over TLS: %s", l ? l : "(none)");
    h_close(a);
    h_close(b);
    h_keep_passed();
}
END_TEST

int main(void) {
    Suite *s = suite_create("cluster");
    TCase *t = tcase_create("cluster");
    tcase_add_checked_fixture(t, setup, h_teardown);
    tcase_set_timeout(t, 120);
    tcase_add_test(t, locks_spread_over_every_primary);
    tcase_add_test(t, redisson_client_and_dlockd_wake_each_other);
    tcase_add_test(t, classic_pubsub_when_asked);
    tcase_add_test(t, resharding_a_slot_with_held_locks_under_load);
    tcase_add_test(t, primary_killed_its_replica_takes_over);
    tcase_add_test(t, primary_paused_then_back_as_a_replica);
    tcase_add_test(t, release_waiting_out_a_failover_keeps_its_place);
    tcase_add_test(t, tls_with_a_password);
    suite_add_tcase(s, t);
    return h_main(s);
}
