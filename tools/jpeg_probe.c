/*
 * jpeg_probe.c - JPEG header check with libjpeg (see jpeg_probe.h).
 *
 * libjpeg reports fatal errors through error_exit, which must not return:
 * ours longjmps back to jpeg_probe with libjpeg's message saved.  Warnings
 * (output_message) are dropped: they describe scan data, which a header
 * check does not read.
 */
#include "jpeg_probe.h"

#include <setjmp.h>
#include <stdio.h>
#include <string.h>

#include <jpeglib.h>

struct probe_err {
    struct jpeg_error_mgr mgr;
    jmp_buf jump;
    char msg[JMSG_LENGTH_MAX];
};

static void probe_error_exit(j_common_ptr cinfo)
{
    struct probe_err *pe = (struct probe_err *)cinfo->err;

    pe->mgr.format_message(cinfo, pe->msg);
    longjmp(pe->jump, 1);
}

static void probe_output_message(j_common_ptr cinfo)
{
    (void)cinfo;
}

/* Other formats by their magic, for a reason a person understands. */
static const struct {
    const char *magic;
    size_t len;
    const char *why;
} formats[] = {
    {"\x89PNG\r\n\x1a\n", 8, "PNG data, not JPEG"},
    {"GIF87a", 6, "GIF data, not JPEG"},
    {"GIF89a", 6, "GIF data, not JPEG"},
    {"BM", 2, "BMP data, not JPEG"},
    {"II*\0", 4, "TIFF data, not JPEG"},
    {"MM\0*", 4, "TIFF data, not JPEG"},
    {"RIFF", 4, "RIFF (WebP?) data, not JPEG"},
    {"P5", 2, "PGM data, not JPEG"},
    {"P6", 2, "PPM data, not JPEG"},
};

int jpeg_probe(const uint8_t *buf, size_t len, unsigned *width,
               unsigned *height, char *why_buf, size_t why_cap,
               const char **why)
{
    struct jpeg_decompress_struct cinfo;
    struct probe_err pe;
    int r;

    if (len < 3 || buf[0] != 0xFF || buf[1] != 0xD8 || buf[2] != 0xFF) {
        *why = len == 0 ? "empty file" : "no JPEG start-of-image marker";
        for (size_t i = 0; i < sizeof(formats) / sizeof(formats[0]); i++)
            if (len >= formats[i].len &&
                memcmp(buf, formats[i].magic, formats[i].len) == 0)
                *why = formats[i].why;
        return -1;
    }
    memset(&cinfo, 0, sizeof(cinfo));
    cinfo.err = jpeg_std_error(&pe.mgr);
    pe.mgr.error_exit = probe_error_exit;
    pe.mgr.output_message = probe_output_message;
    pe.msg[0] = '\0';
    if (setjmp(pe.jump)) {
        jpeg_destroy_decompress(&cinfo);
        snprintf(why_buf, why_cap, "JPEG header does not parse: %s", pe.msg);
        *why = why_buf;
        return -1;
    }
    jpeg_create_decompress(&cinfo);
    jpeg_mem_src(&cinfo, buf, (unsigned long)len);
    r = jpeg_read_header(&cinfo, TRUE);
    if (r != JPEG_HEADER_OK || cinfo.image_width == 0 ||
        cinfo.image_height == 0) {
        jpeg_destroy_decompress(&cinfo);
        *why = "JPEG without an image (tables only, or zero size)";
        return -1;
    }
    *width = cinfo.image_width;
    *height = cinfo.image_height;
    jpeg_destroy_decompress(&cinfo);
    return 0;
}
