/* Live restore: the hand-over from the old process to the new one, on both sides.
 * SPDX-License-Identifier: MIT */
#include "handover.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include "daemon/log.h"
#include "daemon/util/buf.h"
#include "daemon/util/statefmt.h"

extern char **environ;

/* The channel's words. */
#define HANDOVER_READY "READY"
#define HANDOVER_GO "GO"
#define HANDOVER_FAIL "FAIL "
/* Longest line on the channel. */
#define HANDOVER_LINE_MAX 512
/* How long the old process lets systemd take the new main pid in. */
#define HANDOVER_BARRIER_US 5000000ULL

struct handover_s {
    handover_parts_t p;
    const char *exe;
    char *const *argv;
    int running;
    uint64_t signal_ms;        /* the signal, on CLOCK_MONOTONIC (both processes') */
    uint64_t give_up_ms;       /* when the drain gives up, on the loop's clock */
    uv_idle_t poll;            /* looks after every turn of the loop while it drains */
};

static uint64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Reads one line from fd into line (without its newline), waiting at most
 * until deadline (mono_ms). 0, or -1 on EOF, an error or the deadline. */
static int read_line(int fd, char *line, size_t cap, uint64_t deadline) {
    size_t len = 0;
    for (;;) {
        uint64_t now = mono_ms();
        if (now >= deadline) return -1;
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int rc = poll(&pfd, 1, (int)(deadline - now));
        if (rc < 0 && errno == EINTR) continue;
        if (rc <= 0) return -1;
        char c;
        ssize_t n = read(fd, &c, 1);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n <= 0) return -1;
        if (c == '\n') {
            line[len] = '\0';
            return 0;
        }
        if (len + 1 < cap) line[len++] = c;
    }
}

static int write_all(int fd, const char *p, size_t len) {
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int set_cloexec(int fd, int on) {
    int flags = fcntl(fd, F_GETFD);
    if (flags < 0) return -1;
    return fcntl(fd, F_SETFD, on ? flags | FD_CLOEXEC : flags & ~FD_CLOEXEC);
}

static void count_up(void *data, const backend_node_info_t *node) {
    if (node->up) (*(size_t *)data)++;
}

/* The Redis nodes whose command connection is up. */
static size_t nodes_up(const backend_t *b) {
    size_t n = 0;
    backend_nodes(b, count_up, &n);
    return n;
}

/* ---- the old process ------------------------------------------------------------ */

handover_t *handover_new(const handover_parts_t *parts, const char *exe, char *const *argv) {
    handover_t *h = calloc(1, sizeof(*h));
    if (h == NULL) return NULL;
    h->p = *parts;
    h->exe = exe;
    h->argv = argv;
    uv_idle_init(parts->loop, &h->poll);
    h->poll.data = h;
    return h;
}

static void on_timer_closed(uv_handle_t *handle) {
    free(handle->data);
}

void handover_free(handover_t *h) {
    if (h == NULL) return;
    uv_close((uv_handle_t *)&h->poll, on_timer_closed);
}

/* Nothing was handed over: the old process serves on as before. */
static void fail(handover_t *h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(handover_t *h, const char *fmt, ...) {
    char why[HANDOVER_LINE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    uv_idle_stop(&h->poll);
    h->running = 0;
    sessions_count_upgrade(h->p.sessions, 0, 0, 0);
    log_error("upgrade failed, serving on: %s", why);
    lockmgr_freeze(h->p.locks, 0);
    sessions_freeze(h->p.sessions, 0);
}

/* The state: the head a successor reads first (handover_read), then the
 * connections with their holds and calls, then the counters. fds gets
 * every descriptor the successor needs. */
static int write_state(handover_t *h, buf_t *b, int *fds, size_t *nfds) {
    statew_t w;
    const char *test = getenv(HANDOVER_TEST_VERSION_ENV);
    statew_init(&w, b);
    statew_rec(&w, "dlockd_state");
    statew_u64(&w, test ? strtoull(test, NULL, 10) : HANDOVER_STATE_VERSION);
    statew_rec(&w, "process");
    statew_str(&w, lockmgr_backend(h->p.locks)->uuid);
    statew_u64(&w, (uint64_t)getpid());
    statew_u64(&w, h->signal_ms);
    statew_u64(&w, nodes_up(h->p.backend));
    lockmgr_stats_t ls;
    lockmgr_stats(h->p.locks, &ls);
    statew_u64(&w, ls.locks_held);
    int lfd = server_fd(h->p.server), mfd = h->p.metrics ? metrics_fd(h->p.metrics) : -1;
    statew_rec(&w, "listen");
    statew_u64(&w, (uint64_t)lfd);
    statew_str(&w, server_path(h->p.server));
    statew_rec(&w, "metrics");
    statew_i64(&w, mfd);
    fds[0] = lfd;
    *nfds = 1;
    if (mfd >= 0) fds[(*nfds)++] = mfd;
    statew_rec(&w, "connections");
    size_t n = 0;
    sessions_save(h->p.sessions, &w, fds + *nfds, &n);
    *nfds += n;
    lockmgr_save(h->p.locks, &w);
    statew_rec(&w, "end");
    return statew_finish(&w);
}

/* The environment with HANDOVER_ENV set to value (malloc'd array; its
 * strings are environ's but for that one). */
static char **successor_env(const char *value) {
    size_t n = 0;
    while (environ[n] != NULL) n++;
    char **env = calloc(n + 2, sizeof(*env));
    if (env == NULL) return NULL;
    size_t k = 0, plen = strlen(HANDOVER_ENV);
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], HANDOVER_ENV, plen) != 0 || environ[i][plen] != '=')
            env[k++] = environ[i];
    env[k++] = (char *)(uintptr_t)value;
    env[k] = NULL;
    return env;
}

/* Nothing is in flight: write the state, start the successor, wait for
 * its READY; then hand over and exit, or serve on. */
static void hand_over(handover_t *h) {
    buf_t state = {0};
    size_t cap = 2 + sessions_count(h->p.sessions), nfds = 0;
    int *fds = malloc(cap * sizeof(*fds));
    int sp[2] = {-1, -1}, mem = -1;
    char env_value[64], line[HANDOVER_LINE_MAX];
    char **env = NULL;
    pid_t pid = -1;
    int cloexec_off = 0;        /* the descriptors to pass are open across exec */

    uv_idle_stop(&h->poll);
    uint64_t drained = mono_ms();
    if (fds == NULL || write_state(h, &state, fds, &nfds) != 0) {
        fail(h, "out of memory writing the state");
        goto out;
    }
    mem = memfd_create("dlockd-state", MFD_CLOEXEC);
    if (mem < 0 || write_all(mem, buf_start(&state), state.len) != 0 ||
        lseek(mem, 0, SEEK_SET) != 0) {
        fail(h, "cannot keep the state (%zu bytes) in memory: %s", state.len, strerror(errno));
        goto out;
    }
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) != 0) {
        fail(h, "socketpair: %s", strerror(errno));
        goto out;
    }
    snprintf(env_value, sizeof(env_value), "%s=%d,%d", HANDOVER_ENV, sp[1], mem);
    if ((env = successor_env(env_value)) == NULL) {
        fail(h, "out of memory");
        goto out;
    }
    /* Only what the successor needs crosses exec; posix_spawn, not fork:
     * no copy of this process's page tables, and an exec that fails is
     * its answer. */
    for (size_t i = 0; i < nfds; i++) set_cloexec(fds[i], 0);
    set_cloexec(sp[1], 0);
    set_cloexec(mem, 0);
    cloexec_off = 1;
    fflush(NULL);
    int src = posix_spawn(&pid, h->exe, NULL, NULL, h->argv, env);
    close(sp[1]);
    sp[1] = -1;
    if (src != 0) {
        fail(h, "cannot run %s: %s", h->exe, strerror(src));
        goto out;
    }
    log_info("upgrade: handing over to %s (pid %ld): %zu connections, %zu bytes of state "
             "(drained in %llu ms, written and started in %llu)", h->exe, (long)pid,
             sessions_count(h->p.sessions), state.len,
             (unsigned long long)(drained > h->signal_ms ? drained - h->signal_ms : 0),
             (unsigned long long)(mono_ms() - drained));
    /* This process renews nothing while it waits: never longer than a
     * renewal period, which every hold outlives (a lease's 1/3 by
     * default; its loss margin is 1/10). */
    uint64_t wait_ms = HANDOVER_TIMEOUT_MS;
    if (h->p.conf->renew_every_ms < wait_ms) wait_ms = h->p.conf->renew_every_ms;
    if (read_line(sp[0], line, sizeof(line), mono_ms() + wait_ms) != 0 ||
        strcmp(line, HANDOVER_READY) != 0) {
        int status = 0;
        char why[HANDOVER_LINE_MAX];
        if (strncmp(line, HANDOVER_FAIL, strlen(HANDOVER_FAIL)) == 0)
            snprintf(why, sizeof(why), "%s", line + strlen(HANDOVER_FAIL));
        else
            snprintf(why, sizeof(why), "the new process did not say it was ready in %llu ms",
                     (unsigned long long)wait_ms);
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        if (strncmp(line, HANDOVER_FAIL, strlen(HANDOVER_FAIL)) != 0 && WIFEXITED(status))
            snprintf(why, sizeof(why), "the new process exited with status %d before it was "
                     "ready", WEXITSTATUS(status));
        line[0] = '\0';
        fail(h, "%s", why);
        goto out;
    }
    if (write_all(sp[0], HANDOVER_GO "\n", strlen(HANDOVER_GO) + 1) != 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        fail(h, "the new process went away before it took over");
        goto out;
    }
    /* The new process serves; systemd takes its pid as the main one before
     * this one goes (a crash of the new one from here on is a crash of
     * the daemon: systemd sees its main process go). */
    if (getenv("NOTIFY_SOCKET") != NULL) {
        sd_notifyf(0, "MAINPID=%ld", (long)pid);
        int brc = sd_notify_barrier(0, HANDOVER_BARRIER_US);
        if (brc < 0) log_warn("upgrade: systemd did not confirm the new main pid: %s",
                              strerror(-brc));
    }
    log_info("upgrade: pid %ld took over", (long)pid);
    fflush(NULL);
    /* Nothing is released, closed or said: it is all the successor's. */
    _exit(0);
out:
    if (cloexec_off)
        for (size_t i = 0; i < nfds; i++) set_cloexec(fds[i], 1);
    if (sp[0] >= 0) close(sp[0]);
    if (sp[1] >= 0) close(sp[1]);
    if (mem >= 0) close(mem);
    free(env);
    free(fds);
    buf_free(&state);
}

static void on_poll(uv_idle_t *t) {
    handover_t *h = t->data;
    const char *why = lockmgr_busy(h->p.locks);
    if (why == NULL) why = sessions_busy(h->p.sessions);
    if (why == NULL) {
        hand_over(h);
        return;
    }
    if (uv_now(h->p.loop) >= h->give_up_ms)
        fail(h, "still busy after %d ms: %s", HANDOVER_DRAIN_MS, why);
}

void handover_start(handover_t *h) {
    if (h->running) {
        log_warn("upgrade: a hand-over is in progress already");
        return;
    }
    if (access(h->exe, X_OK) != 0) {
        h->running = 1; /* fail()'s */
        fail(h, "%s cannot be run: %s", h->exe, strerror(errno));
        return;
    }
    h->running = 1;
    h->signal_ms = mono_ms();
    h->give_up_ms = uv_now(h->p.loop) + HANDOVER_DRAIN_MS;
    log_info("upgrade: SIGUSR2: stopping reading and handing over to %s", h->exe);
    sessions_freeze(h->p.sessions, 1);
    lockmgr_freeze(h->p.locks, 1);
    uv_idle_start(&h->poll, on_poll);
}

/* ---- the new process ------------------------------------------------------------ */

int handover_is_successor(void) {
    return getenv(HANDOVER_ENV) != NULL;
}

void handover_refuse(handover_in_t *in, const char *why) {
    char line[HANDOVER_LINE_MAX];
    int n = snprintf(line, sizeof(line), HANDOVER_FAIL "%s\n", why);
    log_error("upgrade: cannot take over: %s", why);
    if (in->channel >= 0 && n > 0)
        (void)write_all(in->channel, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line));
    fflush(NULL);
    _exit(1);
}

int handover_read(handover_in_t *in, char *err, size_t errlen) {
    const char *env = getenv(HANDOVER_ENV);
    int state_fd = -1;
    memset(in, 0, sizeof(*in));
    in->channel = -1;
    in->metrics_fd = -1;
    if (env == NULL || sscanf(env, "%d,%d", &in->channel, &state_fd) != 2 || in->channel < 0 ||
        state_fd < 0) {
        snprintf(err, errlen, "%s is not <fd>,<fd>", HANDOVER_ENV);
        in->channel = -1;
        return -1;
    }
    unsetenv(HANDOVER_ENV);
    set_cloexec(in->channel, 1);
    set_cloexec(state_fd, 1);
    struct stat st;
    if (fstat(state_fd, &st) != 0 || st.st_size <= 0) {
        snprintf(err, errlen, "the state cannot be read: %s", strerror(errno));
        return -1;
    }
    in->len = (size_t)st.st_size;
    if ((in->text = malloc(in->len)) == NULL) {
        snprintf(err, errlen, "out of memory for %zu bytes of state", in->len);
        return -1;
    }
    size_t got = 0;
    while (got < in->len) {
        ssize_t n = pread(state_fd, in->text + got, in->len - got, (off_t)got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            snprintf(err, errlen, "the state cannot be read: %s", n < 0 ? strerror(errno) : "short");
            return -1;
        }
        got += (size_t)n;
    }
    close(state_fd);

    stater_t r;
    char word[STATE_WORD_MAX];
    stater_init(&r, in->text, in->len);
    if (!stater_rec(&r, word) || strcmp(word, "dlockd_state") != 0) {
        snprintf(err, errlen, "the state is not a dlockd's");
        return -1;
    }
    uint64_t version = stater_u64(&r);
    if (r.err || version != HANDOVER_STATE_VERSION) {
        snprintf(err, errlen, "the state's version %llu is not one this dlockd reads (%d)",
                 (unsigned long long)version, HANDOVER_STATE_VERSION);
        return -1;
    }
    int64_t mfd = -1;
    uint64_t lfd = 0;
    while (stater_rec(&r, word) && strcmp(word, "connections") != 0) {
        if (strcmp(word, "process") == 0) {
            stater_str(&r, in->uuid, sizeof(in->uuid));
            in->old_pid = (long)stater_u64(&r);
            in->signal_ms = stater_u64(&r);
            in->nodes_up = (size_t)stater_u64(&r);
            in->holds = (size_t)stater_u64(&r);
        } else if (strcmp(word, "listen") == 0) {
            lfd = stater_u64(&r);
            stater_str(&r, in->listen_path, sizeof(in->listen_path));
        } else if (strcmp(word, "metrics") == 0) {
            mfd = stater_i64(&r);
        }
    }
    if (r.err || strcmp(word, "connections") != 0 || in->uuid[0] == '\0' || lfd == 0 ||
        in->listen_path[0] == '\0' ||
        lfd > INT32_MAX || mfd > INT32_MAX) {
        snprintf(err, errlen, "the state's head is broken: %s", r.err ? r.why : "a part is missing");
        return -1;
    }
    in->listen_fd = (int)lfd;
    in->metrics_fd = (int)mfd;
    in->offset = (size_t)(r.p - in->text);
    if (in->offset < in->len && in->text[in->offset] == '\n') in->offset++; /* its end */
    return 0;
}

static void on_backend_wait(uv_timer_t *t) {
    *(int *)t->data = 1;
}

static void on_wait_closed(uv_handle_t *handle) {
    (void)handle;
}

/* Redis as the old process had it: available, and as many nodes up (a
 * Cluster's primaries connect one by one, and a request for a slot whose
 * node is not connected yet is refused). */
static int reached(const backend_t *b, size_t want_up) {
    return backend_available(b, NULL, 0) && nodes_up(b) >= want_up;
}

int handover_await_backend(uv_loop_t *loop, backend_t *b, size_t want_up, char *err,
                           size_t errlen) {
    uv_timer_t t;
    int expired = 0;
    uv_timer_init(loop, &t);
    t.data = &expired;
    uv_timer_start(&t, on_backend_wait, HANDOVER_BACKEND_WAIT_MS, 0);
    while (!expired && !reached(b, want_up)) uv_run(loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&t, on_wait_closed);
    uv_run(loop, UV_RUN_NOWAIT);
    if (!reached(b, want_up)) {
        char d[256];
        backend_describe(b, NULL, 0, d, sizeof(d));
        snprintf(err, errlen, "Redis did not answer as it did the old process (%zu nodes up) in "
                 "%d ms (%s)", want_up, HANDOVER_BACKEND_WAIT_MS, d);
        return -1;
    }
    return 0;
}

int handover_restore(handover_in_t *in, const handover_parts_t *p, char *err, size_t errlen) {
    uint64_t started = mono_ms();
    stater_t r;
    char word[STATE_WORD_MAX];
    session_t *s = NULL;
    size_t conns = 0, calls = 0;
    uv_update_time(p->loop);
    lockmgr_load_start(p->locks, in->holds);
    stater_init(&r, in->text + in->offset, in->len - in->offset);
    while (stater_rec(&r, word)) {
        if (strcmp(word, "end") == 0) break;
        if (strcmp(word, "conn") == 0) {
            uint64_t fd = stater_u64(&r);
            uv_pipe_t *pipe;
            session_peer_t peer;
            char why[256];
            sessions_load_peer(&r, &peer);
            if (r.err) break;
            if (fd > INT32_MAX ||
                server_readmit(p->server, (int)fd, &pipe, &peer, why, sizeof(why)) != 0) {
                stater_fail(&r, fd > INT32_MAX ? "a descriptor is out of range" : why);
                break;
            }
            if ((s = sessions_load_conn(p->sessions, pipe, &peer, &r)) == NULL) break;
            conns++;
        } else if (strcmp(word, "call") == 0) {
            if (s == NULL) stater_fail(&r, "a call before any connection");
            else session_load_call(s, &r);
            calls++;
        } else if (!lockmgr_load(p->locks, s ? session_owner(s) : NULL, word, &r) &&
                   !sessions_load(p->sessions, word, &r)) {
            stater_fail(&r, "a record this dlockd does not know");
            snprintf(err, errlen, "a record this dlockd does not know: %s", word);
            return -1;
        }
        if (r.err) break;
    }
    if (r.err || strcmp(word, "end") != 0) {
        snprintf(err, errlen, "the state is broken at byte %zu: %s",
                 in->offset + (size_t)(r.p - (in->text + in->offset)),
                 r.err ? r.why : "it has no end");
        return -1;
    }
    if (lockmgr_load_done(p->locks) != 0) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    lockmgr_stats_t ls;
    lockmgr_stats(p->locks, &ls);
    log_info("upgrade: took over from pid %ld: %zu connections, %llu holds, %zu requests in "
             "progress, %zu bytes of state (%llu ms after the signal, restored in %llu)",
             in->old_pid, conns, (unsigned long long)ls.locks_held, calls, in->len,
             (unsigned long long)(mono_ms() - in->signal_ms),
             (unsigned long long)(mono_ms() - started));
    return 0;
}

int handover_commit(handover_in_t *in) {
    char line[HANDOVER_LINE_MAX];
    if (write_all(in->channel, HANDOVER_READY "\n", strlen(HANDOVER_READY) + 1) != 0) return -1;
    /* The old process answers at once. */
    if (read_line(in->channel, line, sizeof(line), mono_ms() + HANDOVER_TIMEOUT_MS) != 0 ||
        strcmp(line, HANDOVER_GO) != 0)
        return -1;
    close(in->channel);
    in->channel = -1;
    return 0;
}

void handover_resume(handover_in_t *in, const handover_parts_t *p) {
    uv_update_time(p->loop);
    uint64_t now = mono_ms();
    sessions_count_upgrade(p->sessions, 1, now > in->signal_ms ? now - in->signal_ms : 0,
                           in->len);
    free(in->text);
    in->text = NULL;
    sessions_resume(p->sessions);
}

/* ---- dlockd --upgrade ----------------------------------------------------------- */

/* INFO from the dlockd on socket: its pid, upgrades and failures. 0, or -1. */
static int ask_info(const char *path, long *pid, unsigned long long *ups,
                    unsigned long long *fails) {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    char buf[4096];
    size_t len = 0;
    if (strlen(path) >= sizeof(sa.sun_path)) return -1;
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    /* A daemon handing over answers once it is done (or has given up). */
    struct timeval tv = {.tv_sec = HANDOVER_REQUEST_WAIT_MS / 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        write_all(fd, "INFO\n", 5) != 0) {
        close(fd);
        return -1;
    }
    while (len + 1 < sizeof(buf)) {
        ssize_t n = read(fd, buf + len, sizeof(buf) - 1 - len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        len += (size_t)n;
        if (memchr(buf, '\n', len) != NULL) break;
    }
    close(fd);
    buf[len] = '\0';
    const char *p = strstr(buf, " pid="), *u = strstr(buf, " upgrades="),
               *f = strstr(buf, " upgrade_failures=");
    if (strncmp(buf, "OK ", 3) != 0 || p == NULL || u == NULL || f == NULL) return -1;
    *pid = strtol(p + 5, NULL, 10);
    *ups = strtoull(u + 10, NULL, 10);
    *fails = strtoull(f + 18, NULL, 10);
    return *pid > 0 ? 0 : -1;
}

int handover_request(const char *path) {
    long pid, npid = 0;
    unsigned long long ups, fails, nups = 0, nfails = 0;
    if (ask_info(path, &pid, &ups, &fails) != 0) {
        fprintf(stderr, "dlockd: no dlockd on %s says its pid in INFO (none runs, or one too "
                "old to hand over: restart it)\n", path);
        return 1;
    }
    if (kill((pid_t)pid, SIGUSR2) != 0) {
        fprintf(stderr, "dlockd: cannot signal pid %ld: %s\n", pid, strerror(errno));
        return 1;
    }
    uint64_t deadline = mono_ms() + HANDOVER_REQUEST_WAIT_MS;
    while (mono_ms() < deadline) {
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL); /* polls the daemon's answer: nothing to wait on */
        if (ask_info(path, &npid, &nups, &nfails) != 0) continue; /* frozen, or handing over */
        if (nups > ups) {
            printf("dlockd: pid %ld handed over to pid %ld\n", pid, npid);
            return 0;
        }
        if (nfails > fails) {
            fprintf(stderr, "dlockd: hand-over failed, pid %ld serves on; see its log\n", pid);
            return 1;
        }
    }
    fprintf(stderr, "dlockd: no outcome from pid %ld in %d ms; see its log\n", pid,
            HANDOVER_REQUEST_WAIT_MS);
    return 1;
}
