/*
 * attn_distance.c: per-layer attention distance of a checkpoint (Prism, arXiv 2606.27449;
 * doc/attention_distance.md "Definitions"), and the
 * difference between two checkpoints on the same tokens (Prism minus uniform: the "flip" claim P7).
 *
 *   ./attn_distance -e model.bin -j VAL_SHARD [-b B -t T -n N] [-csv out.csv] [-json out.json]
 *   ./attn_distance -e prism.bin -e2 uniform.bin -j VAL_SHARD ...      (adds Delta = e - e2)
 *   ./attn_distance --help
 *
 * The sequences are the first N windows of B x T tokens of the val data in llm.c's val order (no
 * shuffle, window k starts at token k*B*T), i.e. the first N*B sequences of T tokens whatever B
 * is; B only sets how many go through one forward (memory: the model stores every layer's
 * B*h*T*T probabilities). Each window runs through the CPU reference forward's blocks
 * (gpt2_forward_blocks: no LM head, whose logits nothing here reads) and every softmax layer's m.acts.att[l] is reduced by prism/attn_stats.h. Layers of
 * a kind without an attention matrix (linear attention) are reported as skipped, unless -lin 1
 * asks for their normalized linear-attention weights.
 *
 * Output: an aligned per-layer table on stdout (per-head rows with -heads 1), optionally a CSV
 * (one row per head and one "mean" row per layer, per model) and a JSON file (with the Delta).
 * The definitions and the file columns are in doc/attention_distance.md.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llmc/checkpoint.h"
#include "llmc/config.h"
#include "llmc/dataloader.h"
#include "llmc/cli.h"
#include "llmc/cpu/gpt2_cpu.h"
#include "llmc/utils.h"
#include "prism/attn_stats.h"
#include "kinds/registry_cpu.h"

#define OPT_CAP 1024

/* ----------------------------------------------------------------------------------------------
 * Command line: flag/value pairs like the trainer; the help text is generated from OPTS. */
typedef struct {
    char model[OPT_CAP];  /* -e */
    char model2[OPT_CAP]; /* -e2 */
    char val[OPT_CAP];    /* -j */
    char csv[OPT_CAP];    /* -csv */
    char json[OPT_CAP];   /* -json */
    int B;                /* -b */
    int T;                /* -t; 0 = the trained T (flags.txt), else the model's maxT */
    int batches;          /* -n */
    int per_head;         /* -heads */
    int linear;           /* -lin */
} Options;

#define O_STR(f, field, h) CLI_STR(Options, f, field, NULL, 0, h)
#define O_INT(f, field, lo, hi, h) CLI_INT(Options, f, field, lo, hi, 0, h)
static const CliOpt OPTS[] = {
    O_STR("-e", model, "model checkpoint (.bin, version 3/5/103/105) [required]"),
    O_STR("-e2", model2, "second checkpoint: also report Delta = e minus e2 on the same tokens"),
    O_STR("-j", val, "val token shards (glob; llm.c val order)"),
    O_INT("-b", B, 1, 1 << 20, "sequences per forward (memory only: the sequences do not depend on it)"),
    O_INT("-t", T, 0, 1 << 20, "sequence length T (0: the T the model was trained at, from its flags.txt, else its maxT)"),
    O_INT("-n", batches, 1, 1 << 30, "number of B x T windows (N*B sequences in all)"),
    O_INT("-heads", per_head, 0, 1, "1: per-head rows in the table (the CSV/JSON always have them)"),
    O_INT("-lin", linear, 0, 1, "1: also analyse linear-attention layers (lin, sdlin) from their normalized weights"),
    O_STR("-csv", csv, "write the per-layer and per-head values here (CSV)"),
    O_STR("-json", json, "write everything here (JSON, with the Delta for -e2)"),
};
#define NUM_OPTS ((int)(sizeof(OPTS) / sizeof(OPTS[0])))

static void options_defaults(Options *o) {
    memset(o, 0, sizeof(*o));
    strcpy(o->val, "dev/data/tinyshakespeare/tiny_shakespeare_val.bin");
    o->B = 1;
    o->T = 0;
    o->batches = 16;
}

static void parse_options(Options *o, int argc, char **argv) {
    options_defaults(o);
    if (cli_wants_help(argc, argv)) {
        printf("usage: %s -e model.bin [-e2 other.bin] [-flag value ...]   (--help: this text)\n", argv[0]);
        printf("per-layer attention distance D, position-normalized D, sink mass, D without the sink,\n"
               "median distance and entropy (doc/attention_distance.md 'Definitions')\n");
        cli_print_options(OPTS, NUM_OPTS, o, -1, stdout);
        exit(0);
    }
    cli_parse(OPTS, NUM_OPTS, o, argc, argv, NULL, NULL, 0);
    if (o->model[0] == '\0') llmc_die("-e: expected a model checkpoint (see %s --help)", argv[0]);
}

/* ----------------------------------------------------------------------------------------------
 * Analysis of one model */
typedef struct {
    const char *path;
    GPT2Config cfg;
    int has_matrix[LLMC_MAX_LAYERS];
    double (*head[LLMC_MAX_LAYERS])[ATTN_NUM_STATS]; /* [l][k][stat] head means */
    double layer[LLMC_MAX_LAYERS][ATTN_NUM_STATS];    /* D_l etc.: head means of the head values */
    double seconds;
} Report;

/* What the table, CSV and JSON say for a layer without an attention matrix. */
static void skip_reason(int kind, char *buf, size_t cap) {
    snprintf(buf, cap, "skipped: kind %s forms no attention matrix (linear attention)",
             layer_kind_of(kind)->name);
}

/* Linear attention has no softmax, but the CPU reference stores its normalized weights
 * a_ts = phi(q_t).phi(k_s) / Z_t (nonnegative, rows summing to 1 up to its eps) where softmax
 * layers keep their probabilities; -lin 1 analyses those like a softmax matrix. */
static int layer_analysed(int kind, const Options *o) {
    return attn_kind_has_matrix(kind) || o->linear;
}

/* The CSV note of an analysed layer: empty, except for linear weights. */
static void layer_note(const Report *r, int l, char *buf, size_t cap) {
    const int kind = r->cfg.layer[l].kind;
    buf[0] = '\0';
    if (!r->has_matrix[l]) skip_reason(kind, buf, cap);
    else if (!attn_kind_has_matrix(kind)) snprintf(buf, cap, "linear attention weights (-lin 1)");
}

/* The length to use: -t, else the shortest T the models were trained at (their run folders'
 * flags.txt) or, for a model without one, its maxT (llmc/checkpoint.h tool_sequence_length, which
 * notes what it chose); checked against each maxT. */
static int resolve_T(const Options *o, const GPT2Config *cfg, const char *const *paths, int n) {
    int T = 0;
    for (int m = 0; m < n; m++) {
        const int Tm = tool_sequence_length(paths[m], o->T, cfg[m].max_seq_len, "attn_distance");
        T = m == 0 ? Tm : LLMC_MIN(T, Tm);
    }
    for (int m = 0; m < n; m++) {
        if (T > cfg[m].max_seq_len) {
            llmc_die("-t %d: exceeds the maxT %d of %s", T, cfg[m].max_seq_len, paths[m]);
        }
    }
    return T;
}

/* Runs the N windows through the model and fills r (r->path and r->cfg set by the caller). */
static void analyse_model(const Options *o, int T, Report *r) {
    GPT2 model;
    gpt2_build_from_checkpoint(&model, r->path);
    const GPT2Config *c = &model.config;
    AttnSums *sums[LLMC_MAX_LAYERS];
    for (int l = 0; l < c->num_layers; l++) {
        r->has_matrix[l] = layer_analysed(c->layer[l].kind, o);
        sums[l] = (AttnSums *)xcalloc((size_t)c->layer[l].n_head, sizeof(AttnSums));
    }
    DataLoader dl;
    dataloader_init(&dl, o->val, o->B, T, 0, 1, 0, c->vocab_size);
    if (o->batches > dl.total_samples) {
        llmc_die("-n %d: %s holds only %lld windows of B*T = %d tokens (lower -n, -b or -t)",
                 o->batches, o->val, (long long)dl.total_samples, o->B * T);
    }
    const double t0 = wall_seconds();
    for (int n = 0; n < o->batches; n++) {
        dataloader_next_batch(&dl);
        gpt2_forward_blocks(&model, dl.inputs, NULL, o->B, T); /* no LM head: the logits are unused */
        for (int l = 0; l < c->num_layers; l++) {
            if (!r->has_matrix[l]) continue;
            attn_layer_accumulate(model.acts.att[l], o->B, c->layer[l].n_head, T, sums[l]);
        }
    }
    r->seconds = wall_seconds() - t0;
    for (int l = 0; l < c->num_layers; l++) {
        const int h = c->layer[l].n_head;
        r->head[l] = (double(*)[ATTN_NUM_STATS])xmalloc((size_t)h * sizeof(*r->head[l]));
        for (int k = 0; k < h; k++) attn_sums_mean(&sums[l][k], r->head[l][k]);
        if (r->has_matrix[l]) attn_head_mean((const double(*)[ATTN_NUM_STATS])r->head[l], h, r->layer[l]);
        else for (int s = 0; s < ATTN_NUM_STATS; s++) r->layer[l][s] = NAN;
        free(sums[l]);
    }
    dataloader_free(&dl);
    gpt2_free(&model);
}

static void report_free(Report *r) {
    for (int l = 0; l < r->cfg.num_layers; l++) free(r->head[l]);
}

/* ----------------------------------------------------------------------------------------------
 * The table */
static const char *const COLUMN_TITLES[ATTN_NUM_STATS] = {
    "D", "D_norm", "sink", "D_nosink", "median", "entropy", "H/ln(i+1)"};

static void print_values(const double *v) {
    for (int s = 0; s < ATTN_NUM_STATS; s++) {
        if (isnan(v[s])) printf(" %10s", "-");
        else printf(" %10.4f", v[s]);
    }
    printf("\n");
}

static void print_header(const char *first) {
    printf("%-24s", first);
    for (int s = 0; s < ATTN_NUM_STATS; s++) printf(" %10s", COLUMN_TITLES[s]);
    printf("\n");
}

static void print_table(const Report *r, const Options *o) {
    const GPT2Config *c = &r->cfg;
    printf("\n%s: L %d, C %d (%.1f s)\n", r->path, c->num_layers, c->channels, r->seconds);
    print_header("layer heads x size kind");
    for (int l = 0; l < c->num_layers; l++) {
        const LayerSpec *ls = &c->layer[l];
        char label[64];
        snprintf(label, sizeof(label), "%5d %5d x %4d %-5s", l, ls->n_head, ls->head_size,
                 layer_kind_of(ls->kind)->name);
        printf("%-24s", label);
        if (!r->has_matrix[l]) {
            char why[128];
            skip_reason(ls->kind, why, sizeof(why));
            printf(" %s\n", why);
            continue;
        }
        print_values(r->layer[l]);
        if (!o->per_head) continue;
        for (int k = 0; k < ls->n_head; k++) {
            snprintf(label, sizeof(label), "        head %d", k);
            printf("%-24s", label);
            print_values(r->head[l][k]);
        }
    }
}

static void delta_of(const Report *a, const Report *b, int l, double *out) {
    for (int s = 0; s < ATTN_NUM_STATS; s++) out[s] = a->layer[l][s] - b->layer[l][s];
}

static void print_delta(const Report *a, const Report *b) {
    printf("\nDelta = %s minus %s, same tokens (differences of the layer values)\n", a->path, b->path);
    print_header("layer  heads(e) heads(e2)");
    for (int l = 0; l < a->cfg.num_layers; l++) {
        char label[64];
        snprintf(label, sizeof(label), "%5d %9d %9d", l, a->cfg.layer[l].n_head, b->cfg.layer[l].n_head);
        printf("%-24s", label);
        if (!a->has_matrix[l] || !b->has_matrix[l]) {
            printf(" skipped: no attention matrix in %s\n", !a->has_matrix[l] ? "e" : "e2");
            continue;
        }
        double d[ATTN_NUM_STATS];
        delta_of(a, b, l, d);
        print_values(d);
    }
}

/* ----------------------------------------------------------------------------------------------
 * CSV and JSON (written to NAME.tmp, then renamed) */
static void csv_text(FILE *f, const char *s) {
    if (strpbrk(s, ",\"\n") == NULL) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static void csv_values(FILE *f, const double *v) {
    for (int s = 0; s < ATTN_NUM_STATS; s++) {
        if (isnan(v[s])) fprintf(f, ",");
        else fprintf(f, ",%.9g", v[s]);
    }
}

static void csv_row(FILE *f, const Report *r, int l, const char *head, const double *v, int T,
                    int sequences, const char *val) {
    const LayerSpec *ls = &r->cfg.layer[l];
    char note[128];
    layer_note(r, l, note, sizeof(note));
    csv_text(f, r->path);
    fprintf(f, ",%d,%s,%d,%d,%s", l, head, ls->n_head, ls->head_size, layer_kind_of(ls->kind)->name);
    csv_values(f, v);
    fprintf(f, ",%d,%d,", T, sequences);
    csv_text(f, val);
    fputc(',', f);
    csv_text(f, note);
    fputc('\n', f);
}

static void write_csv(const char *path, const Report *reports, int n, int T, int sequences,
                      const char *val) {
    AtomicFile af;
    atomic_open(&af, path);
    fprintf(af.f, "model,layer,head,n_head,head_size,kind");
    for (int s = 0; s < ATTN_NUM_STATS; s++) fprintf(af.f, ",%s", ATTN_STAT_NAMES[s]);
    fprintf(af.f, ",T,sequences,val,note\n");
    for (int m = 0; m < n; m++) {
        const Report *r = &reports[m];
        for (int l = 0; l < r->cfg.num_layers; l++) {
            csv_row(af.f, r, l, "mean", r->layer[l], T, sequences, val);
            if (!r->has_matrix[l]) continue;
            for (int k = 0; k < r->cfg.layer[l].n_head; k++) {
                char head[16];
                snprintf(head, sizeof(head), "%d", k);
                csv_row(af.f, r, l, head, r->head[l][k], T, sequences, val);
            }
        }
    }
    atomic_commit(&af);
    printf("wrote %s\n", path);
}

/* {"D": 1.5, ...}; NaN (undefined) becomes null. */
static void json_values(FILE *f, const double *v) {
    fputc('{', f);
    for (int s = 0; s < ATTN_NUM_STATS; s++) {
        fprintf(f, "%s\"%s\": ", s ? ", " : "", ATTN_STAT_NAMES[s]);
        if (isnan(v[s])) fprintf(f, "null");
        else fprintf(f, "%.9g", v[s]);
    }
    fputc('}', f);
}

static void json_model(FILE *f, const Report *r) {
    fprintf(f, "    {\"path\": ");
    json_string(f, r->path);
    fprintf(f, ", \"num_layers\": %d, \"channels\": %d, \"layers\": [\n", r->cfg.num_layers, r->cfg.channels);
    for (int l = 0; l < r->cfg.num_layers; l++) {
        const LayerSpec *ls = &r->cfg.layer[l];
        fprintf(f, "      {\"layer\": %d, \"n_head\": %d, \"head_size\": %d, \"kind\": \"%s\", ", l,
                ls->n_head, ls->head_size, layer_kind_of(ls->kind)->name);
        if (!r->has_matrix[l]) {
            char why[128];
            skip_reason(ls->kind, why, sizeof(why));
            fprintf(f, "\"skipped\": ");
            json_string(f, why);
            fprintf(f, "}%s\n", l + 1 < r->cfg.num_layers ? "," : "");
            continue;
        }
        fprintf(f, "\"mean\": ");
        json_values(f, r->layer[l]);
        fprintf(f, ", \"heads\": [");
        for (int k = 0; k < ls->n_head; k++) {
            if (k) fprintf(f, ", ");
            json_values(f, r->head[l][k]);
        }
        fprintf(f, "]}%s\n", l + 1 < r->cfg.num_layers ? "," : "");
    }
    fprintf(f, "    ]}");
}

static void write_json(const char *path, const Report *reports, int n, const Options *o, int T) {
    AtomicFile af;
    atomic_open(&af, path);
    FILE *f = af.f;
    fprintf(f, "{\n  \"val\": ");
    json_string(f, o->val);
    fprintf(f, ", \"B\": %d, \"T\": %d, \"windows\": %d, \"sequences\": %d, \"tokens\": [0, %lld],\n",
            o->B, T, o->batches, o->B * o->batches, (long long)o->B * o->batches * T);
    fprintf(f, "  \"stats\": [");
    for (int s = 0; s < ATTN_NUM_STATS; s++) fprintf(f, "%s\"%s\"", s ? ", " : "", ATTN_STAT_NAMES[s]);
    fprintf(f, "],\n  \"models\": [\n");
    for (int m = 0; m < n; m++) {
        json_model(f, &reports[m]);
        fprintf(f, "%s\n", m + 1 < n ? "," : "");
    }
    fprintf(f, "  ]");
    if (n == 2) {
        fprintf(f, ",\n  \"delta\": [\n");
        const int L = reports[0].cfg.num_layers;
        for (int l = 0; l < L; l++) {
            fprintf(f, "    {\"layer\": %d, ", l);
            if (!reports[0].has_matrix[l] || !reports[1].has_matrix[l]) {
                fprintf(f, "\"skipped\": \"no attention matrix\"}");
            } else {
                double d[ATTN_NUM_STATS];
                delta_of(&reports[0], &reports[1], l, d);
                fprintf(f, "\"delta\": ");
                json_values(f, d);
                fputc('}', f);
            }
            fprintf(f, "%s\n", l + 1 < L ? "," : "");
        }
        fprintf(f, "  ]");
    }
    fprintf(f, "\n}\n");
    atomic_commit(&af);
    printf("wrote %s\n", path);
}

/* ----------------------------------------------------------------------------------------------
 * main */
int main(int argc, char **argv) {
    stdout_line_buffered();
    Options o;
    parse_options(&o, argc, argv);
    const int n = o.model2[0] ? 2 : 1;
    const char *paths[2] = {o.model, o.model2};
    static Report reports[2];
    int bf16 = 0;
    /* Both headers first, so that a bad -e2 is reported before minutes of forward passes. */
    for (int m = 0; m < n; m++) {
        reports[m].path = paths[m];
        checkpoint_read_header(paths[m], &reports[m].cfg, &bf16);
    }
    if (n == 2 && reports[0].cfg.num_layers != reports[1].cfg.num_layers) {
        llmc_die("-e2 %s: %d layers; -e %s has %d: Delta D_l compares layer by layer",
                 o.model2, reports[1].cfg.num_layers, o.model, reports[0].cfg.num_layers);
    }
    const GPT2Config cfgs[2] = {reports[0].cfg, reports[1].cfg};
    const int T = resolve_T(&o, cfgs, paths, n);
    const int sequences = o.B * o.batches;
    printf("attention distance (doc/attention_distance.md 'Definitions'): %d sequences of T %d = the first %d windows of "
           "B x T = %d x %d tokens of %s (llm.c val order)\n", sequences, T, o.batches, o.B, T, o.val);
    for (int m = 0; m < n; m++) analyse_model(&o, T, &reports[m]);
    for (int m = 0; m < n; m++) print_table(&reports[m], &o);
    if (n == 2) print_delta(&reports[0], &reports[1]);
    printf("\n");
    if (o.csv[0]) write_csv(o.csv, reports, n, T, sequences, o.val);
    if (o.json[0]) write_json(o.json, reports, n, &o, T);
    for (int m = 0; m < n; m++) report_free(&reports[m]);
    return 0;
}
