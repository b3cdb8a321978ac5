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

        while (i < len && (text[i] == ' ' || text[i] == '\t'))
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
        while (i < len && text[i] != ' ' && text[i] != '\t')
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
