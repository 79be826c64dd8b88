/*
 * test/test_headers_cxx.cpp: every plain-C header compiles as C++17 and works there, because
 * train_gpt2.cu (nvcc, C++) and the GPU model include them unchanged. A few calls exercise the
 * code paths. (sd_attention/spectrum.h and surgery.h are C-only tools: they need LAPACKE.)
 */
#include "../llmc/args.h"
#include "../llmc/cli.h"
#include "../llmc/checkpoint.h"
#include "../llmc/config.h"
#include "../llmc/dataloader.h"
#include "../llmc/eval_cli.h"
#include "../llmc/evalloader.h"
#include "../llmc/train_evals.h"
#include "../llmc/train_setup.h"
#include "../llmc/logger.h"
#include "../llmc/outlier.h"
#include "../llmc/param_layout.h"
#include "../llmc/rand.h"
#include "../llmc/schedulers.h"
#include "../llmc/state.h"
#include "../llmc/tokenizer.h"
#include "../llmc/utils.h"
#include "../llmc/layer_table.h"
#include "../llmc/layer_kind.h"
#include "../llmc/model_init.h"
#include "../llmc/param_init.h"
#include "../llmc/scalar_math.h"
#include "../llmc/cpu/cpu_eval.h"
#include "../llmc/cpu/gpt2_cpu.h"
#include "../llmc/cpu/kernels.h"
#include "../llmc/cpu/kind_cpu.h"
#include "../llmc/attention/paths.h"
#include "../llmc/gpu/act_plan.h"
#include "../llmc/cuda/adamw.h"
#include "../llmc/cuda/encoder_buckets.h"
#include "../llmc/cuda/lt_algo.h"
#include "../llmc/cuda/mfu.h"
#include "../llmc/cuda/zero_plan.h"
#include "../prism/attn_stats.h"
#include "../prism/rules.h"
#include "../sd_attention/generator.h"
#include "../sd_attention/linear_cpu.h"
#include "../sd_attention/linear_scan.h"
#include "../sd_attention/sd_cpu.h"
#include "../sd_attention/sd_fold.h"
#include "../sd_attention/stages.h"
#include "harness.h"
#include "../kinds/registry_cpu.h"

int main() {
    GPT2Config c;
    char msg[256];
    CHECK(config_from_descriptor("d12", &c, msg, sizeof(msg)) == 1, "C++: d12 descriptor parses");
    LayerTable s;
    CHECK(layer_table_parse("3*2 6*2 12*8", "x", &c, &s) == 1 && prism_rules_check(&s, "x", &c) == 1 && s.n_warnings == 0,
          "C++: Prism schedule parses without warnings");
    layer_table_apply(&s, &c);
    ParamLayout p;
    param_layout_init(&p, &c);
    CHECK(p.total == 124475904u, "C++: d12 Prism parameter count %zu", p.total);
    int32_t h[HEADER_INTS];
    checkpoint_header_encode(&c, 1, h);
    CHECK(h[1] == CKPT_V_TABLE_BF16 && h[16] == 3 && h[17] == 256, "C++: bf16 table header");
    Mt19937 mt;
    mt_seed(&mt, 42);
    CHECK(mt_u32(&mt) == 1608637542u, "C++: mt19937(42) first draw");
    LRSchedule lr;
    lr_schedule_init(&lr, LR_COSINE, 6e-4f, 10, 100, 0.0f, 0.2f);
    CHECK(lr_at(&lr, 0) > 0.0f, "C++: lr schedule");
    TrainArgs a;
    train_args_defaults(&a, TRAINER_GPU);
    CHECK(strcmp(a.init, "gpt2_124M_bf16.bin") == 0, "C++: GPU default init");
    CHECK(eval_choose_T(0, 100, 256) == 128 && eval_choose_T(0, 250, 256) == 256 && eval_choose_T(0, 2000, 2048) == 1024 &&
              eval_choose_T(0, 300, 256) == 256 && eval_choose_T(128, 20, 256) == 128,
          "C++: the evaluator's -t default (longest example rounded up to 64, at most maxT and 1024), explicit -t");
    a.skip_loss_z = 3.0f;
    TrainLoop t;
    lr_schedule_init(&t.lr_schedule, LR_COSINE, 6e-4f, 10, 100, 0.0f, 0.2f);
    outlier_init(&t.loss_outliers);
    outlier_init(&t.norm_outliers);
    const StepResult sr = train_step_judge(&t, &a, 0, 4.0f, 2.0f);
    CHECK(!sr.skipped && sr.clip_scale == 0.5f && train_due_val(&a, 0, 0) == (a.val_every > 0),
          "C++: train_setup.h step judge (clip 2.0 -> 0.5) and schedule");
    /* the layer-kind seam in C++: registry, stages, init without a model */
    CHECK(layer_kind_code("sdlin") == ATTN_SDLIN && layer_kind_find("sd", "linear") == ATTN_SDLIN &&
              CPU_KINDS[ATTN_SD].mix == &SOFTMAX_MIXER_CPU && strcmp(LAYER_KINDS[ATTN_LIN].mix->name, "linear") == 0,
          "C++: the kind registry pairs each kind's stages");
    GPT2Config t4;
    config_from_descriptor("tiny", &t4, msg, sizeof(msg));
    LayerTable kt;
    CHECK(layer_table_parse("4:sd 4:lin 4:sdlin 4", "x", &t4, &kt) == 1, "C++: a table with every kind parses");
    layer_table_apply(&kt, &t4);
    float *w = model_init_params_host(&t4, 42);
    ParamLayout pt;
    param_layout_init(&pt, &t4);
    CHECK(w[param_offset(&pt, P_SDTHETA, 0)] == sd_opt_init_theta(&t4) && w[param_offset(&pt, P_LN1W, 3)] == 1.0f &&
              layer_slot_size(&t4, 0, P_QKVW) == 2 * 64 * 64 && layer_slot_size(&t4, 1, P_SDSKEW) == 0,
          "C++: weights initialized from (config, layout, buffer): S-D theta, LayerNorm, U | V rows");
    free(w);
    return test_finish();
}
