/*
 * ctl_int.h - helpers shared by ctl.c (requests), ctl_attach.c (ATTACH's
 * keys) and ctl_reply.c (replies); not part of any API.
 */
#ifndef RINGFEED_PROTO_CTL_INT_H
#define RINGFEED_PROTO_CTL_INT_H

#include <stdbool.h>
#include <stddef.h>

#include "ctl.h"

/* Longest echo of a client's token inside an error message, in bytes. */
#define CTL_ECHO_MAX 40

/*
 * The length of the character at s[0..n) when it is allowed in a line
 * (UTF-8, shortest form, no surrogates, at most U+10FFFF, no C0 control but
 * TAB, no DEL, no C1 control), else 0.
 */
size_t ctl_char_len(const unsigned char *s, size_t n);

/* Case-insensitive (ASCII) equality of s[0..len) and the string word. */
bool ctl_ieq(const char *s, size_t len, const char *word);

/*
 * Writes s[0..len) in double quotes into dst (NUL-terminated), cut on a
 * character boundary after CTL_ECHO_MAX bytes with "..." appended.  s must
 * have passed ctl_text_check.  dst needs CTL_ECHO_MAX + 6 bytes.
 */
void ctl_quote(char *dst, size_t cap, const char *s, size_t len);
#define CTL_QUOTE_SIZE (CTL_ECHO_MAX + 6)

/*
 * Parses ATTACH's arguments (offsets into line) into a.  Returns 0, or
 * -EINVAL with a message naming the key and its range in msg.
 */
int ctl_attach_parse(const char *line, const struct ctl_span *args, unsigned nargs,
                     struct ctl_attach *a, char *msg, size_t cap);

/* The start-up check of the ATTACH key table. */
int ctl_attach_check_table(struct rf_err *err);

#endif
