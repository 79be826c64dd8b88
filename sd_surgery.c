/*
 * sd_surgery.c: post-hoc surgery on a checkpoint (arXiv 2605.18826; doc/sd_tools.md "Surgery"),
 * writing a new
 * checkpoint, its layer table as a schedule file, and a JSON report with the val loss and
 * perplexity before and after (CPU forward, llm.c's val order).
 *
 *   ./sd_surgery -e model.bin -o out.bin -op linearize -k K [-lin_prescale 0|1]
 *   ./sd_surgery -e model.bin -o out.bin -op scalar_d [-keep_layout 1]
 *   ./sd_surgery -e model.bin -o out.bin -op shrink (-planes M | -rank90 1) [-round8 1]
 *   ./sd_surgery -e model.bin -o out.bin -op uniform -layer L    layer L's attention uniform
 *   ... [-j VAL_SHARD -m N -b B -t T] [-eval_before 0]   evaluate before (unless 0) and after
 *   ./sd_surgery --help
 *
 * Outputs: out.bin (fp32, v3 if the result is llm.c's uniform model, else v103; NAME.tmp + rename),
 * out.schedule.txt (entries HxD:kind*N, for -prism), out.report.json (op, tables, attention
 * parameters, per-layer kept energies of shrink, val loss/perplexity). -o must end in .bin, as
 * ./train_gpt2 -e reads any other name as a model descriptor. The transforms are in surgery.h;
 * the choices and approximations in doc/sd_tools.md.
 */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llmc/cli.h"
#include "llmc/checkpoint.h"
#include "llmc/config.h"
#include "llmc/dataloader.h"
#include "llmc/cpu/gpt2_cpu.h"
#include "llmc/param_layout.h"
#include "llmc/utils.h"
#include "llmc/cpu/cpu_eval.h"
#include "sd_attention/surgery.h"
#include "kinds/registry_cpu.h"

#define OPT_CAP 1024

/* ----------------------------------------------------------------------------------------------
 * Command line: flag/value pairs (llmc/cli.h); help generated from OPTS; a flag's group is the op
 * it belongs to. */
typedef struct {
    char model[OPT_CAP]; /* -e */
    char out[OPT_CAP];   /* -o */
    char op[32];         /* -op */
    int k;               /* -k */
    int lin_prescale;    /* -lin_prescale; -1 keep the checkpoint's */
    int keep_layout;     /* -keep_layout */
    int planes;          /* -planes */
    int rank90;          /* -rank90 */
    int round8;          /* -round8 */
    int layer;           /* -layer */
    char val[OPT_CAP];   /* -j */
    int batches;         /* -m; -1 the whole val data */
    int B;               /* -b */
    int T;               /* -t; 0: the trained T (flags.txt), else the model's maxT */
    int eval_before;     /* -eval_before */
} Options;

/* The CliOpt group of a flag is the op it belongs to (0: every op). */
enum { OP_ANY = 0, OP_LINEARIZE, OP_SCALAR_D, OP_SHRINK, OP_UNIFORM, NUM_OP_GROUPS };
static const char *const OP_NAMES[NUM_OP_GROUPS] = {"", "linearize", "scalar_d", "shrink", "uniform"};

#define O_STR(f, field, g, h) CLI_STR(Options, f, field, NULL, g, h)
#define O_INT(f, field, lo, hi, g, h) CLI_INT(Options, f, field, lo, hi, g, h)
static const CliOpt OPTS[] = {
    O_STR("-e", model, OP_ANY, "input checkpoint (.bin, version 3/5/103/105) [required]"),
    O_STR("-o", out, OP_ANY, "output checkpoint NAME.bin; NAME.schedule.txt and NAME.report.json go next to it [required]"),
    O_STR("-op", op, OP_ANY, "linearize | scalar_d | shrink | uniform [required]"),
    O_STR("-j", val, OP_ANY, "val token shards (glob): evaluate before and after (none: no evaluation)"),
    O_INT("-m", batches, -1, 1 << 30, OP_ANY, "val batches (-1: the whole val data)"),
    O_INT("-b", B, 1, 1 << 20, OP_ANY, "batch size of the evaluation"),
    O_INT("-t", T, 0, 1 << 20, OP_ANY, "sequence length of the evaluation (0: the T the model was trained at, from its flags.txt, else its maxT)"),
    O_INT("-eval_before", eval_before, 0, 1, OP_ANY, "0: evaluate only the output (the input's loss is known, e.g. from a sweep's first run)"),
    O_INT("-k", k, 1, LLMC_MAX_LAYERS, OP_LINEARIZE, "linearize layers 0..K-1 (mha -> lin, sd -> sdlin)"),
    O_INT("-lin_prescale", lin_prescale, -1, 1, OP_LINEARIZE, "linear q/k prescale flag of the output (-1: keep the checkpoint's)"),
    O_INT("-keep_layout", keep_layout, 0, 1, OP_SCALAR_D, "1: keep d equal thetas per head instead of the scalar-D layout"),
    O_INT("-planes", planes, 1, 1 << 20, OP_SHRINK, "keep M rotation planes per S-D head (new head size 2M)"),
    O_INT("-rank90", rank90, 0, 1, OP_SHRINK, "1: keep per layer the largest n90 of its heads (90% of the routing energy)"),
    O_INT("-round8", round8, 0, 1, OP_SHRINK, "1: round the new head size up to a multiple of 8"),
    O_INT("-layer", layer, -1, LLMC_MAX_LAYERS - 1, OP_UNIFORM,
          "the layer (from 0) whose attention becomes the uniform causal average of its values [required]"),
};
#define NUM_OPTS ((int)(sizeof(OPTS) / sizeof(OPTS[0])))

static void options_defaults(Options *o) {
    memset(o, 0, sizeof(*o));
    o->lin_prescale = -1;
    o->batches = 20;
    o->eval_before = 1;
    o->B = 4;
    o->layer = -1;
}

static void print_help(const char *prog, const Options *d) {
    printf("usage: %s -e model.bin -o out.bin -op OP [-flag value ...]   (--help: this text)\n", prog);
    printf("surgery on a trained model (doc/sd_tools.md 'Surgery'; doc/sd_tools.md): writes out.bin,\n"
           "out.schedule.txt and out.report.json; with -j, the val loss and perplexity before and after\n");
    for (int g = 0; g < NUM_OP_GROUPS; g++) {
        if (g == OP_ANY) printf("every op:\n");
        else printf("-op %s:\n", OP_NAMES[g]);
        cli_print_options(OPTS, NUM_OPTS, d, g, stdout);
    }
}

static void check_combination(const Options *o, const int *given) {
    if (!o->model[0]) llmc_die("-e: expected the input checkpoint");
    if (!o->out[0]) llmc_die("-o: expected the output checkpoint path");
    int known = 0;
    for (int g = 1; g < NUM_OP_GROUPS; g++) known |= strcmp(o->op, OP_NAMES[g]) == 0;
    if (!known) llmc_die("-op '%s': expected linearize, scalar_d, shrink or uniform", o->op);
    for (int i = 0; i < NUM_OPTS; i++)
        if (given[i] && OPTS[i].group != OP_ANY && strcmp(OP_NAMES[OPTS[i].group], o->op) != 0)
            llmc_die("%s: applies to -op %s only, not -op %s", OPTS[i].flag, OP_NAMES[OPTS[i].group], o->op);
    if (strcmp(o->op, "linearize") == 0 && o->k == 0) llmc_die("-k: -op linearize needs the number of layers K >= 1");
    if (strcmp(o->op, "uniform") == 0 && o->layer < 0) llmc_die("-layer: -op uniform needs the layer L >= 0");
    if (strcmp(o->op, "shrink") == 0 && (o->planes > 0) == (o->rank90 == 1))
        llmc_die("-planes/-rank90: -op shrink needs exactly one of -planes M or -rank90 1");
    const size_t n = strlen(o->out);
    if (n < 5 || strcmp(o->out + n - 4, ".bin") != 0)
        llmc_die("-o: expected a name ending in .bin (./train_gpt2 -e reads other names as descriptors), got '%s'", o->out);
    if (strcmp(o->model, o->out) == 0) llmc_die("-o: the output must differ from the input %s", o->model);
}

static void parse_options(Options *o, int argc, char **argv) {
    options_defaults(o);
    if (cli_wants_help(argc, argv)) {
        print_help(argv[0], o);
        exit(0);
    }
    int given[NUM_OPTS];
    cli_parse(OPTS, NUM_OPTS, o, argc, argv, given, NULL, 0);
    check_combination(o, given);
}

/* ----------------------------------------------------------------------------------------------
 * Output names: out.bin -> out.schedule.txt, out.report.json (-o ends in .bin) */
static void sibling_path(const char *out, const char *suffix, char *buf, size_t cap) {
    const size_t n = strlen(out) - 4;
    if (snprintf(buf, cap, "%.*s%s", (int)n, out, suffix) >= (int)cap) llmc_die("-o: path too long: %s", out);
}

/* The table as a schedule file (doc/prism.md syntax H[xD][:KIND][*N]); runs of equal layers are
 * written once with *N. Head counts may decrease: -layers reads it. */
static void write_schedule(const GPT2Config *c, const char *path, const char *origin) {
    AtomicFile af;
    atomic_open(&af, path);
    fprintf(af.f, "# layer table written by sd_surgery (%s)\n", origin);
    fprintf(af.f, "# model options: -ln %d -sd_scalar_d %d -sd_sign %d -lin_prescale %d\n", c->use_ln,
            sd_opt_scalar_d(c), sd_opt_sign(c), lin_opt_prescale(c));
    int start = 0;
    for (int l = 1; l <= c->num_layers; l++) {
        const LayerSpec *a = &c->layer[start];
        if (l < c->num_layers && memcmp(&c->layer[l], a, sizeof(LayerSpec)) == 0) continue;
        fprintf(af.f, "%dx%d:%s", a->n_head, a->head_size, layer_kind_of(a->kind)->name);
        if (l - start > 1) fprintf(af.f, "*%d", l - start);
        fprintf(af.f, "\n");
        start = l;
    }
    atomic_commit(&af);
}

/* ----------------------------------------------------------------------------------------------
 * Evaluation: the trainer's val loss (llmc/cpu/cpu_eval.h) over the first -m batches. */
typedef struct {
    int done;
    int B, T, batches;
    double loss_before, loss_after;
    double seconds;
} Eval;

/* The val loss of a model given by its config and fp32 parameters (the input as loaded, or the
 * surgery's result before it is written), on the val loader `dl` from its start. */
static double evaluate(const GPT2Config *c, const float *params, DataLoader *dl, int batches) {
    GPT2 m;
    gpt2_alloc(&m, c, "surgery model");
    memcpy(m.params, params, m.layout.total * sizeof(float));
    dataloader_reset(dl);
    const double loss = gpt2_val_loss(&m, dl, batches, NULL);
    gpt2_free(&m);
    return loss;
}

/* ----------------------------------------------------------------------------------------------
 * The ops. Each fills the output config and parameters (*op may alias ip for linearize). */
typedef struct {
    GPT2Config cfg;
    float *params;
    int owns;               /* params allocated by the op */
    int changed_layers;
    ShrinkPlan plan;        /* shrink only */
    ShrinkReport shrink;    /* shrink only */
} Result;

static int has_kind(const GPT2Config *c, int (*pred)(const LayerSpec *)) {
    for (int l = 0; l < c->num_layers; l++)
        if (pred(&c->layer[l])) return 1;
    return 0;
}
static int kind_is_sd_softmax(const LayerSpec *ls) { return sd_layer(ls) && !linear_layer(ls); }
static int kind_is_sdlin(const LayerSpec *ls) { return sd_layer(ls) && linear_layer(ls); }

static void op_linearize(const Options *o, const GPT2Config *ic, float *ip, Result *r) {
    if (o->k > ic->num_layers) llmc_die("-k %d: the model has %d layers", o->k, ic->num_layers);
    r->changed_layers = surg_linearize(ic, o->k, &r->cfg);
    if (o->lin_prescale >= 0) kind_opt_set_int(r->cfg.opt, &LIN_PRESCALE, o->lin_prescale);
    r->params = ip;
    r->owns = 0;
    if (r->changed_layers == 0) llmc_warn("-k %d: layers 0..%d are linear already; nothing changed", o->k, o->k - 1);
}

static void op_scalar_d(const Options *o, const char *path, const GPT2Config *ic, float *ip, Result *r) {
    if (!has_kind(ic, sd_layer)) llmc_die("%s: -op scalar_d: the model has no S-D layers (sd, sdlin)", path);
    if (sd_opt_scalar_d(ic)) llmc_warn("%s: D is scalar already; the output equals the input", path);
    surg_scalar_d(ic, ip, o->keep_layout, &r->cfg, &r->params);
    r->owns = 1;
    for (int l = 0; l < ic->num_layers; l++) r->changed_layers += sd_layer(&ic->layer[l]);
}

static void op_shrink(const Options *o, const char *path, const GPT2Config *ic, float *ip, Result *r) {
    if (!has_kind(ic, kind_is_sd_softmax)) llmc_die("%s: -op shrink: the model has no sd layers to shrink", path);
    surg_plan_shrink(ic, ip, o->planes, o->rank90, o->round8, &r->plan);
    surg_shrink(ic, ip, &r->plan, &r->cfg, &r->params, &r->shrink);
    r->owns = 1;
    r->changed_layers = r->plan.n_changed;
    if (has_kind(ic, kind_is_sdlin))
        llmc_warn("sdlin layers are not shrunk (ELU+1 acts coordinate-wise: a basis change changes them)");
}

static void op_uniform(const Options *o, const GPT2Config *ic, const float *ip, Result *r) {
    if (o->layer >= ic->num_layers) llmc_die("-layer %d: the model has %d layers (0..%d)", o->layer, ic->num_layers, ic->num_layers - 1);
    ParamLayout pl;
    param_layout_init(&pl, ic);
    r->cfg = *ic;
    r->params = (float *)xmalloc(pl.total * sizeof(float));
    memcpy(r->params, ip, pl.total * sizeof(float));
    surg_uniform(ic, r->params, o->layer);
    r->owns = 1;
    r->changed_layers = 1;
}

/* ----------------------------------------------------------------------------------------------
 * Report */
static void json_table(FILE *f, const GPT2Config *c) {
    fprintf(f, "[");
    for (int l = 0; l < c->num_layers; l++)
        fprintf(f, "%s\"%dx%d:%s\"", l ? ", " : "", c->layer[l].n_head, c->layer[l].head_size,
                layer_kind_of(c->layer[l].kind)->name);
    fprintf(f, "]");
}

static void json_val(FILE *f, const char *key, double v, const char *end) {
    if (isfinite(v)) fprintf(f, "\"%s\": %.9g%s", key, v, end);
    else fprintf(f, "\"%s\": null%s", key, end);
}

static void write_report(const char *path, const Options *o, const GPT2Config *ic, const Result *r,
                         const Eval *ev) {
    AtomicFile af;
    atomic_open(&af, path);
    FILE *f = af.f;
    ParamLayout il, ol;
    param_layout_init(&il, ic);
    param_layout_init(&ol, &r->cfg);
    fprintf(f, "{\"input\": ");
    json_string(f, o->model);
    fprintf(f, ", \"output\": ");
    json_string(f, o->out);
    fprintf(f, ", \"op\": \"%s\",\n", o->op);
    fprintf(f, " \"options\": {\"k\": %d, \"lin_prescale\": %d, \"keep_layout\": %d, \"planes\": %d, "
            "\"rank90\": %d, \"round8\": %d, \"layer\": %d},\n", o->k, lin_opt_prescale(&r->cfg), o->keep_layout,
            o->planes, o->rank90, o->round8, o->layer);
    fprintf(f, " \"layers_before\": ");
    json_table(f, ic);
    fprintf(f, ",\n \"layers_after\": ");
    json_table(f, &r->cfg);
    fprintf(f, ",\n \"sd_scalar_d\": [%d, %d], \"changed_layers\": %d,\n", sd_opt_scalar_d(ic),
            sd_opt_scalar_d(&r->cfg), r->changed_layers);
    fprintf(f, " \"params\": [%zu, %zu], \"attention_params\": [%zu, %zu],\n", il.total, ol.total,
            surg_attention_params(ic), surg_attention_params(&r->cfg));
    if (strcmp(o->op, "shrink") == 0) {
        fprintf(f, " \"shrink\": [");
        for (int l = 0; l < ic->num_layers; l++) {
            fprintf(f, "%s{\"layer\": %d, \"planes\": %d, \"head_size\": [%d, %d], ", l ? ", " : "", l,
                    r->plan.planes[l], ic->layer[l].head_size, r->cfg.layer[l].head_size);
            json_val(f, "routing_energy_kept", r->shrink.routing_kept[l], ", ");
            json_val(f, "value_energy_kept", r->shrink.value_kept[l], "}");
        }
        fprintf(f, "],\n");
    }
    if (ev->done) {
        fprintf(f, " \"val\": {\"shard\": ");
        json_string(f, o->val);
        fprintf(f, ", \"B\": %d, \"T\": %d, \"batches\": %d, ", ev->B, ev->T, ev->batches);
        json_val(f, "loss_before", ev->loss_before, ", ");
        json_val(f, "loss_after", ev->loss_after, ", ");
        json_val(f, "ppl_before", exp(ev->loss_before), ", ");
        json_val(f, "ppl_after", exp(ev->loss_after), ", ");
        json_val(f, "ppl_change", exp(ev->loss_after - ev->loss_before) - 1.0, "}\n");
    } else {
        fprintf(f, " \"val\": null\n");
    }
    fprintf(f, "}\n");
    atomic_commit(&af);
}

/* ----------------------------------------------------------------------------------------------
 * main */
static void print_summary(const GPT2Config *ic, const Result *r, const Options *o) {
    printf("before:\n");
    config_print(ic, stdout);
    printf("after (%s, %d layer(s) changed):\n", o->op, r->changed_layers);
    config_print(&r->cfg, stdout);
    if (strcmp(o->op, "shrink") == 0) {
        for (int l = 0; l < ic->num_layers; l++) {
            if (r->plan.new_d[l] == 0) continue;
            printf("  layer %2d: head size %d -> %d (%d planes), routing energy kept %.4f, value "
                   "energy kept %.4f\n", l, ic->layer[l].head_size, r->plan.new_d[l], r->plan.planes[l],
                   r->shrink.routing_kept[l], r->shrink.value_kept[l]);
        }
    }
    printf("attention parameters: %zu -> %zu\n", surg_attention_params(ic), surg_attention_params(&r->cfg));
}

int main(int argc, char **argv) {
    stdout_line_buffered();
    Options o;
    parse_options(&o, argc, argv);
    GPT2Config ic;
    float *ip = checkpoint_load_fp32(o.model, &ic, NULL);
    const int T = o.val[0] ? tool_sequence_length(o.model, o.T, ic.max_seq_len, "sd_surgery")
                           : (o.T == 0 ? ic.max_seq_len : o.T);
    if (o.val[0] && T > ic.max_seq_len) llmc_die("-t %d: exceeds the model's maxT %d", T, ic.max_seq_len);

    Result r;
    memset(&r, 0, sizeof(r));
    if (strcmp(o.op, "linearize") == 0) op_linearize(&o, &ic, ip, &r);
    else if (strcmp(o.op, "scalar_d") == 0) op_scalar_d(&o, o.model, &ic, ip, &r);
    else if (strcmp(o.op, "uniform") == 0) op_uniform(&o, &ic, ip, &r);
    else op_shrink(&o, o.model, &ic, ip, &r);
    char msg[256];
    if (!config_validate(&r.cfg, msg, sizeof(msg))) llmc_die("%s: result: %s", o.out, msg);
    print_summary(&ic, &r, &o);

    /* everything is checked and evaluated before the first output is written: a bad -j, or a
     * token outside the vocabulary, leaves no out.bin behind */
    Eval ev;
    memset(&ev, 0, sizeof(ev));
    if (o.val[0]) {
        DataLoader dl;
        dataloader_init(&dl, o.val, o.B, T, 0, 1, 0, ic.vocab_size);
        const double t0 = wall_seconds();
        ev.done = 1;
        ev.B = o.B;
        ev.T = T;
        ev.batches = dataloader_val_batches(o.batches, &dl);
        ev.loss_before = o.eval_before ? evaluate(&ic, ip, &dl, ev.batches) : NAN; /* NAN: null in the report */
        ev.loss_after = evaluate(&r.cfg, r.params, &dl, ev.batches);
        ev.seconds = wall_seconds() - t0;
        dataloader_free(&dl);
        if (o.eval_before) {
            printf("val loss before %.6f (ppl %.4f), after %.6f (ppl %.4f): perplexity %+.2f%% "
                   "(%d batches of %d x %d, %.1f s)\n", ev.loss_before, exp(ev.loss_before), ev.loss_after,
                   exp(ev.loss_after), 100.0 * (exp(ev.loss_after - ev.loss_before) - 1.0), ev.batches,
                   o.B, T, ev.seconds);
        } else {
            printf("val loss after %.6f (ppl %.4f); the input not evaluated (-eval_before 0) "
                   "(%d batches of %d x %d, %.1f s)\n", ev.loss_after, exp(ev.loss_after), ev.batches, o.B, T,
                   ev.seconds);
        }
    }
    checkpoint_write_fp32(o.out, &r.cfg, r.params);
    char sched[OPT_CAP + 32], report[OPT_CAP + 32];
    sibling_path(o.out, ".schedule.txt", sched, sizeof(sched));
    sibling_path(o.out, ".report.json", report, sizeof(report));
    write_schedule(&r.cfg, sched, o.op);
    printf("wrote %s, %s\n", o.out, sched);
    write_report(report, &o, &ic, &r, &ev);
    printf("wrote %s\n", report);
    if (r.owns) free(r.params);
    free(ip);
    return 0;
}
