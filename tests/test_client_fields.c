/*
 * test_client_fields.c - libringfeed 0.5's fields against the in-process
 * fake daemon: a version-3 ring's field table (rf_field_count, _info,
 * _find), each batch's columns (rf_batch_column: FIXED and RAGGED, empty
 * samples, the primary field as rf_batch.data wherever it lies), the
 * dropped boxes, a RAGGED column's garbled offsets refused with -EBADMSG
 * naming the field (and nothing read out of bounds), a version-2 ring's
 * -ENOTSUP, the fallback to version 2 when the daemon refuses version 3,
 * and the names and sizes of dtypes 7..10.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_daemon.h"
#include "ringfeed.h"
#include "tap.h"

#define SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)
#define DEPTH 4
#define BATCH 6
#define BPE 5

/* image (u8 3x4x4, CHW), label (i64), boxes (f32 x 4, of image), caption
 * (bytes), in the schema's order; the image is the primary */
static struct ring_field g_fields[4];
static struct fake_fleet g_fleet = {
    .depth = DEPTH, .batch = BATCH, .sample = 48, .bpe = BPE, .seals = SEALS,
};

static void field(struct ring_field *f, const char *name, uint32_t kind, uint32_t dtype,
                  uint32_t layout, uint32_t ndim, const uint32_t *shape, uint64_t item,
                  uint64_t cap)
{
    memset(f, 0, sizeof(*f));
    snprintf(f->name, sizeof(f->name), "%s", name);
    f->kind = kind;
    f->dtype = dtype;
    f->layout = layout;
    f->ndim = ndim;
    for (uint32_t i = 0; i < ndim; i++)
        f->shape[i] = shape[i];
    f->item_bytes = item;
    f->capacity = cap;
}

static void make_fields(void)
{
    static const uint32_t chw[] = {3, 4, 4}, four[] = {4};

    field(&g_fields[0], "image", RING_FIELD_FIXED, RING_U8, RING_CHW, 3, chw, 48, 0);
    field(&g_fields[1], "label", RING_FIELD_FIXED, RING_I64, RING_FLAT, 0, NULL, 8, 0);
    field(&g_fields[2], "boxes", RING_FIELD_RAGGED, RING_F32, RING_FLAT, 1, four, 16,
          2 * BATCH);
    g_fields[2].role = RING_ROLE_BOXES;
    g_fields[2].of = 0;
    field(&g_fields[3], "caption", RING_FIELD_RAGGED, RING_U8, RING_FLAT, 0, NULL, 1,
          2 * BATCH);
}

static int handler(struct fake *f, int conn, const char *line)
{
    (void)f;
    return fake_fleet_attach(&g_fleet, conn, line);
}

static struct rf_client *open_client_r(struct fake *f, int reconnect_ms)
{
    struct rf_options o;
    struct rf_client *c = NULL;
    int rc;

    rf_options_init(&o);
    o.socket = f->path;
    o.dataset = "coco";
    o.batch = BATCH;
    o.reconnect_ms = reconnect_ms;
    rc = rf_open(&o, &c);
    if (!tap_ok(rc == 0, "rf_open attaches"))
        tap_diag("  %d: %s", rc, rf_last_error(c));
    return c;
}

static struct rf_client *open_client(struct fake *f)
{
    return open_client_r(f, 0);
}

/* The fake's ring of the fleet's first attach. */
static struct ring_hdr *ring0(void)
{
    return g_fleet.rings[0].hdr;
}

/* Checks every column of batch b against what fake_publish wrote. */
static int columns_ok(struct rf_client *c, const struct rf_batch *b)
{
    const struct ring_hdr *h = ring0();
    struct rf_column col;

    for (uint32_t k = 0; k < 4; k++) {
        const struct ring_field *f = &g_fields[k];
        uint64_t rows = 0;
        int rc = rf_batch_column(c, b, k, &col);

        if (rc != 0) {
            tap_diag("  field %u: %d %s", k, rc, rf_last_error(c));
            return 0;
        }
        if (((uintptr_t)col.data & 4095) != 0)
            return 0;
        if (f->kind == RING_FIELD_FIXED) {
            const uint8_t *d = col.data;

            if (col.offsets || col.rows != b->count || col.bytes != b->count * f->item_bytes)
                return 0;
            if (k == 0 && col.data != b->data)
                return 0;
            for (uint32_t i = 0; i < b->count; i++)
                for (uint64_t j = 0; j < f->item_bytes; j++)
                    if (d[i * f->item_bytes + j] !=
                        fake_field_byte(h, k, b->epoch, b->seq, i, j))
                        return 0;
            continue;
        }
        if (!col.offsets || col.offsets[0] != 0)
            return 0;
        for (uint32_t i = 0; i < b->count; i++) {
            const uint8_t *d = (const uint8_t *)col.data + col.offsets[i] * f->item_bytes;

            if (col.offsets[i + 1] - col.offsets[i] != fake_rows(b->seq, i))
                return 0;
            for (uint64_t j = 0; j < fake_rows(b->seq, i) * f->item_bytes; j++)
                if (d[j] != fake_field_byte(h, k, b->epoch, b->seq, i, j))
                    return 0;
            rows += fake_rows(b->seq, i);
        }
        if (col.rows != rows || col.bytes != rows * f->item_bytes)
            return 0;
    }
    return 1;
}

static void table_and_columns(void)
{
    struct rf_field fi;
    struct rf_column col;
    struct rf_batch b, b2;
    struct rf_client *c;
    struct fake f;
    int all_ok = 1, empty_seen = 0, rc;

    make_fields();
    g_fleet.fields = g_fields;
    g_fleet.nfields = 4;
    g_fleet.primary = 0;
    g_fleet.refuse_v3 = 0;
    g_fleet.per_ring = 40;
    if (fake_start(&f, NULL, handler, NULL) < 0)
        return (void)tap_ok(0, "fake daemon starts");
    c = open_client(&f);
    if (!c || rf_ring_base(c, NULL) == NULL)
        return fake_fleet_stop(&g_fleet, &f), rf_close(c);
    TAP_OK(strstr(f.lines[0], " version=3") != NULL, "ATTACH asks for ring version 3");
    TAP_IS_INT(rf_field_count(c), 4, "rf_field_count: 4 fields");
    rc = rf_field_info(c, 2, &fi);
    TAP_OK(rc == 0 && strcmp(fi.name, "boxes") == 0 && fi.kind == RF_FIELD_RAGGED &&
               fi.dtype == RF_DTYPE_F32 && fi.ndim == 1 && fi.shape[0] == 4 &&
               fi.role == RF_ROLE_BOXES && fi.of == 0 && fi.item_bytes == 16 &&
               fi.capacity == 2 * BATCH,
           "rf_field_info: boxes is RAGGED f32 x 4, boxes of field 0, capacity 12");
    rc = rf_field_info(c, 0, &fi);
    TAP_OK(rc == 0 && strcmp(fi.name, "image") == 0 && fi.kind == RF_FIELD_FIXED &&
               fi.layout == RF_LAYOUT_CHW && fi.ndim == 3 && fi.shape[0] == 3 &&
               fi.shape[2] == 4 && fi.capacity == BATCH,
           "rf_field_info: image is FIXED u8 CHW 3x4x4");
    rc = rf_field_info(c, 1, &fi);
    TAP_OK(rc == 0 && fi.dtype == RF_DTYPE_I64 && fi.ndim == 0 && fi.item_bytes == 8,
           "rf_field_info: label is FIXED i64, one value");
    TAP_IS_INT(rf_field_info(c, 4, &fi), -ERANGE, "rf_field_info: field 4 of 4 is -ERANGE");
    TAP_OK(fi.name[0] == '\0', "rf_field_info: zeroes *f on failure");
    TAP_IS_INT(rf_field_find(c, "caption"), 3, "rf_field_find: caption is field 3");
    TAP_IS_INT(rf_field_find(c, "nope"), -ENOENT, "rf_field_find: no field nope: -ENOENT");
    TAP_OK(strstr(rf_last_error(c), "nope") != NULL, "rf_field_find: the message names it");

    for (int n = 0; n < 12; n++) {
        rc = rf_next(c, &b, 5000);
        if (rc != 0) {
            all_ok = 0;
            tap_diag("  rf_next: %d %s", rc, rf_last_error(c));
            break;
        }
        if (!columns_ok(c, &b) || rf_batch_dropped(c, &b) != fake_dropped(b.seq))
            all_ok = 0;
        empty_seen |= fake_rows(b.seq, 0) == 0;
        rf_release(c, &b);
    }
    TAP_OK(all_ok, "12 batches: every column as published, dropped as published");
    TAP_OK(empty_seen, "... including samples without rows");

    /* a held batch whose offsets this process garbles */
    rc = rf_next(c, &b, 5000);
    if (rc == 0) {
        int64_t *off;
        struct ring_slot *s = ring_slot(ring0(), b.slot);
        int64_t saved;

        off = (int64_t *)((uint8_t *)s + ring0()->fields[2].offsets_at);
        saved = off[1];
        off[1] = -1;
        TAP_IS_INT(rf_batch_column(c, &b, 2, &col), -EBADMSG,
                   "garbled offsets (negative): -EBADMSG");
        TAP_OK(strstr(rf_last_error(c), "field boxes") && col.data == NULL &&
                   col.offsets == NULL,
               "the message names the field; *col is zeroed");
        off[1] = saved;
        saved = off[b.count];
        off[b.count] = 2 * BATCH + 1;
        TAP_IS_INT(rf_batch_column(c, &b, 2, &col), -EBADMSG,
                   "garbled offsets (last past the capacity): -EBADMSG");
        off[b.count] = saved;
        off[0] = 1;
        TAP_IS_INT(rf_batch_column(c, &b, 2, &col), -EBADMSG,
                   "garbled offsets (first not 0): -EBADMSG");
        off[0] = 0;
        TAP_IS_INT(rf_batch_column(c, &b, 2, &col), 0, "restored offsets read again");
        TAP_IS_INT(rf_batch_column(c, &b, 4, &col), -ERANGE, "column 4 of 4: -ERANGE");
        b2 = b;
        b2.stream_seq += 5;
        TAP_IS_INT(rf_batch_column(c, &b2, 1, &col), -EINVAL,
                   "a batch not held: -EINVAL");
        b2 = b;
        b2.data += 4096;
        TAP_IS_INT(rf_batch_column(c, &b2, 1, &col), -EINVAL,
                   "a batch not as delivered: -EINVAL");
        TAP_IS_INT(rf_batch_dropped(c, &b2), -EINVAL, "rf_batch_dropped of it: -EINVAL");
        rf_release(c, &b);
        TAP_IS_INT(rf_batch_column(c, &b, 1, &col), -EINVAL, "a released batch: -EINVAL");
    } else {
        tap_ok(0, "rf_next for the garbling checks");
    }
    rf_close(c);
    fake_fleet_stop(&g_fleet, &f);
}

/* The primary need not be column 0: rf_batch.data is its column. */
static void primary_elsewhere(void)
{
    static const uint32_t hw[] = {4, 4};
    struct ring_field fs[2];
    struct rf_column col;
    struct rf_batch b;
    struct rf_client *c;
    struct fake f;
    int rc;

    field(&fs[0], "label", RING_FIELD_FIXED, RING_I64, RING_FLAT, 0, NULL, 8, 0);
    field(&fs[1], "pixels", RING_FIELD_FIXED, RING_U8, RING_FLAT, 2, hw, 16, 0);
    g_fleet.fields = fs;
    g_fleet.nfields = 2;
    g_fleet.primary = 1;
    g_fleet.per_ring = 4;
    if (fake_start(&f, NULL, handler, NULL) < 0)
        return (void)tap_ok(0, "fake daemon starts");
    c = open_client(&f);
    if (c && rf_next(c, &b, 5000) == 0) {
        rc = rf_batch_column(c, &b, 1, &col);
        TAP_OK(rc == 0 && col.data == b.data && b.sample_bytes == 16 &&
                   b.data[17] == fake_pixel(b.epoch, b.seq, 1, 1),
               "primary field 1: rf_batch.data is its column, its bytes");
        rc = rf_batch_column(c, &b, 0, &col);
        TAP_OK(rc == 0 && col.data != b.data && col.bytes == b.count * 8u,
               "field 0 is a column of its own");
        TAP_IS_INT(rf_release(c, &b), 0, "and the batch releases");
    } else {
        tap_ok(0, "rf_next on a ring whose primary is field 1");
    }
    rf_close(c);
    fake_fleet_stop(&g_fleet, &f);
}

/* A daemon of ring version 2: no fields; one that refuses version 3. */
static void version_two(int refuse)
{
    struct rf_field fi;
    struct rf_column col;
    struct rf_batch b;
    struct rf_client *c;
    struct fake f;
    char name[96];

    g_fleet.fields = g_fields;
    g_fleet.nfields = refuse ? 4 : 0;
    g_fleet.primary = 0;
    g_fleet.refuse_v3 = refuse;
    g_fleet.per_ring = 4;
    if (fake_start(&f, NULL, handler, NULL) < 0)
        return (void)tap_ok(0, "fake daemon starts");
    c = open_client(&f);
    if (refuse) {
        TAP_OK(f.nlines == 2 && strstr(f.lines[0], " version=3") &&
                   strstr(f.lines[1], " version=2"),
               "refused version 3: the client asks again for version 2");
    }
    snprintf(name, sizeof(name), "%s: rf_field_count is -ENOTSUP",
             refuse ? "after the fallback" : "version-2 ring");
    TAP_IS_INT(rf_field_count(c), -ENOTSUP, name);
    TAP_OK(strstr(rf_last_error(c), "version 2") != NULL,
           "the message says the ring is version 2");
    TAP_IS_INT(rf_field_info(c, 0, &fi), -ENOTSUP, "rf_field_info: -ENOTSUP");
    TAP_IS_INT(rf_field_find(c, "image"), -ENOTSUP, "rf_field_find: -ENOTSUP");
    if (c && rf_next(c, &b, 5000) == 0) {
        TAP_OK(b.sample_bytes == 48 && b.data[3] == fake_pixel(b.epoch, b.seq, 0, 3),
               "rf_next delivers the version-2 data block");
        TAP_IS_INT(rf_batch_column(c, &b, 0, &col), -ENOTSUP, "rf_batch_column: -ENOTSUP");
        TAP_IS_INT(rf_batch_dropped(c, &b), 0, "rf_batch_dropped: 0");
        rf_release(c, &b);
    } else {
        tap_ok(0, "rf_next on a version-2 ring");
    }
    rf_close(c);
    fake_fleet_stop(&g_fleet, &f);
    g_fleet.refuse_v3 = 0;
}

/* Reconnects: a daemon upgraded from version 2 to 3 under a stream goes
 * on (the client still describes no fields); one whose fields differ from
 * the first ring's fails the stream, and the held batch stays readable. */
static void reconnects(void)
{
    static const uint32_t flat[] = {48};
    struct ring_field legacy[2];
    struct rf_column col;
    struct rf_batch b, kept;
    struct rf_client *c;
    struct fake f;
    int rc;

    field(&legacy[0], "image", RING_FIELD_FIXED, RING_U8, RING_FLAT, 1, flat, 48, 0);
    field(&legacy[1], "label", RING_FIELD_FIXED, RING_I64, RING_FLAT, 0, NULL, 8, 0);
    g_fleet.nfields = 0; /* an older daemon first */
    g_fleet.per_ring = 1; /* the next batch comes only from the next ring */
    if (fake_start(&f, NULL, handler, NULL) < 0)
        return (void)tap_ok(0, "fake daemon starts");
    c = open_client_r(&f, 5000);
    if (!c || rf_next(c, &kept, 5000) != 0)
        return (void)tap_ok(0, "a batch from the version-2 ring"), rf_close(c),
               fake_fleet_stop(&g_fleet, &f);
    g_fleet.fields = legacy; /* the daemon is upgraded */
    g_fleet.nfields = 2;
    g_fleet.primary = 0;
    fake_drop(&f, 0);
    rc = rf_next(c, &b, 5000);
    TAP_IS_INT(rc, 0, "version 2, then an upgraded daemon's version 3: the stream goes on");
    TAP_OK(rc == 0 && g_fleet.rings[1].hdr && g_fleet.rings[1].hdr->version == 3 &&
               b.data[5] == fake_pixel(b.epoch, b.seq, 0, 5) &&
               kept.data[5] == fake_pixel(kept.epoch, kept.seq, 0, 5),
           "  the new batch from the version-3 ring, the held one intact");
    TAP_IS_INT(rf_field_count(c), -ENOTSUP, "  and the client still describes no fields");
    TAP_IS_INT(rf_release(c, &kept), 0, "  the held batch releases");
    if (rc == 0)
        TAP_IS_INT(rf_release(c, &b), 0, "  then the new one");
    rf_close(c);
    fake_fleet_stop(&g_fleet, &f);

    make_fields();
    g_fleet.fields = g_fields;
    g_fleet.nfields = 4;
    if (fake_start(&f, NULL, handler, NULL) < 0)
        return (void)tap_ok(0, "fake daemon starts");
    c = open_client_r(&f, 5000);
    if (!c || rf_next(c, &kept, 5000) != 0)
        return (void)tap_ok(0, "a batch from the fields ring"), rf_close(c),
               fake_fleet_stop(&g_fleet, &f);
    g_fleet.fields = legacy; /* another dataset behind the same name */
    g_fleet.nfields = 2;
    fake_drop(&f, 0);
    rc = rf_next(c, &b, 5000);
    TAP_IS_INT(rc, -EPROTO, "a reconnect to other fields fails the stream");
    TAP_OK(strstr(rf_last_error(c), "fields otherwise") != NULL, "  saying why");
    TAP_IS_INT(rf_batch_column(c, &kept, 2, &col), 0, "  the held batch's columns still read");
    TAP_IS_INT(rf_release(c, &kept), 0, "  and it releases");
    rf_close(c);
    fake_fleet_stop(&g_fleet, &f);
    g_fleet.nfields = 0;
}

static void dtypes(void)
{
    static const struct {
        uint32_t dt;
        const char *name;
        size_t size;
    } t[] = {{RF_DTYPE_I64, "i64", 8}, {RF_DTYPE_F16, "f16", 2},
             {RF_DTYPE_BF16, "bf16", 2}, {RF_DTYPE_U16, "u16", 2}};

    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
        tap_ok(rf_dtype_name(t[i].dt) && strcmp(rf_dtype_name(t[i].dt), t[i].name) == 0 &&
                   rf_dtype_size(t[i].dt) == t[i].size,
               "rf_dtype_name/size(%u): %s, %zu", t[i].dt, t[i].name, t[i].size);
    TAP_OK(rf_dtype_name(11) == NULL && rf_dtype_size(11) == 0, "dtype 11 names none");
}

int main(void)
{
    struct rf_client *c = NULL;

    TAP_IS_INT(rf_field_count(NULL), -EINVAL, "rf_field_count(NULL): -EINVAL");
    {
        struct rf_options o;

        rf_options_init(&o);
        o.socket = "/nonexistent/ringfeed.sock";
        o.dataset = "x";
        rf_open(&o, &c);
        TAP_IS_INT(rf_field_count(c), -ENOTCONN, "never attached: -ENOTCONN");
        rf_close(c);
    }
    dtypes();
    table_and_columns();
    primary_elsewhere();
    version_two(0);
    version_two(1);
    reconnects();
    return tap_done();
}
