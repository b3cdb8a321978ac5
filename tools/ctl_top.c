/*
 * ctl_top.c - `ringfeedctl top`: a refreshing view of a running ringfeedd,
 * like top(1): the daemon's header figures, one row per worker and one per
 * attached client, with rates over the refresh interval (top_calc.h does
 * the arithmetic; this file fetches, draws and reads keys).
 *
 * DESIGN
 *
 * Every refresh opens a fresh control connection, asks STATUS (for the
 * version) and STATS, and closes it: the daemon's idle-sec never closes
 * the connection under the view, and a daemon restarted between two
 * refreshes is found at the next one (top_calc notices the restart and
 * shows rates again one refresh later).  WORKERS, for the w and W keys,
 * goes over a connection of its own too.
 *
 * Three ways to run:
 *   live   stdout is a terminal: the alternate screen, redrawn in place
 *          with plain ANSI escapes (home, clear to end of line, clear
 *          below) from one buffer per frame; keys read from stdin when it
 *          is a terminal too, put in non-canonical mode without echo.
 *   batch  stdout is not a terminal and no --once: one plain frame per
 *          interval, a blank line between frames, no escapes.
 *   once   --once: two snapshots an interval apart, one frame, exit 0;
 *          escapes only for reverse-video table headings, and only when
 *          stdout is a terminal and NO_COLOR is not set.
 *
 * The terminal.  term_restore() undoes both the termios change and the
 * screen (cursor shown, alternate screen left); it is idempotent and
 * async-signal-safe (write and tcsetattr only), and runs at exit
 * (atexit), from SIGINT, SIGTERM, SIGHUP and SIGQUIT (restore, then die of
 * the same signal, as the shell expects) and from SIGTSTP (restore, stop;
 * on SIGCONT raw again and a full redraw).  The handlers are in place
 * before the terminal is changed, and the "changed" flags are set before
 * the change, so no signal can leave it changed.  SIGWINCH sets a flag the
 * loop sees when poll() is interrupted: the frame is laid out again for
 * the new width and height (long names cut, marked "~"; rows that do not
 * fit summed up in a "... N more" line).
 *
 * The daemon going away: --once exits 1 at once with the connection's
 * message; live and batch keep trying each refresh (at most every
 * RETRY_MS) for LOST_GRACE_MS, the live view saying so, then restore the
 * terminal, print the message and exit 1.
 */
#include "ctl_top.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "clock.h"
#include "ctlconn.h"
#include "strnum.h"
#include "top_calc.h"

#define INTERVAL_LIVE 1.0  /* seconds between refreshes, live and batch */
#define INTERVAL_ONCE 0.5  /* seconds between --once's two snapshots */
#define INTERVAL_MIN 0.1
#define INTERVAL_MAX 3600.0
#define LOST_GRACE_MS 3000 /* how long a lost daemon is tried again */
#define RETRY_MS 500
#define LINE_CAP 1024      /* a drawn line's bytes; wider terminals get this */
#define NAME_MIN 4         /* a name column is cut down to no less */

/* + and - step through these (seconds) */
static const double interval_steps[] = {0.1, 0.2, 0.3, 0.5, 1, 2, 3, 5, 10, 30, 60};

/* ---- the terminal: changed and always restored ---- */

#define SCREEN_ENTER "\033[?1049h\033[?25l\033[H\033[2J"
#define SCREEN_LEAVE "\033[0m\033[?25h\033[?1049l"

static struct termios term_saved, term_raw;
static volatile sig_atomic_t termios_changed, screen_changed, got_winch;

/* Writes s[0..n) to stdout's fd, short writes and EINTR handled; errors
 * dropped (a view with nowhere to draw has nothing to report them to). */
static void write_all(const char *s, size_t n)
{
    while (n > 0) {
        ssize_t k = write(STDOUT_FILENO, s, n);

        if (k == -1) {
            if (errno == EINTR)
                continue;
            return;
        }
        s += k;
        n -= (size_t)k;
    }
}

static void term_restore(void)
{
    if (screen_changed) {
        screen_changed = 0;
        write_all(SCREEN_LEAVE, sizeof(SCREEN_LEAVE) - 1);
    }
    if (termios_changed) {
        termios_changed = 0;
        tcsetattr(STDIN_FILENO, TCSADRAIN, &term_saved);
    }
}

/* Into the view's terminal state: raw keys when keys, the screen always. */
static void term_enter(bool keys)
{
    if (keys) {
        termios_changed = 1;
        if (tcsetattr(STDIN_FILENO, TCSADRAIN, &term_raw) == -1)
            termios_changed = 0;
    }
    screen_changed = 1;
    write_all(SCREEN_ENTER, sizeof(SCREEN_ENTER) - 1);
}

static void on_deadly(int sig)
{
    term_restore();
    signal(sig, SIG_DFL);
    raise(sig); /* delivered when the handler returns: the view dies of it */
}

static void on_tstp(int sig)
{
    int e = errno;
    bool keys = termios_changed, screen = screen_changed;
    struct sigaction sa = {.sa_handler = on_tstp};
    sigset_t set;

    term_restore();
    signal(sig, SIG_DFL);
    sigemptyset(&set);
    sigaddset(&set, SIGTSTP);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
    raise(SIGTSTP); /* stops here until SIGCONT */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTSTP, &sa, NULL);
    if (screen)
        term_enter(keys);
    got_winch = 1; /* draw the whole frame again */
    errno = e;
}

static void on_winch(int sig)
{
    (void)sig;
    got_winch = 1;
}

/* The handlers and, when *keys, the raw termios made from stdin's current
 * one (*keys turns false when that cannot be read: no keys then). */
static void term_setup(bool *keys)
{
    static const int deadly[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
    struct sigaction sa = {0};

    if (*keys && tcgetattr(STDIN_FILENO, &term_saved) == -1)
        *keys = false;
    term_raw = term_saved;
    term_raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
    term_raw.c_cc[VMIN] = 0;
    term_raw.c_cc[VTIME] = 0;
    atexit(term_restore);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_deadly;
    for (size_t i = 0; i < sizeof(deadly) / sizeof(deadly[0]); i++)
        sigaction(deadly[i], &sa, NULL);
    sa.sa_handler = on_tstp;
    sigaction(SIGTSTP, &sa, NULL);
    sa.sa_handler = on_winch; /* no SA_RESTART: poll() returns EINTR */
    sigaction(SIGWINCH, &sa, NULL);
}

static void term_size(int *cols, int *rows)
{
    struct winsize ws;

    *cols = 80;
    *rows = 24;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 && ws.ws_row > 0) {
        *cols = ws.ws_col;
        *rows = ws.ws_row;
    }
    if (*cols > LINE_CAP - 1)
        *cols = LINE_CAP - 1;
}

/* ---- drawing a frame into a buffer ---- */

struct view {
    int cols, rows;    /* 0: no limit (a pipe) */
    bool ansi;         /* drawn in place on the alternate screen */
    bool attrs;        /* reverse-video headings */
    bool keys;         /* the keys line at the bottom */
    double interval;
    const char *msg;   /* shown on the keys line; "" for none */
};

struct out {
    char *p;
    size_t len, cap;
    int lines;
    bool oom;
};

static void out_add(struct out *o, const char *s, size_t n)
{
    if (o->oom || !buf_grow(&o->p, &o->cap, o->len + n + 1)) {
        o->oom = true;
        return;
    }
    memcpy(o->p + o->len, s, n);
    o->len += n;
    o->p[o->len] = '\0';
}

static void out_str(struct out *o, const char *s) { out_add(o, s, strlen(s)); }

/* Lines the body may still use: on a screen, the last row is the keys
 * line's. */
static int room_left(const struct out *o, const struct view *v)
{
    if (v->rows <= 0)
        return INT32_MAX;
    return v->rows - (v->keys ? 1 : 0) - o->lines;
}

/*
 * One line: formatted, cut to the width, drawn reverse when attr.  On the
 * screen lines are separated (not ended) by CR LF, each cleared to its
 * end, so the last row never scrolls the screen; elsewhere each ends in LF.
 * A body line past the screen's height is dropped (keys_line: never).
 */
__attribute__((format(printf, 5, 6)))
static void line(struct out *o, const struct view *v, bool attr, bool keys_line,
                 const char *fmt, ...)
{
    char text[LINE_CAP];
    va_list ap;
    int n;

    if (!keys_line && room_left(o, v) <= 0)
        return;
    va_start(ap, fmt);
    n = vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    if (n < 0)
        n = 0;
    if ((size_t)n >= sizeof(text))
        n = sizeof(text) - 1;
    if (v->cols > 0 && n > v->cols)
        n = v->cols;
    if (v->ansi && o->lines > 0)
        out_str(o, "\r\n");
    if (attr && v->attrs)
        out_str(o, "\033[7m");
    out_add(o, text, (size_t)n);
    if (attr && v->attrs) {
        /* a heading's reverse video runs across the whole screen width */
        for (int i = n; v->ansi && i < v->cols; i++)
            out_str(o, " ");
        out_str(o, "\033[0m");
    }
    if (v->ansi)
        out_str(o, "\033[K");
    else
        out_str(o, "\n");
    o->lines++;
}

/* "-" for NAN; else 1 decimal, k/M/G past 10000. */
static const char *fmt_rate(char *b, size_t cap, double v)
{
    if (isnan(v))
        snprintf(b, cap, "-");
    else if (v < 10000)
        snprintf(b, cap, "%.1f", v);
    else if (v < 1e6)
        snprintf(b, cap, "%.1fk", v / 1e3);
    else if (v < 1e9)
        snprintf(b, cap, "%.2fM", v / 1e6);
    else
        snprintf(b, cap, "%.2fG", v / 1e9);
    return b;
}

static const char *fmt_pct(char *b, size_t cap, double v)
{
    if (isnan(v))
        snprintf(b, cap, "-");
    else
        snprintf(b, cap, "%.1f", v);
    return b;
}

static const char *fmt_count(char *b, size_t cap, double v)
{
    if (isnan(v))
        snprintf(b, cap, "-");
    else
        snprintf(b, cap, "%.0f", v);
    return b;
}

static const char *fmt_bytes(char *b, size_t cap, double v)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    unsigned u = 0;

    if (isnan(v)) {
        snprintf(b, cap, "-");
        return b;
    }
    while (v >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
        v /= 1024;
        u++;
    }
    snprintf(b, cap, u ? "%.1f %s" : "%.0f %s", v, units[u]);
    return b;
}

/* "1d 02:03:04", "02:03:04" */
static const char *fmt_uptime(char *b, size_t cap, double s)
{
    unsigned long long t;

    if (isnan(s) || s < 0) {
        snprintf(b, cap, "-");
        return b;
    }
    t = (unsigned long long)s;
    if (t >= 86400)
        snprintf(b, cap, "%llud %02llu:%02llu:%02llu", t / 86400, t / 3600 % 24, t / 60 % 60,
                 t % 60);
    else
        snprintf(b, cap, "%02llu:%02llu:%02llu", t / 3600, t / 60 % 60, t % 60);
    return b;
}

/* s cut to w bytes, its last one "~" when cut. */
static const char *fit(char *b, size_t cap, const char *s, int w)
{
    size_t n = strlen(s);

    if (w < 1)
        w = 1;
    if (n <= (size_t)w) {
        snprintf(b, cap, "%s", s);
    } else {
        snprintf(b, cap, "%.*s~", w - 1, s);
    }
    return b;
}

static void header(struct out *o, const struct view *v, const struct top_frame *f)
{
    char a[32], b[32], c[32], d[32], e[32], g[32];

    line(o, v, false, false, "ringfeedd %s  up %s  io %s  workers %s/%s  clients %s  "
         "datasets %s (%s failed)%s",
         f->version[0] ? f->version : "?", fmt_uptime(a, sizeof(a), f->uptime_s),
         f->io_backend[0] ? f->io_backend : "?", fmt_count(b, sizeof(b), f->workers_alive),
         fmt_count(c, sizeof(c), f->workers_target),
         fmt_count(d, sizeof(d), f->clients_attached), fmt_count(e, sizeof(e), f->datasets),
         fmt_count(g, sizeof(g), f->datasets_failed), f->stopping ? "  STOPPING" : "");
    line(o, v, false, false, "samples/s %s  batches/s %s  jobs/s %s  queued %s  "
         "bad samples %s (%s/s)",
         fmt_rate(a, sizeof(a), f->samples_per_s), fmt_rate(b, sizeof(b), f->batches_per_s),
         fmt_rate(c, sizeof(c), f->jobs_per_s), fmt_count(d, sizeof(d), f->jobs_queued),
         fmt_count(e, sizeof(e), f->bad), fmt_rate(g, sizeof(g), f->bad_per_s));
    {
        char h[32], i[32], j[32], k[32];

        line(o, v, false, false, "rings %s of %s  locked %s  pool busy %s%%  "
             "(io %s%%  decode %s%%  transform %s%%)",
             fmt_bytes(a, sizeof(a), f->rings_bytes), fmt_bytes(b, sizeof(b), f->budget_bytes),
             fmt_bytes(c, sizeof(c), f->locked_bytes), fmt_pct(h, sizeof(h), f->busy_pct),
             fmt_pct(i, sizeof(i), f->io_pct), fmt_pct(j, sizeof(j), f->decode_pct),
             fmt_pct(k, sizeof(k), f->transform_pct));
    }
    if (!isnan(f->cache_bytes)) {
        /* remote datasets (daemon/ahead.h): the node cache and the network */
        char h[32], i[32], j[32];

        line(o, v, false, false, "remote cache %s of %s  shards %s  fetched %s/s  in flight %s  "
             "hits %s/s  misses %s/s  evictions %s/s  clients waiting on it %s",
             fmt_bytes(a, sizeof(a), f->cache_bytes), fmt_bytes(b, sizeof(b), f->cache_limit),
             fmt_count(c, sizeof(c), f->cache_shards),
             fmt_bytes(d, sizeof(d), f->fetch_bytes_per_s),
             fmt_count(e, sizeof(e), f->fetch_in_flight), fmt_rate(g, sizeof(g), f->hits_per_s),
             fmt_rate(h, sizeof(h), f->misses_per_s), fmt_rate(i, sizeof(i), f->evictions_per_s),
             fmt_count(j, sizeof(j), f->network_waiting));
    }
    if (f->naug > 0) {
        /* the augmentation, only while a stream's ops run: each op's time
         * per image over the interval, then the line is cut to the width */
        char ops[LINE_CAP], h[32];
        size_t used = 0;

        ops[0] = '\0';
        for (uint32_t n = 0; n < f->naug && used < sizeof(ops); n++) {
            int w = snprintf(ops + used, sizeof(ops) - used, "  %s %s", f->aug[n].name,
                             fmt_rate(h, sizeof(h), f->aug[n].us_per_image));

            if (w < 0)
                break;
            used += (size_t)w;
        }
        line(o, v, false, false, "augment us/image %s:%s",
             fmt_rate(a, sizeof(a), f->aug_us_per_image), ops);
    }
    if (f->workers_mode[0]) {
        /* workers auto (daemon/autoscale.c): mode, budget, state, the last change */
        char h[32];

        if (strcmp(f->workers_mode, "auto") == 0)
            line(o, v, false, false, "workers auto  budget %s (%s)  %s  changes %s  last: %s",
                 fmt_count(a, sizeof(a), f->workers_budget),
                 f->budget_source[0] ? f->budget_source : "?",
                 f->auto_state[0] ? f->auto_state : "?", fmt_count(h, sizeof(h), f->auto_changes),
                 f->auto_reason[0] ? f->auto_reason : "-");
        else
            line(o, v, false, false, "workers %s  budget %s (%s)", f->workers_mode,
                 fmt_count(a, sizeof(a), f->workers_budget),
                 f->budget_source[0] ? f->budget_source : "?");
    }
    if (f->restarted)
        line(o, v, false, false, "the daemon restarted: rates from the next refresh");
    else if (isnan(f->interval_s))
        line(o, v, false, false, "measuring: rates from the next refresh");
    else if (!v->keys)
        line(o, v, false, false, "rates over %.2f s", f->interval_s);
    if (f->dropped)
        line(o, v, false, false, "(%u rows past the view's %d workers and %d clients left out)",
             f->dropped, TOP_WORKERS_MAX, TOP_CLIENTS_MAX);
}

static void workers_table(struct out *o, const struct view *v, const struct top_frame *f,
                          uint32_t shown)
{
    line(o, v, true, false, "%6s %8s %-9s %6s %8s %9s %6s %7s %7s", "WORKER", "PID", "STATE",
         "BUSY%", "JOBS/S", "SAMPLES/S", "IO%", "DECODE%", "XFORM%");
    for (uint32_t i = 0; i < f->nworkers; i++) {
        const struct top_worker_row *r = &f->w[i];
        char p[24], a[16], b[16], c[16], d[16], e[16], g[16];

        if (i + 1 == shown && shown < f->nworkers) {
            line(o, v, false, false, "  ... %u more workers", f->nworkers - i);
            break;
        }
        line(o, v, false, false, "%6u %8s %-9s %6s %8s %9s %6s %7s %7s", r->idx,
             fmt_count(p, sizeof(p), r->pid), r->state[0] ? r->state : "-",
             fmt_pct(a, sizeof(a), r->busy_pct), fmt_rate(b, sizeof(b), r->jobs_per_s),
             fmt_rate(c, sizeof(c), r->samples_per_s), fmt_pct(d, sizeof(d), r->io_pct),
             fmt_pct(e, sizeof(e), r->decode_pct), fmt_pct(g, sizeof(g), r->transform_pct));
    }
}

/* "a/b" of two counts, "-" when either is unknown. */
static const char *fmt_pair(char *b, size_t cap, double x, double y)
{
    if (isnan(x) || isnan(y))
        snprintf(b, cap, "-");
    else
        snprintf(b, cap, "%.0f/%.0f", x, y);
    return b;
}

/* The client's user: its name (8 characters at most), else the uid; "-"
 * from a daemon that does not say. */
static const char *user_of(char *buf, size_t cap, double uid)
{
    const struct passwd *pw;

    if (isnan(uid) || uid < 0 || uid > 4294967295.0) {
        snprintf(buf, cap, "-");
        return buf;
    }
    pw = getpwuid((uid_t)uid);
    if (pw && strlen(pw->pw_name) <= 8)
        snprintf(buf, cap, "%s", pw->pw_name);
    else
        snprintf(buf, cap, "%u", (unsigned)uid);
    return buf;
}

static void clients_table(struct out *o, const struct view *v, const struct top_frame *f,
                          uint32_t shown)
{
    int wn = 4, wd = 7, wr = 4;
    char rank[32];

    for (uint32_t i = 0; i < f->nclients; i++) {
        int n = (int)strlen(f->c[i].name[0] ? f->c[i].name : "-");
        int d = (int)strlen(f->c[i].dataset);
        int r = (int)strlen(fmt_pair(rank, sizeof(rank), f->c[i].rank, f->c[i].world));

        wn = n > wn ? n : wn;
        wd = d > wd ? d : wd;
        wr = r > wr ? r : wr;
    }
    if (v->cols > 0) {
        /* the other columns: id, user, rank, five figures, the verdict, blanks */
        int room = v->cols - (6 + 9 + wr + 8 + 9 + 6 + 7 + 5 + 13 + 9);

        while (wn + wd > room && (wn > NAME_MIN || wd > NAME_MIN)) {
            if (wn >= wd && wn > NAME_MIN)
                wn--;
            else
                wd--;
        }
    }
    line(o, v, true, false, "%6s %-8s %-*s %-*s %*s %8s %9s %6s %7s %5s %s", "CLIENT", "USER",
         wn, "NAME", wd, "DATASET", wr, "RANK", "BATCH/S", "SAMPLES/S", "WAIT%", "READY",
         "INFL", "VERDICT");
    for (uint32_t i = 0; i < f->nclients; i++) {
        const struct top_client_row *r = &f->c[i];
        char nm[CTL_LABEL_MAX + 2], ds[TOP_DATASET_MAX + 2], a[16], b[16], c[16], d[32],
            e[16], us[16];

        if (i + 1 == shown && shown < f->nclients) {
            line(o, v, false, false, "  ... %u more clients", f->nclients - i);
            break;
        }
        line(o, v, false, false, "%6u %-8s %-*s %-*s %*s %8s %9s %6s %7s %5s %s", r->id,
             user_of(us, sizeof(us), r->uid), wn,
             fit(nm, sizeof(nm), r->name[0] ? r->name : "-", wn), wd,
             fit(ds, sizeof(ds), r->dataset, wd), wr,
             fmt_pair(rank, sizeof(rank), r->rank, r->world),
             fmt_rate(a, sizeof(a), r->batches_per_s), fmt_rate(b, sizeof(b), r->samples_per_s),
             fmt_pct(c, sizeof(c), r->wait_pct), fmt_pair(d, sizeof(d), r->ready, r->depth),
             fmt_count(e, sizeof(e), r->inflight), top_verdict_name(r->verdict));
    }
    if (f->nclients == 0)
        line(o, v, false, false, "  (no client attached)");
}

/*
 * The whole frame.  On a screen of limited height the tables share what
 * the header leaves: clients get at least half when they need it, workers
 * the rest; a table cut short ends in a "... N more" line.
 */
static void render(struct out *o, const struct view *v, const struct top_frame *f)
{
    uint32_t ws = f->nworkers, cs = f->nclients ? f->nclients : 1;

    o->lines = 0;
    if (v->ansi)
        out_str(o, "\033[H");
    header(o, v, f);
    if (v->rows > 0) {
        /* blank, heading, blank, heading */
        int avail = room_left(o, v) - 4;
        uint32_t room = avail > 2 ? (uint32_t)avail : 2;

        if (ws + cs > room) {
            uint32_t c = cs < room / 2 ? cs : room / 2;

            if (room - c > ws)
                c = room - ws;
            cs = c < cs ? c : cs;
            ws = room - cs < ws ? room - cs : ws;
        }
    }
    line(o, v, false, false, "%s", "");
    workers_table(o, v, f, ws);
    line(o, v, false, false, "%s", "");
    clients_table(o, v, f, f->nclients ? cs : 0);
    if (v->keys) {
        char iv[16];

        snprintf(iv, sizeof(iv), "%g", v->interval);
        while (room_left(o, v) > 0)
            line(o, v, false, false, "%s", "");
        /* the message first: on a narrow screen it is what the user needs */
        if (v->msg && v->msg[0])
            line(o, v, true, true, "%s  |  q quit  w/W workers -1/+1  +/- interval %s s",
                 v->msg, iv);
        else
            line(o, v, true, true, "q quit  w/W workers -1/+1  +/- interval %s s", iv);
    }
    if (v->ansi)
        out_str(o, "\033[J");
}

/* ---- talking to the daemon ---- */

/* One request on an open connection; an ERR reply or a reply of the
 * wrong shape is an error too, with the verb in why. */
static int request(struct ctlconn *cc, const char *verb, bool multi, struct ctl_reply *rep,
                   char *why, size_t cap)
{
    char req[64];
    struct rf_err err;

    snprintf(req, sizeof(req), "%s\n", verb);
    if (ctlconn_request(cc, req, rep, &err) < 0) {
        snprintf(why, cap, "%s", err.msg);
        return -1;
    }
    if (!rep->ok) {
        snprintf(why, cap, "%s: %.*s (%.*s)", verb, (int)rep->text_len, cc->buf + rep->text_off,
                 (int)rep->name_len, cc->buf + rep->name_off);
        return -1;
    }
    if (rep->multi != multi) {
        snprintf(why, cap, "%s: the daemon at %s sent a %s reply where a %s one was due", verb,
                 cc->path, rep->multi ? "multi-line" : "one-line",
                 multi ? "multi-line" : "one-line");
        return -1;
    }
    return 0;
}

/* STATUS and STATS into s over a fresh connection.  Returns 0, or -1 with
 * the reason in why. */
static int fetch(const char *sock, struct top_snap *s, char *why, size_t cap)
{
    struct ctlconn cc;
    struct ctl_reply rep;
    struct rf_err err;
    int rc = -1;

    top_snap_init(s);
    if (ctlconn_open(&cc, sock, &err) < 0) {
        snprintf(why, cap, "%s", err.msg);
        goto out;
    }
    if (request(&cc, "STATUS", false, &rep, why, cap) < 0)
        goto out;
    top_snap_parse_status(s, cc.buf + rep.text_off, rep.text_len);
    if (request(&cc, "STATS", true, &rep, why, cap) < 0)
        goto out;
    if (top_snap_parse_stats(s, cc.buf + rep.body_off, rep.body_len) == 0) {
        snprintf(why, cap, "STATS: the daemon at %s sent no figure this view knows", cc.path);
        goto out;
    }
    rc = 0;
out:
    ctlconn_close(&cc);
    return rc;
}

/* WORKERS n; the message for the keys line in msg either way. */
static int set_workers(const char *sock, long n, char *msg, size_t cap)
{
    struct ctlconn cc;
    struct ctl_reply rep;
    struct rf_err err;
    char verb[32];
    int rc = -1;

    snprintf(verb, sizeof(verb), "WORKERS %ld", n);
    if (ctlconn_open(&cc, sock, &err) < 0)
        snprintf(msg, cap, "workers: %s", err.msg);
    else if (request(&cc, verb, false, &rep, msg, cap) == 0) {
        snprintf(msg, cap, "workers: target %ld", n);
        rc = 0;
    }
    ctlconn_close(&cc);
    return rc;
}

/* ---- the loop ---- */

struct live {
    const char *prog, *sock;
    struct view v;
    struct top_snap *prev, *cur;
    struct top_frame *frame;
    uint64_t prev_ns;     /* when prev was fetched */
    uint64_t lost_ns;     /* when the daemon was first missed; 0 while reachable */
    bool have_frame;
    char msg[RF_ERR_MSG_MAX + 128];
    char why[RF_ERR_MSG_MAX + 64];
};

static void draw(struct live *L)
{
    struct out o = {0};

    if (!L->have_frame)
        return;
    L->v.msg = L->msg;
    if (L->v.ansi)
        term_size(&L->v.cols, &L->v.rows);
    render(&o, &L->v, L->frame);
    if (!L->v.ansi)
        out_str(&o, "\n"); /* batch: a blank line between frames */
    if (!o.oom) {
        write_all(o.p, o.len);
    }
    free(o.p);
}

/* One refresh.  Returns 0, 1 while the daemon is missed but within the
 * grace time, or -1 when it is lost for good (L->why says why). */
static int refresh(struct live *L)
{
    struct top_snap *t;
    uint64_t now;

    if (fetch(L->sock, L->cur, L->why, sizeof(L->why)) < 0) {
        now = clock_mono_ns();
        if (!L->lost_ns)
            L->lost_ns = now;
        if (now - L->lost_ns >= (uint64_t)LOST_GRACE_MS * 1000000)
            return -1;
        snprintf(L->msg, sizeof(L->msg), "lost the daemon, trying again: %s", L->why);
        return 1;
    }
    now = clock_mono_ns();
    if (L->lost_ns)
        L->msg[0] = '\0';
    L->lost_ns = 0;
    top_compute(L->prev, L->cur, (double)(now - L->prev_ns) / 1e9, L->frame);
    L->have_frame = true;
    t = L->prev;
    L->prev = L->cur;
    L->cur = t;
    L->prev_ns = now;
    return 0;
}

/* The index in interval_steps of the next step up (dir 1) or down (-1). */
static double step_interval(double cur, int dir)
{
    size_t n = sizeof(interval_steps) / sizeof(interval_steps[0]);

    if (dir > 0) {
        for (size_t i = 0; i < n; i++)
            if (interval_steps[i] > cur + 1e-9)
                return interval_steps[i];
        return cur;
    }
    for (size_t i = n; i-- > 0;)
        if (interval_steps[i] < cur - 1e-9)
            return interval_steps[i];
    return cur;
}

/* One key; true when the frame should be drawn again. */
static bool key(struct live *L, char k, bool *quit)
{
    long n;

    switch (k) {
    case 'q':
    case 'Q':
        *quit = true;
        return false;
    case 'w':
    case 'W':
        if (!L->have_frame || isnan(L->frame->workers_target)) {
            snprintf(L->msg, sizeof(L->msg), "workers: the daemon's target is not known yet");
            return true;
        }
        n = (long)L->frame->workers_target + (k == 'W' ? 1 : -1);
        if (n < CTL_WORKERS_MIN || n > CTL_WORKERS_MAX) {
            snprintf(L->msg, sizeof(L->msg), "workers: the target stays within %d..%d",
                     CTL_WORKERS_MIN, CTL_WORKERS_MAX);
            return true;
        }
        if (set_workers(L->sock, n, L->msg, sizeof(L->msg)) == 0)
            L->frame->workers_target = (double)n; /* until the next refresh says */
        return true;
    case '+':
    case '-':
        L->v.interval = step_interval(L->v.interval, k == '+' ? 1 : -1);
        snprintf(L->msg, sizeof(L->msg), "interval %g s", L->v.interval);
        return true;
    case 0x0c: /* ^L */
        return true;
    default:
        return false;
    }
}

/* Waits until deadline (monotonic ns) or a key or a signal; handles keys.
 * Returns true to quit. */
static bool wait_keys(struct live *L, uint64_t deadline, bool keys)
{
    struct pollfd pfd = {.fd = STDIN_FILENO, .events = POLLIN};
    uint64_t now = clock_mono_ns();
    int ms = now >= deadline ? 0 : (int)((deadline - now + 999999) / 1000000);
    bool quit = false, redraw = false;
    char kb[64];
    ssize_t n;

    if (poll(&pfd, keys ? 1 : 0, ms) <= 0 || !(pfd.revents & (POLLIN | POLLHUP)))
        return false;
    n = read(STDIN_FILENO, kb, sizeof(kb));
    if (n == 0 && (pfd.revents & POLLHUP))
        return true; /* the terminal went away */
    for (ssize_t i = 0; i < n && !quit; i++)
        redraw |= key(L, kb[i], &quit);
    if (redraw && !quit && L->v.ansi)
        draw(L);
    return quit;
}

static int run_live(struct live *L, bool keys)
{
    uint64_t next;
    int rc;

    if (fetch(L->sock, L->prev, L->why, sizeof(L->why)) < 0) {
        fprintf(stderr, "%s: top: %s\n", L->prog, L->why);
        return 1;
    }
    L->prev_ns = clock_mono_ns();
    if (L->v.ansi) {
        term_setup(&keys);
        term_enter(keys);
        /* a first frame at once: counts and gauges, rates to come */
        top_compute(NULL, L->prev, 0, L->frame);
        L->have_frame = true;
        draw(L);
    }
    next = L->prev_ns + (uint64_t)(L->v.interval * 1e9);
    for (;;) {
        if (got_winch) {
            got_winch = 0;
            draw(L);
        }
        if (clock_mono_ns() >= next) {
            rc = refresh(L);
            if (rc < 0)
                break;
            if (rc == 0 || L->v.ansi)
                draw(L);
            next = clock_mono_ns() +
                   (uint64_t)((rc == 0 ? L->v.interval
                                       : fmin(L->v.interval, RETRY_MS / 1000.0)) * 1e9);
        }
        if (wait_keys(L, next, keys && L->v.ansi)) {
            term_restore();
            return 0;
        }
    }
    term_restore();
    fprintf(stderr, "%s: top: lost the daemon: %s\n", L->prog, L->why);
    return 1;
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};

    while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
        ;
}

static int run_once(struct live *L)
{
    struct out o = {0};
    uint64_t t0, t1;
    int rc = 0;

    if (fetch(L->sock, L->prev, L->why, sizeof(L->why)) < 0) {
        fprintf(stderr, "%s: top: %s\n", L->prog, L->why);
        return 1;
    }
    t0 = clock_mono_ns();
    sleep_s(L->v.interval);
    if (fetch(L->sock, L->cur, L->why, sizeof(L->why)) < 0) {
        fprintf(stderr, "%s: top: %s\n", L->prog, L->why);
        return 1;
    }
    t1 = clock_mono_ns();
    top_compute(L->prev, L->cur, (double)(t1 - t0) / 1e9, L->frame);
    render(&o, &L->v, L->frame);
    if (o.oom) {
        fprintf(stderr, "%s: top: out of memory drawing the frame\n", L->prog);
        rc = 1;
    } else if (fwrite(o.p, 1, o.len, stdout) != o.len || fflush(stdout) == EOF) {
        fprintf(stderr, "%s: top: writing the output: %s\n", L->prog, strerror(errno));
        rc = 1;
    }
    free(o.p);
    return rc;
}

/* ---- options ---- */

void ctl_top_help(FILE *f, int indent)
{
    fprintf(f, "%*s--once              print one frame (two samples --interval apart,\n", indent, "");
    fprintf(f, "%*s                    default %g s) and exit; no escape codes unless\n", indent, "",
            INTERVAL_ONCE);
    fprintf(f, "%*s                    stdout is a terminal\n", indent, "");
    fprintf(f, "%*s--interval SECONDS  the refresh interval (default %g s; %g..%g)\n", indent, "",
            INTERVAL_LIVE, INTERVAL_MIN, INTERVAL_MAX);
    fprintf(f, "%*skeys: q quit, w one worker fewer, W one more, + and - the interval\n",
            indent, "");
}

static int top_usage(const char *prog, const char *what, const char *arg, const char *tail)
{
    fprintf(stderr, "%s: top: %s%s%s\nusage: %s [--socket PATH] " CTL_TOP_USAGE "\n", prog,
            what, arg, tail, prog);
    return 2;
}

int ctl_top_main(const char *prog, const char *socket_path, int argc, char **argv)
{
    struct live L = {.prog = prog, .sock = socket_path};
    bool once = false, have_interval = false;
    double interval = 0;
    int rc;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = NULL;

        if (strcmp(a, "--once") == 0) {
            once = true;
            continue;
        }
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            printf("usage: %s [--socket PATH] " CTL_TOP_USAGE "\n\n"
                   "A refreshing view of the daemon, its workers and its clients.\n\n",
                   prog);
            ctl_top_help(stdout, 2);
            return 0;
        }
        if (strncmp(a, "--interval=", 11) == 0)
            val = a + 11;
        else if (strcmp(a, "--interval") == 0 && i + 1 < argc)
            val = argv[++i];
        else if (strcmp(a, "--interval") == 0)
            return top_usage(prog, "--interval needs a number of seconds", "", "");
        else
            return top_usage(prog, "unknown argument \"", a, "\"");
        if (strnum_double(val, strlen(val), &interval) < 0 || interval < INTERVAL_MIN ||
            interval > INTERVAL_MAX) {
            char range[64];

            snprintf(range, sizeof(range), "\": give seconds in %g..%g", INTERVAL_MIN,
                     INTERVAL_MAX);
            return top_usage(prog, "--interval \"", val, range);
        }
        have_interval = true;
    }
    L.v.interval = have_interval ? interval : once ? INTERVAL_ONCE : INTERVAL_LIVE;
    L.prev = malloc(sizeof(*L.prev));
    L.cur = malloc(sizeof(*L.cur));
    L.frame = malloc(sizeof(*L.frame));
    if (!L.prev || !L.cur || !L.frame) {
        fprintf(stderr, "%s: top: out of memory\n", prog);
        rc = 1;
        goto out;
    }
    if (once) {
        if (isatty(STDOUT_FILENO)) {
            int rows;

            term_size(&L.v.cols, &rows);
            L.v.attrs = !getenv("NO_COLOR") || !getenv("NO_COLOR")[0];
        }
        rc = run_once(&L);
    } else if (isatty(STDOUT_FILENO)) {
        L.v.ansi = true;
        L.v.keys = true;
        L.v.attrs = !getenv("NO_COLOR") || !getenv("NO_COLOR")[0];
        rc = run_live(&L, isatty(STDIN_FILENO));
    } else {
        rc = run_live(&L, false); /* batch: plain frames down a pipe */
    }
out:
    free(L.prev);
    free(L.cur);
    free(L.frame);
    return rc;
}
