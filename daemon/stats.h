/*
 * stats.h - STATS, STATUS and METRICS (stats.c): the daemon's figures as text.
 */
#ifndef RINGFEED_DAEMON_STATS_H
#define RINGFEED_DAEMON_STATS_H

#include <stddef.h>

struct daemon;

/* stats.c: the STATS lines; returns the number of lines written to buf. */
int stats_format(struct daemon *d, char *buf, size_t cap, size_t *len);
int stats_status_line(struct daemon *d, char *buf, size_t cap);
int stats_metrics(struct daemon *d, char *buf, size_t cap, size_t *len);

#endif
