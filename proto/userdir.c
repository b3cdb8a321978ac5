/*
 * userdir.c - the user daemon's folder: its paths and the check that it is
 * the user's own (userdir.h).
 */
#include "userdir.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int userdir_paths(struct userdir *ud, uid_t uid, struct rf_err *err)
{
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    int n;

    memset(ud, 0, sizeof(*ud));
    if (xdg && xdg[0])
        n = snprintf(ud->dir, sizeof(ud->dir), "%s/ringfeed", xdg);
    else
        n = snprintf(ud->dir, sizeof(ud->dir), "/tmp/ringfeed-%u", (unsigned)uid);
    if (n < 0 || (size_t)n + 1 + sizeof(USERDIR_SOCKET) > sizeof(ud->socket))
        return rf_err_set(err, -ENAMETOOLONG,
                          "the user daemon's socket %s/%s would be longer than the %zu bytes "
                          "a Unix socket address holds: point XDG_RUNTIME_DIR at a shorter "
                          "folder", ud->dir, USERDIR_SOCKET, sizeof(ud->socket) - 1);
    memcpy(ud->socket, ud->dir, (size_t)n);
    memcpy(ud->socket + n, "/" USERDIR_SOCKET, sizeof("/" USERDIR_SOCKET));
    snprintf(ud->lock, sizeof(ud->lock), "%s/%s", ud->dir, USERDIR_LOCK);
    snprintf(ud->start_lock, sizeof(ud->start_lock), "%s/%s", ud->dir, USERDIR_START_LOCK);
    snprintf(ud->log, sizeof(ud->log), "%s/%s", ud->dir, USERDIR_LOG);
    return 0;
}

int userdir_make(const struct userdir *ud, uid_t uid, struct rf_err *err)
{
    struct stat sb;

    if (mkdir(ud->dir, 0700) == -1 && errno != EEXIST)
        return rf_err_set(err, -errno, "cannot create the user daemon's folder %s: %s%s",
                          ud->dir, strerror(errno),
                          errno == ENOENT ? " (does XDG_RUNTIME_DIR exist?)" : "");
    if (lstat(ud->dir, &sb) == -1)
        return rf_err_set(err, -errno, "the user daemon's folder %s: %s", ud->dir,
                          strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return rf_err_set(err, -ENOTDIR,
                          "the user daemon's folder %s is not a folder (a link or a file): "
                          "refused; remove it", ud->dir);
    if (sb.st_uid != uid)
        return rf_err_set(err, -EPERM,
                          "the user daemon's folder %s belongs to uid %u, not to uid %u: "
                          "refused (someone else made it); remove it, or set "
                          "XDG_RUNTIME_DIR to a folder of your own", ud->dir,
                          (unsigned)sb.st_uid, (unsigned)uid);
    if ((sb.st_mode & 07777) != 0700)
        return rf_err_set(err, -EPERM,
                          "the user daemon's folder %s has mode %04o, not 0700: refused "
                          "(others could reach or replace its socket); chmod 0700 %s",
                          ud->dir, (unsigned)(sb.st_mode & 07777), ud->dir);
    return 0;
}
