/* Integration tests of dlockd's quorum topology (Redlock over independent
 * primaries): grants on a majority in Redisson's layout, fences and
 * wake-ups across daemons, the watchdog, a minority and then a majority of
 * nodes killed, a node paused, a node restarted empty under a held lock
 * (it sits out rejoin_delay_ms), a Redisson RedLock client excluding and
 * waking dlockd's clients both ways, TLS with a password per node, and the
 * configuration's limits (the longest lease, an even quorum).
 * SPDX-License-Identifier: MIT
 *
 * Each test starts its own redis-servers on private ports of 127.0.0.1
 * (h_redis_start_tcp) and its dlockds with "quorum = redis://... ...".
 * Fresh redis-servers have an uptime of 0, so a dlockd counts them only
 * after rejoin_delay_ms: every wait is on INFO (redis_nodes_up), a reply
 * or an event, never a sleep. Every grant's fence is checked against the
 * greatest one seen before for its name (fence_seen). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/support/harness.h"

#define NODES_MAX   10
#define CMD_MS      1000    /* every dlockd's command_timeout_ms */
#define SLACK_MS    1500    /* room for a busy machine on top of a bound */
#define POLL_US     20000   /* INFO and Redis polls */

/* ---- failure reports (h_keep_log) ----------------------------------------- */

#define KEEP(d) h_keep_log((d), "quorum.%s.dlockd%d", __func__, (d))

/* ---- state of one test -------------------------------------------------------- */

static int node[NODES_MAX];     /* redis-server indexes */
static int nnodes;
static h_conn_t *info_conn[H_MAX_PROCS];

/* The fenced store: the greatest fence granted so far, per name. */
static struct {
    char name[64];
    unsigned long long max;
} fstore[64];
static int nfstore;

static void setup(void) {
    h_setup();
    nnodes = 0;
    nfstore = 0;
    memset(info_conn, 0, sizeof(info_conn));
}

static void teardown(void) {
    for (int i = 0; i < H_MAX_PROCS; i++) {
        h_close(info_conn[i]);
        info_conn[i] = NULL;
    }
    h_teardown();
}

/* A new grant of name with fence f: above every earlier one. */
static void fence_seen(const char *name, unsigned long long f) {
    ck_assert_msg(f > 0, "fence 0 for %s", name);
    for (int i = 0; i < nfstore; i++) {
        if (strcmp(fstore[i].name, name) != 0) continue;
        ck_assert_msg(f > fstore[i].max, "fence %llu granted for %s is not above %llu, the "
                      "greatest granted before", f, name, fstore[i].max);
        fstore[i].max = f;
        return;
    }
    ck_assert_int_lt(nfstore, (int)(sizeof(fstore) / sizeof(fstore[0])));
    snprintf(fstore[nfstore].name, sizeof(fstore[0].name), "%s", name);
    fstore[nfstore++].max = f;
}

/* ---- nodes ---------------------------------------------------------------------- */

static void start_nodes(int n) {
    for (int i = 0; i < n; i++) {
        ck_assert_int_lt(nnodes, NODES_MAX);
        node[nnodes++] = h_redis_start_tcp(0, NULL);
    }
}

static int port_of(int i) {
    return h_redis_port(node[i]);
}

/* "redis://127.0.0.1:P ..." of nodes from..from+n-1 (static). */
static const char *urls(int from, int n) {
    static char out[NODES_MAX * 40];
    size_t len = 0;
    out[0] = '\0';
    for (int i = from; i < from + n; i++)
        len += (size_t)snprintf(out + len, sizeof(out) - len, "%sredis://127.0.0.1:%d",
                                i > from ? " " : "", port_of(i));
    return out;
}

/* A command on node i, over its Unix socket (words may hold spaces); NULL
 * if it is not running or does not answer within 2 s. */
static const char *ncmd(int i, const char *const argv[]) {
    return h_redis_unix_argv(node[i], argv);
}

/* EXISTS key on node i: 0 or 1, -1 if no answer. */
static int exists_on(int i, const char *key) {
    const char *const a[] = {"EXISTS", key, NULL};
    const char *r = ncmd(i, a);
    return r == NULL || r[0] == '-' ? -1 : atoi(r);
}

static long long pttl_on(int i, const char *key) {
    const char *const a[] = {"PTTL", key, NULL};
    const char *r = ncmd(i, a);
    return r == NULL || r[0] == '-' ? -3 : atoll(r);
}

/* Waits until key is gone from every node in mask (bit i: node i). */
static long long await_gone(unsigned mask, const char *key, int timeout_ms) {
    long long t0 = h_now_ms();
    for (;;) {
        int left = -1;
        for (int i = 0; i < nnodes; i++)
            if ((mask & (1u << i)) && exists_on(i, key) != 0) left = i;
        if (left < 0) return h_now_ms() - t0;
        ck_assert_msg(h_now_ms() - t0 < timeout_ms, "%s still on node %d (port %d) %d ms on",
                      key, left, port_of(left), timeout_ms);
        usleep(POLL_US);
    }
}

/* 1 if field looks like "<uuid>:<connection id>". */
static int owner_field(const char *f) {
    static const char shape[] = "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx:";
    for (size_t i = 0; i < sizeof(shape) - 1; i++) {
        if (shape[i] == 'x' ? strchr("0123456789abcdefABCDEF", f[i]) == NULL || f[i] == '\0'
                            : f[i] != shape[i])
            return 0;
    }
    const char *id = f + sizeof(shape) - 1;
    if (*id == '\0') return 0;
    for (; *id; id++)
        if (*id < '0' || *id > '9') return 0;
    return 1;
}

/* Waits until the wall clock's milliseconds are in [from, to). */
static void await_wall_ms(int from, int to) {
    long long end = h_now_ms() + 3000;
    for (;;) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        int ms = (int)(ts.tv_nsec / 1000000);
        if (ms >= from && ms < to) return;
        ck_assert_msg(h_now_ms() < end, "the wall clock never showed .%03d-.%03d", from, to);
        usleep(1000);
    }
}

/* ---- dlockd ---------------------------------------------------------------------- */

/* A dlockd over quorum; redis_extra goes into [redis] (may be NULL). Does
 * not wait for the nodes: see await_up. */
static int start_dlockd(const char *quorum, unsigned lease_ms, unsigned rejoin_ms,
                        const char *redis_extra) {
    char text[8192];
    snprintf(text, sizeof(text),
             "[server]\nadmin_uids = 0\n"
             "[redis]\nquorum = %s\ncommand_timeout_ms = %d\nconnect_timeout_ms = 500\n"
             "rejoin_delay_ms = %u\n%s"
             "[lock]\nlease_ms = %u\n",
             quorum, CMD_MS, rejoin_ms, redis_extra ? redis_extra : "", lease_ms);
    return h_dlockd_start_conf(text);
}

/* dlockd d's INFO line (static). */
static const char *info(int d) {
    static char line[H_LINE_MAX];
    if (info_conn[d] == NULL) info_conn[d] = h_connect_index(d);
    h_send(info_conn[d], "INFO\n");
    const char *l = h_recv(info_conn[d], H_WAIT_MS);
    ck_assert_msg(l != NULL, "dlockd %d: no INFO reply", d);
    snprintf(line, sizeof(line), "%s", l);
    return line;
}

/* The value of key in an INFO line (static), "" if absent. */
static const char *info_str(const char *line, const char *key) {
    static char v[1024];
    char pat[64];
    snprintf(pat, sizeof(pat), " %s=", key);
    const char *p = strstr(line, pat);
    v[0] = '\0';
    if (p != NULL) {
        p += strlen(pat);
        snprintf(v, sizeof(v), "%.*s", (int)strcspn(p, " "), p);
    }
    return v;
}

static long long info_num(const char *line, const char *key) {
    const char *v = info_str(line, key);
    return v[0] ? atoll(v) : -1;
}

/* Waits until dlockd d's INFO says redis_nodes_up=want; returns how long
 * it took. */
static long long await_up(int d, int want, int timeout_ms) {
    long long t0 = h_now_ms();
    for (;;) {
        const char *l = info(d);
        if (info_num(l, "redis_nodes_up") == want) return h_now_ms() - t0;
        ck_assert_msg(h_now_ms() - t0 < timeout_ms, "dlockd %d: not redis_nodes_up=%d within "
                      "%d ms: %s", d, want, timeout_ms, l);
        usleep(POLL_US);
    }
}

/* A dlockd over quorum whose n nodes all count, its log kept on failure. */
static int serving_dlockd(const char *quorum, int n, unsigned lease_ms, unsigned rejoin_ms) {
    int d = start_dlockd(quorum, lease_ms, rejoin_ms, NULL);
    h_keep_log(d, "quorum.%s.dlockd%d", tcase_name(), d);
    await_up(d, n, (int)rejoin_ms + H_WAIT_MS);
    return d;
}

/* INFO's redis_down names 127.0.0.1:port. */
static int down_names(const char *line, int port) {
    char want[32];
    snprintf(want, sizeof(want), ":%d", port);
    const char *v = info_str(line, "redis_down");
    for (const char *p = v; (p = strstr(p, want)) != NULL; p += strlen(want))
        if (p[strlen(want)] == '\0' || p[strlen(want)] == ',') return 1;
    return 0;
}

/* ---- client requests ------------------------------------------------------------------ */

/* A grant line "OK <fence> <holds>": the fence, 0 if it is not one. */
static unsigned long long parse_grant(const char *l, long long *holds) {
    unsigned long long f;
    long long h;
    char tail;
    if (l == NULL || sscanf(l, "OK %llu %lld%c", &f, &h, &tail) != 2) return 0;
    if (holds) *holds = h;
    return f;
}

/* l must be a new grant of name (one hold); checks its fence. */
static unsigned long long granted(const char *what, const char *name, const char *l) {
    long long holds = 0;
    unsigned long long f = parse_grant(l, &holds);
    ck_assert_msg(f > 0 && holds == 1, "%s: got '%s', wanted 'OK <fence> 1'", what,
                  l ? l : "(no reply)");
    fence_seen(name, f);
    return f;
}

static unsigned long long request_grant(h_conn_t *c, const char *name, const char *req) {
    h_send(c, "%s\n", req);
    return granted(req, name, h_reply(c, H_WAIT_MS, H_EVENTS_FAIL));
}

static unsigned long long lock_ok(h_conn_t *c, const char *name) {
    char req[300];
    snprintf(req, sizeof(req), "LOCK %s", name);
    return request_grant(c, name, req);
}

static unsigned long long trylock_ok(h_conn_t *c, const char *name) {
    char req[300];
    snprintf(req, sizeof(req), "TRYLOCK %s 0", name);
    return request_grant(c, name, req);
}

static void unlock_ok(h_conn_t *c, const char *name) {
    h_send(c, "UNLOCK %s\n", name);
    const char *l = h_reply(c, H_WAIT_MS, H_EVENTS_FAIL);
    ck_assert_msg(l != NULL && strcmp(l, "OK 0") == 0, "UNLOCK %s: got '%s', wanted 'OK 0'",
                  name, l ? l : "(no reply)");
}

/* req must answer a line starting with want. */
static const char *expect_prefix(h_conn_t *c, const char *req, const char *want) {
    h_send(c, "%s\n", req);
    const char *l = h_reply(c, H_WAIT_MS, H_EVENTS_FAIL);
    ck_assert_msg(l != NULL && strncmp(l, want, strlen(want)) == 0, "%s: got '%s', wanted "
                  "'%s...'", req, l ? l : "(no reply)", want);
    return l;
}

/* ---- dlockd -t ------------------------------------------------------------------------ */

/* Runs dlockd -t on conf_text; its exit status (128+ for a signal, -1 if
 * it hangs), its stderr in err. */
static int run_t(const char *conf_text, char *err, size_t errlen) {
    static int seq;
    char path[600], errpath[600];
    snprintf(path, sizeof(path), "%s/t%d.conf", h_dir(), seq);
    snprintf(errpath, sizeof(errpath), "%s/t%d.err", h_dir(), seq++);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(conf_text, f);
    fclose(f);
    chmod(path, 0600);
    const char *bin = getenv("DLOCKD_BIN") ? getenv("DLOCKD_BIN") : "build/dlockd";
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int nul = open("/dev/null", O_RDWR);
        int fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (nul < 0 || fd < 0) _exit(126);
        dup2(nul, 0);
        dup2(nul, 1);
        dup2(fd, 2);
        execl(bin, bin, "-t", "-c", path, (char *)NULL);
        _exit(127);
    }
    int status = 0, done = 0;
    long long end = h_now_ms() + H_WAIT_MS;
    while (!done && h_now_ms() < end) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) done = 1;
        else usleep(2000);
    }
    if (!done) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
    err[0] = '\0';
    f = fopen(errpath, "r");
    if (f != NULL) {
        size_t n = fread(err, 1, errlen - 1, f);
        err[n] = '\0';
        fclose(f);
    }
    if (!done) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* ---- a Redisson client ------------------------------------------------------------------ */

/* Redisson's RLock lock script (tryLockInnerAsync) and its unlock script
 * as Redisson 3.x sends it (unlockInnerAsync: the publish command and an
 * unlock latch key as arguments; PUBLISH off a Cluster). A RedissonRedLock
 * runs them on each node. */
static const char rs_lock_script[] =
    "if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) "
    "then redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); "
    "return nil; end; return redis.call('pttl', KEYS[1]);";
static const char rs_unlock_script[] =
    "local val = redis.call('get', KEYS[3]); if val ~= false then return tonumber(val); end; "
    "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil; end; "
    "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); "
    "if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); "
    "redis.call('set', KEYS[3], 0, 'px', ARGV[5]); return 0; "
    "else redis.call('del', KEYS[1]); redis.call(ARGV[4], KEYS[2], ARGV[1]); "
    "redis.call('set', KEYS[3], 1, 'px', ARGV[5]); return 1; end;";

#define RS_FIELD "6f1d2c3b-0000-4000-8000-00000000beef:1"
#define RS_LEASE "30000"

/* The lock script on node i: "" (nil: taken), the pttl (refused), or an
 * error. */
static const char *rs_try_lock(int i, const char *key) {
    const char *const a[] = {"EVAL", rs_lock_script, "1", key, RS_LEASE, RS_FIELD, NULL};
    const char *r = ncmd(i, a);
    ck_assert_msg(r != NULL, "Redisson's lock script on node %d: no answer", i);
    return r;
}

/* The unlock script on node i: "1" when it released and published. */
static const char *rs_unlock(int i, const char *key, int seq) {
    char chan[300], latch[300], id[16];
    snprintf(chan, sizeof(chan), "redisson_lock__channel:{%s}", key);
    snprintf(id, sizeof(id), "%d", seq);
    snprintf(latch, sizeof(latch), "redisson_unlock_latch:{%s}:%s", key, id);
    const char *const a[] = {"EVAL", rs_unlock_script, "3", key, chan, latch, "0", RS_LEASE, RS_FIELD,
                             "PUBLISH", "5000", NULL};
    const char *r = ncmd(i, a);
    ck_assert_msg(r != NULL, "Redisson's unlock script on node %d: no answer", i);
    return r;
}

/* A Redisson-style subscriber: SUBSCRIBE on one node over plain TCP. */
typedef struct sub_s {
    int fd;
    char buf[4096];
    size_t len;
} sub_t;

static void sub_read(sub_t *s, int timeout_ms) {
    struct pollfd p = {.fd = s->fd, .events = POLLIN};
    if (poll(&p, 1, timeout_ms) != 1) return;
    ssize_t n = read(s->fd, s->buf + s->len, sizeof(s->buf) - 1 - s->len);
    if (n > 0) s->len += (size_t)n;
    s->buf[s->len] = '\0';
}

static void sub_open(sub_t *s, int port, const char *chan) {
    s->len = 0;
    s->buf[0] = '\0';
    s->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(s->fd, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ck_assert_msg(connect(s->fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "connect %d: %s",
                  port, strerror(errno));
    char req[512];
    int n = snprintf(req, sizeof(req), "*2\r\n$9\r\nSUBSCRIBE\r\n$%zu\r\n%s\r\n", strlen(chan),
                     chan);
    ck_assert_int_eq(write(s->fd, req, (size_t)n), n);
    long long end = h_now_ms() + H_WAIT_MS;
    while (strstr(s->buf, ":1\r\n") == NULL) { /* subscribe, chan, 1 */
        ck_assert_msg(h_now_ms() < end, "SUBSCRIBE on %d: '%s'", port, s->buf);
        sub_read(s, 100);
    }
    s->len = 0;
    s->buf[0] = '\0';
}

/* 1 once the subscriber got Redisson's unlock message ("0"). */
static int sub_heard(sub_t *s, int timeout_ms) {
    sub_read(s, timeout_ms);
    return strstr(s->buf, "$7\r\nmessage\r\n") != NULL && strstr(s->buf, "\r\n$1\r\n0\r\n") != NULL;
}

/* ---- 1. basics ---------------------------------------------------------------------------- */

START_TEST(basic_two_daemons_over_five_nodes) {
    start_nodes(5);
    char q[NODES_MAX * 40];
    snprintf(q, sizeof(q), "%s", urls(0, 5));
    /* lease 1000 for the watchdog; rejoin 2000 so a lock may ask for a
     * 2000 ms lease (the wake-up below must beat it by far) */
    int da = start_dlockd(q, 1000, 2000, NULL), db = start_dlockd(q, 1000, 2000, NULL);
    KEEP(da);
    KEEP(db);
    long long wa = await_up(da, 5, 2000 + H_WAIT_MS), wb = await_up(db, 5, H_WAIT_MS);
    printf("quorum: 5 nodes counted %lld ms / %lld ms after the daemons answered PING "
           "(fresh nodes sit out rejoin_delay_ms 2000)\n", wa, wa + wb);
    const char *inf = info(da);
    ck_assert_msg(strcmp(info_str(inf, "backend"), "quorum") == 0 &&
                      info_num(inf, "redis_nodes") == 5 && info_num(inf, "redis_nodes_up") == 5 &&
                      strcmp(info_str(inf, "redis"), "up") == 0 &&
                      strcmp(info_str(inf, "redis_down"), "-") == 0,
                  "INFO: %s", inf);

    h_conn_t *a = h_connect_index(da), *a2 = h_connect_index(da), *b = h_connect_index(db);

    /* A grant is Redisson's layout on a majority: the hash with one field
     * "<uuid>:<id>" = 1 and the lease, beside the fence counter. */
    unsigned long long f1 = lock_ok(a, "basic");
    char field[256] = "";
    int holding = 0, tokens = 0;
    for (int i = 0; i < 5; i++) {
        const char *const hg[] = {"HGETALL", "dlock:basic", NULL};
        const char *all = ncmd(i, hg);
        ck_assert_msg(all != NULL, "HGETALL on node %d: no answer", i);
        if (all[0] != '\0') {
            char f[256], v[64];
            ck_assert_msg(sscanf(all, "%255[^\n]\n%63s", f, v) == 2 && strchr(all, '\n') ==
                              strrchr(all, '\n'),
                          "dlock:basic on node %d is not one field: '%s'", i, all);
            ck_assert_msg(owner_field(f) && strcmp(v, "1") == 0,
                          "dlock:basic on node %d: '%s' = '%s', wanted '<uuid>:<id>' = '1'", i, f,
                          v);
            if (field[0] == '\0') snprintf(field, sizeof(field), "%s", f);
            ck_assert_msg(strcmp(f, field) == 0, "owner '%s' on node %d, '%s' on another", f, i,
                          field);
            long long ttl = pttl_on(i, "dlock:basic");
            ck_assert_msg(ttl > 0 && ttl <= 1000, "PTTL dlock:basic on node %d: %lld", i, ttl);
            holding++;
        }
        if (exists_on(i, "redisson_lock_token:{dlock:basic}") == 1) tokens++;
    }
    ck_assert_msg(holding >= 3, "dlock:basic on %d nodes of 5", holding);
    ck_assert_msg(tokens >= 3, "the fence counter on %d nodes of 5", tokens);
    /* The uuid is daemon A's, as its registry entry says (if it keeps one). */
    char pidtail[32];
    snprintf(pidtail, sizeof(pidtail), ":%d", (int)h_dlockd_pid(da));
    int registered = 0;
    for (int i = 0; i < 5 && !registered; i++) {
        const char *const hg[] = {"HGETALL", "dlock:dlockd daemons", NULL};
        const char *all = ncmd(i, hg);
        char reg[8192];
        snprintf(reg, sizeof(reg), "%s", all ? all : "");
        char *save = NULL, *k = strtok_r(reg, "\n", &save);
        while (k != NULL) {
            char *v = strtok_r(NULL, "\n", &save);
            if (v == NULL) break;
            size_t vl = strlen(v), tl = strlen(pidtail);
            if (vl > tl && strcmp(v + vl - tl, pidtail) == 0) {
                ck_assert_msg(strncmp(field, k, strlen(k)) == 0 && field[strlen(k)] == ':',
                              "owner field '%s' is not of daemon A's uuid %s", field, k);
                registered = 1;
                break;
            }
            k = strtok_r(NULL, "\n", &save);
        }
    }
    printf("quorum: owner field %s on %d of 5 nodes, fence counter on %d%s\n", field, holding,
           tokens, registered ? ", uuid as registered" : " (daemon A not in any registry)");

    /* Excluded in its daemon and in the other; reentrant for its owner. */
    expect_prefix(a2, "TRYLOCK basic 0", "TIMEOUT ");
    expect_prefix(b, "TRYLOCK basic 0", "TIMEOUT ");
    h_send(a, "LOCK basic\n");
    const char *l = h_reply(a, H_WAIT_MS, H_EVENTS_FAIL);
    long long holds = 0;
    ck_assert_msg(parse_grant(l, &holds) == f1 && holds == 2,
                  "reentrant LOCK basic: '%s', wanted 'OK %llu 2'", l ? l : "(no reply)", f1);
    expect_prefix(a, "UNLOCK basic", "OK 1");
    unlock_ok(a, "basic");
    long long gone = await_gone(0x1f, "dlock:basic", 3000);
    printf("quorum: released from every node %lld ms after UNLOCK's reply\n", gone);

    /* Fences rise strictly, whichever daemon grants. (UNLOCK answers
     * before the release reaches the nodes, which a later request of the
     * same daemon waits for, not another daemon's: across daemons, LOCK.) */
    for (int k = 0; k < 6; k++) {
        h_conn_t *c = k % 2 ? b : a;
        lock_ok(c, "basic");
        unlock_ok(c, "basic");
        trylock_ok(c, "basic");
        unlock_ok(c, "basic");
    }

    /* A waiter of the other daemon is woken by the release (pub/sub), far
     * sooner than the holder's 2000 ms lease would let it retry. */
    request_grant(a, "wake", "LOCK wake 2000");
    h_send(b, "LOCK wake\n");
    ck_assert_ptr_null(h_reply(b, 300, H_EVENTS_FAIL));
    long long t0 = h_now_ms();
    unlock_ok(a, "wake");
    l = h_reply(b, 1000, H_EVENTS_FAIL);
    long long woke = h_now_ms() - t0;
    granted("the waiter of daemon B", "wake", l);
    printf("quorum: waiter of another daemon granted %lld ms after the release\n", woke);
    unlock_ok(b, "wake");

    /* The watchdog keeps a 1000 ms lease alive for more than three. */
    lock_ok(a, "dog");
    long long end = h_now_ms() + 3300;
    while (h_now_ms() < end) {
        const char *ev = h_recv(a, 100);
        ck_assert_msg(ev == NULL, "while held: '%s'", ev);
    }
    expect_prefix(a, "STATUS dog", "OK MINE 1 ");
    expect_prefix(b, "TRYLOCK dog 0", "TIMEOUT ");
    int alive = 0;
    for (int i = 0; i < 5; i++) {
        long long ttl = pttl_on(i, "dlock:dog");
        if (ttl > 0 && ttl <= 1000) alive++;
    }
    ck_assert_msg(alive >= 3, "dlock:dog alive on %d nodes after 3.3 leases", alive);
    unlock_ok(a, "dog");
    h_close(a);
    h_close(a2);
    h_close(b);
    h_keep_passed();
}
END_TEST

/* ---- 2. a minority, then a majority down ------------------------------------------------------ */

START_TEST(minority_down_works_majority_down_refuses) {
    start_nodes(5);
    const unsigned lease = 1000, rejoin = 1000;
    int d = start_dlockd(urls(0, 5), lease, rejoin, NULL);
    KEEP(d);
    await_up(d, 5, rejoin + H_WAIT_MS);
    h_conn_t *a = h_connect_index(d), *h = h_connect_index(d), *c = h_connect_index(d);
    lock_ok(a, "m");
    unlock_ok(a, "m");

    /* Two of five killed: three still make a majority. */
    h_redis_stop_index(node[3], SIGKILL);
    h_redis_stop_index(node[4], SIGKILL);
    await_up(d, 3, H_WAIT_MS);
    const char *inf = info(d);
    ck_assert_msg(strcmp(info_str(inf, "redis"), "up") == 0 && down_names(inf, port_of(3)) &&
                      down_names(inf, port_of(4)) && !down_names(inf, port_of(0)),
                  "INFO with 2 of 5 nodes down: %s", inf);
    long long slowest = 0;
    for (int k = 0; k < 5; k++) {
        long long t = h_now_ms();
        if (k % 2) trylock_ok(a, "m");
        else lock_ok(a, "m");
        unlock_ok(a, "m");
        if (h_now_ms() - t > slowest) slowest = h_now_ms() - t;
    }
    ck_assert_msg(slowest < CMD_MS, "a LOCK and UNLOCK took %lld ms with 3 of 5 up", slowest);
    printf("quorum: 2 of 5 down: slowest LOCK+UNLOCK %lld ms\n", slowest);

    /* A third killed while a watchdog lock is held: the holder is told
     * before its lease could run out, and new requests are refused. */
    lock_ok(h, "held");
    ck_assert_ptr_null(h_recv(h, 500)); /* a renewal or two go through */
    long long t0 = h_now_ms();
    h_redis_stop_index(node[2], SIGKILL);
    const char *ev = h_recv(h, (int)lease + SLACK_MS);
    long long lost = h_now_ms() - t0;
    ck_assert_msg(ev != NULL, "no event within %u ms of the third node's death",
                  lease + SLACK_MS);
    ck_assert_msg(strcmp(ev, "!LOST held backend") == 0, "got '%s', wanted '!LOST held backend'",
                  ev);
    ck_assert_msg(lost < (long long)lease + 1000, "!LOST %lld ms after the kill (lease %u)", lost,
                  lease);
    printf("quorum: 3 of 5 down: !LOST held backend %lld ms after the kill\n", lost);
    await_up(d, 2, H_WAIT_MS);
    inf = info(d);
    ck_assert_msg(strcmp(info_str(inf, "redis"), "down") == 0 && down_names(inf, port_of(2)) &&
                      down_names(inf, port_of(3)) && down_names(inf, port_of(4)),
                  "INFO with 3 of 5 nodes down: %s", inf);
    const char *reqs[] = {"TRYLOCK nq 0", "LOCK nq", "LOCK m"};
    for (size_t i = 0; i < sizeof(reqs) / sizeof(reqs[0]); i++) {
        long long s = h_now_ms();
        const char *l = expect_prefix(c, reqs[i], "ERR BACKEND no quorum");
        long long took = h_now_ms() - s;
        ck_assert_msg(took < CMD_MS + SLACK_MS, "%s answered after %lld ms", reqs[i], took);
        printf("quorum: %s -> %s (%lld ms)\n", reqs[i], l, took);
    }
    expect_prefix(h, "UNLOCK held", "ERR NOTHELD");

    /* Back, empty: they count only rejoin_delay_ms after their restart.
     * Restarted just before a second ends, so that dlockd most likely
     * reads INFO (uptime_in_seconds, whole wall-clock seconds since the
     * start: 1 a moment after it) in the next second. */
    await_wall_ms(900, 940);
    long long tr = h_now_ms();
    for (int i = 2; i < 5; i++) h_redis_restart_index(node[i]);
    h_send(c, "TRYLOCK nq 0\n");
    const char *l = h_reply(c, H_WAIT_MS, H_EVENTS_FAIL);
    ck_assert_msg(l != NULL, "TRYLOCK nq 0 after the restarts: no reply");
    ck_assert_msg(parse_grant(l, NULL) == 0 || h_now_ms() - tr >= rejoin,
                  "granted %lld ms after the restarts, before they could rejoin (%u ms): '%s'",
                  h_now_ms() - tr, rejoin, l);
    if (parse_grant(l, NULL) != 0) {
        granted("TRYLOCK nq 0", "nq", l);
        unlock_ok(c, "nq");
    }
    long long first3 = -1;
    long long end = h_now_ms() + rejoin + H_WAIT_MS;
    for (;;) {
        const char *s = info(d);
        long long up = info_num(s, "redis_nodes_up");
        if (up >= 3 && first3 < 0) first3 = h_now_ms() - tr;
        if (up == 5) break;
        ck_assert_msg(h_now_ms() < end, "nodes not back: %s", s);
        usleep(POLL_US);
    }
    printf("quorum: restarted nodes counted again from %lld ms after the restarts, all %lld ms\n",
           first3, h_now_ms() - tr);
    for (int k = 0; k < 3; k++) {
        lock_ok(a, "m");
        unlock_ok(a, "m");
    }
    lock_ok(h, "held");
    unlock_ok(h, "held");
    /* checked last, so that the rest runs whatever it says */
    ck_assert_msg(first3 >= (long long)rejoin, "a restarted node counted %lld ms after its "
                  "restart, before rejoin_delay_ms %u", first3, rejoin);
    h_close(a);
    h_close(h);
    h_close(c);
    h_keep_passed();
}
END_TEST

/* ---- 3. a node paused --------------------------------------------------------------------- */

START_TEST(paused_node_stalls_nothing) {
    start_nodes(5);
    const unsigned lease = 1000, rejoin = 1000;
    char q[NODES_MAX * 40];
    snprintf(q, sizeof(q), "%s", urls(0, 5));
    int da = serving_dlockd(q, 5, lease, rejoin), db = serving_dlockd(q, 5, lease, rejoin);
    h_conn_t *a = h_connect_index(da), *b = h_connect_index(db);
    const char *names[] = {"p0", "p1", "p2", "p3"};
    lock_ok(a, "p0");
    unlock_ok(a, "p0");

    /* Paused: its connections stay up and it answers nothing. Grants come
     * from the other four, and the lock still excludes. No grant waits
     * anywhere near command_timeout_ms for the paused node, not even in
     * the first command_timeout_ms of the pause, before dlockd gives it up:
     * four live nodes always decide, a hand-off across daemons too (where
     * the release has not reached every live node yet and an attempt that
     * hears "taken" from some should try again soon, not wait for the
     * paused node's vote). */
    h_redis_signal_index(node[0], SIGSTOP);
    long long tp = h_now_ms(), slowest = 0, slowest_late = 0;
    const long long settled = CMD_MS + 500; /* the node given up by then */
    int cycles = 0, stalls = 0;
    char held_up[256] = "";
    while (cycles < 40 || h_now_ms() - tp < 3000) {
        ck_assert_msg(h_now_ms() - tp < 30000, "only %d cycles in 30 s", cycles);
        h_conn_t *c = cycles % 2 ? b : a;
        const char *name = names[(cycles / 2) % 4];
        long long t = h_now_ms();
        lock_ok(c, name);
        long long took = h_now_ms() - t, at = t - tp;
        if (took >= CMD_MS / 2 && held_up[0] == '\0') /* failed at the end: the rest runs */
            snprintf(held_up, sizeof(held_up), "cycle %d: LOCK %s on daemon %c took %lld ms, "
                     "%lld ms into the pause: the paused node held the grant up "
                     "(command_timeout_ms %d)", cycles, name, c == a ? 'A' : 'B', took, at,
                     CMD_MS);
        if (took > slowest) slowest = took;
        if (at >= settled && took > slowest_late) slowest_late = took;
        if (took > 100) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            struct tm tm;
            localtime_r(&ts.tv_sec, &tm);
            stalls++;
            printf("quorum: paused: cycle %d LOCK %s on daemon %c took %lld ms, %lld ms into "
                   "the pause, answered at %02d:%02d:%02d.%03ld\n", cycles, name,
                   c == a ? 'A' : 'B', took, at, tm.tm_hour, tm.tm_min, tm.tm_sec,
                   ts.tv_nsec / 1000000);
        }
        if (cycles % 8 == 1) {
            char req[64];
            snprintf(req, sizeof(req), "TRYLOCK %s 0", name);
            expect_prefix(c == a ? b : a, req, "TIMEOUT ");
        }
        t = h_now_ms();
        unlock_ok(c, name);
        took = h_now_ms() - t;
        ck_assert_msg(took < 500, "cycle %d: UNLOCK %s took %lld ms with a node paused", cycles,
                      name, took);
        cycles++;
    }
    const char *inf = info(da);
    printf("quorum: node paused: %d LOCK/UNLOCK cycles in %lld ms, %d LOCKs over 100 ms, "
           "slowest %lld ms, slowest after %lld ms %lld ms; INFO redis_nodes_up=%lld "
           "redis_down=%s\n", cycles, h_now_ms() - tp, stalls, slowest, settled, slowest_late,
           info_num(inf, "redis_nodes_up"), info_str(inf, "redis_down"));

    /* Back: whatever it does with what was queued for it, locking goes on
     * with rising fences, and no key of a released lock stays there
     * beyond a lease. */
    h_redis_signal_index(node[0], SIGCONT);
    long long tc = h_now_ms();
    int stale = 0;
    for (int i = 0; i < 4; i++) {
        char key[64];
        snprintf(key, sizeof(key), "dlock:%s", names[i]);
        if (exists_on(0, key) == 1) stale++;
    }
    int more = 0;
    while (h_now_ms() - tc < 1000) {
        h_conn_t *c = more % 2 ? b : a;
        lock_ok(c, names[more % 4]);
        unlock_ok(c, names[more % 4]);
        more++;
    }
    await_up(da, 5, H_WAIT_MS);
    long long up = h_now_ms() - tc;
    long long gone = 0;
    for (int i = 0; i < 4; i++) {
        char key[64];
        snprintf(key, sizeof(key), "dlock:%s", names[i]);
        gone = await_gone(0x1f, key, (int)lease + 3000);
    }
    printf("quorum: node resumed: %d locks of the pause on it at once, %d cycles in the next "
           "second, counting (again) %lld ms after SIGCONT, none left %lld ms after that\n", stale,
           more, up, gone);
    ck_assert_msg(held_up[0] == '\0', "%s", held_up);
    h_close(a);
    h_close(b);
    h_keep_passed();
}
END_TEST

/* A's loss of L: "backend" (renewals not confirmed by a majority), or
 * "expired" (a majority of the counting nodes, the restarted one sitting
 * out, answer that L is not there). */
static int lost_event(const char *ev) {
    return strcmp(ev, "!LOST L backend") == 0 || strcmp(ev, "!LOST L expired") == 0;
}

/* ---- 4. a node restarted empty under a held lock -------------------------------------------- */

START_TEST(restarted_empty_node_sits_out) {
    start_nodes(5);
    /* lease 1500: the holder is told 150 ms before the lease can run out */
    const unsigned lease = 1500, rejoin = 2500;
    char q[NODES_MAX * 40];
    snprintf(q, sizeof(q), "%s", urls(0, 5));
    int da = serving_dlockd(q, 5, lease, rejoin), db = serving_dlockd(q, 5, lease, rejoin);
    h_conn_t *a = h_connect_index(da), *b = h_connect_index(db);
    lock_ok(a, "L");
    unlock_ok(a, "L");

    /* A takes L with nodes 3 and 4 dead: on exactly nodes 0, 1, 2. Then 3
     * and 4 come back empty and, after rejoin_delay_ms, count again. */
    h_redis_stop_index(node[3], SIGKILL);
    h_redis_stop_index(node[4], SIGKILL);
    await_up(da, 3, H_WAIT_MS);
    await_up(db, 3, H_WAIT_MS);
    unsigned long long fa = lock_ok(a, "L");
    for (int i = 0; i < 3; i++)
        ck_assert_msg(exists_on(i, "dlock:L") == 1, "A's L not on node %d", i);
    h_redis_restart_index(node[3]);
    h_redis_restart_index(node[4]);
    await_up(da, 5, rejoin + H_WAIT_MS);
    await_up(db, 5, H_WAIT_MS);
    for (int i = 3; i < 5; i++)
        ck_assert_msg(exists_on(i, "dlock:L") == 0, "A's L on node %d, which came back empty "
                      "after the grant", i);
    ck_assert_ptr_null(h_recv(a, 0));
    expect_prefix(b, "TRYLOCK L 0", "TIMEOUT ");

    /* Node 0, one of A's three, restarts empty. Nodes 1 and 2 have A's L,
     * 3 and 4 are free, 0 is free but must not count yet: B is refused
     * until A has been told it lost L, and A is told (2 of 5 confirm). */
    long long t0 = h_now_ms();
    h_redis_stop_index(node[0], SIGKILL);
    long long tr = h_now_ms();
    h_redis_restart_index(node[0]);
    long long lost = -1, bgrant = -1;
    int tries = 0;
    char why[128] = "";
    while (lost < 0 || bgrant < 0) {
        ck_assert_msg(h_now_ms() - t0 < (long long)lease + rejoin + H_WAIT_MS,
                      "after the restart: !LOST %lld ms, B granted %lld ms", lost, bgrant);
        if (lost < 0) {
            const char *ev = h_recv(a, 20);
            if (ev != NULL) {
                ck_assert_msg(lost_event(ev), "A got '%s', wanted '!LOST L backend' (or "
                              "expired)", ev);
                snprintf(why, sizeof(why), "%s", ev);
                lost = h_now_ms() - t0;
                ck_assert_msg(lost < (long long)lease + 1000, "!LOST %lld ms after the kill "
                              "(lease %u)", lost, lease);
            }
        } else {
            usleep(20000);
        }
        if (bgrant >= 0) continue;
        h_send(b, "TRYLOCK L 0\n");
        const char *l = h_reply(b, H_WAIT_MS, H_EVENTS_FAIL);
        tries++;
        ck_assert_msg(l != NULL, "TRYLOCK L 0 on B: no reply");
        if (parse_grant(l, NULL) == 0) {
            ck_assert_msg(strncmp(l, "TIMEOUT ", 8) == 0 || strncmp(l, "ERR BACKEND", 11) == 0,
                          "TRYLOCK L 0 on B: '%s'", l);
            continue;
        }
        bgrant = h_now_ms() - t0;
        char gl[H_LINE_MAX];
        snprintf(gl, sizeof(gl), "%s", l);
        if (lost < 0) {
            /* A's daemon must have written !LOST before B could be granted:
             * it is waiting in A's socket by now. */
            const char *ev = h_recv(a, 0);
            ck_assert_msg(ev != NULL, "B granted L (%s) %lld ms after node 0's restart, while A "
                          "still holds it (no !LOST); the restarted node counted", gl, bgrant);
            ck_assert_msg(lost_event(ev), "A got '%s'", ev);
            snprintf(why, sizeof(why), "%s", ev);
            lost = bgrant;
        }
        ck_assert_uint_gt(granted("TRYLOCK L 0 on B", "L", gl), fa);
        unlock_ok(b, "L");
    }
    expect_prefix(a, "UNLOCK L", "ERR NOTHELD");
    printf("quorum: node 0 restarted empty under A's L: '%s' at %lld ms, B granted at %lld ms "
           "after %d tries\n", why, lost, bgrant, tries);

    /* Node 0 counts again only rejoin_delay_ms after it restarted; then
     * grants go on, fences above A's. */
    long long up = await_up(db, 5, rejoin + H_WAIT_MS);
    long long back = h_now_ms() - tr;
    ck_assert_msg(back >= (long long)rejoin - 100, "node 0 counted %lld ms after its restart, "
                  "rejoin_delay_ms %u", back, rejoin);
    await_up(da, 5, H_WAIT_MS);
    printf("quorum: node 0 counted again %lld ms after its restart (%lld ms of polling)\n", back,
           up);
    lock_ok(b, "L");
    h_send(a, "LOCK L\n");
    ck_assert_ptr_null(h_reply(a, 200, H_EVENTS_FAIL));
    unlock_ok(b, "L");
    granted("A's LOCK L after B's release", "L", h_reply(a, H_WAIT_MS, H_EVENTS_FAIL));
    unlock_ok(a, "L");
    h_close(a);
    h_close(b);
    h_keep_passed();
}
END_TEST


/* ---- 5. a Redisson RedLock client ----------------------------------------------------------- */

START_TEST(redisson_redlock_and_dlockd_exclude_and_wake) {
    start_nodes(5);
    int d = start_dlockd(urls(0, 5), 1000, 1000, NULL);
    KEEP(d);
    await_up(d, 5, 1000 + H_WAIT_MS);
    h_conn_t *c = h_connect_index(d), *t = h_connect_index(d);
    const char *key = "dlock:rs", *chan = "redisson_lock__channel:{dlock:rs}";

    /* Redisson holds rs on nodes 0, 1, 2 (30 s lease): a LOCK waits, a
     * TRYLOCK times out. */
    for (int i = 0; i < 3; i++) {
        const char *r = rs_try_lock(i, key);
        ck_assert_msg(r[0] == '\0', "Redisson's lock on node %d: '%s'", i, r);
    }
    h_send(c, "LOCK rs\n");
    ck_assert_ptr_null(h_reply(c, 500, H_EVENTS_FAIL));
    const char *l = expect_prefix(t, "TRYLOCK rs 0", "TIMEOUT ");
    printf("quorum: TRYLOCK rs 0 while Redisson holds it: %s\n", l);
    /* the waiter listens on the lock's channel */
    long long end = h_now_ms() + H_WAIT_MS;
    int subs = 0;
    while (subs == 0) {
        for (int i = 0; i < 5; i++) {
            const char *const a[] = {"PUBSUB", "NUMSUB", chan, NULL};
            const char *r = ncmd(i, a);
            const char *nl = r ? strrchr(r, '\n') : NULL;
            if (nl != NULL) subs += atoi(nl + 1);
        }
        ck_assert_msg(subs > 0 || h_now_ms() < end, "no SUBSCRIBE on %s on any node", chan);
        if (subs == 0) usleep(POLL_US);
    }

    /* Redisson's unlock (PUBLISH in its script) wakes the waiter, long
     * before the 30 s lease. */
    long long t0 = h_now_ms();
    for (int i = 0; i < 3; i++) {
        const char *r = rs_unlock(i, key, i);
        ck_assert_msg(strcmp(r, "1") == 0, "Redisson's unlock on node %d: '%s'", i, r);
    }
    l = h_reply(c, 5000, H_EVENTS_FAIL);
    long long woke = h_now_ms() - t0;
    granted("the dlockd waiter after Redisson's unlock", "rs", l);
    printf("quorum: dlockd waiter granted %lld ms after Redisson's unlock (%d subscriptions)\n",
           woke, subs);

    /* dlockd holds rs: Redisson's lock script is refused (the pttl) on a
     * majority of the nodes. */
    int refused = 0;
    unsigned taken = 0;
    for (int i = 0; i < 5; i++) {
        const char *r = rs_try_lock(i, key);
        if (r[0] == '\0') taken |= 1u << i;
        else if (r[0] != '-' && atoll(r) > 0) refused++;
        else ck_abort_msg("Redisson's lock on node %d while dlockd holds rs: '%s'", i, r);
    }
    ck_assert_msg(refused >= 3, "Redisson's lock refused on only %d of 5 nodes", refused);
    for (int i = 0; i < 5; i++)
        if (taken & (1u << i)) rs_unlock(i, key, 10 + i);

    /* Redisson's subscribers hear dlockd's release ("0" on the channel) on
     * a majority of the nodes, and can then lock. */
    sub_t sub[5];
    for (int i = 0; i < 5; i++) sub_open(&sub[i], port_of(i), chan);
    unlock_ok(c, "rs");
    /* (on the nodes where dlockd held it: a majority, maybe all) */
    int heard = 0;
    end = h_now_ms() + 3000;
    while (heard < 3 && h_now_ms() < end) {
        heard = 0;
        for (int i = 0; i < 5; i++) heard += sub_heard(&sub[i], 10);
    }
    ck_assert_msg(heard >= 3, "dlockd's release heard on %d nodes of 5", heard);
    heard = 0;
    for (int i = 0; i < 5; i++) heard += sub_heard(&sub[i], 20);
    for (int i = 0; i < 5; i++) close(sub[i].fd);
    printf("quorum: while dlockd held rs, Redisson's lock refused on %d nodes of 5; its release "
           "heard on %d\n", refused, heard);
    for (int i = 0; i < 3; i++) {
        await_gone(1u << i, key, 3000);
        const char *r = rs_try_lock(i, key);
        ck_assert_msg(r[0] == '\0', "Redisson's lock on node %d after dlockd's release: '%s'", i,
                      r);
    }
    expect_prefix(t, "TRYLOCK rs 0", "TIMEOUT ");
    for (int i = 0; i < 3; i++) rs_unlock(i, key, 20 + i);
    lock_ok(t, "rs");
    unlock_ok(t, "rs");
    h_close(c);
    h_close(t);
    h_keep_passed();
}
END_TEST

/* ---- 6. TLS and a password per node -------------------------------------------------------- */

START_TEST(tls_with_passwords_per_node) {
    char certs[512], q[2048], extra[1024];
    snprintf(certs, sizeof(certs), "%s", h_dir());
    h_tls_make_certs(certs);
    const char *pw[3] = {"s3cret-one", "s3cret-two", "s3cret-three"};
    for (int i = 0; i < 3; i++) {
        const char *const args[] = {"--requirepass", pw[i], NULL};
        node[nnodes++] = h_redis_start_tls_args(0, certs, 0, args);
    }
    /* Two nodes with the password in their URL, the third by the password
     * key. */
    snprintf(q, sizeof(q), "rediss://:%s@127.0.0.1:%d rediss://:%s@127.0.0.1:%d "
             "rediss://127.0.0.1:%d", pw[0], port_of(0), pw[1], port_of(1), port_of(2));
    snprintf(extra, sizeof(extra), "password = %s\ntls_ca_file = %s/ca.crt\n", pw[2], certs);
    int da = start_dlockd(q, 1000, 1000, extra);
    /* A second daemon with a wrong password for node 1: two of three. */
    char q2[2048];
    snprintf(q2, sizeof(q2), "rediss://:%s@127.0.0.1:%d rediss://:wrong@127.0.0.1:%d "
             "rediss://127.0.0.1:%d", pw[0], port_of(0), port_of(1), port_of(2));
    int db = start_dlockd(q2, 1000, 1000, extra);
    KEEP(da);
    KEEP(db);
    await_up(da, 3, 1000 + H_WAIT_MS);
    const char *inf = info(da);
    ck_assert_msg(strcmp(info_str(inf, "backend"), "quorum") == 0 &&
                      info_num(inf, "redis_nodes") == 3 && info_num(inf, "redis_nodes_up") == 3,
                  "INFO: %s", inf);

    h_conn_t *a = h_connect_index(da), *a2 = h_connect_index(da);
    lock_ok(a, "tls");
    int holding = 0;
    for (int i = 0; i < 3; i++) holding += exists_on(i, "dlock:tls") == 1;
    ck_assert_msg(holding >= 2, "dlock:tls on %d TLS nodes of 3", holding);
    h_send(a2, "LOCK tls\n");
    ck_assert_ptr_null(h_reply(a2, 300, H_EVENTS_FAIL));
    unlock_ok(a, "tls");
    granted("the waiter over TLS", "tls", h_reply(a2, 3000, H_EVENTS_FAIL));
    unlock_ok(a2, "tls");

    /* B reaches two nodes of three: a majority, node 1 named down. */
    await_up(db, 2, 1000 + H_WAIT_MS);
    h_conn_t *b = h_connect_index(db);
    lock_ok(b, "tls");
    expect_prefix(a, "TRYLOCK tls 0", "TIMEOUT ");
    unlock_ok(b, "tls");
    lock_ok(a, "tls");
    expect_prefix(b, "TRYLOCK tls 0", "TIMEOUT ");
    unlock_ok(a, "tls");
    inf = info(db);
    ck_assert_msg(info_num(inf, "redis_nodes") == 3 && info_num(inf, "redis_nodes_up") == 2 &&
                      down_names(inf, port_of(1)) && !down_names(inf, port_of(0)),
                  "INFO of the daemon with a wrong password for node 1: %s", inf);
    printf("quorum: TLS, the daemon with a wrong password for node 1 (port %d): "
           "redis_nodes_up=%lld redis_down=%s\n", port_of(1), info_num(inf, "redis_nodes_up"),
           info_str(inf, "redis_down"));
    h_close(a);
    h_close(a2);
    h_close(b);
    h_keep_passed();
}
END_TEST

/* ---- 7. configuration and limits ------------------------------------------------------------- */

START_TEST(config_and_limits) {
    start_nodes(5);
    const unsigned rejoin = 2000;
    char q5[NODES_MAX * 40], q4[NODES_MAX * 40];
    snprintf(q5, sizeof(q5), "%s", urls(0, 5));
    snprintf(q4, sizeof(q4), "%s", urls(0, 4));
    int da = start_dlockd(q5, 1000, rejoin, NULL), db = start_dlockd(q4, 1000, rejoin, NULL);
    KEEP(da);
    KEEP(db);

    /* dlockd -t, while they wait for the nodes. */
    char conf[4096], err[4096];
    struct {
        const char *what, *redis, *lock;
        int ok;                 /* exits 0 */
        const char *words[3];   /* in stderr (case-insensitive) */
    } cases[] = {
        {"an even quorum", q4, "", 1, {"warning", "even", NULL}},
        {"an odd quorum", q5, "", 1, {NULL}},
        {"two nodes", NULL, "", 0, {NULL}},
        {"ten nodes", NULL, "", 0, {NULL}},
        {"quorum and url", "", "", 0, {"quorum", "url", NULL}},
        {"quorum and cluster", "", "", 0, {"quorum", "cluster", NULL}},
        {"quorum and sentinels", "", "", 0, {"quorum", "sentinels", NULL}},
        {"lease_ms above rejoin_delay_ms", q5, "lease_ms = 2001\n", 0, {"rejoin_delay_ms", NULL}},
        {"a lease above the default rejoin_delay_ms", q5, "lease_ms = 70000\n", 1, {NULL}},
        {"a bad URL", NULL, "", 0, {NULL}},
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        char redis[2048];
        const char *rj = "rejoin_delay_ms = 2000\n";
        if (strcmp(cases[k].what, "two nodes") == 0) {
            snprintf(redis, sizeof(redis), "quorum = %s\n%s", urls(0, 2), rj);
        } else if (strcmp(cases[k].what, "ten nodes") == 0) {
            size_t n = (size_t)snprintf(redis, sizeof(redis), "quorum =");
            for (int i = 0; i < 10; i++)
                n += (size_t)snprintf(redis + n, sizeof(redis) - n, " redis://127.0.0.1:%d",
                                      20000 + i);
            snprintf(redis + n, sizeof(redis) - n, "\n%s", rj);
        } else if (strcmp(cases[k].what, "quorum and url") == 0) {
            snprintf(redis, sizeof(redis), "quorum = %s\nurl = redis://127.0.0.1:%d\n%s", q5,
                     port_of(0), rj);
        } else if (strcmp(cases[k].what, "quorum and cluster") == 0) {
            snprintf(redis, sizeof(redis), "quorum = %s\ncluster = 127.0.0.1:%d\n%s", q5,
                     port_of(0), rj);
        } else if (strcmp(cases[k].what, "quorum and sentinels") == 0) {
            snprintf(redis, sizeof(redis), "quorum = %s\nsentinels = 127.0.0.1:%d\n"
                     "master_name = m\n%s", q5, port_of(0), rj);
        } else if (strcmp(cases[k].what, "a bad URL") == 0) {
            snprintf(redis, sizeof(redis), "quorum = redis://127.0.0.1:%d http://127.0.0.1:%d "
                     "redis://127.0.0.1:%d\n%s", port_of(0), port_of(1), port_of(2), rj);
        } else if (strcmp(cases[k].what, "a lease above the default rejoin_delay_ms") == 0) {
            snprintf(redis, sizeof(redis), "quorum = %s\n", cases[k].redis);
        } else {
            snprintf(redis, sizeof(redis), "quorum = %s\n%s", cases[k].redis, rj);
        }
        snprintf(conf, sizeof(conf), "[redis]\n%s[lock]\n%s", redis,
                 cases[k].lock[0] ? cases[k].lock : "lease_ms = 1000\n");
        int rc = run_t(conf, err, sizeof(err));
        ck_assert_msg(rc >= 0, "dlockd -t hung on %s", cases[k].what);
        if (cases[k].ok)
            ck_assert_msg(rc == 0, "dlockd -t refused %s (exit %d): %s", cases[k].what, rc, err);
        else
            ck_assert_msg(rc != 0 && rc < 128, "dlockd -t on %s: exit %d: %s", cases[k].what, rc,
                          err);
        for (int w = 0; cases[k].words[w] != NULL; w++)
            ck_assert_msg(strcasestr(err, cases[k].words[w]) != NULL,
                          "dlockd -t on %s: no '%s' in its stderr: '%s'", cases[k].what,
                          cases[k].words[w], err);
        if (cases[k].ok && cases[k].words[0] == NULL)
            ck_assert_msg(strcasestr(err, "warning") == NULL, "dlockd -t on %s warns: '%s'",
                          cases[k].what, err);
        printf("quorum: dlockd -t, %s: exit %d %.*s\n", cases[k].what, rc,
               (int)strcspn(err, "\n"), err);
    }

    /* The longest lease a request may ask for is rejoin_delay_ms. */
    await_up(da, 5, rejoin + H_WAIT_MS);
    await_up(db, 4, H_WAIT_MS);
    h_conn_t *a = h_connect_index(da), *b = h_connect_index(db);
    const char *l = expect_prefix(a, "LOCK x 2001", "ERR ARGS");
    printf("quorum: LOCK x 2001 -> %s\n", l);
    expect_prefix(a, "TRYLOCK x 0 2001", "ERR ARGS");
    expect_prefix(a, "LOCK x 2147483647", "ERR ARGS");
    request_grant(a, "x", "LOCK x 2000");
    expect_prefix(a, "STATUS x", "OK MINE 1 ");
    unlock_ok(a, "x");
    request_grant(a, "x", "TRYLOCK x 0 2000");
    unlock_ok(a, "x");

    /* A reload may not raise lease_ms above the running rejoin delay (the
     * new file's default delay would follow it, but the delay changes only
     * with a restart): lease_ms stays. */
    {
        static char text[8192];
        FILE *f = fopen(h_dlockd_conf(da), "r");
        ck_assert_ptr_nonnull(f);
        size_t n = fread(text, 1, sizeof(text) - 1, f);
        fclose(f);
        text[n] = '\0';
        char *r = strstr(text, "rejoin_delay_ms = 2000\n"), *le = strstr(text, "lease_ms = 1000");
        ck_assert_msg(r != NULL && le != NULL, "unexpected config: %s", text);
        memset(r, ' ', strlen("rejoin_delay_ms = 2000")); /* unset: the default */
        memcpy(le, "lease_ms = 5000", strlen("lease_ms = 5000"));
        f = fopen(h_dlockd_conf(da), "w");
        ck_assert_ptr_nonnull(f);
        fputs(text, f);
        fclose(f);
        kill(h_dlockd_pid(da), SIGHUP);
        h_await_log(da, "above the running rejoin_delay_ms", 1);
        h_await_log(da, "reloaded", 1);
        request_grant(a, "x", "LOCK x");
        l = expect_prefix(a, "STATUS x", "OK MINE 1 ");
        ck_assert_msg(atoll(l + strlen("OK MINE 1 ")) <= 1000,
                      "a watchdog lock's TTL after the refused reload: %s", l);
        expect_prefix(a, "LOCK y 2001", "ERR ARGS");
        unlock_ok(a, "x");
    }
    lock_ok(a, "x");
    unlock_ok(a, "x");

    /* An even quorum of four: a majority is three, so it bears one node
     * down, not two. */
    const char *inf = info(db);
    ck_assert_msg(strcmp(info_str(inf, "backend"), "quorum") == 0 &&
                      info_num(inf, "redis_nodes") == 4 && info_num(inf, "redis_nodes_up") == 4,
                  "INFO of the daemon over 4 nodes: %s", inf);
    for (int k = 0; k < 4; k++) {
        h_conn_t *c = k % 2 ? a : b;
        lock_ok(c, "x");
        expect_prefix(c == a ? b : a, "TRYLOCK x 0", "TIMEOUT ");
        unlock_ok(c, "x");
    }
    h_redis_stop_index(node[3], SIGKILL);
    await_up(db, 3, H_WAIT_MS);
    lock_ok(b, "x");
    unlock_ok(b, "x");
    h_redis_stop_index(node[2], SIGKILL);
    await_up(db, 2, H_WAIT_MS);
    expect_prefix(b, "TRYLOCK x 0", "ERR BACKEND no quorum");
    /* the five-node daemon still has 0, 1 and 4 */
    await_up(da, 3, H_WAIT_MS);
    lock_ok(a, "x");
    unlock_ok(a, "x");

    /* Node 0 named twice (127.0.0.1 and localhost): one server counts
     * once, and the quorum of three has two independent nodes, so it
     * serves on those two alone. */
    char q3[NODES_MAX * 40];
    snprintf(q3, sizeof(q3), "redis://127.0.0.1:%d redis://localhost:%d redis://127.0.0.1:%d",
             port_of(0), port_of(0), port_of(1));
    int dc = start_dlockd(q3, 1000, rejoin, NULL);
    KEEP(dc);
    await_up(dc, 2, H_WAIT_MS);
    h_await_log(dc, "is the same Redis server as", 1);
    inf = info(dc);
    ck_assert_msg(info_num(inf, "redis_nodes") == 3 && info_num(inf, "redis_nodes_up") == 2 &&
                      strstr(info_str(inf, "redis_down"), "/duplicate") != NULL,
                  "INFO with one server named twice: %s", inf);
    h_conn_t *cc = h_connect_index(dc);
    lock_ok(cc, "dup");
    unlock_ok(cc, "dup");
    h_close(cc);
    h_close(a);
    h_close(b);
    h_keep_passed();
}
END_TEST

/* ---- 8. a release that missed a node reaches it when it is back ---------------------------- */

/* Node 2 keeps its data across a restart (an AOF, fsync always): killed
 * while A holds "r", it misses A's release; restarted with "r" still in it
 * and its lease running, it must get the release once dlockd reconnects,
 * well before the lease would have ended it. */
START_TEST(release_reaches_node_back_with_its_data) {
    static const char *const aof[] = {"--appendonly", "yes", "--appendfsync", "always", NULL};
    const unsigned lease = 3000, rejoin = 3000;
    start_nodes(2);
    node[nnodes++] = h_redis_start_tcp(0, aof);
    int da = serving_dlockd(urls(0, 3), 3, lease, rejoin);
    h_conn_t *a = h_connect_index(da);
    lock_ok(a, "r");
    ck_assert_int_eq(exists_on(2, "dlock:r"), 1);
    h_redis_stop_index(node[2], SIGKILL);
    await_up(da, 2, H_WAIT_MS);
    unlock_ok(a, "r"); /* answered by nodes 0 and 1 */
    await_gone(0x3, "dlock:r", H_WAIT_MS);
    long long t0 = h_now_ms();
    h_redis_restart_index(node[2]);
    long long ttl;
    while ((ttl = pttl_on(2, "dlock:r")) == -3) { /* -LOADING its AOF */
        ck_assert_msg(h_now_ms() - t0 < H_WAIT_MS, "node 2 does not answer PTTL");
        usleep(1000);
    }
    ck_assert_msg(ttl > 1000, "node 2 came back without r's key with most of its lease "
                  "(PTTL %lld): the test proves nothing", ttl);
    long long gone = await_gone(0x4, "dlock:r", (int)ttl);
    printf("quorum: the release missed by a node reached it %lld ms after its restart "
           "(%lld ms since the restart began), its key had %lld ms of lease left\n", gone,
           h_now_ms() - t0, ttl);
    ck_assert_msg(gone < ttl - 500, "r left node 2 %lld ms after its restart, with %lld ms of "
                  "lease left at the restart: not by the release", gone, ttl);
    h_close(a);
    h_keep_passed();
}
END_TEST

/* ---- 9. three daemons contend for one name -------------------------------------------------- */

/* Three daemons, each with a client asking again the moment it let go:
 * with five nodes, contenders can split the votes (2-2-1), undo and try
 * again. Nobody may wait anywhere near a lease for a lock passed around
 * every few milliseconds (a livelock, or a split that waits out the
 * losers' TTLs), every daemon gets its turns, and the fences rise. */
START_TEST(three_daemons_contend) {
    enum { DAEMONS = 3, GRANTS = 300 };
    const unsigned lease = 2000, rejoin = 2000;
    start_nodes(5);
    char q[NODES_MAX * 40];
    snprintf(q, sizeof(q), "%s", urls(0, 5));
    int d[DAEMONS];
    h_conn_t *c[DAEMONS];
    long long asked[DAEMONS];
    int grants[DAEMONS] = {0};
    for (int i = 0; i < DAEMONS; i++) d[i] = start_dlockd(q, lease, rejoin, NULL);
    for (int i = 0; i < DAEMONS; i++) {
        KEEP(d[i]);
        await_up(d[i], 5, (int)rejoin + H_WAIT_MS);
        c[i] = h_connect_index(d[i]);
    }
    long long t0 = h_now_ms(), longest = 0;
    for (int i = 0; i < DAEMONS; i++) {
        h_send(c[i], "LOCK hot\n");
        asked[i] = h_now_ms();
    }
    for (int total = 0; total < GRANTS; total++) {
        int got = -1;
        const char *l = NULL;
        long long since = h_now_ms();
        while (got < 0) {
            for (int i = 0; i < DAEMONS && got < 0; i++)
                if ((l = h_recv(c[i], 0)) != NULL) got = i;
            ck_assert_msg(got >= 0 || h_now_ms() - since < (long long)lease,
                          "grant %d: nobody granted for %u ms (a lease) with three daemons "
                          "asking", total, lease);
            if (got < 0) usleep(200);
        }
        granted("contend", "hot", l);
        long long waited = h_now_ms() - asked[got];
        if (waited > longest) longest = waited;
        grants[got]++;
        for (int j = 0; j < DAEMONS; j++) /* nobody else holds it now */
            ck_assert_msg(j == got || (l = h_recv(c[j], 0)) == NULL,
                          "daemon %d answered '%s' while daemon %d held hot", j, l, got);
        h_send(c[got], "UNLOCK hot\n");
        ck_assert_str_eq(h_reply(c[got], H_WAIT_MS, H_EVENTS_FAIL), "OK 0");
        h_send(c[got], "LOCK hot\n");
        asked[got] = h_now_ms();
    }
    printf("quorum: three daemons contending: %d grants in %lld ms (%d/%d/%d), longest wait "
           "of a LOCK %lld ms\n", GRANTS, h_now_ms() - t0, grants[0], grants[1], grants[2],
           longest);
    for (int i = 0; i < DAEMONS; i++)
        ck_assert_msg(grants[i] >= GRANTS / 10, "daemon %d got %d of %d grants", i, grants[i],
                      GRANTS);
    for (int i = 0; i < DAEMONS; i++) h_close(c[i]);
    h_keep_passed();
}
END_TEST

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    Suite *s = suite_create("quorum");
    /* One case per test, so that CK_RUN_CASE=<name> runs one. */
    const struct {
        const char *name;
        const TTest *test;
    } tests[] = {
        {"basic", basic_two_daemons_over_five_nodes},
        {"minority_majority", minority_down_works_majority_down_refuses},
        {"pause", paused_node_stalls_nothing},
        {"restart_empty", restarted_empty_node_sits_out},
        {"redisson", redisson_redlock_and_dlockd_exclude_and_wake},
        {"tls", tls_with_passwords_per_node},
        {"config", config_and_limits},
        {"release_resent", release_reaches_node_back_with_its_data},
        {"contend", three_daemons_contend},
    };
    for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++) {
        TCase *t = tcase_create(tests[i].name);
        tcase_add_checked_fixture(t, setup, teardown);
        tcase_set_timeout(t, 120);
        tcase_add_test(t, tests[i].test);
        suite_add_tcase(s, t);
    }
    return h_main(s);
}
