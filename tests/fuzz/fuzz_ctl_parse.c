/*
 * fuzz_ctl_parse.c - fuzz target for the control protocol's request
 * parser, driven the way ringfeedd's server drives it: a connection's
 * bytes arrive in chunks into a CTL_LINE_MAX buffer; complete lines are
 * parsed and consumed, a too-long line is answered and skipped through its
 * LF, and the rest waits for more.
 *
 * Checked on every input (abort on failure):
 *   - the same outcomes whether the input arrives whole or in chunks of a
 *     size taken from the first byte;
 *   - consumed counts never pass the buffer, a DONE consumes at least one
 *     byte, NEED_MORE only below CTL_LINE_MAX;
 *   - every error has a code in the table, a message, and a reply that
 *     ctl_parse_reply reads back with the same code;
 *   - every accepted ATTACH formats with ctl_format_attach and parses back
 *     to the same line.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"

#define OUT_MAX 4096

static void check_req(const struct ctl_req *req)
{
    static char reply[CTL_LINE_MAX + 64], text[CTL_LINE_MAX];
    static struct ctl_req again;
    struct ctl_reply rep;
    size_t rused;
    int n;

    if (req->err != CTL_E_NONE) {
        if (!ctl_errcode_name(req->err) || !req->msg[0] || !memchr(req->msg, '\0', CTL_MSG_MAX))
            abort();
        n = ctl_reply_err(reply, sizeof(reply), req->err, "%s", req->msg);
        if (n <= 0 || ctl_parse_reply(reply, (size_t)n, &rep, &rused) != CTL_DONE ||
            rep.ok || rep.code != req->err || rused != (size_t)n)
            abort();
        return;
    }
    if (req->verb == CTL_VERB_ATTACH) {
        /* format, parse, format again: the same text means the same values
         * (the formatter writes each value in one way only) */
        n = ctl_format_attach(&req->attach, text, sizeof(text), NULL);
        if (n <= 0 || ctl_parse(text, (size_t)n, &again, &rused) != CTL_DONE ||
            again.err != CTL_E_NONE || rused != (size_t)n)
            abort();
        n = ctl_format_attach(&again.attach, reply, sizeof(reply), NULL);
        if (n <= 0 || strcmp(reply, text) != 0)
            abort();
    }
}

/* Runs the server loop; writes an outcome signature into out. */
static size_t run(const uint8_t *data, size_t size, size_t chunk, char *out)
{
    static char buf[CTL_LINE_MAX];
    static struct ctl_req req;
    size_t have = 0, fed = 0, o = 0;
    int skipping = 0;

    for (;;) {
        size_t n = size - fed < chunk ? size - fed : chunk, used;

        if (n > sizeof(buf) - have)
            n = sizeof(buf) - have;
        memcpy(buf + have, data + fed, n);
        have += n;
        fed += n;
        while (have > 0) {
            if (skipping) {
                skipping = !ctl_skip_line(buf, have, &used);
                if (used > have)
                    abort();
            } else {
                enum ctl_status st = ctl_parse(buf, have, &req, &used);

                if (st == CTL_NEED_MORE) {
                    if (used != 0 || have >= CTL_LINE_MAX)
                        abort();
                    break;
                }
                if (st == CTL_TOO_LONG) {
                    if (used != 0 || have < CTL_LINE_MAX || req.err != CTL_E_TOO_LONG)
                        abort();
                    skipping = 1;
                } else if (st != CTL_DONE || used == 0 || used > have ||
                           buf[used - 1] != '\n') {
                    abort();
                } else {
                    check_req(&req);
                }
                if (o + 2 < OUT_MAX) {
                    out[o++] = (char)('A' + req.verb);
                    out[o++] = (char)('a' + req.err);
                }
            }
            memmove(buf, buf + used, have - used);
            have -= used;
        }
        if (n == 0 && fed == size)
            break;
    }
    out[o] = '\0';
    return o;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char whole[OUT_MAX + 1], split[OUT_MAX + 1];
    size_t chunk = size ? 1 + data[0] % 61 : 1;

    run(data, size, size ? size : 1, whole);
    run(data, size, chunk, split);
    if (strcmp(whole, split) != 0)
        abort();
    return 0;
}
