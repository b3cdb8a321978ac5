/* log.c - ringfeedd's leveled log lines on stderr (see log.h). */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

enum log_level log_threshold = LOG_INFO;

static const char *const level_names[] = {
    [LOG_ERROR] = "error",
    [LOG_WARN] = "warn",
    [LOG_INFO] = "info",
    [LOG_DEBUG] = "debug",
};

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

void log_msg(enum log_level level, const char *fmt, ...)
{
    char line[1024];
    int n;
    va_list ap;

    if (level > log_threshold)
        return;
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
