// bench_model: forward and forward+backward throughput of a whole recognition network on the
// CPU, medians over timed iterations.
//
//   bench_model -c configs/rec_ppocrv3_en.json [--batch 32] [--height 48] [--width 320]
//               [--dtype f32|f16|bf16] [--iters 5] [--warmup 1] [--threads N]
//               [--mode both|fwd|train] [--profile] [--profile-top N] [--keep-activations] [--text-length N]
//               [-o Key.path=value ...]
//
// "forward" is an inference pass (BN running statistics, no dropout); "forward+backward" is a
// training forward, a constant dlogits and the backward (parameter gradients accumulate). A
// MultiHead network's guidance branch trains on texts of --text-length characters (10).
// --dtype f16 stores every activation (and the images) in f16: each op's compute dtype is set
// to f16, kernels compute in fp32 and round, as on a GPU; the weights stay f32, so this is not
// AMP's O2 (which -o Global.use_amp=true -o Global.amp_level=O2 -o Global.amp_dtype=bfloat16
// gives: an AMP engine attached as in training). --profile prints wall time per op
// type and the slowest ops (--profile-top N: the N slowest, 10 by default). --keep-activations keeps every activation (no in-place
// activations, no recomputation in the backward: the memory-hungry path, for comparison).
// The bench runs under ocrtrain's thread-runtime defaults (training/runtime.h: passive OpenMP wait,
// short OpenBLAS thread timeout, unless set in the environment); OCR_RUNTIME_TUNED=1 keeps the
// libraries' own defaults. Each mode ends with the tracked peak memory of its passes (all
// categories; activations and op workspace on their own) and the process's peak RSS.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "amp/engine.h"
#include "core/config.h"
#include "core/memory.h"
#include "models/amp_view.h"
#include "training/runtime.h"
#include "core/timer.h"
#include "kernels/backend.h"
#include "models/model.h"

// Process CPU time (all threads): the stable figure on a shared machine.
static double cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// Tracked peak since the last ocr_mem_reset_peak, and the process's peak resident set so far.
static void print_peak(const char *what) {
    OcrMemStats st = ocr_mem_stats(ocr_cpu());
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    char a[32], b[32], c[32];
    printf("%s peak memory: %s tracked (activations %s, workspace %s); process peak RSS %.1f MiB\n", what,
           ocr_format_bytes(st.peak_total, a, sizeof a), ocr_format_bytes(st.peak[OCR_MEM_ACTIVATIONS], b, sizeof b),
           ocr_format_bytes(st.peak[OCR_MEM_WORKSPACE], c, sizeof c), (double)ru.ru_maxrss / 1024.0);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

typedef struct {
    const char *type;
    double fwd, bwd;
} TypeTime;

static void print_profile(OcrModel *m, int steps, const char *what, int top) {
    OcrOpTable *ops = ocr_model_ops(m);
    TypeTime types[32];
    int nt = 0;
    double total = 0;
    for (int i = 0; i < ops->count; i++) {
        OcrOpInfo *o = &ops->items[i];
        int k = 0;
        while (k < nt && strcmp(types[k].type, o->type)) k++;
        if (k == nt && nt < 32) {
            types[nt].type = o->type;
            types[nt].fwd = types[nt].bwd = 0;
            nt++;
        }
        if (k < nt) {
            types[k].fwd += o->time_fwd;
            types[k].bwd += o->time_bwd;
        }
        total += o->time_fwd + o->time_bwd;
    }
    printf("profile (%s, %d steps, ms per step): total %.1f\n", what, steps, 1e3 * total / steps);
    printf("  %-12s %10s %10s %7s\n", "op type", "forward", "backward", "share");
    for (int k = 0; k < nt; k++)
        printf("  %-12s %10.2f %10.2f %6.1f%%\n", types[k].type, 1e3 * types[k].fwd / steps, 1e3 * types[k].bwd / steps,
               100 * (types[k].fwd + types[k].bwd) / (total > 0 ? total : 1));
    // The `top` slowest ops (--profile-top, 10 by default).
    int *idx = malloc(sizeof *idx * (size_t)(top > 0 ? top : 1));
    OCR_ASSERT(idx, "out of host memory");
    int n = 0;
    for (int i = 0; i < ops->count; i++) {
        double t = ops->items[i].time_fwd + ops->items[i].time_bwd;
        int pos = n < top ? n++ : top;
        while (pos > 0 && t > ops->items[idx[pos - 1]].time_fwd + ops->items[idx[pos - 1]].time_bwd) {
            if (pos < top) idx[pos] = idx[pos - 1];
            pos--;
        }
        if (pos < top) idx[pos] = i;
    }
    printf("  slowest ops:\n");
    for (int k = 0; k < n; k++) {
        OcrOpInfo *o = &ops->items[idx[k]];
        // The forward's rate from the op's FLOP count (GEMM-shaped ops: how far from the machine's peak).
        const double fwd_s = o->time_fwd / steps;
        printf("    %-56s %-10s fwd %7.2f bwd %7.2f ms  (fwd %.1f GFLOP/s)\n", o->name, o->type, 1e3 * fwd_s,
               1e3 * o->time_bwd / steps, fwd_s > 0 ? o->flops / fwd_s / 1e9 : 0.0);
    }
    free(idx);
}

int main(int argc, char **argv) {
    training_tune_runtime(argv);
    const char *cfg_path = NULL, *mode = "both";
    int batch = 32, height = 0, width = 0, iters = 5, warmup = 1, threads = 0, profile = 0, keep = 0;
    int text_length = 10, profile_top = 10;
    ocr_dtype_t dtype = OCR_F32;
    const char *overrides[32];
    int nover = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        if (!strcmp(a, "-c") && more) cfg_path = argv[++i];
        else if (!strcmp(a, "-o") && more && nover < 32) overrides[nover++] = argv[++i];
        else if (!strcmp(a, "--batch") && more) batch = atoi(argv[++i]);
        else if (!strcmp(a, "--height") && more) height = atoi(argv[++i]);
        else if (!strcmp(a, "--width") && more) width = atoi(argv[++i]);
        else if (!strcmp(a, "--iters") && more) iters = atoi(argv[++i]);
        else if (!strcmp(a, "--warmup") && more) warmup = atoi(argv[++i]);
        else if (!strcmp(a, "--threads") && more) threads = atoi(argv[++i]);
        else if (!strcmp(a, "--mode") && more) mode = argv[++i];
        else if (!strcmp(a, "--profile")) profile = 1;
        else if (!strcmp(a, "--profile-top") && more) profile = 1, profile_top = atoi(argv[++i]);
        else if (!strcmp(a, "--keep-activations")) keep = 1;
        else if (!strcmp(a, "--text-length") && more) text_length = atoi(argv[++i]);
        else if (!strcmp(a, "--dtype") && more) {
            if (!ocr_dtype_from_name(argv[++i], &dtype) || !ocr_dtype_is_float(dtype)) {
                fprintf(stderr, "bench_model: --dtype must be f32, f16 or bf16\n");
                return 2;
            }
        } else {
            fprintf(stderr, "usage: bench_model -c CFG [--batch N] [--height H] [--width W] [--dtype f32|f16|bf16]\n"
                            "       [--iters N] [--warmup N] [--threads N] [--mode both|fwd|train] [--profile]\n"
                            "       [--keep-activations] [--text-length N] [-o K=V]\n");
            return 2;
        }
    }
    if (!cfg_path || batch < 1 || iters < 1) {
        fprintf(stderr, "bench_model: -c CFG is required (and --batch/--iters must be positive)\n");
        return 2;
    }
    ocr_backends_init(threads);
    OcrConfig *cfg;
    if (ocr_config_load(&cfg, cfg_path) != OCR_OK) {
        fprintf(stderr, "bench_model: %s\n", ocr_last_error());
        return 2;
    }
    for (int i = 0; i < nover; i++) {
        if (ocr_config_apply_override(cfg, overrides[i]) != OCR_OK) {
            fprintf(stderr, "bench_model: %s\n", ocr_last_error());
            return 2;
        }
    }
    OcrModel *m;
    if (ocr_model_from_config(&m, cfg) != OCR_OK) {
        fprintf(stderr, "bench_model: %s\n", ocr_last_error());
        return 2;
    }
    // Global.use_amp (e.g. -o Global.use_amp=true -o Global.amp_level=O2 -o Global.amp_dtype=bfloat16):
    // the model runs under an AMP engine as in training (O2: low-precision weights and maps, the
    // configuration bench_train_cpu's bf16-o2 times), so the profile shows that step's ops.
    AmpConfig ac;
    AmpEngine amp;
    int amp_on = 0;
    if (amp_config_from_config(&ac, cfg) != OCR_OK) {
        fprintf(stderr, "bench_model: %s\n", ocr_last_error());
        return 2;
    }
    if (ac.policy.level != OCR_AMP_O0) {
        amp_engine_init(&amp, &ac);
        amp_on = 1;
        ocr_status_t st = ocr_amp_attach(&amp, ocr_model_ops(m), ocr_model_params(m), ocr_model_stats(m));
        if (st == OCR_OK && amp.cfg.policy.level == OCR_AMP_O1) st = ocr_model_set_cast_cache(m, &amp.cache);
        if (st != OCR_OK) {
            fprintf(stderr, "bench_model: %s\n", ocr_last_error());
            return 2;
        }
    }
    ocr_config_free(cfg);
    const OcrArch *arch = ocr_model_arch(m);
    if (!height) height = arch->img_h;
    if (!width) width = arch->img_w;
    if (dtype != OCR_F32) ocr_model_set_compute_dtype(m, "*", NULL, dtype);
    ocr_model_set_profile(m, profile);
    ocr_model_keep_activations(m, keep);

    OcrTensor x;
    if (ocr_tensor_alloc(&x, dtype, ocr_cpu(), 4, (int64_t[]){batch, height, width, arch->in_channels}, OCR_MEM_DATA) !=
        OCR_OK) {
        fprintf(stderr, "bench_model: %s\n", ocr_last_error());
        return 1;
    }
    float *tmp = malloc((size_t)ocr_tensor_numel(&x) * sizeof(float));
    for (int64_t i = 0; i < ocr_tensor_numel(&x); i++) tmp[i] = (float)((i * 2654435761u) % 2001) / 1000.0f - 1.0f;
    ocr_tensor_from_f32(&x, tmp);
    free(tmp);

    printf("bench_model: %s, batch %d, %dx%d, activations %s, %d threads, %lld parameters\n", cfg_path, batch, height,
           width, ocr_dtype_name(dtype), ocr_cpu_threads(), (long long)ocr_model_param_count(m));
    double *t = malloc((size_t)iters * sizeof *t), *cpu = malloc((size_t)iters * sizeof *cpu);
    int do_fwd = strcmp(mode, "train") != 0, do_train = strcmp(mode, "fwd") != 0;
    if (do_fwd) {
        OcrMemPlan p;
        if (ocr_model_plan(m, batch, height, width, 0, &p) != OCR_OK) {
            fprintf(stderr, "bench_model: %s\n", ocr_last_error());
            return 2;
        }
        ocr_mem_reset_peak(ocr_cpu());
        for (int i = 0; i < warmup; i++) ocr_model_forward(m, &x, 0);
        ocr_model_reset_profile(m);
        for (int i = 0; i < iters; i++) {
            double t0 = ocr_now_seconds(), c0 = cpu_seconds();
            if (ocr_model_forward(m, &x, 0) != OCR_OK) {
                fprintf(stderr, "bench_model: %s\n", ocr_last_error());
                return 1;
            }
            t[i] = ocr_now_seconds() - t0;
            cpu[i] = cpu_seconds() - c0;
        }
        double med = median(t, iters), cmed = median(cpu, iters);
        printf("forward:          %8.1f samples/s  (median %.1f ms per batch, %.3g GFLOP/s; CPU %.1f ms per batch = "
               "%.1f samples per CPU-second; activations %.1f MiB)\n",
               batch / med, 1e3 * med, p.flops / med / 1e9, 1e3 * cmed, batch / cmed, p.activations_bytes / 1048576.0);
        print_peak("forward");
        if (profile) print_profile(m, iters, "forward", profile_top);
    }
    if (do_train) {
        OcrMemPlan p;
        if (ocr_model_plan(m, batch, height, width, 1, &p) != OCR_OK) {
            fprintf(stderr, "bench_model: %s\n", ocr_last_error());
            return 2;
        }
        // MultiHead: every text of the batch has --text-length characters (PaddleOCR's decoder then
        // runs over text_length + 1 positions), as bench_train_cpu's synthetic labels.
        const OcrArch *arch = ocr_model_arch(m);
        const int guided = arch->multihead.kind != OCR_GUIDE_NONE, L = arch->multihead.steps + 1;
        int32_t *labels = NULL, *lengths = NULL;
        if (guided) {
            if (text_length < 1 || text_length > L - 2) {
                fprintf(stderr, "bench_model: --text-length %d: the guidance branch takes 1..%d characters\n",
                        text_length, L - 2);
                return 2;
            }
            labels = calloc((size_t)batch * L, sizeof *labels);
            lengths = calloc((size_t)batch, sizeof *lengths);
            if (!labels || !lengths) return 1;
            for (int b = 0; b < batch; b++) {
                lengths[b] = text_length;
                for (int j = 0; j < text_length; j++)
                    labels[(size_t)b * L + j] = 1 + (b * 31 + j * 7) % (arch->num_classes - 1);
            }
        }
        ocr_mem_reset_peak(ocr_cpu());
        for (int i = 0; i < warmup + iters; i++) {
            if (i == warmup) ocr_model_reset_profile(m);
            double t0 = ocr_now_seconds(), c0 = cpu_seconds();
            if (guided && ocr_model_set_guide_labels(m, labels, lengths, batch, L) != OCR_OK) {
                fprintf(stderr, "bench_model: %s\n", ocr_last_error());
                return 1;
            }
            if (ocr_model_forward(m, &x, 1) != OCR_OK) {
                fprintf(stderr, "bench_model: %s\n", ocr_last_error());
                return 1;
            }
            ocr_tensor_fill(ocr_model_dlogits(m), 1e-3f);
            if (guided) ocr_tensor_fill(ocr_model_guide_dlogits(m), 1e-3f);
            if (ocr_model_backward(m) != OCR_OK) {
                fprintf(stderr, "bench_model: %s\n", ocr_last_error());
                return 1;
            }
            if (i >= warmup) {
                t[i - warmup] = ocr_now_seconds() - t0;
                cpu[i - warmup] = cpu_seconds() - c0;
            }
        }
        double med = median(t, iters), cmed = median(cpu, iters);
        printf("forward+backward: %8.1f samples/s  (median %.1f ms per batch; CPU %.1f ms per batch = %.1f samples per "
               "CPU-second; activations %.1f MiB)\n",
               batch / med, 1e3 * med, 1e3 * cmed, batch / cmed, p.activations_bytes / 1048576.0);
        print_peak("forward+backward");
        if (profile) print_profile(m, iters, "training step", profile_top);
        free(labels);
        free(lengths);
    }
    free(t);
    free(cpu);
    ocr_tensor_free(&x);
    ocr_model_free(m);
    if (amp_on) amp_engine_free(&amp);
    return 0;
}
