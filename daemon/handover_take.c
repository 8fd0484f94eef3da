/* Live restore: the new process's side: it gets Redis, takes the state as it comes, and serves.
 * SPDX-License-Identifier: MIT */
#include "handover.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/handover_chan.h"
#include "daemon/log.h"
#include "daemon/util/statefmt.h"

int handover_is_successor(void) {
    return getenv(HANDOVER_ENV) != NULL;
}

void handover_refuse(handover_in_t *in, const char *why) {
    char line[HANDOVER_LINE_MAX];
    int n = snprintf(line, sizeof(line), HANDOVER_FAIL "%.400s\n", why);
    log_error("upgrade: cannot take over: %s", why);
    if (in->channel >= 0 && n > 0)
        (void)chan_write_all(in->channel, line, (size_t)n, chan_now_ms() + HANDOVER_TIMEOUT_MS);
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
    chan_cloexec(channel, 1);
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
    return backend_available(b, NULL, 0) && chan_nodes_up(b) >= want_up;
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
    uint64_t deadline = chan_now_ms() + HANDOVER_TIMEOUT_MS;
    /* The head was sent as this process started: a broken one is said
     * before HELLO stops the old process. */
    if (chan_read_frame(in->channel, &payload, &len, fds, &nfds, deadline) != 0) {
        snprintf(err, errlen, "the state's head cannot be read");
        return -1;
    }
    in->bytes += sizeof(frame_hdr_t) + len;
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
    if (chan_write_all(in->channel, HANDOVER_HELLO "\n", strlen(HANDOVER_HELLO) + 1,
                  chan_now_ms() + HANDOVER_TIMEOUT_MS) != 0) {
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
    uint64_t started = chan_now_ms();
    int end = 0;
    uv_update_time(p->loop);
    lockmgr_load_start(p->locks, in->holds);
    while (!end) {
        char *payload;
        size_t len, nfds;
        int fds[HANDOVER_FRAME_FDS], old[HANDOVER_FRAME_FDS], used[HANDOVER_FRAME_FDS] = {0};
        stater_t r;
        /* The old process drains first: the first frame may take that long. */
        if (chan_read_frame(in->channel, &payload, &len, fds, &nfds,
                            chan_now_ms() + HANDOVER_TIMEOUT_MS + HANDOVER_DRAIN_MS) != 0) {
            snprintf(err, errlen, "the state stopped coming after %zu bytes", in->bytes);
            return -1;
        }
        in->bytes += sizeof(frame_hdr_t) + len;
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
             (unsigned long long)(chan_now_ms() - in->signal_ms),
             (unsigned long long)(chan_now_ms() - started));
    return 0;
}

int handover_commit(handover_in_t *in) {
    char *payload;
    size_t len, nfds;
    int fds[HANDOVER_FRAME_FDS];
    uint64_t deadline = chan_now_ms() + HANDOVER_TIMEOUT_MS;
    if (chan_write_all(in->channel, HANDOVER_READY "\n", strlen(HANDOVER_READY) + 1, deadline) != 0)
        return -1;
    if (chan_read_frame(in->channel, &payload, &len, fds, &nfds, deadline) != 0) return -1;
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
    uint64_t now = chan_now_ms();
    sessions_count_upgrade(p->sessions, 1, now > in->signal_ms ? now - in->signal_ms : 0,
                           in->bytes);
    sessions_resume(p->sessions);
}

