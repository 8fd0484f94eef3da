/* Leveled log lines on stderr: syslog-prefixed under journald, timestamped
 * on a terminal.
 * SPDX-License-Identifier: MIT */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>

static conf_log_level_t current = CONF_LOG_INFO;
static int to_journal = -1; /* decided on first use */

void log_set_level(conf_log_level_t level) {
    current = level;
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
