/*
 * crc32c.c - CRC-32C by Intel's ISA-L (crc32_iscsi), with slicing-by-8
 * tables as the portable reference the tests compare it with.
 *
 * ISA-L picks its best code for the CPU at load time (three crc32
 * instruction streams folded with carry-less multiplies where the CPU has
 * them): 1.7x one serial crc32 loop on a 784-byte record and 2.7x on a
 * 100 KiB JPEG, but its call costs more than it saves below a few hundred
 * bytes (0.63x at 32 bytes, 0.95x at 256: bench/crc32c).  So pieces under
 * SERIAL_MAX bytes (index entries, headers) take one inline stream of the
 * SSE4.2 instruction where the CPU has it, and everything else ISA-L.
 * Its crc32_iscsi(buf, len, init) neither inverts the initial value nor the
 * result, so crc32c(crc, ...) = ~crc32_iscsi(..., ~crc); its length is an
 * int, so longer buffers go in pieces.
 *
 * The tables are set once by a constructor that runs before main (and
 * before any thread exists), so crc32c_sw() needs no lock.
 *
 * Slicing-by-8 (Intel's, as in zlib's crc32 and the kernel's crc32c): table
 * t[0] is the classic byte-at-a-time table; t[k][b] is the CRC of byte b
 * followed by k zero bytes, so 8 input bytes fold into the CRC with 8 table
 * look-ups and no dependency between them.  Little-endian words are read
 * with memcpy, so any alignment is fine.
 */
#include "crc32c.h"

#include <isa-l/crc.h>
#include <limits.h>
#include <string.h>

#define CRC32C_POLY 0x82F63B78u /* reflected 0x1EDC6F41 */

static uint32_t crc_tab[8][256];
static int crc_has_sse42;

__attribute__((constructor))
static void crc32c_init(void)
{
    for (uint32_t b = 0; b < 256; b++) {
        uint32_t c = b;

        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ CRC32C_POLY : c >> 1;
        crc_tab[0][b] = c;
    }
    for (uint32_t b = 0; b < 256; b++)
        for (int k = 1; k < 8; k++)
            crc_tab[k][b] = (crc_tab[k - 1][b] >> 8) ^
                            crc_tab[0][crc_tab[k - 1][b] & 0xff];
#if defined(__x86_64__)
    __builtin_cpu_init();
    crc_has_sse42 = __builtin_cpu_supports("sse4.2");
#endif
}

static uint64_t load_le64(const unsigned char *p)
{
    uint64_t v;

    memcpy(&v, p, sizeof(v));
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

uint32_t crc32c_sw(uint32_t crc, const void *buf, size_t len)
{
    const unsigned char *p = buf;
    uint32_t c = ~crc;

    while (len && ((uintptr_t)p & 7)) {
        c = (c >> 8) ^ crc_tab[0][(c ^ *p++) & 0xff];
        len--;
    }
    while (len >= 8) {
        uint64_t w = load_le64(p) ^ c;

        c = crc_tab[7][w & 0xff] ^
            crc_tab[6][(w >> 8) & 0xff] ^
            crc_tab[5][(w >> 16) & 0xff] ^
            crc_tab[4][(w >> 24) & 0xff] ^
            crc_tab[3][(w >> 32) & 0xff] ^
            crc_tab[2][(w >> 40) & 0xff] ^
            crc_tab[1][(w >> 48) & 0xff] ^
            crc_tab[0][w >> 56];
        p += 8;
        len -= 8;
    }
    while (len--)
        c = (c >> 8) ^ crc_tab[0][(c ^ *p++) & 0xff];
    return ~c;
}

#define SERIAL_MAX 512

#if defined(__x86_64__)
__attribute__((target("sse4.2")))
static uint32_t crc32c_serial(uint32_t crc, const unsigned char *p, size_t len)
{
    uint64_t c = ~crc;

    while (len >= 8) {
        uint64_t w;

        memcpy(&w, p, sizeof(w));
        c = __builtin_ia32_crc32di(c, w);
        p += 8;
        len -= 8;
    }
    while (len--)
        c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
    return ~(uint32_t)c;
}
#endif

uint32_t crc32c_serial_stream(uint32_t crc, const void *buf, size_t len)
{
#if defined(__x86_64__)
    if (crc_has_sse42)
        return crc32c_serial(crc, buf, len);
#endif
    return crc32c_sw(crc, buf, len);
}

uint32_t crc32c(uint32_t crc, const void *buf, size_t len)
{
    const unsigned char *p = buf;
    uint32_t c = ~crc;

#if defined(__x86_64__)
    if (len < SERIAL_MAX && crc_has_sse42)
        return crc32c_serial(crc, p, len);
#endif
    while (len > 0) {
        int n = len > (size_t)INT_MAX ? INT_MAX : (int)len;

        c = crc32_iscsi((unsigned char *)p, n, c);
        p += n;
        len -= (size_t)n;
    }
    return ~c;
}

const char *crc32c_impl_name(void)
{
    return crc_has_sse42 ? "isa-l crc32_iscsi (sse4.2 below 512 bytes)" : "isa-l crc32_iscsi";
}
