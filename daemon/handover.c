/* Live restore: the hand-over from the old process to the new one, on both sides.
 * SPDX-License-Identifier: MIT */
#include "handover.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include "daemon/log.h"
#include "daemon/util/buf.h"
#include "daemon/util/statefmt.h"

extern char **environ;

/* The channel: the new process says lines (HELLO, READY, FAIL <why>); the
 * old one sends frames: a header (payload bytes, descriptors) alone with
 * the descriptors attached, then the payload, whose first record names
 * the descriptors by their numbers in the old process. */
#define HANDOVER_HELLO "HELLO"
#define HANDOVER_READY "READY"
#define HANDOVER_FAIL "FAIL "
/* Longest line on the channel. */
#define HANDOVER_LINE_MAX 512
/* How long the old process lets systemd take the new main pid in. */
#define HANDOVER_BARRIER_US 5000000ULL

typedef struct frame_hdr_s {
    uint32_t len;
    uint32_t nfds;
} frame_hdr_t;

typedef enum {
    HANDOVER_IDLE = 0,
    HANDOVER_STARTING,         /* the new process starts; this one serves on */
    HANDOVER_DRAINING          /* frozen, until nothing is in flight */
} handover_phase_t;

struct handover_s {
    handover_parts_t p;
    const char *exe;
    char *const *argv;
    handover_phase_t phase;
    pid_t child;
    int channel;               /* our end, -1 */
    uint64_t signal_ms;        /* the signal, on CLOCK_MONOTONIC (both processes') */
    uint64_t give_up_ms;       /* when the drain gives up, on the loop's clock */
    uint64_t frozen_ms;        /* when it stopped serving (CLOCK_MONOTONIC) */
    char line[HANDOVER_LINE_MAX]; /* what the new process said so far */
    size_t line_len;
    uv_poll_t hello;           /* the channel, while the new process starts */
    int hello_active;
    uv_timer_t timer;          /* it must say HELLO in time */
    uv_idle_t poll;            /* looks after every turn of the loop while it drains */
    int stops_held;            /* SIGTERM and SIGINT held back (stops_held) */
    unsigned turns;            /* of the loop since the drain began */
    int closing;               /* handles whose close is to come ... */
    int freed;                 /* ... and then it goes (handover_free) */
};

static uint64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Waits until fd is ready for events, at most until deadline (mono_ms):
 * 0, or -1. */
static int await_fd(int fd, short events, uint64_t deadline) {
    for (;;) {
        uint64_t now = mono_ms();
        if (now >= deadline) return -1;
        struct pollfd pfd = {.fd = fd, .events = events};
        int rc = poll(&pfd, 1, (int)(deadline - now));
        if (rc < 0 && errno == EINTR) continue;
        return rc > 0 ? 0 : -1;
    }
}

/* Reads one line from fd into line (without its newline), waiting at most
 * until deadline. 0, or -1 on EOF, an error or the deadline. */
static int read_line(int fd, char *line, size_t cap, uint64_t deadline) {
    size_t len = 0;
    for (;;) {
        if (await_fd(fd, POLLIN, deadline) != 0) return -1;
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

/* Writes all of p, waiting at most until deadline (fd may be non-blocking). */
static int write_all(int fd, const void *p, size_t len, uint64_t deadline) {
    const char *q = p;
    while (len > 0) {
        ssize_t n = send(fd, q, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) {
            if (await_fd(fd, POLLOUT, deadline) != 0) return -1;
            continue;
        }
        if (n <= 0) return -1;
        q += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Reads exactly len bytes, waiting at most until deadline. */
static int read_all(int fd, void *p, size_t len, uint64_t deadline) {
    char *q = p;
    while (len > 0) {
        ssize_t n = read(fd, q, len);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) {
            if (await_fd(fd, POLLIN, deadline) != 0) return -1;
            continue;
        }
        if (n <= 0) return -1;
        q += n;
        len -= (size_t)n;
    }
    return 0;
}

static int set_cloexec(int fd, int on) {
    int flags = fcntl(fd, F_GETFD);
    if (flags < 0) return -1;
    return fcntl(fd, F_SETFD, on ? flags | FD_CLOEXEC : flags & ~FD_CLOEXEC);
}

static int set_nonblock(int fd) {
    int flags = fcntl(fd, F_GETFL);
    return flags < 0 ? -1 : fcntl(fd, F_SETFL, flags | O_NONBLOCK);
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

/* Sends one frame: its header with nfds descriptors, then the payload's
 * parts. 0, or -1. */
static int send_frame(int ch, const buf_t *a, const buf_t *b, const int *fds, size_t nfds,
                      uint64_t deadline) {
    frame_hdr_t hdr = {.len = (uint32_t)(a->len + (b ? b->len : 0)), .nfds = (uint32_t)nfds};
    union {
        char buf[CMSG_SPACE(sizeof(int) * HANDOVER_FRAME_FDS)];
        struct cmsghdr align;
    } u;
    struct iovec iov = {.iov_base = &hdr, .iov_len = sizeof(hdr)};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    if (nfds > 0) {
        memset(&u, 0, sizeof(u));
        msg.msg_control = u.buf;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
        struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
        memcpy(CMSG_DATA(cm), fds, sizeof(int) * nfds);
    }
    /* The header goes alone, so that its descriptors arrive with it. */
    for (;;) {
        ssize_t n = sendmsg(ch, &msg, MSG_NOSIGNAL);
        if (n == (ssize_t)sizeof(hdr)) break;
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN && await_fd(ch, POLLOUT, deadline) == 0) continue;
        return -1;
    }
    if (write_all(ch, buf_start(a), a->len, deadline) != 0) return -1;
    return b ? write_all(ch, buf_start(b), b->len, deadline) : 0;
}

/* ---- the old process ------------------------------------------------------------ */

handover_t *handover_new(const handover_parts_t *parts, const char *exe, char *const *argv) {
    handover_t *h = calloc(1, sizeof(*h));
    if (h == NULL) return NULL;
    h->p = *parts;
    h->exe = exe;
    h->argv = argv;
    h->channel = -1;
    uv_idle_init(parts->loop, &h->poll);
    h->poll.data = h;
    uv_timer_init(parts->loop, &h->timer);
    h->timer.data = h;
    return h;
}

static void on_closed(uv_handle_t *handle) {
    handover_t *h = handle->data;
    if (--h->closing == 0 && h->freed) free(h);
}

/* The new process goes (it is not ours to wait for any more), and the
 * channel with it. */
static void end_child(handover_t *h) {
    if (h->hello_active) {
        uv_poll_stop(&h->hello);
        h->closing++;
        uv_close((uv_handle_t *)&h->hello, on_closed);
        h->hello_active = 0;
    }
    if (h->channel >= 0) close(h->channel);
    h->channel = -1;
    if (h->child > 0) {
        kill(h->child, SIGKILL);
        waitpid(h->child, NULL, 0);
    }
    h->child = 0;
}

void handover_free(handover_t *h) {
    if (h == NULL) return;
    h->freed = 1;
    h->closing += 2; /* before end_child: its close may not free h */
    end_child(h);
    uv_close((uv_handle_t *)&h->poll, on_closed);
    uv_close((uv_handle_t *)&h->timer, on_closed);
}

/* A stop (SIGTERM, SIGINT) is held back from the drain's start: one that
 * comes meanwhile ends the hand-over, and is handled then. */
static int stop_pending(void) {
    sigset_t pending;
    return sigpending(&pending) == 0 &&
           (sigismember(&pending, SIGTERM) == 1 || sigismember(&pending, SIGINT) == 1);
}

static void stops_held(handover_t *h, int held) {
    sigset_t stops;
    sigemptyset(&stops);
    sigaddset(&stops, SIGTERM);
    sigaddset(&stops, SIGINT);
    sigprocmask(held ? SIG_BLOCK : SIG_UNBLOCK, &stops, NULL);
    h->stops_held = held;
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
    uv_timer_stop(&h->timer);
    end_child(h);
    int frozen = h->phase == HANDOVER_DRAINING;
    h->phase = HANDOVER_IDLE;
    if (h->stops_held) stops_held(h, 0); /* one held back is handled now */
    sessions_count_upgrade(h->p.sessions, 0, 0, 0);
    log_error("upgrade failed, serving on: %s", why);
    if (frozen) {
        lockmgr_freeze(h->p.locks, 0);
        sessions_freeze(h->p.sessions, 0);
    }
}

/* The state, streamed: records into buf, sent as a frame whenever they
 * pass HANDOVER_FRAME_BYTES or name HANDOVER_FRAME_FDS descriptors, so
 * that the new process reads one while this one writes the next. */
typedef struct sender_s {
    int ch;
    uint64_t deadline;
    buf_t buf, head;
    statew_t w;
    int fds[HANDOVER_FRAME_FDS];
    size_t nfds;
    size_t bytes;              /* sent */
    int failed;
} sender_t;

static void flush_frame(sender_t *s) {
    statew_t hw;
    if (s->failed) return;
    if (statew_finish(&s->w) != 0) {
        s->failed = 1;
        return;
    }
    buf_clear(&s->head);
    statew_init(&hw, &s->head);
    statew_rec(&hw, "fds");
    statew_u64(&hw, s->nfds);
    for (size_t i = 0; i < s->nfds; i++) statew_u64(&hw, (uint64_t)s->fds[i]);
    if (statew_finish(&hw) != 0 ||
        send_frame(s->ch, &s->head, &s->buf, s->fds, s->nfds, s->deadline) != 0) {
        s->failed = 1;
        return;
    }
    s->bytes += s->head.len + s->buf.len;
    buf_clear(&s->buf);
    s->nfds = 0;
}

/* After each connection's records. */
static void on_saved(void *data, int fd) {
    sender_t *s = data;
    s->fds[s->nfds++] = fd;
    if (s->nfds == HANDOVER_FRAME_FDS || s->buf.len >= HANDOVER_FRAME_BYTES) flush_frame(s);
}

/* Nothing is in flight: stream the state, wait for READY; then hand over
 * and exit, or serve on. This process runs no loop meanwhile: it renews
 * nothing, so all of it is bounded by a renewal period, which every hold
 * outlives (a lease's 1/3 by default; its loss margin is 1/10). */
static void hand_over(handover_t *h) {
    sender_t s = {.ch = h->channel};
    uint64_t wait_ms = HANDOVER_TIMEOUT_MS, drained = mono_ms();
    char line[HANDOVER_LINE_MAX];
    if (h->p.conf->renew_every_ms < wait_ms) wait_ms = h->p.conf->renew_every_ms;
    s.deadline = drained + wait_ms;
    uv_idle_stop(&h->poll);
    statew_init(&s.w, &s.buf);
    sessions_save(h->p.sessions, &s.w, on_saved, &s);
    lockmgr_save(h->p.locks, &s.w);
    statew_rec(&s.w, "end");
    flush_frame(&s);
    size_t bytes = s.bytes;
    int failed = s.failed;
    buf_free(&s.buf);
    buf_free(&s.head);
    if (failed) {
        fail(h, "the state could not be sent (%s)", errno ? strerror(errno) : "out of memory");
        return;
    }
    uint64_t sent = mono_ms();
    if (read_line(h->channel, line, sizeof(line), s.deadline) != 0 ||
        strcmp(line, HANDOVER_READY) != 0) {
        if (strncmp(line, HANDOVER_FAIL, strlen(HANDOVER_FAIL)) == 0)
            fail(h, "%s", line + strlen(HANDOVER_FAIL));
        else
            fail(h, "the new process did not say it was ready within %llu ms",
                 (unsigned long long)wait_ms);
        return;
    }
    if (stop_pending()) {
        fail(h, "a signal to stop came meanwhile: stopping instead");
        return;
    }
    buf_t go = {0};
    statew_t gw;
    statew_init(&gw, &go);
    statew_rec(&gw, "go");
    if (statew_finish(&gw) != 0 || send_frame(h->channel, &go, NULL, NULL, 0, s.deadline) != 0) {
        buf_free(&go);
        fail(h, "the new process went away before it took over");
        return;
    }
    buf_free(&go);
    /* The new process serves; systemd takes its pid as the main one before
     * this one goes (a crash of the new one from here on is a crash of
     * the daemon: systemd sees its main process go). */
    pid_t pid = h->child;
    if (getenv("NOTIFY_SOCKET") != NULL) {
        sd_notifyf(0, "MAINPID=%ld", (long)pid);
        int rc = sd_notify_barrier(0, HANDOVER_BARRIER_US);
        if (rc < 0) log_warn("upgrade: systemd did not confirm the new main pid: %s",
                             strerror(-rc));
    }
    log_info("upgrade: pid %ld took over: %zu bytes of state (it started in %llu ms; this one "
             "drained in %llu, sent in %llu, and it was ready %llu after)", (long)pid, bytes,
             (unsigned long long)(h->frozen_ms - h->signal_ms),
             (unsigned long long)(drained - h->frozen_ms), (unsigned long long)(sent - drained),
             (unsigned long long)(mono_ms() - sent));
    fflush(NULL);
    /* Nothing is released, closed or said: it is all the successor's. */
    _exit(0);
}

static void on_poll(uv_idle_t *t) {
    handover_t *h = t->data;
    if (stop_pending()) {
        fail(h, "a signal to stop came meanwhile: stopping instead");
        return;
    }
    /* One turn of the loop first: a stop caught just before it was held
     * back is in libuv's signal pipe, which that turn reads. */
    if (h->turns++ == 0) return;
    const char *why = lockmgr_busy(h->p.locks);
    if (why == NULL) why = sessions_busy(h->p.sessions);
    if (why == NULL) {
        hand_over(h);
        return;
    }
    if (uv_now(h->p.loop) >= h->give_up_ms)
        fail(h, "still busy after %d ms: %s", HANDOVER_DRAIN_MS, why);
}

/* The new process is ready to take over: stop, drain, then hand over. */
static void drain(handover_t *h) {
    uv_timer_stop(&h->timer);
    uv_poll_stop(&h->hello);
    h->closing++;
    uv_close((uv_handle_t *)&h->hello, on_closed);
    h->hello_active = 0;
    h->phase = HANDOVER_DRAINING;
    h->frozen_ms = mono_ms();
    h->turns = 0;
    stops_held(h, 1);
    log_info("upgrade: pid %ld is ready: stopping reading to hand over", (long)h->child);
    h->give_up_ms = uv_now(h->p.loop) + HANDOVER_DRAIN_MS;
    sessions_freeze(h->p.sessions, 1);
    lockmgr_freeze(h->p.locks, 1);
    uv_idle_start(&h->poll, on_poll);
}

/* The new process closed its end before it was ready: why it said it
 * could not take over, if it did, else how it ended. */
static void child_gone(handover_t *h) {
    int st = 0;
    pid_t pid = h->child;
    char c;
    while (h->channel >= 0 && read(h->channel, &c, 1) == 1) {
        if (c != '\n') {
            if (h->line_len + 1 < sizeof(h->line)) h->line[h->line_len++] = c;
            continue;
        }
        h->line[h->line_len] = '\0';
        h->line_len = 0;
        if (strncmp(h->line, HANDOVER_FAIL, strlen(HANDOVER_FAIL)) == 0) {
            fail(h, "%s", h->line + strlen(HANDOVER_FAIL)); /* it reaps the child */
            return;
        }
    }
    h->child = 0;
    waitpid(pid, &st, 0);
    if (WIFEXITED(st))
        fail(h, "the new process exited with status %d before it was ready", WEXITSTATUS(st));
    else
        fail(h, "the new process ended before it was ready (signal %d)",
             WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* What the starting process says: HELLO, FAIL <why>, or its end. */
static void on_hello(uv_poll_t *p, int status, int events) {
    handover_t *h = p->data;
    (void)events;
    char c;
    ssize_t n = -1;
    if (status == 0) {
        n = read(h->channel, &c, 1);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    }
    if (n <= 0) {
        child_gone(h);
        return;
    }
    if (c != '\n') {
        if (h->line_len + 1 < sizeof(h->line)) h->line[h->line_len++] = c;
        return;
    }
    h->line[h->line_len] = '\0';
    h->line_len = 0;
    if (strcmp(h->line, HANDOVER_HELLO) == 0) drain(h);
    else if (strncmp(h->line, HANDOVER_FAIL, strlen(HANDOVER_FAIL)) == 0)
        fail(h, "%s", h->line + strlen(HANDOVER_FAIL));
    else fail(h, "the new process said '%.100s'", h->line);
}

static void on_hello_late(uv_timer_t *t) {
    handover_t *h = t->data;
    fail(h, "the new process did not say it was ready within %d ms", HANDOVER_TIMEOUT_MS);
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

/* The state's head: what the new process needs before any connection. */
static int send_head(handover_t *h, uint64_t deadline) {
    buf_t b = {0};
    statew_t w;
    lockmgr_stats_t ls;
    lockmgr_stats(h->p.locks, &ls);
    statew_init(&w, &b);
    statew_rec(&w, "fds");
    statew_u64(&w, 0);
    statew_rec(&w, "process");
    statew_u64(&w, (uint64_t)getpid());
    statew_u64(&w, h->signal_ms);
    statew_u64(&w, ls.locks_held);
    statew_rec(&w, "listen");
    statew_u64(&w, (uint64_t)server_fd(h->p.server));
    statew_str(&w, server_path(h->p.server));
    statew_rec(&w, "metrics");
    statew_i64(&w, h->p.metrics ? metrics_fd(h->p.metrics) : -1);
    int rc = statew_finish(&w) == 0 ? send_frame(h->channel, &b, NULL, NULL, 0, deadline) : -1;
    buf_free(&b);
    return rc;
}

void handover_start(handover_t *h) {
    int sp[2] = {-1, -1};
    char value[160];
    if (h->phase != HANDOVER_IDLE || h->closing > 0) {
        log_warn("upgrade: a hand-over is in progress already");
        return;
    }
    h->phase = HANDOVER_STARTING;
    h->signal_ms = mono_ms();
    if (access(h->exe, X_OK) != 0) {
        fail(h, "%s cannot be run: %s", h->exe, strerror(errno));
        return;
    }
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) != 0) {
        fail(h, "socketpair: %s", strerror(errno));
        return;
    }
    h->channel = sp[0];
    const char *test = getenv(HANDOVER_TEST_VERSION_ENV);
    snprintf(value, sizeof(value), "%s=%llu,%d,%zu,%s", HANDOVER_ENV,
             test ? strtoull(test, NULL, 10) : (unsigned long long)HANDOVER_STATE_VERSION, sp[1],
             nodes_up(h->p.backend), lockmgr_backend(h->p.locks)->uuid);
    char **env = successor_env(value);
    if (env == NULL) {
        close(sp[1]);
        fail(h, "out of memory");
        return;
    }
    /* The sockets that do not change cross exec; the connections follow
     * with the state, as they are then. posix_spawn, not fork: no copy of
     * this process's page tables, and an exec that fails is its answer. */
    int lfd = server_fd(h->p.server), mfd = h->p.metrics ? metrics_fd(h->p.metrics) : -1;
    set_cloexec(sp[1], 0);
    set_cloexec(lfd, 0);
    if (mfd >= 0) set_cloexec(mfd, 0);
    fflush(NULL);
    pid_t pid;
    int rc = posix_spawn(&pid, h->exe, NULL, NULL, h->argv, env);
    set_cloexec(lfd, 1);
    if (mfd >= 0) set_cloexec(mfd, 1);
    close(sp[1]);
    free(env);
    if (rc != 0) {
        fail(h, "cannot run %s: %s", h->exe, strerror(rc));
        return;
    }
    h->child = pid;
    set_nonblock(h->channel);
    log_info("upgrade: SIGUSR2: starting %s (pid %ld) to hand over to", h->exe, (long)pid);
    if (send_head(h, mono_ms() + HANDOVER_TIMEOUT_MS) != 0) {
        child_gone(h); /* it went at once */
        return;
    }
    int prc = uv_poll_init(h->p.loop, &h->hello, h->channel);
    if (prc != 0) {
        fail(h, "cannot watch the new process: %s", uv_strerror(prc));
        return;
    }
    h->hello.data = h;
    h->hello_active = 1;
    h->line_len = 0;
    prc = uv_poll_start(&h->hello, UV_READABLE | UV_DISCONNECT, on_hello);
    if (prc != 0) {
        fail(h, "cannot watch the new process: %s", uv_strerror(prc));
        return;
    }
    uv_timer_start(&h->timer, on_hello_late, HANDOVER_TIMEOUT_MS, 0);
}

/* ---- the new process ------------------------------------------------------------ */

int handover_is_successor(void) {
    return getenv(HANDOVER_ENV) != NULL;
}

void handover_refuse(handover_in_t *in, const char *why) {
    char line[HANDOVER_LINE_MAX];
    int n = snprintf(line, sizeof(line), HANDOVER_FAIL "%.400s\n", why);
    log_error("upgrade: cannot take over: %s", why);
    if (in->channel >= 0 && n > 0)
        (void)write_all(in->channel, line, (size_t)n, mono_ms() + HANDOVER_TIMEOUT_MS);
    fflush(NULL);
    _exit(1);
}

int handover_begin(handover_in_t *in, char *err, size_t errlen) {
    const char *env = getenv(HANDOVER_ENV);
    unsigned long long version = 0;
    int channel = -1, used = 0;
    size_t up = 0;
    memset(in, 0, sizeof(*in));
    in->channel = -1;
    in->metrics_fd = -1;
    if (env == NULL || sscanf(env, "%llu,%d,%zu,%n", &version, &channel, &up, &used) != 3 ||
        used == 0 || channel < 0) {
        snprintf(err, errlen, "%s is not <version>,<fd>,<nodes>,<uuid>", HANDOVER_ENV);
        return -1;
    }
    in->channel = channel;
    set_cloexec(channel, 1);
    snprintf(in->uuid, sizeof(in->uuid), "%s", env + used);
    in->nodes_up = up;
    unsetenv(HANDOVER_ENV);
    if (version != HANDOVER_STATE_VERSION) {
        snprintf(err, errlen, "the state's version %llu is not one this dlockd reads (%d)",
                 version, HANDOVER_STATE_VERSION);
        return -1;
    }
    if (in->uuid[0] == '\0') {
        snprintf(err, errlen, "%s names no owner id", HANDOVER_ENV);
        return -1;
    }
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

/* One frame read: its payload (malloc'd, *len bytes) and its descriptors
 * (fds, *nfds). -1 on EOF, an error or the deadline. */
static int read_frame(handover_in_t *in, char **payload, size_t *len, int *fds, size_t *nfds,
                      uint64_t deadline) {
    frame_hdr_t hdr;
    union {
        char buf[CMSG_SPACE(sizeof(int) * HANDOVER_FRAME_FDS)];
        struct cmsghdr align;
    } u;
    struct iovec iov = {.iov_base = &hdr, .iov_len = sizeof(hdr)};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                         .msg_controllen = sizeof(u.buf)};
    *payload = NULL;
    *nfds = 0;
    ssize_t n;
    for (;;) {
        if (await_fd(in->channel, POLLIN, deadline) != 0) return -1;
        n = recvmsg(in->channel, &msg, MSG_WAITALL | MSG_CMSG_CLOEXEC);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        break;
    }
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(&msg); cm != NULL; cm = CMSG_NXTHDR(&msg, cm)) {
        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
        size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
            if (*nfds < HANDOVER_FRAME_FDS) fds[(*nfds)++] = fd;
            else close(fd);
        }
    }
    if (n != (ssize_t)sizeof(hdr) || (msg.msg_flags & MSG_CTRUNC) || hdr.nfds != *nfds) {
        for (size_t i = 0; i < *nfds; i++) close(fds[i]);
        *nfds = 0;
        return -1;
    }
    *len = hdr.len;
    if ((*payload = malloc(hdr.len ? hdr.len : 1)) == NULL ||
        read_all(in->channel, *payload, hdr.len, deadline) != 0) {
        free(*payload);
        *payload = NULL;
        for (size_t i = 0; i < *nfds; i++) close(fds[i]);
        *nfds = 0;
        return -1;
    }
    in->bytes += sizeof(hdr) + hdr.len;
    return 0;
}

/* The frame's first record: the old numbers of the descriptors it
 * carries, in order (old[], as many as fds). */
static void read_fds(stater_t *r, int *old, size_t nfds) {
    char word[STATE_WORD_MAX];
    if (!stater_rec(r, word) || strcmp(word, "fds") != 0) {
        stater_fail(r, "a frame does not say its descriptors");
        return;
    }
    if (stater_u64(r) != nfds) stater_fail(r, "a frame's descriptors are not as it says");
    for (size_t i = 0; i < nfds && !r->err; i++) {
        uint64_t v = stater_u64(r);
        old[i] = v > INT32_MAX ? -1 : (int)v;
    }
}

int handover_head(handover_in_t *in, char *err, size_t errlen) {
    char *payload;
    size_t len, nfds;
    int fds[HANDOVER_FRAME_FDS], old[HANDOVER_FRAME_FDS];
    stater_t r;
    char word[STATE_WORD_MAX];
    uint64_t deadline = mono_ms() + HANDOVER_TIMEOUT_MS;
    /* The head was sent as this process started: a broken one is said
     * before HELLO stops the old process. */
    if (read_frame(in, &payload, &len, fds, &nfds, deadline) != 0) {
        snprintf(err, errlen, "the state's head cannot be read");
        return -1;
    }
    for (size_t i = 0; i < nfds; i++) close(fds[i]); /* it carries none */
    stater_init(&r, payload, len);
    read_fds(&r, old, nfds);
    int64_t mfd = -1;
    uint64_t lfd = 0;
    while (!r.err && stater_rec(&r, word)) {
        if (strcmp(word, "process") == 0) {
            in->old_pid = (long)stater_u64(&r);
            in->signal_ms = stater_u64(&r);
            in->holds = (size_t)stater_u64(&r);
        } else if (strcmp(word, "listen") == 0) {
            lfd = stater_u64(&r);
            stater_str(&r, in->listen_path, sizeof(in->listen_path));
        } else if (strcmp(word, "metrics") == 0) {
            mfd = stater_i64(&r);
        }
    }
    free(payload);
    if (r.err || in->old_pid == 0 || lfd == 0 || lfd > INT32_MAX || mfd > INT32_MAX ||
        in->listen_path[0] == '\0') {
        snprintf(err, errlen, "the state's head is broken: %s", r.err ? r.why : "a part is missing");
        return -1;
    }
    in->listen_fd = (int)lfd;
    in->metrics_fd = (int)mfd;
    return 0;
}

int handover_hello(handover_in_t *in, char *err, size_t errlen) {
    if (write_all(in->channel, HANDOVER_HELLO "\n", strlen(HANDOVER_HELLO) + 1,
                  mono_ms() + HANDOVER_TIMEOUT_MS) != 0) {
        snprintf(err, errlen, "the old process went away");
        return -1;
    }
    return 0;
}

/* One record of a frame; 0 at its end. */
static int take_record(handover_in_t *in, const handover_parts_t *p, stater_t *r, int *fds,
                       const int *old, int *used, size_t nfds, int *end) {
    char word[STATE_WORD_MAX];
    if (!stater_rec(r, word)) return 0;
    if (strcmp(word, "end") == 0) {
        *end = 1;
        return 0;
    }
    if (strcmp(word, "conn") == 0) {
        uint64_t ofd = stater_u64(r);
        session_peer_t peer;
        uv_pipe_t *pipe;
        char why[256];
        sessions_load_peer(r, &peer);
        if (r->err) return 0;
        size_t i = 0;
        while (i < nfds && (old[i] != (int)ofd || used[i])) i++;
        if (i == nfds) {
            stater_fail(r, "a connection's descriptor did not come with it");
            return 0;
        }
        used[i] = 1;
        if (server_readmit(p->server, fds[i], &pipe, &peer, why, sizeof(why)) != 0) {
            stater_fail(r, why);
            return 0;
        }
        if ((in->cur = sessions_load_conn(p->sessions, pipe, &peer, r)) == NULL) return 0;
        in->conns++;
    } else if (strcmp(word, "call") == 0) {
        if (in->cur == NULL) stater_fail(r, "a call before any connection");
        else session_load_call(in->cur, r);
        in->calls++;
    } else if (!lockmgr_load(p->locks, in->cur ? session_owner(in->cur) : NULL, word, r) &&
               !sessions_load(p->sessions, word, r)) {
        char why[STATE_WHY_MAX];
        snprintf(why, sizeof(why), "a record this dlockd does not know: %s", word);
        stater_fail(r, why);
        return 0;
    }
    return !r->err;
}

int handover_restore(handover_in_t *in, const handover_parts_t *p, char *err, size_t errlen) {
    uint64_t started = mono_ms();
    int end = 0;
    uv_update_time(p->loop);
    lockmgr_load_start(p->locks, in->holds);
    while (!end) {
        char *payload;
        size_t len, nfds;
        int fds[HANDOVER_FRAME_FDS], old[HANDOVER_FRAME_FDS], used[HANDOVER_FRAME_FDS] = {0};
        stater_t r;
        /* The old process drains first: the first frame may take that long. */
        if (read_frame(in, &payload, &len, fds, &nfds,
                       mono_ms() + HANDOVER_TIMEOUT_MS + HANDOVER_DRAIN_MS) != 0) {
            snprintf(err, errlen, "the state stopped coming after %zu bytes", in->bytes);
            return -1;
        }
        stater_init(&r, payload, len);
        read_fds(&r, old, nfds);
        while (!r.err && take_record(in, p, &r, fds, old, used, nfds, &end)) {
        }
        /* a descriptor no record took is none of ours */
        for (size_t i = 0; i < nfds; i++)
            if (!used[i]) close(fds[i]);
        if (r.err) {
            snprintf(err, errlen, "the state is broken at byte %zu of a frame: %s",
                     (size_t)(r.p - payload), r.why);
            free(payload);
            return -1;
        }
        free(payload);
    }
    if (lockmgr_load_done(p->locks) != 0) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    lockmgr_stats_t ls;
    lockmgr_stats(p->locks, &ls);
    log_info("upgrade: took over from pid %ld: %zu connections, %llu holds, %zu requests in "
             "progress, %zu bytes of state (%llu ms after the signal, the state read in %llu)",
             in->old_pid, in->conns, (unsigned long long)ls.locks_held, in->calls, in->bytes,
             (unsigned long long)(mono_ms() - in->signal_ms),
             (unsigned long long)(mono_ms() - started));
    return 0;
}

int handover_commit(handover_in_t *in) {
    char *payload;
    size_t len, nfds;
    int fds[HANDOVER_FRAME_FDS];
    uint64_t deadline = mono_ms() + HANDOVER_TIMEOUT_MS;
    if (write_all(in->channel, HANDOVER_READY "\n", strlen(HANDOVER_READY) + 1, deadline) != 0)
        return -1;
    if (read_frame(in, &payload, &len, fds, &nfds, deadline) != 0) return -1;
    for (size_t i = 0; i < nfds; i++) close(fds[i]);
    int go = len == 3 && memcmp(payload, "go\n", 3) == 0;
    free(payload);
    if (!go) return -1;
    close(in->channel);
    in->channel = -1;
    return 0;
}

void handover_resume(handover_in_t *in, const handover_parts_t *p) {
    uv_update_time(p->loop);
    uint64_t now = mono_ms();
    sessions_count_upgrade(p->sessions, 1, now > in->signal_ms ? now - in->signal_ms : 0,
                           in->bytes);
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
        write_all(fd, "INFO\n", 5, mono_ms() + HANDOVER_REQUEST_WAIT_MS) != 0) {
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
