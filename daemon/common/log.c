/* log.c - ringfeedd's leveled log lines on stderr (see log.h). */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum log_level log_threshold = LOG_INFO;

static const char *const level_names[] = {
    [LOG_ERROR] = "error",
    [LOG_WARN] = "warn",
    [LOG_INFO] = "info",
    [LOG_DEBUG] = "debug",
};

/* sd-daemon(3)'s priorities: LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG */
static const int journal_prio[] = {
    [LOG_ERROR] = 3,
    [LOG_WARN] = 4,
    [LOG_INFO] = 6,
    [LOG_DEBUG] = 7,
};

static int journal = -1;   /* is stderr the journal? -1: not looked yet */
static char who[32];       /* "worker[PID]" in a worker, "" in the main process */

int log_parse_level(const char *s, enum log_level *out)
{
    for (unsigned i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++) {
        if (strcmp(s, level_names[i]) == 0) {
            *out = (enum log_level)i;
            return 0;
        }
    }
    return -EINVAL;
}

void log_set_worker(void)
{
    snprintf(who, sizeof(who), "worker[%d]", (int)getpid());
}

/* systemd's rule: stderr goes to the journal when its device and inode
 * are the ones JOURNAL_STREAM names ("DEV:INO"). */
static bool stderr_is_journal(void)
{
    const char *v = getenv("JOURNAL_STREAM");
    unsigned long long dev, ino;
    struct stat st;
    char end;

    if (!v || sscanf(v, "%llu:%llu%c", &dev, &ino, &end) != 2)
        return false;
    if (fstat(STDERR_FILENO, &st) == -1)
        return false;
    return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

void log_msg(enum log_level level, const char *fmt, ...)
{
    char line[1024];
    int n;
    va_list ap;

    if (level > log_threshold)
        return;
    if (journal < 0)
        journal = stderr_is_journal();
    if (journal)
        n = snprintf(line, sizeof(line), "<%d>%s%s", journal_prio[level], who,
                     who[0] ? ": " : "");
    else
        n = snprintf(line, sizeof(line), "ringfeedd[%d]: %s: ", (int)getpid(),
                     level_names[level]);
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    n = (int)strlen(line);
    line[n++] = '\n';
    /* one write per line so lines from workers do not interleave */
    if (write(STDERR_FILENO, line, (size_t)n) == -1)
        return;
}
