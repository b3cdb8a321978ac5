/*
 * jpeg_pair.h - what ringfeed-pack's two JPEG re-encoders share
 * (jpeg_shrink.c, --max-side; jpeg_restart.c, the lossless default): a
 * libjpeg decompressor and compressor used together, errors as strict as
 * ringfeedd's decoder, and the encoded image in a buffer the pair owns.
 *
 * Errors: both objects' error_exit, the decompressor's warnings (level -1:
 * corrupt or truncated data, which libjpeg would paper over with grey) and
 * more than JPAIR_SCAN_CAP scans save a message and a negative errno in the
 * pair and longjmp to its jb, which the re-encoder sets with setjmp around
 * one image; jpair_abort then resets both objects (libjpeg keeps their
 * pools for the next image).  Everything that lives across that setjmp is
 * in the re-encoder's heap struct, so no local needs to be volatile.
 * libjpeg's codes that are not the image's fault map to -ENOMEM (out of
 * memory) and -E2BIG (past JPAIR_MEM_MAX); every other is -EBADMSG.
 *
 * The pair lives inside its re-encoder's struct and must not move once
 * initialised (libjpeg's managers point back at it).  One pair is used by
 * one thread, for one image at a time.
 */
#ifndef RINGFEED_TOOLS_JPEG_PAIR_H
#define RINGFEED_TOOLS_JPEG_PAIR_H

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jpeglib.h>

/* As ringfeedd's JPG_SCAN_CAP (daemon/worker/jpeg.h): ordinary progressive
 * files have about 10 scans; thousands are a CPU bomb. */
#define JPAIR_SCAN_CAP 100
/* libjpeg's memory for one image: a progressive file, and any file read
 * as coefficients, keeps its whole coefficient image (3 bytes a pixel at
 * 4:2:0), so 2 GiB covers about 700 megapixels; past it the image is
 * refused (-E2BIG), not swapped. */
#define JPAIR_MEM_MAX (2048l << 20)

struct jpair;

struct jpair_errmgr {
    struct jpeg_error_mgr pub;
    struct jpair *p;
};

struct jpair_dest {
    struct jpeg_destination_mgr pub;
    struct jpair *p;
};

struct jpair {
    struct jpeg_decompress_struct d;
    struct jpeg_compress_struct c;
    struct jpair_errmgr derr, cerr;
    struct jpeg_progress_mgr prog;
    struct jpair_dest dest;        /* c's destination: out below */
    jmp_buf jb;                    /* where a failure longjmps */
    int code;                      /* negative errno of the failure */
    const char *stage;             /* "decode" or "encode", for messages */
    char msg[JMSG_LENGTH_MAX + 64];
    uint8_t *out;                  /* the encoded image, grown as needed */
    size_t out_cap, out_len;
};

/*
 * Creates both libjpeg objects in p (which need not be initialised).
 * Returns 0 or -ENOMEM; jpair_fini p whatever the result.
 */
int jpair_init(struct jpair *p);

/* Destroys both objects and frees the buffer.  Accepts a zeroed pair. */
void jpair_fini(struct jpair *p);

/* Before each image: no failure, no message, nothing encoded. */
void jpair_begin(struct jpair *p);

/* After a failure: aborts both objects, ready for the next image. */
void jpair_abort(struct jpair *p);

#endif
