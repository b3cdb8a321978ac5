/*
 * client.h - libringfeed's internals, shared by the files of client/ and
 * never installed.  Internal names carry the prefix client_; only the rf_
 * functions of ringfeed.h leave the shared library (ringfeed.map).
 *
 * The files and their jobs:
 *   client.c  the rf_ API: open, the connection state machine, next, release,
 *             stats, close, error names
 *   env.c     defaults taken from the environment: socket path, rank, world
 *   attach.c  the ATTACH handshake: connect, send, receive the reply and its
 *             descriptors, check the memfd and the eventfd, map the ring
 *   attach_line.c  the ATTACH request line and the parse of its reply
 *   folder.c  a dataset named by its folder: which daemon serves it, under
 *             what name (OPEN), the user's own daemon if need be
 *   spawn.c   starting the user's own daemon, ringfeedd --user (spawn.h)
 *   fields.c  a sample's fields and a batch's columns (rf_field_*,
 *             rf_batch_column, rf_batch_dropped)
 *   offsets.c the check of a RAGGED column's offsets
 *   wait.c    waiting for one slot: spin, futex, ring state, socket liveness
 *   handoff.c the CUDA hand-off: pinning mappings, copies whose completion
 *             releases their slot, in order (rf_cuda_*, rf_poll)
 *   pin_cuda.c / pin_none.c  the GPU runtime under handoff.c (pin.h)
 *
 * Stream numbers.  The caller sees one stream numbered from 0 at rf_open()
 * (struct rf_batch.stream_seq) that runs on across reconnects.  Each ring
 * numbers its own batches from 0 at its attach (ring.h's g).  A mapping
 * records `first`, the caller's stream number of its batch 0, so the ring
 * batch of caller batch n is n - first.
 */
#ifndef RINGFEED_CLIENT_CLIENT_H
#define RINGFEED_CLIENT_CLIENT_H

#include <stdint.h>
#include <sys/types.h>
#include <sys/un.h>

#include "ctl.h"
#include "err.h"
#include "ring.h"
#include "ringfeed.h"

/* How long the handshake waits for the daemon's reply to ATTACH. */
#define CLIENT_REPLY_TIMEOUT_MS 30000
/* Descriptors the reply may carry before the client calls it truncated. */
#define CLIENT_FDS_MAX 16

/* A retired ring: the daemon went away while the caller held some of its
 * batches, so its mapping lives on until they are released. */
struct client_ring {
    struct ring_hdr *hdr;       /* the mapping's base */
    size_t size;                /* bytes mapped */
    uint64_t first;             /* caller stream number of ring batch 0 */
    uint64_t end;               /* first caller stream number not in it */
    uint32_t depth;             /* its slots and their stride, from its */
    uint64_t stride;            /* checked header copy */
};

/* What one successful ATTACH yields. */
/* A mixture's sources=NAME:FIRST,... (16 names of 64 and their numbers). */
#define CLIENT_SOURCES_MAX 1400

struct client_conn {
    int sock;                   /* control connection; closing it detaches */
    int efd;                    /* eventfd the daemon watches for releases */
    struct ring_hdr *hdr;       /* the mapped ring (client-writable) */
    struct ring_hdr *priv;      /* a private copy of its header, taken
                                   before ring_check and checked: every
                                   geometry the client uses is read here
                                   (RING_HDR_SIZE bytes, owned) */
    size_t size;
    uint64_t id;                /* the daemon's attach id */
    char sources[CLIENT_SOURCES_MAX]; /* a mixture's sources (rf_sources), else "" */
};

/* Where the stream goes on from: the parameters of one ATTACH. */
struct client_attach_args {
    const struct rf_options *opt;
    const char *path;           /* socket path, checked to fit sun_path */
    const char *dataset;        /* the catalogue name (opt->dataset, or the
                                   name a folder is served under) */
    int32_t rank, world;
    uint64_t epoch, seq;        /* first batch wanted */
    uint32_t version;           /* ring layout version asked for */
};

/* handoff.c's state.  Batch numbers are the caller's stream numbers. */
#define CLIENT_NOTE_MAX 160     /* rf_stats.pin_note */

struct client_pin {             /* a registered mapping */
    void *base;
    size_t size;
    int ours;                   /* we registered it, so we unregister it */
};

struct client_pending {         /* a batch handed back, slot not yet released */
    uint64_t n;
    void *ev;                   /* its copy's event; NULL: an rf_release
                                   queued behind earlier copies */
};

struct client_handoff {
    int want;                   /* rf_cuda_register was called: pin every
                                   mapping from now on */
    int probe;                  /* 0 not probed, 1 a device answered, or the
                                   probe's negative errno */
    struct client_pin pins[RING_MAX_DEPTH + 1];
    unsigned n_pins;
    struct client_pending pend[RING_MAX_DEPTH]; /* oldest first */
    unsigned n_pend;
    void *spare[RING_MAX_DEPTH]; /* events to reuse */
    unsigned n_spare;
    uint64_t copies;
    void *stage;                /* the converting copy's device buffer, or
                                   NULL (pin.h's client_pin_stage_*) */
    char note[CLIENT_NOTE_MAX];
};

enum client_state {
    CLIENT_ATTACHED,     /* conn is live, ring.hdr mapped */
    CLIENT_RECONNECTING, /* the daemon went away; retrying with backoff */
    CLIENT_DEAD,         /* final: every rf_next returns dead_err */
};

struct rf_client {
    /* options, with private copies of every string */
    struct rf_options opt;
    char *strings;              /* one block holding the copies */
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)]; /* attached through */
    /* a dataset folder (folder.c): its realpath, the socket the options
     * give (asked first), the name the serving daemon gave it; NULL and
     * "" for a catalogue name */
    char *folder;
    char home[sizeof(((struct sockaddr_un *)0)->sun_path)];
    char dsname[CTL_DATASET_NAME_MAX + 1];
    int32_t rank, world;
    pid_t pid;                  /* the process that opened it: the only one
                                   that may take or hand back batches */

    /* the connection state machine, driven by client_drive() */
    enum client_state state;
    struct client_conn conn;    /* valid in CLIENT_ATTACHED; kept in
                                   CLIENT_DEAD when the ring said why */
    uint64_t first;             /* caller stream number of conn's batch 0 */
    int said;                   /* the daemon sent a line unasked */
    uint32_t depth;             /* of the last ring attached */
    uint64_t batches_per_epoch; /* of the last ring attached */
    struct rf_info info;        /* of the last ring attached; rank, world and
                                   the position are filled by rf_get_info */
    int attached_once;          /* info is valid */
    /* the sample's fields, from the first ring attached (a reconnect must
     * find the same ones: same_fields in client.c); nfields 0 for a
     * version-2 ring */
    uint32_t version;           /* ring layout version of the first ring */
    uint32_t nfields, primary;
    uint64_t meta_size;         /* of the rings: the same for each (batch) */
    struct ring_field fields[RING_MAX_FIELDS];

    /* retired rings still holding batches the caller has not released */
    struct client_ring old[RING_MAX_DEPTH];
    unsigned n_old;

    /* the caller's stream */
    uint64_t delivered;         /* batches handed out by rf_next */
    uint64_t released;          /* batches handed back by rf_release */
    uint64_t next_epoch;        /* position of batch `delivered`: the */
    uint64_t next_seq;          /* resume point of a reconnect */

    /* reconnecting */
    int64_t lost_ns;            /* when the daemon was found gone */
    int64_t next_try_ns;        /* earliest next attempt */
    int64_t backoff_ms;
    int last_err;               /* of the last failed attempt */
    struct rf_err lost;         /* why the daemon was found gone */
    struct rf_err attempt;      /* why the last attempt failed */
    int dead_err;               /* CLIENT_DEAD: what rf_next returns */

    /* the CUDA hand-off (handoff.c) */
    struct client_handoff ho;

    /* statistics */
    struct rf_stats st;
    int64_t last_return_ns;     /* when rf_next last returned; 0: never */

    struct rf_err err;
};

/* Slot i of the ring mapped at base, whose checked geometry (the private
 * copy's, never the client-writable header's) has slot stride `stride`. */
static inline struct ring_slot *client_slot(void *base, uint64_t stride, uint32_t i)
{
    return (struct ring_slot *)((char *)base + RING_HDR_SIZE + (uint64_t)i * stride);
}

/* CLOCK_MONOTONIC in nanoseconds (vDSO: no system call). */
int64_t client_now_ns(void);

/* folder.c: is dataset a folder (a '/' in it, or an existing folder with a
 * MANIFEST)?  client_folder_init: its realpath into c->folder and c->path
 * (the options' socket) into c->home; 0 or -errno with c->err.
 * client_folder_open: asks for the serving daemon and name (file-top list
 * of folder.c), sets c->path and c->dsname; 0 or -errno with err. */
int client_is_folder(const char *dataset);
int client_folder_init(struct rf_client *c);
int client_folder_open(struct rf_client *c, struct rf_err *err);

/* attach.c: sends line (len bytes, its LF included) on a fresh connection
 * to path and reads the one-line reply into reply (cap bytes; descriptors
 * sent with it are closed).  Returns its length, LF included, or -errno
 * with err naming the path and verb. */
ssize_t client_ask(const char *path, const char *verb, const char *line, size_t len,
                   char *reply, size_t cap, struct rf_err *err);

/* env.c */
int client_socket_path(const char *opt, char *out, size_t cap, struct rf_err *err);
int client_rank_world(int32_t rank, int32_t world, int32_t *r, int32_t *w,
                      struct rf_err *err);

/* attach_line.c */

/* The numbers of an "OK attach ..." reply. */
struct client_reply {
    uint64_t id, size, depth, batches;
    char sources[CLIENT_SOURCES_MAX]; /* "" unless the stream is a mixture */
};

int client_format_attach(const struct client_attach_args *a, char *buf, size_t cap,
                         struct rf_err *err);
int client_parse_reply(const char *line, size_t len, const char *path,
                       struct client_reply *r, int *refused, struct rf_err *err);

/* attach.c */

/* Connects to a->path, attaches from (a->epoch, a->seq) asking for ring
 * version RING_VERSION and, when the daemon refuses that as a version it
 * does not speak (ERR version), once more for version 2; maps the ring.
 * Returns 0 with *out filled (the caller owns it: client_conn_close), or a
 * negative errno with err saying why, nothing left open, and *refused 1
 * when the daemon answered ERR.  a->version is ignored. */
int client_attach(const struct client_attach_args *a, struct client_conn *out,
                  int *refused, struct rf_err *err);
void client_conn_close(struct client_conn *cn);

/* offsets.c */

/* Checks a RAGGED column's count + 1 offsets off[] (ring.h VERSION 3) for
 * field f of caller batch stream_seq: 0 first, never decreasing, the last
 * at most f->capacity.  Reads off[0..count] only.  Returns 0, or -EBADMSG
 * with err naming the field, the sample and the values. */
int client_check_offsets(const struct ring_field *f, const int64_t *off, uint32_t count,
                         uint64_t stream_seq, struct rf_err *err);

/* wait.c */

/* What client_wait() found besides a ready batch. */
#define CLIENT_GONE 1 /* the daemon went away: reconnect */

int client_wait(struct rf_client *c, int64_t deadline_ns);

/* client.c, for handoff.c */

/* 0 when the calling process opened c; else -EPERM with the message in
 * c->err, `what` naming the caller's function (a forked child must not
 * touch the parent's ring: ringfeed.h). */
int client_check_owner(struct rf_client *c, const char *what);

/* Checks that b is the oldest batch not yet handed back (released or
 * pending); 0 or -EINVAL with the message in c->err, `what` naming the
 * caller's function. */
int client_check_handback(struct rf_client *c, const struct rf_batch *b, const char *what);
/* The slot of batch b, which must be held (delivered, not yet handed
 * back) and be the batch rf_next filled; NULL with -EINVAL's message in
 * c->err otherwise, `what` naming the caller's function. */
struct ring_slot *client_batch_slot(struct rf_client *c, const struct rf_batch *b,
                                    const char *what);
/* Releases batch c->released to the daemon (or drops its retired ring). */
int client_release_oldest(struct rf_client *c);

/* handoff.c, for client.c */

/* c->conn was just mapped: registers it when pinning is wanted. */
void client_handoff_mapped(struct rf_client *c);
/* base is about to be unmapped: unregisters it if it was registered. */
void client_handoff_unmapping(struct rf_client *c, void *base);
/* Releases, in order, the pending batches whose copies are done.  With
 * wait, first waits for the oldest pending copy, until deadline_ns (-1:
 * for as long as it takes); -ETIMEDOUT when it passed.  -EIO when a copy
 * failed on the device (its slot is released all the same). */
int client_handoff_drain(struct rf_client *c, int wait, int64_t deadline_ns);
/* Queues the release of batch released + n_pend behind the pending ones
 * (plain rf_release of a batch while copies are pending). */
int client_handoff_queue(struct rf_client *c, void *ev);
/* Waits for every pending copy and unregisters every mapping (rf_close). */
void client_handoff_close(struct rf_client *c);
void client_handoff_stats(const struct rf_client *c, struct rf_stats *s);

#endif
