/*
 * server.h - the control server (server.c): the listening socket, connections and
 * their requests.
 */
#ifndef RINGFEED_DAEMON_SERVER_H
#define RINGFEED_DAEMON_SERVER_H

#include <stdint.h>

struct daemon;

int server_start(struct daemon *d);
void server_stop(struct daemon *d);
void server_close_all(struct daemon *d);
/* The ring an ATTACH asked for is made (st, rc 0: send it and start the
 * stream) or could not be (st NULL, rc < 0: answer the ERR in err); the
 * scheduler calls it once per sched_attach that succeeded, unless the
 * connection closed first. */
struct stream;
struct rf_err;
void server_attach_made(void *conn, struct stream *st, int rc, const struct rf_err *err);
/* Closes a client's connection (and so detaches its stream). */
void server_kick(void *conn, const char *why);
/* Applies socket-mode and socket-group again (a reload). */
void server_reconfigure(struct daemon *d);

#endif
