/*
 * env.c - the client's defaults taken from the environment: the control
 * socket's path and the process's rank and world size.
 *
 * Socket: the option, else $RINGFEED_SOCKET, else
 * $XDG_RUNTIME_DIR/ringfeed.sock when that exists, else
 * /run/ringfeed/ringfeed.sock (the system service's socket).  A user's own
 * daemon listens in XDG_RUNTIME_DIR; in a login session where none does,
 * the system daemon is the one meant.  Empty variables count as unset.
 *
 * Rank and world follow torchrun (RANK, WORLD_SIZE; LOCAL_RANK only names
 * the GPU and is not read here), then Open MPI (OMPI_COMM_WORLD_RANK,
 * OMPI_COMM_WORLD_SIZE), then a single process (0 of 1).  A pair is taken
 * from one launcher only, never mixed; a half-set pair is an error that
 * names the missing variable.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "strnum.h"

#define DEFAULT_SOCKET "/run/ringfeed/ringfeed.sock"

static const char *env(const char *name)
{
    const char *v = getenv(name);

    return v && v[0] ? v : NULL;
}

/*
 * Writes the socket path to use into out (cap bytes, sun_path's size).
 * Returns 0, or -ENAMETOOLONG naming the path and where it came from.
 */
int client_socket_path(const char *opt, char *out, size_t cap, struct rf_err *err)
{
    const char *from, *dir;
    int n;

    if (opt && opt[0]) {
        from = "the socket option";
        n = snprintf(out, cap, "%s", opt);
    } else if ((dir = env("RINGFEED_SOCKET"))) {
        from = "$RINGFEED_SOCKET";
        n = snprintf(out, cap, "%s", dir);
    } else if ((dir = env("XDG_RUNTIME_DIR")) &&
               (n = snprintf(out, cap, "%s/ringfeed.sock", dir)) >= 0 && (size_t)n < cap &&
               access(out, F_OK) == 0) {
        from = "$XDG_RUNTIME_DIR/ringfeed.sock";
    } else {
        from = "the default";
        n = snprintf(out, cap, "%s", DEFAULT_SOCKET);
    }
    if (n < 0 || (size_t)n >= cap)
        return rf_err_set(err, -ENAMETOOLONG,
                          "control socket path from %s is %d bytes, longer than "
                          "the %zu a Unix socket address holds: use a shorter "
                          "path (set RINGFEED_SOCKET)",
                          from, n, cap - 1);
    return 0;
}

/* Parses variable name's value as a number 0..INT32_MAX into *out. */
static int env_number(const char *name, const char *v, const char *what, int32_t *out,
                      struct rf_err *err)
{
    uint64_t x;

    if (strnum_u64(v, strlen(v), &x) < 0 || x > INT32_MAX)
        return rf_err_set(err, -EINVAL,
                          "environment variable %s=\"%.64s\" is not a number: set it "
                          "to %s or unset it",
                          name, v, what);
    *out = (int32_t)x;
    return 0;
}

/* Reads one launcher's pair; 1 if it set neither, 0 if both, or an error. */
static int env_pair(const char *rname, const char *wname, int32_t *r, int32_t *w,
                    struct rf_err *err)
{
    const char *rv = env(rname), *wv = env(wname);
    int rc;

    if (!rv && !wv)
        return 1;
    if (!rv || !wv)
        return rf_err_set(err, -EINVAL,
                          "environment variable %s is set but %s is not: the "
                          "launcher sets both; set %s too, or unset %s",
                          rv ? rname : wname, rv ? wname : rname, rv ? wname : rname,
                          rv ? rname : wname);
    rc = env_number(rname, rv, "this process's global rank", r, err);
    if (rc < 0)
        return rc;
    rc = env_number(wname, wv, "the number of processes", w, err);
    if (rc < 0)
        return rc;
    if (*w < 1)
        return rf_err_set(err, -EINVAL,
                          "environment variable %s=%d: the world has at least one "
                          "process",
                          wname, *w);
    if (*r >= *w)
        return rf_err_set(err, -EINVAL,
                          "environment variable %s=%d is not below %s=%d: ranks "
                          "run from 0 to the world size minus one",
                          rname, *r, wname, *w);
    return 0;
}

/*
 * Resolves rank and world: each option that is -1 comes from the
 * environment.  Returns 0, or -EINVAL naming the option or variable.
 */
int client_rank_world(int32_t rank, int32_t world, int32_t *r, int32_t *w,
                      struct rf_err *err)
{
    int32_t er = 0, ew = 1;
    int rc;

    if (rank < -1)
        return rf_err_set(err, -EINVAL, "option rank=%d: use 0..world-1, or -1 for "
                          "the environment's RANK", rank);
    if (world < -1 || world == 0)
        return rf_err_set(err, -EINVAL, "option world=%d: use 1 or more, or -1 for "
                          "the environment's WORLD_SIZE", world);
    if (rank == -1 || world == -1) {
        rc = env_pair("RANK", "WORLD_SIZE", &er, &ew, err);
        if (rc == 1)
            rc = env_pair("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", &er, &ew, err);
        if (rc < 0)
            return rc;
    }
    *r = rank == -1 ? er : rank;
    *w = world == -1 ? ew : world;
    if (*r >= *w)
        return rf_err_set(err, -EINVAL,
                          "rank %d is not below world size %d (%s rank, %s world): "
                          "ranks run from 0 to the world size minus one",
                          *r, *w, rank == -1 ? "environment's" : "option",
                          world == -1 ? "environment's" : "option");
    return 0;
}
