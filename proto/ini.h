/*
 * ini.h - the INI text of the AWS shared files (~/.aws/credentials and
 * ~/.aws/config): a pure lookup over a buffer that answers one (section,
 * key) and checks every line on the way, keeping offsets, not pointers.
 *
 *     # a comment            ; also a comment
 *     [default]
 *     aws_access_key_id = AKIA...
 *     region=eu-west-1
 *     [profile dev]          (the config file's spelling of a profile)
 *     s3 =                   a key with an empty value, and under it
 *       addressing_style = path   indented lines: sub-keys of "s3"
 *
 * The rules: '\n' or "\r\n" line ends, the last may lack one; a line is
 * blank, a comment ('#' or ';' first after blanks), a section "[NAME]"
 * (blanks inside the brackets trimmed, NAME 1..INI_NAME_MAX printable
 * bytes, nothing after ']' but blanks), a "KEY = VALUE" line (KEY 1..
 * INI_NAME_MAX of [A-Za-z0-9_.-] first in its line; blanks around '='
 * and at the value's ends trimmed; the value may be empty), or, after a
 * key line, an indented "KEY = VALUE" that belongs to it (a sub-key; the
 * lookup never answers one).  A key line before any section, a line
 * that is none of these, a control byte other than TAB, and a key given
 * twice in one section (sections of one name count as one) are errors
 * naming the line.  A file may be at most INI_FILE_MAX bytes (the
 * caller reads it with that bound).
 */
#ifndef RINGFEED_PROTO_INI_H
#define RINGFEED_PROTO_INI_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define INI_NAME_MAX 128u
#define INI_FILE_MAX (1u << 20)

/* A value: bytes [off, off + len) of the buffer. */
struct ini_value {
    size_t off, len;
    unsigned line;     /* 1-based, for messages */
};

/*
 * Looks up key in section (both NUL-terminated, compared exactly) in
 * buf[0..len).  Returns 1 with *v set when found, 0 when not, -EBADMSG
 * with err "line N: what is wrong" when any line of the buffer is
 * malformed or the key is given twice in the section (the caller
 * prefixes the file's name).
 */
int ini_get(const char *buf, size_t len, const char *section, const char *key,
            struct ini_value *v, struct rf_err *err);

#endif
