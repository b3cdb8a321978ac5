/*
 * fuzz_ini.c - fuzz target for proto/ini.h: ini_get over the input for a
 * few (section, key) pairs either refuses (-EBADMSG with a message naming
 * a line) or answers 0, or 1 with a value inside the buffer, trimmed, on
 * one line with no control byte but TAB.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ini.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const asks[][2] = {
        {"default", "aws_access_key_id"}, {"default", "region"},
        {"profile dev", "aws_secret_access_key"}, {"a", "k"},
    };
    const char *t = (const char *)data;

    for (size_t i = 0; i < sizeof(asks) / sizeof(asks[0]); i++) {
        struct ini_value v = {0};
        struct rf_err err = {{0}};
        int r = ini_get(t, size, asks[i][0], asks[i][1], &v, &err);
        if (r < 0) {
            if (r != -EBADMSG || strncmp(err.msg, "line ", 5) != 0)
                if (!(size > INI_FILE_MAX && r == -EBADMSG))
                    abort();
            continue;
        }
        if (r == 0)
            continue;
        if (r != 1 || v.off + v.len > size || v.line == 0)
            abort();
        for (size_t j = 0; j < v.len; j++) {
            unsigned char c = (unsigned char)t[v.off + j];
            if (c == '\n' || c == '\r' || (c < 0x20 && c != '\t'))
                abort();
        }
        if (v.len && (t[v.off] == ' ' || t[v.off] == '\t' || t[v.off + v.len - 1] == ' ' ||
                      t[v.off + v.len - 1] == '\t'))
            abort();
    }
    return 0;
}
