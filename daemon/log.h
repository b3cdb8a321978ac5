/*
 * log.h - ringfeedd's leveled log lines on stderr.
 *
 * One line per event: "ringfeedd[pid]: level: message".  Under systemd the
 * journal adds the time; in a terminal the level is enough.  Workers log
 * through the same functions with their own pid.
 */
#ifndef RINGFEED_DAEMON_LOG_H
#define RINGFEED_DAEMON_LOG_H

enum log_level { LOG_ERROR = 0, LOG_WARN = 1, LOG_INFO = 2, LOG_DEBUG = 3 };

extern enum log_level log_threshold;

/* Parses "error", "warn", "info" or "debug"; returns 0 or -EINVAL. */
int log_parse_level(const char *s, enum log_level *out);

__attribute__((format(printf, 2, 3)))
void log_msg(enum log_level level, const char *fmt, ...);

#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

#endif
