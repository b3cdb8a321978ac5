/*
 * checkconf.h - `ringfeedd --check-config`: a configuration checked
 * without starting anything, every problem named with its file and line
 * (as `nginx -t`), for operators and for the unit's ExecReload.
 */
#ifndef RINGFEED_DAEMON_CHECKCONF_H
#define RINGFEED_DAEMON_CHECKCONF_H

#include <stdio.h>

#include "conf.h"

/*
 * Checks the file at path (NULL: none) with the command line's flags over
 * it, as the daemon would load them: every line the parser refuses (each
 * reported, the check going on past it), the flags' merge, every plugin
 * (loaded and checked), and every dataset (opened; one that does not open
 * is a warning, not a problem: the daemon starts without it).  Writes one
 * line per problem or warning to err, and a summary to out.  Returns the
 * exit status: 0 when nothing is wrong, 1 otherwise.
 */
int checkconf_run(const char *path, const struct conf *flags, FILE *out, FILE *err);

#endif
