/*
 * sd_spectrum.c: spectral diagnostics of every attention head of a checkpoint
 * (standard, Prism, S-D, mixed kinds, -ln 0): the routing/filtering split, effective ranks of
 * the routing part, the spectral abscissa and unstable heads, the spread of S-D filtering
 * (arXiv 2605.18826; doc/methods.md "Routing/filtering split of a standard head", "Dynamically unstable heads", "Stability", "Formulation B", "Effective rank"), and the cascade over depth ("The spectral cascade").
 *
 *   ./sd_spectrum model.bin [-heads 1] [-csv out.csv] [-json out.json] [-png out.png] [-eps E]
 *   ./sd_spectrum model.bin -grad_batches N -j 'VAL_GLOB' [-b B] [-t T] [-json out.json]
 *   ./sd_spectrum --help
 *
 * Standard heads (mha, lin): M = W_Q W_K^T, split through the QR core (never forming C x C),
 * ranks of R. S-D heads (sd, sdlin): ranks of S, ||S||_2, the spread of D, alpha of L = S + sign D,
 * the x-space split of U L U^T and the ranks of its routing U S U^T (x_erank). Heads and layers
 * at minimal rank (one rotation plane, doc/methods.md "The spectral cascade") are counted per layer and per model.
 * -grad_batches N also runs the CPU model (llmc/cpu/gpt2_cpu.h) forward and backward over the first
 * N consecutive (B, T) batches of -j, as one accumulated training step, and ranks every S-D head's
 * mean gradient of S beside S itself (doc/methods.md "Effective rank": what the loss asks for, free of Adam's
 * per-coordinate normalization).
 * The math is in spectrum.h, the columns in doc/sd_tools.md.
 * -png runs `$PYTHON sd_attention/plot_cascade.py DATA.json OUT.png` (PYTHON defaults to
 * /usr/bin/python3, else python3, as the Makefile; the script is looked up next to this executable
 * or in $SD_PLOT_SCRIPT) and prints that command.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "llmc/cli.h"
#include "llmc/checkpoint.h"
#include "llmc/config.h"
#include "llmc/dataloader.h"
#include "llmc/cpu/gpt2_cpu.h"
#include "llmc/param_layout.h"
#include "llmc/utils.h"
#include "sd_attention/spectrum.h"
#include "sd_attention/stages.h"
#include "kinds/registry_cpu.h"

#define OPT_CAP 1024

/* ----------------------------------------------------------------------------------------------
 * Command line: the checkpoint as the first argument (or -e), then flag/value pairs. The help text
 * is generated from OPTS, so it cannot drift from the parser. */
typedef struct {
    char model[OPT_CAP]; /* positional or -e */
    char csv[OPT_CAP];   /* -csv */
    char json[OPT_CAP];  /* -json */
    char png[OPT_CAP];   /* -png */
    int per_head;        /* -heads */
    float eps;           /* -eps */
    int grad_batches;    /* -grad_batches: 0 = no gradient measure */
    char val[OPT_CAP];   /* -j: the shards the gradient is averaged over */
    int B, T;            /* -b, -t (T 0: the model's maxT) */
} Options;

static const CliOpt OPTS[] = {
    CLI_STR(Options, "-e", model, NULL, 0, "model checkpoint (or give it as the first argument)"),
    CLI_INT(Options, "-heads", per_head, 0, 1, 0, "1: per-head rows in the table (CSV/JSON always have them)"),
    CLI_STR(Options, "-csv", csv, NULL, 0, "write one row per head here (CSV)"),
    CLI_STR(Options, "-json", json, NULL, 0, "write the layer summaries and every head here (JSON)"),
    CLI_STR(Options, "-png", png, NULL, 0, "plot the cascade (rank over depth) here, via sd_attention/plot_cascade.py"),
    CLI_FLT(Options, "-eps", eps, 0.0, 1.0, 0, "unstable head: alpha > eps * rho (doc/methods.md 'Dynamically unstable heads')"),
    CLI_INT(Options, "-grad_batches", grad_batches, 0, 1 << 20, 0,
            "N > 0: also rank the mean gradient of each S-D head's S over N batches of -j (doc/methods.md 'Effective rank')"),
    CLI_STR(Options, "-j", val, NULL, 0, "token shards (glob) for -grad_batches, read in order from the start"),
    CLI_INT(Options, "-b", B, 1, 1 << 20, 0, "batch size B of -grad_batches"),
    CLI_INT(Options, "-t", T, 0, 1 << 20, 0, "sequence length T of -grad_batches (0: the model's maxT)"),
};
#define NUM_OPTS ((int)(sizeof(OPTS) / sizeof(OPTS[0])))

static void options_defaults(Options *o) {
    memset(o, 0, sizeof(*o));
    o->eps = (float)SPEC_DEFAULT_EPS;
    o->B = 4;
}

static void parse_options(Options *o, int argc, char **argv) {
    options_defaults(o);
    if (cli_wants_help(argc, argv)) {
        printf("usage: %s model.bin [-flag value ...]   (--help: this text)\n", argv[0]);
        printf("routing/filtering split, effective rank, spectral abscissa of every attention head\n"
               "(doc/methods.md 'S–D attention'; doc/sd_tools.md). -png runs $PYTHON (default /usr/bin/python3).\n");
        cli_print_options(OPTS, NUM_OPTS, o, -1, stdout);
        exit(0);
    }
    char positional[OPT_CAP] = "";
    cli_parse(OPTS, NUM_OPTS, o, argc, argv, NULL, positional, sizeof(positional)); /* the checkpoint, anywhere once */
    if (positional[0] != '\0') strcpy(o->model, positional);
    if (o->model[0] == '\0') llmc_die("model: expected a checkpoint as the first argument (see %s --help)", argv[0]);
    if (o->grad_batches > 0 && o->val[0] == '\0')
        llmc_die("-grad_batches %d: expected -j with the token shards to average the gradient over", o->grad_batches);
    if (o->grad_batches == 0 && o->val[0] != '\0')
        llmc_die("-j: expected -grad_batches N > 0 with it (the shards are only read for the gradient measure)");
}

/* ----------------------------------------------------------------------------------------------
 * Analysis */
typedef struct {
    const char *path;
    GPT2Config cfg;
    HeadStats *head[LLMC_MAX_LAYERS]; /* [l][k] */
    LayerSummary layer[LLMC_MAX_LAYERS];
    double seconds;
    /* -grad_batches */
    int grad_batches, grad_B, grad_T;
    const char *grad_data;
    double grad_loss;    /* mean loss over the batches */
    double grad_seconds;
} Report;

static void analyse_layer(const GPT2Config *c, const ParamLayout *pl, float *params, int l,
                          double eps, HeadStats *out) {
    const LayerSpec *ls = &c->layer[l];
    LayerParams p = layer_params(params, pl, l);
    for (int k = 0; k < ls->n_head; k++) {
        if (sd_layer(ls)) {
            spec_head_sd(p.qkvw, p.slot[P_SDSKEW], p.slot[P_SDTHETA], c->channels, ls->head_size, l, k, ls->kind,
                         sd_opt_scalar_d(c), sd_opt_sign(c), eps, &out[k]);
        } else {
            spec_head_standard(p.qkvw, c->channels, ls->n_head, ls->head_size, l, k, ls->kind, eps,
                               &out[k]);
        }
    }
}

static void analyse_model(const char *path, double eps, Report *r) {
    memset(r, 0, sizeof(*r));
    r->path = path;
    float *params = checkpoint_load_fp32(path, &r->cfg, NULL);
    ParamLayout pl;
    param_layout_init(&pl, &r->cfg);
    const double t0 = wall_seconds();
    for (int l = 0; l < r->cfg.num_layers; l++) {
        const int h = r->cfg.layer[l].n_head;
        r->head[l] = (HeadStats *)xcalloc((size_t)h, sizeof(HeadStats));
        analyse_layer(&r->cfg, &pl, params, l, eps, r->head[l]);
        spec_layer_summary(r->head[l], h, &r->layer[l]);
    }
    r->seconds = wall_seconds() - t0;
    free(params);
}

/*
 * -grad_batches N (doc/methods.md "Effective rank"): the mean gradient of the loss over N consecutive batches,
 * exactly as a training step with N micro-batches accumulates it (gpt2_zero_grad, then per batch
 * gpt2_forward and gpt2_backward with dloss = 1/(B T N)), from the start of the -j shards without
 * shuffling (the validation loader). Then every S-D head's packed gradient is ranked next to its S
 * and the layer summaries are recomputed.
 */
static void analyse_grad(const Options *o, Report *r) {
    GPT2 m;
    gpt2_build_from_checkpoint(&m, o->model);
    const GPT2Config *c = &m.config;
    const int T = o->T > 0 ? o->T : c->max_seq_len, B = o->B, N = o->grad_batches;
    if (T > c->max_seq_len) llmc_die("-t %d: expected at most the model's maxT = %d", T, c->max_seq_len);
    DataLoader dl;
    dataloader_init(&dl, o->val, B, T, 0, 1, 0, c->vocab_size);
    if ((int64_t)N > dl.total_samples)
        llmc_die("-grad_batches %d: expected at most the %lld batches of %d x %d in %s", N,
                 (long long)dl.total_samples, B, T, o->val);
    const double t0 = wall_seconds();
    gpt2_zero_grad(&m);
    const float dloss = 1.0f / ((float)B * T * N);
    double loss = 0.0;
    for (int i = 0; i < N; i++) {
        dataloader_next_batch(&dl);
        gpt2_forward(&m, dl.inputs, dl.targets, B, T);
        gpt2_backward(&m, dloss);
        loss += m.mean_loss;
    }
    for (int l = 0; l < c->num_layers; l++) {
        const LayerSpec *ls = &c->layer[l];
        if (!sd_layer(ls)) continue;
        const LayerParams p = layer_params(m.params, &m.layout, l);
        const LayerParams g = layer_params(m.grads, &m.layout, l);
        const int d = ls->head_size;
        const size_t npack = (size_t)d * (d - 1) / 2;
        for (int k = 0; k < ls->n_head; k++)
            spec_head_grad(&r->head[l][k], p.slot[P_SDSKEW] + (size_t)k * npack, g.slot[P_SDSKEW] + (size_t)k * npack, d);
        spec_layer_summary(r->head[l], ls->n_head, &r->layer[l]);
    }
    r->grad_batches = N;
    r->grad_B = B;
    r->grad_T = T;
    r->grad_data = o->val;
    r->grad_loss = loss / N;
    r->grad_seconds = wall_seconds() - t0;
    dataloader_free(&dl);
    gpt2_free(&m);
}

static void report_free(Report *r) {
    for (int l = 0; l < r->cfg.num_layers; l++) free(r->head[l]);
}

/* The model's count of layers and heads at minimal rank (doc/methods.md "The spectral cascade"). */
typedef struct {
    int layers, heads, total_heads;
} MinimalCount;

static MinimalCount count_minimal(const Report *r) {
    MinimalCount m = {0, 0, 0};
    for (int l = 0; l < r->cfg.num_layers; l++) {
        m.layers += r->layer[l].minimal;
        for (int k = 0; k < r->cfg.layer[l].n_head; k++) {
            m.heads += spec_head_minimal(&r->head[l][k]);
            m.total_heads++;
        }
    }
    return m;
}

/* ----------------------------------------------------------------------------------------------
 * The table: one line per layer (means and medians over heads), per-head lines with -heads 1. */
static const char *family_name(int family) { return family == SPEC_SD ? "S" : "R"; }

static void print_num(double v, int width, int prec) {
    if (isnan(v)) printf(" %*s", width, "-");
    else printf(" %*.*f", width, prec, v);
}

/* the spread of a trained D is often small: scientific notation */
static void print_sci(double v, int width) {
    if (isnan(v)) printf(" %*s", width, "-");
    else printf(" %*.2e", width, v);
}

static void print_table_header(int grad) {
    char label[64];
    snprintf(label, sizeof(label), "%5s %5s x %4s %-5s", "layer", "heads", "d", "kind");
    printf("%-24s %2s %4s %7s %7s %6s %6s %5s %7s %5s %6s %7s %9s %8s %9s", label, "of", "cap", "erank",
           "median", "PR", "SR", "n90", "x-erank", "min", "rho_R", "|R|/|F|", "alpha/rho", "unstable",
           "D spread");
    if (grad) printf(" %7s %5s %6s", "g-erank", "g-n90", "g-cos");
    printf("\n");
}

static void print_layer_row(const Report *r, int l) {
    const LayerSpec *ls = &r->cfg.layer[l];
    const LayerSummary *s = &r->layer[l];
    const HeadStats *h0 = &r->head[l][0];
    char label[64];
    snprintf(label, sizeof(label), "%5d %5d x %4d %-5s", l, ls->n_head, ls->head_size,
             layer_kind_of(ls->kind)->name);
    printf("%-24s %2s %4d", label, family_name(h0->family), h0->capacity);
    print_num(s->erank_mean, 7, 3);
    print_num(s->erank_median, 7, 3);
    print_num(s->pr_mean, 6, 2);
    print_num(s->sr_mean, 6, 2);
    print_num(s->n90_mean, 5, 1);
    print_num(s->x_erank_mean, 7, 3);
    print_num(s->frac_minimal, 5, 2);
    print_num(s->rho_R_mean, 6, 3);
    print_num(s->norm_ratio_mean, 7, 3);
    print_num(s->alpha_rel_max, 9, 4); /* the worst head */
    print_num(s->frac_unstable, 8, 3);
    print_sci(s->d_spread_mean, 9);
    if (r->grad_batches > 0) {
        print_num(s->grad_erank_mean, 7, 3);
        print_num(s->grad_n90_mean, 5, 1);
        print_num(s->grad_align_mean, 6, 3);
    }
    printf("\n");
}

static void print_head_row(const HeadStats *hs, int grad) {
    char label[64];
    snprintf(label, sizeof(label), "        head %d", hs->head);
    printf("%-24s %2s %4d", label, family_name(hs->family), hs->capacity);
    print_num(hs->rank.erank, 7, 3);
    printf(" %7s", "");
    print_num(hs->rank.pr, 6, 2);
    print_num(hs->rank.sr, 6, 2);
    printf(" %5d", hs->rank.n90);
    print_num(hs->rank_x.erank, 7, 3);
    printf(" %5s", spec_head_minimal(hs) ? "yes" : "no");
    print_num(hs->rho_R, 6, 3);
    print_num(hs->norm_ratio, 7, 3);
    print_num(hs->alpha_rel, 9, 4);
    printf(" %8s", hs->unstable ? "yes" : "no");
    print_sci(hs->d_spread, 9);
    if (grad) {
        print_num(hs->has_grad ? hs->grad.erank : NAN, 7, 3);
        if (hs->has_grad) printf(" %5d", hs->grad.n90);
        else printf(" %5s", "-");
        print_num(hs->grad_align, 6, 3);
    }
    printf("\n");
}

static void print_table(const Report *r, const Options *o) {
    const GPT2Config *c = &r->cfg;
    printf("%s: L %d, C %d%s", r->path, c->num_layers, c->channels,
           c->use_ln ? "" : ", no per-block LayerNorm");
    int has_sd = 0;
    for (int l = 0; l < c->num_layers; l++) has_sd |= sd_layer(&c->layer[l]);
    if (has_sd) printf(", S-D L = S %c D%s", sd_opt_sign(c) < 0 ? '-' : '+', sd_opt_scalar_d(c) ? " (scalar D)" : "");
    printf("; unstable: alpha > %g rho (%.2f s)\n", o->eps, r->seconds);
    printf("of: R = routing part of W_Q W_K^T (capacity min(2d, C)); S = S-D skew S (capacity d). "
           "x-erank: of the routing part of the x-space kernel (R; U S U^T for S rows). min: heads with "
           "erank < %.1f (one rotation plane). alpha/rho: of M (R rows) or L (S rows), worst head\n",
           SPEC_MINIMAL_ERANK);
    if (r->grad_batches > 0)
        printf("g-: of G, the mean gradient of S over %d batches of %d x %d from %s (mean loss %.6f, %.2f s): "
               "g-erank mean erank, g-n90 mean planes at 90%% energy, g-cos mean cos(S, -G); - for layers "
               "without S\n", r->grad_batches, r->grad_B, r->grad_T, r->grad_data, r->grad_loss, r->grad_seconds);
    print_table_header(r->grad_batches > 0);
    for (int l = 0; l < c->num_layers; l++) {
        print_layer_row(r, l);
        if (!o->per_head) continue;
        for (int k = 0; k < c->layer[l].n_head; k++) print_head_row(&r->head[l][k], r->grad_batches > 0);
    }
    MinimalCount m = count_minimal(r);
    printf("minimal rank (erank < %.1f): %d of %d layers (%.1f%%, by their median head), %d of %d heads (%.1f%%)\n",
           SPEC_MINIMAL_ERANK, m.layers, c->num_layers, 100.0 * m.layers / c->num_layers, m.heads,
           m.total_heads, 100.0 * m.heads / m.total_heads);
}

/* ----------------------------------------------------------------------------------------------
 * CSV (one row per head) and JSON (layers with their heads), each written to NAME.tmp and left
 * open: main renames them once every output is complete (the plot included). */
#define HEAD_FIELDS                                                                              \
    "layer,head,kind,family,d,capacity,rank,erank,pr,sr,n90,rank90,rho_R,rho_F,norm_R,norm_F,"   \
    "norm_ratio,lam_max_F,f_positive,alpha,radius,alpha_rel,unstable,norm_S,d_mean,d_spread,"    \
    "x_rank,x_erank,x_n90,minimal,grad_rank,grad_erank,grad_pr,grad_sr,grad_n90,grad_norm,grad_align"

static void write_csv(const Report *r, AtomicFile *out) {
    FILE *f = out->f;
    fprintf(f, "%s\n", HEAD_FIELDS);
    for (int l = 0; l < r->cfg.num_layers; l++) {
        for (int k = 0; k < r->cfg.layer[l].n_head; k++) {
            const HeadStats *h = &r->head[l][k];
            fprintf(f, "%d,%d,%s,%s,%d,%d,%d,%.10g,%.10g,%.10g,%d,%d,%.10g,%.10g,%.10g,%.10g,"
                    "%.10g,%.10g,%d,%.10g,%.10g,%.10g,%d,%.10g,%.10g,%.10g,%d,%.10g,%d,%d",
                    h->layer, h->head, layer_kind_of(h->kind)->name, family_name(h->family), h->d,
                    h->capacity, h->rank.rank, h->rank.erank, h->rank.pr, h->rank.sr, h->rank.n90,
                    h->rank.rank90, h->rho_R, h->rho_F, h->norm_R, h->norm_F, h->norm_ratio,
                    h->lam_max_F, h->f_positive, h->alpha, h->radius, h->alpha_rel, h->unstable,
                    h->norm_S, h->d_mean, h->d_spread, h->rank_x.rank, h->rank_x.erank, h->rank_x.n90,
                    spec_head_minimal(h));
            if (h->has_grad)
                fprintf(f, ",%d,%.10g,%.10g,%.10g,%d,%.10g,%.10g\n", h->grad.rank, h->grad.erank, h->grad.pr,
                        h->grad.sr, h->grad.n90, h->grad_norm, h->grad_align);
            else
                fprintf(f, ",nan,nan,nan,nan,nan,nan,nan\n");
        }
    }
    if (fflush(f) != 0 || ferror(f)) llmc_die("%s: write failed: %s", out->tmp, strerror(errno));
}

/* JSON has no NaN or infinity: they become null. */
static void json_num(FILE *f, const char *key, double v, int last) {
    if (isfinite(v)) fprintf(f, "\"%s\": %.10g%s", key, v, last ? "" : ", ");
    else fprintf(f, "\"%s\": null%s", key, last ? "" : ", ");
}

static void json_head(FILE *f, const HeadStats *h) {
    fprintf(f, "{\"head\": %d, \"family\": \"%s\", \"capacity\": %d, \"rank\": %d, ", h->head,
            family_name(h->family), h->capacity, h->rank.rank);
    json_num(f, "erank", h->rank.erank, 0);
    json_num(f, "pr", h->rank.pr, 0);
    json_num(f, "sr", h->rank.sr, 0);
    fprintf(f, "\"n90\": %d, \"rank90\": %d, ", h->rank.n90, h->rank.rank90);
    json_num(f, "rho_R", h->rho_R, 0);
    json_num(f, "rho_F", h->rho_F, 0);
    json_num(f, "norm_R", h->norm_R, 0);
    json_num(f, "norm_F", h->norm_F, 0);
    json_num(f, "norm_ratio", h->norm_ratio, 0);
    json_num(f, "lam_max_F", h->lam_max_F, 0);
    fprintf(f, "\"f_positive\": %s, ", h->f_positive ? "true" : "false");
    json_num(f, "alpha", h->alpha, 0);
    json_num(f, "radius", h->radius, 0);
    json_num(f, "alpha_rel", h->alpha_rel, 0);
    fprintf(f, "\"unstable\": %s, ", h->unstable ? "true" : "false");
    json_num(f, "norm_S", h->norm_S, 0);
    json_num(f, "d_mean", h->d_mean, 0);
    json_num(f, "d_spread", h->d_spread, 0);
    fprintf(f, "\"x_rank\": %d, ", h->rank_x.rank);
    json_num(f, "x_erank", h->rank_x.erank, 0);
    fprintf(f, "\"x_n90\": %d, \"minimal\": %s, ", h->rank_x.n90, spec_head_minimal(h) ? "true" : "false");
    /* the mean gradient of S (-grad_batches): null without it and for standard heads */
    if (h->has_grad) {
        fprintf(f, "\"grad_rank\": %d, ", h->grad.rank);
        json_num(f, "grad_erank", h->grad.erank, 0);
        json_num(f, "grad_pr", h->grad.pr, 0);
        json_num(f, "grad_sr", h->grad.sr, 0);
        fprintf(f, "\"grad_n90\": %d, ", h->grad.n90);
        json_num(f, "grad_norm", h->grad_norm, 0);
        json_num(f, "grad_align", h->grad_align, 1);
    } else {
        fprintf(f, "\"grad_rank\": null, \"grad_erank\": null, \"grad_pr\": null, \"grad_sr\": null, "
                "\"grad_n90\": null, \"grad_norm\": null, \"grad_align\": null");
    }
    fprintf(f, "}");
}

static void json_layer(FILE *f, const Report *r, int l) {
    const LayerSpec *ls = &r->cfg.layer[l];
    const LayerSummary *s = &r->layer[l];
    fprintf(f, "    {\"layer\": %d, \"n_head\": %d, \"head_size\": %d, \"kind\": \"%s\", "
            "\"family\": \"%s\", \"capacity\": %d, ", l, ls->n_head, ls->head_size,
            layer_kind_of(ls->kind)->name, family_name(r->head[l][0].family), r->head[l][0].capacity);
    json_num(f, "erank_mean", s->erank_mean, 0);
    json_num(f, "erank_median", s->erank_median, 0);
    json_num(f, "pr_mean", s->pr_mean, 0);
    json_num(f, "sr_mean", s->sr_mean, 0);
    json_num(f, "n90_mean", s->n90_mean, 0);
    json_num(f, "n90_median", s->n90_median, 0);
    json_num(f, "rank90_mean", s->rank90_mean, 0);
    json_num(f, "rho_R_mean", s->rho_R_mean, 0);
    json_num(f, "norm_ratio_mean", s->norm_ratio_mean, 0);
    json_num(f, "alpha_rel_mean", s->alpha_rel_mean, 0);
    json_num(f, "alpha_rel_max", s->alpha_rel_max, 0);
    json_num(f, "frac_unstable", s->frac_unstable, 0);
    json_num(f, "frac_f_positive", s->frac_f_positive, 0);
    json_num(f, "d_spread_mean", s->d_spread_mean, 0);
    json_num(f, "x_erank_mean", s->x_erank_mean, 0);
    json_num(f, "frac_minimal", s->frac_minimal, 0);
    json_num(f, "grad_erank_mean", s->grad_erank_mean, 0);
    json_num(f, "grad_erank_median", s->grad_erank_median, 0);
    json_num(f, "grad_n90_mean", s->grad_n90_mean, 0);
    json_num(f, "grad_n90_median", s->grad_n90_median, 0);
    json_num(f, "grad_align_mean", s->grad_align_mean, 0);
    fprintf(f, "\"minimal\": %s,", s->minimal ? "true" : "false");
    fprintf(f, "\n     \"heads\": [\n");
    for (int k = 0; k < ls->n_head; k++) {
        fprintf(f, "      ");
        json_head(f, &r->head[l][k]);
        fprintf(f, "%s\n", k + 1 < ls->n_head ? "," : "");
    }
    fprintf(f, "    ]}");
}

static void write_json(const Report *r, double eps, AtomicFile *out) {
    const GPT2Config *c = &r->cfg;
    FILE *f = out->f;
    fprintf(f, "{\"model\": ");
    json_string(f, r->path);
    fprintf(f, ", \"eps\": %g, \"sv_rel_tol\": %g, \"energy_fraction\": %g,\n", eps, SPEC_SV_REL_TOL,
            SPEC_ENERGY_FRACTION);
    fprintf(f, " \"config\": {\"num_layers\": %d, \"channels\": %d, \"use_ln\": %d, "
            "\"sd_d_sign\": %d, \"sd_scalar_d\": %d},\n", c->num_layers, c->channels, c->use_ln,
            sd_opt_sign(c), sd_opt_scalar_d(c));
    if (r->grad_batches > 0) {
        fprintf(f, " \"grad\": {\"batches\": %d, \"B\": %d, \"T\": %d, \"data\": ", r->grad_batches, r->grad_B,
                r->grad_T);
        json_string(f, r->grad_data);
        fprintf(f, ", ");
        json_num(f, "loss", r->grad_loss, 1);
        fprintf(f, "},\n");
    } else {
        fprintf(f, " \"grad\": null,\n");
    }
    const MinimalCount m = count_minimal(r);
    fprintf(f, " \"minimal_rank\": {\"erank_below\": %g, \"layers\": %d, \"layers_frac\": %.10g, "
            "\"heads\": %d, \"heads_frac\": %.10g},\n \"layers\": [\n", SPEC_MINIMAL_ERANK, m.layers,
            (double)m.layers / c->num_layers, m.heads, (double)m.heads / m.total_heads);
    for (int l = 0; l < c->num_layers; l++) {
        json_layer(f, r, l);
        fprintf(f, "%s\n", l + 1 < c->num_layers ? "," : "");
    }
    fprintf(f, " ]}\n");
    if (fflush(f) != 0 || ferror(f)) llmc_die("%s: write failed: %s", out->tmp, strerror(errno));
}

/* ----------------------------------------------------------------------------------------------
 * The cascade plot: the Python script beside this executable, run without a shell. */
static void plot_script_path(const char *argv0, char *out, size_t cap) {
    const char *env = getenv("SD_PLOT_SCRIPT");
    if (env && env[0]) {
        snprintf(out, cap, "%s", env);
        return;
    }
    const char *slash = strrchr(argv0, '/');
    if (slash) snprintf(out, cap, "%.*s/sd_attention/plot_cascade.py", (int)(slash - argv0), argv0);
    else snprintf(out, cap, "sd_attention/plot_cascade.py");
}

/* Returns 0 on success, else a one-line reason in why. */
static int run_plot(const char *argv0, const char *data, const char *png, char *why, size_t cap) {
    char script[OPT_CAP + 64];
    plot_script_path(argv0, script, sizeof(script));
    /* as the Makefile: $PYTHON, else Debian's /usr/bin/python3 (with matplotlib), else python3 */
    const char *py = getenv("PYTHON");
    if (py == NULL || py[0] == '\0') py = file_exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
    printf("plot: %s %s %s %s\n", py, script, data, png);
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(why, cap, "cannot fork to run %s", py);
        return 1;
    }
    if (pid == 0) {
        execlp(py, py, script, data, png, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        const int rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        snprintf(why, cap, "%s %s failed (exit %d%s); the command is printed above", py, script, rc,
                 rc == 127 ? ": no such program" : "");
        return 1;
    }
    return 0;
}

/* ----------------------------------------------------------------------------------------------
 * main */
int main(int argc, char **argv) {
    stdout_line_buffered();
    Options o;
    parse_options(&o, argc, argv);
    /* checked before the analysis, which can take minutes */
    if (o.csv[0]) require_output_path("-csv", o.csv);
    if (o.json[0]) require_output_path("-json", o.json);
    if (o.png[0]) {
        require_output_path("-png", o.png);
        char script[OPT_CAP + 64];
        plot_script_path(argv[0], script, sizeof(script));
        if (!file_exists(script)) llmc_die("-png: %s: plot script not found (set SD_PLOT_SCRIPT)", script);
    }
    Report r;
    analyse_model(o.model, o.eps, &r);
    if (o.grad_batches > 0) analyse_grad(&o, &r);
    print_table(&r, &o);
    /* Every output or none: the CSV and JSON stay under NAME.tmp until the plot (which reads the
     * JSON's .tmp) has succeeded, and a failure removes them. Without -json the plot's data is a
     * temporary that never gets a final name. */
    AtomicFile csv = {0}, json = {0};
    char plot_data[OPT_CAP + 16];
    snprintf(plot_data, sizeof(plot_data), "%s%s", o.json[0] ? o.json : o.png, o.json[0] ? "" : ".data.json");
    if (o.csv[0]) {
        atomic_open(&csv, o.csv);
        write_csv(&r, &csv);
    }
    if (o.json[0] || o.png[0]) {
        atomic_open(&json, plot_data);
        write_json(&r, o.eps, &json);
    }
    if (o.png[0]) {
        char why[2 * OPT_CAP + 256];
        if (run_plot(argv[0], json.tmp, o.png, why, sizeof(why)) != 0) {
            atomic_discard(&csv);
            atomic_discard(&json);
            llmc_die("-png: %s (no output written)", why);
        }
    }
    if (o.csv[0]) {
        atomic_commit(&csv);
        printf("wrote %s\n", o.csv);
    }
    if (o.json[0]) {
        atomic_commit(&json);
        printf("wrote %s\n", o.json);
    } else if (o.png[0]) {
        atomic_discard(&json);
    }
    if (o.png[0]) printf("wrote %s\n", o.png);
    report_free(&r);
    return 0;
}
