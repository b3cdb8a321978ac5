/*
 * test_ringfeed_read.c - ringfeed-read against the in-process fake daemon:
 * it reads exactly the epochs asked for from the start point and stops,
 * its digest equals XXH64 over the published indices, labels and pixels
 * computed here, --dump-indices lists every sample in order, --json and the
 * human output carry the figures, and a refused attach exits 1 with the
 * daemon's message.  A version-3 ring of named fields gets a digest of
 * every column and one per field; one of an older dataset's image and
 * label keeps the digest of a version-2 ring, byte for byte.
 *
 *     test_ringfeed_read PATH-TO-ringfeed-read
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "digest.h"
#include "fake_daemon.h"
#include "tap.h"

#define SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)
#define DEPTH 4
#define BATCH 8
#define SAMPLE 16
#define BPE 5

extern char **environ;

static struct fake_ring g_rings[FAKE_MAX_CONNS];
static struct fake_pub g_pubs[FAKE_MAX_CONNS];
static int g_nrings;
static int g_refuse;
/* 0: version-2 rings; 2: version 3, an older dataset's image and label;
 * 3: version 3, named fields (image, boxes, label) */
static int g_fields;
static struct ring_field g_table[3];

static void table(void)
{
    g_table[0] = (struct ring_field){.name = "image", .kind = RING_FIELD_FIXED,
                                     .dtype = RING_U8, .layout = RING_FLAT, .ndim = 1,
                                     .shape = {SAMPLE}, .item_bytes = SAMPLE};
    g_table[1] = (struct ring_field){.name = "boxes", .kind = RING_FIELD_RAGGED,
                                     .dtype = RING_F32, .layout = RING_FLAT, .ndim = 1,
                                     .shape = {4}, .item_bytes = 16, .capacity = 2 * BATCH,
                                     .role = RING_ROLE_BOXES};
    g_table[2] = (struct ring_field){.name = "label", .kind = RING_FIELD_FIXED,
                                     .dtype = RING_I64, .layout = RING_FLAT, .item_bytes = 8};
}

static int handler(struct fake *f, int conn, const char *line)
{
    char v[32];
    uint64_t epoch = 0, seq = 0;
    int k = g_nrings;

    (void)f;
    if (g_refuse) {
        fake_send(conn, "ERR no-dataset no dataset \"nope\" in the catalogue\n", NULL, 0);
        return 0;
    }
    if (fake_line_value(line, "epoch", v, sizeof(v)) == 0)
        epoch = strtoull(v, NULL, 10);
    if (fake_line_value(line, "seq", v, sizeof(v)) == 0)
        seq = strtoull(v, NULL, 10);
    if (g_fields == 2)
        g_table[1] = g_table[2];
    if (g_fields ? fake_ring_make_fields(&g_rings[k], DEPTH, BATCH, g_table, (uint32_t)g_fields,
                                         0, BPE, epoch, seq, SEALS) < 0
                 : fake_ring_make(&g_rings[k], DEPTH, BATCH, SAMPLE, BPE, epoch, seq, SEALS) < 0)
        return 0;
    fake_ring_send(&g_rings[k], conn);
    fake_pub_start(&g_pubs[k], &g_rings[k], 40); /* more than will be read */
    g_nrings = k + 1;
    return 1;
}

/* tap_diag for text of several lines: one comment line each. */
static void diag_lines(const char *what, const char *text)
{
    tap_diag("%s:", what);
    while (*text) {
        size_t n = strcspn(text, "\n");

        tap_diag("  %.*s", (int)n, text);
        text += n + (text[n] == '\n');
    }
}

/* Runs argv, returns its exit status with stdout and stderr in out/err. */
static int run(char *const argv[], char *out, size_t outcap, char *err, size_t errcap)
{
    char opath[] = "/tmp/rf-read-out-XXXXXX", epath[] = "/tmp/rf-read-err-XXXXXX";
    posix_spawn_file_actions_t fa;
    int ofd = mkstemp(opath), efd = mkstemp(epath), st = -1;
    ssize_t n;
    pid_t pid;

    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, ofd, 1);
    posix_spawn_file_actions_adddup2(&fa, efd, 2);
    if (posix_spawn(&pid, argv[0], &fa, NULL, argv, environ) == 0)
        waitpid(pid, &st, 0);
    posix_spawn_file_actions_destroy(&fa);
    n = pread(ofd, out, outcap - 1, 0);
    out[n > 0 ? n : 0] = '\0';
    n = pread(efd, err, errcap - 1, 0);
    err[n > 0 ? n : 0] = '\0';
    close(ofd);
    close(efd);
    unlink(opath);
    unlink(epath);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The digest and sample count of stream batches [0, n) from (epoch, seq). */
static uint64_t expected(uint64_t epoch, uint64_t seq, uint64_t n, uint64_t *samples)
{
    struct ring_hdr h = {.batch = BATCH};
    struct digest d;
    uint8_t px[BATCH * SAMPLE];

    digest_init(&d, 0);
    *samples = 0;
    for (uint64_t g = 0; g < n; g++) {
        uint32_t count = fake_count(&h, seq);

        for (uint32_t i = 0; i < count; i++) {
            digest_update_u64(&d, fake_index(epoch, seq, i));
            digest_update_u32(&d, i % 10);
            for (uint64_t j = 0; j < SAMPLE; j++)
                px[i * SAMPLE + j] = fake_pixel(epoch, seq, i, j);
        }
        digest_update(&d, px, (size_t)count * SAMPLE);
        *samples += count;
        if (++seq == BPE)
            epoch++, seq = 0;
    }
    return digest_final(&d);
}

/* Version 3, named fields: the combined digest of stream batches [0, n)
 * from (epoch, seq) and each field's, as fake_publish wrote them. */
static uint64_t expected_fields(uint64_t epoch, uint64_t seq, uint64_t n, uint64_t per[3])
{
    struct ring_hdr h = {.batch = BATCH, .primary = 0};
    struct digest d, fd[3];
    uint8_t buf[2 * BATCH * 16];

    digest_init(&d, 0);
    for (int k = 0; k < 3; k++)
        digest_init(&fd[k], 0);
    for (uint64_t g = 0; g < n; g++) {
        uint32_t count = fake_count(&h, seq);

        for (uint32_t i = 0; i < count; i++) {
            digest_update_u64(&d, fake_index(epoch, seq, i));
            digest_update_u32(&d, i % 10);
        }
        for (uint32_t k = 0; k < 3; k++) {
            size_t len = 0;

            for (int pass = 0; pass < 2; pass++) {
                struct digest *t = pass ? &fd[k] : &d;
                int64_t at = 0;

                if (g_table[k].kind == RING_FIELD_RAGGED)
                    for (uint32_t i = 0; i <= count; i++) {
                        digest_update_u64(t, (uint64_t)at);
                        if (i < count)
                            at += fake_rows(seq, i);
                    }
            }
            for (uint32_t i = 0; i < count; i++) {
                uint64_t bytes = g_table[k].kind == RING_FIELD_RAGGED
                                     ? fake_rows(seq, i) * g_table[k].item_bytes
                                     : g_table[k].item_bytes;

                for (uint64_t j = 0; j < bytes; j++)
                    buf[len++] = fake_field_byte(&h, k, epoch, seq, i, j);
            }
            digest_update(&d, buf, len);
            digest_update(&fd[k], buf, len);
        }
        if (++seq == BPE)
            epoch++, seq = 0;
    }
    for (int k = 0; k < 3; k++)
        per[k] = digest_final(&fd[k]);
    return digest_final(&d);
}

static void stop_all(struct fake *f)
{
    fake_stop(f);
    for (int k = 0; k < g_nrings; k++) {
        fake_pub_stop(&g_pubs[k]);
        fake_ring_free(&g_rings[k]);
    }
    g_nrings = 0;
}

int main(int argc, char **argv)
{
    static char out[1 << 16], err[1 << 16];
    char dump[] = "/tmp/rf-read-dump-XXXXXX", want[128], hex[DIGEST_HEX_SIZE], line[256];
    uint64_t samples, h;
    struct fake f;
    FILE *df;
    int dfd, rc, lines = 0, dump_ok = 1;

    if (argc != 2)
        tap_bail("usage: test_ringfeed_read PATH-TO-ringfeed-read");
    unsetenv("RANK");
    unsetenv("WORLD_SIZE");
    if (fake_start(&f, NULL, handler, NULL) < 0)
        tap_bail("cannot listen on a Unix socket");
    dfd = mkstemp(dump);
    close(dfd);

    /* 2 epochs from epoch 2 batch 3: batches 3, 4 of epoch 2 and 0..4 of 3 */
    h = expected(2, 3, 7, &samples);
    rc = run((char *[]){argv[1], "--socket", f.path, "--dataset", "fm", "--batch", "8",
                        "--epochs", "2", "--start-epoch", "2", "--start-seq", "3",
                        "--dump-indices", dump, "--json", NULL},
             out, sizeof(out), err, sizeof(err));
    if (!tap_ok(rc == 0, "--json run exits 0"))
        tap_diag("  status %d", rc), diag_lines("stderr", err);
    diag_lines("stdout", out);
    snprintf(want, sizeof(want), "\"digest\":\"%s\"", digest_hex(h, hex));
    TAP_OK(strstr(out, want), "digest is XXH64 of indices, labels and pixels in order");
    snprintf(want, sizeof(want), "{\"samples\":%" PRIu64 ",\"batches\":7,", samples);
    TAP_OK(strncmp(out, want, strlen(want)) == 0, "JSON starts with samples and batches");
    TAP_OK(strstr(out, "\"epochs\":[{\"epoch\":2,\"samples\":16,\"batches\":2,") &&
               strstr(out, "},{\"epoch\":3,\"samples\":39,\"batches\":5,") &&
               out[strlen(out) - 1] == '\n' && out[strlen(out) - 2] == '}',
           "JSON has one record per epoch");
    TAP_OK(strstr(out, "\"first_batch_ms\":") && strstr(out, "\"next_ready_p99_us\":") &&
               strstr(out, "\"samples_per_s\":") && strstr(out, "\"wait_s\":") &&
               strstr(out, "\"reconnects\":0"),
           "JSON has the timing figures");
    TAP_OK(fake_wait_lines(&f, 1) == 0 && strstr(f.lines[0], " epoch=2") &&
               strstr(f.lines[0], " seq=3"),
           "attached at the start point");
    TAP_IS_INT(atomic_load(&g_rings[0].hdr->released), 7, "read exactly 7 batches, then stopped");

    df = fopen(dump, "r");
    for (uint64_t g = 0, e = 2, s = 3; df && g < 7; g++) {
        struct ring_hdr hh = {.batch = BATCH};

        for (uint32_t i = 0; i < fake_count(&hh, s); i++) {
            char exp[128];

            snprintf(exp, sizeof(exp), "%" PRIu64 " %" PRIu64 " %" PRIu64 " %u %u\n", e, s,
                     fake_index(e, s, i), i % 10, i == 0 ? 2u : 0u);
            if (!fgets(line, sizeof(line), df) || strcmp(line, exp) != 0) {
                if (dump_ok)
                    tap_diag("  dump line %d: \"%.*s\", want \"%.*s\"", lines,
                             (int)strcspn(line, "\n"), line, (int)strcspn(exp, "\n"), exp);
                dump_ok = 0;
            }
            lines++;
        }
        if (++s == BPE)
            e++, s = 0;
    }
    TAP_OK(df && dump_ok && !fgets(line, sizeof(line), df),
           "--dump-indices: epoch, sequence, index, label, flags per sample, in order");
    TAP_IS_INT(lines, samples, "  one line per sample");
    if (df)
        fclose(df);
    stop_all(&f);

    /* the human output, and a second run gives the same digest */
    fake_start(&f, NULL, handler, NULL);
    rc = run((char *[]){argv[1], "--socket", f.path, "--dataset", "fm", "--batch", "8",
                        "--epochs", "2", "--start-epoch", "2", "--start-seq", "3", NULL},
             out, sizeof(out), err, sizeof(err));
    TAP_IS_INT(rc, 0, "human run exits 0");
    diag_lines("stdout", out);
    snprintf(want, sizeof(want), "\ndigest: %s\n", digest_hex(h, hex));
    TAP_OK(strstr(out, want) && out[strlen(out) - strlen(want) + 1] == 'd',
           "last line: digest, the same as the first run");
    TAP_OK(strncmp(out, "epoch 2: 16 samples in ", 23) == 0 && strstr(out, "\nepoch 3: 39 samples in "),
           "one line per epoch");
    TAP_OK(strstr(out, "\nsamples/s: ") && strstr(out, "\nfirst batch: ") &&
               strstr(out, "\nrf_next ready: ") && strstr(out, "\nsamples: 55\n"),
           "samples/s, first batch and rf_next latency lines");
    stop_all(&f);

    /* version 3: an older dataset's image and label, the same digest */
    table();
    g_fields = 2;
    fake_start(&f, NULL, handler, NULL);
    rc = run((char *[]){argv[1], "--socket", f.path, "--dataset", "fm", "--batch", "8",
                        "--epochs", "2", "--start-epoch", "2", "--start-seq", "3", NULL},
             out, sizeof(out), err, sizeof(err));
    TAP_IS_INT(rc, 0, "version 3, image and label: exits 0");
    diag_lines("stderr", err);
    snprintf(want, sizeof(want), "\ndigest: %s\n", digest_hex(h, hex));
    TAP_OK(strstr(out, want) && !strstr(out, "\nfield "),
           "version 3, image and label: the version-2 digest, no field lines");
    stop_all(&f);

    /* version 3, named fields: every column, and each field's own */
    table();
    g_fields = 3;
    {
        uint64_t per[3];
        char fl[3][128];

        h = expected_fields(2, 3, 7, per);
        fake_start(&f, NULL, handler, NULL);
        rc = run((char *[]){argv[1], "--socket", f.path, "--dataset", "det", "--batch", "8",
                            "--epochs", "2", "--start-epoch", "2", "--start-seq", "3", NULL},
                 out, sizeof(out), err, sizeof(err));
        TAP_IS_INT(rc, 0, "named fields: exits 0");
        diag_lines("stderr", err);
        diag_lines("stdout", out);
        for (int k = 0; k < 3; k++)
            snprintf(fl[k], sizeof(fl[k]), "\nfield %s: %s\n", g_table[k].name,
                     digest_hex(per[k], hex));
        snprintf(want, sizeof(want), "\ndigest: %s\n", digest_hex(h, hex));
        TAP_OK(strstr(out, want), "named fields: the digest covers every column");
        TAP_OK(strstr(out, fl[0]) && strstr(out, fl[1]) && strstr(out, fl[2]) &&
                   strstr(out, fl[2]) < strstr(out, want),
               "named fields: a digest line per field, before the combined one");
        stop_all(&f);
        fake_start(&f, NULL, handler, NULL);
        rc = run((char *[]){argv[1], "--socket", f.path, "--dataset", "det", "--batch", "8",
                            "--epochs", "2", "--start-epoch", "2", "--start-seq", "3",
                            "--json", NULL},
                 out, sizeof(out), err, sizeof(err));
        snprintf(want, sizeof(want), "\"fields\":[{\"name\":\"image\",\"digest\":\"%s\"},",
                 digest_hex(per[0], hex));
        TAP_OK(rc == 0 && strstr(out, want), "named fields: --json has a fields array");
        stop_all(&f);
    }
    g_fields = 0;

    /* refused */
    g_refuse = 1;
    fake_start(&f, NULL, handler, NULL);
    rc = run((char *[]){argv[1], "--socket", f.path, "--dataset", "nope", "--batch", "8",
                        "--epochs", "1", NULL},
             out, sizeof(out), err, sizeof(err));
    TAP_IS_INT(rc, 1, "refused attach exits 1");
    TAP_OK(strstr(err, "no dataset \"nope\" in the catalogue"), "  with the daemon's message");
    stop_all(&f);

    rc = run((char *[]){argv[1], "--dataset", "fm", "--batch", "8", NULL}, out, sizeof(out),
             err, sizeof(err));
    TAP_IS_INT(rc, 2, "missing --epochs exits 2");
    rc = run((char *[]){argv[1], "--dataset", "fm", "--batch", "x", "--epochs", "1", NULL}, out,
             sizeof(out), err, sizeof(err));
    TAP_IS_INT(rc, 2, "bad --batch exits 2");
    TAP_OK(strstr(err, "--batch \"x\""), "  naming the option");
    rc = run((char *[]){argv[1], "--dataset", "fm", "--batch", "8", "--epochs", "1", "--rank",
                        "1", NULL},
             out, sizeof(out), err, sizeof(err));
    TAP_IS_INT(rc, 2, "--rank without --world exits 2");
    unlink(dump);
    return tap_done();
}
