/*
 * userdir.h - where a user's own daemon (ringfeedd --user) lives: one
 * private folder per user holding its socket, its lock, the starters' lock
 * and its log.  The daemon (daemon/userd.c) and the client's starter
 * (client/spawn.c) both take the paths from here, so they agree by
 * construction.
 *
 *   $XDG_RUNTIME_DIR/ringfeed/       when XDG_RUNTIME_DIR is set (and not empty)
 *   /tmp/ringfeed-<uid>/             otherwise
 *
 *     ringfeed.sock   the control socket (mode 0600)
 *     ringfeedd.lock  flock()ed by the running daemon for its whole life,
 *                     its pid inside: a second daemon sees it and exits
 *     start.lock      flock()ed by a client while it starts the daemon, so
 *                     two clients starting at once start one daemon
 *     ringfeedd.log   the daemon's stderr when a client started it
 *
 * The folder is created mode 0700 and must be a real folder (not a
 * symbolic link) owned by the user with mode exactly 0700: in /tmp another
 * user could have made it first, and a socket in a folder that someone
 * else controls could be someone else's daemon.  Anything else is refused
 * with a message that names the folder, its owner and its mode.
 */
#ifndef RINGFEED_PROTO_USERDIR_H
#define RINGFEED_PROTO_USERDIR_H

#include <stddef.h>
#include <sys/types.h>
#include <sys/un.h>

#include "err.h"

#define USERDIR_SOCKET "ringfeed.sock"
#define USERDIR_LOCK "ringfeedd.lock"
#define USERDIR_START_LOCK "start.lock"
#define USERDIR_LOG "ringfeedd.log"

struct userdir {
    char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
    char socket[sizeof(((struct sockaddr_un *)0)->sun_path)];
    char lock[4096], start_lock[4096], log[4096];
};

/*
 * Fills ud with the folder and file paths for uid (from the environment
 * now).  Returns 0, or -ENAMETOOLONG with err when the socket's path would
 * not fit a Unix socket address (naming it and XDG_RUNTIME_DIR).
 */
int userdir_paths(struct userdir *ud, uid_t uid, struct rf_err *err);

/*
 * Creates ud->dir (mode 0700; its parent must exist) unless it exists, then
 * checks it: a folder, not a link, owned by uid, mode 0700.  Returns 0, or
 * -errno with err naming the folder and what to do.
 */
int userdir_make(const struct userdir *ud, uid_t uid, struct rf_err *err);

#endif
