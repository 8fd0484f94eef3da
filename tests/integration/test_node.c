/* Integration tests of one Redis node (daemon/backend/node.c) against a real redis-server.
 * SPDX-License-Identifier: MIT
 *
 * Each test drives a node_t on a private uv loop: it runs the loop until
 * what it waits for has happened, bounded by a guard timer, never by
 * sleeping. Redis is looked at with redis-cli. The test links with
 * -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc (see the Makefile) so
 * that it can make one chosen allocation of the daemon's code fail. */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/backend/backend.h"
#include "daemon/backend/node.h"
#include "daemon/backend/scripts.h"
#include "daemon/util/timers.h"
#include "daemon/util/util.h"
#include "tests/support/harness.h"

#define UUID   "6f1c2a3b-4d5e-4f60-8a7b-9c0d1e2f3a4b"
#define PREFIX "dlock:"
#define LEASE  30000

/* ---- failing allocations on demand ---------------------------------------- */

/* The linker sends every malloc, calloc and realloc of the objects linked
 * into this test (node.c, buf.c, resp.c, ...) here; libc's and the shared
 * libraries' own calls are not affected. The names are the linker's
 * (--wrap), hence the reserved-looking prefix. The daemon makes its
 * records with zalloc() (util.h: malloc and memset), which counts as a
 * calloc here. */
void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t size);
void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t size);

static int calloc_fail_at;     /* 0: off; n: the n-th malloc or calloc from now fails */
static int realloc_fail_at;
static int alloc_failures;     /* failures made */
static size_t failed_size;     /* the size the last failure was asked for */
static const void *failed_ptr; /* the pointer a failed realloc was given */

void *__wrap_malloc(size_t size) {
    if (calloc_fail_at > 0 && --calloc_fail_at == 0) {
        alloc_failures++;
        failed_size = size;
        errno = ENOMEM;
        return NULL;
    }
    return __real_malloc(size);
}

void *__wrap_calloc(size_t n, size_t size) {
    if (calloc_fail_at > 0 && --calloc_fail_at == 0) {
        alloc_failures++;
        failed_size = n * size;
        errno = ENOMEM;
        return NULL;
    }
    return __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t size) {
    if (realloc_fail_at > 0 && --realloc_fail_at == 0) {
        alloc_failures++;
        failed_size = size;
        failed_ptr = p;
        errno = ENOMEM;
        return NULL;
    }
    return __real_realloc(p, size);
}

/* ---- the loop ------------------------------------------------------------ */

static uv_loop_t loop;
static timers_t *timers;
static uv_timer_t guard;       /* bounds every wait */
static int expired;
static int in_call;            /* inside node_submit/node_watch/... called by a test */
static int early;              /* callbacks that fired inside such a call */
static int in_free;            /* inside node_free */
static int freed;              /* node_free has returned */
static int late;               /* callbacks that fired after node_free returned */
static int seq;                /* op callbacks so far, to see their order */
static node_t *nd;
static int states;             /* on_state calls */

/* Every callback of the tests calls this: the loop iteration ends instead
 * of polling on, and RUN_UNTIL looks at its condition again. */
static void happened(void) {
    if (in_call) early++;
    if (freed) late++;
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
        uv_timer_start(&guard, on_guard, (ms), 0);                         \
        while (!(cond) && !expired) uv_run(&loop, UV_RUN_ONCE);            \
        uv_timer_stop(&guard);                                             \
        ck_assert_msg((cond), "not within %d ms: %s", (int)(ms), #cond);   \
    } while (0)
#define RUN_UNTIL(cond) RUN_UNTIL_MS(cond, H_WAIT_MS)

/* For conditions that look at Redis through redis-cli, which no loop event
 * announces: runs the loop without blocking between two looks. */
#define POLL_UNTIL(cond) do {                                              \
        long long end_ = h_now_ms() + H_WAIT_MS;                           \
        while (!(cond)) {                                                  \
            ck_assert_msg(h_now_ms() < end_, "not within %d ms: %s",       \
                          H_WAIT_MS, #cond);                               \
            uv_run(&loop, UV_RUN_NOWAIT);                                  \
        }                                                                  \
    } while (0)

/* Runs the loop for ms, to see that nothing (more) happens. */
static void run_for(int ms) {
    expired = 0;
    uv_timer_start(&guard, on_guard, (uint64_t)ms, 0);
    while (!expired) uv_run(&loop, UV_RUN_ONCE);
}

static void setup(void) {
    h_setup();
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    timers = timers_new(&loop);
    ck_assert_ptr_nonnull(timers);
    uv_timer_init(&loop, &guard);
    in_call = early = in_free = freed = late = seq = states = 0;
    calloc_fail_at = realloc_fail_at = alloc_failures = 0;
    nd = NULL;
}

static void teardown(void) {
    if (nd != NULL) node_free(nd);
    nd = NULL;
    ck_assert_msg(early == 0, "%d callbacks fired before the call that queued them returned",
                  early);
    uv_close((uv_handle_t *)&guard, NULL);
    timers_free(timers);
    /* The node was freed: the loop ends once its handles closed. */
    uv_run(&loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
    h_teardown();
}

/* ---- the node ------------------------------------------------------------ */

static void on_state(void *data) {
    ck_assert_ptr_eq(data, &states);
    happened();
    states++;
}

static node_t *node_at(const char *sock, uint32_t command_ms) {
    node_opts_t o = {
        .label = "test-redis",
        .addr = {.is_unix = 1},
        .username = "",
        .password = "",
        .key_prefix = PREFIX,
        .uuid = UUID,
        .client_name = "dlockd:test-node",
        .connect_timeout_ms = 5000,
        .command_timeout_ms = command_ms,
        .on_state = on_state,
        .data = &states,
    };
    snprintf(o.addr.host, sizeof(o.addr.host), "%s", sock);
    node_t *n = node_new(&loop, timers, &o);
    ck_assert_ptr_nonnull(n);
    ck_assert_str_eq(node_label(n), "test-redis");
    return n;
}

static void node_start_ms(uint32_t command_ms) {
    nd = node_at(h_redis_sock(), command_ms);
}

/* Starts redis and a node, and waits until the node is up. */
static void node_start_up(void) {
    h_redis_start();
    node_start_ms(5000);
    RUN_UNTIL(node_up(nd));
    ck_assert_int_eq(states, 1);
}

/* ---- ops: one op and what its callback saw ------------------------------- */

typedef struct top_s top_t;
struct top_s {
    backend_op_t op;
    char name[64];
    int calls;
    int seq;                       /* when its callback fired, in seq */
    int in_free;                   /* it fired inside node_free */
    backend_result_t res;
    char error[BACKEND_ERR_LEN];   /* a copy of res.error */
    void (*then)(top_t *t);        /* called from the callback */
};

static void on_op(backend_op_t *op) {
    top_t *t = container_of(op, top_t, op);
    happened();
    t->calls++;
    t->seq = ++seq;
    t->in_free = in_free;
    t->res = op->res;
    t->error[0] = '\0';
    if (op->res.status != BACKEND_OK) {
        ck_assert_ptr_nonnull(op->res.error);
        snprintf(t->error, sizeof(t->error), "%s", op->res.error);
    }
    t->res.error = NULL;
    if (t->then != NULL) t->then(t);
}

static void op_init(top_t *t, backend_op_type_t kind, const char *name, uint64_t owner,
                    uint32_t lease_ms) {
    memset(t, 0, sizeof(*t));
    snprintf(t->name, sizeof(t->name), "%s", name);
    t->op.type = kind;
    t->op.name = t->name;
    t->op.len = strlen(t->name);
    t->op.owner = owner;
    t->op.lease_ms = lease_ms;
    t->op.cb = on_op;
}

static void submit(top_t *t) {
    in_call++;
    node_submit(nd, &t->op);
    in_call--;
}

/* Runs one op alone, checks that it succeeded, and returns what it saw. */
static top_t run_op(backend_op_type_t kind, const char *name, uint64_t owner,
                    uint32_t lease_ms) {
    top_t t;
    op_init(&t, kind, name, owner, lease_ms);
    submit(&t);
    ck_assert_int_eq(t.calls, 0);
    RUN_UNTIL(t.calls > 0);
    ck_assert_int_eq(t.calls, 1);
    ck_assert_msg(t.res.status == BACKEND_OK, "op %d on %s: status %d: %s", (int)kind, name,
                  (int)t.res.status, t.error);
    return t;
}

static uint64_t acquire_granted(const char *name, uint64_t owner) {
    top_t t = run_op(BACKEND_ACQUIRE, name, owner, LEASE);
    ck_assert_int_eq(t.res.outcome, BACKEND_GRANTED);
    ck_assert_uint_gt(t.res.fence, 0);
    return t.res.fence;
}

static int all_called(const top_t *ts, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (ts[i].calls == 0) return 0;
    return 1;
}

/* ---- redis, seen from redis-cli ------------------------------------------- */

/* The lock hash's field for owner. */
static const char *field(uint64_t owner) {
    static char f[64];
    snprintf(f, sizeof(f), "%s:%llu", UUID, (unsigned long long)owner);
    return f;
}

static const char *hget(const char *name, uint64_t owner) {
    return h_redis_cli("HGET '%s%s' '%s'", PREFIX, name, field(owner));
}

static long long cli_ll(const char *out) {
    char *end;
    long long v = strtoll(out, &end, 10);
    ck_assert_msg(end != out && *end == '\0', "not a number: '%s'", out);
    return v;
}

static const char *channel(const char *name) {
    static char c[128];
    snprintf(c, sizeof(c), "redisson_lock__channel:{%s%s}", PREFIX, name);
    return c;
}

/* Stops redis with SIGSTOP and waits until the kernel says it stopped, so
 * that nothing sent from now on is answered. */
static void redis_freeze(void) {
    long long pid = cli_ll(h_redis_cli("INFO server | grep '^process_id:' | tr -dc 0-9"));
    char path[64], text[512];
    snprintf(path, sizeof(path), "/proc/%lld/stat", pid);
    h_redis_signal(SIGSTOP);
    long long end = h_now_ms() + H_WAIT_MS;
    for (;;) {
        FILE *f = fopen(path, "r");
        ck_assert_ptr_nonnull(f);
        size_t n = fread(text, 1, sizeof(text) - 1, f);
        fclose(f);
        text[n] = '\0';
        const char *paren = strrchr(text, ')'); /* "pid (comm) state ..." */
        ck_assert_ptr_nonnull(paren);
        if (paren[1] == ' ' && paren[2] == 'T') return;
        ck_assert_msg(h_now_ms() < end, "redis %lld never stopped: %s", pid, text);
    }
}

static long long numsub(const char *name) {
    return cli_ll(h_redis_cli("PUBSUB NUMSUB '%s' | tail -n 1", channel(name)));
}

static void reset_stats(void) {
    ck_assert_str_eq(h_redis_cli("CONFIG RESETSTAT"), "OK");
    ck_assert_int_eq(h_redis_calls("evalsha"), 0);
}

/* A raw subscriber of name's channel, as another Redisson client would be. */
static h_conn_t *raw_subscribe(const char *name) {
    h_conn_t *c = h_connect(h_redis_sock());
    h_send(c, "SUBSCRIBE %s\r\n", channel(name));
    for (;;) { /* *3 subscribe <channel> :1 */
        const char *line = h_recv(c, H_WAIT_MS);
        ck_assert_msg(line != NULL, "no SUBSCRIBE reply");
        if (strcmp(line, ":1\r") == 0) break;
    }
    return c;
}

/* ---- watches ------------------------------------------------------------- */

typedef struct watcher_s {
    int watching;
    int released;
} watcher_t;

static void on_watch(void *data, backend_event_t ev) {
    watcher_t *w = data;
    happened();
    if (ev == BACKEND_WATCHING) w->watching++;
    else if (ev == BACKEND_RELEASED) w->released++;
    else ck_abort_msg("unknown event %d", (int)ev);
}

static void watch(const char *name, watcher_t *w) {
    in_call++;
    node_watch(nd, name, strlen(name), BACKEND_MUTEX, 0, on_watch, w);
    in_call--;
}

static void unwatch(const char *name) {
    in_call++;
    node_unwatch(nd, name, strlen(name), BACKEND_MUTEX, 0);
    in_call--;
}

static void publish(const char *name, const char *receivers) {
    ck_assert_str_eq(h_redis_cli("PUBLISH '%s' 0", channel(name)), receivers);
}

/* ---- ops and the Redisson layout ----------------------------------------- */

START_TEST(ops_follow_the_redisson_layout)
{
    node_start_up();
    top_t t;

    /* A free lock: STATUS says -2, RELEASE and DROP -1. */
    t = run_op(BACKEND_STATUS, "a", 1, 0);
    ck_assert_int_eq(t.res.ttl_ms, -2);
    ck_assert_int_eq(t.res.holds, 0);
    t = run_op(BACKEND_RELEASE, "a", 1, 0);
    ck_assert_int_eq(t.res.holds, -1);
    t = run_op(BACKEND_DROP, "a", 1, 0);
    ck_assert_int_eq(t.res.holds, -1);

    /* A grant: the hash "<prefix><name>" with the field "<uuid>:<owner>",
     * the lease as its expiry, the fence from the token key. */
    uint64_t f1 = acquire_granted("a", 1);
    ck_assert_str_eq(hget("a", 1), "1");
    ck_assert_str_eq(h_redis_cli("HLEN %sa", PREFIX), "1");
    long long pttl = cli_ll(h_redis_cli("PTTL %sa", PREFIX));
    ck_assert(pttl > 0 && pttl <= LEASE);
    ck_assert_uint_eq((uint64_t)cli_ll(h_redis_cli("GET 'redisson_lock_token:{%sa}'", PREFIX)),
                      f1);

    /* The same owner again: one hold more. */
    t = run_op(BACKEND_ACQUIRE, "a", 1, LEASE);
    ck_assert_int_eq(t.res.outcome, BACKEND_REENTERED);
    ck_assert_int_eq(t.res.holds, 2);
    ck_assert_str_eq(hget("a", 1), "2");

    /* Someone else: taken, with the time left. */
    t = run_op(BACKEND_ACQUIRE, "a", 2, LEASE);
    ck_assert_int_eq(t.res.outcome, BACKEND_TAKEN);
    ck_assert(t.res.ttl_ms > 0 && t.res.ttl_ms <= LEASE);
    ck_assert_str_eq(hget("a", 2), "");
    ck_assert_str_eq(h_redis_cli("PERSIST %sa", PREFIX), "1");
    t = run_op(BACKEND_ACQUIRE, "a", 2, LEASE);
    ck_assert_int_eq(t.res.outcome, BACKEND_TAKEN);
    ck_assert_int_eq(t.res.ttl_ms, -1);

    /* STATUS: the time left and that owner's holds. */
    t = run_op(BACKEND_STATUS, "a", 1, 0);
    ck_assert_int_eq(t.res.ttl_ms, -1);
    ck_assert_int_eq(t.res.holds, 2);
    t = run_op(BACKEND_STATUS, "a", 2, 0);
    ck_assert_int_eq(t.res.holds, 0);

    /* DROP takes one hold and never deletes; RELEASE deletes. */
    t = run_op(BACKEND_DROP, "a", 1, 0);
    ck_assert_int_eq(t.res.holds, 1);
    ck_assert_str_eq(hget("a", 1), "1");
    t = run_op(BACKEND_DROP, "a", 1, 0);
    ck_assert_int_eq(t.res.holds, 1);
    ck_assert_str_eq(hget("a", 1), "1");
    t = run_op(BACKEND_RELEASE, "a", 2, 0);
    ck_assert_int_eq(t.res.holds, -1); /* not 2's */
    t = run_op(BACKEND_RELEASE, "a", 1, 0);
    ck_assert_int_eq(t.res.holds, 0);
    ck_assert_int_eq(t.res.others_waiting, 0);
    ck_assert_str_eq(h_redis_cli("EXISTS %sa", PREFIX), "0");
    t = run_op(BACKEND_RELEASE, "a", 1, 0);
    ck_assert_int_eq(t.res.holds, -1);
    t = run_op(BACKEND_STATUS, "a", 1, 0);
    ck_assert_int_eq(t.res.ttl_ms, -2);

    /* Fences rise from one grant to the next, whoever gets it. */
    uint64_t f2 = acquire_granted("a", 2);
    ck_assert_uint_gt(f2, f1);
    ck_assert_int_eq(run_op(BACKEND_RELEASE, "a", 2, 0).res.holds, 0);
    uint64_t f3 = acquire_granted("a", 1);
    ck_assert_uint_gt(f3, f2);

    /* FORCE removes whoever holds it, once. */
    t = run_op(BACKEND_FORCE, "a", 0, 0);
    ck_assert_int_eq(t.res.removed, 1);
    ck_assert_str_eq(h_redis_cli("EXISTS %sa", PREFIX), "0");
    t = run_op(BACKEND_FORCE, "a", 0, 0);
    ck_assert_int_eq(t.res.removed, 0);
    ck_assert_uint_gt(acquire_granted("a", 3), f3);
    ck_assert_int_eq(states, 1);
}
END_TEST

START_TEST(renew_says_renewed_gone_or_forced)
{
    node_start_up();
    top_t t;

    acquire_granted("r", 7);
    ck_assert_str_eq(h_redis_cli("PEXPIRE %sr 1000", PREFIX), "1");
    t = run_op(BACKEND_RENEW, "r", 7, LEASE);
    ck_assert_int_eq(t.res.renewal, BACKEND_RENEWED);
    ck_assert_int_gt(cli_ll(h_redis_cli("PTTL %sr", PREFIX)), 1000);

    /* Not ours: gone, and the lease is left alone. */
    t = run_op(BACKEND_RENEW, "r", 8, 1000);
    ck_assert_int_eq(t.res.renewal, BACKEND_GONE);
    ck_assert_int_gt(cli_ll(h_redis_cli("PTTL %sr", PREFIX)), 1000);

    /* Expired (deleted here): gone. */
    ck_assert_str_eq(h_redis_cli("DEL %sr", PREFIX), "1");
    t = run_op(BACKEND_RENEW, "r", 7, LEASE);
    ck_assert_int_eq(t.res.renewal, BACKEND_GONE);
    ck_assert_str_eq(h_redis_cli("EXISTS %sr", PREFIX), "0");

    /* Forced: the marker names the owner it removed, and only that owner
     * hears "forced". */
    acquire_granted("r", 7);
    ck_assert_int_eq(run_op(BACKEND_FORCE, "r", 0, 0).res.removed, 1);
    ck_assert_str_eq(h_redis_cli("GET 'dlock_forced:{%sr}'", PREFIX), field(7));
    long long mark = cli_ll(h_redis_cli("PTTL 'dlock_forced:{%sr}'", PREFIX));
    ck_assert(mark > LEASE && mark <= LEASE + SCRIPTS_FORCED_MARK_MS);
    t = run_op(BACKEND_RENEW, "r", 7, LEASE);
    ck_assert_int_eq(t.res.renewal, BACKEND_FORCED);
    ck_assert_str_eq(h_redis_cli("EXISTS %sr", PREFIX), "0");
    t = run_op(BACKEND_RENEW, "r", 8, LEASE);
    ck_assert_int_eq(t.res.renewal, BACKEND_GONE);

    /* A renewal in a batch says the same. */
    top_t b[3];
    acquire_granted("r2", 7);
    op_init(&b[0], BACKEND_RENEW, "r", 7, LEASE);
    op_init(&b[1], BACKEND_RENEW, "r2", 7, LEASE);
    op_init(&b[2], BACKEND_RENEW, "r2", 8, LEASE);
    for (int i = 0; i < 3; i++) submit(&b[i]);
    RUN_UNTIL(all_called(b, 3));
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(b[i].calls, 1);
        ck_assert_int_eq(b[i].res.status, BACKEND_OK);
    }
    ck_assert_int_eq(b[0].res.renewal, BACKEND_FORCED);
    ck_assert_int_eq(b[1].res.renewal, BACKEND_RENEWED);
    ck_assert_int_eq(b[2].res.renewal, BACKEND_GONE);
}
END_TEST

/* ---- batching and order -------------------------------------------------- */

/* Two full batches and a part. */
#define MANY (2 * SCRIPTS_BATCH_MAX + 44)

START_TEST(many_ops_in_one_iteration_go_in_few_evalsha_calls)
{
    node_start_up();
    top_t *ts = calloc(MANY, sizeof(*ts));
    ck_assert_ptr_nonnull(ts);
    reset_stats();
    for (int i = 0; i < MANY; i++) {
        char name[32];
        snprintf(name, sizeof(name), "many-%d", i);
        op_init(&ts[i], BACKEND_ACQUIRE, name, 1, LEASE);
        submit(&ts[i]);
    }
    ck_assert_int_eq(seq, 0);
    RUN_UNTIL(all_called(ts, MANY));
    for (int i = 0; i < MANY; i++) {
        ck_assert_int_eq(ts[i].calls, 1);
        ck_assert_msg(ts[i].res.status == BACKEND_OK, "%s: %s", ts[i].name, ts[i].error);
        ck_assert_int_eq(ts[i].res.outcome, BACKEND_GRANTED);
        ck_assert_uint_gt(ts[i].res.fence, 0);
        ck_assert_int_eq(ts[i].seq, i + 1); /* in the order submitted */
    }
    long long want = (MANY + SCRIPTS_BATCH_MAX - 1) / SCRIPTS_BATCH_MAX;
    ck_assert_int_eq(want, 3);
    ck_assert_int_eq(h_redis_calls("evalsha"), want);
    ck_assert_str_eq(hget("many-0", 1), "1");
    char last[32];
    snprintf(last, sizeof(last), "many-%d", MANY - 1);
    ck_assert_str_eq(hget(last, 1), "1");
    ck_assert_int_eq(cli_ll(h_redis_cli("DBSIZE")), 2 * MANY); /* locks and tokens */

    /* Nothing fires twice. */
    ck_assert_int_eq(run_op(BACKEND_STATUS, "many-0", 1, 0).res.holds, 1);
    for (int i = 0; i < MANY; i++) ck_assert_int_eq(ts[i].calls, 1);
    free(ts);
}
END_TEST

START_TEST(ops_on_one_name_keep_their_order)
{
    node_start_up();
    top_t t[3];
    reset_stats();
    op_init(&t[0], BACKEND_ACQUIRE, "o", 1, LEASE);
    op_init(&t[1], BACKEND_RELEASE, "o", 1, 0);
    op_init(&t[2], BACKEND_ACQUIRE, "o", 2, LEASE);
    for (int i = 0; i < 3; i++) submit(&t[i]);
    RUN_UNTIL(all_called(t, 3));
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(t[i].calls, 1);
        ck_assert_msg(t[i].res.status == BACKEND_OK, "%d: %s", i, t[i].error);
        ck_assert_int_eq(t[i].seq, i + 1);
    }
    ck_assert_int_eq(t[0].res.outcome, BACKEND_GRANTED);
    ck_assert_int_eq(t[1].res.holds, 0);
    ck_assert_int_eq(t[2].res.outcome, BACKEND_GRANTED);
    ck_assert_uint_gt(t[2].res.fence, t[0].res.fence);
    ck_assert_str_eq(hget("o", 2), "1");
    ck_assert_str_eq(hget("o", 1), "");
    ck_assert_int_eq(h_redis_calls("evalsha"), 1); /* one batch */
}
END_TEST

START_TEST(status_and_force_between_batchable_ops_keep_the_order)
{
    node_start_up();
    enum { N = 9 };
    top_t t[N];
    reset_stats();
    op_init(&t[0], BACKEND_ACQUIRE, "s", 1, LEASE);
    op_init(&t[1], BACKEND_STATUS, "s", 1, 0);
    op_init(&t[2], BACKEND_RELEASE, "s", 1, 0);
    op_init(&t[3], BACKEND_STATUS, "s", 1, 0);
    op_init(&t[4], BACKEND_ACQUIRE, "s", 2, LEASE);
    op_init(&t[5], BACKEND_FORCE, "s", 0, 0);
    op_init(&t[6], BACKEND_ACQUIRE, "s", 3, LEASE);
    op_init(&t[7], BACKEND_ACQUIRE, "s", 1, LEASE);
    op_init(&t[8], BACKEND_STATUS, "s", 3, 0);
    for (int i = 0; i < N; i++) submit(&t[i]);
    RUN_UNTIL(all_called(t, N));
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(t[i].calls, 1);
        ck_assert_msg(t[i].res.status == BACKEND_OK, "%d: %s", i, t[i].error);
        ck_assert_int_eq(t[i].seq, i + 1);
    }
    ck_assert_int_eq(t[0].res.outcome, BACKEND_GRANTED);
    ck_assert(t[1].res.ttl_ms > 0);
    ck_assert_int_eq(t[1].res.holds, 1);
    ck_assert_int_eq(t[2].res.holds, 0);
    ck_assert_int_eq(t[3].res.ttl_ms, -2);
    ck_assert_int_eq(t[3].res.holds, 0);
    ck_assert_int_eq(t[4].res.outcome, BACKEND_GRANTED);
    ck_assert_int_eq(t[5].res.removed, 1);
    ck_assert_int_eq(t[6].res.outcome, BACKEND_GRANTED);
    ck_assert_int_eq(t[7].res.outcome, BACKEND_TAKEN);
    ck_assert_int_eq(t[8].res.holds, 1);
    /* [A] S [R] S [A] F [A A] S: the runs split at STATUS and FORCE. */
    ck_assert_int_eq(h_redis_calls("evalsha"), 8);
    ck_assert_str_eq(hget("s", 3), "1");
}
END_TEST

/* ---- callbacks and a node that is down ------------------------------------ */

START_TEST(callbacks_never_fire_inside_node_submit)
{
    h_redis_start();
    node_start_ms(5000);

    /* Before the node is up: the ops fail, later, saying so. */
    top_t first;
    op_init(&first, BACKEND_ACQUIRE, "c", 1, LEASE);
    submit(&first);
    ck_assert_int_eq(first.calls, 0);
    RUN_UNTIL(first.calls > 0);
    ck_assert_int_eq(first.res.status, BACKEND_DOWN);
    ck_assert_str_eq(first.error, "redis not connected yet");

    /* Up: answers come later. */
    RUN_UNTIL(node_up(nd));
    top_t t[4];
    op_init(&t[0], BACKEND_ACQUIRE, "c", 1, LEASE);
    op_init(&t[1], BACKEND_STATUS, "c", 1, 0);
    op_init(&t[2], BACKEND_RENEW, "c", 1, LEASE);
    op_init(&t[3], BACKEND_FORCE, "c", 0, 0);
    for (int i = 0; i < 4; i++) {
        submit(&t[i]);
        ck_assert_int_eq(t[i].calls, 0);
    }
    RUN_UNTIL(all_called(t, 4));
    for (int i = 0; i < 4; i++) ck_assert_int_eq(t[i].res.status, BACKEND_OK);

    /* Down: BACKEND_DOWN, later, with the reason. */
    int before = states;
    h_redis_stop(SIGTERM);
    RUN_UNTIL(!node_up(nd));
    ck_assert_int_gt(states, before);
    for (int i = 0; i < 4; i++) {
        op_init(&t[i], i == 1 ? BACKEND_STATUS : BACKEND_ACQUIRE, "c", 1, LEASE);
        submit(&t[i]);
        ck_assert_int_eq(t[i].calls, 0);
    }
    RUN_UNTIL(all_called(t, 4));
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(t[i].calls, 1);
        ck_assert_int_eq(t[i].res.status, BACKEND_DOWN);
        ck_assert_msg(strncmp(t[i].error, "redis not connected: ", 21) == 0 &&
                          strlen(t[i].error) > 21,
                      "error '%s'", t[i].error);
    }
    ck_assert_int_eq(early, 0);

    /* Back: it reconnects by itself. */
    h_redis_start();
    RUN_UNTIL(node_up(nd));
    acquire_granted("c", 1);
}
END_TEST

START_TEST(node_why_down_wrote_into_a_static_buffer_shared_between_calls)
{
    char up[BACKEND_ERR_LEN], down[BACKEND_ERR_LEN], small[8];
    node_start_up();
    node_why_down(nd, up, sizeof(up));
    ck_assert_str_eq(up, "redis connected");
    h_redis_stop(SIGTERM);
    RUN_UNTIL(!node_up(nd));
    node_why_down(nd, down, sizeof(down));
    ck_assert_msg(strncmp(down, "redis not connected: ", 21) == 0, "got '%s'", down);
    /* Each buffer keeps its own text. */
    ck_assert_str_eq(up, "redis connected");
    ck_assert_ptr_ne(up, down);
    /* At most cap bytes, NUL-terminated. */
    memset(small, 'x', sizeof(small));
    node_why_down(nd, small, sizeof(small));
    ck_assert_str_eq(small, "redis n");
    ck_assert_str_eq(up, "redis connected");

    /* Two nodes, one after the other. */
    h_redis_start();
    RUN_UNTIL(node_up(nd));
    char path[512], other[BACKEND_ERR_LEN];
    snprintf(path, sizeof(path), "%s/nobody.sock", h_dir());
    node_t *nobody = node_at(path, 5000);
    int before = states;
    RUN_UNTIL(states > before); /* its first attempt failed */
    node_why_down(nd, up, sizeof(up));
    node_why_down(nobody, other, sizeof(other));
    ck_assert_str_eq(up, "redis connected");
    ck_assert_str_eq(other, "redis not connected: no such file or directory");
    node_free(nobody);
}
END_TEST

/* ---- releases and watches ------------------------------------------------- */

START_TEST(release_tells_others_waiting_but_not_our_own_watch)
{
    node_start_up();
    top_t t;

    /* Nobody listens. */
    acquire_granted("w", 1);
    t = run_op(BACKEND_RELEASE, "w", 1, 0);
    ck_assert_int_eq(t.res.holds, 0);
    ck_assert_int_eq(t.res.others_waiting, 0);

    /* Another client (another daemon, a Redisson client) listens. */
    h_conn_t *other = raw_subscribe("w");
    acquire_granted("w", 1);
    t = run_op(BACKEND_RELEASE, "w", 1, 0);
    ck_assert_int_eq(t.res.holds, 0);
    ck_assert_int_eq(t.res.others_waiting, 1);

    /* Both it and we listen. */
    watcher_t w = {0};
    watch("w", &w);
    RUN_UNTIL(w.watching == 1);
    acquire_granted("w", 1);
    t = run_op(BACKEND_RELEASE, "w", 1, 0);
    ck_assert_int_eq(t.res.others_waiting, 1);
    RUN_UNTIL(w.released == 1);

    /* Only we listen. */
    h_close(other);
    POLL_UNTIL(numsub("w") == 1);
    acquire_granted("w", 1);
    t = run_op(BACKEND_RELEASE, "w", 1, 0);
    ck_assert_int_eq(t.res.holds, 0);
    ck_assert_int_eq(t.res.others_waiting, 0);
    RUN_UNTIL(w.released == 2);

    /* In a batch too. */
    top_t b[2];
    acquire_granted("w", 1);
    op_init(&b[0], BACKEND_RELEASE, "w", 1, 0);
    op_init(&b[1], BACKEND_ACQUIRE, "w2", 1, LEASE);
    submit(&b[0]);
    submit(&b[1]);
    RUN_UNTIL(all_called(b, 2));
    ck_assert_int_eq(b[0].res.status, BACKEND_OK);
    ck_assert_int_eq(b[0].res.holds, 0);
    ck_assert_int_eq(b[0].res.others_waiting, 0);
    RUN_UNTIL(w.released == 3);
    ck_assert_int_eq(w.watching, 1);
}
END_TEST

START_TEST(watch_delivers_watching_and_released)
{
    h_redis_start();
    node_start_ms(5000);
    /* Asked for before the node is up: made once it is. */
    watcher_t w = {0};
    watch("x", &w);
    ck_assert_int_eq(w.watching, 0);
    RUN_UNTIL(w.watching == 1);
    ck_assert_int_eq(w.released, 0);

    publish("x", "1");
    RUN_UNTIL(w.released == 1);

    /* Asked for again while in force: confirmed, later, not inside. */
    watch("x", &w);
    ck_assert_int_eq(w.watching, 1);
    RUN_UNTIL(w.watching == 2);

    /* A release by a lock op is heard too. */
    RUN_UNTIL(node_up(nd));
    acquire_granted("x", 1);
    ck_assert_int_eq(run_op(BACKEND_RELEASE, "x", 1, 0).res.holds, 0);
    RUN_UNTIL(w.released == 2);
    ck_assert_int_eq(w.watching, 2);

    /* A second name on the same connection. */
    watcher_t y = {0};
    watch("y", &y);
    RUN_UNTIL(y.watching == 1);
    publish("y", "1");
    RUN_UNTIL(y.released == 1);
    ck_assert_int_eq(w.released, 2);
}
END_TEST

START_TEST(unwatch_stops_the_events)
{
    node_start_up();
    watcher_t w = {0}, sentinel = {0};
    watch("u", &w);
    watch("v", &sentinel);
    RUN_UNTIL(w.watching == 1 && sentinel.watching == 1);

    /* Unwatched before the UNSUBSCRIBE reached Redis: a message published
     * meanwhile still arrives, and must not be delivered. Messages come in
     * order, so once v's has come, u's has been read. */
    unwatch("u");
    publish("u", "1");
    publish("v", "1");
    RUN_UNTIL(sentinel.released == 1);
    ck_assert_int_eq(w.released, 0);

    /* Later ones do not even reach us. */
    POLL_UNTIL(numsub("u") == 0);
    publish("u", "0");
    publish("v", "1");
    RUN_UNTIL(sentinel.released == 2);
    ck_assert_int_eq(w.released, 0);
    ck_assert_int_eq(w.watching, 1);

    /* Unwatch and watch again in one go: one subscription, in force. */
    unwatch("v");
    watch("v", &sentinel);
    unwatch("u"); /* not watched: nothing */
    RUN_UNTIL(sentinel.watching == 2);
    publish("v", "1");
    RUN_UNTIL(sentinel.released == 3);

    /* Watch and unwatch before the SUBSCRIBE was answered: it ends up
     * unsubscribed (Redis saw the UNSUBSCRIBE, so its reply came before v's
     * next message), and nothing is delivered. */
    reset_stats();
    watch("u", &w);
    unwatch("u");
    POLL_UNTIL(h_redis_calls("unsubscribe") == 1);
    ck_assert_int_eq(numsub("u"), 0);
    publish("v", "1");
    RUN_UNTIL(sentinel.released == 4);
    ck_assert_int_eq(w.watching, 1);
    ck_assert_int_eq(w.released, 0);
    ck_assert_int_eq(h_redis_calls("subscribe"), 1);
}
END_TEST

START_TEST(watch_is_made_again_after_redis_restarts)
{
    node_start_up();
    watcher_t w = {0};
    watch("z", &w);
    RUN_UNTIL(w.watching == 1);

    int before = states;
    h_redis_stop(SIGTERM);
    RUN_UNTIL(!node_up(nd) && states > before);
    ck_assert_int_eq(w.watching, 1);
    h_redis_start(); /* the same socket */
    RUN_UNTIL(w.watching == 2 && node_up(nd));
    ck_assert_int_eq(w.released, 0);
    publish("z", "1");
    RUN_UNTIL(w.released == 1);

    /* An unwatched name is not watched again. */
    watcher_t gone = {0};
    watch("g", &gone);
    RUN_UNTIL(gone.watching == 1);
    unwatch("g");
    h_redis_stop(SIGTERM);
    RUN_UNTIL(!node_up(nd));
    h_redis_start();
    RUN_UNTIL(w.watching == 3 && node_up(nd));
    publish("g", "0");
    publish("z", "1");
    RUN_UNTIL(w.released == 2);
    ck_assert_int_eq(gone.watching, 1);
    ck_assert_int_eq(gone.released, 0);
    acquire_granted("z", 1);
}
END_TEST

/* ---- NOSCRIPT ------------------------------------------------------------ */

START_TEST(noscript_loads_the_script_again_and_resends)
{
    node_start_up();
    acquire_granted("n0", 1);
    for (int round = 0; round < 2; round++) {
        ck_assert_str_eq(h_redis_cli("SCRIPT FLUSH"), "OK");
        /* Every script, in one iteration: [A] S [R A] F [R]. */
        top_t t[6];
        op_init(&t[0], BACKEND_ACQUIRE, "n", 1, LEASE);
        op_init(&t[1], BACKEND_STATUS, "n", 1, 0);
        op_init(&t[2], BACKEND_RELEASE, "n", 1, 0);
        op_init(&t[3], BACKEND_ACQUIRE, "n", 2, LEASE);
        op_init(&t[4], BACKEND_FORCE, "n", 0, 0);
        op_init(&t[5], BACKEND_RELEASE, "n0", 1, 0);
        for (int i = 0; i < 6; i++) submit(&t[i]);
        RUN_UNTIL(all_called(t, 6));
        for (int i = 0; i < 6; i++) {
            ck_assert_int_eq(t[i].calls, 1);
            ck_assert_msg(t[i].res.status == BACKEND_OK, "round %d op %d: %s", round, i,
                          t[i].error);
        }
        ck_assert_int_eq(t[0].res.outcome, BACKEND_GRANTED);
        ck_assert_int_eq(t[1].res.holds, 1);
        ck_assert_int_eq(t[2].res.holds, 0);
        ck_assert_int_eq(t[3].res.outcome, BACKEND_GRANTED);
        ck_assert_int_eq(t[4].res.removed, 1);
        ck_assert_int_eq(t[5].res.holds, round == 0 ? 0 : -1);
    }
    ck_assert_int_eq(states, 1); /* never went down for it */
}
END_TEST

/* ---- out of memory ------------------------------------------------------- */

/* Submits n ACQUIREs of "<prefix>-<i>" and runs the one loop iteration that
 * flushes them with one allocation armed to fail. */
static top_t *submit_with_failure(const char *prefix, int n, int *fail_at) {
    top_t *ts = calloc((size_t)n, sizeof(*ts));
    ck_assert_ptr_nonnull(ts);
    for (int i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof(name), "%s-%d", prefix, i);
        op_init(&ts[i], BACKEND_ACQUIRE, name, 1, LEASE);
        submit(&ts[i]);
    }
    /* Nothing between arming and the flush allocates: no asserts here. */
    *fail_at = 1;
    uv_run(&loop, UV_RUN_NOWAIT);
    *fail_at = 0;
    ck_assert_int_eq(alloc_failures, 1);
    return ts;
}

/* The first batch failed with "out of memory", the others ran; each
 * callback fired once; the node goes on working. */
static void check_first_batch_failed(top_t *ts, int n, const char *prefix) {
    RUN_UNTIL(all_called(ts, (size_t)n));
    for (int i = 0; i < n; i++) {
        ck_assert_int_eq(ts[i].calls, 1);
        ck_assert_int_eq(ts[i].seq, i + 1);
        if (i < SCRIPTS_BATCH_MAX) {
            ck_assert_int_eq(ts[i].res.status, BACKEND_FAILED);
            ck_assert_str_eq(ts[i].error, "out of memory");
        } else {
            ck_assert_msg(ts[i].res.status == BACKEND_OK, "%s: %s", ts[i].name, ts[i].error);
            ck_assert_int_eq(ts[i].res.outcome, BACKEND_GRANTED);
        }
    }
    /* The failed ones never reached Redis. */
    ck_assert_str_eq(h_redis_cli("EXISTS %s%s-0", PREFIX, prefix), "0");
    ck_assert_str_eq(h_redis_cli("EXISTS %s%s-%d", PREFIX, prefix, SCRIPTS_BATCH_MAX - 1), "0");
    ck_assert_str_eq(h_redis_cli("EXISTS %s%s-%d", PREFIX, prefix, SCRIPTS_BATCH_MAX), "1");

    /* Still working, and nothing fires again. */
    char name[32];
    snprintf(name, sizeof(name), "%s-0", prefix);
    acquire_granted(name, 1);
    top_t again[2];
    op_init(&again[0], BACKEND_ACQUIRE, name, 1, LEASE);
    op_init(&again[1], BACKEND_STATUS, name, 1, 0);
    submit(&again[0]);
    submit(&again[1]);
    RUN_UNTIL(all_called(again, 2));
    ck_assert_int_eq(again[0].res.outcome, BACKEND_REENTERED);
    ck_assert_int_eq(again[1].res.holds, 2);
    for (int i = 0; i < n; i++) ck_assert_int_eq(ts[i].calls, 1);
    ck_assert_int_eq(states, 1);
}

START_TEST(the_out_of_memory_path_of_batch_flush_could_fire_callbacks_twice_or_lose_them)
{
    /* The call record's calloc fails. */
    node_start_up();
    top_t *ts = submit_with_failure("oom", MANY, &calloc_fail_at);
    ck_assert_uint_ge(failed_size, SCRIPTS_BATCH_MAX * sizeof(backend_op_t *));
    check_first_batch_failed(ts, MANY, "oom");
    free(ts);
}
END_TEST

START_TEST(the_out_of_memory_path_of_batch_flush_could_fire_callbacks_twice_or_lose_them_format)
{
    /* The buffer the command is formatted in cannot grow: its first
     * growth, since nothing was sent yet. */
    node_start_up();
    top_t *ts = submit_with_failure("fmt", MANY, &realloc_fail_at);
    ck_assert_ptr_null(failed_ptr);
    check_first_batch_failed(ts, MANY, "fmt");
    free(ts);
}
END_TEST

START_TEST(out_of_memory_for_the_connections_command_record_fails_the_batch_once)
{
    /* The call's record is made (the first calloc); the connection's record
     * of the command (the second) is not: resp says so at once and the node
     * fails the batch itself, each op once. */
    node_start_up();
    top_t *ts = calloc(MANY, sizeof(*ts));
    ck_assert_ptr_nonnull(ts);
    for (int i = 0; i < MANY; i++) {
        char name[32];
        snprintf(name, sizeof(name), "rec-%d", i);
        op_init(&ts[i], BACKEND_ACQUIRE, name, 1, LEASE);
        submit(&ts[i]);
    }
    calloc_fail_at = 2;
    uv_run(&loop, UV_RUN_NOWAIT);
    calloc_fail_at = 0;
    ck_assert_int_eq(alloc_failures, 1);
    check_first_batch_failed(ts, MANY, "rec");
    free(ts);
}
END_TEST

START_TEST(the_out_of_memory_path_of_batch_flush_could_fire_callbacks_twice_or_lose_them_single)
{
    /* An op that goes alone (STATUS), between two batches. The buffer the
     * commands are formatted in is kept between calls: its growth can fail
     * only on the first round. */
    node_start_up();
    for (int path = 0; path < 2; path++) {
        int *fail_at = path == 0 ? &realloc_fail_at : &calloc_fail_at;
        top_t t[4];
        op_init(&t[0], BACKEND_STATUS, "one", 1, 0);
        op_init(&t[1], BACKEND_ACQUIRE, "one", 1, LEASE);
        op_init(&t[2], BACKEND_STATUS, "one", 1, 0);
        op_init(&t[3], BACKEND_RELEASE, "one", 1, 0);
        for (int i = 0; i < 4; i++) submit(&t[i]);
        alloc_failures = 0;
        *fail_at = 1;
        uv_run(&loop, UV_RUN_NOWAIT);
        *fail_at = 0;
        ck_assert_int_eq(alloc_failures, 1);
        RUN_UNTIL(all_called(t, 4));
        for (int i = 0; i < 4; i++) {
            ck_assert_int_eq(t[i].calls, 1);
            ck_assert_int_eq(t[i].seq, 4 * path + i + 1);
        }
        ck_assert_int_eq(t[0].res.status, BACKEND_FAILED);
        ck_assert_str_eq(t[0].error, "out of memory");
        for (int i = 1; i < 4; i++)
            ck_assert_msg(t[i].res.status == BACKEND_OK, "%d: %s", i, t[i].error);
        ck_assert_int_eq(t[1].res.outcome, BACKEND_GRANTED);
        ck_assert_int_eq(t[2].res.holds, 1);
        ck_assert_int_eq(t[3].res.holds, 0);
    }
}
END_TEST

/* ---- node_free ----------------------------------------------------------- */

#define IN_FLIGHT 200
#define QUEUED    50

static top_t followups[2];

/* What the lock manager does when an acquire fails during shutdown: undo
 * it with a release, from the callback. */
static void submit_followup(top_t *t) {
    top_t *f = &followups[t->op.type == BACKEND_FORCE];
    op_init(f, BACKEND_RELEASE, t->name, 1, 0);
    node_submit(nd, &f->op);
}

START_TEST(node_free_fails_queued_and_in_flight_ops_once)
{
    h_redis_start();
    node_start_ms(60000); /* no deadline passes during the test */
    RUN_UNTIL(node_up(nd));
    watcher_t w = {0};
    watch("f", &w);
    RUN_UNTIL(w.watching == 1);

    /* Redis stops answering; ops go out, and more wait to. */
    redis_freeze();
    top_t *ts = calloc(IN_FLIGHT + QUEUED + 1, sizeof(*ts));
    ck_assert_ptr_nonnull(ts);
    for (int i = 0; i < IN_FLIGHT; i++) {
        char name[32];
        snprintf(name, sizeof(name), "f-%d", i);
        op_init(&ts[i], i % 50 == 7 ? BACKEND_STATUS : BACKEND_ACQUIRE, name, 1, LEASE);
        submit(&ts[i]);
    }
    uv_run(&loop, UV_RUN_NOWAIT); /* flushed: in flight */
    for (int i = IN_FLIGHT; i < IN_FLIGHT + QUEUED + 1; i++) {
        char name[32];
        snprintf(name, sizeof(name), "f-%d", i);
        op_init(&ts[i], i == IN_FLIGHT + 3 ? BACKEND_FORCE : BACKEND_ACQUIRE, name, 1, LEASE);
        submit(&ts[i]);
    }
    ts[5].then = submit_followup;                /* in flight */
    ts[IN_FLIGHT + 3].then = submit_followup;    /* queued (the FORCE) */
    watch("f", &w); /* a confirmation pending too */
    watch("f2", &w); /* a subscription never answered */
    ck_assert_int_eq(seq, 0);

    in_free = 1;
    node_free(nd);
    in_free = 0;
    freed = 1;
    nd = NULL;
    int total = IN_FLIGHT + QUEUED + 1;
    for (int i = 0; i < total; i++) {
        ck_assert_int_eq(ts[i].calls, 1);
        ck_assert_int_eq(ts[i].in_free, 1);
        ck_assert_int_eq(ts[i].res.status, BACKEND_DOWN);
        ck_assert_msg(ts[i].error[0] != '\0', "%s: no reason", ts[i].name);
    }
    /* Those in flight fail with the connection's reason, the queue with
     * the node's. */
    for (int i = 0; i < IN_FLIGHT; i++) ck_assert_str_ne(ts[i].error, "shutting down");
    for (int i = IN_FLIGHT; i < total; i++) ck_assert_str_eq(ts[i].error, "shutting down");
    /* Ops submitted from those callbacks fail inside node_free too. */
    for (int i = 0; i < 2; i++) {
        ck_assert_int_eq(followups[i].calls, 1);
        ck_assert_int_eq(followups[i].in_free, 1);
        ck_assert_int_eq(followups[i].res.status, BACKEND_DOWN);
        ck_assert_str_eq(followups[i].error, "shutting down");
    }
    ck_assert_int_eq(w.watching, 1);

    /* Nothing comes after, even with Redis answering again. */
    h_redis_signal(SIGCONT);
    run_for(200);
    ck_assert_int_eq(late, 0);
    for (int i = 0; i < total; i++) ck_assert_int_eq(ts[i].calls, 1);
    for (int i = 0; i < 2; i++) ck_assert_int_eq(followups[i].calls, 1);
    ck_assert_int_eq(w.watching, 1);
    ck_assert_int_eq(w.released, 0);
    free(ts);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("node");
    TCase *tc = tcase_create("node");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, ops_follow_the_redisson_layout);
    tcase_add_test(tc, renew_says_renewed_gone_or_forced);
    tcase_add_test(tc, many_ops_in_one_iteration_go_in_few_evalsha_calls);
    tcase_add_test(tc, ops_on_one_name_keep_their_order);
    tcase_add_test(tc, status_and_force_between_batchable_ops_keep_the_order);
    tcase_add_test(tc, callbacks_never_fire_inside_node_submit);
    tcase_add_test(tc, node_why_down_wrote_into_a_static_buffer_shared_between_calls);
    tcase_add_test(tc, release_tells_others_waiting_but_not_our_own_watch);
    tcase_add_test(tc, watch_delivers_watching_and_released);
    tcase_add_test(tc, unwatch_stops_the_events);
    tcase_add_test(tc, watch_is_made_again_after_redis_restarts);
    tcase_add_test(tc, noscript_loads_the_script_again_and_resends);
    tcase_add_test(tc, the_out_of_memory_path_of_batch_flush_could_fire_callbacks_twice_or_lose_them);
    tcase_add_test(tc, the_out_of_memory_path_of_batch_flush_could_fire_callbacks_twice_or_lose_them_format);
    tcase_add_test(tc, the_out_of_memory_path_of_batch_flush_could_fire_callbacks_twice_or_lose_them_single);
    tcase_add_test(tc, out_of_memory_for_the_connections_command_record_fails_the_batch_once);
    tcase_add_test(tc, node_free_fails_queued_and_in_flight_ops_once);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return h_main(suite());
}
