/*
 * service.h - the systemd glue (service.c): notifications (sdnotify.h), the watchdog
 * and the stop deadline.
 */
#ifndef RINGFEED_DAEMON_SERVICE_H
#define RINGFEED_DAEMON_SERVICE_H

#include <stdint.h>

struct daemon;

void service_init(struct daemon *d);
/* The pool changed (a worker said HELLO): READY=1 once all are up. */
void service_pool_changed(struct daemon *d);
void service_reloading(struct daemon *d);
void service_reload_failed(struct daemon *d, const char *why);
/* STOPPING=1; SIGKILLs workers left after a deadline; closes its timers. */
void service_stopping(struct daemon *d);
void service_exit(void);

#endif
