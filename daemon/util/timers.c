/* One uv_timer armed for the earliest deadline of a heap.
 * SPDX-License-Identifier: MIT */
#include "timers.h"

#include <stdlib.h>

#include "util.h"

/* Callbacks run per wakeup before yielding to I/O. */
#define TIMERS_BATCH_MAX 1024

struct timers_s {
    uv_timer_t handle;     /* first: the close callback frees the struct */
    uv_loop_t *loop;       /* NULL in manual mode */
    heap_t heap;
    uint64_t armed;        /* deadline the uv_timer is set for, or 0 */
    uint64_t now;          /* manual mode: the clock */
};

static void on_timer(uv_timer_t *handle);

static void rearm(timers_t *ts) {
    if (ts->loop == NULL) return; /* manual: fired by timers_advance() */
    heap_node_t *min = heap_min(&ts->heap);
    if (min == NULL) {
        if (ts->armed) uv_timer_stop(&ts->handle);
        ts->armed = 0;
        return;
    }
    if (ts->armed == min->when) return;
    uint64_t now = uv_now(ts->loop);
    ts->armed = min->when;
    uv_timer_start(&ts->handle, on_timer, min->when > now ? min->when - now : 0, 0);
}

static void on_timer(uv_timer_t *handle) {
    timers_t *ts = handle->data;
    uint64_t now = uv_now(ts->loop);
    int n = 0;
    ts->armed = 0;
    for (;;) {
        heap_node_t *min = heap_min(&ts->heap);
        if (min == NULL || min->when > now || n++ == TIMERS_BATCH_MAX) break;
        heap_remove(&ts->heap, min);
        timers_entry_t *t = container_of(min, timers_entry_t, node);
        t->cb(t);
    }
    rearm(ts);
}

timers_t *timers_new(uv_loop_t *loop) {
    timers_t *ts = calloc(1, sizeof(*ts));
    if (ts == NULL) return NULL;
    ts->loop = loop;
    heap_init(&ts->heap);
    uv_timer_init(loop, &ts->handle);
    ts->handle.data = ts;
    return ts;
}

timers_t *timers_new_manual(uint64_t start_ms) {
    timers_t *ts = calloc(1, sizeof(*ts));
    if (ts == NULL) return NULL;
    heap_init(&ts->heap);
    ts->now = start_ms;
    return ts;
}

static void on_close(uv_handle_t *handle) {
    free(handle->data);
}

void timers_free(timers_t *ts) {
    heap_clear(&ts->heap);
    if (ts->loop == NULL) free(ts);
    else uv_close((uv_handle_t *)&ts->handle, on_close);
}

/* Manual mode: fires every entry due by until, in order, the clock at each
 * entry's deadline; then the clock stands at until. */
static void fire_until(timers_t *ts, uint64_t until) {
    heap_node_t *min;
    while ((min = heap_min(&ts->heap)) != NULL && min->when <= until) {
        if (min->when > ts->now) ts->now = min->when;
        heap_remove(&ts->heap, min);
        timers_entry_t *t = container_of(min, timers_entry_t, node);
        t->cb(t);
    }
    ts->now = until;
}

void timers_advance(timers_t *ts, uint64_t ms) {
    fire_until(ts, ts->now + ms);
}

void timers_run_due(timers_t *ts) {
    fire_until(ts, ts->now);
}

void timers_start_at(timers_t *ts, timers_entry_t *t, uint64_t when, timers_cb cb) {
    heap_remove(&ts->heap, &t->node);
    t->cb = cb;
    t->node.when = when;
    heap_push(&ts->heap, &t->node);
    rearm(ts);
}

void timers_start(timers_t *ts, timers_entry_t *t, uint64_t delay_ms, timers_cb cb) {
    timers_start_at(ts, t, timers_now(ts) + delay_ms, cb);
}

void timers_stop(timers_t *ts, timers_entry_t *t) {
    if (!heap_queued(&t->node)) return;
    heap_remove(&ts->heap, &t->node);
    rearm(ts);
}

int timers_active(const timers_entry_t *t) {
    return heap_queued(&t->node);
}

uint64_t timers_now(const timers_t *ts) {
    return ts->loop ? uv_now(ts->loop) : ts->now;
}
