/*
 * fuzz_sdnotify.c - fuzz target for the systemd variable parsers
 * (daemon/sdnotify.h).  The input is cut at NUL bytes into up to three
 * strings: a NOTIFY_SOCKET value, then WATCHDOG_USEC / LISTEN_FDS, then
 * WATCHDOG_PID / LISTEN_PID.  Every answer must be one the header
 * promises, and a parsed address must fit sockaddr_un with the length
 * rule (pathname: NUL counted; abstract: leading NUL, exactly the name).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sdnotify.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size + 3);
    const char *part[3] = { NULL, NULL, NULL };
    struct sockaddr_un sa;
    socklen_t len = 0;
    uint64_t usec = 0;
    size_t at = 0;
    int r;

    if (!buf)
        return 0;
    memcpy(buf, data, size);
    buf[size] = buf[size + 1] = buf[size + 2] = '\0';
    for (int i = 0; i < 3 && at <= size; i++) {
        part[i] = buf + at;
        at += strlen(buf + at) + 1;
    }
    r = sdn_parse_notify_addr(part[0], &sa, &len);
    if (r == 0) {
        size_t n = strlen(part[0]);

        if (sa.sun_family != AF_UNIX || len > sizeof(sa) ||
            (part[0][0] == '/' && len != offsetof(struct sockaddr_un, sun_path) + n + 1) ||
            (part[0][0] == '@' && (sa.sun_path[0] != '\0' ||
                                   len != offsetof(struct sockaddr_un, sun_path) + n)))
            abort();
    } else if (r != -EINVAL && r != -ENAMETOOLONG && r != -EAFNOSUPPORT) {
        abort();
    }
    r = sdn_parse_watchdog(part[1], part[2], 4242, &usec);
    if (r < -EINVAL || (r < 0 && r != -EINVAL) || r > 1 || (r == 1 && usec == 0))
        abort();
    r = sdn_parse_listen_fds(part[2], part[1], 4242);
    if ((r < 0 && r != -EINVAL) || r > 4096)
        abort();
    free(buf);
    return 0;
}
