/*
 * log.h - ringfeedd's leveled log lines on stderr.
 *
 * One line per event: "ringfeedd[pid]: level: message".  When stderr is
 * the journal (JOURNAL_STREAM names its device and inode, as systemd sets
 * it) a line is "<P>message" instead, P the syslog priority of the level
 * (sd-daemon(3): error 3, warn 4, info 6, debug 7), since the journal adds
 * the time, the unit, the name and pid itself; a worker's lines there
 * start "worker[PID]: " (the journal credits every line of the stream to
 * the main process).  Workers log through the same functions.
 */
#ifndef RINGFEED_DAEMON_LOG_H
#define RINGFEED_DAEMON_LOG_H

enum log_level { LOG_ERROR = 0, LOG_WARN = 1, LOG_INFO = 2, LOG_DEBUG = 3 };

extern enum log_level log_threshold;

/* Parses "error", "warn", "info" or "debug"; returns 0 or -EINVAL. */
int log_parse_level(const char *s, enum log_level *out);

/* Called once by a worker at start: its journal lines name it. */
void log_set_worker(void);

__attribute__((format(printf, 2, 3)))
void log_msg(enum log_level level, const char *fmt, ...);

#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_INFO, __VA_ARGS__)
#define log_debug(...) log_msg(LOG_DEBUG, __VA_ARGS__)

#endif
