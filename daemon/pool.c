/*
 * pool.c - the worker processes: spawn, feed, supervise, resize.
 *
 * Each worker is the daemon's own binary started with uv_spawn() in worker
 * mode (fork+exec, never a bare fork of the loop's process) and given one
 * end of an AF_UNIX SOCK_SEQPACKET socketpair as fd 3.  The main process
 * watches its end with a uv_poll_t and sends with sendmsg(): messages are
 * small and at most WORKER_INFLIGHT jobs are outstanding per worker, so a
 * send that would block means the worker is wedged, and it is killed.
 * Fewer when they are expensive (WORKER_AHEAD_NS): jobs wait in the
 * streams' queues, where the fair queue (fairq.c FAIRNESS) picks the next,
 * rather than in a worker's socket, where they run in the order sent.
 *
 * A worker's life:
 *   EMPTY --spawn--> STARTING --HELLO--> READY --shrink--> RETIRING --exit--> EMPTY
 *                        \________________ \___ death ______________/
 * On death (any exit the pool did not ask for) its in-flight jobs go back to
 * the scheduler, which runs them again elsewhere, and the pool respawns a
 * worker after a backoff that doubles while workers keep dying young.
 */
#include <assert.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon.h"
#include "log.h"

#define BACKOFF_MIN_MS 10
#define BACKOFF_MAX_MS 1000
#define YOUNG_NS (2ull * 1000000000ull) /* a death before this age is "young" */
/*
 * A respawn loop: LOOP_YOUNG deaths in a row, each young, with no worker
 * living past YOUNG_NS in between.  The backoff already slows it (10 ms
 * doubling to 1 s); this makes it loud: one error line when the loop
 * begins (how many, the last exit), STATS workers.respawn_loop 1 while it
 * lasts, and one line when a worker lives past YOUNG_NS again.
 */
#define LOOP_YOUNG 3


/* The moves a worker's state may make (daemon.h, enum worker_state). */
/* (only assert() reads it: unused where NDEBUG compiles the check out) */
__attribute__((unused)) static const bool worker_moves[W_STATES][W_STATES] = {
    [W_EMPTY][W_STARTING] = true,
    [W_STARTING][W_READY] = true,
    [W_STARTING][W_RETIRING] = true,
    [W_STARTING][W_EMPTY] = true,
    [W_READY][W_RETIRING] = true,
    [W_READY][W_EMPTY] = true,
    [W_RETIRING][W_EMPTY] = true,
};

/* A worker's invariants, after every move (debug builds). */
static void worker_check(const struct worker *w)
{
    assert(w->state < W_STATES);
    assert(w->ninflight <= WORKER_INFLIGHT);
    assert(w->state != W_EMPTY || (w->ninflight == 0 && !w->proc_open && !w->poll_open));
    assert(w->state == W_EMPTY || w->proc_open);
    assert(w->state != W_READY || w->fd >= 0);
    (void)w;
}

/* The one place a worker's state changes. */
static void worker_to(struct worker *w, enum worker_state to)
{
    assert(worker_moves[w->state][to]);
    w->state = to;
    worker_check(w);
}

static void worker_spawn(struct daemon *d, struct worker *w);
static void worker_reap(struct daemon *d, struct worker *w);

static struct daemon *daemon_of(uv_handle_t *h)
{
    return h->loop->data;
}

static void add_counters(struct wire_counters *a, const struct wire_counters *b)
{
    a->jobs += b->jobs;
    a->samples += b->samples;
    a->bytes_read += b->bytes_read;
    a->busy_ns += b->busy_ns;
    a->io_ns += b->io_ns;
    a->decode_ns += b->decode_ns;
    a->transform_ns += b->transform_ns;
    a->write_ns += b->write_ns;
    a->image_ns += b->image_ns;
    a->resize_ns += b->resize_ns;
    a->cpu_ns += b->cpu_ns;
    a->tiled += b->tiled;
    for (int i = 0; i < WIRE_BAD_KINDS; i++)
        a->bad[i] += b->bad[i];
    a->substituted += b->substituted;
    a->boxes_dropped += b->boxes_dropped;
    for (int i = 0; i < AUG_OP_COUNT; i++) {
        a->aug_ns[i] += b->aug_ns[i];
        a->aug_images[i] += b->aug_images[i];
    }
}

void pool_totals(const struct daemon *d, struct wire_counters *out)
{
    *out = d->pool.gone;
    for (unsigned i = 0; i < POOL_MAX; i++)
        if (d->pool.w[i].state != W_EMPTY)
            add_counters(out, &d->pool.w[i].c);
}

/* Sends one message, with an fd when fd >= 0.  Returns 0 or -errno. */
static int send_msg(struct worker *w, const void *msg, size_t len, int fd)
{
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    struct iovec iov = { .iov_base = (void *)msg, .iov_len = len };
    struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
    ssize_t n;

    if (fd >= 0) {
        struct cmsghdr *c;

        memset(&u, 0, sizeof(u));
        mh.msg_control = u.buf;
        mh.msg_controllen = sizeof(u.buf);
        c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof(int));
    }
    do {
        n = sendmsg(w->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
    } while (n == -1 && errno == EINTR);
    if (n == -1)
        return -errno;
    return 0;
}

/* Something is wrong with this worker: kill it; its exit does the rest. */
static void worker_kill(struct worker *w, const char *why)
{
    log_warn("worker %d (pid %d): %s; killing it", w->index, (int)w->pid, why);
    if (w->proc_open && !w->exited)
        uv_process_kill(&w->proc, SIGKILL);
}

/* A message to w could not be sent (rc, a negative errno): kill it.  A
 * worker whose end is closed (EPIPE, ECONNRESET) has exited already (a
 * retired worker, a kill not yet reaped): that is said at debug level, not
 * blamed on it. */
static void send_failed(struct worker *w, const char *what, int rc)
{
    char why[160];

    if (rc == -EPIPE || rc == -ECONNRESET) {
        log_debug("worker %d (pid %d): %s: it has exited", w->index, (int)w->pid, what);
        if (w->proc_open && !w->exited)
            uv_process_kill(&w->proc, SIGKILL);
        return;
    }
    snprintf(why, sizeof(why), "%s: %s", what, strerror(-rc));
    worker_kill(w, why);
}

/* Sends the job's ring first if this worker has not seen it, then the job. */
static int send_job(struct daemon *d, struct worker *w, struct job *j)
{
    struct wire_job m;
    size_t len;
    int rc;

    (void)d;
    for (uint32_t i = 0; i < j->ntargets; i++) {
        struct stream *st = j->t[i].st;
        struct wire_ring_add ra;

        if (sched_worker_knows(st, w->index))
            continue;
        sched_ring_message(st, &ra);
        rc = send_msg(w, &ra, sizeof(ra), sched_ring_fd(st));
        if (rc < 0)
            return rc;
        sched_worker_learns(st, w->index, true);
    }
    len = sched_job_message(j, &m);
    return send_msg(w, &m, len, -1);
}

/* The work (ns, by cost_ns) of the jobs a worker holds (WORKER_AHEAD_NS). */
static int64_t work_held(const struct worker *w)
{
    int64_t ns = 0;

    for (unsigned i = 0; i < w->ninflight; i++)
        ns += sched_job_work(w->inflight[i]);
    return ns;
}

void pool_dispatch(struct daemon *d)
{
    struct pool *p = &d->pool;
    bool progress = true;

    /* round-robin over ready workers, one job each per pass, so jobs spread
     * across the pool before any worker gets a second one */
    while (d->sched.fq.queued && progress) {
        progress = false;
        for (unsigned i = 0; i < POOL_MAX && d->sched.fq.queued; i++) {
            struct worker *w = &p->w[i];
            struct job *j;
            int rc;

            if (w->state != W_READY || w->exited || w->ninflight >= WORKER_INFLIGHT ||
                work_held(w) >= WORKER_AHEAD_NS)
                continue;
            j = sched_dequeue(d);
            j->worker = w->index;
            j->progress = -1;
            if (w->ninflight == 0)
                w->busy_since = clock_mono_ns();
            w->inflight[w->ninflight++] = j;
            rc = send_job(d, w, j);
            if (rc < 0) {
                send_failed(w, "sending a job failed", rc);
                /* the job stays in its in-flight list; the exit requeues it */
                worker_to(w, W_RETIRING);
                continue;
            }
            progress = true;
        }
    }
}

void pool_forget_ring(struct daemon *d, struct stream *st)
{
    struct wire_ring_del m = { .type = WIRE_RING_DEL, .ring_id = sched_ring_id(st) };

    for (unsigned i = 0; i < POOL_MAX; i++) {
        struct worker *w = &d->pool.w[i];
        int rc;

        if (w->state == W_EMPTY || w->exited || !sched_worker_knows(st, w->index))
            continue;
        rc = send_msg(w, &m, sizeof(m), -1);
        if (rc < 0)
            send_failed(w, "cannot tell it to unmap a ring", rc);
        sched_worker_learns(st, w->index, false);
    }
}

void pool_quarantine(struct daemon *d, uint32_t dataset_id, uint64_t index)
{
    struct wire_quarantine m = { .type = WIRE_QUARANTINE, .dataset_id = dataset_id,
                                 .index = index };

    if (catalog_quarantine_add(d, dataset_id, index) < 0)
        log_error("out of memory keeping quarantined sample %llu for workers started later",
                  (unsigned long long)index);
    for (unsigned i = 0; i < POOL_MAX; i++) {
        struct worker *w = &d->pool.w[i];

        if ((w->state == W_READY || w->state == W_RETIRING) && !w->exited &&
            send_msg(w, &m, sizeof(m), -1) < 0)
            worker_kill(w, "cannot send it a quarantined sample");
    }
}

static struct job *take_inflight(struct worker *w, uint64_t job_id)
{
    for (unsigned i = 0; i < w->ninflight; i++) {
        struct job *j = w->inflight[i];

        if (j->job_id == job_id) {
            memmove(&w->inflight[i], &w->inflight[i + 1],
                    (w->ninflight - i - 1) * sizeof(w->inflight[0]));
            w->ninflight--;
            return j;
        }
    }
    return NULL;
}

/* Ends a respawn-loop episode (LOOP_YOUNG), saying so if one was reported. */
static void loop_over(struct daemon *d, const char *why)
{
    if (d->pool.respawn_loop)
        log_info("workers stay up again (%s): the respawn loop is over after %u young "
                 "death(s)", why, d->pool.young_in_row);
    d->pool.respawn_loop = false;
    d->pool.young_in_row = 0;
}

/* YOUNG_NS after a worker said hello while workers were dying young: if
 * one has lived that long, the deaths in a row are over. */
static void on_loop_timer(uv_timer_t *t)
{
    struct daemon *d = daemon_of((uv_handle_t *)t);
    uint64_t now = clock_mono_ns();

    for (unsigned i = 0; i < POOL_MAX && d->pool.young_in_row; i++) {
        const struct worker *w = &d->pool.w[i];

        if (w->state == W_READY && !w->exited && now - w->started_ns >= YOUNG_NS)
            loop_over(d, "a worker has run for 2 s");
    }
}

static void on_message(struct daemon *d, struct worker *w, const void *buf, size_t len)
{
    uint32_t type;

    if (len < sizeof(type)) {
        worker_kill(w, "sent a runt message");
        return;
    }
    memcpy(&type, buf, sizeof(type));
    switch (type) {
    case WIRE_HELLO: {
        struct wire_hello m;
        char build[sizeof(m.build)];

        /* the build first, where every build puts it (wire.h) */
        if (len >= offsetof(struct wire_hello, build) + sizeof(build)) {
            memcpy(build, (const char *)buf + offsetof(struct wire_hello, build), sizeof(build));
            build[sizeof(build) - 1] = '\0';
            if (strcmp(build, d->build) != 0) {
                char why[200];

                snprintf(why, sizeof(why), "runs build %.63s, this daemon is %.63s: refused",
                         build, d->build);
                worker_kill(w, why);
                return;
            }
        }
        if (len == sizeof(m) && w->state == W_RETIRING && w->ninflight == 0)
            break; /* retired before it said hello (a shrink or a reload): RETIRE is queued */
        if (len != sizeof(m) || w->state != W_STARTING) {
            worker_kill(w, "sent a bad HELLO");
            return;
        }
        memcpy(&m, buf, sizeof(m));
        m.io_backend[sizeof(m.io_backend) - 1] = '\0';
        m.reason[sizeof(m.reason) - 1] = '\0';
        snprintf(w->io_backend, sizeof(w->io_backend), "%s", m.io_backend);
        snprintf(w->io_reason, sizeof(w->io_reason), "%s", m.reason);
        /* mmap is a choice (info), pread a fallback (warn) */
        if (strcmp(d->pool.io_backend, w->io_backend) != 0 && m.reason[0] &&
            strcmp(w->io_backend, "mmap") == 0)
            log_info("worker %d reads with %s: %s", w->index, w->io_backend, m.reason);
        else if (strcmp(d->pool.io_backend, w->io_backend) != 0 && m.reason[0])
            log_warn("worker %d reads with %s: %s", w->index, w->io_backend, m.reason);
        snprintf(d->pool.io_backend, sizeof(d->pool.io_backend), "%s", w->io_backend);
        snprintf(d->pool.io_reason, sizeof(d->pool.io_reason), "%s", w->io_reason);
        for (uint32_t i = 0; i < d->quarantine.n; i++)
            if (send_msg(w, &d->quarantine.items[i], sizeof(d->quarantine.items[i]), -1) < 0) {
                worker_kill(w, "cannot send it the quarantine list");
                return;
            }
        worker_to(w, W_READY);
        log_debug("worker %d (pid %d) ready, io %s", w->index, (int)w->pid, w->io_backend);
        if (d->pool.young_in_row) /* is this one staying up? (on_loop_timer) */
            uv_timer_start(&d->pool.loop_timer, on_loop_timer, YOUNG_NS / 1000000 + 1, 0);
        pool_dispatch(d);
        service_pool_changed(d);
        break;
    }
    case WIRE_DONE: {
        struct wire_done m;
        struct job *j;
        uint64_t busy;

        if (len != sizeof(m)) {
            worker_kill(w, "sent a bad DONE");
            return;
        }
        memcpy(&m, buf, sizeof(m));
        m.reason[sizeof(m.reason) - 1] = '\0';
        /* its CPU time on this job: the counters are cumulative, and a
         * worker runs its jobs one at a time (WEIGHTS in fairq.c); CPU
         * time, so that a worker waiting for a core charges nobody */
        busy = m.c.cpu_ns >= w->c.cpu_ns ? m.c.cpu_ns - w->c.cpu_ns : 0;
        w->c = m.c;
        w->busy_since = clock_mono_ns(); /* its next job, if any, starts now */
        j = take_inflight(w, m.job_id);
        if (!j) {
            worker_kill(w, "reported a job it was not given");
            return;
        }
        sched_job_done(d, j, &m, busy);
        if (w->state == W_RETIRING && w->ninflight == 0) {
            struct wire_retire r = { .type = WIRE_RETIRE };

            if (send_msg(w, &r, sizeof(r), -1) < 0)
                worker_kill(w, "cannot retire it");
        }
        sched_fill(d);
        pool_dispatch(d);
        break;
    }
    case WIRE_PROGRESS: {
        struct wire_progress m;

        if (len != sizeof(m)) {
            worker_kill(w, "sent a bad PROGRESS");
            return;
        }
        memcpy(&m, buf, sizeof(m));
        for (unsigned i = 0; i < w->ninflight; i++)
            if (w->inflight[i]->job_id == m.job_id)
                w->inflight[i]->progress = (int32_t)m.j;
        break;
    }
    default:
        worker_kill(w, "sent an unknown message");
        break;
    }
}

static void on_readable(uv_poll_t *h, int status, int events)
{
    struct worker *w = h->data;
    struct daemon *d = daemon_of((uv_handle_t *)h);
    union {
        struct wire_done done;
        char bytes[1024];
    } buf;

    if (status < 0 || (events & UV_DISCONNECT)) {
        uv_poll_stop(h);
        return;
    }
    for (;;) {
        ssize_t n = recv(w->fd, &buf, sizeof(buf), MSG_DONTWAIT);

        if (n == -1) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN)
                uv_poll_stop(h);
            return;
        }
        if (n == 0) { /* the worker closed its end: its exit follows */
            uv_poll_stop(h);
            return;
        }
        on_message(d, w, &buf, (size_t)n);
        if (w->state == W_EMPTY || w->exited)
            return;
    }
}

static void on_handle_closed(uv_handle_t *h)
{
    struct worker *w = h->data;
    struct daemon *d = daemon_of(h);

    if (h == (uv_handle_t *)&w->proc)
        w->proc_open = false;
    else
        w->poll_open = false;
    if (!w->proc_open && !w->poll_open) {
        uint32_t gen = w->generation;
        int32_t idx = w->index;

        /* worker_reap gave every job back; nothing may be lost here */
        while (w->ninflight > 0)
            sched_job_orphaned(d, w->inflight[--w->ninflight]);
        worker_to(w, W_EMPTY);
        memset(w, 0, sizeof(*w)); /* W_EMPTY is 0 */
        w->index = idx;
        w->generation = gen;
        w->fd = -1;
        if (!d->stopping) {
            pool_resize(d, d->pool.target);
        } else if (d->pool.alive == 0 &&
                   !uv_is_closing((uv_handle_t *)&d->pool.respawn_timer)) {
            uv_close((uv_handle_t *)&d->pool.respawn_timer, NULL);
        }
    }
}

/*
 * The job watchdog (config watchdog-sec): a worker that has spent longer
 * than that on one job is killed; its jobs run again elsewhere, and a
 * sample that hangs workers every time ends up quarantined like one that
 * crashes them (sched_job_orphaned).
 */
static void on_watchdog_timer(uv_timer_t *t)
{
    struct daemon *d = daemon_of((uv_handle_t *)t);
    uint64_t limit = (uint64_t)d->cf.watchdog_sec * 1000000000ull, now = clock_mono_ns();

    if (!limit)
        return;
    for (unsigned i = 0; i < POOL_MAX; i++) {
        struct worker *w = &d->pool.w[i];

        if (w->state == W_EMPTY || w->exited || w->ninflight == 0 ||
            now - w->busy_since < limit)
            continue;
        d->pool.watchdog_kills++;
        worker_kill(w, "it has spent longer than watchdog-sec on one job");
    }
}

static void on_respawn_timer(uv_timer_t *t)
{
    struct daemon *d = daemon_of((uv_handle_t *)t);

    d->pool.respawn_due = true;
    pool_resize(d, d->pool.target);
}

/* The worker process ended: give its jobs back, count, close handles. */
static void on_worker_exit(uv_process_t *proc, int64_t status, int signal)
{
    struct worker *w = proc->data;
    struct daemon *d = daemon_of((uv_handle_t *)proc);
    bool asked = w->state == W_RETIRING && w->ninflight == 0;
    uint64_t age = clock_mono_ns() - w->started_ns;

    w->exited = true;
    d->pool.alive--;
    add_counters(&d->pool.gone, &w->c);
    memset(&w->c, 0, sizeof(w->c));
    if (asked || d->stopping) {
        d->pool.retired++;
        log_debug("worker %d (pid %d) exited", w->index, (int)w->pid);
    } else {
        d->pool.deaths++;
        log_warn("worker %d (pid %d) died (%s %d) with %u job(s); running them again",
                 w->index, (int)w->pid, signal ? "signal" : "status",
                 signal ? signal : (int)status, w->ninflight);
        if (age < YOUNG_NS) {
            d->pool.backoff_ms = d->pool.backoff_ms ? d->pool.backoff_ms * 2 : BACKOFF_MIN_MS;
            d->pool.young_in_row++;
        } else {
            d->pool.backoff_ms = 0;
            loop_over(d, "a worker lived past 2 s before it died");
        }
        if (d->pool.young_in_row >= LOOP_YOUNG && !d->pool.respawn_loop) {
            d->pool.respawn_loop = true;
            d->pool.respawn_loops++;
            log_error("workers keep dying within 2 s of starting: %u in a row, the last of %s "
                      "%d; respawning at most every %u ms until one stays up (the lines "
                      "above say why they die)", d->pool.young_in_row,
                      signal ? "signal" : "status", signal ? signal : (int)status,
                      BACKOFF_MAX_MS);
        }
        if (d->pool.backoff_ms > BACKOFF_MAX_MS)
            d->pool.backoff_ms = BACKOFF_MAX_MS;
    }
    worker_reap(d, w);
}

static void worker_reap(struct daemon *d, struct worker *w)
{
    struct job *orphans[WORKER_INFLIGHT];
    unsigned n = w->ninflight;

    memcpy(orphans, w->inflight, n * sizeof(orphans[0]));
    w->ninflight = 0;
    /* the rings this worker mapped are forgotten with it */
    sched_worker_gone(d, w->index);
    if (w->fd >= 0) {
        close(w->fd);
        w->fd = -1;
    }
    if (w->poll_open)
        uv_close((uv_handle_t *)&w->poll, on_handle_closed);
    if (w->proc_open)
        uv_close((uv_handle_t *)&w->proc, on_handle_closed);
    for (unsigned i = 0; i < n; i++)
        sched_job_orphaned(d, orphans[i]);
    if (!d->stopping)
        pool_dispatch(d);
}

static void worker_spawn(struct daemon *d, struct worker *w)
{
    char parent[32], loglevel[16];
    char *args[10 + 2 * 64 + 2 * PLUGIN_MAX + 1];
    char dsargs[64][4200], databytes[32];
    static char plargs[PLUGIN_MAX][AUG_NAME_MAX + 1 + PLUGIN_PATH_MAX];
    uv_stdio_container_t stdio[4];
    uv_process_options_t opt;
    int sv[2], argc = 0, rc;

    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == -1) {
        log_error("worker %d: socketpair: %s", w->index, strerror(errno));
        return;
    }
    snprintf(parent, sizeof(parent), "%d", (int)getpid());
    snprintf(loglevel, sizeof(loglevel), "%s", conf_log_level_name(d->cf.log_level));
    args[argc++] = d->exe;
    args[argc++] = "--worker";
    args[argc++] = parent;
    args[argc++] = "--log-level";
    args[argc++] = loglevel;
    snprintf(databytes, sizeof(databytes), "%llu", (unsigned long long)catalog_data_bytes(d));
    args[argc++] = "--data-bytes";
    args[argc++] = databytes;
    for (uint32_t i = 0; i < d->ncat && i < 64; i++) {
        snprintf(dsargs[i], sizeof(dsargs[i]), "%s=%s", d->cat[i].name, d->cat[i].dir);
        /* a remote dataset's shards come and go in the node cache (ahead.h) */
        args[argc++] = d->cat[i].url[0] ? "--dataset-on-demand" : "--dataset";
        args[argc++] = dsargs[i];
    }
    /* the plugins the main process loaded and checked (catalog_load_plugins) */
    for (unsigned i = 0; i < d->plugins.n; i++) {
        snprintf(plargs[i], sizeof(plargs[i]), "%s=%s", d->plugins.p[i].name,
                 d->plugins.p[i].path);
        args[argc++] = "--plugin";
        args[argc++] = plargs[i];
    }
    args[argc] = NULL;

    memset(&opt, 0, sizeof(opt));
    stdio[0].flags = UV_IGNORE;
    stdio[1].flags = UV_INHERIT_FD;
    stdio[1].data.fd = STDOUT_FILENO;
    stdio[2].flags = UV_INHERIT_FD;
    stdio[2].data.fd = STDERR_FILENO;
    stdio[3].flags = UV_INHERIT_FD;
    stdio[3].data.fd = sv[1];
    opt.file = d->exe_run; /* the file this daemon runs, whatever is at d->exe now */
    opt.args = args;
    opt.stdio = stdio;
    opt.stdio_count = 4;
    opt.exit_cb = on_worker_exit;

    {
        int32_t idx = w->index;
        uint32_t gen = w->generation + 1;

        memset(w, 0, sizeof(*w));
        w->index = idx;
        w->generation = gen;
    }
    w->proc.data = w;
    rc = uv_spawn(d->loop, &w->proc, &opt);
    close(sv[1]);
    if (rc < 0) {
        log_error("worker %d: cannot start %s: %s", w->index, d->exe, uv_strerror(rc));
        close(sv[0]);
        /* the process handle needs closing even when the spawn failed */
        w->fd = -1;
        w->proc_open = true;
        w->exited = true;
        worker_to(w, W_STARTING);
        uv_close((uv_handle_t *)&w->proc, on_handle_closed);
        d->pool.backoff_ms = d->pool.backoff_ms ? d->pool.backoff_ms * 2 : 100;
        if (d->pool.backoff_ms > BACKOFF_MAX_MS)
            d->pool.backoff_ms = BACKOFF_MAX_MS;
        return;
    }
    w->proc_open = true;
    w->fd = sv[0];
    w->pid = w->proc.pid;
    worker_to(w, W_STARTING);
    w->started_ns = clock_mono_ns();
    d->pool.alive++;
    d->pool.spawned++;
    uv_poll_init(d->loop, &w->poll, w->fd);
    w->poll.data = w;
    w->poll_open = true;
    uv_poll_start(&w->poll, UV_READABLE | UV_DISCONNECT, on_readable);
}

int pool_resize(struct daemon *d, uint32_t n)
{
    struct pool *p = &d->pool;
    uint32_t live = 0;

    if (n < 1 || n > POOL_MAX)
        return -EINVAL;
    p->target = n;
    if (d->stopping)
        return 0;
    /* count workers that will keep running: not retiring, not exited */
    for (unsigned i = 0; i < POOL_MAX; i++) {
        struct worker *w = &p->w[i];

        if ((w->state == W_STARTING || w->state == W_READY) && !w->exited)
            live++;
    }
    /* shrink: retire the highest-numbered workers after their jobs */
    for (int i = POOL_MAX - 1; i >= 0 && live > n; i--) {
        struct worker *w = &p->w[i];

        if ((w->state != W_STARTING && w->state != W_READY) || w->exited)
            continue;
        worker_to(w, W_RETIRING);
        live--;
        if (w->ninflight == 0) {
            struct wire_retire r = { .type = WIRE_RETIRE };

            if (send_msg(w, &r, sizeof(r), -1) < 0)
                worker_kill(w, "cannot retire it");
        }
    }
    /* grow: at once, unless workers have been dying young; then once the
     * backoff has passed (the timer sets respawn_due) */
    if (live < n) {
        if (uv_is_active((uv_handle_t *)&p->respawn_timer))
            return 0;
        if (p->backoff_ms && !p->respawn_due) {
            uv_timer_start(&p->respawn_timer, on_respawn_timer, p->backoff_ms, 0);
            return 0;
        }
        p->respawn_due = false;
        for (unsigned i = 0; i < POOL_MAX && live < n; i++) {
            struct worker *w = &p->w[i];

            if (w->state != W_EMPTY)
                continue;
            w->index = (int32_t)i;
            worker_spawn(d, w);
            if (w->state == W_STARTING && !w->exited)
                live++;
        }
    }
    return 0;
}

int pool_start(struct daemon *d)
{
    for (unsigned i = 0; i < POOL_MAX; i++) {
        d->pool.w[i].index = (int32_t)i;
        d->pool.w[i].fd = -1;
    }
    snprintf(d->pool.io_backend, sizeof(d->pool.io_backend), "unknown");
    uv_timer_init(d->loop, &d->pool.respawn_timer);
    uv_timer_init(d->loop, &d->pool.watchdog_timer);
    uv_timer_init(d->loop, &d->pool.loop_timer);
    if (d->cf.watchdog_sec)
        uv_timer_start(&d->pool.watchdog_timer, on_watchdog_timer, 1000, 1000);
    return pool_resize(d, d->cf.workers);
}

void pool_stop(struct daemon *d)
{
    uv_timer_stop(&d->pool.respawn_timer);
    uv_close((uv_handle_t *)&d->pool.watchdog_timer, NULL);
    uv_close((uv_handle_t *)&d->pool.loop_timer, NULL);
    for (unsigned i = 0; i < POOL_MAX; i++) {
        struct worker *w = &d->pool.w[i];

        if (w->state != W_EMPTY && w->proc_open && !w->exited)
            uv_process_kill(&w->proc, SIGTERM);
    }
    if (d->pool.alive == 0 && !uv_is_closing((uv_handle_t *)&d->pool.respawn_timer))
        uv_close((uv_handle_t *)&d->pool.respawn_timer, NULL);
}

void pool_roll(struct daemon *d)
{
    struct pool *p = &d->pool;
    uint32_t n = 0;

    if (d->stopping)
        return;
    for (unsigned i = 0; i < POOL_MAX; i++) {
        struct worker *w = &p->w[i];

        if ((w->state != W_STARTING && w->state != W_READY) || w->exited)
            continue;
        worker_to(w, W_RETIRING);
        n++;
        if (w->ninflight == 0) {
            struct wire_retire r = { .type = WIRE_RETIRE };

            if (send_msg(w, &r, sizeof(r), -1) < 0)
                worker_kill(w, "cannot retire it");
        }
    }
    log_info("restarting the workers: %u retire after their current jobs, %u start", n,
             p->target);
    pool_resize(d, p->target);
}

void pool_reconfigure(struct daemon *d)
{
    if (d->cf.watchdog_sec && !uv_is_active((uv_handle_t *)&d->pool.watchdog_timer))
        uv_timer_start(&d->pool.watchdog_timer, on_watchdog_timer, 1000, 1000);
    else if (!d->cf.watchdog_sec)
        uv_timer_stop(&d->pool.watchdog_timer);
}

void pool_signal_all(struct daemon *d, int sig)
{
    for (unsigned i = 0; i < POOL_MAX; i++) {
        struct worker *w = &d->pool.w[i];

        if (w->state != W_EMPTY && w->proc_open && !w->exited)
            uv_process_kill(&w->proc, sig);
    }
}
