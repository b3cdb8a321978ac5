/*
 * ctlconn.h - the tools' side of the control protocol (proto/ctl.h): connect
 * to the daemon's socket, send one request line, read back one whole reply.
 * Used by ringfeedctl and by ringfeed-read's --workers-note.
 */
#ifndef RINGFEED_TOOLS_CTLCONN_H
#define RINGFEED_TOOLS_CTLCONN_H

#include <stddef.h>
#include <sys/un.h>

#include "ctl.h"
#include "err.h"

/* How long a tool waits for a reply before it gives up, by default. */
#define CTLCONN_TIMEOUT_MS 30000

struct ctlconn {
    int fd;
    int timeout_ms; /* for each request's reply; 0 (unset): CTLCONN_TIMEOUT_MS */
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    char *buf;      /* the last reply: buf[0..len) */
    size_t len, cap;
};

/*
 * Connects to the control socket: socket if not NULL, else libringfeed's
 * defaults ($RINGFEED_SOCKET, $XDG_RUNTIME_DIR/ringfeed.sock,
 * /run/ringfeed/ringfeed.sock).  Returns 0, or -errno with err naming the
 * path and what to do.  cc is ready for ctlconn_close() either way.
 */
int ctlconn_open(struct ctlconn *cc, const char *socket, struct rf_err *err);

/*
 * Sends line (one request, its LF included) and reads the whole reply into
 * cc->buf, parsed into *rep (offsets into cc->buf).  Returns 0 (whether
 * the reply is OK or ERR; a daemon that refused the connection and closed
 * it before the line could be sent is still read: its ERR is the reply),
 * or -errno: the connection failed, timed out, or the reply broke the
 * protocol (-EPROTO); err says which.
 */
int ctlconn_request(struct ctlconn *cc, const char *line, struct ctl_reply *rep,
                    struct rf_err *err);

/* Closes and frees.  Accepts a cc that never opened. */
void ctlconn_close(struct ctlconn *cc);

#endif
