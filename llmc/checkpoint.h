/*
 * llmc/checkpoint.h: model checkpoint files (llm.c's `gpt2_124M.bin` / `model_%08d.bin`).
 *
 * Defines:
 *   checkpoint_header_encode   GPT2Config -> 256-int header (v3/v5 for llm.c-uniform models,
 *                              v103/v105 with the layer table otherwise; doc/formats.md)
 *   checkpoint_header_decode   header -> GPT2Config, validating every field
 *   checkpoint_read_header     open + read + decode + check the file size
 *   checkpoint_read_fp32       read the parameters as fp32 (bf16 files are widened)
 *   checkpoint_load_fp32       header + parameters into a new fp32 buffer (the GPU programs)
 *   checkpoint_write           write a checkpoint atomically (tmp + rename), fp32 or bf16 body;
 *                              checkpoint_write_fp32 (the CPU programs) and checkpoint_write_bf16
 *                              (the GPU trainer: its bf16 parameters as they are on the GPU)
 *   FlagsFile, flags_file_open / flags_file_next / flags_file_close
 *                              a run folder's flags.txt read line by line ("flag value"), the one
 *                              reader of the file (the trainers' -y 1 and checkpoint_trained_T)
 *   checkpoint_trained_T       the -t a checkpoint was trained at, from its run folder's flags.txt
 *   tool_sequence_length       a tool's -t: given, else the trained T, else maxT, with a note
 * The bf16 <-> fp32 conversions are llmc/scalar_math.h's (plain C there: no CUDA is pulled in).
 *
 * Why a new version number for non-uniform tables: llm.c checks only the magic and the version
 * and ignores header[8..]; a Prism file that kept version 3 would load there with the wrong heads.
 * Versions 103/105 make llm.c refuse it with its "Bad version" error instead.
 */
#ifndef LLMC_CHECKPOINT_H
#define LLMC_CHECKPOINT_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "layer_kind.h"
#include "param_layout.h"
#include "scalar_math.h"
#include "utils.h"

/* the trainers' record of a run's flags in its -o folder (llmc/train_setup.h) */
#define TRAIN_FLAGS_FILE "flags.txt"

#define CKPT_MAGIC 20240326
#define CKPT_V_FP32 3
#define CKPT_V_BF16 5
#define CKPT_V_TABLE_FP32 103
#define CKPT_V_TABLE_BF16 105
#define CKPT_TABLE_REVISION 1
/* header[9]: bit 1 is the framework's; the kinds' stored options own the others (their
 * KindOption.header_bit, llmc/kind_option.h; doc/formats.md "Per-layer heads") */
#define CKPT_FLAG_NO_LN 1 /* -ln 0: blocks without ln_1/ln_2 */
/* header[10]: the input scale F (-emb_scale) as float32 bits; 0 when F = 1 (doc/formats.md "Per-layer heads") */
#define HEADER_INTS 256
#define HEADER_BYTES (HEADER_INTS * 4)

static inline void checkpoint_header_encode(const GPT2Config *c, int bf16, int32_t *h) {
    memset(h, 0, HEADER_BYTES);
    int table = !config_is_llmc_uniform(c);
    h[0] = CKPT_MAGIC;
    h[1] = table ? (bf16 ? CKPT_V_TABLE_BF16 : CKPT_V_TABLE_FP32) : (bf16 ? CKPT_V_BF16 : CKPT_V_FP32);
    h[2] = c->max_seq_len;
    h[3] = c->vocab_size;
    h[4] = c->num_layers;
    /* A uniform table is llm.c's model with its own head count (e.g. the schedule "6*12" on d12
     * is a 6-head GPT-2), so llm.c can load it; a table file keeps the base heads. */
    h[5] = table ? c->num_heads : c->layer[0].n_head;
    h[6] = c->channels;
    h[7] = c->padded_vocab_size;
    if (table) {
        h[8] = CKPT_TABLE_REVISION;
        h[9] = (c->use_ln ? 0 : CKPT_FLAG_NO_LN) | kind_options_header_bits(c->opt);
        if (c->emb_scale != 1.0f) memcpy(&h[10], &c->emb_scale, sizeof(float)); /* 0: F = 1 */
        for (int l = 0; l < c->num_layers; l++) {
            h[16 + 3 * l] = c->layer[l].n_head;
            h[17 + 3 * l] = c->layer[l].head_size;
            h[18 + 3 * l] = c->layer[l].kind;
        }
    }
}

/* Decodes and validates a header; dies with "path: field: ..." on any inconsistency. */
static inline void checkpoint_header_decode(const char *path, const int32_t *h, GPT2Config *c,
                                            int *is_bf16) {
    if (h[0] != CKPT_MAGIC) {
        llmc_die("%s: bad magic %d in header[0]: expected %d (an llm.c model checkpoint)", path,
                 h[0], CKPT_MAGIC);
    }
    int v = h[1];
    if (v != CKPT_V_FP32 && v != CKPT_V_BF16 && v != CKPT_V_TABLE_FP32 && v != CKPT_V_TABLE_BF16) {
        llmc_die("%s: unsupported version %d in header[1]: expected 3 or 5 (llm.c), 103 or 105 "
                 "(layer table)", path, v);
    }
    memset(c, 0, sizeof(*c));
    c->max_seq_len = h[2];
    c->vocab_size = h[3];
    c->num_layers = h[4];
    c->num_heads = h[5];
    c->channels = h[6];
    c->padded_vocab_size = h[7];
    c->use_ln = 1;
    c->emb_scale = 1.0f;
    kind_options_defaults(c->opt);
    *is_bf16 = (v == CKPT_V_BF16 || v == CKPT_V_TABLE_BF16);
    /* every shape field within its bound (llmc/config.h) before any arithmetic on it */
    const struct { int index; const char *name; int max; } fields[] = {
        {2, "max_seq_len", LLMC_MAX_SEQ_LEN}, {3, "vocab_size", LLMC_MAX_VOCAB},
        {4, "num_layers", LLMC_MAX_LAYERS},   {5, "num_heads", LLMC_MAX_HEADS},
        {6, "channels", LLMC_MAX_CHANNELS},   {7, "padded_vocab_size", LLMC_MAX_VOCAB},
    };
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        const int x = h[fields[i].index];
        if (x < 1 || x > fields[i].max) {
            llmc_die("%s: header[%d] %s = %d: expected 1..%d", path, fields[i].index, fields[i].name, x,
                     fields[i].max);
        }
    }
    if (c->padded_vocab_size < c->vocab_size) {
        llmc_die("%s: header[7] padded_vocab_size = %d: expected at least header[3] vocab_size = %d",
                 path, c->padded_vocab_size, c->vocab_size);
    }
    if (v == CKPT_V_FP32 || v == CKPT_V_BF16) {
        if (c->num_heads < 1 || c->channels % c->num_heads != 0) {
            llmc_die("%s: header[5] num_heads = %d does not divide header[6] channels = %d", path,
                     c->num_heads, c->channels);
        }
        config_set_uniform(c, c->num_heads);
    } else {
        if (h[8] != CKPT_TABLE_REVISION) {
            llmc_die("%s: header[8] layer-table revision %d: expected %d", path, h[8],
                     CKPT_TABLE_REVISION);
        }
        const int known = CKPT_FLAG_NO_LN | kind_options_known_bits();
        if ((h[9] & ~known) != 0) {
            char names[256];
            size_t n = (size_t)snprintf(names, sizeof(names), "1 no LayerNorm");
            for (int i = 0; i < N_KIND_OPTIONS && n < sizeof(names); i++)
                if (KIND_OPTIONS[i]->role == KIND_OPT_MODEL)
                    n += (size_t)snprintf(names + n, sizeof(names) - n, ", %d %s %d", KIND_OPTIONS[i]->header_bit,
                                          KIND_OPTIONS[i]->cli.flag, KIND_OPTIONS[i]->bit_value);
            llmc_die("%s: header[9] flags 0x%x: unknown bits (known: %s)", path, h[9], names);
        }
        c->use_ln = (h[9] & CKPT_FLAG_NO_LN) ? 0 : 1;
        if (h[10] != 0) {
            float f;
            memcpy(&f, &h[10], sizeof(float));
            if (!(f > 0.0f && f <= EMB_SCALE_MAX)) { /* also NaN */
                llmc_die("%s: header[10] emb_scale = %g (bits 0x%08x): expected a float in (0, %g], or 0 bits for 1",
                         path, (double)f, (unsigned)h[10], (double)EMB_SCALE_MAX);
            }
            c->emb_scale = f;
        }
        kind_options_from_header_bits(h[9], c->opt);
        for (int l = 0; l < c->num_layers; l++) {
            LayerSpec *ls = &c->layer[l];
            ls->n_head = h[16 + 3 * l];
            ls->head_size = h[17 + 3 * l];
            ls->kind = h[18 + 3 * l];
            if (ls->n_head < 1 || ls->n_head > LLMC_MAX_HEADS || ls->head_size < 1 ||
                ls->head_size > LLMC_MAX_HEAD_SIZE || (int64_t)ls->n_head * ls->head_size > LLMC_MAX_ATTN_WIDTH ||
                layer_kind_of(ls->kind) == NULL) {
                llmc_die("%s: header[%d..%d] layer %d: heads %d, head size %d, kind %d: expected 1..%d "
                         "heads of size 1..%d, at most %d wide, and a kind in 0..%d", path, 16 + 3 * l,
                         18 + 3 * l, l, ls->n_head, ls->head_size, ls->kind, LLMC_MAX_HEADS,
                         LLMC_MAX_HEAD_SIZE, LLMC_MAX_ATTN_WIDTH, N_LAYER_KINDS - 1);
            }
        }
    }
    char msg[256];
    if (!config_validate(c, msg, sizeof(msg))) llmc_die("%s: %s", path, msg);
}

/* Reads and validates the header, and checks that the file holds exactly the parameters the
 * header describes (llm.c never checks the size; a truncated file would load garbage). */
static inline void checkpoint_read_header(const char *path, GPT2Config *c, int *is_bf16) {
    int64_t size = file_size_or_neg(path);
    if (size < 0) llmc_die("%s: cannot open model checkpoint: %s", path, strerror(errno));
    if (size < HEADER_BYTES) {
        llmc_die("%s: %lld bytes, shorter than the %d-byte header: not a complete checkpoint",
                 path, (long long)size, HEADER_BYTES);
    }
    int32_t h[HEADER_INTS];
    FILE *f = xfopen(path, "rb");
    xfread(h, sizeof(int32_t), HEADER_INTS, f, path, "header");
    xfclose(f, path);
    checkpoint_header_decode(path, h, c, is_bf16);
    ParamLayout layout;
    param_layout_init(&layout, c);
    int64_t expect = HEADER_BYTES + (int64_t)layout.total * (*is_bf16 ? 2 : 4);
    if (size != expect) {
        llmc_die("%s: file is %lld bytes; the header describes %zu %s parameters = %lld bytes "
                 "(truncated or not this model)", path, (long long)size, layout.total,
                 *is_bf16 ? "bf16" : "fp32", (long long)expect);
    }
}

/* Reads the parameter body into `params` (layout.total floats), widening bf16. */
static inline void checkpoint_read_fp32(const char *path, const GPT2Config *c, int is_bf16,
                                        float *params) {
    ParamLayout layout;
    param_layout_init(&layout, c);
    FILE *f = xfopen(path, "rb");
    xfseek(f, HEADER_BYTES, path);
    if (!is_bf16) {
        xfread(params, sizeof(float), layout.total, f, path, "parameters");
    } else {
        const size_t chunk = 1 << 20;
        uint16_t *buf = (uint16_t *)xmalloc(chunk * sizeof(uint16_t));
        for (size_t i = 0; i < layout.total; i += chunk) {
            size_t n = LLMC_MIN(chunk, layout.total - i);
            xfread(buf, sizeof(uint16_t), n, f, path, "bf16 parameters");
            for (size_t k = 0; k < n; k++) params[i + k] = bf16_to_f32(buf[k]);
        }
        free(buf);
    }
    xfclose(f, path);
}

/* Header and parameters: the config into c, the parameters as a malloc'd fp32 buffer
 * (layout.total floats; the caller frees it); is_bf16 (may be NULL) says what the file held. */
static inline float *checkpoint_load_fp32(const char *path, GPT2Config *c, int *is_bf16) {
    int bf16 = 0;
    checkpoint_read_header(path, c, &bf16);
    ParamLayout layout;
    param_layout_init(&layout, c);
    float *params = (float *)xmalloc(layout.total * sizeof(float));
    checkpoint_read_fp32(path, c, bf16, params);
    if (is_bf16) *is_bf16 = bf16;
    return params;
}

/* The header (llm.c's v3/v5 for a uniform model, v103/v105 with the layer table otherwise:
 * checkpoint_header_encode decides) and the parameter body: layout.total floats, or with is_bf16
 * as many bf16 values (written as given, so a resumed GPU run starts from exactly these bits).
 * Written to NAME.tmp and renamed. Readers: checkpoint_read_header + checkpoint_read_fp32. */
static inline void checkpoint_write(const char *path, const GPT2Config *c, int is_bf16,
                                    const void *params) {
    ParamLayout layout;
    param_layout_init(&layout, c);
    int32_t h[HEADER_INTS];
    checkpoint_header_encode(c, is_bf16, h);
    AtomicFile af;
    atomic_open(&af, path);
    atomic_write(&af, h, sizeof(int32_t), HEADER_INTS);
    atomic_write(&af, params, is_bf16 ? sizeof(uint16_t) : sizeof(float), layout.total);
    atomic_commit(&af);
}

static inline void checkpoint_write_fp32(const char *path, const GPT2Config *c, const float *params) {
    checkpoint_write(path, c, 0, params);
}

static inline void checkpoint_write_bf16(const char *path, const GPT2Config *c, const uint16_t *params) {
    checkpoint_write(path, c, 1, params);
}

/* <run folder>/flags.txt (written by llmc/train_setup.h train_flags_save): one "flag value" line
 * per flag, the value to the end of the line; '#' comment lines and blank lines are skipped. */
#define FLAGS_FILE_LINE_CAP 1100 /* a flag and a value of up to ARG_STR_CAP (1024) characters */
typedef struct {
    FILE *f;
    const char *path;
    int lineno;
    char line[FLAGS_FILE_LINE_CAP];
} FlagsFile;

/* 1 with the file open; 0 when path does not exist. Another failure to open is an error. */
static inline int flags_file_open(FlagsFile *ff, const char *path) {
    ff->path = path;
    ff->lineno = 0;
    ff->f = NULL;
    if (!file_exists(path)) return 0;
    ff->f = xfopen(path, "rb");
    return 1;
}

/* The next "flag value" line: 1 with *flag and *value pointing into ff->line, 0 at the end of the
 * file. A line longer than FLAGS_FILE_LINE_CAP or without a space is an error naming the file and
 * the line. */
static inline int flags_file_next(FlagsFile *ff, const char **flag, const char **value) {
    while (fgets(ff->line, sizeof(ff->line), ff->f) != NULL) {
        ff->lineno++;
        const size_t len = strlen(ff->line);
        if (len > 0 && ff->line[len - 1] != '\n' && !feof(ff->f)) {
            llmc_die("%s:%d: line longer than %zu characters", ff->path, ff->lineno, sizeof(ff->line) - 2);
        }
        ff->line[strcspn(ff->line, "\n")] = '\0';
        if (ff->line[0] == '#' || ff->line[0] == '\0') continue;
        char *space = strchr(ff->line, ' ');
        if (space == NULL) llmc_die("%s:%d: expected \"flag value\", got '%s'", ff->path, ff->lineno, ff->line);
        *space = '\0';
        *flag = ff->line;
        *value = space + 1;
        return 1;
    }
    return 0;
}

static inline void flags_file_close(FlagsFile *ff) {
    if (ff->f != NULL) xfclose(ff->f, ff->path);
    ff->f = NULL;
}

/* The sequence length a checkpoint was trained at: the "-t" line of the flags.txt its trainer
 * wrote beside it (-o DIR). 0 when there is no such file or line (an imported model, one written
 * by train_gpt2.py or copied elsewhere). A -t line that is not an integer 1..1048576 is an error
 * naming the file and line. */
static inline int checkpoint_trained_T(const char *ckpt_path) {
    char dir[4096];
    const char *slash = strrchr(ckpt_path, '/');
    if (slash == NULL) snprintf(dir, sizeof(dir), ".");
    else snprintf(dir, sizeof(dir), "%.*s", (int)(slash - ckpt_path), ckpt_path);
    char path[4200];
    path_join(path, sizeof(path), dir[0] ? dir : "/", TRAIN_FLAGS_FILE);
    FlagsFile ff;
    if (!flags_file_open(&ff, path)) return 0;
    const char *flag, *value;
    int T = 0;
    while (flags_file_next(&ff, &flag, &value)) {
        if (strcmp(flag, "-t") != 0) continue;
        char *end = NULL;
        const long v = strtol(value, &end, 10);
        if (end == value || *end != '\0' || v < 1 || v > (1 << 20)) {
            llmc_die("%s:%d: -t: expected an integer 1..1048576", path, ff.lineno);
        }
        T = (int)v;
    }
    flags_file_close(&ff);
    return T;
}

/* The sequence length a tool runs a checkpoint at: -t when given (given_T > 0), else the T the
 * model was trained at (flags.txt), else its maxT. Positions beyond the trained T were never
 * trained and are said to be scored, in one note; so is a maxT used for want of flags.txt.
 * what: the tool's name for the note. */
static inline int tool_sequence_length(const char *ckpt_path, int given_T, int max_T, const char *what) {
    const int trained = checkpoint_trained_T(ckpt_path);
    if (given_T > 0) {
        if (trained > 0 && given_T > trained) {
            printf("note: %s: -t %d exceeds the T %d %s was trained at (its %s): positions %d..%d "
                   "were never trained\n", what, given_T, trained, ckpt_path, TRAIN_FLAGS_FILE,
                   trained, given_T - 1);
        }
        return given_T;
    }
    if (trained > 0) {
        const int T = trained < max_T ? trained : max_T;
        printf("%s: T %d, the -t %s was trained at (its %s; -t sets another)\n", what, T, ckpt_path,
               TRAIN_FLAGS_FILE);
        return T;
    }
    printf("note: %s: no %s beside %s: T = its maxT %d; if it was trained at a shorter T, the "
           "positions beyond it were never trained (set -t)\n", what, TRAIN_FLAGS_FILE, ckpt_path, max_T);
    return max_T;
}

#endif /* LLMC_CHECKPOINT_H */
