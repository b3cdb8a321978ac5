/*
 * jpeg_pair.c - the libjpeg glue ringfeed-pack's re-encoders share (see
 * jpeg_pair.h): error and warning handlers that longjmp, the scan cap, and
 * a destination manager that grows a buffer the pair owns, so ownership of
 * the encoded bytes never passes to libjpeg.
 */
#include "jpeg_pair.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jerror.h>

#define OUT_START (256u << 10)

/* libjpeg errors that are not the image's corruption; the rest -EBADMSG */
static const struct {
    int msg_code;
    int code;
} error_codes[] = {
    {JERR_OUT_OF_MEMORY, -ENOMEM},
    {JERR_NO_BACKING_STORE, -E2BIG},   /* past max_memory_to_use */
    {JERR_IMAGE_TOO_BIG, -E2BIG},
};

static struct jpair *pair_of(j_common_ptr ci)
{
    return ((struct jpair_errmgr *)ci->err)->p;
}

static void fail_with(j_common_ptr ci, int code)
{
    struct jpair *p = pair_of(ci);
    char m[JMSG_LENGTH_MAX];

    ci->err->format_message(ci, m);
    for (size_t i = 0; i < sizeof(error_codes) / sizeof(error_codes[0]); i++)
        if (ci->err->msg_code == error_codes[i].msg_code)
            code = error_codes[i].code;
    p->code = code;
    snprintf(p->msg, sizeof(p->msg), "%s", m);
    longjmp(p->jb, 1);
}

static void on_error(j_common_ptr ci)
{
    fail_with(ci, -EBADMSG);
}

/* Level -1 is a warning (data libjpeg would paper over): a failure, as in
 * ringfeedd's decoder.  Trace messages (level >= 0) are ignored. */
static void on_message(j_common_ptr ci, int level)
{
    if (level < 0)
        fail_with(ci, -EBADMSG);
}

static void on_output(j_common_ptr ci)
{
    (void)ci;
}

/* Called while libjpeg reads scans: more than the cap is refused. */
static void on_progress(j_common_ptr ci)
{
    struct jpair *p = pair_of(ci);
    j_decompress_ptr d = (j_decompress_ptr)ci;

    if (!ci->is_decompressor || d->input_scan_number <= JPAIR_SCAN_CAP)
        return;
    p->code = -EBADMSG;
    snprintf(p->msg, sizeof(p->msg), "more than %d scans (ringfeedd refuses "
             "such files; ordinary progressive files have about 10)",
             JPAIR_SCAN_CAP);
    longjmp(p->jb, 1);
}

static void dest_init(j_compress_ptr c)
{
    struct jpair *p = ((struct jpair_dest *)c->dest)->p;

    c->dest->next_output_byte = p->out;
    c->dest->free_in_buffer = p->out_cap;
}

/* The whole buffer is full (libjpeg's contract): double it. */
static boolean dest_empty(j_compress_ptr c)
{
    struct jpair *p = ((struct jpair_dest *)c->dest)->p;
    size_t used = p->out_cap;
    uint8_t *o = realloc(p->out, 2 * p->out_cap);

    if (!o)
        ERREXIT1(c, JERR_OUT_OF_MEMORY, 99);
    p->out = o;
    p->out_cap *= 2;
    c->dest->next_output_byte = p->out + used;
    c->dest->free_in_buffer = p->out_cap - used;
    return TRUE;
}

static void dest_term(j_compress_ptr c)
{
    struct jpair *p = ((struct jpair_dest *)c->dest)->p;

    p->out_len = (size_t)(c->dest->next_output_byte - p->out);
}

/* jpeg_create_* fail only without memory, by error_exit. */
static int create(struct jpair *p)
{
    if (setjmp(p->jb))
        return -ENOMEM;
    jpeg_create_decompress(&p->d);
    jpeg_create_compress(&p->c);
    return 0;
}

int jpair_init(struct jpair *p)
{
    memset(p, 0, sizeof(*p));
    p->out = malloc(OUT_START);
    if (!p->out)
        return -ENOMEM;
    p->out_cap = OUT_START;
    p->derr.p = p->cerr.p = p->dest.p = p;
    p->d.err = jpeg_std_error(&p->derr.pub);
    p->c.err = jpeg_std_error(&p->cerr.pub);
    p->derr.pub.error_exit = p->cerr.pub.error_exit = on_error;
    p->derr.pub.emit_message = p->cerr.pub.emit_message = on_message;
    p->derr.pub.output_message = p->cerr.pub.output_message = on_output;
    if (create(p) < 0)
        return -ENOMEM;
    p->prog.progress_monitor = on_progress;
    p->d.progress = &p->prog;
    p->dest.pub.init_destination = dest_init;
    p->dest.pub.empty_output_buffer = dest_empty;
    p->dest.pub.term_destination = dest_term;
    p->c.dest = &p->dest.pub;
    p->stage = "decode";
    return 0;
}

void jpair_fini(struct jpair *p)
{
    if (!p)
        return;
    /* both accept an object whose creation failed or never ran (no pools) */
    jpeg_destroy_decompress(&p->d);
    jpeg_destroy_compress(&p->c);
    free(p->out);
    memset(p, 0, sizeof(*p));
}

void jpair_begin(struct jpair *p)
{
    p->code = 0;
    p->msg[0] = '\0';
    p->out_len = 0;
    p->stage = "decode";
}

void jpair_abort(struct jpair *p)
{
    jpeg_abort_decompress(&p->d);
    jpeg_abort_compress(&p->c);
}
