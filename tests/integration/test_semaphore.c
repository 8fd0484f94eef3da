/* Integration tests of semaphores against a real Redis: permits, kinds,
 * Redisson's layout, FIFO, two daemons, disconnects, leases, loss, FORCEUNLOCK,
 * Redisson's own scripts.
 * SPDX-License-Identifier: MIT */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests/support/harness.h"

/* Redisson's RPermitExpirableSemaphore scripts, verbatim from
 * redisson/src/main/java/org/redisson/RedissonPermitExpirableSemaphore.java
 * at commit 66863978b4a92093b97c1f8c96f182a77e81d50e. */

/* tryAcquireAsync(List<String> ids, long timeoutDate). KEYS: the semaphore,
 * its timeout set, its channel; ARGV: permits, timeoutDate, now,
 * nonExpirableTimeout, the publish command, then one id per permit. */
static const char redisson_try_acquire[] =
    "local expiredIds = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3], 'limit', 0, ARGV[1]); "
    "if #expiredIds > 0 then "
    "redis.call('zrem', KEYS[2], unpack(expiredIds)); "
    "local value = redis.call('incrby', KEYS[1], #expiredIds); "
    "if tonumber(value) > 0 then "
    "redis.call(ARGV[5], KEYS[3], value); "
    "end;"
    "end; "
    "local value = redis.call('get', KEYS[1]); "
    "if (value ~= false and tonumber(value) >= tonumber(ARGV[1])) then "
    "redis.call('decrby', KEYS[1], ARGV[1]); "
    "for i = 6, #ARGV, 1 do "
    "redis.call('zadd', KEYS[2], ARGV[2], ARGV[i]); "
    "end; "
    "local ttl = redis.call('pttl', KEYS[1]); "
    "if ttl > 0 then "
    "redis.call('pexpire', KEYS[2], ttl); "
    "end; "
    "return 'OK'; "
    "end; "
    "local v = redis.call('zrange', KEYS[2], 0, 0, 'WITHSCORES'); "
    "if v[1] ~= nil and v[2] ~= ARGV[4] then "
    "return ':' .. tostring(v[2]); "
    "end "
    "return nil;";

/* tryReleaseAsync(String permitId). KEYS: the semaphore, its channel, its
 * timeout set; ARGV: the id, 1, now, the publish command. */
static const char redisson_try_release[] =
    "local expire = redis.call('zscore', KEYS[3], ARGV[1]);"
    "local removed = redis.call('zrem', KEYS[3], ARGV[1]);"
    "if tonumber(removed) ~= 1 then "
    "return 0;"
    "end;"
    "local value = redis.call('incrby', KEYS[1], ARGV[2]); "
    "redis.call(ARGV[4], KEYS[2], value); "
    "if tonumber(expire) <= tonumber(ARGV[3]) then "
    "return 0;"
    "end;"
    "return 1;";

/* tryReleaseAsync(List<String> permitsIds). KEYS: the semaphore, its
 * channel, its timeout set; ARGV: how many ids, now, the publish command,
 * then the ids. */
static const char redisson_try_release_list[] =
    "for i = 4, #ARGV, 1 do "
    "local expire = redis.call('zscore', KEYS[3], ARGV[i]);"
    "if expire== false or tonumber(expire) <= tonumber(ARGV[2]) then "
    "return 0;"
    "end; "
    "end; "
    "local expiredIds = redis.call('zrangebyscore', KEYS[3], 0, ARGV[2], 'limit', 0, -1); "
    "if #expiredIds > 0 then "
    "redis.call('zrem', KEYS[3], unpack(expiredIds)); "
    "local value = redis.call('incrby', KEYS[1], #expiredIds); "
    "if tonumber(value) > 0 then "
    "redis.call(ARGV[3], KEYS[2], value); "
    "end; "
    "end; "
    "local keys = {}; "
    "for i = 4, #ARGV, 1 do "
    "table.insert(keys, ARGV[i]); "
    "end; "
    "local removed = redis.call('zrem', KEYS[3], unpack(keys)); "
    "redis.call('incrby', KEYS[1], removed); "
    "redis.call(ARGV[3], KEYS[2], removed); "
    "return removed;";

/* trySetPermitsAsync(int permits). KEYS: the semaphore, its channel;
 * ARGV: permits, the publish command. */
static const char redisson_try_set_permits[] =
    "local value = redis.call('get', KEYS[1]); "
    "if (value == false) then "
    "redis.call('set', KEYS[1], ARGV[1]); "
    "redis.call(ARGV[2], KEYS[2], ARGV[1]); "
    "return 1;"
    "end;"
    "return 0;";

/* Redisson's nonExpirableTimeout: the score of a permit without a lease. */
#define NON_EXPIRABLE 922337203685477LL

/* A wake-up, or an answer that must not wait, comes within this. */
#define PROMPT_MS 5000
/* The short lease of the watchdog and loss cases (renewed every 333 ms). */
#define SHORT_LEASE_MS 1000
#define SHORT_LEASE "[lock]\nlease_ms = 1000\n"
/* dlockd's default lease_ms. */
#define DEFAULT_LEASE_MS 30000

/* ---- dlockd -------------------------------------------------------------- */

/* The next line on c must be "OK <held>", within timeout_ms. */
static void expect_held(h_conn_t *c, const char *what, long long held, int timeout_ms) {
    char want[32];
    snprintf(want, sizeof(want), "OK %lld", held);
    const char *l = h_recv(c, timeout_ms);
    ck_assert_msg(l != NULL, "%s: nothing within %d ms, wanted '%s'", what, timeout_ms, want);
    ck_assert_msg(strcmp(l, want) == 0, "%s: got '%s', wanted '%s'", what, l, want);
}

/* Sends request; its reply must be "OK <held>". */
static void take(h_conn_t *c, const char *request, long long held) {
    h_send(c, "%s\n", request);
    expect_held(c, request, held, H_WAIT_MS);
}

/* Sends request; its reply must start with prefix, at once: a refusal, not
 * a wait. */
static void expect_err(h_conn_t *c, const char *request, const char *prefix) {
    h_send(c, "%s\n", request);
    const char *l = h_recv(c, PROMPT_MS);
    ck_assert_msg(l != NULL && strncmp(l, prefix, strlen(prefix)) == 0,
                  "%s: got '%s' within %d ms, wanted '%s...'", request, l ? l : "(nothing)",
                  PROMPT_MS, prefix);
}

/* STATUS name on c must say OK SEM <available> <mine>. */
static void expect_sem(h_conn_t *c, const char *name, long long available, long long mine) {
    char want[64];
    snprintf(want, sizeof(want), "OK SEM %lld %lld", available, mine);
    h_send(c, "STATUS %s\n", name);
    const char *l = h_recv(c, H_WAIT_MS);
    ck_assert_msg(l != NULL && strcmp(l, want) == 0, "STATUS %s: got '%s', wanted '%s'", name,
                  l ? l : "(nothing)", want);
}

/* ---- Redis --------------------------------------------------------------- */

/* Redisson's names for redisson.getPermitExpirableSemaphore("dlock:<name>"):
 * the semaphore, suffixName(name, "timeout"), prefixName("redisson_sc",
 * name). */
static const char *sem_key(const char *name, char *out, size_t len) {
    snprintf(out, len, "dlock:%s", name);
    return out;
}

static const char *sem_ids_key(const char *name, char *out, size_t len) {
    snprintf(out, len, "{dlock:%s}:timeout", name);
    return out;
}

static const char *sem_channel(const char *name, char *out, size_t len) {
    snprintf(out, len, "redisson_sc:{dlock:%s}", name);
    return out;
}

/* The semaphore's permits available (-1: not set) and ids, read at once. */
static void counts(const char *name, long long *available, long long *ids) {
    char key[300], zset[310];
    const char *a[] = {"EVAL",
                       "return {redis.call('get', KEYS[1]) or '-1', redis.call('zcard', KEYS[2])}",
                       "2", sem_key(name, key, sizeof(key)),
                       sem_ids_key(name, zset, sizeof(zset)), NULL};
    const char *out = h_redis_argv(a);
    ck_assert_msg(sscanf(out, "%lld\n%lld", available, ids) == 2, "counts of %s: '%s'", name, out);
}

/* available + ids == size: every script, dlockd's and Redisson's, keeps it
 * whatever order they run in. */
static void check_counts(const char *name, long long size, const char *when) {
    long long avail, ids;
    counts(name, &avail, &ids);
    ck_assert_msg(avail >= 0 && avail + ids == size,
                  "%s: %s has %lld available and %lld ids; the size is %lld", when, name, avail,
                  ids, size);
}

/* Both exactly. */
static void expect_counts(const char *name, long long available, long long ids,
                          const char *when) {
    long long a, n;
    counts(name, &a, &n);
    ck_assert_msg(a == available && n == ids,
                  "%s: %s has %lld available and %lld ids, wanted %lld and %lld", when, name, a,
                  n, available, ids);
}

/* Polls until they are so: RELEASE and a close answer once the release is
 * sent, not once Redis ran it (PROTOCOL.md). */
static void await_counts(const char *name, long long available, long long ids,
                         const char *when) {
    long long end = h_now_ms() + H_WAIT_MS, a, n;
    for (;;) {
        counts(name, &a, &n);
        if (a == available && n == ids) return;
        ck_assert_msg(h_now_ms() < end,
                      "%s: %s has %lld available and %lld ids after %d ms, wanted %lld and %lld",
                      when, name, a, n, H_WAIT_MS, available, ids);
        usleep(1000);
    }
}

/* One permit id of the timeout set and its score. */
typedef struct permit_s {
    char id[160];
    long long score;
} permit_t;

/* ZRANGE {dlock:name}:timeout 0 -1 WITHSCORES into out; returns how many. */
static int permits_of(const char *name, permit_t *out, int max) {
    char zset[310];
    const char *a[] = {"ZRANGE", sem_ids_key(name, zset, sizeof(zset)), "0", "-1", "WITHSCORES",
                       NULL};
    char text[8192];
    snprintf(text, sizeof(text), "%s", h_redis_argv(a));
    int n = 0;
    char *save = NULL;
    for (char *id = strtok_r(text, "\n", &save); id != NULL; id = strtok_r(NULL, "\n", &save)) {
        char *score = strtok_r(NULL, "\n", &save);
        ck_assert_msg(score != NULL && n < max, "ZRANGE %s: odd or long output", zset);
        snprintf(out[n].id, sizeof(out[n].id), "%s", id);
        out[n].score = atoll(score);
        n++;
    }
    return n;
}

/* Polls until the daemon's pub/sub connection (CLIENT SETNAME
 * dlockd:<host>:<pid>) has a subscription: its waiters' wake-up is in
 * force. */
static void await_daemon_subscribed(int d) {
    char tail[32];
    snprintf(tail, sizeof(tail), ":%d", (int)h_dlockd_pid(d));
    const char *a[] = {"CLIENT", "LIST", "TYPE", "pubsub", NULL};
    long long end = h_now_ms() + H_WAIT_MS;
    for (;;) {
        char text[8192];
        snprintf(text, sizeof(text), "%s", h_redis_argv(a));
        char *save = NULL;
        for (char *l = strtok_r(text, "\n", &save); l != NULL; l = strtok_r(NULL, "\n", &save)) {
            char *name = strstr(l, " name=dlockd:"), *sub = strstr(l, " sub=");
            if (name == NULL || sub == NULL) continue;
            char *sp = strchr(name + 1, ' ');
            size_t nlen = sp ? (size_t)(sp - name) : strlen(name);
            if (nlen > strlen(tail) && strncmp(name + nlen - strlen(tail), tail, strlen(tail)) == 0 &&
                atoi(sub + 5) >= 1)
                return;
        }
        ck_assert_msg(h_now_ms() < end, "dlockd %d never subscribed", d);
        usleep(2000);
    }
}

/* Polls until Redis has run command at least want times. */
static void await_calls(const char *command, long long want) {
    long long end = h_now_ms() + H_WAIT_MS;
    while (h_redis_calls(command) < want) {
        ck_assert_msg(h_now_ms() < end, "Redis never ran %s %lld times (%lld)", command, want,
                      h_redis_calls(command));
        usleep(1000);
    }
}

/* The next message's payload (static buffer). */
static const char *spy_next(h_conn_t *s, int timeout_ms) {
    static char payload[64];
    /* *3 $7 message $<n> <channel> $<m> <payload> */
    for (int i = 0; i < 7; i++) {
        const char *l = h_recv(s, timeout_ms);
        ck_assert_msg(l != NULL, "no message on the channel within %d ms", timeout_ms);
        if (i == 2) ck_assert_str_eq(l, "message\r");
        if (i == 6) snprintf(payload, sizeof(payload), "%.*s", (int)strcspn(l, "\r"), l);
    }
    return payload;
}

/* ---- Redisson's scripts, as redis-cli --no-raw shows their replies --------
 * tryAcquire: "\"OK\"" granted, "(nil)" refused with no expiry known,
 * "\":<ms>\"" refused, the first permit expiring then; tryRelease: 1 or 0;
 * trySetPermits: 1 or 0. Ids are any unique strings here (Redisson's are
 * 16 random bytes, passed raw). */

static const char *java_try_set_permits(const char *name, int permits) {
    char key[300], ch[320], n[16];
    snprintf(n, sizeof(n), "%d", permits);
    const char *a[] = {"--no-raw", "EVAL", redisson_try_set_permits, "2",
                       sem_key(name, key, sizeof(key)), sem_channel(name, ch, sizeof(ch)), n,
                       "publish", NULL};
    return h_redis_argv(a);
}

/* timeout_date: a Java client's now + lease, or NON_EXPIRABLE. */
static const char *java_try_acquire(const char *name, long long timeout_date,
                                    const char *const ids[]) {
    char key[300], zset[310], ch[320], n[16], date[24], now[24], forever[24];
    const char *a[32] = {"--no-raw", "EVAL", redisson_try_acquire, "3",
                         sem_key(name, key, sizeof(key)), sem_ids_key(name, zset, sizeof(zset)),
                         sem_channel(name, ch, sizeof(ch)), n, date, now, forever, "publish"};
    size_t k = 12, count = 0;
    for (; ids[count] != NULL; count++) {
        ck_assert_uint_lt(k, 31);
        a[k++] = ids[count];
    }
    a[k] = NULL;
    snprintf(n, sizeof(n), "%zu", count);
    snprintf(date, sizeof(date), "%lld", timeout_date);
    snprintf(now, sizeof(now), "%lld", h_wall_ms());
    snprintf(forever, sizeof(forever), "%lld", NON_EXPIRABLE);
    return h_redis_argv(a);
}

static const char *java_try_release(const char *name, const char *id) {
    char key[300], zset[310], ch[320], now[24];
    snprintf(now, sizeof(now), "%lld", h_wall_ms());
    const char *a[] = {"--no-raw", "EVAL", redisson_try_release, "3",
                       sem_key(name, key, sizeof(key)), sem_channel(name, ch, sizeof(ch)),
                       sem_ids_key(name, zset, sizeof(zset)), id, "1", now, "publish", NULL};
    return h_redis_argv(a);
}

static const char *java_try_release_list(const char *name, const char *const ids[]) {
    char key[300], zset[310], ch[320], n[16], now[24];
    const char *a[32] = {"--no-raw", "EVAL", redisson_try_release_list, "3",
                         sem_key(name, key, sizeof(key)), sem_channel(name, ch, sizeof(ch)),
                         sem_ids_key(name, zset, sizeof(zset)), n, now, "publish"};
    size_t k = 10, count = 0;
    for (; ids[count] != NULL; count++) {
        ck_assert_uint_lt(k, 31);
        a[k++] = ids[count];
    }
    a[k] = NULL;
    snprintf(n, sizeof(n), "%zu", count);
    snprintf(now, sizeof(now), "%lld", h_wall_ms());
    return h_redis_argv(a);
}

/* The ms of a tryAcquire refusal "\":<ms>\"", or -1 if it is not one. */
static long long java_refusal_ms(const char *reply) {
    long long ms = -1;
    char tail;
    if (sscanf(reply, "\":%lld\"%c", &ms, &tail) != 1) return -1;
    return ms;
}

/* ---- semantics ----------------------------------------------------------- */

START_TEST(permits_counted_and_given_back) {
    h_redis_start();
    int d = h_dlockd_start_kept("semaphore", NULL);
    h_conn_t *a = h_connect_index(d), *b = h_connect_index(d);

    /* Never set: a try times out (an ACQUIRE would wait, as Redisson's). */
    ck_assert_int_eq(h_expect_timeout(b, "TRYACQUIRE s 1"), -1);
    h_expect_reply(a, "SEMINIT s 3", "OK 1");
    h_expect_reply(b, "SEMINIT s 5", "OK 0"); /* set once: unchanged */
    expect_counts("s", 3, 0, "after SEMINIT s 3 and 5");
    expect_sem(a, "s", 3, 0);

    take(a, "ACQUIRE s 1", 1);
    take(a, "TRYACQUIRE s 1", 2); /* a holder takes more */
    expect_sem(a, "s", 1, 2);
    expect_sem(b, "s", 1, 0);
    expect_counts("s", 1, 2, "a holds 2");
    h_expect_timeout(b, "TRYACQUIRE s 2");
    long long t0 = h_now_ms();
    h_expect_timeout(b, "TRYACQUIRE s 2 200");
    ck_assert_int_ge(h_now_ms() - t0, 190);
    take(b, "TRYACQUIRE s 1 0 60000", 1);
    expect_sem(b, "s", 0, 1);
    expect_counts("s", 0, 3, "a holds 2, b 1");

    /* More than held: refused, and nothing is given back. */
    expect_err(a, "RELEASE s 3", "ERR NOTHELD");
    expect_sem(a, "s", 0, 2);
    expect_counts("s", 0, 3, "after RELEASE s 3 of 2 held");
    take(a, "RELEASE s 1", 1);
    await_counts("s", 1, 2, "after a's RELEASE s 1");
    expect_sem(a, "s", 1, 1);
    take(a, "RELEASE s 1", 0);
    expect_err(a, "RELEASE s 1", "ERR NOTHELD");
    await_counts("s", 2, 1, "after a gave back all");
    expect_sem(a, "s", 2, 0);

    /* Bad numbers change nothing. */
    static const char *const bad[] = {
        "ACQUIRE s 0",       "ACQUIRE s 10001",       "TRYACQUIRE s 0",
        "TRYACQUIRE s 10001", "TRYACQUIRE s 10001 100", "RELEASE s 0",
        "RELEASE s 10001",   "ACQUIRE s -1",          "SEMINIT s 2147483648",
        "ACQUIRE s",         "SEMINIT s",             "RELEASE s",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) expect_err(b, bad[i], "ERR ARGS");
    expect_sem(b, "s", 2, 1);
    expect_counts("s", 2, 1, "after the bad requests");

    /* The most one request may ask for. */
    h_expect_reply(a, "SEMINIT big 10000", "OK 1");
    take(a, "TRYACQUIRE big 10000", 10000);
    expect_counts("big", 0, 10000, "a holds all 10000");
    /* ... and a connection may hold of one semaphore (LOCKMGR_SEM_PERMITS_MAX). */
    expect_err(a, "TRYACQUIRE big 1", "ERR LIMIT");
    take(a, "RELEASE big 10000", 0);
    await_counts("big", 10000, 0, "after RELEASE big 10000");
    h_close(b);
    h_close(a);
    h_keep_passed();
}
END_TEST

/* The value of GET and ZRANGE ... WITHSCORES of a semaphore, copied. */
static void sem_snapshot(const char *name, char *out, size_t len) {
    char key[300], zset[310];
    const char *get[] = {"GET", sem_key(name, key, sizeof(key)), NULL};
    const char *z[] = {"ZRANGE", sem_ids_key(name, zset, sizeof(zset)), "0", "-1", "WITHSCORES",
                       NULL};
    int n = snprintf(out, len, "%s\n", h_redis_argv(get));
    ck_assert(n > 0 && (size_t)n < len);
    snprintf(out + n, len - (size_t)n, "%s", h_redis_argv(z));
}

START_TEST(semaphores_and_locks_do_not_mix) {
    h_redis_start();
    int d1 = h_dlockd_start_kept("semaphore", NULL), d2 = h_dlockd_start_kept("semaphore", NULL);
    h_conn_t *a = h_connect_index(d1), *b = h_connect_index(d1), *o = h_connect_index(d1);
    h_conn_t *e = h_connect_index(d2);
    h_expect_reply(a, "SEMINIT s 3", "OK 1");
    /* With a lease, so that no renewal moves the scores meanwhile. */
    take(a, "ACQUIRE s 2 60000", 2);
    h_send(b, "LOCK p\n");
    H_EXPECT_PREFIX(b, "OK ");
    h_send(b, "RLOCK q\n");
    H_EXPECT_PREFIX(b, "OK ");
    char s0[2048], p0[1024], q0[1024], now[2048];
    sem_snapshot("s", s0, sizeof(s0));
    h_redis_hgetall("dlock:p", p0, sizeof(p0));
    h_redis_hgetall("dlock:q", q0, sizeof(q0));

    /* This daemon knows what each name is. */
    static const char *const lock_words[] = {"LOCK s", "TRYLOCK s", "TRYLOCK s 100", "RLOCK s",
                                             "WLOCK s", "TRYRLOCK s 0", "TRYWLOCK s 0"};
    for (size_t i = 0; i < sizeof(lock_words) / sizeof(lock_words[0]); i++) {
        expect_err(a, lock_words[i], "ERR KIND s is a semaphore");
        expect_err(o, lock_words[i], "ERR KIND s is a semaphore");
    }
    expect_err(a, "UNLOCK s", "ERR KIND a semaphore");
    expect_err(a, "RUNLOCK s", "ERR KIND a semaphore");
    expect_err(a, "WUNLOCK s", "ERR KIND a semaphore");
    expect_err(a, "WHO s", "ERR KIND");
    expect_err(o, "WHO s", "ERR KIND");
    expect_err(b, "ACQUIRE p 1", "ERR KIND p is held as a plain lock");
    expect_err(o, "TRYACQUIRE p 1", "ERR KIND p is held as a plain lock");
    expect_err(o, "SEMINIT p 2", "ERR KIND p is held as a plain lock");
    expect_err(b, "RELEASE p 1", "ERR KIND held as a plain lock");
    expect_err(o, "ACQUIRE q 1", "ERR KIND q is held as a read/write lock");
    expect_err(o, "SEMINIT q 1", "ERR KIND q is held as a read/write lock");
    expect_err(b, "RELEASE q 1", "ERR KIND held as a read/write lock");

    /* Another daemon knows nothing of them: Redis's scripts refuse. */
    for (size_t i = 0; i < sizeof(lock_words) / sizeof(lock_words[0]); i++)
        expect_err(e, lock_words[i], "ERR KIND s is a semaphore");
    expect_err(e, "WHO s", "ERR KIND");
    expect_err(e, "ACQUIRE p 1", "ERR KIND p is held as a plain lock");
    expect_err(e, "TRYACQUIRE p 1 100", "ERR KIND p is held as a plain lock");
    expect_err(e, "SEMINIT p 2", "ERR KIND p is held as a plain lock");
    expect_err(e, "ACQUIRE q 1", "ERR KIND q is held as a read/write lock");
    expect_err(e, "TRYACQUIRE q 1", "ERR KIND q is held as a read/write lock");
    expect_err(e, "SEMINIT q 1", "ERR KIND q is held as a read/write lock");
    /* A connection that holds nothing of the name: dlockd answers ERR
     * NOTHELD, as for UNLOCK of a read/write lock it does not hold, where
     * a reading of "UNLOCK of a semaphore, RELEASE of a lock: ERR KIND"
     * wants ERR KIND. Either way nothing changes. */
    static const char *const not_mine[] = {"UNLOCK s", "RUNLOCK s", "RELEASE p 1", "RELEASE q 1"};
    for (size_t i = 0; i < sizeof(not_mine) / sizeof(not_mine[0]); i++) {
        h_conn_t *cs[] = {o, e};
        for (size_t k = 0; k < 2; k++) {
            h_send(cs[k], "%s\n", not_mine[i]);
            const char *l = h_recv(cs[k], PROMPT_MS);
            ck_assert_msg(l != NULL && (strncmp(l, "ERR KIND", 8) == 0 ||
                                        strncmp(l, "ERR NOTHELD", 11) == 0),
                          "%s by a non-holder: got '%s'", not_mine[i], l ? l : "(nothing)");
        }
    }

    /* Nothing changed in Redis, and the refusals took nothing away. */
    sem_snapshot("s", now, sizeof(now));
    ck_assert_str_eq(now, s0);
    h_redis_hgetall("dlock:p", now, sizeof(now));
    ck_assert_str_eq(now, p0);
    h_redis_hgetall("dlock:q", now, sizeof(now));
    ck_assert_str_eq(now, q0);
    expect_sem(a, "s", 1, 2);
    expect_sem(e, "s", 1, 0);
    h_send(b, "STATUS p\n");
    H_EXPECT_PREFIX(b, "OK MINE 1 ");
    h_send(b, "STATUS q\n");
    H_EXPECT_PREFIX(b, "OK READ 1 1 ");
    h_close(e);
    h_close(o);
    h_close(b);
    h_close(a);
    h_keep_passed();
}
END_TEST

/* ---- Redis layout -------------------------------------------------------- */

/* Splits "<uuid>:<connection>:<k>" (the uuid has no ':'). */
static void split_id(const char *id, char *uuid, size_t ulen, long long *conn, long long *k) {
    const char *c1 = strchr(id, ':');
    ck_assert_msg(c1 != NULL, "permit id '%s' has no ':'", id);
    snprintf(uuid, ulen, "%.*s", (int)(c1 - id), id);
    char tail;
    ck_assert_msg(sscanf(c1 + 1, "%lld:%lld%c", conn, k, &tail) == 2 && *conn > 0 && *k > 0,
                  "permit id '%s' is not <uuid>:<connection>:<k>", id);
}

START_TEST(redis_layout_is_redissons) {
    h_redis_start();
    int d = h_dlockd_start_kept("semaphore", NULL);
    h_conn_t *a = h_connect_index(d), *b = h_connect_index(d), *w = h_connect_index(d);
    h_conn_t *adm = h_connect_index(d);
    h_conn_t *spy = h_redis_subscriber("redisson_sc:{dlock:s}");

    h_expect_reply(a, "SEMINIT s 4", "OK 1");
    /* trySetPermits's message: the permits. */
    ck_assert_str_eq(spy_next(spy, PROMPT_MS), "4");
    const char *type_s[] = {"TYPE", "dlock:s", NULL}, *pttl_s[] = {"PTTL", "dlock:s", NULL};
    const char *type_z[] = {"TYPE", "{dlock:s}:timeout", NULL};
    const char *pttl_z[] = {"PTTL", "{dlock:s}:timeout", NULL};
    ck_assert_str_eq(h_redis_argv(type_s), "string");
    ck_assert_str_eq(h_redis_argv(pttl_s), "-1");

    long long before = h_redis_now_ms();
    take(a, "ACQUIRE s 2", 2);
    take(b, "ACQUIRE s 1 5000", 1);
    long long after = h_redis_now_ms();
    ck_assert_str_eq(h_redis_argv(type_z), "zset");
    ck_assert_str_eq(h_redis_argv(pttl_z), "-1");
    expect_counts("s", 1, 3, "a holds 2, b 1");

    /* No other key: the two and the daemons' registry. */
    const char *keys[] = {"KEYS", "*", NULL};
    char all[1024];
    snprintf(all, sizeof(all), "%s", h_redis_argv(keys));
    int nkeys = 0;
    char *save = NULL;
    for (char *k = strtok_r(all, "\n", &save); k != NULL; k = strtok_r(NULL, "\n", &save)) {
        ck_assert_msg(strcmp(k, "dlock:s") == 0 || strcmp(k, "{dlock:s}:timeout") == 0 ||
                          strcmp(k, "dlock:dlockd daemons") == 0,
                      "unexpected key '%s'", k);
        nkeys++;
    }
    ck_assert_int_eq(nkeys, 3);
    const char *reg[] = {"HKEYS", "dlock:dlockd daemons", NULL};
    char uuid[64];
    snprintf(uuid, sizeof(uuid), "%s", h_redis_argv(reg));
    ck_assert_msg(strlen(uuid) == 36 && strchr(uuid, '\n') == NULL, "registry: '%s'", uuid);

    /* Ids <uuid>:<connection>:1..n, scored when they expire: Redis TIME of
     * the grant plus the lease (the watchdog's lease_ms for a). */
    permit_t p[8];
    ck_assert_int_eq(permits_of("s", p, 8), 3);
    long long conn_a = 0, conn_b = 0;
    int ks_a = 0;
    for (int i = 0; i < 3; i++) {
        char u[64];
        long long conn, k;
        split_id(p[i].id, u, sizeof(u), &conn, &k);
        ck_assert_str_eq(u, uuid);
        long long lease = p[i].score < before + 15000 ? 5000 : DEFAULT_LEASE_MS;
        ck_assert_msg(p[i].score >= before + lease && p[i].score <= after + lease,
                      "%s scored %lld: not %lld + its lease %lld (granted by %lld)", p[i].id,
                      p[i].score, before, lease, after);
        if (lease == 5000) {
            ck_assert_int_eq(k, 1);
            conn_b = conn;
        } else {
            ck_assert_msg(conn_a == 0 || conn_a == conn, "a's ids: two connections");
            ck_assert_msg(k <= 2, "a's id %s: k above its 2 permits", p[i].id);
            conn_a = conn;
            ks_a |= 1 << k;
        }
    }
    ck_assert_int_eq(ks_a, (1 << 1) | (1 << 2));
    ck_assert_msg(conn_b != 0 && conn_a != conn_b, "a and b: connections %lld and %lld", conn_a,
                  conn_b);

    /* A waiter listens on the channel; a release publishes the permits
     * available, as Redisson's does. */
    h_send(w, "ACQUIRE s 3\n");
    h_await_waiters(adm, 1);
    h_redis_await_subscribers("redisson_sc:{dlock:s}", 2); /* the spy and the daemon */
    take(a, "RELEASE s 2", 0);
    ck_assert_str_eq(spy_next(spy, PROMPT_MS), "3");
    expect_held(w, "ACQUIRE s 3 after a's release", 3, PROMPT_MS);
    expect_counts("s", 0, 4, "w holds 3, b 1");
    h_close(spy);
    h_close(adm);
    h_close(w);
    h_close(b);
    h_close(a);
    h_keep_passed();
}
END_TEST

/* ---- waiting ------------------------------------------------------------- */

START_TEST(fifo_large_request_not_overtaken) {
    h_redis_start();
    int d = h_dlockd_start_kept("semaphore", NULL);
    h_conn_t *a = h_connect_index(d), *w2 = h_connect_index(d), *w1 = h_connect_index(d);
    h_conn_t *t = h_connect_index(d), *adm = h_connect_index(d);
    h_expect_reply(a, "SEMINIT f 3", "OK 1");
    take(a, "ACQUIRE f 2", 2);
    long long calls = h_redis_calls("evalsha");
    h_send(w2, "ACQUIRE f 2\n");
    h_await_waiters(adm, 1);
    /* w2 tried, subscribed, and tried again once the subscription was in
     * force: two scripts. Then it waits quietly, and nothing is in flight
     * that would keep a newcomer from trying. */
    await_daemon_subscribed(d);
    await_calls("evalsha", calls + 2);
    h_await_waiters(adm, 1);
    /* One permit is free, but w2 came first and wants two. */
    h_send(w1, "ACQUIRE f 1\n");
    h_await_waiters(adm, 2);
    h_expect_silence(w1, 300, "ACQUIRE f 1 behind a waiting ACQUIRE f 2");
    /* No try ahead of the queue either: TIMEOUT -1, untried. */
    ck_assert_int_eq(h_expect_timeout(t, "TRYACQUIRE f 1"), -1);
    expect_counts("f", 1, 2, "the free permit still free");

    take(a, "RELEASE f 1", 1);
    expect_held(w2, "ACQUIRE f 2 once two are free", 2, PROMPT_MS);
    h_expect_silence(w1, 300, "ACQUIRE f 1 while none is free");
    take(a, "RELEASE f 1", 0);
    expect_held(w1, "ACQUIRE f 1", 1, PROMPT_MS);
    expect_counts("f", 0, 3, "w2 holds 2, w1 1");
    h_close(adm);
    h_close(t);
    h_close(w1);
    h_close(w2);
    h_close(a);
    h_keep_passed();
}
END_TEST

/* Holders on one daemon, waiters on another: only the channel wakes them
 * promptly. A holder's ids expire in 30 s (lease_ms), and a semaphore
 * never set is asked again every 1 s (LOCKMGR_NO_TTL_RETRY_MS). */
START_TEST(two_daemons_wake_each_other) {
    h_redis_start();
    int d1 = h_dlockd_start_kept("semaphore", NULL), d2 = h_dlockd_start_kept("semaphore", NULL);
    h_conn_t *a = h_connect_index(d1), *c = h_connect_index(d1), *adm1 = h_connect_index(d1);
    h_conn_t *b = h_connect_index(d2), *n = h_connect_index(d2), *adm2 = h_connect_index(d2);
    h_expect_reply(a, "SEMINIT s 2", "OK 1");
    take(a, "ACQUIRE s 2", 2);
    h_send(b, "ACQUIRE s 1\n");
    h_await_waiters(adm2, 1);
    await_daemon_subscribed(d2);
    h_expect_silence(b, 300, "ACQUIRE s 1 while the other daemon holds both");
    long long t0 = h_now_ms();
    take(a, "RELEASE s 1", 1);
    expect_held(b, "ACQUIRE s 1 on daemon B after A's RELEASE", 1, PROMPT_MS);
    printf("semaphore: a waiter on daemon B granted %lld ms after a RELEASE on daemon A\n",
           h_now_ms() - t0);

    /* And the other way. */
    h_send(c, "ACQUIRE s 1\n");
    h_await_waiters(adm1, 1);
    await_daemon_subscribed(d1);
    t0 = h_now_ms();
    take(b, "RELEASE s 1", 0);
    expect_held(c, "ACQUIRE s 1 on daemon A after B's RELEASE", 1, PROMPT_MS);
    printf("semaphore: a waiter on daemon A granted %lld ms after a RELEASE on daemon B\n",
           h_now_ms() - t0);
    expect_counts("s", 0, 2, "a and c hold one each");

    /* SEMINIT on A wakes an ACQUIRE of a semaphore never set, on B. */
    h_send(n, "ACQUIRE n 2\n");
    h_await_waiters(adm2, 1);
    h_redis_await_subscribers("redisson_sc:{dlock:n}", 1);
    t0 = h_now_ms();
    h_expect_reply(a, "SEMINIT n 2", "OK 1");
    expect_held(n, "ACQUIRE n 2 on daemon B after SEMINIT on A", 2, PROMPT_MS);
    printf("semaphore: a waiter on daemon B granted %lld ms after SEMINIT on daemon A "
           "(the 1 s retry would also have found it)\n",
           h_now_ms() - t0);
    expect_counts("n", 0, 2, "n's waiter holds both");
    h_close(adm2);
    h_close(n);
    h_close(b);
    h_close(adm1);
    h_close(c);
    h_close(a);
    h_keep_passed();
}
END_TEST

/* ---- disconnects, leases ------------------------------------------------- */

START_TEST(close_gives_permits_back_at_once) {
    h_redis_start();
    int d1 = h_dlockd_start_kept("semaphore", NULL), d2 = h_dlockd_start_kept("semaphore", NULL);
    h_conn_t *a = h_connect_index(d1), *wl = h_connect_index(d1), *adm1 = h_connect_index(d1);
    h_conn_t *wr = h_connect_index(d2), *adm2 = h_connect_index(d2);
    h_expect_reply(a, "SEMINIT s 3", "OK 1");
    take(a, "ACQUIRE s 3", 3);
    permit_t had[4];
    ck_assert_int_eq(permits_of("s", had, 4), 3);
    h_send(wl, "ACQUIRE s 2\n");
    h_send(wr, "ACQUIRE s 1\n");
    h_await_waiters(adm1, 1);
    h_await_waiters(adm2, 1);
    await_daemon_subscribed(d2);
    h_expect_silence(wr, 300, "ACQUIRE s 1 while a holds all");

    long long t0 = h_now_ms();
    h_close(a);
    expect_held(wl, "ACQUIRE s 2 on the same daemon after the holder closed", 2, PROMPT_MS);
    long long local = h_now_ms() - t0;
    expect_held(wr, "ACQUIRE s 1 on another daemon after the holder closed", 1, PROMPT_MS);
    printf("semaphore: a closed holder's permits granted after %lld ms on its daemon, "
           "%lld ms on another\n",
           local, h_now_ms() - t0);
    expect_counts("s", 0, 3, "wl holds 2, wr 1");
    permit_t now[4];
    int n = permits_of("s", now, 4);
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 3; k++)
            ck_assert_msg(strcmp(now[i].id, had[k].id) != 0, "the closed holder's %s is left",
                          had[k].id);

    /* A daemon stopped with SIGTERM gives its permits back too. */
    h_conn_t *w3 = h_connect_index(d2);
    h_send(w3, "ACQUIRE s 2\n");
    h_await_waiters(adm2, 1);
    await_daemon_subscribed(d2);
    t0 = h_now_ms();
    ck_assert_int_eq(h_dlockd_stop(d1, SIGTERM), 0);
    expect_held(w3, "ACQUIRE s 2 after the holder's daemon stopped", 2, PROMPT_MS);
    printf("semaphore: a SIGTERMed daemon's permits granted after %lld ms\n", h_now_ms() - t0);
    expect_counts("s", 0, 3, "wr holds 1, w3 2");
    h_close(w3);
    h_close(adm2);
    h_close(wr);
    h_close(adm1);
    h_close(wl);
    h_keep_passed();
}
END_TEST

START_TEST(lease_ends_permits_watchdog_keeps_them) {
    h_redis_start();
    int d = h_dlockd_start_kept("semaphore", SHORT_LEASE);
    h_conn_t *k = h_connect_index(d), *l = h_connect_index(d);
    h_expect_reply(k, "SEMINIT s 4", "OK 1");
    long long t0 = h_now_ms();
    take(k, "ACQUIRE s 2", 2);
    long long tl = h_now_ms();
    take(l, "ACQUIRE s 1 500", 1);
    h_expect_event(l, "!LOST s expired", PROMPT_MS, "a 500 ms lease");
    long long lost = h_now_ms() - tl;
    ck_assert_int_ge(lost, 450); /* not before the lease: slack for timer rounding */
    printf("semaphore: permits with lease 500 ms lost after %lld ms\n", lost);
    await_counts("s", 2, 2, "after the lease ended");
    expect_sem(l, "s", 2, 0);
    expect_err(l, "RELEASE s 1", "ERR NOTHELD");

    /* 3.5 leases later the watchdog still keeps k's. */
    long long rest = 3500 - (h_now_ms() - t0);
    h_expect_silence(k, rest > 0 ? (int)rest : 0, "the watchdog's permits");
    expect_sem(k, "s", 2, 2);
    long long now = h_redis_now_ms();
    permit_t p[4];
    ck_assert_int_eq(permits_of("s", p, 4), 2);
    for (int i = 0; i < 2; i++)
        ck_assert_msg(p[i].score > now && p[i].score <= now + SHORT_LEASE_MS,
                      "%s scored %lld at %lld, lease %d", p[i].id, p[i].score, now,
                      SHORT_LEASE_MS);
    h_expect_reply(k, "RENEW s", "OK 1000"); /* a watchdog hold stays one */
    expect_counts("s", 2, 2, "k holds 2");

    /* RENEW of permits with a lease sets a new one. */
    take(l, "ACQUIRE s 1 60000", 1);
    long long before = h_redis_now_ms();
    tl = h_now_ms();
    h_expect_reply(l, "RENEW s 800", "OK 800");
    long long after = h_redis_now_ms();
    permit_t q[4];
    ck_assert_int_eq(permits_of("s", q, 4), 3);
    int renewed = 0;
    for (int i = 0; i < 3; i++) {
        if (strcmp(q[i].id, p[0].id) == 0 || strcmp(q[i].id, p[1].id) == 0) continue; /* k's */
        ck_assert_msg(q[i].score >= before + 800 && q[i].score <= after + 800,
                      "%s renewed to %lld, not %lld..%lld + 800", q[i].id, q[i].score, before,
                      after);
        renewed++;
    }
    ck_assert_int_eq(renewed, 1);
    h_expect_event(l, "!LOST s expired", PROMPT_MS, "RENEW s 800");
    ck_assert_int_ge(h_now_ms() - tl, 750);
    await_counts("s", 2, 2, "after the renewed lease ended");
    h_close(l);
    h_close(k);
    h_keep_passed();
}
END_TEST

/* A daemon dies holding permits in watchdog mode: a waiter elsewhere gets
 * them once their last renewal's lease runs out, not before. */
START_TEST(dead_daemons_permits_end_with_their_lease) {
    h_redis_start();
    int d1 = h_dlockd_start_kept("semaphore", SHORT_LEASE);
    int d2 = h_dlockd_start_kept("semaphore", SHORT_LEASE);
    h_conn_t *dead = h_connect_index(d1), *w = h_connect_index(d2), *adm2 = h_connect_index(d2);
    h_expect_reply(dead, "SEMINIT s 2", "OK 1");
    take(dead, "ACQUIRE s 2", 2);
    h_send(w, "ACQUIRE s 1\n");
    h_await_waiters(adm2, 1);
    await_daemon_subscribed(d2);
    h_expect_silence(w, 300, "ACQUIRE s 1 while the other daemon holds both");

    /* Once the watchdog renewed them, the waiter's own retry (when the
     * ids it last saw expire) comes before they really do: it must ask
     * again then, not take them. */
    permit_t p[4];
    ck_assert_int_eq(permits_of("s", p, 4), 2);
    long long first = p[0].score, end = h_now_ms() + H_WAIT_MS;
    for (;;) {
        ck_assert_int_eq(permits_of("s", p, 4), 2);
        if (p[0].score > first && p[1].score > first) break;
        ck_assert_msg(h_now_ms() < end, "the watchdog never renewed the permits");
        usleep(2000);
    }
    /* When the dead daemon's ids expire at the earliest: their score now
     * (a renewal after this only pushes it later). */
    long long expires = p[0].score < p[1].score ? p[0].score : p[1].score;
    long long t0 = h_now_ms(); /* before TIME: took counts from no later than at */
    long long at = h_redis_now_ms();
    ck_assert_int_ne(h_dlockd_stop(d1, SIGKILL), -1);
    expect_held(w, "ACQUIRE s 1 after the dead daemon's lease", 1, SHORT_LEASE_MS + 4000);
    long long took = h_now_ms() - t0;
    ck_assert_msg(took + 2 >= expires - at, /* ms rounding of both clocks */
                  "granted %lld ms after the SIGKILL, but the dead daemon's permits had %lld ms "
                  "left",
                  took, expires - at);
    printf("semaphore: a dead daemon's permits granted %lld ms after its SIGKILL "
           "(%lld ms of lease left then; lease %d ms)\n",
           took, expires - at, SHORT_LEASE_MS);
    expect_counts("s", 1, 1, "the dead daemon's ids taken back, w holds 1");
    h_close(adm2);
    h_close(w);
    h_close(dead);
    h_keep_passed();
}
END_TEST

/* Redis loses its data (a restart without persistence, here FLUSHALL) and
 * the semaphore is set again: the holders hear !LOST expired, from the
 * watchdog's renewal or from an ACQUIRE of more, and the counts add up. */
START_TEST(permits_lost_with_redis_data_are_reported) {
    h_redis_start();
    int d = h_dlockd_start_kept("semaphore", SHORT_LEASE);
    h_conn_t *h1 = h_connect_index(d), *h2 = h_connect_index(d), *adm = h_connect_index(d);
    h_expect_reply(adm, "SEMINIT s 3", "OK 1");
    take(h1, "ACQUIRE s 2", 2);
    take(h2, "ACQUIRE s 1", 1);
    const char *flush[] = {"FLUSHALL", NULL};
    ck_assert_str_eq(h_redis_argv(flush), "OK");
    long long t0 = h_now_ms();
    h_expect_reply(adm, "SEMINIT s 3", "OK 1");
    /* h2 asks for more at once: its earlier permit is gone, so it hears
     * that first, and then holds only the new one. */
    h_send(h2, "ACQUIRE s 1\n");
    h_expect_event(h2, "!LOST s expired", SHORT_LEASE_MS + 4000, "h2 after FLUSHALL");
    expect_held(h2, "ACQUIRE s 1 after the loss", 1, H_WAIT_MS);
    h_expect_event(h1, "!LOST s expired", SHORT_LEASE_MS + 4000, "h1 after FLUSHALL");
    printf("semaphore: permits reported lost %lld ms after Redis lost them\n", h_now_ms() - t0);
    await_counts("s", 2, 1, "after the losses");
    expect_err(h1, "RELEASE s 1", "ERR NOTHELD");
    expect_sem(h1, "s", 2, 0);
    expect_sem(h2, "s", 2, 1);
    take(h1, "ACQUIRE s 2", 2);
    expect_counts("s", 0, 3, "h1 holds 2, h2 1");
    h_close(adm);
    h_close(h2);
    h_close(h1);
    h_keep_passed();
}
END_TEST

START_TEST(forceunlock_gives_every_permit_back) {
    h_redis_start();
    int d1 = h_dlockd_start_kept("semaphore", SHORT_LEASE);
    int d2 = h_dlockd_start_kept("semaphore", SHORT_LEASE);
    h_conn_t *a = h_connect_index(d1), *b = h_connect_index(d1), *adm1 = h_connect_index(d1);
    h_conn_t *e = h_connect_index(d2), *w = h_connect_index(d2), *adm2 = h_connect_index(d2);
    h_expect_reply(a, "SEMINIT s 5", "OK 1");
    take(a, "ACQUIRE s 2", 2);
    take(b, "ACQUIRE s 1 60000", 1);
    take(e, "ACQUIRE s 1", 1);
    h_send(w, "ACQUIRE s 3\n");
    h_await_waiters(adm2, 1);
    await_daemon_subscribed(d2);
    expect_counts("s", 1, 4, "a 2, b 1, e 1");

    long long t0 = h_now_ms();
    h_expect_reply(adm1, "FORCEUNLOCK s", "OK 1");
    h_expect_event(a, "!LOST s forced", PROMPT_MS, "a, a holder on the forcing daemon");
    h_expect_event(b, "!LOST s forced", PROMPT_MS, "b, a holder with a lease");
    expect_held(w, "ACQUIRE s 3 after FORCEUNLOCK", 3, PROMPT_MS);
    h_expect_event(e, "!LOST s expired", SHORT_LEASE_MS + 4000, "e, on another daemon");
    printf("semaphore: another daemon's holder heard of FORCEUNLOCK after %lld ms\n",
           h_now_ms() - t0);
    await_counts("s", 2, 3, "after FORCEUNLOCK, w holds 3");
    expect_err(a, "RELEASE s 1", "ERR NOTHELD");
    expect_err(e, "RELEASE s 1", "ERR NOTHELD");
    expect_sem(a, "s", 2, 0);
    take(w, "RELEASE s 3", 0);
    await_counts("s", 5, 0, "all back");
    h_expect_reply(adm1, "FORCEUNLOCK s", "OK 0");
    expect_counts("s", 5, 0, "after FORCEUNLOCK of nothing");
    h_close(adm2);
    h_close(w);
    h_close(e);
    h_close(adm1);
    h_close(b);
    h_close(a);
    h_keep_passed();
}
END_TEST

/* ---- Redisson interop ---------------------------------------------------- */

START_TEST(redisson_holder_times_dlockd_out) {
    h_redis_start();
    int d = h_dlockd_start_kept("semaphore", NULL);
    h_conn_t *c = h_connect_index(d);
    ck_assert_str_eq(java_try_set_permits("s", 3), "(integer) 1");
    h_expect_reply(c, "SEMINIT s 5", "OK 0"); /* Redisson set it: unchanged */
    expect_counts("s", 3, 0, "after trySetPermits");
    ck_assert_str_eq(java_try_set_permits("s", 7), "(integer) 0");

    static const char *const all[] = {"java-1", "java-2", "java-3", NULL};
    ck_assert_str_eq(java_try_acquire("s", NON_EXPIRABLE, all), "\"OK\"");
    check_counts("s", 3, "Redisson holds all");
    expect_sem(c, "s", 0, 0);
    ck_assert_int_eq(h_expect_timeout(c, "TRYACQUIRE s 1"), -1); /* no expiry known */
    long long t0 = h_now_ms();
    h_expect_timeout(c, "TRYACQUIRE s 1 300");
    ck_assert_int_ge(h_now_ms() - t0, 290);
    check_counts("s", 3, "after dlockd's tries");
    static const char *const more[] = {"java-4", NULL};
    ck_assert_str_eq(java_try_acquire("s", NON_EXPIRABLE, more), "(nil)");

    /* One back: dlockd takes it; Redisson's next try learns when dlockd's
     * permit expires. */
    ck_assert_str_eq(java_try_release("s", "java-1"), "(integer) 1");
    check_counts("s", 3, "after Redisson's tryRelease");
    take(c, "TRYACQUIRE s 1", 1);
    check_counts("s", 3, "dlockd holds 1");
    long long now = h_wall_ms();
    long long ms = java_refusal_ms(java_try_acquire("s", NON_EXPIRABLE, more));
    ck_assert_msg(ms > now && ms <= now + DEFAULT_LEASE_MS + 1000,
                  "Redisson's tryAcquire: ':%lld', wanted when dlockd's permit expires (%lld + "
                  "its lease)",
                  ms, now);
    static const char *const rest[] = {"java-2", "java-3", NULL};
    ck_assert_str_eq(java_try_release_list("s", rest), "(integer) 2");
    expect_counts("s", 2, 1, "dlockd holds 1");
    expect_sem(c, "s", 2, 1);
    h_close(c);
    h_keep_passed();
}
END_TEST

START_TEST(redisson_release_wakes_dlockd) {
    h_redis_start();
    int d = h_dlockd_start_kept("semaphore", NULL);
    h_conn_t *c = h_connect_index(d), *adm = h_connect_index(d);
    ck_assert_str_eq(java_try_set_permits("s", 2), "(integer) 1");
    /* With a lease of 60 s: dlockd's own retry comes only then. */
    static const char *const ids[] = {"java-1", "java-2", NULL};
    ck_assert_str_eq(java_try_acquire("s", h_wall_ms() + 60000, ids), "\"OK\"");
    check_counts("s", 2, "Redisson holds both");
    h_send(c, "ACQUIRE s 2\n");
    h_await_waiters(adm, 1);
    await_daemon_subscribed(d);
    h_expect_silence(c, 300, "ACQUIRE s 2 while Redisson holds both");
    ck_assert_str_eq(java_try_release("s", "java-1"), "(integer) 1");
    check_counts("s", 2, "after tryRelease(java-1)");
    h_expect_silence(c, 300, "ACQUIRE s 2 with one free");
    static const char *const last[] = {"java-2", NULL};
    long long t0 = h_now_ms();
    ck_assert_str_eq(java_try_release_list("s", last), "(integer) 1");
    expect_held(c, "ACQUIRE s 2 after Redisson's tryRelease", 2, PROMPT_MS);
    printf("semaphore: dlockd's ACQUIRE granted %lld ms after Redisson's tryRelease\n",
           h_now_ms() - t0);
    expect_counts("s", 0, 2, "dlockd holds both");
    h_close(adm);
    h_close(c);
    h_keep_passed();
}
END_TEST

START_TEST(dlockd_holder_fails_redisson_acquire) {
    h_redis_start();
    int d = h_dlockd_start_kept("semaphore", NULL);
    h_conn_t *c = h_connect_index(d), *o = h_connect_index(d);
    h_expect_reply(c, "SEMINIT s 2", "OK 1");
    take(c, "ACQUIRE s 1", 1);
    take(o, "ACQUIRE s 1 20000", 1);
    check_counts("s", 2, "dlockd holds both");
    static const char *const one[] = {"java-1", NULL};
    long long now = h_wall_ms();
    const char *r = java_try_acquire("s", NON_EXPIRABLE, one);
    long long ms = java_refusal_ms(r);
    /* The first permit to expire: o's, with its 20 s lease. */
    ck_assert_msg(ms > now + 10000 && ms <= now + 20000 + 1000,
                  "Redisson's tryAcquire under dlockd's permits: '%s' at %lld", r, now);
    ck_assert_int_gt(java_refusal_ms(java_try_acquire("s", h_wall_ms() + 5000, one)), now);
    check_counts("s", 2, "after Redisson's refused tries");
    expect_counts("s", 0, 2, "nothing taken");

    take(o, "RELEASE s 1", 0);
    await_counts("s", 1, 1, "after o's release");
    ck_assert_str_eq(java_try_acquire("s", NON_EXPIRABLE, one), "\"OK\"");
    check_counts("s", 2, "Redisson holds 1, dlockd 1");
    h_expect_timeout(o, "TRYACQUIRE s 1");
    ck_assert_str_eq(java_try_release("s", "java-1"), "(integer) 1");
    take(o, "TRYACQUIRE s 1", 1);
    expect_counts("s", 0, 2, "dlockd holds both again");
    h_close(o);
    h_close(c);
    h_keep_passed();
}
END_TEST

START_TEST(expired_redisson_permits_taken_back) {
    h_redis_start();
    int d = h_dlockd_start_kept("semaphore", NULL);
    h_conn_t *c = h_connect_index(d);
    h_conn_t *spy = h_redis_subscriber("redisson_sc:{dlock:s}");
    ck_assert_str_eq(java_try_set_permits("s", 3), "(integer) 1");
    ck_assert_str_eq(spy_next(spy, PROMPT_MS), "3");
    /* Taken with a lease that is already over (timeoutDate in the past). */
    static const char *const ids[] = {"java-1", "java-2", NULL};
    ck_assert_str_eq(java_try_acquire("s", h_wall_ms() - 1000, ids), "\"OK\"");
    expect_counts("s", 1, 2, "Redisson's expired permits still listed");
    expect_sem(c, "s", 3, 0); /* expired ones count as available */
    take(c, "TRYACQUIRE s 3", 3);
    expect_counts("s", 0, 3, "dlockd took them back");
    /* Taking them back publishes what is then available, as Redisson's
     * acquire does. */
    ck_assert_str_eq(spy_next(spy, PROMPT_MS), "3");
    permit_t p[4];
    ck_assert_int_eq(permits_of("s", p, 4), 3);
    for (int i = 0; i < 3; i++)
        ck_assert_msg(strncmp(p[i].id, "java-", 5) != 0, "%s is left", p[i].id);
    /* As Redisson says of a permit whose lease ended: not released by it. */
    ck_assert_str_eq(java_try_release("s", "java-1"), "(integer) 0");
    check_counts("s", 3, "after Redisson's tryRelease of a permit taken back");
    take(c, "RELEASE s 3", 0);
    await_counts("s", 3, 0, "after dlockd's release");
    ck_assert_str_eq(spy_next(spy, PROMPT_MS), "3");
    h_close(spy);
    h_close(c);
    h_keep_passed();
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("semaphore");
    TCase *tc = tcase_create("semaphore");
    tcase_add_checked_fixture(tc, h_setup, h_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, permits_counted_and_given_back);
    tcase_add_test(tc, semaphores_and_locks_do_not_mix);
    tcase_add_test(tc, redis_layout_is_redissons);
    tcase_add_test(tc, fifo_large_request_not_overtaken);
    tcase_add_test(tc, two_daemons_wake_each_other);
    tcase_add_test(tc, close_gives_permits_back_at_once);
    tcase_add_test(tc, lease_ends_permits_watchdog_keeps_them);
    tcase_add_test(tc, dead_daemons_permits_end_with_their_lease);
    tcase_add_test(tc, permits_lost_with_redis_data_are_reported);
    tcase_add_test(tc, forceunlock_gives_every_permit_back);
    tcase_add_test(tc, redisson_holder_times_dlockd_out);
    tcase_add_test(tc, redisson_release_wakes_dlockd);
    tcase_add_test(tc, dlockd_holder_fails_redisson_acquire);
    tcase_add_test(tc, expired_redisson_permits_taken_back);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return h_main(suite());
}
