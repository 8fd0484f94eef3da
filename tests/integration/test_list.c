/* Integration tests of LIST, dlock --list and GET /locks, across daemons and topologies.
 * SPDX-License-Identifier: MIT
 *
 * Every client here is this process (uid 0), so a holder or waiter that a
 * dlockd knows as its own shows this process's pid; one of the other
 * dlockd shows as <host>/<its pid>/-/-. A peer of another uid is a forked
 * child that drops root and sends LIST itself (as test_access.c does). */
#include <check.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/support/harness.h"

#define LIST_MAX_LINES 64       /* entries a test reads back */
#define U_PEER         60011    /* a uid no /etc/passwd needs to know */
#define CMD_MS         500      /* command_timeout_ms of the hung-Redis case */
#define SLACK_MS       1500     /* on top of CMD_MS: a busy 2-core machine */
#define HTTP_MAX       65536
#define QUORUM_REJOIN_MS 1000   /* nodes count this soon after the start */

typedef struct {
    int n, more;
    char line[LIST_MAX_LINES][H_LINE_MAX];
} listing_t;

static char host[256];

static void list_setup(void) {
    h_setup();
    ck_assert_int_eq(gethostname(host, sizeof(host)), 0);
    host[sizeof(host) - 1] = '\0';
}

/* Sends request (a LIST) and reads its header and entries into l. */
static void list_on(h_conn_t *c, const char *request, listing_t *l) {
    h_send(c, "%s\n", request);
    const char *r = h_reply(c, H_WAIT_MS, H_EVENTS_SKIP);
    ck_assert_msg(r != NULL, "%s: no reply", request);
    ck_assert_msg(sscanf(r, "OK LIST %d %d", &l->n, &l->more) == 2, "%s: '%s'", request, r);
    ck_assert_int_le(l->n, LIST_MAX_LINES);
    for (int i = 0; i < l->n; i++) {
        r = h_recv(c, H_WAIT_MS);
        ck_assert_msg(r != NULL && strncmp(r, "= ", 2) == 0, "%s: entry %d: '%s'", request, i,
                      r ? r : "(none)");
        snprintf(l->line[i], sizeof(l->line[i]), "%s", r + 2);
    }
}

/* The entry of name in l (its text after "= "), NULL if absent. */
static const char *entry(const listing_t *l, const char *name) {
    size_t n = strlen(name);
    for (int i = 0; i < l->n; i++)
        if (strncmp(l->line[i], name, n) == 0 && l->line[i][n] == ' ') return l->line[i];
    return NULL;
}

/* Word i (0: the name) of an entry (static). */
static const char *word(const char *e, int i) {
    static char w[H_LINE_MAX];
    for (; i > 0; i--) e = strchr(e, ' ') + 1;
    snprintf(w, sizeof(w), "%.*s", (int)strcspn(e, " "), e);
    return w;
}

/* A holder or waiter list ("<total>,a,b...") has n in total and, for each
 * of want[] (a prefix "host/dlockd/pid/uid/count/"), one element that
 * begins with it. */
static void has_people(const char *e, int wordno, int total, const char *const want[]) {
    char list[H_LINE_MAX];
    snprintf(list, sizeof(list), "%s", word(e, wordno));
    ck_assert_msg(atoi(list) == total, "'%s': word %d total %d, wanted %d", e, wordno, atoi(list),
                  total);
    for (int i = 0; want[i] != NULL; i++) {
        int found = 0;
        for (char *p = strchr(list, ','); p != NULL; p = strchr(p + 1, ','))
            if (strncmp(p + 1, want[i], strlen(want[i])) == 0) found = 1;
        ck_assert_msg(found, "'%s': word %d lacks %s...", e, wordno, want[i]);
    }
}

/* "host/dlockd_pid/pid/uid/count/" of a client of dlockd d (this process),
 * or, pid 0, of the other dlockd's client (pid and uid not known). */
static const char *who(int d, int mine, int count) {
    static char b[4][300];
    static int k;
    char *s = b[k++ % 4];
    if (mine)
        snprintf(s, 300, "%s/%d/%d/0/%d/", host, (int)h_dlockd_pid(d), (int)getpid(), count);
    else
        snprintf(s, 300, "%s/%d/-/-/%d/-", host, (int)h_dlockd_pid(d), count);
    return s;
}

/* The output of dlock (DLOCK_BIN) args... on dlockd d (static), exit 0. */
static const char *dlock_out(int d, const char *args) {
    static char out[HTTP_MAX];
    char cmd[1024];
    const char *dlock = getenv("DLOCK_BIN") ? getenv("DLOCK_BIN") : "build/dlock";
    snprintf(cmd, sizeof(cmd), "%s -S %s %s", dlock, h_dlockd_sock(d), args);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    size_t n = fread(out, 1, sizeof(out) - 1, p);
    out[n] = '\0';
    ck_assert_msg(pclose(p) == 0, "%s: exit not 0: %s", cmd, out);
    return out;
}

/* The table line of name in dlock --list's output (static), "" if none. */
static const char *table_row(const char *out, const char *name) {
    static char row[H_LINE_MAX];
    size_t n = strlen(name);
    for (const char *p = out; *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : p + strlen(p))
        if (strncmp(p, name, n) == 0 && p[n] == ' ') {
            snprintf(row, sizeof(row), "%.*s", (int)strcspn(p, "\n"), p);
            return row;
        }
    return "";
}

/* GET path over the metrics Unix socket at sock: the status code; the body
 * in body (static). */
static int http_get(const char *sock, const char *path, const char **body) {
    static char resp[HTTP_MAX];
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    struct timeval tv = {.tv_sec = H_WAIT_MS / 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    char req[1024];
    int n = snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\nHost: localhost\r\n\r\n", path);
    ck_assert_int_eq(send(fd, req, (size_t)n, MSG_NOSIGNAL), n);
    size_t got = 0;
    for (;;) {
        ssize_t k = recv(fd, resp + got, sizeof(resp) - 1 - got, 0);
        if (k <= 0) break;
        got += (size_t)k;
    }
    close(fd);
    resp[got] = '\0';
    int status = 0;
    ck_assert_msg(sscanf(resp, "HTTP/1.%*d %d", &status) == 1, "GET %s: '%.200s'", path, resp);
    const char *b = strstr(resp, "\r\n\r\n");
    *body = b ? b + 4 : "";
    return status;
}

/* The JSON object of lock name in a /locks or --json body (static, up to
 * the next lock), "" if none. */
static const char *json_lock(const char *body, const char *name) {
    static char obj[HTTP_MAX];
    char key[300];
    snprintf(key, sizeof(key), "{\"name\":\"%s\"", name);
    const char *p = strstr(body, key);
    if (p == NULL) return "";
    const char *end = strstr(p + 1, "{\"name\":");
    snprintf(obj, sizeof(obj), "%.*s", (int)(end ? end - p : (long)strlen(p)), p);
    return obj;
}

static void json_has(const char *obj, const char *what, const char *name) {
    ck_assert_msg(strstr(obj, what) != NULL, "%s: lacks %s in %s", name, what, obj);
}

/* "host":"H","dlockd_pid":P,"pid":me,"uid":0 of a client of dlockd d, or
 * the other dlockd's ("pid":null,"uid":null). */
static const char *json_who(int d, int mine) {
    static char s[2][400];
    static int k;
    char *b = s[k++ % 2];
    if (mine)
        snprintf(b, 400, "{\"host\":\"%s\",\"dlockd_pid\":%d,\"pid\":%d,\"uid\":0,", host,
                 (int)h_dlockd_pid(d), (int)getpid());
    else
        snprintf(b, 400, "{\"host\":\"%s\",\"dlockd_pid\":%d,\"pid\":null,\"uid\":null,", host,
                 (int)h_dlockd_pid(d));
    return b;
}

static void await_release(const char *key) {
    long long end = h_now_ms() + H_WAIT_MS;
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "EXISTS %s", key);
    while (strcmp(h_redis_cli("%s", cmd), "0") != 0) {
        ck_assert_msg(h_now_ms() < end, "%s never left Redis", key);
        usleep(2000);
    }
}

/* Sends request; its reply must begin with want. */
static void expect_ok(h_conn_t *c, const char *request, const char *want) {
    h_send(c, "%s\n", request);
    const char *r = h_reply(c, H_WAIT_MS, H_EVENTS_SKIP);
    ck_assert_msg(r != NULL && strncmp(r, want, strlen(want)) == 0, "%s: '%s', wanted '%s...'",
                  request, r ? r : "(none)", want);
}

/* A Redisson-style hold of name: its hash written by a raw EVAL (HSET and
 * PEXPIRE), with an owner no dlockd registered. */
static void redisson_hold(const char *name) {
    char key[300];
    snprintf(key, sizeof(key), "dlock:%s", name);
    const char *argv[] = {"EVAL", "redis.call('hset', KEYS[1], ARGV[1], 1); "
                          "return redis.call('pexpire', KEYS[1], 30000)", "1", key,
                          "0b1e7b9c-0000-4000-8000-000000000001:7", NULL};
    ck_assert_str_eq(h_redis_argv(argv), "1");
}

/* ---- every kind, two daemons ---------------------------------------------------- */

START_TEST(list_every_kind_two_daemons) {
    char msock[300], extra[600];
    h_redis_start();
    snprintf(msock, sizeof(msock), "%s/metrics.sock", h_dir());
    snprintf(extra, sizeof(extra), "[server]\nmetrics = %s\n", msock);
    int d1 = h_dlockd_start(extra), d2 = h_dlockd_start(NULL);
    h_keep_log(d1, "list.every_kind.dlockd%d", d1);
    h_keep_log(d2, "list.every_kind.dlockd%d", d2);
    h_conn_t *c[16];
    for (int i = 0; i < 16; i++) c[i] = h_connect_index(i % 2 == 0 ? d1 : d2);
    h_conn_t *q1 = h_connect_index(d1), *q2 = h_connect_index(d2);

    /* plain: held on d1, a waiter on each daemon */
    expect_ok(c[0], "LOCK l/plain", "OK ");
    h_send(c[2], "LOCK l/plain\n");
    h_send(c[1], "LOCK l/plain\n");
    /* read/write: two readers, one per daemon; a write lock on d2 */
    expect_ok(c[4], "RLOCK l/rw", "OK ");
    expect_ok(c[3], "RLOCK l/rw", "OK ");
    expect_ok(c[5], "WLOCK l/w", "OK ");
    /* semaphore of 4: 2 permits on d1, 1 on d2, and 2 asked on d1 */
    expect_ok(c[6], "SEMINIT l/sem 4", "OK");
    expect_ok(c[6], "ACQUIRE l/sem 2", "OK 2");
    expect_ok(c[7], "ACQUIRE l/sem 1", "OK 1");
    h_send(c[8], "ACQUIRE l/sem 2\n");
    /* fair: held on d2, d1 queued behind it */
    expect_ok(c[9], "FAIRLOCK l/fair", "OK ");
    h_send(c[10], "FAIRLOCK l/fair\n");
    /* election: d1 leads with v1, a candidate on d2 */
    expect_ok(c[12], "ELECT l/elect v1", "OK ");
    h_send(c[11], "ELECT l/elect v2\n");
    redisson_hold("l/redisson");
    h_await_waiters(q1, 3); /* plain, sem, fair */
    h_await_waiters(q2, 2); /* plain, elect */

    /* Asked of d1. */
    listing_t l;
    list_on(q1, "LIST l/*", &l);
    ck_assert_msg(l.n == 7 && l.more == 0, "LIST l/*: %d entries, more %d", l.n, l.more);
    const char *e = entry(&l, "l/plain");
    ck_assert_ptr_nonnull(e);
    ck_assert_str_eq(word(e, 1), "lock");
    ck_assert_int_gt(atoll(word(e, 2)), 0);
    ck_assert_int_gt(atoll(word(e, 3)), 0); /* a fence */
    has_people(e, 4, 1, (const char *const[]){who(d1, 1, 1), NULL});
    has_people(e, 5, 1, (const char *const[]){who(d1, 1, 0), NULL}); /* d1's waiter only */
    e = entry(&l, "l/rw");
    ck_assert_str_eq(word(e, 1), "read");
    has_people(e, 4, 2, (const char *const[]){who(d1, 1, 1), who(d2, 0, 1), NULL});
    e = entry(&l, "l/w");
    ck_assert_str_eq(word(e, 1), "write");
    has_people(e, 4, 1, (const char *const[]){who(d2, 0, 1), NULL});
    e = entry(&l, "l/sem");
    ck_assert_str_eq(word(e, 1), "sem");
    ck_assert_str_eq(word(e, 3), "-");
    has_people(e, 4, 2, (const char *const[]){who(d1, 1, 2), who(d2, 0, 1), NULL});
    has_people(e, 5, 1, (const char *const[]){who(d1, 1, 2), NULL});
    ck_assert_str_eq(word(e, 6), "1"); /* permits available */
    e = entry(&l, "l/fair");
    ck_assert_str_eq(word(e, 1), "fair");
    has_people(e, 4, 1, (const char *const[]){who(d2, 0, 1), NULL});
    has_people(e, 5, 1, (const char *const[]){who(d1, 1, 0), NULL});
    e = entry(&l, "l/elect");
    ck_assert_str_eq(word(e, 1), "elect");
    has_people(e, 4, 1, (const char *const[]){who(d1, 1, 1), NULL});
    has_people(e, 5, 1, (const char *const[]){who(d2, 0, 0), NULL});
    ck_assert_str_eq(word(e, 6), "v1");
    e = entry(&l, "l/redisson");
    ck_assert_str_eq(word(e, 1), "lock");
    ck_assert_int_gt(atoll(word(e, 2)), 0);
    has_people(e, 4, 1, (const char *const[]){"-/-/-/-/1/-", NULL});
    ck_assert_str_eq(word(e, 5), "0");

    /* Asked of d2: the same locks, seen from there. */
    listing_t l2;
    list_on(q2, "LIST l/*", &l2);
    ck_assert_int_eq(l2.n, 7);
    e = entry(&l2, "l/plain");
    has_people(e, 4, 1, (const char *const[]){who(d1, 0, 1), NULL});
    has_people(e, 5, 1, (const char *const[]){who(d2, 1, 0), NULL}); /* d2's waiter only */
    e = entry(&l2, "l/fair");
    ck_assert_str_eq(word(e, 1), "fair");
    has_people(e, 4, 1, (const char *const[]){who(d2, 1, 1), NULL});
    has_people(e, 5, 1, (const char *const[]){who(d1, 0, 0), NULL});
    e = entry(&l2, "l/elect");
    has_people(e, 4, 1, (const char *const[]){who(d1, 0, 1), NULL});
    has_people(e, 5, 1, (const char *const[]){who(d2, 1, 0), NULL});

    /* Pattern and limit. */
    list_on(q1, "LIST l/[pf]*", &l);
    ck_assert_msg(l.n == 2 && l.more == 0 && entry(&l, "l/plain") && entry(&l, "l/fair"),
                  "LIST l/[pf]*: %d", l.n);
    list_on(q1, "LIST l/?lect", &l);
    ck_assert_msg(l.n == 1 && entry(&l, "l/elect"), "LIST l/?lect: %d", l.n);
    list_on(q1, "LIST nothing*", &l);
    ck_assert_int_eq(l.n, 0);
    ck_assert_int_eq(l.more, 0);
    list_on(q1, "LIST l/* 3", &l);
    ck_assert_msg(l.n == 3 && l.more == 1, "LIST l/* 3: %d more %d", l.n, l.more);
    list_on(q1, "LIST l/* 7", &l);
    ck_assert_msg(l.n == 7 && l.more == 0, "LIST l/* 7: %d more %d", l.n, l.more);
    list_on(q1, "LIST", &l); /* default: * */
    ck_assert_int_eq(l.n, 7);

    /* Bad arguments. */
    char lng[300];
    memset(lng, 'a', 256);
    lng[256] = '\0';
    h_expect_reply(q1, "LIST * 0\n", "ERR ARGS limit is 1 to 1000");
    h_send(q1, "LIST * 1001\n");
    H_EXPECT_PREFIX(q1, "ERR ARGS");
    h_send(q1, "LIST * x\n");
    H_EXPECT_PREFIX(q1, "ERR ARGS");
    h_send(q1, "LIST * 5 6\n");
    H_EXPECT_PREFIX(q1, "ERR ARGS");
    h_send(q1, "LIST %s\n", lng);
    H_EXPECT_PREFIX(q1, "ERR ARGS");
    h_send(q1, "PING\n"); /* nothing else was sent */
    H_EXPECT(q1, "OK PONG");

    /* dlock --list: the table. */
    const char *out = dlock_out(d1, "--list 'l/*'");
    ck_assert_msg(strncmp(out, "NAME", 4) == 0, "dlock --list: %s", out);
    char pid[32], row[H_LINE_MAX];
    snprintf(pid, sizeof(pid), " %d ", (int)getpid());
    static const char *const names[] = {"l/plain", "l/rw", "l/w", "l/sem", "l/fair",
                                        "l/elect", "l/redisson"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        ck_assert_msg(table_row(out, names[i])[0] != '\0', "dlock --list lacks %s: %s", names[i],
                      out);
    char d1at[300], d2at[300];
    snprintf(d1at, sizeof(d1at), "%s:%d", host, (int)h_dlockd_pid(d1));
    snprintf(d2at, sizeof(d2at), "%s:%d", host, (int)h_dlockd_pid(d2));
    snprintf(row, sizeof(row), "%s", table_row(out, "l/plain"));
    ck_assert_msg(strstr(row, d1at) && strstr(row, pid) && strstr(row, " lock "),
                  "dlock --list l/plain: '%s' (want %s, pid%s)", row, d1at, pid);
    snprintf(row, sizeof(row), "%s", table_row(out, "l/w"));
    ck_assert_msg(strstr(row, d2at) && strstr(row, " write "), "dlock --list l/w: '%s'", row);
    snprintf(row, sizeof(row), "%s", table_row(out, "l/fair"));
    snprintf(pid, sizeof(pid), "pid %d)", (int)getpid());
    ck_assert_msg(strstr(row, d2at) && strstr(row, pid), "dlock --list l/fair: '%s' (a waiter %s)",
                  row, pid);
    snprintf(row, sizeof(row), "%s", table_row(out, "l/redisson"));
    ck_assert_msg(strstr(row, " lock ") && strstr(row, " - "), "dlock --list l/redisson: '%s'",
                  row);
    out = dlock_out(d1, "--list --limit 2 'l/*'");
    int rows = 0;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        rows += table_row(out, names[i])[0] != '\0';
    ck_assert_msg(rows == 2 && strstr(out, "more"), "dlock --list --limit 2: %s", out);

    /* dlock --list --json. */
    out = dlock_out(d1, "--list --json 'l/*'");
    json_has(out, "\"count\":7", "--json");
    json_has(out, "\"more\":false", "--json");
    const char *o = json_lock(out, "l/plain");
    json_has(o, "\"kind\":\"lock\"", "l/plain");
    json_has(o, json_who(d1, 1), "l/plain");
    json_has(o, "\"waiters_total\":1", "l/plain");
    o = json_lock(out, "l/rw");
    json_has(o, json_who(d2, 0), "l/rw");
    json_has(o, json_who(d1, 1), "l/rw");
    json_has(json_lock(out, "l/elect"), "\"value\":\"v1\"", "l/elect");
    json_has(json_lock(out, "l/redisson"), "\"host\":null", "l/redisson");
    out = dlock_out(d1, "--list --json --limit 1 'l/*'");
    json_has(out, "\"count\":1", "--json --limit 1");
    json_has(out, "\"more\":true", "--json --limit 1");

    /* GET /locks. */
    const char *body;
    ck_assert_int_eq(http_get(msock, "/locks?pattern=l/*", &body), 200);
    json_has(body, "\"count\":7", "/locks");
    o = json_lock(body, "l/sem");
    json_has(o, "\"kind\":\"sem\"", "l/sem");
    json_has(o, json_who(d1, 1), "l/sem");
    json_has(o, json_who(d2, 0), "l/sem");
    json_has(o, "\"waiters_total\":1", "l/sem");
    o = json_lock(body, "l/fair");
    json_has(o, json_who(d2, 0), "l/fair");
    json_has(o, json_who(d1, 1), "l/fair");
    json_has(json_lock(body, "l/redisson"), "\"holders_total\":1", "l/redisson");
    ck_assert_int_eq(http_get(msock, "/locks?pattern=l/e*", &body), 200);
    json_has(body, "\"count\":1", "/locks?pattern=l/e*");
    json_has(json_lock(body, "l/elect"), "\"value\":\"v1\"", "/locks l/elect");
    ck_assert_int_eq(http_get(msock, "/locks?pattern=l/*&limit=2", &body), 200);
    json_has(body, "\"count\":2", "/locks limit=2");
    json_has(body, "\"more\":true", "/locks limit=2");
    ck_assert_int_eq(http_get(msock, "/locks?limit=0", &body), 400);
    json_has(body, "{\"error\":", "/locks?limit=0");
    ck_assert_int_eq(http_get(msock, "/locks?limit=1001", &body), 400);
    ck_assert_int_eq(http_get(msock, "/locks?limit=x", &body), 400);
    char path[400];
    snprintf(path, sizeof(path), "/locks?pattern=%s", lng);
    ck_assert_int_eq(http_get(msock, path, &body), 400);
    json_has(body, "{\"error\":", "/locks?pattern=<256>");

    /* The holder gone: its lock leaves the listing, a waiter took it: d2's,
     * whose daemon the wake queue names (Redis refused it; d1's waiter,
     * behind its own daemon's hold, never tried), and d1's waits on. */
    expect_ok(c[0], "UNLOCK l/plain", "OK 0");
    H_EXPECT_PREFIX(c[1], "OK ");
    h_close(c[0]);
    list_on(q1, "LIST l/plain", &l);
    ck_assert_int_eq(l.n, 1);
    has_people(l.line[0], 4, 1, (const char *const[]){who(d2, 0, 1), NULL});
    has_people(l.line[0], 5, 1, (const char *const[]){who(d1, 1, 0), NULL});
    for (int i = 1; i < 16; i++) h_close(c[i]);
    await_release("dlock:l/w");
    h_close(q1);
    h_close(q2);
    h_keep_passed();
}
END_TEST

/* ---- many keys: several SCAN pages, many describe calls ---------------------- */

START_TEST(list_many_keys) {
    h_redis_start();
    int d = h_dlockd_start(NULL);
    h_conn_t *q = h_connect_index(d);
    /* 2500 Redisson-style holds m/0000 ... m/2499, and as many other keys */
    const char *argv[] = {"EVAL", "for i = 0, 2499 do "
                          "local k = string.format('dlock:m/%04d', i); "
                          "redis.call('hset', k, '0b1e7b9c-0000-4000-8000-000000000003:1', 1); "
                          "redis.call('pexpire', k, 60000); "
                          "redis.call('set', string.format('other:%04d', i), 1) end "
                          "return redis.call('dbsize')", "0", NULL};
    ck_assert_str_eq(h_redis_argv(argv), "5001"); /* and the daemons' registry */
    static listing_t l; /* large */
    char req[64];
    /* 100 names spread over the keyspace: every page walked */
    h_send(q, "LIST m/00* 1000\n");
    const char *r = h_recv(q, H_WAIT_MS);
    ck_assert_str_eq(r, "OK LIST 100 0");
    char prev[64] = "";
    for (int i = 0; i < 100; i++) {
        r = h_recv(q, H_WAIT_MS);
        ck_assert_msg(r != NULL && strncmp(r, "= m/00", 6) == 0, "entry %d: %s", i, r ? r : "");
        snprintf(req, sizeof(req), "%.7s", r + 2);
        ck_assert_msg(strcmp(prev, req) < 0, "not in order: %s then %s", prev, req);
        snprintf(prev, sizeof(prev), "%s", req);
    }
    /* more than the limit: cut at it */
    h_send(q, "LIST m/* 1000\n");
    H_EXPECT(q, "OK LIST 1000 1");
    for (int i = 0; i < 1000; i++) H_EXPECT_PREFIX(q, "= m/");
    list_on(q, "LIST m/* 60", &l);
    ck_assert_msg(l.n == 60 && l.more == 1, "LIST m/* 60: %d more %d", l.n, l.more);
    h_close(q);
}
END_TEST

/* ---- [access] ------------------------------------------------------------------- */

/* A forked child as uid sends request on its own connection to dlockd
 * index and writes back every line it reads for 1 + n entries. */
static int list_as(int index, uid_t uid, const char *request, listing_t *l) {
    int p[2];
    h_dirs_searchable();
    ck_assert_int_eq(pipe(p), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(p[0]);
        if (setgroups(0, NULL) != 0 || setgid(uid) != 0 || setuid(uid) != 0) _exit(1);
        h_conn_t *c = h_connect_index(index);
        h_send(c, "%s\n", request);
        const char *r = h_recv(c, H_WAIT_MS);
        int n = 0, more;
        if (r == NULL) _exit(2);
        dprintf(p[1], "%s\n", r);
        if (sscanf(r, "OK LIST %d %d", &n, &more) != 2) n = 0;
        for (int i = 0; i < n; i++) {
            r = h_recv(c, H_WAIT_MS);
            if (r == NULL) _exit(3);
            dprintf(p[1], "%s\n", r);
        }
        _exit(0);
    }
    close(p[1]);
    FILE *f = fdopen(p[0], "r");
    char line[H_LINE_MAX];
    int status;
    l->n = -1;
    l->more = 0;
    if (fgets(line, sizeof(line), f) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        if (sscanf(line, "OK LIST %d %d", &l->n, &l->more) != 2) {
            snprintf(l->line[0], sizeof(l->line[0]), "%s", line); /* an error */
            l->n = -1;
        }
        for (int i = 0; i < l->n && fgets(line, sizeof(line), f) != NULL; i++) {
            line[strcspn(line, "\n")] = '\0';
            snprintf(l->line[i], sizeof(l->line[i]), "%s", line + 2);
        }
    }
    fclose(f);
    waitpid(pid, &status, 0);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child as uid %u: status %d",
                  (unsigned)uid, status);
    return l->n;
}

START_TEST(list_shows_only_readable_names) {
    if (geteuid() != 0) {
        fprintf(stderr, "test_list: access case skipped, needs root\n");
        return;
    }
    h_redis_start();
    int d = h_dlockd_start("[server]\nsocket_mode = 0666\n[access]\n"
                           "uid:60011 = read pub/*\nuid:60011 = lock pub/own*\n");
    h_conn_t *a = h_connect_index(d);
    expect_ok(a, "LOCK pub/a", "OK ");
    expect_ok(a, "LOCK priv/b", "OK ");
    expect_ok(a, "RLOCK pub/own1", "OK ");
    redisson_hold("secret/r");

    /* root sees all four */
    listing_t l;
    list_on(a, "LIST", &l);
    ck_assert_int_eq(l.n, 4);
    /* the peer only pub/ */
    ck_assert_int_eq(list_as(d, U_PEER, "LIST", &l), 2);
    ck_assert_msg(entry(&l, "pub/a") && entry(&l, "pub/own1"), "uid %d: %s / %s", U_PEER,
                  l.line[0], l.line[1]);
    ck_assert_int_eq(list_as(d, U_PEER, "LIST p*", &l), 2);
    ck_assert_int_eq(list_as(d, U_PEER, "LIST priv/*", &l), 0);
    /* a limit counts what the peer may see */
    ck_assert_int_eq(list_as(d, U_PEER, "LIST * 1", &l), 1);
    ck_assert_int_eq(l.more, 1);
    /* a uid that may read nothing may not list */
    ck_assert_int_eq(list_as(d, U_PEER + 1, "LIST", &l), -1);
    ck_assert_msg(strncmp(l.line[0], "ERR DENIED", 10) == 0, "uid %d: '%s'", U_PEER + 1,
                  l.line[0]);
    h_close(a);
}
END_TEST

/* ---- a hung Redis ------------------------------------------------------------- */

START_TEST(list_hung_redis_answers_in_time) {
    char msock[300], extra[600];
    h_redis_start();
    snprintf(msock, sizeof(msock), "%s/metrics.sock", h_dir());
    snprintf(extra, sizeof(extra), "[server]\nmetrics = %s\n[redis]\ncommand_timeout_ms = %d\n",
             msock, CMD_MS);
    int d = h_dlockd_start(extra);
    h_keep_log(d, "list.hung.dlockd%d", d);
    h_conn_t *a = h_connect_index(d), *q = h_connect_index(d);
    expect_ok(a, "LOCK h", "OK ");
    listing_t l;
    list_on(q, "LIST", &l);
    ck_assert_int_eq(l.n, 1);

    /* GET /locks first, on a fresh hang; then, Redis back and hung again, LIST. */
    h_redis_signal(SIGSTOP);
    const char *body;
    long long t0 = h_now_ms();
    int status = http_get(msock, "/locks", &body);
    long long http_took = h_now_ms() - t0;
    char hbody[1024];
    snprintf(hbody, sizeof(hbody), "%s", body);
    h_redis_signal(SIGCONT);
    ck_assert_msg(status == 503 && strncmp(hbody, "{\"error\":", 9) == 0,
                  "GET /locks on a hung Redis: %d %s", status, hbody);
    ck_assert_msg(http_took <= CMD_MS + SLACK_MS, "GET /locks took %lld ms", http_took);
    h_await_redis(d, 1);
    list_on(q, "LIST", &l);
    ck_assert_int_eq(l.n, 1);

    h_redis_signal(SIGSTOP);
    t0 = h_now_ms();
    h_send(q, "LIST\n");
    const char *r = h_reply(q, CMD_MS + SLACK_MS + H_WAIT_MS, H_EVENTS_SKIP);
    long long took = h_now_ms() - t0;
    char got[H_LINE_MAX];
    snprintf(got, sizeof(got), "%s", r ? r : "(none)");
    h_redis_signal(SIGCONT);
    printf("list: hung Redis: HTTP %d after %lld ms, ERR BACKEND after %lld ms "
           "(command_timeout_ms %d)\n", status, http_took, took, CMD_MS);
    ck_assert_msg(strncmp(got, "ERR BACKEND", 11) == 0, "LIST on a hung Redis: '%s'", got);
    ck_assert_msg(took <= CMD_MS + SLACK_MS, "LIST took %lld ms", took);

    /* Redis back: LIST works again. */
    h_await_redis(d, 1);
    long long end = h_now_ms() + H_WAIT_MS;
    for (;;) {
        h_send(q, "LIST\n");
        r = h_reply(q, H_WAIT_MS, H_EVENTS_SKIP);
        ck_assert_ptr_nonnull(r);
        if (strcmp(r, "OK LIST 1 0") == 0) break;
        ck_assert_msg(h_now_ms() < end, "LIST after SIGCONT: '%s'", r);
        usleep(20000);
    }
    H_EXPECT_PREFIX(q, "= h lock ");
    h_close(a);
    h_close(q);
    h_keep_passed();
}
END_TEST

/* ---- Cluster ------------------------------------------------------------------ */

/* A dlockd on the running cluster; waits until every primary is up. */
static int cluster_dlockd(void) {
    char text[4096];
    snprintf(text, sizeof(text),
             "[server]\nadmin_uids = 0\n[redis]\ncluster = %s\n"
             "command_timeout_ms = 2000\nconnect_timeout_ms = 500\n", h_cluster_addrs());
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

START_TEST(list_on_cluster) {
    h_cluster_start(3, 0);
    int d1 = cluster_dlockd(), d2 = cluster_dlockd();
    h_keep_log(d1, "list.cluster.dlockd%d", d1);
    h_keep_log(d2, "list.cluster.dlockd%d", d2);
    /* Names on every primary: c0, c1, ... until each of the three has two. */
    char names[6][32];
    int owners[3] = {-1, -1, -1}, per[3] = {0, 0, 0}, got = 0;
    char key[64];
    for (int i = 0; got < 6 && i < 1000; i++) {
        snprintf(key, sizeof(key), "dlock:c%d", i);
        int port = h_cluster_slot_owner(h_cluster_keyslot(key)), o;
        for (o = 0; o < 3 && owners[o] != -1 && owners[o] != port; o++) continue;
        ck_assert_int_lt(o, 3);
        owners[o] = port;
        if (per[o] == 2) continue;
        per[o]++;
        snprintf(names[got++], sizeof(names[0]), "c%d", i);
    }
    ck_assert_int_eq(got, 6);
    h_conn_t *c[6], *q1 = h_connect_index(d1), *q2 = h_connect_index(d2);
    for (int i = 0; i < 6; i++) c[i] = h_connect_index(i % 2 ? d2 : d1);
    char req[512];
    /* names[0..4] held, alternately on d1 and d2; a waiter on d1 for names[1];
     * names[5] held by a Redisson client on its primary. */
    for (int i = 0; i < 5; i++) {
        snprintf(req, sizeof(req), "%s %s", i == 2 ? "RLOCK" : i == 3 ? "FAIRLOCK" : "LOCK",
                 names[i]);
        expect_ok(c[i], req, "OK ");
    }
    h_send(c[5], "FAIRLOCK %s\n", names[3]); /* a fair waiter on d2 behind d2's holder */
    h_send(c[4], "LOCK %s\n", names[1]);     /* d1's waiter behind d2's holder */
    {
        snprintf(key, sizeof(key), "dlock:%s", names[5]);
        int port = h_cluster_slot_owner(h_cluster_keyslot(key));
        const char *r = h_cluster_cmd(port, "HSET %s 0b1e7b9c-0000-4000-8000-000000000002:9 1",
                                      key);
        ck_assert_msg(r != NULL && strcmp(r, "1") == 0, "HSET on %d: %s", port, r ? r : "(none)");
        r = h_cluster_cmd(port, "PEXPIRE %s 30000", key);
        ck_assert_msg(r != NULL && strcmp(r, "1") == 0, "PEXPIRE on %d: %s", port,
                      r ? r : "(none)");
    }
    h_await_waiters(q1, 1);
    h_await_waiters(q2, 1);

    listing_t l;
    list_on(q1, "LIST c*", &l);
    ck_assert_msg(l.n == 6 && l.more == 0, "LIST c* on Cluster: %d more %d", l.n, l.more);
    for (int i = 1; i < l.n; i++) /* merged in order */
        ck_assert_msg(strcmp(word(l.line[i - 1], 0), word(l.line[i], 0)) < 0 ||
                      strcmp(l.line[i - 1], l.line[i]) < 0, "not in order: %s / %s",
                      l.line[i - 1], l.line[i]);
    for (int i = 0; i < 6; i++) {
        const char *e = entry(&l, names[i]);
        ck_assert_msg(e != NULL, "LIST c* lacks %s", names[i]);
        int mine = i % 2 == 0, dd = mine ? d1 : d2;
        if (i < 5) has_people(e, 4, 1, (const char *const[]){who(dd, mine, 1), NULL});
        else has_people(e, 4, 1, (const char *const[]){"-/-/-/-/1/-", NULL});
    }
    ck_assert_str_eq(word(entry(&l, names[2]), 1), "read");
    ck_assert_str_eq(word(entry(&l, names[3]), 1), "fair");
    has_people(entry(&l, names[1]), 5, 1, (const char *const[]){who(d1, 1, 0), NULL});
    has_people(entry(&l, names[3]), 5, 1, (const char *const[]){who(d2, 0, 0), NULL});
    list_on(q2, "LIST c*", &l);
    ck_assert_int_eq(l.n, 6);
    has_people(entry(&l, names[0]), 4, 1, (const char *const[]){who(d1, 0, 1), NULL});
    has_people(entry(&l, names[1]), 5, 0, (const char *const[]){NULL});
    /* a limit across the primaries */
    list_on(q1, "LIST c* 4", &l);
    ck_assert_msg(l.n == 4 && l.more == 1, "LIST c* 4 on Cluster: %d more %d", l.n, l.more);
    snprintf(req, sizeof(req), "LIST %s", names[4]);
    list_on(q1, req, &l);
    ck_assert_int_eq(l.n, 1);
    /* dlock --list there too */
    const char *out = dlock_out(d2, "--list 'c*'");
    for (int i = 0; i < 6; i++)
        ck_assert_msg(table_row(out, names[i])[0] != '\0', "dlock --list lacks %s: %s", names[i],
                      out);
    for (int i = 0; i < 6; i++) h_close(c[i]);
    h_close(q1);
    h_close(q2);
    h_keep_passed();
}
END_TEST

/* ---- quorum ------------------------------------------------------------------- */

START_TEST(list_on_quorum) {
    char addrs[512] = "", text[2048];
    for (int i = 0; i < 3; i++) {
        int r = h_redis_start_tcp(0, NULL);
        size_t n = strlen(addrs);
        snprintf(addrs + n, sizeof(addrs) - n, "%sredis://127.0.0.1:%d", i ? " " : "",
                 h_redis_port(r));
    }
    snprintf(text, sizeof(text), "[server]\nadmin_uids = 0\n[redis]\nquorum = %s\n"
             "command_timeout_ms = 1000\nconnect_timeout_ms = 500\nrejoin_delay_ms = %d\n"
             "[lock]\nlease_ms = %d\n", addrs, QUORUM_REJOIN_MS, QUORUM_REJOIN_MS);
    int d1 = h_dlockd_start_conf(text), d2 = h_dlockd_start_conf(text);
    h_conn_t *a = h_connect_index(d1), *b = h_connect_index(d2), *w = h_connect_index(d1);
    h_conn_t *q = h_connect_index(d1);
    long long end = h_now_ms() + H_WAIT_MS + QUORUM_REJOIN_MS;
    while (h_info_value(q, "redis_nodes_up") < 3 || h_info_value(b, "redis_nodes_up") < 3) {
        ck_assert_msg(h_now_ms() < end, "quorum: nodes not up");
        usleep(10000);
    }
    expect_ok(a, "LOCK qa", "OK ");
    expect_ok(b, "LOCK qb", "OK ");
    h_send(w, "LOCK qa\n");
    h_await_waiters(q, 1);
    listing_t l;
    list_on(q, "LIST q*", &l);
    ck_assert_msg(l.n == 2 && l.more == 0, "LIST q* on quorum: %d", l.n);
    has_people(entry(&l, "qa"), 4, 1, (const char *const[]){who(d1, 1, 1), NULL});
    has_people(entry(&l, "qa"), 5, 1, (const char *const[]){who(d1, 1, 0), NULL});
    has_people(entry(&l, "qb"), 4, 1, (const char *const[]){who(d2, 0, 1), NULL});
    h_close(a);
    h_close(b);
    h_close(w);
    h_close(q);
}
END_TEST

/* ---- what Redis holds, written there by anyone ------------------------------------ */

/* An election's value, as Redis has it, with a blank, a newline and a tab:
 * LIST copied it into its counted lines, where the newline made two lines
 * of one entry (and LEADER into its one line). Every byte outside
 * 0x21-0x7E shows as '?', in LIST, dlock --list and its --json, /locks and
 * LEADER alike. */
START_TEST(list_election_value_from_redis) {
    char msock[300], extra[600];
    h_redis_start();
    snprintf(msock, sizeof(msock), "%s/metrics.sock", h_dir());
    snprintf(extra, sizeof(extra), "[server]\nmetrics = %s\n", msock);
    int d = h_dlockd_start(extra);
    h_keep_log(d, "list.election_value.dlockd%d", d);
    h_conn_t *c = h_connect_index(d), *q = h_connect_index(d);
    expect_ok(c, "ELECT v/e good", "OK ");
    const char *argv[] = {"HSET", "dlock_leader:{dlock:v/e}", "value", "a b\nc\td", NULL};
    ck_assert_str_eq(h_redis_argv(argv), "0");
    listing_t l;
    list_on(q, "LIST v/*", &l);
    ck_assert_int_eq(l.n, 1);
    const char *e = entry(&l, "v/e");
    ck_assert_msg(e != NULL, "LIST v/*: '%s'", l.line[0]);
    ck_assert_str_eq(word(e, 1), "elect");
    ck_assert_str_eq(word(e, 6), "a?b?c?d");
    ck_assert_ptr_null(strchr(word(e, 6) + strlen(word(e, 6)), ' '));
    expect_ok(q, "PING", "OK PONG"); /* nothing of the entry left over */
    expect_ok(q, "LEADER v/e", "OK ");
    ck_assert_msg(strstr(q->line, " a?b?c?d") != NULL && q->line[strlen(q->line) - 1] == 'd',
                  "LEADER v/e: '%s'", q->line);
    expect_ok(q, "PING", "OK PONG");
    json_has(json_lock(dlock_out(d, "--list --json 'v/*'"), "v/e"), "\"value\":\"a?b?c?d\"",
             "dlock --list --json");
    const char *body;
    ck_assert_int_eq(http_get(msock, "/locks?pattern=v/*", &body), 200);
    json_has(json_lock(body, "v/e"), "\"value\":\"a?b?c?d\"", "/locks");
    ck_assert_msg(strstr(table_row(dlock_out(d, "--list 'v/*'"), "v/e"), " elect ") != NULL,
                  "dlock --list v/*");
    h_close(q);
    h_close(c);
}
END_TEST

/* A count-down latch dlockd set: kind latch, no holder, no fence, its
 * count as the value, this daemon's AWAITs as its waiters. */
START_TEST(list_latch) {
    h_redis_start();
    int d = h_dlockd_start(NULL);
    h_keep_log(d, "list.latch.dlockd%d", d);
    h_conn_t *c = h_connect_index(d), *w = h_connect_index(d), *q = h_connect_index(d);
    expect_ok(c, "LATCHSET v/l 3", "OK 1");
    expect_ok(c, "COUNTDOWN v/l", "OK 2");
    h_send(w, "AWAIT v/l\n");
    h_await_waiters(q, 1);
    listing_t l;
    list_on(q, "LIST v/*", &l);
    ck_assert_int_eq(l.n, 1);
    const char *e = entry(&l, "v/l");
    ck_assert_msg(e != NULL, "LIST v/*: '%s'", l.line[0]);
    ck_assert_str_eq(word(e, 1), "latch");
    ck_assert_str_eq(word(e, 2), "-1");
    ck_assert_str_eq(word(e, 3), "-");
    ck_assert_str_eq(word(e, 4), "0");
    has_people(e, 5, 1, (const char *const[]){who(d, 1, 0), NULL});
    ck_assert_str_eq(word(e, 6), "2");
    ck_assert_msg(strstr(table_row(dlock_out(d, "--list 'v/*'"), "v/l"), " latch ") != NULL,
                  "dlock --list v/*");
    expect_ok(c, "COUNTDOWN v/l", "OK 1");
    expect_ok(c, "COUNTDOWN v/l", "OK 0");
    H_EXPECT(w, "OK 0");
    list_on(q, "LIST v/*", &l);
    ck_assert_int_eq(l.n, 0);
    h_close(q);
    h_close(w);
    h_close(c);
}
END_TEST

int main(void) {
    Suite *s = suite_create("list");
    TCase *tc = tcase_create("list");
    tcase_add_checked_fixture(tc, list_setup, h_teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, list_every_kind_two_daemons);
    tcase_add_test(tc, list_many_keys);
    tcase_add_test(tc, list_shows_only_readable_names);
    tcase_add_test(tc, list_hung_redis_answers_in_time);
    tcase_add_test(tc, list_on_quorum);
    tcase_add_test(tc, list_on_cluster);
    tcase_add_test(tc, list_election_value_from_redis);
    tcase_add_test(tc, list_latch);
    suite_add_tcase(s, tc);
    return h_main(s);
}
