/*
 * test_log.c - the daemon's log lines (daemon/common/log.c): "ringfeedd[pid]:
 * level: message" on a plain stderr; "<priority>message" when stderr is the
 * journal (JOURNAL_STREAM names its device and inode), a worker's lines
 * there named "worker[pid]: ".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "tap.h"

/* Runs body in a child whose stderr is a pipe, with JOURNAL_STREAM set to
 * the pipe's identity when journal; returns what it wrote. */
static void capture(int journal, int worker, char *out, size_t cap)
{
    int p[2];
    pid_t pid;
    ssize_t n, got = 0;

    if (pipe(p) == -1)
        exit(1);
    pid = fork();
    if (pid == 0) {
        struct stat st;
        char v[64];

        dup2(p[1], STDERR_FILENO);
        close(p[0]);
        fstat(STDERR_FILENO, &st);
        snprintf(v, sizeof(v), "%llu:%llu", (unsigned long long)st.st_dev,
                 (unsigned long long)st.st_ino);
        if (journal)
            setenv("JOURNAL_STREAM", v, 1);
        else
            setenv("JOURNAL_STREAM", "1:2", 1); /* another file: not the journal */
        if (worker)
            log_set_worker();
        log_threshold = LOG_DEBUG;
        log_error("disk %s", "gone");
        log_warn("slow");
        log_info("ready");
        log_debug("detail");
        _exit(0);
    }
    close(p[1]);
    while (got < (ssize_t)cap - 1 && (n = read(p[0], out + got, cap - 1 - (size_t)got)) > 0)
        got += n;
    out[got] = '\0';
    close(p[0]);
    waitpid(pid, NULL, 0);
}

int main(void)
{
    char buf[1024];

    capture(0, 0, buf, sizeof(buf));
    TAP_OK(strstr(buf, "]: error: disk gone\n") && strstr(buf, "]: warn: slow\n") &&
               strstr(buf, "]: info: ready\n") && strstr(buf, "]: debug: detail\n") &&
               strncmp(buf, "ringfeedd[", 10) == 0,
           "plain stderr: ringfeedd[pid]: level: message");
    capture(1, 0, buf, sizeof(buf));
    TAP_OK(strcmp(buf, "<3>disk gone\n<4>slow\n<6>ready\n<7>detail\n") == 0,
           "the journal: <priority>message, nothing the journal adds itself");
    tap_diag("%s", buf);
    capture(1, 1, buf, sizeof(buf));
    TAP_OK(strncmp(buf, "<3>worker[", 10) == 0 && strstr(buf, "]: disk gone\n<4>worker["),
           "a worker's journal lines say which worker");
    return tap_done();
}
