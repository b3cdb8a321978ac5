/*
 * fuzz_manifest.c - the MANIFEST parser on arbitrary bytes.
 *
 * Whatever the input, manifest_parse must return without reading past it
 * or leaking; when it accepts the input, formatting the result and parsing
 * that again must give the same text (the formatter writes only what the
 * parser reads back), or the target aborts.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct manifest m, again;
    struct rf_err err;
    char *text, *text2;
    size_t len = 0, len2 = 0;

    if (manifest_parse((const char *)data, size, &m, &err) < 0)
        return 0;
    text = manifest_format(&m, &len);
    if (!text)
        abort();
    if (manifest_parse(text, len, &again, &err) < 0)
        abort(); /* we wrote something we cannot read */
    text2 = manifest_format(&again, &len2);
    if (!text2 || len2 != len || memcmp(text, text2, len) != 0)
        abort();
    for (uint32_t i = 0; i < m.nclasses; i++)
        if (strcmp(manifest_class_name(&m, i), manifest_class_name(&again, i)))
            abort();
    free(text);
    free(text2);
    manifest_free(&m);
    manifest_free(&again);
    return 0;
}
