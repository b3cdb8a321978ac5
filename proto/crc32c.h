/*
 * crc32c.h - CRC-32C (Castagnoli), the checksum of ringfeed's shard files.
 *
 * Polynomial 0x1EDC6F41 (reflected 0x82F63B78), initial value and final xor
 * 0xFFFFFFFF: the CRC of iSCSI, ext4 and the SSE4.2 crc32 instruction.
 * crc32c(0, "123456789", 9) == 0xE3069283.
 *
 * The running value is the finished CRC of what came before, so a buffer may
 * be checksummed in pieces:
 *     crc = crc32c(0, a, na);  crc = crc32c(crc, b, nb);
 * equals crc32c(0, a||b, na + nb).
 *
 * crc32c() runs Intel's ISA-L (libisal), which chooses its fastest code for
 * the CPU at load time; crc32c_sw() is a portable slicing-by-8 table (8 KiB)
 * that the tests hold it to.
 * Every function is thread-safe and async-signal-safe.
 */
#ifndef RINGFEED_PROTO_CRC32C_H
#define RINGFEED_PROTO_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* The CRC-32C of len bytes at buf, continuing from crc (0 to start). */
uint32_t crc32c(uint32_t crc, const void *buf, size_t len);

/* The portable slicing-by-8 implementation, whatever the CPU (for tests). */
uint32_t crc32c_sw(uint32_t crc, const void *buf, size_t len);

/* One serial stream of the SSE4.2 crc32 instruction (the tables without
 * it): what crc32c() runs below 512 bytes, and bench/crc32c's baseline. */
uint32_t crc32c_serial_stream(uint32_t crc, const void *buf, size_t len);

/* What crc32c() runs, for logs and stats. */
const char *crc32c_impl_name(void);

#endif
