/* Integration-test harness: starts real servers, talks to them, cleans up.
 * SPDX-License-Identifier: MIT */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct proc_s {
    pid_t pid;
    int is_redis;
    int port;          /* TCP or TLS port of a redis-server by index; 0: none */
    char sock[256];
    char log[512];
    char conf[512];    /* a dlockd's config file */
    char args[2048];   /* a redis-server's or sentinel's argv, NUL-separated, to restart it */
    size_t nargs;
    char auth[128];    /* a redis-server's or Sentinel's requirepass; "": none */
    pid_t next;        /* a dlockd's new process seen serving while the old one runs */
} proc_t;

static char run_dir[64];      /* made by h_main, removed at its exit */
static char test_dir[128];     /* per test, inside run_dir */
static proc_t procs[H_MAX_PROCS];
static int nprocs;
static int redis_index = -1;
static int redis_seq;          /* redis-servers by index, this test */
static pid_t main_pid;

long long h_now_ms(void) {
    return h_now_us() / 1000;
}

long long h_now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void remove_tree(const char *dir) {
    if (dir[0] == '\0') return;
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "harness: could not remove %s\n", dir);
}

static void kill_all(void) {
    for (int i = 0; i < nprocs; i++) {
        if (procs[i].next > 0) { /* a hand-over cut short: the new one too */
            kill(procs[i].next, SIGKILL);
            waitpid(procs[i].next, NULL, 0);
            procs[i].next = 0;
        }
        if (procs[i].pid > 0) {
            kill(procs[i].pid, SIGKILL);
            waitpid(procs[i].pid, NULL, 0);
            procs[i].pid = 0;
        }
    }
}

static void at_exit(void) {
    kill_all();
    if (getpid() == main_pid) remove_tree(run_dir);
}

int h_main(Suite *s) {
    main_pid = getpid();
    snprintf(run_dir, sizeof(run_dir), "/tmp/dlockd-test.XXXXXX");
    if (mkdtemp(run_dir) == NULL) {
        perror("mkdtemp");
        return 2;
    }
    atexit(at_exit);
    signal(SIGPIPE, SIG_IGN);
    umask(077); /* config files the tests write: dlockd, as root, refuses writable ones */
    /* glibc fills what malloc returns (and free leaves) with this byte, so
     * that a daemon reading memory it never set misbehaves here rather
     * than by luck in production (AddressSanitizer does the same in the
     * sanitized run). */
    setenv("MALLOC_PERTURB_", "165", 0);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}

static void cluster_reset(void);

/* The links h_keep_log made in this test. */
static char kept[H_MAX_PROCS][512];
static int nkept;

void h_keep_log(int index, const char *fmt, ...) {
    char name[256];
    va_list ap;
    if (nkept >= H_MAX_PROCS) return;
    va_start(ap, fmt);
    vsnprintf(name, sizeof(name), fmt, ap);
    va_end(ap);
    mkdir(H_KEEP_DIR, 0700);
    char *path = kept[nkept];
    snprintf(path, sizeof(kept[0]), "%s/%s.log", H_KEEP_DIR, name);
    unlink(path);
    if (link(h_dlockd_log(index), path) == 0) nkept++;
}

int h_kept(void) {
    return nkept;
}

void h_keep_passed(void) {
    for (int i = 0; i < nkept; i++) unlink(kept[i]);
    nkept = 0;
}

void h_setup(void) {
    static int counter;
    nkept = 0;
    nprocs = 0;
    redis_index = -1;
    redis_seq = 0;
    h_set_auth(NULL, NULL);
    cluster_reset();
    snprintf(test_dir, sizeof(test_dir), "%s/t%d.%d", run_dir, (int)getpid(), counter++);
    ck_assert_int_eq(mkdir(test_dir, 0700), 0);
}

static int wait_exit(pid_t pid, int timeout_ms);

/* Stops every dlockd with SIGTERM and checks that it exits 0: a crash, a
 * hang on shutdown or (under AddressSanitizer) a leak fails the test. */
void h_teardown(void) {
    char bad[512] = "";
    for (int i = 0; i < nprocs; i++) {
        proc_t *p = &procs[i];
        if (p->pid <= 0 || p->is_redis) continue;
        kill(p->pid, SIGCONT);
        kill(p->pid, SIGTERM);
        int status = wait_exit(p->pid, H_WAIT_MS);
        if (status == -1) {
            kill(p->pid, SIGKILL);
            waitpid(p->pid, NULL, 0);
        }
        p->pid = 0;
        if (bad[0] == '\0' && (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0))
            snprintf(bad, sizeof(bad), "dlockd %d did not stop cleanly (status %d), see %s", i,
                     status, p->log);
    }
    kill_all();
    if (bad[0] != '\0') {
        /* Keep the log: the test directory is removed at exit. */
        char cmd[1400];
        const char *log = strchr(bad, '/');
        snprintf(cmd, sizeof(cmd), "grep -A40 -m1 'ERROR: ' '%s' >&2 || tail -n 30 '%s' >&2",
                 log, log);
        if (system(cmd) != 0) {}
        ck_abort_msg("%s", bad);
    }
}

const char *h_dir(void) {
    return test_dir;
}

static pid_t spawn(const char *const argv[], const char *log) {
    pid_t parent = getpid();
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(127);
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        int nul = open("/dev/null", O_RDONLY);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        if (nul >= 0) dup2(nul, 0);
        execvp(argv[0], (char *const *)(uintptr_t)argv); /* never written */
        _exit(127);
    }
    return pid;
}

static int add_proc(pid_t pid, int is_redis, const char *sock, const char *log) {
    ck_assert_int_lt(nprocs, H_MAX_PROCS);
    proc_t *p = &procs[nprocs];
    p->pid = pid;
    p->is_redis = is_redis;
    p->next = 0;
    p->auth[0] = '\0';
    snprintf(p->sock, sizeof(p->sock), "%s", sock);
    snprintf(p->log, sizeof(p->log), "%s", log);
    return nprocs++;
}

static int unix_connect(const char *path) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    if (fd < 0) return -1;
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Sends ping and waits for a reply starting with want; 0 when it came. */
static int ping_once(const char *sock, const char *ping, const char *want) {
    int fd = unix_connect(sock);
    if (fd < 0) return -1;
    char buf[256];
    size_t len = 0;
    int ok = -1;
    if (write(fd, ping, strlen(ping)) == (ssize_t)strlen(ping)) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        while (len < strlen(want) && poll(&pfd, 1, 1000) == 1) {
            ssize_t n = read(fd, buf + len, sizeof(buf) - len);
            if (n <= 0) break;
            len += (size_t)n;
        }
        if (len >= strlen(want) && memcmp(buf, want, strlen(want)) == 0) ok = 0;
    }
    close(fd);
    return ok;
}

/* Waits until the server on sock answers: 0, or -1 if its process
 * exited first (then its pid is 0), or -2 after H_WAIT_MS. */
static int await_ready(int index, const char *ping, const char *want) {
    long long end = h_now_ms() + H_WAIT_MS;
    char auth_ping[300], auth_want[300];
    if (procs[index].auth[0] != '\0') { /* a server of a set with passwords */
        snprintf(auth_ping, sizeof(auth_ping), "AUTH %s\r\n%s", procs[index].auth, ping);
        snprintf(auth_want, sizeof(auth_want), "+OK\r\n%s", want);
        ping = auth_ping;
        want = auth_want;
    }
    while (h_now_ms() < end) {
        if (ping_once(procs[index].sock, ping, want) == 0) return 0;
        int status;
        if (waitpid(procs[index].pid, &status, WNOHANG) == procs[index].pid) {
            procs[index].pid = 0;
            return -1;
        }
        usleep(2000);
    }
    return -2;
}

/* Waits until the server on sock answers, or its process exits. */
static void wait_ready(int index, const char *ping, const char *want) {
    int r = await_ready(index, ping, want);
    if (r == -1)
        ck_abort_msg("%s exited before it was ready (see %s)", procs[index].sock,
                     procs[index].log);
    if (r == -2) ck_abort_msg("%s not ready within %d ms", procs[index].sock, H_WAIT_MS);
}

const char *h_redis_sock(void) {
    ck_assert_int_ge(redis_index, 0);
    return procs[redis_index].sock;
}

void h_redis_start(void) {
    h_redis_start_args(NULL);
}

void h_redis_start_args(const char *const extra[]) {
    char sock[256], log[512];
    snprintf(sock, sizeof(sock), "%s/redis.sock", test_dir);
    snprintf(log, sizeof(log), "%s/redis.log", test_dir);
    const char *argv[64] = {"redis-server", "--port", "0", "--unixsocket", sock,
                      "--unixsocketperm", "700", "--save", "", "--appendonly", "no",
                      "--dir", test_dir, NULL};
    size_t n = 13;
    const char *password = NULL;
    for (size_t i = 0; extra != NULL && extra[i] != NULL; i++) {
        ck_assert_uint_lt(n, sizeof(argv) / sizeof(argv[0]) - 1);
        argv[n++] = extra[i];
        if (strcmp(extra[i], "--requirepass") == 0 && extra[i + 1] != NULL)
            password = extra[i + 1];
    }
    argv[n] = NULL;
    pid_t pid = spawn(argv, log);
    if (redis_index >= 0) {
        procs[redis_index].pid = pid;
    } else {
        redis_index = add_proc(pid, 1, sock, log);
    }
    if (password == NULL) {
        wait_ready(redis_index, "PING\r\n", "+PONG");
    } else {
        char ping[300];
        snprintf(ping, sizeof(ping), "AUTH %s\r\nPING\r\n", password);
        wait_ready(redis_index, ping, "+OK\r\n+PONG");
    }
}

static int wait_exit(pid_t pid, int timeout_ms) {
    long long end = h_now_ms() + timeout_ms;
    int status;
    while (h_now_ms() < end) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) return status;
        if (r < 0) return -1;
        usleep(1000);
    }
    return -1;
}

void h_redis_stop(int sig) {
    ck_assert_int_ge(redis_index, 0);
    proc_t *p = &procs[redis_index];
    if (p->pid <= 0) return;
    kill(p->pid, sig);
    if (sig == SIGSTOP) return;
    if (wait_exit(p->pid, H_WAIT_MS) == -1) {
        kill(p->pid, SIGKILL);
        waitpid(p->pid, NULL, 0);
    }
    p->pid = 0;
}

void h_redis_signal(int sig) {
    ck_assert_int_ge(redis_index, 0);
    ck_assert_int_gt(procs[redis_index].pid, 0); /* kill(0, ...) would hit us */
    kill(procs[redis_index].pid, sig);
}

const char *h_run(const char *const argv[]) {
    static char out[8192];
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int nul = open("/dev/null", O_RDONLY);
        if (nul >= 0) dup2(nul, 0);
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        close(fds[0]);
        execvp(argv[0], (char *const *)(uintptr_t)argv);
        _exit(127);
    }
    close(fds[1]);
    size_t len = 0;
    for (;;) {
        ssize_t r = read(fds[0], out + len, sizeof(out) - 1 - len);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        len += (size_t)r;
    }
    close(fds[0]);
    waitpid(pid, NULL, 0);
    while (len > 0 && out[len - 1] == '\n') len--;
    out[len] = '\0';
    return out;
}

long long h_redis_calls(const char *command) {
    char cmd[512], want[64], line[1024];
    long long calls = 0;
    snprintf(cmd, sizeof(cmd), "redis-cli -s '%s' INFO commandstats", h_redis_sock());
    snprintf(want, sizeof(want), "cmdstat_%s:calls=", command);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    while (fgets(line, sizeof(line), p) != NULL)
        if (strncmp(line, want, strlen(want)) == 0) calls = strtoll(line + strlen(want), NULL, 10);
    pclose(p);
    return calls;
}

const char *h_redis_cli(const char *fmt, ...) {
    static char out[4096];
    char args[2048], cmd[3072];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof(args), fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof(cmd), "redis-cli -s '%s' %s 2>&1", h_redis_sock(), args);
    FILE *f = popen(cmd, "r");
    ck_assert_ptr_nonnull(f);
    out[0] = '\0';
    if (fgets(out, sizeof(out), f) != NULL) out[strcspn(out, "\n")] = '\0';
    /* drain the rest */
    char skip[512];
    while (fgets(skip, sizeof(skip), f) != NULL) {}
    pclose(f);
    return out;
}

const char *h_redis_argv(const char *const args[]) {
    const char *argv[32] = {"redis-cli", "-s", h_redis_sock()};
    size_t n = 3;
    for (size_t i = 0; args[i] != NULL; i++) {
        ck_assert_uint_lt(n, sizeof(argv) / sizeof(argv[0]) - 1);
        argv[n++] = args[i];
    }
    argv[n] = NULL;
    return h_run(argv);
}

void h_redis_await_subscribers(const char *channel, int n) {
    const char *a[] = {"PUBSUB", "NUMSUB", channel, NULL};
    long long end = h_now_ms() + H_WAIT_MS;
    for (;;) {
        const char *out = h_redis_argv(a); /* raw: "<channel>\n<count>" */
        const char *nl = strrchr(out, '\n');
        if (nl != NULL && atoi(nl + 1) >= n) return;
        ck_assert_msg(h_now_ms() < end, "%s never had %d subscribers: '%s'", channel, n, out);
        usleep(2000);
    }
}

void h_redis_await_subscribed(const char *channel) {
    h_redis_await_subscribers(channel, 1);
}

long long h_redis_now_ms(void) {
    const char *a[] = {"TIME", NULL};
    long long s = 0, us = 0;
    const char *out = h_redis_argv(a);
    ck_assert_msg(sscanf(out, "%lld\n%lld", &s, &us) == 2, "TIME: '%s'", out);
    return s * 1000 + us / 1000;
}

long long h_wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

h_conn_t *h_redis_subscriber(const char *channel) {
    h_conn_t *s = h_connect(h_redis_sock());
    h_send(s, "SUBSCRIBE %s\r\n", channel);
    /* *3 $9 subscribe $<n> <channel> :1 */
    for (int i = 0; i < 6; i++) {
        const char *l = h_recv(s, H_WAIT_MS);
        ck_assert_msg(l != NULL, "SUBSCRIBE %s: no reply", channel);
        if (i == 5) ck_assert_str_eq(l, ":1\r");
    }
    return s;
}

void h_await_waiters(h_conn_t *adm, long long want) {
    long long end = h_now_ms() + H_WAIT_MS;
    while (h_info_value(adm, "waiters") != want) {
        ck_assert_msg(h_now_ms() < end, "never saw %lld waiters", want);
        usleep(1000);
    }
}

void h_expect_reply(h_conn_t *c, const char *request, const char *want) {
    h_send(c, "%s\n", request);
    const char *l = h_recv(c, H_WAIT_MS);
    ck_assert_msg(l != NULL && strcmp(l, want) == 0, "%s: got '%s', wanted '%s'", request,
                  l ? l : "(nothing)", want);
}

void h_expect_silence(h_conn_t *c, int ms, const char *why) {
    const char *l = h_recv(c, ms);
    ck_assert_msg(l == NULL, "%s: got '%s'", why, l ? l : "");
}

void h_expect_event(h_conn_t *c, const char *want, int timeout_ms, const char *what) {
    const char *l = h_recv(c, timeout_ms);
    ck_assert_msg(l != NULL, "%s: no '%s' within %d ms", what, want, timeout_ms);
    ck_assert_msg(strcmp(l, want) == 0, "%s: got '%s', wanted '%s'", what, l, want);
}

long long h_expect_timeout(h_conn_t *c, const char *request) {
    h_send(c, "%s\n", request);
    const char *l = h_recv(c, H_WAIT_MS);
    long long ttl = -2;
    char tail;
    ck_assert_msg(l != NULL && sscanf(l, "TIMEOUT %lld%c", &ttl, &tail) == 1 && ttl >= -1,
                  "%s: got '%s', wanted 'TIMEOUT <ttl>'", request, l ? l : "(nothing)");
    return ttl;
}

const char *h_reply(h_conn_t *c, int timeout_ms, h_events_t events) {
    long long end = h_now_ms() + timeout_ms;
    for (;;) {
        long long left = end - h_now_ms();
        const char *l = h_recv(c, left > 0 ? (int)left : 0);
        if (l == NULL || l[0] != '!') return l;
        if (events == H_EVENTS_FAIL) ck_abort_msg("unexpected event '%s'", l);
        if (events == H_EVENTS_SKIP_BUT_LOST)
            ck_assert_msg(strncmp(l, "!LOST", 5) != 0, "unexpected event '%s'", l);
    }
}

const char *h_info_line(int index) {
    static char line[H_LINE_MAX];
    h_conn_t *c = h_connect_index(index);
    h_send(c, "INFO\n");
    const char *l = h_recv(c, H_WAIT_MS);
    ck_assert_msg(l != NULL, "no INFO reply");
    snprintf(line, sizeof(line), "%s", l);
    h_close(c);
    return line;
}

void h_redis_hgetall(const char *key, char *out, size_t len) {
    const char *a[] = {"HGETALL", key, NULL};
    snprintf(out, len, "%s", h_redis_argv(a));
}

int h_free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_msg(fd >= 0, "socket: %s", strerror(errno));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    ck_assert_msg(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "bind: %s", strerror(errno));
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    close(fd);
    return ntohs(sa.sin_port);
}

/* Keeps argv in procs[index], for h_redis_restart_index. */
static void remember_args(int index, const char *const argv[]) {
    proc_t *p = &procs[index];
    size_t used = 0;
    p->nargs = 0;
    for (size_t i = 0; argv[i] != NULL; i++) {
        size_t n = strlen(argv[i]) + 1;
        ck_assert_msg(used + n <= sizeof(p->args), "arguments too long to keep");
        memcpy(p->args + used, argv[i], n);
        used += n;
        p->nargs++;
    }
}

/* Starts a redis-server by index listening as listen[] says ("%d" in an
 * argument stands for the port, "%c" for a second free port: a cluster
 * node's bus port), plus a Unix socket to see it ready. With port 0 a free
 * port is chosen, and another one if the server could not have it (the
 * second port is chosen again each time). Returns its index. */
static int redis_start_index(int port, const char *const listen[], const char *const extra[]) {
    int n = redis_seq++;
    char sock[256], log[512], dir[256], port_arg[16], bus_arg[16];
    char listen_args[16][600];
    snprintf(sock, sizeof(sock), "%s/redis-%d.sock", test_dir, n);
    snprintf(log, sizeof(log), "%s/redis-%d.log", test_dir, n);
    snprintf(dir, sizeof(dir), "%s/redis-%d", test_dir, n);
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    int index = add_proc(0, 1, sock, log);
    for (int attempt = 0; attempt < 5; attempt++) {
        int p = port != 0 ? port : h_free_port();
        snprintf(port_arg, sizeof(port_arg), "%d", p);
        const char *argv[80] = {"redis-server", "--unixsocket", sock, "--unixsocketperm", "700",
                                "--save", "", "--appendonly", "no", "--dir", dir};
        size_t argc = 11;
        for (size_t i = 0; listen[i] != NULL; i++) {
            ck_assert_uint_lt(i, sizeof(listen_args) / sizeof(listen_args[0]));
            if (strcmp(listen[i], "%d") == 0) {
                argv[argc++] = port_arg;
            } else if (strcmp(listen[i], "%c") == 0) {
                int bus;
                do bus = h_free_port(); while (bus == p);
                snprintf(bus_arg, sizeof(bus_arg), "%d", bus);
                argv[argc++] = bus_arg;
            } else {
                snprintf(listen_args[i], sizeof(listen_args[i]), "%s", listen[i]);
                argv[argc++] = listen_args[i];
            }
        }
        for (size_t i = 0; extra != NULL && extra[i] != NULL; i++) {
            ck_assert_uint_lt(argc, sizeof(argv) / sizeof(argv[0]) - 1);
            argv[argc++] = extra[i];
            if (strcmp(extra[i], "--requirepass") == 0 && extra[i + 1] != NULL)
                snprintf(procs[index].auth, sizeof(procs[index].auth), "%s", extra[i + 1]);
        }
        argv[argc] = NULL;
        unlink(sock);
        procs[index].pid = spawn(argv, log);
        procs[index].port = p;
        remember_args(index, argv);
        int r = await_ready(index, "PING\r\n", "+PONG");
        if (r == 0) return index;
        if (r == -2) ck_abort_msg("redis-server %s not ready within %d ms", sock, H_WAIT_MS);
        if (port != 0) break; /* the port was the caller's: no other */
    }
    ck_abort_msg("redis-server %s did not start (see %s)", sock, log);
    return -1;
}

int h_redis_start_tcp(int port, const char *const extra[]) {
    const char *const listen[] = {"--port", "%d", "--bind", "127.0.0.1", NULL};
    return redis_start_index(port, listen, extra);
}

int h_redis_start_tls(int port, const char *certs, int auth_clients) {
    return h_redis_start_tls_args(port, certs, auth_clients, NULL);
}

int h_redis_start_tls_args(int port, const char *certs, int auth_clients,
                           const char *const extra[]) {
    char cert[512], key[512], ca[512];
    snprintf(cert, sizeof(cert), "%s/server.crt", certs);
    snprintf(key, sizeof(key), "%s/server.key", certs);
    snprintf(ca, sizeof(ca), "%s/ca.crt", certs);
    const char *const listen[] = {"--port", "0", "--tls-port", "%d", "--bind", "127.0.0.1",
                                  "--tls-cert-file", cert, "--tls-key-file", key,
                                  "--tls-ca-cert-file", ca, "--tls-auth-clients",
                                  auth_clients ? "yes" : "no", NULL};
    return redis_start_index(port, listen, extra);
}

int h_redis_port(int index) {
    ck_assert(index >= 0 && index < nprocs && procs[index].is_redis);
    return procs[index].port;
}

const char *h_redis_sock_index(int index) {
    ck_assert(index >= 0 && index < nprocs && procs[index].is_redis);
    return procs[index].sock;
}

void h_redis_stop_index(int index, int sig) {
    ck_assert(index >= 0 && index < nprocs && procs[index].is_redis);
    proc_t *p = &procs[index];
    if (p->pid <= 0) return;
    kill(p->pid, sig);
    if (sig == SIGSTOP) return;
    if (wait_exit(p->pid, H_WAIT_MS) == -1) {
        kill(p->pid, SIGKILL);
        waitpid(p->pid, NULL, 0);
    }
    p->pid = 0;
}

void h_redis_signal_index(int index, int sig) {
    ck_assert(index >= 0 && index < nprocs && procs[index].is_redis);
    ck_assert_int_gt(procs[index].pid, 0); /* kill(0, ...) would hit us */
    kill(procs[index].pid, sig);
}

/* Runs a shell command line; its output goes to dir/openssl.log. */
static void run_in(const char *dir, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void run_in(const char *dir, const char *fmt, ...) {
    char line[2048], cmd[2600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof(cmd), "cd '%s' && %s >>openssl.log 2>&1", dir, line);
    ck_assert_msg(system(cmd) == 0, "failed: %s (see %s/openssl.log)", line, dir);
}

void h_tls_make_certs(const char *dir) {
    static const char cnf[] =
        "[req]\n"
        "distinguished_name = dn\n"
        "prompt = no\n"
        "[dn]\n"
        "CN = unused\n"
        "[ca]\n"
        "basicConstraints = critical,CA:TRUE\n"
        "keyUsage = critical,keyCertSign,cRLSign\n"
        "subjectKeyIdentifier = hash\n"
        "[server]\n"
        "basicConstraints = CA:FALSE\n"
        "keyUsage = critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage = serverAuth\n"
        "subjectAltName = IP:127.0.0.1,DNS:localhost\n"
        "[client]\n"
        "basicConstraints = CA:FALSE\n"
        "keyUsage = critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage = clientAuth\n";
    char path[512];
    snprintf(path, sizeof(path), "%s/certs.cnf", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(cnf, f);
    fclose(f);
    const char *key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    run_in(dir, "openssl req -x509 -config certs.cnf -extensions ca %s -days 2 "
                "-subj '/CN=dlockd test CA' -keyout ca.key -out ca.crt", key);
    run_in(dir, "openssl req -x509 -config certs.cnf -extensions ca %s -days 2 "
                "-subj '/CN=dlockd other CA' -keyout other-ca.key -out other-ca.crt", key);
    const char *const leaves[][2] = {{"server", "/CN=localhost"}, {"client", "/CN=dlockd test client"}};
    for (int i = 0; i < 2; i++) {
        const char *name = leaves[i][0];
        run_in(dir, "openssl req -new -config certs.cnf %s -subj '%s' -keyout %s.key -out %s.csr",
               key, leaves[i][1], name, name);
        run_in(dir, "openssl x509 -req -in %s.csr -CA ca.crt -CAkey ca.key -set_serial %d "
                    "-days 2 -extfile certs.cnf -extensions %s -out %s.crt",
               name, 100 + i, name, name);
    }
}

static const char *bin_override; /* h_dlockd_start_bin's, while it starts one */

static const char *dlockd_bin(void) {
    const char *b = getenv("DLOCKD_BIN");
    if (bin_override != NULL) return bin_override;
    return b ? b : "build/dlockd";
}

pid_t h_dlockd_spawn(const char *conf_text, const char *at, int *index) {
    static int seq;
    char conf[512], sock[256], log[512];
    int n = seq++;
    snprintf(conf, sizeof(conf), "%s/dlockd%d.conf", test_dir, n);
    if (at != NULL) snprintf(sock, sizeof(sock), "%s", at);
    else snprintf(sock, sizeof(sock), "%s/dlockd%d.sock", test_dir, n);
    snprintf(log, sizeof(log), "%s/dlockd%d.log", test_dir, n);
    FILE *f = fopen(conf, "w");
    ck_assert_ptr_nonnull(f);
    fputs(conf_text, f);
    fclose(f);
    chmod(conf, 0600); /* dlockd refuses, as root, a file others can write */
    const char *argv[] = {dlockd_bin(), "-c", conf, "-s", sock, NULL};
    /* A dlockd hands over (SIGUSR2) to a child of its own and exits: that
     * child, orphaned, becomes ours, so that teardown can stop it and see
     * how it exits. */
    ck_assert_int_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
    pid_t pid = spawn(argv, log);
    *index = add_proc(pid, 0, sock, log);
    snprintf(procs[*index].conf, sizeof(procs[*index].conf), "%s", conf);
    return pid;
}

int h_dlockd_start(const char *extra) {
    return h_dlockd_start_at(NULL, extra);
}

int h_dlockd_start_at(const char *sock, const char *extra) {
    char text[4096];
    int index;
    snprintf(text, sizeof(text),
             "[server]\nadmin_uids = 0\n"
             "[redis]\nurl = unix://%s\ncommand_timeout_ms = 1000\nconnect_timeout_ms = 500\n"
             "%s",
             redis_index >= 0 ? procs[redis_index].sock : "/nonexistent/redis.sock",
             extra ? extra : "");
    h_dlockd_spawn(text, sock, &index);
    wait_ready(index, "PING\n", "OK PONG");
    if (redis_index >= 0 && procs[redis_index].pid > 0) h_await_redis(index, 1);
    return index;
}

long long h_info_value(h_conn_t *c, const char *key) {
    h_send(c, "INFO\n");
    const char *line = h_recv(c, H_WAIT_MS);
    ck_assert_msg(line != NULL, "no INFO reply");
    char pat[64];
    snprintf(pat, sizeof(pat), " %s=", key);
    const char *p = strstr(line, pat);
    ck_assert_msg(p != NULL, "INFO lacks %s: %s", key, line);
    return atoll(p + strlen(pat));
}

void h_await_redis(int index, int up) {
    const char *want = up ? " redis=up " : " redis=down ";
    long long end = h_now_ms() + H_WAIT_MS;
    h_conn_t *c = h_connect_index(index);
    for (;;) {
        h_send(c, "INFO\n");
        const char *line = h_recv(c, H_WAIT_MS);
        ck_assert_msg(line != NULL, "no INFO reply");
        if (strstr(line, want) != NULL) break;
        ck_assert_msg(h_now_ms() < end, "dlockd %d never saw%s", index, want);
        usleep(2000);
    }
    h_close(c);
}

int h_dlockd_start_conf(const char *conf_text) {
    int index;
    h_dlockd_spawn(conf_text, NULL, &index);
    wait_ready(index, "PING\n", "OK PONG");
    return index;
}

const char *h_dlockd_sock(int index) {
    return procs[index].sock;
}

pid_t h_dlockd_pid(int index) {
    return procs[index].pid;
}

const char *h_dlockd_conf(int index) {
    return procs[index].conf;
}

int h_log_count(int index, const char *text) {
    FILE *f = fopen(procs[index].log, "r");
    char line[4096];
    int n = 0;
    if (f == NULL) return 0;
    while (fgets(line, sizeof(line), f) != NULL)
        if (strstr(line, text) != NULL) n++;
    fclose(f);
    return n;
}

void h_await_log(int index, const char *text, int want) {
    long long end = h_now_ms() + H_WAIT_MS;
    while (h_log_count(index, text) < want) {
        ck_assert_msg(h_now_ms() < end, "log has %d lines with '%s', wanted %d",
                      h_log_count(index, text), text, want);
        usleep(10000);
    }
}

const char *h_dlockd_log(int index) {
    return procs[index].log;
}

int h_dlockd_stop(int index, int sig) {
    proc_t *p = &procs[index];
    if (p->pid <= 0) return -1;
    kill(p->pid, sig);
    int status = wait_exit(p->pid, H_WAIT_MS);
    if (status == -1) {
        kill(p->pid, SIGKILL);
        waitpid(p->pid, NULL, 0);
    }
    p->pid = 0;
    return status;
}

const char *h_request_as(int index, uid_t uid, const char *request) {
    static char got[H_LINE_MAX];
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        char line[H_LINE_MAX] = "no reply";
        /* Let the unprivileged child reach the socket through the test dirs. */
        if (chmod(test_dir, 0711) != 0 || chmod(run_dir, 0711) != 0) _exit(1);
        if (setgid((gid_t)uid) == 0 && setuid(uid) == 0) {
            h_conn_t *c = h_connect_index(index);
            h_send(c, "%s\n", request);
            const char *r = h_recv(c, H_WAIT_MS);
            snprintf(line, sizeof(line), "%s", r ? r : "no reply");
        }
        if (write(p[1], line, strlen(line)) < 0) _exit(1);
        _exit(0);
    }
    close(p[1]);
    size_t len = 0;
    ssize_t n;
    while (len < sizeof(got) - 1 && (n = read(p[0], got + len, sizeof(got) - 1 - len)) > 0)
        len += (size_t)n;
    close(p[0]);
    waitpid(pid, NULL, 0);
    got[len] = '\0';
    return got;
}

void h_dirs_searchable(void) {
    ck_assert_msg(chmod(test_dir, 0711) == 0 && chmod(run_dir, 0711) == 0,
                  "chmod 0711 %s: %s", test_dir, strerror(errno));
}

void h_public_copy(const char *path, char *copy, size_t len) {
    char dir[sizeof(test_dir) + 8];
    h_dirs_searchable();
    snprintf(dir, sizeof(dir), "%s/pub", test_dir);
    ck_assert_msg(mkdir(dir, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", dir,
                  strerror(errno));
    ck_assert_int_eq(chmod(dir, 0755), 0);
    const char *base = strrchr(path, '/');
    base = base != NULL ? base + 1 : path;
    ck_assert_uint_lt((size_t)snprintf(copy, len, "%s/%s", dir, base), len);
    if (access(copy, F_OK) == 0) return;
    int in = open(path, O_RDONLY | O_CLOEXEC);
    ck_assert_msg(in >= 0, "open %s: %s", path, strerror(errno));
    int out = open(copy, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
    ck_assert_msg(out >= 0, "create %s: %s", copy, strerror(errno));
    char buf[65536];
    ssize_t n;
    while ((n = read(in, buf, sizeof(buf))) > 0)
        ck_assert_msg(write(out, buf, (size_t)n) == n, "write %s: %s", copy, strerror(errno));
    ck_assert_msg(n == 0, "read %s: %s", path, strerror(errno));
    close(in);
    ck_assert_int_eq(fchmod(out, 0755), 0); /* whatever the umask */
    ck_assert_msg(close(out) == 0, "close %s: %s", copy, strerror(errno));
}

int h_dlockd_start_kept(const char *suite, const char *extra) {
    int d = h_dlockd_start(extra);
    h_keep_log(d, "%s.%s.dlockd%d", suite, tcase_name(), d);
    return d;
}

int h_dlockd_start_bin(const char *bin, const char *extra) {
    bin_override = bin;
    int index = h_dlockd_start_at(NULL, extra);
    bin_override = NULL;
    return index;
}

/* INFO asked on a connection of its own, answered by deadline: 0 and the
 * line in out, or -1 on no answer. A connection the daemon closes fails
 * the test: a hand-over closes none, the ones it accepts meanwhile too. */
static int info_fresh(int index, long long deadline, char *out, size_t len) {
    int fd = unix_connect(procs[index].sock);
    size_t got = 0;
    if (fd < 0) return -1;
    if (write(fd, "INFO\n", 5) != 5) {
        close(fd);
        return -1;
    }
    for (;;) {
        char *lf = memchr(out, '\n', got);
        if (lf != NULL) {
            *lf = '\0';
            close(fd);
            return 0;
        }
        long long left = deadline - h_now_ms();
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (left <= 0 || got + 1 >= len || poll(&pfd, 1, (int)left) != 1) break;
        ssize_t n = read(fd, out + got, len - 1 - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            close(fd);
            ck_abort_msg("dlockd %d closed a connection that asked INFO (%s)", index,
                         n == 0 ? "EOF" : strerror(errno));
        }
        got += (size_t)n;
    }
    close(fd);
    return -1;
}

/* The number after " key=" in an INFO line; -1 if there is none. */
static long long info_key(const char *line, const char *key) {
    char pat[64];
    snprintf(pat, sizeof(pat), " %s=", key);
    const char *p = strstr(line, pat);
    return p != NULL ? atoll(p + strlen(pat)) : -1;
}

/* INFO's pid, upgrades and upgrade_failures now; the pid must be the one
 * the harness tracks. */
static void upgrade_counts(int index, long long *upgrades, long long *failures) {
    char line[H_LINE_MAX];
    ck_assert_msg(info_fresh(index, h_now_ms() + H_WAIT_MS, line, sizeof(line)) == 0,
                  "dlockd %d: no INFO reply", index);
    long long pid = info_key(line, "pid");
    *upgrades = info_key(line, "upgrades");
    *failures = info_key(line, "upgrade_failures");
    ck_assert_msg(pid > 0 && *upgrades >= 0 && *failures >= 0,
                  "dlockd %d: INFO lacks pid, upgrades or upgrade_failures: %s", index, line);
    ck_assert_msg(pid == procs[index].pid, "dlockd %d: INFO says pid=%lld, the harness has %d",
                  index, pid, (int)procs[index].pid);
}

/* Shows the log's lines about hand-overs on stderr. */
static void show_upgrade_log(int index) {
    char cmd[700];
    snprintf(cmd, sizeof(cmd), "grep -i 'upgrade' '%s' | tail -n 20 >&2", procs[index].log);
    if (system(cmd) != 0) {}
}

/* Waits (H_UPGRADE_MS) until INFO's upgrades or upgrade_failures went
 * past the counts given; 1 for a hand-over, 0 for a failed one. */
static int await_upgrade(int index, long long upgrades, long long failures) {
    char line[H_LINE_MAX];
    long long end = h_now_ms() + H_UPGRADE_MS;
    for (;;) {
        if (info_fresh(index, end, line, sizeof(line)) == 0) {
            if (info_key(line, "upgrades") > upgrades) return 1;
            if (info_key(line, "upgrade_failures") > failures) return 0;
        }
        if (h_now_ms() >= end) {
            show_upgrade_log(index);
            ck_abort_msg("dlockd %d: neither upgrades (%lld) nor upgrade_failures (%lld) went up "
                         "within %d ms", index, upgrades, failures, H_UPGRADE_MS);
        }
        usleep(5000);
    }
}

/* The parent pid of process pid, from /proc; -1 if it is gone. */
static pid_t parent_of(pid_t pid) {
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL) return -1;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the command may hold anything */
    int ppid = -1;
    if (p == NULL || sscanf(p + 1, " %*c %d", &ppid) != 1) return -1;
    return (pid_t)ppid;
}

pid_t h_dlockd_track_upgrade(int index) {
    proc_t *p = &procs[index];
    pid_t old = p->pid;
    char line[H_LINE_MAX];
    long long end = h_now_ms() + H_UPGRADE_MS, pid = -1;
    for (;;) {
        if (info_fresh(index, end, line, sizeof(line)) == 0) {
            pid = info_key(line, "pid");
            ck_assert_msg(pid > 0, "dlockd %d: INFO lacks pid: %s", index, line);
            if (pid != old) break;
        }
        ck_assert_msg(h_now_ms() < end, "dlockd %d: INFO still says pid=%lld after %d ms", index,
                      pid, H_UPGRADE_MS);
        usleep(5000);
    }
    p->next = (pid_t)pid;
    int status = wait_exit(old, H_WAIT_MS);
    ck_assert_msg(status != -1, "dlockd %d: pid %d still runs %d ms after pid %lld took over",
                  index, (int)old, H_WAIT_MS, pid);
    p->pid = (pid_t)pid;
    p->next = 0;
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "dlockd %d: pid %d, handing over to %lld, ended with status %d (see %s)", index,
                  (int)old, pid, status, p->log);
    ck_assert_msg(parent_of(p->pid) == getpid(),
                  "dlockd %d: the new pid %d is not the harness's child (its parent: %d)", index,
                  (int)p->pid, (int)parent_of(p->pid));
    return p->pid;
}

pid_t h_dlockd_upgrade(int index) {
    return h_dlockd_upgrade_with(index, NULL, NULL);
}

pid_t h_dlockd_upgrade_with(int index, void (*between)(void *), void *data) {
    long long upgrades, failures;
    upgrade_counts(index, &upgrades, &failures);
    ck_assert_int_eq(kill(procs[index].pid, SIGUSR2), 0);
    if (between != NULL) between(data);
    if (!await_upgrade(index, upgrades, failures)) {
        show_upgrade_log(index);
        ck_abort_msg("dlockd %d: the hand-over failed (upgrade_failures went past %lld; see %s)",
                     index, failures, procs[index].log);
    }
    return h_dlockd_track_upgrade(index);
}

void h_dlockd_upgrade_fails(int index) {
    long long upgrades, failures, now_upgrades, now_failures;
    pid_t pid = procs[index].pid;
    upgrade_counts(index, &upgrades, &failures);
    ck_assert_int_eq(kill(pid, SIGUSR2), 0);
    if (await_upgrade(index, upgrades, failures)) {
        h_dlockd_track_upgrade(index); /* so that teardown stops the new one */
        ck_abort_msg("dlockd %d: handed over (upgrades went past %lld), wanted a failure", index,
                     upgrades);
    }
    upgrade_counts(index, &now_upgrades, &now_failures); /* and the pid is the same */
    ck_assert_msg(now_upgrades == upgrades && now_failures == failures + 1,
                  "dlockd %d: upgrades %lld -> %lld, upgrade_failures %lld -> %lld", index,
                  upgrades, now_upgrades, failures, now_failures);
    ck_assert_msg(waitpid(pid, NULL, WNOHANG) == 0, "dlockd %d: pid %d is gone", index, (int)pid);
}

pid_t h_dlockd_upgrade_try(int index) {
    long long upgrades, failures, now_upgrades, now_failures;
    pid_t pid = procs[index].pid;
    upgrade_counts(index, &upgrades, &failures);
    ck_assert_int_eq(kill(pid, SIGUSR2), 0);
    if (await_upgrade(index, upgrades, failures)) return h_dlockd_track_upgrade(index);
    upgrade_counts(index, &now_upgrades, &now_failures);
    ck_assert_msg(now_upgrades == upgrades && now_failures == failures + 1,
                  "dlockd %d: upgrades %lld -> %lld, upgrade_failures %lld -> %lld", index,
                  upgrades, now_upgrades, failures, now_failures);
    return 0;
}

int h_dlockd_test_conf(const char *conf_text, char *out, size_t outlen) {
    char path[600], cmd[2048];
    snprintf(path, sizeof(path), "%s/t.conf", h_dir());
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(conf_text, f);
    fclose(f);
    const char *bin = getenv("DLOCKD_BIN") ? getenv("DLOCKD_BIN") : "build/dlockd";
    snprintf(cmd, sizeof(cmd), "%s -t -c %s 2>&1", bin, path);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    out[0] = '\0';
    if (fgets(out, (int)outlen, p) == NULL) out[0] = '\0';
    out[strcspn(out, "\n")] = '\0';
    char skip[512];
    while (fgets(skip, sizeof(skip), p) != NULL) {}
    int rc = pclose(p);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

h_conn_t *h_connect(const char *sock) {
    h_conn_t *c = calloc(1, sizeof(*c));
    ck_assert_ptr_nonnull(c);
    c->fd = unix_connect(sock);
    ck_assert_msg(c->fd >= 0, "connect %s: %s", sock, strerror(errno));
    return c;
}

h_conn_t *h_connect_index(int dlockd) {
    return h_connect(h_dlockd_sock(dlockd));
}

void h_send_raw(h_conn_t *c, const void *data, size_t len) {
    const char *p = data;
    while (len > 0) {
        ssize_t n = write(c->fd, p, len);
        if (n < 0 && errno == EINTR) continue;
        ck_assert_msg(n > 0, "write: %s", strerror(errno));
        p += n;
        len -= (size_t)n;
    }
}

void h_send(h_conn_t *c, const char *fmt, ...) {
    char buf[H_LINE_MAX];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    ck_assert(n >= 0 && (size_t)n < sizeof(buf));
    h_send_raw(c, buf, (size_t)n);
}

/* Reads into c->buf; returns bytes read, 0 on EOF, -1 on timeout. */
static int fill(h_conn_t *c, long long deadline_ms) {
    for (;;) {
        long long left = deadline_ms - h_now_ms();
        if (left < 0) left = 0;
        struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
        int r = poll(&pfd, 1, (int)left);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        ssize_t n = read(c->fd, c->buf + c->len, sizeof(c->buf) - c->len);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return 0; /* ECONNRESET counts as closed */
        c->len += (size_t)n;
        return (int)n;
    }
}

const char *h_recv(h_conn_t *c, int timeout_ms) {
    long long deadline = h_now_ms() + timeout_ms;
    for (;;) {
        char *lf = memchr(c->buf, '\n', c->len);
        if (lf != NULL) {
            size_t n = (size_t)(lf - c->buf);
            memcpy(c->line, c->buf, n);
            c->line[n] = '\0';
            memmove(c->buf, lf + 1, c->len - n - 1);
            c->len -= n + 1;
            return c->line;
        }
        ck_assert_msg(c->len < sizeof(c->buf), "reply line longer than %d", H_LINE_MAX);
        if (fill(c, deadline) <= 0) return NULL;
    }
}

int h_eof(h_conn_t *c, int timeout_ms) {
    long long deadline = h_now_ms() + timeout_ms;
    if (c->len > 0) return 0;
    return fill(c, deadline) == 0;
}

void h_close(h_conn_t *c) {
    if (c == NULL) return;
    close(c->fd);
    free(c);
}

/* ---- replication and Sentinel ---------------------------------------------
 * One set per test: a primary, its replicas and (maybe) the Sentinels that
 * watch them, all on private TCP ports of 127.0.0.1. A small RESP client
 * over TCP asks them things; its replies are flattened to lines. */

#define H_SET_MAX   8
#define H_RESP_MS   2000    /* bound on one command to a server or Sentinel */

static int set_primary = -1;
static int set_replicas[H_SET_MAX];
static int set_nreplicas;
static int set_sentinels[H_SET_MAX];    /* proc indexes */
static int set_stopped[H_SET_MAX];      /* SIGSTOPped by h_sentinel_signal */
static int set_nsentinels;
static char set_data_pw[128];           /* h_set_auth; "": none */
static char set_sentinel_pw[128];

void h_set_auth(const char *data_pw, const char *sentinel_pw) {
    ck_assert(data_pw == NULL || strlen(data_pw) < sizeof(set_data_pw));
    ck_assert(sentinel_pw == NULL || strlen(sentinel_pw) < sizeof(set_sentinel_pw));
    snprintf(set_data_pw, sizeof(set_data_pw), "%s", data_pw ? data_pw : "");
    snprintf(set_sentinel_pw, sizeof(set_sentinel_pw), "%s", sentinel_pw ? sentinel_pw : "");
}

/* Appends a set server's password arguments (h_set_auth) to args at *n:
 * every server, the primary too (it may be demoted), both requires it and
 * uses it with its primary. */
static void set_auth_args(const char *args[], size_t *n, size_t cap) {
    if (set_data_pw[0] == '\0') return;
    ck_assert_uint_lt(*n + 4, cap);
    args[(*n)++] = "--requirepass";
    args[(*n)++] = set_data_pw;
    args[(*n)++] = "--masterauth";
    args[(*n)++] = set_data_pw;
}

/* What every server of a set gets, whichever of them ends up the primary:
 * replicas sync at once and without files, and are announced as
 * 127.0.0.1. */
static const char *const set_server_args[] = {
    "--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0",
    "--repl-diskless-load", "swapdb", "--replica-announce-ip", "127.0.0.1", NULL};

static void out_add(char *out, size_t cap, size_t *olen, const char *s, size_t n) {
    if (*olen + n + 1 > cap) n = cap > *olen + 1 ? cap - *olen - 1 : 0;
    memcpy(out + *olen, s, n);
    *olen += n;
    out[*olen] = '\0';
}

/* Appends one RESP2 reply at buf[*pos..len) to out as text, each scalar on
 * a line of its own (arrays flattened, an error as "-" and its text, a nil
 * as nothing). 1: complete, 0: more bytes needed, -1: not RESP. */
static int resp_flatten(const char *buf, size_t len, size_t *pos, char *out, size_t cap,
                        size_t *olen, int depth) {
    size_t eol = *pos;
    while (eol + 1 < len && !(buf[eol] == '\r' && buf[eol + 1] == '\n')) eol++;
    if (eol + 1 >= len || depth > 8) return depth > 8 ? -1 : 0;
    char type = buf[*pos];
    const char *text = buf + *pos + 1;
    size_t tlen = eol - *pos - 1;
    long long n = strtoll(text, NULL, 10); /* stops at the CR */
    size_t p = eol + 2;
    switch (type) {
    case '-':
        out_add(out, cap, olen, "-", 1);
        /* fall through */
    case '+':
    case ':':
        out_add(out, cap, olen, text, tlen);
        out_add(out, cap, olen, "\n", 1);
        break;
    case '$':
        if (n >= 0) {
            if (p + (size_t)n + 2 > len) return 0;
            out_add(out, cap, olen, buf + p, (size_t)n);
            out_add(out, cap, olen, "\n", 1);
            p += (size_t)n + 2;
        }
        break;
    case '*':
        for (long long i = 0; i < n; i++) {
            int r = resp_flatten(buf, len, &p, out, cap, olen, depth + 1);
            if (r <= 0) return r;
        }
        break;
    default:
        return -1;
    }
    *pos = p;
    return 1;
}

static int tcp_connect(int port, int timeout_ms) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return -1;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        struct pollfd pfd = {.fd = fd, .events = POLLOUT};
        int err = 0;
        socklen_t elen = sizeof(err);
        if (errno != EINPROGRESS || poll(&pfd, 1, timeout_ms) != 1 ||
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0 || err != 0) {
            close(fd);
            return -1;
        }
    }
    return fd;
}

/* Sends argv as one command on connection fd and flattens the reply into
 * out. 0, or -1 if there was no complete reply by end_ms (the connection
 * is then unusable). */
static int resp_call(int fd, long long end_ms, const char *const argv[], char *out, size_t cap) {
    static char buf[65536];
    char req[4096];
    size_t rlen = 0, argc = 0;
    while (argv[argc] != NULL) argc++;
    rlen += (size_t)snprintf(req, sizeof(req), "*%zu\r\n", argc);
    for (size_t i = 0; i < argc; i++) {
        ck_assert_uint_lt(rlen + strlen(argv[i]) + 32, sizeof(req));
        rlen += (size_t)snprintf(req + rlen, sizeof(req) - rlen, "$%zu\r\n%s\r\n",
                                 strlen(argv[i]), argv[i]);
    }
    out[0] = '\0';
    size_t sent = 0, len = 0;
    int r = 0;
    while (r == 0) {
        long long left = end_ms - h_now_ms();
        if (left <= 0) break;
        struct pollfd pfd = {.fd = fd, .events = sent < rlen ? POLLOUT : POLLIN};
        int pr = poll(&pfd, 1, (int)left);
        if (pr < 0 && errno == EINTR) continue;
        if (pr <= 0) break;
        if (sent < rlen) {
            ssize_t n = write(fd, req + sent, rlen - sent);
            if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
            if (n <= 0) break;
            sent += (size_t)n;
            continue;
        }
        ssize_t n = read(fd, buf + len, sizeof(buf) - len);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n <= 0) break;
        len += (size_t)n;
        size_t pos = 0, olen = 0;
        r = resp_flatten(buf, len, &pos, out, cap, &olen, 0);
        if (r == 0 && len == sizeof(buf)) r = 1; /* longer than we keep: what we have */
    }
    if (r != 1) {
        out[0] = '\0';
        return -1;
    }
    size_t olen = strlen(out);
    if (olen > 0 && out[olen - 1] == '\n') out[olen - 1] = '\0';
    return 0;
}

/* AUTH on fd first if server index has a password (its reply is not
 * looked at: a refused one shows in the command's NOAUTH). 0, or -1 if
 * there was no reply by end_ms. */
static int resp_auth(int fd, int index, long long end_ms, char *out, size_t cap) {
    if (index < 0 || procs[index].auth[0] == '\0') return 0;
    const char *const auth[] = {"AUTH", procs[index].auth, NULL};
    return resp_call(fd, end_ms, auth, out, cap);
}

/* As resp_call, on a connection of its own to 127.0.0.1:port (after an
 * AUTH if this test's server on port has a password). */
static int resp_command(int port, int timeout_ms, const char *const argv[], char *out,
                        size_t cap) {
    out[0] = '\0';
    int fd = tcp_connect(port, timeout_ms);
    if (fd < 0) return -1;
    long long end = h_now_ms() + timeout_ms;
    if (resp_auth(fd, h_redis_index_of_port(port), end, out, cap) != 0) {
        close(fd);
        return -1;
    }
    int r = resp_call(fd, end, argv, out, cap);
    close(fd);
    return r;
}

/* Splits a command line on spaces into argv (words point into line). */
static void split_words(char *line, const char *argv[], size_t max) {
    size_t n = 0;
    for (char *w = strtok(line, " "); w != NULL; w = strtok(NULL, " ")) {
        ck_assert_uint_lt(n, max - 1);
        argv[n++] = w;
    }
    argv[n] = NULL;
}

static const char *vtcp_command(int port, const char *fmt, va_list ap) {
    static char out[32768];
    char line[2048];
    const char *argv[64];
    vsnprintf(line, sizeof(line), fmt, ap);
    split_words(line, argv, sizeof(argv) / sizeof(argv[0]));
    return resp_command(port, H_RESP_MS, argv, out, sizeof(out)) == 0 ? out : NULL;
}

const char *h_redis_tcp(int port, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    const char *r = vtcp_command(port, fmt, ap);
    va_end(ap);
    return r;
}

/* Counts key/value line pairs of a flattened reply where key and value are
 * as given (value NULL: any). */
static int count_pairs(const char *flat, const char *key, const char *value) {
    int count = 0, at_key = 1;
    const char *k = NULL;
    size_t klen = 0;
    for (const char *l = flat; l != NULL && *l != '\0';) {
        const char *nl = strchr(l, '\n');
        size_t n = nl ? (size_t)(nl - l) : strlen(l);
        if (at_key) {
            k = l;
            klen = n;
        } else if (klen == strlen(key) && strncmp(k, key, klen) == 0 &&
                   (value == NULL || (n == strlen(value) && strncmp(l, value, n) == 0))) {
            count++;
        }
        at_key = !at_key;
        l = nl ? nl + 1 : NULL;
    }
    return count;
}

/* The value of the first pair with that key, or "" (static). */
static const char *pair_value(const char *flat, const char *key) {
    static char v[512];
    int at_key = 1, hit = 0;
    v[0] = '\0';
    for (const char *l = flat; l != NULL && *l != '\0';) {
        const char *nl = strchr(l, '\n');
        size_t n = nl ? (size_t)(nl - l) : strlen(l);
        if (at_key) {
            hit = n == strlen(key) && strncmp(l, key, n) == 0;
        } else if (hit) {
            snprintf(v, sizeof(v), "%.*s", (int)n, l);
            return v;
        }
        at_key = !at_key;
        l = nl ? nl + 1 : NULL;
    }
    return v;
}

/* Occurrences of text in s. */
static int count_text(const char *s, const char *text) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, text)) != NULL; p += strlen(text)) n++;
    return n;
}

const char *h_redis_role(int index) {
    static char role[32];
    ck_assert(index >= 0 && index < nprocs && procs[index].is_redis);
    const char *r = procs[index].pid > 0 ? h_redis_tcp(procs[index].port, "ROLE") : NULL;
    snprintf(role, sizeof(role), "%.*s", r ? (int)strcspn(r, "\n") : 0, r ? r : "");
    return role;
}

int h_redis_index_of_port(int port) {
    for (int i = 0; i < nprocs; i++)
        if (procs[i].is_redis && procs[i].port == port) return i;
    return -1;
}

/* How many replicas of the server on port acknowledge a write at once, on
 * one connection: a PUBLISH (replicated, but touching no key), then WAIT.
 * -1 if the server does not answer. */
static int replicas_acking(int port, int n, char *last, size_t lastlen) {
    static char out[4096];
    int fd = tcp_connect(port, H_RESP_MS);
    if (fd < 0) {
        snprintf(last, lastlen, "cannot connect");
        return -1;
    }
    const char *const publish[] = {"PUBLISH", "dlockd-test:sync", "x", NULL};
    char nstr[16];
    snprintf(nstr, sizeof(nstr), "%d", n);
    const char *const wait[] = {"WAIT", nstr, "200", NULL};
    int acked = -1;
    long long end = h_now_ms() + H_RESP_MS;
    if (resp_auth(fd, h_redis_index_of_port(port), end, out, sizeof(out)) == 0 &&
        resp_call(fd, end, publish, out, sizeof(out)) == 0 && out[0] != '-' &&
        resp_call(fd, end, wait, out, sizeof(out)) == 0) {
        if (out[0] == '-') snprintf(last, lastlen, "WAIT: %.200s", out);
        else acked = atoi(out);
    } else {
        snprintf(last, lastlen, "no reply to PUBLISH/WAIT: '%.200s'", out);
    }
    close(fd);
    return acked;
}

void h_await_replicas(int primary, int n, int timeout_ms) {
    ck_assert(primary >= 0 && primary < nprocs && procs[primary].is_redis);
    long long end = h_now_ms() + timeout_ms;
    char last[1024] = "(no answer)";
    for (;;) {
        /* INFO's state=online comes before a replica takes the stream (it
         * waits for the replica's first REPLCONF ACK, up to a second):
         * only an acknowledged write says it is really there. */
        const char *r = h_redis_tcp(procs[primary].port, "INFO replication");
        if (r != NULL) snprintf(last, sizeof(last), "%s", r);
        if (r != NULL && strstr(r, "role:master") != NULL && count_text(r, ",state=online,") >= n) {
            int acked = replicas_acking(procs[primary].port, n, last, sizeof(last));
            if (acked >= n) return;
            if (acked >= 0) snprintf(last, sizeof(last), "%d replicas acknowledge a write", acked);
        }
        ck_assert_msg(h_now_ms() < end, "redis %d (port %d) has not %d replicas online within "
                      "%d ms: %s", primary, procs[primary].port, n, timeout_ms, last);
        usleep(20000);
    }
}

int h_replicas_start(int nreplicas) {
    return h_replicas_start_args(nreplicas, NULL);
}

int h_replicas_start_args(int nreplicas, const char *const primary_extra[]) {
    ck_assert(nreplicas >= 0 && nreplicas <= H_SET_MAX);
    set_nreplicas = 0;
    set_nsentinels = 0;
    const char *pargs[48];
    size_t np = 0;
    for (; set_server_args[np] != NULL; np++) pargs[np] = set_server_args[np];
    for (size_t i = 0; primary_extra != NULL && primary_extra[i] != NULL; i++) {
        ck_assert_uint_lt(np, sizeof(pargs) / sizeof(pargs[0]) - 1);
        pargs[np++] = primary_extra[i];
    }
    set_auth_args(pargs, &np, sizeof(pargs) / sizeof(pargs[0]));
    pargs[np] = NULL;
    set_primary = h_redis_start_tcp(0, pargs);
    char port[16];
    snprintf(port, sizeof(port), "%d", h_redis_port(set_primary));
    const char *args[32];
    size_t n = 0;
    for (; set_server_args[n] != NULL; n++) args[n] = set_server_args[n];
    set_auth_args(args, &n, sizeof(args) / sizeof(args[0]));
    args[n++] = "--replicaof";
    args[n++] = "127.0.0.1";
    args[n++] = port;
    args[n] = NULL;
    for (int i = 0; i < nreplicas; i++) set_replicas[set_nreplicas++] = h_redis_start_tcp(0, args);
    h_await_replicas(set_primary, nreplicas, H_WAIT_MS);
    return set_primary;
}

int h_replica_start(int primary) {
    ck_assert_msg(set_nreplicas < H_SET_MAX, "too many replicas");
    char port[16];
    snprintf(port, sizeof(port), "%d", h_redis_port(primary));
    const char *args[32];
    size_t n = 0;
    for (; set_server_args[n] != NULL; n++) args[n] = set_server_args[n];
    set_auth_args(args, &n, sizeof(args) / sizeof(args[0]));
    args[n++] = "--replicaof";
    args[n++] = "127.0.0.1";
    args[n++] = port;
    args[n] = NULL;
    int index = h_redis_start_tcp(0, args);
    set_replicas[set_nreplicas++] = index;
    if (set_primary < 0) set_primary = primary;
    return index;
}

int h_primary(void) {
    ck_assert_msg(set_primary >= 0, "no replication set started");
    return set_primary;
}

int h_replica(int i) {
    ck_assert_msg(i >= 0 && i < set_nreplicas, "no replica %d (%d started)", i, set_nreplicas);
    return set_replicas[i];
}

static int sentinel_proc(int i) {
    ck_assert_msg(i >= 0 && i < set_nsentinels, "no sentinel %d (%d started)", i,
                  set_nsentinels);
    return set_sentinels[i];
}

/* 1 if sentinel i runs and is not stopped. */
static int sentinel_live(int i) {
    return procs[set_sentinels[i]].pid > 0 && !set_stopped[i];
}

/* Faster than Sentinel's defaults, for tests: INFO every second (10 s),
 * hello messages every 500 ms (2 s; a returned old primary is made a
 * replica after four of these), PING every 200 ms (1 s). The last one
 * matters: a Sentinel reconnects at most once per ping period, so with the
 * default one as long as down-after-milliseconds, a Sentinel that learns
 * of a new primary may not have reached it within down-after-milliseconds,
 * take it for down, and fail over a second time. */
static void sentinel_tune(int i) {
    const char *r = h_sentinel_cmd(i, "SENTINEL DEBUG info-period 1000 publish-period 500 "
                                      "ping-period 200");
    ck_assert_msg(r != NULL && strcmp(r, "OK") == 0, "SENTINEL DEBUG on sentinel %d: '%s'", i,
                  r ? r : "(no answer)");
}

static int sentinel_start(int n, int primary_port, int quorum) {
    char dir[256], conf[512], sock[256], log[512];
    snprintf(dir, sizeof(dir), "%s/sentinel-%d", test_dir, n);
    snprintf(conf, sizeof(conf), "%s/sentinel.conf", dir);
    snprintf(sock, sizeof(sock), "%s/sentinel-%d.sock", test_dir, n);
    snprintf(log, sizeof(log), "%s/sentinel-%d.log", test_dir, n);
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    int index = add_proc(0, 1, sock, log);
    for (int attempt = 0; attempt < 5; attempt++) {
        int port = h_free_port();
        FILE *f = fopen(conf, "w");
        ck_assert_ptr_nonnull(f);
        fprintf(f,
                "port %d\nbind 127.0.0.1\nunixsocket %s\nunixsocketperm 700\ndir %s\n"
                "sentinel announce-ip 127.0.0.1\n"
                "sentinel monitor %s 127.0.0.1 %d %d\n"
                "sentinel down-after-milliseconds %s 1000\n"
                "sentinel failover-timeout %s 3000\n"
                "sentinel parallel-syncs %s 1\n",
                port, sock, dir, H_MASTER_NAME, primary_port, quorum, H_MASTER_NAME,
                H_MASTER_NAME, H_MASTER_NAME);
        if (set_data_pw[0] != '\0') /* to the servers */
            fprintf(f, "sentinel auth-pass %s %s\n", H_MASTER_NAME, set_data_pw);
        if (set_sentinel_pw[0] != '\0') /* from everyone, and to the other Sentinels */
            fprintf(f, "requirepass %s\nsentinel sentinel-pass %s\n", set_sentinel_pw,
                    set_sentinel_pw);
        fclose(f);
        snprintf(procs[index].auth, sizeof(procs[index].auth), "%s", set_sentinel_pw);
        const char *argv[] = {"redis-sentinel", conf, NULL};
        unlink(sock);
        procs[index].pid = spawn(argv, log);
        procs[index].port = port;
        remember_args(index, argv);
        int r = await_ready(index, "PING\r\n", "+PONG");
        if (r == 0) return index;
        if (r == -2) ck_abort_msg("redis-sentinel %d not ready within %d ms (see %s)", n,
                                  H_WAIT_MS, log);
    }
    ck_abort_msg("redis-sentinel %d did not start (see %s)", n, log);
    return -1;
}

/* What sentinel i lacks to know the whole set as started, or NULL. */
static const char *sentinel_lacks(int i) {
    static char why[256];
    const char *m = h_sentinel_cmd(i, "SENTINEL master %s", H_MASTER_NAME);
    if (m == NULL) return "no answer to SENTINEL master";
    if (count_pairs(m, "flags", "master") != 1) {
        snprintf(why, sizeof(why), "primary flags '%s'", pair_value(m, "flags"));
        return why;
    }
    char want[16];
    snprintf(want, sizeof(want), "%d", set_nsentinels - 1);
    if (count_pairs(m, "num-other-sentinels", want) != 1) {
        snprintf(why, sizeof(why), "knows %s other sentinels of %s",
                 pair_value(m, "num-other-sentinels"), want);
        return why;
    }
    const char *r = h_sentinel_cmd(i, "SENTINEL replicas %s", H_MASTER_NAME);
    if (r == NULL) return "no answer to SENTINEL replicas";
    int ok = count_pairs(r, "flags", "slave");
    int link = count_pairs(r, "master-link-status", "ok");
    if (ok != set_nreplicas || link != set_nreplicas) {
        snprintf(why, sizeof(why), "knows %d healthy replicas (%d linked) of %d", ok, link,
                 set_nreplicas);
        return why;
    }
    return NULL;
}

int h_sentinels_start(int nreplicas, int nsentinels) {
    return h_sentinels_start_args(nreplicas, nsentinels, NULL);
}

int h_sentinels_start_args(int nreplicas, int nsentinels, const char *const primary_extra[]) {
    ck_assert(nsentinels >= 1 && nsentinels <= H_SET_MAX);
    int primary = h_replicas_start_args(nreplicas, primary_extra);
    for (int i = 0; i < nsentinels; i++) {
        set_stopped[i] = 0;
        set_sentinels[i] = sentinel_start(i, h_redis_port(primary), nsentinels / 2 + 1);
        set_nsentinels++;
        sentinel_tune(i);
    }
    long long end = h_now_ms() + H_FAILOVER_MS;
    for (int i = 0; i < nsentinels; i++) {
        const char *why;
        while ((why = sentinel_lacks(i)) != NULL) {
            ck_assert_msg(h_now_ms() < end, "sentinel %d does not know the set within %d ms: %s",
                          i, H_FAILOVER_MS, why);
            usleep(50000);
        }
    }
    return primary;
}

int h_sentinel_count(void) {
    return set_nsentinels;
}

int h_sentinel_index(int i) {
    return sentinel_proc(i);
}

int h_sentinel_port(int i) {
    return procs[sentinel_proc(i)].port;
}

const char *h_sentinel_cmd(int i, const char *fmt, ...) {
    int port = h_sentinel_port(i);
    va_list ap;
    va_start(ap, fmt);
    const char *r = vtcp_command(port, fmt, ap);
    va_end(ap);
    return r;
}

void h_sentinel_stop(int i, int sig) {
    h_redis_stop_index(sentinel_proc(i), sig);
    set_stopped[i] = sig == SIGSTOP;
}

void h_sentinel_signal(int i, int sig) {
    h_redis_signal_index(sentinel_proc(i), sig);
    if (sig == SIGSTOP) set_stopped[i] = 1;
    if (sig == SIGCONT) set_stopped[i] = 0;
}

const char *h_sentinel_addrs(void) {
    static char addrs[H_SET_MAX * 24];
    size_t n = 0;
    addrs[0] = '\0';
    for (int i = 0; i < set_nsentinels; i++)
        n += (size_t)snprintf(addrs + n, sizeof(addrs) - n, "%s127.0.0.1:%d", i ? " " : "",
                              h_sentinel_port(i));
    return addrs;
}

/* The primary's port as each live sentinel says: the port if all that
 * answer agree (*answered of them), else -1; 0 if none answers. */
static int sentinels_agree(int *answered, char *last, size_t lastlen) {
    int port = 0;
    *answered = 0;
    for (int i = 0; i < set_nsentinels; i++) {
        if (!sentinel_live(i)) continue;
        const char *r = h_sentinel_cmd(i, "SENTINEL get-master-addr-by-name %s", H_MASTER_NAME);
        if (r == NULL || r[0] == '-' || strchr(r, '\n') == NULL) {
            if (last) snprintf(last, lastlen, "sentinel %d: '%s'", i, r ? r : "(no answer)");
            continue;
        }
        int p = atoi(strchr(r, '\n') + 1);
        if (last) snprintf(last, lastlen, "sentinel %d says port %d", i, p);
        if (*answered > 0 && p != port) port = -1;
        else if (*answered == 0) port = p;
        (*answered)++;
    }
    return port;
}

int h_sentinel_primary_port(void) {
    for (int i = 0; i < set_nsentinels; i++) {
        if (!sentinel_live(i)) continue;
        const char *r = h_sentinel_cmd(i, "SENTINEL get-master-addr-by-name %s", H_MASTER_NAME);
        if (r != NULL && r[0] != '-' && strchr(r, '\n') != NULL) return atoi(strchr(r, '\n') + 1);
    }
    return -1;
}

int h_await_failover(int old_port, int timeout_ms) {
    long long end = h_now_ms() + timeout_ms;
    char last[256] = "";
    for (;;) {
        int answered;
        int port = sentinels_agree(&answered, last, sizeof(last));
        if (answered > 0 && port > 0 && port != old_port) {
            int index = h_redis_index_of_port(port);
            ck_assert_msg(index >= 0, "sentinels name port %d, not one of this test's", port);
            const char *role = h_redis_role(index);
            if (strcmp(role, "master") == 0) return port;
            snprintf(last, sizeof(last), "sentinels agree on port %d, whose ROLE is '%s'", port,
                     role);
        } else if (answered > 0 && port == -1) {
            snprintf(last, sizeof(last), "sentinels disagree");
        }
        ck_assert_msg(h_now_ms() < end, "no failover away from port %d within %d ms (%s)",
                      old_port, timeout_ms, last);
        usleep(50000);
    }
}

void h_sentinel_failover(void) {
    long long end = h_now_ms() + H_WAIT_MS;
    const char *r = NULL;
    for (;;) {
        for (int i = 0; i < set_nsentinels; i++) {
            if (!sentinel_live(i)) continue;
            r = h_sentinel_cmd(i, "SENTINEL FAILOVER %s", H_MASTER_NAME);
            if (r != NULL && strcmp(r, "OK") == 0) return;
            break;
        }
        /* NOGOODSLAVE until a replica is fit; INPROG while one runs */
        ck_assert_msg(h_now_ms() < end, "SENTINEL FAILOVER refused for %d ms: '%s'", H_WAIT_MS,
                      r ? r : "(no sentinel answers)");
        usleep(100000);
    }
}

void h_redis_restart_index(int index) {
    ck_assert(index >= 0 && index < nprocs && procs[index].is_redis);
    proc_t *p = &procs[index];
    ck_assert_msg(p->pid <= 0, "redis %d still runs", index);
    ck_assert_msg(p->nargs > 0, "redis %d has no arguments to restart with", index);
    const char *argv[80];
    const char *a = p->args;
    ck_assert_uint_lt(p->nargs, sizeof(argv) / sizeof(argv[0]));
    for (size_t i = 0; i < p->nargs; i++, a += strlen(a) + 1) argv[i] = a;
    argv[p->nargs] = NULL;
    /* A redis-server comes back empty: whatever a sync wrote goes. */
    for (size_t i = 0; i + 1 < p->nargs; i++) {
        if (strcmp(argv[i], "--dir") != 0) continue;
        char path[600];
        snprintf(path, sizeof(path), "%s/dump.rdb", argv[i + 1]);
        unlink(path);
    }
    unlink(p->sock);
    p->pid = spawn(argv, p->log);
    wait_ready(index, "PING\r\n", "+PONG");
    for (int i = 0; i < set_nsentinels; i++) {
        if (set_sentinels[i] != index) continue;
        set_stopped[i] = 0;
        sentinel_tune(i);
    }
}

int h_dlockd_start_sentinel(const char *extra) {
    char text[4096];
    snprintf(text, sizeof(text),
             "[server]\nadmin_uids = 0\n"
             "[redis]\nsentinels = %s\nmaster_name = %s\n"
             "command_timeout_ms = 1000\nconnect_timeout_ms = 500\n%s",
             h_sentinel_addrs(), H_MASTER_NAME, extra ? extra : "");
    int index = h_dlockd_start_conf(text);
    h_await_redis(index, 1);
    return index;
}

int h_dlockd_start_tcp(int redis, const char *extra) {
    char text[4096];
    snprintf(text, sizeof(text),
             "[server]\nadmin_uids = 0\n"
             "[redis]\nurl = redis://127.0.0.1:%d\n"
             "command_timeout_ms = 1000\nconnect_timeout_ms = 500\n%s",
             h_redis_port(redis), extra ? extra : "");
    int index = h_dlockd_start_conf(text);
    h_await_redis(index, 1);
    return index;
}

void h_await_log_ms(int index, const char *text, int want, int timeout_ms) {
    long long end = h_now_ms() + timeout_ms;
    while (h_log_count(index, text) < want) {
        ck_assert_msg(h_now_ms() < end, "log has %d lines with '%s' after %d ms, wanted %d",
                      h_log_count(index, text), text, timeout_ms, want);
        usleep(10000);
    }
}

/* ---- replication and Sentinel over TLS -------------------------------------
 * The servers and Sentinels of such a set listen on TCP with TLS only; the
 * harness's RESP client speaks plain TCP, so it asks each of them over the
 * plain Unix socket each also has (the ready check's). */

/* As h_redis_unix, with the command's words in argv (one may be empty or
 * hold spaces). */
static const char *unix_call(int index, const char *const argv[]) {
    static char out[32768];
    ck_assert(index >= 0 && index < nprocs && procs[index].is_redis);
    if (procs[index].pid <= 0) return NULL;
    int fd = unix_connect(procs[index].sock);
    if (fd < 0) return NULL;
    long long end = h_now_ms() + H_RESP_MS;
    int r = resp_auth(fd, index, end, out, sizeof(out));
    if (r == 0) r = resp_call(fd, end, argv, out, sizeof(out));
    close(fd);
    return r == 0 ? out : NULL;
}

const char *h_redis_unix(int index, const char *fmt, ...) {
    char line[2048];
    const char *argv[64];
    ck_assert(index >= 0 && index < nprocs && procs[index].is_redis);
    if (procs[index].pid <= 0) return NULL;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    split_words(line, argv, sizeof(argv) / sizeof(argv[0]));
    return unix_call(index, argv);
}

const char *h_redis_unix_argv(int index, const char *const argv[]) {
    ck_assert(index >= 0 && index < nprocs && procs[index].is_redis);
    if (procs[index].pid <= 0) return NULL;
    return unix_call(index, argv);
}

/* The TLS arguments of a set's servers and Sentinels ("--name", value
 * pairs; a Sentinel's config file takes them without the dashes). */
static char tls_files[5][512];
static const char *tls_args[24];

static void tls_args_make(const char *certs, int auth_clients) {
    const char *const names[] = {"server.crt", "server.key", "ca.crt", "client.crt", "client.key"};
    for (int i = 0; i < 5; i++)
        snprintf(tls_files[i], sizeof(tls_files[i]), "%s/%s", certs, names[i]);
    size_t n = 0;
    tls_args[n++] = "--tls-cert-file";
    tls_args[n++] = tls_files[0];
    tls_args[n++] = "--tls-key-file";
    tls_args[n++] = tls_files[1];
    tls_args[n++] = "--tls-ca-cert-file";
    tls_args[n++] = tls_files[2];
    tls_args[n++] = "--tls-replication";
    tls_args[n++] = "yes";
    tls_args[n++] = "--tls-auth-clients";
    tls_args[n++] = auth_clients ? "yes" : "no";
    if (auth_clients) { /* server.crt is for serverAuth only: as a client, client.crt */
        tls_args[n++] = "--tls-client-cert-file";
        tls_args[n++] = tls_files[3];
        tls_args[n++] = "--tls-client-key-file";
        tls_args[n++] = tls_files[4];
    }
    tls_args[n] = NULL;
}

/* A TLS-only server of the set, a replica of primary_port unless 0. */
static int tls_server_start(int primary_port) {
    const char *const listen[] = {"--port", "0", "--tls-port", "%d", "--bind", "127.0.0.1", NULL};
    const char *args[48];
    char port[16];
    size_t n = 0;
    for (size_t i = 0; set_server_args[i] != NULL; i++) args[n++] = set_server_args[i];
    for (size_t i = 0; tls_args[i] != NULL; i++) args[n++] = tls_args[i];
    if (primary_port != 0) {
        snprintf(port, sizeof(port), "%d", primary_port);
        args[n++] = "--replicaof";
        args[n++] = "127.0.0.1";
        args[n++] = port;
    }
    args[n] = NULL;
    return redis_start_index(0, listen, args);
}

/* As h_await_replicas, over the primary's Unix socket. */
static void tls_await_replicas(int primary, int n, int timeout_ms) {
    static char out[4096];
    long long end = h_now_ms() + timeout_ms;
    char last[1024] = "(no answer)";
    char nstr[16];
    snprintf(nstr, sizeof(nstr), "%d", n);
    const char *const publish[] = {"PUBLISH", "dlockd-test:sync", "x", NULL};
    const char *const wait[] = {"WAIT", nstr, "200", NULL};
    for (;;) {
        const char *r = h_redis_unix(primary, "INFO replication");
        if (r != NULL) snprintf(last, sizeof(last), "%s", r);
        if (r != NULL && strstr(r, "role:master") != NULL && count_text(r, ",state=online,") >= n) {
            int fd = unix_connect(procs[primary].sock);
            long long cend = h_now_ms() + H_RESP_MS;
            int acked = -1;
            if (fd >= 0 && resp_call(fd, cend, publish, out, sizeof(out)) == 0 && out[0] != '-' &&
                resp_call(fd, cend, wait, out, sizeof(out)) == 0 && out[0] != '-')
                acked = atoi(out);
            if (fd >= 0) close(fd);
            if (acked >= n) return;
            snprintf(last, sizeof(last), "%d replicas acknowledge a write", acked);
        }
        ck_assert_msg(h_now_ms() < end, "redis %d (TLS port %d) has not %d replicas online "
                      "within %d ms: %s", primary, procs[primary].port, n, timeout_ms, last);
        usleep(20000);
    }
}

/* A TLS-only Sentinel (port 0, tls-port) that speaks TLS to the servers and
 * to the other Sentinels (tls-replication yes), tuned as sentinel_tune. */
static int tls_sentinel_start(int n, int primary_port, int quorum) {
    char dir[256], conf[512], sock[256], log[512];
    snprintf(dir, sizeof(dir), "%s/sentinel-%d", test_dir, n);
    snprintf(conf, sizeof(conf), "%s/sentinel.conf", dir);
    snprintf(sock, sizeof(sock), "%s/sentinel-%d.sock", test_dir, n);
    snprintf(log, sizeof(log), "%s/sentinel-%d.log", test_dir, n);
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    int index = add_proc(0, 1, sock, log);
    for (int attempt = 0; attempt < 5; attempt++) {
        int port = h_free_port();
        FILE *f = fopen(conf, "w");
        ck_assert_ptr_nonnull(f);
        fprintf(f, "port 0\ntls-port %d\nbind 127.0.0.1\nunixsocket %s\nunixsocketperm 700\n"
                   "dir %s\n", port, sock, dir);
        for (size_t i = 0; tls_args[i] != NULL; i += 2)
            fprintf(f, "%s %s\n", tls_args[i] + 2, tls_args[i + 1]);
        fprintf(f,
                "sentinel announce-ip 127.0.0.1\n"
                "sentinel monitor %s 127.0.0.1 %d %d\n"
                "sentinel down-after-milliseconds %s 1000\n"
                "sentinel failover-timeout %s 3000\n"
                "sentinel parallel-syncs %s 1\n",
                H_MASTER_NAME, primary_port, quorum, H_MASTER_NAME, H_MASTER_NAME, H_MASTER_NAME);
        fclose(f);
        const char *argv[] = {"redis-sentinel", conf, NULL};
        unlink(sock);
        procs[index].pid = spawn(argv, log);
        procs[index].port = port;
        remember_args(index, argv);
        int r = await_ready(index, "PING\r\n", "+PONG");
        if (r == -2) ck_abort_msg("redis-sentinel %d not ready within %d ms (see %s)", n,
                                  H_WAIT_MS, log);
        if (r != 0) continue; /* the port was taken: another */
        const char *t = h_redis_unix(index, "SENTINEL DEBUG info-period 1000 publish-period 500 "
                                            "ping-period 200");
        ck_assert_msg(t != NULL && strcmp(t, "OK") == 0, "SENTINEL DEBUG on sentinel %d: '%s'",
                      n, t ? t : "(no answer)");
        return index;
    }
    ck_abort_msg("redis-sentinel %d did not start (see %s)", n, log);
    return -1;
}

/* As sentinel_lacks, over sentinel i's Unix socket. */
static const char *tls_sentinel_lacks(int i) {
    static char why[256];
    int index = set_sentinels[i];
    const char *m = h_redis_unix(index, "SENTINEL master %s", H_MASTER_NAME);
    if (m == NULL) return "no answer to SENTINEL master";
    if (count_pairs(m, "flags", "master") != 1) {
        snprintf(why, sizeof(why), "primary flags '%s'", pair_value(m, "flags"));
        return why;
    }
    char want[16];
    snprintf(want, sizeof(want), "%d", set_nsentinels - 1);
    if (count_pairs(m, "num-other-sentinels", want) != 1) {
        snprintf(why, sizeof(why), "knows %s other sentinels of %s",
                 pair_value(m, "num-other-sentinels"), want);
        return why;
    }
    const char *r = h_redis_unix(index, "SENTINEL replicas %s", H_MASTER_NAME);
    if (r == NULL) return "no answer to SENTINEL replicas";
    int ok = count_pairs(r, "flags", "slave");
    int link = count_pairs(r, "master-link-status", "ok");
    if (ok != set_nreplicas || link != set_nreplicas) {
        snprintf(why, sizeof(why), "knows %d healthy replicas (%d linked) of %d", ok, link,
                 set_nreplicas);
        return why;
    }
    return NULL;
}

int h_tls_sentinels_start(int nreplicas, int nsentinels, const char *certs, int auth_clients) {
    ck_assert(nreplicas >= 0 && nreplicas <= H_SET_MAX);
    ck_assert(nsentinels >= 1 && nsentinels <= H_SET_MAX);
    tls_args_make(certs, auth_clients);
    set_nreplicas = 0;
    set_nsentinels = 0;
    set_primary = tls_server_start(0);
    for (int i = 0; i < nreplicas; i++)
        set_replicas[set_nreplicas++] = tls_server_start(procs[set_primary].port);
    tls_await_replicas(set_primary, nreplicas, H_WAIT_MS);
    for (int i = 0; i < nsentinels; i++) {
        set_stopped[i] = 0;
        set_sentinels[i] = tls_sentinel_start(i, procs[set_primary].port, nsentinels / 2 + 1);
        set_nsentinels++;
    }
    long long end = h_now_ms() + H_FAILOVER_MS;
    for (int i = 0; i < nsentinels; i++) {
        const char *why;
        while ((why = tls_sentinel_lacks(i)) != NULL) {
            ck_assert_msg(h_now_ms() < end, "TLS sentinel %d does not know the set within %d ms: "
                          "%s", i, H_FAILOVER_MS, why);
            usleep(50000);
        }
    }
    return set_primary;
}

int h_tls_await_failover(int old_port, int timeout_ms) {
    long long end = h_now_ms() + timeout_ms;
    char last[256] = "(no sentinel answers)";
    for (;;) {
        int port = 0, answered = 0;
        for (int i = 0; i < set_nsentinels; i++) {
            if (!sentinel_live(i)) continue;
            const char *r = h_redis_unix(set_sentinels[i], "SENTINEL get-master-addr-by-name %s",
                                         H_MASTER_NAME);
            if (r == NULL || r[0] == '-' || strchr(r, '\n') == NULL) {
                snprintf(last, sizeof(last), "sentinel %d: '%s'", i, r ? r : "(no answer)");
                continue;
            }
            int p = atoi(strchr(r, '\n') + 1);
            if (answered > 0 && p != port) port = -1;
            else if (answered == 0) port = p;
            answered++;
        }
        if (answered > 0 && port > 0 && port != old_port) {
            int index = h_redis_index_of_port(port);
            ck_assert_msg(index >= 0, "sentinels name port %d, not one of this test's", port);
            const char *r = h_redis_unix(index, "ROLE");
            if (r != NULL && strncmp(r, "master\n", 7) == 0) return port;
            snprintf(last, sizeof(last), "sentinels agree on port %d, whose ROLE is '%.*s'", port,
                     r ? (int)strcspn(r, "\n") : 0, r ? r : "");
        } else if (answered > 0 && port == -1) {
            snprintf(last, sizeof(last), "sentinels disagree");
        } else if (answered > 0) {
            snprintf(last, sizeof(last), "sentinels still name port %d", port);
        }
        ck_assert_msg(h_now_ms() < end, "no failover away from port %d within %d ms (%s)",
                      old_port, timeout_ms, last);
        usleep(50000);
    }
}

/* ---- Redis Cluster --------------------------------------------------------------
 * One cluster per test, of redis-servers by index: teardown kills them like
 * every other process, and h_redis_stop_index, h_redis_signal_index and
 * h_redis_restart_index (which keeps the node's nodes.conf, so it comes back
 * as itself) apply. The harness asks the nodes over the Unix socket each has
 * (a TLS cluster's too), with AUTH when h_set_auth gave a password;
 * h_cluster_cmd alone goes through redis-cli over TCP or TLS, as a client. */

#define H_CLUSTER_SLOTS  16384
#define H_MIGRATE_BATCH  20     /* keys per MIGRATE */
#define H_POLL_US        50000  /* between two looks at the cluster */

static int cl_nodes[H_MAX_PROCS];           /* proc indexes, in start order */
static char cl_ids[H_MAX_PROCS][48];        /* each one's CLUSTER MYID */
static int cl_n;
static int cl_per;                          /* replicas per primary, as started */
static char cl_cacert[512];                 /* a TLS cluster's CA file; "": plain */
static uint16_t cl_owner[H_CLUSTER_SLOTS];  /* each slot's primary's port, as last agreed */
static uint16_t cl_view[H_CLUSTER_SLOTS];   /* scratch: one node's view */

static void cluster_reset(void) {
    cl_n = 0;
    cl_per = 0;
    cl_cacert[0] = '\0';
    memset(cl_owner, 0, sizeof(cl_owner));
}

/* 1 if process index runs and is neither stopped (SIGSTOP) nor a zombie. */
static int proc_running(int index) {
    pid_t pid = procs[index].pid;
    if (pid <= 0) return 0;
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL) return 0;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* "pid (comm) S ..." */
    if (p == NULL || p[1] != ' ') return 1;
    return p[2] == '\0' || strchr("TtZX", p[2]) == NULL;
}

static int cluster_node(int i) {
    ck_assert_msg(i >= 0 && i < cl_n, "no cluster node %d (%d started)", i, cl_n);
    return cl_nodes[i];
}

/* The node number of the cluster node on port, or -1. */
static int cluster_node_of_port(int port) {
    for (int i = 0; i < cl_n; i++)
        if (procs[cl_nodes[i]].port == port) return i;
    return -1;
}

/* The next line of a flattened reply into buf; 0 at its end. */
static int next_line(const char **p, char *buf, size_t cap) {
    if (**p == '\0') return 0;
    const char *nl = strchr(*p, '\n');
    size_t n = nl ? (size_t)(nl - *p) : strlen(*p);
    snprintf(buf, cap, "%.*s", (int)n, *p);
    *p = nl ? nl + 1 : *p + n;
    return 1;
}

static int all_digits(const char *s) {
    if (*s == '\0') return 0;
    for (; *s != '\0'; s++)
        if (*s < '0' || *s > '9') return 0;
    return 1;
}

/* Fills owner[] (the primary's port for each slot, 0: none) from a
 * flattened CLUSTER SLOTS reply: per range its start, its end, then per node
 * (the primary first, then the replicas) IP, port, id and Redis 7's
 * metadata (none here). *replicas: the fewest replicas a range lists (-1:
 * no range). 0, or -1 if the reply is not one. */
static int slots_parse(const char *flat, uint16_t owner[], int *replicas) {
    char a[256], b[256], c[256];
    const char *p = flat;
    memset(owner, 0, H_CLUSTER_SLOTS * sizeof(owner[0]));
    *replicas = -1;
    int have = next_line(&p, a, sizeof(a));
    while (have) {
        if (!all_digits(a) || !next_line(&p, b, sizeof(b)) || !all_digits(b)) return -1;
        int start = atoi(a), end = atoi(b);
        if (start > end || end >= H_CLUSTER_SLOTS) return -1;
        /* the primary: IP, port, id */
        if (!next_line(&p, a, sizeof(a)) || !next_line(&p, b, sizeof(b)) || !all_digits(b) ||
            !next_line(&p, c, sizeof(c)))
            return -1;
        int port = atoi(b), nreplicas = 0;
        while ((have = next_line(&p, a, sizeof(a))) && !all_digits(a)) {
            if (strchr(a, '.') == NULL && strchr(a, ':') == NULL) continue; /* metadata */
            if (!next_line(&p, b, sizeof(b)) || !all_digits(b) || !next_line(&p, c, sizeof(c)))
                return -1;
            nreplicas++;
        }
        for (int s = start; s <= end; s++) owner[s] = (uint16_t)port;
        if (*replicas < 0 || nreplicas < *replicas) *replicas = nreplicas;
    }
    return 0;
}

/* The number after "key:" in an INFO-style reply, or -1. */
static long long info_field(const char *info, const char *key) {
    char pat[64];
    snprintf(pat, sizeof(pat), "%s:", key);
    for (const char *p = info; (p = strstr(p, pat)) != NULL; p += strlen(pat))
        if (p == info || p[-1] == '\n') return atoll(p + strlen(pat));
    return -1;
}

/* 1 if the ROLE reply of server index says master. */
static int role_is_master(int index) {
    const char *r = h_redis_unix(index, "ROLE");
    return r != NULL && strncmp(r, "master", 6) == 0 && (r[6] == '\n' || r[6] == '\0');
}

/* What keeps the cluster's running nodes (not stopped, not gone) from
 * agreeing, or NULL: each answers, says cluster_state:ok, and names the
 * same primary for every slot in CLUSTER SLOTS (then kept in cl_owner).
 * full: besides, every node runs, knows all the others, owns or serves
 * every slot (cluster_slots_ok), has the same current epoch; every range
 * lists cl_per replicas and every replica's link to its primary is up. */
static const char *cluster_lacks(int full) {
    static char why[512];
    static uint16_t first[H_CLUSTER_SLOTS];
    int nfirst = -1;
    long long epoch = -1;
    for (int i = 0; i < cl_n; i++) {
        int index = cl_nodes[i], port = procs[index].port;
        if (!proc_running(index)) {
            if (!full) continue;
            snprintf(why, sizeof(why), "node %d (port %d) is not running", i, port);
            return why;
        }
        const char *r = h_redis_unix(index, "CLUSTER INFO");
        if (r == NULL) {
            snprintf(why, sizeof(why), "node %d (port %d) does not answer", i, port);
            return why;
        }
        if (strstr(r, "cluster_state:ok") == NULL) {
            snprintf(why, sizeof(why), "node %d (port %d): %.*s", i, port,
                     (int)strcspn(r, "\r\n"), r);
            return why;
        }
        if (full) {
            long long slots_ok = info_field(r, "cluster_slots_ok");
            long long known = info_field(r, "cluster_known_nodes");
            long long e = info_field(r, "cluster_current_epoch");
            if (slots_ok != H_CLUSTER_SLOTS || known != cl_n) {
                snprintf(why, sizeof(why), "node %d (port %d): cluster_slots_ok:%lld "
                         "cluster_known_nodes:%lld", i, port, slots_ok, known);
                return why;
            }
            if (epoch >= 0 && e != epoch) {
                snprintf(why, sizeof(why), "node %d (port %d): cluster_current_epoch %lld, "
                         "node 0's %lld", i, port, e, epoch);
                return why;
            }
            epoch = e;
        }
        int replicas;
        r = h_redis_unix(index, "CLUSTER SLOTS");
        if (r == NULL || slots_parse(r, cl_view, &replicas) != 0) {
            snprintf(why, sizeof(why), "node %d (port %d): CLUSTER SLOTS '%.100s'", i, port,
                     r ? r : "(no answer)");
            return why;
        }
        if (full && replicas != cl_per) {
            snprintf(why, sizeof(why), "node %d (port %d): a range of CLUSTER SLOTS lists %d "
                     "replicas of %d", i, port, replicas, cl_per);
            return why;
        }
        if (nfirst < 0) {
            memcpy(first, cl_view, sizeof(first));
            nfirst = i;
        } else if (memcmp(first, cl_view, sizeof(first)) != 0) {
            int s = 0;
            while (first[s] == cl_view[s]) s++;
            snprintf(why, sizeof(why), "for slot %d node %d (port %d) names port %d, node %d "
                     "port %d", s, nfirst, procs[cl_nodes[nfirst]].port, first[s], i, cl_view[s]);
            return why;
        }
        if (full) {
            r = h_redis_unix(index, "INFO replication");
            if (r == NULL) {
                snprintf(why, sizeof(why), "node %d (port %d): no INFO replication", i, port);
                return why;
            }
            if (strstr(r, "role:slave") != NULL && strstr(r, "master_link_status:up") == NULL) {
                snprintf(why, sizeof(why), "replica %d (port %d): link to its primary not up",
                         i, port);
                return why;
            }
        }
    }
    if (nfirst < 0) return "no node is running";
    if (full) {
        for (int s = 0; s < H_CLUSTER_SLOTS; s++) {
            if (first[s] != 0) continue;
            snprintf(why, sizeof(why), "slot %d has no primary", s);
            return why;
        }
    }
    memcpy(cl_owner, first, sizeof(cl_owner));
    return NULL;
}

/* Shows the end of a log on stderr (the run's directory goes at exit). */
static void show_log(const char *log) {
    char cmd[700];
    snprintf(cmd, sizeof(cmd), "tail -n 30 '%s' >&2", log);
    if (system(cmd) != 0) {}
}

static void cluster_start(int nprimaries, int per, const char *certs) {
    ck_assert_msg(cl_n == 0, "this test has a cluster already");
    ck_assert_msg(nprimaries >= 3, "redis-cli --cluster create wants 3 primaries or more");
    ck_assert(per >= 0);
    int n = nprimaries * (1 + per);
    ck_assert_msg(nprocs + n <= H_MAX_PROCS, "%d cluster nodes: more than H_MAX_PROCS", n);
    char timeout[16], nper[16];
    snprintf(timeout, sizeof(timeout), "%d", H_CLUSTER_NODE_TIMEOUT_MS);
    snprintf(nper, sizeof(nper), "%d", per);
    /* repl-ping-replica-period 1: Redis 7.0 leaves a replica out of CLUSTER
     * SLOTS until its replication offset is not 0, which without writes
     * takes the primary's first PING to its replicas (10 s by default). */
    const char *const cluster_args[] = {
        "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
        "--cluster-node-timeout", timeout, "--repl-ping-replica-period", "1", NULL};
    const char *args[64];
    size_t na = 0;
    for (size_t i = 0; set_server_args[i] != NULL; i++) args[na++] = set_server_args[i];
    for (size_t i = 0; cluster_args[i] != NULL; i++) args[na++] = cluster_args[i];
    set_auth_args(args, &na, sizeof(args) / sizeof(args[0]));
    if (certs != NULL) {
        /* The cluster bus asks every peer for a certificate, whatever
         * tls-auth-clients says (that one, no, is for clients): each node
         * presents client.crt (server.crt is for serverAuth only). */
        tls_args_make(certs, 0);
        for (size_t i = 0; tls_args[i] != NULL; i++) args[na++] = tls_args[i];
        args[na++] = "--tls-cluster";
        args[na++] = "yes";
        args[na++] = "--tls-client-cert-file";
        args[na++] = tls_files[3];
        args[na++] = "--tls-client-key-file";
        args[na++] = tls_files[4];
        snprintf(cl_cacert, sizeof(cl_cacert), "%s/ca.crt", certs);
    }
    ck_assert_uint_lt(na, sizeof(args) / sizeof(args[0]));
    args[na] = NULL;
    const char *const plain[] = {"--port", "%d", "--bind", "127.0.0.1", "--cluster-port", "%c",
                                 NULL};
    const char *const tls[] = {"--port", "0", "--tls-port", "%d", "--bind", "127.0.0.1",
                               "--cluster-port", "%c", NULL};
    cl_per = per;
    for (int i = 0; i < n; i++) {
        cl_nodes[i] = redis_start_index(0, certs != NULL ? tls : plain, args);
        cl_n++;
        const char *id = h_redis_unix(cl_nodes[i], "CLUSTER MYID");
        ck_assert_msg(id != NULL && strlen(id) == 40, "CLUSTER MYID of node %d: '%s'", i,
                      id ? id : "(no answer)");
        snprintf(cl_ids[i], sizeof(cl_ids[i]), "%s", id);
    }
    /* The first nprimaries become primaries; redis-cli chooses which
     * primary each replica gets (they all share one IP: not in order). */
    char addrs[H_MAX_PROCS][32], log[512];
    const char *argv[H_MAX_PROCS + 16];
    size_t argc = 0;
    argv[argc++] = "redis-cli";
    if (certs != NULL) {
        argv[argc++] = "--tls";
        argv[argc++] = "--cacert";
        argv[argc++] = cl_cacert;
    }
    if (set_data_pw[0] != '\0') {
        argv[argc++] = "-a";
        argv[argc++] = set_data_pw;
        argv[argc++] = "--no-auth-warning";
    }
    argv[argc++] = "--cluster";
    argv[argc++] = "create";
    for (int i = 0; i < n; i++) {
        snprintf(addrs[i], sizeof(addrs[i]), "127.0.0.1:%d", procs[cl_nodes[i]].port);
        argv[argc++] = addrs[i];
    }
    argv[argc++] = "--cluster-replicas";
    argv[argc++] = nper;
    argv[argc++] = "--cluster-yes";
    argv[argc] = NULL;
    snprintf(log, sizeof(log), "%s/cluster-create.log", test_dir);
    pid_t pid = spawn(argv, log);
    int status = wait_exit(pid, H_FAILOVER_MS);
    if (status == -1) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        show_log(log);
        ck_abort_msg("redis-cli --cluster create did not end within %d ms (see %s)",
                     H_FAILOVER_MS, log);
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        show_log(log);
        ck_abort_msg("redis-cli --cluster create failed, status %d (see %s)", status, log);
    }
    long long end = h_now_ms() + H_FAILOVER_MS;
    const char *why;
    while ((why = cluster_lacks(1)) != NULL) {
        ck_assert_msg(h_now_ms() < end, "cluster of %d nodes not ready %d ms after its "
                      "creation: %s", n, H_FAILOVER_MS, why);
        usleep(H_POLL_US);
    }
}

int h_cluster_start(int nprimaries, int replicas_per_primary) {
    cluster_start(nprimaries, replicas_per_primary, NULL);
    return 0;
}

int h_tls_cluster_start(int nprimaries, int replicas_per_primary, const char *certs) {
    cluster_start(nprimaries, replicas_per_primary, certs);
    return 0;
}

int h_cluster_node_count(void) {
    return cl_n;
}

int h_cluster_index(int i) {
    return cluster_node(i);
}

int h_cluster_port(int i) {
    return procs[cluster_node(i)].port;
}

const char *h_cluster_addrs(void) {
    static char addrs[H_MAX_PROCS * 24];
    size_t n = 0;
    addrs[0] = '\0';
    for (int i = 0; i < cl_n; i++) {
        if (!proc_running(cl_nodes[i]) || !role_is_master(cl_nodes[i])) continue;
        n += (size_t)snprintf(addrs + n, sizeof(addrs) - n, "%s127.0.0.1:%d", n ? " " : "",
                              procs[cl_nodes[i]].port);
    }
    return addrs;
}

int h_cluster_slot_owner(int slot) {
    ck_assert_msg(slot >= 0 && slot < H_CLUSTER_SLOTS, "no slot %d", slot);
    for (int i = 0; i < cl_n; i++) {
        if (!proc_running(cl_nodes[i])) continue;
        int replicas;
        const char *r = h_redis_unix(cl_nodes[i], "CLUSTER SLOTS");
        if (r != NULL && slots_parse(r, cl_view, &replicas) == 0)
            return cl_view[slot] != 0 ? cl_view[slot] : -1;
    }
    return -1;
}

int h_cluster_keyslot(const char *key) {
    const char *const argv[] = {"CLUSTER", "KEYSLOT", key, NULL};
    for (int i = 0; i < cl_n; i++) {
        if (!proc_running(cl_nodes[i])) continue;
        const char *r = unix_call(cl_nodes[i], argv);
        if (r != NULL && all_digits(r)) return atoi(r);
    }
    ck_abort_msg("no cluster node answers CLUSTER KEYSLOT %s", key);
    return -1;
}

const char *h_cluster_cmd(int port, const char *fmt, ...) {
    static char out[32768];
    char line[2048], portstr[16], path[512];
    const char *words[64], *argv[80];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    split_words(line, words, sizeof(words) / sizeof(words[0]));
    snprintf(portstr, sizeof(portstr), "%d", port);
    int index = h_redis_index_of_port(port);
    size_t argc = 0;
    argv[argc++] = "redis-cli";
    argv[argc++] = "-e"; /* an error reply: exit status 1 */
    argv[argc++] = "-h";
    argv[argc++] = "127.0.0.1";
    argv[argc++] = "-p";
    argv[argc++] = portstr;
    if (cl_cacert[0] != '\0' && cluster_node_of_port(port) >= 0) {
        argv[argc++] = "--tls";
        argv[argc++] = "--cacert";
        argv[argc++] = cl_cacert;
    }
    if (index >= 0 && procs[index].auth[0] != '\0') {
        argv[argc++] = "-a";
        argv[argc++] = procs[index].auth;
        argv[argc++] = "--no-auth-warning";
    }
    for (size_t i = 0; words[i] != NULL; i++) argv[argc++] = words[i];
    argv[argc] = NULL;
    snprintf(path, sizeof(path), "%s/redis-cli.out", test_dir);
    unlink(path);
    pid_t pid = spawn(argv, path);
    int status = wait_exit(pid, H_RESP_MS);
    if (status == -1) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return NULL;
    }
    /* Flattened as h_redis_tcp's: a line per element; no empty lines
     * (redis-cli prints one for a nil and for an empty array). */
    char text[sizeof(out) - 1];
    size_t len = 0;
    FILE *f = fopen(path, "r");
    if (f != NULL) {
        len = fread(text, 1, sizeof(text) - 1, f);
        fclose(f);
    }
    text[len] = '\0';
    int error = !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    if (error && (strncmp(text, "Could not ", 10) == 0 || strncmp(text, "Error: ", 7) == 0))
        return NULL; /* no connection, no TLS handshake, or no reply */
    size_t olen = 0;
    if (error) out[olen++] = '-';
    for (const char *l = text; *l != '\0';) {
        size_t n = strcspn(l, "\n");
        if (n > 0) {
            memcpy(out + olen, l, n);
            olen += n;
            out[olen++] = '\n';
        }
        l += n + (l[n] == '\n');
    }
    if (olen > 0 && out[olen - 1] == '\n') olen--;
    out[olen] = '\0';
    return out;
}

static void setslot(int node, int slot, const char *how, int to_node) {
    const char *r = h_redis_unix(cl_nodes[node], "CLUSTER SETSLOT %d %s %s", slot, how,
                                 cl_ids[to_node]);
    ck_assert_msg(r != NULL && strcmp(r, "OK") == 0, "CLUSTER SETSLOT %d %s %s on port %d: '%s'",
                  slot, how, cl_ids[to_node], procs[cl_nodes[node]].port, r ? r : "(no answer)");
}

/* The node numbers of slot's owner (*from) and of the node on to_port. */
static void migration_nodes(int slot, int to_port, int *from, int *to) {
    ck_assert_msg(slot >= 0 && slot < H_CLUSTER_SLOTS, "no slot %d", slot);
    *to = cluster_node_of_port(to_port);
    ck_assert_msg(*to >= 0, "port %d is no node of this test's cluster", to_port);
    int from_port = h_cluster_slot_owner(slot);
    ck_assert_msg(from_port > 0, "slot %d has no primary", slot);
    *from = cluster_node_of_port(from_port);
    ck_assert_msg(*from >= 0, "slot %d's primary, port %d, is no node of this cluster", slot,
                  from_port);
}

void h_cluster_migrate_begin(int slot, int to_port) {
    int from, to;
    migration_nodes(slot, to_port, &from, &to);
    ck_assert_msg(from != to, "slot %d is on port %d already", slot, to_port);
    setslot(to, slot, "IMPORTING", from);
    setslot(from, slot, "MIGRATING", to);
}

/* Moves up to max keys of slot (max < 0: all) from node from to node to
 * with MIGRATE; returns how many MIGRATE took. */
static int migrate_keys(int from, int to, int slot, int max) {
    static char keys[32768];
    char port[16];
    snprintf(port, sizeof(port), "%d", procs[cl_nodes[to]].port);
    const char *auth = procs[cl_nodes[to]].auth;
    int moved = 0;
    long long end = h_now_ms() + H_FAILOVER_MS;
    while (max < 0 || moved < max) {
        int want = max < 0 || max - moved > H_MIGRATE_BATCH ? H_MIGRATE_BATCH : max - moved;
        const char *r = h_redis_unix(cl_nodes[from], "CLUSTER GETKEYSINSLOT %d %d", slot, want);
        ck_assert_msg(r != NULL && r[0] != '-', "CLUSTER GETKEYSINSLOT %d on port %d: '%s'", slot,
                      procs[cl_nodes[from]].port, r ? r : "(no answer)");
        if (r[0] == '\0') break;
        snprintf(keys, sizeof(keys), "%s", r);
        /* MIGRATE host port "" 0 timeout [AUTH pw] KEYS key...: the
         * request, under resp_call's 4 kB with keys of up to 2 kB */
        const char *argv[H_MIGRATE_BATCH + 16];
        size_t argc = 0, bytes = 0;
        int nkeys = 0;
        argv[argc++] = "MIGRATE";
        argv[argc++] = "127.0.0.1";
        argv[argc++] = port;
        argv[argc++] = "";
        argv[argc++] = "0";
        argv[argc++] = "1500";
        if (auth[0] != '\0') {
            argv[argc++] = "AUTH";
            argv[argc++] = auth;
        }
        argv[argc++] = "KEYS";
        for (char *k = strtok(keys, "\n"); k != NULL && nkeys < want; k = strtok(NULL, "\n")) {
            if (nkeys > 0 && bytes + strlen(k) > 2048) break;
            argv[argc++] = k;
            bytes += strlen(k) + 16;
            nkeys++;
        }
        argv[argc] = NULL;
        r = unix_call(cl_nodes[from], argv);
        ck_assert_msg(r != NULL && (strcmp(r, "OK") == 0 || strcmp(r, "NOKEY") == 0),
                      "MIGRATE of %d keys of slot %d from port %d to %s: '%s'", nkeys, slot,
                      procs[cl_nodes[from]].port, port, r ? r : "(no answer)");
        if (strcmp(r, "OK") == 0) moved += nkeys;
        ck_assert_msg(h_now_ms() < end, "slot %d still has keys on port %d after %d ms", slot,
                      procs[cl_nodes[from]].port, H_FAILOVER_MS);
    }
    return moved;
}

int h_cluster_migrate_keys(int slot, int to_port, int max) {
    int from, to;
    migration_nodes(slot, to_port, &from, &to);
    if (from == to || max == 0) return 0;
    return migrate_keys(from, to, slot, max < 0 ? -1 : max);
}

void h_cluster_migrate_end(int slot, int to_port) {
    int from, to;
    migration_nodes(slot, to_port, &from, &to);
    if (from != to) {
        migrate_keys(from, to, slot, -1);
        /* The target first: it bumps its config epoch, and so its claim
         * wins everywhere; then the source; then the other primaries. */
        setslot(to, slot, "NODE", to);
        setslot(from, slot, "NODE", to);
        for (int i = 0; i < cl_n; i++) {
            if (i == from || i == to || !proc_running(cl_nodes[i])) continue;
            if (role_is_master(cl_nodes[i])) setslot(i, slot, "NODE", to);
        }
    }
    long long end = h_now_ms() + H_WAIT_MS;
    for (;;) {
        const char *why = cluster_lacks(0);
        if (why == NULL && cl_owner[slot] == to_port) return;
        ck_assert_msg(h_now_ms() < end, "slot %d not on port %d everywhere within %d ms: %s",
                      slot, to_port, H_WAIT_MS, why ? why : "it is elsewhere");
        usleep(H_POLL_US / 5);
    }
}

void h_cluster_migrate(int slot, int to_port) {
    h_cluster_migrate_begin(slot, to_port);
    h_cluster_migrate_keys(slot, to_port, -1);
    h_cluster_migrate_end(slot, to_port);
}

int h_cluster_await_failover(int old_port, int timeout_ms) {
    /* old_port's slots: as the running nodes agree now if they still name
     * it (fresher), else as they last agreed */
    static uint16_t was[H_CLUSTER_SLOTS];
    memcpy(was, cl_owner, sizeof(was));
    if (cluster_lacks(0) == NULL) {
        for (int s = 0; s < H_CLUSTER_SLOTS; s++) {
            if (cl_owner[s] != old_port) continue;
            memcpy(was, cl_owner, sizeof(was));
            break;
        }
    }
    int slot = 0;
    while (slot < H_CLUSTER_SLOTS && was[slot] != old_port) slot++;
    ck_assert_msg(slot < H_CLUSTER_SLOTS, "port %d was the primary of no slot", old_port);
    long long end = h_now_ms() + timeout_ms;
    char last[600] = "";
    for (;;) {
        const char *why = cluster_lacks(0);
        if (why == NULL) {
            int port = cl_owner[slot], s = slot;
            for (; s < H_CLUSTER_SLOTS; s++)
                if (was[s] == old_port && cl_owner[s] != port) break;
            int index = h_redis_index_of_port(port);
            if (port == old_port) {
                snprintf(last, sizeof(last), "slot %d is still on port %d", slot, port);
            } else if (s < H_CLUSTER_SLOTS) {
                snprintf(last, sizeof(last), "port %d's slots %d and %d went to different "
                         "primaries", old_port, slot, s);
            } else if (index < 0 || !role_is_master(index)) {
                snprintf(last, sizeof(last), "port %d has slot %d but its ROLE is not master",
                         port, slot);
            } else {
                return port;
            }
        } else {
            snprintf(last, sizeof(last), "%s", why);
        }
        ck_assert_msg(h_now_ms() < end, "no failover away from port %d within %d ms (%s)",
                      old_port, timeout_ms, last);
        usleep(H_POLL_US);
    }
}
