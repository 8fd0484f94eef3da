/* Integration tests of [access] rules and per-uid limits, with clients under distinct uids.
 * SPDX-License-Identifier: MIT
 *
 * The test runs as root: a client of another uid is a forked child that
 * drops to that uid (and gid, and groups), connects to dlockd's socket and
 * hands the connected descriptor back over a socketpair (SCM_RIGHTS). The
 * kernel took the peer's credentials at connect(), so the test then talks
 * on that descriptor as if it were that user. The child needs nothing but
 * the socket's path (h_dirs_searchable makes the temporary directories
 * searchable), never the checkout. */
#include <check.h>
#include <errno.h>
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

/* Users no /etc/passwd needs to know. */
#define U_SVC    60001
#define U_OPS    60002
#define U_TEAM   60003
#define U_MEMBER 60004
#define U_OTHER  60005
#define G_TEAM   60100


static void skip_unless_root(void) {
    if (geteuid() != 0) {
        fprintf(stderr, "test_access: skipped, needs root to run clients as other uids\n");
        exit(0);
    }
}

/* Sends fd over s. */
static int send_fd(int s, int fd) {
    char byte = 'f';
    struct iovec iov = {.iov_base = &byte, .iov_len = 1};
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int))];
    } u;
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                       .msg_controllen = sizeof(u.buf)};
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof(int));
    return sendmsg(s, &m, 0) == 1 ? 0 : -1;
}

static int recv_fd(int s) {
    char byte;
    struct iovec iov = {.iov_base = &byte, .iov_len = 1};
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int))];
    } u;
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                       .msg_controllen = sizeof(u.buf)};
    if (recvmsg(s, &m, 0) != 1) return -1;
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    if (c == NULL || c->cmsg_type != SCM_RIGHTS) return -1;
    int fd;
    memcpy(&fd, CMSG_DATA(c), sizeof(int));
    return fd;
}

/* A connection to dlockd index made by a process of uid, gid and the
 * supplementary groups (n of them). The process stays until dlockd has
 * answered a PING on it (so that dlockd read its groups at the accept),
 * then exits. */
static h_conn_t *connect_as(int index, uid_t uid, gid_t gid, const gid_t *groups, size_t n) {
    int sp[2];
    h_dirs_searchable();
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);
    const char *path = h_dlockd_sock(index);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(sp[0]);
        if (setgroups(n, groups) != 0 || setgid(gid) != 0 || setuid(uid) != 0) _exit(1);
        int fd = socket(AF_UNIX, SOCK_STREAM, 0);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
        if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) _exit(2);
        if (send_fd(sp[1], fd) != 0) _exit(3);
        char go;
        if (read(sp[1], &go, 1) < 0) _exit(4); /* until the parent is done with us */
        _exit(0);
    }
    close(sp[1]);
    int fd = recv_fd(sp[0]);
    ck_assert_msg(fd >= 0, "no connection from the child as uid %u", (unsigned)uid);
    h_conn_t *c = calloc(1, sizeof(*c));
    ck_assert_ptr_nonnull(c);
    c->fd = fd;
    /* A refused connection may be closed before the PING arrives. */
    (void)!send(fd, "PING\n", 5, MSG_NOSIGNAL);
    const char *l = h_recv(c, H_WAIT_MS);
    /* A refused connection (ERR LIMIT) answers before the PING: the caller
     * reads that line itself. */
    if (l == NULL || strcmp(l, "OK PONG") == 0) c->line[0] = '\0'; /* else h_recv left it there */
    close(sp[0]);
    int status;
    waitpid(pid, &status, 0);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child as uid %u: status %d",
                  (unsigned)uid, status);
    return c;
}

static h_conn_t *as_user(int index, uid_t uid) {
    h_conn_t *c = connect_as(index, uid, (gid_t)uid, NULL, 0);
    ck_assert_msg(c->line[0] == '\0', "uid %u: %s", (unsigned)uid, c->line);
    return c;
}

/* Sends request; the reply must start with want. Returns it. */
static const char *expect_prefix(h_conn_t *c, const char *request, const char *want) {
    h_send(c, "%s\n", request);
    const char *r = h_recv(c, H_WAIT_MS);
    ck_assert_msg(r != NULL, "%s: no reply", request);
    ck_assert_msg(strncmp(r, want, strlen(want)) == 0, "%s: got '%s', wanted '%s...'", request,
                  r, want);
    return r;
}

static void denied(h_conn_t *c, const char *request) {
    expect_prefix(c, request, "ERR DENIED ");
}

/* Not denied: any reply but ERR DENIED. */
static void allowed(h_conn_t *c, const char *request) {
    h_send(c, "%s\n", request);
    const char *r = h_recv(c, H_WAIT_MS);
    ck_assert_msg(r != NULL, "%s: no reply", request);
    ck_assert_msg(strncmp(r, "ERR DENIED", 10) != 0, "%s: got '%s'", request, r);
}

static const char *rules_conf(const char *server, const char *rules) {
    static char text[4096];
    snprintf(text, sizeof(text), "[server]\nsocket_mode = 0666\n%s[access]\n%s", server ? server : "",
             rules);
    return text;
}

/* ---- each verb family ---------------------------------------------------- */

START_TEST(verbs_by_family) {
    skip_unless_root();
    int d = h_dlockd_start(rules_conf(NULL,
                                      "uid:60001 = lock svc/*\n"
                                      "uid:60001 = read shared/*\n"
                                      "uid:60002 = read *\n"));
    h_conn_t *svc = as_user(d, U_SVC), *ops = as_user(d, U_OPS), *root = h_connect_index(d);

    /* lock: take, wait, renew, release, of every kind */
    expect_prefix(svc, "LOCK svc/a", "OK ");
    expect_prefix(svc, "RENEW svc/a", "OK ");
    expect_prefix(svc, "STATUS svc/a", "OK MINE ");
    allowed(svc, "WHO svc/a");
    expect_prefix(svc, "UNLOCK svc/a", "OK 0");
    expect_prefix(svc, "TRYLOCK svc/b 0", "OK ");
    expect_prefix(svc, "UNLOCK svc/b", "OK 0");
    expect_prefix(svc, "RLOCK svc/rw", "OK ");
    expect_prefix(svc, "RUNLOCK svc/rw", "OK 0");
    expect_prefix(svc, "FAIRLOCK svc/f", "OK ");
    expect_prefix(svc, "UNLOCK svc/f", "OK 0");
    allowed(svc, "SEMINIT svc/s 2");
    allowed(svc, "TRYACQUIRE svc/s 1 0");
    allowed(svc, "RELEASE svc/s 1");
    /* ... and nothing outside its names */
    const char *why = expect_prefix(svc, "LOCK other/x", "ERR DENIED ");
    ck_assert_msg(strstr(why, "no rule grants uid 60001 lock on other/x") != NULL, "%s", why);
    denied(svc, "TRYLOCK other/x 0");
    denied(svc, "WLOCK other/x");
    denied(svc, "TRYFAIRLOCK other/x 0");
    denied(svc, "SEMINIT other/s 1");
    denied(svc, "ACQUIRE other/s 1");
    denied(svc, "RENEW other/x");
    denied(svc, "STATUS other/x");
    denied(svc, "WHO other/x");
    /* a release touches only its own holds: never denied */
    expect_prefix(svc, "UNLOCK other/x", "ERR NOTHELD");
    /* read only where only read is granted */
    why = expect_prefix(svc, "LOCK shared/x", "ERR DENIED ");
    ck_assert_msg(strstr(why, "only read on shared/x, not lock") != NULL, "%s", why);
    expect_prefix(svc, "STATUS shared/x", "OK FREE");
    allowed(svc, "WHO shared/x");
    /* admin */
    denied(svc, "FORCEUNLOCK svc/a");
    denied(svc, "CLIENTS");
    /* no right needed */
    expect_prefix(svc, "PING", "OK PONG");
    expect_prefix(svc, "INFO", "OK version=");

    /* read *: looks at everything, takes nothing */
    h_conn_t *holder = h_connect_index(d);
    expect_prefix(holder, "LOCK svc/held", "OK ");
    expect_prefix(ops, "STATUS svc/held", "OK TAKEN ");
    allowed(ops, "WHO svc/held");
    denied(ops, "LOCK svc/x");
    denied(ops, "FORCEUNLOCK svc/held");

    /* a denied request changed nothing */
    expect_prefix(root, "STATUS other/x", "OK FREE");
    expect_prefix(root, "STATUS other/s", "OK FREE");
    /* root administers whatever the rules say */
    expect_prefix(root, "FORCEUNLOCK svc/held", "OK 1");
    expect_prefix(root, "CLIENTS", "OK clients=");
    h_close(holder);
    h_close(svc);
    h_close(ops);
    h_close(root);
}
END_TEST

/* A count-down latch: lock to set and count it down, read to await and
 * count it. */
START_TEST(latch_rights) {
    skip_unless_root();
    int d = h_dlockd_start(rules_conf(NULL,
                                      "uid:60001 = lock svc/*\n"
                                      "uid:60001 = read shared/*\n"));
    h_conn_t *svc = as_user(d, U_SVC), *root = h_connect_index(d);
    expect_prefix(svc, "LATCHSET svc/l 2", "OK 1");
    expect_prefix(svc, "COUNTDOWN svc/l", "OK 1");
    expect_prefix(svc, "LATCHCOUNT svc/l", "OK 1");
    expect_prefix(svc, "TRYAWAIT svc/l 0", "TIMEOUT 1");
    expect_prefix(svc, "COUNTDOWN svc/l", "OK 0");
    expect_prefix(svc, "AWAIT svc/l", "OK 0");
    /* read only: it may wait and look, not set or count down */
    expect_prefix(root, "LATCHSET shared/l 1", "OK 1");
    const char *why = expect_prefix(svc, "LATCHSET shared/l 1", "ERR DENIED ");
    ck_assert_msg(strstr(why, "only read on shared/l, not lock") != NULL, "%s", why);
    denied(svc, "COUNTDOWN shared/l");
    expect_prefix(svc, "LATCHCOUNT shared/l", "OK 1");
    expect_prefix(svc, "TRYAWAIT shared/l 0", "TIMEOUT 1");
    expect_prefix(root, "COUNTDOWN shared/l", "OK 0");
    expect_prefix(svc, "AWAIT shared/l", "OK 0");
    /* nothing outside its names */
    denied(svc, "LATCHSET other/l 1");
    denied(svc, "COUNTDOWN other/l");
    denied(svc, "AWAIT other/l");
    denied(svc, "TRYAWAIT other/l 0");
    denied(svc, "LATCHCOUNT other/l");
    h_close(svc);
    h_close(root);
}
END_TEST

/* admin_uids is uid:N = admin *, with or without rules; an admin rule on
 * some names allows CLIENTS. */
START_TEST(admin_rules_and_admin_uids) {
    skip_unless_root();
    int d = h_dlockd_start(rules_conf("admin_uids = 60002\n", "uid:60001 = admin svc/*\n"));
    h_conn_t *svc = as_user(d, U_SVC), *ops = as_user(d, U_OPS);
    expect_prefix(ops, "LOCK svc/a", "OK ");
    expect_prefix(svc, "FORCEUNLOCK svc/a", "OK 1");
    h_expect_event(ops, "!LOST svc/a forced", H_WAIT_MS, "the forced holder hears it");
    denied(svc, "FORCEUNLOCK other/a");
    expect_prefix(svc, "CLIENTS", "OK clients=");
    expect_prefix(ops, "FORCEUNLOCK other/a", "OK 0");
    expect_prefix(ops, "LOCK any/thing", "OK ");
    h_close(svc);
    h_close(ops);
}
END_TEST

/* ---- groups ---------------------------------------------------------------- */

START_TEST(gid_rules) {
    skip_unless_root();
    int d = h_dlockd_start(rules_conf(NULL, "gid:60100 = lock team/*\n"));
    gid_t team = G_TEAM;
    /* the primary gid */
    h_conn_t *prim = connect_as(d, U_TEAM, G_TEAM, NULL, 0);
    /* a supplementary group, as /proc/<pid>/status says it at connect */
    h_conn_t *sup = connect_as(d, U_MEMBER, U_MEMBER, &team, 1);
    h_conn_t *other = connect_as(d, U_OTHER, U_OTHER, NULL, 0);
    expect_prefix(prim, "LOCK team/a", "OK ");
    expect_prefix(sup, "LOCK team/b", "OK ");
    denied(other, "LOCK team/c");
    denied(prim, "LOCK elsewhere");
    h_close(prim);
    h_close(sup);
    h_close(other);
}
END_TEST

/* ---- per-uid limits -------------------------------------------------------- */

START_TEST(connections_per_uid) {
    skip_unless_root();
    int d = h_dlockd_start("[server]\nsocket_mode = 0666\nmax_clients_per_uid = 2\n");
    h_conn_t *a = as_user(d, U_SVC), *b = as_user(d, U_SVC);
    h_conn_t *c = connect_as(d, U_SVC, U_SVC, NULL, 0);
    ck_assert_str_eq(c->line, "ERR LIMIT max_clients_per_uid reached");
    ck_assert_msg(h_eof(c, H_WAIT_MS), "a refused connection is closed");
    h_close(c);
    /* another uid is not touched */
    h_conn_t *o = as_user(d, U_OPS);
    expect_prefix(o, "LOCK x", "OK ");
    expect_prefix(a, "LOCK y", "OK ");
    h_await_log(d, "refused: max_clients_per_uid reached (2)", 1);
    /* one goes: room for another (once dlockd has seen it go) */
    h_close(b);
    long long end = h_now_ms() + H_WAIT_MS;
    for (;;) {
        c = connect_as(d, U_SVC, U_SVC, NULL, 0);
        if (c->line[0] == '\0') break;
        h_close(c);
        ck_assert_msg(h_now_ms() < end, "uid %u still refused after one of its connections went",
                      U_SVC);
        usleep(10000);
    }
    h_close(c);
    h_close(o);
    h_close(a);
}
END_TEST

START_TEST(locks_per_uid) {
    skip_unless_root();
    int d = h_dlockd_start("[server]\nsocket_mode = 0666\nmax_locks_per_uid = 1\n");
    h_conn_t *a = as_user(d, U_SVC), *b = as_user(d, U_SVC), *o = as_user(d, U_OPS);
    expect_prefix(a, "LOCK l1", "OK ");
    expect_prefix(b, "LOCK l2", "ERR LIMIT max_locks_per_uid reached");
    expect_prefix(o, "LOCK l2", "OK ");
    expect_prefix(a, "UNLOCK l1", "OK 0");
    expect_prefix(b, "LOCK l3", "OK ");
    h_close(a);
    h_close(b);
    h_close(o);
}
END_TEST

/* ---- reload ------------------------------------------------------------------ */

static void rewrite_conf(int d, const char *text) {
    const char *path = h_dlockd_conf(d);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    char old[8192];
    size_t len = fread(old, 1, sizeof(old) - 1, f);
    fclose(f);
    old[len] = '\0';
    /* keep what the harness wrote before [access] (socket, redis) */
    char *cut = strstr(old, "[access]");
    ck_assert_ptr_nonnull(cut);
    *cut = '\0';
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "%s%s", old, text);
    fclose(f);
}

START_TEST(reload_judges_open_connections) {
    skip_unless_root();
    int d = h_dlockd_start(rules_conf(NULL, "uid:60001 = lock a/*\n"));
    h_conn_t *c = as_user(d, U_SVC);
    expect_prefix(c, "LOCK a/1", "OK ");
    denied(c, "LOCK b/1");
    rewrite_conf(d, "[access]\nuid:60001 = lock b/*\n");
    int before = h_log_count(d, "reloaded");
    kill(h_dlockd_pid(d), SIGHUP);
    h_await_log(d, "reloaded", before + 1);
    /* the same connection, judged by the new rules */
    denied(c, "LOCK a/2");
    expect_prefix(c, "LOCK b/1", "OK ");
    denied(c, "STATUS a/1");
    /* what it held stays held, and it may still let it go */
    h_conn_t *root = h_connect_index(d);
    expect_prefix(root, "STATUS a/1", "OK TAKEN ");
    expect_prefix(c, "UNLOCK a/1", "OK 0");
    expect_prefix(root, "STATUS a/1", "OK FREE");
    /* back to no rules: everyone may lock everything again */
    rewrite_conf(d, "[access]\n");
    before = h_log_count(d, "reloaded");
    kill(h_dlockd_pid(d), SIGHUP);
    h_await_log(d, "reloaded", before + 1);
    expect_prefix(c, "LOCK a/3", "OK ");
    /* a bad rule in the file changes nothing */
    rewrite_conf(d, "[access]\nuid:60001 = lock [oops\n");
    before = h_log_count(d, "reload failed");
    kill(h_dlockd_pid(d), SIGHUP);
    h_await_log(d, "reload failed", before + 1);
    expect_prefix(c, "LOCK a/4", "OK ");
    h_close(root);
    h_close(c);
}
END_TEST

/* A connection opened while there were no rules, by a member of G_TEAM
 * through a supplementary group: after a reload brought gid rules it is
 * judged as one opened then (its groups as /proc said them at connect). */
START_TEST(reload_brings_gid_rules_to_open_connections) {
    skip_unless_root();
    int d = h_dlockd_start(rules_conf(NULL, ""));
    gid_t team = G_TEAM;
    h_conn_t *sup = connect_as(d, U_MEMBER, U_MEMBER, &team, 1);
    h_conn_t *other = connect_as(d, U_OTHER, U_OTHER, NULL, 0);
    expect_prefix(sup, "LOCK team/a", "OK ");
    expect_prefix(other, "LOCK elsewhere/a", "OK ");
    rewrite_conf(d, "[access]\ngid:60100 = lock team/*\n");
    int before = h_log_count(d, "reloaded");
    kill(h_dlockd_pid(d), SIGHUP);
    h_await_log(d, "reloaded", before + 1);
    expect_prefix(sup, "LOCK team/b", "OK ");
    denied(other, "LOCK team/c");
    /* the same as a connection opened now */
    h_conn_t *fresh = connect_as(d, U_MEMBER, U_MEMBER, &team, 1);
    expect_prefix(fresh, "LOCK team/d", "OK ");
    h_close(fresh);
    h_close(other);
    h_close(sup);
}
END_TEST

/* ---- the deny log ------------------------------------------------------------- */

START_TEST(deny_log_rate_limited) {
    skip_unless_root();
    int d = h_dlockd_start(rules_conf(NULL, "uid:60001 = read r/*\n"));
    h_conn_t *c = as_user(d, U_SVC), *o = as_user(d, U_OPS);
    for (int i = 0; i < 20; i++) denied(c, "LOCK nope/x"); /* no rule */
    for (int i = 0; i < 20; i++) denied(c, "LOCK r/x");    /* rule line 4, read only */
    denied(o, "LOCK nope/x");
    /* all answered: the log lines are written */
    expect_prefix(c, "PING", "OK PONG");
    expect_prefix(o, "PING", "OK PONG");
    h_await_log(d, "uid 60002 gid 60002) denied LOCK nope/x", 1);
    ck_assert_int_eq(h_log_count(d, "uid 60001 gid 60001) denied LOCK nope/x: no rule grants"), 1);
    ck_assert_int_eq(h_log_count(d, "uid 60001 gid 60001) denied LOCK r/x: rule uid:60001"), 1);
    ck_assert_int_eq(h_log_count(d, ") denied "), 3);
    h_close(c);
    h_close(o);
}
END_TEST

/* ---- dlockd -t ---------------------------------------------------------------- */

/* Runs dlockd -t on text; its whole output in out. Returns its exit status. */
static int check_conf(const char *text, char *out, size_t cap) {
    char path[600], cmd[2048];
    snprintf(path, sizeof(path), "%s/t.conf", h_dir());
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    const char *bin = getenv("DLOCKD_BIN") ? getenv("DLOCKD_BIN") : "build/dlockd";
    snprintf(cmd, sizeof(cmd), "%s -t -c %s 2>&1", bin, path);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    size_t len = fread(out, 1, cap - 1, p);
    out[len] = '\0';
    int rc = pclose(p);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

START_TEST(check_bad_rules) {
    char out[4096], want[700];
    int rc = check_conf("[access]\nuid:1 = lock ok/*\nuid:1 = lock bad[glob\n", out, sizeof(out));
    ck_assert_msg(rc == 1, "status %d: %s", rc, out);
    snprintf(want, sizeof(want), "%s/t.conf:3: uid:1: glob 'bad[glob' has an unclosed '['",
             h_dir());
    ck_assert_msg(strstr(out, want) != NULL, "'%s' lacks '%s'", out, want);
    rc = check_conf("[access]\ngid:1 = write x\n", out, sizeof(out));
    ck_assert_msg(rc == 1 && strstr(out, "t.conf:2: gid:1: 'write' is not a right"), "%d: %s", rc,
                  out);
    rc = check_conf("[access]\nnobody = lock x\n", out, sizeof(out));
    ck_assert_msg(rc == 1 && strstr(out, "t.conf:2: principal 'nobody'"), "%d: %s", rc, out);
    /* warnings: valid, exit 0 */
    rc = check_conf("[access]\n"
                    "uid:no-such-user-dlockd = lock x/*\n"
                    "gid:no-such-group-dlockd = read *\n"
                    "uid:1 = lock app/*\n"
                    "uid:1 = read app/x\n"
                    "uid:1 = lock app/*\n",
                    out, sizeof(out));
    ck_assert_msg(rc == 0, "status %d: %s", rc, out);
    ck_assert_msg(strstr(out, "t.conf:2: uid:no-such-user-dlockd: no such user"), "%s", out);
    ck_assert_msg(strstr(out, "t.conf:3: gid:no-such-group-dlockd: no such group"), "%s", out);
    ck_assert_msg(strstr(out, "t.conf:5: uid:1 = read app/x is unreachable: line 4"), "%s", out);
    ck_assert_msg(strstr(out, "t.conf:6: uid:1 = lock app/* overlaps line 4"), "%s", out);
    ck_assert_msg(strstr(out, "is valid"), "%s", out);
}
END_TEST

static void setup(void) {
    h_setup();
    h_redis_start();
}

static Suite *access_suite(void) {
    Suite *s = suite_create("access");
    TCase *tc = tcase_create("rules");
    tcase_add_checked_fixture(tc, setup, h_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, verbs_by_family);
    tcase_add_test(tc, latch_rights);
    tcase_add_test(tc, admin_rules_and_admin_uids);
    tcase_add_test(tc, gid_rules);
    tcase_add_test(tc, reload_judges_open_connections);
    tcase_add_test(tc, reload_brings_gid_rules_to_open_connections);
    tcase_add_test(tc, deny_log_rate_limited);
    tcase_add_test(tc, check_bad_rules);
    suite_add_tcase(s, tc);
    tc = tcase_create("limits");
    tcase_add_checked_fixture(tc, setup, h_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, connections_per_uid);
    tcase_add_test(tc, locks_per_uid);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return h_main(access_suite());
}
