/* Integration tests of read/write locks against a real Redis: sharing,
 * FIFO, downgrade, kinds, disconnects, leases, two daemons, FORCEUNLOCK,
 * Redisson.
 * SPDX-License-Identifier: MIT */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/support/harness.h"

/* Redisson's RReadWriteLock scripts, verbatim from redisson/src/main/java/
 * org/redisson/RedissonReadLock.java and RedissonWriteLock.java at commit
 * 66863978b4a92093b97c1f8c96f182a77e81d50e (tryLockInnerAsync and
 * unlockInnerAsync of each). */
static const char redisson_read_lock[] =
    "local mode = redis.call('hget', KEYS[1], 'mode'); "
    "if (mode == false) then "
    "redis.call('hset', KEYS[1], 'mode', 'read'); "
    "redis.call('hset', KEYS[1], ARGV[2], 1); "
    "redis.call('set', KEYS[2] .. ':1', 1); "
    "redis.call('pexpire', KEYS[2] .. ':1', ARGV[1]); "
    "redis.call('pexpire', KEYS[1], ARGV[1]); "
    "return nil; "
    "end; "
    "if (mode == 'read') or (mode == 'write' and "
    "redis.call('hexists', KEYS[1], ARGV[3]) == 1) then "
    "local ind = redis.call('hincrby', KEYS[1], ARGV[2], 1); "
    "local key = KEYS[2] .. ':' .. ind;"
    "redis.call('set', key, 1); "
    "redis.call('pexpire', key, ARGV[1]); "
    "local remainTime = redis.call('pttl', KEYS[1]); "
    "redis.call('pexpire', KEYS[1], math.max(remainTime, ARGV[1])); "
    "return nil; "
    "end;"
    "return redis.call('pttl', KEYS[1]);";

static const char redisson_read_unlock[] =
    "local val = redis.call('get', KEYS[5]); "
    "if val ~= false then "
    "return tonumber(val);"
    "end; "
    "local mode = redis.call('hget', KEYS[1], 'mode'); "
    "if (mode == false) then "
    "redis.call(ARGV[3], KEYS[2], ARGV[1]); "
    "redis.call('set', KEYS[5], 1, 'px', ARGV[4]); "
    "return nil; "
    "end; "
    "local lockExists = redis.call('hexists', KEYS[1], ARGV[2]); "
    "if (lockExists == 0) then "
    "return nil;"
    "end; "
    "local counter = redis.call('hincrby', KEYS[1], ARGV[2], -1); "
    "if (counter == 0) then "
    "redis.call('hdel', KEYS[1], ARGV[2]); "
    "end;"
    "redis.call('del', KEYS[3] .. ':' .. (counter+1)); "
    "if (redis.call('hlen', KEYS[1]) > 1) then "
    "local maxRemainTime = -3; "
    "local keys = redis.call('hkeys', KEYS[1]); "
    "for n, key in ipairs(keys) do "
    "counter = tonumber(redis.call('hget', KEYS[1], key)); "
    "if type(counter) == 'number' then "
    "for i=counter, 1, -1 do "
    "local remainTime = redis.call('pttl', "
    "KEYS[4] .. ':' .. key .. ':rwlock_timeout:' .. i); "
    "maxRemainTime = math.max(remainTime, maxRemainTime);"
    "end; "
    "end; "
    "end; "
    "if maxRemainTime > 0 then "
    "redis.call('pexpire', KEYS[1], maxRemainTime); "
    "redis.call('set', KEYS[5], 0, 'px', ARGV[4]); "
    "return 0; "
    "end;"
    "if mode == 'write' then "
    "redis.call('set', KEYS[5], 0, 'px', ARGV[4]); "
    "return 0;"
    "end; "
    "end; "
    "redis.call('del', KEYS[1]); "
    "redis.call(ARGV[3], KEYS[2], ARGV[1]); "
    "redis.call('set', KEYS[5], 1, 'px', ARGV[4]); "
    "return 1; ";

static const char redisson_write_lock[] =
    "local mode = redis.call('hget', KEYS[1], 'mode'); "
    "if (mode == false) then "
    "redis.call('hset', KEYS[1], 'mode', 'write'); "
    "redis.call('hset', KEYS[1], ARGV[2], 1); "
    "redis.call('pexpire', KEYS[1], ARGV[1]); "
    "return nil; "
    "end; "
    "if (mode == 'write') then "
    "if (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then "
    "redis.call('hincrby', KEYS[1], ARGV[2], 1); "
    "local currentExpire = redis.call('pttl', KEYS[1]); "
    "redis.call('pexpire', KEYS[1], currentExpire + ARGV[1]); "
    "return nil; "
    "end; "
    "end;"
    "return redis.call('pttl', KEYS[1]);";

static const char redisson_write_unlock[] =
    "local val = redis.call('get', KEYS[3]); "
    "if val ~= false then "
    "return tonumber(val);"
    "end; "
    "local mode = redis.call('hget', KEYS[1], 'mode'); "
    "if (mode == false) then "
    "redis.call(ARGV[4], KEYS[2], ARGV[1]); "
    "redis.call('set', KEYS[3], 1, 'px', ARGV[5]); "
    "return nil; "
    "end;"
    "if (mode == 'write') then "
    "local lockExists = redis.call('hexists', KEYS[1], ARGV[3]); "
    "if (lockExists == 0) then "
    "return nil;"
    "else "
    "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); "
    "if (counter > 0) then "
    "redis.call('pexpire', KEYS[1], ARGV[2]); "
    "redis.call('set', KEYS[3], 0, 'px', ARGV[5]); "
    "return 0; "
    "else "
    "redis.call('hdel', KEYS[1], ARGV[3]); "
    "if (redis.call('hlen', KEYS[1]) == 1) then "
    "redis.call('del', KEYS[1]); "
    "redis.call(ARGV[4], KEYS[2], ARGV[1]); "
    "else "
    "redis.call('hset', KEYS[1], 'mode', 'read'); "
    "end; "
    "redis.call('set', KEYS[3], 1, 'px', ARGV[5]); "
    "return 1; "
    "end; "
    "end; "
    "end; "
    "return nil;";

/* What a Redisson client (instance id, thread 1) passes for
 * redisson.getReadWriteLock("dlock:x"): getLockName(threadId), the read
 * holds' timeout prefix (getReadWriteTimeoutNamePrefix), the channel
 * (getChannelName) and the timeout keys' prefix (getKeyPrefix). */
#define JAVA_OWNER   "5f0c2a8e-3b1d-4c6e-9a7f-2d4b6c8e0a1f:1"
#define JAVA_WRITER  JAVA_OWNER ":write"
#define JAVA_TIMEOUT "{dlock:x}:" JAVA_OWNER ":rwlock_timeout"
#define RW_CHANNEL_X "redisson_rwlock:{dlock:x}"
#define JAVA_LEASE   "30000" /* Redisson's lockWatchdogTimeout */

/* A wake-up, or an answer that must not wait, comes within this. */
#define PROMPT_MS 5000

/* ---- dlockd -------------------------------------------------------------- */

/* The fence of the "OK <fence> <holds>" line c gets next. */
static unsigned long long granted(h_conn_t *c, const char *what, long long holds, int timeout_ms) {
    const char *l = h_recv(c, timeout_ms);
    ck_assert_msg(l != NULL, "%s: no grant within %d ms", what, timeout_ms);
    unsigned long long fence;
    long long h;
    char tail;
    ck_assert_msg(sscanf(l, "OK %llu %lld%c", &fence, &h, &tail) == 2 && h == holds,
                  "%s: got '%s', wanted 'OK <fence> %lld'", what, l, holds);
    return fence;
}

/* Sends request and returns the fence of its grant. */
static unsigned long long take(h_conn_t *c, const char *request, long long holds) {
    h_send(c, "%s\n", request);
    return granted(c, request, holds, H_WAIT_MS);
}

/* Sends request and expects TIMEOUT <ttl_ms> with a ttl. */
static void expect_timeout(h_conn_t *c, const char *request) {
    h_send(c, "%s\n", request);
    const char *l = h_recv(c, H_WAIT_MS);
    long long ttl = 0;
    char tail;
    ck_assert_msg(l != NULL && sscanf(l, "TIMEOUT %lld%c", &ttl, &tail) == 1 && ttl > 0,
                  "%s: got '%s', wanted 'TIMEOUT <ttl>'", request, l ? l : "(nothing)");
}

/* Sends request and expects ERR KIND <text...> at once: a refusal, not a
 * wait for the holder. */
static void expect_kind(h_conn_t *c, const char *request, const char *text) {
    char want[256];
    snprintf(want, sizeof(want), "ERR KIND %s", text);
    h_send(c, "%s\n", request);
    const char *l = h_recv(c, PROMPT_MS);
    ck_assert_msg(l != NULL && strncmp(l, want, strlen(want)) == 0,
                  "%s: got '%s' within %d ms, wanted '%s...'", request, l ? l : "(nothing)",
                  PROMPT_MS, want);
}

/* STATUS name on c must say OK <mode> <holders> <mine> <ttl_ms>, ttl > 0. */
static void expect_status(h_conn_t *c, const char *name, const char *mode, long long holders,
                          long long mine) {
    h_send(c, "STATUS %s\n", name);
    const char *l = h_recv(c, H_WAIT_MS);
    char m[8] = "";
    long long n = -1, me = -1, ttl = 0;
    char tail;
    int ok = l != NULL && sscanf(l, "OK %7s %lld %lld %lld%c", m, &n, &me, &ttl, &tail) == 4;
    ck_assert_msg(ok && strcmp(m, mode) == 0 && n == holders && me == mine && ttl > 0,
                  "STATUS %s: got '%s', wanted 'OK %s %lld %lld <ttl>'", name, l ? l : "(nothing)",
                  mode, holders, mine);
}

/* ---- Redis --------------------------------------------------------------- */

/* Polls until redis-cli args prints want: RUNLOCK, WUNLOCK and a close
 * answer once the release is sent, not once Redis ran it (PROTOCOL.md). */
static void await_cli(const char *const args[], const char *want) {
    long long end = h_now_ms() + H_WAIT_MS;
    while (strcmp(h_redis_argv(args), want) != 0) {
        ck_assert_msg(h_now_ms() < end, "%s %s is '%s' after %d ms, wanted '%s'", args[0], args[1],
                      h_redis_argv(args), H_WAIT_MS, want);
        usleep(1000);
    }
}

/* The fence counter of dlock:x, 0 while no writer made it. */
static unsigned long long counter_x(void) {
    const char *a[] = {"GET", "redisson_lock_token:{dlock:x}", NULL};
    return strtoull(h_redis_argv(a), NULL, 10);
}

/* The read holds' timeout keys of name, {dlock:<name>}:<owner>:rwlock_timeout:<n>,
 * one a line (static buffer). */
static const char *timeout_keys(const char *name) {
    static char out[4096];
    char pattern[300];
    snprintf(pattern, sizeof(pattern), "{dlock:%s}:*:rwlock_timeout:*", name);
    const char *a[] = {"KEYS", pattern, NULL};
    snprintf(out, sizeof(out), "%s", h_redis_argv(a));
    return out;
}

static int lines(const char *s) {
    int n = s[0] != '\0';
    for (; *s != '\0'; s++) n += *s == '\n';
    return n;
}

/* ---- Redisson's scripts, as redis-cli shows their replies -------------------
 * "(nil)" for a grant, "(integer) <pttl>" for a refusal; an unlock's
 * "(integer) 1" released the lock, "(integer) 0" left holds. Each unlock
 * has its own latch key, as each Redisson unlock request does. */

static const char *java_latch(void) {
    static char latch[64];
    static int seq;
    snprintf(latch, sizeof(latch), "redisson_unlock_latch:{dlock:x}:req%d", ++seq);
    return latch;
}

static const char *java_read_lock(void) {
    const char *a[] = {"--no-raw", "EVAL", redisson_read_lock, "2", "dlock:x", JAVA_TIMEOUT,
                       JAVA_LEASE, JAVA_OWNER, JAVA_WRITER, NULL};
    return h_redis_argv(a);
}

static const char *java_read_unlock(void) {
    const char *a[] = {"--no-raw", "EVAL", redisson_read_unlock, "5", "dlock:x", RW_CHANNEL_X,
                       JAVA_TIMEOUT, "{dlock:x}", java_latch(), "0", JAVA_OWNER, "publish",
                       "10000", NULL};
    return h_redis_argv(a);
}

static const char *java_write_lock(void) {
    const char *a[] = {"--no-raw", "EVAL", redisson_write_lock, "1", "dlock:x", JAVA_LEASE,
                       JAVA_WRITER, NULL};
    return h_redis_argv(a);
}

static const char *java_write_unlock(void) {
    const char *a[] = {"--no-raw", "EVAL", redisson_write_unlock, "3", "dlock:x", RW_CHANNEL_X,
                       java_latch(), "1", JAVA_LEASE, JAVA_WRITER, "publish", "10000", NULL};
    return h_redis_argv(a);
}

/* ---- sharing and fairness ------------------------------------------------ */

START_TEST(readers_share_writer_waits) {
    h_redis_start();
    int d = h_dlockd_start_kept("rwlock", NULL);
    h_conn_t *r1 = h_connect_index(d), *r2 = h_connect_index(d), *w = h_connect_index(d);
    h_conn_t *adm = h_connect_index(d);
    unsigned long long f1 = take(r1, "RLOCK x", 1);
    unsigned long long f2 = take(r2, "RLOCK x", 1);
    /* No writer yet: the counter does not exist and reads do not raise it. */
    ck_assert_uint_eq(f1, 0);
    ck_assert_uint_eq(f2, 0);
    ck_assert_uint_eq(counter_x(), 0);
    expect_status(r1, "x", "READ", 2, 1);

    expect_timeout(w, "TRYWLOCK x 0");
    h_send(w, "WLOCK x\n");
    h_await_waiters(adm, 1);
    h_expect_silence(w, 300, "WLOCK x while two read it");
    h_send(r1, "RUNLOCK x\n");
    H_EXPECT(r1, "OK 0");
    expect_status(r2, "x", "READ", 1, 1);
    h_send(r2, "RUNLOCK x\n");
    H_EXPECT(r2, "OK 0");

    unsigned long long wf = granted(w, "WLOCK x", 1, PROMPT_MS);
    ck_assert_uint_gt(wf, f1);
    ck_assert_uint_eq(counter_x(), wf);
    expect_status(w, "x", "WRITE", 1, 1);
    expect_status(r1, "x", "WRITE", 1, 0);
    h_send(w, "WUNLOCK x\n");
    H_EXPECT(w, "OK 0");
    /* A read after a write learns that write's fence, and leaves it. */
    ck_assert_uint_eq(take(r1, "RLOCK x", 1), wf);
    ck_assert_uint_eq(counter_x(), wf);
    h_close(adm);
    h_close(w);
    h_close(r2);
    h_close(r1);
    h_keep_passed();
}
END_TEST

START_TEST(reader_after_waiting_writer_waits_fifo) {
    h_redis_start();
    int d = h_dlockd_start_kept("rwlock", NULL);
    h_conn_t *a = h_connect_index(d), *w = h_connect_index(d), *r = h_connect_index(d);
    h_conn_t *adm = h_connect_index(d);
    take(a, "RLOCK f", 1);
    h_send(w, "WLOCK f\n");
    h_await_waiters(adm, 1);
    /* Shared with a, but queued behind the writer: readers cannot starve it. */
    h_send(r, "RLOCK f\n");
    h_await_waiters(adm, 2);
    h_expect_silence(r, 300, "RLOCK f behind a waiting WLOCK");
    h_expect_silence(w, 0, "WLOCK f while a reads");

    h_send(a, "RUNLOCK f\n");
    H_EXPECT(a, "OK 0");
    unsigned long long wf = granted(w, "WLOCK f", 1, PROMPT_MS);
    h_expect_silence(r, 300, "RLOCK f while the writer holds it");
    h_send(w, "WUNLOCK f\n");
    H_EXPECT(w, "OK 0");
    ck_assert_uint_eq(granted(r, "RLOCK f", 1, PROMPT_MS), wf);
    h_close(adm);
    h_close(r);
    h_close(w);
    h_close(a);
    h_keep_passed();
}
END_TEST

START_TEST(downgrade_allowed_upgrade_refused) {
    h_redis_start();
    int d = h_dlockd_start_kept("rwlock", NULL);
    h_conn_t *c = h_connect_index(d), *o = h_connect_index(d);
    unsigned long long wf = take(c, "WLOCK x", 1);
    /* The read under one's own write gets the write's fence. */
    ck_assert_uint_eq(take(c, "RLOCK x", 1), wf);
    expect_status(c, "x", "WRITE", 1, 1);
    h_send(c, "WUNLOCK x\n");
    H_EXPECT(c, "OK 0");
    expect_status(c, "x", "READ", 1, 1);
    const char *mode[] = {"HGET", "dlock:x", "mode", NULL};
    await_cli(mode, "read");
    expect_timeout(o, "TRYWLOCK x 0");
    expect_status(o, "x", "READ", 1, 0);

    /* A reader asking to write would wait for itself. */
    take(o, "RLOCK u", 1);
    char before[1024], after[1024];
    h_redis_hgetall("dlock:u", before, sizeof(before));
    expect_kind(o, "WLOCK u", "upgrade not allowed");
    expect_kind(o, "TRYWLOCK u 0", "upgrade not allowed");
    h_redis_hgetall("dlock:u", after, sizeof(after));
    ck_assert_str_eq(after, before);
    expect_status(o, "u", "READ", 1, 1);
    h_close(o);
    h_close(c);
    h_keep_passed();
}
END_TEST

START_TEST(plain_and_rw_kinds_do_not_mix) {
    h_redis_start();
    int d1 = h_dlockd_start_kept("rwlock", NULL), d2 = h_dlockd_start_kept("rwlock", NULL);
    h_conn_t *a = h_connect_index(d1), *b = h_connect_index(d1), *e = h_connect_index(d2);
    take(a, "LOCK p", 1);
    expect_kind(b, "RLOCK p", "p is held as a plain lock");
    expect_kind(b, "WLOCK p", "p is held as a plain lock");
    expect_kind(a, "RUNLOCK p", "held as a plain lock");
    expect_kind(a, "WUNLOCK p", "held as a plain lock");
    take(b, "RLOCK q", 1);
    expect_kind(a, "LOCK q", "q is held as a read/write lock");
    expect_kind(b, "UNLOCK q", "held as a read/write lock");

    /* Another daemon knows nothing of q and p: the Redis scripts refuse. */
    char before[1024], after[1024];
    h_redis_hgetall("dlock:q", before, sizeof(before));
    long long t0 = h_now_ms();
    expect_kind(e, "LOCK q", "q is held as a read/write lock");
    printf("rwlock: LOCK of another daemon's read lock refused in %lld ms\n", h_now_ms() - t0);
    expect_kind(e, "TRYLOCK q 0", "q is held as a read/write lock");
    h_redis_hgetall("dlock:q", after, sizeof(after));
    ck_assert_str_eq(after, before);
    h_redis_hgetall("dlock:p", before, sizeof(before));
    expect_kind(e, "RLOCK p", "p is held as a plain lock");
    expect_kind(e, "TRYWLOCK p 0", "p is held as a plain lock");
    h_redis_hgetall("dlock:p", after, sizeof(after));
    ck_assert_str_eq(after, before);

    /* The refusals took nothing away. */
    h_send(a, "STATUS p\n");
    H_EXPECT_PREFIX(a, "OK MINE 1 ");
    expect_status(b, "q", "READ", 1, 1);
    h_close(e);
    h_close(b);
    h_close(a);
    h_keep_passed();
}
END_TEST

/* ---- disconnects, leases ------------------------------------------------- */

START_TEST(close_releases_reads_and_their_timeout_keys) {
    h_redis_start();
    int d = h_dlockd_start_kept("rwlock", NULL);
    h_conn_t *a = h_connect_index(d), *b = h_connect_index(d), *c = h_connect_index(d);
    h_conn_t *dw = h_connect_index(d), *e = h_connect_index(d), *adm = h_connect_index(d);
    take(b, "WLOCK x", 1);
    take(b, "RLOCK x", 1);
    h_send(b, "WUNLOCK x\n");
    H_EXPECT(b, "OK 0");
    take(a, "RLOCK x", 1);
    take(a, "RLOCK x", 2);
    expect_status(a, "x", "READ", 2, 2);
    ck_assert_int_eq(lines(timeout_keys("x")), 3);
    /* And one that holds y both ways when it goes. */
    take(dw, "WLOCK y", 1);
    take(dw, "RLOCK y", 1);
    ck_assert_int_eq(lines(timeout_keys("y")), 1);

    h_send(c, "WLOCK x\n");
    h_send(e, "RLOCK y\n");
    h_await_waiters(adm, 2);
    h_close(a);
    h_close(b);
    h_close(dw);
    granted(c, "WLOCK x after its readers closed", 1, PROMPT_MS);
    granted(e, "RLOCK y after its writer closed", 1, PROMPT_MS);

    /* Only the new holders are left: c's write on x, e's read on y. */
    const char *xlen[] = {"HLEN", "dlock:x", NULL}, *ylen[] = {"HLEN", "dlock:y", NULL};
    const char *xmode[] = {"HGET", "dlock:x", "mode", NULL};
    const char *ymode[] = {"HGET", "dlock:y", "mode", NULL};
    await_cli(xlen, "2");
    await_cli(xmode, "write");
    await_cli(ylen, "2");
    await_cli(ymode, "read");
    long long end = h_now_ms() + H_WAIT_MS;
    while (lines(timeout_keys("x")) != 0 || lines(timeout_keys("y")) != 1) {
        ck_assert_msg(h_now_ms() < end, "timeout keys left: x '%s', y '%s'", timeout_keys("x"),
                      timeout_keys("y"));
        usleep(1000);
    }
    expect_status(e, "y", "READ", 1, 1);
    h_close(adm);
    h_close(e);
    h_close(c);
    h_keep_passed();
}
END_TEST

START_TEST(watchdog_keeps_reads_and_lease_ends_them) {
    h_redis_start();
    int d = h_dlockd_start_kept("rwlock", "[lock]\nlease_ms = 1000\n");
    h_conn_t *k = h_connect_index(d), *l = h_connect_index(d);
    long long t0 = h_now_ms();
    take(k, "RLOCK y", 1);
    long long tz = h_now_ms();
    take(l, "RLOCK z 500", 1);
    const char *ev = h_recv(l, PROMPT_MS);
    long long lost = h_now_ms() - tz;
    ck_assert_msg(ev != NULL, "no !LOST z within %d ms of a 500 ms lease", PROMPT_MS);
    ck_assert_str_eq(ev, "!LOST z expired");
    ck_assert_int_ge(lost, 450); /* not before the lease: a little slack for timer rounding */
    printf("rwlock: read hold with lease 500 ms lost after %lld ms\n", lost);
    h_send(l, "STATUS z\n");
    H_EXPECT(l, "OK FREE");
    ck_assert_int_eq(lines(timeout_keys("z")), 0);

    /* 2.5 leases later the watchdog still keeps y, its timeout key too. */
    long long rest = 2500 - (h_now_ms() - t0);
    h_expect_silence(k, rest > 0 ? (int)rest : 0, "the watchdog's read hold of y");
    expect_status(k, "y", "READ", 1, 1);
    const char *keys = timeout_keys("y");
    ck_assert_int_eq(lines(keys), 1);
    const char *pttl[] = {"PTTL", keys, NULL};
    long long left = atoll(h_redis_argv(pttl));
    ck_assert_msg(left > 0 && left <= 1000, "PTTL %s = %lld after 2500 ms", keys, left);
    h_close(l);
    h_close(k);
    h_keep_passed();
}
END_TEST

/* ---- two daemons --------------------------------------------------------- */

/* holder of daemon 1 releases name with release; waiter of daemon 2 asked
 * with request and must be granted soon after; returns its fence. */
static unsigned long long handoff(h_conn_t *holder, const char *release, h_conn_t *waiter,
                                  const char *request, const char *what) {
    h_send(waiter, "%s\n", request);
    h_expect_silence(waiter, 300, request);
    h_redis_await_subscribed(RW_CHANNEL_X);
    long long t0 = h_now_ms();
    h_send(holder, "%s\n", release);
    H_EXPECT(holder, "OK 0");
    unsigned long long f = granted(waiter, request, 1, PROMPT_MS);
    printf("rwlock: %s of another daemon granted %lld ms after the %s\n", what, h_now_ms() - t0,
           release);
    return f;
}

START_TEST(two_daemons_wake_each_other) {
    h_redis_start();
    int d1 = h_dlockd_start_kept("rwlock", NULL), d2 = h_dlockd_start_kept("rwlock", NULL);
    h_conn_t *r = h_connect_index(d1), *w = h_connect_index(d2);
    unsigned long long rf = take(r, "RLOCK x", 1);
    unsigned long long wf = handoff(r, "RUNLOCK x", w, "WLOCK x", "writer");
    ck_assert_uint_gt(wf, rf);
    ck_assert_uint_eq(handoff(w, "WUNLOCK x", r, "RLOCK x", "reader"), wf);
    h_close(w);
    h_close(r);
    h_keep_passed();
}
END_TEST

/* FORCEUNLOCK of a read/write lock wakes its waiters on every daemon: a
 * writer of daemon 2 waits for daemon 1's writer, and the lock is forced,
 * first from daemon 2 (which holds nothing of it), then from daemon 1
 * (the holder's). Either way the waiter is granted at once, not when the
 * gone holder's lease (lease_ms, 30 s) would have ended. */
START_TEST(forceunlock_wakes_waiters_of_every_daemon) {
    h_redis_start();
    int d[2] = {h_dlockd_start_kept("rwlock", NULL), h_dlockd_start_kept("rwlock", NULL)};
    for (int from = 1; from >= 0; from--) {
        h_conn_t *holder = h_connect_index(d[0]), *waiter = h_connect_index(d[1]);
        h_conn_t *adm = h_connect_index(d[from]); /* tests run as root: admin */
        take(holder, "WLOCK x", 1);
        h_send(waiter, "WLOCK x\n");
        h_expect_silence(waiter, 300, "WLOCK x while another daemon's writer holds it");
        h_redis_await_subscribed(RW_CHANNEL_X);
        long long t0 = h_now_ms();
        h_send(adm, "FORCEUNLOCK x\n");
        H_EXPECT(adm, "OK 1");
        granted(waiter, from ? "WLOCK x after FORCEUNLOCK from the waiter's daemon"
                             : "WLOCK x after FORCEUNLOCK from the holder's daemon",
                1, PROMPT_MS);
        printf("rwlock: a writer granted %lld ms after FORCEUNLOCK from the %s daemon\n",
               h_now_ms() - t0, from ? "waiter's" : "holder's");
        h_send(waiter, "WUNLOCK x\n");
        H_EXPECT(waiter, "OK 0");
        h_close(adm);
        h_close(waiter);
        h_close(holder);
    }
    h_keep_passed();
}
END_TEST

/* A daemon dies holding a read lock: its hold ends with its lease (1 s),
 * not with the longer lease of a reader still alive. The survivor's
 * release sets the hash's TTL to what the dead reader's timeout key has
 * left, as Redisson's does, so the writer waits about one lease, not the
 * 30 s the survivor's RLOCK asked for. */
START_TEST(dead_daemons_read_ends_with_its_lease) {
    h_redis_start();
    int d1 = h_dlockd_start_kept("rwlock", "[lock]\nlease_ms = 1000\n");
    int d2 = h_dlockd_start_kept("rwlock", "[lock]\nlease_ms = 1000\n");
    h_conn_t *dead = h_connect_index(d1), *live = h_connect_index(d2), *w = h_connect_index(d2);
    take(dead, "RLOCK x", 1);
    take(live, "RLOCK x 30000", 1);
    h_send(w, "WLOCK x\n");
    h_expect_silence(w, 300, "WLOCK x while two read");
    long long t0 = h_now_ms();
    ck_assert_int_ne(h_dlockd_stop(d1, SIGKILL), -1);
    h_send(live, "RUNLOCK x\n");
    H_EXPECT(live, "OK 0");
    granted(w, "WLOCK x after the dead daemon's lease", 1, 1000 + 4000);
    long long took = h_now_ms() - t0;
    printf("rwlock: a dead daemon's read ended %lld ms after its SIGKILL (lease 1000 ms; "
           "the live reader's was 30000 ms)\n", took);
    h_close(w);
    h_close(live);
    h_close(dead);
    h_keep_passed();
}
END_TEST

/* Redis loses its data (a restart without persistence, here FLUSHALL):
 * the watchdog's next batched renewal of a read and of a write hold finds
 * them gone, and each holder hears !LOST expired; the name is free again. */
START_TEST(holds_lost_with_redis_data_are_reported) {
    h_redis_start();
    int d = h_dlockd_start_kept("rwlock", "[lock]\nlease_ms = 1000\n");
    h_conn_t *r = h_connect_index(d), *w = h_connect_index(d);
    take(r, "RLOCK lr", 1);
    take(w, "WLOCK lw", 1);
    const char *flush[] = {"FLUSHALL", NULL};
    h_redis_argv(flush);
    long long t0 = h_now_ms();
    const char *ev = h_recv(r, 1000 + 4000);
    ck_assert_msg(ev != NULL && strcmp(ev, "!LOST lr expired") == 0, "reader: '%s'",
                  ev ? ev : "(none)");
    ev = h_recv(w, 1000 + 4000);
    ck_assert_msg(ev != NULL && strcmp(ev, "!LOST lw expired") == 0, "writer: '%s'",
                  ev ? ev : "(none)");
    printf("rwlock: read and write holds reported lost %lld ms after Redis lost them\n",
           h_now_ms() - t0);
    h_send(r, "RUNLOCK lr\n");
    const char *l = h_recv(r, H_WAIT_MS);
    ck_assert_msg(l != NULL && strncmp(l, "ERR NOTHELD", 11) == 0, "RUNLOCK: %s", l ? l : "-");
    take(r, "WLOCK lr", 1);
    h_close(w);
    h_close(r);
    h_keep_passed();
}
END_TEST

/* ---- Redisson interop ---------------------------------------------------- */

START_TEST(redisson_and_dlockd_readers_share) {
    h_redis_start();
    int d = h_dlockd_start_kept("rwlock", NULL);
    h_conn_t *c = h_connect_index(d);
    ck_assert_str_eq(java_read_lock(), "(nil)");
    take(c, "RLOCK x", 1);
    expect_status(c, "x", "READ", 2, 1);
    ck_assert_str_eq(java_read_unlock(), "(integer) 0"); /* dlockd's read is left */
    expect_status(c, "x", "READ", 1, 1);
    ck_assert_int_eq(lines(timeout_keys("x")), 1);
    h_send(c, "RUNLOCK x\n");
    H_EXPECT(c, "OK 0");
    const char *exists[] = {"EXISTS", "dlock:x", NULL};
    await_cli(exists, "0");
    h_close(c);
    h_keep_passed();
}
END_TEST

START_TEST(redisson_write_unlock_wakes_dlockd_reader) {
    h_redis_start();
    int d = h_dlockd_start_kept("rwlock", NULL);
    h_conn_t *c = h_connect_index(d);
    ck_assert_str_eq(java_write_lock(), "(nil)");
    h_send(c, "RLOCK x\n");
    h_expect_silence(c, 300, "RLOCK x while Redisson writes");
    h_redis_await_subscribed(RW_CHANNEL_X);
    long long t0 = h_now_ms();
    ck_assert_str_eq(java_write_unlock(), "(integer) 1");
    granted(c, "RLOCK x after Redisson's write unlock", 1, PROMPT_MS);
    printf("rwlock: dlockd reader granted %lld ms after Redisson's write unlock\n",
           h_now_ms() - t0);
    expect_status(c, "x", "READ", 1, 1);
    h_close(c);
    h_keep_passed();
}
END_TEST

START_TEST(dlockd_writer_excludes_redisson_reader) {
    h_redis_start();
    int d = h_dlockd_start_kept("rwlock", NULL);
    h_conn_t *c = h_connect_index(d);
    take(c, "WLOCK x", 1);
    const char *r = java_read_lock();
    long long pttl = 0;
    ck_assert_msg(sscanf(r, "(integer) %lld", &pttl) == 1 && pttl > 0,
                  "Redisson's read lock under dlockd's write lock: '%s'", r);
    h_send(c, "WUNLOCK x\n");
    H_EXPECT(c, "OK 0");
    const char *exists[] = {"EXISTS", "dlock:x", NULL};
    await_cli(exists, "0");
    ck_assert_str_eq(java_read_lock(), "(nil)");
    expect_status(c, "x", "READ", 1, 0);
    h_close(c);
    h_keep_passed();
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("rwlock");
    TCase *tc = tcase_create("rwlock");
    tcase_add_checked_fixture(tc, h_setup, h_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, readers_share_writer_waits);
    tcase_add_test(tc, reader_after_waiting_writer_waits_fifo);
    tcase_add_test(tc, downgrade_allowed_upgrade_refused);
    tcase_add_test(tc, plain_and_rw_kinds_do_not_mix);
    tcase_add_test(tc, close_releases_reads_and_their_timeout_keys);
    tcase_add_test(tc, watchdog_keeps_reads_and_lease_ends_them);
    tcase_add_test(tc, two_daemons_wake_each_other);
    tcase_add_test(tc, forceunlock_wakes_waiters_of_every_daemon);
    tcase_add_test(tc, dead_daemons_read_ends_with_its_lease);
    tcase_add_test(tc, holds_lost_with_redis_data_are_reported);
    tcase_add_test(tc, redisson_and_dlockd_readers_share);
    tcase_add_test(tc, redisson_write_unlock_wakes_dlockd_reader);
    tcase_add_test(tc, dlockd_writer_excludes_redisson_reader);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return h_main(suite());
}
