/*
 * pack_progress.c - progress on stderr: on a terminal a bar redrawn at most
 * ten times a second, otherwise (a log, a pipe) one plain line at every
 * tenth of the work, so logs stay short and readable.
 */
#include <stdio.h>
#include <unistd.h>

#include "pack.h"

#define BAR_WIDTH 30

/* Whether a bar is on the terminal's last line now (one thread draws and
 * warns: the packer's main thread), for progress_clear. */
static int bar_shown;

void progress_start(struct progress *p, const char *what, uint64_t total)
{
    p->what = what;
    p->total = total;
    p->start = pack_now();
    p->last_draw = 0;
    p->tty = isatty(STDERR_FILENO);
    p->last_decile = 0;
}

static void human(char *buf, size_t cap, uint64_t bytes)
{
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    int u = 0;

    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    snprintf(buf, cap, u ? "%.1f %s" : "%.0f %s", v, unit[u]);
}

void progress_update(struct progress *p, uint64_t done, uint64_t bytes)
{
    double now = pack_now();
    int pct = p->total ? (int)(done * 100 / p->total) : 100;
    char size[32];

    if (p->tty) {
        int fill = pct * BAR_WIDTH / 100;

        if (now - p->last_draw < 0.1 && done != p->total)
            return;
        p->last_draw = now;
        human(size, sizeof(size), bytes);
        fprintf(stderr, "\r%s [", p->what);
        for (int i = 0; i < BAR_WIDTH; i++)
            fputc(i < fill ? '#' : '.', stderr);
        fprintf(stderr, "] %3d%%  %llu/%llu  %s  %.1f s ", pct,
                (unsigned long long)done, (unsigned long long)p->total, size,
                now - p->start);
        fflush(stderr);
        bar_shown = 1;
        return;
    }
    if (pct / 10 <= p->last_decile)
        return;
    p->last_decile = pct / 10;
    human(size, sizeof(size), bytes);
    fprintf(stderr, "%s: %llu/%llu (%d%%), %s, %.1f s\n", p->what,
            (unsigned long long)done, (unsigned long long)p->total, pct, size,
            now - p->start);
}

void progress_clear(void)
{
    if (!bar_shown)
        return;
    fputc('\r', stderr);
    for (int i = 0; i < BAR_WIDTH + 60; i++)
        fputc(' ', stderr);
    fputc('\r', stderr);
    fflush(stderr);
    bar_shown = 0;
}

void progress_end(struct progress *p)
{
    if (p->tty)
        progress_clear();
}
