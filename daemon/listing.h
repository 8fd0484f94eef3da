/* LIST for the sessions and the HTTP board: a backend listing plus what this daemon knows; the ring of recent !LOST events.
 * SPDX-License-Identifier: MIT */
#ifndef DLOCK_LISTING_H
#define DLOCK_LISTING_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "daemon/backend/list.h"
#include "daemon/lock/lockmgr.h"

/* !LOST events the board shows: the latest this many. */
#define LISTING_LOST_MAX 64

typedef struct listing_s listing_t;
typedef void (*listing_cb)(void *data, list_result_t *res);

/* Lists names matching pattern (a Redis glob), at most limit of them,
 * those keep allows (NULL: all); cb fires once, never inside this call,
 * unless listing_cancel() came first. NULL on no memory. */
listing_t *listing_start(lockmgr_t *locks, const char *pattern, size_t plen, size_t limit,
                         list_keep_cb keep, listing_cb cb, void *data);
void listing_cancel(listing_t *l);

typedef struct listing_lost_s {
    uint64_t at_ms;             /* wall clock, ms since the epoch */
    char name[256];
    const char *reason;         /* static: "expired", "forced", "backend" */
    long long pid, uid;
} listing_lost_t;

typedef struct listing_ring_s {
    listing_lost_t ev[LISTING_LOST_MAX];
    size_t next, count;
} listing_ring_t;

/* Pure: adds one event, the oldest going once the ring is full. */
void listing_ring_add(listing_ring_t *r, uint64_t at_ms, const char *name, size_t len,
                      const char *reason, long long pid, long long uid);
/* The i-th newest (0: the newest); NULL past count. */
const listing_lost_t *listing_ring_get(const listing_ring_t *r, size_t i);

#endif
