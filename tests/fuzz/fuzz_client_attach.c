/*
 * fuzz_client_attach.c - fuzz target for libringfeed's two ATTACH lines
 * (client/attach_line.c).  The first byte picks what the rest is:
 *   even: a reply from the daemon, given to client_parse_reply, which must
 *         answer 0 only with every field set (a mixture's sources= kept
 *         terminated and of its own bytes), a negative errno otherwise,
 *         and always leave a terminated message;
 *   odd:  the params option, given to client_format_attach, which must
 *         either refuse (negative errno, message) or write one line that
 *         the daemon's parser (ctl_parse) accepts as a valid ATTACH naming
 *         the same dataset and batch (abort on failure).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "ctl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void reply(const char *buf, size_t len)
{
    struct client_reply r = {0};
    struct rf_err err = {{0}};
    int refused = 0, rc;

    rc = client_parse_reply(buf, len, "fuzz.sock", &r, &refused, &err);
    if (rc > 0 || (rc < 0 && !err.msg[0]) || (rc == 0 && refused))
        abort();
    if (memchr(err.msg, '\0', sizeof(err.msg)) == NULL)
        abort();
    /* a mixture's sources=: terminated, of the names' and numbers' bytes */
    if (rc == 0 && (memchr(r.sources, '\0', sizeof(r.sources)) == NULL ||
                    strspn(r.sources, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                      "0123456789._-:,") != strlen(r.sources)))
        abort();
}

static void request(const char *params)
{
    struct rf_options o;
    struct client_attach_args a;
    char line[CTL_LINE_MAX + 1];
    struct rf_err err = {{0}};
    struct ctl_req req;
    size_t used;
    int rc;

    /* rf_options_init's defaults (it lives in client.c, not linked here) */
    o = (struct rf_options){.dataset = "fuzz-set", .batch = 64, .rank = -1, .world = -1,
                            .transform = "raw", .shuffle = 1, .reconnect_ms = 30000,
                            .params = params};
    a = (struct client_attach_args){.opt = &o, .path = "fuzz.sock", .rank = 1, .world = 2,
                                    .epoch = 3, .seq = 4};
    rc = client_format_attach(&a, line, sizeof(line), &err);
    if (rc < 0) {
        if (!err.msg[0])
            abort();
        return;
    }
    if ((size_t)rc != strlen(line) || line[rc - 1] != '\n')
        abort();
    if (ctl_parse(line, (size_t)rc, &req, &used) != CTL_DONE || used != (size_t)rc ||
        req.verb != CTL_VERB_ATTACH || req.err != CTL_E_NONE ||
        strcmp(req.attach.dataset, "fuzz-set") != 0 || req.attach.batch != 64 ||
        req.attach.rank != 1 || req.attach.world != 2 || req.attach.epoch != 3 ||
        req.attach.seq != 4)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf;

    if (size < 1)
        return 0;
    buf = malloc(size);
    if (!buf)
        return 0;
    memcpy(buf, data + 1, size - 1);
    buf[size - 1] = '\0';
    if (data[0] % 2 == 0)
        reply(buf, size - 1);
    else if (strlen(buf) == size - 1) /* params is a C string */
        request(buf);
    free(buf);
    return 0;
}
