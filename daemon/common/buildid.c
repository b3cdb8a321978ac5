/*
 * buildid.c - a build's identity line (buildid.h).
 */
#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include "buildid.h"
#include "config.h"
#include "crc32c.h"
#include "revision.h"

int buildid_of_fd(int fd, char out[BUILDID_MAX])
{
    static unsigned char buf[1 << 16];
    uint32_t crc = 0;
    off_t at = 0;

    for (;;) {
        ssize_t n = pread(fd, buf, sizeof(buf), at);

        if (n == -1 && errno == EINTR)
            continue;
        if (n == -1)
            return -errno;
        if (n == 0)
            break;
        crc = crc32c(crc, buf, (size_t)n);
        at += n;
    }
    snprintf(out, BUILDID_MAX, "%s %s crc32c:%08x", RINGFEED_VERSION, RINGFEED_REVISION, crc);
    return 0;
}
