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

/* (Re)schedules t to call cb after delay_ms. Returns 0, or -1 on no memory. */
int timers_start(timers_t *ts, timers_entry_t *t, uint64_t delay_ms, timers_cb cb);
/* Schedules at an absolute loop time (timers_now() based). */
int timers_start_at(timers_t *ts, timers_entry_t *t, uint64_t when, timers_cb cb);
void timers_stop(timers_t *ts, timers_entry_t *t);
int timers_active(const timers_entry_t *t);
uint64_t timers_now(const timers_t *ts);

#endif
