/* Integration tests of fair locks against a real Redis: semantics, FIFO
 * across daemons, places in Redis's queue, a dead daemon, kinds,
 * FORCEUNLOCK, and Redisson's own RFairLock scripts.
 * SPDX-License-Identifier: MIT */
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/support/harness.h"

/* Redisson's RFairLock scripts, verbatim from redisson/src/main/java/org/
 * redisson/RedissonFairLock.java at commit
 * 66863978b4a92093b97c1f8c96f182a77e81d50e. */

/* RedissonFairLock.java at 66863978, tryLockInnerAsync, the
 * RedisCommands.EVAL_LONG branch (what lock() and tryLock(waitTime, ...)
 * run). KEYS: the lock, its queue, its timeout set; ARGV: the lease, the
 * lock name (<uuid>:<threadId>), the wait, now (ms). nil: granted; else
 * the ttl to wait. */
static const char redisson_try_lock[] =
    "while true do "
    "local firstThreadId2 = redis.call('lindex', KEYS[2], 0);"
    "if firstThreadId2 == false then "
    "break;"
    "end;"

    "local timeout = redis.call('zscore', KEYS[3], firstThreadId2);"
    "if timeout ~= false and tonumber(timeout) <= tonumber(ARGV[4]) then "
    "redis.call('zrem', KEYS[3], firstThreadId2);"
    "redis.call('lpop', KEYS[2]);"
    "else "
    "break;"
    "end;"
    "end;"

    "if (redis.call('exists', KEYS[1]) == 0) "
    "and ((redis.call('exists', KEYS[2]) == 0) "
    "or (redis.call('lindex', KEYS[2], 0) == ARGV[2])) then "

    "redis.call('lpop', KEYS[2]);"
    "redis.call('zrem', KEYS[3], ARGV[2]);"

    "local keys = redis.call('zrange', KEYS[3], 0, -1);"
    "for i = 1, #keys, 1 do "
    "redis.call('zincrby', KEYS[3], -tonumber(ARGV[3]), keys[i]);"
    "end;"

    "redis.call('hset', KEYS[1], ARGV[2], 1);"
    "redis.call('pexpire', KEYS[1], ARGV[1]);"
    "return nil;"
    "end;"

    "if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then "
    "redis.call('hincrby', KEYS[1], ARGV[2],1);"
    "redis.call('pexpire', KEYS[1], ARGV[1]);"
    "return nil;"
    "end;"

    "local timeout = redis.call('zscore', KEYS[3], ARGV[2]);"
    "if timeout ~= false then "
    "local ttl = redis.call('pttl', KEYS[1]);"
    "return math.max(0, ttl); "
    "end;"

    "local lastThreadId = redis.call('lindex', KEYS[2], -1);"
    "local ttl;"
    "if lastThreadId ~= false and lastThreadId ~= ARGV[2] and redis.call('zscore', KEYS[3], "
    "lastThreadId) ~= false then "
    "ttl = tonumber(redis.call('zscore', KEYS[3], lastThreadId)) - tonumber(ARGV[4]);"
    "else "
    "ttl = redis.call('pttl', KEYS[1]);"
    "end;"
    "local timeout = ttl + tonumber(ARGV[3]) + tonumber(ARGV[4]);"
    "if redis.call('zadd', KEYS[3], timeout, ARGV[2]) == 1 then "
    "redis.call('rpush', KEYS[2], ARGV[2]);"
    "end;"
    "return ttl;";

/* RedissonFairLock.java at 66863978, unlockInnerAsync(threadId, requestId,
 * timeout). KEYS: the lock, its queue, its timeout set, its channel, the
 * unlock latch (redisson_unlock_latch:{<lock>}:<requestId>); ARGV: the
 * unlock message (LockPubSub.UNLOCK_MESSAGE, 0), internalLockLeaseTime,
 * the lock name, now (ms), the publish command, the latch's timeout. 1:
 * released (or was not there), 0: holds left, nil: not the holder. */
static const char redisson_unlock[] =
    "local val = redis.call('get', KEYS[5]); "
    "if val ~= false then "
    "return tonumber(val);"
    "end; "

    "while true do "
    "local firstThreadId2 = redis.call('lindex', KEYS[2], 0);"
    "if firstThreadId2 == false then "
    "break;"
    "end; "
    "local timeout = redis.call('zscore', KEYS[3], firstThreadId2);"
    "if timeout ~= false and tonumber(timeout) <= tonumber(ARGV[4]) then "
    "redis.call('zrem', KEYS[3], firstThreadId2); "
    "redis.call('lpop', KEYS[2]); "
    "else "
    "break;"
    "end; "
    "end;"

    "if (redis.call('exists', KEYS[1]) == 0) then "
    "local nextThreadId = redis.call('lindex', KEYS[2], 0); "
    "if nextThreadId ~= false then "
    "redis.call(ARGV[5], KEYS[4] .. ':' .. nextThreadId, ARGV[1]); "
    "end; "
    "redis.call('set', KEYS[5], 1, 'px', ARGV[6]); "
    "return 1; "
    "end;"
    "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then "
    "return nil;"
    "end; "
    "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); "
    "if (counter > 0) then "
    "redis.call('pexpire', KEYS[1], ARGV[2]); "
    "redis.call('set', KEYS[5], 0, 'px', ARGV[6]); "
    "return 0; "
    "end; "

    "redis.call('del', KEYS[1]); "
    "redis.call('set', KEYS[5], 1, 'px', ARGV[6]); "
    "local nextThreadId = redis.call('lindex', KEYS[2], 0); "
    "if nextThreadId ~= false then "
    "redis.call(ARGV[5], KEYS[4] .. ':' .. nextThreadId, ARGV[1]); "
    "end; "
    "return 1; ";

/* RedissonFairLock.java at 66863978, acquireFailedAsync(waitTime, unit,
 * threadId): a tryLock that gave up leaves the queue. KEYS: the queue, the timeout set; ARGV: the lock
 * name, the wait. */
static const char redisson_acquire_failed[] =
    "local queue = redis.call('lrange', KEYS[1], 0, -1);"
    "local i = 1;"
    "while i <= #queue and queue[i] ~= ARGV[1] do "
    "i = i + 1;"
    "end;"
    "i = i + 1;"
    "while i <= #queue do "
    "redis.call('zincrby', KEYS[2], -tonumber(ARGV[2]), queue[i]);"
    "i = i + 1;"
    "end;"
    "redis.call('zrem', KEYS[2], ARGV[1]);"
    "redis.call('lrem', KEYS[1], 0, ARGV[1]);";

/* A Redisson client's threads (getLockName: <instance id>:<threadId>) on
 * redisson.getFairLock("dlock:<name>"). */
#define JAVA_ID      "5f0c2a8e-3b1d-4c6e-9a7f-2d4b6c8e0a1f"
#define JAVA_T1      JAVA_ID ":1"
#define JAVA_T2      JAVA_ID ":2"
#define JAVA_LEASE   "30000"  /* internalLockLeaseTime: lockWatchdogTimeout */
/* The wait a tryLock(5, SECONDS) passes (ARGV[3]): each place it takes
 * ends that long after the one before it, and each grant takes that much
 * off every place in the queue. */
#define JAVA_WAIT_TRY  "5000"
/* The wait lock() passes: Config.fairLockWaitTimeout, 5 * 60000 by
 * default at this commit. */
#define JAVA_WAIT_LOCK "300000"
/* Unlock's latch timeout, ARGV[6] ((timeout + retry delay) * attempts). */
#define JAVA_LATCH_MS "10000"

/* A wake-up, or an answer that must not wait, comes within this. */
#define PROMPT_MS 5000
/* The short lease of most cases (renewed, and places kept, every 333 ms). */
#define SHORT_LEASE_MS 1000
#define SHORT_LEASE "[lock]\nlease_ms = 1000\n"
/* dlockd's default lease_ms (renew_every_ms 10000). */
#define DEFAULT_LEASE_MS 30000

#define MAX_FIELDS 16
#define FIELD_MAX 128

/* ---- dlockd -------------------------------------------------------------- */

/* The fence of the "OK <fence> <holds>" line c gets next. */
static unsigned long long granted(h_conn_t *c, const char *what, long long holds, int timeout_ms) {
    const char *l = h_recv(c, timeout_ms);
    ck_assert_msg(l != NULL, "%s: no grant within %d ms", what, timeout_ms);
    unsigned long long fence;
    long long h;
    char tail;
    ck_assert_msg(sscanf(l, "OK %llu %lld%c", &fence, &h, &tail) == 2 && h == holds && fence > 0,
                  "%s: got '%s', wanted 'OK <fence> %lld'", what, l, holds);
    return fence;
}

/* Sends request and returns the fence of its grant. */
static unsigned long long take(h_conn_t *c, const char *request, long long holds) {
    h_send(c, "%s\n", request);
    return granted(c, request, holds, H_WAIT_MS);
}

/* Sends request; its reply must start with prefix, at once: a refusal,
 * not a wait. */
static void expect_prefix(h_conn_t *c, const char *request, const char *prefix) {
    h_send(c, "%s\n", request);
    const char *l = h_recv(c, PROMPT_MS);
    ck_assert_msg(l != NULL && strncmp(l, prefix, strlen(prefix)) == 0,
                  "%s: got '%s' within %d ms, wanted '%s...'", request, l ? l : "(nothing)",
                  PROMPT_MS, prefix);
}

/* Waits for the first line any of conns[0..n) gets (skipping those whose
 * done[i] is set) for at most timeout_ms; returns its index and puts the
 * line in *line, or returns -1. */
static int first_line(h_conn_t *const conns[], const int done[], int n, int timeout_ms,
                      const char **line) {
    long long end = h_now_ms() + timeout_ms;
    for (;;) {
        struct pollfd pfd[MAX_FIELDS];
        int idx[MAX_FIELDS], k = 0;
        for (int i = 0; i < n; i++) {
            if (done != NULL && done[i]) continue;
            if (memchr(conns[i]->buf, '\n', conns[i]->len) != NULL) {
                *line = h_recv(conns[i], 0);
                return i;
            }
            pfd[k].fd = conns[i]->fd;
            pfd[k].events = POLLIN;
            pfd[k].revents = 0;
            idx[k++] = i;
        }
        long long left = end - h_now_ms();
        if (left < 0) left = 0;
        int r = poll(pfd, (nfds_t)k, (int)left);
        if (r <= 0 && h_now_ms() >= end) return -1;
        for (int j = 0; j < k; j++) {
            if (pfd[j].revents == 0) continue;
            const char *l = h_recv(conns[idx[j]], 0);
            if (l != NULL) {
                *line = l;
                return idx[j];
            }
        }
    }
}

/* None of conns[0..n) (but those done) has anything to say for ms. */
static void expect_all_silent(h_conn_t *const conns[], const int done[], int n, int ms,
                              const char *why) {
    const char *l = NULL;
    int i = first_line(conns, done, n, ms, &l);
    ck_assert_msg(i < 0, "%s: waiter %d got '%s'", why, i, l ? l : "");
}

/* ---- Redis --------------------------------------------------------------- */

/* Redisson's names for redisson.getFairLock("dlock:<name>") (prefixName:
 * braces around the raw name), which dlockd's fair locks keep. */
static const char *lock_key(const char *name) {
    static char k[4][300];
    static int i;
    char *out = k[i++ % 4];
    snprintf(out, 300, "dlock:%s", name);
    return out;
}

static const char *queue_key(const char *name) {
    static char k[4][300];
    static int i;
    char *out = k[i++ % 4];
    snprintf(out, 300, "redisson_lock_queue:{dlock:%s}", name);
    return out;
}

static const char *timeout_key(const char *name) {
    static char k[4][300];
    static int i;
    char *out = k[i++ % 4];
    snprintf(out, 300, "redisson_lock_timeout:{dlock:%s}", name);
    return out;
}

/* The lock's channel (KEYS[4] of Redisson's unlock); a waiter's own is
 * this plus ":<field>". */
static const char *channel_key(const char *name) {
    static char k[4][300];
    static int i;
    char *out = k[i++ % 4];
    snprintf(out, 300, "redisson_lock__channel:{dlock:%s}", name);
    return out;
}

static const char *waiter_channel(const char *name, const char *field) {
    static char k[4][450];
    static int i;
    char *out = k[i++ % 4];
    snprintf(out, 450, "redisson_lock__channel:{dlock:%s}:%s", name, field);
    return out;
}

static long long redis_num(const char *const a[]) {
    const char *out = h_redis_argv(a);
    char *end;
    long long v = strtoll(out, &end, 10);
    ck_assert_msg(end != out && *end == '\0', "%s %s: '%s'", a[0], a[1], out);
    return v;
}

static long long llen(const char *name) {
    const char *a[] = {"LLEN", queue_key(name), NULL};
    return redis_num(a);
}

static long long zcard(const char *name) {
    const char *a[] = {"ZCARD", timeout_key(name), NULL};
    return redis_num(a);
}

/* A place's end (ms since the epoch), -1 when it has none. */
static long long zscore(const char *name, const char *field) {
    const char *a[] = {"ZSCORE", timeout_key(name), field, NULL};
    const char *out = h_redis_argv(a);
    if (out[0] == '\0') return -1;
    return (long long)strtod(out, NULL);
}

/* The queue, head first: fields[0..n). */
typedef struct queue_s {
    int n;
    char f[MAX_FIELDS][FIELD_MAX];
} fqueue_t;

static void queue_read(const char *name, fqueue_t *q) {
    const char *a[] = {"LRANGE", queue_key(name), "0", "-1", NULL};
    char text[8192];
    snprintf(text, sizeof(text), "%s", h_redis_argv(a));
    q->n = 0;
    char *save = NULL;
    for (char *f = strtok_r(text, "\n", &save); f != NULL; f = strtok_r(NULL, "\n", &save)) {
        ck_assert_msg(q->n < MAX_FIELDS, "queue of %s too long", name);
        snprintf(q->f[q->n++], FIELD_MAX, "%s", f);
    }
}

/* "a, b, c" of a queue (static). */
static const char *fqueue_text(const fqueue_t *q) {
    static char out[MAX_FIELDS * (FIELD_MAX + 2)];
    size_t k = 0;
    out[0] = '\0';
    for (int i = 0; i < q->n; i++)
        k += (size_t)snprintf(out + k, sizeof(out) - k, "%s%s", i ? ", " : "", q->f[i]);
    return q->n ? out : "(empty)";
}

/* The queue must be exactly want[0..n), each once, and the timeout set
 * must hold n places. */
static void expect_queue(const char *name, const char *const want[], int n, const char *when) {
    fqueue_t q;
    queue_read(name, &q);
    int same = q.n == n;
    for (int i = 0; same && i < n; i++) same = strcmp(q.f[i], want[i]) == 0;
    ck_assert_msg(same, "%s: queue of %s is [%s], wanted %d places", when, name, fqueue_text(&q),
                  n);
    long long z = zcard(name);
    ck_assert_msg(z == n, "%s: %s has %lld places in the timeout set, wanted %d", when, name, z, n);
}

/* Polls until the queue has want places (a leave is sent and forgotten by
 * dlockd: its reply does not wait for it); returns how long it took. */
static long long await_llen(const char *name, long long want, int timeout_ms) {
    long long t0 = h_now_ms();
    for (;;) {
        long long n = llen(name);
        if (n == want) return h_now_ms() - t0;
        ck_assert_msg(h_now_ms() - t0 < timeout_ms, "queue of %s has %lld places after %d ms, "
                      "wanted %lld", name, n, timeout_ms, want);
        usleep(1000);
    }
}

/* Sends request (a FAIRLOCK that must wait) on c and waits until its place
 * is in Redis's queue, as number at (0 = head); its field into field. */
static void enqueue(h_conn_t *c, const char *request, const char *name, int at, char *field) {
    h_send(c, "%s\n", request);
    await_llen(name, at + 1, H_WAIT_MS);
    fqueue_t q;
    queue_read(name, &q);
    ck_assert_int_eq(q.n, at + 1);
    snprintf(field, FIELD_MAX, "%s", q.f[at]);
    for (int i = 0; i < at; i++)
        ck_assert_msg(strcmp(q.f[i], field) != 0, "%s: %s has two places", request, field);
    h_expect_silence(c, 0, request);
}

static long long hexists(const char *name, const char *field) {
    const char *a[] = {"HEXISTS", lock_key(name), field, NULL};
    return redis_num(a);
}

/* HGETALL, copied into out. */
static void hgetall(const char *name, char *out, size_t len) {
    h_redis_hgetall(lock_key(name), out, len);
}

/* Polls until the lock's hash is gone: UNLOCK and a close answer once the
 * release is sent, not once Redis ran it (PROTOCOL.md). */
static void await_free(const char *name) {
    const char *a[] = {"EXISTS", lock_key(name), NULL};
    long long end = h_now_ms() + H_WAIT_MS;
    while (redis_num(a) != 0) {
        ck_assert_msg(h_now_ms() < end, "%s still exists after %d ms", lock_key(name),
                      H_WAIT_MS);
        usleep(1000);
    }
}

/* The next message's payload (static buffer), or NULL if none comes
 * within timeout_ms. */
static const char *spy_next(h_conn_t *s, int timeout_ms) {
    static char payload[64];
    /* *3 $7 message $<n> <channel> $<m> <payload> */
    for (int i = 0; i < 7; i++) {
        const char *l = h_recv(s, i == 0 ? timeout_ms : H_WAIT_MS);
        if (l == NULL && i == 0) return NULL;
        ck_assert_msg(l != NULL, "a message cut short");
        if (i == 2) ck_assert_str_eq(l, "message\r");
        if (i == 6) snprintf(payload, sizeof(payload), "%.*s", (int)strcspn(l, "\r"), l);
    }
    return payload;
}

static void expect_message(h_conn_t *s, const char *channel, const char *want) {
    const char *p = spy_next(s, PROMPT_MS);
    ck_assert_msg(p != NULL, "nothing published on %s within %d ms", channel, PROMPT_MS);
    ck_assert_msg(strcmp(p, want) == 0, "%s: got '%s', wanted '%s'", channel, p, want);
}

/* ---- Redisson's scripts, as redis-cli --no-raw shows their replies --------
 * tryLock: "(nil)" granted, "(integer) <ttl>" queued (or still queued);
 * unlock: "(integer) 1" released, "(integer) 0" holds left, "(nil)" not
 * the holder. Each unlock has its own latch key, as each Redisson unlock
 * request (requestId) does. */

static const char *java_try_lock(const char *name, const char *thread, const char *wait) {
    char now[24];
    snprintf(now, sizeof(now), "%lld", h_wall_ms());
    const char *a[] = {"--no-raw", "EVAL", redisson_try_lock, "3", lock_key(name),
                       queue_key(name), timeout_key(name), JAVA_LEASE, thread, wait, now, NULL};
    return h_redis_argv(a);
}

static const char *java_unlock(const char *name, const char *thread) {
    static int seq;
    char now[24], latch[340];
    snprintf(now, sizeof(now), "%lld", h_wall_ms());
    snprintf(latch, sizeof(latch), "redisson_unlock_latch:{dlock:%s}:req%d", name, ++seq);
    const char *a[] = {"--no-raw", "EVAL", redisson_unlock, "5", lock_key(name), queue_key(name),
                       timeout_key(name), channel_key(name), latch, "0", JAVA_LEASE, thread, now,
                       "publish", JAVA_LATCH_MS, NULL};
    return h_redis_argv(a);
}

static const char *java_acquire_failed(const char *name, const char *thread, const char *wait) {
    const char *a[] = {"--no-raw", "EVAL", redisson_acquire_failed, "2", queue_key(name),
                       timeout_key(name), thread, wait, NULL};
    return h_redis_argv(a);
}

/* The ttl of a tryLock that queued, or -3 if the reply is not one. */
static long long java_queued(const char *reply) {
    long long ttl = -3;
    char tail;
    if (sscanf(reply, "(integer) %lld%c", &ttl, &tail) != 1) return -3;
    return ttl;
}

/* ---- semantics ----------------------------------------------------------- */

START_TEST(reentry_fences_status_unlock) {
    h_redis_start();
    int d = h_dlockd_start_kept("fairlock", SHORT_LEASE);
    h_conn_t *c = h_connect_index(d), *o = h_connect_index(d);
    unsigned long long f1 = take(c, "FAIRLOCK s", 1);
    ck_assert_uint_eq(take(c, "FAIRLOCK s", 2), f1); /* reentrant: the same fence */
    h_send(c, "STATUS s\n");
    const char *l = h_recv(c, H_WAIT_MS);
    long long holds = 0, ttl = 0;
    unsigned long long fence = 0;
    char tail;
    ck_assert_msg(l != NULL && sscanf(l, "OK MINE %lld %lld %llu%c", &holds, &ttl, &fence,
                                      &tail) == 3 && holds == 2 && ttl > 0 &&
                      ttl <= SHORT_LEASE_MS && fence == f1,
                  "STATUS s: got '%s', wanted 'OK MINE 2 <ttl> %llu'", l ? l : "-", f1);
    expect_prefix(o, "STATUS s", "OK TAKEN ");
    expect_prefix(o, "WHO s", "OK HELD ");
    ck_assert_int_gt(h_expect_timeout(o, "TRYFAIRLOCK s 0"), 0);
    ck_assert_int_gt(h_expect_timeout(o, "TRYFAIRLOCK s"), 0);
    ck_assert_int_eq(llen("s"), 0); /* a TRYFAIRLOCK without a wait takes no place */
    const char *hvals[] = {"HVALS", lock_key("s"), NULL};
    ck_assert_str_eq(h_redis_argv(hvals), "2"); /* one owner field, two holds */

    h_expect_reply(c, "UNLOCK s", "OK 1");
    h_expect_reply(c, "UNLOCK s", "OK 0");
    expect_prefix(c, "UNLOCK s", "ERR NOTHELD");
    h_expect_reply(c, "STATUS s", "OK FREE");
    await_free("s");

    /* Fences rise with every new grant, through either command. */
    unsigned long long f2 = take(o, "FAIRLOCK s", 1);
    ck_assert_uint_gt(f2, f1);
    h_expect_reply(o, "UNLOCK s", "OK 0");
    unsigned long long f3 = take(c, "TRYFAIRLOCK s 200", 1);
    ck_assert_uint_gt(f3, f2);
    const char *token[] = {"GET", "redisson_lock_token:{dlock:s}", NULL};
    ck_assert_uint_eq(strtoull(h_redis_argv(token), NULL, 10), f3);
    /* A grant leaves no place behind. */
    ck_assert_int_eq(llen("s"), 0);
    ck_assert_int_eq(zcard("s"), 0);
    /* RENEW as for a plain lock: a watchdog hold stays one (renewed now
     * for lease_ms), a leased one takes the new lease. */
    h_send(c, "RENEW s 5000\n");
    l = h_recv(c, H_WAIT_MS);
    ck_assert_msg(l != NULL && sscanf(l, "OK %lld%c", &ttl, &tail) == 1 && ttl > 0 &&
                      ttl <= SHORT_LEASE_MS,
                  "RENEW s 5000 of a watchdog hold: got '%s'", l ? l : "-");
    h_expect_reply(c, "UNLOCK s", "OK 0");
    take(c, "FAIRLOCK s 2000", 1);
    h_send(c, "RENEW s 5000\n");
    l = h_recv(c, H_WAIT_MS);
    ck_assert_msg(l != NULL && sscanf(l, "OK %lld%c", &ttl, &tail) == 1 && ttl > 4000 &&
                      ttl <= 5000,
                  "RENEW s 5000 of a hold with lease 2000: got '%s'", l ? l : "-");
    const char *pttl[] = {"PTTL", lock_key("s"), NULL};
    ck_assert_int_gt(redis_num(pttl), 4000);
    h_expect_reply(c, "UNLOCK s", "OK 0");
    h_close(o);
    h_close(c);
    h_keep_passed();
}
END_TEST

START_TEST(lease_ends_watchdog_keeps) {
    h_redis_start();
    int d = h_dlockd_start_kept("fairlock", SHORT_LEASE);
    h_conn_t *k = h_connect_index(d), *l = h_connect_index(d);
    long long t0 = h_now_ms();
    take(k, "FAIRLOCK kept", 1);
    long long tz = h_now_ms();
    take(l, "FAIRLOCK leased 500", 1);
    const char *ev = h_recv(l, PROMPT_MS);
    long long lost = h_now_ms() - tz;
    ck_assert_msg(ev != NULL, "no !LOST leased within %d ms of a 500 ms lease", PROMPT_MS);
    ck_assert_str_eq(ev, "!LOST leased expired");
    ck_assert_int_ge(lost, 450); /* not before the lease: a little slack for timer rounding */
    printf("fairlock: a fair hold with lease 500 ms lost after %lld ms\n", lost);
    h_expect_reply(l, "STATUS leased", "OK FREE");
    expect_prefix(l, "UNLOCK leased", "ERR NOTHELD");

    /* 3.5 leases later the watchdog still keeps kept. */
    long long rest = 3500 - (h_now_ms() - t0);
    h_expect_silence(k, rest > 0 ? (int)rest : 0, "the watchdog's fair hold");
    h_send(k, "STATUS kept\n");
    H_EXPECT_PREFIX(k, "OK MINE 1 ");
    const char *pttl[] = {"PTTL", lock_key("kept"), NULL};
    long long left = redis_num(pttl);
    ck_assert_msg(left > 0 && left <= SHORT_LEASE_MS, "PTTL dlock:kept = %lld after 3500 ms",
                  left);
    printf("fairlock: a watchdog fair hold kept for %lld ms (lease_ms %d)\n", h_now_ms() - t0,
           SHORT_LEASE_MS);
    h_expect_reply(k, "UNLOCK kept", "OK 0");
    h_close(l);
    h_close(k);
    h_keep_passed();
}
END_TEST

/* ---- FIFO ---------------------------------------------------------------- */

#define FIFO_N 6

/* Six waiters alternating between daemons A and B are granted in the
 * order of their places in Redis's queue, each as its predecessor
 * unlocks. */
START_TEST(fifo_across_two_daemons) {
    h_redis_start();
    int da = h_dlockd_start_kept("fairlock", SHORT_LEASE);
    int db = h_dlockd_start_kept("fairlock", SHORT_LEASE);
    h_conn_t *h = h_connect_index(da), *adm_a = h_connect_index(da), *adm_b = h_connect_index(db);
    h_conn_t *w[FIFO_N];
    char field[FIFO_N][FIELD_MAX];
    const char *fields[FIFO_N];
    unsigned long long prev = take(h, "FAIRLOCK f", 1);
    for (int i = 0; i < FIFO_N; i++) {
        w[i] = h_connect_index(i % 2 ? db : da);
        enqueue(w[i], "FAIRLOCK f", "f", i, field[i]);
        fields[i] = field[i];
    }
    expect_queue("f", fields, FIFO_N, "six waiters");
    h_await_waiters(adm_a, FIFO_N / 2);
    h_await_waiters(adm_b, FIFO_N / 2);
    expect_all_silent(w, NULL, FIFO_N, 0, "while h holds f");

    int done[FIFO_N] = {0};
    long long lat_us[FIFO_N];
    long long t0 = h_now_us();
    h_expect_reply(h, "UNLOCK f", "OK 0");
    for (int i = 0; i < FIFO_N; i++) {
        const char *l = NULL;
        int who = first_line(w, done, FIFO_N, PROMPT_MS, &l);
        lat_us[i] = h_now_us() - t0;
        ck_assert_msg(who >= 0, "nobody granted within %d ms after waiter %d's turn came",
                      PROMPT_MS, i);
        ck_assert_msg(who == i, "waiter %d (place %d) answered '%s' before waiter %d", who, who, l,
                      i);
        unsigned long long fence;
        long long holds;
        char tail;
        ck_assert_msg(sscanf(l, "OK %llu %lld%c", &fence, &holds, &tail) == 2 && holds == 1,
                      "waiter %d: '%s'", i, l);
        ck_assert_uint_gt(fence, prev);
        prev = fence;
        done[i] = 1;
        ck_assert_int_eq(hexists("f", field[i]), 1);
        expect_queue("f", fields + i + 1, FIFO_N - i - 1, "after a grant");
        t0 = h_now_us();
        h_expect_reply(w[i], "UNLOCK f", "OK 0");
    }
    await_free("f");
    for (int i = 0; i < FIFO_N; i++)
        printf("fairlock: FIFO hand-off %d (%s -> %s) granted %.2f ms after the UNLOCK\n", i,
               i == 0 ? "A" : (i - 1) % 2 ? "B" : "A", i % 2 ? "B" : "A", lat_us[i] / 1000.0);
    for (int i = 0; i < FIFO_N; i++) h_close(w[i]);
    h_close(adm_b);
    h_close(adm_a);
    h_close(h);
    h_keep_passed();
}
END_TEST

/* ---- places in Redis's queue --------------------------------------------- */

/* lease_ms 4000: a place left behind would hold the next waiter up to 4 s,
 * a served queue hands over at once. */
#define QUEUE_LEASE_MS 4000
#define QUEUE_LEASE "[lock]\nlease_ms = 4000\n"

START_TEST(places_left_at_once) {
    h_redis_start();
    int da = h_dlockd_start_kept("fairlock", QUEUE_LEASE);
    int db = h_dlockd_start_kept("fairlock", QUEUE_LEASE);
    h_conn_t *h = h_connect_index(da), *t = h_connect_index(da), *c = h_connect_index(db);
    h_conn_t *w1 = h_connect_index(da), *w2 = h_connect_index(db);
    char ft[FIELD_MAX], fc[FIELD_MAX], f1[FIELD_MAX], f2[FIELD_MAX];
    take(h, "FAIRLOCK q", 1);
    long long tt = h_now_ms();
    enqueue(t, "TRYFAIRLOCK q 1500", "q", 0, ft);
    enqueue(c, "FAIRLOCK q", "q", 1, fc);
    enqueue(w1, "FAIRLOCK q", "q", 2, f1);
    enqueue(w2, "FAIRLOCK q", "q", 3, f2);
    const char *all[] = {ft, fc, f1, f2};
    expect_queue("q", all, 4, "four waiters, one place each");

    /* The TRYFAIRLOCK's wait runs out: its place goes at once. */
    const char *l = h_recv(t, 1500 + PROMPT_MS);
    long long waited = h_now_ms() - tt;
    long long ttl = -2;
    char tail;
    ck_assert_msg(l != NULL && sscanf(l, "TIMEOUT %lld%c", &ttl, &tail) == 1,
                  "TRYFAIRLOCK q 1500: got '%s'", l ? l : "(nothing)");
    ck_assert_int_ge(waited, 1450);
    long long gone_t = await_llen("q", 3, PROMPT_MS);
    ck_assert_int_eq(zscore("q", ft), -1);
    const char *three[] = {fc, f1, f2};
    expect_queue("q", three, 3, "after the TRYFAIRLOCK timed out");

    /* A waiting connection closes: its place goes at once. */
    long long tc = h_now_ms();
    h_close(c);
    await_llen("q", 2, PROMPT_MS);
    long long gone_c = h_now_ms() - tc;
    ck_assert_int_eq(zscore("q", fc), -1);
    const char *two[] = {f1, f2};
    expect_queue("q", two, 2, "after a waiter closed");
    printf("fairlock: a timed-out TRYFAIRLOCK's place gone %lld ms after its TIMEOUT, a closed "
           "waiter's %lld ms after the close\n", gone_t, gone_c);
    /* Well before the places would have ended by themselves (lease_ms). */
    ck_assert_int_lt(gone_t, QUEUE_LEASE_MS / 2);
    ck_assert_int_lt(gone_c, QUEUE_LEASE_MS / 2);

    /* The holder's UNLOCK serves the next waiter at once, not when the
     * places of those who left would have ended. */
    long long t0 = h_now_us();
    h_expect_reply(h, "UNLOCK q", "OK 0");
    granted(w1, "w1 after the holder's UNLOCK", 1, PROMPT_MS);
    long long lat1 = h_now_us() - t0;
    h_expect_silence(w2, 0, "w2 while w1 holds q");
    t0 = h_now_us();
    h_expect_reply(w1, "UNLOCK q", "OK 0");
    granted(w2, "w2 after w1's UNLOCK", 1, PROMPT_MS);
    long long lat2 = h_now_us() - t0;
    printf("fairlock: after two waiters left, the next granted %.2f ms after the UNLOCK (A to A), "
           "the last %.2f ms after it (A to B)\n", lat1 / 1000.0, lat2 / 1000.0);
    ck_assert_int_lt(lat1 / 1000, QUEUE_LEASE_MS / 2);
    ck_assert_int_lt(lat2 / 1000, QUEUE_LEASE_MS / 2);
    ck_assert_int_eq(llen("q"), 0);
    ck_assert_int_eq(zcard("q"), 0);
    h_expect_reply(w2, "UNLOCK q", "OK 0");
    h_close(w2);
    h_close(w1);
    h_close(t);
    h_close(h);
    h_keep_passed();
}
END_TEST

/* Two waiters of two daemons wait 3.5 leases: each keeps its one place,
 * which never ends while it waits, and they are served in order. */
START_TEST(places_kept_alive) {
    h_redis_start();
    int da = h_dlockd_start_kept("fairlock", SHORT_LEASE);
    int db = h_dlockd_start_kept("fairlock", SHORT_LEASE);
    h_conn_t *h = h_connect_index(da), *w1 = h_connect_index(db), *w2 = h_connect_index(da);
    char f1[FIELD_MAX], f2[FIELD_MAX];
    take(h, "FAIRLOCK k", 1);
    enqueue(w1, "FAIRLOCK k", "k", 0, f1);
    enqueue(w2, "FAIRLOCK k", "k", 1, f2);
    const char *both[] = {f1, f2};
    h_conn_t *ws[] = {w1, w2};
    long long t0 = h_now_ms(), last1 = zscore("k", f1), last2 = zscore("k", f2);
    int moved1 = 0, moved2 = 0, checks = 0;
    while (h_now_ms() - t0 < 3500) {
        expect_queue("k", both, 2, "while waiting");
        long long now = h_redis_now_ms(), s1 = zscore("k", f1), s2 = zscore("k", f2);
        ck_assert_msg(s1 > now && s2 > now, "a place ended while its waiter waits: %s %lld, "
                      "%s %lld, Redis time %lld", f1, s1, f2, s2, now);
        moved1 += s1 != last1;
        moved2 += s2 != last2;
        last1 = s1;
        last2 = s2;
        checks++;
        expect_all_silent(ws, NULL, 2, 50, "while h holds k");
    }
    printf("fairlock: two waiters kept their places %lld ms (lease_ms %d): renewed %d and %d "
           "times over %d checks\n", h_now_ms() - t0, SHORT_LEASE_MS, moved1, moved2, checks);
    ck_assert_int_ge(moved1, 3);
    ck_assert_int_ge(moved2, 3);
    h_expect_reply(h, "UNLOCK k", "OK 0");
    granted(w1, "the first waiter", 1, PROMPT_MS);
    h_expect_silence(w2, 0, "the second waiter while the first holds k");
    h_expect_reply(w1, "UNLOCK k", "OK 0");
    granted(w2, "the second waiter", 1, PROMPT_MS);
    h_expect_reply(w2, "UNLOCK k", "OK 0");
    h_close(w2);
    h_close(w1);
    h_close(h);
    h_keep_passed();
}
END_TEST

/* Redis loses its data (FLUSHALL) under a held fair lock with three
 * waiters: the holder is told !LOST at its next renewal, and the waiters
 * take their places back in their order and are served in it. */
START_TEST(queue_lost_with_redis_data) {
    h_redis_start();
    int d = h_dlockd_start_kept("fairlock", SHORT_LEASE);
    h_conn_t *h = h_connect_index(d), *w[3];
    char f[3][FIELD_MAX];
    unsigned long long before = take(h, "FAIRLOCK ql", 1);
    for (int i = 0; i < 3; i++) {
        w[i] = h_connect_index(d);
        enqueue(w[i], "FAIRLOCK ql", "ql", i, f[i]);
    }
    const char *flush[] = {"FLUSHALL", NULL};
    ck_assert_str_eq(h_redis_argv(flush), "OK");
    long long t0 = h_now_ms();
    h_expect_event(h, "!LOST ql expired", H_WAIT_MS, "the holder after FLUSHALL");
    unsigned long long last = before;
    for (int i = 0; i < 3; i++) {
        unsigned long long fence = granted(w[i], "a waiter after FLUSHALL", 1, H_WAIT_MS);
        ck_assert_msg(fence > last, "fence %llu after %llu", fence, last);
        last = fence;
        if (i == 0)
            printf("fairlock: after FLUSHALL the first waiter was granted %lld ms later "
                   "(lease_ms %d)\n", h_now_ms() - t0, SHORT_LEASE_MS);
        for (int j = i + 1; j < 3; j++)
            h_expect_silence(w[j], 0, "a later waiter while an earlier one holds ql");
        h_expect_reply(w[i], "UNLOCK ql", "OK 0");
    }
    for (int i = 0; i < 3; i++) h_close(w[i]);
    h_close(h);
    h_keep_passed();
}
END_TEST

/* Daemon B dies while its waiter is at the head of the queue: A's next
 * waiter gets the lock once B's place ended, within about lease_ms. */
START_TEST(dead_daemons_place_ends) {
    h_redis_start();
    int da = h_dlockd_start_kept("fairlock", SHORT_LEASE);
    int db = h_dlockd_start_kept("fairlock", SHORT_LEASE);
    h_conn_t *h = h_connect_index(da), *wb = h_connect_index(db), *wa = h_connect_index(da);
    char fb[FIELD_MAX], fa[FIELD_MAX];
    take(h, "FAIRLOCK dd", 1);
    enqueue(wb, "FAIRLOCK dd", "dd", 0, fb);
    enqueue(wa, "FAIRLOCK dd", "dd", 1, fa);
    ck_assert_int_ne(h_dlockd_stop(db, SIGKILL), -1);
    long long sb = zscore("dd", fb), now = h_redis_now_ms();
    ck_assert_msg(sb > now, "B's place ended before the test could use it (%lld <= %lld)", sb,
                  now);
    long long t0 = h_now_ms();
    h_expect_reply(h, "UNLOCK dd", "OK 0");
    unsigned long long fence = granted(wa, "A's waiter behind a dead daemon's", 1,
                                       SHORT_LEASE_MS + 4000);
    long long took = h_now_ms() - t0;
    printf("fairlock: A's waiter granted %lld ms after the UNLOCK, behind a SIGKILLed daemon's "
           "place that had %lld ms left (lease_ms %d)\n", took, sb - now, SHORT_LEASE_MS);
    ck_assert_int_gt(took, 0);
    ck_assert_int_lt(took, SHORT_LEASE_MS + 4000);
    /* The fence is Redis TIME in microseconds at the grant. */
    ck_assert_msg((long long)(fence / 1000) >= sb,
                  "granted at %llu us, before B's place ended at %lld ms", fence, sb);
    ck_assert_int_eq(llen("dd"), 0);
    ck_assert_int_eq(zscore("dd", fb), -1);
    h_expect_reply(wa, "UNLOCK dd", "OK 0");
    h_close(wa);
    h_close(wb);
    h_close(h);
    h_keep_passed();
}
END_TEST

/* lease_ms 20000: a place left behind would hold the queue up 20 s; one
 * that goes with its waiter frees it within a few. */
#define OUTAGE_LEASE_MS 20000
#define OUTAGE_LEASE "[lock]\nlease_ms = 20000\n"

/* After a place must have gone: Redis's queue of name is empty, the lock
 * (held on hd by h) goes to a new FAIRLOCK on hd at once after h's
 * UNLOCK, and no one waits on daemon da. */
static void expect_queue_served(const char *name, int da, int hd, h_conn_t *h, const char *what) {
    char unlock[300], lock[300];
    long long gone = await_llen(name, 0, PROMPT_MS);
    ck_assert_int_eq(zcard(name), 0);
    h_conn_t *adm = h_connect_index(da), *c = h_connect_index(hd);
    h_await_waiters(adm, 0);
    snprintf(unlock, sizeof(unlock), "UNLOCK %s", name);
    h_expect_reply(h, unlock, "OK 0");
    long long t0 = h_now_ms();
    snprintf(lock, sizeof(lock), "FAIRLOCK %s\n", name);
    h_send(c, "%s", lock);
    granted(c, "a FAIRLOCK after the place went", 1, PROMPT_MS);
    long long took = h_now_ms() - t0;
    printf("fairlock: %s: the place gone %lld ms after Redis was back, the next FAIRLOCK "
           "granted in %lld ms (lease_ms %d)\n", what, gone, took, OUTAGE_LEASE_MS);
    ck_assert_int_lt(took, OUTAGE_LEASE_MS / 4);
    h_expect_reply(c, unlock, "OK 0");
    await_free(name);
    ck_assert_int_eq(h_info_value(adm, "waiters"), 0);
    ck_assert_int_eq(h_info_value(adm, "locks_held"), 0);
    h_close(c);
    h_close(adm);
}

/* A waiter's client closes while its daemon sees Redis away (SIGSTOPped):
 * the leave cannot go then, and goes once Redis is back, as a release
 * does; the place does not wait out lease_ms at the queue's head. */
START_TEST(place_left_after_redis_outage) {
    h_redis_start();
    int da = h_dlockd_start_kept("fairlock", OUTAGE_LEASE);
    int db = h_dlockd_start_kept("fairlock", OUTAGE_LEASE);
    h_conn_t *h = h_connect_index(db), *w = h_connect_index(da);
    char fw[FIELD_MAX];
    take(h, "FAIRLOCK po", 1);
    enqueue(w, "FAIRLOCK po", "po", 0, fw);
    h_redis_signal(SIGSTOP);
    h_await_redis(da, 0);
    h_close(w);
    h_conn_t *adm = h_connect_index(da);
    h_await_waiters(adm, 0);
    h_close(adm);
    h_redis_signal(SIGCONT);
    h_await_redis(da, 1);
    h_await_redis(db, 1);
    expect_queue_served("po", da, db, h, "a waiter closed while Redis was away");
    h_close(h);
    h_keep_passed();
}
END_TEST

/* A waiter's client closes while Redis holds writes back (CLIENT PAUSE
 * WRITE: the leave waits in Redis), and the daemons' connections are
 * killed (CLIENT KILL TYPE normal), which drops the leave unrun: it goes
 * again on the new connection, and runs once writes resume. */
START_TEST(place_left_after_connection_killed) {
    h_redis_start();
    int da = h_dlockd_start_kept("fairlock", OUTAGE_LEASE);
    int db = h_dlockd_start_kept("fairlock", OUTAGE_LEASE);
    h_conn_t *h = h_connect_index(db), *w = h_connect_index(da);
    char fw[FIELD_MAX];
    take(h, "FAIRLOCK pk", 1);
    enqueue(w, "FAIRLOCK pk", "pk", 0, fw);
    ck_assert_str_eq(h_redis_cli("CLIENT PAUSE 10000 WRITE"), "OK");
    h_close(w);
    h_conn_t *adm = h_connect_index(da);
    h_await_waiters(adm, 0);
    h_close(adm);
    h_expect_silence(h, 100, "the holder, Redis paused"); /* the leave reaches Redis */
    ck_assert_int_eq(llen("pk"), 1); /* it waits there, unrun */
    ck_assert_int_ge(atoll(h_redis_cli("CLIENT KILL TYPE normal")), 1);
    ck_assert_int_eq(llen("pk"), 1);
    ck_assert_str_eq(h_redis_cli("CLIENT UNPAUSE"), "OK");
    h_await_redis(da, 1);
    h_await_redis(db, 1);
    expect_queue_served("pk", da, db, h, "a waiter closed, its leave killed unrun");
    h_close(h);
    h_keep_passed();
}
END_TEST

/* A first FAIRLOCK goes to a Redis that hangs (SIGSTOPped): it gets ERR
 * BACKEND at command_timeout_ms, and Redis, once resumed, runs it anyway
 * and queues it. That place, of a request answered and gone, is left once
 * Redis is back. */
START_TEST(unanswered_first_request_leaves_its_place) {
    h_redis_start();
    int da = h_dlockd_start_kept("fairlock", OUTAGE_LEASE);
    int db = h_dlockd_start_kept("fairlock", OUTAGE_LEASE);
    h_conn_t *h = h_connect_index(db), *w = h_connect_index(da);
    take(h, "FAIRLOCK pu", 1);
    h_redis_signal(SIGSTOP);
    h_send(w, "FAIRLOCK pu\n");
    const char *l = h_recv(w, H_WAIT_MS);
    char got[256];
    snprintf(got, sizeof(got), "%s", l ? l : "(no reply)");
    h_redis_signal(SIGCONT);
    ck_assert_msg(strncmp(got, "ERR BACKEND", 11) == 0, "FAIRLOCK to a hung Redis: '%s'", got);
    printf("fairlock: a FAIRLOCK to a hung Redis: '%s'\n", got);
    h_await_redis(da, 1);
    h_await_redis(db, 1);
    expect_queue_served("pu", da, db, h, "a first request never answered");
    h_close(w);
    h_close(h);
    h_keep_passed();
}
END_TEST

START_TEST(tryfairlock_zero_takes_no_place) {
    h_redis_start();
    int da = h_dlockd_start_kept("fairlock", NULL), db = h_dlockd_start_kept("fairlock", NULL);
    h_conn_t *hb = h_connect_index(db), *w = h_connect_index(db);
    h_conn_t *oa = h_connect_index(da), *ob = h_connect_index(db);
    char fw[FIELD_MAX];
    take(hb, "FAIRLOCK z", 1);
    enqueue(w, "FAIRLOCK z", "z", 0, fw);
    const char *one[] = {fw};
    /* Daemon A has nobody here: it asks Redis, which refuses without a place. */
    long long calls = h_redis_calls("evalsha");
    ck_assert_int_gt(h_expect_timeout(oa, "TRYFAIRLOCK z 0"), 0);
    ck_assert_int_gt(h_expect_timeout(oa, "TRYFAIRLOCK z"), 0);
    ck_assert_int_gt(h_redis_calls("evalsha"), calls);
    expect_queue("z", one, 1, "after daemon A's TRYFAIRLOCK z 0");
    /* Daemon B has a holder and a waiter ahead: it answers untried. */
    h_expect_timeout(ob, "TRYFAIRLOCK z 0");
    expect_queue("z", one, 1, "after daemon B's TRYFAIRLOCK z 0");
    h_expect_reply(hb, "UNLOCK z", "OK 0");
    granted(w, "the waiter", 1, PROMPT_MS);
    h_expect_reply(w, "UNLOCK z", "OK 0");
    await_free("z");

    /* Free, but a Redisson thread's place is at the head: no try jumps it. */
    take(hb, "FAIRLOCK z", 1);
    ck_assert_int_ge(java_queued(java_try_lock("z", JAVA_T1, JAVA_WAIT_TRY)), 0);
    h_expect_reply(hb, "UNLOCK z", "OK 0");
    await_free("z");
    const char *java[] = {JAVA_T1};
    h_expect_timeout(oa, "TRYFAIRLOCK z 0");
    expect_queue("z", java, 1, "after TRYFAIRLOCK z 0 behind Redisson's place");
    const char *exists[] = {"EXISTS", lock_key("z"), NULL};
    ck_assert_int_eq(redis_num(exists), 0);
    java_acquire_failed("z", JAVA_T1, JAVA_WAIT_TRY); /* Redisson's tryLock gives up */
    expect_queue("z", NULL, 0, "after Redisson's acquireFailed");
    take(oa, "TRYFAIRLOCK z 0", 1);
    expect_queue("z", NULL, 0, "after a TRYFAIRLOCK z 0 grant");
    h_expect_reply(oa, "UNLOCK z", "OK 0");
    h_close(ob);
    h_close(oa);
    h_close(w);
    h_close(hb);
    h_keep_passed();
}
END_TEST

/* ---- kinds --------------------------------------------------------------- */

#define FAIR_KIND "is held as a fair lock (FAIRLOCK, UNLOCK)"
#define PLAIN_KIND "is held as a plain lock (LOCK, UNLOCK)"

START_TEST(kinds_do_not_mix) {
    h_redis_start();
    int da = h_dlockd_start_kept("fairlock", NULL), db = h_dlockd_start_kept("fairlock", NULL);
    h_conn_t *a = h_connect_index(da), *o = h_connect_index(da), *e = h_connect_index(db);
    h_conn_t *wa = h_connect_index(da);
    char before[1024], after[1024];
    take(a, "FAIRLOCK k", 1);
    hgetall("k", before, sizeof(before));
    expect_prefix(o, "LOCK k", "ERR KIND k " FAIR_KIND);
    expect_prefix(o, "TRYLOCK k 0", "ERR KIND k " FAIR_KIND);
    expect_prefix(o, "RLOCK k", "ERR KIND k " FAIR_KIND);
    expect_prefix(o, "WLOCK k", "ERR KIND k " FAIR_KIND);
    expect_prefix(o, "ACQUIRE k 1", "ERR KIND k " FAIR_KIND);
    hgetall("k", after, sizeof(after));
    ck_assert_str_eq(after, before);
    ck_assert_int_eq(llen("k"), 0);

    /* FAIRLOCK of a plain lock. */
    take(o, "LOCK p", 1);
    hgetall("p", before, sizeof(before));
    expect_prefix(a, "FAIRLOCK p", "ERR KIND p " PLAIN_KIND);
    expect_prefix(a, "TRYFAIRLOCK p 0", "ERR KIND p " PLAIN_KIND);
    hgetall("p", after, sizeof(after));
    ck_assert_str_eq(after, before);
    ck_assert_int_eq(llen("p"), 0);

    /* A name this daemon only waits for as a fair lock (B holds it). */
    take(e, "FAIRLOCK m", 1);
    char fw[FIELD_MAX];
    enqueue(wa, "FAIRLOCK m", "m", 0, fw);
    expect_prefix(o, "LOCK m", "ERR KIND m " FAIR_KIND);
    expect_prefix(o, "RLOCK m", "ERR KIND m " FAIR_KIND);
    const char *one[] = {fw};
    expect_queue("m", one, 1, "after refused requests");

    /* Across daemons the hash is a plain RLock's: plain and fair exclude
     * each other, and a plain LOCK takes no place. */
    h_expect_timeout(e, "TRYLOCK k 0");
    h_expect_timeout(e, "TRYLOCK k 200");
    ck_assert_int_eq(llen("k"), 0);
    h_expect_timeout(e, "TRYFAIRLOCK p 0");
    ck_assert_int_eq(llen("p"), 0);
    h_expect_reply(a, "UNLOCK k", "OK 0");
    await_free("k");
    take(e, "LOCK k", 1); /* B never held k: a plain lock there now */
    h_expect_reply(e, "UNLOCK k", "OK 0");

    /* The refusals took nothing away. */
    h_send(o, "STATUS p\n");
    H_EXPECT_PREFIX(o, "OK MINE 1 ");
    h_send(e, "STATUS m\n");
    H_EXPECT_PREFIX(e, "OK MINE 1 ");
    h_expect_reply(e, "UNLOCK m", "OK 0");
    granted(wa, "A's waiter for m", 1, PROMPT_MS);
    h_close(wa);
    h_close(e);
    h_close(o);
    h_close(a);
    h_keep_passed();
}
END_TEST

/* Across daemons a plain and a fair lock of one name exclude each other;
 * neither's release publishes where the other's waiter listens (a fair
 * release wakes the queue's head, a plain one the lock's channel), so the
 * waiter goes when its retry comes: the holder's lease, or a fair
 * waiter's keep-alive turn. Measured, bounded by lease_ms. */
START_TEST(plain_and_fair_exclude_across_daemons) {
    h_redis_start();
    int da = h_dlockd_start_kept("fairlock", SHORT_LEASE);
    int db = h_dlockd_start_kept("fairlock", SHORT_LEASE);
    h_conn_t *fa = h_connect_index(da), *pb = h_connect_index(db);
    take(fa, "FAIRLOCK pf", 1);
    h_send(pb, "LOCK pf\n");
    h_expect_silence(pb, 300, "a plain LOCK while another daemon holds the fair lock");
    ck_assert_int_eq(llen("pf"), 0); /* a plain LOCK takes no place */
    long long t0 = h_now_ms();
    h_expect_reply(fa, "UNLOCK pf", "OK 0");
    granted(pb, "the plain waiter after the fair UNLOCK", 1, SHORT_LEASE_MS + 4000);
    long long plain = h_now_ms() - t0;

    h_send(fa, "FAIRLOCK pf\n");
    await_llen("pf", 1, H_WAIT_MS);
    h_expect_silence(fa, 300, "a FAIRLOCK while another daemon holds the plain lock");
    t0 = h_now_ms();
    h_expect_reply(pb, "UNLOCK pf", "OK 0");
    granted(fa, "the fair waiter after the plain UNLOCK", 1, SHORT_LEASE_MS + 4000);
    long long fair = h_now_ms() - t0;
    printf("fairlock: across daemons a plain waiter got the lock %lld ms after the fair UNLOCK, "
           "a fair waiter %lld ms after the plain UNLOCK (lease_ms %d)\n", plain, fair,
           SHORT_LEASE_MS);
    h_expect_reply(fa, "UNLOCK pf", "OK 0");
    h_close(pb);
    h_close(fa);
    h_keep_passed();
}
END_TEST

START_TEST(not_under_quorum) {
    int r[3];
    char quorum[256];
    size_t k = 0;
    for (int i = 0; i < 3; i++) {
        r[i] = h_redis_start_tcp(0, NULL);
        k += (size_t)snprintf(quorum + k, sizeof(quorum) - k, "%sredis://127.0.0.1:%d",
                              i ? " " : "", h_redis_port(r[i]));
    }
    char conf[1024];
    snprintf(conf, sizeof(conf),
             "[server]\nadmin_uids = 0\n[redis]\nquorum = %s\ncommand_timeout_ms = 1000\n"
             "connect_timeout_ms = 500\n",
             quorum);
    int d = h_dlockd_start_conf(conf);
    h_keep_log(d, "fairlock.%s.dlockd%d", tcase_name(), d);
    h_conn_t *c = h_connect_index(d); /* refused before Redis is asked */
    expect_prefix(c, "FAIRLOCK x", "ERR KIND fair locks are not available with quorum");
    expect_prefix(c, "TRYFAIRLOCK x 0", "ERR KIND fair locks are not available with quorum");
    expect_prefix(c, "TRYFAIRLOCK x 100 1000",
                  "ERR KIND fair locks are not available with quorum");
    h_close(c);
    h_keep_passed();
}
END_TEST

/* ---- FORCEUNLOCK --------------------------------------------------------- */

/* FORCEUNLOCK wakes the queue's first waiter on its own channel: it is
 * granted long before its keep-alive turn (renew_every_ms, 10 s here). */
START_TEST(forceunlock_wakes_first_waiter) {
    h_redis_start();
    int da = h_dlockd_start_kept("fairlock", NULL), db = h_dlockd_start_kept("fairlock", NULL);
    h_conn_t *h = h_connect_index(da), *w1 = h_connect_index(db), *w2 = h_connect_index(da);
    h_conn_t *adm = h_connect_index(da);
    char f1[FIELD_MAX], f2[FIELD_MAX];
    unsigned long long fh = take(h, "FAIRLOCK fu", 1);
    enqueue(w1, "FAIRLOCK fu", "fu", 0, f1);
    enqueue(w2, "FAIRLOCK fu", "fu", 1, f2);
    const char *ch1 = waiter_channel("fu", f1);
    h_conn_t *spy = h_redis_subscriber(ch1);
    h_redis_await_subscribers(ch1, 2); /* B's watch of its head's channel, and ours */
    long long t0 = h_now_ms();
    h_expect_reply(adm, "FORCEUNLOCK fu", "OK 1");
    h_expect_event(h, "!LOST fu forced", PROMPT_MS, "the holder");
    expect_message(spy, ch1, "0");
    ck_assert_uint_gt(granted(w1, "the first waiter after FORCEUNLOCK", 1, PROMPT_MS), fh);
    long long took = h_now_ms() - t0;
    printf("fairlock: the first waiter (another daemon's) granted %lld ms after FORCEUNLOCK\n",
           took);
    h_expect_silence(w2, 200, "the second waiter while the first holds fu");
    const char *one[] = {f2};
    expect_queue("fu", one, 1, "after the first waiter's grant");
    h_expect_reply(w1, "UNLOCK fu", "OK 0");
    granted(w2, "the second waiter", 1, PROMPT_MS);
    h_expect_reply(w2, "UNLOCK fu", "OK 0");
    h_close(spy);
    h_close(adm);
    h_close(w2);
    h_close(w1);
    h_close(h);
    h_keep_passed();
}
END_TEST

/* The lease of the other daemon's waiter once it holds; well under the
 * keep-alive turn (renew_every_ms, 10 s with the default lease_ms). */
#define AHEAD_LEASE_MS 300

/* Daemon A's holder h unlocks and asks again at once; B's waiter x, the
 * queue's head, takes the lock with a lease of AHEAD_LEASE_MS; A's waiter
 * w, next, had asked right behind h's release, while the lock was free,
 * and heard the head's place's end (lease_ms) as its wait. x's grant tells
 * w (it publishes on the new head's channel): w asks again and tries when
 * x's lease ends. It waited for its keep-alive turn, up to renew_every_ms,
 * unless B's release at the lease's end came before Redis expired the hash
 * (about one run in two): with B stopped (stopped) it never does. */
static void next_waiter_tries_at_lease_end(const char *name, int stopped) {
    int da = h_dlockd_start_kept("fairlock", NULL), db = h_dlockd_start_kept("fairlock", NULL);
    h_conn_t *h = h_connect_index(da), *x = h_connect_index(db), *w = h_connect_index(da);
    char fx[FIELD_MAX], fw[FIELD_MAX], req[300];
    snprintf(req, sizeof(req), "FAIRLOCK %s", name);
    take(h, req, 1);
    snprintf(req, sizeof(req), "FAIRLOCK %s %d", name, AHEAD_LEASE_MS);
    enqueue(x, req, name, 0, fx);
    snprintf(req, sizeof(req), "FAIRLOCK %s", name);
    enqueue(w, req, name, 1, fw);
    h_send(h, "UNLOCK %s\nFAIRLOCK %s\n", name, name);
    H_EXPECT(h, "OK 0");
    unsigned long long fx_grant = granted(x, "B's waiter, the queue's head", 1, PROMPT_MS);
    long long t0 = h_now_ms();
    if (stopped) ck_assert_int_eq(kill(h_dlockd_pid(db), SIGSTOP), 0);
    const char *l = h_recv(w, PROMPT_MS);
    long long took = h_now_ms() - t0;
    if (stopped) ck_assert_int_eq(kill(h_dlockd_pid(db), SIGCONT), 0);
    ck_assert_msg(l != NULL, "A's waiter not granted within %d ms of B's waiter's grant with a "
                  "lease of %d ms (B %s)", PROMPT_MS, AHEAD_LEASE_MS,
                  stopped ? "stopped" : "running");
    unsigned long long fence;
    long long holds;
    char tail;
    ck_assert_msg(sscanf(l, "OK %llu %lld%c", &fence, &holds, &tail) == 2 && holds == 1,
                  "A's waiter: '%s'", l);
    printf("fairlock: the next waiter granted %lld ms after the head's grant with a %d ms lease "
           "(its daemon %s)\n", took, AHEAD_LEASE_MS, stopped ? "stopped" : "running");
    /* Not before x's lease ended: fences are Redis TIME in microseconds. */
    ck_assert_msg(fence >= fx_grant + (AHEAD_LEASE_MS - 1) * 1000ULL,
                  "A's waiter granted %llu us after x's grant, within its lease of %d ms",
                  fence - fx_grant, AHEAD_LEASE_MS);
    char ev[300];
    snprintf(ev, sizeof(ev), "!LOST %s expired", name);
    h_expect_event(x, ev, PROMPT_MS, "B's waiter, its lease over");
    /* h asked again behind w: it is next. */
    snprintf(req, sizeof(req), "UNLOCK %s", name);
    h_expect_reply(w, req, "OK 0");
    granted(h, "A's holder, asking again behind w", 1, PROMPT_MS);
    h_expect_reply(h, req, "OK 0");
    await_free(name);
    expect_queue(name, NULL, 0, "all served");
    h_close(w);
    h_close(x);
    h_close(h);
}

START_TEST(next_waiter_tries_at_head_lease_end) {
    h_redis_start();
    next_waiter_tries_at_lease_end("nr", 0);
    next_waiter_tries_at_lease_end("ns", 1);
    h_keep_passed();
}
END_TEST

/* ---- Redisson interop ---------------------------------------------------- */

/* A Redisson thread queued ahead of a dlockd waiter is served first; its
 * unlock (Redisson's script) publishes on the dlockd waiter's own channel
 * and wakes it. */
START_TEST(redisson_ahead_served_first_then_wakes_dlockd) {
    h_redis_start();
    int d = h_dlockd_start_kept("fairlock", NULL);
    h_conn_t *h = h_connect_index(d), *w = h_connect_index(d);
    char fw[FIELD_MAX];
    unsigned long long fh = take(h, "FAIRLOCK x", 1);
    long long ttl = java_queued(java_try_lock("x", JAVA_T1, JAVA_WAIT_TRY));
    ck_assert_msg(ttl > 0, "Redisson's tryLock under dlockd's hold: ttl %lld", ttl);
    enqueue(w, "FAIRLOCK x", "x", 1, fw);
    const char *order[] = {JAVA_T1, fw};
    expect_queue("x", order, 2, "Redisson's thread, then dlockd's waiter");
    const char *chj = waiter_channel("x", JAVA_T1), *chw = waiter_channel("x", fw);
    h_conn_t *spy_j = h_redis_subscriber(chj), *spy_w = h_redis_subscriber(chw);
    h_redis_await_subscribers(chw, 2); /* dlockd's watch of its waiter's channel, and ours */

    h_expect_reply(h, "UNLOCK x", "OK 0");
    expect_message(spy_j, chj, "0"); /* dlockd woke the Redisson thread */
    h_expect_silence(w, 300, "dlockd's waiter behind Redisson's thread");
    ck_assert_str_eq(java_try_lock("x", JAVA_T1, JAVA_WAIT_TRY), "(nil)");
    ck_assert_int_eq(hexists("x", JAVA_T1), 1);
    const char *left[] = {fw};
    expect_queue("x", left, 1, "after Redisson's grant");
    long long s = zscore("x", fw), now = h_redis_now_ms();
    ck_assert_msg(s > now, "dlockd's waiter lost its place to Redisson's grant: %lld <= %lld", s,
                  now);
    h_expect_silence(w, 200, "dlockd's waiter while Redisson holds x");

    long long t0 = h_now_ms();
    ck_assert_str_eq(java_unlock("x", JAVA_T1), "(integer) 1");
    expect_message(spy_w, chw, "0"); /* Redisson's unlock woke dlockd's waiter */
    ck_assert_uint_gt(granted(w, "dlockd's waiter after Redisson's unlock", 1, PROMPT_MS), fh);
    printf("fairlock: dlockd's waiter granted %lld ms after Redisson's unlock\n",
           h_now_ms() - t0);
    expect_queue("x", NULL, 0, "after the dlockd waiter's grant");
    h_expect_reply(w, "UNLOCK x", "OK 0");
    h_close(spy_w);
    h_close(spy_j);
    h_close(w);
    h_close(h);
    h_keep_passed();
}
END_TEST

/* A dlockd holder's UNLOCK publishes on a queued Redisson thread's own
 * channel; Redisson's tryLock then grants it, and dlockd sees it taken. */
START_TEST(dlockd_unlock_wakes_redisson_waiter) {
    h_redis_start();
    int d = h_dlockd_start_kept("fairlock", NULL);
    h_conn_t *h = h_connect_index(d), *o = h_connect_index(d);
    take(h, "FAIRLOCK y", 1);
    ck_assert_int_gt(java_queued(java_try_lock("y", JAVA_T1, JAVA_WAIT_TRY)), 0);
    const char *chj = waiter_channel("y", JAVA_T1);
    h_conn_t *spy = h_redis_subscriber(chj);
    long long t0 = h_now_ms();
    h_expect_reply(h, "UNLOCK y", "OK 0");
    expect_message(spy, chj, "0");
    printf("fairlock: Redisson's waiter heard dlockd's UNLOCK after %lld ms\n", h_now_ms() - t0);
    ck_assert_str_eq(java_try_lock("y", JAVA_T1, JAVA_WAIT_TRY), "(nil)");
    expect_queue("y", NULL, 0, "after Redisson's grant");
    expect_prefix(o, "STATUS y", "OK TAKEN ");
    expect_prefix(o, "WHO y", "OK HELD ");
    h_send(o, "WHO y\n");
    const char *l = h_recv(o, H_WAIT_MS);
    ck_assert_msg(l != NULL && strlen(l) > 8 && strcmp(l + strlen(l) - 8, " - - - -") == 0,
                  "WHO of a Redisson holder: '%s'", l ? l : "-");
    ck_assert_int_gt(h_expect_timeout(o, "TRYFAIRLOCK y 0"), 0);
    expect_queue("y", NULL, 0, "after TRYFAIRLOCK y 0");
    ck_assert_str_eq(java_unlock("y", JAVA_T1), "(integer) 1");
    await_free("y");
    take(o, "TRYFAIRLOCK y 0", 1);
    h_expect_reply(o, "UNLOCK y", "OK 0");
    h_close(spy);
    h_close(o);
    h_close(h);
    h_keep_passed();
}
END_TEST

/* Redisson's tryLock refuses while dlockd holds: it queues once (asking
 * again keeps its one place), its unlock is not the holder's, and its
 * acquireFailed takes the place back. */
START_TEST(redisson_refused_while_dlockd_holds) {
    h_redis_start();
    int d = h_dlockd_start_kept("fairlock", NULL);
    h_conn_t *h = h_connect_index(d);
    unsigned long long fh = take(h, "FAIRLOCK r", 1);
    char before[1024], after[1024];
    hgetall("r", before, sizeof(before));
    long long ttl = java_queued(java_try_lock("r", JAVA_T1, JAVA_WAIT_TRY));
    ck_assert_msg(ttl > 0 && ttl <= DEFAULT_LEASE_MS, "tryLock: ttl %lld", ttl);
    ttl = java_queued(java_try_lock("r", JAVA_T1, JAVA_WAIT_TRY));
    ck_assert_msg(ttl > 0 && ttl <= DEFAULT_LEASE_MS, "tryLock again: ttl %lld", ttl);
    const char *one[] = {JAVA_T1};
    expect_queue("r", one, 1, "Redisson asked twice");
    ck_assert_str_eq(java_unlock("r", JAVA_T1), "(nil)");
    hgetall("r", after, sizeof(after));
    ck_assert_str_eq(after, before);
    h_send(h, "STATUS r\n");
    const char *l = h_recv(h, H_WAIT_MS);
    long long holds = 0, t = 0;
    unsigned long long fence = 0;
    char tail;
    ck_assert_msg(l != NULL && sscanf(l, "OK MINE %lld %lld %llu%c", &holds, &t, &fence,
                                      &tail) == 3 && holds == 1 && fence == fh,
                  "STATUS r: '%s'", l ? l : "-");
    java_acquire_failed("r", JAVA_T1, JAVA_WAIT_TRY);
    expect_queue("r", NULL, 0, "after Redisson's acquireFailed");
    h_expect_reply(h, "UNLOCK r", "OK 0");
    await_free("r");
    h_close(h);
    h_keep_passed();
}
END_TEST

/* Redisson's grant takes its wait off every place in the queue (its places
 * are chained, each its predecessor's plus the wait). Queue: Redisson
 * thread 1, a dlockd waiter, Redisson thread 2, behind a dlockd holder
 * who holds for hold_ms. FIFO across Redisson and dlockd: once thread 1
 * has had its turn, the dlockd waiter comes before thread 2. */
static void redisson_grant_keeps_fifo(const char *extra, const char *wait, int hold_ms) {
    h_redis_start();
    int da = h_dlockd_start_kept("fairlock", extra), db = h_dlockd_start_kept("fairlock", extra);
    h_conn_t *h = h_connect_index(da), *w = h_connect_index(db);
    char fw[FIELD_MAX];
    take(h, "FAIRLOCK g", 1);
    ck_assert_int_gt(java_queued(java_try_lock("g", JAVA_T1, wait)), 0);
    enqueue(w, "FAIRLOCK g", "g", 1, fw);
    ck_assert_int_gt(java_queued(java_try_lock("g", JAVA_T2, wait)), 0);
    const char *order[] = {JAVA_T1, fw, JAVA_T2};
    expect_queue("g", order, 3, "Redisson 1, dlockd, Redisson 2");
    const char *ch1 = waiter_channel("g", JAVA_T1), *chw = waiter_channel("g", fw);
    const char *ch2 = waiter_channel("g", JAVA_T2);
    h_conn_t *spy1 = h_redis_subscriber(ch1), *spyw = h_redis_subscriber(chw), *spy2 = h_redis_subscriber(ch2);
    h_redis_await_subscribers(chw, 2);
    long long t0 = h_now_ms();
    while (h_now_ms() - t0 < hold_ms) {
        expect_queue("g", order, 3, "while the dlockd holder holds g");
        h_expect_silence(w, 50, "dlockd's waiter while h holds g");
    }

    h_expect_reply(h, "UNLOCK g", "OK 0");
    expect_message(spy1, ch1, "0");
    ck_assert_str_eq(java_try_lock("g", JAVA_T1, wait), "(nil)");
    /* What Redisson's grant left of the places behind thread 1. */
    long long sw = zscore("g", fw), s2 = zscore("g", JAVA_T2), now = h_redis_now_ms();
    fqueue_t q;
    queue_read("g", &q);
    ck_assert_str_eq(java_unlock("g", JAVA_T1), "(integer) 1");
    int w_woken = spy_next(spyw, 200) != NULL;
    int t2_woken = spy_next(spy2, 0) != NULL;
    const char *t2 = java_try_lock("g", JAVA_T2, wait);
    printf("fairlock: wait %s, lease_ms %s, held %d ms: after Redisson's grant the queue was "
           "[%s], the dlockd waiter's place ending in %lld ms, thread 2's in %lld ms; Redisson's "
           "unlock woke %s; thread 2's tryLock then: %s\n",
           wait, extra ? "1000" : "30000", hold_ms, fqueue_text(&q), sw < 0 ? -1 : sw - now,
           s2 < 0 ? -1 : s2 - now,
           w_woken ? (t2_woken ? "both" : "the dlockd waiter") : (t2_woken ? "thread 2" : "no one"),
           t2);
    fflush(stdout);
    /* PROTOCOL: a waiter's place is kept while its client waits. */
    int kept = q.n == 2 && strcmp(q.f[0], fw) == 0 && strcmp(q.f[1], JAVA_T2) == 0;
    ck_assert_msg(sw > now && kept,
                  "the dlockd waiter's place did not survive Redisson's grant of thread 1: it "
                  "ended %lld ms before, queue [%s] (Redisson's tryLock took its wait, %s ms, off "
                  "every place); Redisson's unlock then woke %s, and thread 2's tryLock answered "
                  "%s",
                  now - sw, fqueue_text(&q), wait, t2_woken ? "thread 2" : w_woken ? "the dlockd waiter" : "no one",
                  t2);
    ck_assert_msg(java_queued(t2) >= 0,
                  "Redisson thread 2 was granted ahead of the dlockd waiter queued before it");
    ck_assert_msg(w_woken, "Redisson's unlock did not publish on the dlockd waiter's channel");
    granted(w, "dlockd's waiter after Redisson thread 1", 1, PROMPT_MS);
    h_expect_reply(w, "UNLOCK g", "OK 0");
    expect_message(spy2, ch2, "0");
    ck_assert_str_eq(java_try_lock("g", JAVA_T2, wait), "(nil)");
    ck_assert_str_eq(java_unlock("g", JAVA_T2), "(integer) 1");
    h_close(spy2);
    h_close(spyw);
    h_close(spy1);
    h_close(w);
    h_close(h);
    h_keep_passed();
}

/* As Redisson's tryLock(5, SECONDS) does, with a dlockd whose lease_ms
 * (1000) is shorter than that wait. */
START_TEST(redisson_trylock_grant_keeps_fifo) {
    redisson_grant_keeps_fifo(SHORT_LEASE, JAVA_WAIT_TRY, 1500);
}
END_TEST

/* As Redisson's lock() does (fairLockWaitTimeout, 300000 ms by default),
 * with dlockd's default lease_ms (30000). */
START_TEST(redisson_lock_grant_keeps_fifo) {
    redisson_grant_keeps_fifo(NULL, JAVA_WAIT_LOCK, 0);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("fairlock");
    TCase *tc = tcase_create("fairlock");
    tcase_add_checked_fixture(tc, h_setup, h_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, reentry_fences_status_unlock);
    tcase_add_test(tc, lease_ends_watchdog_keeps);
    tcase_add_test(tc, fifo_across_two_daemons);
    tcase_add_test(tc, places_left_at_once);
    tcase_add_test(tc, places_kept_alive);
    tcase_add_test(tc, dead_daemons_place_ends);
    tcase_add_test(tc, queue_lost_with_redis_data);
    tcase_add_test(tc, place_left_after_redis_outage);
    tcase_add_test(tc, place_left_after_connection_killed);
    tcase_add_test(tc, unanswered_first_request_leaves_its_place);
    tcase_add_test(tc, tryfairlock_zero_takes_no_place);
    tcase_add_test(tc, kinds_do_not_mix);
    tcase_add_test(tc, plain_and_fair_exclude_across_daemons);
    tcase_add_test(tc, not_under_quorum);
    tcase_add_test(tc, forceunlock_wakes_first_waiter);
    tcase_add_test(tc, next_waiter_tries_at_head_lease_end);
    tcase_add_test(tc, redisson_ahead_served_first_then_wakes_dlockd);
    tcase_add_test(tc, dlockd_unlock_wakes_redisson_waiter);
    tcase_add_test(tc, redisson_refused_while_dlockd_holds);
    tcase_add_test(tc, redisson_trylock_grant_keeps_fifo);
    tcase_add_test(tc, redisson_lock_grant_keeps_fifo);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0); /* a failed test's measurements too */
    return h_main(suite());
}
