/* Every deadline of the daemon in one heap, driven by one uv_timer.
 * SPDX-License-Identifier: MIT
 *
 * Two modes. The daemon's: timers_new() on a libuv loop; the clock is
 * uv_now() and the loop fires due entries. The tests': timers_new_manual()
 * with no loop at all; the clock stands still until timers_advance() moves
 * it, and nothing fires except inside timers_advance() and
 * timers_run_due(). Every other call works the same in both modes. */
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
/* Manual mode, for tests: no loop, no uv_timer; timers_now() starts at
 * start_ms. NULL on no memory. */
timers_t *timers_new_manual(uint64_t start_ms);
/* Frees; pending entries are forgotten. The daemon's mode closes the
 * uv_timer first (the memory goes in its close callback). */
void timers_free(timers_t *ts);

/* Manual mode only. Moves the clock forward by ms and fires every entry due
 * by then, earliest deadline first (ties first armed, first fired), with
 * the clock set to each entry's deadline while its callback runs; entries
 * that callbacks arm are fired too if they are due by the new time. The
 * clock ends at the old time + ms. */
void timers_advance(timers_t *ts, uint64_t ms);
/* Manual mode only. Fires the entries already due (zero delays included),
 * and those their callbacks arm due now, without moving the clock. */
void timers_run_due(timers_t *ts);

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
