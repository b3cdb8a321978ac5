/*
 * sdnotify.h - the two small systemd protocols ringfeedd speaks, written
 * out here rather than linked from libsystemd:
 *
 * READINESS NOTIFICATION (sd_notify(3))
 *   $NOTIFY_SOCKET names an AF_UNIX datagram socket: "/path" (a pathname
 *   socket) or "@name" (an abstract one: '@' becomes the leading NUL byte,
 *   and the address length counts exactly the name, no terminating NUL).
 *   A message is one datagram of newline-separated VAR=VALUE assignments:
 *   READY=1, RELOADING=1 (with MONOTONIC_USEC=<CLOCK_MONOTONIC in us>),
 *   STOPPING=1, STATUS=<one line>, WATCHDOG=1.  The receiver learns the
 *   sender's pid from SCM_CREDENTIALS, so with NotifyAccess=main only the
 *   main process may speak; workers never do.
 *
 * WATCHDOG (sd_watchdog_enabled(3))
 *   $WATCHDOG_USEC (a positive decimal) asks for a WATCHDOG=1 at least that
 *   often; $WATCHDOG_PID, when set, must be our pid or the request is for
 *   another process.  Pinging at half the interval is the documented rule.
 *
 * SOCKET ACTIVATION (sd_listen_fds(3))
 *   $LISTEN_PID is our pid and $LISTEN_FDS the number of sockets passed
 *   from fd 3 (SD_LISTEN_FDS_START) upward.  ringfeedd takes exactly one:
 *   a listening AF_UNIX stream socket bound to a path.
 *
 * Every variable is removed from the environment once read, so the worker
 * processes (fork+exec'd children) neither ping nor claim the socket.
 *
 * The parsers (sdn_parse_*) are pure functions of their strings: no
 * environment, no system calls.  tests/test_sdnotify.c covers them and the
 * I/O around them; tests/fuzz/fuzz_sdnotify.c fuzzes the parsers.
 */
#ifndef RINGFEED_DAEMON_SDNOTIFY_H
#define RINGFEED_DAEMON_SDNOTIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

#define SDN_LISTEN_FDS_START 3
#define SDN_MESSAGE_MAX 4096 /* one notification datagram, at most */

/*
 * Parses $NOTIFY_SOCKET's value s into *sa and *len (the address length to
 * give sendto).  Returns 0; -EINVAL for NULL, empty, or neither '/' nor
 * '@' first; -ENAMETOOLONG past sun_path; -EAFNOSUPPORT for "vsock:..."
 * (a VM's notify socket, which ringfeedd does not speak).
 */
int sdn_parse_notify_addr(const char *s, struct sockaddr_un *sa, socklen_t *len);

/*
 * Parses $WATCHDOG_USEC and $WATCHDOG_PID (either may be NULL) for the
 * process self.  Returns 1 with *usec set when the watchdog is on for us;
 * 0 when it is not asked for (usec NULL) or is for another pid; -EINVAL
 * for a malformed or zero value.
 */
int sdn_parse_watchdog(const char *usec, const char *pid, pid_t self, uint64_t *usec_out);

/*
 * Parses $LISTEN_PID and $LISTEN_FDS (either may be NULL) for the process
 * self.  Returns the number of fds passed (>= 1) when they are for us; 0
 * when none are (unset, or another pid's); -EINVAL for malformed values.
 */
int sdn_parse_listen_fds(const char *pid, const char *fds, pid_t self);

/*
 * Checks that fd is a listening AF_UNIX SOCK_STREAM socket bound to a
 * path (getsockopt SO_TYPE and SO_ACCEPTCONN, getsockname) and copies the
 * path into path[0..cap).  Returns 0; -ENOTSOCK, -EAFNOSUPPORT (not
 * AF_UNIX), -EPROTOTYPE (not a stream), -EINVAL (not listening),
 * -EADDRNOTAVAIL (abstract or unbound), -ENAMETOOLONG, or another -errno.
 */
int sdn_check_listen_fd(int fd, char *path, size_t cap);

/* The notify side: an unconnected datagram socket and the address. */
struct sdn {
    int fd;                 /* -1: notifications are off */
    struct sockaddr_un addr;
    socklen_t addr_len;
    uint64_t watchdog_usec; /* 0: no watchdog asked for */
};

/*
 * Reads (and unsets) $NOTIFY_SOCKET, $WATCHDOG_USEC and $WATCHDOG_PID.
 * Returns 0 with n->fd >= 0 when notifications are on, 0 with n->fd == -1
 * when $NOTIFY_SOCKET is unset, or -errno when it is set but unusable
 * (n->fd == -1 then; the reason is the caller's to log).  A malformed
 * watchdog leaves n->watchdog_usec 0 and is reported by *bad_watchdog.
 */
int sdn_open_env(struct sdn *n, bool *bad_watchdog);

/* Sends msg (newline-separated assignments) as one datagram.  Returns 0,
 * 0 also when n is off, or -errno (EAGAIN when the receiver is full). */
int sdn_send(const struct sdn *n, const char *msg);

void sdn_close(struct sdn *n);

/*
 * Reads (and unsets) $LISTEN_PID, $LISTEN_FDS and $LISTEN_FDNAMES.  When
 * one socket was passed for us, checks it (sdn_check_listen_fd), sets it
 * close-on-exec and returns its fd (>= 3) with its path in path[0..cap).
 * Returns -1 when none was passed, or -errno when one was but cannot be
 * used (more than one, or not a listening pathname stream socket); the
 * passed fds are then closed so no worker inherits them.
 */
int sdn_take_listen_fd(char *path, size_t cap);

#endif
