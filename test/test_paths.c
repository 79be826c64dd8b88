/*
 * test/test_paths.c: the attention path of every layer (llmc/attention/paths.h), on the CPU.
 *
 *   - cuDNN support per (SM, head size, training, backend version): doc/gpu.md "cuDNN SDPA head-size support"'s matrix;
 *   - attention path per layer for -attn auto|cudnn|own|flash|mma, and the one-line errors; forward-only
 *     (eval_gpt2cu) against training; the flash and mma paths' arguments and the buffers they add
 *     (llmc/gpu/act_plan.h);
 *   - the layer kinds (S-D, linear): the path per kind, the printed table.
 * Exact checks. The buffers each path needs are test/test_cuda_host.c's (llmc/gpu/act_plan.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../llmc/config.h"
#include "../llmc/attention/paths.h"
#include "../llmc/gpu/act_plan.h"
#include "../llmc/layer_table.h"
#include "harness.h"
#include "../kinds/registry.h"

static GPT2Config model_of(const char *desc, const char *schedule) {
    GPT2Config c;
    char msg[512];
    if (!config_from_descriptor(desc, &c, msg, sizeof(msg))) llmc_die("%s", msg);
    if (schedule != NULL) {
        LayerTable s;
        if (!layer_table_parse(schedule, "test", &c, &s)) llmc_die("%s", s.error);
        layer_table_apply(&s, &c);
    }
    return c;
}


/* ---------------------------------------------------------------------------------------------- */
static void test_cudnn_support(void) {
    char why[256];
    const AttnEnv h200 = {90, 1, 91900, 0}, a100 = {80, 1, 91900, 0}, a100_old = {80, 1, 90800, 0};
    const AttnEnv ada = {89, 1, 91900, 0}, t4 = {75, 1, 91900, 0}, b200 = {100, 1, 91900, 0};
    const AttnEnv none = {90, 0, 0, 0}, bad_bwd = {90, 1, 91001, 0};
    const int sizes[] = {8, 16, 32, 64, 128, 256};
    for (int i = 0; i < 6; i++) {
        CHECK(cudnn_sdpa_supports(&h200, sizes[i], 1, why, sizeof(why)), "SM 9.0 trains d = %d on cuDNN", sizes[i]);
    }
    int ok = !cudnn_sdpa_supports(&h200, 12, 1, why, sizeof(why)) && strstr(why, "multiple of 8");
    CHECK(ok, "d = 12 is refused (not a multiple of 8): %s", why);
    CHECK(!cudnn_sdpa_supports(&h200, 20, 0, why, sizeof(why)), "d = 20 is refused even for inference");
    ok = !cudnn_sdpa_supports(&h200, 264, 1, why, sizeof(why)) && strstr(why, "256");
    CHECK(ok, "d = 264 > 256 refused: %s", why);
    CHECK(cudnn_sdpa_supports(&a100, 128, 1, why, sizeof(why)), "SM 8.0 trains d = 128");
    ok = !cudnn_sdpa_supports(&a100, 256, 1, why, sizeof(why)) && strstr(why, "backward");
    CHECK(ok, "SM 8.0 cannot train d = 256 (backward <= 128): %s", why);
    CHECK(cudnn_sdpa_supports(&a100, 256, 0, why, sizeof(why)), "SM 8.0 runs the d = 256 forward on 9.19");
    CHECK(!cudnn_sdpa_supports(&a100_old, 256, 0, why, sizeof(why)), "SM 8.0 forward d = 256 refused on 9.8");
    CHECK(!cudnn_sdpa_supports(&ada, 192, 1, why, sizeof(why)), "SM 8.9 cannot train d = 192");
    ok = !cudnn_sdpa_supports(&t4, 64, 1, why, sizeof(why)) && strstr(why, "SM 8.0");
    CHECK(ok, "SM 7.5 refused: %s", why);
    CHECK(!cudnn_sdpa_supports(&b200, 256, 1, why, sizeof(why)) && cudnn_sdpa_supports(&b200, 128, 1, why, sizeof(why)),
          "SM 10.0 trains d <= 128 only");
    ok = !cudnn_sdpa_supports(&none, 64, 1, why, sizeof(why)) && strstr(why, "USE_CUDNN");
    CHECK(ok, "no cuDNN build: %s", why);
    CHECK(!cudnn_sdpa_supports(&bad_bwd, 64, 1, why, sizeof(why)) && cudnn_sdpa_supports(&bad_bwd, 64, 0, why, sizeof(why)),
          "backend 9.10.1: backward blocked, forward allowed");
}

static void test_path_selection(void) {
    const GPT2Config prism = model_of("d12", "3*2 6*2 12*8"); /* head sizes 256, 128, 64 */
    const AttnEnv h200 = {90, 1, 91900, 0}, a100 = {80, 1, 91900, 0}, nocudnn = {90, 0, 0, 0};
    AttPath p[LLMC_MAX_LAYERS];
    char err[512];
    CHECK(attn_select_paths(&prism, ATTN_REQ_AUTO, &h200, 1, p, err, sizeof(err)), "auto on H200 selects");
    int all = 1;
    for (int l = 0; l < 12; l++) all &= p[l] == ATT_PATH_CUDNN;
    CHECK(all, "auto on H200: every Prism layer (256/128/64) on cuDNN");
    CHECK(attn_select_paths(&prism, ATTN_REQ_AUTO, &a100, 1, p, err, sizeof(err)), "auto on A100 selects");
    CHECK(p[0] == ATT_PATH_OWN && p[1] == ATT_PATH_OWN && p[2] == ATT_PATH_CUDNN && p[11] == ATT_PATH_CUDNN,
          "auto on A100: the d = 256 layers 0-1 on the own kernels, the rest on cuDNN");
    int ok = !attn_select_paths(&prism, ATTN_REQ_CUDNN, &a100, 1, p, err, sizeof(err)) &&
             strncmp(err, "-attn cudnn: layer 0 (3 heads x 256)", 36) == 0 && strchr(err, '\n') == NULL;
    CHECK(ok, "forced cuDNN on A100: one-line error naming layer 0: %s", err);
    CHECK(attn_select_paths(&prism, ATTN_REQ_OWN, &h200, 1, p, err, sizeof(err)) && p[5] == ATT_PATH_OWN,
          "-attn own: own kernels everywhere");
    CHECK(attn_select_paths(&prism, ATTN_REQ_AUTO, &nocudnn, 1, p, err, sizeof(err)) && p[11] == ATT_PATH_OWN,
          "a build without cuDNN: auto gives the own kernels");
    ok = !attn_select_paths(&prism, ATTN_REQ_CUDNN, &nocudnn, 1, p, err, sizeof(err)) && strstr(err, "USE_CUDNN");
    CHECK(ok, "a build without cuDNN: -attn cudnn is an error: %s", err);
    const GPT2Config odd = model_of("d12", "3x12 6x20 12*10"); /* explicit sizes: A != C */
    CHECK(attn_select_paths(&odd, ATTN_REQ_AUTO, &h200, 1, p, err, sizeof(err)) && p[0] == ATT_PATH_OWN &&
              p[1] == ATT_PATH_OWN && p[2] == ATT_PATH_CUDNN,
          "head sizes 12 and 20 go to the own kernels, 64 to cuDNN");
    ok = !attn_select_paths(&odd, ATTN_REQ_CUDNN, &h200, 1, p, err, sizeof(err)) && strstr(err, "head size 12");
    CHECK(ok, "forced cuDNN with d = 12: %s", err);
    GPT2Config sd = model_of("tiny", NULL);
    sd.layer[2].kind = 7;
    ok = !attn_select_paths(&sd, ATTN_REQ_AUTO, &h200, 1, p, err, sizeof(err)) && strstr(err, "layer 2") &&
         strstr(err, "unknown attention kind 7");
    CHECK(ok, "an unknown kind is refused: %s", err);
    AttnRequest r;
    CHECK(attn_request_from_name("own", &r) && r == ATTN_REQ_OWN && attn_request_from_name("flash", &r) &&
              r == ATTN_REQ_FLASH && !attn_request_from_name("Flash", &r) && !attn_request_from_name("", &r),
          "-attn names");
}

/* -attn flash: the own tiled kernels (llmc/attention/flash.h) for d a multiple of 16 on SM 8.0+,
 * a one-line error otherwise; auto never picks them (slower than the materializing own kernels
 * at every head size on the H200, doc/gpu.md "GPU results"); their layers keep the
 * logsumexp (stats) like cuDNN's and no T x T buffer. */
static void test_flash_paths(void) {
    const size_t h200_smem = 232448, a100_smem = 166912; /* cudaDevAttrMaxSharedMemoryPerBlockOptin */
    const AttnEnv h200 = {90, 1, 91900, h200_smem}, a100 = {80, 0, 0, a100_smem}, t4 = {75, 1, 91900, 65536};
    const GPT2Config prism = model_of("d12", "3*2 6*2 12*8"); /* head sizes 256, 128, 64 */
    AttPath p[LLMC_MAX_LAYERS];
    char err[512];
    int all = attn_select_paths(&prism, ATTN_REQ_FLASH, &a100, 1, p, err, sizeof(err));
    for (int l = 0; l < 12; l++) all &= p[l] == ATT_PATH_FLASH;
    CHECK(all, "-attn flash on A100 without cuDNN: every Prism layer (256/128/64) on the flash kernels");
    all = attn_select_paths(&prism, ATTN_REQ_AUTO, &a100, 1, p, err, sizeof(err));
    for (int l = 0; l < 12; l++) all &= p[l] == ATT_PATH_OWN;
    CHECK(all, "auto never chooses flash (no cuDNN: the own kernels everywhere)");
    const GPT2Config odd = model_of("d12", "3x12 6x20 12*10");
    int ok = !attn_select_paths(&odd, ATTN_REQ_FLASH, &h200, 1, p, err, sizeof(err)) &&
             strncmp(err, "-attn flash: layer 0 (3 heads x 12)", 35) == 0 && strstr(err, "multiple of 16") &&
             strchr(err, '\n') == NULL;
    CHECK(ok, "-attn flash with d = 12: one line naming layer 0: %s", err);
    ok = !attn_select_paths(&prism, ATTN_REQ_FLASH, &t4, 1, p, err, sizeof(err)) && strstr(err, "layer 0") &&
         strstr(err, "SM 8.0") && strstr(err, "SM 7.5");
    CHECK(ok, "-attn flash on SM 7.5: %s", err);
    const AttnEnv small = {90, 1, 91900, 49152};
    ok = !attn_select_paths(&prism, ATTN_REQ_FLASH, &small, 1, p, err, sizeof(err)) && strstr(err, "layer 0") &&
         strstr(err, "shared memory");
    CHECK(ok, "-attn flash where the d = 256 tiles do not fit: %s", err);
    const GPT2Config kinds = model_of("tiny", "4:sd 4:sdlin 4:lin 4"); /* head size 16 */
    ok = attn_select_paths(&kinds, ATTN_REQ_FLASH, &h200, 1, p, err, sizeof(err)) && p[0] == ATT_PATH_FLASH &&
         p[1] == ATT_PATH_MIXER && p[2] == ATT_PATH_MIXER && p[3] == ATT_PATH_FLASH;
    CHECK(ok, "-attn flash: sd and mha layers flash, sdlin and lin stay on the linear scan");
    CHECK(strcmp(ATT_PATH_NAMES[ATT_PATH_FLASH], "flash") == 0, "path name flash");
    /* buffers: the cuDNN plan (stats, no T x T buffers; test_act_plan checks that one) plus the
     * backward's D scratch, sized by the flash layer with the most heads */
    AttPath fl[LLMC_MAX_LAYERS], cu[LLMC_MAX_LAYERS];
    for (int l = 0; l < LLMC_MAX_LAYERS; l++) {
        fl[l] = l < 4 ? ATT_PATH_FLASH : ATT_PATH_CUDNN; /* the flash layers have 3 and 6 heads */
        cu[l] = ATT_PATH_CUDNN;
    }
    ActPlan pf, pc;
    act_plan_init(&pf, &prism, 4, 64, 0, fl);
    act_plan_init(&pc, &prism, 4, 64, 0, cu);
    ok = pf.n[ACT_FLASH_D] == (size_t)4 * 6 * 64 && pc.n[ACT_FLASH_D] == 0;
    pf.n[ACT_FLASH_D] = 0;
    ok &= memcmp(pf.n, pc.n, sizeof(pf.n)) == 0 && memcmp(pf.stats_off, pc.stats_off, sizeof(pf.stats_off)) == 0;
    CHECK(ok, "flash layers: the cuDNN plan plus D scratch of B x max h_l x T (h 6 of layers 2-3, not 12 of "
              "the cuDNN layers)");
    /* one call's arguments: shape, scale, tiles; the grid's 65535-tile limit */
    FlashArgs fa;
    const uint16_t qkv = 0;
    ok = flash_args_init(&fa, &qkv, 2, 1024, 6, 64, &h200, err, sizeof(err)) == 64 && fa.BLK == 64 && fa.B == 2 &&
         fa.T == 1024 && fa.h == 6 && fa.d == 64 && fa.qkv == &qkv && fa.scale == 0.125f && fa.o == NULL;
    CHECK(ok, "flash_args_init: d 64 on an H200: 64-row tiles, scale 1/8, the shape, no outputs set");
    ok = !flash_args_init(&fa, &qkv, 1, 32 * 65535 + 1, 1, 64, &h200, err, sizeof(err)) && strstr(err, "65535");
    CHECK(ok && flash_args_init(&fa, &qkv, 1, 32 * 65535, 1, 64, &h200, err, sizeof(err)),
          "flash_args_init: T = 32 x 65535 + 1 refused (%s), 32 x 65535 accepted", err);
    ok = !flash_args_init(&fa, &qkv, 1, 64, 1, 64, &t4, err, sizeof(err)) && strstr(err, "SM 8.0");
    CHECK(ok, "flash_args_init on SM 7.5: %s", err);
}

/* -attn mma: the register-tile kernels (llmc/attention/mma.h) for d a multiple of 16 on SM 8.0+ whose
 * blocks fit the shared memory (training d 256 takes 135680 bytes: an A100's 166912 yes, an SM 8.6
 * GPU's 101376 no, where an inference-only model, 101376 bytes, still runs); not yet measured on
 * a GPU, so auto never picks them; their layers keep the logsumexp and the backward's D scratch
 * like flash layers. */
static void test_mma_paths(void) {
    const size_t h200_smem = 232448, a100_smem = 166912, sm86_smem = 101376;
    const AttnEnv h200 = {90, 1, 91900, h200_smem}, a100 = {80, 0, 0, a100_smem}, t4 = {75, 1, 91900, 65536};
    const AttnEnv sm86 = {86, 0, 0, sm86_smem};
    const GPT2Config prism = model_of("d12", "3*2 6*2 12*8"); /* head sizes 256, 128, 64 */
    const GPT2Config mid = model_of("d12", "6*4 12*8");       /* head sizes 128, 64 */
    AttPath p[LLMC_MAX_LAYERS];
    char err[512];
    int all = attn_select_paths(&mid, ATTN_REQ_MMA, &a100, 1, p, err, sizeof(err));
    for (int l = 0; l < 12; l++) all &= p[l] == ATT_PATH_MMA;
    CHECK(all, "-attn mma on A100, training, d 128 and 64: every layer on the register-tile kernels");
    all = attn_select_paths(&prism, ATTN_REQ_MMA, &h200, 1, p, err, sizeof(err));
    for (int l = 0; l < 12; l++) all &= p[l] == ATT_PATH_MMA;
    CHECK(all, "-attn mma on an H200, training, d 256, 128 and 64 (the Prism schedule): every layer");
    all = attn_select_paths(&prism, ATTN_REQ_MMA, &a100, 1, p, err, sizeof(err));
    for (int l = 0; l < 12; l++) all &= p[l] == ATT_PATH_MMA;
    CHECK(all, "-attn mma on an A100, training, d 256, 128 and 64: every layer");
    int ok = !attn_select_paths(&prism, ATTN_REQ_MMA, &sm86, 1, p, err, sizeof(err)) &&
             strncmp(err, "-attn mma: layer 0 (3 heads x 256)", 34) == 0 && strstr(err, "shared memory") &&
             strchr(err, '\n') == NULL;
    CHECK(ok, "-attn mma on an SM 8.6 GPU, training with d 256: one line naming layer 0: %s", err);
    all = attn_select_paths(&prism, ATTN_REQ_MMA, &sm86, 0, p, err, sizeof(err));
    for (int l = 0; l < 12; l++) all &= p[l] == ATT_PATH_MMA;
    CHECK(all, "-attn mma on an SM 8.6 GPU, inference only: d 256 runs forward");
    all = attn_select_paths(&prism, ATTN_REQ_AUTO, &a100, 1, p, err, sizeof(err));
    for (int l = 0; l < 12; l++) all &= p[l] == ATT_PATH_OWN;
    CHECK(all, "auto never chooses mma (no cuDNN: the own kernels everywhere)");
    const GPT2Config odd = model_of("d12", "3x12 6x20 12*10");
    ok = !attn_select_paths(&odd, ATTN_REQ_MMA, &h200, 1, p, err, sizeof(err)) &&
         strncmp(err, "-attn mma: layer 0 (3 heads x 12)", 33) == 0 && strstr(err, "multiple of 16");
    CHECK(ok, "-attn mma with d = 12: %s", err);
    ok = !attn_select_paths(&mid, ATTN_REQ_MMA, &t4, 1, p, err, sizeof(err)) && strstr(err, "layer 0") &&
         strstr(err, "SM 7.5");
    CHECK(ok, "-attn mma on SM 7.5: %s", err);
    const GPT2Config kinds = model_of("tiny", "4:sd 4:sdlin 4:lin 4"); /* head size 16 */
    ok = attn_select_paths(&kinds, ATTN_REQ_MMA, &h200, 1, p, err, sizeof(err)) && p[0] == ATT_PATH_MMA &&
         p[1] == ATT_PATH_MIXER && p[2] == ATT_PATH_MIXER && p[3] == ATT_PATH_MMA;
    CHECK(ok, "-attn mma: sd and mha layers mma, sdlin and lin stay on the linear scan");
    AttnRequest r;
    CHECK(attn_request_from_name("mma", &r) && r == ATTN_REQ_MMA && strcmp(ATT_PATH_NAMES[ATT_PATH_MMA], "mma") == 0 &&
              !attn_request_from_name("MMA", &r),
          "-attn mma: its name and the path name");
    AttPath mm[LLMC_MAX_LAYERS], fl[LLMC_MAX_LAYERS];
    for (int l = 0; l < LLMC_MAX_LAYERS; l++) {
        mm[l] = l < 4 ? ATT_PATH_MMA : ATT_PATH_CUDNN;
        fl[l] = l < 4 ? ATT_PATH_FLASH : ATT_PATH_CUDNN;
    }
    ActPlan pm, pf;
    act_plan_init(&pm, &prism, 4, 64, 0, mm);
    act_plan_init(&pf, &prism, 4, 64, 0, fl);
    ok = pm.n[ACT_FLASH_D] == (size_t)4 * 6 * 64 && memcmp(pm.n, pf.n, sizeof(pm.n)) == 0 &&
         memcmp(pm.stats_off, pf.stats_off, sizeof(pm.stats_off)) == 0;
    CHECK(ok, "mma layers: the same buffers as flash layers (stats, D scratch of B x max h_l x T)");
    /* the shared memory the kernels ask for, by hand (tiles of 64 x (d + 8) bf16, two stages up to
     * d 128; a block's own tiles 128 rows up to d 64): forward at d 64 Q (128 rows) and 2 x (K, V);
     * dQ at d 64 Q, dO (128 rows) and 2 x (K, V); dK/dV at d 64 K, V (128 rows) and 2 x (Q, dO,
     * lse and D of 64 fp32); dK/dV at d 128 K, V and 2 x (Q, dO, lse, D); dQ at d 128 Q, dO (64
     * rows) and 2 x (K, V); dK/dV at d 256, one stage */
    ok = fmma_smem_bytes_kind(FMMA_FWD, 64) == (128 + 4 * 64) * 72 * 2 &&
         fmma_smem_bytes_kind(FMMA_DQ, 64) == (2 * 128 + 4 * 64) * 72 * 2 &&
         fmma_smem_bytes_kind(FMMA_DKDV, 64) == (2 * 128 + 4 * 64) * 72 * 2 + 2 * 2 * 64 * 4 &&
         fmma_smem_bytes_kind(FMMA_DKDV, 128) == 6 * 64 * 136 * 2 + 2 * 2 * 64 * 4 &&
         fmma_smem_bytes_kind(FMMA_DQ, 128) == 6 * 64 * 136 * 2 &&
         fmma_smem_bytes_kind(FMMA_DKDV, 256) == 4 * 64 * 264 * 2 + 2 * 64 * 4 &&
         fmma_smem_bytes_bq(FMMA_FWD, 64, 64) == 5 * 64 * 72 * 2;
    CHECK(ok, "register-tile shared memory: forward d 64 %zu, dQ d 64 %zu, dK/dV d 64 %zu, dK/dV d 128 %zu, dQ d 128 "
          "%zu bytes", fmma_smem_bytes_kind(FMMA_FWD, 64), fmma_smem_bytes_kind(FMMA_DQ, 64),
          fmma_smem_bytes_kind(FMMA_DKDV, 64), fmma_smem_bytes_kind(FMMA_DKDV, 128), fmma_smem_bytes_kind(FMMA_DQ, 128));
    /* one call's arguments: the query tile rows (128 up to d 64, else 64), the shape, the scale;
     * the grid's 65535-tile limit; the backward's d limit */
    FlashArgs fa;
    const uint16_t qkv = 0;
    ok = mma_args_init(&fa, &qkv, 2, 1024, 6, 64, 1, &h200, err, sizeof(err)) && fa.BLK == 128 && fa.B == 2 &&
         fa.T == 1024 && fa.h == 6 && fa.d == 64 && fa.qkv == &qkv && fa.scale == 0.125f && fa.o == NULL;
    ok = ok && mma_args_init(&fa, &qkv, 2, 1024, 6, 80, 1, &h200, err, sizeof(err)) && fa.BLK == 64;
    CHECK(ok, "mma_args_init: d 64 on an H200: 128-row tiles (d 80: 64), scale 1/8, the shape, no outputs set");
    char err2[512];
    ok = !mma_args_init(&fa, &qkv, 1, 64 * 65535 + 1, 1, 64, 1, &h200, err, sizeof(err)) && strstr(err, "65535") &&
         mma_args_init(&fa, &qkv, 1, 64 * 65535, 1, 64, 1, &h200, err2, sizeof(err2));
    CHECK(ok, "mma_args_init: T = 64 x 65535 + 1 refused (%s), 64 x 65535 accepted", err);
    ok = !mma_args_init(&fa, &qkv, 1, 64, 1, 256, 1, &sm86, err, sizeof(err)) && strstr(err, "shared memory") &&
         mma_args_init(&fa, &qkv, 1, 64, 1, 256, 0, &sm86, err2, sizeof(err2)) &&
         mma_args_init(&fa, &qkv, 1, 64, 1, 256, 1, &a100, err2, sizeof(err2));
    CHECK(ok, "mma_args_init: d 256 for training refused on an SM 8.6 GPU (%s), accepted for a forward there and "
              "for training on an A100", err);
}

/* eval_gpt2cu builds a forward-only model and asks for forward support only (training = 0, as
 * gpt2gpu_choose_paths passes it): on an A100 the d = 256 layers then run on cuDNN too, which
 * the training choice (the control, test_path_selection) puts on the own kernels. */
static void test_inference_paths(void) {
    const GPT2Config prism = model_of("d12", "3*2 6*2 12*8"); /* head sizes 256, 128, 64 */
    const AttnEnv a100 = {80, 1, 91900, 0}, a100_old = {80, 1, 90800, 0}, h200 = {90, 1, 91900, 0};
    AttPath fwd[LLMC_MAX_LAYERS], train[LLMC_MAX_LAYERS];
    char err[512];
    int all = attn_select_paths(&prism, ATTN_REQ_AUTO, &a100, 0, fwd, err, sizeof(err));
    for (int l = 0; l < 12; l++) all &= fwd[l] == ATT_PATH_CUDNN;
    CHECK(all, "forward-only on A100 (cuDNN 9.19): every Prism layer, d = 256 included, on cuDNN");
    /* the training choice on the same A100 puts d = 256 on the own kernels: test_path_selection */
    CHECK(attn_select_paths(&prism, ATTN_REQ_AUTO, &a100_old, 0, fwd, err, sizeof(err)) && fwd[0] == ATT_PATH_OWN &&
              fwd[2] == ATT_PATH_CUDNN,
          "forward-only on A100 with cuDNN 9.8: d = 256 stays on the own kernels (forward capped at 128)");
    CHECK(attn_select_paths(&prism, ATTN_REQ_CUDNN, &a100, 0, fwd, err, sizeof(err)),
          "forward-only -attn cudnn on A100 is served (an error in training)");
    CHECK(attn_select_paths(&prism, ATTN_REQ_AUTO, &h200, 0, fwd, err, sizeof(err)) &&
              attn_select_paths(&prism, ATTN_REQ_AUTO, &h200, 1, train, err, sizeof(err)) &&
              memcmp(fwd, train, sizeof(AttPath) * 12) == 0,
          "H200: forward-only and training choose the same paths");
    FILE *f = tmpfile();
    char table[1024] = "";
    attn_select_paths(&prism, ATTN_REQ_AUTO, &a100, 0, fwd, err, sizeof(err));
    attn_print_paths(&prism, fwd, f);
    rewind(f);
    const size_t got = fread(table, 1, sizeof(table) - 1, f);
    table[got] = '\0';
    fclose(f);
    CHECK(strstr(table, "layers  0-1 :   3 heads x 256 mha   -> cudnn") != NULL && strstr(table, "-> own") == NULL,
          "the printed table says cuDNN for the forward-only d = 256 layers:\n%s", table);
}


/* ----------------------------------------------------------------------------------------------
 * Layer kinds: S-D (sd), linear (lin), S-D + linear (sdlin): which path each takes */
static void test_kind_paths(void) {
    const GPT2Config kinds = model_of("tiny", "4:sd 4:sdlin 4:lin 4"); /* all head size 16 */
    const GPT2Config odd = model_of("tiny", "2x20:sd 2x20:lin 4x12:sdlin 4x16");
    const AttnEnv h200 = {90, 1, 91900, 0}, nocudnn = {90, 0, 0, 0};
    AttPath p[LLMC_MAX_LAYERS];
    char err[512];
    int ok = attn_select_paths(&kinds, ATTN_REQ_AUTO, &h200, 1, p, err, sizeof(err)) && p[0] == ATT_PATH_CUDNN &&
             p[1] == ATT_PATH_MIXER && p[2] == ATT_PATH_MIXER && p[3] == ATT_PATH_CUDNN;
    CHECK(ok, "auto on H200: sd and mha on cuDNN (d 16), sdlin and lin on the linear scan");
    ok = attn_select_paths(&kinds, ATTN_REQ_OWN, &h200, 1, p, err, sizeof(err)) && p[0] == ATT_PATH_OWN &&
         p[1] == ATT_PATH_MIXER && p[2] == ATT_PATH_MIXER && p[3] == ATT_PATH_OWN;
    CHECK(ok, "-attn own: softmax layers (sd, mha) own, linear layers stay linear");
    ok = attn_select_paths(&kinds, ATTN_REQ_AUTO, &nocudnn, 1, p, err, sizeof(err)) && p[0] == ATT_PATH_OWN;
    CHECK(ok, "no cuDNN: an S-D layer uses the own softmax kernels");
    ok = attn_select_paths(&odd, ATTN_REQ_AUTO, &h200, 1, p, err, sizeof(err)) && p[0] == ATT_PATH_OWN &&
         p[1] == ATT_PATH_MIXER && p[2] == ATT_PATH_MIXER && p[3] == ATT_PATH_CUDNN;
    CHECK(ok, "explicit sizes: sd d 20 -> own, lin d 20 and sdlin d 12 -> linear, mha d 16 -> cuDNN");
    ok = !attn_select_paths(&odd, ATTN_REQ_CUDNN, &h200, 1, p, err, sizeof(err)) && strstr(err, "layer 0") &&
         strstr(err, "sd") && strstr(err, "head size 20") && strchr(err, '\n') == NULL;
    CHECK(ok, "-attn cudnn with an S-D layer of d 20: one line naming layer 0: %s", err);
    const GPT2Config linonly = model_of("tiny", "2x20:lin 4x12:sdlin 4x16 4x16");
    CHECK(attn_select_paths(&linonly, ATTN_REQ_CUDNN, &h200, 1, p, err, sizeof(err)) && p[0] == ATT_PATH_MIXER &&
              p[2] == ATT_PATH_CUDNN,
          "-attn cudnn does not apply to linear layers (d 20, 12 accepted)");
    { /* a layer on its kind's own mixer prints the mixer's name */
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        attn_print_paths(&linonly, p, f);
        fclose(f);
        CHECK(buf && strstr(buf, "lin   -> linear") && strstr(buf, "sdlin -> linear") && strstr(buf, "mha   -> cudnn"),
              "path names: lin and sdlin layers -> linear, mha -> cudnn:\n%s", buf ? buf : "");
        free(buf);
    }
}


int main(void) {
    test_cudnn_support();
    test_path_selection();
    test_flash_paths();
    test_mma_paths();
    test_inference_paths();
    test_kind_paths();
    return test_finish();
}
