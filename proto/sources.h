/*
 * sources.h - a dataset's source list: the file each sample was packed
 * from, one line per sample in dataset order (sample i on line i), in the
 * file the MANIFEST's "sources" line names (DATASET_SOURCES_NAME,
 * "sources.txt"), with its size and CRC-32C as the dict line has them.
 *
 * A line is the path relative to the folder that was packed (for
 * `ringfeed-pack imagefolder`, "class/file.jpg": torchvision's
 * ImageFolder.samples[i][0] relative to its root), escaped so that every
 * line is UTF-8 text the control protocol can carry unchanged:
 *
 *     \\          a backslash
 *     \xHH        the byte 0xHH (two lower-case hex digits): every byte
 *                 below 0x20 (newline and TAB included), DEL, and every
 *                 byte that is not part of a well-formed UTF-8 character
 *                 (ctl.h's line rules: no C1 controls either)
 *
 * Nothing else is escaped, so a path of printable UTF-8 is its own line.
 * A file name with a newline is therefore recorded, as "\x0a", never
 * refused: indices stay aligned with ImageFolder's.  Decoding gives the
 * path's bytes back exactly (Python: os.fsdecode of them, as os.scandir
 * names files).  A line is 1..SOURCES_LINE_MAX bytes escaped, '\n' ends
 * every line, the last included; the file holds exactly `samples` lines.
 *
 * The parser is a pure function of a buffer: it checks every line and
 * gives the offsets where lines start.
 */
#ifndef RINGFEED_PROTO_SOURCES_H
#define RINGFEED_PROTO_SOURCES_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* An escaped line, without its '\n': fits a control-protocol reply line
 * (CTL_LINE_MAX, its LF included). */
#define SOURCES_LINE_MAX 4095u
/* The whole file: 64 bytes a sample for DATASET_MAX_SAMPLES would be more
 * than any reader wants in memory; 4 GiB is ImageNet-21k's list 10 times. */
#define SOURCES_FILE_MAX (4ull << 30)

/*
 * Escapes the n bytes at path into out (cap bytes), NUL-terminated.
 * Returns the escaped length (without the NUL), -EINVAL for an empty path,
 * -ENAMETOOLONG when the escaped line is over SOURCES_LINE_MAX bytes, or
 * -ENOSPC when cap is too small (SOURCES_LINE_MAX + 1 always fits).
 */
long sources_escape(const char *path, size_t n, char *out, size_t cap);

/*
 * Checks the source list buf[0..len) for `samples` samples and fills
 * off[0..samples] (the caller's array of samples + 1 entries): line i is
 * buf[off[i] .. off[i + 1] - 1), its '\n' excluded.  Returns 0, or
 * -EBADMSG with err naming the line (counting from 0, the sample's index)
 * and its byte offset: a line empty, over SOURCES_LINE_MAX, with a byte or
 * an escape this format does not allow, a last line without '\n', more or
 * fewer lines than samples.
 */
int sources_index(const char *buf, size_t len, uint64_t samples, uint64_t *off,
                  struct rf_err *err);

/*
 * Decodes the escaped line s[0..n) into out (at least n bytes; the decoded
 * path is never longer).  Returns the path's length, or -EBADMSG for a bad
 * escape.
 */
long sources_unescape(const char *s, size_t n, char *out);

#endif
