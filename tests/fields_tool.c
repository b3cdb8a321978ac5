/*
 * fields_tool.c - the integration tests' way to write a kind-fields
 * dataset and to read a version-3 ring without the Python binding
 * (tests/integration/test_fields_daemon.py).
 *
 *   fields_tool pack OUT_DIR SCHEMA_FILE RECORDS_FILE
 *       SCHEMA_FILE: one field line per line, the text after "field "
 *       (proto/schema.h); RECORDS_FILE: records one after another, each a
 *       4-byte little-endian length and then the record (every field's
 *       part, schema.h's layout), written with the writer API
 *       (proto/dataset_writer.h, codec none, no labels).
 *
 *   fields_tool read SOCKET BATCHES OUT_FILE ATTACH-LINE
 *       attaches with the raw line, and writes to OUT_FILE the ring's
 *       header (RING_HDR_SIZE bytes) and then, for each of BATCHES
 *       batches, its whole slot (slot_stride bytes), copied once the batch
 *       is published and before it is released.  The reader of the file
 *       (the test) parses the field table and the columns itself.
 *
 * With FIELDS_TOOL_TAMPER set, read swaps fields 1 and 2 of the ring's
 * table right after the attach and says whether ring_check still passes it
 * (a hostile client; the workers must never read it).
 * With FIELDS_TOOL_HOLD set in the environment, read prints "held" after
 * the batches and stays attached until its stdin closes (for STATS).
 *
 * Exit 0; 2 with the reply on stdout when the ATTACH is refused; 3 with
 * "failed: REASON" on stdout when the stream fails or closes; 1 with the
 * reason on stderr for anything else.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "dataset_writer.h"
#include "ring.h"
#include "schema.h"

static int fail(const char *what, const char *detail)
{
    fprintf(stderr, "fields_tool: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
    return 1;
}

static int pack(const char *out, const char *schema_path, const char *records_path)
{
    struct dataset_writer_opts o = { .kind = DATASET_FIELDS, .codec = DATASET_CODEC_NONE };
    struct dataset_writer *w;
    struct schema s = { 0 };
    struct rf_err err;
    char line[SCHEMA_LINE_MAX];
    FILE *f = fopen(schema_path, "r");
    uint8_t *rec = NULL;
    size_t cap = 0;

    if (!f)
        return fail("cannot open", schema_path);
    while (fgets(line, sizeof(line), f)) {
        struct schema_field fl;
        char of[SCHEMA_NAME_MAX + 1];
        size_t n = strcspn(line, "\n");

        if (n == 0)
            continue;
        if (schema_field_parse(line, n, &fl, of, &err) < 0 || schema_add(&s, &fl, of, &err) < 0) {
            fclose(f);
            return fail("schema", err.msg);
        }
    }
    fclose(f);
    if (schema_check(&s, &err) < 0)
        return fail("schema", err.msg);
    o.schema = &s;
    f = fopen(records_path, "rb");
    if (!f)
        return fail("cannot open", records_path);
    if (dataset_writer_create(out, &o, &w, &err) < 0) {
        fclose(f);
        return fail("create", err.msg);
    }
    for (;;) {
        uint8_t lb[4];
        uint32_t len;

        if (fread(lb, 1, 4, f) != 4)
            break;
        len = (uint32_t)lb[0] | (uint32_t)lb[1] << 8 | (uint32_t)lb[2] << 16 |
              (uint32_t)lb[3] << 24;
        if (len > cap) {
            uint8_t *q = realloc(rec, len);

            if (!q)
                break;
            rec = q;
            cap = len;
        }
        if (fread(rec, 1, len, f) != len || dataset_writer_add(w, rec, len, DATASET_NO_LABEL,
                                                                &err) < 0) {
            fclose(f);
            free(rec);
            dataset_writer_abort(w);
            return fail("record", err.msg);
        }
    }
    fclose(f);
    free(rec);
    if (dataset_writer_finish(w, NULL, &err) < 0)
        return fail("finish", err.msg);
    return 0;
}

/* Sends line, receives the reply (NUL-terminated) and the ring's memfd and
 * eventfd.  Returns the connected socket, -1 on no connection, -2 when the
 * reply carries no descriptors (a refusal: reply says why). */
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
    ssize_t n;
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (s == -1)
        return -1;
    snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
    if (connect(s, (struct sockaddr *)&a, sizeof(a)) == -1 ||
        write(s, line, strlen(line)) != (ssize_t)strlen(line)) {
        close(s);
        return -1;
    }
    do {
        n = recvmsg(s, &m, MSG_CMSG_CLOEXEC);
    } while (n == -1 && errno == EINTR);
    if (n <= 0) {
        close(s);
        return -1;
    }
    reply[n] = '\0';
    c = CMSG_FIRSTHDR(&m);
    if (!c || c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(2 * sizeof(int))) {
        close(s);
        return -2;
    }
    memcpy(fds, CMSG_DATA(c), 2 * sizeof(int));
    return s;
}

static int read_ring(const char *sock, uint64_t batches, const char *out, const char *line_arg)
{
    char line[4096], reply[1024];
    struct ring_hdr hdr;
    struct rf_err err;
    struct { uint64_t v; } sz = { 0 };
    const char *p;
    uint8_t *mem;
    FILE *f;
    int fds[2], s;

    snprintf(line, sizeof(line), "%s\n", line_arg);
    s = attach(sock, line, reply, sizeof(reply), fds);
    if (s == -2) {
        printf("%s", reply);
        return 2;
    }
    if (s < 0)
        return fail("no connection or no reply", NULL);
    p = strstr(reply, " size=");
    if (strncmp(reply, "OK attach", 9) != 0 || !p)
        return fail("unexpected reply", reply);
    sz.v = strtoull(p + 6, NULL, 10);
    mem = mmap(NULL, sz.v, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
    if (mem == MAP_FAILED)
        return fail("mmap", strerror(errno));
    memcpy(&hdr, mem, sizeof(hdr));
    if (ring_check(&hdr, sz.v, &err) < 0)
        return fail("ring_check", err.msg);
    if (getenv("FIELDS_TOOL_TAMPER") && hdr.nfields >= 3) {
        /* a hostile client: fields 1 and 2 swapped in the shared header
         * before the workers map the ring; when their columns take as many
         * pages the table stays self-consistent (ring_check passes it) */
        struct ring_hdr *w = (struct ring_hdr *)mem;
        struct ring_field a = w->fields[1], b = w->fields[2];

        /* each keeps its place's offsets, as ring_geometry_fields gives them */
        b.offset = w->fields[1].offset, b.offsets_at = w->fields[1].offsets_at;
        a.offset = w->fields[2].offset, a.offsets_at = w->fields[2].offsets_at;
        w->fields[1] = b;
        w->fields[2] = a;
        memcpy(&hdr, mem, sizeof(hdr));
        printf("tampered %s\n", ring_check(&hdr, sz.v, &err) == 0 ? "consistent" : err.msg);
        fflush(stdout);
    }
    f = fopen(out, "wb");
    if (!f)
        return fail("cannot write", out);
    fwrite(mem, 1, RING_HDR_SIZE, f); /* the header page (struct ring_hdr is less) */
    for (uint64_t g = 0; g < batches; g++) {
        struct ring_hdr *h = (struct ring_hdr *)mem;
        struct ring_slot *slot = (struct ring_slot *)(mem + RING_HDR_SIZE +
                                                      (g % hdr.depth) * hdr.slot_stride);
        struct timespec t0, t;

        clock_gettime(CLOCK_MONOTONIC, &t0);
        while (atomic_load_explicit(&slot->ready, memory_order_acquire) != ring_ready_word(g)) {
            uint32_t st = atomic_load_explicit(&h->state, memory_order_acquire);

            if (st != RING_LIVE) {
                printf("failed: %.*s\n", (int)sizeof(h->reason), h->reason);
                fclose(f);
                return 3;
            }
            clock_gettime(CLOCK_MONOTONIC, &t);
            if (t.tv_sec - t0.tv_sec > 60) {
                fclose(f);
                return fail("timed out waiting for a batch", NULL);
            }
            usleep(200);
        }
        fwrite(slot, 1, hdr.slot_stride, f);
        atomic_store_explicit(&h->released, g + 1, memory_order_release);
        atomic_thread_fence(memory_order_seq_cst);
        if (atomic_load_explicit(&h->want_release, memory_order_relaxed)) {
            uint64_t one = 1;

            if (write(fds[1], &one, sizeof(one)) < 0 && errno != EAGAIN) {
                fclose(f);
                return fail("eventfd", strerror(errno));
            }
        }
    }
    fclose(f);
    if (getenv("FIELDS_TOOL_HOLD")) {
        /* stay attached (STATS shows the stream) until stdin closes */
        char c;

        printf("held\n");
        fflush(stdout);
        while (read(0, &c, 1) > 0)
            ;
    }
    close(s);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "pack") == 0)
        return pack(argv[2], argv[3], argv[4]);
    if (argc == 6 && strcmp(argv[1], "read") == 0)
        return read_ring(argv[2], strtoull(argv[3], NULL, 10), argv[4], argv[5]);
    fprintf(stderr, "usage: fields_tool pack OUT_DIR SCHEMA_FILE RECORDS_FILE\n"
                    "       fields_tool read SOCKET BATCHES OUT_FILE ATTACH-LINE\n");
    return 1;
}
