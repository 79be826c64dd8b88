/*
 * test/fuzz/fuzz.h: what every fuzz target of test/fuzz/ shares: one file reader of the project
 * run on arbitrary bytes, built two ways (mk/fuzz.mk):
 *
 *   libFuzzer (clang -fsanitize=fuzzer,address,undefined): LLVMFuzzerTestOneInput writes the
 *     input to a private temporary file and calls the target's fuzz_one on it; `make fuzz`.
 *   replay (any compiler, with ASan and UBSan where available): main() runs fuzz_one on each file
 *     given and checks the expectation its name states: ok-* must be accepted, bad-* rejected with
 *     an error line, anything else (regression inputs, crash-*) must only not crash. Prints one
 *     PASS/FAIL line per file and "N passed, N failed"; `make test` runs it on test/fuzz/corpus/.
 *
 * The readers end the process on bad input (llmc_die). Built with LLMC_FUZZ, llmc/utils.h instead
 * returns to the setjmp of fuzz_run (a rejected input), and xfopen registers every file it opens
 * for reading so that fuzz_run closes the ones an error left open. A target keeps what its reader
 * allocates in static objects and sets fuzz_cleanup to free them: fuzz_run calls it after an
 * error, before it closes the files, so nothing accumulates over millions of inputs.
 *
 * A target defines `static int fuzz_one(const char *path, const uint8_t *data, size_t size)`:
 * return 1 when the reader accepted the input, 0 when it rejected it without llmc_die.
 */
#ifndef TEST_FUZZ_H
#define TEST_FUZZ_H

#define LLMC_FUZZ 1
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../llmc/utils.h"

jmp_buf llmc_fuzz_env;
int llmc_fuzz_quiet; /* libFuzzer build: errors are expected by the million */
FILE *llmc_fuzz_files[LLMC_FUZZ_MAX_FILES];
int llmc_fuzz_nfiles;

static int fuzz_one(const char *path, const uint8_t *data, size_t size);
static void (*fuzz_cleanup)(void); /* the target's: frees what an error left allocated */

/* Runs fuzz_one; 1 accepted, 0 rejected (cleanly: a return or an llmc_die). */
static int fuzz_run(const char *path, const uint8_t *data, size_t size) {
    static volatile int result;
    result = 0;
    if (setjmp(llmc_fuzz_env) == 0) {
        result = fuzz_one(path, data, size);
    } else {
        result = 0;
        if (fuzz_cleanup != NULL && setjmp(llmc_fuzz_env) == 0) fuzz_cleanup();
    }
    for (int i = 0; i < llmc_fuzz_nfiles; i++) fclose(llmc_fuzz_files[i]);
    llmc_fuzz_nfiles = 0;
    return result;
}

/* data -> a private file the readers open by name */
static void fuzz_write_file(const char *path, const uint8_t *data, size_t size) {
    FILE *f = fopen(path, "wb");
    if (f == NULL || (size > 0 && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
        fprintf(stderr, "fuzz: cannot write %s\n", path);
        abort();
    }
}

static const char *fuzz_tmp_path(void) {
    static char path[256];
    if (path[0] == '\0') {
        const char *dir = getenv("TMPDIR");
        snprintf(path, sizeof(path), "%s/llmc_fuzz_%d.bin", dir && dir[0] ? dir : "/tmp", (int)getpid());
    }
    return path;
}

#ifdef FUZZ_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    llmc_fuzz_quiet = 1;
    const char *path = fuzz_tmp_path();
    fuzz_write_file(path, data, size);
    fuzz_run(path, data, size);
    return 0;
}
#else
static uint8_t *fuzz_read_all(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) return NULL;
    fseek(f, 0, SEEK_END);
    const long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = (uint8_t *)malloc((size_t)n + 1);
    *size = fread(buf, 1, (size_t)n, f);
    fclose(f);
    return buf;
}

int main(int argc, char **argv) {
    int passed = 0, failed = 0;
    for (int i = 1; i < argc; i++) {
        size_t size = 0;
        uint8_t *data = fuzz_read_all(argv[i], &size);
        const char *base = strrchr(argv[i], '/');
        base = base ? base + 1 : argv[i];
        if (data == NULL) {
            printf("FAIL %s: cannot read it\n", argv[i]);
            failed++;
            continue;
        }
        const char *path = fuzz_tmp_path();
        fuzz_write_file(path, data, size);
        const int ok = fuzz_run(path, data, size);
        const int want = strncmp(base, "ok-", 3) == 0 ? 1 : strncmp(base, "bad-", 4) == 0 ? 0 : -1;
        if (want < 0 || ok == want) {
            printf("PASS %s: %s%s\n", base, ok ? "accepted" : "rejected", want < 0 ? " (no crash)" : "");
            passed++;
        } else {
            printf("FAIL %s: %s, expected it %s\n", base, ok ? "accepted" : "rejected", want ? "accepted" : "rejected");
            failed++;
        }
        free(data);
    }
    remove(fuzz_tmp_path());
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
#endif

#endif /* TEST_FUZZ_H */
