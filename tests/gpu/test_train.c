// Training on the GPU end to end (training/trainer.c, training/step.c, kernels/cuda/train_step.cu): a short
// run on the GPU follows the CPU run's loss curve (FP32 closely, FP16-O2 loosely); a replayed CUDA
// graph equals eager launches bit for bit (dropout included); the model's forward on the GPU
// equals the CPU's; a run resumed on the GPU continues the uninterrupted one. Skips (and passes)
// without CUDA in the build or without a usable GPU.
#include <check.h>
#include <cjson/cJSON.h>
#include <math.h>

#include "amp/scaler.h"
#include "cli/commands.h"
#include "training/feed.h"
#include "training/run_config.h"
#include "training/step.h"
#include "training/trainer.h"
#include "core/fileio.h"
#include "models/model.h"
#include "tests/training/training_test_util.h"
#include "tests/gpu/gpu_test.h"

#ifdef OCR_HAVE_CUDA
#include "kernels/cuda/train_step.h"

static char *g_dir;
static char g_cfg[512];

static void setup_data(void) { g_dir = at_setup_digits(g_cfg, sizeof g_cfg, "\"epoch_num\": 2,"); }

// Runs `train` in-process on the config with extra arguments into dir/<tag>.
static void run_train(const char *tag, const char *const *extra, char *out, size_t cap) {
    snprintf(out, cap, "%s/%s", g_dir, tag);
    char ov[700];
    snprintf(ov, sizeof ov, "Global.save_model_dir=%s", out);
    const char *args[40];
    int n = 0;
    const char *base[] = {"train", "-c", g_cfg, "-o", ov, NULL};
    for (int i = 0; base[i]; i++) args[n++] = base[i];
    for (int i = 0; extra && extra[i]; i++) args[n++] = extra[i];
    args[n] = NULL;
    ck_assert_msg(at_run(cmd_train, args) == 0, "%s: train failed", tag);
}

// Loss curves of two runs: the first `strict` steps within rel_strict, every step within rel_all.
static void compare_curves(const char *what, const char *a_dir, const char *b_dir, int strict, double rel_strict,
                           double rel_all) {
    int na, nb;
    double *a = at_read_losses(a_dir, &na, NULL), *b = at_read_losses(b_dir, &nb, NULL);
    ck_assert_int_eq(na, nb);
    ck_assert_int_gt(na, 8);
    double worst = 0;
    for (int i = 0; i < na; i++) {
        ck_assert_msg(isfinite(a[i]) && isfinite(b[i]), "%s: step %d loss %g / %g", what, i + 1, a[i], b[i]);
        double rel = fabs(a[i] - b[i]) / fmax(fabs(a[i]), 1e-3);
        if (rel > worst) worst = rel;
        ck_assert_msg(rel <= (i < strict ? rel_strict : rel_all), "%s: step %d loss %.7g (CPU) vs %.7g (GPU)", what,
                      i + 1, a[i], b[i]);
    }
    printf("%s: %d steps, worst relative loss difference %.3g\n", what, na, worst);
    free(a);
    free(b);
}

START_TEST(test_fp32_curve_matches_cpu) {
    if (!gpu_available("gpu_train")) return;
    char cpu[600], gpu[600];
    const char *c[] = {"-o", "Global.device=cpu", NULL};
    const char *g[] = {"-o", "Global.device=cuda:0", "Global.cuda_graph=false", NULL};
    run_train("fp32_cpu", c, cpu, sizeof cpu);
    run_train("fp32_gpu", g, gpu, sizeof gpu);
    // The same function on both: reductions differ in order only (fp32 ulps that grow slowly).
    compare_curves("fp32 GPU vs CPU", cpu, gpu, 4, 1e-4, 2e-2);
}
END_TEST

START_TEST(test_fp16_o2_curve_matches_cpu) {
    if (!gpu_available("gpu_train")) return;
    char cpu[600], gpu[600];
    const char *c[] = {"--use_amp", "true", "--amp_level", "O2", "--amp_dtype", "float16", "-o", "Global.device=cpu",
                       NULL};
    const char *g[] = {"--use_amp", "true", "--amp_level", "O2", "--amp_dtype", "float16", "-o",
                       "Global.device=cuda:0", NULL};
    run_train("fp16_cpu", c, cpu, sizeof cpu);
    run_train("fp16_gpu", g, gpu, sizeof gpu);
    // f16 roundings after different summation orders: loosely.
    compare_curves("fp16-O2 GPU vs CPU", cpu, gpu, 4, 5e-3, 1e-1);
}
END_TEST

// The whole step as a graph replays exactly what eager launches compute, dropout masks included
// (train_step.h's device-side dropout counter).
static void graph_case(const char *tag, const char *const *amp) {
    const char *args_e[16], *args_g[16];
    int n = 0;
    for (int i = 0; amp && amp[i]; i++) args_e[n] = args_g[n] = amp[i], n++;
    const char *tail_e[] = {"-o", "Global.device=cuda:0", "Global.cuda_graph=false",
                            "Architecture.Neck.drop_rate=0.2", "Architecture.Neck.attn_drop_rate=0.2", NULL};
    const char *tail_g[] = {"-o", "Global.device=cuda:0", "Global.cuda_graph=true",
                            "Architecture.Neck.drop_rate=0.2", "Architecture.Neck.attn_drop_rate=0.2", NULL};
    int m = n;
    for (int i = 0; tail_e[i]; i++) args_e[m++] = tail_e[i];
    args_e[m] = NULL;
    m = n;
    for (int i = 0; tail_g[i]; i++) args_g[m++] = tail_g[i];
    args_g[m] = NULL;
    char eager[600], graph[600], te[64], tg[64];
    snprintf(te, sizeof te, "%s_eager", tag);
    snprintf(tg, sizeof tg, "%s_graph", tag);
    run_train(te, args_e, eager, sizeof eager);
    run_train(tg, args_g, graph, sizeof graph);
    int na, nb;
    double *a = at_read_losses(eager, &na, NULL), *b = at_read_losses(graph, &nb, NULL);
    ck_assert_int_eq(na, nb);
    for (int i = 0; i < na; i++)
        ck_assert_msg(a[i] == b[i] || (isnan(a[i]) && isnan(b[i])), "%s: step %d loss %.9g (eager) vs %.9g (graph)",
                      tag, i + 1, a[i], b[i]);
    free(a);
    free(b);
    char pa[800], pb[800];
    snprintf(pa, sizeof pa, "%s/latest/model.safetensors", eager);
    snprintf(pb, sizeof pb, "%s/latest/model.safetensors", graph);
    ck_assert_msg(at_same_file(pa, pb), "%s: weights after graph replays differ from eager launches", tag);
}

START_TEST(test_graph_equals_eager_fp32) {
    if (!gpu_available("gpu_train")) return;
    graph_case("graph_fp32", NULL);
}
END_TEST

START_TEST(test_graph_equals_eager_fp16_o2) {
    if (!gpu_available("gpu_train")) return;
    const char *amp[] = {"--use_amp", "true", "--amp_level", "O2", "--amp_dtype", "float16", NULL};
    graph_case("graph_fp16", amp);
}
END_TEST

// The trainer reports the graph it used (captures and replays) and the device.
START_TEST(test_graph_is_used_and_reported) {
    if (!gpu_available("gpu_train")) return;
    char ov[700];
    snprintf(ov, sizeof ov, "Global.save_model_dir=%s/graph_report", g_dir);
    const char *overrides[] = {ov, "Global.device=cuda:0", "Global.cuda_graph=true"};
    OcrConfig *cfg;
    RunConfig rc;
    ck_assert_msg(run_config_load(&cfg, &rc, g_cfg, overrides, 3, RUN_NEED_TRAIN) == OCR_OK, "%s", ocr_last_error());
    TrainOptions opt = {0};
    opt.save_checkpoints = 1;
    TrainResult res;
    ck_assert_msg(train_run(cfg, &rc, &opt, &res) == OCR_OK, "%s", ocr_last_error());
    printf("graph: %lld captures, %lld replays, %lld steps; tracked %lld bytes, runtime %lld bytes used\n",
           (long long)res.device.graph_captures, (long long)res.device.graph_replays, (long long)res.history.n_steps,
           (long long)res.memory.device_tracked_bytes, (long long)res.memory.device_runtime_used);
    ck_assert_int_ge(res.device.graph_captures, 1);
    // Fixed shapes: everything after the warm-up and capture steps (and after each evaluation,
    // which re-plans the arena) is a replay.
    ck_assert_int_ge(res.device.graph_replays, res.history.n_steps / 2);
    ck_assert(res.device.info.gpu);
    ck_assert_str_eq(res.device.name, "cuda:0");
    ck_assert_int_gt(res.memory.device_tracked_bytes, 0);
    ck_assert_int_ge(res.memory.device_runtime_used, res.memory.device_tracked_bytes);
    ck_assert_int_gt(res.memory.stats.peak[OCR_MEM_ACTIVATIONS], 0);
    train_result_free(&res);
    ocr_config_free(cfg);
}
END_TEST

START_TEST(test_forward_equals_cpu) {
    if (!gpu_available("gpu_train")) return;
    OcrConfig *cfg;
    RunConfig rc;
    ck_assert_msg(run_config_load(&cfg, &rc, g_cfg, NULL, 0, RUN_NEED_TRAIN) == OCR_OK, "%s", ocr_last_error());
    OcrModel *a, *b;
    ck_assert_int_eq(ocr_model_from_config(&a, cfg), OCR_OK);
    ck_assert_int_eq(ocr_model_from_config(&b, cfg), OCR_OK);
    ck_assert_msg(ocr_model_to_device(b, ocr_cuda_device(0)) == OCR_OK, "%s", ocr_last_error());
    const int B = 4, H = 32, W = 64, C = 3;
    size_t n = (size_t)B * H * W * C;
    uint8_t *px = malloc(n);
    int32_t widths[4] = {64, 40, 64, 17};
    for (size_t i = 0; i < n; i++) px[i] = (uint8_t)((i * 2654435761u) >> 13);
    OcrTensor hx = ocr_tensor_view(px, OCR_U8, ocr_cpu(), 4, (int64_t[]){B, H, W, C});
    OcrTensor hw = ocr_tensor_view(widths, OCR_I32, ocr_cpu(), 1, (int64_t[]){B});
    OcrTensor dx, dw;
    ck_assert_int_eq(ocr_tensor_alloc(&dx, OCR_U8, ocr_cuda_device(0), 4, hx.shape, OCR_MEM_DATA), OCR_OK);
    ck_assert_int_eq(ocr_tensor_alloc(&dw, OCR_I32, ocr_cuda_device(0), 1, hw.shape, OCR_MEM_DATA), OCR_OK);
    ocr_copy_bytes(dx.device, dx.data, ocr_cpu(), px, n);
    ocr_copy_bytes(dw.device, dw.data, ocr_cpu(), widths, sizeof widths);
    for (int training = 0; training < 2; training++) {
        ck_assert_int_eq(ocr_model_forward_u8(a, &hx, &hw, training), OCR_OK);
        ck_assert_msg(ocr_model_forward_u8(b, &dx, &dw, training) == OCR_OK, "%s", ocr_last_error());
        const OcrTensor *la = ocr_model_logits(a), *lb = ocr_model_logits(b);
        ck_assert(ocr_tensor_same_shape(la, lb));
        int64_t m = ocr_tensor_numel(la);
        float *ha = malloc((size_t)m * sizeof *ha), *hb = malloc((size_t)m * sizeof *hb);
        ocr_tensor_to_f32(la, ha);
        ocr_copy_bytes(ocr_cpu(), hb, lb->device, lb->data, (size_t)m * sizeof(float));
        double scale = 0, worst = 0;
        for (int64_t i = 0; i < m; i++) scale = fmax(scale, fabs(ha[i]));
        for (int64_t i = 0; i < m; i++) worst = fmax(worst, fabs((double)ha[i] - hb[i]));
        printf("forward (%s): max |GPU − CPU| %.3g of max |logit| %.3g\n", training ? "training" : "inference", worst,
               scale);
        ck_assert_msg(worst <= 1e-4 * scale + 1e-5, "forward differs: %g (scale %g)", worst, scale);
        free(ha);
        free(hb);
    }
    // Weights written from the GPU model read back equal on the CPU.
    char w[700];
    snprintf(w, sizeof w, "%s/gpu_weights.safetensors", g_dir);
    ck_assert_int_eq(ocr_model_save_weights(b, w), OCR_OK);
    ck_assert_int_eq(ocr_model_load_weights(a, w), OCR_OK);
    ocr_tensor_free(&dx);
    ocr_tensor_free(&dw);
    free(px);
    ocr_model_free(a);
    ocr_model_free(b);
    ocr_config_free(cfg);
}
END_TEST

// Stopped after 7 steps and resumed on the GPU: the curve continues the uninterrupted GPU run.
// In one process the runs share cuDNN's algorithm choices (ocr_cuda_release_buffers keeps them),
// so they agree to rounding; a wrong restored state (moments, masters, scaler, Adam's counter,
// dropout step) would be far outside the bound.
START_TEST(test_resume_on_gpu) {
    if (!gpu_available("gpu_train")) return;
    char a_dir[600], b_dir[600];
    const char *amp[] = {"--use_amp", "true", "--amp_level", "O2", "--amp_dtype", "float16", "-o",
                         "Global.device=cuda:0", "Global.incr_every_n_steps=3", NULL};
    run_train("resume_a", amp, a_dir, sizeof a_dir);
    const char *stop[] = {"--use_amp", "true", "--amp_level", "O2", "--amp_dtype", "float16", "--max-steps", "7",
                          "-o", "Global.device=cuda:0", "Global.incr_every_n_steps=3", NULL};
    run_train("resume_b", stop, b_dir, sizeof b_dir);
    char ck[700];
    snprintf(ck, sizeof ck, "Global.checkpoints=%s/latest", b_dir);
    const char *cont[] = {"--use_amp", "true", "--amp_level", "O2", "--amp_dtype", "float16", "-o",
                          "Global.device=cuda:0", "Global.incr_every_n_steps=3", ck, NULL};
    run_train("resume_b", cont, b_dir, sizeof b_dir);
    compare_curves("resume on the GPU", a_dir, b_dir, 16, 1e-4, 1e-4);
}
END_TEST

// ---- host checks (run without a GPU) ---------------------------------------------------------------

// The device's end-of-step update (ocr_fused_adam_step's last kernel, compiled for the host too)
// against amp/scaler.h over random overflow sequences, for the configurations that matter.
START_TEST(test_device_scaler_equals_amp_scaler) {
    AmpScalerConfig cfgs[7];
    cfgs[0] = amp_scaler_config_default();
    cfgs[1] = amp_scaler_config_pytorch();
    cfgs[2] = amp_scaler_config_paddle();
    cfgs[3] = amp_scaler_config_off();
    cfgs[4] = amp_scaler_config_default();
    cfgs[4].dynamic = 0;  // static scale
    cfgs[5] = amp_scaler_config_default();
    cfgs[5].incr_every_n_steps = 2, cfgs[5].min_scale = 0.25, cfgs[5].max_scale = 300.0, cfgs[5].init_scale = 1.0f;
    cfgs[6] = amp_scaler_config_pytorch();
    cfgs[6].incr_every_n_steps = 1, cfgs[6].init_scale = 3e38f;  // growth past the f32 range
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (int c = 0; c < 7; c++) {
        const AmpScalerConfig *k = &cfgs[c];
        AmpScaler host;
        amp_scaler_init(&host, k);
        OcrDevScalerConfig dc = {k->enabled, k->dynamic, k->incr_ratio, k->decr_ratio, k->incr_every_n_steps,
                                 k->decr_every_n_nan_or_inf, k->min_scale, k->max_scale};
        OcrDevStep d;
        memset(&d, 0, sizeof d);
        d.scale = amp_scaler_scale(&host);
        d.inv_scale = amp_scaler_inv_scale(&host);
        int64_t updates = 0;
        for (int step = 0; step < 400; step++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            int inf = (int)(x % 5 == 0) || (step > 200 && step < 215);
            float before = amp_scaler_scale(&host);
            amp_scale_event_t ev = amp_scaler_update(&host, inf);
            updates += !inf;
            d.found_inf = inf;
            ocr_dev_step_finish_host(&d, dc);
            ck_assert_msg(d.scale_used == before, "config %d step %d: scale used %g, host %g", c, step,
                          (double)d.scale_used, (double)before);
            ck_assert_msg((k->enabled ? d.scale : 1.0f) == amp_scaler_scale(&host), "config %d step %d: scale %g vs %g",
                          c, step, (double)d.scale, (double)amp_scaler_scale(&host));
            ck_assert(d.inv_scale == amp_scaler_inv_scale(&host));
            ck_assert_int_eq(d.event, (int)ev);
            ck_assert_int_eq(d.good_steps, host.good_steps);
            ck_assert_int_eq(d.bad_steps, host.bad_steps);
            ck_assert_int_eq(d.steps, host.steps);
            ck_assert_int_eq(d.overflow_steps, host.overflow_steps);
            ck_assert_int_eq(d.updates, updates);
        }
    }
}
END_TEST

// Device names: a GPU asked for without one is an error; auto falls back to the CPU.
START_TEST(test_device_resolution) {
    char dev[32];
    int n = ocr_cuda_device_count();
    ck_assert_int_eq(training_resolve_device("auto", dev, sizeof dev), OCR_OK);
    ck_assert_str_eq(dev, n > 0 ? "cuda:0" : "cpu");
    ck_assert_int_eq(training_resolve_device("gpu", dev, sizeof dev), n > 0 ? OCR_OK : OCR_ERR_NOT_FOUND);
    ck_assert_int_eq(training_resolve_device("cpu", dev, sizeof dev), OCR_OK);
    ck_assert_str_eq(dev, "cpu");
    ck_assert_int_eq(training_resolve_device("tpu", dev, sizeof dev), OCR_ERR_CONFIG);
    TrainingDeviceInfo info;
    ck_assert_int_eq(training_device_prepare("cpu", OCR_BF16, 0, &info), OCR_OK);
    ck_assert_int_eq(info.gpu, 0);
}
END_TEST

// PaddleOCR's ch_PP-OCRv4_rec.yml (MultiHead CTC + NRTR) trains on the GPU step: eagerly (the
// guidance labels change per step), with the MultiLoss split logged, the CTC part following the
// CPU run's and the NRTR part too. Both runs start from the same weights and data order; the NRTR
// branch's dropout draws its masks from the same counter-based stream on both devices, so the
// curves differ by summation order only at first (the first 2 steps within 1e-3), and by the
// growth of that through training after (every step within 5e-2).
START_TEST(test_multihead_yaml_trains_on_gpu) {
    if (!gpu_available("gpu_train")) return;
    char yml[1024], ov[6][1024], dirs[2][600];
    snprintf(yml, sizeof yml, "%s/tests/training/data/ppocrv4_ch_multihead_rec.yml", OCR_SOURCE_DIR);
    snprintf(ov[0], sizeof ov[0], "Global.character_dict_path=%s/dict.txt", g_dir);
    snprintf(ov[1], sizeof ov[1], "Train.dataset.data_dir=%s/train", g_dir);
    snprintf(ov[2], sizeof ov[2], "Train.dataset.label_file_list=[%s/train/labels.txt]", g_dir);
    snprintf(ov[3], sizeof ov[3], "Eval.dataset.data_dir=%s/eval", g_dir);
    snprintf(ov[4], sizeof ov[4], "Eval.dataset.label_file_list=[%s/eval/labels.txt]", g_dir);
    const char *device[2] = {"Global.device=cpu", "Global.device=cuda:0"};
    for (int k = 0; k < 2; k++) {
        snprintf(dirs[k], sizeof dirs[k], "%.580s/mh_%s", g_dir, k ? "gpu" : "cpu");
        snprintf(ov[5], sizeof ov[5], "Global.save_model_dir=%.580s", dirs[k]);
        const char *a[] = {"train", "-c", yml, "-o", ov[0], ov[1], ov[2], ov[3], ov[4], ov[5], device[k],
                           "Train.sampler.first_bs=4", "Train.loader.num_workers=1", "Train.loader.shuffle=false",
                           "Train.dataset.transforms.1.RecConAug.prob=0", "Global.seed=7", "--max-steps", "10", NULL};
        ck_assert_msg(at_run(cmd_train, a) == 0, "MultiHead train on %s failed", device[k]);
    }
    double *parts[2][2];
    int n[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        char p[800];
        snprintf(p, sizeof p, "%.580s/metrics.jsonl", dirs[k]);
        char *text;
        size_t size;
        ck_assert(ocr_read_file(p, &text, &size) == OCR_OK);
        parts[k][0] = malloc(64 * sizeof(double));
        parts[k][1] = malloc(64 * sizeof(double));
        for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
            cJSON *o = cJSON_Parse(line);
            const cJSON *c = cJSON_GetObjectItem(o, "loss_ctc"), *g = cJSON_GetObjectItem(o, "loss_gtc");
            if (cJSON_IsNumber(c) && cJSON_IsNumber(g) && n[k] < 64) {
                parts[k][0][n[k]] = c->valuedouble;
                parts[k][1][n[k]] = g->valuedouble;
                n[k]++;
            }
            cJSON_Delete(o);
        }
        free(text);
    }
    ck_assert_int_eq(n[0], 10);
    ck_assert_int_eq(n[1], 10);
    for (int i = 0; i < 10; i++)
        for (int q = 0; q < 2; q++) {
            double a = parts[0][q][i], b = parts[1][q][i], rel = fabs(a - b) / fmax(fabs(a), 1e-3);
            ck_assert_msg(isfinite(b) && b > 0, "GPU step %d: %s %g", i + 1, q ? "loss_gtc" : "loss_ctc", b);
            ck_assert_msg(rel <= (i < 2 ? 1e-3 : 5e-2), "step %d %s: CPU %.7g GPU %.7g", i + 1,
                          q ? "loss_gtc" : "loss_ctc", a, b);
        }
    for (int k = 0; k < 2; k++) {
        free(parts[k][0]);
        free(parts[k][1]);
    }
}
END_TEST

static Suite *host_suite(void) {
    Suite *s = suite_create("gpu_train_host");
    TCase *tc = tcase_create("host");
    tcase_add_test(tc, test_device_scaler_equals_amp_scaler);
    tcase_add_test(tc, test_device_resolution);
    suite_add_tcase(s, tc);
    return s;
}

static Suite *suite(void) {
    Suite *s = suite_create("gpu_train");
    TCase *tc = tcase_create("t");
    tcase_add_unchecked_fixture(tc, setup_data, NULL);
    tcase_set_timeout(tc, 1200);
    tcase_add_test(tc, test_forward_equals_cpu);
    tcase_add_test(tc, test_fp32_curve_matches_cpu);
    tcase_add_test(tc, test_fp16_o2_curve_matches_cpu);
    tcase_add_test(tc, test_graph_equals_eager_fp32);
    tcase_add_test(tc, test_graph_equals_eager_fp16_o2);
    tcase_add_test(tc, test_graph_is_used_and_reported);
    tcase_add_test(tc, test_resume_on_gpu);
    tcase_add_test(tc, test_multihead_yaml_trains_on_gpu);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    ocr_backends_init(0);
    int host = gpu_run_suite(host_suite());
    if (!gpu_available("gpu_train")) return host;
    int dev = gpu_run_suite(suite());
    return host == EXIT_SUCCESS ? dev : host;
}

#else

// Without CUDA in the build: every GPU entry point says so instead of failing later.
START_TEST(test_no_cuda_build_refuses_gpu) {
    char dev[32];
    ck_assert_int_eq(training_resolve_device("gpu", dev, sizeof dev), OCR_ERR_UNSUPPORTED);
    ck_assert_int_eq(training_resolve_device("cuda:1", dev, sizeof dev), OCR_ERR_UNSUPPORTED);
    ck_assert_int_eq(training_resolve_device("auto", dev, sizeof dev), OCR_OK);
    ck_assert_str_eq(dev, "cpu");
    TrainingDeviceInfo info;
    ck_assert_int_eq(training_device_prepare("cuda:0", OCR_F16, 0, &info), OCR_ERR_UNSUPPORTED);
    FeedUpload *u;
    ck_assert_int_eq(feed_upload_open(&u, ocr_cuda_device(0), 1, 32, 32, 3, 4), OCR_ERR_UNSUPPORTED);
    StepCtx sc;
    memset(&sc, 0, sizeof sc);
    StepDeviceOptions so = {1, 10};
    ck_assert_int_eq(step_device_init(&sc, &so), OCR_ERR_UNSUPPORTED);
    int64_t c, r;
    step_graph_counts(&sc, &c, &r);
    ck_assert_int_eq(c + r, 0);
}
END_TEST

int main(void) {
    printf("SKIP: gpu_train: this build has no CUDA backend; the GPU training checks did not run (the CPU-build "
           "checks below do)\n");
    Suite *s = suite_create("gpu_train_cpu_build");
    TCase *tc = tcase_create("host");
    tcase_add_test(tc, test_no_cuda_build_refuses_gpu);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
