/*
 * test_token_index.c - the token index of proto/token_index.h on packs
 * written here: the prefix sums against the documents (empty ones
 * included), tokidx_doc for every token, the window count floor((T-1)/L),
 * and the refusals: another schema, a zstd record (named).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codec.h"
#include "dataset.h"
#include "dataset_writer.h"
#include "schema.h"
#include "tap.h"
#include "token_index.h"

static char tmp[] = "/tmp/rf-tokidx-XXXXXX";

/* A token pack at tmp/name of the documents' lengths (u16 tokens, their
 * global positions; as many bytes of another dtype), each record of codec;
 * 0 or -1. */
static int write_pack(const char *name, const uint32_t *lens, unsigned n, unsigned codec,
                      const char *line)
{
    char dest[256];
    struct schema sc = {0};
    struct schema_field f;
    char of[SCHEMA_NAME_MAX + 1];
    struct dataset_writer_opts o = {.kind = DATASET_FIELDS, .codec = DATASET_CODEC_NONE,
                                    .schema = &sc, .shard_bytes = 4096};
    struct dataset_writer *w;
    struct rf_err err;
    uint8_t rec[4 + 2 * 2048];
    uint32_t at = 0;

    if (schema_field_parse(line, strlen(line), &f, of, &err) < 0 ||
        schema_add(&sc, &f, of, &err) < 0 || schema_check(&sc, &err) < 0)
        return -1;
    snprintf(dest, sizeof(dest), "%s/%s", tmp, name);
    if (dataset_writer_create(dest, &o, &w, &err) < 0)
        return -1;
    for (unsigned d = 0; d < n; d++) {
        schema_record_put_len(rec, lens[d] * 2);
        for (uint32_t k = 0; k < lens[d]; k++, at++) {
            rec[4 + 2 * k] = (uint8_t)at;
            rec[5 + 2 * k] = (uint8_t)(at >> 8);
        }
        if (dataset_writer_add_codec(w, rec, 4 + lens[d] * 2, DATASET_NO_LABEL, codec,
                                     &err) < 0) {
            dataset_writer_abort(w);
            return -1;
        }
    }
    return dataset_writer_finish(w, NULL, &err);
}

int main(void)
{
    static const uint32_t lens[] = {5, 0, 300, 1, 0, 0, 700, 2, 1200, 3};
    const unsigned n = sizeof(lens) / sizeof(lens[0]);
    struct dataset *ds = NULL;
    struct tok_index ti;
    struct rf_err err = {{0}};
    char path[256];
    uint64_t total = 0, bad = 0;

    if (!mkdtemp(tmp))
        return 1;
    for (unsigned d = 0; d < n; d++)
        total += lens[d];
    tap_ok(write_pack("ok", lens, n, DATASET_CODEC_NONE, "tokens ragged dtype=u16 max=2048") == 0,
           "a u16 token pack written");
    snprintf(path, sizeof(path), "%s/ok", tmp);
    tap_ok(dataset_open(path, &ds, &err) == 0, "it opens");
    tap_ok(tokidx_build(ds, &ti, &err) == 0 && ti.docs == n && ti.value_bytes == 2,
           "the index builds: %s", err.msg);
    tap_ok(tokidx_tokens(&ti) == total, "T is every token (%llu)", (unsigned long long)total);
    for (unsigned d = 0, at = 0; d < n; at += lens[d], d++)
        bad += ti.start[d] != at;
    tap_ok(bad == 0, "start[d] is the tokens before document d");
    bad = 0;
    for (unsigned d = 0, at = 0; d < n; d++)
        for (uint32_t k = 0; k < lens[d]; k++, at++)
            bad += tokidx_doc(&ti, at) != d;
    tap_ok(bad == 0, "every token's document found, empty documents passed over");
    tap_ok(tokidx_windows(&ti, 1) == total - 1 && tokidx_windows(&ti, 100) == (total - 1) / 100 &&
           tokidx_windows(&ti, (uint32_t)total) == 0 &&
           tokidx_windows(&ti, (uint32_t)total - 1) == 1, "windows are floor((T-1)/L)");
    tokidx_free(&ti);
    tokidx_free(&ti);
    dataset_close(ds);

    tap_ok(write_pack("zstd", lens, n, DATASET_CODEC_ZSTD, "tokens ragged dtype=u16 max=2048") == 0,
           "a pack of zstd records written");
    snprintf(path, sizeof(path), "%s/zstd", tmp);
    tap_ok(dataset_open(path, &ds, &err) == 0, "it opens");
    tap_ok(tokidx_build(ds, &ti, &err) == -EBADMSG && strstr(err.msg, "record") &&
           strstr(err.msg, "zstd") && ti.start == NULL, "a zstd record is refused: %s", err.msg);
    dataset_close(ds);

    tap_ok(write_pack("f32", (const uint32_t[]){6}, 1, DATASET_CODEC_NONE, "x ragged dtype=f32 max=2048") == 0,
           "a float ragged pack written");
    snprintf(path, sizeof(path), "%s/f32", tmp);
    tap_ok(dataset_open(path, &ds, &err) == 0 && tokidx_build(ds, &ti, &err) == -EINVAL &&
           strstr(err.msg, "field x") && strstr(err.msg, "f32"), "float tokens refused: %s",
           err.msg);
    dataset_close(ds);
    {
        char cmd[300];

        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
        if (system(cmd) != 0)
            return 1;
    }
    return tap_done();
}
