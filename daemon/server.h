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
/* Closes a client's connection (and so detaches its stream). */
void server_kick(void *conn, const char *why);
/* Applies socket-mode and socket-group again (a reload). */
void server_reconfigure(struct daemon *d);

#endif
