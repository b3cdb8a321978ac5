/*
 * mix.c - mix.h: the mixture's text and its blended index, in integers.
 */
#include "mix.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '.' || c == '_' || c == '-';
}

int mix_parse(const char *text, size_t len, struct mix *m, struct rf_err *err)
{
    size_t i = 0;
    double sum = 0;
    uint64_t given = 0;
    uint32_t big = 0;

    memset(m, 0, sizeof(*m));
    for (;;) {
        size_t start, nlen;
        char num[40], *end;
        double w;

        while (i < len && (text[i] == ' ' || text[i] == '\t' || text[i] == ','))
            i++;
        if (i == len)
            break;
        if (m->n == MIX_SOURCES_MAX)
            return rf_err_set(err, -EINVAL, "mixture: more than %d sources at byte %zu",
                              MIX_SOURCES_MAX, i);
        start = i;
        while (i < len && name_char(text[i]))
            i++;
        nlen = i - start;
        if (nlen == 0 || nlen > MIX_NAME_MAX || i == len || text[i] != ':')
            return rf_err_set(err, -EINVAL, "mixture: entry %u at byte %zu: expected NAME:WEIGHT "
                              "(a dataset's name of 1..%d of [A-Za-z0-9._-], a colon, a "
                              "positive weight)", m->n + 1, start, MIX_NAME_MAX);
        for (uint32_t k = 0; k < m->n; k++)
            if (strlen(m->s[k].name) == nlen && memcmp(m->s[k].name, text + start, nlen) == 0)
                return rf_err_set(err, -EINVAL, "mixture: %.*s is named twice (byte %zu)",
                                  (int)nlen, text + start, start);
        memcpy(m->s[m->n].name, text + start, nlen);
        start = ++i;
        while (i < len && text[i] != ' ' && text[i] != '\t' && text[i] != ',')
            i++;
        if (i - start == 0 || i - start >= sizeof(num))
            return rf_err_set(err, -EINVAL, "mixture: %s: no weight at byte %zu",
                              m->s[m->n].name, start);
        memcpy(num, text + start, i - start);
        num[i - start] = '\0';
        w = strtod(num, &end);
        if (*end || !(w > 0) || !isfinite(w) || strpbrk(num, "xXnN"))
            return rf_err_set(err, -EINVAL, "mixture: %s: weight '%s' at byte %zu is not a "
                              "positive decimal number", m->s[m->n].name, num, start);
        m->s[m->n++].weight = w;
        sum += w;
    }
    if (m->n < 2)
        return rf_err_set(err, -EINVAL, "mixture: %u source%s: a mixture needs 2 to %d",
                          m->n, m->n == 1 ? "" : "s", MIX_SOURCES_MAX);
    if (!isfinite(sum))
        return rf_err_set(err, -EINVAL, "mixture: the weights' sum overflows");
    for (uint32_t k = 0; k < m->n; k++) {
        double sh = floor(m->s[k].weight / sum * (double)MIX_ONE);

        m->s[k].share = sh < 1 ? 1 : (uint64_t)sh;
        given += m->s[k].share;
        if (m->s[k].share > m->s[big].share)
            big = k;
    }
    if (given > MIX_ONE)   /* shares of 1 lifted from 0: taken from the largest */
        m->s[big].share -= given - MIX_ONE;
    else
        m->s[big].share += MIX_ONE - given;
    return 0;
}

void mix_start(const struct mix *m, struct mix_state *st)
{
    (void)m;
    memset(st, 0, sizeof(*st));
}

uint32_t mix_next(const struct mix *m, struct mix_state *st, uint64_t *k)
{
    uint32_t best = 0;
    __int128 best_gap = 0;

    for (uint32_t s = 0; s < m->n; s++) {
        __int128 gap = (__int128)m->s[s].share * (st->p + 1) - (__int128)st->c[s] * MIX_ONE;

        if (s == 0 || gap > best_gap) {
            best = s;
            best_gap = gap;
        }
    }
    if (k)
        *k = st->c[best];
    st->c[best]++;
    st->p++;
    return best;
}

void mix_seek(const struct mix *m, struct mix_state *st, uint64_t p)
{
    mix_start(m, st);
    while (st->p < p)
        mix_next(m, st, NULL);
}

/* ---- a mixture stream's plan (mix.h, MIXTURE STREAM) */

/* Source s's sampler seed: the stream's, stirred with s (SplitMix64's
 * finaliser), so sources of one size are not shuffled alike. */
static uint64_t source_seed(uint64_t seed, uint32_t s)
{
    uint64_t z = seed + 0x9e3779b97f4a7c15ull * (s + 1);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void source_params(const struct mix_plan *pl, uint32_t s, uint32_t epoch,
                          struct sampler_params *sp)
{
    *sp = (struct sampler_params){
        .n = pl->p.n[s], .seed = pl->seed[s], .epoch = epoch, .rank = pl->p.rank,
        .world = pl->p.world, .batch = 1, .shuffle = pl->p.shuffle,
        .drop_last = pl->p.drop_last,
    };
}

static int keep(struct mix_plan *pl, const struct mix_state *st, uint64_t *cap)
{
    uint64_t row = st->p / MIX_STEP, n = pl->m.n;

    if ((row + 1) * n > *cap) {
        uint64_t want = *cap ? *cap * 2 : 64 * n;
        uint64_t *cp = realloc(pl->cp, want * sizeof(*cp));

        if (!cp)
            return -ENOMEM;
        pl->cp = cp;
        *cap = want;
    }
    memcpy(pl->cp + row * n, st->c, n * sizeof(*st->c));
    return 0;
}

int mix_plan_init(struct mix_plan *pl, const struct mix_plan_params *p, struct rf_err *err)
{
    uint32_t of = p->epoch_of < 0 ? 0 : (uint32_t)p->epoch_of;

    memset(pl, 0, sizeof(*pl));
    pl->m = *p->m;
    pl->p = *p;
    pl->p.m = &pl->m;
    if (p->batch == 0 || p->world == 0 || p->rank >= p->world || p->shuffle > 1 ||
        of >= pl->m.n || pl->m.n < 2 || pl->m.n > MIX_SOURCES_MAX)
        return rf_err_set(err, -EINVAL, "mixture: bad parameters (batch %u, rank %u of %u, "
                          "shuffle %u, epoch_of %d)", p->batch, p->rank, p->world, p->shuffle,
                          p->epoch_of);
    if (p->no_repeat && p->epoch_of >= 0)
        return rf_err_set(err, -EINVAL, "mixture: epoch_of=%s needs repeat: without it the "
                          "epoch ends where the first source runs out",
                          pl->m.s[p->epoch_of].name);
    pl->unit = p->per_stream ? p->batch : 1;
    for (uint32_t s = 0; s < pl->m.n; s++) {
        struct sampler_params sp;
        struct sampler smp;
        struct rf_err e;

        pl->seed[s] = source_seed(p->seed, s);
        pl->base[s + 1] = pl->base[s] + p->n[s];
        source_params(pl, s, 0, &sp);
        if (p->n[s] == 0 || sampler_init(&smp, &sp, &e) < 0)
            return rf_err_set(err, -EINVAL, "mixture: source %s: %llu samples cannot be split "
                              "over %u ranks%s", pl->m.s[s].name, (unsigned long long)p->n[s],
                              p->world, p->drop_last ? " with drop_last" : "");
        pl->per_rank[s] = sampler_samples_per_rank(&smp);
        if (pl->per_rank[s] / pl->unit == 0)
            return rf_err_set(err, -EINVAL, "mixture: source %s has %llu samples a rank, fewer "
                              "than a batch of %u (per_stream)", pl->m.s[s].name,
                              (unsigned long long)pl->per_rank[s], p->batch);
        if (pl->base[s + 1] < pl->base[s])
            return rf_err_set(err, -EINVAL, "mixture: the sources' sizes overflow");
    }
    return 0;
}

/* What an epoch of units positions with counts c[] at its end makes. */
static int epoch_figures(struct mix_plan *pl, uint64_t units, const uint64_t *c,
                         struct rf_err *err)
{
    pl->units = units;
    for (uint32_t s = 0; s < pl->m.n; s++) {
        pl->per_epoch[s] = c[s] * pl->unit;
        pl->advance[s] = pl->p.no_repeat ? pl->per_rank[s] : pl->per_epoch[s];
    }
    pl->samples = pl->units * pl->unit;
    pl->batches = pl->p.per_stream ? pl->units
                  : pl->p.drop_last_batch ? pl->samples / pl->p.batch
                  : (pl->samples + pl->p.batch - 1) / pl->p.batch;
    if (pl->batches == 0)
        return rf_err_set(err, -EINVAL, "mixture: an epoch of %llu samples holds no whole "
                          "batch of %u (drop_last_batch)", (unsigned long long)pl->samples,
                          pl->p.batch);
    return 0;
}

int mix_plan_walk(struct mix_plan *pl, struct rf_err *err)
{
    struct mix_state st;
    uint64_t cap = 0, target, most = MIX_WALK_MAX / pl->m.n;
    uint32_t of = pl->p.epoch_of < 0 ? 0 : (uint32_t)pl->p.epoch_of;

    /* repeat: the epoch_of source's epoch, in whole units (its last unit
     * may reach into its next epoch: per_stream's batches are whole) */
    target = (pl->per_rank[of] + pl->unit - 1) / pl->unit;
    mix_start(&pl->m, &st);
    for (;;) {
        if (st.p % MIX_STEP == 0 && keep(pl, &st, &cap) < 0) {
            mix_plan_free(pl);
            return rf_err_set(err, -ENOMEM, "mixture: out of memory for its plan");
        }
        if (pl->p.no_repeat) {
            struct mix_state peek = st;
            uint32_t s = mix_next(&pl->m, &peek, NULL);

            if (st.c[s] + 1 > pl->per_rank[s] / pl->unit)
                break;
        } else if (st.c[of] >= target) {
            break;
        }
        if (st.p >= most) {
            mix_plan_free(pl);
            return rf_err_set(err, -EINVAL, "mixture: an epoch of over %llu positions (%u "
                              "sources): more than ringfeed walks at attach; give %s a larger "
                              "weight, or name a smaller source in epoch_of=",
                              (unsigned long long)most, pl->m.n,
                              pl->p.no_repeat ? "the first source to run out" : pl->m.s[of].name);
        }
        mix_next(&pl->m, &st, NULL);
    }
    pl->ncp = st.p / MIX_STEP + 1;
    pl->cp_cap = cap;
    if (epoch_figures(pl, st.p, st.c, err) < 0) {
        mix_plan_free(pl);
        return -EINVAL;
    }
    return 0;
}

int mix_plan_adopt(struct mix_plan *pl, uint64_t units, const uint64_t *c, struct rf_err *err)
{
    struct mix_state st;
    uint64_t cap = 0;

    if (units == 0 || units > MIX_WALK_MAX / pl->m.n)
        return rf_err_set(err, -EINVAL, "mixture: an epoch of %llu positions",
                          (unsigned long long)units);
    mix_start(&pl->m, &st);
    if (keep(pl, &st, &cap) < 0)
        return rf_err_set(err, -ENOMEM, "mixture: out of memory for its plan");
    pl->cp_cap = cap;
    pl->ncp = 1;
    return epoch_figures(pl, units, c, err);
}

int mix_plan_reach(struct mix_plan *pl, uint64_t q)
{
    uint64_t row = (q < pl->units ? q : pl->units) / MIX_STEP, cap = pl->cp_cap;
    struct mix_state st;

    if (row < pl->ncp)
        return 0;
    mix_start(&pl->m, &st);
    st.p = (pl->ncp - 1) * MIX_STEP;
    memcpy(st.c, pl->cp + (pl->ncp - 1) * pl->m.n, pl->m.n * sizeof(*st.c));
    while (pl->ncp <= row) {
        while (st.p < pl->ncp * MIX_STEP)
            mix_next(&pl->m, &st, NULL);
        if (keep(pl, &st, &cap) < 0)
            return -ENOMEM;
        pl->cp_cap = cap;
        pl->ncp++;
    }
    return 0;
}

void mix_plan_free(struct mix_plan *pl)
{
    free(pl->cp);
    pl->cp = NULL;
}

uint32_t mix_plan_batch_count(const struct mix_plan *pl, uint64_t seq)
{
    uint64_t left;

    if (seq >= pl->batches)
        return 0;
    if (pl->p.per_stream)
        return pl->p.batch;
    left = pl->samples - seq * pl->p.batch;
    return left < pl->p.batch ? (uint32_t)left : pl->p.batch;
}

/* The blend's state at position q of an epoch (q <= units). */
static void state_at(const struct mix_plan *pl, uint64_t q, struct mix_state *st)
{
    uint64_t row = q / MIX_STEP;

    if (row >= pl->ncp) /* past the checkpoints kept (mix_plan_reach): from the last */
        row = pl->ncp - 1;

    mix_start(&pl->m, st);
    memcpy(st->c, pl->cp + row * pl->m.n, pl->m.n * sizeof(*st->c));
    st->p = row * MIX_STEP;
    while (st->p < q)
        mix_next(&pl->m, st, NULL);
}

uint32_t mix_plan_range(const struct mix_plan *pl, uint64_t epoch, uint64_t seq, uint32_t first,
                        uint32_t count, uint64_t *out, uint8_t *src, bool *pad,
                        struct mix_cursor *cur)
{
    uint32_t have = mix_plan_batch_count(pl, seq), s = 0;
    struct mix_cursor local;
    uint64_t kb = 0, q;
    struct mix_state *st;

    if (first >= have)
        return 0;
    if (count > have - first)
        count = have - first;
    if (!cur) {
        cur = &local;
        cur->valid = cur->ready = false;
    }
    if (!cur->ready) {
        for (uint32_t k = 0; k < MIX_SOURCES_MAX; k++)
            cur->smp_epoch[k] = UINT64_MAX;
        cur->ready = true;
    }
    /* the blend's state at the first position: from the cursor when it is
     * at or before it in this epoch and no further than a checkpoint */
    q = pl->p.per_stream ? seq : seq * pl->p.batch + first;
    st = &cur->st;
    if (!cur->valid || cur->epoch != epoch || st->p > q || q - st->p >= MIX_STEP)
        state_at(pl, q, st);
    while (st->p < q)
        mix_next(&pl->m, st, NULL);
    cur->valid = true;
    cur->epoch = epoch;
    if (pl->p.per_stream)
        s = mix_next(&pl->m, st, &kb);
    for (uint32_t j = 0; j < count; j++) {
        uint64_t k, kt, se, w, idx;

        if (pl->p.per_stream)
            k = kb * pl->unit + first + j;
        else
            s = mix_next(&pl->m, st, &k);
        kt = epoch * pl->advance[s] + k;
        se = kt / pl->per_rank[s];
        w = kt % pl->per_rank[s];
        if (cur->smp_epoch[s] != se) {
            struct sampler_params sp;

            source_params(pl, s, (uint32_t)se, &sp);
            sampler_init(&cur->smp[s], &sp, NULL); /* checked at mix_plan_init */
            cur->smp_epoch[s] = se;
        }
        idx = sampler_sample(&cur->smp[s], w, 0);
        out[j] = pl->base[s] + idx;
        if (src)
            src[j] = (uint8_t)s;
        if (pad)
            pad[j] = sampler_is_padding(&cur->smp[s], w, 0);
    }
    if (pl->p.per_stream) /* the next range may be this batch's next slice */
        cur->valid = false;
    return count;
}

void mix_plan_counts(const struct mix_plan *pl, uint64_t epoch, uint64_t q, uint64_t *out)
{
    struct mix_state st;

    state_at(pl, q < pl->units ? q : pl->units, &st);
    for (uint32_t s = 0; s < pl->m.n; s++)
        out[s] = epoch * pl->per_epoch[s] + st.c[s] * pl->unit;
}

uint32_t mix_plan_source(const struct mix_plan *pl, uint64_t i)
{
    uint32_t s = 0;

    while (s + 1 < pl->m.n && i >= pl->base[s + 1])
        s++;
    return s;
}
