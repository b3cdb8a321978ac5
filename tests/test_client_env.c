/*
 * test_client_env.c - libringfeed's defaults from the environment and its
 * option checks: rank and world from torchrun's RANK/WORLD_SIZE, else Open
 * MPI's, else 0 of 1, with errors naming the variable; the control socket
 * from RINGFEED_SOCKET, else XDG_RUNTIME_DIR; options refused before
 * anything is sent.  The fake daemon records each ATTACH line and answers
 * "ERR busy", so the test also sees an ERR code mapped to its errno.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake_daemon.h"
#include "ringfeed.h"
#include "tap.h"

static const char *const vars[] = {
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
    "RINGFEED_SOCKET", "XDG_RUNTIME_DIR",
};

static struct fake g_fake;
static char g_msg[1024];

static int handler(struct fake *f, int conn, const char *line)
{
    (void)f;
    (void)line;
    fake_send(conn, "ERR busy the daemon is busy, try later\n", NULL, 0);
    return 0;
}

static void clear_env(void)
{
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
        unsetenv(vars[i]);
}

/* rf_options.shuffle for attach() */
static int g_shuffle = RF_SHUFFLE_GLOBAL;

/* rf_open with env pairs set ("NAME=value" strings, NULL-terminated) and
 * rank/world options; returns its result, the line sent in line (or ""),
 * the message in g_msg. */
static int attach(const char *const *env, int32_t rank, int32_t world, const char *socket,
                  const char *params, char *line, size_t cap)
{
    struct rf_options o;
    struct rf_client *c = NULL;
    int n0 = (int)atomic_load(&g_fake.nlines), rc;

    clear_env();
    for (; env && *env; env++) {
        char name[64];
        const char *eq = strchr(*env, '=');

        snprintf(name, sizeof(name), "%.*s", (int)(eq - *env), *env);
        setenv(name, eq + 1, 1);
    }
    rf_options_init(&o);
    o.socket = socket;
    o.dataset = "fm";
    o.rank = rank;
    o.world = world;
    o.params = params;
    o.shuffle = g_shuffle;
    rc = rf_open(&o, &c);
    snprintf(g_msg, sizeof(g_msg), "%s", rf_last_error(c));
    rf_close(c);
    line[0] = '\0';
    if (atomic_load(&g_fake.nlines) > n0)
        snprintf(line, cap, "%s", g_fake.lines[n0]);
    return rc;
}

static void rank_world(void)
{
    char line[FAKE_LINE_MAX];
    const char *p = g_fake.path;
    int rc;

    rc = attach(NULL, -1, -1, p, NULL, line, sizeof(line));
    TAP_IS_INT(rc, -EBUSY, "ERR busy maps to -EBUSY");
    TAP_OK(strstr(g_msg, "the daemon is busy, try later"), "  with the daemon's message");
    TAP_OK(line[0] && !strstr(line, "rank=") && !strstr(line, "world="),
           "no launcher: rank 0 of 1 (the protocol's defaults, left out)");

    rc = attach((const char *[]){"RANK=3", "WORLD_SIZE=8", "LOCAL_RANK=1", NULL}, -1, -1, p,
                NULL, line, sizeof(line));
    TAP_OK(strstr(line, " rank=3 ") && strstr(line, " world=8"), "torchrun: RANK, WORLD_SIZE");

    rc = attach((const char *[]){"OMPI_COMM_WORLD_RANK=2", "OMPI_COMM_WORLD_SIZE=4", NULL}, -1,
                -1, p, NULL, line, sizeof(line));
    TAP_OK(strstr(line, " rank=2 ") && strstr(line, " world=4"), "Open MPI's variables");

    rc = attach((const char *[]){"RANK=1", "WORLD_SIZE=2", "OMPI_COMM_WORLD_RANK=5",
                                 "OMPI_COMM_WORLD_SIZE=9", NULL},
                -1, -1, p, NULL, line, sizeof(line));
    TAP_OK(strstr(line, " rank=1 ") && strstr(line, " world=2"), "torchrun's win over MPI's");

    rc = attach((const char *[]){"RANK=3", "WORLD_SIZE=8", NULL}, 5, 6, p, NULL, line,
                sizeof(line));
    TAP_OK(strstr(line, " rank=5 ") && strstr(line, " world=6"), "options win over the environment");

    rc = attach((const char *[]){"RANK=x1", "WORLD_SIZE=8", NULL}, -1, -1, p, NULL, line,
                sizeof(line));
    TAP_IS_INT(rc, -EINVAL, "RANK=x1: -EINVAL");
    TAP_OK(strstr(g_msg, "RANK=\"x1\" is not a number"), "  message names RANK");
    TAP_OK(!line[0], "  nothing sent");

    rc = attach((const char *[]){"RANK=1", "WORLD_SIZE=-2", NULL}, -1, -1, p, NULL, line,
                sizeof(line));
    TAP_IS_INT(rc, -EINVAL, "WORLD_SIZE=-2: -EINVAL");
    TAP_OK(strstr(g_msg, "WORLD_SIZE=\"-2\""), "  message names WORLD_SIZE");

    rc = attach((const char *[]){"RANK=8", "WORLD_SIZE=8", NULL}, -1, -1, p, NULL, line,
                sizeof(line));
    TAP_IS_INT(rc, -EINVAL, "RANK=8 of WORLD_SIZE=8: -EINVAL");
    TAP_OK(strstr(g_msg, "RANK=8 is not below WORLD_SIZE=8"), "  message names both");

    rc = attach((const char *[]){"RANK=1", NULL}, -1, -1, p, NULL, line, sizeof(line));
    TAP_IS_INT(rc, -EINVAL, "RANK without WORLD_SIZE: -EINVAL");
    TAP_OK(strstr(g_msg, "RANK is set but WORLD_SIZE is not"), "  message names the missing one");

    rc = attach((const char *[]){"OMPI_COMM_WORLD_SIZE=4", NULL}, -1, -1, p, NULL, line,
                sizeof(line));
    TAP_IS_INT(rc, -EINVAL, "MPI size without rank: -EINVAL");
    TAP_OK(strstr(g_msg, "OMPI_COMM_WORLD_SIZE is set but OMPI_COMM_WORLD_RANK is not"),
           "  message names the missing one");

    rc = attach((const char *[]){"RANK=0", "WORLD_SIZE=0", NULL}, -1, -1, p, NULL, line,
                sizeof(line));
    TAP_IS_INT(rc, -EINVAL, "WORLD_SIZE=0: -EINVAL");

    rc = attach(NULL, 2, 2, p, NULL, line, sizeof(line));
    TAP_IS_INT(rc, -EINVAL, "option rank 2 of world 2: -EINVAL");
    TAP_OK(strstr(g_msg, "rank 2 is not below world size 2"), "  message says so");
    rc = attach(NULL, -5, -1, p, NULL, line, sizeof(line));
    TAP_IS_INT(rc, -EINVAL, "option rank -5: -EINVAL");
}

static void socket_path(void)
{
    char line[FAKE_LINE_MAX], env[256], longdir[200];
    int rc;

    snprintf(env, sizeof(env), "RINGFEED_SOCKET=%s", g_fake.path);
    rc = attach((const char *[]){env, "XDG_RUNTIME_DIR=/nonexistent", NULL}, -1, -1, NULL, NULL,
                line, sizeof(line));
    TAP_OK(rc == -EBUSY && line[0], "RINGFEED_SOCKET names the socket");

    /* XDG_RUNTIME_DIR/ringfeed.sock is used when it exists (a link to the
     * fake daemon's socket here) ... */
    {
        char link[300];

        snprintf(link, sizeof(link), "%s/ringfeed.sock", g_fake.dir);
        TAP_OK(symlink(g_fake.path, link) == 0, "  link ringfeed.sock to the fake daemon");
        snprintf(env, sizeof(env), "XDG_RUNTIME_DIR=%s", g_fake.dir);
        rc = attach((const char *[]){env, "RINGFEED_SOCKET=", NULL}, -1, -1, NULL, NULL, line,
                    sizeof(line));
        TAP_OK(rc == -EBUSY && line[0], "XDG_RUNTIME_DIR/ringfeed.sock names the socket");
        unlink(link);
    }

    /* ... and otherwise the system daemon's socket is meant */
    rc = attach((const char *[]){env, "RINGFEED_SOCKET=", NULL}, -1, -1, NULL, NULL, line,
                sizeof(line));
    TAP_OK(rc < 0 && strstr(g_msg, "/run/ringfeed/ringfeed.sock"),
           "XDG_RUNTIME_DIR without ringfeed.sock: the system socket");

    rc = attach(NULL, -1, -1, NULL, NULL, line, sizeof(line));
    TAP_OK(rc < 0 && strstr(g_msg, "/run/ringfeed/ringfeed.sock"),
           "nothing set: the system socket");

    memset(longdir, 'd', sizeof(longdir) - 1);
    longdir[0] = '/';
    longdir[sizeof(longdir) - 1] = '\0';
    snprintf(env, sizeof(env), "RINGFEED_SOCKET=%s", longdir);
    rc = attach((const char *[]){env, NULL}, -1, -1, NULL, NULL, line, sizeof(line));
    TAP_IS_INT(rc, -ENAMETOOLONG, "too long a socket path: -ENAMETOOLONG");
    TAP_OK(strstr(g_msg, "$RINGFEED_SOCKET") && strstr(g_msg, "RINGFEED_SOCKET"),
           "  message says where it came from and what to do");
}

static void options(void)
{
    char line[FAKE_LINE_MAX];
    struct rf_options o;
    struct rf_client *c = NULL;
    const char *p = g_fake.path;
    int rc;

    rc = attach(NULL, -1, -1, p, "scale=0.5,1 flip=0 layout=hwc", line, sizeof(line));
    TAP_OK(strstr(line, " scale=0.5,1") && strstr(line, " flip=0") && strstr(line, " layout=hwc"),
           "params reach the line");
    rc = attach(NULL, -1, -1, p, "flip=2", line, sizeof(line));
    TAP_IS_INT(rc, -EINVAL, "params flip=2: -EINVAL");
    TAP_OK(strstr(g_msg, "flip") && !line[0], "  message names flip; nothing sent");
    rc = attach(NULL, -1, -1, p, "flip=0\nscale=0.5,1", line, sizeof(line));
    TAP_OK(rc == -EINVAL && strstr(g_msg, "line break") && !line[0],
           "params with a newline: -EINVAL, nothing sent (was cut and sent)");
    rc = attach(NULL, -1, -1, p, "colour=red", line, sizeof(line));
    TAP_OK(rc == -EINVAL && strstr(g_msg, "unknown key \"colour\""), "params with an unknown key");
    rc = attach(NULL, -1, -1, p, "batch=3", line, sizeof(line));
    TAP_OK(rc == -EINVAL && strstr(g_msg, "batch= is set through struct rf_options"),
           "params repeating an option");
    rc = attach(NULL, -1, -1, p, "depth=8 size=64", line, sizeof(line));
    TAP_OK(strstr(line, " depth=8") && strstr(line, " size=64"),
           "params may set depth and size left at the default");

    /* shuffle: RF_SHUFFLE_BLOCK and its block size in params */
    g_shuffle = RF_SHUFFLE_BLOCK;
    rc = attach(NULL, -1, -1, p, NULL, line, sizeof(line));
    TAP_OK(strstr(line, " shuffle=block") && !strstr(line, " block="),
           "RF_SHUFFLE_BLOCK sends shuffle=block, the block left to the daemon");
    rc = attach(NULL, -1, -1, p, "block=40000", line, sizeof(line));
    TAP_OK(strstr(line, " shuffle=block block=40000"), "block=40000 in params reaches the line");
    rc = attach(NULL, -1, -1, p, "shuffle=0", line, sizeof(line));
    TAP_OK(rc == -EINVAL && strstr(g_msg, "shuffle= is set through struct rf_options") &&
           !line[0], "params repeating shuffle refused");
    g_shuffle = RF_SHUFFLE_GLOBAL;
    rc = attach(NULL, -1, -1, p, "block=40000", line, sizeof(line));
    TAP_OK(rc == -EINVAL && strstr(g_msg, "shuffle=block") && !line[0],
           "block= without RF_SHUFFLE_BLOCK refused, naming shuffle=block");
    g_shuffle = 3;
    rc = attach(NULL, -1, -1, p, NULL, line, sizeof(line));
    TAP_OK(rc == -EINVAL && strstr(g_msg, "option shuffle=3") && !line[0],
           "shuffle 3 refused, naming the option");
    g_shuffle = -1;
    rc = attach(NULL, -1, -1, p, NULL, line, sizeof(line));
    TAP_OK(rc == -EINVAL && strstr(g_msg, "RF_SHUFFLE_BLOCK (2)"), "shuffle -1 refused");
    g_shuffle = RF_SHUFFLE_GLOBAL;

    clear_env();
    rf_options_init(&o);
    o.socket = p;
    TAP_IS_INT(rf_open(&o, &c), -EINVAL, "no dataset: -EINVAL");
    TAP_OK(strstr(rf_last_error(c), "dataset is required"), "  message says so");
    rf_close(c);
    /* a '/' makes it a folder (folder.c): one that does not exist is named */
    o.dataset = "fm/../../etc";
    TAP_IS_INT(rf_open(&o, &c), -ENOENT, "a missing folder for a dataset: -ENOENT");
    TAP_OK(strstr(rf_last_error(c), "dataset folder fm/../../etc: No such file"),
           "  message names it");
    rf_close(c);
    o.dataset = "fm";
    o.batch = 0;
    TAP_IS_INT(rf_open(&o, &c), -EINVAL, "batch 0: -EINVAL");
    TAP_OK(strstr(rf_last_error(c), "batch takes an integer in 1..65536"), "  message gives the range");
    rf_close(c);
    o.batch = 8;
    o.depth = 1;
    TAP_IS_INT(rf_open(&o, &c), -EINVAL, "depth 1: -EINVAL");
    rf_close(c);
    o.depth = 0;
    o.transform = "sharpen";
    TAP_IS_INT(rf_open(&o, &c), -EINVAL, "transform sharpen: -EINVAL");
    TAP_OK(strstr(rf_last_error(c), "use raw, train, eval, none or tokens"), "  message lists them");
    rf_close(c);
    o.transform = "train";
    o.name = "bad name";
    TAP_IS_INT(rf_open(&o, &c), -EINVAL, "name with a space: -EINVAL");
    rf_close(c);
    o.name = NULL;
    o.reconnect_ms = -1;
    TAP_IS_INT(rf_open(&o, &c), -EINVAL, "reconnect_ms -1: -EINVAL");
    rf_close(c);
}

int main(void)
{
    int before = fake_count_fds();

    if (fake_start(&g_fake, NULL, handler, NULL) < 0)
        tap_bail("cannot listen on a Unix socket");
    rank_world();
    socket_path();
    options();
    fake_stop(&g_fake);
    TAP_IS_INT(fake_count_fds(), before, "no descriptor leaked");
    return tap_done();
}
