/*
 * test/test_headers_cxx.cpp: every shared header compiles as C++17 and works there, because
 * train_gpt2.cu (nvcc, C++) includes them unchanged. A few calls exercise the code paths.
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
#include "../prism/schedule.h"
#include "harness.h"

int main() {
    GPT2Config c;
    char msg[256];
    CHECK(config_from_descriptor("d12", &c, msg, sizeof(msg)) == 1, "C++: d12 descriptor parses");
    PrismSchedule s;
    CHECK(prism_schedule_parse("3*2 6*2 12*8", "x", &c, 0, &s) == 1 && s.n_warnings == 0,
          "C++: Prism schedule parses without warnings");
    prism_schedule_apply(&s, &c);
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
    lr_schedule_init(&lr, LR_COSINE, 6e-4f, 10, 100, 0.0f);
    CHECK(lr_at(&lr, 0) > 0.0f, "C++: lr schedule");
    TrainArgs a;
    train_args_defaults(&a, TRAINER_GPU);
    CHECK(strcmp(a.init, "gpt2_124M_bf16.bin") == 0, "C++: GPU default init");
    CHECK(eval_choose_T(0, 100, 256) == 128 && eval_choose_T(0, 250, 256) == 256 && eval_choose_T(0, 2000, 2048) == 1024 &&
              eval_choose_T(0, 300, 256) == 256 && eval_choose_T(128, 20, 256) == 128,
          "C++: the evaluator's -t default (longest example rounded up to 64, at most maxT and 1024), explicit -t");
    a.skip_loss_z = 3.0f;
    TrainLoop t;
    lr_schedule_init(&t.lr_schedule, LR_COSINE, 6e-4f, 10, 100, 0.0f);
    outlier_init(&t.loss_outliers);
    outlier_init(&t.norm_outliers);
    const StepResult sr = train_step_judge(&t, &a, 0, 4.0f, 2.0f);
    CHECK(!sr.skipped && sr.clip_scale == 0.5f && train_due_val(&a, 0, 0) == (a.val_every > 0),
          "C++: train_setup.h step judge (clip 2.0 -> 0.5) and schedule");
    return test_finish();
}
