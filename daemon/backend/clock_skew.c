/* A Redis node's clock against ours: rates from TIME samples, and the bound clock_drift_ms sets.
 * SPDX-License-Identifier: MIT */
#include "daemon/backend/clock_skew.h"

#include "conf/conf.h"

/* The greatest seconds taken: as microseconds they fit 63 bits. */
#define CLOCK_SKEW_SEC_MAX (INT64_MAX / CLOCK_SKEW_PPM)
#define CLOCK_SKEW_USEC_MAX 999999ULL

static int parse_digits(const char *s, size_t len, uint64_t max, uint64_t *out) {
    uint64_t v = 0;
    if (len == 0) return -1;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        uint64_t d = (uint64_t)(s[i] - '0');
        if (v > (max - d) / 10) return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

int clock_skew_parse_time(const char *sec, size_t slen, const char *usec, size_t ulen,
                          uint64_t *node_us) {
    uint64_t s, u;
    if (parse_digits(sec, slen, (uint64_t)CLOCK_SKEW_SEC_MAX, &s) != 0 ||
        parse_digits(usec, ulen, CLOCK_SKEW_USEC_MAX, &u) != 0)
        return -1;
    *node_us = s * (uint64_t)CLOCK_SKEW_PPM + u;
    return 0;
}

int clock_skew_rate(const clock_skew_sample_t *a, const clock_skew_sample_t *b, int64_t *ppm,
                    int64_t *err_ppm) {
    /* TIME was read somewhere between sent and got: take the middle, off
     * by at most half the round trip at each end. */
    uint64_t mid_a = a->sent_us + (a->got_us - a->sent_us) / 2;
    uint64_t mid_b = b->sent_us + (b->got_us - b->sent_us) / 2;
    if (b->got_us < b->sent_us || a->got_us < a->sent_us || mid_b < mid_a ||
        mid_b - mid_a < CLOCK_SKEW_MIN_WINDOW_US)
        return -1;
    double ours = (double)(mid_b - mid_a);
    double theirs = (double)b->node_us - (double)a->node_us;
    double slack = ((double)(a->got_us - a->sent_us) + (double)(b->got_us - b->sent_us)) / 2;
    *ppm = (int64_t)((theirs - ours) * (double)CLOCK_SKEW_PPM / ours);
    *err_ppm = (int64_t)(slack * (double)CLOCK_SKEW_PPM / ours) + 1;
    return 0;
}

int64_t clock_skew_bound_ppm(uint32_t drift_ms, uint32_t longest_lease_ms) {
    if (drift_ms == CONF_DRIFT_AUTO) return CLOCK_SKEW_AUTO_PPM;
    if (longest_lease_ms == 0) return CLOCK_SKEW_PPM;
    return (int64_t)drift_ms * CLOCK_SKEW_PPM / longest_lease_ms;
}

int clock_skew_judge(int64_t ppm, int64_t err_ppm, int64_t bound_ppm) {
    int64_t off = ppm < 0 ? -ppm : ppm;
    if (off - err_ppm > bound_ppm) return 1;
    if (off + err_ppm <= bound_ppm) return 0;
    return -1;
}
