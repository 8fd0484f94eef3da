/* A Redis node's clock against ours: its rate from two TIME samples, and whether it runs
 * off by more than clock_drift_ms allows.
 * SPDX-License-Identifier: MIT
 *
 * Pure: samples go in (our monotonic microseconds around the TIME call, and
 * what TIME said), a rate in parts per million comes out. The quorum takes
 * clock_drift_ms off every lease; a node whose clock runs fast (its keys
 * expire early) by more than that share of the longest lease breaks the
 * Redlock argument, and is told apart here. */
#ifndef DLOCK_CLOCK_SKEW_H
#define DLOCK_CLOCK_SKEW_H

#include <stddef.h>
#include <stdint.h>

#define CLOCK_SKEW_PPM 1000000LL
/* clock_drift_ms = auto takes lease/100 + 2 off: a rate error of 1 %. */
#define CLOCK_SKEW_AUTO_PPM (CLOCK_SKEW_PPM / 100)
/* Samples closer than this give no rate. */
#define CLOCK_SKEW_MIN_WINDOW_US 100000ULL

/* One TIME call: sent and answered on our monotonic clock, and what the node said. */
typedef struct clock_skew_sample_s {
    uint64_t sent_us;
    uint64_t got_us;
    uint64_t node_us;
} clock_skew_sample_t;

/* TIME's reply, seconds and microseconds as two strings of digits, as
 * microseconds in *node_us: 0, or -1 when either is not a number in range. */
int clock_skew_parse_time(const char *sec, size_t slen, const char *usec, size_t ulen,
                          uint64_t *node_us);

/* The node's rate against ours from sample a to the later b, in ppm
 * (positive: its clock runs fast), and in *err_ppm how far off the round
 * trips may make it: 0, or -1 when b is not CLOCK_SKEW_MIN_WINDOW_US later. */
int clock_skew_rate(const clock_skew_sample_t *a, const clock_skew_sample_t *b, int64_t *ppm,
                    int64_t *err_ppm);

/* The rate error the quorum tolerates: clock_drift_ms (CONF_DRIFT_AUTO:
 * 1 %) off every lease up to the longest (rejoin_delay_ms). */
int64_t clock_skew_bound_ppm(uint32_t drift_ms, uint32_t longest_lease_ms);

/* 1: off by more than bound for sure; 0: within it for sure; -1: cannot tell. */
int clock_skew_judge(int64_t ppm, int64_t err_ppm, int64_t bound_ppm);

#endif
