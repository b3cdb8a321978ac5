/*
 * meta.h - the replies of the control verbs that describe a dataset rather
 * than stream it: CLASSES (its class names), SOURCES (the files its
 * samples were packed from, proto/sources.h) and SUBSETS (its named index
 * sets, proto/subset.h, read from its MANIFEST as it is now).  server.c parses the request
 * and sends what these build.
 */
#ifndef RINGFEED_DAEMON_META_H
#define RINGFEED_DAEMON_META_H

#include <stddef.h>

#include "ctl.h"
#include "daemon.h"

/*
 * Builds the whole reply to req (CTL_VERB_CLASSES, CTL_VERB_SOURCES or CTL_VERB_SUBSETS),
 * header and lines, in a malloc'd buffer: *out (the caller frees it) and
 * *len.  Returns 0, or -1 with *code and msg (cap bytes) for an ERR reply:
 * CTL_E_NO_DATASET for a name the catalogue does not offer (or a dataset
 * without a source list: the message says which), CTL_E_BAD_ARG for a
 * start past the samples, CTL_E_BAD_DATASET for a source list that fails
 * its checks, CTL_E_INTERNAL when out of memory or over the protocol's
 * bounds.  The first SOURCES of a dataset reads its list whole (dataset.h),
 * on the daemon's loop: ~0.1 s for ImageNet's 1.28 M lines.
 */
int meta_reply(struct daemon *d, const struct ctl_req *req, char **out, size_t *len,
               enum ctl_errcode *code, char *msg, size_t cap);

#endif
