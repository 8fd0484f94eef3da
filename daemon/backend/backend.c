/* The backend interface's dispatch: every call goes to the topology's table.
 * SPDX-License-Identifier: MIT */
#include "backend.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void backend_on_state(backend_t *b, backend_state_cb cb, void *data) {
    b->on_state = cb;
    b->state_data = data;
}

void backend_notify_state(backend_t *b) {
    if (b->on_state) b->on_state(b->state_data);
}

/* An op's answer: it is in flight no more, and its own callback runs. */
static void on_answered(backend_op_t *op) {
    backend_t *b = op->submitted_to;
    op->submitted_to = NULL;
    op->cb = op->user_cb;
    b->inflight--;
    op->cb(op);
}

void backend_submit(backend_t *b, backend_op_t *op) {
    /* The backend's own fields start clear, whatever the caller's memory
     * held (the watchdog's batches are not zeroed). */
    op->route = 0;
    op->tries = 0;
    op->deadline = 0;
    if (op->cb != on_answered) { /* a topology's resend is counted once */
        op->user_cb = op->cb;
        op->cb = on_answered;
        op->submitted_to = b;
        b->inflight++;
    }
    b->type->submit(b, op);
}

size_t backend_inflight(const backend_t *b) {
    return b->inflight;
}

void backend_watch(backend_t *b, const char *name, size_t len, backend_mode_t mode,
                   uint64_t owner, backend_watch_cb cb, void *data) {
    b->type->watch(b, name, len, mode, owner, cb, data);
}

void backend_unwatch(backend_t *b, const char *name, size_t len, backend_mode_t mode,
                     uint64_t owner) {
    b->type->unwatch(b, name, len, mode, owner);
}

int backend_available(const backend_t *b, const char *name, size_t len) {
    return b->type->available(b, name, len);
}

void backend_describe(const backend_t *b, const char *name, size_t len, char *buf,
                      size_t cap) {
    b->type->describe(b, name, len, buf, cap);
}

void backend_nodes(const backend_t *b, backend_node_cb cb, void *data) {
    b->type->nodes(b, cb, data);
}

void backend_reconfigure(backend_t *b, const conf_t *conf) {
    b->type->reconfigure(b, conf);
}

uint32_t backend_drift(const backend_t *b, uint32_t lease_ms) {
    return b->type->drift ? b->type->drift(b, lease_ms) : 0;
}

/* The registry's entries read "dlockd:<host>:<pid>" (backend_open()'s
 * CLIENT SETNAME); anything else names no dlockd. */
void backend_who_daemon(const backend_who_t *w, char *host, size_t cap, long long *pid) {
    static const char prefix[] = "dlockd:";
    const char *d = w->daemon, *colon = strrchr(d, ':');
    *pid = -1;
    if (cap > 0) host[0] = '\0';
    if (strncmp(d, prefix, sizeof(prefix) - 1) != 0 || colon == NULL ||
        colon <= d + sizeof(prefix) - 1 || colon[1] < '1' || colon[1] > '9')
        return;
    char *end;
    errno = 0;
    long long v = strtoll(colon + 1, &end, 10);
    if (errno != 0 || *end != '\0' || v <= 0) return;
    *pid = v;
    snprintf(host, cap, "%.*s", (int)(colon - d - (sizeof(prefix) - 1)), d + sizeof(prefix) - 1);
}
