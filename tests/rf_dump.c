/*
 * rf_dump.c - reads a ringfeed stream with libringfeed and writes every
 * delivered sample's pixels to a file, for the integration tests that
 * compare the workers' images with Pillow's (tests/integration/test_jpeg.py).
 *
 *   rf_dump --socket PATH --dataset NAME --epochs E OUT [--transform T]
 *           [--size S] [--batch B] [--seed N] [--no-shuffle] [--params P]
 *
 * OUT gets, per delivered sample in order, a 24-byte header (little endian:
 * u64 dataset index, i32 label, u32 flags RF_SAMPLE_*, u64 epoch) and then
 * its sample_bytes bytes.  stdout gets one line of JSON:
 *     {"samples":n,"sample_bytes":b,"layout":l,"shape":[a,b,c],"dtype":"u8"}
 * (dtype: rf_dtype_name of the batches' element type, null without one).
 * Exit 0; 1 when the stream fails (rf_last_error on stderr); 2 bad usage.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ringfeed.h"

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        { "socket", required_argument, NULL, 's' }, { "dataset", required_argument, NULL, 'd' },
        { "epochs", required_argument, NULL, 'e' }, { "transform", required_argument, NULL, 't' },
        { "size", required_argument, NULL, 'z' },   { "batch", required_argument, NULL, 'b' },
        { "seed", required_argument, NULL, 'r' },   { "no-shuffle", no_argument, NULL, 'n' },
        { "params", required_argument, NULL, 'p' }, { NULL, 0, NULL, 0 },
    };
    struct rf_options o;
    struct rf_client *c = NULL;
    struct rf_stats st;
    struct rf_batch b;
    uint64_t epochs = 1, samples = 0, first_epoch = 0;
    size_t sample_bytes = 0;
    uint32_t layout = 0, dtype = 0, shape[3] = { 0, 0, 0 };
    const char *dtype_name;
    FILE *out;
    int opt, rc;

    rf_options_init(&o);
    while ((opt = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (opt) {
        case 's': o.socket = optarg; break;
        case 'd': o.dataset = optarg; break;
        case 'e': epochs = strtoull(optarg, NULL, 10); break;
        case 't': o.transform = optarg; break;
        case 'z': o.size = (uint32_t)strtoul(optarg, NULL, 10); break;
        case 'b': o.batch = (uint32_t)strtoul(optarg, NULL, 10); break;
        case 'r': o.seed = strtoull(optarg, NULL, 10); break;
        case 'n': o.shuffle = 0; break;
        case 'p': o.params = optarg; break;
        default: return 2;
        }
    }
    if (optind + 1 != argc || !o.dataset || epochs < 1) {
        fprintf(stderr, "usage: rf_dump --socket PATH --dataset NAME --epochs E OUT [...]\n");
        return 2;
    }
    out = fopen(argv[optind], "wb");
    if (!out) {
        perror(argv[optind]);
        return 2;
    }
    rc = rf_open(&o, &c);
    if (rc < 0) {
        fprintf(stderr, "rf_dump: %s\n", rf_last_error(c));
        rf_close(c);
        return 1;
    }
    for (;;) {
        rc = rf_next(c, &b, -1);
        if (rc < 0)
            break;
        if (samples == 0)
            first_epoch = b.epoch;
        if (b.epoch >= first_epoch + epochs) {
            rf_release(c, &b);
            break;
        }
        sample_bytes = b.sample_bytes;
        layout = b.layout;
        dtype = b.dtype;
        memcpy(shape, b.shape, sizeof(shape));
        for (uint32_t i = 0; i < b.count; i++) {
            uint8_t hdr[24];
            uint64_t idx = b.samples[i].index, ep = b.epoch;
            uint32_t lab = (uint32_t)b.samples[i].label, fl = b.samples[i].flags;

            for (int k = 0; k < 8; k++) {
                hdr[k] = (uint8_t)(idx >> (8 * k));
                hdr[16 + k] = (uint8_t)(ep >> (8 * k));
            }
            for (int k = 0; k < 4; k++) {
                hdr[8 + k] = (uint8_t)(lab >> (8 * k));
                hdr[12 + k] = (uint8_t)(fl >> (8 * k));
            }
            fwrite(hdr, 1, sizeof(hdr), out);
            fwrite(b.data + (size_t)i * b.sample_bytes, 1, b.sample_bytes, out);
        }
        samples += b.count;
        rf_release(c, &b);
        rf_get_stats(c, &st);
        if (b.seq + 1 == st.batches_per_epoch && b.epoch + 1 >= first_epoch + epochs)
            break;
    }
    if (rc < 0) {
        fprintf(stderr, "rf_dump: %s\n", rf_last_error(c));
        rf_close(c);
        fclose(out);
        return 1;
    }
    rf_close(c);
    if (fclose(out) != 0) {
        perror(argv[optind]);
        return 1;
    }
    dtype_name = rf_dtype_name(dtype);
    printf("{\"samples\":%llu,\"sample_bytes\":%zu,\"layout\":%u,\"shape\":[%u,%u,%u],"
           "\"dtype\":%s%s%s}\n",
           (unsigned long long)samples, sample_bytes, layout, shape[0], shape[1], shape[2],
           dtype_name ? "\"" : "", dtype_name ? dtype_name : "null", dtype_name ? "\"" : "");
    return 0;
}
