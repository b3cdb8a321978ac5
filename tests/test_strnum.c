/*
 * test_strnum.c - strict number parsing: whole-span, no junk, no overflow,
 * no sign on unsigned, decimal floats only, shortest round-trip formatting,
 * and the same text whatever LC_NUMERIC says (checked under a comma locale
 * when one can be had: installed, or compiled here with localedef).
 */
#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "strnum.h"
#include "tap.h"

static int u64(const char *s, uint64_t *v)
{
    return strnum_u64(s, strlen(s), v);
}

static int dbl(const char *s, double *v)
{
    return strnum_double(s, strlen(s), v);
}

static void test_u64(void)
{
    static const char *const bad[] = {"", "-1", "+1", " 1", "1 ", "0x10", "1e3", "12a", "١",
                                      "1_000", "1,000"};
    uint64_t v = 7;

    TAP_IS_INT(u64("0", &v), 0, "u64 0");
    TAP_IS_INT(v, 0, "u64 0 value");
    TAP_IS_INT(u64("00042", &v), 0, "u64 leading zeros");
    TAP_IS_INT(v, 42, "u64 leading zeros value");
    TAP_OK(u64("18446744073709551615", &v) == 0 && v == UINT64_MAX, "u64 max");
    TAP_IS_INT(u64("18446744073709551616", &v), -ERANGE, "u64 max + 1 is ERANGE");
    TAP_IS_INT(u64("99999999999999999999999", &v), -ERANGE, "u64 far over is ERANGE");
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        v = 7;
        TAP_IS_INT(u64(bad[i], &v), -EINVAL, "u64 rejects a malformed number");
        TAP_IS_INT(v, 7, "u64 leaves *out alone on error");
    }
    /* the span, not the string: "12" out of "123" */
    TAP_OK(strnum_u64("123", 2, &v) == 0 && v == 12, "u64 reads only its span");
    {
        char longnum[STRNUM_LEN_MAX + 2];

        memset(longnum, '0', sizeof(longnum) - 1);
        longnum[sizeof(longnum) - 1] = '\0';
        TAP_IS_INT(u64(longnum, &v), -EINVAL, "u64 rejects a span over STRNUM_LEN_MAX");
        longnum[STRNUM_LEN_MAX] = '\0';
        TAP_IS_INT(u64(longnum, &v), 0, "u64 takes STRNUM_LEN_MAX digits");
    }
}

static void test_double(void)
{
    static const char *const bad[] = {"", ".", "-", "+", "e5", "1e", "1e+", "1.2.3", "0x1p3",
                                      "inf", "nan", "INF", " 1", "1 ", "1,5", "1f", "--1",
                                      "1e5e5"};
    double v = 7;

    TAP_OK(dbl("0.5", &v) == 0 && v == 0.5, "double 0.5");
    TAP_OK(dbl(".5", &v) == 0 && v == 0.5, "double .5");
    TAP_OK(dbl("5.", &v) == 0 && v == 5.0, "double 5.");
    TAP_OK(dbl("+1.25e2", &v) == 0 && v == 125.0, "double +1.25e2");
    TAP_OK(dbl("-2E-1", &v) == 0 && v == -0.2, "double -2E-1");
    TAP_OK(dbl("-0", &v) == 0 && v == 0.0 && !signbit(v), "double -0 reads as +0");
    TAP_OK(dbl("0.1", &v) == 0 && v == 0.1, "double 0.1 correctly rounded");
    TAP_IS_INT(dbl("1e400", &v), -ERANGE, "double overflow is ERANGE");
    TAP_IS_INT(dbl("1e-400", &v), -ERANGE, "double underflow is ERANGE");
    TAP_IS_INT(dbl("1e-310", &v), -ERANGE, "double denormal is ERANGE");
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        v = 7;
        TAP_IS_INT(dbl(bad[i], &v), -EINVAL, "double rejects a malformed number");
        TAP_OK(v == 7, "double leaves *out alone on error");
    }
}

static void test_format(void)
{
    static const double vals[] = {0.08, 1, 0.75, 1.3333333, 0.5, 0.875, 1e-300, 123456789.125,
                                  0.1 + 0.2, 1.0 / 3.0, 100, 1e20, 1e-5, 1e-4,
                                  12345678901234567.0, 123456789012345678.0};
    static const char *const want[] = {"0.08", "1", "0.75", "1.3333333", "0.5", "0.875",
                                       "1e-300", "123456789.125", "0.30000000000000004",
                                       "0.3333333333333333", "100", "1e+20", "1e-05", "0.0001",
                                       "12345678901234568", "1.2345678901234568e+17"};
    char buf[64];
    double back;
    uint64_t x = 0x243f6a8885a308d3ull;

    for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
        int n = strnum_format_double(vals[i], buf, sizeof(buf));

        TAP_IS_STR(n > 0 ? buf : "(error)", want[i], "shortest text of a double");
    }
    TAP_IS_INT(strnum_format_double(-0.0, buf, sizeof(buf)), 1, "-0 formats as one byte");
    TAP_IS_STR(buf, "0", "-0 formats as 0");
    TAP_IS_INT(strnum_format_double(NAN, buf, sizeof(buf)), -EINVAL, "NaN is refused");
    TAP_IS_INT(strnum_format_double(INFINITY, buf, sizeof(buf)), -EINVAL, "inf is refused");
    TAP_IS_INT(strnum_format_double(1e-310, buf, sizeof(buf)), -ERANGE, "denormal is refused");
    TAP_IS_INT(strnum_format_double(0.125, buf, 5), -ENOSPC, "cap too small");
    TAP_IS_INT(strnum_format_double(0.125, buf, 6), 5, "cap exactly enough");

    /* random bit patterns: every finite normal double reads back exactly */
    {
        int fails = 0, tried = 0;

        for (int i = 0; i < 20000; i++) {
            double d;
            int n;

            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            memcpy(&d, &x, sizeof(d));
            if (!isnormal(d))
                continue;
            tried++;
            n = strnum_format_double(d, buf, sizeof(buf));
            if (n < 0 || strnum_double(buf, (size_t)n, &back) < 0 || back != d)
                fails++;
        }
        TAP_OK(tried > 10000 && fails == 0, "20000 random doubles round-trip exactly");
    }
}

/* Sets LC_NUMERIC to a locale whose decimal point is a comma; false if none. */
static int comma_locale(char *dir, size_t cap)
{
    static const char *const names[] = {"de_DE.UTF-8", "fr_FR.UTF-8", "ru_RU.UTF-8",
                                        "de_DE.utf8"};
    char cmd[512];

    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (setlocale(LC_NUMERIC, names[i]))
            return 1;
    /* compile one into a temporary LOCPATH (glibc's localedef) */
    snprintf(dir, cap, "/tmp/rf-strnum-XXXXXX");
    if (!mkdtemp(dir))
        return 0;
    snprintf(cmd, sizeof(cmd),
             "localedef -i de_DE -f UTF-8 %s/de_DE.UTF-8 >/dev/null 2>&1", dir);
    if (system(cmd) != 0)
        return 0;
    setenv("LOCPATH", dir, 1);
    return setlocale(LC_NUMERIC, "de_DE.UTF-8") != NULL;
}

static void test_locale(void)
{
    char dir[64] = "", buf[64], probe[16], cmd[128];
    double v = 0;

    if (!comma_locale(dir, sizeof(dir))) {
        tap_diag("no comma-decimal locale available; the locale checks are not run");
    } else {
        snprintf(probe, sizeof(probe), "%.1f", 0.5);
        TAP_IS_STR(probe, "0,5", "the locale in force writes a comma (the check bites)");
        TAP_OK(dbl("0.5", &v) == 0 && v == 0.5, "0.5 reads as 0.5 under a comma locale");
        TAP_IS_INT(dbl("0,5", &v), -EINVAL, "0,5 is refused under a comma locale");
        TAP_OK(strnum_format_double(0.08, buf, sizeof(buf)) > 0 && strcmp(buf, "0.08") == 0,
               "0.08 is written with a point under a comma locale");
        setlocale(LC_NUMERIC, "C");
    }
    if (dir[0]) {
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        if (system(cmd) != 0)
            tap_diag("could not remove %s", dir);
    }
}

int main(void)
{
    test_u64();
    test_double();
    test_format();
    test_locale();
    return tap_done();
}
