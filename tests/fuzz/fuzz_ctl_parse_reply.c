/*
 * fuzz_ctl_parse_reply.c - fuzz target for the client side of the control
 * protocol: parses replies one after another the way ringfeedctl and the
 * client library read them, and checks (abort on failure) that offsets and
 * lengths stay inside what was consumed, that a multi-line body walks to
 * exactly nlines lines, that every strict prefix of a complete reply needs
 * more, and that CTL_BAD always says why.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"

static void check(const char *buf, size_t used, const struct ctl_reply *rep)
{
    size_t cur = 0, off, len;
    uint32_t lines = 0;

    if (rep->text_off + rep->text_len > used || rep->name_off + rep->name_len > used)
        abort();
    if (rep->ok != (rep->name_len == 0) || (!rep->ok && rep->err >= 0) || (rep->ok && rep->err))
        abort();
    if (!rep->multi && (rep->nlines || rep->body_len))
        abort();
    if (rep->body_off + rep->body_len != used)
        abort();
    while (ctl_reply_next_line(buf, rep, &cur, &off, &len)) {
        if (off < rep->body_off || off + len > used || memchr(buf + off, '\n', len))
            abort();
        lines++;
    }
    if (lines != rep->nlines)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *buf = (const char *)data;
    size_t pos = 0;

    while (pos < size) {
        struct ctl_reply rep;
        size_t used;
        enum ctl_status st = ctl_parse_reply(buf + pos, size - pos, &rep, &used);

        if (st == CTL_BAD) {
            if (!rep.why || used != 0)
                abort();
            break;
        }
        if (st == CTL_NEED_MORE) {
            if (used != 0)
                abort();
            break;
        }
        if (st != CTL_DONE || used == 0 || used > size - pos)
            abort();
        check(buf + pos, used, &rep);
        /* a complete reply is not complete one byte earlier */
        if (ctl_parse_reply(buf + pos, used - 1, &rep, &used) == CTL_DONE)
            abort();
        ctl_parse_reply(buf + pos, size - pos, &rep, &used);
        pos += used;
    }
    return 0;
}
