/*
 * spawn.h - the starter of a user's own daemon (spawn.c): finds ringfeedd,
 * starts `ringfeedd --user` detached from the program, and waits for its
 * socket, so one daemon serves every program of the user that names a
 * dataset folder.
 */
#ifndef RINGFEED_CLIENT_SPAWN_H
#define RINGFEED_CLIENT_SPAWN_H

#include <stddef.h>

#include "err.h"
#include "userdir.h"

/* How long a starter waits for the new daemon's socket to answer. */
#define SPAWN_TIMEOUT_MS 20000

/*
 * Makes sure a daemon answers at ud->socket: 0 at once when one does;
 * otherwise makes and checks ud->dir, takes ud->start_lock (one starter at
 * a time: a second finds the first's daemon), removes nothing itself (the
 * daemon replaces a stale socket once it holds its lock), starts ringfeedd
 * --user in its own session with its stderr in ud->log, and waits for the
 * socket.  $RINGFEED_IDLE_EXIT, when set, is passed as --idle-exit.
 * Returns 0, or -errno with err saying what failed and where the log is.
 */
int spawn_user_daemon(const struct userdir *ud, struct rf_err *err);

/*
 * The ringfeedd to start, into out (cap bytes): $RINGFEED_DAEMON, else one
 * beside the code of libringfeed (dladdr: the build tree, a wheel, an
 * install), else the first on $PATH, then /usr/local/sbin, /usr/sbin.
 * Returns 0, or -ENOENT with err listing where it looked.
 */
int spawn_find_daemon(char *out, size_t cap, struct rf_err *err);

#endif
