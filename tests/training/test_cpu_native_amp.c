// A few whole training steps (forward, CTC, backward, unscale + check, Adam) of a small
// PP-OCRv3-like network under AMP on the CPU's BF16/FP16 hardware path against the emulated
// reference (Global.cpu_exact_numerics), both from the same initial weights and batches.
//
// The two paths store and round identically and differ only in the order of fp32 additions
// inside GEMMs and convolutions (kernels_lp_native bounds that per op). On the first step, from
// the same weights, a reordered fp32 sum moves a value by a few fp32 ulps, which changes a stored
// f16/bf16 value by one ulp where it lay that close to a rounding boundary. Those flips are a
// subset of what rounding the storage at all does, so on the first step
//   - the loss (a mean over the batch, where flips average out) stays within one rounding of the
//     storage dtype, 2^-8 relative for bf16 and 2^-11 for f16;
//   - the norm of the true gradient, which a deep network makes far more sensitive (rounding the
//     storage moves it by several percent, and merely switching OpenBLAS's sgemm kernel in the
//     reference moves it by 1.5 %), moves less than the storage rounding moves it from FP32:
//     |native − reference| <= |reference − FP32|.
// A wrong native kernel (a transposed operand, a lost accumulation) moves both by O(1).
//
// After that first update the runs diverge for a reason that has nothing to do with the kernels:
// Adam's first step moves every weight by about the learning rate times the SIGN of its gradient,
// and the sign of a gradient within rounding noise of zero is the noise's. So the later steps are
// checked for what must hold anyway (finite losses, no step skipped that the reference did not
// skip) and printed next to the reference and FP32 for a reader, not held to a distance.
// Without the hardware for a dtype the case prints SKIP. The *_emulated cases switch the hardware
// off (a test hook) and hold the emulated path — widened operands on the fp32 run's oneDNN
// convolutions — to the same reference by the same rules, on every CPU.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amp/engine.h"
#include "training/optim.h"
#include "training/run_config.h"
#include "training/step.h"
#include "core/rng.h"
#include "kernels/backend.h"
#include "kernels/cpu/isa.h"
#include "models/amp_view.h"
#include "models/model.h"
#include "tests/training/training_test_util.h"

#define STEPS 4

static char *g_dir;
static char g_cfg[512];

static void setup_data(void) { g_dir = at_setup_digits(g_cfg, sizeof g_cfg, "\"epoch_num\": 1,"); }

// Losses of STEPS steps under the overrides; skipped[s] = the step overflowed.
static void run_steps(const char *const *ov, int nov, double *loss, double *gnorm, int *skipped) {
    OcrConfig *cfg;
    RunConfig rc;
    ck_assert_msg(run_config_load(&cfg, &rc, g_cfg, ov, nov, RUN_NEED_TRAIN) == OCR_OK, "%s", ocr_last_error());
    ocr_backends_init(rc.threads);
    OcrModel *m;
    ck_assert_msg(ocr_model_from_config(&m, cfg) == OCR_OK, "%s", ocr_last_error());
    AmpConfig ac;
    ck_assert(amp_config_from_config(&ac, cfg) == OCR_OK);
    AmpEngine amp;
    amp_engine_init(&amp, &ac);
    ck_assert(ocr_amp_attach(&amp, ocr_model_ops(m), ocr_model_params(m), ocr_model_stats(m)) == OCR_OK);
    if (amp.cfg.policy.level == OCR_AMP_O1) ck_assert_int_eq(ocr_model_set_cast_cache(m, &amp.cache), OCR_OK);
    Optimizer o;
    ck_assert(optim_init(&o, &rc.optim, ocr_model_params(m)) == OCR_OK);
    StepCtx sc;
    const int B = 8, L = 3, H = 32, W = 64;
    ck_assert(step_ctx_init(&sc, m, &amp, &o, B, 0) == OCR_OK);
    // The loader's kind of batch: uint8 pixels at full width (the step normalises them).
    uint8_t *px = malloc((size_t)B * H * W * 3);
    int32_t labels[8 * 3], lengths[8], widths[8];
    for (int b = 0; b < B; b++) {
        widths[b] = W;
        lengths[b] = 1 + b % 3;
        for (int k = 0; k < L; k++) labels[b * L + k] = k < lengths[b] ? 1 + (b * 7 + k * 3) % 10 : 0;
    }
    FeedBatch fb = {.capacity = B, .count = B, .height = H, .width = W, .channels = 3, .max_len = L,
                    .pixels = px, .labels = labels, .lengths = lengths, .widths = widths};
    FeedDeviceBatch db;
    feed_batch_view(&fb, &db);
    for (int s = 0; s < STEPS; s++) {
        for (size_t i = 0; i < (size_t)B * H * W * 3; i++) px[i] = (uint8_t)(ocr_rng_uniform(31, (uint64_t)s, i) * 256.0f);
        StepOutcome out;
        ck_assert_msg(step_run(&sc, &db, 0.01, &out) == OCR_OK, "%s", ocr_last_error());
        loss[s] = out.loss;
        gnorm[s] = out.grad_norm;
        skipped[s] = out.skipped;
    }
    free(px);
    step_ctx_free(&sc);
    optim_free(&o);
    amp_engine_free(&amp);
    ocr_model_free(m);
    ocr_config_free(cfg);
}

void ocr_cpu_force_emulated(int on);

static void compare(const char *level, const char *dtype, ocr_dtype_t dt, int emulated) {
    ocr_cpu_force_emulated(emulated);
    if (emulated && !ocr_cpu_f32_conv_onednn()) {
        printf("SKIP: fp32 convolutions take sgemm here, so the emulated path is the reference\n");
        return;
    }
    if (!emulated && !ocr_cpu_lp_native(dt)) {
        printf("SKIP: %s is emulated here (%s)\n", dtype, ocr_cpu_isa_emulated_reason(dt));
        return;
    }
    const char *path = emulated ? "emulated" : "native";
    char lv[64], dv[64];
    snprintf(lv, sizeof lv, "Global.amp_level=%s", level);
    snprintf(dv, sizeof dv, "Global.amp_dtype=%s", dtype);
    const char *fp32[] = {"Global.use_amp=false"};
    // A moderate initial loss scale so that fp16's first steps are not all skipped on random data.
    const char *sc = dt == OCR_F16 ? "Global.scale_loss=128" : "Global.seed=5";
    const char *ref[] = {"Global.use_amp=true", lv, dv, sc, "Global.cpu_exact_numerics=true"};
    const char *nat[] = {"Global.use_amp=true", lv, dv, sc, "Global.cpu_exact_numerics=false"};
    double l32[STEPS], lref[STEPS], lnat[STEPS], g32[STEPS], gref[STEPS], gnat[STEPS];
    int s32[STEPS], sref[STEPS], snat[STEPS];
    run_steps(fp32, 1, l32, g32, s32);
    run_steps(ref, 5, lref, gref, sref);
    run_steps(nat, 5, lnat, gnat, snat);
    const double unit = ldexp(1.0, dt == OCR_F16 ? -11 : -8);  // one rounding of the storage dtype
    for (int s = 0; s < STEPS; s++)
        printf("%s %s step %d: loss fp32 %.7f  reference %.7f  %s %.7f | gradient norm fp32 %.6g  reference "
               "%.6g  %s %.6g%s\n", dtype, level, s, l32[s], lref[s], path, lnat[s], g32[s], gref[s], path, gnat[s],
               sref[s] ? " (skipped in the reference)" : "");
    if (!sref[0]) {
        const double dl = fabs(lnat[0] - lref[0]) / fabs(lref[0]), dg = fabs(gnat[0] - gref[0]) / gref[0];
        printf("%s %s first step: %s vs reference: loss %.2g (bound %.2g), gradient norm %.2g relative; the "
               "storage rounding (reference vs FP32): loss %.2g, gradient norm %.2g (the bound)\n", dtype, level, path,
               dl, unit, dg,
               fabs(lref[0] - l32[0]) / fabs(l32[0]), fabs(gref[0] - g32[0]) / g32[0]);
        fflush(stdout);  // a failed check ends the forked test before stdio would flush
        ck_assert_msg(!snat[0], "%s %s: the %s first step overflowed, the reference's did not", dtype, level, path);
        ck_assert_msg(dl <= unit, "%s %s first step: %s loss %.7f vs reference %.7f: %.3g relative (> %.3g)",
                      dtype, level, path, lnat[0], lref[0], dl, unit);
        const double storage = fabs(gref[0] - g32[0]) / gref[0];
        ck_assert_msg(dg <= storage, "%s %s first step: %s gradient norm %.7g vs reference %.7g: %.3g relative, "
                      "more than rounding the storage moves it from FP32 (%.3g)", dtype, level, path, gnat[0], gref[0], dg,
                      storage);
    }
    for (int s = 0; s < STEPS; s++) {
        ck_assert_msg(isfinite(lnat[s]), "%s %s step %d: %s loss %g", dtype, level, s, path, lnat[s]);
        ck_assert_msg(snat[s] <= sref[s], "%s %s step %d: the %s path overflowed, the reference did not", dtype,
                      level, s, path);
    }
    ocr_backend_set_cpu_exact_numerics(0);
    ocr_cpu_force_emulated(0);
}

START_TEST(test_bf16_o2) { compare("O2", "bfloat16", OCR_BF16, 0); }
END_TEST
START_TEST(test_bf16_o1) { compare("O1", "bfloat16", OCR_BF16, 0); }
END_TEST
START_TEST(test_fp16_o2) { compare("O2", "float16", OCR_F16, 0); }
END_TEST
START_TEST(test_bf16_o2_emulated) { compare("O2", "bfloat16", OCR_BF16, 1); }
END_TEST
START_TEST(test_fp16_o2_emulated) { compare("O2", "float16", OCR_F16, 1); }
END_TEST

int main(void) {
    Suite *s = suite_create("cpu_native_amp");
    TCase *tc = tcase_create("steps");
    tcase_add_unchecked_fixture(tc, setup_data, NULL);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, test_bf16_o2);
    tcase_add_test(tc, test_bf16_o1);
    tcase_add_test(tc, test_fp16_o2);
    tcase_add_test(tc, test_bf16_o2_emulated);
    tcase_add_test(tc, test_fp16_o2_emulated);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}
