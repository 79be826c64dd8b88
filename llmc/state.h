/*
 * llmc/state.h: training checkpoints: the optimizer/loader state file, DONE_ markers, resume
 * and retention (doc/formats.md "Optimizer/DataLoader state").
 *
 * Defines:
 *   ckpt_model_path / ckpt_state_path / ckpt_done_path   <out>/model_%08d.bin, state_%08d_%05d.bin,
 *                                                        DONE_%08d
 *   TrainState            the header fields of a state file
 *   state_write           header + m + v (+ master weights) + the loader's shuffle state
 *   state_read            the same back, every field checked against this run
 *   ckpt_done_step        the step of a DONE_%08d file name (-1 for any other name)
 *   find_max_done_step    the newest complete checkpoint in a directory (-1 if none)
 *   ckpt_remove_old       -nk/-nm retention
 *
 * Protocol: the model file, then every rank's state file, then (after a barrier on the GPU) the
 * empty DONE_ file. Each file is written to NAME.tmp and renamed, and DONE_ comes last, so a
 * checkpoint without its DONE_ file is never resumed from.
 */
#ifndef LLMC_STATE_H
#define LLMC_STATE_H

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "dataloader.h"
#include "utils.h"

#define STATE_MAGIC 20240527
#define STATE_VERSION 1

static inline void ckpt_model_path(char *out, size_t cap, const char *dir, int step) {
    char name[64];
    snprintf(name, sizeof(name), "model_%08d.bin", step);
    path_join(out, cap, dir, name);
}

static inline void ckpt_state_path(char *out, size_t cap, const char *dir, int step, int rank) {
    char name[64];
    snprintf(name, sizeof(name), "state_%08d_%05d.bin", step, rank);
    path_join(out, cap, dir, name);
}

static inline void ckpt_done_path(char *out, size_t cap, const char *dir, int step) {
    char name[64];
    snprintf(name, sizeof(name), "DONE_%08d", step);
    path_join(out, cap, dir, name);
}

typedef struct {
    int num_processes;
    int process_rank;
    int use_master_weights;
    int should_shuffle;
    int rows;                       /* the loader's -rows (header[6]; llm.c leaves it 0) */
    int step;
    uint64_t rng_state;             /* stochastic-rounding RNG (GPU); the CPU trainer writes 13371337 */
    uint64_t rng_state_last_update; /* its value before the last update */
    uint64_t shard_idx;
    uint64_t sample_idx;
} TrainState;

/* n: the number of optimizer values this rank holds (all parameters, or its ZeRO-1 shard). */
static inline void state_write(const char *path, const TrainState *s, const float *m, const float *v,
                               const float *master, size_t n, const DataLoader *loader) {
    int32_t h[256];
    memset(h, 0, sizeof(h));
    h[0] = STATE_MAGIC;
    h[1] = STATE_VERSION;
    h[2] = s->num_processes;
    h[3] = s->process_rank;
    h[4] = s->use_master_weights;
    h[5] = s->should_shuffle;
    h[6] = s->rows;
    h[10] = s->step;
    memcpy(&h[20], &s->rng_state, 8);
    memcpy(&h[22], &s->rng_state_last_update, 8);
    memcpy(&h[30], &s->shard_idx, 8);
    memcpy(&h[32], &s->sample_idx, 8);
    AtomicFile af;
    atomic_open(&af, path);
    atomic_write(&af, h, sizeof(int32_t), 256);
    atomic_write(&af, m, sizeof(float), n);
    atomic_write(&af, v, sizeof(float), n);
    if (s->use_master_weights && master != NULL) atomic_write(&af, master, sizeof(float), n);
    if (s->should_shuffle) dataloader_write_shuffle(loader, &af);
    atomic_commit(&af);
}

/*
 * Reads a state file written for this run's shape: the process count, rank, master-weight,
 * shuffle and rows settings must match (each mismatch is a one-line error naming the field). Restores
 * m, v (and master), and the loader's permutations and position.
 */
static inline void state_read(const char *path, TrainState *s, float *m, float *v, float *master,
                              size_t n, DataLoader *loader, const TrainState *expect) {
    FILE *f = xfopen(path, "rb");
    int32_t h[256];
    xfread(h, sizeof(int32_t), 256, f, path, "state header");
    if (h[0] != STATE_MAGIC) llmc_die("%s: bad magic %d in header[0]: expected %d (a state file)", path, h[0], STATE_MAGIC);
    if (h[1] != STATE_VERSION) llmc_die("%s: unsupported version %d in header[1]: expected %d", path, h[1], STATE_VERSION);
    s->num_processes = h[2];
    s->process_rank = h[3];
    s->use_master_weights = h[4];
    s->should_shuffle = h[5];
    s->rows = h[6];
    s->step = h[10];
    memcpy(&s->rng_state, &h[20], 8);
    memcpy(&s->rng_state_last_update, &h[22], 8);
    memcpy(&s->shard_idx, &h[30], 8);
    memcpy(&s->sample_idx, &h[32], 8);
    if (s->num_processes != expect->num_processes) {
        llmc_die("%s: header[2] saved with %d processes; this run has %d", path, s->num_processes, expect->num_processes);
    }
    if (s->process_rank != expect->process_rank) {
        llmc_die("%s: header[3] is rank %d; this process is rank %d", path, s->process_rank, expect->process_rank);
    }
    if (s->use_master_weights != expect->use_master_weights) {
        llmc_die("%s: header[4] master weights = %d; this run uses %d (-w)", path, s->use_master_weights,
                 expect->use_master_weights);
    }
    if (s->should_shuffle != expect->should_shuffle) {
        llmc_die("%s: header[5] shuffle = %d; this run uses %d (-a changes it)", path, s->should_shuffle,
                 expect->should_shuffle);
    }
    if (s->rows != expect->rows) {
        llmc_die("%s: header[6]: the loader was saved with -rows %d; this run uses -rows %d", path, s->rows,
                 expect->rows);
    }
    if (s->step != expect->step) {
        llmc_die("%s: header[10] step %d, but its DONE_ marker says %d", path, s->step, expect->step);
    }
    /* exact size before any read past the header: this model's optimizer values, then (shuffled
     * runs) the loader state, whose sample order holds up to max_samples entries */
    const int64_t size = file_size_or_neg(path);
    const int64_t body = (int64_t)n * 4 * (s->use_master_weights ? 3 : 2);
    const int64_t lo = 1024 + body + (s->should_shuffle ? dataloader_shuffle_bytes(loader, 0) : 0);
    const int64_t hi = 1024 + body + (s->should_shuffle ? dataloader_shuffle_bytes(loader, loader->max_samples) : 0);
    if (size < lo || size > hi || (size - lo) % 4 != 0) {
        char want[96];
        if (lo == hi) snprintf(want, sizeof(want), "%lld bytes", (long long)lo);
        else snprintf(want, sizeof(want), "%lld to %lld bytes", (long long)lo, (long long)hi);
        llmc_die("%s: %lld bytes; the header, %zu optimizer values of this model and the loader state "
                 "take %s (truncated, or saved for a different model or data)", path, (long long)size, n, want);
    }
    xfread(m, sizeof(float), n, f, path, "AdamW m");
    xfread(v, sizeof(float), n, f, path, "AdamW v");
    if (s->use_master_weights) xfread(master, sizeof(float), n, f, path, "master weights");
    if (s->should_shuffle) dataloader_read_shuffle(loader, f, path);
    if (fgetc(f) != EOF) llmc_die("%s: trailing bytes after the loader state (a different model?)", path);
    xfclose(f, path);
    dataloader_resume(loader, (int64_t)s->shard_idx, (int64_t)s->sample_idx, path);
}

/* The step of a DONE_ marker's name: "DONE_" and exactly 8 decimal digits; -1 for any other name
 * (the one reader of these names: the resume, the retention and the run-folder scan). */
static inline int ckpt_done_step(const char *name) {
    if (strncmp(name, "DONE_", 5) != 0 || strlen(name) != 13) return -1;
    int step = 0;
    for (int i = 5; i < 13; i++) {
        if (name[i] < '0' || name[i] > '9') return -1;
        step = 10 * step + (name[i] - '0');
    }
    return step;
}

/* The highest step with a DONE_%08d marker in dir, or -1. */
static inline int find_max_done_step(const char *dir) {
    DIR *d = opendir(dir);
    if (d == NULL) return -1;
    int best = -1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) best = LLMC_MAX(best, ckpt_done_step(e->d_name));
    closedir(d);
    return best;
}

/* After writing the checkpoint at `step`: with -nk K, only the newest K complete checkpoints stay;
 * an older one goes unless its step is a multiple of -nm (a "major" checkpoint). The folder is
 * scanned rather than the schedule followed, so that a checkpoint off the -n schedule (written on
 * Ctrl-C) is pruned as any other. A DONE_ marker goes before its files, so a half-removed
 * checkpoint is never resumed from. */
static inline void ckpt_remove_old(const char *dir, int step, int keep, int major, int nproc) {
    if (keep <= 0) return;
    DIR *d = opendir(dir);
    if (d == NULL) return;
    int *steps = NULL, n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const int s = ckpt_done_step(e->d_name);
        if (s < 0 || s >= step) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            steps = (int *)realloc(steps, (size_t)cap * sizeof(int));
            if (steps == NULL) llmc_die("out of memory listing the checkpoints of %s", dir);
        }
        steps[n++] = s;
    }
    closedir(d);
    /* the older ones, newest first: keep K - 1 of them beside `step` */
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && steps[j] > steps[j - 1]; j--) {
            const int t = steps[j];
            steps[j] = steps[j - 1];
            steps[j - 1] = t;
        }
    for (int i = keep - 1; i < n; i++) {
        const int old = steps[i];
        if (major > 0 && old % major == 0) continue;
        char path[4200];
        ckpt_done_path(path, sizeof(path), dir, old);
        remove(path);
        ckpt_model_path(path, sizeof(path), dir, old);
        remove(path);
        for (int r = 0; r < nproc; r++) {
            ckpt_state_path(path, sizeof(path), dir, old, r);
            remove(path);
        }
    }
    free(steps);
}

#endif /* LLMC_STATE_H */
