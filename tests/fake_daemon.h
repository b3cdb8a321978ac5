/*
 * fake_daemon.h - an in-process stand-in for ringfeedd's side of the ATTACH
 * handshake and the ring, for the client library's unit tests.
 *
 * A fake listens on a Unix socket in a fresh temporary directory and, on a
 * thread of its own, accepts connections, reads each one's ATTACH line and
 * hands it to the test's handler, which answers (fake_send: a line plus any
 * descriptors, in one sendmsg as the daemon does) and says whether the
 * connection stays open.  Rings are built as the daemon builds them
 * (ring_geometry, ring_init, seals) and batches are published following
 * ring.h's rules M1/M2 and W1/W2, two chunks per batch.
 */
#ifndef RINGFEED_TESTS_FAKE_DAEMON_H
#define RINGFEED_TESTS_FAKE_DAEMON_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/un.h>

#include "ring.h"

#define FAKE_MAX_CONNS 16
#define FAKE_LINE_MAX 4200

struct fake;

/* Answers one ATTACH on conn.  Returns 1 to keep conn open (attached), 0
 * to have the fake close it. */
typedef int (*fake_handler)(struct fake *f, int conn, const char *line);

struct fake {
    char dir[64];
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    int lfd;
    pthread_t thread;
    atomic_int stop;
    fake_handler handler;
    void *user;
    pthread_mutex_t mu;
    char lines[FAKE_MAX_CONNS][FAKE_LINE_MAX]; /* ATTACH lines, in order */
    atomic_int nlines;
    int conns[FAKE_MAX_CONNS];                 /* kept open; -1 when closed */
    int nconns;
};

/* A ring as the daemon makes it, plus its eventfd. */
struct fake_ring {
    int memfd, efd;
    struct ring_hdr *hdr;
    size_t size;
};

/* Starts a fake listening at a fresh path (f->path), or at path when not
 * NULL.  Returns 0 or -errno. */
int fake_start(struct fake *f, const char *path, fake_handler h, void *user);

/* Stops the thread, closes every connection and the listener, removes the
 * socket and the directory.  Idempotent. */
void fake_stop(struct fake *f);

/* Closes accepted connection i (the daemon going away). */
void fake_drop(struct fake *f, int i);

/* Waits until the fake has seen n ATTACH lines; 0, or -ETIMEDOUT after 5 s. */
int fake_wait_lines(struct fake *f, int n);

/* Sends text (with its own LF) and nfds descriptors in one sendmsg. */
int fake_send(int conn, const char *text, const int *fds, int nfds);

/*
 * Makes a ring: memfd sized and initialized for (depth, batch,
 * sample_bytes), CHW shape {1, 1, sample_bytes}, batches_per_epoch bpe,
 * starting at (epoch, seq), attach id 7, sealed with seals (0 for none),
 * and a non-blocking eventfd.  Returns 0 or -errno.
 */
int fake_ring_make(struct fake_ring *r, uint32_t depth, uint32_t batch,
                   uint64_t sample_bytes, uint64_t bpe, uint64_t epoch, uint64_t seq,
                   int seals);

/*
 * Makes a version-3 ring as fake_ring_make does, with the n fields of f[]
 * (name, kind, dtype, layout, ndim, shape, role, of, item_bytes and a
 * RAGGED one's capacity set by the caller; the rest is laid out by
 * ring_geometry_fields) and field `primary` the data block (its dtype,
 * layout and shape in the header: {elements, 1, 1} for FLAT, its own
 * three dims, or {1, 1, elements}).
 */
int fake_ring_make_fields(struct fake_ring *r, uint32_t depth, uint32_t batch,
                          const struct ring_field *f, uint32_t n, uint32_t primary,
                          uint64_t bpe, uint64_t epoch, uint64_t seq, int seals);

/* Sends "OK attach id=7 size=... depth=... batches=..." with [memfd, efd]. */
int fake_ring_send(const struct fake_ring *r, int conn);

/* Unmaps and closes.  Idempotent. */
void fake_ring_free(struct fake_ring *r);

/* What a published test batch holds: sample i of ring batch g. */
uint64_t fake_index(uint64_t epoch, uint64_t seq, uint32_t i);
uint8_t fake_pixel(uint64_t epoch, uint64_t seq, uint32_t i, uint64_t j);
uint32_t fake_count(const struct ring_hdr *h, uint64_t seq);
/* Version 3: byte j of sample i in FIXED field k (the primary's bytes are
 * fake_pixel's), rows of sample i in a RAGGED field (0, 1 or 2: the first
 * sample of every third batch has none), byte j of those rows, and the
 * dropped boxes of a batch. */
uint8_t fake_field_byte(const struct ring_hdr *h, uint32_t k, uint64_t epoch, uint64_t seq,
                        uint32_t i, uint64_t j);
uint32_t fake_rows(uint64_t seq, uint32_t i);
uint32_t fake_dropped(uint64_t seq);

/*
 * A publisher thread: publishes ring batches [0, n) of r in order (epoch and
 * seq from the header's start and batches_per_epoch), each only once the
 * client has released batch g - depth (M1), sleeping on the eventfd and
 * adding up what it reads from it.
 */
struct fake_pub {
    struct fake_ring *r;
    uint64_t n;
    pthread_t thread;
    atomic_int stop;
    atomic_uint_fast64_t published;
    atomic_uint_fast64_t efd_total; /* sum of the eventfd counts read */
};

int fake_pub_start(struct fake_pub *p, struct fake_ring *r, uint64_t n);
/* Stops (after what is published) and joins; drains the eventfd once more. */
void fake_pub_stop(struct fake_pub *p);

/* Publishes ring batch g of r now (no M1 wait). */
void fake_publish(struct ring_hdr *h, uint64_t g);

/* Open descriptors of this process (entries of /proc/self/fd). */
int fake_count_fds(void);

/* Value of key=... in an ATTACH line as a string into out; 0 or -ENOENT. */
/*
 * A fleet of fake rings for tests that attach repeatedly: every ATTACH gets
 * a fresh ring of this geometry starting where the line's epoch= and seq=
 * say, sent on the connection, with a publisher making per_ring batches.
 */
struct fake_fleet {
    uint32_t depth, batch, sample;
    uint64_t bpe;
    int seals;
    uint64_t per_ring;
    /* version 3: when nfields, an ATTACH with version=3 gets a ring of
     * these fields; with refuse_v3 it is refused (ERR version) as an older
     * daemon does, and version=2 gets a version-2 ring */
    const struct ring_field *fields;
    uint32_t nfields, primary;
    int refuse_v3;
    struct fake_ring rings[FAKE_MAX_CONNS];
    struct fake_pub pubs[FAKE_MAX_CONNS];
    int n;
};

/* The handler's work for one ATTACH line: 1 when answered, 0 when the ring
 * could not be made (the fake then closes the connection unanswered) or
 * version 3 was refused (refuse_v3: ERR version sent). */
int fake_fleet_attach(struct fake_fleet *fl, int conn, const char *line);
/* Stops the fake, then every publisher, and frees every ring. */
void fake_fleet_stop(struct fake_fleet *fl, struct fake *f);

int fake_line_value(const char *line, const char *key, char *out, size_t cap);

#endif
