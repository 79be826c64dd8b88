/*
 * llmc/stop_signal.h: Ctrl-C keeps the work. The first SIGINT or SIGTERM asks the trainer to stop:
 * it finishes the step under way, writes a checkpoint, prints the command that resumes and exits
 * with 128 + the signal's number. A second one ends the process at once (the default action).
 *
 * Defines:
 *   stop_signal_install   the handler for SIGINT and SIGTERM
 *   stop_signal_pending   0, or the number of the first signal received
 *
 * The one mutable global of the trainers: a signal handler can reach nothing else. It is written
 * by the handler only, and read by the training loop between steps.
 */
#ifndef LLMC_STOP_SIGNAL_H
#define LLMC_STOP_SIGNAL_H

#include <signal.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t stop_signal_received = 0;

static inline void stop_signal_handler_(int sig) {
    if (stop_signal_received != 0) { /* the second: at once, as if no handler were installed */
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    stop_signal_received = sig;
    static const char msg[] = "\nstopping after this step: a checkpoint follows (press Ctrl-C again to quit at once)\n";
    const ssize_t put = write(STDERR_FILENO, msg, sizeof(msg) - 1); /* async-signal-safe */
    (void)put;
}

static inline void stop_signal_install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = stop_signal_handler_;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART; /* a read or write under way goes on */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

static inline int stop_signal_pending(void) { return (int)stop_signal_received; }

#endif /* LLMC_STOP_SIGNAL_H */
