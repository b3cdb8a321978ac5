/*
 * userd.h - ringfeedd --user (userd.c): a user's own daemon, started on
 * demand by libringfeed, that opens dataset folders as its clients ask.
 */
#ifndef RINGFEED_DAEMON_USERD_H
#define RINGFEED_DAEMON_USERD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "errcodes.h"

struct daemon;
struct rf_err;

/* --idle-exit's default: seconds with no client before the daemon exits. */
#define USERD_IDLE_EXIT_DEFAULT 600u
#define USERD_IDLE_EXIT_MAX 31536000u /* a year; 0 means never */

/*
 * Enters user mode (before the config is loaded): makes and checks the
 * folder (proto/userdir.h), takes its lock (another daemon holding it is
 * an error naming its pid) and writes the socket's path into socket (cap
 * bytes).  idle_exit: seconds, 0 never.  Returns 0 or -errno with err.
 */
int userd_configure(uint32_t idle_exit, char *socket, size_t cap, struct rf_err *err);
/* Is this daemon a user daemon? */
bool userd_active(void);
/* Starts the idle clock (no client yet); once the loop runs. */
void userd_start(struct daemon *d);
/* The control connections open changed (server.c): none starts the
 * countdown to exit, one stops it. */
void userd_clients_changed(struct daemon *d);
/* Stops the idle timer (shutdown). */
void userd_close(void);
/* Whether a peer of uid may talk to this daemon; when not, msg (cap
 * bytes) says whose daemon it is and what to do. */
bool userd_peer_ok(uid_t uid, char *msg, size_t cap);
/*
 * OPEN path (absolute, from the request): the catalogue name the folder is
 * served under, into name (CTL_DATASET_NAME_MAX + 1 bytes).  A folder
 * already open is found (by its realpath); a new one is opened with the
 * daemon's rights, placed in the catalogue and the workers restarted to
 * learn it (pool_roll: attached streams go on byte for byte).  Returns 0,
 * or -errno with *code and err (naming the path).
 */
int userd_open(struct daemon *d, const char *path, char *name, enum ctl_errcode *code,
               struct rf_err *err);

#endif
