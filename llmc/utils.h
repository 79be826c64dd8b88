/*
 * llmc/utils.h: error reporting and checked I/O shared by every program of the project.
 *
 * Defines:
 *   llmc_die(fmt, ...)          print one "error: ..." line to stderr and exit(1)
 *   llmc_warn(fmt, ...)         print one "warning: ..." line to stderr
 *   stdout_line_buffered        stdout flushed per line when redirected too
 *   xmalloc / xcalloc           allocation that dies with a message naming the size
 *   xfopen / xfread / xfwrite / xfclose / xfseek
 *                               file operations that die naming the file on any failure
 *   file_size_or_neg            size of a file in bytes, -1 if it cannot be stat'ed; a directory
 *                               or special file is an error naming it (require_regular_file);
 *                               require_output_path checks an output's directory up front
 *   AtomicFile                  write to "<path>.tmp", fsync, rename to <path> and fsync the
 *                               directory on commit, so a file with its final name is always
 *                               complete and on disk; a failed write removes the .tmp, as does
 *                               atomic_discard
 *                               (doc/formats.md "Conventions and magic numbers")
 *   path_join, file_exists, make_dir, format_duration, fnv1a64
 *
 * Header-only (static inline) and valid C11 and C++17, so train_gpt2.c and train_gpt2.cu include
 * it unchanged.
 */
#ifndef LLMC_UTILS_H
#define LLMC_UTILS_H

#include <errno.h>
#include <fcntl.h>
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

#ifdef LLMC_FUZZ
/* The fuzz targets (test/fuzz/fuzz.h): an error returns to the target's setjmp instead of ending
 * the process, and xfopen records the files it opens so that the target closes what an error
 * left open. */
#include <setjmp.h>
#define LLMC_FUZZ_MAX_FILES 64
extern jmp_buf llmc_fuzz_env;
extern int llmc_fuzz_quiet;
extern FILE *llmc_fuzz_files[LLMC_FUZZ_MAX_FILES];
extern int llmc_fuzz_nfiles;
#endif

static inline LLMC_NORETURN LLMC_PRINTF(1, 2) void llmc_die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
#ifdef LLMC_FUZZ
    if (!llmc_fuzz_quiet) {
        fputs("error: ", stdout);
        vfprintf(stdout, fmt, ap);
        fputc('\n', stdout);
    }
    va_end(ap);
    longjmp(llmc_fuzz_env, 1);
#else
    fflush(stdout);
    fputs("error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(EXIT_FAILURE);
#endif
}

/* stdout one line at a time even into a file or a pipe (`> log`, `| tee`), as on a terminal: a
 * long run's progress is visible at once and survives a kill. Called first by every program. */
static inline void stdout_line_buffered(void) { setvbuf(stdout, NULL, _IOLBF, 0); }

static inline LLMC_PRINTF(1, 2) void llmc_warn(const char *fmt, ...) {
#ifdef LLMC_FUZZ
    if (llmc_fuzz_quiet) return;
#endif
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

/* Dies naming what the path is when it is not a regular file: a directory or a device, pipe or
 * socket given where a file is read would otherwise be reported as truncated or empty. */
static inline void require_regular_file(const char *path, const struct stat *st) {
    if (S_ISDIR(st->st_mode)) llmc_die("%s: is a directory; expected a file", path);
    if (!S_ISREG(st->st_mode)) llmc_die("%s: is not a regular file (a device, pipe or socket); expected a file", path);
}

/* An output path that can be written: its directory exists and is writable, and the path is not a
 * directory. Checked when the flag is parsed, so that a typo fails before minutes of work. */
static inline void require_output_path(const char *flag, const char *path) {
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) llmc_die("%s %s: is a directory; expected a file name", flag, path);
    const char *slash = strrchr(path, '/');
    char dir[4096];
    if (slash == NULL) snprintf(dir, sizeof(dir), ".");
    else if (slash == path) snprintf(dir, sizeof(dir), "/");
    else snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path < 4095 ? slash - path : 4095), path);
    if (stat(dir, &st) != 0) llmc_die("%s %s: directory %s does not exist", flag, path, dir);
    if (!S_ISDIR(st.st_mode)) llmc_die("%s %s: %s is not a directory", flag, path, dir);
    if (access(dir, W_OK) != 0) llmc_die("%s %s: directory %s is not writable", flag, path, dir);
}

static inline FILE *xfopen(const char *path, const char *mode) {
    struct stat st; /* before the open: opening a FIFO to read would wait for a writer */
    if (mode[0] == 'r' && stat(path, &st) == 0) require_regular_file(path, &st);
    FILE *f = fopen(path, mode);
    if (f == NULL) llmc_die("%s: cannot open (mode %s): %s", path, mode, strerror(errno));
#ifdef LLMC_FUZZ
    if (mode[0] == 'r' && llmc_fuzz_nfiles < LLMC_FUZZ_MAX_FILES) llmc_fuzz_files[llmc_fuzz_nfiles++] = f;
#endif
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
#ifdef LLMC_FUZZ
    for (int i = 0; i < llmc_fuzz_nfiles; i++)
        if (llmc_fuzz_files[i] == f) llmc_fuzz_files[i--] = llmc_fuzz_files[--llmc_fuzz_nfiles];
#endif
    if (fclose(f) != 0) llmc_die("%s: close failed: %s", path, strerror(errno));
}

static inline int64_t file_size_or_neg(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) return -1;
    require_regular_file(path, &st);
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
/* fsync of the directory holding path, so that a rename into it is on disk. A file system that
 * cannot sync a directory (EINVAL) is accepted; any other failure is an error. */
static inline void fsync_parent_dir(const char *path) {
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (slash == NULL) snprintf(dir, sizeof(dir), ".");
    else if (slash == path) snprintf(dir, sizeof(dir), "/");
    else snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
    const int fd = open(dir, O_RDONLY);
    if (fd < 0) llmc_die("%s: cannot open its directory %s to sync it: %s", path, dir, strerror(errno));
    if (fsync(fd) != 0 && errno != EINVAL && errno != ENOTSUP) {
        const int e = errno;
        close(fd);
        llmc_die("%s: fsync of its directory %s failed: %s", path, dir, strerror(e));
    }
    close(fd);
}

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

/* A failed write leaves nothing behind: the .tmp goes, the final name was never touched. */
static inline LLMC_NORETURN void atomic_fail_(AtomicFile *af, const char *what, int err) {
    if (af->f != NULL) fclose(af->f);
    af->f = NULL;
    remove(af->tmp);
    llmc_die("%s: %s: %s", af->path, what, strerror(err));
}

static inline void atomic_write(AtomicFile *af, const void *src, size_t size, size_t count) {
    if (count == 0) return;
    if (fwrite(src, size, count, af->f) != count) atomic_fail_(af, "write failed", errno);
}

/* The file's data reaches the disk before its name does, and the name before the caller goes on
 * (a DONE_ marker written next can never survive a power loss that its checkpoint did not). */
static inline void atomic_commit(AtomicFile *af) {
    /* an earlier buffered fprintf may have failed (disk full) without anyone checking */
    if (ferror(af->f)) atomic_fail_(af, "write failed", EIO);
    if (fflush(af->f) != 0) atomic_fail_(af, "flush failed", errno);
    if (fsync(fileno(af->f)) != 0) atomic_fail_(af, "fsync failed", errno);
    FILE *f = af->f;
    af->f = NULL;
    if (fclose(f) != 0) atomic_fail_(af, "close failed", errno);
    if (rename(af->tmp, af->path) != 0) atomic_fail_(af, "cannot rename the .tmp to it", errno);
    fsync_parent_dir(af->path);
}

/* Gives up a file that was opened but must not appear: the .tmp goes, the final name is untouched. */
static inline void atomic_discard(AtomicFile *af) {
    if (af->f != NULL) fclose(af->f);
    af->f = NULL;
    if (af->tmp[0] != '\0') remove(af->tmp);
}

/* An empty file, created atomically (the DONE_ markers). */
static inline void touch_file_atomic(const char *path) {
    AtomicFile af;
    atomic_open(&af, path);
    atomic_commit(&af);
}

/* FNV-1a, 64 bits: a fingerprint of bytes (start from FNV64_START), to compare across processes. */
#define FNV64_START 14695981039346656037ull
static inline uint64_t fnv1a64(uint64_t h, const void *data, size_t n) {
    const unsigned char *p = (const unsigned char *)data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/* A duration as "1h05m" or "3m07s"; "?" while unknown (not finite). */
static inline void format_duration(double seconds, char *buf, size_t cap) {
    if (!(seconds >= 0.0 && seconds < 1e12)) {
        snprintf(buf, cap, "?");
        return;
    }
    const long s = (long)(seconds + 0.5);
    if (s >= 3600) snprintf(buf, cap, "%ldh%02ldm", s / 3600, (s % 3600) / 60);
    else snprintf(buf, cap, "%ldm%02lds", s / 60, s % 60);
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
