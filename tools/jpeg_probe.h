/*
 * jpeg_probe.h - is a buffer a JPEG whose header parses?  The packer's and
 * the verifier's test for "this is an image the daemon can decode", short of
 * decoding it: the SOI marker, then libjpeg reads every marker up to the
 * first scan (frame size, components, tables).  When the bytes are another
 * image format, the reason names it ("PNG data, not JPEG").
 */
#ifndef RINGFEED_TOOLS_JPEG_PROBE_H
#define RINGFEED_TOOLS_JPEG_PROBE_H

#include <stddef.h>
#include <stdint.h>

/*
 * Returns 0 with the image's size in *width and *height, or -1 with a short
 * reason (a static or why-buffer string) in *why.  why_buf (why_cap bytes)
 * holds libjpeg's own message when there is one.  Thread-safe.
 */
int jpeg_probe(const uint8_t *buf, size_t len, unsigned *width,
               unsigned *height, char *why_buf, size_t why_cap,
               const char **why);

#endif
