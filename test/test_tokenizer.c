/*
 * test/test_tokenizer.c: llmc/tokenizer.h, the reader of llm.c's gpt2_tokenizer.bin
 * (doc/formats.md "Tokenizer file").
 *
 * Writes small tokenizer files byte by byte and reads each in a child process (a malformed file
 * ends the reader with llmc_die), checking: a valid version-1 and version-2 file decode as
 * written; every header field at its bounds is accepted and one past each is one error line
 * naming the file and the field; a zero token length, a truncated body and a file too short for
 * its vocabulary are named; a directory is named as such; a missing file is a warning, not an
 * error. Exact: no tolerance.
 */
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../llmc/tokenizer.h"
#include "harness.h"

#define DIR "build/tmp_tokenizer"
#define TOK_PATH DIR "/tok.bin"

/* A file of `vocab` tokens "t0", "t1", ... (lengths 2..), header words as given. */
static void write_tokenizer(const char *path, const uint32_t *h, uint32_t vocab, int truncate_body) {
    FILE *f = fopen(path, "wb");
    fwrite(h, sizeof(uint32_t), 256, f);
    for (uint32_t i = 0; i < vocab; i++) {
        char tok[16];
        const int len = snprintf(tok, sizeof(tok), "t%u", i);
        const unsigned char l = (unsigned char)len;
        fwrite(&l, 1, 1, f);
        if (truncate_body && i + 1 == vocab) break; /* the last token's bytes are missing */
        fwrite(tok, 1, (size_t)len, f);
    }
    fclose(f);
}

static void header(uint32_t *h, uint32_t version, uint32_t vocab, uint32_t eot) {
    memset(h, 0, 256 * sizeof(uint32_t));
    h[0] = TOKENIZER_MAGIC;
    h[1] = version;
    h[2] = vocab;
    h[3] = eot;
}

/* Reads path in a child: returns its exit status, with its stderr in err. In the child, a read
 * that succeeds checks the decoded tokens against what write_tokenizer wrote. */
static int read_in_child(const char *path, char *err, size_t cap) {
    int fds[2];
    if (pipe(fds) != 0) return -1;
    fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], 2);
        Tokenizer t;
        tokenizer_init(&t, path);
        int ok = 1;
        for (uint32_t i = 0; t.init_ok && i < t.vocab_size; i++) {
            char want[16];
            snprintf(want, sizeof(want), "t%u", i);
            ok &= strcmp(tokenizer_decode(&t, i), want) == 0;
        }
        ok &= tokenizer_decode(&t, t.vocab_size) == NULL;
        tokenizer_free(&t);
        _exit(ok ? 0 : 3);
    }
    close(fds[1]);
    size_t n = 0;
    ssize_t got;
    while (n + 1 < cap && (got = read(fds[0], err + n, cap - 1 - n)) > 0) n += (size_t)got;
    err[n] = '\0';
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int one_line(const char *s) {
    const char *nl = strchr(s, '\n');
    return nl != NULL && nl[1] == '\0';
}

/* Expects one error line containing path, a and b. */
static void expect_error(const char *a, const char *b, const char *what) {
    char err[1024];
    const int rc = read_in_child(TOK_PATH, err, sizeof(err));
    const int ok = rc == 1 && one_line(err) && strstr(err, TOK_PATH) && strstr(err, a) && strstr(err, b);
    err[strcspn(err, "\n")] = '\0';
    CHECK(ok, "%s: exit %d, %s", what, rc, err);
}

static void expect_reads(const char *what) {
    char err[1024];
    const int rc = read_in_child(TOK_PATH, err, sizeof(err));
    CHECK(rc == 0 && err[0] == '\0', "%s: reads and decodes as written (exit %d %s)", what, rc, err);
}

static void test_valid(void) {
    uint32_t h[256];
    header(h, 1, 5, 0);
    write_tokenizer(TOK_PATH, h, 5, 0);
    expect_reads("version 1, 5 tokens");
    header(h, 2, 5, 4);
    write_tokenizer(TOK_PATH, h, 5, 0);
    expect_reads("version 2, 5 tokens, end-of-text 4 (the last id, at its bound)");
    header(h, 2, 1, 0);
    write_tokenizer(TOK_PATH, h, 1, 0);
    expect_reads("version 2, vocab 1 (its lower bound)");
}

static void test_header_fields(void) {
    uint32_t h[256];
    header(h, 2, 5, 4);
    h[0] = 20240520; /* a token shard's magic */
    write_tokenizer(TOK_PATH, h, 5, 0);
    expect_error("header[0]", "expected 20240328", "a shard's magic");
    for (uint32_t v = 0; v <= 3; v += 3) {
        header(h, v, 5, 4);
        write_tokenizer(TOK_PATH, h, 5, 0);
        expect_error("header[1]", "expected 1 or 2", v == 0 ? "version 0 (below 1)" : "version 3 (past 2)");
    }
    header(h, 2, 0, 0);
    write_tokenizer(TOK_PATH, h, 0, 0);
    expect_error("header[2] vocab size 0", "expected 1..16777216", "vocab 0 (below 1)");
    /* vocab at its bound 2^24 passes the field check and meets the size check; one past does not */
    header(h, 2, 1u << 24, 4);
    write_tokenizer(TOK_PATH, h, 5, 0);
    expect_error("cannot hold header[2] = 16777216 tokens", "truncated", "vocab 2^24 (its bound) in a small file");
    header(h, 2, (1u << 24) + 1, 4);
    write_tokenizer(TOK_PATH, h, 5, 0);
    expect_error("header[2] vocab size 16777217", "expected 1..16777216", "vocab 2^24 + 1 (past its bound)");
    header(h, 2, 0xffffffffu, 4);
    write_tokenizer(TOK_PATH, h, 5, 0);
    expect_error("header[2] vocab size 4294967295", "expected 1..16777216", "vocab 2^32 - 1");
    header(h, 2, 5, 5);
    write_tokenizer(TOK_PATH, h, 5, 0);
    expect_error("header[3] end-of-text token 5", "below the vocab size 5", "end-of-text = vocab (one past)");
    header(h, 1, 5, 99); /* version 1 has no header[3]: GPT-2's 50256 is assumed, the word ignored */
    write_tokenizer(TOK_PATH, h, 5, 0);
    expect_reads("version 1 ignores header[3]");
}

static void test_body(void) {
    uint32_t h[256];
    header(h, 2, 5, 4);
    write_tokenizer(TOK_PATH, h, 5, 1);
    expect_error("token bytes", "", "the last token's bytes missing");
    FILE *f = fopen(TOK_PATH, "wb");
    fwrite(h, sizeof(uint32_t), 256, f);
    const unsigned char zero[16] = {0};
    fwrite(zero, 1, sizeof(zero), f);
    fclose(f);
    expect_error("token 0 has length 0", "1..255", "a zero token length");
    f = fopen(TOK_PATH, "wb");
    fwrite(h, 1, 1000, f);
    fclose(f);
    expect_error("tokenizer header", "", "a 1000-byte file");
}

static void test_paths(void) {
    char err[1024];
    make_dir(DIR "/adir");
    int rc = read_in_child(DIR "/adir", err, sizeof(err));
    const int ok = rc == 1 && one_line(err) && strstr(err, "adir: is a directory");
    err[strcspn(err, "\n")] = '\0';
    CHECK(ok, "a directory is named as such: %s", err);
    rc = read_in_child(DIR "/missing.bin", err, sizeof(err));
    const int warned = rc == 0 && strncmp(err, "warning: ", 9) == 0 && strstr(err, "missing.bin not found");
    err[strcspn(err, "\n")] = '\0';
    CHECK(warned, "a missing file is a warning, samples then print as ids: %s", err);
}

int main(void) {
    make_dir(DIR);
    test_valid();
    test_header_fields();
    test_body();
    test_paths();
    return test_finish();
}
