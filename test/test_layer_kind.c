/*
 * test/test_layer_kind.c: adding a layer kind touches its own folder and the registry, nothing under
 * llmc/ (doc/design.md "Adding a kind: a walk-through"). This program is such a registry: it
 * lists the framework's mha and the toy kind of test/toy_kind.h (an option of the model, an
 * option of the init, a parameter slot), and checks that the framework picks all of it up:
 *
 *   flags    the trainers' table has the toy's flags after -ln, --help lists them, the parser
 *            fills them, a layer table says "toy";
 *   layout   slot 16 is "toygain", (h) in toy layers and empty in mha layers, never decayed;
 *   file     -toy_square is bit 16 of header[9] and reads back; the init option is not stored;
 *   model    the CPU model inits the gains, its start-up line describes the kind, the gains'
 *            and qkvw's gradients match finite differences of the loss (in double from the
 *            logits; step 1e-2, rel L2 <= 1e-2: measured about 1e-4), a toy layer with gain 1 is
 *            bit for bit the mha layer, and AdamW's first step moves each gain by lr.
 * Build WITHOUT -ffast-math (the finite differences).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../llmc/args.h"
#include "../llmc/checkpoint.h"
#include "../llmc/cpu/gpt2_cpu.h"
#include "../llmc/model_init.h"
#include "fd.h"
#include "harness.h"
#include "toy_kind.h"

#ifdef __FAST_MATH__
#error "compile test_layer_kind.c without -ffast-math: the finite differences need IEEE floats"
#endif

/* ----------------------------------------------------------------------------------------------
 * The registry of this program: what kinds/registry.h and kinds/registry_cpu.h hold for the
 * trainers, with one kind added. */
enum { KIND_MHA, KIND_TOY, N_KINDS };
const LayerKind LAYER_KINDS[] = {
    {"mha", &QKV_PROJECTION, &SOFTMAX_MIXER},
    {"toy", &TOY_PROJECTION, &SOFTMAX_MIXER},
};
const int N_LAYER_KINDS = N_KINDS;
const CpuKind CPU_KINDS[] = {
    {"mha", &QKV_PROJECTION_CPU, &SOFTMAX_MIXER_CPU},
    {"toy", &TOY_PROJECTION_CPU, &SOFTMAX_MIXER_CPU},
};
const KindOption *const KIND_OPTIONS[] = {&TOY_GAIN_INIT, &TOY_SQUARE};
const int N_KIND_OPTIONS = 2;
const KindSlot *const KIND_SLOTS[] = {&TOY_GAIN_SLOT};
const int N_KIND_SLOTS = 1;

/* ---------------------------------------------------------------------------------------------- */
static int file_has(FILE *f, const char *needle) {
    char buf[16384];
    rewind(f);
    const size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    return strstr(buf, needle) != NULL;
}

/* The config of the command line `-e L2C32H2T8V64 -layers TABLE -toy_gain_init G -toy_square S`. */
static GPT2Config config_from_command_line(const char *table, const char *gain, const char *square) {
    char *argv[] = {(char *)"x", (char *)"-e", (char *)"L2C32H2T8V64", (char *)"-layers", (char *)table,
                    (char *)"-toy_gain_init", (char *)gain, (char *)"-toy_square", (char *)square};
    TrainArgs a;
    int given[TRAIN_ARGS_MAX_FLAGS];
    train_args_parse(&a, 9, argv, TRAINER_CPU, given);
    GPT2Config c;
    char err[1024] = "";
    const int ok = model_config_from_args(&a, given, a.init, 0, 0, NULL, &c, err, sizeof(err));
    CHECK(ok, "the command line with -layers %s -toy_gain_init %s -toy_square %s builds a config (%s)", table,
          gain, square, err);
    return c;
}

static void check_flags(const char *table) {
    int n;
    const ArgSpec *t = train_arg_table(&n);
    const int ln = cli_find(t, n, "-ln");
    CHECK(n == ARG_TABLE_LEN + 2 && ln >= 0 && strcmp(t[ln + 1].flag, "-toy_gain_init") == 0 &&
              strcmp(t[ln + 2].flag, "-toy_square") == 0,
          "the trainers' flag table has the toy's two flags right after -ln (%d rows)", n);
    FILE *f = tmpfile();
    train_args_help("train_gpt2", TRAINER_CPU, f);
    CHECK(file_has(f, "-toy_square") && file_has(f, "by g^2 instead of g"), "--help lists -toy_square with its help");
    fclose(f);
    const GPT2Config c = config_from_command_line(table, "0.5", "1");
    CHECK(kind_opt_float(c.opt, &TOY_GAIN_INIT) == 0.5f && toy_opt_square(&c) == 1,
          "the parsed values reach the config (gain init %g, square %d)", kind_opt_float(c.opt, &TOY_GAIN_INIT),
          toy_opt_square(&c));
    CHECK(c.layer[0].kind == KIND_MHA && c.layer[1].kind == KIND_TOY && c.layer[1].n_head == 2,
          "the layer table's \"toy\" is the toy's code (%d, %d)", c.layer[0].kind, c.layer[1].kind);
}

static void check_layout(const GPT2Config *c) {
    ParamLayout p;
    param_layout_init(&p, c);
    KindOptValue opt[LLMC_MAX_KIND_OPTIONS];
    kind_options_defaults(opt);
    const unsigned decay = param_decay_mask(opt);
    CHECK(param_slot_count() == 17 && strcmp(param_slot_name(P_TOYGAIN), "toygain") == 0,
          "slot 16 is the toy's \"toygain\" (%d slots)", param_slot_count());
    CHECK(layer_slot_size(c, 0, P_TOYGAIN) == 0 && layer_slot_size(c, 1, P_TOYGAIN) == 2 &&
              p.slot_size[P_TOYGAIN] == 2 && p.slot_offset[P_TOYGAIN] == p.slot_offset[P_LNFB] + 32,
          "toygain is (h) = 2 in the toy layer, empty in the mha layer, stored after lnfb");
    CHECK(!slot_has_weight_decay(P_TOYGAIN, decay) && slot_has_weight_decay(P_QKVW, decay),
          "AdamW decays qkvw, not the gains");
}

static void check_file(GPT2Config c) {
    int32_t h[HEADER_INTS];
    checkpoint_header_encode(&c, 0, h);
    GPT2Config back;
    int bf16;
    checkpoint_header_decode("toy.bin", h, &back, &bf16);
    CHECK(h[1] == CKPT_V_TABLE_FP32 && h[9] == 16 && toy_opt_square(&back) == 1 && back.layer[1].kind == KIND_TOY,
          "-toy_square 1 is bit 16 of header[9] (0x%x) and reads back", h[9]);
    CHECK(kind_opt_float(back.opt, &TOY_GAIN_INIT) == 1.0f, "the init option is not stored: it reads back as its default");
    kind_opt_set_int(c.opt, &TOY_SQUARE, 0);
    checkpoint_header_encode(&c, 0, h);
    CHECK(h[9] == 0, "-toy_square 0 leaves header[9] 0 (0x%x)", h[9]);
}

static void check_model(const char *table) {
    const GPT2Config c = config_from_command_line(table, "0.5", "1");
    GPT2 m;
    gpt2_build_from_config(&m, &c, 42);
    LayerParams p1 = layer_params(m.params, &m.layout, 1);
    CHECK(p1.slot[P_TOYGAIN][0] == 0.5f && p1.slot[P_TOYGAIN][1] == 0.5f, "the model inits the gains to -toy_gain_init");
    FILE *f = tmpfile();
    config_print(&c, f);
    CHECK(file_has(f, ", toy query gain g^2") && file_has(f, "layer   1   :   2 heads x  16 (toy)"),
          "the start-up lines describe the kind and the toy layer");
    fclose(f);
    /* gains away from 0.5 and large attention weights, so that both enter the loss strongly */
    p1.slot[P_TOYGAIN][0] = 1.3f;
    p1.slot[P_TOYGAIN][1] = -0.7f;
    for (size_t i = 0; i < layer_slot_size(&c, 1, P_QKVW); i++) p1.qkvw[i] *= 20.0f;
    enum { B = 2, T = 8 };
    int x[B * T], y[B * T];
    for (int i = 0; i < B * T; i++) { x[i] = (i * 37 + 5) % 64; y[i] = (i * 11 + 3) % 64; }
    fd_mean_loss(&m, x, y, B, T);
    gpt2_zero_grad(&m);
    gpt2_backward(&m, 1.0f / (B * T));
    const size_t picks[] = {param_offset(&m.layout, P_TOYGAIN, 1), param_offset(&m.layout, P_TOYGAIN, 1) + 1,
                            param_offset(&m.layout, P_QKVW, 1) + 5, param_offset(&m.layout, P_QKVW, 1) + 700,
                            param_offset(&m.layout, P_QKVW, 1) + 1500, param_offset(&m.layout, P_QKVW, 1) + 2000};
    float an[6];
    double fd[6];
    const float step = 1e-2f;
    for (int k = 0; k < 6; k++) {
        const size_t i = picks[k];
        const float keep = m.params[i];
        m.params[i] = keep + step;
        const double lp = fd_mean_loss(&m, x, y, B, T);
        m.params[i] = keep - step;
        const double lm = fd_mean_loss(&m, x, y, B, T);
        m.params[i] = keep;
        fd[k] = (lp - lm) / (2.0 * step);
        an[k] = m.grads[i];
    }
    const FdErr g = fd_compare(an, fd, 2), w = fd_compare(an + 2, fd + 2, 4);
    CHECK(g.rel_l2 <= 1e-2 && fabs(an[0]) > 1e-4, "dtoygain (g^2) vs finite differences: rel L2 %.1e (a %.4e %.4e, fd %.4e %.4e)",
          g.rel_l2, an[0], an[1], fd[0], fd[1]);
    CHECK(w.rel_l2 <= 1e-2, "dqkvw of the toy layer vs finite differences: rel L2 %.1e (max|a| %.2e)", w.rel_l2, w.max_a);
    /* a control: the gradient of g as if s = g (the other option) is off by the factor 2g */
    const double wrong = an[0] / (2.0 * 1.3);
    CHECK(fabs(wrong - fd[0]) > 0.1 * fabs(fd[0]), "control: the gradient for s = g differs from the finite difference (%.4e vs %.4e)",
          wrong, fd[0]);
    /* AdamW's first step moves every parameter with a gradient by lr against it */
    fd_mean_loss(&m, x, y, B, T);
    gpt2_zero_grad(&m);
    gpt2_backward(&m, 1.0f / (B * T));
    const float g0 = p1.slot[P_TOYGAIN][0], g1 = p1.slot[P_TOYGAIN][1];
    const float d0 = m.grads[picks[0]], d1 = m.grads[picks[1]];
    KindOptValue opt[LLMC_MAX_KIND_OPTIONS];
    kind_options_defaults(opt);
    const AdamWHyper hyp = adamw_gpt2(1e-2f, 0.1f, param_decay_mask(opt));
    gpt2_update(&m, &hyp, 1.0f, 1);
    const float e0 = p1.slot[P_TOYGAIN][0] - (g0 - 1e-2f * (d0 > 0 ? 1.0f : -1.0f));
    const float e1 = p1.slot[P_TOYGAIN][1] - (g1 - 1e-2f * (d1 > 0 ? 1.0f : -1.0f));
    CHECK(fabsf(e0) < 1e-5f && fabsf(e1) < 1e-5f, "AdamW's first step moves each gain by lr against its gradient, "
          "without decay (off by %.1e, %.1e)", e0, e1);
    gpt2_free(&m);
}

/* A toy layer with gain 1 (-toy_square 0) is the mha layer: same weights, same loss, same gradients. */
static void check_identity(const char *toy_table, const char *mha_table) {
    const GPT2Config ct = config_from_command_line(toy_table, "1", "0");
    const GPT2Config cm = config_from_command_line(mha_table, "1", "0");
    GPT2 t, m;
    gpt2_build_from_config(&t, &ct, 7);
    gpt2_build_from_config(&m, &cm, 7);
    enum { B = 2, T = 8 };
    int x[B * T], y[B * T];
    for (int i = 0; i < B * T; i++) { x[i] = (i * 13 + 1) % 64; y[i] = (i * 29 + 2) % 64; }
    gpt2_forward(&t, x, y, B, T);
    gpt2_forward(&m, x, y, B, T);
    gpt2_zero_grad(&t);
    gpt2_zero_grad(&m);
    gpt2_backward(&t, 1.0f / (B * T));
    gpt2_backward(&m, 1.0f / (B * T));
    const size_t nq = m.layout.slot_size[P_QKVW];
    const float *gt = t.grads + t.layout.slot_offset[P_QKVW], *gm = m.grads + m.layout.slot_offset[P_QKVW];
    CHECK(t.mean_loss == m.mean_loss && memcmp(gt, gm, nq * sizeof(float)) == 0 &&
              t.layout.total == m.layout.total + 2,
          "a toy layer with gain 1 is the mha layer bit for bit: loss %.7f vs %.7f, dqkvw identical", t.mean_loss,
          m.mean_loss);
    gpt2_free(&t);
    gpt2_free(&m);
}

static void write_table(char *path, const char *text) {
    const int fd = mkstemp(path);
    if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text) || close(fd) != 0) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
}

int main(void) {
    char toy[] = "/tmp/toy_table_XXXXXX", mha[] = "/tmp/mha_table_XXXXXX";
    write_table(toy, "2 2:toy\n");
    write_table(mha, "2 2\n");
    check_flags(toy);
    const GPT2Config c = config_from_command_line(toy, "0.5", "1");
    check_layout(&c);
    check_file(c);
    check_model(toy);
    check_identity(toy, mha);
    unlink(toy);
    unlink(mha);
    return test_finish();
}
