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
#include <stdlib.h>
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

/* ---- the mixture stream's plan */

static int plan(struct mix_plan *pl, const char *text, struct mix *m, const uint64_t *n,
                uint32_t rank, uint32_t world, uint32_t batch, int32_t epoch_of, bool no_repeat,
                bool per_stream, struct rf_err *err)
{
    struct mix_plan_params p = {
        .m = m, .seed = 42, .rank = rank, .world = world, .batch = batch, .shuffle = 1,
        .epoch_of = epoch_of, .no_repeat = no_repeat, .per_stream = per_stream,
    };

    if (parse(text, m, err) < 0)
        return -1;
    for (uint32_t s = 0; s < m->n; s++)
        p.n[s] = n[s];
    if (mix_plan_init(pl, &p, err) < 0)
        return -EINVAL;
    return mix_plan_walk(pl, err);
}

/* Every sample of epoch e of a plan, in order, into out (samples of them). */
static uint64_t *epoch_of_plan(const struct mix_plan *pl, uint64_t e, uint8_t **src)
{
    uint64_t *out = calloc(pl->samples + 1, sizeof(*out));
    uint64_t at = 0;

    *src = calloc(pl->samples + 1, 1);
    for (uint64_t b = 0; b < pl->batches; b++) {
        /* in jobs of 7, as a worker's slices */
        for (uint32_t f = 0; f < mix_plan_batch_count(pl, b); f += 7)
            at += mix_plan_range(pl, e, b, f, 7, out + at, *src + at, NULL, NULL);
    }
    return out;
}

static void test_plan(void)
{
    static const uint64_t n[3] = {12000, 3000, 500};
    struct mix m;
    struct mix_plan pl, pl2;
    struct rf_err err = {{0}};
    uint64_t *o, *o2, c[3] = {0};
    uint8_t *src, *src2;
    double worst = 0;
    int bad = 0;

    /* a:0.5 b:0.3 c:0.2, one rank: the epoch is a's 12000 samples, 24000
     * positions; every prefix within one sample; a once each */
    TAP_IS_INT(plan(&pl, "a:0.5 b:0.3 c:0.2", &m, n, 0, 1, 64, -1, false, false, &err), 0,
               "a plan of three sources");
    TAP_IS_INT(pl.samples, 24000, "  its epoch: a's 12000 samples at 0.5");
    TAP_IS_INT(pl.batches, 375, "  in 375 batches of 64");
    o = epoch_of_plan(&pl, 0, &src);
    {
        uint8_t *seen = calloc(pl.base[3], 1);

        for (uint64_t q = 0; q < pl.samples; q++) {
            uint32_t s = src[q];

            if (mix_plan_source(&pl, o[q]) != s || o[q] < pl.base[s] || o[q] >= pl.base[s + 1])
                bad++;
            c[s]++;
            if (s == 0 && seen[o[q]]++)
                bad++;
            for (uint32_t i = 0; i < 3; i++) {
                double d = fabs((double)c[i] - (double)m.s[i].share / MIX_ONE * (double)(q + 1));

                if (d > worst)
                    worst = d;
            }
        }
        free(seen);
    }
    TAP_IS_INT(bad, 0, "  each index in its source's range, a's each once");
    tap_ok(worst <= 1.0, "  every prefix of 24000 within one sample of the weights (%.3f)",
           worst);
    TAP_OK(c[0] == 12000 && c[1] == 7200 && c[2] == 4800, "  a 12000, b 7200, c 4800");
    /* c (500) wraps into its next epochs: every sample of it 9 or 10 times */
    {
        uint32_t cnt[500] = {0}, lo = UINT32_MAX, hi = 0;

        for (uint64_t q = 0; q < pl.samples; q++)
            if (src[q] == 2)
                cnt[o[q] - pl.base[2]]++;
        for (int i = 0; i < 500; i++) {
            lo = cnt[i] < lo ? cnt[i] : lo;
            hi = cnt[i] > hi ? cnt[i] : hi;
        }
        tap_ok(lo == 9 && hi == 10, "  c repeats, each of its epochs whole: %u..%u times", lo,
               hi);
    }
    /* the same parameters: the same stream, whatever the job slicing */
    TAP_IS_INT(plan(&pl2, "a:0.5 b:0.3 c:0.2", &m, n, 0, 1, 64, -1, false, false, &err), 0,
               "a second plan");
    {
        uint64_t one[64];

        bad = 0;
        for (uint64_t b = 0; b < pl2.batches; b += 37) {
            uint32_t k = mix_plan_range(&pl2, 0, b, 0, 64, one, NULL, NULL, NULL);

            for (uint32_t j = 0; j < k; j++)
                bad += one[j] != o[b * 64 + j];
        }
        TAP_IS_INT(bad, 0, "  gives the same batches, read whole or in slices");
    }
    {
        /* a worker's cursor: slices in the order three workers take jobs
         * (each every third, some out of order), and a jump back */
        static struct mix_cursor cur;
        uint64_t one[64];
        uint32_t order[] = {0, 3, 6, 5, 9, 12, 2, 200, 203, 1, 374, 0};

        bad = 0;
        for (size_t t = 0; t < sizeof(order) / sizeof(order[0]); t++)
            for (uint32_t f = 0; f < 64; f += 13) {
                uint32_t k = mix_plan_range(&pl2, 0, order[t], f, 13, one, NULL, NULL, &cur);

                for (uint32_t j = 0; j < k; j++)
                    bad += one[j] != o[order[t] * 64 + f + j];
            }
        TAP_IS_INT(bad, 0, "  and the same through a cursor kept between slices");
    }
    {
        /* a worker's plan: the walk's figures adopted, checkpoints reached
         * as jobs go (a resume near the end first) */
        struct mix_plan wk;
        struct mix_plan_params pp = pl2.p;
        uint64_t ends[MIX_SOURCES_MAX], one[64];
        uint64_t kept;

        for (uint32_t k = 0; k < 3; k++)
            ends[k] = pl2.per_epoch[k];
        pp.m = &m;
        bad = mix_plan_init(&wk, &pp, &err) < 0 ||
              mix_plan_adopt(&wk, pl2.units, ends, &err) < 0 ||
              wk.batches != pl2.batches || wk.samples != pl2.samples;
        kept = wk.ncp;
        for (uint64_t b = 370; b < wk.batches; b++) {
            uint32_t k;

            mix_plan_reach(&wk, b * 64);
            k = mix_plan_range(&wk, 0, b, 0, 64, one, NULL, NULL, NULL);
            for (uint32_t j = 0; j < k; j++)
                bad += one[j] != o[b * 64 + j];
        }
        for (uint64_t b = 0; b < 5; b++) {
            uint32_t k = mix_plan_range(&wk, 1, b, 0, 64, one, NULL, NULL, NULL);
            uint64_t want[64];

            mix_plan_range(&pl2, 1, b, 0, 64, want, NULL, NULL, NULL);
            for (uint32_t j = 0; j < k; j++)
                bad += one[j] != want[j];
        }
        TAP_IS_INT(bad, 0, "  a plan adopted from the walk's figures gives the same batches");
        tap_ok(kept == 1 && wk.ncp == 374 * 64 / MIX_STEP + 1,
               "  keeping checkpoints only as far as asked (%llu, then %llu)",
               (unsigned long long)kept, (unsigned long long)wk.ncp);
        mix_plan_free(&wk);
    }
    /* the next epoch: c goes on from where it was, a starts a new order */
    o2 = epoch_of_plan(&pl2, 1, &src2);
    TAP_OK(memcmp(src, src2, pl.samples) == 0, "  epoch 1 blends the same way");
    bad = 0;
    for (uint64_t q = 0; q < pl.samples; q++)
        bad += src[q] == 0 && o[q] == o2[q];
    TAP_OK(bad < 100, "  with a's order reshuffled");
    free(o2);
    free(src2);
    mix_plan_free(&pl2);
    free(o);
    free(src);
    mix_plan_free(&pl);

    /* two ranks: a's samples over both ranks are a once; both ranks blend alike */
    {
        uint8_t *seen = calloc(12000, 1), *s0, *s1;
        uint64_t *r0, *r1;

        plan(&pl, "a:0.5 b:0.3 c:0.2", &m, n, 0, 2, 64, -1, false, false, &err);
        plan(&pl2, "a:0.5 b:0.3 c:0.2", &m, n, 1, 2, 64, -1, false, false, &err);
        r0 = epoch_of_plan(&pl, 0, &s0);
        r1 = epoch_of_plan(&pl2, 0, &s1);
        bad = pl.samples != 12000 || pl2.samples != 12000 || memcmp(s0, s1, pl.samples) != 0;
        for (uint64_t q = 0; q < pl.samples; q++) {
            if (s0[q] == 0 && seen[r0[q]]++)
                bad++;
            if (s1[q] == 0 && seen[r1[q]]++)
                bad++;
        }
        for (int i = 0; i < 12000; i++)
            bad += seen[i] != 1;
        TAP_IS_INT(bad, 0, "two ranks: the same blend, a's samples split between them, each once");
        free(seen);
        free(r0);
        free(r1);
        free(s0);
        free(s1);
        mix_plan_free(&pl);
        mix_plan_free(&pl2);
    }

    /* epoch_of=c: the epoch is c's 500 at 0.2, some 2500 samples (the
     * blend gives c its 500th a little before 2500: within one) */
    TAP_IS_INT(plan(&pl, "a:0.5 b:0.3 c:0.2", &m, n, 0, 1, 64, 2, false, false, &err), 0,
               "epoch_of c");
    tap_ok(pl.samples >= 2496 && pl.samples <= 2500 && pl.per_epoch[2] == 500,
           "  an epoch of c's 500 at 0.2: %llu samples", (unsigned long long)pl.samples);
    mix_plan_free(&pl);

    /* no repeat: until a source runs out: c (500 at 0.2) first */
    TAP_IS_INT(plan(&pl, "a:0.5 b:0.3 c:0.2", &m, n, 0, 1, 64, -1, true, false, &err), 0,
               "no repeat");
    o = epoch_of_plan(&pl, 3, &src);
    {
        uint8_t *seen = calloc(pl.base[3], 1);

        bad = 0;
        for (uint64_t q = 0; q < pl.samples; q++)
            bad += seen[o[q]]++ != 0;
        tap_ok(bad == 0 && pl.samples >= 2499 && pl.samples <= 2502 &&
               pl.per_epoch[2] == 500, "  the epoch ends as c runs out (%llu samples), no "
               "sample twice", (unsigned long long)pl.samples);
        free(seen);
    }
    free(o);
    free(src);
    mix_plan_free(&pl);
    TAP_IS_INT(plan(&pl, "a:0.5 b:0.5", &m, n, 0, 1, 64, 1, true, false, &err), -EINVAL,
               "epoch_of without repeat is refused");
    TAP_OK(strstr(err.msg, "epoch_of=b needs repeat") != NULL, "  saying why");

    /* per_stream: each batch from one source, the batches blended */
    TAP_IS_INT(plan(&pl, "a:0.5 b:0.3 c:0.2", &m, n, 0, 1, 64, -1, false, true, &err), 0,
               "per_stream");
    o = epoch_of_plan(&pl, 0, &src);
    bad = 0;
    memset(c, 0, sizeof(c));
    worst = 0;
    for (uint64_t b = 0; b < pl.batches; b++) {
        for (uint32_t j = 1; j < 64; j++)
            bad += src[b * 64 + j] != src[b * 64];
        c[src[b * 64]]++;
        for (uint32_t i = 0; i < 3; i++) {
            double d = fabs((double)c[i] - (double)m.s[i].share / MIX_ONE * (double)(b + 1));

            worst = d > worst ? d : worst;
        }
    }
    tap_ok(bad == 0 && worst <= 1.0 && pl.batches == 375,
           "  every batch from one source, batches within one of the weights (%.3f), %llu "
           "batches", worst, (unsigned long long)pl.batches);
    free(o);
    free(src);
    mix_plan_free(&pl);
    {
        static const uint64_t small[2] = {1000, 10};

        TAP_IS_INT(plan(&pl, "a:0.5 b:0.5", &m, small, 0, 1, 64, -1, false, true, &err),
                   -EINVAL, "per_stream with a source smaller than a batch is refused");
        TAP_OK(strstr(err.msg, "source b has 10 samples a rank") != NULL, "  naming it");
    }
}

int main(void)
{
    test_parse();
    test_rule();
    test_plan();
    return tap_done();
}
