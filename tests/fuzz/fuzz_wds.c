/*
 * fuzz_wds.c - fuzz target for tools/wds.h, WebDataset's rules: the input
 * is member paths, one a line ("#" alone starts a new tar), each split
 * into key and extension, grouped into samples, and each finished sample
 * matched to the field list its first sample made; every line is also read
 * as a .cls integer.  Checks that a split's key and extension lie in the
 * path around one dot, that field names are schema names, that the
 * grouping's member counts and faults stay in range, that a mapping names
 * in-range fields and members, and that an integer read once reads alike
 * again.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wds.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_name(const char *name)
{
    size_t n = strlen(name);

    if (n == 0 || n > SCHEMA_NAME_MAX || (name[0] >= '0' && name[0] <= '9'))
        abort();
    for (size_t i = 0; i < n; i++)
        if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9') ||
              name[i] == '_'))
            abort();
}

/* The open sample of g, matched to *f (made from it when there is none). */
static void finish(struct wds_group *g, struct wds_fields *f, int *have)
{
    int32_t field_of[WDS_MEMBERS_MAX];
    uint32_t which;
    int r;

    if (!g->open)
        return;
    if (g->members == 0 || g->members > WDS_MEMBERS_MAX ||
        (g->fault != WDS_OK && g->fault_member >= g->members) || !wds_fault_text(g->fault))
        abort();
    if (g->fault != WDS_OK)
        return;
    if (!*have) {
        if (wds_fields_from(f, g->ext, g->members, NULL) < 0)
            return;
        *have = 1;
        for (uint32_t i = 0; i < f->n; i++) {
            char name[SCHEMA_NAME_MAX + 1];

            if (wds_field_name(f->ext[i], strlen(f->ext[i]), name) < 0)
                abort();
            check_name(name);
            if (!wds_kind_name(wds_ext_kind(f->ext[i], strlen(f->ext[i]))))
                abort();
        }
    }
    r = wds_fields_map(f, g->ext, g->members, field_of, &which);
    if (r == -ENOENT ? which >= f->n : r == -EINVAL ? which >= g->members : r != 0)
        abort();
    if (r == 0)
        for (uint32_t m = 0; m < g->members; m++)
            if (field_of[m] < -1 || field_of[m] >= (int32_t)f->n)
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct wds_group g;
    struct wds_fields f;
    int have = 0;
    size_t at = 0;

    wds_group_init(&g);
    while (at < size) {
        const uint8_t *nl = memchr(data + at, '\n', size - at);
        size_t n = nl ? (size_t)(nl - (data + at)) : size - at;
        const char *path = (const char *)data + at;
        struct wds_name nm;
        int64_t v, v2;

        if (wds_parse_int(data + at, n, &v, NULL) == 0 &&
            (wds_parse_int(data + at, n, &v2, NULL) != 0 || v != v2))
            abort();
        if (n == 1 && path[0] == '#') {
            finish(&g, &f, &have);
            wds_group_reset(&g);
        } else if (wds_name_split(path, n, &nm) == 0) {
            if (nm.key_len == 0 || nm.ext_off != nm.key_len + 1 || nm.ext_off + nm.ext_len != n ||
                path[nm.key_len] != '.' || nm.ext_len > WDS_EXT_MAX ||
                memchr(path + nm.ext_off, '/', nm.ext_len))
                abort();
            if (wds_group_is_new(&g, path, nm.key_len))
                finish(&g, &f, &have);
            if (wds_group_next(&g, path, nm.key_len, path + nm.ext_off, nm.ext_len) < 0)
                break;
        }
        at += n + 1;
    }
    finish(&g, &f, &have);
    wds_group_fini(&g);
    return 0;
}
