/*
 * prism/schedule.h: Prism head-schedule files (`-prism FILE`): parsing and validation.
 *
 * Defines:
 *   PrismSchedule           the parsed per-layer table plus its warnings / first error
 *   prism_schedule_parse    parse and validate schedule text against a model shape
 *   prism_schedule_load     the same from a file
 *   prism_schedule_apply    write the table into a GPT2Config
 *
 * File syntax (doc/prism.md): plain text, '#' starts a comment, entries are separated by
 * whitespace (spaces or newlines). An entry is
 *
 *     H[xD][:KIND][*N]      e.g.  12   3*2   12x8   12:sd   12x8:sd*3
 *
 * H heads of size D (default C/H) of attention kind KIND (default mha; sd, lin, sdlin: S-D and
 * linear attention, METHODS.md 3.4 and 3.12), repeated for N consecutive layers (default 1),
 * listed from the first layer up.
 *
 * Rules, from METHODS.md section 2.3. Errors: bad syntax, H not dividing C, a layer count other
 * than L, a head count that decreases with depth (the paper's "monotonically increasing"; allowed
 * with -prism_unchecked 1 so its negative controls can run). Warnings (the unverified
 * constraints, and the controls of METHODS.md 2.6): the last layer not at the base head count,
 * fewer than L/2 base layers, a run of a non-base width shorter than 2 or longer than 4 layers, a
 * head count more than doubling between layers, an attention width h*d != C (not neutral).
 * Every message starts "file:line: ".
 */
#ifndef PRISM_SCHEDULE_H
#define PRISM_SCHEDULE_H

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "../llmc/config.h"
#include "../llmc/utils.h"

#define PRISM_MAX_MSG 512
#define PRISM_MAX_WARNINGS 32

typedef struct {
    int n_layers;
    LayerSpec layer[LLMC_MAX_LAYERS];
    int line[LLMC_MAX_LAYERS]; /* source line of each layer's entry */
    int n_warnings;
    char warning[PRISM_MAX_WARNINGS][PRISM_MAX_MSG];
    int has_error;
    char error[PRISM_MAX_MSG];
} PrismSchedule;

static inline LLMC_PRINTF(4, 5) int prism_fail_(PrismSchedule *s, const char *path, int line,
                                                const char *fmt, ...) {
    if (s->has_error) return 0; /* keep the first error: it is the one to fix first */
    int n = snprintf(s->error, PRISM_MAX_MSG, "%s:%d: ", path, line);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->error + n, PRISM_MAX_MSG - (size_t)n, fmt, ap);
    va_end(ap);
    s->has_error = 1;
    return 0;
}

static inline LLMC_PRINTF(4, 5) void prism_warn_(PrismSchedule *s, const char *path, int line,
                                                 const char *fmt, ...) {
    if (s->n_warnings >= PRISM_MAX_WARNINGS) return;
    char *dst = s->warning[s->n_warnings++];
    int n = snprintf(dst, PRISM_MAX_MSG, "%s:%d: ", path, line);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dst + n, PRISM_MAX_MSG - (size_t)n, fmt, ap);
    va_end(ap);
}

/* Parses one entry token (NUL-terminated, no whitespace). Returns 1 and fills h, d (0 = default),
 * kind, repeat; else 0 with the error recorded. */
static inline int prism_parse_entry_(const char *tok, const char *path, int line, PrismSchedule *s,
                                     int *h, int *d, int *kind, int *repeat) {
    const char *p = tok;
    const char *end = NULL;
    *d = 0;
    *kind = ATTN_MHA;
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
        int found = -1;
        for (int k = 0; k < ATTN_NUM_KINDS; k++)
            if (strcmp(name, ATTN_KIND_NAMES[k]) == 0) found = k;
        if (found < 0) {
            return prism_fail_(s, path, line, "entry '%s': unknown attention kind '%s' "
                               "(expected mha, sd, lin or sdlin)", tok, name);
        }
        *kind = found;
    }
    if (*p == '*') {
        if (!parse_positive_int(p + 1, &end, repeat)) goto bad;
        p = end;
    }
    if (*p != '\0') goto bad;
    return 1;
bad:
    return prism_fail_(s, path, line, "bad entry '%s': expected H, HxD, H:kind, each with an "
                       "optional *N repeat (e.g. 3*2 6*2 12*8)", tok);
}

/*
 * Parses schedule text. `model` supplies C, L and the base head count (its num_heads).
 * Returns 1 when there is no error (warnings may be present), 0 otherwise.
 */
static inline int prism_schedule_parse(const char *text, const char *path, const GPT2Config *model,
                                       int unchecked, PrismSchedule *s) {
    memset(s, 0, sizeof(*s));
    const int C = model->channels, L = model->num_layers, base = model->num_heads;
    int line = 1, last_entry_line = 1;
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
        if (!prism_parse_entry_(tok, path, line, s, &h, &d, &kind, &repeat)) return 0;
        if (d == 0) {
            if (C % h != 0) {
                return prism_fail_(s, path, line, "%d heads do not divide C = %d (head size %.2f);"
                                   " use a divisor of C or an explicit size HxD", h, C, (double)C / h);
            }
            d = C / h;
        }
        if (repeat > L || s->n_layers + repeat > L) {
            return prism_fail_(s, path, line, "entry '%s' brings the schedule to %lld layers; the "
                               "model has %d", tok, (long long)s->n_layers + repeat, L);
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
    if (s->n_layers != L) {
        return prism_fail_(s, path, last_entry_line, "schedule covers %d layers; the model has %d",
                           s->n_layers, L);
    }
    /* Monotonicity: few wide heads early, many narrow heads late. */
    for (int l = 1; l < L; l++) {
        if (s->layer[l].n_head < s->layer[l - 1].n_head) {
            if (!unchecked) {
                return prism_fail_(s, path, s->line[l], "layer %d has %d heads after %d at layer "
                                   "%d: head counts must not decrease with depth (pass "
                                   "-prism_unchecked 1 to run a negative control)", l,
                                   s->layer[l].n_head, s->layer[l - 1].n_head, l - 1);
            }
            prism_warn_(s, path, s->line[l], "layer %d has %d heads after %d at layer %d: not a "
                        "Prism schedule (allowed by -prism_unchecked 1)", l, s->layer[l].n_head,
                        s->layer[l - 1].n_head, l - 1);
            break;
        }
    }
    /* The unverified constraints of METHODS.md 2.3: warnings only. */
    if (s->layer[L - 1].n_head != base) {
        prism_warn_(s, path, s->line[L - 1], "the last layer has %d heads; the model's base is %d "
                    "(Prism ends at the base head count)", s->layer[L - 1].n_head, base);
    }
    int n_base = 0;
    for (int l = 0; l < L; l++) n_base += s->layer[l].n_head == base;
    if (2 * n_base < L) {
        prism_warn_(s, path, s->line[L - 1], "only %d of %d layers use the base %d heads (Prism "
                    "keeps at least half)", n_base, L, base);
    }
    /* Staircase: every run of a non-base head count lasts 2-4 layers. */
    for (int l = 0; l < L;) {
        int r = l;
        while (r < L && s->layer[r].n_head == s->layer[l].n_head) r++;
        const int run = r - l;
        if (s->layer[l].n_head != base && (run < 2 || run > 4)) {
            prism_warn_(s, path, s->line[l], "a run of %d layer%s with %d heads (head size %d): "
                        "Prism holds each non-base width for 2-4 layers", run, run == 1 ? "" : "s",
                        s->layer[l].n_head, s->layer[l].head_size);
        }
        l = r;
    }
    /* Smoothness: widths step by at most 2x (256 -> 128 -> 64; the "jump" control skips 128). */
    for (int l = 1; l < L; l++) {
        if (s->layer[l].n_head > 2 * s->layer[l - 1].n_head) {
            prism_warn_(s, path, s->line[l], "layer %d jumps from %d to %d heads (head size %d -> "
                        "%d): Prism steps the head count by at most 2x", l, s->layer[l - 1].n_head,
                        s->layer[l].n_head, s->layer[l - 1].head_size, s->layer[l].head_size);
        }
    }
    /* Neutrality: an explicit head size with h*d != C changes parameters and FLOPs. */
    for (int l = 0; l < L; l++) {
        if (attn_width(&s->layer[l]) != C && (l == 0 || s->line[l] != s->line[l - 1] ||
                                              attn_width(&s->layer[l - 1]) == C)) {
            prism_warn_(s, path, s->line[l], "layer %d: %d heads x %d = attention width %d, not "
                        "C = %d: parameters and FLOPs differ from the uniform model", l,
                        s->layer[l].n_head, s->layer[l].head_size, attn_width(&s->layer[l]), C);
        }
    }
    return 1;
}

static inline int prism_schedule_load(const char *path, const GPT2Config *model, int unchecked,
                                      PrismSchedule *s) {
    int64_t size = file_size_or_neg(path);
    if (size < 0) {
        memset(s, 0, sizeof(*s));
        snprintf(s->error, PRISM_MAX_MSG, "%s: cannot read the schedule file: %s", path,
                 strerror(errno));
        s->has_error = 1;
        return 0;
    }
    if (size > (1 << 20)) {
        memset(s, 0, sizeof(*s));
        snprintf(s->error, PRISM_MAX_MSG, "%s: %lld bytes; a schedule file is at most 1 MiB", path,
                 (long long)size);
        s->has_error = 1;
        return 0;
    }
    char *text = (char *)xmalloc((size_t)size + 1);
    FILE *f = xfopen(path, "rb");
    xfread(text, 1, (size_t)size, f, path, "schedule text");
    xfclose(f, path);
    text[size] = '\0';
    if (strlen(text) != (size_t)size) {
        free(text);
        memset(s, 0, sizeof(*s));
        snprintf(s->error, PRISM_MAX_MSG, "%s: contains a NUL byte; expected a text file", path);
        s->has_error = 1;
        return 0;
    }
    int ok = prism_schedule_parse(text, path, model, unchecked, s);
    free(text);
    return ok;
}

static inline void prism_schedule_apply(const PrismSchedule *s, GPT2Config *c) {
    for (int l = 0; l < c->num_layers; l++) c->layer[l] = s->layer[l];
}

#endif /* PRISM_SCHEDULE_H */
