/*
 * llmc/run_folder.h: the run folder (-o) is the user's data. What a launch may do with it is
 * decided before anything in it is written (doc/formats.md "Optimizer/DataLoader state": the run folder):
 *
 *   the folder holds             -y 0 (default)      -y 1                           -start_over 1
 *   no run (missing or empty)    start the run       start it if -e is given,       start the run
 *                                                    else an error that creates
 *                                                    nothing
 *   a run without a complete     refused             start the run of its           the old run's files
 *   checkpoint (flags.txt,                           flags.txt from scratch; the    are moved into
 *   main.log)                                        old files are moved aside      <-o>/replaced_<n>/,
 *   a complete checkpoint        refused             resume from the newest         then the run starts
 *
 * A run's files are the trainers' own: main.log, flags.txt, model_<step>.bin,
 * state_<step>_<rank>.bin, DONE_<step> and their .tmp files. Other files in the folder (a user's
 * notes, a driver's reports) are never counted, moved or touched.
 *
 * Defines:
 *   run_folder_lock       one writer per folder: an advisory lock on <dir>/.lock, held for the
 *                         life of the process; a second trainer stops with one line naming the
 *                         holder's PID
 *   RunFolderScan, run_folder_scan   which of a run's files a folder holds
 *   run_folder_open       the table above: checks, creates the folder, locks it and moves a
 *                         replaced run aside (rank 0 of a run calls it)
 *   run_log_keep_before   main.log when a run resumes at step k: the records of the steps before
 *                         k, rewritten atomically (the resumed run writes step k's again)
 *
 * Plain C (static inline, explicit casts): gcc -std=c11 and nvcc's host compiler both take it.
 */
#ifndef LLMC_RUN_FOLDER_H
#define LLMC_RUN_FOLDER_H

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>

#include "checkpoint.h" /* TRAIN_FLAGS_FILE */
#include "state.h"
#include "utils.h"

#define RUN_FOLDER_LOG "main.log"
#define RUN_FOLDER_REPLACED "replaced_"

/* One writer per run folder (two trainers writing one main.log or one flags.txt mix two runs).
 * flock() on <dir>/.lock, never released by hand: the kernel drops it when the process exits,
 * however it exits, so a killed run leaves no stale lock. The file holds the holder's PID for the
 * message. The descriptor stays open for the life of the process. */
static inline void run_folder_lock(const char *dir) {
    char path[4096];
    const int n = snprintf(path, sizeof(path), "%s/.lock", dir);
    if (n < 0 || (size_t)n >= sizeof(path)) llmc_die("path too long: %s/.lock", dir);
    const int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) llmc_die("%s: cannot open the run folder's lock file: %s", path, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        const int e = errno;
        char pid[32] = "unknown";
        const ssize_t got = pread(fd, pid, sizeof(pid) - 1, 0);
        if (got > 0) {
            pid[got] = '\0';
            pid[strcspn(pid, "\n")] = '\0';
        }
        if (e == EWOULDBLOCK) {
            llmc_die("%s: another trainer (PID %s) is writing this run folder; wait for it to end or give "
                     "another -o", dir, pid);
        }
        llmc_die("%s: cannot lock the run folder: %s", path, strerror(e));
    }
    char text[32];
    const int len = snprintf(text, sizeof(text), "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, text, (size_t)len, 0) != len) {
        llmc_die("%s: cannot write the lock file: %s", path, strerror(errno));
    }
}

/* ----------------------------------------------------------------------------------------------
 * Which of a run's files a folder holds */

/* 1 if s[0..n) are n decimal digits. */
static inline int run_folder_digits_(const char *s, int n) {
    for (int i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9') return 0;
    return 1;
}

/* Whether `name` is one of a run's files (see the header comment), with or without ".tmp". */
static inline int run_folder_is_run_file(const char *name) {
    char base[64];
    const size_t len = strlen(name);
    if (len >= sizeof(base)) return 0;
    memcpy(base, name, len + 1);
    if (len > 4 && strcmp(base + len - 4, ".tmp") == 0) base[len - 4] = '\0';
    const size_t n = strlen(base);
    if (strcmp(base, RUN_FOLDER_LOG) == 0 || strcmp(base, TRAIN_FLAGS_FILE) == 0) return 1;
    if (n == 18 && strncmp(base, "model_", 6) == 0 && run_folder_digits_(base + 6, 8) &&
        strcmp(base + 14, ".bin") == 0) return 1;                                  /* model_%08d.bin */
    if (n == 24 && strncmp(base, "state_", 6) == 0 && run_folder_digits_(base + 6, 8) && base[14] == '_' &&
        run_folder_digits_(base + 15, 5) && strcmp(base + 20, ".bin") == 0) return 1; /* state_%08d_%05d.bin */
    return ckpt_done_step(base) >= 0; /* DONE_%08d */
}

typedef struct {
    int exists;        /* the folder exists */
    int files;         /* the run's files in it */
    int has_log;       /* main.log */
    int has_flags;     /* flags.txt */
    int checkpoints;   /* complete checkpoints (DONE_ markers) */
    int newest;        /* the newest complete checkpoint's step, -1: none */
} RunFolderScan;

static inline void run_folder_scan(const char *dir, RunFolderScan *s) {
    memset(s, 0, sizeof(*s));
    s->newest = -1;
    DIR *d = opendir(dir);
    if (d == NULL) {
        if (errno == ENOTDIR) llmc_die("%s: -o is not a directory", dir);
        if (errno != ENOENT) llmc_die("%s: cannot read the run folder: %s", dir, strerror(errno));
        return;
    }
    s->exists = 1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!run_folder_is_run_file(e->d_name)) continue;
        s->files++;
        if (strcmp(e->d_name, RUN_FOLDER_LOG) == 0) s->has_log = 1;
        if (strcmp(e->d_name, TRAIN_FLAGS_FILE) == 0) s->has_flags = 1;
        const int step = ckpt_done_step(e->d_name);
        if (step >= 0) {
            s->checkpoints++;
            s->newest = LLMC_MAX(s->newest, step);
        }
    }
    closedir(d);
}

/* What a scan found, for a message: "main.log, flags.txt, 2 complete checkpoints (newest: step 10),
 * 7 files in all". */
static inline void run_folder_describe(const RunFolderScan *s, char *buf, size_t cap) {
    int n = snprintf(buf, cap, "%s%s", s->has_log ? "main.log, " : "", s->has_flags ? "flags.txt, " : "");
    if (s->checkpoints > 0 && n >= 0 && (size_t)n < cap) {
        n += snprintf(buf + n, cap - (size_t)n, "%d complete checkpoint%s (newest: step %d), ", s->checkpoints,
                      s->checkpoints == 1 ? "" : "s", s->newest);
    }
    if (n >= 0 && (size_t)n < cap) snprintf(buf + n, cap - (size_t)n, "%d file%s in all", s->files, s->files == 1 ? "" : "s");
}

/* ----------------------------------------------------------------------------------------------
 * Starting over: the old run's files move into <dir>/replaced_<n>/ (the first n >= 1 not taken),
 * by rename, so nothing is copied, truncated or lost. Prints where they went. */
static inline void run_folder_move_aside(const char *dir, const RunFolderScan *s, const char *why) {
    char dest[4200];
    for (int i = 1;; i++) {
        char name[32];
        snprintf(name, sizeof(name), RUN_FOLDER_REPLACED "%d", i);
        path_join(dest, sizeof(dest), dir, name);
        if (mkdir(dest, 0777) == 0) break;
        if (errno != EEXIST) llmc_die("%s: cannot create the folder for the replaced run: %s", dest, strerror(errno));
        if (i == 1000000) llmc_die("%s: no free %s<n> folder name below 1000000", dir, RUN_FOLDER_REPLACED);
    }
    DIR *d = opendir(dir);
    if (d == NULL) llmc_die("%s: cannot read the run folder: %s", dir, strerror(errno));
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!run_folder_is_run_file(e->d_name)) continue;
        char from[4200], to[4300];
        path_join(from, sizeof(from), dir, e->d_name);
        path_join(to, sizeof(to), dest, e->d_name);
        if (rename(from, to) != 0) llmc_die("%s: cannot move it to %s: %s", from, to, strerror(errno));
    }
    closedir(d);
    fsync_parent_dir(dest);    /* dir's own entry for replaced_<n> */
    char inside[4300];
    path_join(inside, sizeof(inside), dest, ".");
    fsync_parent_dir(inside);  /* replaced_<n>'s entries */
    char what[256];
    run_folder_describe(s, what, sizeof(what));
    printf("%s: moved the earlier run's files (%s) into %s/\n", why, what, dest);
}

/* The launch's decision for its folder (the table at the top); dies with one line on a refusal.
 * resume: -y 1; start_over: -start_over 1; init_given: -e is on this command line. Creates the
 * folder, takes its lock and moves a replaced run aside. The caller restores the run's flags
 * (train_flags_restore) before and writes flags.txt after. */
static inline void run_folder_open(const char *dir, int resume, int start_over, int init_given) {
    RunFolderScan s;
    run_folder_scan(dir, &s);
    if (resume && !init_given && s.newest < 0 && !s.has_flags) {
        if (!s.exists) {
            llmc_die("%s: -y 1: no such run folder (nothing was created); check -o, or give -e to start a "
                     "run there", dir);
        }
        llmc_die("%s: -y 1: this folder holds no run to resume (no %s, no complete checkpoint) and no -e "
                 "names a model to start one; check -o, or give -e", dir, TRAIN_FLAGS_FILE);
    }
    make_dir(dir);
    run_folder_lock(dir); /* before anything in the folder is read for a decision or written */
    run_folder_scan(dir, &s);
    if (s.files == 0) {
        if (resume) printf("-y 1: %s holds no run yet: starting from scratch\n", dir);
        return;
    }
    if (resume && s.newest >= 0) return; /* the trainer resumes from s.newest */
    if (!resume && !start_over) {
        char what[256];
        run_folder_describe(&s, what, sizeof(what));
        llmc_die("%s holds a run (%s): -y 1 resumes it; -start_over 1 moves its files into %s/%s<n>/ and "
                 "starts this run there; or give another -o", dir, what, dir, RUN_FOLDER_REPLACED);
    }
    if (resume) {
        printf("-y 1: %s has no complete checkpoint: starting %s from scratch\n", dir,
               s.has_flags ? "the run of its flags.txt" : "the run of this command line");
        run_folder_move_aside(dir, &s, "-y 1");
    } else {
        run_folder_move_aside(dir, &s, "-start_over 1");
    }
}

/* ----------------------------------------------------------------------------------------------
 * main.log on resume. A run resumed at step k repeats step k's val loss, evals and sample, then
 * trains from k: the log keeps the records of steps before k ("s:<step> ..." lines, llmc/logger.h)
 * and drops the rest, which the resumed run writes again (also the lines of a run that went on
 * past its last checkpoint before it was stopped). Lines that are not such records are dropped
 * too, and counted. Rewritten as main.log.tmp and renamed: a crash leaves the old or the new log. */
static inline void run_log_keep_before(const char *dir, int step) {
    char path[4200];
    path_join(path, sizeof(path), dir, RUN_FOLDER_LOG);
    if (!file_exists(path)) return;
    FILE *in = xfopen(path, "rb");
    AtomicFile af;
    atomic_open(&af, path);
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    long kept = 0, later = 0, other = 0;
    while ((len = getline(&line, &cap, in)) != -1) {
        long s = -1;
        int used = 0;
        if (memchr(line, '\0', (size_t)len) == NULL && sscanf(line, "s:%ld%n", &s, &used) == 1 && used > 2 &&
            (line[used] == ' ' || line[used] == '\n')) {
            if (s < step) {
                atomic_write(&af, line, 1, (size_t)len);
                if (line[len - 1] != '\n') atomic_write(&af, "\n", 1, 1);
                kept++;
            } else {
                later++;
            }
        } else {
            other++;
        }
    }
    free(line);
    if (ferror(in)) llmc_die("%s: read failed", path);
    xfclose(in, path);
    if (later == 0 && other == 0) {
        atomic_discard(&af); /* nothing to drop: the log stays as it is */
        return;
    }
    atomic_commit(&af);
    printf("%s: resuming at step %d: kept the %ld records of earlier steps, dropped %ld of step %d and later",
           path, step, kept, later, step);
    if (other > 0) printf(" and %ld line%s that %s not s:<step> records", other, other == 1 ? "" : "s",
                          other == 1 ? "is" : "are");
    printf("\n");
}

#endif /* LLMC_RUN_FOLDER_H */
