/* fileio.c - read and write loops that finish the job (see fileio.h). */
#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

ssize_t fio_pread_full(int fd, void *buf, size_t len, uint64_t off)
{
    size_t done = 0;

    if (off > (uint64_t)INT64_MAX || len > (size_t)SSIZE_MAX)
        return -EINVAL;
    while (done < len) {
        ssize_t n = pread(fd, (char *)buf + done, len - done,
                          (off_t)(off + done));

        if (n == -1) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            return -errno;
        }
        if (n == 0)
            break; /* end of file */
        done += (size_t)n;
    }
    return (ssize_t)done;
}

int fio_write_full(int fd, const void *buf, size_t len)
{
    size_t done = 0;

    while (done < len) {
        ssize_t n = write(fd, (const char *)buf + done, len - done);

        if (n == -1) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            return -errno;
        }
        done += (size_t)n;
    }
    return 0;
}

int fio_pwrite_full(int fd, const void *buf, size_t len, uint64_t off)
{
    size_t done = 0;

    if (off > (uint64_t)INT64_MAX)
        return -EINVAL;
    while (done < len) {
        ssize_t n = pwrite(fd, (const char *)buf + done, len - done,
                           (off_t)(off + done));

        if (n == -1) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            return -errno;
        }
        done += (size_t)n;
    }
    return 0;
}

int fio_read_file(int dirfd, const char *name, size_t max, char **out,
                  size_t *len)
{
    struct stat st;
    char *buf = NULL;
    ssize_t n;
    int fd, r;

    fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC);
    if (fd == -1)
        return -errno;
    if (fstat(fd, &st) == -1) {
        r = -errno;
        goto out_close;
    }
    if (!S_ISREG(st.st_mode)) {
        r = -EINVAL;
        goto out_close;
    }
    if ((uint64_t)st.st_size > max) {
        r = -EFBIG;
        goto out_close;
    }
    /* one byte more than the size, to notice a file that grew */
    buf = malloc((size_t)st.st_size + 2);
    if (!buf) {
        r = -ENOMEM;
        goto out_close;
    }
    n = fio_pread_full(fd, buf, (size_t)st.st_size + 1, 0);
    if (n < 0) {
        r = (int)n;
        goto out_free;
    }
    if ((size_t)n > (size_t)st.st_size) {
        r = -EAGAIN; /* changed while read */
        goto out_free;
    }
    buf[n] = '\0';
    *out = buf;
    *len = (size_t)n;
    close(fd);
    return 0;

out_free:
    free(buf);
out_close:
    close(fd);
    return r;
}

ssize_t fio_read_small(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n;

    if (fd == -1)
        return -errno;
    n = fio_pread_full(fd, buf, cap - 1, 0);
    close(fd);
    if (n < 0)
        return n;
    buf[n] = '\0';
    return n;
}
