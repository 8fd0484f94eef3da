/* Leveled log lines on stderr: syslog-prefixed under journald, timestamped
 * on a terminal.
 * SPDX-License-Identifier: MIT */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

static conf_log_level_t current = CONF_LOG_INFO;
static int to_journal = -1; /* decided on first use */

void log_set_level(conf_log_level_t level) {
    current = level;
    (void)log_summary_ms(); /* the first call, at start: the period is read now */
}

int log_enabled(conf_log_level_t level) {
    return level <= current;
}

void log_msg(conf_log_level_t level, const char *fmt, ...) {
    static const int prio[] = {3, 4, 6, 7}; /* syslog priorities */
    char line[1024];
    va_list ap;

    if (!log_enabled(level)) return;
    if (to_journal < 0) to_journal = getenv("JOURNAL_STREAM") != NULL;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (to_journal) {
        /* journald reads <N> as the priority and adds its own timestamp. */
        fprintf(stderr, "<%d>%s: %s\n", prio[level], conf_log_level_name(level), line);
        return;
    }
    struct timeval tv;
    struct tm tm;
    char when[32];
    gettimeofday(&tv, NULL);
    localtime_r(&tv.tv_sec, &tm);
    strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
    fprintf(stderr, "%s.%03d %s: %s\n", when, (int)(tv.tv_usec / 1000),
            conf_log_level_name(level), line);
}

/* ---- failures that repeat ------------------------------------------------- */

uint64_t log_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint64_t log_summary_ms(void) {
    static uint64_t period;
    if (period == 0) {
        const char *s = getenv(LOG_SUMMARY_ENV);
        char *end;
        period = LOG_SUMMARY_MS;
        if (s != NULL && *s != '\0') {
            errno = 0;
            unsigned long long v = strtoull(s, &end, 10);
            if (errno == 0 && *end == '\0' && v >= 1 && v <= 86400000ULL) period = v;
        }
    }
    return period;
}

/* "<text>: repeated N times in the last S s" for what was not said yet. */
static void say_summary(log_once_t *lo, uint64_t now) {
    uint64_t ms = now - lo->said_ms;
    char span[32];
    if (ms < 10000) /* short periods, as tests use: a tenth of a second */
        snprintf(span, sizeof(span), "%llu.%llu", (unsigned long long)(ms / 1000),
                 (unsigned long long)(ms % 1000 / 100));
    else
        snprintf(span, sizeof(span), "%llu", (unsigned long long)((ms + 500) / 1000));
    size_t len = strlen(lo->text);
    if (len > 0 && lo->text[len - 1] == '.') len--; /* Redis ends its errors with one */
    log_msg(lo->level, "%.*s: repeated %llu time%s in the last %s s", (int)len, lo->text,
            (unsigned long long)lo->unsaid, lo->unsaid == 1 ? "" : "s", span);
    lo->said_ms = now;
    lo->unsaid = 0;
}

int log_once(log_once_t *lo, conf_log_level_t level, const char *fmt, ...) {
    uint64_t now = log_now_ms();
    char text[LOG_ONCE_TEXT_MAX];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    if (!lo->active || level < lo->level) {
        /* A new run, or worse than what it was: said at once. */
        if (lo->active && lo->unsaid > 0) say_summary(lo, now);
        if (!lo->active) {
            lo->active = 1;
            lo->first_ms = now;
            lo->count = 0;
        }
        lo->level = level;
        lo->count++;
        lo->unsaid = 0;
        lo->last_ms = lo->said_ms = now;
        memcpy(lo->text, text, sizeof(text));
        log_msg(level, "%s", text);
        return 1;
    }
    lo->count++;
    lo->unsaid++;
    lo->last_ms = now;
    memcpy(lo->text, text, sizeof(text));
    if (now - lo->said_ms < log_summary_ms()) return 0;
    say_summary(lo, now);
    return 1;
}

int log_once_flush(log_once_t *lo) {
    if (!lo->active || lo->unsaid == 0) return 0;
    say_summary(lo, log_now_ms());
    return 1;
}

int log_once_quiet(const log_once_t *lo) {
    return lo->active && log_now_ms() - lo->last_ms >= log_summary_ms();
}

int log_once_restart_if_quiet(log_once_t *lo) {
    if (!log_once_quiet(lo)) return 0;
    log_once_flush(lo);
    return log_once_end(lo, NULL, NULL);
}

int log_once_end(log_once_t *lo, uint64_t *count, uint64_t *span_ms) {
    if (!lo->active) return 0;
    if (count != NULL) *count = lo->count;
    if (span_ms != NULL) *span_ms = log_now_ms() - lo->first_ms;
    memset(lo, 0, sizeof(*lo));
    return 1;
}
