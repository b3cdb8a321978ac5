/*
 * fields.c - a sample's fields and their columns in a batch (ringfeed.h,
 * "Fields"): rf_field_count, rf_field_info, rf_field_find, rf_batch_column
 * and rf_batch_dropped.
 *
 * Everything here reads the field table the client copied from the ring's
 * header before checking it (client.h: rf_client.fields), never the
 * mapping's own header, which this process can write: the column offsets
 * and sizes were recomputed by ring_check, so a column always lies inside
 * its slot.  What does come from the slot (a RAGGED column's offsets, the
 * dropped count) is checked before it is handed out; it is only wrong if
 * this process wrote there.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "client.h"

_Static_assert(RF_FIELD_FIXED == RING_FIELD_FIXED && RF_FIELD_RAGGED == RING_FIELD_RAGGED,
               "field kinds");
_Static_assert(RF_ROLE_NONE == RING_ROLE_NONE && RF_ROLE_BOXES == RING_ROLE_BOXES &&
               RF_ROLE_MASK == RING_ROLE_MASK, "field roles");
_Static_assert(RF_FIELD_NAME_MAX + 1 == RING_FIELD_NAME, "field names");

/* 0 when c has a field table; else the errno, its message in c->err. */
static int have_fields(struct rf_client *c, const char *what)
{
    if (!c->attached_once)
        return rf_err_set(&c->err, -ENOTCONN, "%s: the client never attached", what);
    if (!c->nfields)
        return rf_err_set(&c->err, -ENOTSUP,
                          "%s: the daemon sent a ring of layout version %u, which has no "
                          "field table (a daemon older than fields): rf_batch.data is the "
                          "one field; upgrade ringfeedd for the others",
                          what, c->version);
    return 0;
}

int rf_field_count(struct rf_client *c)
{
    int rc;

    if (!c)
        return -EINVAL;
    rc = have_fields(c, "rf_field_count");
    return rc < 0 ? rc : (int)c->nfields;
}

int rf_field_info(struct rf_client *c, uint32_t i, struct rf_field *f)
{
    const struct ring_field *r;
    int rc;

    if (f)
        memset(f, 0, sizeof(*f));
    if (!c || !f)
        return -EINVAL;
    rc = have_fields(c, "rf_field_info");
    if (rc < 0)
        return rc;
    if (i >= c->nfields)
        return rf_err_set(&c->err, -ERANGE, "rf_field_info: field %u, the sample has %u",
                          i, c->nfields);
    r = &c->fields[i];
    memcpy(f->name, r->name, sizeof(f->name)); /* terminated: ring_check */
    f->kind = r->kind;
    f->dtype = r->dtype;
    f->layout = r->layout;
    f->ndim = r->ndim;
    memcpy(f->shape, r->shape, sizeof(f->shape));
    f->role = r->role;
    f->of = r->of;
    f->item_bytes = r->item_bytes;
    f->capacity = r->capacity;
    return 0;
}

int rf_field_find(struct rf_client *c, const char *name)
{
    int rc;

    if (!c || !name)
        return -EINVAL;
    rc = have_fields(c, "rf_field_find");
    if (rc < 0)
        return rc;
    for (uint32_t i = 0; i < c->nfields; i++)
        if (strncmp(c->fields[i].name, name, RING_FIELD_NAME) == 0 &&
            strlen(name) < RING_FIELD_NAME)
            return (int)i;
    return rf_err_set(&c->err, -ENOENT, "rf_field_find: no field \"%.40s\"", name);
}

int rf_batch_column(struct rf_client *c, const struct rf_batch *b, uint32_t i,
                    struct rf_column *col)
{
    const struct ring_field *f;
    struct ring_slot *s;
    const int64_t *off;
    int rc;

    if (col)
        memset(col, 0, sizeof(*col));
    if (!c || !b || !col)
        return -EINVAL;
    rc = have_fields(c, "rf_batch_column");
    if (rc < 0)
        return rc;
    if (i >= c->nfields)
        return rf_err_set(&c->err, -ERANGE, "rf_batch_column: field %u, the sample has %u",
                          i, c->nfields);
    s = client_batch_slot(c, b, "rf_batch_column");
    if (!s)
        return -EINVAL;
    f = &c->fields[i];
    col->data = (const char *)s + f->offset;
    if (f->kind == RING_FIELD_FIXED) {
        col->rows = b->count;
        col->bytes = (size_t)(b->count * f->item_bytes);
        return 0;
    }
    /* count <= batch (deliver checked it), and the column has batch + 1 */
    off = (const int64_t *)((const char *)s + f->offsets_at);
    rc = client_check_offsets(f, off, b->count, b->stream_seq, &c->err);
    if (rc < 0) {
        memset(col, 0, sizeof(*col));
        return rc;
    }
    col->offsets = off;
    col->rows = (uint64_t)off[b->count];
    col->bytes = (size_t)(col->rows * f->item_bytes);
    return 0;
}

int64_t rf_batch_dropped(struct rf_client *c, const struct rf_batch *b)
{
    struct ring_slot *s;

    if (!c || !b)
        return -EINVAL;
    s = client_batch_slot(c, b, "rf_batch_dropped");
    if (!s)
        return -EINVAL;
    return c->version >= RING_VERSION_FIELDS ? (int64_t)s->dropped : 0;
}
