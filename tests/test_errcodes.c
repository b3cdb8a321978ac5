/*
 * test_errcodes.c - the wire error-code table: the start-up check passes,
 * names and numbers are unique, every row has an errno and a message, the
 * lookups agree with the table, and the shipped names keep their numbers
 * and errnos (a rename or renumbering fails here: wire codes never change
 * meaning).
 */
#include <errno.h>
#include <string.h>

#include "errcodes.h"
#include "tap.h"

struct row {
    enum ctl_errcode code;
    int num;
    const char *name;
    int err;
    const char *msg;
};

static const struct row rows[] = {
#define ROW_(sym, num, name, err, msg) {CTL_E_##sym, num, name, err, msg},
    CTL_ERRCODE_MAP(ROW_)
#undef ROW_
};
#define NROWS (sizeof(rows) / sizeof(rows[0]))

/* What shipped; append, never edit. */
static const struct {
    int num;
    const char *name;
    int err;
} shipped[] = {
    {1, "bad-verb", -EOPNOTSUPP}, {2, "bad-arg", -EINVAL},     {3, "too-long", -EMSGSIZE},
    {4, "bad-line", -EPROTO},     {5, "no-dataset", -ENOENT},  {6, "over-budget", -ENOMEM},
    {7, "version", -EPROTONOSUPPORT}, {8, "denied", -EACCES},  {9, "busy", -EBUSY},
    {10, "internal", -EIO},       {11, "closing", -ESHUTDOWN}, {12, "too-many", -EUSERS},
    {13, "bad-dataset", -EBADMSG},
};

int main(void)
{
    struct rf_err e = {{0}};
    int dup_names = 0, dup_nums = 0;

    TAP_IS_INT(ctl_errcode_check(&e), 0, "the start-up check passes");
    if (e.msg[0])
        tap_diag("check said: %s", e.msg);
    TAP_OK(NROWS >= sizeof(shipped) / sizeof(shipped[0]), "no shipped row was removed");

    for (size_t i = 0; i < NROWS; i++) {
        const struct row *r = &rows[i];

        TAP_OK(r->num > 0 && (int)r->code == r->num, "number positive, enum equals it");
        TAP_OK(r->err < 0, "errno is negative");
        TAP_OK(r->msg && r->msg[0], "message is non-empty");
        TAP_OK(strlen(r->name) > 0 && strlen(r->name) <= CTL_ERRCODE_NAME_MAX &&
                   strspn(r->name, "abcdefghijklmnopqrstuvwxyz0123456789-") == strlen(r->name),
               "name is 1..31 bytes of [a-z0-9-]");
        TAP_IS_INT(ctl_errcode_from_name(r->name, strlen(r->name)), r->code, "name -> code");
        TAP_IS_STR(ctl_errcode_name(r->code), r->name, "code -> name");
        TAP_IS_INT(ctl_errcode_errno(r->code), r->err, "code -> errno");
        TAP_IS_STR(ctl_errcode_message(r->code), r->msg, "code -> message");
        for (size_t j = 0; j < i; j++) {
            dup_names += strcmp(rows[j].name, r->name) == 0;
            dup_nums += rows[j].num == r->num;
        }
    }
    TAP_IS_INT(dup_names, 0, "names are unique");
    TAP_IS_INT(dup_nums, 0, "numbers are unique");

    for (size_t i = 0; i < sizeof(shipped) / sizeof(shipped[0]); i++) {
        enum ctl_errcode c = ctl_errcode_from_name(shipped[i].name, strlen(shipped[i].name));

        TAP_IS_INT(c, shipped[i].num, "a shipped name keeps its number");
        TAP_IS_INT(ctl_errcode_errno(c), shipped[i].err, "a shipped name keeps its errno");
    }

    TAP_IS_INT(ctl_errcode_from_name("no-such-code", 12), CTL_E_NONE, "unknown name -> NONE");
    TAP_IS_INT(ctl_errcode_from_name("bad-verb", 7), CTL_E_NONE, "a prefix is not a name");
    TAP_IS_INT(ctl_errcode_from_name("bad-verbs", 9), CTL_E_NONE, "a longer word is not a name");
    TAP_IS_INT(ctl_errcode_from_name("BAD-VERB", 8), CTL_E_NONE, "names are case-sensitive");
    TAP_IS_INT(ctl_errcode_from_name("", 0), CTL_E_NONE, "empty name -> NONE");
    TAP_OK(ctl_errcode_name(CTL_E_NONE) == NULL, "NONE has no name");
    TAP_OK(ctl_errcode_name((enum ctl_errcode)9999) == NULL, "out-of-table number has no name");
    TAP_OK(ctl_errcode_message((enum ctl_errcode)9999) == NULL, "nor a message");
    TAP_IS_INT(ctl_errcode_errno(CTL_E_NONE), -EPROTO, "NONE maps to -EPROTO");
    TAP_IS_INT(ctl_errcode_errno((enum ctl_errcode)-3), -EPROTO, "a negative number too");
    return tap_done();
}
