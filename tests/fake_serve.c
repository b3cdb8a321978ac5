/*
 * fake_serve.c - the in-process fake daemon (fake_daemon.c) as a program,
 * so Python tests can attach to it without a real daemon:
 *
 *     fake_serve SOCKET fields|legacy|v2
 *
 * listens at SOCKET and gives every ATTACH a ring (depth 4, batches of 6,
 * 5 per epoch) published by fake_publish: "fields" a version-3 ring of
 * seven fields (image u8 3x4x4 CHW, boxes ragged f32 x 4 of image, caption
 * bytes, emb f16 x 2, mask u16 1x4x4 of image, bf bf16 x 2, label i64),
 * "legacy" a version-3 ring of an older dataset (image u8 x 48, label
 * i64), "v2" a version-2 ring (48 bytes a sample).  Prints "ready" once
 * listening; serves until its standard input closes.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fake_daemon.h"

static struct ring_field g_fields[7];
static struct fake_fleet g_fleet = {
    .depth = 4, .batch = 6, .sample = 48, .bpe = 5,
    .seals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL, .per_ring = 1000000,
};

static void field(struct ring_field *f, const char *name, uint32_t kind, uint32_t dtype,
                  uint32_t layout, uint32_t ndim, uint32_t s0, uint32_t s1, uint32_t s2,
                  uint64_t item, uint64_t cap)
{
    memset(f, 0, sizeof(*f));
    snprintf(f->name, sizeof(f->name), "%s", name);
    f->kind = kind;
    f->dtype = dtype;
    f->layout = layout;
    f->ndim = ndim;
    f->shape[0] = s0;
    f->shape[1] = s1;
    f->shape[2] = s2;
    f->item_bytes = item;
    f->capacity = cap;
}

static int handler(struct fake *f, int conn, const char *line)
{
    (void)f;
    return fake_fleet_attach(&g_fleet, conn, line);
}

int main(int argc, char **argv)
{
    struct fake f;
    char buf[64];

    if (argc != 3) {
        fprintf(stderr, "usage: fake_serve SOCKET fields|legacy|v2\n");
        return 2;
    }
    if (strcmp(argv[2], "fields") == 0) {
        field(&g_fields[0], "image", RING_FIELD_FIXED, RING_U8, RING_CHW, 3, 3, 4, 4, 48, 0);
        field(&g_fields[1], "boxes", RING_FIELD_RAGGED, RING_F32, RING_FLAT, 1, 4, 0, 0, 16, 12);
        g_fields[1].role = RING_ROLE_BOXES;
        field(&g_fields[2], "caption", RING_FIELD_RAGGED, RING_U8, RING_FLAT, 0, 0, 0, 0, 1, 12);
        field(&g_fields[3], "emb", RING_FIELD_FIXED, RING_F16, RING_FLAT, 1, 2, 0, 0, 4, 0);
        field(&g_fields[4], "mask", RING_FIELD_FIXED, RING_U16, RING_CHW, 3, 1, 4, 4, 32, 0);
        g_fields[4].role = RING_ROLE_MASK;
        field(&g_fields[5], "bf", RING_FIELD_FIXED, RING_BF16, RING_FLAT, 1, 2, 0, 0, 4, 0);
        field(&g_fields[6], "label", RING_FIELD_FIXED, RING_I64, RING_FLAT, 0, 0, 0, 0, 8, 0);
        g_fleet.nfields = 7;
    } else if (strcmp(argv[2], "legacy") == 0) {
        field(&g_fields[0], "image", RING_FIELD_FIXED, RING_U8, RING_FLAT, 1, 48, 0, 0, 48, 0);
        field(&g_fields[1], "label", RING_FIELD_FIXED, RING_I64, RING_FLAT, 0, 0, 0, 0, 8, 0);
        g_fleet.nfields = 2;
    } else if (strcmp(argv[2], "v2") != 0) {
        fprintf(stderr, "fake_serve: mode %s: use fields, legacy or v2\n", argv[2]);
        return 2;
    }
    g_fleet.fields = g_fields;
    if (fake_start(&f, argv[1], handler, NULL) < 0) {
        perror("fake_serve: listening");
        return 1;
    }
    printf("ready\n");
    fflush(stdout);
    while (read(0, buf, sizeof(buf)) > 0)
        ;
    fake_fleet_stop(&g_fleet, &f);
    return 0;
}
