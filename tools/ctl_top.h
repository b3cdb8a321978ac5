/*
 * ctl_top.h - `ringfeedctl top`: a refreshing view of a running ringfeedd
 * (ctl_top.c), its figures computed by top_calc.h.
 */
#ifndef RINGFEED_TOOLS_CTL_TOP_H
#define RINGFEED_TOOLS_CTL_TOP_H

#include <stdio.h>

/* top's usage and its options' help (indented by indent blanks), for
 * ringfeedctl --help and top --help. */
#define CTL_TOP_USAGE "top [--once] [--interval SECONDS]"
void ctl_top_help(FILE *f, int indent);

/*
 * Runs `ringfeedctl [--socket PATH] top [--once] [--interval SECONDS]`;
 * argv[0..argc) are the words after "top".  socket_path is --socket's
 * value or NULL (libringfeed's defaults).  Returns the exit status: 0
 * quit by a key, or --once printed its frame; 1 the daemon could not be
 * reached, went away or answered ERR (the message on stderr); 2 bad usage.
 * The terminal, when it was put in raw mode, is restored on every path,
 * SIGINT, SIGTERM and SIGHUP included.
 */
int ctl_top_main(const char *prog, const char *socket_path, int argc, char **argv);

#endif
