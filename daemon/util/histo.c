/* A latency histogram with fixed buckets.
 * SPDX-License-Identifier: MIT */
#include "histo.h"

const uint64_t histo_bounds_us[HISTO_BUCKETS - 1] = {HISTO_BOUNDS_US};

void histo_add(histo_t *h, uint64_t us) {
    size_t i = 0;
    while (i < HISTO_BUCKETS - 1 && us > histo_bounds_us[i]) i++;
    h->count[i]++;
    h->sum_us += us;
    h->n++;
}
