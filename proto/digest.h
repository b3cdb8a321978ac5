/*
 * digest.h - XXH64, the streaming 64-bit hash that summarizes a run.
 *
 * ringfeed-read feeds every delivered batch through one digest (indices,
 * labels and pixels, in delivery order) and prints it, so two runs compare
 * by one line: same seed, epoch and ranks must give the same digest whatever
 * the worker count or crash history.  An epoch is tens of megabytes to
 * gigabytes of pixels, so the hash must run near memory speed: XXH64 does
 * (several GB/s per core), where FNV-1a's byte-at-a-time loop manages well
 * under 1 GB/s.  It is not cryptographic: it catches accidents, not forgers.
 *
 * The algorithm is Yann Collet's XXH64 as specified in xxHash's
 * doc/xxhash_spec.md; digest_xxh64(data, len, seed) equals the reference
 * XXH64(data, len, seed) and `xxhsum -H1` (the tests check the published
 * sanity vectors).  Input is bytes; multi-byte integers go in little-endian
 * through digest_update_u32/u64 so a digest does not depend on the host.
 *
 * Splitting the input differently across digest_update calls never changes
 * the result.  struct digest is plain data (copy it to fork), never freed.
 */
#ifndef RINGFEED_PROTO_DIGEST_H
#define RINGFEED_PROTO_DIGEST_H

#include <stddef.h>
#include <stdint.h>

struct digest {
    uint64_t acc[4];        /* the four lanes, valid once total_len >= 32 */
    uint64_t seed;
    uint64_t total_len;     /* bytes fed so far */
    uint8_t buf[32];        /* a stripe not yet complete */
    uint32_t buf_len;       /* bytes in buf, < 32 */
};

/* Starts a digest with the given seed (0 for xxhsum's default). */
void digest_init(struct digest *d, uint64_t seed);

/* Feeds len bytes; data may be NULL when len is 0. */
void digest_update(struct digest *d, const void *data, size_t len);

/* Feeds v as 4 or 8 little-endian bytes. */
void digest_update_u32(struct digest *d, uint32_t v);
void digest_update_u64(struct digest *d, uint64_t v);

/*
 * The hash of everything fed so far.  Does not change d: feeding may go on
 * and a later digest_final covers the longer input.
 */
uint64_t digest_final(const struct digest *d);

/* One-shot XXH64 of a buffer (data may be NULL when len is 0). */
uint64_t digest_xxh64(const void *data, size_t len, uint64_t seed);

/* Characters digest_hex writes, terminating NUL included. */
#define DIGEST_HEX_SIZE 17

/*
 * Writes h as 16 lowercase hex digits, most significant first (as xxhsum
 * prints it), and a NUL, into out; returns out.
 */
char *digest_hex(uint64_t h, char out[DIGEST_HEX_SIZE]);

#endif
