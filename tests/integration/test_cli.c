/* Integration tests of the dlock command against a real dlockd and redis-server.
 * SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <libgen.h>
#include <stdint.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/support/harness.h"

static int daemon_idx;

#define ARGV_MAX 160 /* words of a dlock command line: 65 "-m NAME" pairs fit */

static const char *dlock_bin(void) {
    const char *b = getenv("DLOCK_BIN");
    return b ? b : "build/dlock";
}

/* An unprivileged uid for the tests that need one (nobody). */
#define OTHER_UID 65534

/* Starts dlock with args (NULL-terminated), its stdout and stderr in
 * h_dir()/out, with $DLOCK_SOCKET set to sock. As root with uid not -1,
 * dlock runs as that uid and gid: a copy of it that any user may run
 * (h_public_copy; the test directories are opened up to let it reach the
 * sockets in them). Returns the pid. */
static pid_t spawn_dlock_full(const char *const args[], const char *sock, uid_t uid) {
    char bin[700];
    int drop = uid != (uid_t)-1 && geteuid() == 0;
    if (drop) h_public_copy(dlock_bin(), bin, sizeof(bin));
    else snprintf(bin, sizeof(bin), "%s", dlock_bin());
    const char *argv[ARGV_MAX] = {bin};
    size_t n = 1;
    for (size_t i = 0; args[i] != NULL; i++) argv[n++] = args[i];
    argv[n] = NULL;
    char out[600], dir[600];
    snprintf(out, sizeof(out), "%s/out", h_dir());
    snprintf(dir, sizeof(dir), "%s", h_dir());
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        setenv("DLOCK_SOCKET", sock, 1);
        if (drop) {
            if (chmod(h_dir(), 0711) != 0 || chmod(dirname(dir), 0711) != 0 ||
                setgroups(0, NULL) != 0 || setgid((gid_t)uid) != 0 || setuid(uid) != 0) {
                perror("dropping root");
                _exit(98);
            }
        }
        execv(argv[0], (char *const *)(uintptr_t)argv); /* execv never writes them */
        perror(argv[0]);
        _exit(99);
    }
    return pid;
}

/* Starts dlock with args (NULL-terminated) against the test daemon, its
 * stdout and stderr in h_dir()/out. Returns the pid. */
static pid_t spawn_dlock(const char *const args[]) {
    return spawn_dlock_full(args, h_dlockd_sock(daemon_idx), (uid_t)-1);
}

/* Waits for pid at most H_WAIT_MS; returns its exit code (128+N for a signal). */
static int reap(pid_t pid) {
    long long end = h_now_ms() + H_WAIT_MS;
    int status;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) break;
        if (h_now_ms() > end) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            ck_abort_msg("dlock did not finish in time");
        }
        usleep(1000);
    }
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    return 128 + WTERMSIG(status);
}

static int run_dlock(const char *const args[]) {
    return reap(spawn_dlock(args));
}

/* The first line of a file in h_dir(), or "" (static buffer). */
static const char *slurp(const char *name) {
    static char buf[4096];
    char path[600];
    snprintf(path, sizeof(path), "%s/%s", h_dir(), name);
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (f == NULL) return buf;
    if (fgets(buf, sizeof(buf), f) == NULL) buf[0] = '\0';
    fclose(f);
    buf[strcspn(buf, "\n")] = '\0';
    return buf;
}

/* Waits until h_dir()/name exists. */
static void await_file(const char *name) {
    char path[600];
    snprintf(path, sizeof(path), "%s/%s", h_dir(), name);
    long long end = h_now_ms() + H_WAIT_MS;
    while (access(path, F_OK) != 0) {
        ck_assert_msg(h_now_ms() < end, "%s never appeared", name);
        usleep(2000);
    }
}

/* Waits until h_dir()/name has a whole line in it: a command's echo has
 * been written, not only the file created by its redirection. */
static void await_line(const char *name) {
    char path[600];
    snprintf(path, sizeof(path), "%s/%s", h_dir(), name);
    long long end = h_now_ms() + H_WAIT_MS;
    for (;;) {
        FILE *f = fopen(path, "r");
        int c = EOF, last = EOF;
        if (f != NULL) {
            while ((c = fgetc(f)) != EOF) last = c;
            fclose(f);
        }
        if (last == '\n') return;
        ck_assert_msg(h_now_ms() < end, "%s never got a line", name);
        usleep(2000);
    }
}

static void setup(void) {
    h_setup();
    h_redis_start();
    daemon_idx = h_dlockd_start(NULL);
}

START_TEST(exit_status_passes_through) {
    const char *a[] = {"job", "sh", "-c", "exit 7", NULL};
    ck_assert_int_eq(run_dlock(a), 7);
    const char *b[] = {"job", "true", NULL};
    ck_assert_int_eq(run_dlock(b), 0);
    const char *c[] = {"job", "sh", "-c", "kill -9 $$", NULL};
    ck_assert_int_eq(run_dlock(c), 128 + 9);
    const char *d[] = {"job", "/nonexistent/command", NULL};
    ck_assert_int_eq(run_dlock(d), 127);
    const char *e[] = {"job", "/dev/null", NULL};
    ck_assert_int_eq(run_dlock(e), 126);
}
END_TEST

START_TEST(environment_has_name_and_fence) {
    char script[700];
    snprintf(script, sizeof(script), "echo \"$DLOCK_NAME $DLOCK_FENCE\" > %s/env", h_dir());
    const char *a[] = {"envjob", "sh", "-c", script, NULL};
    ck_assert_int_eq(run_dlock(a), 0);
    char name[64];
    unsigned long long fence = 0;
    ck_assert_int_eq(sscanf(slurp("env"), "%63s %llu", name, &fence), 2);
    ck_assert_str_eq(name, "envjob");
    ck_assert_uint_gt(fence, 0);
    /* The lock was held while the command ran and released after. */
    h_conn_t *c = h_connect_index(daemon_idx);
    h_send(c, "STATUS envjob\n");
    H_EXPECT(c, "OK FREE");
    h_close(c);
}
END_TEST

START_TEST(nonblock_wait_and_code) {
    h_conn_t *holder = h_connect_index(daemon_idx);
    h_send(holder, "LOCK busy\n");
    H_EXPECT_PREFIX(holder, "OK ");
    const char *n[] = {"-n", "busy", "true", NULL};
    ck_assert_int_eq(run_dlock(n), 1);
    const char *e[] = {"-n", "-E", "9", "busy", "true", NULL};
    ck_assert_int_eq(run_dlock(e), 9);
    long long t0 = h_now_ms();
    const char *w[] = {"-w", "0.3", "busy", "true", NULL};
    ck_assert_int_eq(run_dlock(w), 1);
    long long waited = h_now_ms() - t0;
    ck_assert_int_ge(waited, 290);
    ck_assert_int_lt(waited, 5000);
    /* Released during -w: the command runs. */
    const char *w2[] = {"-w", "10", "busy", "true", NULL};
    pid_t pid = spawn_dlock(w2);
    h_conn_t *adm = h_connect_index(daemon_idx);
    long long end = h_now_ms() + H_WAIT_MS;
    for (;;) { /* until dlock is queued */
        h_send(adm, "INFO\n");
        const char *line = h_recv(adm, H_WAIT_MS);
        if (line && strstr(line, " waiters=1 ")) break;
        ck_assert_msg(h_now_ms() < end, "dlock never queued");
        usleep(1000);
    }
    h_send(holder, "UNLOCK busy\n");
    H_EXPECT(holder, "OK 0");
    ck_assert_int_eq(reap(pid), 0);
    h_close(adm);
    h_close(holder);
}
END_TEST

START_TEST(lost_lock_stops_command) {
    /* The loss comes once the command's TERM trap is set (a FORCEUNLOCK
     * after its ready file): a lease could run out before sh set it. */
    char script[700];
    snprintf(script, sizeof(script),
             "trap 'echo term > %s/term; exit 0' TERM; touch %s/trapped; sleep 30 & wait",
             h_dir(), h_dir());
    const char *a[] = {"-k", "2", "leased", "sh", "-c", script, NULL};
    pid_t pid = spawn_dlock(a);
    await_file("trapped");
    h_conn_t *adm = h_connect_index(daemon_idx);
    long long t0 = h_now_ms();
    h_send(adm, "FORCEUNLOCK leased\n");
    H_EXPECT(adm, "OK 1");
    ck_assert_int_eq(reap(pid), 79);
    ck_assert_int_lt(h_now_ms() - t0, 5000);
    ck_assert_str_eq(slurp("term"), "term");
    h_close(adm);
    /* A command that ignores SIGTERM gets SIGKILL after -k. */
    const char *b[] = {"-l", "200", "-k", "0.2", "leased", "sh", "-c",
                       "trap '' TERM; sleep 30 & wait", NULL};
    t0 = h_now_ms();
    ck_assert_int_eq(run_dlock(b), 79);
    ck_assert_int_lt(h_now_ms() - t0, 5000);
}
END_TEST

START_TEST(daemon_gone_stops_command) {
    char script[700];
    snprintf(script, sizeof(script), "touch %s/ready; sleep 30 & wait", h_dir());
    const char *a[] = {"-k", "1", "dj", "sh", "-c", script, NULL};
    pid_t pid = spawn_dlock(a);
    await_file("ready");
    h_dlockd_stop(daemon_idx, SIGKILL);
    ck_assert_int_eq(reap(pid), 79);
}
END_TEST

START_TEST(signals_are_forwarded) {
    const int sigs[] = {SIGTERM, SIGINT, SIGHUP};
    for (size_t i = 0; i < 3; i++) {
        char script[700];
        snprintf(script, sizeof(script),
                 "trap 'exit %d' %d; touch %s/ready%zu; sleep 30 & wait", 40 + (int)i, sigs[i],
                 h_dir(), i);
        const char *a[] = {"sigjob", "sh", "-c", script, NULL};
        pid_t pid = spawn_dlock(a);
        char ready[16];
        snprintf(ready, sizeof(ready), "ready%zu", i);
        await_file(ready);
        kill(pid, sigs[i]);
        ck_assert_int_eq(reap(pid), 40 + (int)i);
    }
}
END_TEST

START_TEST(eight_loops_count_to_200) {
    char counter[600], script[1500];
    snprintf(counter, sizeof(counter), "%s/counter", h_dir());
    FILE *f = fopen(counter, "w");
    fputs("0\n", f);
    fclose(f);
    /* Without mutual exclusion these read-sleep-write steps lose updates. */
    snprintf(script, sizeof(script),
             "i=0; while [ $i -lt 25 ]; do "
             "DLOCK_SOCKET='%s' '%s' count sh -c "
             "'n=$(cat %s); sleep 0.002; echo $((n + 1)) > %s' || exit 1; "
             "i=$((i + 1)); done",
             h_dlockd_sock(daemon_idx), dlock_bin(), counter, counter);
    pid_t pids[8];
    for (int i = 0; i < 8; i++) {
        pids[i] = fork();
        ck_assert_int_ge(pids[i], 0);
        if (pids[i] == 0) {
            execl("/bin/sh", "sh", "-c", script, (char *)NULL);
            _exit(99);
        }
    }
    for (int i = 0; i < 8; i++) {
        int status;
        waitpid(pids[i], &status, 0);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "loop %d failed", i);
    }
    ck_assert_str_eq(slurp("counter"), "200");
}
END_TEST

START_TEST(bad_usage_is_64) {
    const char *cases[][6] = {
        {NULL},
        {"name", NULL},
        {"-q", "name", "true", NULL},
        {"-s", "-x", "name", "true", NULL},
        {"-S", NULL},
        {"-w", "abc", "name", "true", NULL},
        {"-w", "-1", "name", "true", NULL},
        {"-l", "0", "name", "true", NULL},
        {"-E", "300", "name", "true", NULL},
        {"-n", "-w", "1", "name", "true", NULL},
        {"--status", NULL},
        {"name with space", "true", NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int rc = run_dlock(cases[i]);
        ck_assert_msg(rc == 64, "case %zu: exit %d, wanted 64", i, rc);
        ck_assert_msg(strstr(slurp("out"), "dlock") != NULL || i == 0, "case %zu: no message", i);
    }
}
END_TEST

START_TEST(unreachable_daemon_is_69) {
    const char *a[] = {"-S", "/nonexistent/dlockd.sock", "x", "true", NULL};
    ck_assert_int_eq(run_dlock(a), 69);
    const char *b[] = {"-S", "/nonexistent/dlockd.sock", "--ping", NULL};
    ck_assert_int_eq(run_dlock(b), 69);
}
END_TEST

/* The message names the socket dlock tried, from -S or $DLOCK_SOCKET, and
 * hints at the cause. */
START_TEST(unreachable_daemon_names_socket) {
    static const char want[] = "dlock: cannot connect to dlockd at /nonexistent/dlockd.sock: "
                               "No such file or directory (is dlockd running?)";
    const char *a[] = {"-S", "/nonexistent/dlockd.sock", "x", "true", NULL};
    ck_assert_int_eq(run_dlock(a), 69);
    ck_assert_str_eq(slurp("out"), want);
    const char *b[] = {"--socket", "/nonexistent/dlockd.sock", "--ping", NULL};
    ck_assert_int_eq(run_dlock(b), 69);
    ck_assert_str_eq(slurp("out"), want);
    const char *c[] = {"--status", "x", NULL};
    ck_assert_int_eq(reap(spawn_dlock_full(c, "/nonexistent/dlockd.sock", (uid_t)-1)), 69);
    ck_assert_str_eq(slurp("out"), want);
}
END_TEST

/* A socket the user may not use: Permission denied, with what to do. As
 * root the test runs dlock as nobody against a dlockd whose socket is 0600
 * (root's); as anyone else, against a path in a directory it cannot search. */
START_TEST(permission_denied_names_socket_and_hints) {
    char sock[600], want[900];
    uid_t uid = (uid_t)-1;
    if (geteuid() == 0) {
        int d = h_dlockd_start("[server]\nsocket_mode = 0600\n");
        snprintf(sock, sizeof(sock), "%s", h_dlockd_sock(d));
        uid = OTHER_UID;
    } else {
        snprintf(sock, sizeof(sock), "%s/closed", h_dir());
        ck_assert_int_eq(mkdir(sock, 0), 0);
        snprintf(sock, sizeof(sock), "%s/closed/d.sock", h_dir());
    }
    snprintf(want, sizeof(want),
             "dlock: cannot connect to dlockd at %s: Permission denied "
             "(add yourself to the dlockd group, or check socket_mode)", sock);
    const char *a[] = {"--ping", NULL};
    ck_assert_int_eq(reap(spawn_dlock_full(a, sock, uid)), 69);
    ck_assert_str_eq(slurp("out"), want);
    const char *b[] = {"-n", "x", "true", NULL};
    ck_assert_int_eq(reap(spawn_dlock_full(b, sock, uid)), 69);
    ck_assert_str_eq(slurp("out"), want);
}
END_TEST

/* ERR DENIED is exit 77, as dlock(1) and the README say: --force-unlock
 * by a uid that is neither 0 nor in admin_uids. */
START_TEST(force_unlock_denied_is_77) {
    int d = h_dlockd_start("[server]\nsocket_mode = 0666\nadmin_uids = 4242\n");
    h_conn_t *holder = h_connect_index(d);
    h_send(holder, "LOCK fu\n");
    H_EXPECT_PREFIX(holder, "OK ");
    /* As root, as nobody; as anyone else, as oneself (not in admin_uids). */
    const char *f[] = {"--force-unlock", "fu", NULL};
    ck_assert_int_eq(reap(spawn_dlock_full(f, h_dlockd_sock(d), OTHER_UID)), 77);
    ck_assert_msg(strncmp(slurp("out"), "ERR DENIED", 10) == 0, "%s", slurp("out"));
    h_send(holder, "STATUS fu\n");
    H_EXPECT_PREFIX(holder, "OK MINE 1 ");
    h_close(holder);
}
END_TEST

START_TEST(query_forms) {
    const char *p[] = {"--ping", NULL};
    ck_assert_int_eq(run_dlock(p), 0);
    ck_assert_str_eq(slurp("out"), "OK PONG");
    const char *s[] = {"--status", "q", NULL};
    ck_assert_int_eq(run_dlock(s), 0);
    ck_assert_str_eq(slurp("out"), "OK FREE");
    const char *i[] = {"--info", NULL};
    ck_assert_int_eq(run_dlock(i), 0);
    ck_assert_msg(strncmp(slurp("out"), "OK version=", 11) == 0, "%s", slurp("out"));
    h_conn_t *holder = h_connect_index(daemon_idx);
    h_send(holder, "LOCK q\n");
    H_EXPECT_PREFIX(holder, "OK ");
    const char *f[] = {"--force-unlock", "q", NULL};
    ck_assert_int_eq(run_dlock(f), 0);
    ck_assert_str_eq(slurp("out"), "OK 1");
    H_EXPECT(holder, "!LOST q forced");
    const char *bad[] = {"--status", "", NULL};
    ck_assert_int_eq(run_dlock(bad), 1); /* the daemon's ERR */
    ck_assert_msg(strncmp(slurp("out"), "ERR ", 4) == 0, "%s", slurp("out"));
    h_close(holder);
}
END_TEST

/* -S (--socket) names the socket, over $DLOCK_SOCKET. */
START_TEST(socket_option_is_S) {
    const char *sock = h_dlockd_sock(daemon_idx);
    const char *a[] = {"-S", sock, "--ping", NULL};
    ck_assert_int_eq(reap(spawn_dlock_full(a, "/nonexistent/dlockd.sock", (uid_t)-1)), 0);
    ck_assert_str_eq(slurp("out"), "OK PONG");
    const char *b[] = {"--socket", sock, "--status", "sq", NULL};
    ck_assert_int_eq(reap(spawn_dlock_full(b, "/nonexistent/dlockd.sock", (uid_t)-1)), 0);
    ck_assert_str_eq(slurp("out"), "OK FREE");
    const char *c[] = {"-S", sock, "-x", "sq", "true", NULL};
    ck_assert_int_eq(reap(spawn_dlock_full(c, "/nonexistent/dlockd.sock", (uid_t)-1)), 0);
}
END_TEST

/* The reader script: touch DIR/<ready>, then hold until DIR/go exists (a
 * bounded poll: reap() kills a dlock that outlives H_WAIT_MS). */
static pid_t spawn_holder(const char *opt, const char *name, const char *ready) {
    char script[900];
    snprintf(script, sizeof(script),
             "echo \"$DLOCK_FENCE\" > %s/%s; while [ ! -e %s/go ]; do sleep 0.005; done",
             h_dir(), ready, h_dir());
    const char *a[] = {opt, name, "sh", "-c", script, NULL};
    return spawn_dlock(a);
}

static void touch_go(void) {
    char path[600];
    snprintf(path, sizeof(path), "%s/go", h_dir());
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
}

/* Two dlock -s of one name run their commands at the same time: each holds
 * its read lock until the test lets both go, which it does only once both
 * commands have started. Meanwhile a writer cannot have the name. */
START_TEST(shared_readers_hold_together) {
    pid_t r1 = spawn_holder("-s", "rw", "r1");
    pid_t r2 = spawn_holder("--shared", "rw", "r2");
    await_line("r1");
    await_line("r2");
    h_conn_t *c = h_connect_index(daemon_idx);
    h_send(c, "STATUS rw\n");
    H_EXPECT_PREFIX(c, "OK READ 2 0 ");
    h_send(c, "TRYWLOCK rw 0\n");
    H_EXPECT_PREFIX(c, "TIMEOUT ");
    const char *w[] = {"-x", "-n", "rw", "true", NULL};
    ck_assert_int_eq(run_dlock(w), 1);
    const char *r3[] = {"-s", "-n", "rw", "true", NULL};
    ck_assert_int_eq(run_dlock(r3), 0); /* a third reader is let in at once */
    touch_go();
    ck_assert_int_eq(reap(r1), 0);
    ck_assert_int_eq(reap(r2), 0);
    /* Read grants do not raise the fence: both readers saw the same. */
    char f1[64];
    snprintf(f1, sizeof(f1), "%s", slurp("r1"));
    ck_assert_str_eq(slurp("r2"), f1);
    /* Both let go when their commands ended: a writer gets it now. */
    h_send(c, "TRYWLOCK rw 5000\n");
    H_EXPECT_PREFIX(c, "OK ");
    h_close(c);
}
END_TEST

/* dlock -x holds the name alone: readers and writers wait, and it waits
 * for a reader; its fence rises past earlier ones. */
START_TEST(exclusive_excludes) {
    h_conn_t *c = h_connect_index(daemon_idx);
    h_send(c, "RLOCK ex\n");
    H_EXPECT_PREFIX(c, "OK ");
    const char *xn[] = {"-x", "-n", "ex", "true", NULL};
    ck_assert_int_eq(run_dlock(xn), 1);
    const char *xw[] = {"--exclusive", "-w", "0.2", "-E", "9", "ex", "true", NULL};
    ck_assert_int_eq(run_dlock(xw), 9);
    h_send(c, "RUNLOCK ex\n");
    H_EXPECT(c, "OK 0");

    pid_t x = spawn_holder("-x", "ex", "x1");
    await_line("x1");
    h_send(c, "STATUS ex\n");
    H_EXPECT_PREFIX(c, "OK WRITE 1 0 ");
    h_send(c, "TRYRLOCK ex 0\n");
    H_EXPECT_PREFIX(c, "TIMEOUT ");
    const char *sn[] = {"-s", "-n", "ex", "true", NULL};
    ck_assert_int_eq(run_dlock(sn), 1);
    ck_assert_int_eq(run_dlock(xn), 1);
    touch_go();
    ck_assert_int_eq(reap(x), 0);
    unsigned long long f1 = strtoull(slurp("x1"), NULL, 10);
    ck_assert_uint_gt(f1, 0);

    /* A second writer gets a higher fence; a reader then sees it as is. */
    char script[700];
    snprintf(script, sizeof(script), "echo \"$DLOCK_FENCE\" > %s/x2", h_dir());
    const char *x2[] = {"-x", "ex", "sh", "-c", script, NULL};
    ck_assert_int_eq(run_dlock(x2), 0);
    unsigned long long f2 = strtoull(slurp("x2"), NULL, 10);
    ck_assert_uint_gt(f2, f1);
    snprintf(script, sizeof(script), "echo \"$DLOCK_FENCE\" > %s/r", h_dir());
    const char *r[] = {"-s", "ex", "sh", "-c", script, NULL};
    ck_assert_int_eq(run_dlock(r), 0);
    ck_assert_uint_eq(strtoull(slurp("r"), NULL, 10), f2);
    h_close(c);
}
END_TEST

/* A plain lock and a read/write lock of one name: ERR KIND, exit 65, and
 * the command does not run. */
START_TEST(other_kind_is_65) {
    h_conn_t *c = h_connect_index(daemon_idx);
    h_send(c, "LOCK pk\n");
    H_EXPECT_PREFIX(c, "OK ");
    char script[700];
    snprintf(script, sizeof(script), "touch %s/ran", h_dir());
    const char *s[] = {"-s", "pk", "sh", "-c", script, NULL};
    ck_assert_int_eq(run_dlock(s), 65);
    ck_assert_msg(strstr(slurp("out"), "dlock: pk: held as a plain lock") != NULL, "%s",
                  slurp("out"));
    const char *x[] = {"-x", "-n", "pk", "sh", "-c", script, NULL};
    ck_assert_int_eq(run_dlock(x), 65);
    h_send(c, "RLOCK rk\n");
    H_EXPECT_PREFIX(c, "OK ");
    const char *p[] = {"-w", "5", "rk", "sh", "-c", script, NULL};
    ck_assert_int_eq(run_dlock(p), 65);
    ck_assert_msg(strstr(slurp("out"), "dlock: rk: held as a read/write lock") != NULL, "%s",
                  slurp("out"));
    ck_assert_int_eq(access(script + strlen("touch "), F_OK), -1);
    h_close(c);
}
END_TEST

/* -s used to take the socket's path; now the word after it is the lock's
 * name (dlock warns when it is a socket). */
START_TEST(old_s_socket_form_is_a_lock_name) {
    const char *sock = h_dlockd_sock(daemon_idx);
    char script[700];
    snprintf(script, sizeof(script), "echo \"$DLOCK_NAME\" > %s/name", h_dir());
    const char *a[] = {"-s", sock, "sh", "-c", script, NULL};
    ck_assert_int_eq(run_dlock(a), 0);
    ck_assert_msg(strstr(slurp("out"), "is a socket: name dlockd's socket with -S") != NULL,
                  "%s", slurp("out"));
    ck_assert_str_eq(slurp("name"), sock);
}
END_TEST

/* --seminit N NAME alone sets the permits once, prints nothing and exits
 * 0 either way; -v says which it was. */
START_TEST(seminit_alone) {
    const char *a[] = {"--seminit", "2", "pool", NULL};
    ck_assert_int_eq(run_dlock(a), 0);
    ck_assert_str_eq(slurp("out"), "");
    const char *b[] = {"--seminit", "5", "pool", NULL};
    ck_assert_int_eq(run_dlock(b), 0);
    ck_assert_str_eq(slurp("out"), "");
    h_conn_t *c = h_connect_index(daemon_idx);
    h_send(c, "STATUS pool\n");
    H_EXPECT(c, "OK SEM 2 0");
    const char *v[] = {"-v", "--seminit", "3", "pool", NULL};
    ck_assert_int_eq(run_dlock(v), 0);
    ck_assert_msg(strstr(slurp("out"), "already") != NULL, "%s", slurp("out"));
    const char *v2[] = {"--verbose", "--seminit", "3", "pool2", NULL};
    ck_assert_int_eq(run_dlock(v2), 0);
    ck_assert_msg(strstr(slurp("out"), "set to 3 permits") != NULL, "%s", slurp("out"));
    h_send(c, "STATUS pool2\n");
    H_EXPECT(c, "OK SEM 3 0");
    h_close(c);
}
END_TEST

/* --permits N runs the command holding N permits: two holders of one
 * permit each run at once, a third cannot have one (-n, -w), the command
 * sees DLOCK_PERMITS and no DLOCK_FENCE, and the permits come back when
 * the commands end. */
START_TEST(permits_run_commands_side_by_side) {
    const char *init[] = {"--seminit", "2", "pool", NULL};
    ck_assert_int_eq(run_dlock(init), 0);
    char script[900];
    snprintf(script, sizeof(script),
             "echo \"$DLOCK_NAME $DLOCK_PERMITS ${DLOCK_FENCE-unset}\" > %s/$0; "
             "while [ ! -e %s/go ]; do sleep 0.005; done", h_dir(), h_dir());
    const char *h1[] = {"--permits", "1", "pool", "sh", "-c", script, "p1", NULL};
    const char *h2[] = {"--permits", "1", "pool", "sh", "-c", script, "p2", NULL};
    pid_t p1 = spawn_dlock(h1);
    pid_t p2 = spawn_dlock(h2);
    await_line("p1");
    await_line("p2");
    ck_assert_str_eq(slurp("p1"), "pool 1 unset");
    h_conn_t *c = h_connect_index(daemon_idx);
    h_send(c, "STATUS pool\n");
    H_EXPECT(c, "OK SEM 0 0");
    h_send(c, "TRYACQUIRE pool 1 0\n");
    H_EXPECT_PREFIX(c, "TIMEOUT ");
    const char *n[] = {"--permits", "1", "-n", "pool", "true", NULL};
    ck_assert_int_eq(run_dlock(n), 1);
    const char *w[] = {"--permits", "1", "-w", "0.2", "-E", "9", "pool", "true", NULL};
    ck_assert_int_eq(run_dlock(w), 9);
    touch_go();
    ck_assert_int_eq(reap(p1), 0);
    ck_assert_int_eq(reap(p2), 0);
    /* Both gave their permit back: two at once are free again. */
    h_send(c, "TRYACQUIRE pool 2 %d\n", H_WAIT_MS);
    H_EXPECT(c, "OK 2");
    h_send(c, "RELEASE pool 2\n");
    H_EXPECT(c, "OK 0");

    /* Two permits for one command, and the exit status passes through. */
    snprintf(script, sizeof(script), "echo \"$DLOCK_PERMITS\" > %s/two; exit 7", h_dir());
    const char *two[] = {"-v", "--permits", "2", "-w", "10", "pool", "sh", "-c", script, NULL};
    ck_assert_int_eq(run_dlock(two), 7);
    ck_assert_str_eq(slurp("two"), "2");
    ck_assert_str_eq(slurp("out"), "dlock: pool: acquired 2 permits"); /* -v */
    h_close(c);
}
END_TEST

/* --seminit with --permits and a command: sets the semaphore if need be,
 * then runs the command; a semaphore never set makes -n give up. */
START_TEST(seminit_and_permits_together) {
    const char *nope[] = {"--permits", "1", "-n", "fresh", "true", NULL};
    ck_assert_int_eq(run_dlock(nope), 1);
    char script[700];
    snprintf(script, sizeof(script), "echo \"$DLOCK_PERMITS\" > %s/got", h_dir());
    const char *a[] = {"--seminit", "3", "--permits", "3", "fresh", "sh", "-c", script, NULL};
    ck_assert_int_eq(run_dlock(a), 0);
    ck_assert_str_eq(slurp("got"), "3");
    /* Already set: --seminit 1 leaves 3, so 3 can be had again. */
    const char *b[] = {"--seminit", "1", "--permits", "3", "-w", "10", "fresh", "true", NULL};
    ck_assert_int_eq(run_dlock(b), 0);
    h_conn_t *c = h_connect_index(daemon_idx);
    h_send(c, "TRYACQUIRE fresh 3 %d\n", H_WAIT_MS);
    H_EXPECT(c, "OK 3");
    h_close(c);
}
END_TEST

/* The permits are lost when their lease runs out: the command is stopped
 * and dlock exits 79. */
START_TEST(lost_permits_stop_command) {
    const char *init[] = {"--seminit", "1", "leased", NULL};
    ck_assert_int_eq(run_dlock(init), 0);
    char script[700];
    snprintf(script, sizeof(script),
             "trap 'echo term > %s/term; exit 0' TERM; sleep 30 & wait", h_dir());
    const char *a[] = {"--permits", "1", "-l", "300", "-k", "2", "leased", "sh", "-c", script,
                       NULL};
    ck_assert_int_eq(run_dlock(a), 79);
    ck_assert_str_eq(slurp("term"), "term");
}
END_TEST

/* A semaphore and a lock of one name: ERR KIND, exit 65, and the command
 * does not run. */
START_TEST(semaphore_other_kind_is_65) {
    h_conn_t *c = h_connect_index(daemon_idx);
    char script[700];
    snprintf(script, sizeof(script), "touch %s/ran", h_dir());
    h_send(c, "LOCK pk\n");
    H_EXPECT_PREFIX(c, "OK ");
    const char *p[] = {"--permits", "1", "pk", "sh", "-c", script, NULL};
    ck_assert_int_eq(run_dlock(p), 65);
    ck_assert_msg(strstr(slurp("out"), "dlock: pk: held as a lock, not a semaphore") != NULL,
                  "%s", slurp("out"));
    const char *i[] = {"--seminit", "2", "pk", NULL};
    ck_assert_int_eq(run_dlock(i), 65);
    ck_assert_msg(strstr(slurp("out"), "dlock: pk: held as a lock, not a semaphore") != NULL,
                  "%s", slurp("out"));
    const char *ip[] = {"--seminit", "2", "--permits", "1", "pk", "sh", "-c", script, NULL};
    ck_assert_int_eq(run_dlock(ip), 65);

    h_send(c, "SEMINIT sem 2\n");
    H_EXPECT(c, "OK 1");
    h_send(c, "ACQUIRE sem 1\n");
    H_EXPECT(c, "OK 1");
    const char *l[] = {"sem", "sh", "-c", script, NULL};
    ck_assert_int_eq(run_dlock(l), 65);
    ck_assert_msg(strstr(slurp("out"), "dlock: sem: held as a read/write lock, a semaphore or "
                                       "a fair lock") != NULL,
                  "%s", slurp("out"));
    const char *r[] = {"-s", "-n", "sem", "sh", "-c", script, NULL};
    ck_assert_int_eq(run_dlock(r), 65);
    ck_assert_msg(strstr(slurp("out"), "dlock: sem: held as a plain lock, a semaphore or a "
                                       "fair lock") != NULL,
                  "%s", slurp("out"));
    const char *x[] = {"-x", "-w", "5", "sem", "sh", "-c", script, NULL};
    ck_assert_int_eq(run_dlock(x), 65);
    ck_assert_int_eq(access(script + strlen("touch "), F_OK), -1);
    /* The query forms show a semaphore's STATUS. */
    const char *st[] = {"--status", "sem", NULL};
    ck_assert_int_eq(run_dlock(st), 0);
    ck_assert_str_eq(slurp("out"), "OK SEM 1 0");
    h_close(c);
}
END_TEST

START_TEST(semaphore_bad_usage_is_64) {
    const char *cases[][8] = {
        {"--permits", "0", "pool", "true", NULL},
        {"--permits", "10001", "pool", "true", NULL},
        {"--permits", "x", "pool", "true", NULL},
        {"--permits", "1", "-s", "pool", "true", NULL},
        {"-x", "--permits", "1", "pool", "true", NULL},
        {"--permits", "1", "pool", NULL},
        {"--seminit", "-1", "pool", NULL},
        {"--seminit", "2147483648", "pool", NULL},
        {"--seminit", "2", NULL},
        {"--seminit", "2", "pool", "true", NULL},
        {"--seminit", "2", "-s", "pool", NULL},
        {"--seminit", "2", "has space", NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int rc = run_dlock(cases[i]);
        ck_assert_msg(rc == 64, "case %zu: exit %d, wanted 64", i, rc);
        ck_assert_msg(strstr(slurp("out"), "dlock") != NULL, "case %zu: no message", i);
    }
    /* None of them got as far as setting anything. */
    h_conn_t *c = h_connect_index(daemon_idx);
    h_send(c, "TRYACQUIRE pool 1 0\n");
    H_EXPECT_PREFIX(c, "TIMEOUT ");
    h_close(c);
}
END_TEST

/* Waits (H_WAIT_MS at most) until dlockd counts n waiting requests. */
static void await_waiters(long long n) {
    h_conn_t *c = h_connect_index(daemon_idx);
    h_await_waiters(c, n);
    h_close(c);
}

/* Starts dlock --fair NAME, whose command appends "ID FENCE" to
 * h_dir()/order while it holds the lock: the lines come in the order of
 * the grants. */
static pid_t spawn_fair_waiter(const char *name, const char *id) {
    char script[700];
    snprintf(script, sizeof(script), "echo \"$0 $DLOCK_FENCE\" >> %s/order", h_dir());
    const char *a[] = {"--fair", name, "sh", "-c", script, id, NULL};
    return spawn_dlock(a);
}

/* h_dir()/order's lines "ID FENCE": the IDs, joined by spaces, and every
 * fence rising past *fence (updated). */
static const char *order_ids(unsigned long long *fence) {
    static char ids[256];
    char path[600], id[32];
    unsigned long long f;
    snprintf(path, sizeof(path), "%s/order", h_dir());
    ids[0] = '\0';
    FILE *fp = fopen(path, "r");
    if (fp == NULL) return ids;
    while (fscanf(fp, "%31s %llu", id, &f) == 2) {
        ck_assert_msg(f > *fence, "fence %llu of %s not above %llu", f, id, *fence);
        *fence = f;
        snprintf(ids + strlen(ids), sizeof(ids) - strlen(ids), "%s%s", ids[0] ? " " : "", id);
    }
    fclose(fp);
    return ids;
}

/* --fair runs the command holding a fair lock, with its fence; -n and -w
 * give up while another connection holds it, and the exit status passes
 * through. */
START_TEST(fair_runs_command) {
    char script[700];
    snprintf(script, sizeof(script), "echo \"$DLOCK_NAME $DLOCK_FENCE\" > %s/env; exit 3",
             h_dir());
    const char *a[] = {"--fair", "fj", "sh", "-c", script, NULL};
    ck_assert_int_eq(run_dlock(a), 3);
    const char *env = slurp("env");
    ck_assert_msg(strncmp(env, "fj ", 3) == 0, "%s", env);
    unsigned long long f1 = strtoull(env + 3, NULL, 10);
    ck_assert_uint_gt(f1, 0);

    h_conn_t *c = h_connect_index(daemon_idx);
    h_send(c, "FAIRLOCK fj\n");
    H_EXPECT_PREFIX(c, "OK ");
    const char *n[] = {"--fair", "-n", "fj", "true", NULL};
    ck_assert_int_eq(run_dlock(n), 1);
    const char *w[] = {"--fair", "-w", "0.2", "-E", "9", "fj", "true", NULL};
    ck_assert_int_eq(run_dlock(w), 9);
    h_send(c, "UNLOCK fj\n");
    H_EXPECT(c, "OK 0");
    /* The waits of -n and -w left no place behind: one try gets it. */
    h_send(c, "TRYFAIRLOCK fj 0\n");
    H_EXPECT_PREFIX(c, "OK ");
    h_send(c, "UNLOCK fj\n");
    H_EXPECT(c, "OK 0");

    snprintf(script, sizeof(script), "echo \"$DLOCK_FENCE\" > %s/env", h_dir());
    const char *v[] = {"-v", "--fair", "-w", "10", "fj", "sh", "-c", script, NULL};
    ck_assert_int_eq(run_dlock(v), 0);
    ck_assert_uint_gt(strtoull(slurp("env"), NULL, 10), f1);
    ck_assert_msg(strncmp(slurp("out"), "dlock: fj: acquired (fence ", 27) == 0, "%s",
                  slurp("out"));
    /* The command ended: the lock is free. */
    h_send(c, "STATUS fj\n");
    H_EXPECT(c, "OK FREE");
    h_close(c);
}
END_TEST

/* Three dlock --fair, each queued (INFO's waiters) before the next one
 * starts, run their commands in that order, one at a time, with rising
 * fences. */
START_TEST(fair_commands_run_in_order) {
    h_conn_t *c = h_connect_index(daemon_idx);
    h_send(c, "FAIRLOCK fo\n");
    const char *line = h_recv(c, H_WAIT_MS);
    ck_assert_msg(line != NULL && strncmp(line, "OK ", 3) == 0, "%s", line ? line : "(none)");
    unsigned long long fence = strtoull(line + 3, NULL, 10);
    pid_t w[3];
    const char *ids[] = {"w1", "w2", "w3"};
    for (int i = 0; i < 3; i++) {
        w[i] = spawn_fair_waiter("fo", ids[i]);
        await_waiters(i + 1);
    }
    ck_assert_str_eq(order_ids(&fence), ""); /* nobody ran while it was held */
    h_send(c, "UNLOCK fo\n");
    H_EXPECT(c, "OK 0");
    for (int i = 0; i < 3; i++) ck_assert_int_eq(reap(w[i]), 0);
    ck_assert_str_eq(order_ids(&fence), "w1 w2 w3");
    h_close(c);
}
END_TEST

/* A waiting dlock --fair that is killed leaves the queue at once: the one
 * behind it runs as soon as the holder lets go (not after the dead one's
 * place ends, lease_ms: 30 s, past H_WAIT_MS). */
START_TEST(fair_killed_waiter_lets_next_go) {
    h_conn_t *c = h_connect_index(daemon_idx);
    h_send(c, "FAIRLOCK fk\n");
    H_EXPECT_PREFIX(c, "OK ");
    pid_t w1 = spawn_fair_waiter("fk", "w1");
    await_waiters(1);
    pid_t w2 = spawn_fair_waiter("fk", "w2");
    await_waiters(2);
    kill(w1, SIGKILL);
    ck_assert_int_eq(reap(w1), 128 + SIGKILL);
    await_waiters(1);
    h_send(c, "UNLOCK fk\n");
    H_EXPECT(c, "OK 0");
    ck_assert_int_eq(reap(w2), 0);
    unsigned long long fence = 0;
    ck_assert_str_eq(order_ids(&fence), "w2");
    h_close(c);
}
END_TEST

/* A fair lock and the other kinds of one name on one dlockd: ERR KIND,
 * exit 65, and the command does not run. */
START_TEST(fair_other_kind_is_65) {
    h_conn_t *c = h_connect_index(daemon_idx);
    char script[700];
    snprintf(script, sizeof(script), "touch %s/ran", h_dir());
    h_send(c, "LOCK pk\n");
    H_EXPECT_PREFIX(c, "OK ");
    const char *f[] = {"--fair", "pk", "sh", "-c", script, NULL};
    ck_assert_int_eq(run_dlock(f), 65);
    ck_assert_msg(strstr(slurp("out"), "dlock: pk: held as a plain lock, a read/write lock or "
                                       "a semaphore, not a fair lock") != NULL,
                  "%s", slurp("out"));
    const char *fn[] = {"--fair", "-n", "pk", "sh", "-c", script, NULL};
    ck_assert_int_eq(run_dlock(fn), 65);

    h_send(c, "FAIRLOCK fk\n");
    H_EXPECT_PREFIX(c, "OK ");
    const char *p[] = {"fk", "sh", "-c", script, NULL};
    ck_assert_int_eq(run_dlock(p), 65);
    ck_assert_msg(strstr(slurp("out"), "dlock: fk: held as a read/write lock, a semaphore or "
                                       "a fair lock") != NULL,
                  "%s", slurp("out"));
    const char *pw[] = {"-w", "5", "fk", "sh", "-c", script, NULL};
    ck_assert_int_eq(run_dlock(pw), 65);
    const char *s[] = {"-s", "fk", "sh", "-c", script, NULL};
    ck_assert_int_eq(run_dlock(s), 65);
    ck_assert_msg(strstr(slurp("out"), "dlock: fk: held as a plain lock, a semaphore or a fair "
                                       "lock") != NULL,
                  "%s", slurp("out"));
    const char *x[] = {"-x", "-n", "fk", "sh", "-c", script, NULL};
    ck_assert_int_eq(run_dlock(x), 65);
    const char *sem[] = {"--permits", "1", "-n", "fk", "sh", "-c", script, NULL};
    ck_assert_int_eq(run_dlock(sem), 65);
    ck_assert_int_eq(access(script + strlen("touch "), F_OK), -1);
    /* The query forms show a fair lock as a plain one. */
    const char *st[] = {"--status", "fk", NULL};
    ck_assert_int_eq(run_dlock(st), 0);
    ck_assert_msg(strncmp(slurp("out"), "OK TAKEN ", 9) == 0, "%s", slurp("out"));
    h_close(c);
}
END_TEST

START_TEST(fair_bad_usage_is_64) {
    const char *cases[][8] = {
        {"--fair", "-s", "fb", "true", NULL},
        {"-x", "--fair", "fb", "true", NULL},
        {"--fair", "--permits", "1", "fb", "true", NULL},
        {"--permits", "1", "--fair", "fb", "true", NULL},
        {"--fair", "--seminit", "2", "fb", NULL},
        {"--fair", "--seminit", "2", "fb", "true", NULL},
        {"--fair", "fb", NULL},
        {"--fair", "-n", "-w", "1", "fb", "true", NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int rc = run_dlock(cases[i]);
        ck_assert_msg(rc == 64, "case %zu: exit %d, wanted 64", i, rc);
        ck_assert_msg(strstr(slurp("out"), "dlock") != NULL, "case %zu: no message", i);
    }
    /* None of them took anything. */
    h_conn_t *c = h_connect_index(daemon_idx);
    h_send(c, "STATUS fb\n");
    H_EXPECT(c, "OK FREE");
    h_send(c, "TRYACQUIRE fb 1 0\n");
    H_EXPECT_PREFIX(c, "TIMEOUT ");
    h_close(c);
}
END_TEST

/* ---- leader election: --elect, --observe, --leader ---- */

/* The lines of h_dir()/name, as one string with '|' between them; waits
 * (H_WAIT_MS at most) until it has n of them. */
static const char *await_lines(const char *name, int n) {
    static char all[4096];
    char path[600], line[1024];
    snprintf(path, sizeof(path), "%s/%s", h_dir(), name);
    long long end = h_now_ms() + H_WAIT_MS;
    for (;;) {
        int got = 0;
        all[0] = '\0';
        FILE *f = fopen(path, "r");
        while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
            if (strchr(line, '\n') == NULL) break; /* not whole yet */
            line[strcspn(line, "\n")] = '\0';
            snprintf(all + strlen(all), sizeof(all) - strlen(all), "%s%s", got ? "|" : "", line);
            got++;
        }
        if (f != NULL) fclose(f);
        if (got >= n) return all;
        ck_assert_msg(h_now_ms() < end, "%s has %d lines (%s), wanted %d", name, got, all, n);
        usleep(2000);
    }
}

/* --elect runs the command while leading, with its fence and value in the
 * environment, resigns when it exits and passes its status on. */
START_TEST(elect_runs_command_and_resigns) {
    char script[700];
    snprintf(script, sizeof(script),
             "echo \"$DLOCK_NAME $DLOCK_FENCE $DLOCK_LEADER_VALUE\" > %s/env; exit 3", h_dir());
    const char *a[] = {"--elect", "svc", "--value", "10.0.0.5:8080", "--", "sh", "-c", script,
                       NULL};
    ck_assert_int_eq(run_dlock(a), 3);
    char name[64], value[64];
    unsigned long long fence = 0;
    ck_assert_int_eq(sscanf(slurp("env"), "%63s %llu %63s", name, &fence, value), 3);
    ck_assert_str_eq(name, "svc");
    ck_assert_uint_gt(fence, 0);
    ck_assert_str_eq(value, "10.0.0.5:8080");
    h_conn_t *c = h_connect_index(daemon_idx);
    h_send(c, "LEADER svc\n");
    H_EXPECT(c, "OK NONE");
    h_close(c);
}
END_TEST

/* A second candidate waits for the leader, then leads with a higher fence;
 * its value defaults to the host name. */
START_TEST(elect_waits_then_leads) {
    h_conn_t *leader = h_connect_index(daemon_idx);
    h_send(leader, "ELECT svc2 first\n");
    const char *got = h_recv(leader, H_WAIT_MS);
    unsigned long long first = 0, fence = 0;
    ck_assert_msg(got && sscanf(got, "OK %llu", &first) == 1, "ELECT answered %s", got);
    char script[700];
    snprintf(script, sizeof(script), "echo \"$DLOCK_FENCE $DLOCK_LEADER_VALUE\" > %s/env",
             h_dir());
    const char *a[] = {"--elect", "svc2", "sh", "-c", script, NULL};
    pid_t pid = spawn_dlock(a);
    await_waiters(1);
    h_send(leader, "RESIGN svc2\n");
    H_EXPECT(leader, "OK 1");
    ck_assert_int_eq(reap(pid), 0);
    char value[300], host[256] = "";
    ck_assert_int_eq(sscanf(slurp("env"), "%llu %299s", &fence, value), 2);
    ck_assert_uint_gt(fence, first);
    gethostname(host, sizeof(host));
    ck_assert_str_eq(value, host);
    h_close(leader);
}
END_TEST

/* A leadership lost while the command runs: the command is stopped (its
 * SIGTERM and SIGKILL are lost_lock_stops_command's), and dlock exits 75.
 * No check of a TERM trap here: under load the lease may run out before
 * sh has set it. */
START_TEST(elect_lost_is_75) {
    long long t0 = h_now_ms();
    const char *a[] = {"-l", "300", "-k", "2", "--elect", "svc3", "--", "sh", "-c",
                       "sleep 30 & wait", NULL};
    ck_assert_int_eq(run_dlock(a), 75);
    ck_assert_int_lt(h_now_ms() - t0, H_WAIT_MS);
}
END_TEST

/* --observe prints the leader now, then each change, a line each. */
START_TEST(observe_prints_changes) {
    const char *a[] = {"--observe", "svc4", NULL};
    pid_t pid = spawn_dlock(a);
    ck_assert_str_eq(await_lines("out", 1), "NONE");
    h_conn_t *c = h_connect_index(daemon_idx);
    h_send(c, "ELECT svc4 v1\n");
    const char *got = h_recv(c, H_WAIT_MS);
    unsigned long long fence = 0;
    ck_assert_msg(got && sscanf(got, "OK %llu", &fence) == 1, "ELECT answered %s", got);
    char want[128];
    snprintf(want, sizeof(want), "NONE|%llu v1", fence);
    ck_assert_str_eq(await_lines("out", 2), want);
    h_send(c, "RESIGN svc4\n");
    H_EXPECT(c, "OK 1");
    snprintf(want, sizeof(want), "NONE|%llu v1|NONE", fence);
    ck_assert_str_eq(await_lines("out", 3), want);
    kill(pid, SIGTERM);
    ck_assert_int_eq(reap(pid), 128 + SIGTERM);
    h_close(c);
}
END_TEST

/* In a pipeline whose reader has gone, --observe exits 0 at its next line,
 * saying nothing. */
START_TEST(observe_quiet_on_epipe) {
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    char err[600];
    snprintf(err, sizeof(err), "%s/err", h_dir());
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int fd = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(fds[1], 1);
        if (fd >= 0) dup2(fd, 2);
        close(fds[0]);
        setenv("DLOCK_SOCKET", h_dlockd_sock(daemon_idx), 1);
        execl(dlock_bin(), dlock_bin(), "--observe", "svc5", (char *)NULL);
        _exit(99);
    }
    close(fds[1]);
    char buf[64];
    ssize_t n = read(fds[0], buf, sizeof(buf));
    ck_assert_int_eq(n, 5); /* "NONE\n" */
    close(fds[0]);
    h_conn_t *c = h_connect_index(daemon_idx);
    h_send(c, "ELECT svc5 v\n");
    H_EXPECT_PREFIX(c, "OK ");
    ck_assert_int_eq(reap(pid), 0);
    ck_assert_str_eq(slurp("err"), "");
    h_close(c);
}
END_TEST

/* --leader: the leader now; 1 and NONE when nobody leads. */
START_TEST(leader_one_shot) {
    const char *a[] = {"--leader", "svc6", NULL};
    ck_assert_int_eq(run_dlock(a), 1);
    ck_assert_str_eq(slurp("out"), "NONE");
    h_conn_t *c = h_connect_index(daemon_idx);
    h_send(c, "ELECT svc6 node-b\n");
    const char *got = h_recv(c, H_WAIT_MS);
    unsigned long long fence = 0;
    ck_assert_msg(got && sscanf(got, "OK %llu", &fence) == 1, "ELECT answered %s", got);
    ck_assert_int_eq(run_dlock(a), 0);
    char want[64];
    snprintf(want, sizeof(want), "%llu node-b", fence);
    ck_assert_str_eq(slurp("out"), want);
    h_close(c);
}
END_TEST

START_TEST(elect_bad_usage_is_64) {
    const char *a[] = {"--elect", "x", "-s", "true", NULL};
    ck_assert_int_eq(run_dlock(a), 64);
    const char *b[] = {"--elect", "x", NULL};
    ck_assert_int_eq(run_dlock(b), 64);
    const char *c[] = {"--elect", "x", "--value", "a b", "true", NULL};
    ck_assert_int_eq(run_dlock(c), 64);
    const char *d[] = {"--value", "v", "x", "true", NULL};
    ck_assert_int_eq(run_dlock(d), 64);
    const char *e[] = {"--observe", "x", "true", NULL};
    ck_assert_int_eq(run_dlock(e), 64);
}
END_TEST

/* An election's name held as a lock: ERR KIND, 65. */
START_TEST(elect_other_kind_is_65) {
    h_conn_t *c = h_connect_index(daemon_idx);
    h_send(c, "LOCK svc7\n");
    H_EXPECT_PREFIX(c, "OK ");
    const char *a[] = {"--elect", "svc7", "true", NULL};
    ck_assert_int_eq(run_dlock(a), 65);
    h_close(c);
}
END_TEST

/* dlock -m: the names taken at once, DLOCK_NAMES and DLOCK_FENCES for the
 * command, all released after; -n gives up while one is held, taking none. */
START_TEST(multi_runs_command_holding_all) {
    char script[700];
    snprintf(script, sizeof(script),
             "echo \"$DLOCK_NAMES|$DLOCK_FENCES|${DLOCK_NAME-unset}\" > %s/menv", h_dir());
    const char *a[] = {"-m", "ma", "--multi", "m,b", "-m", "mc", "--", "sh", "-c", script, NULL};
    ck_assert_int_eq(run_dlock(a), 0);
    char names[64], rest[128];
    unsigned long long f[3] = {0};
    ck_assert_int_eq(sscanf(slurp("menv"), "%63[^|]|%llu %llu %llu|%127s", names, &f[0], &f[1],
                            &f[2], rest), 5);
    ck_assert_str_eq(names, "ma m,b mc");
    ck_assert_str_eq(rest, "unset");
    ck_assert_uint_gt(f[0], 0);
    ck_assert_uint_gt(f[1], 0);
    ck_assert_uint_gt(f[2], 0);
    h_conn_t *c = h_connect_index(daemon_idx);
    h_send(c, "STATUS m,b\n");
    H_EXPECT(c, "OK FREE");
    /* One name held elsewhere: -n gives up (1, or -E), the others untouched. */
    h_send(c, "LOCK mc\n");
    H_EXPECT_PREFIX(c, "OK ");
    const char *n[] = {"-n", "-m", "ma", "-m", "mc", "true", NULL};
    ck_assert_int_eq(run_dlock(n), 1);
    const char *w[] = {"-w", "0.2", "-E", "9", "-m", "ma", "-m", "mc", "true", NULL};
    ck_assert_int_eq(run_dlock(w), 9);
    h_send(c, "STATUS ma\n");
    H_EXPECT(c, "OK FREE");
    h_send(c, "UNLOCK mc\n");
    H_EXPECT(c, "OK 0");
    h_close(c);
}
END_TEST

/* The loss of one name of the set stops the command: exit 79. */
START_TEST(multi_lost_name_stops_command) {
    long long t0 = h_now_ms();
    const char *a[] = {"-l", "300", "-k", "1", "-m", "ml1", "-m", "ml2", "sh", "-c",
                       "sleep 30 & wait", NULL};
    ck_assert_int_eq(run_dlock(a), 79);
    ck_assert_int_lt(h_now_ms() - t0, 10000);
}
END_TEST

START_TEST(multi_bad_usage_is_64) {
    const char *cases[][8] = {
        {"-m", "a", NULL},
        {"-m", "a", "-m", "a", "true", NULL},
        {"-m", "a b", "true", NULL},
        {"-m", "a", "-s", "true", NULL},
        {"-m", "a", "--fair", "true", NULL},
        {"-m", "a", "--permits", "2", "true", NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int rc = run_dlock(cases[i]);
        ck_assert_msg(rc == 64, "case %zu: exit %d, wanted 64", i, rc);
    }
    /* 65 names. */
    const char *many[2 * 65 + 2];
    char names[65][8];
    for (int i = 0; i < 65; i++) {
        snprintf(names[i], sizeof(names[i]), "n%d", i);
        many[2 * i] = "-m";
        many[2 * i + 1] = names[i];
    }
    many[130] = "true";
    many[131] = NULL;
    ck_assert_int_eq(run_dlock(many), 64);
    many[128] = "true"; /* 64 names: fine */
    many[129] = NULL;
    ck_assert_int_eq(run_dlock(many), 0);
}
END_TEST

/* -m with a mode of its own (an election, a query) is a usage error, not
 * silently dropped. --observe comes last: ignoring -m there waits for ever. */
START_TEST(multi_excludes_other_modes_64) {
    const char *cases[][8] = {
        {"-m", "a", "--elect", "e", "true", NULL},
        {"--leader", "e", "-m", "a", NULL},
        {"-m", "a", "--status", "a", NULL},
        {"-m", "a", "--who", "a", NULL},
        {"-m", "a", "--force-unlock", "a", NULL},
        {"-m", "a", "--info", NULL},
        {"-m", "a", "--ping", NULL},
        {"-m", "a", "--metrics", NULL},
        {"-m", "a", "--observe", "e", NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int rc = run_dlock(cases[i]);
        ck_assert_msg(rc == 64, "case %zu (%s): exit %d, wanted 64", i, cases[i][2], rc);
    }
}
END_TEST

/* ---- count-down latches ------------------------------------------------------ */

/* --latch-set N NAME sets the count once (0 either way, -v says which);
 * --countdown prints the count left; --await waits for 0, then exits 0. */
START_TEST(latch_set_countdown_await) {
    const char *set[] = {"--latch-set", "2", "batch", NULL};
    ck_assert_int_eq(run_dlock(set), 0);
    ck_assert_str_eq(slurp("out"), "");
    const char *again[] = {"-v", "--latch-set", "5", "batch", NULL};
    ck_assert_int_eq(run_dlock(again), 0);
    ck_assert_msg(strstr(slurp("out"), "set already") != NULL, "%s", slurp("out"));
    const char *v[] = {"-v", "--latch-set", "3", "batch2", NULL};
    ck_assert_int_eq(run_dlock(v), 0);
    ck_assert_msg(strstr(slurp("out"), "latch set to 3") != NULL, "%s", slurp("out"));

    const char *aw[] = {"--await", "batch", NULL};
    pid_t w = spawn_dlock(aw);
    await_waiters(1);
    const char *down[] = {"--countdown", "batch", NULL};
    ck_assert_int_eq(run_dlock(down), 0);
    ck_assert_str_eq(slurp("out"), "1");
    ck_assert_int_eq(waitpid(w, NULL, WNOHANG), 0); /* still waiting at 1 */
    ck_assert_int_eq(run_dlock(down), 0);
    ck_assert_str_eq(slurp("out"), "0");
    ck_assert_int_eq(reap(w), 0);
    /* No latch counts as 0. */
    ck_assert_int_eq(run_dlock(aw), 0);
    ck_assert_int_eq(run_dlock(down), 0);
    ck_assert_str_eq(slurp("out"), "0");
}
END_TEST

/* --await with -n or -w: -E's code (default 1) when the count is not 0 in
 * time; -v says the count. */
START_TEST(latch_await_nonblock_wait_and_code) {
    const char *set[] = {"--latch-set", "1", "gate", NULL};
    ck_assert_int_eq(run_dlock(set), 0);
    const char *n[] = {"-n", "--await", "gate", NULL};
    ck_assert_int_eq(run_dlock(n), 1);
    const char *w[] = {"-w", "0.2", "-E", "9", "--await", "gate", NULL};
    ck_assert_int_eq(run_dlock(w), 9);
    const char *vn[] = {"-v", "-n", "--await", "gate", NULL};
    ck_assert_int_eq(run_dlock(vn), 1);
    ck_assert_msg(strstr(slurp("out"), "count still 1") != NULL, "%s", slurp("out"));
    const char *down[] = {"--countdown", "gate", NULL};
    ck_assert_int_eq(run_dlock(down), 0);
    ck_assert_int_eq(run_dlock(n), 0);
    ck_assert_int_eq(run_dlock(w), 0);
}
END_TEST

/* A name that is another kind: 65 with dlockd's words. */
START_TEST(latch_other_kind_is_65) {
    h_conn_t *c = h_connect_index(daemon_idx);
    h_send(c, "LOCK held\n");
    H_EXPECT_PREFIX(c, "OK ");
    const char *set[] = {"--latch-set", "1", "held", NULL};
    const char *down[] = {"--countdown", "held", NULL};
    const char *aw[] = {"--await", "held", NULL};
    const char *const *all[] = {set, down, aw};
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(run_dlock(all[i]), 65);
        ck_assert_msg(strstr(slurp("out"), "held is held as a plain lock") != NULL, "%s",
                      slurp("out"));
    }
    h_close(c);
}
END_TEST

START_TEST(latch_bad_usage_is_64) {
    const char *bad[][8] = {
        {"--latch-set", "0", "x", NULL},
        {"--latch-set", "two", "x", NULL},
        {"--latch-set", "1", NULL},
        {"--latch-set", "1", "x", "y", NULL},
        {"--countdown", "x", "true", NULL},
        {"-n", "--countdown", "x", NULL},
        {"-w", "1", "--latch-set", "1", "x", NULL},
        {"--await", "x", "--countdown", "y", NULL},
        {"--await", "x", "--permits", "1", NULL},
        {"-l", "100", "--await", "x", NULL},
        {"-n", "-w", "1", "--await", "x", NULL},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int rc = run_dlock(bad[i]);
        ck_assert_msg(rc == 64, "case %zu (%s %s): %d: %s", i, bad[i][0], bad[i][1], rc,
                      slurp("out"));
    }
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("dlock command");
    TCase *tc = tcase_create("cli");
    tcase_add_checked_fixture(tc, setup, h_teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, exit_status_passes_through);
    tcase_add_test(tc, multi_excludes_other_modes_64);
    tcase_add_test(tc, multi_runs_command_holding_all);
    tcase_add_test(tc, multi_lost_name_stops_command);
    tcase_add_test(tc, multi_bad_usage_is_64);
    tcase_add_test(tc, environment_has_name_and_fence);
    tcase_add_test(tc, nonblock_wait_and_code);
    tcase_add_test(tc, lost_lock_stops_command);
    tcase_add_test(tc, daemon_gone_stops_command);
    tcase_add_test(tc, signals_are_forwarded);
    tcase_add_test(tc, eight_loops_count_to_200);
    tcase_add_test(tc, bad_usage_is_64);
    tcase_add_test(tc, unreachable_daemon_is_69);
    tcase_add_test(tc, unreachable_daemon_names_socket);
    tcase_add_test(tc, permission_denied_names_socket_and_hints);
    tcase_add_test(tc, force_unlock_denied_is_77);
    tcase_add_test(tc, query_forms);
    tcase_add_test(tc, socket_option_is_S);
    tcase_add_test(tc, shared_readers_hold_together);
    tcase_add_test(tc, exclusive_excludes);
    tcase_add_test(tc, other_kind_is_65);
    tcase_add_test(tc, old_s_socket_form_is_a_lock_name);
    tcase_add_test(tc, seminit_alone);
    tcase_add_test(tc, permits_run_commands_side_by_side);
    tcase_add_test(tc, seminit_and_permits_together);
    tcase_add_test(tc, lost_permits_stop_command);
    tcase_add_test(tc, semaphore_other_kind_is_65);
    tcase_add_test(tc, semaphore_bad_usage_is_64);
    tcase_add_test(tc, fair_runs_command);
    tcase_add_test(tc, fair_commands_run_in_order);
    tcase_add_test(tc, fair_killed_waiter_lets_next_go);
    tcase_add_test(tc, fair_other_kind_is_65);
    tcase_add_test(tc, fair_bad_usage_is_64);
    tcase_add_test(tc, elect_runs_command_and_resigns);
    tcase_add_test(tc, elect_waits_then_leads);
    tcase_add_test(tc, elect_lost_is_75);
    tcase_add_test(tc, observe_prints_changes);
    tcase_add_test(tc, observe_quiet_on_epipe);
    tcase_add_test(tc, leader_one_shot);
    tcase_add_test(tc, elect_bad_usage_is_64);
    tcase_add_test(tc, elect_other_kind_is_65);
    tcase_add_test(tc, latch_set_countdown_await);
    tcase_add_test(tc, latch_await_nonblock_wait_and_code);
    tcase_add_test(tc, latch_other_kind_is_65);
    tcase_add_test(tc, latch_bad_usage_is_64);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    return h_main(suite());
}
