// bench_train_gpu: training throughput and peak memory on a GPU — the trainer's own step
// (training/step.c: uint8 batch normalised on the device, CTC, fused unscale/check/Adam, device-side
// loss scaler) on synthetic batches, per config × precision × batch × launch mode.
//
//   bench_train_gpu [-c CFG]... [--precisions fp32,fp16-o2,bf16-o2] [--batch 128] [--no-max] [--max-cap 1024]
//                   [--height 48] [--width 320] [--iters 30] [--warmup 3] [--modes eager,graph]
//                   [--device cuda:0] [--json FILE]
//
// Defaults: configs/rec_ppocrv3_en.json and configs/rec_ppocrv4_ch.json at 48×320; FP32,
// FP16-O2 and BF16-O2; batch 128 and the largest batch the capacity planner finds for the
// device's free memory (less 10 %, at most --max-cap so a run fits a time budget; planned at the config's Train input size, which is 48×320 in
// both); eager launches and the CUDA graph. Each line: samples/s
// over the timed steps (one step in flight, as in the trainer), the median step time, and the
// tracked peak device memory (all categories) with its activations share. --json writes one
// object per line. A precision the GPU cannot run (bf16 below compute capability 8.0) is
// reported as skipped. Without a usable GPU it says so and exits 0.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amp/engine.h"
#include "training/capacity.h"
#include "training/feed.h"
#include "training/optim.h"
#include "training/run_config.h"
#include "training/step.h"
#include "training/trainer.h"
#include "core/config.h"
#include "core/memory.h"
#include "core/timer.h"
#include "kernels/backend.h"
#include "kernels/ops.h"
#include "models/model.h"
#include "models/amp_view.h"
#ifdef OCR_HAVE_CUDA
#include "kernels/cuda/cuda_backend.h"
#endif

typedef struct {
    const char *configs[8];
    int n_configs;
    char precisions[128];
    char modes[64];
    int batch, with_max, max_cap, height, width, iters, warmup;
    const char *device;
    FILE *json;
} Args;

typedef struct {
    double samples_per_s, median_step_s;
    int64_t peak_total, peak_act;
    int64_t captures, replays;
    int skipped_steps;
} Result;

#ifdef OCR_HAVE_CUDA
static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

// One measurement: a fresh model, engine and optimizer for the precision, synthetic batches.
static ocr_status_t measure(const char *cfg_path, const char *precision, int batch, int graph, const Args *a,
                            Result *res) {
    memset(res, 0, sizeof *res);
    const char *const *pov = capacity_precision_overrides(precision);
    if (!pov) return ocr_set_error(OCR_ERR_INVALID_ARG, "unknown precision %s", precision);
    char dev[64];
    snprintf(dev, sizeof dev, "Global.device=%s", a->device);
    const char *ov[16];
    int n = 0;
    for (int i = 0; pov[i]; i++) ov[n++] = pov[i];
    ov[n++] = dev;
    ov[n++] = graph ? "Global.cuda_graph=true" : "Global.cuda_graph=false";
    OcrConfig *cfg;
    RunConfig rc;
    OCR_TRY(run_config_load(&cfg, &rc, cfg_path, ov, n, 0));
    ocr_device_t d;
    ocr_status_t st = ocr_device_parse(a->device, &d);
    OcrModel *m = NULL;
    AmpEngine amp;
    int amp_ok = 0, optim_ok = 0, step_ok = 0;
    Optimizer optim;
    StepCtx sc;
    AmpConfig ac;
    TrainingDeviceInfo info;
    OcrTensor img = {0}, wid = {0}, lab = {0}, len = {0};
    if (st == OCR_OK) st = ocr_model_from_config(&m, cfg);
    if (st == OCR_OK) st = amp_config_from_config(&ac, cfg);
    if (st == OCR_OK) {
        ocr_dtype_t want = ac.policy.level == OCR_AMP_O0 ? OCR_F32 : ac.policy.dtype;
        st = training_device_prepare(a->device, want, rc.allow_tf32, &info);
        if (st == OCR_OK) st = ocr_model_to_device(m, d);
        if (st != OCR_OK) amp_config_free(&ac);
    }
    if (st == OCR_OK) {
        amp_engine_init(&amp, &ac);
        amp_ok = 1;
        st = ocr_amp_attach(&amp, ocr_model_ops(m), ocr_model_params(m), ocr_model_stats(m));
    }
    if (st == OCR_OK) st = optim_init(&optim, &rc.optim, ocr_model_params(m));
    optim_ok = st == OCR_OK;
    if (st == OCR_OK) st = step_ctx_init(&sc, m, &amp, &optim, batch, 0);
    step_ok = st == OCR_OK;
    int iters = a->iters, total = a->warmup + a->iters;
    if (st == OCR_OK) {
        StepDeviceOptions so = {graph, total};
        st = step_device_init(&sc, &so);
    }
    // A synthetic batch: pixels and labels from a fixed generator, full widths.
    const int H = a->height, W = a->width, C = m ? ocr_model_arch(m)->in_channels : 3;
    const int L = 25, classes = m ? ocr_model_arch(m)->num_classes : 2;
    if (st == OCR_OK) st = ocr_tensor_alloc(&img, OCR_U8, d, 4, (int64_t[]){batch, H, W, C}, OCR_MEM_DATA);
    if (st == OCR_OK) st = ocr_tensor_alloc(&wid, OCR_I32, d, 1, (int64_t[]){batch}, OCR_MEM_DATA);
    if (st == OCR_OK) st = ocr_tensor_alloc(&lab, OCR_I32, d, 2, (int64_t[]){batch, L}, OCR_MEM_DATA);
    if (st == OCR_OK) st = ocr_tensor_alloc(&len, OCR_I32, d, 1, (int64_t[]){batch}, OCR_MEM_DATA);
    // The host copies of widths, labels and lengths stay for the step's guidance branch.
    int32_t *hw = malloc((size_t)batch * sizeof *hw), *hl = calloc((size_t)batch * L, sizeof *hl),
            *hn = malloc((size_t)batch * sizeof *hn);
    if (st == OCR_OK && (!hw || !hl || !hn)) st = ocr_set_error(OCR_ERR_OOM, "out of host memory");
    if (st == OCR_OK) {
        size_t np = (size_t)batch * H * W * C;
        uint8_t *px = malloc(np);
        uint64_t x = 88172645463325252ull;
        for (size_t i = 0; i < np; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            px[i] = (uint8_t)x;
        }
        for (int b = 0; b < batch; b++) {
            hw[b] = W;
            hn[b] = 10;
            for (int j = 0; j < 10; j++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                hl[(size_t)b * L + j] = 1 + (int32_t)(x % (uint64_t)(classes - 1));
            }
        }
        ocr_copy_bytes(d, img.data, ocr_cpu(), px, np);
        ocr_copy_bytes(d, wid.data, ocr_cpu(), hw, (size_t)batch * sizeof *hw);
        ocr_copy_bytes(d, lab.data, ocr_cpu(), hl, (size_t)batch * L * sizeof *hl);
        ocr_copy_bytes(d, len.data, ocr_cpu(), hn, (size_t)batch * sizeof *hn);
        free(px);
    }
    FeedDeviceBatch db = {.images = img, .widths = wid, .labels = lab, .lengths = len, .count = batch, .max_len = L,
                          .host_labels = hl, .host_lengths = hn, .host_widths = hw};
    double *times = malloc((size_t)(total > 0 ? total : 1) * sizeof *times);
    if (st == OCR_OK) ocr_mem_reset_peak(d);
    double t0 = 0, t_last = ocr_now_seconds();
    int collected = 0;
    for (int i = 0; st == OCR_OK && i < total; i++) {
        step_mode_t mode;
        st = step_enqueue(&sc, &db, 1e-4, &mode);
        // One step in flight, as in the trainer: collect the previous one.
        while (st == OCR_OK && step_pending(&sc) > 1) {
            StepOutcome o;
            st = step_collect(&sc, &o);
            double now = ocr_now_seconds();
            if (collected >= a->warmup) times[collected - a->warmup] = now - t_last;
            if (collected == a->warmup - 1 || (a->warmup == 0 && collected == 0)) t0 = now;
            res->skipped_steps += o.skipped;
            t_last = now;
            collected++;
        }
    }
    while (st == OCR_OK && step_pending(&sc) > 0) {
        StepOutcome o;
        st = step_collect(&sc, &o);
        double now = ocr_now_seconds();
        if (collected >= a->warmup) times[collected - a->warmup] = now - t_last;
        if (collected == a->warmup - 1) t0 = now;
        res->skipped_steps += o.skipped;
        t_last = now;
        collected++;
    }
    if (st == OCR_OK) {
        double secs = t_last - t0;
        res->samples_per_s = secs > 0 ? (double)batch * iters / secs : 0;
        qsort(times, (size_t)iters, sizeof *times, cmp_double);
        res->median_step_s = iters ? (iters % 2 ? times[iters / 2] : 0.5 * (times[iters / 2 - 1] + times[iters / 2]))
                                   : 0;
        OcrMemStats ms = ocr_mem_stats(d);
        res->peak_total = ms.peak_total;
        res->peak_act = ms.peak[OCR_MEM_ACTIVATIONS];
        step_graph_counts(&sc, &res->captures, &res->replays);
    }
    free(times);
    free(hw);
    free(hl);
    free(hn);
    ocr_tensor_free(&img);
    ocr_tensor_free(&wid);
    ocr_tensor_free(&lab);
    ocr_tensor_free(&len);
    if (step_ok) step_ctx_free(&sc);
    if (optim_ok) optim_free(&optim);
    if (amp_ok) amp_engine_free(&amp);
    ocr_model_free(m);
    ocr_config_free(cfg);
    ocr_cuda_release_buffers();
    return st;
}
#endif

static void usage(void) {
    fprintf(stderr, "usage: bench_train_gpu [-c CFG]... [--precisions fp32,fp16-o2,bf16-o2] [--batch 128] [--no-max]\n"
                    "       [--max-cap 1024]\n"
                    "       [--height 48] [--width 320] [--iters 30] [--warmup 3] [--modes eager,graph]\n"
                    "       [--device cuda:0] [--json FILE]\n");
}

int main(int argc, char **argv) {
    Args a;
    memset(&a, 0, sizeof a);
    snprintf(a.precisions, sizeof a.precisions, "fp32,fp16-o2,bf16-o2");
    snprintf(a.modes, sizeof a.modes, "eager,graph");
    a.batch = 128, a.with_max = 1, a.max_cap = 1024, a.height = 48, a.width = 320, a.iters = 30, a.warmup = 3;
    a.device = "cuda:0";
    const char *json_path = NULL;
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(k, "--no-max")) { a.with_max = 0; continue; }
        if (!v) { usage(); return 2; }
        if (!strcmp(k, "-c") && a.n_configs < 8) a.configs[a.n_configs++] = v;
        else if (!strcmp(k, "--precisions")) snprintf(a.precisions, sizeof a.precisions, "%s", v);
        else if (!strcmp(k, "--modes")) snprintf(a.modes, sizeof a.modes, "%s", v);
        else if (!strcmp(k, "--batch")) a.batch = atoi(v);
        else if (!strcmp(k, "--max-cap")) a.max_cap = atoi(v);
        else if (!strcmp(k, "--height")) a.height = atoi(v);
        else if (!strcmp(k, "--width")) a.width = atoi(v);
        else if (!strcmp(k, "--iters")) a.iters = atoi(v);
        else if (!strcmp(k, "--warmup")) a.warmup = atoi(v);
        else if (!strcmp(k, "--device")) a.device = v;
        else if (!strcmp(k, "--json")) json_path = v;
        else { usage(); return 2; }
        i++;
    }
    if (a.batch < 1 || a.iters < 1 || a.warmup < 2 || a.height < 1 || a.width < 1) {
        fprintf(stderr, "bench_train_gpu: --batch and --iters must be >= 1, --warmup >= 2 (a graph captures on its "
                        "second step)\n");
        return 2;
    }
    if (!a.n_configs) {
        a.configs[a.n_configs++] = "configs/rec_ppocrv3_en.json";
        a.configs[a.n_configs++] = "configs/rec_ppocrv4_ch.json";
    }
    ocr_backends_init(0);
#ifndef OCR_HAVE_CUDA
    printf("SKIP: bench_train_gpu: this build has no CUDA backend\n");
    (void)json_path;
    return 0;
#else
    if (ocr_cuda_device_count() == 0) {
        printf("SKIP: bench_train_gpu: no usable CUDA device\n");
        return 0;
    }
    if (json_path && !(a.json = fopen(json_path, "w"))) {
        fprintf(stderr, "bench_train_gpu: cannot write %s\n", json_path);
        return 1;
    }
    TrainingDeviceInfo info;
    if (training_device_prepare(a.device, OCR_F32, 0, &info) != OCR_OK) {
        fprintf(stderr, "bench_train_gpu: %s\n", ocr_last_error());
        return 1;
    }
    printf("%s: %s, compute capability %d.%d, %.1f GiB, driver %d; %s\n", a.device, info.name, info.cc_major,
           info.cc_minor, (double)info.total_memory / (1 << 30), info.driver_version, info.libraries);
    printf("%-28s %-8s %7s %-6s %12s %10s %12s %12s\n", "config", "prec", "batch", "mode", "samples/s", "step ms",
           "peak MiB", "activ MiB");
    int failures = 0;
    for (int c = 0; c < a.n_configs; c++) {
        char precs[128];
        snprintf(precs, sizeof precs, "%s", a.precisions);
        for (char *save = NULL, *p = strtok_r(precs, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
            int batches[2] = {a.batch, 0}, nb = 1;
            if (a.with_max) {
                OcrConfig *cfg;
                RunConfig rc;
                OcrCudaDeviceInfo ci;
                CapacityPrecision cp;
                // Planned at the config's Train input size (48x320 in both default configs).
                if (ocr_cuda_device_info(0, &ci) == 0 && run_config_load(&cfg, &rc, a.configs[c], NULL, 0, 0) == OCR_OK) {
                    if (capacity_plan(cfg, p, (int64_t)((double)ci.free_memory * 0.9), &cp) == OCR_OK &&
                        cp.max_batch > 0) {
                        int64_t mb = cp.max_batch < a.max_cap ? cp.max_batch : a.max_cap;
                        printf("%s %s: the planner's largest batch for %.1f GiB is %lld%s\n", a.configs[c], p,
                               0.9 * (double)ci.free_memory / (1 << 30), (long long)cp.max_batch,
                               mb < cp.max_batch ? " (capped by --max-cap)" : "");
                        if (mb != a.batch) batches[nb++] = (int)mb;
                    }
                    ocr_config_free(cfg);
                } else {
                    fprintf(stderr, "bench_train_gpu: %s: capacity plan: %s\n", a.configs[c], ocr_last_error());
                }
            }
            for (int bi = 0; bi < nb; bi++) {
                char modes[64];
                snprintf(modes, sizeof modes, "%s", a.modes);
                for (char *s2 = NULL, *mname = strtok_r(modes, ",", &s2); mname; mname = strtok_r(NULL, ",", &s2)) {
                    int graph = strcmp(mname, "graph") == 0;
                    Result r;
                    ocr_status_t st = measure(a.configs[c], p, batches[bi], graph, &a, &r);
                    if (st != OCR_OK) {
                        printf("%-28s %-8s %7d %-6s skipped: %s\n", a.configs[c], p, batches[bi], mname,
                               ocr_last_error());
                        if (st != OCR_ERR_UNSUPPORTED) failures++;
                        if (a.json)
                            fprintf(a.json, "{\"config\":\"%s\",\"precision\":\"%s\",\"batch\":%d,\"mode\":\"%s\","
                                    "\"error\":\"%s\"}\n", a.configs[c], p, batches[bi], mname,
                                    st == OCR_ERR_UNSUPPORTED ? "unsupported" : "failed");
                        continue;
                    }
                    printf("%-28s %-8s %7d %-6s %12.1f %10.2f %12.1f %12.1f%s\n", a.configs[c], p, batches[bi], mname,
                           r.samples_per_s, 1e3 * r.median_step_s, (double)r.peak_total / (1 << 20),
                           (double)r.peak_act / (1 << 20), bi ? "  (largest batch)" : "");
                    if (graph && r.replays == 0) printf("    (no graph replay: the step ran eagerly)\n");
                    if (a.json)
                        fprintf(a.json,
                                "{\"config\":\"%s\",\"precision\":\"%s\",\"batch\":%d,\"largest\":%s,\"mode\":\"%s\","
                                "\"samples_per_s\":%.3f,\"median_step_s\":%.6f,\"peak_memory_bytes\":%lld,"
                                "\"peak_activation_bytes\":%lld,\"bytes_per_sample\":%.1f,\"graph_replays\":%lld,"
                                "\"skipped_steps\":%d,\"height\":%d,\"width\":%d}\n",
                                a.configs[c], p, batches[bi], bi ? "true" : "false", mname, r.samples_per_s,
                                r.median_step_s, (long long)r.peak_total, (long long)r.peak_act,
                                (double)r.peak_total / batches[bi], (long long)r.replays, r.skipped_steps, a.height,
                                a.width);
                }
            }
        }
    }
    if (a.json) fclose(a.json);
    return failures ? 1 : 0;
#endif
}
