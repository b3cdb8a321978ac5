/*
 * mapguard.h - reading a file through a mapping without dying when the file
 * shrinks under it.
 *
 * Datasets are read through shared mappings (each shard's index, and the
 * records themselves with the worker's mmap backend).  A byte of a mapping
 * past the file's current end raises SIGBUS (si_code BUS_ADRERR), which
 * would kill the process: a shard truncated while it is served once took
 * every worker with it, and every replacement too.  With the guard
 * installed, such a fault inside a registered mapping is survived: the
 * handler maps anonymous zero pages over the faulting page (MAP_FIXED, so
 * the faulting load simply runs again and reads zeros) and counts it.
 * Zeros fail every check the reader makes (an index entry's checksum, a
 * record's CRC-32C), so no zero ever reaches a client as data; the reader
 * sees the count move (mapguard_faults) and finds out what changed
 * (dataset_check, dataset.h).
 *
 * A SIGBUS anywhere else, or of any other kind (a memory error), is not
 * ours: the handler restores the default action and returns, and the fault
 * happens again and kills the process as it would have.
 *
 * Threads and signals.  Regions are added and removed by one thread at a
 * time (the caller's rule: a worker and the daemon's main loop are single
 * threaded where they map datasets); the handler only reads the table,
 * with atomic loads, so a fault in the middle of an add or remove sees the
 * region either whole or not at all.  The table is fixed (MAPGUARD_MAX
 * regions): a region that does not fit is simply not guarded, and
 * mapguard_add says so.
 */
#ifndef RINGFEED_PROTO_MAPGUARD_H
#define RINGFEED_PROTO_MAPGUARD_H

#include <stddef.h>
#include <stdint.h>

#define MAPGUARD_MAX 16384

/* Installs the SIGBUS handler for the process; once is enough, again is a
 * no-op.  Returns 0 or a negative errno from sigaction. */
int mapguard_install(void);

/* Guards [addr, addr + len).  Returns 0, or -ENOSPC when the table is full
 * (the region then works as before, unguarded).  Harmless without the
 * handler installed. */
int mapguard_add(const void *addr, size_t len);

/* Stops guarding the region that starts at addr (call before munmap). */
void mapguard_remove(const void *addr);

/* Faults survived since the process started. */
uint64_t mapguard_faults(void);

#endif
