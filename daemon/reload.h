/*
 * reload.h - SIGHUP (reload.c): read the config again and apply what changed.
 */
#ifndef RINGFEED_DAEMON_RELOAD_H
#define RINGFEED_DAEMON_RELOAD_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

struct daemon;

void reload_init(struct daemon *d);
void reload_close(struct daemon *d);

/*
 * Reads the config again and applies it now (SIGHUP and the RELOAD
 * request both come here; `how` says which, for the log).  Returns 0 with
 * what changed in changes (cap bytes; "nothing changed" when nothing), or
 * a negative errno with why in err: the reload was refused and the
 * running config stays.  Workers a reload restarts start after it
 * returns (systemd hears READY=1 once they are up).
 */
int reload_now(struct daemon *d, const char *how, char *changes, size_t cap,
               struct rf_err *err);

#endif
