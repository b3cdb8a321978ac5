/*
 * reload.h - SIGHUP (reload.c): read the config again and apply what changed.
 */
#ifndef RINGFEED_DAEMON_RELOAD_H
#define RINGFEED_DAEMON_RELOAD_H

#include <stdint.h>

struct daemon;

void reload_init(struct daemon *d);
void reload_close(struct daemon *d);

#endif
