/*
 * llmc/tokenizer.h: token decoding from llm.c's tokenizer files (doc/formats.md "Tokenizer file"): GPT-2's
 * `gpt2_tokenizer.bin`, or the byte vocabulary's `bytes_tokenizer.bin` (V 256, EOT 0).
 *
 * Defines:
 *   Tokenizer                    the byte string of every token id
 *   tokenizer_init / _free       a missing file is a warning (samples then print as ids);
 *                                a malformed one is an error naming the file and field
 *   tokenizer_decode             bytes of one id (NULL when out of range)
 *   tokenizer_print              print one token, skipping lone unprintable bytes as llm.c does
 *   tokenizer_init_for_model     the trainers' -tok: the file for a model of vocabulary V and the
 *                                token samples start from
 *
 * Produce the files offline with `python dev/data/gpt2_tokenizer.py` and
 * `python dev/data/bytes_tokenizer.py` (or `make prose_bytes`).
 */
#ifndef LLMC_TOKENIZER_H
#define LLMC_TOKENIZER_H

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "utils.h"

#define TOKENIZER_MAGIC 20240328
#define BYTE_VOCAB 256 /* the byte vocabulary: token = byte value */
#define BYTE_EOT 0     /* its end-of-text token, NUL (dev/data/bytes_tokenizer.py) */

typedef struct {
    int init_ok;
    uint32_t vocab_size;
    uint32_t eot_token;
    char **token; /* NUL-terminated byte strings */
} Tokenizer;

static inline void tokenizer_init(Tokenizer *t, const char *path) {
    memset(t, 0, sizeof(*t));
    if (!file_exists(path)) {
        llmc_warn("%s not found: samples print as token ids (make gpt2_tokenizer.bin with python "
                  "dev/data/gpt2_tokenizer.py, bytes_tokenizer.bin with make prose_bytes)", path);
        return;
    }
    FILE *f = xfopen(path, "rb");
    uint32_t h[256];
    xfread(h, sizeof(uint32_t), 256, f, path, "tokenizer header");
    if (h[0] != TOKENIZER_MAGIC) {
        llmc_die("%s: bad magic %u in header[0]: expected %d (an llm.c tokenizer file)", path, h[0],
                 TOKENIZER_MAGIC);
    }
    if (h[1] != 1 && h[1] != 2) llmc_die("%s: unsupported version %u in header[1]: expected 1 or 2", path, h[1]);
    if (h[2] == 0 || h[2] > (1u << 24)) llmc_die("%s: header[2] vocab size %u: expected 1..16777216", path, h[2]);
    /* every token takes at least 2 bytes (its length and one byte): the table is allocated only
     * for a file that can hold it */
    const int64_t size = file_size_or_neg(path);
    if (size < 1024 + 2 * (int64_t)h[2]) {
        llmc_die("%s: %lld bytes cannot hold header[2] = %u tokens (at least %lld bytes; truncated?)", path,
                 (long long)size, h[2], 1024 + 2 * (long long)h[2]);
    }
    t->vocab_size = h[2];
    t->eot_token = h[1] == 2 ? h[3] : (uint32_t)GPT2_EOT; /* v1: GPT-2's */
    if (h[1] == 2 && t->eot_token >= t->vocab_size) {
        llmc_die("%s: header[3] end-of-text token %u: expected a token id below the vocab size %u", path,
                 t->eot_token, t->vocab_size);
    }
    t->token = (char **)xcalloc(t->vocab_size, sizeof(char *));
    for (uint32_t i = 0; i < t->vocab_size; i++) {
        unsigned char len = 0;
        xfread(&len, 1, 1, f, path, "token length");
        if (len == 0) llmc_die("%s: token %u has length 0 (lengths are 1..255)", path, i);
        t->token[i] = (char *)xmalloc((size_t)len + 1);
        xfread(t->token[i], 1, len, f, path, "token bytes");
        t->token[i][len] = '\0';
    }
    xfclose(f, path);
    t->init_ok = 1;
}

static inline const char *tokenizer_decode(const Tokenizer *t, uint32_t id) {
    if (!t->init_ok || id >= t->vocab_size) return NULL;
    return t->token[id];
}

/* A token that is a single unprintable, non-space byte (part of a UTF-8 sequence split across
 * tokens, or a control byte) is skipped rather than printed raw. */
static inline void tokenizer_print(const Tokenizer *t, uint32_t id, FILE *out) {
    const char *s = tokenizer_decode(t, id);
    if (s == NULL) {
        fprintf(out, "<%u>", id);
        return;
    }
    if (s[0] != '\0' && s[1] == '\0' && !isprint((unsigned char)s[0]) && !isspace((unsigned char)s[0]))
        return;
    fputs(s, out);
}

static inline void tokenizer_free(Tokenizer *t) {
    if (t->token != NULL) {
        for (uint32_t i = 0; i < t->vocab_size; i++) free(t->token[i]);
        free(t->token);
    }
    memset(t, 0, sizeof(*t));
}

/* The trainers' samples (-tok FILE): loads path for a model of vocabulary V and returns the token
 * a sample starts from, the file's end-of-text token. A file whose vocab size is not V is one
 * warning naming both sizes and is dropped, so samples print as token ids, as with a missing file.
 * Without a usable file a sample starts from GPT-2's <|endoftext|> (50256) when V is GPT-2's
 * 50257, else from token 0, the byte vocabulary's end-of-text. */
static inline int tokenizer_init_for_model(Tokenizer *t, const char *path, int V) {
    tokenizer_init(t, path);
    if (t->init_ok && t->vocab_size != (uint32_t)V) {
        llmc_warn("-tok %s: the tokenizer has %u tokens but the model's vocabulary V is %d: samples print as "
                  "token ids (-tok %s for this model)", path, t->vocab_size, V,
                  V == BYTE_VOCAB ? "bytes_tokenizer.bin" : V == GPT2_VOCAB ? "gpt2_tokenizer.bin" : "FILE");
        tokenizer_free(t);
    }
    if (t->init_ok) return (int)t->eot_token;
    return V == GPT2_VOCAB ? GPT2_EOT : BYTE_EOT;
}

#endif /* LLMC_TOKENIZER_H */
