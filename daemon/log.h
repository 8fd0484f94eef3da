/* Logging to stderr, one line per event with its level (journald keeps it).
 * SPDX-License-Identifier: MIT */
#ifndef DLOCK_LOG_H
#define DLOCK_LOG_H

#include "conf/conf.h"

void log_set_level(conf_log_level_t level);
int log_enabled(conf_log_level_t level);
void log_msg(conf_log_level_t level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define log_error(...) log_msg(CONF_LOG_ERROR, __VA_ARGS__)
#define log_warn(...)  log_msg(CONF_LOG_WARN, __VA_ARGS__)
#define log_info(...)  log_msg(CONF_LOG_INFO, __VA_ARGS__)
#define log_debug(...) do { if (log_enabled(CONF_LOG_DEBUG)) log_msg(CONF_LOG_DEBUG, __VA_ARGS__); } while (0)

#endif
