/*
 * ring_scribbler.c - a hostile client for the integration tests: it attaches
 * with a raw ATTACH line, maps its ring read-write and keeps writing into
 * the slots the workers are filling while it releases every batch as soon
 * as it is published.  What the daemon must survive: a client may write any
 * byte of its ring at any time (proto/ring.h, WHICH MEMORY IS WHOSE), and
 * that may garble only its own batches.
 *
 *   ring_scribbler SOCKET SECONDS BATCHES ATTACH-LINE [--headers]
 *
 * With --headers it also forges the header of every slot but the one it
 * waits on, again and again: chunks 64, count 1, epoch and seq flipped
 * (the words the main process writes before a batch's jobs, M2), which
 * stalls and garbles its own stream, and must change nothing for a client
 * that joins its share group (T1: nothing read from a ring is a source of
 * what another client receives).
 *
 * While it waits for batch g it overwrites the slots of batches g and g + 1
 * (the ones the workers are writing): every sample's label with 7, index
 * with 0 and flags with 0, and every pixel with 0xAB.  It stops after
 * releasing BATCHES batches, after SECONDS, or at SIGTERM, and prints
 *     released N batches, M slot overwrites
 * on stdout.  Exit 0, or 1 with the reason on stderr (the attach refused,
 * the ring not as the reply said, the stream ended by the daemon).
 */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "ring.h"

static volatile sig_atomic_t stop_asked;

static void on_term(int sig)
{
    (void)sig;
    stop_asked = 1;
}

static double now_s(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int fail(const char *what)
{
    fprintf(stderr, "ring_scribbler: %s\n", what);
    return 1;
}

/* Sends line, receives the reply into reply (NUL-terminated) and the ring's
 * memfd and eventfd.  Returns the connected socket, or -1. */
static int attach(const char *path, const char *line, char *reply, size_t cap, int fds[2])
{
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    union {
        char b[CMSG_SPACE(2 * sizeof(int))];
        struct cmsghdr align;
    } cbuf;
    struct iovec io = { reply, cap - 1 };
    struct msghdr m = { .msg_iov = &io, .msg_iovlen = 1, .msg_control = cbuf.b,
                        .msg_controllen = sizeof(cbuf.b) };
    struct cmsghdr *c;
    size_t len = strlen(line), off = 0;
    ssize_t n;
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (s == -1)
        return -1;
    snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
    if (connect(s, (struct sockaddr *)&a, sizeof(a)) == -1)
        goto fail;
    while (off < len) {
        n = write(s, line + off, len - off);
        if (n == -1 && errno == EINTR)
            continue;
        if (n == -1)
            goto fail;
        off += (size_t)n;
    }
    do {
        n = recvmsg(s, &m, MSG_CMSG_CLOEXEC);
    } while (n == -1 && errno == EINTR);
    if (n <= 0)
        goto fail;
    reply[n] = '\0';
    c = CMSG_FIRSTHDR(&m);
    if (!c || c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(2 * sizeof(int)))
        goto fail;
    memcpy(fds, CMSG_DATA(c), 2 * sizeof(int));
    return s;
fail:
    close(s);
    return -1;
}

/* Overwrites the samples' records and pixels of slot i. */
static void scribble(uint8_t *mem, const struct ring_geom *g, uint32_t i)
{
    uint8_t *slot = mem + RING_HDR_SIZE + (uint64_t)i * g->slot_stride;
    struct ring_sample *sm = ring_samples((struct ring_slot *)slot);

    for (uint32_t k = 0; k < g->batch; k++)
        sm[k] = (struct ring_sample){ .index = 0, .label = 7, .flags = 0 };
    memset(slot + g->meta_size, 0xAB, (size_t)g->batch * g->sample_bytes);
}

int main(int argc, char **argv)
{
    struct sigaction sa = { .sa_handler = on_term };
    char line[4096], reply[512];
    unsigned long long writes = 0;
    uint64_t g = 0, batches;
    struct ring_geom geom;
    struct ring_hdr *h;
    struct rf_err err;
    double deadline;
    const char *p;
    uint64_t size;
    uint8_t *mem;
    int fds[2], s, headers;

    if (argc != 5 && !(argc == 6 && strcmp(argv[5], "--headers") == 0))
        return fail("usage: ring_scribbler SOCKET SECONDS BATCHES ATTACH-LINE [--headers]");
    headers = argc == 6;
    deadline = now_s() + atof(argv[2]);
    batches = strtoull(argv[3], NULL, 10);
    snprintf(line, sizeof(line), "%s\n", argv[4]);
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGTERM, &sa, NULL) == -1 || sigaction(SIGINT, &sa, NULL) == -1)
        return fail("sigaction failed");
    s = attach(argv[1], line, reply, sizeof(reply), fds);
    if (s < 0)
        return fail("ATTACH failed: no reply with a ring");
    p = strstr(reply, " size=");
    if (strncmp(reply, "OK attach", 9) != 0 || !p)
        return fail(reply);
    size = strtoull(p + 6, NULL, 10);
    mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
    if (mem == MAP_FAILED)
        return fail("mmap of the ring failed");
    h = (struct ring_hdr *)mem;
    if (ring_check(mem, size, &err) < 0 ||
        ring_geometry(h->depth, h->batch, h->sample_bytes, &geom, &err) < 0)
        return fail(err.msg);
    /* a version-3 ring has more columns after the first (ring.h VERSION 3):
     * its slots are as far apart as the checked header says */
    geom.slot_stride = h->slot_stride;

    while (g < batches && !stop_asked && now_s() < deadline) {
        struct ring_slot *sl = (struct ring_slot *)(mem + RING_HDR_SIZE +
                                                    (g % geom.depth) * geom.slot_stride);

        if (atomic_load(&h->state) != RING_LIVE)
            return fail(h->reason);
        if (atomic_load(&sl->ready) != ring_ready_word(g)) {
            scribble(mem, &geom, (uint32_t)(g % geom.depth));
            scribble(mem, &geom, (uint32_t)((g + 1) % geom.depth));
            writes += 2;
            for (uint32_t i = 0; headers && i < geom.depth; i++) {
                struct ring_slot *o = (struct ring_slot *)(mem + RING_HDR_SIZE +
                                                           (uint64_t)i * geom.slot_stride);

                if (i == g % geom.depth)
                    continue;
                o->chunks = RING_MAX_CHUNKS;
                o->count = 1;
                o->epoch ^= 0x5555;
                o->seq ^= 0x5555;
                writes++;
            }
            continue;
        }
        g++;
        atomic_store(&h->released, g);
        atomic_thread_fence(memory_order_seq_cst);
        if (atomic_load(&h->want_release)) {
            uint64_t one = 1;

            if (write(fds[1], &one, sizeof(one)) == -1 && errno != EAGAIN && errno != EINTR)
                return fail("write to the eventfd failed");
        }
    }
    printf("released %llu batches, %llu slot overwrites\n", (unsigned long long)g, writes);
    close(s);
    return 0;
}
