/* Integration tests of count-down latches: the protocol, waiters on two daemons, kinds, Redisson's layout, topologies.
 * SPDX-License-Identifier: MIT
 *
 * A latch is a count in Redis (Redisson's RCountDownLatch layout: a
 * string under the name's key, messages on
 * redisson_countdownlatch__channel__{key}: '1' set, '0' zero). Waits end
 * on replies and messages, never on a sleep: a check that nothing came
 * waits a bounded silence. */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/backend/keys.h"
#include "tests/support/harness.h"

/* Redisson's RCountDownLatch scripts, verbatim from
 * redisson/src/main/java/org/redisson/RedissonCountDownLatch.java (3.x). */

/* trySetCount(long count). KEYS: the latch, its channel; ARGV: 1
 * (NEW_COUNT_MESSAGE), the count, the publish command. */
static const char redisson_try_set_count[] =
    "if redis.call('exists', KEYS[1]) == 0 then "
    "redis.call('set', KEYS[1], ARGV[2]); "
    "redis.call(ARGV[3], KEYS[2], ARGV[1]); "
    "return 1 "
    "else "
    "return 0 "
    "end";

/* countDown(). KEYS: the latch, its channel; ARGV: 0 (ZERO_COUNT_MESSAGE),
 * the publish command. */
static const char redisson_count_down[] =
    "local v = redis.call('decr', KEYS[1]);"
    "if v <= 0 then redis.call('del', KEYS[1]) end;"
    "if v == 0 then redis.call(ARGV[2], KEYS[2], ARGV[1]) end;";

/* delete(). KEYS: the latch, its channel; ARGV: 1 (NEW_COUNT_MESSAGE), the
 * publish command. */
static const char redisson_delete[] =
    "if redis.call('del', KEYS[1]) == 1 then "
    "redis.call(ARGV[2], KEYS[2], ARGV[1]); "
    "return 1 "
    "else "
    "return 0 "
    "end";

/* A wake-up, or an answer that must not wait, comes within this (a busy
 * 2-core machine). */
#define PROMPT_MS 5000
/* How long nothing must come where nothing may. */
#define SILENCE_MS 300

/* ---- helpers -------------------------------------------------------------- */

static void keep(int d) {
    h_keep_log(d, "latch.%s.dlockd%d", tcase_name(), d);
}

/* Sends request; the reply must start with want (within PROMPT_MS). */
static const char *expect_prefix(h_conn_t *c, const char *request, const char *want) {
    h_send(c, "%s\n", request);
    const char *r = h_recv(c, PROMPT_MS);
    ck_assert_msg(r != NULL, "%s: no reply within %d ms", request, PROMPT_MS);
    ck_assert_msg(strncmp(r, want, strlen(want)) == 0, "%s: got '%s', wanted '%s...'", request,
                  r, want);
    return r;
}

/* The next line on c is want, within PROMPT_MS. */
static void expect_line(h_conn_t *c, const char *want, const char *what) {
    const char *r = h_recv(c, PROMPT_MS);
    ck_assert_msg(r != NULL, "%s: nothing within %d ms, wanted '%s'", what, PROMPT_MS, want);
    ck_assert_msg(strcmp(r, want) == 0, "%s: got '%s', wanted '%s'", what, r, want);
}

/* The latch's key, channel and dlockd's mark, with the default key_prefix. */
static const char *key_of(const char *name, char *out, size_t cap) {
    snprintf(out, cap, "dlock:%s", name);
    return out;
}

static const char *channel_of(const char *name, char *out, size_t cap) {
    snprintf(out, cap, "redisson_countdownlatch__channel__{dlock:%s}", name);
    return out;
}

static const char *mark_of(const char *name, char *out, size_t cap) {
    snprintf(out, cap, "dlock_latch:{dlock:%s}", name);
    return out;
}

/* One of Redisson's scripts on this test's redis-server (redis-cli --no-raw). */
static const char *redisson(const char *script, const char *name, const char *a1,
                            const char *a2, const char *a3) {
    char k[128], ch[160];
    const char *a[] = {"--no-raw", "EVAL", script, "2", key_of(name, k, sizeof(k)),
                       channel_of(name, ch, sizeof(ch)), a1, a2, a3, NULL};
    return h_redis_argv(a);
}

static const char *redis1(const char *cmd, const char *key) {
    const char *a[] = {cmd, key, NULL};
    return h_redis_argv(a);
}

/* The next message's payload on a SUBSCRIBE client (h_redis_subscriber). */
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

/* ---- the protocol ----------------------------------------------------------- */

START_TEST(protocol) {
    h_redis_start();
    int d = h_dlockd_start(NULL);
    keep(d);
    h_conn_t *c = h_connect_index(d);
    char k[128], m[128];

    /* No latch counts as 0. */
    h_expect_reply(c, "LATCHCOUNT l", "OK 0");
    h_expect_reply(c, "AWAIT l", "OK 0");
    h_expect_reply(c, "TRYAWAIT l", "OK 0");
    h_expect_reply(c, "TRYAWAIT l 100", "OK 0");
    h_expect_reply(c, "COUNTDOWN l", "OK 0");
    ck_assert_str_eq(redis1("EXISTS", key_of("l", k, sizeof(k))), "0");

    /* Set once: a second LATCHSET changes nothing. */
    h_expect_reply(c, "LATCHSET l 3", "OK 1");
    h_expect_reply(c, "LATCHSET l 7", "OK 0");
    h_expect_reply(c, "LATCHCOUNT l", "OK 3");
    ck_assert_str_eq(redis1("GET", k), "3");
    ck_assert_str_eq(redis1("EXISTS", mark_of("l", m, sizeof(m))), "1");
    ck_assert_str_eq(redis1("PTTL", k), "-1");

    /* TRYAWAIT's TIMEOUT says the count. */
    h_expect_reply(c, "TRYAWAIT l", "TIMEOUT 3");
    h_expect_reply(c, "TRYAWAIT l 0", "TIMEOUT 3");
    h_expect_reply(c, "TRYAWAIT l 50", "TIMEOUT 3");

    /* No holder, no lease, no fence: it is no lock. */
    h_expect_reply(c, "STATUS l", "OK FREE");
    h_expect_reply(c, "WHO l", "OK FREE");
    h_expect_reply(c, "FORCEUNLOCK l", "OK 0");
    expect_prefix(c, "UNLOCK l", "ERR NOTHELD");
    expect_prefix(c, "RENEW l", "ERR NOTHELD");
    h_expect_reply(c, "LATCHCOUNT l", "OK 3");

    /* Counted down to 0: gone, key and mark. */
    h_expect_reply(c, "COUNTDOWN l", "OK 2");
    h_expect_reply(c, "COUNTDOWN l", "OK 1");
    h_expect_reply(c, "TRYAWAIT l", "TIMEOUT 1");
    h_expect_reply(c, "COUNTDOWN l", "OK 0");
    ck_assert_str_eq(redis1("EXISTS", k), "0");
    ck_assert_str_eq(redis1("EXISTS", m), "0");
    h_expect_reply(c, "AWAIT l", "OK 0");
    h_expect_reply(c, "COUNTDOWN l", "OK 0");
    h_expect_reply(c, "LATCHCOUNT l", "OK 0");
    /* ... and set anew. */
    h_expect_reply(c, "LATCHSET l 1", "OK 1");
    h_expect_reply(c, "LATCHCOUNT l", "OK 1");

    /* Arguments. */
    expect_prefix(c, "LATCHSET z 0", "ERR ARGS");
    h_expect_reply(c, "LATCHSET z 2147483647", "OK 1");
    h_expect_reply(c, "LATCHCOUNT z", "OK 2147483647");
    expect_prefix(c, "LATCHSET z 2147483648", "ERR ARGS");
    expect_prefix(c, "LATCHSET z", "ERR ARGS");
    expect_prefix(c, "AWAIT z 5", "ERR ARGS");
    expect_prefix(c, "TRYAWAIT z 5 5", "ERR ARGS");
    expect_prefix(c, "COUNTDOWN", "ERR ARGS");
    h_close(c);
    h_keep_passed();
}
END_TEST

/* A TRYAWAIT with a wait: TIMEOUT <count> when it ends, with the count
 * as it was last read; released when the count reaches 0 before. */
START_TEST(tryawait_waits_then_times_out) {
    h_redis_start();
    int d = h_dlockd_start(NULL);
    keep(d);
    h_conn_t *c = h_connect_index(d), *w = h_connect_index(d), *adm = h_connect_index(d);
    h_expect_reply(c, "LATCHSET t 5", "OK 1");
    h_expect_reply(c, "COUNTDOWN t", "OK 4");
    long long t0 = h_now_ms();
    h_expect_reply(w, "TRYAWAIT t 300", "TIMEOUT 4");
    ck_assert_msg(h_now_ms() - t0 >= 290, "TRYAWAIT t 300 ended after %lld ms",
                  h_now_ms() - t0);

    /* Released by the last COUNTDOWN before its wait ends. */
    h_expect_reply(c, "LATCHSET u 1", "OK 1");
    h_send(w, "TRYAWAIT u 60000\n");
    h_await_waiters(adm, 1);
    h_redis_await_subscribed("redisson_countdownlatch__channel__{dlock:u}");
    h_expect_silence(w, SILENCE_MS, "TRYAWAIT u while its count is 1");
    h_expect_reply(c, "COUNTDOWN u", "OK 0");
    expect_line(w, "OK 0", "TRYAWAIT u after the last COUNTDOWN");
    h_await_waiters(adm, 0);
    h_close(adm);
    h_close(w);
    h_close(c);
    h_keep_passed();
}
END_TEST

/* CANCEL withdraws an AWAIT like any wait: untagged (bare CANCEL right
 * after it) and tagged (CANCEL #tag); nothing is left waiting. */
START_TEST(cancel_withdraws_await) {
    h_redis_start();
    int d = h_dlockd_start(NULL);
    keep(d);
    h_conn_t *c = h_connect_index(d), *w = h_connect_index(d), *adm = h_connect_index(d);
    h_expect_reply(c, "LATCHSET x 2", "OK 1");

    h_send(w, "AWAIT x\nCANCEL\n");
    expect_line(w, "ERR CANCELLED the wait was cancelled", "the cancelled AWAIT");
    expect_line(w, "OK 1", "CANCEL's own answer");

    h_send(w, "#a AWAIT x\n#b TRYAWAIT x 60000\n");
    h_await_waiters(adm, 2);
    h_send(w, "CANCEL #a\n");
    expect_line(w, "#a ERR CANCELLED the wait was cancelled", "the cancelled #a");
    expect_line(w, "OK 1", "CANCEL #a's own answer");
    h_send(w, "CANCEL #b\n");
    expect_line(w, "#b ERR CANCELLED the wait was cancelled", "the cancelled #b");
    expect_line(w, "OK 1", "CANCEL #b's own answer");
    h_await_waiters(adm, 0);
    h_expect_reply(w, "CANCEL #a", "OK 0");

    /* An AWAIT takes no turn on its name: the same connection's tagged
     * COUNTDOWN goes while it waits, and releases it. */
    h_expect_reply(c, "LATCHSET own 1", "OK 1");
    h_send(w, "#w AWAIT own\n");
    h_await_waiters(adm, 1);
    h_send(w, "#d COUNTDOWN own\n");
    expect_line(w, "#d OK 0", "the waiting connection's own COUNTDOWN");
    expect_line(w, "#w OK 0", "its AWAIT, released by it");

    /* The latch is as it was; a new AWAIT still ends at 0. */
    h_expect_reply(c, "LATCHCOUNT x", "OK 2");
    h_send(w, "AWAIT x\n");
    h_await_waiters(adm, 1);
    h_expect_reply(c, "COUNTDOWN x", "OK 1");
    h_expect_silence(w, SILENCE_MS, "AWAIT x at 1");
    h_expect_reply(c, "COUNTDOWN x", "OK 0");
    expect_line(w, "OK 0", "AWAIT x after the last COUNTDOWN");
    h_close(adm);
    h_close(w);
    h_close(c);
    h_keep_passed();
}
END_TEST

/* Redis killed while AWAITs wait, and restarted empty: the waits ride out
 * the outage (no ERR, no answer while Redis is away) and, the latch gone
 * with Redis's data (a latch that does not exist counts as 0), are
 * answered OK 0 once Redis is back; a new latch then works as before. */
START_TEST(redis_restarted_empty_while_awaiting) {
    h_redis_start();
    int d = h_dlockd_start("[redis]\ncommand_timeout_ms = 500\n");
    keep(d);
    h_conn_t *c = h_connect_index(d), *w = h_connect_index(d), *adm = h_connect_index(d);
    h_expect_reply(c, "LATCHSET r 2", "OK 1");
    h_send(w, "#a AWAIT r\n#b AWAIT r\n");
    h_await_waiters(adm, 2);
    /* Both have looked once (a wait whose first look meets an outage is
     * answered ERR BACKEND, as a LOCK's first try is): ops of one name
     * answer in order, and #b's look goes as #a's answer comes, before
     * the first LATCHCOUNT's; so the second's answer follows it. */
    h_expect_reply(c, "LATCHCOUNT r", "OK 2");
    h_expect_reply(c, "LATCHCOUNT r", "OK 2");
    h_redis_stop(SIGKILL);
    h_expect_silence(w, SILENCE_MS, "AWAITs while Redis is down");
    h_redis_start();
    const char *l1 = h_recv(w, H_WAIT_MS), *l2;
    ck_assert_msg(l1 != NULL, "no answer to the AWAITs once Redis was back, empty");
    char first[64];
    snprintf(first, sizeof(first), "%s", l1);
    l2 = h_recv(w, H_WAIT_MS);
    ck_assert_msg(l2 != NULL, "one AWAIT answered ('%s'), not the other", first);
    ck_assert_msg((strcmp(first, "#a OK 0") == 0 && strcmp(l2, "#b OK 0") == 0) ||
                      (strcmp(first, "#b OK 0") == 0 && strcmp(l2, "#a OK 0") == 0),
                  "AWAITs after the empty restart: '%s', '%s'", first, l2);
    h_await_waiters(adm, 0);
    h_expect_reply(c, "LATCHSET r 1", "OK 1");
    h_send(w, "AWAIT r\n");
    h_await_waiters(adm, 1);
    h_expect_reply(c, "COUNTDOWN r", "OK 0");
    expect_line(w, "OK 0", "a new latch's AWAIT after the restart");
    h_close(adm);
    h_close(w);
    h_close(c);
    h_keep_passed();
}
END_TEST

/* Waiters on two daemons (untagged on their own connections, and tagged
 * on one), all released by the last COUNTDOWN, none before it. */
#define PER_DAEMON 5
START_TEST(waiters_on_two_daemons_released_by_last_countdown) {
    h_redis_start();
    int d1 = h_dlockd_start(NULL), d2 = h_dlockd_start(NULL);
    keep(d1);
    keep(d2);
    h_conn_t *c = h_connect_index(d1);
    h_conn_t *adm1 = h_connect_index(d1), *adm2 = h_connect_index(d2);
    h_conn_t *w[2][PER_DAEMON], *tagged = h_connect_index(d2);
    h_expect_reply(c, "LATCHSET go 3", "OK 1");
    for (int i = 0; i < PER_DAEMON; i++) {
        w[0][i] = h_connect_index(d1);
        w[1][i] = h_connect_index(d2);
        h_send(w[0][i], "AWAIT go\n");
        h_send(w[1][i], i % 2 ? "AWAIT go\n" : "TRYAWAIT go 60000\n");
    }
    h_send(tagged, "#1 AWAIT go\n#2 AWAIT go\n#3 TRYAWAIT go 60000\n");
    h_await_waiters(adm1, PER_DAEMON);
    h_await_waiters(adm2, PER_DAEMON + 3);
    /* Both daemons watch the channel. */
    h_redis_await_subscribers("redisson_countdownlatch__channel__{dlock:go}", 2);

    h_expect_reply(c, "COUNTDOWN go", "OK 2");
    h_expect_reply(c, "COUNTDOWN go", "OK 1");
    for (int i = 0; i < PER_DAEMON; i++) {
        h_expect_silence(w[0][i], i ? 0 : SILENCE_MS, "AWAIT before the last COUNTDOWN");
        h_expect_silence(w[1][i], 0, "AWAIT before the last COUNTDOWN");
    }
    h_expect_silence(tagged, 0, "tagged AWAITs before the last COUNTDOWN");
    ck_assert_int_eq(h_info_value(adm1, "waiters"), PER_DAEMON);
    ck_assert_int_eq(h_info_value(adm2, "waiters"), PER_DAEMON + 3);

    long long t0 = h_now_ms();
    h_expect_reply(c, "COUNTDOWN go", "OK 0");
    for (int i = 0; i < PER_DAEMON; i++) {
        expect_line(w[0][i], "OK 0", "AWAIT on daemon 1 after the last COUNTDOWN");
        expect_line(w[1][i], "OK 0", "AWAIT on daemon 2 after the last COUNTDOWN");
    }
    int seen[4] = {0};
    for (int i = 0; i < 3; i++) {
        const char *r = h_recv(tagged, PROMPT_MS);
        ck_assert_msg(r != NULL, "tagged AWAIT %d: no answer", i);
        int t;
        ck_assert_msg(sscanf(r, "#%d OK 0", &t) == 1 && t >= 1 && t <= 3 && !seen[t],
                      "tagged answer '%s'", r);
        seen[t] = 1;
    }
    printf("latch: %d waiters on two daemons released within %lld ms of the last COUNTDOWN\n",
           2 * PER_DAEMON + 3, h_now_ms() - t0);
    h_await_waiters(adm1, 0);
    h_await_waiters(adm2, 0);
    for (int i = 0; i < PER_DAEMON; i++) {
        h_close(w[0][i]);
        h_close(w[1][i]);
    }
    h_close(tagged);
    h_close(adm2);
    h_close(adm1);
    h_close(c);
    h_keep_passed();
}
END_TEST

/* A latch is no lock and no semaphore, both ways: in Redis (another
 * daemon's kinds) and here (a name this daemon is waiting for). */
START_TEST(kinds_do_not_mix) {
    h_redis_start();
    int d1 = h_dlockd_start(NULL), d2 = h_dlockd_start(NULL);
    keep(d1);
    keep(d2);
    h_conn_t *a = h_connect_index(d1), *b = h_connect_index(d2), *w = h_connect_index(d1);
    h_conn_t *adm = h_connect_index(d1);
    const char *latch = "ERR KIND l is a count-down latch (LATCHSET, COUNTDOWN, AWAIT, LATCHCOUNT)";

    /* The other kinds on a latch, in Redis. */
    h_expect_reply(a, "LATCHSET l 2", "OK 1");
    h_expect_reply(b, "LOCK l", latch);
    h_expect_reply(b, "TRYLOCK l 0", latch);
    h_expect_reply(b, "RLOCK l", latch);
    h_expect_reply(b, "TRYWLOCK l 0", latch);
    h_expect_reply(b, "FAIRLOCK l", latch);
    h_expect_reply(b, "ELECT l v", latch);
    h_expect_reply(b, "SEMINIT l 3", latch);
    h_expect_reply(b, "ACQUIRE l 1", latch);
    h_expect_reply(b, "TRYACQUIRE l 1 0", latch);
    expect_prefix(b, "MLOCK 2 free l", "ERR KIND l is a count-down latch");
    expect_prefix(b, "RELEASE l 1", "ERR NOTHELD");
    h_expect_reply(b, "LATCHCOUNT l", "OK 2");

    /* ... and here, while a local AWAIT waits for it. */
    h_send(w, "AWAIT l\n");
    h_await_waiters(adm, 1);
    h_expect_reply(a, "LOCK l", latch);
    h_expect_reply(a, "SEMINIT l 1", latch);

    /* A latch's verbs on the other kinds: in Redis (daemon 1 asks), and
     * here (daemon 2, which holds them, asks). */
    const char *verbs[] = {"LATCHSET", "COUNTDOWN", "AWAIT", "TRYAWAIT", "LATCHCOUNT"};
    const char *args[] = {" 1", "", "", " 100", ""};
    expect_prefix(b, "LOCK p", "OK ");
    expect_prefix(b, "RLOCK r", "OK ");
    h_expect_reply(b, "SEMINIT s 2", "OK 1");
    h_expect_reply(b, "ACQUIRE s 1", "OK 1");
    for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++) {
        char req[64];
        for (int who = 0; who < 2; who++) {
            h_conn_t *c = who ? b : a;
            snprintf(req, sizeof(req), "%s p%s", verbs[i], args[i]);
            h_expect_reply(c, req, "ERR KIND p is held as a plain lock (LOCK, UNLOCK)");
            snprintf(req, sizeof(req), "%s r%s", verbs[i], args[i]);
            h_expect_reply(c, req,
                           "ERR KIND r is held as a read/write lock (RLOCK, WLOCK, RUNLOCK, "
                           "WUNLOCK)");
            snprintf(req, sizeof(req), "%s s%s", verbs[i], args[i]);
            h_expect_reply(c, req, "ERR KIND s is a semaphore (SEMINIT, ACQUIRE, RELEASE)");
        }
    }
    /* Nothing changed. */
    expect_prefix(b, "STATUS p", "OK MINE 1 ");
    h_expect_reply(b, "STATUS s", "OK SEM 1 1");
    /* Redisson keeps a semaphore and a latch alike (a string): one with no
     * permits out is a latch of its permits to the latch's verbs, as it is
     * to Redisson's. */
    h_expect_reply(b, "RELEASE s 1", "OK 0");
    /* The daemon keeps the name a semaphore while its release winds down
     * (its watch ending: about a round trip, PROTOCOL.md's ERR KIND), and
     * says so meanwhile. */
    long long until = h_now_ms() + H_WAIT_MS;
    for (;;) {
        h_send(a, "LATCHCOUNT s\n");
        const char *got = h_recv(a, H_WAIT_MS);
        ck_assert_msg(got != NULL, "LATCHCOUNT s: no reply");
        if (strcmp(got, "OK 2") == 0) break;
        ck_assert_msg(strcmp(got, "ERR KIND s is a semaphore (SEMINIT, ACQUIRE, RELEASE)") == 0 &&
                          h_now_ms() < until,
                      "LATCHCOUNT s: got '%s', wanted 'OK 2'", got);
        usleep(10000); /* poll interval, bounded by H_WAIT_MS */
    }

    /* The local AWAIT still ends at 0. */
    h_expect_reply(b, "COUNTDOWN l", "OK 1");
    h_expect_reply(b, "COUNTDOWN l", "OK 0");
    expect_line(w, "OK 0", "AWAIT l after the last COUNTDOWN");
    /* Gone, the name is free for any kind. */
    expect_prefix(a, "LOCK l", "OK ");
    h_close(adm);
    h_close(w);
    h_close(b);
    h_close(a);
    h_keep_passed();
}
END_TEST

/* ---- Redisson's layout, both ways -------------------------------------------- */

START_TEST(redisson_layout_both_ways) {
    h_redis_start();
    int d = h_dlockd_start(NULL);
    keep(d);
    h_conn_t *c = h_connect_index(d), *w = h_connect_index(d), *adm = h_connect_index(d);
    char k[128], ch[160], m[128];
    h_conn_t *spy = h_redis_subscriber(channel_of("l", ch, sizeof(ch)));

    /* dlockd's: the count a string under the name's key, no expiry;
     * LATCHSET publishes '1', the last COUNTDOWN '0', as Redisson does. */
    h_expect_reply(c, "LATCHSET l 2", "OK 1");
    ck_assert_str_eq(spy_next(spy, PROMPT_MS), "1");
    ck_assert_str_eq(redis1("TYPE", key_of("l", k, sizeof(k))), "string");
    ck_assert_str_eq(redis1("GET", k), "2");
    ck_assert_str_eq(redis1("PTTL", k), "-1");
    /* Redisson's getCount and trySetCount see it. */
    ck_assert_str_eq(redisson(redisson_try_set_count, "l", "1", "9", "publish"), "(integer) 0");
    h_expect_reply(c, "COUNTDOWN l", "OK 1");
    h_expect_silence(spy, SILENCE_MS, "a message before the count reaches 0");
    ck_assert_str_eq(redis1("GET", k), "1");
    h_expect_reply(c, "COUNTDOWN l", "OK 0");
    /* A Redisson await() wakes on it: ZERO_COUNT_MESSAGE. */
    ck_assert_str_eq(spy_next(spy, PROMPT_MS), "0");
    ck_assert_str_eq(redis1("EXISTS", k), "0");
    ck_assert_str_eq(redis1("EXISTS", mark_of("l", m, sizeof(m))), "0");

    /* Redisson's countDown releases dlockd's AWAIT, of a latch dlockd set. */
    h_expect_reply(c, "LATCHSET l 2", "OK 1");
    ck_assert_str_eq(spy_next(spy, PROMPT_MS), "1");
    h_send(w, "AWAIT l\n");
    h_await_waiters(adm, 1);
    h_redis_await_subscribers(ch, 2); /* the spy and dlockd */
    redisson(redisson_count_down, "l", "0", "publish", NULL);
    ck_assert_str_eq(redis1("GET", k), "1");
    h_expect_silence(w, SILENCE_MS, "AWAIT l at 1");
    h_expect_reply(c, "LATCHCOUNT l", "OK 1");
    long long t0 = h_now_ms();
    redisson(redisson_count_down, "l", "0", "publish", NULL);
    ck_assert_str_eq(spy_next(spy, PROMPT_MS), "0");
    expect_line(w, "OK 0", "AWAIT l after Redisson's countDown to 0");
    printf("latch: dlockd's AWAIT released %lld ms after Redisson's countDown\n",
           h_now_ms() - t0);
    /* Redisson's countDown leaves dlockd's mark: the next look takes it. */
    h_expect_reply(c, "LATCHCOUNT l", "OK 0");
    ck_assert_str_eq(redis1("EXISTS", m), "0");

    /* A mark left behind does not make a semaphore set later a latch. */
    h_expect_reply(c, "LATCHSET m 1", "OK 1");
    redisson(redisson_count_down, "m", "0", "publish", NULL);
    ck_assert_str_eq(redis1("EXISTS", mark_of("m", m, sizeof(m))), "1");
    h_expect_reply(c, "SEMINIT m 2", "OK 1");
    ck_assert_str_eq(redis1("EXISTS", m), "0");
    h_expect_reply(c, "ACQUIRE m 1", "OK 1");
    h_expect_reply(c, "RELEASE m 1", "OK 0");
    mark_of("l", m, sizeof(m));

    /* A latch Redisson set: dlockd counts, awaits and counts it down. */
    ck_assert_str_eq(redisson(redisson_try_set_count, "l", "1", "2", "publish"), "(integer) 1");
    ck_assert_str_eq(spy_next(spy, PROMPT_MS), "1");
    h_expect_reply(c, "LATCHCOUNT l", "OK 2");
    h_expect_reply(c, "LATCHSET l 5", "OK 0");
    h_expect_reply(c, "TRYAWAIT l", "TIMEOUT 2");
    h_send(w, "AWAIT l\n");
    h_await_waiters(adm, 1);
    h_expect_reply(c, "COUNTDOWN l", "OK 1");
    h_expect_silence(w, SILENCE_MS, "AWAIT l of Redisson's latch at 1");
    redisson(redisson_count_down, "l", "0", "publish", NULL);
    ck_assert_str_eq(spy_next(spy, PROMPT_MS), "0");
    expect_line(w, "OK 0", "AWAIT l of Redisson's latch after its countDown");

    /* Redisson's delete publishes NEW_COUNT ('1'): a waiter looks again
     * and finds no latch, which counts as 0. */
    h_expect_reply(c, "LATCHSET l 3", "OK 1");
    ck_assert_str_eq(spy_next(spy, PROMPT_MS), "1");
    h_send(w, "AWAIT l\n");
    h_await_waiters(adm, 1);
    h_expect_silence(w, SILENCE_MS, "AWAIT l at 3");
    ck_assert_str_eq(redisson(redisson_delete, "l", "1", "publish", NULL), "(integer) 1");
    ck_assert_str_eq(spy_next(spy, PROMPT_MS), "1");
    expect_line(w, "OK 0", "AWAIT l after Redisson's delete");
    h_close(spy);
    h_close(adm);
    h_close(w);
    h_close(c);
    h_keep_passed();
}
END_TEST

/* ---- topologies ------------------------------------------------------------- */

/* A dlockd on the running cluster; waits until every primary is up. */
static int start_cluster_dlockd(void) {
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
    keep(d);
    return d;
}

static int owner_of(const char *name) {
    char key[KEYS_KEY_MAX];
    return h_cluster_slot_owner((int)keys_slot(key, keys_lock(key, "dlock:", name, strlen(name))));
}

/* Waits until the node on port has n subscribers of a sharded channel. */
static void await_shard_subscribers(int port, const char *channel, int n) {
    long long end = h_now_ms() + H_WAIT_MS;
    for (;;) {
        const char *r = h_cluster_cmd(port, "PUBSUB SHARDNUMSUB %s", channel);
        const char *nl = r ? strrchr(r, '\n') : NULL;
        if (nl != NULL && atoi(nl + 1) >= n) return;
        ck_assert_msg(h_now_ms() < end, "%s never had %d shard subscribers: '%s'", channel, n,
                      r ? r : "-");
        usleep(5000);
    }
}

/* Cluster: latches on two primaries, waiters on two daemons released by
 * the last COUNTDOWN (SPUBLISH) and by Redisson's countDown with
 * spublish; kinds refused as on standalone. */
START_TEST(cluster_waiters_and_redisson) {
    h_cluster_start(3, 0);
    int d1 = start_cluster_dlockd(), d2 = start_cluster_dlockd();
    h_conn_t *c = h_connect_index(d1), *w1 = h_connect_index(d1), *w2 = h_connect_index(d2);
    h_conn_t *adm1 = h_connect_index(d1), *adm2 = h_connect_index(d2);
    char a[64] = "ca", b[64];
    for (int i = 0; i < 100000; i++) {
        snprintf(b, sizeof(b), "cb%d", i);
        if (owner_of(b) != owner_of(a)) break;
    }
    ck_assert_int_ne(owner_of(a), owner_of(b));
    const char *names[2] = {a, b};
    for (int n = 0; n < 2; n++) {
        const char *nm = names[n];
        char ch[160];
        channel_of(nm, ch, sizeof(ch));
        h_send(c, "LATCHSET %s 2\n", nm);
        expect_line(c, "OK 1", "LATCHSET on the cluster");
        h_send(w1, "AWAIT %s\n", nm);
        h_send(w2, "AWAIT %s\n", nm);
        h_await_waiters(adm1, 1);
        h_await_waiters(adm2, 1);
        await_shard_subscribers(owner_of(nm), ch, 2);
        h_send(c, "COUNTDOWN %s\n", nm);
        expect_line(c, "OK 1", "COUNTDOWN on the cluster");
        h_expect_silence(w1, SILENCE_MS, "AWAIT at 1 on the cluster");
        h_expect_silence(w2, 0, "AWAIT at 1 on the cluster");
        if (n == 0) {
            h_send(c, "COUNTDOWN %s\n", nm);
            expect_line(c, "OK 0", "the last COUNTDOWN on the cluster");
        } else {
            /* Redisson's countDown, sharded: spublish on the owner. */
            char k[128];
            const char *argv[] = {"EVAL", redisson_count_down, "2", key_of(nm, k, sizeof(k)), ch,
                                  "0", "spublish", NULL};
            h_redis_unix_argv(h_redis_index_of_port(owner_of(nm)), argv);
        }
        expect_line(w1, "OK 0", "AWAIT on daemon 1 of the cluster");
        expect_line(w2, "OK 0", "AWAIT on daemon 2 of the cluster");
        h_send(w2, "LATCHCOUNT %s\n", nm);
        expect_line(w2, "OK 0", "LATCHCOUNT after 0");
    }
    /* A name with a '{': Redisson's channel keeps the braces around the
     * key, so it hashes to another slot than the key, and Redis refuses
     * the script (CROSSSLOT). */
    h_send(c, "LATCHSET x{t}y 1\n");
    const char *r0 = h_recv(c, PROMPT_MS);
    ck_assert_msg(r0 != NULL && strncmp(r0, "ERR BACKEND", 11) == 0, "LATCHSET x{t}y: '%s'",
                  r0 ? r0 : "-");
    printf("latch: on the cluster, LATCHSET x{t}y: %s\n", r0);
    /* Kinds, in Redis across daemons. */
    h_send(c, "LATCHSET %s 1\n", a);
    expect_line(c, "OK 1", "LATCHSET on the cluster");
    h_send(w2, "LOCK %s\n", a);
    char want[160];
    snprintf(want, sizeof(want),
             "ERR KIND %s is a count-down latch (LATCHSET, COUNTDOWN, AWAIT, LATCHCOUNT)", a);
    expect_line(w2, want, "LOCK of a latch on the cluster");
    h_send(w2, "LOCK %s\n", b); /* counted down to 0 by Redisson: gone */
    const char *r = h_recv(w2, PROMPT_MS);
    ck_assert_msg(r != NULL && strncmp(r, "OK ", 3) == 0, "LOCK %s: '%s'", b, r ? r : "-");
    h_close(adm2);
    h_close(adm1);
    h_close(w2);
    h_close(w1);
    h_close(c);
    h_keep_passed();
}
END_TEST

/* Sentinel: the latch over the managed node, and Redisson's countDown on
 * the primary releasing an AWAIT. */
START_TEST(sentinel_latch) {
    int p = h_sentinels_start(0, 1);
    int d = h_dlockd_start_sentinel(NULL);
    keep(d);
    h_conn_t *c = h_connect_index(d), *w = h_connect_index(d), *adm = h_connect_index(d);
    h_expect_reply(c, "LATCHSET s 2", "OK 1");
    h_send(w, "AWAIT s\n");
    h_await_waiters(adm, 1);
    h_expect_reply(c, "COUNTDOWN s", "OK 1");
    h_expect_silence(w, SILENCE_MS, "AWAIT at 1 over Sentinel");
    char k[128], ch[160];
    const char *argv[] = {"EVAL", redisson_count_down, "2", key_of("s", k, sizeof(k)),
                          channel_of("s", ch, sizeof(ch)), "0", "publish", NULL};
    /* dlockd watches before Redisson's message goes */
    long long end = h_now_ms() + H_WAIT_MS;
    for (;;) {
        const char *r = h_redis_unix(p, "PUBSUB NUMSUB %s", ch);
        const char *nl = r ? strrchr(r, '\n') : NULL;
        if (nl != NULL && atoi(nl + 1) >= 1) break;
        ck_assert_msg(h_now_ms() < end, "dlockd never subscribed to %s", ch);
        usleep(5000);
    }
    h_redis_unix_argv(p, argv);
    expect_line(w, "OK 0", "AWAIT after Redisson's countDown over Sentinel");
    h_expect_reply(c, "LATCHCOUNT s", "OK 0");
    h_close(adm);
    h_close(w);
    h_close(c);
    h_keep_passed();
}
END_TEST

/* Quorum: a latch needs its count on one primary (BACKEND_CAP_ONE_COPY):
 * every verb is refused before Redis is asked. */
START_TEST(not_under_quorum) {
    char quorum[256];
    size_t k = 0;
    for (int i = 0; i < 3; i++)
        k += (size_t)snprintf(quorum + k, sizeof(quorum) - k, "%sredis://127.0.0.1:%d",
                              i ? " " : "", h_redis_port(h_redis_start_tcp(0, NULL)));
    char conf[1024];
    snprintf(conf, sizeof(conf),
             "[server]\nadmin_uids = 0\n[redis]\nquorum = %s\ncommand_timeout_ms = 1000\n"
             "connect_timeout_ms = 500\n",
             quorum);
    int d = h_dlockd_start_conf(conf);
    keep(d);
    h_conn_t *c = h_connect_index(d);
    const char *no = "ERR KIND count-down latches are not available with quorum";
    h_expect_reply(c, "LATCHSET q 1", no);
    h_expect_reply(c, "COUNTDOWN q", no);
    h_expect_reply(c, "AWAIT q", no);
    h_expect_reply(c, "TRYAWAIT q", no);
    h_expect_reply(c, "TRYAWAIT q 100", no);
    h_expect_reply(c, "LATCHCOUNT q", no);
    h_close(c);
    h_keep_passed();
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("latch");
    TCase *tc = tcase_create("latch");
    tcase_add_checked_fixture(tc, h_setup, h_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, protocol);
    tcase_add_test(tc, tryawait_waits_then_times_out);
    tcase_add_test(tc, cancel_withdraws_await);
    tcase_add_test(tc, redis_restarted_empty_while_awaiting);
    tcase_add_test(tc, waiters_on_two_daemons_released_by_last_countdown);
    tcase_add_test(tc, kinds_do_not_mix);
    tcase_add_test(tc, redisson_layout_both_ways);
    tcase_add_test(tc, cluster_waiters_and_redisson);
    tcase_add_test(tc, sentinel_latch);
    tcase_add_test(tc, not_under_quorum);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return h_main(suite());
}
