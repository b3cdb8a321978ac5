/*
 * test_crc32c.c - CRC-32C against published vectors (the check value and
 * RFC 3720's iSCSI vectors), piecewise use, and the table implementation
 * against the one in use (ISA-L's crc32_iscsi) at every
 * alignment and many lengths.
 */
#include <stdint.h>
#include <string.h>

#include "crc32c.h"
#include "tap.h"

static uint64_t rng_state = 12345;

static uint8_t next_byte(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint8_t)(rng_state >> 56);
}

int main(void)
{
    static const struct {
        const char *name;
        uint8_t fill; /* 0, 0xff: constant; 1: 0,1,2..; 2: 31,30,.. */
        uint32_t want;
    } iscsi[] = {
        {"32 zero bytes", 0, 0x8A9136AA},
        {"32 bytes 0xff", 0xff, 0x62A8AB43},
        {"32 bytes ascending", 1, 0x46DD794E},
        {"32 bytes descending", 2, 0x113FDB5C},
    };
    uint8_t buf[4096 + 16], v[32];
    int mismatches = 0, split_bad = 0;

    tap_diag("crc32c uses %s", crc32c_impl_name());
    TAP_IS_INT(crc32c(0, "123456789", 9), 0xE3069283u, "check value 123456789");
    TAP_IS_INT(crc32c_sw(0, "123456789", 9), 0xE3069283u,
               "check value, slicing-by-8");
    TAP_IS_INT(crc32c(0, "", 0), 0, "empty input gives 0");
    TAP_IS_INT(crc32c(0x1234, NULL, 0), 0x1234, "empty input keeps the crc");
    for (size_t k = 0; k < sizeof(iscsi) / sizeof(iscsi[0]); k++) {
        for (int i = 0; i < 32; i++)
            v[i] = iscsi[k].fill == 1 ? (uint8_t)i
                 : iscsi[k].fill == 2 ? (uint8_t)(31 - i) : iscsi[k].fill;
        TAP_IS_INT(crc32c(0, v, 32), iscsi[k].want, iscsi[k].name);
        TAP_IS_INT(crc32c_sw(0, v, 32), iscsi[k].want, iscsi[k].name);
    }

    for (size_t i = 0; i < sizeof(buf); i++)
        buf[i] = next_byte();
    for (size_t align = 0; align < 16; align++)
        for (size_t len = 0; len <= 4096; len += (len < 300 ? 1 : 61)) {
            uint32_t a = crc32c(0, buf + align, len);
            uint32_t b = crc32c_sw(0, buf + align, len);
            uint32_t c = crc32c_serial_stream(0, buf + align, len);

            if ((a != b || c != b) && mismatches++ < 5)
                tap_diag("align %zu len %zu: %08x vs %08x", align, len, a, b);
        }
    TAP_IS_INT(mismatches, 0, "tables, serial stream and ISA-L agree");

    for (size_t cut = 0; cut <= 300; cut++) {
        uint32_t whole = crc32c(0, buf, 300);
        uint32_t parts = crc32c(crc32c(0, buf, cut), buf + cut, 300 - cut);
        uint32_t parts_sw = crc32c_sw(crc32c_sw(0, buf, cut), buf + cut,
                                      300 - cut);

        if (whole != parts || whole != parts_sw)
            split_bad++;
    }
    TAP_IS_INT(split_bad, 0, "checksum in two pieces equals the whole");

    memcpy(v, "123456789", 9);
    v[4] ^= 1;
    TAP_OK(crc32c(0, v, 9) != 0xE3069283u, "one flipped bit changes it");
    return tap_done();
}
