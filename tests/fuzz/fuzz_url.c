/*
 * fuzz_url.c - fuzz target for proto/url.h: url_parse either refuses
 * (-EINVAL with a message) or gives offsets inside the input whose bytes
 * obey the rules (host and path within the text, a port only when given,
 * dir matching the last byte), and parses the same text again alike.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "url.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *t = (const char *)data;
    struct url u, u2;
    struct rf_err err = {{0}};
    int r = url_parse(t, size, &u, &err);

    if (r < 0) {
        if (r != -EINVAL || err.msg[0] == '\0')
            abort();
        return 0;
    }
    if (r != 0 || size > URL_MAX || (uint64_t)u.host + u.host_len > size ||
        (uint64_t)u.path + u.path_len > size || u.host_len == 0)
        abort();
    if (u.scheme == URL_S3 && !url_valid_bucket(t + u.host, u.host_len))
        abort();
    if (u.scheme != URL_S3 && u.path_len && t[u.path] != '/')
        abort();
    if (u.path_len && u.dir != (t[u.path + u.path_len - 1] == '/'))
        abort();
    for (size_t i = 0; i < size; i++)
        if ((unsigned char)t[i] <= 0x20 || (unsigned char)t[i] >= 0x7f)
            abort();
    if (url_parse(t, size, &u2, NULL) != 0 || memcmp(&u, &u2, sizeof(u)) != 0)
        abort();
    return 0;
}
