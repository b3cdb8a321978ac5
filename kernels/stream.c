/*
 * stream.c - the public calls on streams and events: argument checks and
 * dispatch to the backend (CUDA streams and events, or the CPU's inline
 * placeholders and clock readings).  A stream or event belongs to the
 * context it was made from; mixing contexts is refused.  The context's own
 * stream (NULL in the calls) is made by kn_open and never destroyed here.
 */
#include <errno.h>
#include <stdlib.h>

#include "backend.h"

static int kn_stream_new(struct kn_ctx *ctx, void *external,
                         struct kn_stream **out)
{
    struct kn_stream *s;
    int rc;

    if (!ctx || !out)
        return -EINVAL;
    *out = NULL;
    s = calloc(1, sizeof *s);
    if (!s)
        return kn_set_err(ctx, -ENOMEM, "kn_stream: out of memory");
    s->ctx = ctx;
    rc = ctx->ops->stream_init(ctx, s, external);
    if (rc < 0) {
        free(s);
        return rc;
    }
    *out = s;
    return 0;
}

int kn_stream_create(struct kn_ctx *ctx, struct kn_stream **out)
{
    return kn_stream_new(ctx, NULL, out);
}

int kn_stream_wrap(struct kn_ctx *ctx, void *cuda_stream,
                   struct kn_stream **out)
{
    if (ctx && !cuda_stream)
        return kn_set_err(ctx, -EINVAL, "kn_stream_wrap: NULL stream");
    return kn_stream_new(ctx, cuda_stream, out);
}

void kn_stream_destroy(struct kn_stream *s)
{
    if (!s || s == s->ctx->stream)
        return;
    s->ctx->ops->stream_fini(s);
    free(s);
}

void *kn_stream_native(struct kn_ctx *ctx, struct kn_stream *s)
{
    if (!ctx)
        return NULL;
    s = kn_stream_of(ctx, s);
    return s ? s->handle : NULL;
}

int kn_stream_sync(struct kn_stream *s)
{
    if (!s)
        return -EINVAL;
    return s->ctx->ops->stream_sync(s);
}

int kn_stream_wait_event(struct kn_stream *s, struct kn_event *ev)
{
    if (!s || !ev)
        return -EINVAL;
    if (ev->ctx != s->ctx)
        return kn_set_err(s->ctx, -EINVAL,
                          "kn_stream_wait_event: event of another context");
    if (!ev->recorded)
        return 0;               /* as CUDA: waiting on nothing is done */
    return s->ctx->ops->stream_wait(s, ev);
}

int kn_event_create(struct kn_ctx *ctx, struct kn_event **out)
{
    struct kn_event *ev;
    int rc;

    if (!ctx || !out)
        return -EINVAL;
    *out = NULL;
    ev = calloc(1, sizeof *ev);
    if (!ev)
        return kn_set_err(ctx, -ENOMEM, "kn_event_create: out of memory");
    ev->ctx = ctx;
    rc = ctx->ops->event_init(ctx, ev);
    if (rc < 0) {
        free(ev);
        return rc;
    }
    *out = ev;
    return 0;
}

void kn_event_destroy(struct kn_event *ev)
{
    if (!ev)
        return;
    ev->ctx->ops->event_fini(ev);
    free(ev);
}

int kn_event_record(struct kn_event *ev, struct kn_stream *s)
{
    int rc;

    if (!ev)
        return -EINVAL;
    s = kn_stream_of(ev->ctx, s);
    if (!s)
        return kn_set_err(ev->ctx, -EINVAL,
                          "kn_event_record: stream of another context");
    rc = ev->ctx->ops->event_record(ev, s);
    if (rc == 0)
        ev->recorded = 1;
    return rc;
}

int kn_event_sync(struct kn_event *ev)
{
    if (!ev)
        return -EINVAL;
    if (!ev->recorded)
        return 0;
    return ev->ctx->ops->event_sync(ev);
}

int kn_event_query(struct kn_event *ev)
{
    if (!ev)
        return -EINVAL;
    if (!ev->recorded)
        return 1;
    return ev->ctx->ops->event_query(ev);
}

int kn_event_elapsed_ms(struct kn_event *start, struct kn_event *end,
                        float *ms)
{
    if (!start || !end || !ms || start->ctx != end->ctx)
        return -EINVAL;
    if (!start->recorded || !end->recorded)
        return kn_set_err(start->ctx, -EINVAL,
                          "kn_event_elapsed_ms: event never recorded");
    return start->ctx->ops->event_elapsed(start, end, ms);
}

