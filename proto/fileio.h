/*
 * fileio.h - whole-buffer reads and writes that survive short counts and
 * EINTR, for the dataset reader and writer.
 *
 * Each returns a negative errno on failure (never sets a message: the caller
 * knows which file and record it was reading and says so).
 */
#ifndef RINGFEED_PROTO_FILEIO_H
#define RINGFEED_PROTO_FILEIO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * Reads len bytes at file offset off into buf.  Returns the number of bytes
 * read, which is less than len only at end of file, or a negative errno.
 */
ssize_t fio_pread_full(int fd, void *buf, size_t len, uint64_t off);

/* Writes all len bytes (at the file position / at offset off): 0 or -errno. */
int fio_write_full(int fd, const void *buf, size_t len);
int fio_pwrite_full(int fd, const void *buf, size_t len, uint64_t off);

/*
 * Reads the whole regular file name (relative to dirfd) into a malloc'd
 * buffer, with a NUL after it that *len does not count.  Returns 0,
 * -EFBIG when the file is over max bytes, -EINVAL when it is not a regular
 * file, or the errno of open/fstat/read.  The caller frees *out.
 */
int fio_read_file(int dirfd, const char *name, size_t max, char **out,
                  size_t *len);

/*
 * Reads a small text file (/proc, /sys) at path into buf: at most cap - 1
 * bytes, NUL-terminated.  Returns the bytes read, or a negative errno.
 */
ssize_t fio_read_small(const char *path, char *buf, size_t cap);

#endif
