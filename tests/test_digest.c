/*
 * test_digest.c - digest_* is XXH64: xxhsum's published sanity vectors and
 * well-known string hashes, the same result however the input is split
 * across updates, a non-destructive final, little-endian integer helpers and
 * the hex form.  Throughput is printed as a diagnostic, never asserted.
 */
#include <stdint.h>

#include "digest.h"
#include "tap.h"

/* xxhsum's BMK_sanityCheck buffer (xxHash r39 and later 0.x releases). */
#define SANITY_SIZE 101
#define SANITY_PRIME UINT32_C(2654435761)

static void sanity_buffer(uint8_t buf[SANITY_SIZE])
{
    uint32_t gen = SANITY_PRIME;

    for (int i = 0; i < SANITY_SIZE; i++) {
        buf[i] = (uint8_t)(gen >> 24);
        gen *= gen;
    }
}

/* One-shot, one update, and one byte at a time must all give want. */
static void check_vector(const void *data, size_t len, uint64_t seed,
                         uint64_t want, const char *name)
{
    const uint8_t *p = data;
    struct digest d;
    uint64_t one, whole, bytes;

    one = digest_xxh64(data, len, seed);
    digest_init(&d, seed);
    digest_update(&d, data, len);
    whole = digest_final(&d);
    digest_init(&d, seed);
    for (size_t i = 0; i < len; i++)
        digest_update(&d, p + i, 1);
    bytes = digest_final(&d);
    if (!tap_ok(one == want && whole == want && bytes == want, "XXH64 %s", name))
        tap_diag("  want %016llx, one-shot %016llx, update %016llx, "
                 "bytewise %016llx", (unsigned long long)want,
                 (unsigned long long)one, (unsigned long long)whole,
                 (unsigned long long)bytes);
}

static void test_vectors(void)
{
    uint8_t buf[SANITY_SIZE];

    sanity_buffer(buf);
    /* xxhsum BMK_sanityCheck, XXH64 part. */
    check_vector(NULL, 0, 0, UINT64_C(0xEF46DB3751D8E999), "empty, seed 0");
    check_vector(NULL, 0, SANITY_PRIME, UINT64_C(0xAC75FDA2929B17EF),
                 "empty, seed prime");
    check_vector(buf, 1, 0, UINT64_C(0x4FCE394CC88952D8), "sanity 1, seed 0");
    check_vector(buf, 1, SANITY_PRIME, UINT64_C(0x739840CB819FA723),
                 "sanity 1, seed prime");
    check_vector(buf, 14, 0, UINT64_C(0xCFFA8DB881BC3A3D), "sanity 14, seed 0");
    check_vector(buf, 14, SANITY_PRIME, UINT64_C(0x5B9611585EFCC9CB),
                 "sanity 14, seed prime");
    check_vector(buf, SANITY_SIZE, 0, UINT64_C(0x0EAB543384F878AD),
                 "sanity 101, seed 0");
    check_vector(buf, SANITY_SIZE, SANITY_PRIME, UINT64_C(0xCAA65939306F1E21),
                 "sanity 101, seed prime");

    /* "Nobody ..." is python-xxhash's README example; all three were also
     * checked against libzstd's own XXH64 (ZSTD_XXH64) when written. */
    check_vector("a", 1, 0, UINT64_C(0xD24EC4F1A98C6E5B), "\"a\"");
    check_vector("abc", 3, 0, UINT64_C(0x44BC2CF5AD770999), "\"abc\"");
    check_vector("Nobody inspects the spammish repetition", 39, 0,
                 UINT64_C(0xFBCEA83C8A378BF1), "\"Nobody inspects ...\"");
}

static void test_splits(void)
{
    static uint8_t buf[3000];
    uint32_t x = 1;
    int ok = 1;

    for (size_t i = 0; i < sizeof(buf); i++) {
        x = x * 1103515245u + 12345u;
        buf[i] = (uint8_t)(x >> 16);
    }
    /* Every length up to 300 and a few long ones, cut into chunks of every
     * size from 1 to 70 (crossing the 32-byte stripe in every phase). */
    for (size_t len = 0; len <= sizeof(buf) && ok; len += len < 300 ? 1 : 541) {
        uint64_t want = digest_xxh64(buf, len, 99);

        for (size_t chunk = 1; chunk <= 70 && ok; chunk++) {
            struct digest d;

            digest_init(&d, 99);
            for (size_t o = 0; o < len; o += chunk)
                digest_update(&d, buf + o, len - o < chunk ? len - o : chunk);
            if (digest_final(&d) != want) {
                tap_diag("  length %zu in chunks of %zu differs", len, chunk);
                ok = 0;
            }
        }
    }
    TAP_OK(ok, "splitting the input across updates never changes the hash");

    {
        struct digest d;
        uint64_t first, second;

        digest_init(&d, 0);
        digest_update(&d, buf, 40);
        first = digest_final(&d);
        TAP_OK(first == digest_final(&d) && first == digest_xxh64(buf, 40, 0),
               "digest_final leaves the state alone");
        digest_update(&d, buf + 40, 60);
        second = digest_final(&d);
        TAP_OK(second == digest_xxh64(buf, 100, 0),
               "feeding goes on after digest_final");
        digest_update(&d, NULL, 0);
        TAP_OK(digest_final(&d) == second, "a NULL, 0 update changes nothing");
    }
}

static void test_ints_and_hex(void)
{
    static const uint8_t le[12] = {
        0x44, 0x33, 0x22, 0x11, 0xef, 0xcd, 0xab, 0x89, 0x67, 0x45, 0x23, 0x01,
    };
    struct digest d;
    char hex[DIGEST_HEX_SIZE];

    digest_init(&d, 5);
    digest_update_u32(&d, UINT32_C(0x11223344));
    digest_update_u64(&d, UINT64_C(0x0123456789abcdef));
    TAP_OK(digest_final(&d) == digest_xxh64(le, sizeof(le), 5),
           "integers go in as little-endian bytes");

    TAP_IS_STR(digest_hex(UINT64_C(0xEF46DB3751D8E999), hex), "ef46db3751d8e999",
               "hex is 16 lowercase digits, most significant first");
    TAP_IS_STR(digest_hex(0, hex), "0000000000000000", "hex keeps leading zeros");
    TAP_IS_STR(digest_hex(UINT64_MAX, hex), "ffffffffffffffff", "hex of all ones");
}

int main(void)
{
    test_vectors();
    test_splits();
    test_ints_and_hex();
    return tap_done();
}
