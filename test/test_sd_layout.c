/*
 * test/test_sd_layout.c: parameter layout and checkpoint header of the S-D module's options
 * (doc/formats.md; doc/methods.md "Parameter counts"). Checks the exact counts doc/methods.md "Parameter counts" derives (a d12 layer's
 * attention without biases: standard 2,359,296, formulation A 1,794,432 = -23.9%), the per-layer
 * sizes of every kind, scalar D, -ln 0 (exactly 4 C L fewer parameters), explicit head sizes, and
 * that the header flags and table survive encode + decode, while a uniform model stays llm.c's v3.
 */
#include <stdio.h>
#include <string.h>

#include "../llmc/checkpoint.h"
#include "../llmc/param_layout.h"
#include "harness.h"
#include "../kinds/registry.h"

static size_t attn_params_no_bias(const GPT2Config *c, int l) {
    return layer_slot_size(c, l, P_QKVW) + layer_slot_size(c, l, P_ATTPROJW) +
           layer_slot_size(c, l, P_SDSKEW) + layer_slot_size(c, l, P_SDTHETA);
}

int main(void) {
    GPT2Config c;
    char msg[256];
    config_from_descriptor("d12", &c, msg, sizeof(msg));
    const size_t std_layer = attn_params_no_bias(&c, 0);
    CHECK(std_layer == 2359296u, "d12 standard attention (no biases): %zu == 2,359,296", std_layer);
    c.layer[0].kind = ATTN_SD;
    const size_t sd_layer = attn_params_no_bias(&c, 0);
    CHECK(sd_layer == 1794432u, "d12 S-D (formulation A) attention: %zu == 1,794,432 (doc/methods.md 'Parameter counts')", sd_layer);
    CHECK(layer_slot_size(&c, 0, P_QKVW) == 2u * 768 * 768 && layer_slot_size(&c, 0, P_QKVB) == 2u * 768 &&
              layer_slot_size(&c, 0, P_SDSKEW) == 12u * 2016 && layer_slot_size(&c, 0, P_SDTHETA) == 12u * 64,
          "S-D layer: qkvw (2A, C), qkvb 2A, skew h d(d-1)/2, theta h d");
    kind_opt_set_int(c.opt, &SD_SCALAR_D, 1);
    CHECK(layer_slot_size(&c, 0, P_SDTHETA) == 12u, "scalar D: theta has one value per head");
    kind_opt_set_int(c.opt, &SD_SCALAR_D, 0);
    c.layer[1].kind = ATTN_LIN;
    c.layer[2].kind = ATTN_SDLIN;
    CHECK(layer_slot_size(&c, 1, P_QKVW) == 3u * 768 * 768 && layer_slot_size(&c, 1, P_SDSKEW) == 0 &&
              layer_slot_size(&c, 2, P_QKVW) == 2u * 768 * 768 && layer_slot_size(&c, 2, P_SDSKEW) == 12u * 2016,
          "lin keeps q, k, v and has no S-D tensors; sdlin has S-D's");
    c.layer[3].kind = ATTN_SD;
    c.layer[3].n_head = 12;
    c.layer[3].head_size = 8; /* a cascade-narrow layer: A = 96 */
    CHECK(layer_slot_size(&c, 3, P_QKVW) == 2u * 96 * 768 && layer_slot_size(&c, 3, P_ATTPROJW) == 768u * 96 &&
              layer_slot_size(&c, 3, P_SDSKEW) == 12u * 28 && layer_slot_size(&c, 3, P_SDTHETA) == 12u * 8,
          "12x8:sd: qkvw (192, 768), attprojw (768, 96), skew 12 x 28, theta 12 x 8");
    ParamLayout p;
    param_layout_init(&p, &c);
    size_t sum = 0;
    for (int s = 0; s < param_slot_count(); s++) sum += p.slot_size[s];
    CHECK(sum == p.total && p.slot_offset[P_SDSKEW] == p.slot_offset[P_LNFB] + 768 &&
              p.slot_offset[P_SDTHETA] == p.slot_offset[P_SDSKEW] + p.slot_size[P_SDSKEW],
          "the S-D slots follow llm.c's 16 slots, in order");
    CHECK(p.layer_offset[P_SDSKEW][1] == 12u * 2016 && p.layer_offset[P_SDSKEW][2] == 12u * 2016 &&
              p.layer_offset[P_SDSKEW][3] == 2u * 12 * 2016,
          "per-layer S-D offsets skip layers without S-D tensors");

    GPT2Config u;
    config_from_descriptor("d12", &u, msg, sizeof(msg));
    ParamLayout pu, pn;
    param_layout_init(&pu, &u);
    u.use_ln = 0;
    param_layout_init(&pn, &u);
    CHECK(pu.total - pn.total == 4u * 768 * 12, "-ln 0 removes exactly 4 C L = %u parameters (%zu)",
          4u * 768 * 12, pu.total - pn.total);
    CHECK(!config_is_llmc_uniform(&u), "-ln 0 is not an llm.c model (written as v103)");

    /* header round trip with every flag */
    c.use_ln = 0;
    kind_opt_set_int(c.opt, &SD_SCALAR_D, 1);
    kind_opt_set_int(c.opt, &SD_SIGN, 1);
    kind_opt_set_int(c.opt, &LIN_PRESCALE, 1);
    int32_t h[HEADER_INTS];
    checkpoint_header_encode(&c, 0, h);
    CHECK(h[1] == 103 && h[9] == 15, "flags: no LN 1 | scalar D 2 | +D 4 | prescale 8 = %d in header[9]", h[9]);
    GPT2Config back;
    int bf16 = 0;
    checkpoint_header_decode("mem", h, &back, &bf16);
    int same = back.use_ln == 0 && sd_opt_scalar_d(&back) == 1 && sd_opt_sign(&back) == 1 && lin_opt_prescale(&back) == 1;
    for (int l = 0; l < 12; l++) same &= memcmp(&back.layer[l], &c.layer[l], sizeof(LayerSpec)) == 0;
    CHECK(same, "encode + decode restores the flags and the table (kinds, explicit sizes)");
    config_from_descriptor("d12", &u, msg, sizeof(msg));
    kind_opt_set_int(u.opt, &SD_SCALAR_D, 1); /* irrelevant without S-D layers */
    checkpoint_header_encode(&u, 0, h);
    CHECK(h[1] == 3 && h[9] == 0, "a uniform mha model stays llm.c's v3 whatever the S-D options");
    return test_finish();
}
