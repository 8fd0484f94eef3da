/* Every deadline of the daemon in one heap, driven by one uv_timer.
 * SPDX-License-Identifier: MIT */
#ifndef DLOCK_TIMERS_H
#define DLOCK_TIMERS_H

#include <stdint.h>
#include <uv.h>

#include "heap.h"

typedef struct timers_s timers_t;
typedef struct timers_entry_s timers_entry_t;
typedef void (*timers_cb)(timers_entry_t *t);

struct timers_entry_s {
    heap_node_t node;
    timers_cb cb;
};

timers_t *timers_new(uv_loop_t *loop);
/* Closes the uv_timer and frees; pending entries are forgotten. */
void timers_free(timers_t *ts);

/* (Re)schedules t to call cb after delay_ms. Never fails: the entry itself
 * is the heap node. */
void timers_start(timers_t *ts, timers_entry_t *t, uint64_t delay_ms, timers_cb cb);
/* Schedules at an absolute loop time (timers_now() based). */
void timers_start_at(timers_t *ts, timers_entry_t *t, uint64_t when, timers_cb cb);
/* Unschedules t; a no-op if it is not scheduled. */
void timers_stop(timers_t *ts, timers_entry_t *t);
/* 1 while t is scheduled (a zeroed entry is not). */
int timers_active(const timers_entry_t *t);
uint64_t timers_now(const timers_t *ts);

#endif
