/*
 * strnum.h - strict, locale-free number parsing and formatting for the text
 * formats in proto/ (the control protocol and the daemon's config file).
 *
 * Every parser takes a span (pointer and length, not NUL-terminated) that
 * must be the number and nothing else: no leading or trailing blanks, no
 * trailing junk, no overflow.  Unsigned integers are plain decimal digits
 * (no sign, no 0x, no grouping).  Floating-point numbers are decimal:
 *     [+-] digits [. digits] [(e|E) [+-] digits]     or  [+-] . digits [...]
 * (no hex floats, no inf, no nan) and are converted by strtod in the "C"
 * locale, so a client process that set LC_NUMERIC to a comma locale reads
 * and writes the same text as the daemon.  Results are correctly rounded.
 *
 * Return values: 0 on success, -EINVAL for text that is not a number of the
 * kind asked for (including an empty span and spans over STRNUM_LEN_MAX
 * bytes), -ERANGE for a number that does not fit (or, for a double, one that
 * overflows to infinity or underflows to zero or a denormal), -ENOMEM when
 * the C locale object cannot be had.  *out is written only on success.
 */
#ifndef RINGFEED_PROTO_STRNUM_H
#define RINGFEED_PROTO_STRNUM_H

#include <stddef.h>
#include <stdint.h>

/* Longest span accepted as a number; longer text is -EINVAL. */
#define STRNUM_LEN_MAX 63

int strnum_u64(const char *s, size_t len, uint64_t *out);
int strnum_double(const char *s, size_t len, double *out);

/*
 * Writes the decimal text with the fewest significant digits (at most 17)
 * that strnum_double() reads back as exactly v, NUL-terminated: fixed
 * notation when the decimal exponent is in -4..16 (100, 0.08, 0.0001),
 * else exponent form (1e-05, 1e+20); '.' as the decimal point; -0 written
 * as 0.  Returns the length, -EINVAL for a value
 * that is not finite, -ERANGE for a denormal (which strnum_double refuses),
 * -ENOSPC when cap is too small (cap >= 32 always fits),
 * or -ENOMEM as above.
 */
int strnum_format_double(double v, char *buf, size_t cap);

#endif
