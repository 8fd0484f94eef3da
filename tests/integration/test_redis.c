/* Integration tests of dlockd against a real Redis: Redisson interop, the
 * key layout, fences, Redis failures and recovery, shutdown, AUTH and db.
 * SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proto/proto.h"
#include "tests/support/harness.h"
#include "tests/support/redisson.h"

#define CHANNEL_X "redisson_lock__channel:{dlock:x}"

/* ---- failure reports ------------------------------------------------------
 * Check ends a failed test with _exit() and h_main() removes the run's
 * directory, so each daemon's log is hard-linked to H_KEEP_DIR/<test>.dlockd<N>.log
 * and the link removed when the test passes: after a failure the logs stay. */

static void keep_log(int d) {
    h_keep_log(d, "%s.dlockd%d", tcase_name(), d);
}

static void setup(void) {
    h_setup();
}

#define PASSED() h_keep_passed()

/* The last bytes of dlockd d's log, for a failure message (static buffer). */
static const char *log_tail(int d) {
    static char out[2048];
    out[0] = '\0';
    FILE *f = fopen(h_dlockd_log(d), "r");
    if (f == NULL) return out;
    if (fseek(f, 0, SEEK_END) == 0 && ftell(f) > (long)sizeof(out) - 1)
        fseek(f, -(long)(sizeof(out) - 1), SEEK_END);
    else
        fseek(f, 0, SEEK_SET);
    size_t n = fread(out, 1, sizeof(out) - 1, f);
    out[n] = '\0';
    fclose(f);
    return out;
}

/* ---- helpers ------------------------------------------------------------ */

/* Waits until key is gone: UNLOCK answers once the release is sent, not
 * once Redis ran it (PROTOCOL.md). */
static void await_gone(const char *key) {
    const char *exists[] = {"EXISTS", key, NULL};
    long long t0 = h_now_ms();
    while (strcmp(h_redis_argv(exists), "0") != 0) {
        ck_assert_msg(h_now_ms() - t0 < H_WAIT_MS, "%s still exists %d ms after the UNLOCK",
                      key, H_WAIT_MS);
        usleep(1000);
    }
}

/* Redisson's lock script on key for field (lease 30000), as redis-cli shows
 * the reply: "(nil)" when acquired, "(integer) <pttl>" when taken. */
static const char *redisson_try_lock(const char *key, const char *field) {
    const char *a[] = {"--no-raw", "EVAL", redisson_lock, "1", key, "30000", field, NULL};
    return h_redis_argv(a);
}

static const char *redisson_unlock_x(const char *field) {
    const char *a[] = {"--no-raw", "EVAL", redisson_unlock, "2", "dlock:x", CHANNEL_X,
                       "0", "30000", field, NULL};
    return h_redis_argv(a);
}

/* Sends LOCK <name> and returns the fence of the "OK <fence> <holds>" reply. */
static unsigned long long lock_ok(h_conn_t *c, const char *name, long long holds) {
    h_send(c, "LOCK %s\n", name);
    const char *l = h_reply(c, H_WAIT_MS, H_EVENTS_SKIP);
    ck_assert_msg(l != NULL, "LOCK %s: no reply", name);
    unsigned long long fence;
    long long h;
    char tail;
    ck_assert_msg(sscanf(l, "OK %llu %lld%c", &fence, &h, &tail) == 2,
                  "LOCK %s: got '%s', wanted 'OK <fence> %lld'", name, l, holds);
    ck_assert_int_eq(h, holds);
    ck_assert_msg(fence > 0, "LOCK %s: fence 0 in '%s'", name, l);
    return fence;
}

static unsigned long long fence_of(const char *line) {
    ck_assert_msg(strncmp(line, "OK ", 3) == 0, "not an OK grant: '%s'", line);
    char *end;
    errno = 0;
    unsigned long long f = strtoull(line + 3, &end, 10);
    ck_assert_msg(errno == 0 && end != line + 3 && *end == ' ', "bad fence in '%s'", line);
    return f;
}

/* 1 if INFO on c says redis=<state>. */
static int redis_is(h_conn_t *c, const char *state) {
    h_send(c, "INFO\n");
    const char *l = h_reply(c, H_WAIT_MS, H_EVENTS_SKIP);
    ck_assert_ptr_nonnull(l);
    ck_assert_msg(strncmp(l, "OK ", 3) == 0, "INFO said '%s'", l);
    char want[32];
    snprintf(want, sizeof(want), " redis=%s", state);
    const char *p = strstr(l, want);
    return p != NULL && (p[strlen(want)] == ' ' || p[strlen(want)] == '\0');
}

/* Polls INFO until redis=<state>, at most H_WAIT_MS. */
static void wait_redis(h_conn_t *c, const char *state) {
    long long end = h_now_ms() + H_WAIT_MS;
    while (!redis_is(c, state)) {
        ck_assert_msg(h_now_ms() < end, "INFO never showed redis=%s within %d ms", state,
                      H_WAIT_MS);
        usleep(10000);
    }
}

/* Starts a dlockd, watches its log, and waits until it is connected to Redis. */
static int start_d(const char *extra) {
    int d = h_dlockd_start(extra);
    keep_log(d);
    h_conn_t *c = h_connect_index(d);
    wait_redis(c, "up");
    h_close(c);
    return d;
}

/* A RESP line from a raw Redis connection, without its CR. */
static const char *resp_line(h_conn_t *c) {
    const char *l = h_recv(c, H_WAIT_MS);
    ck_assert_msg(l != NULL, "no RESP line from redis");
    size_t n = strlen(c->line);
    if (n > 0 && c->line[n - 1] == '\r') c->line[n - 1] = '\0';
    return c->line;
}

/* ---- Redisson interop --------------------------------------------------- */

START_TEST(redisson_excluded_by_dlockd_holder) {
    h_redis_start();
    int d = start_d(NULL);
    h_conn_t *c = h_connect_index(d);
    lock_ok(c, "x", 1);

    const char *r = redisson_try_lock("dlock:x", "javauuid:1");
    long long pttl = -1;
    ck_assert_msg(sscanf(r, "(integer) %lld", &pttl) == 1 && pttl > 0,
                  "Redisson locked a lock dlockd holds: '%s'", r);

    h_send(c, "UNLOCK x\n");
    H_EXPECT(c, "OK 0");
    await_gone("dlock:x");
    ck_assert_str_eq(redisson_try_lock("dlock:x", "javauuid:1"), "(nil)");

    h_conn_t *c2 = h_connect_index(d);
    h_send(c2, "TRYLOCK x 0\n");
    const char *l = h_reply(c2, H_WAIT_MS, H_EVENTS_SKIP);
    ck_assert_ptr_nonnull(l);
    long long ttl = 0;
    ck_assert_msg(sscanf(l, "TIMEOUT %lld", &ttl) == 1 && ttl > 0,
                  "TRYLOCK x 0 under Redisson's lock: got '%s', wanted 'TIMEOUT <ttl>'", l);
    h_close(c2);
    h_close(c);
    PASSED();
}
END_TEST

START_TEST(redisson_release_wakes_dlockd_waiter) {
    h_redis_start();
    int d = start_d(NULL);
    ck_assert_str_eq(redisson_try_lock("dlock:x", "javauuid:1"), "(nil)");

    h_conn_t *c = h_connect_index(d);
    h_send(c, "LOCK x\n");
    const char *early = h_recv(c, 300);
    ck_assert_msg(early == NULL, "LOCK x answered '%s' while Redisson holds it", early);
    h_redis_await_subscribed(CHANNEL_X);

    long long t0 = h_now_ms();
    ck_assert_str_eq(redisson_unlock_x("javauuid:1"), "(integer) 1");
    const char *l = h_reply(c, 2000, H_EVENTS_SKIP);
    long long took = h_now_ms() - t0;
    ck_assert_msg(l != NULL, "no grant within 2000 ms of Redisson's unlock");
    fence_of(l);
    ck_assert_msg(strcmp(strrchr(l, ' '), " 1") == 0, "got '%s', wanted 'OK <fence> 1'", l);
    ck_assert_int_lt(took, 2000);
    h_close(c);
    PASSED();
}
END_TEST

START_TEST(dlockd_release_wakes_redisson_style_subscriber) {
    h_redis_start();
    int d = start_d(NULL);
    h_conn_t *c = h_connect_index(d);
    lock_ok(c, "x", 1);

    h_conn_t *sub = h_connect(h_redis_sock());
    h_send(sub, "SUBSCRIBE " CHANNEL_X "\r\n");
    ck_assert_str_eq(resp_line(sub), "*3");
    resp_line(sub);
    ck_assert_str_eq(resp_line(sub), "subscribe");
    resp_line(sub);
    ck_assert_str_eq(resp_line(sub), CHANNEL_X);
    ck_assert_str_eq(resp_line(sub), ":1");

    h_send(c, "UNLOCK x\n");
    H_EXPECT(c, "OK 0");
    ck_assert_str_eq(resp_line(sub), "*3");
    resp_line(sub);
    ck_assert_str_eq(resp_line(sub), "message");
    resp_line(sub);
    ck_assert_str_eq(resp_line(sub), CHANNEL_X);
    resp_line(sub);
    ck_assert_str_eq(resp_line(sub), "0");
    h_close(sub);
    h_close(c);
    PASSED();
}
END_TEST

START_TEST(layout_fields) {
    h_redis_start();
    int d = start_d(NULL);
    h_conn_t *c = h_connect_index(d);
    unsigned long long f1 = lock_ok(c, "x", 1);
    unsigned long long f2 = lock_ok(c, "x", 2);
    ck_assert_uint_eq(f1, f2);

    const char *hgetall[] = {"HGETALL", "dlock:x", NULL};
    char field[256], value[64], extra[64];
    const char *out = h_redis_argv(hgetall);
    ck_assert_msg(sscanf(out, "%255s\n%63s\n%63s", field, value, extra) == 2,
                  "HGETALL dlock:x is not one field: '%s'", out);
    ck_assert_str_eq(value, "2");
    size_t flen = strlen(field);
    ck_assert_msg(flen > 37 && field[36] == ':', "field '%s' is not <uuid>:<id>", field);
    for (size_t i = 0; i < 36; i++) {
        int dash = i == 8 || i == 13 || i == 18 || i == 23;
        ck_assert_msg(dash ? field[i] == '-' : strchr("0123456789abcdef", field[i]) != NULL,
                      "field '%s' does not start with a uuid", field);
    }
    for (size_t i = 37; i < flen; i++)
        ck_assert_msg(field[i] >= '0' && field[i] <= '9', "field '%s': id not digits", field);

    const char *pttl[] = {"PTTL", "dlock:x", NULL};
    ck_assert_msg(atoll(h_redis_argv(pttl)) > 0, "PTTL dlock:x = '%s'", h_redis_argv(pttl));

    /* UNLOCK answers once its op is sent, not once Redis ran it
     * (PROTOCOL.md): what Redis holds follows soon after. */
    h_send(c, "UNLOCK x\n");
    H_EXPECT(c, "OK 1");
    const char *hget[] = {"HGET", "dlock:x", field, NULL};
    long long t0 = h_now_ms();
    while (strcmp(h_redis_argv(hget), "1") != 0) {
        ck_assert_msg(h_now_ms() - t0 < H_WAIT_MS, "the hold count of %s is '%s' %d ms after "
                      "one UNLOCK of two holds", field, h_redis_argv(hget), H_WAIT_MS);
        usleep(1000);
    }
    out = h_redis_argv(hgetall);
    ck_assert_msg(sscanf(out, "%255s\n%63s\n%63s", field, value, extra) == 2,
                  "HGETALL dlock:x after one UNLOCK: '%s'", out);

    h_send(c, "UNLOCK x\n");
    H_EXPECT(c, "OK 0");
    await_gone("dlock:x");
    h_close(c);
    PASSED();
}
END_TEST

/* ---- fences ------------------------------------------------------------- */

START_TEST(fences_rise_across_redis_restart) {
    h_redis_start();
    int d = start_d(NULL);
    h_conn_t *c = h_connect_index(d);
    unsigned long long f1 = lock_ok(c, "x", 1);
    h_send(c, "UNLOCK x\n");
    H_EXPECT(c, "OK 0");

    h_redis_stop(SIGKILL);
    wait_redis(c, "down");
    h_redis_start();
    wait_redis(c, "up");
    unsigned long long f2 = lock_ok(c, "x", 1);
    ck_assert_msg(f2 > f1, "fence went back after a Redis restart: %llu then %llu", f1, f2);
    h_close(c);
    PASSED();
}
END_TEST

/* ---- Redis failures ------------------------------------------------------ */

START_TEST(redis_down_backend_error_and_recovery) {
    h_redis_start();
    int d = start_d("[redis]\ncommand_timeout_ms = 500\n[lock]\nlease_ms = 1000\n");
    h_conn_t *a = h_connect_index(d);
    lock_ok(a, "x", 1);

    long long t0 = h_now_ms();
    h_redis_stop(SIGKILL);
    const char *ev = h_recv(a, 5000);
    ck_assert_msg(ev != NULL, "no !LOST x backend within 5000 ms of Redis dying");
    ck_assert_str_eq(ev, "!LOST x backend");
    ck_assert_int_lt(h_now_ms() - t0, 5000);

    h_conn_t *b = h_connect_index(d);
    long long t1 = h_now_ms();
    h_send(b, "LOCK y\n");
    const char *l = h_reply(b, 3000, H_EVENTS_SKIP);
    long long took = h_now_ms() - t1;
    ck_assert_msg(l != NULL, "LOCK y with Redis down: no reply within 3000 ms");
    ck_assert_msg(strncmp(l, "ERR BACKEND", 11) == 0, "LOCK y with Redis down: '%s'", l);
    ck_assert_int_lt(took, 3000);
    ck_assert_msg(redis_is(b, "down"), "INFO does not say redis=down");

    h_redis_start();
    wait_redis(b, "up");
    lock_ok(b, "y", 1);
    h_close(b);
    h_close(a);
    PASSED();
}
END_TEST

START_TEST(redis_hung_request_does_not_hang) {
    h_redis_start();
    int d = start_d("[redis]\ncommand_timeout_ms = 300\n");
    h_conn_t *c = h_connect_index(d);
    h_conn_t *p = h_connect_index(d);

    h_redis_signal(SIGSTOP);
    long long t0 = h_now_ms();
    h_send(c, "LOCK z\n");
    h_send(p, "PING\n");
    const char *pong = h_recv(p, 1000);
    ck_assert_msg(pong != NULL, "PING did not answer within 1000 ms while Redis hangs");
    ck_assert_str_eq(pong, "OK PONG");
    const char *l = h_reply(c, 3000, H_EVENTS_SKIP);
    long long took = h_now_ms() - t0;
    ck_assert_msg(l != NULL, "LOCK z with Redis hung: no reply within 3000 ms");
    ck_assert_msg(strncmp(l, "ERR BACKEND", 11) == 0, "LOCK z with Redis hung: '%s'", l);
    ck_assert_int_lt(took, 3000);
    h_send(p, "PING\n");
    H_EXPECT(p, "OK PONG");

    h_redis_signal(SIGCONT);
    wait_redis(p, "up");
    lock_ok(c, "z", 1);
    h_close(p);
    h_close(c);
    PASSED();
}
END_TEST

START_TEST(unlock_while_redis_down_still_ok) {
    h_redis_start();
    int d = start_d("[lock]\nlease_ms = 1000\n");
    h_conn_t *c = h_connect_index(d);
    lock_ok(c, "x", 1);
    long long t0 = h_now_ms();
    h_redis_stop(SIGKILL);
    h_send(c, "UNLOCK x\n");
    long long sent = h_now_ms() - t0;
    const char *l;
    int lost = 0;
    while ((l = h_recv(c, H_WAIT_MS)) != NULL && l[0] == '!') {
        ck_assert_str_eq(l, "!LOST x backend");
        lost = 1;
    }
    ck_assert_msg(l != NULL, "UNLOCK x with Redis down: no reply");
    if (lost) /* the daemon gave up on the lock first: NOTHELD is then right */
        ck_assert_msg(strncmp(l, "ERR NOTHELD", 11) == 0 || strcmp(l, "OK 0") == 0,
                      "UNLOCK x after !LOST: '%s'", l);
    else
        ck_assert_msg(strcmp(l, "OK 0") == 0, "UNLOCK x with Redis down (sent %lld ms "
                      "after the kill): got '%s', wanted 'OK 0'", sent, l);
    h_close(c);
    PASSED();
}
END_TEST

/* ---- shutdown, several daemons, AUTH, wrong types ----------------------- */

START_TEST(sigterm_releases_locks) {
    h_redis_start();
    int d = start_d(NULL);
    h_conn_t *c = h_connect_index(d);
    lock_ok(c, "x", 1);
    lock_ok(c, "y", 1);
    const char *ex[] = {"EXISTS", "dlock:x", NULL};
    const char *ey[] = {"EXISTS", "dlock:y", NULL};
    ck_assert_str_eq(h_redis_argv(ex), "1");
    ck_assert_str_eq(h_redis_argv(ey), "1");

    int status = h_dlockd_stop(d, SIGTERM);
    ck_assert_msg(status != -1, "dlockd did not exit within %d ms of SIGTERM", H_WAIT_MS);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "dlockd exit status 0x%x after SIGTERM", status);
    ck_assert_str_eq(h_redis_argv(ex), "0");
    ck_assert_str_eq(h_redis_argv(ey), "0");
    h_close(c);
    PASSED();
}
END_TEST

START_TEST(two_daemons_share_redis_pubsub_handoff) {
    h_redis_start();
    int d1 = start_d(NULL);
    int d2 = start_d(NULL);
    h_conn_t *c1 = h_connect_index(d1);
    h_conn_t *c2 = h_connect_index(d2);
    unsigned long long f1 = lock_ok(c1, "x", 1);

    h_send(c2, "LOCK x\n");
    const char *early = h_recv(c2, 300);
    ck_assert_msg(early == NULL, "LOCK x on daemon 2 answered '%s' while daemon 1 holds it",
                  early);
    h_redis_await_subscribed(CHANNEL_X);

    long long t0 = h_now_ms();
    h_send(c1, "UNLOCK x\n");
    H_EXPECT(c1, "OK 0");
    const char *l = h_reply(c2, 2000, H_EVENTS_SKIP);
    long long took = h_now_ms() - t0;
    ck_assert_msg(l != NULL, "daemon 2's waiter not granted within 2000 ms of the unlock");
    unsigned long long f2 = fence_of(l);
    ck_assert_int_lt(took, 2000);
    ck_assert_msg(f2 > f1, "fence did not rise across daemons: %llu then %llu", f1, f2);
    h_close(c2);
    h_close(c1);
    PASSED();
}
END_TEST

/* 1 once the log of dlockd d contains text, polling at most H_WAIT_MS. */
static int wait_log(int d, const char *text) {
    long long end = h_now_ms() + H_WAIT_MS;
    while (h_now_ms() < end) {
        FILE *f = fopen(h_dlockd_log(d), "r");
        if (f != NULL) {
            char line[1024];
            int found = 0;
            while (!found && fgets(line, sizeof(line), f) != NULL) found = strstr(line, text) != NULL;
            fclose(f);
            if (found) return 1;
        }
        usleep(10000);
    }
    return 0;
}

/* Waits until dlockd d (process pid) answers PING; fails at once, with how
 * it died, if the process exits. */
static void wait_serving(int d, pid_t pid) {
    long long end = h_now_ms() + H_WAIT_MS;
    for (;;) {
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            ck_abort_msg("dlockd %d died: %s %d; its log:\n%s", d,
                         WIFSIGNALED(status) ? "signal" : "exit status",
                         WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status),
                         log_tail(d));
        }
        int fd = socket(AF_UNIX, SOCK_STREAM, 0);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", h_dlockd_sock(d));
        int up = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
        if (fd >= 0) close(fd);
        if (up) {
            h_conn_t *c = h_connect_index(d);
            h_send(c, "PING\n");
            const char *l = h_reply(c, 1000, H_EVENTS_SKIP);
            int ok = l != NULL && strcmp(l, "OK PONG") == 0;
            h_close(c);
            if (ok) return;
        }
        ck_assert_msg(h_now_ms() < end, "dlockd %d not serving within %d ms", d, H_WAIT_MS);
        usleep(10000);
    }
}

START_TEST(auth_and_db) {
    const char *const args[] = {"--requirepass", "s3cret", NULL};
    h_redis_start_args(args);
    char extra[1024];
    snprintf(extra, sizeof(extra), "[redis]\npassword = s3cret\nurl = unix://%s?db=3\n",
             h_redis_sock());
    int d = start_d(extra);
    h_conn_t *c = h_connect_index(d);
    lock_ok(c, "x", 1);
    const char *db3[] = {"--no-auth-warning", "-a", "s3cret", "-n", "3", "EXISTS", "dlock:x",
                         NULL};
    const char *db0[] = {"--no-auth-warning", "-a", "s3cret", "-n", "0", "EXISTS", "dlock:x",
                         NULL};
    ck_assert_str_eq(h_redis_argv(db3), "1");
    ck_assert_str_eq(h_redis_argv(db0), "0");

    /* Spawned, not started: the harness would only say "exited before it
     * was ready" if it dies, and the log would be lost. */
    char text[1024];
    int bad;
    snprintf(text, sizeof(text),
             "[server]\nadmin_uids = 0\n[redis]\nurl = unix://%s\npassword = wrong\n"
             "command_timeout_ms = 1000\nconnect_timeout_ms = 500\n",
             h_redis_sock());
    pid_t pid = h_dlockd_spawn(text, NULL, &bad);
    ck_assert_msg(wait_log(bad, "WRONGPASS"), "the daemon with a wrong password never "
                  "logged a WRONGPASS handshake failure");
    keep_log(bad);
    wait_serving(bad, pid);
    h_conn_t *b = h_connect_index(bad);
    h_send(b, "LOCK x\n");
    const char *l = h_reply(b, 3000, H_EVENTS_SKIP);
    ck_assert_msg(l != NULL && strncmp(l, "ERR BACKEND", 11) == 0 && strstr(l, "WRONGPASS"),
                  "LOCK x with a wrong Redis password: '%s', wanted ERR BACKEND with "
                  "Redis's WRONGPASS", l ? l : "(no reply)");
    ck_assert_msg(redis_is(b, "down"), "INFO does not say redis=down with a wrong password");
    /* It keeps trying, but says so once per connection, not once a try. */
    const char *conns[] = {"--no-auth-warning", "-a", "s3cret", "--raw", "EVAL",
                           "return string.match(redis.call('info', 'stats'), "
                           "'total_connections_received:(%d+)')", "0", NULL};
    long long seen = atoll(h_redis_argv(conns)), end = h_now_ms() + H_WAIT_MS;
    while (atoll(h_redis_argv(conns)) < seen + 8) {
        ck_assert_msg(h_now_ms() < end, "the daemon with a wrong password stopped retrying");
        usleep(20000);
    }
    ck_assert_int_le(h_log_count(bad, "handshake failed"), 2);
    h_close(b);
    h_close(c);
    PASSED();
}
END_TEST

START_TEST(wrongtype_is_kind_or_backend_error) {
    h_redis_start();
    int d = start_d(NULL);
    /* A string is a semaphore's (Redisson's layout): ERR KIND. */
    const char *set[] = {"SET", "dlock:w", "string", NULL};
    ck_assert_str_eq(h_redis_argv(set), "OK");
    h_conn_t *c = h_connect_index(d);
    h_send(c, "LOCK w\n");
    const char *l = h_reply(c, H_WAIT_MS, H_EVENTS_SKIP);
    ck_assert_msg(l != NULL, "LOCK w on a string key: no reply");
    ck_assert_msg(strncmp(l, "ERR KIND w is a semaphore", 25) == 0,
                  "LOCK w on a string key: got '%s', wanted 'ERR KIND w is a semaphore ...'", l);
    /* Any other type is no lock of ours: Redis's error. */
    const char *push[] = {"RPUSH", "dlock:wl", "x", NULL};
    ck_assert_str_eq(h_redis_argv(push), "1");
    h_send(c, "LOCK wl\n");
    l = h_reply(c, H_WAIT_MS, H_EVENTS_SKIP);
    ck_assert_msg(l != NULL, "LOCK wl on a list key: no reply");
    ck_assert_msg(strncmp(l, "ERR BACKEND", 11) == 0 && strstr(l, "WRONGTYPE") != NULL,
                  "LOCK wl on a list key: got '%s', wanted 'ERR BACKEND ...WRONGTYPE...'", l);
    h_send(c, "PING\n");
    H_EXPECT(c, "OK PONG");
    lock_ok(c, "other", 1);
    h_close(c);
    PASSED();
}
END_TEST

/* Starts redis-cli with args in the background; returns its pid. */
static pid_t cli_background(const char *const args[]) {
    const char *argv[16] = {"redis-cli", "-s", h_redis_sock()};
    size_t n = 3;
    for (size_t i = 0; args[i] != NULL; i++) argv[n++] = args[i];
    argv[n] = NULL;
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int nul = open("/dev/null", O_RDWR);
        if (nul >= 0) {
            dup2(nul, 0);
            dup2(nul, 1);
            dup2(nul, 2);
        }
        execvp(argv[0], (char *const *)(uintptr_t)argv);
        _exit(127);
    }
    return pid;
}

/* The value of INFO's key=..., or -1. */
static long long info_num(h_conn_t *c, const char *key) {
    h_send(c, "INFO\n");
    const char *l = h_reply(c, H_WAIT_MS, H_EVENTS_SKIP);
    ck_assert_ptr_nonnull(l);
    char pat[64];
    snprintf(pat, sizeof(pat), " %s=", key);
    const char *p = strstr(l, pat);
    return p ? atoll(p + strlen(pat)) : -1;
}

START_TEST(oom_is_backend_error) {
    h_redis_start();
    int d = start_d(NULL);
    h_conn_t *c = h_connect_index(d);
    lock_ok(c, "before", 1);
    const char *oom[] = {"CONFIG", "SET", "maxmemory", "1", NULL};
    ck_assert_str_eq(h_redis_argv(oom), "OK");
    h_send(c, "LOCK full\n");
    const char *l = h_reply(c, H_WAIT_MS, H_EVENTS_SKIP);
    ck_assert_msg(l != NULL && strncmp(l, "ERR BACKEND", 11) == 0 && strstr(l, "OOM"),
                  "LOCK under maxmemory: got '%s', wanted ERR BACKEND with Redis's OOM",
                  l ? l : "(no reply)");
    /* Nothing half-done: one lock held, no waiter; the next one works. */
    ck_assert_int_eq(info_num(c, "locks_held"), 1);
    ck_assert_int_eq(info_num(c, "waiters"), 0);
    const char *ok[] = {"CONFIG", "SET", "maxmemory", "0", NULL};
    ck_assert_str_eq(h_redis_argv(ok), "OK");
    lock_ok(c, "full", 1);
    h_send(c, "STATUS before\n");
    ck_assert_msg(strncmp(h_reply(c, H_WAIT_MS, H_EVENTS_SKIP), "OK MINE 1 ", 10) == 0,
                  "before was lost");
    h_close(c);
    PASSED();
}
END_TEST

START_TEST(busy_script_is_backend_error) {
    h_redis_start();
    int d = start_d("[redis]\ncommand_timeout_ms = 5000\n");
    const char *threshold[] = {"CONFIG", "SET", "busy-reply-threshold", "100", NULL};
    ck_assert_str_eq(h_redis_argv(threshold), "OK");
    h_conn_t *c = h_connect_index(d);
    const char *busy[] = {"EVAL", "while true do end", "0", NULL};
    pid_t spinner = cli_background(busy);
    /* Once the script has run past the threshold Redis answers BUSY. */
    const char *l = NULL;
    long long end = h_now_ms() + H_WAIT_MS;
    for (;;) {
        h_send(c, "LOCK b\n");
        l = h_reply(c, H_WAIT_MS, H_EVENTS_SKIP);
        ck_assert_ptr_nonnull(l);
        if (strstr(l, "BUSY") != NULL) break;
        ck_assert_msg(h_now_ms() < end, "never saw BUSY, last reply '%s'", l);
        if (strncmp(l, "OK ", 3) == 0) { /* got in before the script started */
            h_send(c, "UNLOCK b\n");
            h_reply(c, H_WAIT_MS, H_EVENTS_SKIP);
        }
        usleep(20000);
    }
    ck_assert_msg(strncmp(l, "ERR BACKEND", 11) == 0, "BUSY came as '%s'", l);
    const char *kill_script[] = {"SCRIPT", "KILL", NULL};
    h_redis_argv(kill_script);
    waitpid(spinner, NULL, 0);
    wait_redis(c, "up");
    lock_ok(c, "b", 1);
    ck_assert_int_eq(info_num(c, "locks_held"), 1);
    h_close(c);
    PASSED();
}
END_TEST

START_TEST(connection_killed_mid_request) {
    h_redis_start();
    int d = start_d(NULL);
    h_conn_t *holder = h_connect_index(d), *c = h_connect_index(d);
    lock_ok(holder, "kept", 1);
    /* Hold writes in Redis, so that the next LOCK is in flight, then cut
     * the daemon's connections under it. */
    const char *pause[] = {"CLIENT", "PAUSE", "3000", "WRITE", NULL};
    ck_assert_str_eq(h_redis_argv(pause), "OK");
    h_send(c, "LOCK cut\n");
    ck_assert_ptr_null(h_recv(c, 200)); /* really in flight */
    const char *kill[] = {"CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes", NULL};
    h_redis_argv(kill);
    const char *l = h_reply(c, H_WAIT_MS, H_EVENTS_SKIP);
    ck_assert_msg(l != NULL && strncmp(l, "ERR BACKEND", 11) == 0,
                  "LOCK whose connection was killed: '%s'", l ? l : "(no reply)");
    const char *unpause[] = {"CLIENT", "UNPAUSE", NULL};
    h_redis_argv(unpause);
    wait_redis(c, "up");
    lock_ok(c, "cut", 1);
    /* The holder's lock outlived the reconnect, renewed and still its own. */
    h_send(holder, "STATUS kept\n");
    l = h_reply(holder, H_WAIT_MS, H_EVENTS_SKIP);
    ck_assert_msg(l && strncmp(l, "OK MINE 1 ", 10) == 0, "kept: '%s'", l ? l : "");
    ck_assert_int_eq(info_num(c, "lost"), 0);
    h_close(holder);
    h_close(c);
    PASSED();
}
END_TEST

START_TEST(password_from_file_and_env_never_logged) {
    const char *pw[] = {"--requirepass", "s3cret-pw-4711", NULL};
    h_redis_start_args(pw);
    char pwfile[600], text[1400];
    snprintf(pwfile, sizeof(pwfile), "%s/redis.pw", h_dir());
    FILE *f = fopen(pwfile, "w");
    ck_assert_ptr_nonnull(f);
    fputs("s3cret-pw-4711\n", f);
    fclose(f);
    chmod(pwfile, 0600);
    snprintf(text, sizeof(text),
             "[server]\nlog_level = debug\n[redis]\nurl = unix://%s\npassword_file = %s\n",
             h_redis_sock(), pwfile);
    int d1 = h_dlockd_start_conf(text);
    /* And one that takes it from the environment only. */
    snprintf(text, sizeof(text), "[server]\nlog_level = debug\n[redis]\nurl = unix://%s\n",
             h_redis_sock());
    setenv("DLOCKD_REDIS_PASSWORD", "s3cret-pw-4711", 1);
    int d2 = h_dlockd_start_conf(text);
    unsetenv("DLOCKD_REDIS_PASSWORD");
    h_await_redis(d1, 1);
    h_await_redis(d2, 1);
    h_conn_t *a = h_connect_index(d1), *b = h_connect_index(d2);
    lock_ok(a, "pw", 1);
    h_send(b, "TRYLOCK pw\n");
    ck_assert_msg(strncmp(h_reply(b, H_WAIT_MS, H_EVENTS_SKIP), "TIMEOUT ", 8) == 0,
                  "d2 does not see d1's lock");
    h_close(a);
    h_close(b);
    for (int d = d1; d <= d2; d++) {
        char cmd[700];
        snprintf(cmd, sizeof(cmd), "grep -q 's3cret-pw-4711' '%s'", h_dlockd_log(d));
        ck_assert_msg(system(cmd) != 0, "the password appears in %s", h_dlockd_log(d));
    }
    PASSED();
}
END_TEST

/* Three clients of one daemon keep handing a lock to each other, until
 * told to stop by their parent closing the pipe. */
static void churn(int d, const char *name, int stop_fd) {
    h_conn_t *c[3];
    for (int i = 0; i < 3; i++) {
        c[i] = h_connect_index(d);
        h_send(c[i], "LOCK %s\n", name);
    }
    for (;;) {
        struct pollfd pfd[4];
        for (int i = 0; i < 3; i++) pfd[i] = (struct pollfd){.fd = c[i]->fd, .events = POLLIN};
        pfd[3] = (struct pollfd){.fd = stop_fd, .events = POLLIN};
        if (poll(pfd, 4, 10000) <= 0 || pfd[3].revents) _exit(0);
        for (int i = 0; i < 3; i++) {
            if (!pfd[i].revents) continue;
            const char *l = h_recv(c[i], 1000);
            if (l == NULL) _exit(1);
            if (strncmp(l, "OK ", 3) == 0 && strchr(l + 3, ' ') != NULL) /* a grant */
                h_send(c[i], "UNLOCK %s\nLOCK %s\n", name, name);
        }
    }
}

START_TEST(local_handoffs_do_not_starve_other_daemons) {
    h_redis_start();
    int d0 = start_d(NULL), d1 = start_d(NULL);
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(p[1]);
        churn(d0, "busy", p[0]);
    }
    close(p[0]);
    h_conn_t *adm = h_connect_index(d0), *other = h_connect_index(d1);
    /* Wait until d0's clients are really handing it around. */
    long long end = h_now_ms() + H_WAIT_MS;
    while (info_num(adm, "grants") < 100) {
        ck_assert_msg(h_now_ms() < end, "the churn never started");
        usleep(2000);
    }
    for (int round = 0; round < 5; round++) {
        long long t0 = h_now_ms();
        h_send(other, "TRYLOCK busy 3000\n");
        const char *l = h_reply(other, H_WAIT_MS, H_EVENTS_SKIP);
        ck_assert_msg(l && strncmp(l, "OK ", 3) == 0,
                      "round %d: a client of another daemon got '%s' while d0 churned", round,
                      l ? l : "(nothing)");
        fprintf(stderr, "other daemon's turn came after %lld ms\n", h_now_ms() - t0);
        h_send(other, "UNLOCK busy\n");
        h_reply(other, H_WAIT_MS, H_EVENTS_SKIP);
    }
    close(p[1]);
    waitpid(pid, NULL, 0);
    h_close(adm);
    h_close(other);
    PASSED();
}
END_TEST

/* ---- a Redis error longer than a reply -----------------------------------
 * An error reply longer than the cap (PROTO_ERROR_MAX) was dropped, and the client waited
 * forever. Redis's MISCONF error (an RDB save failed: a full disk, say),
 * with the place in the script that Redis adds to an error raised inside
 * EVALSHA, is longer than that once "ERR BACKEND " precedes it. The save
 * fails here because a directory is in the way of the RDB file. (A long
 * ACL user name does not do it on Redis 7.0: its NOPERM does not name the
 * user.) */

/* Polls INFO persistence until a BGSAVE has failed and none runs. */
static void wait_bgsave_failed(void) {
    const char *a[] = {"INFO", "persistence", NULL};
    long long end = h_now_ms() + H_WAIT_MS;
    for (;;) {
        const char *out = h_redis_argv(a);
        if (strstr(out, "rdb_bgsave_in_progress:0") && strstr(out, "rdb_last_bgsave_status:err"))
            return;
        ck_assert_msg(h_now_ms() < end, "BGSAVE never failed: '%s'", out);
        usleep(10000);
    }
}

START_TEST(long_redis_error_is_truncated_not_dropped) {
    h_redis_start();
    int d = start_d(NULL);
    h_conn_t *c = h_connect_index(d);

    char rdb[600];
    snprintf(rdb, sizeof(rdb), "%s/dump.rdb", h_dir());
    ck_assert_int_eq(mkdir(rdb, 0700), 0);
    const char *save[] = {"CONFIG", "SET", "save", "3600 1", NULL};
    ck_assert_str_eq(h_redis_argv(save), "OK");
    const char *bgsave[] = {"BGSAVE", NULL};
    h_redis_argv(bgsave);
    wait_bgsave_failed();

    /* What Redis answers a script that writes on its third line, as the
     * daemon's acquire script does: longer than any reply may be. */
    const char *probe[] = {"EVAL", "local k = KEYS[1]\nif k then\n  redis.call('set', k, 1)\nend\n",
                           "1", "dlock:probe", NULL};
    const char *err = h_redis_argv(probe);
    ck_assert_msg(strncmp(err, "MISCONF ", 8) == 0, "a write under a failed save: '%s'", err);
    size_t whole = strlen("ERR BACKEND ") + strlen(err) + 1;
    ck_assert_msg(whole > PROTO_ERROR_MAX, "the whole reply would be %zu bytes, not more than "
                  "PROTO_ERROR_MAX (%d): '%s'", whole, PROTO_ERROR_MAX, err);

    h_send(c, "LOCK long\n");
    const char *l = h_recv(c, H_WAIT_MS);
    ck_assert_msg(l != NULL, "LOCK long: no reply within %d ms (Redis said '%s')", H_WAIT_MS,
                  err);
    size_t n = strlen(l);
    ck_assert_msg(strncmp(l, "ERR BACKEND MISCONF ", 20) == 0, "LOCK long: got '%s'", l);
    ck_assert_uint_le(n + 1, PROTO_ERROR_MAX); /* with its LF */
    ck_assert_msg(n >= 3 && strcmp(l + n - 3, "...") == 0, "not marked as cut: '%s'", l);
    /* What was kept is Redis's text, up to where its script's SHA1 differs. */
    const char *sha = strstr(err, " script: ");
    size_t same = sha != NULL ? (size_t)(sha - err) : strlen(err);
    size_t text = n - strlen("ERR BACKEND ") - 3;
    ck_assert_int_eq(strncmp(l + 12, err, text < same ? text : same), 0);

    /* The connection goes on. */
    h_send(c, "PING\n");
    H_EXPECT(c, "OK PONG");

    /* Redis takes writes again: the same connection gets the lock. */
    const char *nosave[] = {"CONFIG", "SET", "save", "", NULL};
    ck_assert_str_eq(h_redis_argv(nosave), "OK");
    rmdir(rdb);
    lock_ok(c, "long", 1);
    h_close(c);
    PASSED();
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("redis");
    TCase *tc = tcase_create("redis");
    tcase_add_checked_fixture(tc, setup, h_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, redisson_excluded_by_dlockd_holder);
    tcase_add_test(tc, redisson_release_wakes_dlockd_waiter);
    tcase_add_test(tc, dlockd_release_wakes_redisson_style_subscriber);
    tcase_add_test(tc, layout_fields);
    tcase_add_test(tc, fences_rise_across_redis_restart);
    tcase_add_test(tc, redis_down_backend_error_and_recovery);
    tcase_add_test(tc, redis_hung_request_does_not_hang);
    tcase_add_test(tc, unlock_while_redis_down_still_ok);
    tcase_add_test(tc, sigterm_releases_locks);
    tcase_add_test(tc, two_daemons_share_redis_pubsub_handoff);
    tcase_add_test(tc, auth_and_db);
    tcase_add_test(tc, wrongtype_is_kind_or_backend_error);
    tcase_add_test(tc, oom_is_backend_error);
    tcase_add_test(tc, busy_script_is_backend_error);
    tcase_add_test(tc, connection_killed_mid_request);
    tcase_add_test(tc, password_from_file_and_env_never_logged);
    tcase_add_test(tc, local_handoffs_do_not_starve_other_daemons);
    tcase_add_test(tc, long_redis_error_is_truncated_not_dropped);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return h_main(suite());
}
