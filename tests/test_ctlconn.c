/*
 * test_ctlconn.c - the tools' request and reply (tools/ctlconn.c) when the
 * daemon refused the connection: ringfeedd answers a peer it does not let
 * in (ERR denied, too-many, closing) with one line and closes it at once,
 * so the tool's request may meet a closed socket (EPIPE).  The daemon's
 * line is still there to read and is the reply; with no line, or half a
 * line, the error says that the daemon closed the connection.
 *
 * The daemon's end is one end of a socketpair, written and closed before
 * the request is sent: the send fails with EPIPE every time.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ctlconn.h"
#include "tap.h"

/* A ctlconn whose daemon end has sent `sent` (may be "") and closed. */
static void refused_conn(struct ctlconn *cc, const char *sent)
{
    int sv[2];
    size_t len = strlen(sent);

    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == -1)
        tap_bail("socketpair: %s", strerror(errno));
    if (len && write(sv[1], sent, len) != (ssize_t)len)
        tap_bail("write: %s", strerror(errno));
    close(sv[1]);
    *cc = (struct ctlconn){.fd = sv[0]};
    snprintf(cc->path, sizeof(cc->path), "/test/rf.sock");
}

static void test_err_line_is_the_reply(void)
{
    static const char line[] = "ERR denied uid 65534 gid 65534 may not use this socket\n";
    struct ctlconn cc;
    struct ctl_reply rep;
    struct rf_err err = {0};
    int rc;

    refused_conn(&cc, line);
    rc = ctlconn_request(&cc, "PING\n", &rep, &err);
    if (!tap_ok(rc == 0, "a refused connection's ERR line is the reply, not the send's EPIPE"))
        tap_diag("  rc %d: %s", rc, err.msg);
    if (rc == 0) {
        TAP_OK(!rep.ok && rep.code == CTL_E_DENIED, "ERR denied, parsed");
        TAP_OK(rep.text_len == strlen("uid 65534 gid 65534 may not use this socket") &&
                   memcmp(cc.buf + rep.text_off, "uid 65534", 9) == 0,
               "its message, as the daemon wrote it");
    }
    ctlconn_close(&cc);

    refused_conn(&cc, "ERR too-many 8 control connections open\n");
    rc = ctlconn_request(&cc, "STATS\n", &rep, &err);
    TAP_OK(rc == 0 && !rep.ok && rep.code == CTL_E_TOO_MANY, "ERR too-many, the same way");
    ctlconn_close(&cc);
}

static void test_no_reply_left(void)
{
    struct ctlconn cc;
    struct ctl_reply rep;
    struct rf_err err = {0};
    int rc;

    refused_conn(&cc, "");
    rc = ctlconn_request(&cc, "PING\n", &rep, &err);
    TAP_IS_INT(rc, -EPIPE, "closed with nothing sent: -EPIPE");
    if (!tap_ok(strstr(err.msg, "closed the connection") && strstr(err.msg, "/test/rf.sock"),
                "the message says the daemon closed it, and where"))
        tap_diag("  got: %s", err.msg);
    ctlconn_close(&cc);

    refused_conn(&cc, "ERR too-many 8 con");
    rc = ctlconn_request(&cc, "PING\n", &rep, &err);
    TAP_IS_INT(rc, -EPIPE, "half a line, then closed: -EPIPE, never half a reply");
    ctlconn_close(&cc);
}

int main(void)
{
    test_err_line_is_the_reply();
    test_no_reply_left();
    return tap_done();
}
