/* Live restore: the old process's side: it starts the new one, drains, streams its state and goes.
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
#include <sys/wait.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include "daemon/handover_chan.h"
#include "daemon/log.h"
#include "daemon/util/buf.h"
#include "daemon/util/statefmt.h"

extern char **environ;

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
        chan_send_frame(s->ch, &s->head, &s->buf, s->fds, s->nfds, s->deadline) != 0) {
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
    uint64_t wait_ms = HANDOVER_TIMEOUT_MS, drained = chan_now_ms();
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
    uint64_t sent = chan_now_ms();
    if (chan_read_line(h->channel, line, sizeof(line), s.deadline) != 0 ||
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
    if (statew_finish(&gw) != 0 || chan_send_frame(h->channel, &go, NULL, NULL, 0, s.deadline) != 0) {
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
             (unsigned long long)(chan_now_ms() - sent));
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
    h->frozen_ms = chan_now_ms();
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
    int rc = statew_finish(&w) == 0 ? chan_send_frame(h->channel, &b, NULL, NULL, 0, deadline) : -1;
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
    h->signal_ms = chan_now_ms();
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
             chan_nodes_up(h->p.backend), lockmgr_backend(h->p.locks)->uuid);
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
    chan_cloexec(sp[1], 0);
    chan_cloexec(lfd, 0);
    if (mfd >= 0) chan_cloexec(mfd, 0);
    fflush(NULL);
    pid_t pid;
    int rc = posix_spawn(&pid, h->exe, NULL, NULL, h->argv, env);
    chan_cloexec(lfd, 1);
    if (mfd >= 0) chan_cloexec(mfd, 1);
    close(sp[1]);
    free(env);
    if (rc != 0) {
        fail(h, "cannot run %s: %s", h->exe, strerror(rc));
        return;
    }
    h->child = pid;
    chan_nonblock(h->channel);
    log_info("upgrade: SIGUSR2: starting %s (pid %ld) to hand over to", h->exe, (long)pid);
    if (send_head(h, chan_now_ms() + HANDOVER_TIMEOUT_MS) != 0) {
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

