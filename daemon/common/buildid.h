/*
 * buildid.h - which build of ringfeedd a process runs: the version, the
 * commit (revision.h) and a checksum of the executable's bytes, as one
 * line ("0.1.0 3ed2add9c1f2 crc32c:1a2b3c4d").
 *
 * The main process keeps its executable open and starts every worker from
 * that descriptor (pool.c), so replacing the binary on disk (an upgrade)
 * never gives it workers of another build; each worker still reports its
 * own identity in HELLO and the main process refuses one that differs.
 */
#ifndef RINGFEED_DAEMON_COMMON_BUILDID_H
#define RINGFEED_DAEMON_COMMON_BUILDID_H

#include <stddef.h>

#define BUILDID_MAX 64

/*
 * Writes the identity of the executable open at fd (read with pread, from
 * offset 0; the descriptor's offset is left alone) into out (BUILDID_MAX
 * bytes).  Returns 0, or a negative errno from reading it.
 */
int buildid_of_fd(int fd, char out[BUILDID_MAX]);

#endif
