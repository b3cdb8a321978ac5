/*
 * strnum.c - strict, locale-free number parsing and formatting.
 *
 * The syntax is checked here, byte by byte, before strtoull/strtod see the
 * text, so their locale-dependent leniencies (leading blanks, signs on
 * unsigned numbers, hex, inf/nan, a comma decimal point) never apply; their
 * end pointer and errno are still checked in full.  strtod runs under the
 * "C" locale through strtod_l; formatting switches the calling thread to it
 * with uselocale for the duration of one snprintf.  On glibc the "C" locale
 * object is static, so newlocale/freelocale here allocate nothing.
 */
#include "strnum.h"

#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Copies the span into tmp (NUL-terminated); -EINVAL if empty or too long. */
static int copy_span(const char *s, size_t len, char tmp[STRNUM_LEN_MAX + 1])
{
    if (len == 0 || len > STRNUM_LEN_MAX)
        return -EINVAL;
    memcpy(tmp, s, len);
    tmp[len] = '\0';
    return 0;
}

int strnum_u64(const char *s, size_t len, uint64_t *out)
{
    char tmp[STRNUM_LEN_MAX + 1], *end;
    unsigned long long v;

    if (copy_span(s, len, tmp) < 0)
        return -EINVAL;
    for (size_t i = 0; i < len; i++)
        if (!is_digit(tmp[i]))
            return -EINVAL;
    errno = 0;
    v = strtoull(tmp, &end, 10);
    if (end != tmp + len)
        return -EINVAL;
    if (errno == ERANGE)
        return -ERANGE;
    *out = (uint64_t)v;
    return 0;
}

/* Checks the decimal floating-point syntax in the file-top comment. */
static int float_syntax_ok(const char *s, size_t len)
{
    size_t i = 0, digits = 0;

    if (i < len && (s[i] == '+' || s[i] == '-'))
        i++;
    while (i < len && is_digit(s[i]))
        i++, digits++;
    if (i < len && s[i] == '.') {
        i++;
        while (i < len && is_digit(s[i]))
            i++, digits++;
    }
    if (digits == 0)
        return 0;
    if (i < len && (s[i] == 'e' || s[i] == 'E')) {
        size_t exp_digits = 0;

        i++;
        if (i < len && (s[i] == '+' || s[i] == '-'))
            i++;
        while (i < len && is_digit(s[i]))
            i++, exp_digits++;
        if (exp_digits == 0)
            return 0;
    }
    return i == len;
}

int strnum_double(const char *s, size_t len, double *out)
{
    char tmp[STRNUM_LEN_MAX + 1], *end;
    locale_t c_loc;
    double v;
    int saved;

    if (copy_span(s, len, tmp) < 0 || !float_syntax_ok(tmp, len))
        return -EINVAL;
    c_loc = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    if (c_loc == (locale_t)0)
        return -ENOMEM;
    errno = 0;
    v = strtod_l(tmp, &end, c_loc);
    saved = errno;
    freelocale(c_loc);
    if (end != tmp + len)
        return -EINVAL;
    /* ERANGE covers overflow to HUGE_VAL and underflow; isnormal rejects
     * the denormals glibc returns without ERANGE in some cases */
    if (saved == ERANGE || !isfinite(v) || (v != 0.0 && !isnormal(v)))
        return -ERANGE;
    *out = v == 0.0 ? 0.0 : v; /* -0 reads as 0 */
    return 0;
}

/*
 * Writes v into tmp with the fewest significant digits that read back
 * exactly: the shortest "%.*e" that round-trips gives the digits and the
 * decimal exponent X; numbers with -4 <= X < 17 are then written in fixed
 * notation with just those digits (100, 0.08, not 1e+02, 8e-02), the rest
 * stay in exponent form (1e-300).  Runs under the C locale.
 */
static int format_shortest(double v, char *tmp, size_t cap, locale_t c_loc)
{
    int n = -1, prec, x;
    char *end;

    for (prec = 0; prec <= 16; prec++) {
        n = snprintf(tmp, cap, "%.*e", prec, v);
        if (n < 0 || (size_t)n >= cap)
            return -1;
        if (strtod_l(tmp, &end, c_loc) == v)
            break;
    }
    if (prec > 16)
        return n; /* 17 significant digits always read back */
    end = strchr(tmp, 'e');
    if (!end)
        return -1;
    x = atoi(end + 1);
    if (x >= -4 && x < 17) {
        char fixed[48];
        int decimals = prec - x > 0 ? prec - x : 0, m;

        m = snprintf(fixed, sizeof(fixed), "%.*f", decimals, v);
        if (m > 0 && (size_t)m < cap && strtod_l(fixed, &end, c_loc) == v) {
            memcpy(tmp, fixed, (size_t)m + 1);
            return m;
        }
    }
    return n;
}

int strnum_format_double(double v, char *buf, size_t cap)
{
    char tmp[48];
    locale_t c_loc, old;
    int n;

    if (!isfinite(v))
        return -EINVAL;
    if (v != 0.0 && !isnormal(v))
        return -ERANGE; /* strnum_double would not read it back */
    if (v == 0.0)
        v = 0.0; /* -0 is written as 0 */
    c_loc = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    if (c_loc == (locale_t)0)
        return -ENOMEM;
    old = uselocale(c_loc);
    n = format_shortest(v, tmp, sizeof(tmp), c_loc);
    uselocale(old);
    freelocale(c_loc);
    if (n < 0)
        return -EINVAL;
    if ((size_t)n >= cap)
        return -ENOSPC;
    memcpy(buf, tmp, (size_t)n + 1);
    return n;
}
