/*
 * worker.h - the worker process's entry point, for main.c, which runs it
 * when ringfeedd is started as `ringfeedd --worker PARENT_PID ...`.
 *
 * daemon/worker/ is the code that runs in the worker processes: the job
 * loop (worker.c), the read backends (io.h), the transforms (transform.h,
 * xform_image.h), the JPEG decoder (jpeg.h) and the resampler (resize.h).
 * It includes proto/ (wire.h: the messages between the two processes) and
 * daemon/common/ (log.h, the one module both processes run); nothing of the
 * main process's (daemon.h).  tests/check_layers.py holds every folder to
 * the include table in docs/design/folders.md.
 */
#ifndef RINGFEED_DAEMON_WORKER_WORKER_H
#define RINGFEED_DAEMON_WORKER_WORKER_H

/* The worker process's main; never returns. */
__attribute__((noreturn)) void worker_main(int argc, char **argv);

#endif
