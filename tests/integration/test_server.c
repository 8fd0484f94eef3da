/* Integration tests of the server through its real socket: framing, replies,
 * limits, startup and shutdown.
 * SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/support/harness.h"
#include "tests/support/output_steps.h"

/* The value of key=... in an INFO reply, or -1. */
static long long info_value(h_conn_t *c, const char *key) {
    h_send(c, "INFO\n");
    const char *line = h_recv(c, H_WAIT_MS);
    ck_assert_ptr_nonnull(line);
    ck_assert_msg(strncmp(line, "OK ", 3) == 0, "INFO said '%s'", line);
    char pat[64];
    snprintf(pat, sizeof(pat), " %s=", key);
    const char *p = strstr(line, pat);
    return p ? atoll(p + strlen(pat)) : -1;
}

START_TEST(ping_quit) {
    int d = h_dlockd_start(NULL);
    h_conn_t *c = h_connect_index(d);
    h_send(c, "PING\n");
    H_EXPECT(c, "OK PONG");
    h_send(c, "ping\r\n");
    H_EXPECT(c, "OK PONG");
    h_send(c, "QUIT\nPING\n");
    H_EXPECT(c, "OK BYE");
    ck_assert_int_eq(h_eof(c, H_WAIT_MS), 1);
    h_close(c);
}
END_TEST

START_TEST(info_fields) {
    int d = h_dlockd_start(NULL);
    h_conn_t *c = h_connect_index(d);
    h_conn_t *c2 = h_connect_index(d);
    h_send(c, "INFO\n");
    const char *line = h_recv(c, H_WAIT_MS);
    ck_assert_ptr_nonnull(line);
    const char *keys[] = {"OK version=", " uptime_s=", " connections=2 ", " locks_held=0 ",
                          " waiters=0 ", " redis=", " requests=", " errors="};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
        ck_assert_msg(strstr(line, keys[i]) != NULL, "'%s' lacks '%s'", line, keys[i]);
    ck_assert_msg(strchr(line, '\r') == NULL, "INFO is one line");
    h_close(c2);
    h_close(c);
}
END_TEST

START_TEST(pipelining_in_order) {
    int d = h_dlockd_start(NULL);
    h_conn_t *c = h_connect_index(d);
    h_send(c, "PING\nBOGUS\n\n  \t \nLOCK\nPING\nINFO\nQUIT\n");
    H_EXPECT(c, "OK PONG");
    H_EXPECT_PREFIX(c, "ERR UNKNOWN ");
    H_EXPECT_PREFIX(c, "ERR ARGS ");
    H_EXPECT(c, "OK PONG");
    H_EXPECT_PREFIX(c, "OK version=");
    H_EXPECT(c, "OK BYE");
    ck_assert_int_eq(h_eof(c, H_WAIT_MS), 1);
    h_close(c);
}
END_TEST

START_TEST(split_writes) {
    int d = h_dlockd_start(NULL);
    h_conn_t *c = h_connect_index(d);
    const char *req = "PING\nSTATUS bad\x01name\n";
    for (const char *p = req; *p; p++) h_send_raw(c, p, 1);
    H_EXPECT(c, "OK PONG");
    H_EXPECT_PREFIX(c, "ERR NAME ");
    h_close(c);
}
END_TEST

START_TEST(toolong_closes) {
    int d = h_dlockd_start("[server]\nmax_line = 100\n");
    h_conn_t *c = h_connect_index(d);
    char line[200];
    memset(line, 'A', sizeof(line));
    h_send(c, "PING\n");
    h_send_raw(c, line, sizeof(line));
    H_EXPECT(c, "OK PONG");
    H_EXPECT_PREFIX(c, "ERR TOOLONG ");
    ck_assert_int_eq(h_eof(c, H_WAIT_MS), 1);
    h_close(c);
    /* A line of exactly max_line bytes is fine. */
    c = h_connect_index(d);
    char ok[101];
    memset(ok, ' ', 100);
    memcpy(ok + 96, "PING", 4);
    ok[100] = '\n';
    h_send_raw(c, ok, sizeof(ok));
    H_EXPECT(c, "OK PONG");
    h_close(c);
}
END_TEST

START_TEST(garbage_and_nul) {
    int d = h_dlockd_start(NULL);
    h_conn_t *c = h_connect_index(d);
    const char garbage[] = "\x00\x01\xff\xfe\n"
                           "LOCK a\x00b\n"
                           "PING\x00\n"
                           "TRYLOCK x -1\n"
                           "TRYLOCK x 99999999999\n"
                           "LOCK x 1 2\n";
    h_send_raw(c, garbage, sizeof(garbage) - 1);
    H_EXPECT_PREFIX(c, "ERR UNKNOWN ");
    H_EXPECT_PREFIX(c, "ERR NAME ");
    H_EXPECT_PREFIX(c, "ERR UNKNOWN ");
    H_EXPECT_PREFIX(c, "ERR ARGS ");
    H_EXPECT_PREFIX(c, "ERR ARGS ");
    H_EXPECT_PREFIX(c, "ERR ARGS ");
    h_send(c, "PING\n");
    H_EXPECT(c, "OK PONG");
    /* And another client was never disturbed. */
    h_conn_t *c2 = h_connect_index(d);
    h_send(c2, "PING\n");
    H_EXPECT(c2, "OK PONG");
    h_close(c2);
    h_close(c);
}
END_TEST

/* Connects until the daemon accepts (it may still count a connection that
 * just closed, such as the harness's readiness check). */
static h_conn_t *connect_accepted(int d) {
    long long end = h_now_ms() + H_WAIT_MS;
    for (;;) {
        h_conn_t *c = h_connect_index(d);
        /* A refused connection may be closed before PING gets there. */
        if (send(c->fd, "PING\n", 5, MSG_NOSIGNAL) != 5) {}
        const char *r = h_recv(c, H_WAIT_MS);
        if (r != NULL && strcmp(r, "OK PONG") == 0) return c;
        h_close(c);
        ck_assert_msg(h_now_ms() < end, "never accepted");
        usleep(10000);
    }
}

START_TEST(max_clients_limit) {
    int d = h_dlockd_start("[server]\nmax_clients = 2\n");
    h_conn_t *a = connect_accepted(d);
    h_conn_t *b = connect_accepted(d);
    h_conn_t *c = h_connect_index(d);
    H_EXPECT_PREFIX(c, "ERR LIMIT ");
    ck_assert_int_eq(h_eof(c, H_WAIT_MS), 1);
    h_close(c);
    /* A freed slot is usable again. */
    h_close(b);
    c = connect_accepted(d);
    ck_assert_int_eq(info_value(a, "rejected") >= 1, 1);
    h_close(c);
    h_close(a);
}
END_TEST

START_TEST(output_cap_closes_nonreader) {
    int d = h_dlockd_start("[server]\nmax_output = 4096\n");
    h_conn_t *c = h_connect_index(d);
    /* Ask for far more output than the socket buffers and the cap hold,
     * never reading. The daemon must cut us off rather than buffer it. */
    char req[5 * 1000];
    for (size_t i = 0; i < sizeof(req); i += 5) memcpy(req + i, "INFO\n", 5);
    long long end = h_now_ms() + H_WAIT_MS;
    int closed = 0;
    while (!closed && h_now_ms() < end) {
        ssize_t n = write(c->fd, req, sizeof(req));
        if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) closed = 1;
    }
    ck_assert_msg(closed, "daemon kept a client that does not read");
    h_close(c);
    h_conn_t *c2 = h_connect_index(d);
    ck_assert_int_eq(info_value(c2, "output_overflows"), 1);
    h_close(c2);
}
END_TEST

START_TEST(lock_without_redis_is_backend_error) {
    int d = h_dlockd_start(NULL); /* no redis-server was started */
    h_conn_t *c = h_connect_index(d);
    h_send(c, "LOCK a\n");
    H_EXPECT_PREFIX(c, "ERR BACKEND ");
    h_send(c, "PING\n");
    H_EXPECT(c, "OK PONG");
    h_close(c);
}
END_TEST

START_TEST(sigterm_exits_zero) {
    int d = h_dlockd_start(NULL);
    h_conn_t *c = h_connect_index(d);
    int status = h_dlockd_stop(d, SIGTERM);
    ck_assert_msg(status != -1 && WIFEXITED(status), "dlockd did not exit");
    ck_assert_int_eq(WEXITSTATUS(status), 0);
    ck_assert_int_eq(h_eof(c, H_WAIT_MS), 1);
    ck_assert_int_eq(access(h_dlockd_sock(d), F_OK), -1);
    h_close(c);
}
END_TEST

START_TEST(clients_for_admins_only) {
    int d = h_dlockd_start("[server]\nsocket_mode = 0666\nadmin_uids = 4242\n");
    h_conn_t *a = h_connect_index(d), *b = h_connect_index(d);
    /* The harness's readiness check may still be counted for a moment. */
    const char *l;
    long long end = h_now_ms() + H_WAIT_MS;
    for (;;) {
        h_send(a, "CLIENTS\n");
        l = h_recv(a, H_WAIT_MS);
        ck_assert_ptr_nonnull(l);
        if (strncmp(l, "OK clients=2 shown=2 ", 21) == 0) break;
        ck_assert_msg(h_now_ms() < end, "%s", l);
        usleep(2000);
    }
    char me[64];
    snprintf(me, sizeof(me), ":%d:0:0:0:", (int)getpid());
    ck_assert_msg(strstr(l, me) != NULL, "'%s' lacks this process (%s)", l, me);
    const char *r = h_request_as(d, 65534, "CLIENTS");
    ck_assert_msg(strncmp(r, "ERR DENIED ", 11) == 0, "uid 65534 got '%s'", r);
    h_close(b);
    h_close(a);
}
END_TEST

START_TEST(socket_mode_applied) {
    int d = h_dlockd_start("[server]\nsocket_mode = 0600\n");
    struct stat st;
    ck_assert_int_eq(stat(h_dlockd_sock(d), &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0600);
    /* With a group: that group, and the mode as asked. */
    int g = h_dlockd_start("[server]\nsocket_mode = 0660\nsocket_group = 4242\n");
    ck_assert_int_eq(stat(h_dlockd_sock(g), &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0660);
    ck_assert_int_eq(st.st_gid, 4242);
}
END_TEST

/* CLIENTS in the same loop pass as other connections' close: those are
 * on the list of sessions until their handle is closed, without a lock
 * owner. CLIENTS asked each for its locks and crashed on the NULL
 * (issue 36, bug 6); it shows only the open ones. The daemon is stopped
 * while the peers go and CLIENTS is sent, so that it sees all of it in
 * one pass. */
START_TEST(clients_while_others_close) {
    int d = h_dlockd_start("[server]\nmax_output = 4096\n");
    pid_t pid = h_dlockd_pid(d);
    h_conn_t *a = connect_accepted(d);
    for (int round = 0; round < 3; round++) {
        h_conn_t *c[5];
        for (int i = 0; i < 5; i++) {
            c[i] = h_connect_index(d);
            h_expect_reply(c[i], "PING", "OK PONG");
        }
        kill(pid, SIGSTOP);
        for (int i = 0; i < 5; i++) h_close(c[i]);
        h_send(a, "CLIENTS\n");
        kill(pid, SIGCONT);
        const char *l = h_recv(a, H_WAIT_MS);
        ck_assert_msg(l != NULL && strncmp(l, "OK clients=1 shown=1 ", 21) == 0,
                      "CLIENTS with 5 closing: '%s'", l ? l : "(nothing: the daemon died?)");
    }
    /* A connection closed past max_output in the same pass. Its queue is
     * filled through another connection's INFOs, while a stays idle: an
     * epoll item just served may come first in the next pass, and a must
     * come after x. */
    h_conn_t *x = h_connect_index(d), *adm = h_connect_index(d);
    out_fill(x, adm, 4096, 8);
    kill(pid, SIGSTOP);
    h_send(x, "PING\nPING\n");
    h_send(a, "CLIENTS\n");
    kill(pid, SIGCONT);
    const char *l = h_recv(a, H_WAIT_MS);
    ck_assert_msg(l != NULL && strncmp(l, "OK clients=2 shown=2 ", 21) == 0,
                  "CLIENTS with one closing past max_output: '%s'",
                  l ? l : "(nothing: the daemon died?)");
    out_await_overflowed(x, adm, 1, "PINGs past max_output");
    h_close(x);
    h_close(adm);
    h_close(a);
}
END_TEST

START_TEST(stale_socket_removed_live_refused) {
    int d = h_dlockd_start(NULL);
    /* A second daemon on the same live path must refuse to start. */
    char conf[1024];
    snprintf(conf, sizeof(conf), "[server]\nsocket = %s\n", h_dlockd_sock(d));
    char path[600];
    snprintf(path, sizeof(path), "%s/second.conf", h_dir());
    FILE *f = fopen(path, "w");
    fputs(conf, f);
    fclose(f);
    char cmd[2048];
    snprintf(cmd, sizeof(cmd), "%s -c %s 2>/dev/null", getenv("DLOCKD_BIN") ? getenv("DLOCKD_BIN") : "build/dlockd", path);
    int rc = system(cmd);
    ck_assert_int_eq(WEXITSTATUS(rc), 1);
    /* Killed hard, the daemon leaves its socket file; a new one takes it over. */
    h_dlockd_stop(d, SIGKILL);
    ck_assert_int_eq(access(h_dlockd_sock(d), F_OK), 0);
    int again = h_dlockd_start_at(h_dlockd_sock(d), NULL);
    h_conn_t *c = h_connect_index(again);
    h_send(c, "PING\n");
    H_EXPECT(c, "OK PONG");
    h_close(c);
}
END_TEST

START_TEST(config_test_mode) {
    char out[1024], want[700];
    ck_assert_int_eq(h_dlockd_test_conf("[lock]\nlease_ms = 5000\n", out, sizeof(out)), 0);
    ck_assert_int_eq(h_dlockd_test_conf("[lock]\n\nlease_ms = 5x\n", out, sizeof(out)), 1);
    snprintf(want, sizeof(want), "%s/t.conf:3:", h_dir());
    ck_assert_msg(strstr(out, want) != NULL, "'%s' does not name %s", out, want);
    ck_assert_int_eq(h_dlockd_test_conf("[nosuch]\nkey = 1\n", out, sizeof(out)), 1);
    ck_assert_msg(strstr(out, "unknown section") != NULL, "%s", out);
    /* A missing -c file is an error. */
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "%s -t -c %s/none.conf 2>/dev/null",
             getenv("DLOCKD_BIN") ? getenv("DLOCKD_BIN") : "build/dlockd", h_dir());
    ck_assert_int_eq(WEXITSTATUS(system(cmd)), 1);
}
END_TEST

/* Starts dlockd on sock and expects it to refuse, exit 1 and say want. */
static void refuses_socket(const char *sock, const char *want) {
    int d;
    h_dlockd_spawn("[redis]\nurl = unix:///nonexistent/redis.sock\n", sock, &d);
    int status = h_dlockd_stop(d, 0); /* no signal: waits for it to exit */
    ck_assert_msg(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 1,
                  "dlockd -s %s did not exit 1 (status %d)", sock, status);
    ck_assert_msg(h_log_count(d, want) == 1, "dlockd -s %s did not say '%s' (see %s)", sock,
                  want, h_dlockd_log(d));
    ck_assert_msg(h_log_count(d, "ermission denied") == 0, "dlockd -s %s says permission "
                  "denied (see %s)", sock, h_dlockd_log(d));
}

START_TEST(socket_directory_problems_are_named) {
    char sock[600], want[700];
    refuses_socket("/nonexistent/dlockd-test-dir/x.sock",
                   "cannot listen: socket directory /nonexistent/dlockd-test-dir does not exist");
    /* A file where the directory should be. */
    snprintf(sock, sizeof(sock), "%s/plain", h_dir());
    FILE *f = fopen(sock, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    snprintf(want, sizeof(want), "socket directory %s is not a directory", sock);
    strcat(sock, "/x.sock");
    refuses_socket(sock, want);
}
END_TEST

/* A directory the daemon's user cannot write to: run as uid 65534 when the
 * tests run as root (root may write anywhere), else as ourselves. */
START_TEST(socket_directory_not_writable_is_named) {
    char dir[600], conf[600], sock[700], want[800];
    uid_t uid = geteuid() == 0 ? 65534 : geteuid();
    snprintf(dir, sizeof(dir), "%s/ro", h_dir());
    ck_assert_int_eq(mkdir(dir, 0755), 0);
    ck_assert_int_eq(chmod(dir, geteuid() == 0 ? 0755 : 0555), 0);
    snprintf(conf, sizeof(conf), "%s/ro.conf", h_dir());
    FILE *f = fopen(conf, "w");
    ck_assert_ptr_nonnull(f);
    fputs("[redis]\nurl = unix:///nonexistent/redis.sock\n", f);
    fclose(f);
    ck_assert_int_eq(chmod(conf, 0644), 0);
    snprintf(sock, sizeof(sock), "%s/x.sock", dir);
    const char *bin = getenv("DLOCKD_BIN") ? getenv("DLOCKD_BIN") : "build/dlockd";
    char abs_bin[PATH_MAX], real_bin[PATH_MAX] = "";
    if (geteuid() == 0) {
        /* uid 65534 runs copies: the build may be out of its reach. A
         * wrapper (valgrind-dlockd.sh) runs $DLOCKD_REAL_BIN: that too. */
        h_public_copy(bin, abs_bin, sizeof(abs_bin));
        if (getenv("DLOCKD_REAL_BIN") != NULL)
            h_public_copy(getenv("DLOCKD_REAL_BIN"), real_bin, sizeof(real_bin));
    } else {
        ck_assert_ptr_nonnull(realpath(bin, abs_bin));
    }
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(p[1], 1);
        dup2(p[1], 2);
        close(p[0]);
        if (geteuid() == 0) {
            /* Let the unprivileged child reach its files through the test dirs. */
            char parent[600];
            snprintf(parent, sizeof(parent), "%s", h_dir());
            *strrchr(parent, '/') = '\0';
            if (chmod(h_dir(), 0711) != 0 || chmod(parent, 0711) != 0 || setgid(uid) != 0 ||
                setuid(uid) != 0)
                _exit(126);
            if (access(abs_bin, X_OK) != 0) _exit(125); /* the copy is out of its reach */
            if (real_bin[0] != '\0' && setenv("DLOCKD_REAL_BIN", real_bin, 1) != 0) _exit(126);
        }
        execl(abs_bin, abs_bin, "-c", conf, "-s", sock, (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    char out[4096];
    size_t len = 0;
    long long end = h_now_ms() + H_WAIT_MS;
    struct pollfd pfd = {.fd = p[0], .events = POLLIN};
    while (len < sizeof(out) - 1 && h_now_ms() < end && poll(&pfd, 1, 100) >= 0) {
        if (!(pfd.revents & (POLLIN | POLLHUP))) continue;
        ssize_t n = read(p[0], out + len, sizeof(out) - 1 - len);
        if (n <= 0) break;
        len += (size_t)n;
    }
    out[len] = '\0';
    close(p[0]);
    kill(pid, SIGKILL); /* if it did start after all */
    int status;
    waitpid(pid, &status, 0);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 125) {
        fprintf(stderr, "socket_directory_not_writable_is_named: skipped, uid %u cannot run "
                "%s\n", (unsigned)uid, abs_bin);
        return;
    }
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 1, "dlockd as uid %u: status %d: "
                  "%s", (unsigned)uid, status, out);
    snprintf(want, sizeof(want), "cannot listen: socket directory %s is not writable by uid %u",
             dir, (unsigned)uid);
    ck_assert_msg(strstr(out, want) != NULL, "dlockd as uid %u said '%s', wanted '%s'",
                  (unsigned)uid, out, want);
}
END_TEST

/* ---- make run (tests/support/run-local.sh) --------------------------------- */

/* Runs run-local.sh with cwd as its directory, output to out; the script
 * gets SIGTERM if the test dies, and stops its servers then. */
static pid_t run_local(const char *cwd, const char *out) {
    char script[PATH_MAX], bin[PATH_MAX];
    const char *b = getenv("DLOCKD_BIN") ? getenv("DLOCKD_BIN") : "build/dlockd";
    ck_assert_ptr_nonnull(realpath("tests/support/run-local.sh", script));
    ck_assert_ptr_nonnull(realpath(b, bin));
    pid_t parent = getpid(), pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent) _exit(127);
        int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int nul = open("/dev/null", O_RDONLY);
        if (fd < 0 || nul < 0 || chdir(cwd) != 0) _exit(127);
        dup2(fd, 1);
        dup2(fd, 2);
        dup2(nul, 0);
        unsetenv("REDIS_URL");
        execl("/bin/sh", "sh", script, bin, (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* 1 if something answers ping on the Unix socket path with a line
 * starting with want. */
static int answers(const char *path, const char *ping, const char *want) {
    /* The socket file exists from bind(), before listen(): a refused
     * connect is "not yet", not a failure. */
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (access(path, F_OK) != 0 || strlen(path) >= sizeof(sa.sun_path)) return 0;
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return 0;
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        close(fd);
        return 0;
    }
    h_conn_t *c = calloc(1, sizeof(*c));
    ck_assert_ptr_nonnull(c);
    c->fd = fd;
    h_send(c, "%s", ping);
    const char *r = h_recv(c, 2000);
    int ok = r != NULL && strncmp(r, want, strlen(want)) == 0; /* Redis ends with CR */
    h_close(c);
    return ok;
}

static char *read_text(const char *path) {
    static char text[8192];
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    text[n] = '\0';
    fclose(f);
    return text;
}

START_TEST(second_make_run_refuses_and_spares_the_first) {
    char run[600], dsock[700], rsock[700], conf[700], out1[700], out2[700];
    snprintf(run, sizeof(run), "%s/run", h_dir());
    snprintf(dsock, sizeof(dsock), "%s/dlockd.sock", run);
    snprintf(rsock, sizeof(rsock), "%s/redis.sock", run);
    snprintf(conf, sizeof(conf), "%s/dlockd.conf", run);
    snprintf(out1, sizeof(out1), "%s/first.out", h_dir());
    snprintf(out2, sizeof(out2), "%s/second.out", h_dir());
    pid_t first = run_local(h_dir(), out1);
    long long end = h_now_ms() + H_WAIT_MS;
    while (!answers(dsock, "PING\n", "OK PONG")) {
        ck_assert_msg(h_now_ms() < end, "the first make run never answered: %s", read_text(out1));
        ck_assert_msg(waitpid(first, NULL, WNOHANG) == 0, "the first make run ended: %s",
                      read_text(out1));
        usleep(20000);
    }
    char conf_before[8192];
    snprintf(conf_before, sizeof(conf_before), "%s", read_text(conf));

    /* The second refuses at once, non-zero, and says why. */
    pid_t second = run_local(h_dir(), out2);
    int status = -1;
    end = h_now_ms() + H_WAIT_MS;
    while (waitpid(second, &status, WNOHANG) == 0) {
        if (h_now_ms() > end) {
            kill(second, SIGTERM);
            waitpid(second, &status, 0);
            ck_abort_msg("the second make run did not end: %s", read_text(out2));
        }
        usleep(10000);
    }
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) != 0,
                  "the second make run exited %d: %s", status, read_text(out2));
    ck_assert_msg(strstr(read_text(out2), "already running") != NULL, "the second make run "
                  "said: %s", read_text(out2));
    /* The first is whole: its files, its Redis and its dlockd. */
    ck_assert_msg(access(rsock, F_OK) == 0, "the first make run's redis.sock is gone");
    ck_assert_msg(answers(rsock, "PING\r\n", "+PONG"), "the first make run's Redis is gone");
    ck_assert_msg(answers(dsock, "PING\n", "OK PONG"), "the first make run's dlockd is gone");
    ck_assert_str_eq(read_text(conf), conf_before);

    /* The first stops cleanly, with everything of its own removed. */
    kill(first, SIGTERM);
    end = h_now_ms() + H_WAIT_MS;
    while (waitpid(first, &status, WNOHANG) == 0) {
        ck_assert_msg(h_now_ms() < end, "the first make run did not stop");
        usleep(10000);
    }
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the first make run exited "
                  "%d: %s", status, read_text(out1));
    ck_assert_int_eq(access(rsock, F_OK), -1);
    ck_assert_int_eq(access(dsock, F_OK), -1);
}
END_TEST

/* make run prints the line that points every client at its dlockd (issue
 * 42: they look for /run/dlockd/dlockd.sock otherwise), and the socket it
 * names answers. */
START_TEST(make_run_prints_the_export_line) {
    char dir[PATH_MAX], dsock[PATH_MAX + 32], out[700], want[PATH_MAX + 64];
    ck_assert_ptr_nonnull(realpath(h_dir(), dir));
    snprintf(dsock, sizeof(dsock), "%s/run/dlockd.sock", dir);
    snprintf(out, sizeof(out), "%s/run.out", h_dir());
    pid_t pid = run_local(h_dir(), out);
    long long end = h_now_ms() + H_WAIT_MS;
    while (!answers(dsock, "PING\n", "OK PONG")) {
        ck_assert_msg(h_now_ms() < end, "make run never answered: %s", read_text(out));
        ck_assert_msg(waitpid(pid, NULL, WNOHANG) == 0, "make run ended: %s", read_text(out));
        usleep(20000);
    }
    snprintf(want, sizeof(want), "\n    export DLOCK_SOCKET=%s\n", dsock);
    ck_assert_msg(strstr(read_text(out), want) != NULL, "make run said:\n%s\nwithout the line%s",
                  read_text(out), want);
    kill(pid, SIGTERM);
    int status = -1;
    end = h_now_ms() + H_WAIT_MS;
    while (waitpid(pid, &status, WNOHANG) == 0) {
        ck_assert_msg(h_now_ms() < end, "make run did not stop");
        usleep(10000);
    }
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "make run exited %d: %s",
                  status, read_text(out));
}
END_TEST

START_TEST(make_run_fails_when_its_dlockd_does) {
    char run[600], dsock[700], rsock[700], out[700];
    snprintf(run, sizeof(run), "%s/run", h_dir());
    snprintf(dsock, sizeof(dsock), "%s/dlockd.sock", run);
    snprintf(rsock, sizeof(rsock), "%s/redis.sock", run);
    snprintf(out, sizeof(out), "%s/run.out", h_dir());
    /* Not a socket: dlockd refuses to remove it, and to start. */
    ck_assert_int_eq(mkdir(run, 0700), 0);
    FILE *f = fopen(dsock, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    pid_t pid = run_local(h_dir(), out);
    int status = -1;
    long long end = h_now_ms() + H_WAIT_MS;
    while (waitpid(pid, &status, WNOHANG) == 0) {
        if (h_now_ms() > end) {
            kill(pid, SIGTERM);
            waitpid(pid, &status, 0);
            ck_abort_msg("make run did not end: %s", read_text(out));
        }
        usleep(10000);
    }
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) != 0, "make run exited %d although "
                  "its dlockd did not start: %s", status, read_text(out));
    ck_assert_msg(strstr(read_text(out), "not a socket") != NULL, "%s", read_text(out));
    /* Its own Redis is stopped and its socket removed; the file stays. */
    ck_assert_int_eq(access(rsock, F_OK), -1);
    ck_assert_int_eq(access(dsock, F_OK), 0);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("server");
    TCase *tc = tcase_create("socket");
    tcase_add_checked_fixture(tc, h_setup, h_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, ping_quit);
    tcase_add_test(tc, info_fields);
    tcase_add_test(tc, pipelining_in_order);
    tcase_add_test(tc, split_writes);
    tcase_add_test(tc, toolong_closes);
    tcase_add_test(tc, garbage_and_nul);
    tcase_add_test(tc, max_clients_limit);
    tcase_add_test(tc, output_cap_closes_nonreader);
    tcase_add_test(tc, lock_without_redis_is_backend_error);
    tcase_add_test(tc, sigterm_exits_zero);
    tcase_add_test(tc, socket_mode_applied);
    tcase_add_test(tc, clients_for_admins_only);
    tcase_add_test(tc, clients_while_others_close);
    tcase_add_test(tc, stale_socket_removed_live_refused);
    tcase_add_test(tc, config_test_mode);
    tcase_add_test(tc, socket_directory_problems_are_named);
    tcase_add_test(tc, socket_directory_not_writable_is_named);
    tcase_add_test(tc, second_make_run_refuses_and_spares_the_first);
    tcase_add_test(tc, make_run_fails_when_its_dlockd_does);
    tcase_add_test(tc, make_run_prints_the_export_line);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return h_main(suite());
}
