/* Integration tests of the RESP connection (daemon/backend/resp.c) against
 * real redis-servers (Unix, TCP, TLS) and a fake server that sends what
 * Redis would not.
 * SPDX-License-Identifier: MIT
 *
 * Each test drives resp_conn_t on a private uv loop: it runs the loop until
 * what it waits for has happened, bounded by a guard timer, never by
 * sleeping. */
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>

#include "daemon/backend/resp.h"
#include "daemon/backend/tls.h"
#include "daemon/util/timers.h"
#include "tests/support/harness.h"

/* ---- the loop ------------------------------------------------------------ */

static uv_loop_t loop;
static timers_t *timers;
static uv_timer_t guard;       /* bounds every wait */
static int expired;
static int in_call;            /* inside resp_send/resp_open called by a test */
static int early;              /* callbacks that fired inside such a call */

/* Every callback of the tests calls this: the loop iteration ends instead
 * of polling on, and RUN_UNTIL looks at its condition again. */
static void happened(void) {
    if (in_call) early++;
    uv_stop(&loop);
}

static void on_guard(uv_timer_t *t) {
    (void)t;
    expired = 1;
    uv_stop(&loop);
}

/* Runs the loop until cond holds, for at most ms. */
#define RUN_UNTIL_MS(cond, ms) do {                                        \
        expired = 0;                                                       \
        uv_update_time(&loop);                                             \
        uv_timer_start(&guard, on_guard, (ms), 0);                         \
        while (!(cond) && !expired) uv_run(&loop, UV_RUN_ONCE);            \
        uv_timer_stop(&guard);                                             \
        ck_assert_msg((cond), "not within %d ms: %s", (int)(ms), #cond);   \
    } while (0)
#define RUN_UNTIL(cond) RUN_UNTIL_MS(cond, H_WAIT_MS)

/* Runs the loop for ms, to see that nothing (more) happens. */
static void run_for(int ms) {
    expired = 0;
    uv_update_time(&loop);
    uv_timer_start(&guard, on_guard, (uint64_t)ms, 0);
    while (!expired) uv_run(&loop, UV_RUN_ONCE);
}

static void setup(void) {
    h_setup();
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    timers = timers_new(&loop);
    ck_assert_ptr_nonnull(timers);
    uv_timer_init(&loop, &guard);
    in_call = early = 0;
}

static void teardown(void) {
    ck_assert_msg(early == 0, "%d callbacks fired before the call that queued them returned",
                  early);
    uv_close((uv_handle_t *)&guard, NULL);
    timers_free(timers);
    /* Every connection was freed: the loop ends once their handles closed. */
    uv_run(&loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
    h_teardown();
}

/* ---- peers: one connection and what its callbacks saw -------------------- */

#define PUSH_MAX 16

typedef struct peer_s peer_t;
struct peer_s {
    resp_conn_t *c;
    int opens;
    int downs;
    char why[RESP_ERR_LEN];
    int manual;                    /* on_open does not call resp_ready */
    void (*then_open)(peer_t *p);  /* called from on_open */
    void (*then_down)(peer_t *p);  /* called from on_down */
    void (*then_push)(peer_t *p);  /* called from on_push */
    int pushes;
    char push[PUSH_MAX][4][64];    /* up to 4 elements of each push, as text */
};

static void on_open(void *data) {
    peer_t *p = data;
    happened();
    p->opens++;
    if (!p->manual) resp_ready(p->c);
    if (p->then_open != NULL) p->then_open(p);
}

static void on_down(void *data, const char *why) {
    peer_t *p = data;
    happened();
    p->downs++;
    snprintf(p->why, sizeof(p->why), "%s", why);
    if (p->then_down != NULL) p->then_down(p);
}

static void on_push(void *data, redisReply *r) {
    peer_t *p = data;
    happened();
    if (p->pushes < PUSH_MAX) {
        for (size_t i = 0; i < r->elements && i < 4; i++) {
            const redisReply *e = r->element[i];
            char *out = p->push[p->pushes][i];
            if (e->type == REDIS_REPLY_INTEGER)
                snprintf(out, 64, "%lld", e->integer);
            else if (e->type == REDIS_REPLY_STRING || e->type == REDIS_REPLY_STATUS)
                snprintf(out, 64, "%.*s", (int)e->len, e->str);
            else
                snprintf(out, 64, "(type %d)", e->type);
        }
    }
    p->pushes++;
    if (p->then_push != NULL) p->then_push(p);
}

static void peer_init_tls(peer_t *p, uint32_t connect_ms, uint32_t command_ms, tls_ctx_t *tls,
                          const char *server_name) {
    memset(p, 0, sizeof(*p));
    resp_opts_t o = {
        .label = "test",
        .connect_timeout_ms = connect_ms,
        .command_timeout_ms = command_ms,
        .tls = tls,
        .tls_server_name = server_name,
        .on_open = on_open,
        .on_down = on_down,
        .on_push = on_push,
        .data = p,
    };
    p->c = resp_new(&loop, timers, &o);
    ck_assert_ptr_nonnull(p->c);
    ck_assert_int_eq(resp_state(p->c), RESP_DOWN);
}

static void peer_init(peer_t *p) {
    peer_init_tls(p, 5000, 5000, NULL, NULL);
}

static void peer_open(peer_t *p, int is_unix, const char *host, int port) {
    resp_addr_t a = {.is_unix = is_unix, .port = port};
    snprintf(a.host, sizeof(a.host), "%s", host);
    in_call++;
    ck_assert_int_eq(resp_open(p->c, &a), 0);
    in_call--;
    ck_assert_int_eq(resp_state(p->c), RESP_CONNECTING);
}

/* Opens and waits until it is up. */
static void peer_up(peer_t *p, int is_unix, const char *host, int port) {
    int opens = p->opens, downs = p->downs;
    peer_open(p, is_unix, host, port);
    RUN_UNTIL(p->opens > opens || p->downs > downs);
    ck_assert_msg(p->downs == downs, "went down: %s", p->why);
    ck_assert_int_eq(resp_state(p->c), p->manual ? RESP_HANDSHAKE : RESP_UP);
}

/* Waits until it went down, and returns why. */
static const char *peer_await_down(peer_t *p, int downs) {
    RUN_UNTIL(p->downs > downs);
    ck_assert_int_eq(p->downs, downs + 1);
    ck_assert_int_eq(resp_state(p->c), RESP_DOWN);
    return p->why;
}

/* ---- results: what one reply callback saw -------------------------------- */

typedef struct result_s result_t;
struct result_s {
    int calls;
    int type;
    long long integer;
    size_t len;
    size_t elements;
    char str[256];
    char *copy;                    /* the whole string, when keep is set */
    int keep;
    char error[RESP_ERR_LEN];      /* "" unless the callback got an error */
    void (*then)(result_t *r);     /* called from the callback */
    peer_t *peer;                  /* for then */
};

static void on_result(void *data, redisReply *r, const char *error) {
    result_t *res = data;
    happened();
    res->calls++;
    if (error != NULL) {
        ck_assert_ptr_null(r);
        snprintf(res->error, sizeof(res->error), "%s", error);
    } else {
        ck_assert_ptr_nonnull(r);
        res->type = r->type;
        res->integer = r->integer;
        res->len = r->len;
        res->elements = r->elements;
        if (r->str != NULL) snprintf(res->str, sizeof(res->str), "%.*s", (int)r->len, r->str);
        if (res->keep && r->str != NULL) {
            free(res->copy);
            res->copy = malloc(r->len + 1);
            ck_assert_ptr_nonnull(res->copy);
            memcpy(res->copy, r->str, r->len);
        }
    }
    if (res->then != NULL) res->then(res);
}

/* Sends words (split at spaces); returns what resp_send returned. */
static int send_flags(peer_t *p, unsigned flags, result_t *res, const char *words) {
    char copy[1024];
    const char *argv[32];
    int argc = 0;
    snprintf(copy, sizeof(copy), "%s", words);
    for (char *save = NULL, *w = strtok_r(copy, " ", &save); w != NULL;
         w = strtok_r(NULL, " ", &save)) {
        ck_assert_int_lt(argc, 32);
        argv[argc++] = w;
    }
    in_call++;
    int r = resp_send(p->c, argc, argv, NULL, flags, res != NULL ? on_result : NULL, res);
    in_call--;
    return r;
}

static void send_ok(peer_t *p, result_t *res, const char *words) {
    ck_assert_int_eq(send_flags(p, 0, res, words), 0);
}

/* Sends words and waits for the reply. */
static void command(peer_t *p, result_t *res, const char *words) {
    memset(res, 0, sizeof(*res));
    send_ok(p, res, words);
    RUN_UNTIL(res->calls > 0);
    ck_assert_int_eq(res->calls, 1);
    ck_assert_msg(res->error[0] == '\0', "%s: %s", words, res->error);
}

static void expect_status(peer_t *p, const char *words, const char *want) {
    result_t res;
    command(p, &res, words);
    ck_assert_int_eq(res.type, REDIS_REPLY_STATUS);
    ck_assert_str_eq(res.str, want);
}

static void expect_integer(peer_t *p, const char *words, long long want) {
    result_t res;
    command(p, &res, words);
    ck_assert_int_eq(res.type, REDIS_REPLY_INTEGER);
    ck_assert_int_eq(res.integer, want);
}

static void expect_string(peer_t *p, const char *words, const char *want) {
    result_t res;
    command(p, &res, words);
    ck_assert_int_eq(res.type, REDIS_REPLY_STRING);
    ck_assert_str_eq(res.str, want);
}

/* Waits until redis (through the plain Unix socket sock) sees n blocked clients. */
static void await_blocked(peer_t *probe, int n) {
    char want[32];
    snprintf(want, sizeof(want), "blocked_clients:%d", n);
    long long end = h_now_ms() + H_WAIT_MS;
    for (;;) {
        result_t res;
        command(probe, &res, "INFO clients");
        if (strstr(res.str, want) != NULL) return;
        ck_assert_msg(h_now_ms() < end, "never saw %s", want);
    }
}

/* ---- commands and replies ------------------------------------------------ */

static void basic_commands(peer_t *p) {
    result_t res;
    expect_status(p, "PING", "PONG");
    expect_status(p, "SET k v", "OK");
    expect_string(p, "GET k", "v");
    expect_integer(p, "INCR n", 1);
    expect_integer(p, "INCR n", 2);
    command(p, &res, "NOSUCHCOMMAND x");
    ck_assert_int_eq(res.type, REDIS_REPLY_ERROR);
    ck_assert_msg(strncmp(res.str, "ERR unknown command", 19) == 0, "got %s", res.str);
    command(p, &res, "GET missing");
    ck_assert_int_eq(res.type, REDIS_REPLY_NIL);
    command(p, &res, "MGET k missing k");
    ck_assert_int_eq(res.type, REDIS_REPLY_ARRAY);
    ck_assert_uint_eq(res.elements, 3);
}

START_TEST(unix_commands_and_replies)
{
    h_redis_start();
    peer_t p;
    peer_init(&p);
    peer_up(&p, 1, h_redis_sock(), 0);
    ck_assert_str_eq(resp_addr(p.c)->host, h_redis_sock());
    ck_assert_int_eq(resp_addr(p.c)->is_unix, 1);
    basic_commands(&p);

    /* Binary-safe arguments, given with their lengths. */
    const char *argv[] = {"SET", "bin", "a\0b\r\nc"};
    size_t argvlen[] = {3, 3, 6};
    result_t set = {0}, get = {0};
    in_call++;
    ck_assert_int_eq(resp_send(p.c, 3, argv, argvlen, 0, on_result, &set), 0);
    in_call--;
    get.keep = 1;
    send_ok(&p, &get, "GET bin");
    ck_assert_uint_eq(resp_pending(p.c), 2);
    RUN_UNTIL(get.calls == 1);
    ck_assert_int_eq(set.calls, 1);
    ck_assert_str_eq(set.str, "OK");
    ck_assert_uint_eq(get.len, 6);
    ck_assert(memcmp(get.copy, "a\0b\r\nc", 6) == 0);
    free(get.copy);
    ck_assert_uint_eq(resp_pending(p.c), 0);

    /* A command already in RESP form. */
    static const char raw[] = "*2\r\n$4\r\nECHO\r\n$5\r\nhello\r\n";
    result_t echo = {0};
    in_call++;
    ck_assert_int_eq(resp_send_raw(p.c, raw, sizeof(raw) - 1, 0, on_result, &echo), 0);
    in_call--;
    RUN_UNTIL(echo.calls == 1);
    ck_assert_str_eq(echo.str, "hello");
    ck_assert_int_eq(p.downs, 0);
    resp_free(p.c);
}
END_TEST

START_TEST(tcp_commands_and_replies)
{
    int r = h_redis_start_tcp(0, NULL);
    peer_t p;
    peer_init(&p);
    peer_up(&p, 0, "127.0.0.1", h_redis_port(r));
    ck_assert_int_eq(resp_addr(p.c)->port, h_redis_port(r));
    basic_commands(&p);
    ck_assert_int_eq(p.downs, 0);
    resp_free(p.c);
}
END_TEST

START_TEST(host_name_resolved)
{
    int r = h_redis_start_tcp(0, NULL);
    peer_t p;
    peer_init(&p);
    peer_up(&p, 0, "localhost", h_redis_port(r));
    expect_status(&p, "PING", "PONG");
    resp_free(p.c);
}
END_TEST

#define PIPELINED 20000

static int in_order_seen;
static int in_order_bad;

static void check_order(result_t *res) {
    /* Replies come in the order the commands were sent: INCR counts up. */
    if (res->integer != ++in_order_seen) in_order_bad++;
}

START_TEST(many_commands_pipelined_in_one_iteration)
{
    int r = h_redis_start_tcp(0, NULL);
    peer_t p;
    peer_init(&p);
    peer_up(&p, 0, "127.0.0.1", h_redis_port(r));
    result_t *res = calloc(PIPELINED, sizeof(*res));
    ck_assert_ptr_nonnull(res);
    in_order_seen = in_order_bad = 0;
    for (int i = 0; i < PIPELINED; i++) {
        res[i].then = check_order;
        send_ok(&p, &res[i], "INCR counter");
    }
    ck_assert_uint_eq(resp_pending(p.c), PIPELINED);
    RUN_UNTIL(in_order_seen == PIPELINED);
    ck_assert_int_eq(in_order_bad, 0);
    for (int i = 0; i < PIPELINED; i++) {
        ck_assert_int_eq(res[i].calls, 1);
        ck_assert_int_eq(res[i].integer, i + 1);
    }
    ck_assert_uint_eq(resp_pending(p.c), 0);
    free(res);
    resp_free(p.c);
}
END_TEST

/* A value large enough for partial writes and a reply split across reads. */
static void big_value_round_trip(peer_t *p, size_t size) {
    char *big = malloc(size);
    ck_assert_ptr_nonnull(big);
    for (size_t i = 0; i < size; i++) big[i] = (char)('a' + (i * 31 + i / 7) % 26);
    const char *argv[] = {"SET", "big", big};
    size_t argvlen[] = {3, 3, size};
    result_t set = {0}, get = {.keep = 1}, ping = {0};
    in_call++;
    ck_assert_int_eq(resp_send(p->c, 3, argv, argvlen, 0, on_result, &set), 0);
    in_call--;
    send_ok(p, &get, "GET big");
    send_ok(p, &ping, "PING");
    RUN_UNTIL(ping.calls == 1);
    ck_assert_int_eq(set.calls, 1);
    ck_assert_str_eq(set.str, "OK");
    ck_assert_int_eq(get.calls, 1);
    ck_assert_int_eq(get.type, REDIS_REPLY_STRING);
    ck_assert_uint_eq(get.len, size);
    ck_assert(memcmp(get.copy, big, size) == 0);
    ck_assert_str_eq(ping.str, "PONG");
    free(get.copy);
    free(big);
}

START_TEST(large_bulk_reply_split_across_reads)
{
    int r = h_redis_start_tcp(0, NULL);
    peer_t p;
    peer_init(&p);
    peer_up(&p, 0, "127.0.0.1", h_redis_port(r));
    big_value_round_trip(&p, 16u << 20);
    resp_free(p.c);
}
END_TEST

/* ---- connect failures ---------------------------------------------------- */

START_TEST(refused_tcp_port_reported_at_once)
{
    int port = h_free_port(); /* nothing listens there */
    peer_t p;
    /* A connect timeout far beyond the bound below: "refused" must come
     * from the connect itself, not from the timeout. */
    peer_init_tls(&p, 60000, 5000, NULL, NULL);
    long long t0 = h_now_ms();
    peer_open(&p, 0, "127.0.0.1", port);
    result_t res = {0};
    ck_assert_int_eq(send_flags(&p, 0, &res, "PING"), -1);
    ck_assert_int_eq(res.calls, 0);
    const char *why = peer_await_down(&p, 0);
    long long took = h_now_ms() - t0;
    ck_assert_str_eq(why, "connection refused");
    ck_assert_msg(took < 15000, "refused only after %lld ms", took);
    ck_assert_int_eq(p.opens, 0);
    RUN_UNTIL(res.calls == 1);
    ck_assert_str_eq(res.error, "not connected");
    resp_free(p.c);
}
END_TEST

START_TEST(missing_unix_socket)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/nobody-here.sock", h_dir());
    peer_t p;
    peer_init(&p);
    peer_open(&p, 1, path, 0);
    ck_assert_str_eq(peer_await_down(&p, 0), "no such file or directory");
    ck_assert_int_eq(p.opens, 0);
    resp_free(p.c);
}
END_TEST

/* A TCP listener that never accepts: the kernel completes the connect,
 * then nothing answers the TLS ClientHello. */
static int silent_listener(int *port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    ck_assert_int_eq(listen(fd, 8), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    *port = ntohs(sa.sin_port);
    return fd;
}

START_TEST(connect_timeout_covers_tls_handshake)
{
    char err[TLS_ERR_LEN];
    tls_opts_t to = {.verify = 1};
    tls_ctx_t *tls = tls_ctx_new(&to, err, sizeof(err));
    ck_assert_msg(tls != NULL, "%s", err);
    int port;
    int fd = silent_listener(&port);
    peer_t p;
    peer_init_tls(&p, 300, 5000, tls, NULL);
    long long t0 = h_now_ms();
    peer_open(&p, 0, "127.0.0.1", port);
    ck_assert_str_eq(peer_await_down(&p, 0), "no connection within connect_timeout_ms");
    long long took = h_now_ms() - t0;
    ck_assert_msg(took >= 250, "timed out after %lld ms, before connect_timeout_ms", took);
    ck_assert_int_eq(p.opens, 0);
    resp_free(p.c);
    close(fd);
    tls_ctx_free(tls);
}
END_TEST

/* ---- deadlines and failures ---------------------------------------------- */

START_TEST(stopped_redis_command_times_out)
{
    int r = h_redis_start_tcp(0, NULL);
    peer_t p;
    peer_init_tls(&p, 5000, 300, NULL, NULL);
    peer_up(&p, 0, "127.0.0.1", h_redis_port(r));
    expect_status(&p, "PING", "PONG");
    h_redis_signal_index(r, SIGSTOP);
    result_t res = {0};
    long long t0 = h_now_ms();
    send_ok(&p, &res, "PING");
    RUN_UNTIL(res.calls == 1);
    long long took = h_now_ms() - t0;
    ck_assert_str_eq(res.error, "no reply within command_timeout_ms");
    ck_assert_msg(took >= 200, "timed out after %lld ms", took);
    ck_assert_int_eq(p.downs, 1);
    ck_assert_str_eq(p.why, "no reply within command_timeout_ms");
    ck_assert_int_eq(resp_state(p.c), RESP_DOWN);
    ck_assert_uint_eq(resp_pending(p.c), 0);
    h_redis_signal_index(r, SIGCONT);
    /* The owner reconnects. */
    peer_up(&p, 0, "127.0.0.1", h_redis_port(r));
    expect_status(&p, "PING", "PONG");
    ck_assert_int_eq(res.calls, 1);
    resp_free(p.c);
}
END_TEST

/* Each command keeps the deadline it was sent with, and a lowered
 * command_timeout_ms (a reload) covers a command queued behind older ones
 * with longer deadlines: its reply cannot come before theirs, so the
 * connection drops at its deadline, failing them all, as a timeout does.
 * The order of deadlines is 20 s, 300 ms, 20 s: the earliest counts, not
 * the first's nor the last's. A short deadline answered in time leaves
 * nothing behind. */
START_TEST(lowered_timeout_covers_commands_behind_an_older_one)
{
    int r = h_redis_start_tcp(0, NULL);
    peer_t p;
    peer_init_tls(&p, 5000, 20000, NULL, NULL);
    peer_up(&p, 0, "127.0.0.1", h_redis_port(r));

    /* Answered within 300 ms, then one under 20 s that takes a second. */
    resp_set_timeouts(p.c, 5000, 300);
    expect_status(&p, "PING", "PONG");
    resp_set_timeouts(p.c, 5000, 20000);
    result_t slow = {0};
    send_ok(&p, &slow, "BLPOP nothing 1");
    RUN_UNTIL(slow.calls == 1);
    ck_assert_msg(slow.error[0] == '\0', "BLPOP nothing 1: %s", slow.error);
    ck_assert_int_eq(slow.type, REDIS_REPLY_NIL);
    ck_assert_int_eq(p.downs, 0);

    h_redis_signal_index(r, SIGSTOP);
    result_t res[3] = {{0}};
    send_ok(&p, &res[0], "PING");
    resp_set_timeouts(p.c, 5000, 300);
    long long t0 = h_now_ms();
    send_ok(&p, &res[1], "PING");
    resp_set_timeouts(p.c, 5000, 20000);
    send_ok(&p, &res[2], "PING");
    RUN_UNTIL_MS(res[1].calls == 1, 5000);
    long long took = h_now_ms() - t0;
    h_redis_signal_index(r, SIGCONT);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(res[i].calls, 1);
        ck_assert_str_eq(res[i].error, "no reply within command_timeout_ms");
    }
    ck_assert_msg(took >= 200, "timed out after %lld ms, before the 300 ms deadline", took);
    ck_assert_int_eq(p.downs, 1);
    ck_assert_str_eq(p.why, "no reply within command_timeout_ms");
    ck_assert_uint_eq(resp_pending(p.c), 0);
    peer_up(&p, 0, "127.0.0.1", h_redis_port(r));
    expect_status(&p, "PING", "PONG");
    resp_free(p.c);
}
END_TEST

START_TEST(pending_commands_fail_when_redis_is_killed)
{
    int r = h_redis_start_tcp(0, NULL);
    peer_t p, probe;
    peer_init_tls(&p, 5000, 60000, NULL, NULL);
    peer_init(&probe);
    peer_up(&p, 0, "127.0.0.1", h_redis_port(r));
    peer_up(&probe, 1, h_redis_sock_index(r), 0);
    result_t res[3] = {{0}};
    for (int i = 0; i < 3; i++) send_ok(&p, &res[i], "BLPOP nothing 0");
    await_blocked(&probe, 1);
    ck_assert_uint_eq(resp_pending(p.c), 3);
    h_redis_stop_index(r, SIGKILL);
    peer_await_down(&p, 0);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(res[i].calls, 1);
        ck_assert_str_eq(res[i].error, p.why);
    }
    ck_assert_uint_eq(resp_pending(p.c), 0);
    run_for(50);
    for (int i = 0; i < 3; i++) ck_assert_int_eq(res[i].calls, 1);
    ck_assert_int_eq(p.downs, 1);
    resp_free(p.c);
    resp_free(probe.c);
}
END_TEST

START_TEST(resp_close_fails_pending_then_on_down)
{
    h_redis_start();
    peer_t p, probe;
    peer_init(&p);
    peer_init(&probe);
    peer_up(&p, 1, h_redis_sock(), 0);
    peer_up(&probe, 1, h_redis_sock(), 0);
    result_t res[3] = {{0}};
    for (int i = 0; i < 3; i++) send_ok(&p, &res[i], "BLPOP nothing 0");
    await_blocked(&probe, 1);
    resp_close(p.c, "closed by the test");
    /* At once, inside resp_close. */
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(res[i].calls, 1);
        ck_assert_str_eq(res[i].error, "closed by the test");
    }
    ck_assert_int_eq(p.downs, 1);
    ck_assert_str_eq(p.why, "closed by the test");
    resp_close(p.c, "again"); /* a no-op when down */
    run_for(50);
    ck_assert_int_eq(p.downs, 1);
    for (int i = 0; i < 3; i++) ck_assert_int_eq(res[i].calls, 1);
    /* It can be opened again. */
    peer_up(&p, 1, h_redis_sock(), 0);
    expect_status(&p, "PING", "PONG");
    resp_free(p.c);
    resp_free(probe.c);
}
END_TEST

START_TEST(resp_free_fails_pending_and_refused_at_once)
{
    h_redis_start();
    peer_t p, probe, idle;
    peer_init(&p);
    peer_init(&probe);
    peer_init(&idle);
    peer_up(&p, 1, h_redis_sock(), 0);
    peer_up(&probe, 1, h_redis_sock(), 0);
    result_t res[3] = {{0}}, refused = {0};
    for (int i = 0; i < 3; i++) send_ok(&p, &res[i], "BLPOP nothing 0");
    await_blocked(&probe, 1);
    /* Refused on a connection never opened: told from a timer, or in resp_free. */
    ck_assert_int_eq(send_flags(&idle, 0, &refused, "PING"), -1);
    ck_assert_int_eq(refused.calls, 0);
    resp_free(idle.c);
    ck_assert_int_eq(refused.calls, 1);
    ck_assert_str_eq(refused.error, "not connected");
    resp_free(p.c);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(res[i].calls, 1);
        ck_assert_str_eq(res[i].error, "connection closed");
    }
    run_for(50);
    for (int i = 0; i < 3; i++) ck_assert_int_eq(res[i].calls, 1);
    ck_assert_int_eq(refused.calls, 1);
    ck_assert_int_eq(p.downs, 0);   /* nothing after resp_free, on_down neither */
    ck_assert_int_eq(idle.downs, 0);
    resp_free(probe.c);
}
END_TEST

static void close_from_reply(result_t *res) {
    resp_close(res->peer->c, "closed in a reply callback");
}

START_TEST(resp_close_inside_a_reply_callback)
{
    h_redis_start();
    peer_t p;
    peer_init(&p);
    peer_up(&p, 1, h_redis_sock(), 0);
    result_t first = {.then = close_from_reply, .peer = &p}, second = {0}, third = {0};
    send_ok(&p, &first, "PING");
    send_ok(&p, &second, "PING");
    send_ok(&p, &third, "BLPOP nothing 0");
    RUN_UNTIL(p.downs > 0);
    ck_assert_int_eq(first.calls, 1);
    ck_assert_str_eq(first.str, "PONG");
    ck_assert_int_eq(second.calls, 1);
    ck_assert_str_eq(second.error, "closed in a reply callback");
    ck_assert_int_eq(third.calls, 1);
    ck_assert_str_eq(third.error, "closed in a reply callback");
    ck_assert_int_eq(p.downs, 1);
    ck_assert_str_eq(p.why, "closed in a reply callback");
    run_for(50);
    ck_assert_int_eq(second.calls + third.calls + p.downs, 3);
    resp_free(p.c);
}
END_TEST

static void free_from_reply(result_t *res) {
    resp_free(res->peer->c);
}

static void free_from_down(peer_t *p) {
    resp_free(p->c);
}

static void reopen_from_down(peer_t *p) {
    p->then_down = NULL;
    resp_addr_t a = *resp_addr(p->c);
    ck_assert_int_eq(resp_open(p->c, &a), 0);
}

START_TEST(resp_free_and_open_inside_callbacks)
{
    h_redis_start();
    /* resp_free inside a reply callback: the next command gets its error
     * inside resp_free, and nothing fires afterwards. */
    peer_t a;
    peer_init(&a);
    peer_up(&a, 1, h_redis_sock(), 0);
    result_t first = {.then = free_from_reply, .peer = &a}, second = {0};
    send_ok(&a, &first, "PING");
    send_ok(&a, &second, "PING");
    RUN_UNTIL(first.calls == 1);
    ck_assert_int_eq(second.calls, 1);
    ck_assert_str_eq(second.error, "connection closed");
    ck_assert_int_eq(a.downs, 0);

    /* resp_free inside on_down. */
    peer_t b;
    peer_init(&b);
    peer_up(&b, 1, h_redis_sock(), 0);
    b.then_down = free_from_down;
    result_t pending = {0};
    send_ok(&b, &pending, "BLPOP nothing 0");
    resp_close(b.c, "bye");
    ck_assert_int_eq(pending.calls, 1);
    ck_assert_int_eq(b.downs, 1);

    /* resp_open inside on_down: the owner reconnects at once. */
    peer_t c;
    peer_init(&c);
    peer_up(&c, 1, h_redis_sock(), 0);
    c.then_down = reopen_from_down;
    resp_close(c.c, "reconnect");
    ck_assert_int_eq(resp_state(c.c), RESP_CONNECTING);
    RUN_UNTIL(c.opens == 2);
    expect_status(&c, "PING", "PONG");
    resp_free(c.c);
    run_for(50);
    ck_assert_int_eq(first.calls + second.calls + pending.calls, 3);
}
END_TEST

/* ---- callbacks never come early ------------------------------------------ */

START_TEST(callback_never_before_resp_send_returns)
{
    h_redis_start_args((const char *const[]){"--requirepass", "pw", NULL});
    peer_t p;
    peer_init(&p);
    p.manual = 1;
    /* DOWN */
    result_t down = {0};
    ck_assert_int_eq(send_flags(&p, 0, &down, "PING"), -1);
    ck_assert_int_eq(down.calls, 0);
    RUN_UNTIL(down.calls == 1);
    ck_assert_str_eq(down.error, "not connected");
    /* CONNECTING */
    result_t connecting = {0};
    peer_open(&p, 1, h_redis_sock(), 0);
    ck_assert_int_eq(resp_open(p.c, resp_addr(p.c)), -1); /* not DOWN */
    ck_assert_int_eq(send_flags(&p, RESP_F_HANDSHAKE, &connecting, "PING"), -1);
    ck_assert_int_eq(connecting.calls, 0);
    RUN_UNTIL(p.opens == 1 && connecting.calls == 1);
    ck_assert_str_eq(connecting.error, "not connected");
    /* HANDSHAKE: only RESP_F_HANDSHAKE commands. */
    ck_assert_int_eq(resp_state(p.c), RESP_HANDSHAKE);
    result_t early_cmd = {0}, auth = {0};
    ck_assert_int_eq(send_flags(&p, 0, &early_cmd, "PING"), -1);
    ck_assert_int_eq(send_flags(&p, RESP_F_HANDSHAKE, &auth, "AUTH pw"), 0);
    ck_assert_int_eq(early_cmd.calls + auth.calls, 0);
    RUN_UNTIL(auth.calls == 1 && early_cmd.calls == 1);
    ck_assert_str_eq(auth.str, "OK");
    ck_assert_msg(strncmp(early_cmd.error, "connection not ready", 20) == 0, "got %s",
                  early_cmd.error);
    resp_ready(p.c);
    ck_assert_int_eq(resp_state(p.c), RESP_UP);
    expect_status(&p, "PING", "PONG");
    /* NO_REPLY without a callback is fine when down; cb NULL otherwise is not. */
    resp_close(p.c, "done");
    ck_assert_int_eq(send_flags(&p, RESP_F_NO_REPLY, NULL, "PING"), -1);
    ck_assert_int_eq(send_flags(&p, 0, NULL, "PING"), -1);
    run_for(20);
    resp_free(p.c);
}
END_TEST

static void auth_then_ready(result_t *res) {
    if (res->error[0] == '\0' && res->type == REDIS_REPLY_STATUS)
        resp_ready(res->peer->c);
    else
        resp_close(res->peer->c, "AUTH failed");
}

static result_t auth_result;
static const char *auth_words;

static void send_auth(peer_t *p) {
    memset(&auth_result, 0, sizeof(auth_result));
    auth_result.then = auth_then_ready;
    auth_result.peer = p;
    ck_assert_int_eq(send_flags(p, RESP_F_HANDSHAKE, &auth_result, auth_words), 0);
}

START_TEST(handshake_commands_from_on_open)
{
    h_redis_start_args((const char *const[]){"--requirepass", "pw", NULL});
    peer_t p;
    peer_init(&p);
    p.manual = 1;
    p.then_open = send_auth;
    auth_words = "AUTH wrong";
    peer_open(&p, 1, h_redis_sock(), 0);
    ck_assert_str_eq(peer_await_down(&p, 0), "AUTH failed");
    ck_assert_int_eq(auth_result.type, REDIS_REPLY_ERROR);
    auth_words = "AUTH pw";
    peer_open(&p, 1, h_redis_sock(), 0);
    RUN_UNTIL(resp_state(p.c) == RESP_UP || p.downs > 1);
    ck_assert_int_eq(resp_state(p.c), RESP_UP);
    expect_status(&p, "PING", "PONG");
    resp_free(p.c);
}
END_TEST

/* ---- pushes -------------------------------------------------------------- */

static void expect_push(peer_t *p, int n, const char *kind, const char *a, const char *b) {
    RUN_UNTIL(p->pushes > n);
    ck_assert_str_eq(p->push[n][0], kind);
    ck_assert_str_eq(p->push[n][1], a);
    ck_assert_str_eq(p->push[n][2], b);
}

START_TEST(pubsub_pushes_reach_on_push)
{
    h_redis_start();
    peer_t sub, pub;
    peer_init(&sub);
    peer_init(&pub);
    peer_up(&sub, 1, h_redis_sock(), 0);
    peer_up(&pub, 1, h_redis_sock(), 0);

    ck_assert_int_eq(send_flags(&sub, RESP_F_NO_REPLY, NULL, "SUBSCRIBE ch"), 0);
    ck_assert_uint_eq(resp_pending(sub.c), 0);
    expect_push(&sub, 0, "subscribe", "ch", "1");
    expect_integer(&pub, "PUBLISH ch hello", 1);
    expect_push(&sub, 1, "message", "ch", "hello");

    ck_assert_int_eq(send_flags(&sub, RESP_F_NO_REPLY, NULL, "SSUBSCRIBE sch"), 0);
    expect_push(&sub, 2, "ssubscribe", "sch", "1");
    expect_integer(&pub, "SPUBLISH sch sharded", 1);
    expect_push(&sub, 3, "smessage", "sch", "sharded");

    ck_assert_int_eq(send_flags(&sub, RESP_F_NO_REPLY, NULL, "PSUBSCRIBE p*"), 0);
    expect_push(&sub, 4, "psubscribe", "p*", "2");
    expect_integer(&pub, "PUBLISH pz pattern", 1);
    expect_push(&sub, 5, "pmessage", "p*", "pz");
    ck_assert_str_eq(sub.push[5][3], "pattern");

    /* A PING on a subscribed connection answers the PING (["pong", ""]). */
    result_t ping;
    command(&sub, &ping, "PING");
    ck_assert_int_eq(ping.type, REDIS_REPLY_ARRAY);
    ck_assert_int_eq(sub.pushes, 6);

    ck_assert_int_eq(send_flags(&sub, RESP_F_NO_REPLY, NULL, "SUNSUBSCRIBE sch"), 0);
    expect_push(&sub, 6, "sunsubscribe", "sch", "0"); /* shard channels count apart */
    ck_assert_int_eq(send_flags(&sub, RESP_F_NO_REPLY, NULL, "UNSUBSCRIBE ch"), 0);
    expect_push(&sub, 7, "unsubscribe", "ch", "1");
    ck_assert_int_eq(send_flags(&sub, RESP_F_NO_REPLY, NULL, "PUNSUBSCRIBE p*"), 0);
    expect_push(&sub, 8, "punsubscribe", "p*", "0");
    ck_assert_int_eq(sub.downs, 0);
    resp_free(sub.c);
    resp_free(pub.c);
}
END_TEST

static void free_from_push(peer_t *p) {
    resp_free(p->c);
}

START_TEST(resp_free_inside_on_push)
{
    h_redis_start();
    peer_t sub;
    peer_init(&sub);
    peer_up(&sub, 1, h_redis_sock(), 0);
    sub.then_push = free_from_push;
    result_t ping = {0};
    /* The PING's reply comes after the push, to a freed connection. */
    const char *argv[] = {"SUBSCRIBE", "a", "b"};
    in_call++;
    ck_assert_int_eq(resp_send(sub.c, 3, argv, NULL, RESP_F_NO_REPLY, NULL, NULL), 0);
    in_call--;
    send_ok(&sub, &ping, "PING");
    RUN_UNTIL(sub.pushes == 1);
    ck_assert_int_eq(ping.calls, 1);
    ck_assert_str_eq(ping.error, "connection closed");
    run_for(50);
    ck_assert_int_eq(sub.pushes, 1);
    ck_assert_int_eq(ping.calls, 1);
}
END_TEST

/* ---- a fake server: what Redis would not send ---------------------------- */

typedef struct fake_s {
    uv_pipe_t server;
    uv_pipe_t client;
    int accepted;
    int eof;                     /* the connection under test closed */
    char rx[4096];               /* what it sent */
    size_t rxlen;
    size_t written;              /* bytes queued by flood_more */
    uv_write_t flood_req;
    char *flood;
} fake_t;

static void on_fake_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b) {
    fake_t *f = h->data;
    (void)suggested;
    static char sink[65536];
    if (f->rxlen < sizeof(f->rx))
        *b = uv_buf_init(f->rx + f->rxlen, (unsigned)(sizeof(f->rx) - f->rxlen));
    else
        *b = uv_buf_init(sink, sizeof(sink));
}

static void on_fake_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b) {
    fake_t *f = s->data;
    uv_stop(&loop);
    if (n < 0) {
        f->eof = 1;
        uv_read_stop(s);
        return;
    }
    if (b->base == f->rx + f->rxlen) f->rxlen += (size_t)n;
}

static void on_fake_connection(uv_stream_t *server, int status) {
    fake_t *f = server->data;
    uv_stop(&loop);
    ck_assert_int_eq(status, 0);
    ck_assert_int_eq(f->accepted, 0);
    uv_pipe_init(&loop, &f->client, 0);
    f->client.data = f;
    ck_assert_int_eq(uv_accept(server, (uv_stream_t *)&f->client), 0);
    uv_read_start((uv_stream_t *)&f->client, on_fake_alloc, on_fake_read);
    f->accepted = 1;
}

static const char *fake_start(fake_t *f) {
    static char path[512];
    memset(f, 0, sizeof(*f));
    snprintf(path, sizeof(path), "%s/fake.sock", h_dir());
    uv_pipe_init(&loop, &f->server, 0);
    f->server.data = f;
    ck_assert_int_eq(uv_pipe_bind(&f->server, path), 0);
    ck_assert_int_eq(uv_listen((uv_stream_t *)&f->server, 4, on_fake_connection), 0);
    return path;
}

static void on_fake_written(uv_write_t *req, int status) {
    (void)status;
    free(req);
}

/* The fake server sends text to the connection under test. */
static void fake_send(fake_t *f, const char *text) {
    uv_write_t *req = malloc(sizeof(*req) + strlen(text));
    ck_assert_ptr_nonnull(req);
    char *copy = (char *)(req + 1);
    memcpy(copy, text, strlen(text));
    uv_buf_t b = uv_buf_init(copy, (unsigned)strlen(text));
    ck_assert_int_eq(uv_write(req, (uv_stream_t *)&f->client, &b, 1, on_fake_written), 0);
}

static int fake_closed;

static void on_fake_closed(uv_handle_t *h) {
    (void)h;
    uv_stop(&loop);
    fake_closed++;
}

static void fake_stop(fake_t *f) {
    int want = f->accepted ? 2 : 1;
    fake_closed = 0;
    if (f->accepted) uv_close((uv_handle_t *)&f->client, on_fake_closed);
    uv_close((uv_handle_t *)&f->server, on_fake_closed);
    RUN_UNTIL(fake_closed == want);
}

/* Waits until the fake server received exactly want. */
static void fake_expect(fake_t *f, const char *want) {
    RUN_UNTIL(f->rxlen >= strlen(want));
    ck_assert_uint_eq(f->rxlen, strlen(want));
    ck_assert(memcmp(f->rx, want, strlen(want)) == 0);
    f->rxlen = 0;
}

START_TEST(requests_are_formatted_as_resp_arrays)
{
    fake_t f;
    const char *path = fake_start(&f);
    peer_t p;
    peer_init(&p);
    peer_up(&p, 1, path, 0);
    RUN_UNTIL(f.accepted);
    const char *argv[] = {"SET", "", "x\r\ny"};
    size_t argvlen[] = {3, 0, 4};
    result_t a = {0}, b = {0}, c = {0};
    in_call++;
    ck_assert_int_eq(resp_send(p.c, 3, argv, argvlen, 0, on_result, &a), 0);
    in_call--;
    send_ok(&p, &b, "PING");
    /* Both, in order, byte for byte. */
    fake_expect(&f, "*3\r\n$3\r\nSET\r\n$0\r\n\r\n$4\r\nx\r\ny\r\n*1\r\n$4\r\nPING\r\n");
    fake_send(&f, "+OK\r\n+PO");
    RUN_UNTIL(a.calls == 1);
    fake_send(&f, "NG\r\n");
    RUN_UNTIL(b.calls == 1);
    ck_assert_str_eq(b.str, "PONG");
    /* An empty command is refused, later. */
    ck_assert_int_eq(resp_send(p.c, 0, argv, argvlen, 0, on_result, &c), -1);
    ck_assert_int_eq(c.calls, 0);
    RUN_UNTIL(c.calls == 1);
    ck_assert_str_eq(c.error, "empty command");
    resp_free(p.c);
    fake_stop(&f);
}
END_TEST

START_TEST(unsolicited_sunsubscribe_goes_to_on_push)
{
    fake_t f;
    const char *path = fake_start(&f);
    peer_t p;
    peer_init(&p);
    peer_up(&p, 1, path, 0);
    RUN_UNTIL(f.accepted);
    result_t get = {0};
    send_ok(&p, &get, "GET k");
    fake_expect(&f, "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n");
    /* What Redis 7 sends when a slot moves, then a push in capitals, then
     * the reply. */
    fake_send(&f, "*3\r\n$12\r\nsunsubscribe\r\n$3\r\nsch\r\n:0\r\n"
                  "*3\r\n$8\r\nSMESSAGE\r\n$3\r\nsch\r\n$2\r\nhi\r\n"
                  "$5\r\nvalue\r\n");
    RUN_UNTIL(get.calls == 1);
    ck_assert_str_eq(get.str, "value");
    ck_assert_int_eq(p.pushes, 2);
    ck_assert_str_eq(p.push[0][0], "sunsubscribe");
    ck_assert_str_eq(p.push[0][1], "sch");
    ck_assert_str_eq(p.push[1][0], "SMESSAGE");
    ck_assert_str_eq(p.push[1][2], "hi");
    /* An unsolicited push with nothing pending is fine too. */
    fake_send(&f, "*3\r\n$12\r\nsunsubscribe\r\n$1\r\nx\r\n:0\r\n");
    RUN_UNTIL(p.pushes == 3);
    /* An array that only looks alike answers the command. */
    result_t arr = {0};
    send_ok(&p, &arr, "LRANGE l 0 -1");
    fake_send(&f, "*2\r\n$4\r\npong\r\n$0\r\n\r\n");
    RUN_UNTIL(arr.calls == 1);
    ck_assert_int_eq(arr.type, REDIS_REPLY_ARRAY);
    ck_assert_int_eq(p.pushes, 3);
    ck_assert_int_eq(p.downs, 0);
    resp_free(p.c);
    fake_stop(&f);
}
END_TEST

START_TEST(protocol_error_drops_with_reader_error)
{
    fake_t f;
    const char *path = fake_start(&f);
    peer_t p;
    peer_init(&p);
    peer_up(&p, 1, path, 0);
    RUN_UNTIL(f.accepted);
    result_t res = {0};
    send_ok(&p, &res, "PING");
    fake_send(&f, "?what\r\n");
    const char *why = peer_await_down(&p, 0);
    ck_assert_msg(strstr(why, "Protocol error") != NULL, "got %s", why);
    ck_assert_int_eq(res.calls, 1);
    ck_assert_str_eq(res.error, why);
    RUN_UNTIL(f.eof);
    resp_free(p.c);
    fake_stop(&f);
}
END_TEST

START_TEST(reply_with_nothing_pending_drops)
{
    fake_t f;
    const char *path = fake_start(&f);
    peer_t p;
    peer_init(&p);
    peer_up(&p, 1, path, 0);
    RUN_UNTIL(f.accepted);
    fake_send(&f, "-ERR nobody asked\r\n");
    const char *why = peer_await_down(&p, 0);
    ck_assert_msg(strstr(why, "ERR nobody asked") != NULL, "got %s", why);
    resp_free(p.c);
    fake_stop(&f);
}
END_TEST

static void on_flood_written(uv_write_t *req, int status);

static void flood_more(fake_t *f) {
    uv_buf_t b = uv_buf_init(f->flood, 1u << 20);
    f->flood_req.data = f;
    if (uv_write(&f->flood_req, (uv_stream_t *)&f->client, &b, 1, on_flood_written) == 0)
        f->written += 1u << 20;
}

static void on_flood_written(uv_write_t *req, int status) {
    fake_t *f = req->data;
    if (status == 0 && f->written < 3 * (size_t)RESP_READ_MAX) flood_more(f);
}

START_TEST(unread_input_capped_at_resp_read_max)
{
    fake_t f;
    const char *path = fake_start(&f);
    peer_t p;
    /* No command deadline (0): 64 MiB through a sanitizer on a busy machine
     * may take longer than any bound chosen here. */
    peer_init_tls(&p, 5000, 0, NULL, NULL);
    peer_up(&p, 1, path, 0);
    RUN_UNTIL(f.accepted);
    result_t res = {0};
    send_ok(&p, &res, "GET huge");
    f.flood = malloc(1u << 20);
    ck_assert_ptr_nonnull(f.flood);
    memset(f.flood, 'x', 1u << 20);
    fake_send(&f, "$1000000000\r\n");
    flood_more(&f);
    RUN_UNTIL_MS(p.downs == 1, 50000);
    const char *why = p.why;
    ck_assert_str_eq(why, "reply longer than RESP_READ_MAX");
    ck_assert_str_eq(res.error, why);
    ck_assert_uint_le(f.written, 2 * (size_t)RESP_READ_MAX);
    resp_free(p.c);
    fake_stop(&f);
    free(f.flood);
}
END_TEST

/* The fake server sends len bytes of data (copied). */
static void fake_send_bytes(fake_t *f, const char *data, size_t len) {
    uv_write_t *req = malloc(sizeof(*req) + len);
    ck_assert_ptr_nonnull(req);
    char *copy = (char *)(req + 1);
    memcpy(copy, data, len);
    uv_buf_t b = uv_buf_init(copy, (unsigned)len);
    ck_assert_int_eq(uv_write(req, (uv_stream_t *)&f->client, &b, 1, on_fake_written), 0);
}

/* An array's header claims 2^31 - 1 elements: refused at the header, before
 * the reader allocates room for them (16 GB), as a protocol error. */
START_TEST(reply_claiming_too_many_elements_drops)
{
    fake_t f;
    const char *path = fake_start(&f);
    peer_t p;
    peer_init(&p);
    peer_up(&p, 1, path, 0);
    RUN_UNTIL(f.accepted);
    result_t res = {0};
    send_ok(&p, &res, "PING");
    fake_send(&f, "*2147483647\r\n");
    const char *why = peer_await_down(&p, 0);
    ck_assert_str_eq(why, "reply claims more than RESP_ELEMENTS_MAX elements");
    ck_assert_int_eq(res.calls, 1);
    ck_assert_str_eq(res.error, why);
    RUN_UNTIL(f.eof);
    resp_free(p.c);
    fake_stop(&f);
}
END_TEST

/* What a reply's arrays claim adds up (RESP_ELEMENTS_MAX in all, not per
 * array: nested headers of a few bytes each would each allocate as much),
 * and starts again with the next reply and the next connection. */
START_TEST(element_claims_add_up_per_reply)
{
    fake_t f;
    const char *path = fake_start(&f);
    peer_t p;
    peer_init(&p);
    peer_up(&p, 1, path, 0);
    RUN_UNTIL(f.accepted);
    /* Two replies of 700,000 empty arrays each: each under the bound. */
    const size_t n = 700000;
    char *big = malloc(16 + 4 * n);
    ck_assert_ptr_nonnull(big);
    size_t len = (size_t)sprintf(big, "*%zu\r\n", n);
    for (size_t i = 0; i < n; i++, len += 4) memcpy(big + len, "*0\r\n", 4);
    result_t a = {0}, b = {0};
    send_ok(&p, &a, "LRANGE a 0 -1");
    send_ok(&p, &b, "LRANGE b 0 -1");
    fake_send_bytes(&f, big, len);
    fake_send_bytes(&f, big, len);
    free(big);
    RUN_UNTIL_MS(b.calls == 1, 30000);
    ck_assert_msg(a.error[0] == '\0' && b.error[0] == '\0', "%s / %s", a.error, b.error);
    ck_assert_uint_eq(a.elements, n);
    ck_assert_uint_eq(b.elements, n);
    ck_assert_int_eq(p.downs, 0);
    /* One element more than the bound, nested: the inner header is refused. */
    result_t c = {0};
    send_ok(&p, &c, "LRANGE c 0 -1");
    char text[64];
    snprintf(text, sizeof(text), "*%u\r\n*2\r\n", RESP_ELEMENTS_MAX - 1);
    fake_send(&f, text);
    const char *why = peer_await_down(&p, 0);
    ck_assert_str_eq(why, "reply claims more than RESP_ELEMENTS_MAX elements");
    ck_assert_str_eq(c.error, why);
    RUN_UNTIL(f.eof);
    fake_stop(&f);
    /* A new connection starts from nothing. */
    path = fake_start(&f);
    peer_up(&p, 1, path, 0);
    RUN_UNTIL(f.accepted);
    result_t d = {0};
    send_ok(&p, &d, "LRANGE d 0 -1");
    snprintf(text, sizeof(text), "*%u\r\n", RESP_ELEMENTS_MAX);
    fake_send(&f, text);
    run_for(100);
    ck_assert_int_eq(p.downs, 1);
    ck_assert_int_eq(d.calls, 0);
    resp_free(p.c);
    RUN_UNTIL(d.calls == 1);
    fake_stop(&f);
}
END_TEST

/* A reply's strings together: each is at most RESP_READ_MAX (buffered
 * whole before it is allocated), and all of them RESP_STRINGS_MAX. */
static char *chunk;
static size_t chunk_len, chunks_sent, chunks_max;
static uv_write_t chunk_req;

static void on_chunk_written(uv_write_t *req, int status) {
    fake_t *f = req->data;
    if (status != 0 || chunks_sent == chunks_max) return;
    uv_buf_t b = uv_buf_init(chunk, (unsigned)chunk_len);
    if (uv_write(&chunk_req, (uv_stream_t *)&f->client, &b, 1, on_chunk_written) == 0)
        chunks_sent++;
}

START_TEST(reply_strings_capped_at_resp_strings_max)
{
    fake_t f;
    const char *path = fake_start(&f);
    peer_t p;
    /* No command deadline: 64 MiB through a sanitizer takes a while. */
    peer_init_tls(&p, 5000, 0, NULL, NULL);
    peer_up(&p, 1, path, 0);
    RUN_UNTIL(f.accepted);
    result_t res = {0};
    send_ok(&p, &res, "LRANGE big 0 -1");
    const size_t mib = 1u << 20;
    chunk = malloc(mib + 32);
    ck_assert_ptr_nonnull(chunk);
    chunk_len = (size_t)sprintf(chunk, "$%zu\r\n", mib);
    memset(chunk + chunk_len, 'x', mib);
    chunk_len += mib;
    memcpy(chunk + chunk_len, "\r\n", 2);
    chunk_len += 2;
    /* 64 strings of 1 MiB are RESP_STRINGS_MAX; the 65th is one too many. */
    chunks_sent = 0;
    chunks_max = RESP_STRINGS_MAX / mib + 4;
    fake_send(&f, "*100\r\n");
    chunk_req.data = &f;
    on_chunk_written(&chunk_req, 0);
    RUN_UNTIL_MS(p.downs == 1, 50000);
    ck_assert_str_eq(p.why, "reply's strings longer than RESP_STRINGS_MAX");
    ck_assert_str_eq(res.error, p.why);
    ck_assert_uint_ge(chunks_sent, RESP_STRINGS_MAX / mib + 1);
    resp_free(p.c);
    fake_stop(&f);
    free(chunk);
}
END_TEST

/* ---- TLS ----------------------------------------------------------------- */

static tls_ctx_t *ctx_with(const char *ca, const char *cert, const char *key, int verify) {
    char caf[512], certf[512], keyf[512], err[TLS_ERR_LEN];
    snprintf(caf, sizeof(caf), "%s/%s", h_dir(), ca);
    snprintf(certf, sizeof(certf), "%s/%s", h_dir(), cert ? cert : "");
    snprintf(keyf, sizeof(keyf), "%s/%s", h_dir(), key ? key : "");
    tls_opts_t o = {.ca_file = caf, .cert_file = cert ? certf : NULL,
                    .key_file = key ? keyf : NULL, .verify = verify};
    tls_ctx_t *t = tls_ctx_new(&o, err, sizeof(err));
    ck_assert_msg(t != NULL, "tls_ctx_new: %s", err);
    return t;
}

START_TEST(tls_commands_with_the_right_ca)
{
    h_tls_make_certs(h_dir());
    int r = h_redis_start_tls(0, h_dir(), 0);
    tls_ctx_t *tls = ctx_with("ca.crt", NULL, NULL, 1);
    /* By IP address (checked against IP:127.0.0.1)... */
    peer_t p;
    peer_init_tls(&p, 5000, 5000, tls, NULL);
    peer_up(&p, 0, "127.0.0.1", h_redis_port(r));
    basic_commands(&p);
    big_value_round_trip(&p, 4u << 20);
    resp_free(p.c);
    /* ...and by name (DNS:localhost). */
    peer_t q;
    peer_init_tls(&q, 5000, 5000, tls, NULL);
    peer_up(&q, 0, "localhost", h_redis_port(r));
    expect_status(&q, "PING", "PONG");
    resp_free(q.c);
    /* An explicit server name for an address. */
    peer_t n;
    peer_init_tls(&n, 5000, 5000, tls, "localhost");
    peer_up(&n, 0, "127.0.0.1", h_redis_port(r));
    expect_status(&n, "PING", "PONG");
    resp_free(n.c);
    tls_ctx_free(tls);
}
END_TEST

START_TEST(tls_wrong_ca_refused)
{
    h_tls_make_certs(h_dir());
    int r = h_redis_start_tls(0, h_dir(), 0);
    tls_ctx_t *tls = ctx_with("other-ca.crt", NULL, NULL, 1);
    peer_t p;
    peer_init_tls(&p, 5000, 5000, tls, NULL);
    peer_open(&p, 0, "127.0.0.1", h_redis_port(r));
    const char *why = peer_await_down(&p, 0);
    ck_assert_msg(strncmp(why, "TLS: ", 5) == 0, "got %s", why);
    ck_assert_msg(strncmp(why, "TLS: certificate verify failed: ", 32) == 0, "got %s", why);
    ck_assert_int_eq(p.opens, 0);
    resp_free(p.c);
    tls_ctx_free(tls);
    /* Without verification the same CA gets through. */
    tls = ctx_with("other-ca.crt", NULL, NULL, 0);
    peer_init_tls(&p, 5000, 5000, tls, "wrong.example");
    peer_up(&p, 0, "127.0.0.1", h_redis_port(r));
    expect_status(&p, "PING", "PONG");
    resp_free(p.c);
    tls_ctx_free(tls);
}
END_TEST

START_TEST(tls_wrong_server_name_refused)
{
    h_tls_make_certs(h_dir());
    int r = h_redis_start_tls(0, h_dir(), 0);
    tls_ctx_t *tls = ctx_with("ca.crt", NULL, NULL, 1);
    peer_t p;
    peer_init_tls(&p, 5000, 5000, tls, "wrong.example");
    peer_open(&p, 0, "127.0.0.1", h_redis_port(r));
    ck_assert_str_eq(peer_await_down(&p, 0), "TLS: certificate verify failed: hostname mismatch");
    ck_assert_int_eq(p.opens, 0);
    resp_free(p.c);
    /* An address the certificate does not carry. */
    peer_init_tls(&p, 5000, 5000, tls, "127.0.0.2");
    peer_open(&p, 0, "127.0.0.1", h_redis_port(r));
    ck_assert_str_eq(peer_await_down(&p, 0), "TLS: certificate verify failed: IP address mismatch");
    resp_free(p.c);
    tls_ctx_free(tls);
}
END_TEST

START_TEST(tls_client_certificate_required)
{
    h_tls_make_certs(h_dir());
    int r = h_redis_start_tls(0, h_dir(), 1);
    /* Without one: the server refuses it (TLS 1.3 tells after the client
     * finished its part of the handshake, so on the first command). */
    tls_ctx_t *tls = ctx_with("ca.crt", NULL, NULL, 1);
    peer_t p;
    peer_init_tls(&p, 5000, 5000, tls, NULL);
    peer_open(&p, 0, "127.0.0.1", h_redis_port(r));
    RUN_UNTIL(p.opens == 1 || p.downs == 1);
    result_t res = {0};
    if (p.downs == 0) {
        send_ok(&p, &res, "PING");
        RUN_UNTIL(res.calls == 1);
        ck_assert_msg(res.error[0] != '\0', "PING without a client certificate got %s", res.str);
        RUN_UNTIL(p.downs == 1);
    }
    ck_assert_msg(strncmp(p.why, "TLS: ", 5) == 0, "got %s", p.why);
    ck_assert_msg(strstr(p.why, "certificate required") != NULL, "got %s", p.why);
    resp_free(p.c);
    tls_ctx_free(tls);
    /* With one. */
    tls = ctx_with("ca.crt", "client.crt", "client.key", 1);
    peer_init_tls(&p, 5000, 5000, tls, NULL);
    peer_up(&p, 0, "127.0.0.1", h_redis_port(r));
    expect_status(&p, "PING", "PONG");
    expect_status(&p, "SET k v", "OK");
    resp_free(p.c);
    tls_ctx_free(tls);
}
END_TEST

START_TEST(tls_context_errors)
{
    h_tls_make_certs(h_dir());
    char err[TLS_ERR_LEN], path[512], cert[512], key[512];
    snprintf(path, sizeof(path), "%s/missing-ca.crt", h_dir());
    tls_opts_t o = {.ca_file = path, .verify = 1};
    ck_assert_ptr_null(tls_ctx_new(&o, err, sizeof(err)));
    ck_assert_msg(strstr(err, "missing-ca.crt") != NULL, "got %s", err);
    /* A certificate with somebody else's key. */
    snprintf(path, sizeof(path), "%s/ca.crt", h_dir());
    snprintf(cert, sizeof(cert), "%s/client.crt", h_dir());
    snprintf(key, sizeof(key), "%s/server.key", h_dir());
    tls_opts_t m = {.ca_file = path, .cert_file = cert, .key_file = key, .verify = 1};
    ck_assert_ptr_null(tls_ctx_new(&m, err, sizeof(err)));
    ck_assert_msg(strstr(err, "does not match") != NULL, "got %s", err);
    tls_opts_t nokey = {.ca_file = path, .cert_file = cert, .verify = 1};
    ck_assert_ptr_null(tls_ctx_new(&nokey, err, sizeof(err)));
    ck_assert_msg(strstr(err, "key") != NULL, "got %s", err);
    /* Nothing is left on OpenSSL's error queue. */
    ck_assert_uint_eq(ERR_peek_error(), 0);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("resp");
    TCase *tc = tcase_create("resp");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, unix_commands_and_replies);
    tcase_add_test(tc, tcp_commands_and_replies);
    tcase_add_test(tc, host_name_resolved);
    tcase_add_test(tc, many_commands_pipelined_in_one_iteration);
    tcase_add_test(tc, large_bulk_reply_split_across_reads);
    tcase_add_test(tc, refused_tcp_port_reported_at_once);
    tcase_add_test(tc, missing_unix_socket);
    tcase_add_test(tc, connect_timeout_covers_tls_handshake);
    tcase_add_test(tc, stopped_redis_command_times_out);
    tcase_add_test(tc, lowered_timeout_covers_commands_behind_an_older_one);
    tcase_add_test(tc, pending_commands_fail_when_redis_is_killed);
    tcase_add_test(tc, resp_close_fails_pending_then_on_down);
    tcase_add_test(tc, resp_free_fails_pending_and_refused_at_once);
    tcase_add_test(tc, resp_close_inside_a_reply_callback);
    tcase_add_test(tc, resp_free_and_open_inside_callbacks);
    tcase_add_test(tc, callback_never_before_resp_send_returns);
    tcase_add_test(tc, handshake_commands_from_on_open);
    tcase_add_test(tc, pubsub_pushes_reach_on_push);
    tcase_add_test(tc, resp_free_inside_on_push);
    tcase_add_test(tc, requests_are_formatted_as_resp_arrays);
    tcase_add_test(tc, unsolicited_sunsubscribe_goes_to_on_push);
    tcase_add_test(tc, protocol_error_drops_with_reader_error);
    tcase_add_test(tc, reply_with_nothing_pending_drops);
    tcase_add_test(tc, unread_input_capped_at_resp_read_max);
    tcase_add_test(tc, reply_claiming_too_many_elements_drops);
    tcase_add_test(tc, element_claims_add_up_per_reply);
    tcase_add_test(tc, reply_strings_capped_at_resp_strings_max);
    tcase_add_test(tc, tls_commands_with_the_right_ca);
    tcase_add_test(tc, tls_wrong_ca_refused);
    tcase_add_test(tc, tls_wrong_server_name_refused);
    tcase_add_test(tc, tls_client_certificate_required);
    tcase_add_test(tc, tls_context_errors);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return h_main(suite());
}
