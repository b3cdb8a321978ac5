/*
 * test_sampler.c - the epoch permutation is a bijection keyed by (seed,
 * epoch) with a cheap cycle walk; the rank split and the batch cut match a
 * straightforward reference (DistributedSampler's padded list, strided per
 * rank, cut into batches) for many (n, world, batch, flags); every index is
 * delivered exactly once plus exactly the documented padding; lookups stay
 * O(1) in memory and consistent at 100M samples.  Timing is printed as a
 * diagnostic, never asserted.
 */
#include <errno.h>
#include <stdint.h>

#include "rng.h"
#include "sampler.h"
#include "tap.h"

/* Checks the permutation of [0, n) for (seed, epoch) is a bijection and that
 * the cycle walk costs what sampler.c promises; returns 1 when both hold. */
static int check_perm(uint64_t n, uint64_t seed, uint32_t epoch)
{
    struct sampler_perm pm;
    uint8_t *seen = calloc(n, 1);
    uint64_t domain, evals = 0;
    int ok = 1;

    if (!seen)
        return 0;
    sampler_perm_init(&pm, n, seed, epoch, true);
    domain = sampler_perm_domain(&pm);
    for (uint64_t i = 0; i < n && ok; i++) {
        uint64_t y = sampler_perm_at(&pm, i);

        if (y >= n || seen[y]) {
            tap_diag("  n %llu: perm(%llu) = %llu repeats or is out of range",
                     (unsigned long long)n, (unsigned long long)i,
                     (unsigned long long)y);
            ok = 0;
            break;
        }
        seen[y] = 1;
        if (domain) {
            /* Walk by hand through the exposed Feistel network. */
            uint64_t z = i;

            do {
                z = sampler_perm_feistel(&pm, z);
                evals++;
            } while (z >= n);
            if (z != y) {
                tap_diag("  n %llu: walk from %llu ends at %llu, perm says %llu",
                         (unsigned long long)n, (unsigned long long)i,
                         (unsigned long long)z, (unsigned long long)y);
                ok = 0;
            }
        }
    }
    if (ok && n >= 2) {
        /* Total walk cost is at most the domain, and the domain < 4n. */
        if (domain > 4 * n || domain < n || evals > domain ||
            (double)evals / n >= 4.0) {
            tap_diag("  n %llu: domain %llu, %llu evaluations (%.3f per sample)",
                     (unsigned long long)n, (unsigned long long)domain,
                     (unsigned long long)evals, (double)evals / n);
            ok = 0;
        }
    }
    free(seen);
    return ok;
}

static void test_perm_bijection(void)
{
    static const uint64_t sizes[] = {
        1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 1000, 1024, 1025, 60000, 65536,
        65537, 262145,
    };
    struct rng_stream st;

    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
        tap_ok(check_perm(sizes[i], 1234, 0),
               "permutation of %llu is a bijection, walk cost < 4 per sample",
               (unsigned long long)sizes[i]);

    rng_stream_init(&st, 42, 0, 0);
    for (int k = 0; k < 6; k++) {
        uint64_t n = 2 + rng_below(&st, 300000);
        uint64_t seed = rng_u64(&st);
        uint32_t epoch = rng_u32(&st);

        tap_ok(check_perm(n, seed, epoch),
               "permutation of random n = %llu (seed %016llx, epoch %u) "
               "is a bijection", (unsigned long long)n,
               (unsigned long long)seed, epoch);
    }

    /* The Feistel network itself is a bijection of its whole domain. */
    {
        struct sampler_perm pm;
        uint64_t domain;
        uint8_t *seen;
        int ok = 1;

        sampler_perm_init(&pm, 50000, 9, 9, true);
        domain = sampler_perm_domain(&pm);
        seen = calloc(domain, 1);
        ok = seen && domain == 65536;
        for (uint64_t x = 0; ok && x < domain; x++) {
            uint64_t y = sampler_perm_feistel(&pm, x);

            ok = y < domain && !seen[y];
            if (ok)
                seen[y] = 1;
        }
        TAP_OK(ok, "the Feistel network permutes its domain 4^8 for n = 50000");
        free(seen);
    }

    TAP_IS_INT(sampler_perm_at(&(struct sampler_perm){ .n = 5 }, 5),
               (long long)SAMPLER_NONE, "perm_at past n is SAMPLER_NONE");
}

/* How many of the first n positions two permutations agree on. */
static uint64_t agreements(uint64_t n, uint64_t seed_a, uint32_t epoch_a,
                           uint64_t seed_b, uint32_t epoch_b)
{
    struct sampler_perm a, b;
    uint64_t same = 0;

    sampler_perm_init(&a, n, seed_a, epoch_a, true);
    sampler_perm_init(&b, n, seed_b, epoch_b, true);
    for (uint64_t i = 0; i < n; i++)
        same += sampler_perm_at(&a, i) == sampler_perm_at(&b, i);
    return same;
}

static void test_perm_keying(void)
{
    struct sampler_perm pm;
    uint64_t fixed = 0, runs = 0;
    int identity = 1;

    /* Two independent random permutations agree in about 1 place. */
    TAP_IS_INT(agreements(1000, 5, 3, 5, 3), 1000,
               "same (seed, epoch) gives the same permutation");
    TAP_OK(agreements(1000, 5, 3, 5, 4) < 20, "another epoch reorders");
    TAP_OK(agreements(1000, 5, 3, 6, 3) < 20, "another seed reorders");
    TAP_OK(agreements(60000, 5, 0, 5, 1) < 20, "epochs differ at n = 60000");
    TAP_OK(agreements(60000, 5, 0, UINT64_C(5) | UINT64_C(1) << 63, 0) < 20,
           "the seed's high bits matter");

    /* It shuffles: few fixed points, few runs of consecutive indices. */
    sampler_perm_init(&pm, 100000, 1, 0, true);
    for (uint64_t i = 0; i + 1 < 100000; i++) {
        fixed += sampler_perm_at(&pm, i) == i;
        runs += sampler_perm_at(&pm, i + 1) == sampler_perm_at(&pm, i) + 1;
    }
    if (!tap_ok(fixed < 20 && runs < 20, "the order looks shuffled"))
        tap_diag("  %llu fixed points, %llu consecutive pairs of 100000",
                 (unsigned long long)fixed, (unsigned long long)runs);

    sampler_perm_init(&pm, 1000, 1, 0, false);
    for (uint64_t i = 0; i < 1000; i++)
        identity &= sampler_perm_at(&pm, i) == i;
    TAP_OK(identity, "shuffle off gives the identity");
}

/* Over many epochs every permutation of 3 elements, and every position of
 * an element among 8, turns up about equally often. */
static void test_perm_uniformity(void)
{
    const int epochs = 6000;
    int perm3[6] = { 0 }, pos8[8] = { 0 }, ok3 = 1, ok8 = 1;

    for (int e = 0; e < epochs; e++) {
        struct sampler_perm pm;
        uint64_t a, b;

        sampler_perm_init(&pm, 3, 77, (uint32_t)e, true);
        a = sampler_perm_at(&pm, 0);
        b = sampler_perm_at(&pm, 1);
        perm3[a * 2 + (b > a ? b - 1 : b)]++;

        sampler_perm_init(&pm, 8, 77, (uint32_t)e, true);
        for (uint64_t i = 0; i < 8; i++)
            if (sampler_perm_at(&pm, i) == 0)
                pos8[i]++;
    }
    /* Expected 1000 (sd 29) and 750 (sd 26): 300 is 10+ sd. */
    for (int i = 0; i < 6; i++)
        ok3 &= abs(perm3[i] - epochs / 6) < 300;
    for (int i = 0; i < 8; i++)
        ok8 &= abs(pos8[i] - epochs / 8) < 300;
    if (!tap_ok(ok3, "all 6 orders of 3 elements about equally likely"))
        tap_diag("  counts %d %d %d %d %d %d", perm3[0], perm3[1], perm3[2],
                 perm3[3], perm3[4], perm3[5]);
    if (!tap_ok(ok8, "an element of 8 lands at every position about equally"))
        tap_diag("  counts %d %d %d %d %d %d %d %d", pos8[0], pos8[1], pos8[2],
                 pos8[3], pos8[4], pos8[5], pos8[6], pos8[7]);
}

static void test_params(void)
{
    struct sampler_params good = {
        .n = 100, .seed = 1, .epoch = 0, .rank = 0, .world = 4, .batch = 8,
        .shuffle = true,
    };
    struct sampler s, before;
    struct sampler_params p;
    struct rf_err err;

    TAP_IS_INT(sampler_init(&s, &good, &err), 0, "good parameters accepted");

#define BAD(desc, stmt)                                                      \
    do {                                                                    \
        p = good;                                                           \
        stmt;                                                               \
        memset(&s, 0xa5, sizeof(s));                                        \
        before = s;                                                         \
        err.msg[0] = '\0';                                                  \
        TAP_IS_INT(sampler_init(&s, &p, &err), -EINVAL, desc " rejected");  \
        if (!tap_ok(err.msg[0] != '\0' && memcmp(&s, &before, sizeof(s)) == 0, \
                    desc ": message given, sampler untouched"))             \
            tap_diag("  message \"%s\"", err.msg);                          \
        else                                                                \
            tap_diag("  %s", err.msg);                                      \
    } while (0)

    BAD("n = 0", p.n = 0);
    BAD("n above SAMPLER_MAX_N", p.n = SAMPLER_MAX_N + 1);
    BAD("world = 0", (p.world = 0, p.rank = 0));
    BAD("rank = world", p.rank = 4);
    BAD("batch = 0", p.batch = 0);
    BAD("drop_last with n < world", (p.n = 3, p.drop_last = true));
#undef BAD

    p = good;
    p.n = 3;
    TAP_IS_INT(sampler_init(&s, &p, NULL), 0,
               "n < world without drop_last is fine (padding); NULL err ok");
    p.n = SAMPLER_MAX_N;
    TAP_IS_INT(sampler_init(&s, &p, NULL), 0, "n = SAMPLER_MAX_N accepted");
}

/*
 * The reference: DistributedSampler's list built in full (perm, padded by
 * wrapping, or truncated), rank r's slice indices[r : total : w], cut into
 * batches.  Compares every batch of every rank against it and counts what
 * the ranks deliver together.  Returns 1 when everything matches.
 */
static int check_split(uint64_t n, uint32_t world, uint32_t batch,
                       bool drop_last, bool drop_last_batch, bool shuffle,
                       uint32_t epoch)
{
    struct sampler_perm pm;
    uint64_t total, per_rank, nbatches = 0, *list, *out;
    uint32_t *real, *pad;
    int ok = 1;

#define FAIL(...) do { tap_diag(__VA_ARGS__); ok = 0; goto done; } while (0)

    total = drop_last ? n / world * world : (n + world - 1) / world * world;
    per_rank = total / world;
    list = malloc(total * sizeof(*list));
    out = malloc(batch * sizeof(*out));
    real = calloc(n, sizeof(*real));
    pad = calloc(n, sizeof(*pad));
    if (!list || !out || !real || !pad)
        FAIL("  out of memory");

    sampler_perm_init(&pm, n, 314, epoch, shuffle);
    for (uint64_t p = 0; p < total; p++)
        list[p] = sampler_perm_at(&pm, p % n);

    for (uint32_t r = 0; r < world; r++) {
        struct sampler_params prm = {
            .n = n, .seed = 314, .epoch = epoch, .rank = r, .world = world,
            .batch = batch, .shuffle = shuffle, .drop_last = drop_last,
            .drop_last_batch = drop_last_batch,
        };
        struct sampler s;
        uint64_t k = 0, want_batches;

        if (sampler_init(&s, &prm, NULL) != 0)
            FAIL("  rank %u: init failed", r);
        if (sampler_samples_per_rank(&s) != per_rank)
            FAIL("  rank %u: %llu samples, want %llu", r,
                 (unsigned long long)sampler_samples_per_rank(&s),
                 (unsigned long long)per_rank);
        want_batches = drop_last_batch ? per_rank / batch
                                       : (per_rank + batch - 1) / batch;
        if (r == 0)
            nbatches = sampler_batches(&s);
        if (sampler_batches(&s) != want_batches || sampler_batches(&s) != nbatches)
            FAIL("  rank %u: %llu batches, want %llu (rank 0 has %llu)", r,
                 (unsigned long long)sampler_batches(&s),
                 (unsigned long long)want_batches,
                 (unsigned long long)nbatches);

        for (uint64_t seq = 0; seq < nbatches; seq++) {
            uint32_t count = sampler_batch_count(&s, seq);
            uint32_t want = seq + 1 < nbatches ? batch
                          : (uint32_t)(per_rank - seq * batch < batch
                                       ? per_rank - seq * batch : batch);

            if (drop_last_batch)
                want = batch;
            if (count != want)
                FAIL("  rank %u batch %llu: %u samples, want %u", r,
                     (unsigned long long)seq, count, want);
            if (sampler_batch(&s, seq, out) != count)
                FAIL("  rank %u batch %llu: sampler_batch count differs", r,
                     (unsigned long long)seq);
            for (uint32_t j = 0; j < count; j++, k++) {
                uint64_t p = r + k * world;
                uint64_t idx = sampler_sample(&s, seq, j);

                if (idx != list[p] || out[j] != idx)
                    FAIL("  rank %u batch %llu slot %u: got %llu / %llu, "
                         "reference %llu", r, (unsigned long long)seq, j,
                         (unsigned long long)idx, (unsigned long long)out[j],
                         (unsigned long long)list[p]);
                if (sampler_is_padding(&s, seq, j) != (p >= n))
                    FAIL("  rank %u batch %llu slot %u: padding flag wrong", r,
                         (unsigned long long)seq, j);
                if (p >= n) {
                    if (k != per_rank - 1)
                        FAIL("  rank %u: padding at slot %llu, not the last",
                             r, (unsigned long long)k);
                    pad[idx]++;
                } else {
                    real[idx]++;
                }
            }
            if (sampler_sample(&s, seq, count) != SAMPLER_NONE ||
                sampler_is_padding(&s, seq, count))
                FAIL("  rank %u batch %llu: slot past the end answers", r,
                     (unsigned long long)seq);
        }
        if (sampler_batch_count(&s, nbatches) != 0 ||
            sampler_batch(&s, nbatches, out) != 0 ||
            sampler_sample(&s, nbatches, 0) != SAMPLER_NONE)
            FAIL("  rank %u: batch past the end answers", r);
        if (!drop_last_batch && k != per_rank)
            FAIL("  rank %u: batches hold %llu samples, want %llu", r,
                 (unsigned long long)k, (unsigned long long)per_rank);
        if (drop_last_batch && k != per_rank / batch * batch)
            FAIL("  rank %u: full batches hold %llu samples", r,
                 (unsigned long long)k);
    }

    if (!drop_last_batch) {
        /* Every index exactly once, plus the documented padding. */
        uint64_t pads = 0, dropped = 0;

        for (uint64_t i = 0; i < n; i++) {
            pads += pad[i];
            if (drop_last && real[i] == 0)
                dropped++;
            else if (real[i] != 1)
                FAIL("  index %llu delivered %u times (not padding)",
                     (unsigned long long)i, real[i]);
        }
        if (drop_last) {
            if (pads != 0 || dropped != n - total || n - total >= world)
                FAIL("  drop_last: %llu padding, %llu dropped, want 0 and %llu",
                     (unsigned long long)pads, (unsigned long long)dropped,
                     (unsigned long long)(n - total));
            for (uint64_t p = total; p < n; p++)
                if (real[sampler_perm_at(&pm, p)] != 0)
                    FAIL("  drop_last: perm[%llu] was delivered",
                         (unsigned long long)p);
        } else {
            if (pads != total - n || total - n >= world)
                FAIL("  %llu padding samples, want %llu",
                     (unsigned long long)pads, (unsigned long long)(total - n));
            for (uint64_t p = n; p < total; p++)
                pad[sampler_perm_at(&pm, p % n)]--;
            for (uint64_t i = 0; i < n; i++)
                if (pad[i] != 0)
                    FAIL("  padding is not perm[p mod n] for p in [n, total)");
        }
    }
done:
#undef FAIL
    free(list);
    free(out);
    free(real);
    free(pad);
    return ok;
}

static void test_split(void)
{
    static const uint64_t sizes[] = { 1, 2, 3, 7, 8, 10, 100, 1001, 4099, 60000 };
    static const uint32_t worlds[] = { 1, 2, 3, 8 };
    static const uint32_t batches[] = { 1, 3, 32 };
    int cases = 0, failed = 0;

    for (size_t a = 0; a < sizeof(sizes) / sizeof(sizes[0]); a++)
        for (size_t b = 0; b < sizeof(worlds) / sizeof(worlds[0]); b++)
            for (int dl = 0; dl < 2; dl++) {
                uint64_t n = sizes[a];
                uint32_t w = worlds[b];
                int ok = 1;

                if (dl && n < w)
                    continue;
                for (size_t c = 0; c < sizeof(batches) / sizeof(batches[0]); c++)
                    for (int dlb = 0; dlb < 2; dlb++)
                        for (int sh = 0; sh < 2; sh++) {
                            cases++;
                            if (!check_split(n, w, batches[c], dl, dlb, sh,
                                             (uint32_t)(a + c))) {
                                ok = 0;
                                failed++;
                                tap_diag("  case n %llu world %u batch %u "
                                         "drop_last %d drop_last_batch %d "
                                         "shuffle %d", (unsigned long long)n,
                                         w, batches[c], dl, dlb, sh);
                            }
                        }
                tap_ok(ok, "n %llu, world %u, drop_last %d: ranks split "
                       "the epoch as DistributedSampler, batches cut right",
                       (unsigned long long)n, w, dl);
            }
    tap_diag("%d split cases, %d failed", cases, failed);
}

static void test_known_layout(void)
{
    /* n = 10, world 3, no shuffle: total 12, rank 2 gets 2, 5, 8 and the
     * padding 11 mod 10 = 1; batch 2 gives [2 5] [8 1]. */
    struct sampler_params p = {
        .n = 10, .seed = 0, .rank = 2, .world = 3, .batch = 2,
    };
    struct sampler s;
    uint64_t out[2] = { 0, 0 };

    sampler_init(&s, &p, NULL);
    TAP_IS_INT(sampler_samples_per_rank(&s), 4, "n 10 world 3: 4 per rank");
    TAP_IS_INT(sampler_batches(&s), 2, "n 10 world 3 batch 2: 2 batches");
    sampler_batch(&s, 1, out);
    TAP_OK(sampler_sample(&s, 0, 0) == 2 && sampler_sample(&s, 0, 1) == 5 &&
           out[0] == 8 && out[1] == 1, "rank 2 gets 2 5 | 8 1");
    TAP_OK(!sampler_is_padding(&s, 1, 0) && sampler_is_padding(&s, 1, 1),
           "only the wrapped-around 1 is padding");

    p.drop_last = true;
    sampler_init(&s, &p, NULL);
    TAP_IS_INT(sampler_samples_per_rank(&s), 3, "drop_last: 3 per rank");
    TAP_OK(sampler_batch_count(&s, 1) == 1 && sampler_sample(&s, 1, 0) == 8,
           "drop_last: rank 2 gets 2 5 | 8, index 9 sits out");

    p.drop_last_batch = true;
    sampler_init(&s, &p, NULL);
    TAP_IS_INT(sampler_batches(&s), 1, "drop_last_batch drops the partial batch");

    p.drop_last = false;
    p.drop_last_batch = true;
    p.batch = 5;
    sampler_init(&s, &p, NULL);
    TAP_IS_INT(sampler_batches(&s), 0,
               "drop_last_batch with fewer samples than a batch: no batches");

    /* More ranks than samples: padding wraps around more than once. */
    p = (struct sampler_params){ .n = 2, .rank = 6, .world = 8, .batch = 4 };
    sampler_init(&s, &p, NULL);
    TAP_OK(sampler_samples_per_rank(&s) == 1 && sampler_sample(&s, 0, 0) == 0 &&
           sampler_is_padding(&s, 0, 0), "n 2 world 8: rank 6 gets padding 0");
}

static void test_large(void)
{
    struct sampler_params p = {
        .n = 100000000, .seed = UINT64_C(0xfeedface), .epoch = 3, .rank = 5,
        .world = 8, .batch = 256, .shuffle = true,
    };
    struct sampler s, other;
    struct rng_stream st;
    uint64_t out[256], nb;
    int ok = 1, in_range = 1;

    tap_diag("sizeof(struct sampler) = %zu bytes", sizeof(struct sampler));
    TAP_OK(sizeof(struct sampler) <= 192, "a sampler is O(1): at most 192 bytes");
    TAP_IS_INT(sampler_init(&s, &p, NULL), 0, "100M-sample sampler set up");
    TAP_IS_INT(sampler_samples_per_rank(&s), 12500000, "100M over 8: 12.5M each");
    nb = sampler_batches(&s);
    TAP_IS_INT(nb, 48829, "12.5M in batches of 256: 48829 batches");
    TAP_IS_INT(sampler_batch_count(&s, nb - 1), 12500000 - 48828 * 256,
               "last batch is partial");

    /* Random batches: sampler_batch and sampler_sample agree, in range; a
     * second sampler built from the same parameters (another process, a
     * restart) agrees too, whatever order batches are asked in. */
    sampler_init(&other, &p, NULL);
    rng_stream_init(&st, 1, 0, 0);
    for (int i = 0; i < 300 && ok; i++) {
        uint64_t seq = rng_u64(&st) % nb;
        uint32_t count = sampler_batch(&s, seq, out);

        for (uint32_t j = 0; j < count; j++) {
            ok &= out[j] == sampler_sample(&other, seq, j);
            in_range &= out[j] < p.n;
        }
    }
    TAP_OK(ok, "100M: random batches match per-sample lookups");
    TAP_OK(in_range, "100M: every index is in range");

    /* The largest dataset: positions near the end do not overflow. */
    p.n = SAMPLER_MAX_N;
    p.world = 7;
    p.rank = 6;
    p.batch = 1000;
    sampler_init(&s, &p, NULL);
    nb = sampler_batches(&s);
    {
        uint32_t c = sampler_batch_count(&s, nb - 1);
        uint64_t last = sampler_sample(&s, nb - 1, c - 1);

        TAP_OK(c >= 1 && last < SAMPLER_MAX_N &&
               sampler_is_padding(&s, nb - 1, c - 1) ==
               (6 + (sampler_samples_per_rank(&s) - 1) * 7 >= SAMPLER_MAX_N),
               "n = 2^62: the last sample is in range");
    }
}

int main(void)
{
    test_perm_bijection();
    test_perm_keying();
    test_perm_uniformity();
    test_params();
    test_split();
    test_known_layout();
    test_large();
    return tap_done();
}
