/*
 * catalog.h - the catalogue (catalog.c): the datasets the config names, opened to
 * learn their shape and size, and the quarantine list of bad samples.
 */
#ifndef RINGFEED_DAEMON_CATALOG_H
#define RINGFEED_DAEMON_CATALOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "wire.h"

struct daemon;
struct dataset;
struct plugin_set;
struct conf;
struct rf_err;

/* How catalog_failed_reason's text for a dataset still being fetched
 * begins (stream.c words its refusal by it). */
#define CATALOG_FETCHING "still fetching: "

struct catalog_entry {
    char name[65];
    char dir[4096];
    struct dataset *ds;        /* NULL: a hole (catalog.c) */
    bool retired;              /* a reload removed it; clients still read it */
    char failed[256];          /* "" or why its files can no longer be read as
                                * opened (catalog_fail): not offered again */
    char failed_name[65];      /* the name it failed under (kept in a hole) */
    bool on_demand;            /* opened by OPEN (ringfeedd --user, userd.c), not
                                * named by the config: a reload leaves it be */
    char url[1024];            /* a remote dataset's URL (the config's value; dir
                                * is then its folder in the cache), else "" */
    bool fetching;             /* a hole waiting for remote_fetch: failed_name
                                * and url say which; not offered, not failing */
    char why[1536];            /* catalog_failed_reason's text for a fetching slot */
};


/* Samples quarantined for killing workers (owned by catalog.c): every
 * worker is told at start and when one is added; a dataset turned into a
 * hole forgets its own. */
struct quarantine {
    struct wire_quarantine *items;
    uint32_t n;
    uint64_t total;            /* quarantined since start (STATS) */
};

int catalog_open(struct daemon *d);
void catalog_close(struct daemon *d);
int catalog_find(const struct daemon *d, const char *name);
/* The names, space separated, for error messages. */
void catalog_names(const struct daemon *d, char *buf, size_t cap);
/* Is entry i offered to ATTACH (open, not removed by a reload)? */
bool catalog_offers(const struct daemon *d, uint32_t i);
uint32_t catalog_offered(const struct daemon *d);
/* Configured datasets failed now: at start, or while served (catalog_fail),
 * until a reload opens them again. */
uint32_t catalog_failing(const struct daemon *d);
/* The name of the k-th failing dataset (0 <= k < catalog_failing), or NULL. */
const char *catalog_failing_name(const struct daemon *d, uint32_t k);
/* Applies a reloaded config's datasets (see catalog.c); *added says the
 * workers must restart to learn new ones.  On error nothing changed. */
int catalog_reload(struct daemon *d, const struct conf *nc, bool *added, struct rf_err *err);

/*
 * The config's plugins (plugin.NAME = PATH) loaded into *out, which must
 * be empty (daemon/worker/plugin.h checks each file: it loads, has the
 * descriptor, this ABI and its NAME).  Returns 0, or a negative errno
 * with err naming the line's key and the file; *out is empty then.
 */
int catalog_load_plugins(const struct conf *cf, struct plugin_set *out, struct rf_err *err);
/* Places the open dataset ds in a free slot as name (dir its folder) and
 * logs it with how (e.g. "added by the reload").  Ownership of ds passes to
 * the catalogue.  Returns the slot, or -ENOSPC when every slot holds a
 * dataset (ds is then the caller's still).  The workers do not know it yet:
 * the caller restarts them (pool_roll). */
int catalog_add(struct daemon *d, const char *name, const char *dir, struct dataset *ds,
                bool on_demand, const char *how);
/* The offered entry whose folder is dir (compared as given and as
 * realpath), or -ENOENT. */
int catalog_find_dir(const struct daemon *d, const char *dir);
/* Retires the on-demand entries no client uses (catalog_sweep then closes
 * them): room for new ones.  Returns how many. */
uint32_t catalog_retire_unused(struct daemon *d);
/* Entry i's files changed under it (a worker saw it): fails its streams,
 * stops offering it, logs why once.  A reload that names it opens it anew. */
void catalog_fail(struct daemon *d, uint32_t i, const char *why);
/* Why the configured dataset called name failed, or NULL. */
const char *catalog_failed_reason(const struct daemon *d, const char *name);
/* Bytes of every shard of every open entry (workers pick their read
 * backend by it, daemon/worker/io.h). */
uint64_t catalog_data_bytes(const struct daemon *d);
/* Slot's remote fetch ended: place ds (its folder in the cache dir) there
 * and restart the workers (pool_roll): 0; or -ESTALE when a reload dropped
 * the slot meanwhile (ds closed).  catalog_fetch_failed fails the slot
 * alone with why. */
int catalog_fetched(struct daemon *d, uint32_t slot, const char *name, const char *url,
                    const char *dir, struct dataset *ds);
void catalog_fetch_failed(struct daemon *d, uint32_t slot, const char *name, const char *url,
                          const char *why);
/* Starts the remote fetches catalog_open marked (the loop runs now). */
void catalog_start_fetches(struct daemon *d);
/* Closes removed datasets no client reads any more. */
void catalog_sweep(struct daemon *d);


/* Adds a sample to the quarantine list; returns 0 or -ENOMEM (then it is
 * still counted, and still sent to the live workers by pool.c). */
int catalog_quarantine_add(struct daemon *d, uint32_t dataset_id, uint64_t index);

#endif
