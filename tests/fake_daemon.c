/* fake_daemon.c - the in-process daemon stand-in of fake_daemon.h. */
#include "fake_daemon.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int read_line(int fd, char *buf, size_t cap)
{
    size_t len = 0;

    while (len + 1 < cap) {
        ssize_t n = read(fd, buf + len, 1);

        if (n == -1 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        if (buf[len++] == '\n')
            break;
    }
    buf[len] = '\0';
    return 0;
}

static void *accept_loop(void *arg)
{
    struct fake *f = arg;
    struct pollfd pfd = {.fd = f->lfd, .events = POLLIN};
    char line[FAKE_LINE_MAX];

    while (!atomic_load(&f->stop)) {
        int conn, keep, n, slot;

        if (poll(&pfd, 1, 10) <= 0)
            continue;
        conn = accept4(f->lfd, NULL, NULL, SOCK_CLOEXEC);
        if (conn == -1)
            continue;
        if (read_line(conn, line, sizeof(line)) < 0) {
            close(conn);
            continue;
        }
        /* line and connection are recorded before the reply, so a client
         * that has its reply always finds them here (fake_drop included) */
        pthread_mutex_lock(&f->mu);
        n = atomic_load(&f->nlines);
        if (n < FAKE_MAX_CONNS)
            memcpy(f->lines[n], line, sizeof(line));
        atomic_store(&f->nlines, n + 1);
        slot = f->nconns < FAKE_MAX_CONNS ? f->nconns++ : -1;
        if (slot >= 0)
            f->conns[slot] = conn;
        pthread_mutex_unlock(&f->mu);
        keep = f->handler(f, conn, line);
        if (!keep || slot < 0) {
            pthread_mutex_lock(&f->mu);
            if (slot < 0 || f->conns[slot] == conn)
                close(conn);
            if (slot >= 0)
                f->conns[slot] = -1;
            pthread_mutex_unlock(&f->mu);
        }
    }
    return NULL;
}

int fake_start(struct fake *f, const char *path, fake_handler h, void *user)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int e;

    memset(f, 0, sizeof(*f));
    f->lfd = -1;
    snprintf(f->dir, sizeof(f->dir), "/tmp/rf-fake-XXXXXX");
    if (!mkdtemp(f->dir))
        return -errno;
    if (path)
        snprintf(f->path, sizeof(f->path), "%s", path);
    else
        snprintf(f->path, sizeof(f->path), "%s/ctl.sock", f->dir);
    memcpy(sa.sun_path, f->path, strlen(f->path) + 1);
    f->handler = h;
    f->user = user;
    pthread_mutex_init(&f->mu, NULL);
    f->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (f->lfd == -1 || bind(f->lfd, (struct sockaddr *)&sa, sizeof(sa)) == -1 ||
        listen(f->lfd, 8) == -1)
        goto fail;
    if ((e = pthread_create(&f->thread, NULL, accept_loop, f)) != 0) {
        errno = e;
        goto fail;
    }
    return 0;
fail:
    e = errno;
    if (f->lfd >= 0)
        close(f->lfd);
    f->lfd = -1;
    unlink(f->path);
    rmdir(f->dir);
    f->dir[0] = '\0';
    return -e;
}

void fake_stop(struct fake *f)
{
    if (f->lfd < 0)
        return;
    atomic_store(&f->stop, 1);
    pthread_join(f->thread, NULL);
    for (int i = 0; i < f->nconns; i++)
        if (f->conns[i] >= 0)
            close(f->conns[i]);
    close(f->lfd);
    f->lfd = -1;
    unlink(f->path);
    rmdir(f->dir);
    pthread_mutex_destroy(&f->mu);
}

void fake_drop(struct fake *f, int i)
{
    pthread_mutex_lock(&f->mu);
    if (i < f->nconns && f->conns[i] >= 0) {
        close(f->conns[i]);
        f->conns[i] = -1;
    }
    pthread_mutex_unlock(&f->mu);
}

int fake_wait_lines(struct fake *f, int n)
{
    for (int i = 0; i < 5000; i++) {
        if (atomic_load(&f->nlines) >= n)
            return 0;
        usleep(1000);
    }
    return -ETIMEDOUT;
}

int fake_send(int conn, const char *text, const int *fds, int nfds)
{
    union {
        char buf[CMSG_SPACE(64 * sizeof(int))];
        struct cmsghdr align;
    } ctl;
    struct iovec iov = {.iov_base = (void *)text, .iov_len = strlen(text)};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    struct cmsghdr *cm;

    if (nfds > 64)
        return -EINVAL;
    if (nfds > 0) {
        memset(&ctl, 0, sizeof(ctl));
        msg.msg_control = ctl.buf;
        msg.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
        cm = CMSG_FIRSTHDR(&msg);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
        memcpy(CMSG_DATA(cm), fds, (size_t)nfds * sizeof(int));
    }
    if (sendmsg(conn, &msg, MSG_NOSIGNAL) != (ssize_t)iov.iov_len)
        return -errno;
    return 0;
}

int fake_ring_make(struct fake_ring *r, uint32_t depth, uint32_t batch,
                   uint64_t sample_bytes, uint64_t bpe, uint64_t epoch, uint64_t seq,
                   int seals)
{
    struct ring_geom g;
    int rc;

    *r = (struct fake_ring){.memfd = -1, .efd = -1};
    rc = ring_geometry(depth, batch, sample_bytes, &g, NULL);
    if (rc < 0)
        return rc;
    r->memfd = memfd_create("rf-fake-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (r->memfd == -1 || ftruncate(r->memfd, (off_t)g.total_size) == -1)
        goto fail;
    r->hdr = mmap(NULL, g.total_size, PROT_READ | PROT_WRITE, MAP_SHARED, r->memfd, 0);
    if (r->hdr == MAP_FAILED) {
        r->hdr = NULL;
        goto fail;
    }
    r->size = g.total_size;
    ring_init(r->hdr, &g, 2);
    /* like a daemon with nothing in flight: the eventfd after each release */
    atomic_store(&r->hdr->want_release, 1);
    r->hdr->dtype = RING_U8;
    r->hdr->layout = RING_CHW;
    r->hdr->shape[0] = 1;
    r->hdr->shape[1] = 1;
    r->hdr->shape[2] = (uint32_t)sample_bytes;
    r->hdr->classes = 10;
    r->hdr->dataset_samples = 1000;
    r->hdr->batches_per_epoch = bpe;
    r->hdr->start_epoch = epoch;
    r->hdr->start_seq = seq;
    r->hdr->attach_id = 7;
    if (seals && fcntl(r->memfd, F_ADD_SEALS, seals) == -1)
        goto fail;
    r->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (r->efd == -1)
        goto fail;
    return 0;
fail:
    rc = -errno;
    fake_ring_free(r);
    return rc;
}

int fake_ring_make_fields(struct fake_ring *r, uint32_t depth, uint32_t batch,
                          const struct ring_field *f, uint32_t n, uint32_t primary,
                          uint64_t bpe, uint64_t epoch, uint64_t seq, int seals)
{
    struct ring_field t[RING_MAX_FIELDS];
    struct ring_geom g;
    uint64_t item;
    int rc;

    if (n > RING_MAX_FIELDS || primary >= n)
        return -EINVAL;
    memcpy(t, f, n * sizeof(*t));
    rc = ring_geometry_fields(depth, batch, t, n, primary, &g, NULL);
    if (rc < 0)
        return rc;
    item = t[primary].item_bytes;
    /* the v2 ring of the primary's size, then grown to the fields' layout */
    rc = fake_ring_make(r, depth, batch, item, bpe, epoch, seq, 0);
    if (rc < 0)
        return rc;
    munmap(r->hdr, r->size);
    r->hdr = NULL;
    if (ftruncate(r->memfd, (off_t)g.total_size) == -1)
        goto fail;
    r->hdr = mmap(NULL, g.total_size, PROT_READ | PROT_WRITE, MAP_SHARED, r->memfd, 0);
    if (r->hdr == MAP_FAILED) {
        r->hdr = NULL;
        goto fail;
    }
    r->size = g.total_size;
    ring_init(r->hdr, &g, 3);
    atomic_store(&r->hdr->want_release, 1);
    r->hdr->dtype = t[primary].dtype;
    r->hdr->layout = t[primary].layout;
    {
        uint32_t d = t[primary].dtype;
        uint64_t es = d == RING_I16 || d == RING_F16 || d == RING_BF16 || d == RING_U16 ? 2
                    : d == RING_I32 || d == RING_F32 ? 4
                    : d == RING_F64 || d == RING_I64 ? 8 : 1;

        /* {elements, 1, 1} for FLAT, the field's own C,H,W (or H,W,C) when
         * it has three dims, else {1, 1, elements} */
        r->hdr->shape[0] = r->hdr->shape[1] = r->hdr->shape[2] = 1;
        if (t[primary].layout == RING_FLAT)
            r->hdr->shape[0] = (uint32_t)(item / es);
        else if (t[primary].ndim == 3)
            memcpy(r->hdr->shape, t[primary].shape, sizeof(r->hdr->shape));
        else
            r->hdr->shape[2] = (uint32_t)(item / es);
    }
    r->hdr->classes = 10;
    r->hdr->dataset_samples = 1000;
    r->hdr->batches_per_epoch = bpe;
    r->hdr->start_epoch = epoch;
    r->hdr->start_seq = seq;
    r->hdr->attach_id = 7;
    r->hdr->nfields = n;
    r->hdr->primary = primary;
    memcpy(r->hdr->fields, t, n * sizeof(*t));
    if (seals && fcntl(r->memfd, F_ADD_SEALS, seals) == -1)
        goto fail;
    return 0;
fail:
    rc = -errno;
    fake_ring_free(r);
    return rc;
}

int fake_ring_send(const struct fake_ring *r, int conn)
{
    char line[256];
    int fds[2] = {r->memfd, r->efd};

    snprintf(line, sizeof(line), "OK attach id=7 size=%zu depth=%u batches=%llu\n", r->size,
             r->hdr->depth, (unsigned long long)r->hdr->batches_per_epoch);
    return fake_send(conn, line, fds, 2);
}

void fake_ring_free(struct fake_ring *r)
{
    if (r->hdr)
        munmap(r->hdr, r->size);
    if (r->memfd >= 0)
        close(r->memfd);
    if (r->efd >= 0)
        close(r->efd);
    *r = (struct fake_ring){.memfd = -1, .efd = -1};
}

uint64_t fake_index(uint64_t epoch, uint64_t seq, uint32_t i)
{
    return epoch * 100000 + seq * 100 + i;
}

uint8_t fake_pixel(uint64_t epoch, uint64_t seq, uint32_t i, uint64_t j)
{
    return (uint8_t)(epoch * 131 + seq * 31 + i * 7 + j);
}

/* Every third batch is short, to check count is passed on. */
uint32_t fake_count(const struct ring_hdr *h, uint64_t seq)
{
    return seq % 3 == 2 ? h->batch - 1 + (h->batch == 1) : h->batch;
}

uint8_t fake_field_byte(const struct ring_hdr *h, uint32_t k, uint64_t epoch, uint64_t seq,
                        uint32_t i, uint64_t j)
{
    return fake_pixel(epoch, seq, i, j + (k == h->primary ? 0 : 17u * (k + 1)));
}

uint32_t fake_rows(uint64_t seq, uint32_t i)
{
    return (uint32_t)((i + seq) % 3);
}

uint32_t fake_dropped(uint64_t seq)
{
    return (uint32_t)(seq % 5);
}

/* Version 3: sample i of every column of slot s (the primary's written by
 * the caller as the data block); a RAGGED column's offsets[i + 1] too. */
static void fill_fields(struct ring_hdr *h, struct ring_slot *s, uint64_t epoch,
                        uint64_t seq, uint32_t i)
{
    for (uint32_t k = 0; k < h->nfields; k++) {
        const struct ring_field *f = &h->fields[k];
        uint8_t *col = (uint8_t *)s + f->offset;

        if (k == h->primary)
            continue;
        if (f->kind == RING_FIELD_FIXED) {
            for (uint64_t j = 0; j < f->item_bytes; j++)
                col[i * f->item_bytes + j] = fake_field_byte(h, k, epoch, seq, i, j);
        } else {
            int64_t *off = (int64_t *)((uint8_t *)s + f->offsets_at);
            uint64_t at = (uint64_t)off[i] * f->item_bytes;
            uint64_t len = (uint64_t)fake_rows(seq, i) * f->item_bytes;

            for (uint64_t j = 0; j < len; j++)
                col[at + j] = fake_field_byte(h, k, epoch, seq, i, j);
            off[i + 1] = off[i] + fake_rows(seq, i);
        }
    }
}

void fake_publish(struct ring_hdr *h, uint64_t g)
{
    uint64_t pos = h->start_seq + g;
    uint64_t epoch = h->start_epoch + pos / h->batches_per_epoch;
    uint64_t seq = pos % h->batches_per_epoch;
    uint32_t slot = (uint32_t)(g % h->depth);
    struct ring_slot *s = ring_slot(h, slot);
    struct ring_sample *smp = ring_samples(s);
    uint8_t *data = h->version >= RING_VERSION_FIELDS
                        ? (uint8_t *)s + h->fields[h->primary].offset
                        : ring_slot_data(h, slot);
    uint32_t count = fake_count(h, seq), half = count / 2;

    /* M2: the scheduler's plain stores, then the release of the words */
    s->count = count;
    s->stream_seq = g;
    s->epoch = epoch;
    s->seq = seq;
    s->chunks = 2;
    s->substituted = count > 1 ? 1 : 0;
    if (h->version >= RING_VERSION_FIELDS) {
        s->dropped = fake_dropped(seq);
        for (uint32_t k = 0; k < h->nfields; k++)
            if (h->fields[k].kind == RING_FIELD_RAGGED)
                ((int64_t *)((uint8_t *)s + h->fields[k].offsets_at))[0] = 0;
    }
    atomic_store_explicit(&s->chunks_done, 0, memory_order_release);
    atomic_store_explicit(&s->ready, 0, memory_order_release);
    /* W1 for chunk 0 = samples [0, half), chunk 1 = [half, count) */
    for (unsigned k = 0; k < 2; k++) {
        uint32_t from = k ? half : 0, to = k ? count : half;
        uint64_t old;

        for (uint32_t i = from; i < to; i++) {
            smp[i].index = fake_index(epoch, seq, i);
            smp[i].label = (int32_t)(i % 10);
            smp[i].flags = i == 0 && count > 1 ? RING_SAMPLE_SUBSTITUTED : 0;
            for (uint64_t j = 0; j < h->sample_bytes; j++)
                data[i * h->sample_bytes + j] = fake_pixel(epoch, seq, i, j);
            if (h->version >= RING_VERSION_FIELDS)
                fill_fields(h, s, epoch, seq, i);
        }
        old = atomic_fetch_or_explicit(&s->chunks_done, 1ull << k, memory_order_acq_rel);
        /* W2: the chunk that completes the mask publishes */
        if ((old | (1ull << k)) == 3 && old != 3) {
            atomic_store_explicit(&s->ready, ring_ready_word(g), memory_order_release);
            /* only a client that said it sleeps is woken, as a worker does */
            atomic_thread_fence(memory_order_seq_cst);
            if (atomic_load_explicit(&h->sleeping, memory_order_relaxed))
                ring_futex_wake(&s->ready);
        }
    }
}

static void drain(struct fake_pub *p)
{
    uint64_t v;

    while (read(p->r->efd, &v, sizeof(v)) == (ssize_t)sizeof(v))
        atomic_fetch_add(&p->efd_total, v);
}

static void *pub_loop(void *arg)
{
    struct fake_pub *p = arg;
    struct ring_hdr *h = p->r->hdr;
    struct pollfd pfd = {.fd = p->r->efd, .events = POLLIN};

    for (uint64_t g = 0; g < p->n && !atomic_load(&p->stop);) {
        /* M1: slot g % depth is free once batch g - depth is released */
        if (g >= h->depth &&
            atomic_load_explicit(&h->released, memory_order_acquire) < g - h->depth + 1) {
            poll(&pfd, 1, 5);
            drain(p);
            continue;
        }
        fake_publish(h, g);
        atomic_store(&p->published, ++g);
    }
    while (!atomic_load(&p->stop)) {
        poll(&pfd, 1, 5);
        drain(p);
    }
    return NULL;
}

int fake_pub_start(struct fake_pub *p, struct fake_ring *r, uint64_t n)
{
    p->r = r;
    p->n = n;
    atomic_store(&p->stop, 0);
    atomic_store(&p->published, 0);
    atomic_store(&p->efd_total, 0);
    return -pthread_create(&p->thread, NULL, pub_loop, p);
}

void fake_pub_stop(struct fake_pub *p)
{
    atomic_store(&p->stop, 1);
    pthread_join(p->thread, NULL);
    drain(p);
}

int fake_count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    int n = 0;

    if (!d)
        return -1;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n - 1; /* the directory's own descriptor */
}

int fake_line_value(const char *line, const char *key, char *out, size_t cap)
{
    size_t klen = strlen(key);
    const char *p = line;

    while ((p = strstr(p, key))) {
        if ((p == line || p[-1] == ' ') && p[klen] == '=') {
            size_t n = strcspn(p + klen + 1, " \n");

            if (n >= cap)
                n = cap - 1;
            memcpy(out, p + klen + 1, n);
            out[n] = '\0';
            return 0;
        }
        p += klen;
    }
    return -ENOENT;
}

int fake_fleet_attach(struct fake_fleet *fl, int conn, const char *line)
{
    char v[32];
    uint64_t epoch = 0, seq = 0;
    int k = fl->n;

    uint32_t version = RING_VERSION;
    int rc;

    if (k >= FAKE_MAX_CONNS)
        return 0;
    if (fake_line_value(line, "epoch", v, sizeof(v)) == 0)
        epoch = strtoull(v, NULL, 10);
    if (fake_line_value(line, "seq", v, sizeof(v)) == 0)
        seq = strtoull(v, NULL, 10);
    if (fake_line_value(line, "version", v, sizeof(v)) == 0)
        version = (uint32_t)strtoul(v, NULL, 10);
    if (version >= RING_VERSION_FIELDS && fl->refuse_v3) {
        fake_send(conn, "ERR version client speaks ring layout version 3, this daemon "
                  "versions 1 to 2\n", NULL, 0);
        return 0;
    }
    if (version >= RING_VERSION_FIELDS && fl->nfields)
        rc = fake_ring_make_fields(&fl->rings[k], fl->depth, fl->batch, fl->fields,
                                   fl->nfields, fl->primary, fl->bpe, epoch, seq, fl->seals);
    else
        rc = fake_ring_make(&fl->rings[k], fl->depth, fl->batch, fl->sample, fl->bpe, epoch,
                            seq, fl->seals);
    if (rc < 0)
        return 0;
    fake_ring_send(&fl->rings[k], conn);
    fake_pub_start(&fl->pubs[k], &fl->rings[k], fl->per_ring);
    fl->n = k + 1;
    return 1;
}

void fake_fleet_stop(struct fake_fleet *fl, struct fake *f)
{
    fake_stop(f);
    for (int k = 0; k < fl->n; k++) {
        fake_pub_stop(&fl->pubs[k]);
        fake_ring_free(&fl->rings[k]);
    }
    fl->n = 0;
}
