/*
 * tap.h - the Test Anything Protocol for ringfeed's unit tests.
 *
 * Each test program is its own process.  It prints one "ok N - name" or
 * "not ok N - name" line per check, then the plan "1..N" at exit via
 * tap_done(), whose return is the exit status; meson reads that status
 * (protocol 'exitcode': meson 1.0's TAP reader would turn exit 77 into an
 * error).  A program that cannot run for want of a device (no GPU) calls
 * tap_skip_all(), which exits 77; one set up wrong calls tap_bail(), a
 * failure.
 *
 * Checks never abort: a failing check prints what it expected and what it
 * got, and the program goes on so one run shows every failure.
 */
#ifndef RINGFEED_TESTS_TAP_H
#define RINGFEED_TESTS_TAP_H

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tap_count;
static int tap_failed;

__attribute__((format(printf, 2, 3), unused))
static int tap_ok(int cond, const char *fmt, ...)
{
    va_list ap;

    tap_count++;
    if (!cond)
        tap_failed++;
    printf("%sok %d - ", cond ? "" : "not ", tap_count);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    return cond;
}

__attribute__((format(printf, 1, 2), unused))
static void tap_diag(const char *fmt, ...)
{
    va_list ap;

    printf("# ");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
}

__attribute__((noreturn, format(printf, 1, 2), unused))
static void tap_skip_all(const char *fmt, ...)
{
    va_list ap;

    printf("1..0 # SKIP ");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    exit(77);
}

/* The test cannot run because it was set up wrong (arguments, a temporary
 * folder, a socket it must be able to make): that is a failure, never a
 * skip.  Prints "Bail out!" and the reason, exits 1. */
__attribute__((noreturn, format(printf, 1, 2), unused))
static void tap_bail(const char *fmt, ...)
{
    va_list ap;

    printf("Bail out! ");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    exit(1);
}

/* Prints the plan; returns the process exit status. */
__attribute__((unused))
static int tap_done(void)
{
    printf("1..%d\n", tap_count);
    if (tap_failed)
        printf("# %d of %d checks failed\n", tap_failed, tap_count);
    fflush(stdout);
    return tap_failed ? 1 : 0;
}

#define TAP_IS_INT(got, want, name)                                         \
    do {                                                                    \
        long long g_ = (long long)(got), w_ = (long long)(want);            \
        if (!tap_ok(g_ == w_, "%s", name))                                  \
            tap_diag("  %s:%d: got %lld, want %lld (%s)", __FILE__,         \
                     __LINE__, g_, w_, #got);                               \
    } while (0)

#define TAP_IS_STR(got, want, name)                                         \
    do {                                                                    \
        const char *g_ = (got), *w_ = (want);                               \
        int same_ = g_ && w_ && strcmp(g_, w_) == 0;                        \
        if (!tap_ok(same_, "%s", name))                                     \
            tap_diag("  %s:%d: got \"%s\", want \"%s\"", __FILE__,          \
                     __LINE__, g_ ? g_ : "(null)", w_ ? w_ : "(null)");     \
    } while (0)

#define TAP_OK(cond, name)                                                  \
    do {                                                                    \
        if (!tap_ok(!!(cond), "%s", name))                                  \
            tap_diag("  %s:%d: %s is false", __FILE__, __LINE__, #cond);    \
    } while (0)

#endif
