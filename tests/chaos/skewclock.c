/* An LD_PRELOAD wall clock for the chaos suite's clock-skew stage: from the
 * process's start the wall clock runs at SKEWCLOCK_RATE (1.5: fast by half),
 * shifted by SKEWCLOCK_OFFSET_MS (negative: behind). gettimeofday(), time()
 * and clock_gettime(CLOCK_REALTIME*) are skewed (Redis's TIME and its key
 * expiry read them); the monotonic clocks are not. Debian's libfaketime
 * cannot start Debian's redis-server (its jemalloc calls clock_gettime while
 * libfaketime initialises), hence this one: no dlsym, the real clock by
 * syscall. Built by clockskew.py at test time: cc -shared -fPIC. */
/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define NS_PER_S 1000000000LL

static int skew_ready;
static double skew_rate = 1.0;
static long long skew_offset_ns;
static long long skew_base_ns;

static long long real_ns(clockid_t id) {
    struct timespec ts;
    if (syscall(SYS_clock_gettime, id, &ts) != 0) return 0;
    return (long long)ts.tv_sec * NS_PER_S + ts.tv_nsec;
}

__attribute__((constructor)) static void skew_init(void) {
    const char *r = getenv("SKEWCLOCK_RATE"), *o = getenv("SKEWCLOCK_OFFSET_MS");
    char *end;
    if (r != NULL) {
        double v = strtod(r, &end);
        if (end != r && *end == '\0' && v > 0) skew_rate = v;
    }
    if (o != NULL) {
        long long v = strtoll(o, &end, 10);
        if (end != o && *end == '\0') skew_offset_ns = v * 1000000LL;
    }
    skew_base_ns = real_ns(CLOCK_REALTIME);
    skew_ready = 1;
}

static long long skewed_ns(clockid_t id) {
    long long now = real_ns(id);
    if (!skew_ready) return now;
    return skew_base_ns + (long long)((double)(now - skew_base_ns) * skew_rate) + skew_offset_ns;
}

int clock_gettime(clockid_t id, struct timespec *ts) {
    if (id != CLOCK_REALTIME && id != CLOCK_REALTIME_COARSE)
        return (int)syscall(SYS_clock_gettime, id, ts);
    long long ns = skewed_ns(CLOCK_REALTIME);
    ts->tv_sec = (time_t)(ns / NS_PER_S);
    ts->tv_nsec = (long)(ns % NS_PER_S);
    return 0;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
    (void)tz;
    long long ns = skewed_ns(CLOCK_REALTIME);
    tv->tv_sec = (time_t)(ns / NS_PER_S);
    tv->tv_usec = (suseconds_t)((ns % NS_PER_S) / 1000);
    return 0;
}

time_t time(time_t *t) {
    time_t now = (time_t)(skewed_ns(CLOCK_REALTIME) / NS_PER_S);
    if (t != NULL) *t = now;
    return now;
}
