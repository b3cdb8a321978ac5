/*
 * confload.h - the daemon's configuration as files: the --config file and
 * its drop-in folder, FILE.d/ (e.g. /etc/ringfeed/ringfeedd.conf.d/):
 * every "*.conf" file in it, in byte order of their names, each parsed on
 * its own (a problem names its own file and line) and laid over the ones
 * before (conf_merge: a later file's key wins, datasets, recipes and
 * plugins by name).  A key set again by a later file is said once per
 * load (confload_note_fn), naming the file that wins: an operator's
 * override of a packaged default is visible.  The command line's flags go over
 * all of it (main.c).
 */
#ifndef RINGFEED_DAEMON_CONFLOAD_H
#define RINGFEED_DAEMON_CONFLOAD_H

#include <stddef.h>

#include "conf.h"
#include "err.h"

#define CONFLOAD_DROPINS_MAX 64

/*
 * The drop-in files of config file path, sorted: their paths into
 * names[0..n) (each PATH_MAX bytes).  Returns n (0 without the folder),
 * or -E2BIG past CONFLOAD_DROPINS_MAX files (err names the folder), or a
 * negative errno from reading the folder.
 */
int confload_dropins(const char *path, char (*names)[4096], unsigned cap, struct rf_err *err);

/* Called for a key a later file sets again: what (e.g. "workers",
 * "dataset.fm") and the file whose value wins over the files before it. */
typedef void confload_note_fn(void *arg, const char *what, const char *winner);

/*
 * Lays src (read from file) over dst (the files before it): conf_merge,
 * with note (may be NULL) called for each key both set.  Returns
 * conf_merge's result.
 */
int confload_layer(struct conf *dst, const struct conf *src, const char *file,
                   confload_note_fn *note, void *arg, struct rf_err *err);

#endif
