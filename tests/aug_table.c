/*
 * aug_table.c - prints proto/aug_spec.h's table of augmentation ops as the
 * scdoc list ringfeed(7) holds under AUGMENTATION OPS: test_man.py checks
 * the page against it (one source of truth: the table), and after a
 * change to the table its output is what goes into the page.
 *
 *   aug_table      the list on stdout; exit 0 (1 if the table is bad)
 */
#include <stdio.h>
#include <string.h>

#include "aug_spec.h"

/* s with scdoc's markup characters escaped. */
static void put_escaped(const char *s)
{
    for (; *s; s++) {
        if (strchr("_*\\", *s))
            putchar('\\');
        putchar(*s);
    }
}

int main(void)
{
    struct rf_err err = {0};

    if (aug_table_check(&err) < 0) {
        fprintf(stderr, "aug_table: %s\n", err.msg);
        return 1;
    }
    for (uint32_t id = 0; id < AUG_OP_COUNT; id++) {
        const char *name;
        char def[64], valid[256];
        unsigned k = 0;

        printf("%s*%s* (%s)\n", id ? "\n" : "", aug_op_name(id),
               id == AUG_PLUGIN ? "an op of the daemon's config: refused on an image with "
                                  "boxes or masks"
               : aug_op_geometric(id) ? "moves pixels: boxes and masks follow"
                                      : "photometric: boxes and masks stay");
        /* one indented paragraph a key, a blank line between */
        for (; aug_op_key_doc(id, k, &name, def, sizeof(def), valid, sizeof(valid)) == 0; k++) {
            printf("%s\t*", k ? "\n" : "");
            put_escaped(name);
            printf("* = ");
            put_escaped(def);
            printf(": ");
            put_escaped(valid);
            printf("\n");
        }
    }
    return 0;
}
