/* Logging to stderr, one line per event with its level (journald keeps it).
 * SPDX-License-Identifier: MIT */
#ifndef DLOCK_LOG_H
#define DLOCK_LOG_H

#include <stdint.h>

#include "conf/conf.h"

void log_set_level(conf_log_level_t level);
int log_enabled(conf_log_level_t level);
void log_msg(conf_log_level_t level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define log_error(...) log_msg(CONF_LOG_ERROR, __VA_ARGS__)
#define log_warn(...)  log_msg(CONF_LOG_WARN, __VA_ARGS__)
#define log_info(...)  log_msg(CONF_LOG_INFO, __VA_ARGS__)
#define log_debug(...) do { if (log_enabled(CONF_LOG_DEBUG)) log_msg(CONF_LOG_DEBUG, __VA_ARGS__); } while (0)

/* ---- failures that repeat ---------------------------------------------------
 * A failure that comes again and again (a wrong Redis password tried every
 * second, a refused Redis connection, clients refused at max_clients) is
 * logged once when it starts; while it goes on, one line every
 * LOG_SUMMARY_MS sums it up ("<text>: repeated 120 times in the last 60 s",
 * with the text of the latest occurrence); its end is the caller's to log,
 * with the counts log_once_end() hands back. One log_once_t per failure,
 * zeroed to start. */

/* How often a failure that goes on is summed up. */
#define LOG_SUMMARY_MS 60000
/* For tests only, not a configuration key: the period in milliseconds
 * (1 to 86400000), from the environment, read once at the first use. */
#define LOG_SUMMARY_ENV "DLOCKD_LOG_SUMMARY_MS"
/* The longest text kept for a summary. */
#define LOG_ONCE_TEXT_MAX 512

typedef struct log_once_s {
    int active;                   /* the failure is going on */
    conf_log_level_t level;       /* of its lines */
    uint64_t first_ms;            /* its first occurrence (log_now_ms) */
    uint64_t last_ms;             /* its latest occurrence */
    uint64_t said_ms;             /* its latest line, the first or a summary */
    uint64_t count;               /* occurrences in all */
    uint64_t unsaid;              /* occurrences since its latest line */
    char text[LOG_ONCE_TEXT_MAX]; /* the latest occurrence */
} log_once_t;

/* Milliseconds of the monotonic clock. */
uint64_t log_now_ms(void);
/* LOG_SUMMARY_MS, or what LOG_SUMMARY_ENV says. */
uint64_t log_summary_ms(void);

/* One occurrence. The first of a run is logged at level as fmt says; the
 * others are counted, and the first one a summary period or more after
 * the latest line logs the summary of all those counted. One at a more
 * severe level than the run's is logged at once, and the run goes on at
 * that level. Returns 1 if a line was logged. */
int log_once(log_once_t *lo, conf_log_level_t level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Logs the summary of the occurrences not yet summed up, if there are
 * any. Returns 1 if it logged. */
int log_once_flush(log_once_t *lo);
/* 1 if the failure is going on but has not occurred for a summary period
 * (for failures without an end of their own, such as refused clients). */
int log_once_quiet(const log_once_t *lo);
/* For failures without an end of their own: if the run went quiet for a
 * summary period, logs what was not summed up yet and ends it, so that the
 * next occurrence starts a run of its own with a line of its own. Returns
 * 1 if it ended one. */
int log_once_restart_if_quiet(log_once_t *lo);
/* The failure is over: 0 if none was going on; else 1, with its
 * occurrences in *count and the milliseconds from its first one to now in
 * *span_ms (either may be NULL), and lo zeroed for the next run. Logs
 * nothing: the caller says what ended ("... is back after ..."). */
int log_once_end(log_once_t *lo, uint64_t *count, uint64_t *span_ms);

#endif
