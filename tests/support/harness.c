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
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}

void h_setup(void) {
    static int counter;
    nprocs = 0;
    redis_index = -1;
    redis_seq = 0;
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

/* Starts a redis-server by index listening as listen[] says ("%d" in an
 * argument stands for the port), plus a Unix socket to see it ready. With
 * port 0 a free port is chosen, and another one if the server could not
 * have it. Returns its index. */
static int redis_start_index(int port, const char *const listen[], const char *const extra[]) {
    int n = redis_seq++;
    char sock[256], log[512], dir[256], port_arg[16];
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
            } else {
                snprintf(listen_args[i], sizeof(listen_args[i]), "%s", listen[i]);
                argv[argc++] = listen_args[i];
            }
        }
        for (size_t i = 0; extra != NULL && extra[i] != NULL; i++) {
            ck_assert_uint_lt(argc, sizeof(argv) / sizeof(argv[0]) - 1);
            argv[argc++] = extra[i];
        }
        argv[argc] = NULL;
        unlink(sock);
        procs[index].pid = spawn(argv, log);
        procs[index].port = p;
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
    char cert[512], key[512], ca[512];
    snprintf(cert, sizeof(cert), "%s/server.crt", certs);
    snprintf(key, sizeof(key), "%s/server.key", certs);
    snprintf(ca, sizeof(ca), "%s/ca.crt", certs);
    const char *const listen[] = {"--port", "0", "--tls-port", "%d", "--bind", "127.0.0.1",
                                  "--tls-cert-file", cert, "--tls-key-file", key,
                                  "--tls-ca-cert-file", ca, "--tls-auth-clients",
                                  auth_clients ? "yes" : "no", NULL};
    return redis_start_index(port, listen, NULL);
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

static const char *dlockd_bin(void) {
    const char *b = getenv("DLOCKD_BIN");
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
