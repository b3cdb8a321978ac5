/*
 * folder.c - a dataset named by its folder rather than by a catalogue
 * name: which daemon serves it, and under what name.
 *
 * The rule (client_is_folder): rf_options.dataset is a folder when it
 * holds a '/' (catalogue names never do: [A-Za-z0-9._-]), or when it is an
 * existing folder holding a MANIFEST (so `ringfeed-read --dataset pack`
 * in the folder above the pack works too).  Anything else is a name, as
 * before.  rf_open() resolves the folder once (realpath: absolute, links
 * followed), and that path is what every daemon is asked about.
 *
 * Which daemon (client_folder_open):
 *   1. the control socket the options give (client_socket_path: the
 *      system daemon, or whatever RINGFEED_SOCKET names) is asked
 *      OPEN <folder>; an answer "OK dataset=NAME" means it serves the
 *      folder (a system daemon whose config names it, or a user daemon);
 *   2. otherwise, when that daemon is catalogue-only (ERR catalogue-only),
 *      predates OPEN (ERR bad-verb), refuses this user (ERR denied), or no
 *      daemon is there at all (the connect fails), the user's own daemon
 *      is asked, started first if none answers (spawn.c);
 *   3. any other refusal (the folder is not a dataset: ERR no-dataset or
 *      bad-dataset naming it) is the answer, and rf_open fails with it.
 * The stream then attaches to that daemon under NAME.  A reconnect asks
 * again the same way, so a user daemon that went away is started anew.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client.h"
#include "ctl.h"
#include "spawn.h"
#include "userdir.h"

int client_is_folder(const char *dataset)
{
    char manifest[PATH_MAX];
    struct stat sb;
    int n;

    if (!dataset || !dataset[0])
        return 0;
    if (strchr(dataset, '/'))
        return 1;
    n = snprintf(manifest, sizeof(manifest), "%s/MANIFEST", dataset);
    return n > 0 && (size_t)n < sizeof(manifest) && stat(manifest, &sb) == 0 &&
           S_ISREG(sb.st_mode);
}

int client_folder_init(struct rf_client *c)
{
    char real[PATH_MAX];

    if (!realpath(c->opt.dataset, real))
        return rf_err_set(&c->err, -errno,
                          "dataset folder %s: %s (a dataset with a '/' is a folder; names "
                          "from a daemon's catalogue have none)", c->opt.dataset,
                          strerror(errno));
    c->folder = strdup(real);
    if (!c->folder)
        return rf_err_set(&c->err, -ENOMEM, "out of memory");
    snprintf(c->home, sizeof(c->home), "%s", c->path);
    return 0;
}

/*
 * Asks the daemon at sock for the name it serves folder under, into name.
 * Returns 0; or -errno with err and *code the daemon's ERR code
 * (CTL_E_NONE when no answer came: *answered 0).
 */
static int ask_open(const char *sock, const char *folder, char *name, enum ctl_errcode *code,
                    int *answered, struct rf_err *err)
{
    char line[CTL_LINE_MAX + 1], reply[CTL_LINE_MAX + 1];
    struct ctl_reply rep;
    const char *text;
    size_t used;
    ssize_t n;

    *code = CTL_E_NONE;
    *answered = 0;
    n = ctl_format_open(folder, strlen(folder), line, sizeof(line));
    if (n < 0)
        return rf_err_set(err, (int)n, "dataset folder %s: its path is too long for the "
                          "control protocol (%d bytes escaped at most)", folder,
                          CTL_LINE_MAX - 6);
    n = client_ask(sock, "OPEN", line, (size_t)n, reply, sizeof(reply), err);
    if (n < 0)
        return (int)n;
    *answered = 1;
    if (ctl_parse_reply(reply, (size_t)n, &rep, &used) != CTL_DONE || rep.multi)
        return rf_err_set(err, -EPROTO, "the daemon at %s answered OPEN with \"%.*s\"", sock,
                          (int)(n > 80 ? 80 : n - 1), reply);
    text = reply + rep.text_off;
    if (!rep.ok) {
        *code = rep.code;
        return rf_err_set(err, rep.err, "the daemon at %s refused OPEN: %.*s (%.*s)", sock,
                          (int)rep.text_len, text, (int)rep.name_len, reply + rep.name_off);
    }
    if (rep.text_len <= 8 || memcmp(text, "dataset=", 8) != 0 ||
        !ctl_dataset_name_ok(text + 8, rep.text_len - 8))
        return rf_err_set(err, -EPROTO, "the daemon at %s answered OPEN with \"OK %.*s\", not "
                          "\"OK dataset=NAME\"", sock, (int)(rep.text_len > 80 ? 80
                                                                             : rep.text_len),
                          text);
    memcpy(name, text + 8, rep.text_len - 8);
    name[rep.text_len - 8] = '\0';
    return 0;
}

/* Does a refusal (or no answer) from the daemon at the given socket send
 * the client to the user's own daemon?  (file-top list, step 2) */
static int go_to_user_daemon(int rc, enum ctl_errcode code, int answered)
{
    if (!answered)
        return rc == -ENOENT || rc == -ECONNREFUSED || rc == -EACCES || rc == -EPERM ||
               rc == -ECONNRESET || rc == -ENOTDIR;
    return code == CTL_E_CATALOGUE_ONLY || code == CTL_E_BAD_VERB || code == CTL_E_DENIED;
}

int client_folder_open(struct rf_client *c, struct rf_err *err)
{
    struct rf_err first, second;
    struct userdir ud;
    enum ctl_errcode code;
    int rc, answered;

    rc = ask_open(c->home, c->folder, c->dsname, &code, &answered, &first);
    if (rc == 0) {
        snprintf(c->path, sizeof(c->path), "%s", c->home);
        return 0;
    }
    if (!go_to_user_daemon(rc, code, answered))
        return rf_err_set(err, rc, "%s", first.msg); /* the daemon's, naming the folder */
    rc = userdir_paths(&ud, geteuid(), &second);
    if (rc == 0 && strcmp(ud.socket, c->home) == 0) /* that was the user daemon */
        return rf_err_set(err, -ECONNREFUSED, "dataset folder %s: %s", c->folder, first.msg);
    if (rc == 0)
        rc = spawn_user_daemon(&ud, &second);
    if (rc < 0)
        return rf_err_set(err, rc, "dataset folder %s: %s; and your own daemon could not be "
                          "started: %s", c->folder, first.msg, second.msg);
    rc = ask_open(ud.socket, c->folder, c->dsname, &code, &answered, &second);
    if (rc < 0 && answered)
        return rf_err_set(err, rc, "%s", second.msg);
    if (rc < 0)
        return rf_err_set(err, rc, "dataset folder %s: %s", c->folder, second.msg);
    snprintf(c->path, sizeof(c->path), "%s", ud.socket);
    return 0;
}
