/*
 * llmc/utils.h: error reporting and checked I/O shared by every program of the project.
 *
 * Defines:
 *   llmc_die(fmt, ...)          print one "error: ..." line to stderr and exit(1)
 *   llmc_warn(fmt, ...)         print one "warning: ..." line to stderr
 *   xmalloc / xcalloc           allocation that dies with a message naming the size
 *   xfopen / xfread / xfwrite / xfclose / xfseek
 *                               file operations that die naming the file on any failure
 *   file_size_or_neg            size of a file in bytes, -1 if it cannot be stat'ed
 *   AtomicFile                  write to "<path>.tmp", then rename to <path> on commit, so a file
 *                               with its final name is always complete (doc/formats.md)
 *   path_join, file_exists, make_dir
 *
 * Header-only (static inline) and valid C11 and C++17, so train_gpt2.c and train_gpt2.cu include
 * it unchanged.
 */
#ifndef LLMC_UTILS_H
#define LLMC_UTILS_H

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#if defined(__GNUC__)
#define LLMC_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define LLMC_NORETURN __attribute__((noreturn))
#else
#define LLMC_PRINTF(a, b)
#define LLMC_NORETURN
#endif

static inline LLMC_NORETURN LLMC_PRINTF(1, 2) void llmc_die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fflush(stdout);
    fputs("error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(EXIT_FAILURE);
}

static inline LLMC_PRINTF(1, 2) void llmc_warn(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fflush(stdout);
    fputs("warning: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static inline void *xmalloc(size_t n) {
    void *p = malloc(n > 0 ? n : 1);
    if (p == NULL) llmc_die("out of memory allocating %zu bytes", n);
    return p;
}

static inline void *xcalloc(size_t count, size_t size) {
    void *p = calloc(count > 0 ? count : 1, size > 0 ? size : 1);
    if (p == NULL) llmc_die("out of memory allocating %zu x %zu bytes", count, size);
    return p;
}

static inline FILE *xfopen(const char *path, const char *mode) {
    FILE *f = fopen(path, mode);
    if (f == NULL) llmc_die("%s: cannot open (mode %s): %s", path, mode, strerror(errno));
    return f;
}

/* Reads exactly `count` items or dies: a short read means a truncated or corrupt file. */
static inline void xfread(void *dst, size_t size, size_t count, FILE *f, const char *path,
                          const char *what) {
    size_t got = fread(dst, size, count, f);
    if (got != count) {
        llmc_die("%s: truncated while reading %s: expected %zu items of %zu bytes, got %zu",
                 path, what, count, size, got);
    }
}

static inline void xfwrite(const void *src, size_t size, size_t count, FILE *f, const char *path) {
    if (count == 0) return;
    size_t put = fwrite(src, size, count, f);
    if (put != count) llmc_die("%s: write failed after %zu of %zu items: %s", path, put, count,
                               strerror(errno));
}

static inline void xfseek(FILE *f, int64_t offset, const char *path) {
    /* fseeko with a 64-bit offset: llm.c casts to int and so limits shards to 2 GiB. */
    if (fseeko(f, (off_t)offset, SEEK_SET) != 0) {
        llmc_die("%s: cannot seek to byte %lld: %s", path, (long long)offset, strerror(errno));
    }
}

static inline void xfclose(FILE *f, const char *path) {
    if (fclose(f) != 0) llmc_die("%s: close failed: %s", path, strerror(errno));
}

static inline int64_t file_size_or_neg(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) return -1;
    return (int64_t)st.st_size;
}

static inline int file_exists(const char *path) { return access(path, F_OK) == 0; }

static inline void path_join(char *out, size_t cap, const char *dir, const char *name) {
    int n = snprintf(out, cap, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= cap) llmc_die("path too long: %s/%s", dir, name);
}

/* mkdir -p: creates missing parents; an existing directory is fine. */
static inline void make_dir(const char *path) {
    char buf[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof(buf)) llmc_die("bad directory path '%s'", path);
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != '\0') continue;
        char saved = buf[i];
        buf[i] = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST) {
            llmc_die("%s: cannot create directory %s: %s", path, buf, strerror(errno));
        }
        buf[i] = saved;
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) llmc_die("%s: not a directory", path);
}

/* ----------------------------------------------------------------------------------------------
 * AtomicFile: writers never leave a partial file under the final name. */
typedef struct {
    FILE *f;
    char path[4096];
    char tmp[4112];
} AtomicFile;

/* A JSON string literal: quotes and backslashes escaped, control characters as \u00XX. */
static inline void json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        const unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
        else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
        else fputc(ch, f);
    }
    fputc('"', f);
}

static inline void atomic_open(AtomicFile *af, const char *path) {
    if (strlen(path) >= sizeof(af->path)) llmc_die("path too long: %s", path);
    strcpy(af->path, path);
    snprintf(af->tmp, sizeof(af->tmp), "%s.tmp", path);
    af->f = xfopen(af->tmp, "wb");
}

static inline void atomic_write(AtomicFile *af, const void *src, size_t size, size_t count) {
    xfwrite(src, size, count, af->f, af->tmp);
}

static inline void atomic_commit(AtomicFile *af) {
    /* an earlier buffered fprintf may have failed (disk full) without anyone checking */
    if (ferror(af->f)) llmc_die("%s: write failed", af->tmp);
    if (fflush(af->f) != 0) llmc_die("%s: flush failed: %s", af->tmp, strerror(errno));
    xfclose(af->f, af->tmp);
    af->f = NULL;
    if (rename(af->tmp, af->path) != 0) {
        llmc_die("%s: cannot rename to %s: %s", af->tmp, af->path, strerror(errno));
    }
}

/* An empty file, created atomically (the DONE_ markers). */
static inline void touch_file_atomic(const char *path) {
    AtomicFile af;
    atomic_open(&af, path);
    atomic_commit(&af);
}

/* Wall clock in seconds (monotonic). */
#include <time.h>
static inline double wall_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#define LLMC_MIN(a, b) ((a) < (b) ? (a) : (b))
#define LLMC_MAX(a, b) ((a) > (b) ? (a) : (b))

#endif /* LLMC_UTILS_H */
