/*
 * test_client_attach.c - libringfeed refuses every bad ATTACH reply with a
 * clear message and without leaking a descriptor: a memfd without seals,
 * one of the wrong size, a ring of another layout version, too many or too
 * few descriptors, a pipe for the eventfd, a descriptor flood that
 * truncates the control message, ERR replies, garbage, a hang-up, a ring
 * that is not live or not what was asked for; and it accepts the right one.
 * The daemon is the in-process fake of fake_daemon.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fake_daemon.h"
#include "ringfeed.h"
#include "tap.h"

#define SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

enum kase {
    C_GOOD,
    C_NOSEAL,
    C_NOSEALSEAL,
    C_SIZE_MISMATCH,
    C_TINY,
    C_VERSION,
    C_MAGIC,
    C_EXTRA_FD,
    C_NO_FDS,
    C_ONE_FD,
    C_PIPE,
    C_FLOOD,
    C_ERR,
    C_ERR_UNKNOWN,
    C_GARBAGE,
    C_MULTI,
    C_HANGUP,
    C_NOT_LIVE,
    C_MISMATCH,
    C_WRONG_BATCH,
    C_WRONG_START,
    C_SHAPE,
    C_F32,
    C_F32_BYTES,
    C_DTYPE_UNKNOWN,
};

static enum kase g_case;
static struct fake_ring g_ring;
static int g_extra[64];
static int g_nextra;

static int make(int seals)
{
    return fake_ring_make(&g_ring, 4, 8, 16, 5, 0, 0, seals);
}

static int extra_fd(void)
{
    int p[2];

    if (pipe2(p, O_CLOEXEC) == -1)
        return -1;
    g_extra[g_nextra++] = p[0];
    g_extra[g_nextra++] = p[1];
    return p[0];
}

static int send_ring_line(int conn, const char *fmt_extra, const int *fds, int n)
{
    char line[256];

    snprintf(line, sizeof(line), "OK attach id=7 size=%zu depth=%u batches=5%s\n",
             g_ring.size, g_ring.hdr->depth, fmt_extra);
    return fake_send(conn, line, fds, n);
}

static int handler(struct fake *f, int conn, const char *line)
{
    char text[256];
    int fds[32];

    (void)f;
    (void)line;
    switch (g_case) {
    case C_GOOD:
        make(SEALS);
        fake_ring_send(&g_ring, conn);
        return 1;
    case C_NOSEAL:
        make(0);
        fake_ring_send(&g_ring, conn);
        return 1;
    case C_NOSEALSEAL:
        make(F_SEAL_SHRINK | F_SEAL_GROW);
        fake_ring_send(&g_ring, conn);
        return 1;
    case C_SIZE_MISMATCH:
        make(SEALS);
        snprintf(text, sizeof(text), "OK attach id=7 size=%zu depth=4 batches=5\n",
                 g_ring.size + 4096);
        fds[0] = g_ring.memfd;
        fds[1] = g_ring.efd;
        fake_send(conn, text, fds, 2);
        return 1;
    case C_TINY:
        make(SEALS);
        close(g_ring.memfd);
        g_ring.memfd = memfd_create("tiny", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (ftruncate(g_ring.memfd, 100) == -1 || fcntl(g_ring.memfd, F_ADD_SEALS, SEALS) == -1)
            return 0;
        fds[0] = g_ring.memfd;
        fds[1] = g_ring.efd;
        fake_send(conn, "OK attach id=7 size=100 depth=4 batches=5\n", fds, 2);
        return 1;
    case C_VERSION:
        make(0);
        g_ring.hdr->version = RING_VERSION + 1;
        fcntl(g_ring.memfd, F_ADD_SEALS, SEALS);
        fake_ring_send(&g_ring, conn);
        return 1;
    case C_MAGIC:
        make(SEALS);
        g_ring.hdr->magic = 0x1234;
        fake_ring_send(&g_ring, conn);
        return 1;
    case C_EXTRA_FD:
        make(SEALS);
        fds[0] = g_ring.memfd;
        fds[1] = g_ring.efd;
        fds[2] = extra_fd();
        send_ring_line(conn, "", fds, 3);
        return 1;
    case C_NO_FDS:
        make(SEALS);
        send_ring_line(conn, "", NULL, 0);
        return 1;
    case C_ONE_FD:
        make(SEALS);
        send_ring_line(conn, "", &g_ring.memfd, 1);
        return 1;
    case C_PIPE:
        make(SEALS);
        fds[0] = g_ring.memfd;
        fds[1] = extra_fd();
        send_ring_line(conn, "", fds, 2);
        return 1;
    case C_FLOOD:
        make(SEALS);
        fds[0] = g_ring.memfd;
        fds[1] = g_ring.efd;
        for (int i = 2; i < 24; i++)
            fds[i] = i % 2 ? g_ring.efd : extra_fd();
        send_ring_line(conn, "", fds, 24);
        return 1;
    case C_ERR:
        fake_send(conn, "ERR no-dataset no dataset \"fm\" in the catalogue: see "
                        "ringfeedctl datasets\n", NULL, 0);
        return 0;
    case C_ERR_UNKNOWN:
        fake_send(conn, "ERR from-the-future something new went wrong\n", NULL, 0);
        return 0;
    case C_GARBAGE:
        fake_send(conn, "HELLO there\n", NULL, 0);
        return 0;
    case C_MULTI:
        fake_send(conn, "OK 1\nattach id=7\n", NULL, 0);
        return 0;
    case C_HANGUP:
        return 0;
    case C_NOT_LIVE:
        make(SEALS);
        g_ring.hdr->error = -ENOMEM;
        snprintf(g_ring.hdr->reason, sizeof(g_ring.hdr->reason),
                 "over the memory budget: 9 MiB asked, 1 MiB left");
        atomic_store(&g_ring.hdr->state, RING_CLOSED);
        fake_ring_send(&g_ring, conn);
        return 1;
    case C_MISMATCH:
        make(SEALS);
        snprintf(text, sizeof(text), "OK attach id=7 size=%zu depth=5 batches=5\n",
                 g_ring.size);
        fds[0] = g_ring.memfd;
        fds[1] = g_ring.efd;
        fake_send(conn, text, fds, 2);
        return 1;
    case C_WRONG_BATCH:
        fake_ring_make(&g_ring, 4, 16, 16, 5, 0, 0, SEALS);
        fake_ring_send(&g_ring, conn);
        return 1;
    case C_WRONG_START:
        fake_ring_make(&g_ring, 4, 8, 16, 5, 1, 0, SEALS);
        fake_ring_send(&g_ring, conn);
        return 1;
    case C_SHAPE:
        make(0);
        g_ring.hdr->shape[0] = 3;
        fcntl(g_ring.memfd, F_ADD_SEALS, SEALS);
        fake_ring_send(&g_ring, conn);
        return 1;
    case C_F32: /* 16 bytes a sample: four f32 */
    case C_F32_BYTES:
    case C_DTYPE_UNKNOWN:
        make(0);
        g_ring.hdr->dtype = g_case == C_DTYPE_UNKNOWN ? RING_U16 + 1 : RING_F32;
        if (g_case == C_F32)
            g_ring.hdr->shape[2] = 4;
        fcntl(g_ring.memfd, F_ADD_SEALS, SEALS);
        fake_ring_send(&g_ring, conn);
        return 1;
    }
    return 0;
}

static char g_sent[FAKE_LINE_MAX];
static struct rf_info g_info; /* of the last attach that succeeded */

/* Runs one attach against the fake answering as kase; checks the result. */
static void run(enum kase k, const char *name, int want, const char *want_msg)
{
    struct rf_options o;
    struct rf_client *c = NULL;
    struct fake f;
    int before, rc;

    before = fake_count_fds();
    g_case = k;
    g_nextra = 0;
    if (fake_start(&f, NULL, handler, NULL) < 0) {
        tap_ok(0, "%s: fake daemon starts", name);
        return;
    }
    rf_options_init(&o);
    o.socket = f.path;
    o.dataset = "fm";
    o.batch = 8;
    o.params = "flip=0.25";
    o.reconnect_ms = 0;
    rc = rf_open(&o, &c);
    if (!tap_ok(rc == want, "%s: rf_open returns %s", name, rf_strerror(want)))
        tap_diag("  got %d (%s): %s", rc, rf_strerror(rc), rf_last_error(c));
    if (rc == 0)
        rf_get_info(c, &g_info);
    if (!tap_ok(strstr(rf_last_error(c), want_msg) != NULL, "%s: message says \"%s\"", name,
                want_msg))
        tap_diag("  message: \"%s\"", rf_last_error(c));
    if (rc < 0) {
        size_t sz = 1;

        struct rf_info in = {.batch = 7};

        TAP_OK(rf_ring_base(c, &sz) == NULL && sz == 0, "refused: no ring mapped");
        TAP_OK(rf_get_info(c, &in) == -ENOTCONN && in.batch == 0,
               "refused: rf_get_info says -ENOTCONN, zeroed");
        TAP_IS_INT(rf_next(c, &(struct rf_batch){0}, 0), want, "refused: rf_next repeats it");
    }
    rf_close(c);
    fake_wait_lines(&f, 1);
    memcpy(g_sent, f.lines[0], sizeof(g_sent));
    fake_stop(&f);
    fake_ring_free(&g_ring);
    for (int i = 0; i < g_nextra; i++)
        close(g_extra[i]);
    if (!tap_ok(fake_count_fds() == before, "%s: no descriptor leaked", name))
        tap_diag("  %d open before, %d after", before, fake_count_fds());
}

static void no_daemon(void)
{
    struct rf_options o;
    struct rf_client *c = NULL;
    char path[300];
    int before = fake_count_fds(), rc;

    rf_options_init(&o);
    o.socket = "/nonexistent-dir/ringfeed.sock";
    o.dataset = "fm";
    rc = rf_open(&o, &c);
    TAP_IS_INT(rc, -ENOENT, "no daemon: -ENOENT");
    TAP_OK(strstr(rf_last_error(c), "/nonexistent-dir/ringfeed.sock") &&
               strstr(rf_last_error(c), "is ringfeedd running"),
           "no daemon: message names the socket and what to do");
    rf_close(c);

    memset(path, 'x', sizeof(path) - 1);
    path[0] = '/';
    path[sizeof(path) - 1] = '\0';
    o.socket = path;
    rc = rf_open(&o, &c);
    TAP_IS_INT(rc, -ENAMETOOLONG, "socket path too long: -ENAMETOOLONG");
    TAP_OK(strstr(rf_last_error(c), "longer than"), "too long: message says so");
    rf_close(c);
    TAP_IS_INT(fake_count_fds(), before, "no daemon: no descriptor leaked");
}

int main(void)
{
    struct rf_client *c = NULL;

    unsetenv("RANK");
    unsetenv("WORLD_SIZE");
    unsetenv("OMPI_COMM_WORLD_RANK");
    unsetenv("OMPI_COMM_WORLD_SIZE");

    run(C_GOOD, "good ring", 0, "");
    TAP_OK(strncmp(g_sent, "ATTACH dataset=fm batch=8 ", 26) == 0,
           "ATTACH line starts with the dataset and batch");
    {
        char want[32];

        snprintf(want, sizeof(want), " version=%u\n", RING_VERSION);
        TAP_OK(strstr(g_sent, " flip=0.25") && strstr(g_sent, want) &&
                   g_sent[strlen(g_sent) - 1] == '\n',
               "ATTACH line carries params and the ring version");
    }
    tap_diag("sent: %.*s", (int)strcspn(g_sent, "\n"), g_sent);

    run(C_NOSEAL, "memfd without seals", -EPROTO, "lacks seals: F_SEAL_SHRINK F_SEAL_GROW F_SEAL_SEAL");
    run(C_NOSEALSEAL, "memfd without F_SEAL_SEAL", -EPROTO, "lacks seals: F_SEAL_SEAL;");
    run(C_SIZE_MISMATCH, "memfd smaller than size=", -EPROTO, "but the reply says size=");
    run(C_TINY, "memfd smaller than a ring header", -EPROTO, "ring size 100 is out of range");
    {
        char want[64];

        snprintf(want, sizeof(want), "ring layout version %u", RING_VERSION + 1);
        run(C_VERSION, "ring of another layout version", -EPROTO, want);
    }
    run(C_MAGIC, "not a ring", -EPROTO, "not a ringfeed ring");
    run(C_EXTRA_FD, "three descriptors", -EPROTO, "sent 3 descriptors");
    run(C_NO_FDS, "no descriptors", -EPROTO, "sent 0 descriptors");
    run(C_ONE_FD, "one descriptor", -EPROTO, "sent 1 descriptors");
    run(C_PIPE, "a pipe for the eventfd", -EPROTO, "not an eventfd");
    run(C_FLOOD, "24 descriptors (control message truncated)", -EPROTO,
        "more descriptors");
    run(C_ERR, "ERR no-dataset", -ENOENT, "refused ATTACH: no dataset \"fm\" in the catalogue");
    run(C_ERR_UNKNOWN, "ERR with an unknown code", -EPROTO, "(from-the-future)");
    run(C_GARBAGE, "garbage reply", -EPROTO, "answered ATTACH with \"HELLO there\"");
    run(C_MULTI, "multi-line reply", -EPROTO, "not \"OK attach ...\"");
    run(C_HANGUP, "hang-up without a reply", -ECONNRESET, "without answering ATTACH");
    run(C_NOT_LIVE, "ring not live", -ENOMEM, "over the memory budget");
    run(C_MISMATCH, "reply disagrees with the header", -EPROTO, "disagrees with the reply");
    run(C_WRONG_BATCH, "ring of another batch size", -EPROTO, "were asked for");
    run(C_WRONG_START, "ring from another resume point", -EPROTO, "were asked for");
    run(C_SHAPE, "shape does not match sample size", -EPROTO, "sample shape 3x1x16");
    g_info = (struct rf_info){0};
    run(C_F32, "an f32 ring", 0, "");
    TAP_OK(g_info.dtype == RF_DTYPE_F32 && g_info.sample_bytes == 16 && g_info.shape[2] == 4,
           "an f32 ring: rf_info says f32, 4 elements of 16 bytes");
    run(C_F32_BYTES, "f32 shape counted in bytes", -EPROTO, "sample shape 1x1x16 of f32");
    run(C_DTYPE_UNKNOWN, "unknown element type", -EPROTO, "sample type 11");
    {
        static const struct { uint32_t dt; const char *name; size_t size; } dts[] = {
            {RF_DTYPE_U8, "u8", 1},   {RF_DTYPE_I8, "i8", 1},   {RF_DTYPE_I16, "i16", 2},
            {RF_DTYPE_I32, "i32", 4}, {RF_DTYPE_F32, "f32", 4}, {RF_DTYPE_F64, "f64", 8},
            {RF_DTYPE_I64, "i64", 8}, {RF_DTYPE_F16, "f16", 2}, {RF_DTYPE_BF16, "bf16", 2},
            {RF_DTYPE_U16, "u16", 2},
        };

        for (size_t i = 0; i < sizeof(dts) / sizeof(dts[0]); i++)
            tap_ok(rf_dtype_name(dts[i].dt) && strcmp(rf_dtype_name(dts[i].dt), dts[i].name) == 0 &&
                       rf_dtype_size(dts[i].dt) == dts[i].size,
                   "RF_DTYPE %u is %s, %zu bytes", dts[i].dt, dts[i].name, dts[i].size);
        TAP_OK(rf_dtype_name(0) == NULL && rf_dtype_size(0) == 0 && rf_dtype_name(11) == NULL &&
                   rf_dtype_size(11) == 0,
               "rf_dtype_name/size: NULL and 0 for 0 and 11");
    }
    no_daemon();

    TAP_IS_INT(rf_open(NULL, &c), -EINVAL, "rf_open(NULL options): -EINVAL");
    TAP_OK(rf_last_error(c)[0] != '\0', "  with a message");
    rf_close(c);
    rf_close(NULL);
    TAP_OK(strstr(rf_last_error(NULL), "memory") != NULL, "rf_last_error(NULL) explains");
    TAP_IS_STR(rf_strerror(-ETIMEDOUT), "ETIMEDOUT", "rf_strerror names ETIMEDOUT");
    TAP_IS_STR(rf_strerror(-ENOBUFS), "ENOBUFS", "rf_strerror names ENOBUFS");
    TAP_IS_STR(rf_strerror(0), "OK", "rf_strerror(0)");
    TAP_IS_STR(rf_strerror(-99999), "EUNKNOWN", "rf_strerror of a number with no name");
    return tap_done();
}
