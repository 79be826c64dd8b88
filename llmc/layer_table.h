/*
 * llmc/layer_table.h: layer-table files (`-prism FILE`): the heads, head size and kind of every
 * layer (doc/formats.md "Per-layer heads"). A Prism head schedule is such a table; Prism's own rules are a
 * validator run on the parsed table (prism/rules.h).
 *
 * Defines:
 *   LayerTable           the parsed per-layer table, the source line of each layer, its warnings
 *                        and first error
 *   layer_table_parse    parse table text against a model shape
 *   layer_table_load     the same from a file (at most 1 MiB, no NUL byte)
 *   layer_table_apply    write the table into a GPT2Config
 *   layer_table_fail / layer_table_warn   record an error / a warning "file:line: ..." (for
 *                        validators)
 *   LayerTableCheck      a validator's signature: a method's rules on a parsed table
 *
 * Syntax: plain text, '#' starts a comment, entries are separated by whitespace (spaces or
 * newlines). An entry is
 *
 *     H[xD][:KIND][*N]      e.g.  12   3*2   12x8   12:sd   12x8:sd*3
 *
 * H heads of size D (default C/H) of the layer kind KIND (default mha; the registry's names,
 * llmc/layer_kind.h), repeated for N consecutive layers (default 1), listed from the first layer
 * up. Errors: bad syntax, an unknown kind, H not dividing C without an explicit D, a layer count
 * other than L (which, when the table has HxD entries, says how each was read: '4x4' is one layer
 * of 4 heads of size 4, not 4*4). Every message starts "file:line: ".
 */
#ifndef LLMC_LAYER_TABLE_H
#define LLMC_LAYER_TABLE_H

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "layer_kind.h"
#include "utils.h"

#define LAYER_TABLE_MAX_MSG 512
#define LAYER_TABLE_MAX_WARNINGS 32

typedef struct {
    int n_layers;
    LayerSpec layer[LLMC_MAX_LAYERS];
    int line[LLMC_MAX_LAYERS]; /* source line of each layer's entry */
    int n_warnings;
    char warning[LAYER_TABLE_MAX_WARNINGS][LAYER_TABLE_MAX_MSG];
    int has_error;
    char error[LAYER_TABLE_MAX_MSG];
} LayerTable;

/* "path:line: " at the start of a message buffer; returns where the text goes on, within the
 * buffer whatever the path's length (a long path is cut to its last 200 bytes). */
static inline size_t layer_table_prefix_(char *dst, const char *path, int line) {
    const size_t len = strlen(path);
    const char *shown = len > 200 ? path + len - 200 : path;
    const int n = snprintf(dst, LAYER_TABLE_MAX_MSG, "%s%s:%d: ", len > 200 ? "..." : "", shown, line);
    return n < 0 ? 0 : (size_t)n < LAYER_TABLE_MAX_MSG ? (size_t)n : LAYER_TABLE_MAX_MSG - 1;
}

static inline LLMC_PRINTF(4, 5) int layer_table_fail(LayerTable *s, const char *path, int line,
                                                const char *fmt, ...) {
    if (s->has_error) return 0; /* keep the first error: it is the one to fix first */
    const size_t n = layer_table_prefix_(s->error, path, line);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->error + n, LAYER_TABLE_MAX_MSG - n, fmt, ap);
    va_end(ap);
    s->has_error = 1;
    return 0;
}

static inline LLMC_PRINTF(4, 5) void layer_table_warn(LayerTable *s, const char *path, int line,
                                                 const char *fmt, ...) {
    if (s->n_warnings >= LAYER_TABLE_MAX_WARNINGS) return;
    char *dst = s->warning[s->n_warnings++];
    const size_t n = layer_table_prefix_(dst, path, line);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dst + n, LAYER_TABLE_MAX_MSG - n, fmt, ap);
    va_end(ap);
}

/* Parses one entry token (NUL-terminated, no whitespace). Returns 1 and fills h, d (0 = default),
 * kind, repeat; else 0 with the error recorded. */
static inline int layer_table_entry_(const char *tok, const char *path, int line, LayerTable *s,
                                     int *h, int *d, int *kind, int *repeat) {
    const char *p = tok;
    const char *end = NULL;
    *d = 0;
    *kind = LAYER_KIND_MHA;
    *repeat = 1;
    if (!parse_positive_int(p, &end, h)) goto bad;
    p = end;
    if (*p == 'x') {
        if (!parse_positive_int(p + 1, &end, d)) goto bad;
        p = end;
    }
    if (*p == ':') {
        char name[16];
        size_t n = 0;
        p++;
        while (*p && *p != '*' && n + 1 < sizeof(name)) name[n++] = *p++;
        name[n] = '\0';
        const int found = layer_kind_code(name);
        if (found < 0) {
            char names[128];
            layer_kind_list(names, sizeof(names));
            return layer_table_fail(s, path, line, "entry '%s': unknown attention kind '%s' "
                               "(expected %s)", tok, name, names);
        }
        *kind = found;
    }
    if (*p == '*') {
        if (!parse_positive_int(p + 1, &end, repeat)) goto bad;
        p = end;
    }
    if (*p != '\0') goto bad;
    if (*h > LLMC_MAX_HEADS || *d > LLMC_MAX_HEAD_SIZE || (int64_t)*h * (*d ? *d : 1) > LLMC_MAX_ATTN_WIDTH) {
        return layer_table_fail(s, path, line, "entry '%s': %d heads x %d: expected at most %d heads "
                                "of size at most %d, at most %d wide", tok, *h, *d, LLMC_MAX_HEADS,
                                LLMC_MAX_HEAD_SIZE, LLMC_MAX_ATTN_WIDTH);
    }
    return 1;
bad:
    return layer_table_fail(s, path, line, "bad entry '%s': expected H, HxD, H:kind, each with an "
                       "optional *N repeat (e.g. 3*2 6*2 12*8)", tok);
}

/* A method's rules on a parsed table against the model (warnings, or an error through
 * layer_table_fail): what -prism adds to -layers. Returns 0 on an error. */
typedef int (*LayerTableCheck)(LayerTable *t, const char *path, const GPT2Config *model);

/*
 * Parses table text. `model` supplies C and L. Returns 1 when there is no error, 0 otherwise.
 */
static inline int layer_table_parse(const char *text, const char *path, const GPT2Config *model,
                                    LayerTable *s) {
    memset(s, 0, sizeof(*s));
    const int C = model->channels, L = model->num_layers;
    int line = 1, last_entry_line = 1;
    /* How each HxD entry was read ("'4x4' is 1 layer of 4 heads of size 4"), for a layer count
     * that misses L: such an entry is one layer (H*N is N layers), and '4x4' written for '4*4'
     * otherwise shows up only as a count short by 3. */
    char readings[200] = "";
    size_t readings_len = 0;
    int readings_cut = 0;
    const char *p = text;
    while (*p) {
        if (*p == '\n') { line++; p++; continue; }
        if (isspace((unsigned char)*p)) { p++; continue; }
        if (*p == '#') { while (*p && *p != '\n') p++; continue; }
        char tok[128];
        size_t n = 0;
        while (*p && !isspace((unsigned char)*p) && *p != '#') {
            if (n + 1 < sizeof(tok)) tok[n++] = *p;
            p++;
        }
        tok[n] = '\0';
        int h = 0, d = 0, kind = 0, repeat = 0;
        if (!layer_table_entry_(tok, path, line, s, &h, &d, &kind, &repeat)) return 0;
        const int explicit_size = d != 0; /* an HxD entry */
        if (d == 0) {
            if (C % h != 0) {
                return layer_table_fail(s, path, line, "%d heads do not divide C = %d (head size %.2f);"
                                   " use a divisor of C or an explicit size HxD", h, C, (double)C / h);
            }
            d = C / h;
            if (d > LLMC_MAX_HEAD_SIZE) {
                return layer_table_fail(s, path, line, "entry '%s': head size C / %d = %d: expected at "
                                        "most %d", tok, h, d, LLMC_MAX_HEAD_SIZE);
            }
        }
        if (repeat > L || s->n_layers + repeat > L) {
            return layer_table_fail(s, path, line, "entry '%s' brings the table to %lld layers; the "
                               "model has %d", tok, (long long)s->n_layers + repeat, L);
        }
        if (explicit_size && !readings_cut) {
            char one[200];
            snprintf(one, sizeof(one), "%s'%s' is %d layer%s of %d heads of size %d", readings_len ? ", " : "",
                     tok, repeat, repeat == 1 ? "" : "s", h, d);
            /* at most 200 bytes of readings: with the path prefix (at most 215) and the rest of
             * the message, the whole line stays within LAYER_TABLE_MAX_MSG */
            if (readings_len + strlen(one) < 200) {
                memcpy(readings + readings_len, one, strlen(one) + 1);
                readings_len += strlen(one);
            } else {
                readings_cut = 1;
            }
        }
        for (int r = 0; r < repeat; r++) {
            LayerSpec *ls = &s->layer[s->n_layers];
            ls->n_head = h;
            ls->head_size = d;
            ls->kind = kind;
            s->line[s->n_layers] = line;
            s->n_layers++;
        }
        last_entry_line = line;
    }
    if (s->n_layers != L && readings_len > 0) {
        return layer_table_fail(s, path, last_entry_line, "the table covers %d layers; the model has %d (%s%s; "
                                "H*N is N layers of H heads)", s->n_layers, L, readings, readings_cut ? ", ..." : "");
    }
    if (s->n_layers != L) {
        return layer_table_fail(s, path, last_entry_line, "the table covers %d layers; the model has %d",
                           s->n_layers, L);
    }
    return 1;
}

static inline int layer_table_load(const char *path, const GPT2Config *model, LayerTable *s) {
    int64_t size = file_size_or_neg(path);
    if (size < 0) {
        memset(s, 0, sizeof(*s));
        snprintf(s->error, LAYER_TABLE_MAX_MSG, "%.400s: cannot read the layer table: %s", path,
                 strerror(errno));
        s->has_error = 1;
        return 0;
    }
    if (size > (1 << 20)) {
        memset(s, 0, sizeof(*s));
        snprintf(s->error, LAYER_TABLE_MAX_MSG, "%.400s: %lld bytes; a layer table is at most 1 MiB", path,
                 (long long)size);
        s->has_error = 1;
        return 0;
    }
    char *text = (char *)xmalloc((size_t)size + 1);
    FILE *f = xfopen(path, "rb");
    xfread(text, 1, (size_t)size, f, path, "layer table text");
    xfclose(f, path);
    text[size] = '\0';
    if (strlen(text) != (size_t)size) {
        free(text);
        memset(s, 0, sizeof(*s));
        snprintf(s->error, LAYER_TABLE_MAX_MSG, "%.400s: contains a NUL byte; expected a text file", path);
        s->has_error = 1;
        return 0;
    }
    int ok = layer_table_parse(text, path, model, s);
    free(text);
    return ok;
}

static inline void layer_table_apply(const LayerTable *s, GPT2Config *c) {
    for (int l = 0; l < c->num_layers; l++) c->layer[l] = s->layer[l];
}

#endif /* LLMC_LAYER_TABLE_H */
