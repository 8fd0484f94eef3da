/* A latency histogram with fixed buckets, as Prometheus exports them.
 * SPDX-License-Identifier: MIT
 *
 * Recording is a few compares and two additions: cheap enough for every
 * grant and every Redis call. Values are microseconds; the buckets'
 * upper bounds are fixed (HISTO_BOUNDS_US), shared by every histogram so
 * that they can be compared and summed. */
#ifndef DLOCK_HISTO_H
#define DLOCK_HISTO_H

#include <stddef.h>
#include <stdint.h>

/* Upper bounds, in microseconds, of all but the last (+Inf) bucket: from
 * 50 µs (a Redis round trip on one host) to 5 minutes (a long hold). */
#define HISTO_BOUNDS_US                                                        \
    50, 100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, \
        500000, 1000000, 2500000, 5000000, 10000000, 30000000, 60000000,      \
        300000000
#define HISTO_BUCKETS 21 /* the bounds above, and +Inf */

typedef struct histo_s {
    uint64_t count[HISTO_BUCKETS]; /* per bucket, not cumulative */
    uint64_t sum_us;
    uint64_t n;
} histo_t;

extern const uint64_t histo_bounds_us[HISTO_BUCKETS - 1];

/* A zeroed histo_t is empty. */
void histo_add(histo_t *h, uint64_t us);

#endif
