/*
 * test_mix.c - proto/mix.h: mixture texts accepted and refused (each
 * refusal naming the entry); the blended index keeps every prefix within
 * one sample of the weights over 10,000 positions for many weight sets,
 * gives each source its own samples in order (0, 1, 2, ...), matches the
 * weights' counts exactly where they divide evenly, and mix_seek lands in
 * the state the step-by-step walk reaches (a resume needs nothing else).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "mix.h"
#include "tap.h"

static int parse(const char *t, struct mix *m, struct rf_err *err)
{
    return mix_parse(t, strlen(t), m, err);
}

static void test_parse(void)
{
    struct mix m;
    struct rf_err err = {{0}};
    uint64_t sum = 0;

    TAP_IS_INT(parse("a:0.7 b:0.3", &m, &err), 0, "a:0.7 b:0.3");
    TAP_IS_INT(m.n, 2, "two sources");
    TAP_IS_STR(m.s[1].name, "b", "names kept");
    for (uint32_t s = 0; s < m.n; s++)
        sum += m.s[s].share;
    TAP_IS_INT(sum, MIX_ONE, "the shares sum to MIX_ONE");
    TAP_OK(fabs((double)m.s[0].share / MIX_ONE - 0.7) < 1e-9, "a's share is 0.7");
    TAP_IS_INT(parse("  web-1:3\tbooks.v2:1  code_x:1e0 ", &m, &err), 0,
               "blanks, weights not summing to 1, an exponent");
    TAP_OK(fabs((double)m.s[0].share / MIX_ONE - 0.6) < 1e-9, "3:1:1 gives 0.6");

    TAP_IS_INT(parse("a:1", &m, &err), -EINVAL, "one source is refused");
    TAP_OK(strstr(err.msg, "needs 2") != NULL, "and says a mixture needs 2");
    TAP_IS_INT(parse("a:1 a:2", &m, &err), -EINVAL, "a name twice");
    TAP_OK(strstr(err.msg, "a is named twice") != NULL, "names the name");
    TAP_IS_INT(parse("a:1 b:0", &m, &err), -EINVAL, "a zero weight");
    TAP_OK(strstr(err.msg, "b: weight '0'") != NULL, "names the source and weight");
    TAP_IS_INT(parse("a:1 b:-1", &m, &err), -EINVAL, "a negative weight");
    TAP_IS_INT(parse("a:1 b:nan", &m, &err), -EINVAL, "nan");
    TAP_IS_INT(parse("a:1 b:inf", &m, &err), -EINVAL, "inf");
    TAP_IS_INT(parse("a:1 b:0x10", &m, &err), -EINVAL, "hex");
    TAP_IS_INT(parse("a:1 b", &m, &err), -EINVAL, "a name without a weight");
    TAP_OK(strstr(err.msg, "entry 2 at byte 4") != NULL, "names the entry and byte");
    TAP_IS_INT(parse("a:1 b/c:1", &m, &err), -EINVAL, "a name with '/'");
    TAP_IS_INT(parse("a:1 b:", &m, &err), -EINVAL, "an empty weight");
    TAP_IS_INT(parse("a:1 b:1 c:1 d:1 e:1 f:1 g:1 h:1 i:1 j:1 k:1 l:1 m:1 n:1 o:1 p:1 q:1",
                     &m, &err), -EINVAL, "17 sources");
}

/* Walks 10,000 positions; 1 when every prefix is within one sample of the
 * weights and each source's places come 0, 1, 2, ... */
static int within_one(const char *text)
{
    struct mix m;
    struct mix_state st;
    uint64_t want[MIX_SOURCES_MAX] = {0};
    double worst = 0;

    if (parse(text, &m, NULL) < 0)
        return 0;
    mix_start(&m, &st);
    for (uint64_t p = 0; p < 10000; p++) {
        uint64_t k;
        uint32_t s = mix_next(&m, &st, &k);

        if (k != want[s]++)
            return 0;
        for (uint32_t i = 0; i < m.n; i++) {
            double d = fabs((double)st.c[i] - (double)m.s[i].share / MIX_ONE * (double)st.p);

            if (d > worst)
                worst = d;
        }
    }
    if (worst > 1.0)
        fprintf(stderr, "# %s: off by %.3f samples\n", text, worst);
    return worst <= 1.0;
}

static void test_rule(void)
{
    static const char *const sets[] = {
        "a:0.7 b:0.3", "a:1 b:1 c:1", "a:0.5 b:0.3 c:0.2", "a:0.999 b:0.001",
        "a:1 b:2 c:3 d:4 e:5 f:6 g:7 h:8", "a:0.3333 b:0.3333 c:0.3334",
        "a:13 b:7 c:101 d:1", "a:1 b:1 c:1 d:1 e:1 f:1 g:1 h:1 i:1 j:1 k:1 l:1 m:1 n:1 o:1 p:1",
    };
    struct mix m;
    struct mix_state st, st2;
    uint64_t c[2] = {0};

    for (size_t i = 0; i < sizeof(sets) / sizeof(sets[0]); i++) {
        char name[160];

        snprintf(name, sizeof(name), "%s: every prefix of 10000 within one sample, each "
                 "source in its own order", sets[i]);
        TAP_OK(within_one(sets[i]), name);
    }
    parse("a:0.75 b:0.25", &m, NULL);
    mix_start(&m, &st);
    for (int p = 0; p < 8; p++)
        c[mix_next(&m, &st, NULL)]++;
    TAP_OK(c[0] == 6 && c[1] == 2, "0.75/0.25 over 8: exactly 6 and 2");
    parse("a:0.5 b:0.3 c:0.2", &m, NULL);
    mix_start(&m, &st);
    for (int p = 0; p < 12345; p++)
        mix_next(&m, &st, NULL);
    mix_seek(&m, &st2, 12345);
    TAP_OK(memcmp(&st, &st2, sizeof(st)) == 0, "seek lands where the walk does");
    TAP_IS_INT(mix_next(&m, &st, NULL), mix_next(&m, &st2, NULL), "and goes on alike");
}

int main(void)
{
    test_parse();
    test_rule();
    return tap_done();
}
