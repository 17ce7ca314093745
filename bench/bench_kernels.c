// CPU kernel benchmark: sgemm throughput and the PP-OCRv3 convolutions, forward and
// backward, in f32, f16 and bf16 storage. Prints Markdown tables of medians.
//
//   bench_kernels [--threads N] [--reps N] [--warmup N] [--batch N] [--only gemm|conv] [--filter TEXT]
//                 [--net v3|v6] [--dtypes f32,bf16,...]
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "core/tensor.h"
#include "core/timer.h"
#include "kernels/backend.h"
#include "kernels/ops.h"

char *openblas_get_config(void);

typedef struct {
    int reps, warmup;
    int cpu_clock;  // --clock cpu: process CPU time instead of wall time (for a loaded machine)
} BenchOpts;

static double now(const BenchOpts *o) {
    if (!o->cpu_clock) return ocr_now_seconds();
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef void (*bench_fn)(void *ctx);

// Median seconds of opts.reps runs after opts.warmup untimed ones.
static double time_median(bench_fn fn, void *ctx, BenchOpts o) {
    for (int i = 0; i < o.warmup; i++) fn(ctx);
    double *t = malloc(sizeof(double) * (size_t)o.reps);
    for (int i = 0; i < o.reps; i++) {
        double t0 = now(&o);
        fn(ctx);
        t[i] = now(&o) - t0;
    }
    qsort(t, (size_t)o.reps, sizeof(double), cmp_double);
    double m = o.reps % 2 ? t[o.reps / 2] : 0.5 * (t[o.reps / 2 - 1] + t[o.reps / 2]);
    free(t);
    return m;
}

static OcrTensor make_tensor(ocr_dtype_t dtype, int ndim, const int64_t *shape, uint64_t seed) {
    OcrTensor t;
    if (ocr_tensor_alloc(&t, dtype, ocr_cpu(), ndim, shape, OCR_MEM_ACTIVATIONS) != OCR_OK) {
        fprintf(stderr, "bench_kernels: %s\n", ocr_last_error());
        exit(1);
    }
    int64_t n = ocr_tensor_numel(&t);
    float *v = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    ocr_rng_fill_uniform(v, (size_t)n, seed, 1, 0, -1.0f, 1.0f);
    ocr_tensor_from_f32(&t, v);
    free(v);
    return t;
}

static void cpu_model(char *buf, size_t size) {
    snprintf(buf, size, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0) {
            char *p = strchr(line, ':');
            if (p) {
                p++;
                while (*p == ' ') p++;
                p[strcspn(p, "\n")] = 0;
                snprintf(buf, size, "%s", p);
            }
            break;
        }
    }
    fclose(f);
}

// ---- sgemm ----------------------------------------------------------------------------
typedef struct {
    OcrTensor a, b, c;
    int ta, tb;
} GemmCtx;

static void run_gemm(void *p) {
    GemmCtx *g = p;
    ocr_gemm(&g->c, &g->a, &g->b, g->ta, g->tb, 1.0f, 0.0f);
}

static const char *name_filter;  // --filter: only cases whose name contains this

static void bench_gemm(const char *what, int64_t M, int64_t N, int64_t K, int ta, int tb, BenchOpts o) {
    if (name_filter && !strstr(what, name_filter)) return;
    GemmCtx g;
    g.ta = ta, g.tb = tb;
    g.a = make_tensor(OCR_F32, 2, ta ? (int64_t[]){K, M} : (int64_t[]){M, K}, 1);
    g.b = make_tensor(OCR_F32, 2, tb ? (int64_t[]){N, K} : (int64_t[]){K, N}, 2);
    g.c = make_tensor(OCR_F32, 2, (int64_t[]){M, N}, 3);
    double s = time_median(run_gemm, &g, o);
    printf("| %s | %lld×%lld×%lld | %s%s | %.2f | %.1f |\n", what, (long long)M, (long long)N, (long long)K,
           ta ? "T" : "N", tb ? "T" : "N", s * 1e3, 2.0 * (double)M * (double)N * (double)K / s * 1e-9);
    fflush(stdout);
    ocr_tensor_free(&g.a);
    ocr_tensor_free(&g.b);
    ocr_tensor_free(&g.c);
}

// ---- conv2d ---------------------------------------------------------------------------
typedef struct {
    const char *name;
    int C, OC, KH, KW, H, W;
    Conv2dParams p;
} ConvLayer;

typedef struct {
    OcrTensor x, w, y, dy, dx, dw;
    Conv2dParams p;
} ConvCtx;

static void run_conv_fwd(void *p) {
    ConvCtx *c = p;
    ocr_conv2d_forward(&c->y, &c->x, &c->w, NULL, c->p);
}

static void run_conv_bwd(void *p) {
    ConvCtx *c = p;
    ocr_conv2d_backward(&c->dx, &c->dw, NULL, &c->dy, &c->x, &c->w, c->p);
}

static void bench_conv(const ConvLayer *L, int batch, ocr_dtype_t dt, BenchOpts o) {
    if (name_filter && !strstr(L->name, name_filter)) return;
    int Ho = ocr_conv2d_out_size(L->H, L->KH, L->p.stride_h, L->p.pad_h);
    int Wo = ocr_conv2d_out_size(L->W, L->KW, L->p.stride_w, L->p.pad_w);
    ConvCtx c;
    c.p = L->p;
    c.x = make_tensor(dt, 4, (int64_t[]){batch, L->H, L->W, L->C}, 11);
    c.w = make_tensor(dt, 4, (int64_t[]){L->OC, L->KH, L->KW, L->C / L->p.groups}, 12);
    c.y = make_tensor(dt, 4, (int64_t[]){batch, Ho, Wo, L->OC}, 13);
    c.dy = make_tensor(dt, 4, (int64_t[]){batch, Ho, Wo, L->OC}, 14);
    c.dx = make_tensor(dt, 4, (int64_t[]){batch, L->H, L->W, L->C}, 15);
    c.dw = make_tensor(dt, 4, (int64_t[]){L->OC, L->KH, L->KW, L->C / L->p.groups}, 16);
    ocr_tensor_fill(&c.dw, 0.0f);
    double f = time_median(run_conv_fwd, &c, o);
    double b = time_median(run_conv_bwd, &c, o);
    double flops = 2.0 * batch * Ho * Wo * (double)L->OC * L->KH * L->KW * (L->C / L->p.groups);
    printf("| %s | %s | %.2f | %.2f | %.1f | %.1f |\n", L->name, ocr_dtype_name(dt), f * 1e3, b * 1e3,
           flops / f * 1e-9, 2.0 * flops / b * 1e-9);
    fflush(stdout);
    ocr_tensor_free(&c.x);
    ocr_tensor_free(&c.w);
    ocr_tensor_free(&c.y);
    ocr_tensor_free(&c.dy);
    ocr_tensor_free(&c.dx);
    ocr_tensor_free(&c.dw);
}

// ---- one depthwise-separable block in sequence ----------------------------------------
// dw 5×5 256 → pw 1×1 256→256 on 6×160 maps, forward then backward, as a network runs it:
// OpenMP loops and OpenBLAS calls alternate, so thread hand-over costs show up here and not
// in the per-layer table.
typedef struct {
    OcrTensor x, wd, h, wp, y, dy, dh, dx, dwd, dwp;
    Conv2dParams pd, pp;
    int part;  // -1: whole sequence; 0..3 one step
} BlockCtx;

static void run_block(void *p) {
    BlockCtx *b = p;
    if (b->part < 0 || b->part == 0) ocr_conv2d_forward(&b->h, &b->x, &b->wd, NULL, b->pd);
    if (b->part < 0 || b->part == 1) ocr_conv2d_forward(&b->y, &b->h, &b->wp, NULL, b->pp);
    if (b->part < 0 || b->part == 2) ocr_conv2d_backward(&b->dh, &b->dwp, NULL, &b->dy, &b->h, &b->wp, b->pp);
    if (b->part < 0 || b->part == 3) ocr_conv2d_backward(&b->dx, &b->dwd, NULL, &b->dh, &b->x, &b->wd, b->pd);
}

static void bench_block(int batch, ocr_dtype_t dt, BenchOpts o) {
    const char *name = "dw 5×5 256 + pw 256→256 @6×160";
    if (name_filter && !strstr(name, name_filter)) return;
    BlockCtx b;
    const int64_t act[4] = {batch, 6, 160, 256};
    b.x = make_tensor(dt, 4, act, 21), b.h = make_tensor(dt, 4, act, 22), b.y = make_tensor(dt, 4, act, 23);
    b.dy = make_tensor(dt, 4, act, 24), b.dh = make_tensor(dt, 4, act, 25), b.dx = make_tensor(dt, 4, act, 26);
    b.wd = make_tensor(dt, 4, (int64_t[]){256, 5, 5, 1}, 27), b.dwd = make_tensor(dt, 4, (int64_t[]){256, 5, 5, 1}, 28);
    b.wp = make_tensor(dt, 4, (int64_t[]){256, 1, 1, 256}, 29), b.dwp = make_tensor(dt, 4, (int64_t[]){256, 1, 1, 256}, 30);
    ocr_tensor_fill(&b.dwd, 0.0f), ocr_tensor_fill(&b.dwp, 0.0f);
    b.pd = (Conv2dParams){1, 1, 2, 2, 256};
    b.pp = (Conv2dParams){1, 1, 0, 0, 1};
    b.part = -1;
    double whole = time_median(run_block, &b, o), parts = 0;
    for (b.part = 0; b.part < 4; b.part++) parts += time_median(run_block, &b, o);
    printf("| %s | %s | %.2f | %.2f |\n", name, ocr_dtype_name(dt), whole * 1e3, parts * 1e3);
    fflush(stdout);
    OcrTensor *all[] = {&b.x, &b.wd, &b.h, &b.wp, &b.y, &b.dy, &b.dh, &b.dx, &b.dwd, &b.dwp};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ocr_tensor_free(all[i]);
}

static void usage(void) {
    fprintf(stderr,
            "usage: bench_kernels [--threads N] [--reps N] [--warmup N] [--batch N] [--only gemm|conv] [--filter TEXT] [--clock wall|cpu]\n"
            "  --threads N  CPU threads (OpenMP and OpenBLAS; default: all cores)\n"
            "  --reps N     timed repetitions per measurement, median reported (default 10)\n"
            "  --warmup N   untimed runs first (default 2)\n"
            "  --batch N    batch size of the convolution layers (default 64)\n"
            "  --only W     only the sgemm or only the conv2d table\n"
            "  --filter T   only cases whose name contains T (e.g. \"dw 5×5\")\n"
            "  --net N      conv layers of v3 (PP-OCRv3, default) or v6 (PP-OCRv6 tiny/small: stem, the\n"
            "               PPLCNetV4 1x1 expand/compress and depthwise shapes)\n"
            "  --dtypes L   comma-separated dtypes of the conv table (default f32,f16,bf16)\n"
            "  --clock C    wall (default) or cpu: process CPU time, summed over threads; with\n"
            "               --threads 1 it approximates an unloaded machine when others share it\n");
}

int main(int argc, char **argv) {
    int threads = 0, batch = 64;
    const char *only = NULL, *net = "v3", *dtypes = "f32,f16,bf16";
    BenchOpts o = {10, 2, 0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage();
            return 0;
        } else if (v && strcmp(a, "--threads") == 0) {
            threads = atoi(v), i++;
        } else if (v && strcmp(a, "--reps") == 0) {
            o.reps = atoi(v), i++;
        } else if (v && strcmp(a, "--warmup") == 0) {
            o.warmup = atoi(v), i++;
        } else if (v && strcmp(a, "--batch") == 0) {
            batch = atoi(v), i++;
        } else if (v && strcmp(a, "--clock") == 0 && (strcmp(v, "wall") == 0 || strcmp(v, "cpu") == 0)) {
            o.cpu_clock = strcmp(v, "cpu") == 0, i++;
        } else if (v && strcmp(a, "--filter") == 0) {
            name_filter = v, i++;
        } else if (v && strcmp(a, "--net") == 0 && (strcmp(v, "v3") == 0 || strcmp(v, "v6") == 0)) {
            net = v, i++;
        } else if (v && strcmp(a, "--dtypes") == 0) {
            dtypes = v, i++;
        } else if (v && strcmp(a, "--only") == 0) {
            only = v, i++;
        } else {
            usage();
            return 2;
        }
    }
    if (o.reps < 1 || o.warmup < 0 || batch < 1 || threads < 0) {
        usage();
        return 2;
    }
    ocr_backends_init(threads);

    char model[256];
    cpu_model(model, sizeof model);
    printf("# bench_kernels\n\n");
    printf("- CPU: %s\n- threads: %d\n- OpenBLAS: %s\n- reps: %d (median), warm-up: %d, clock: %s\n\n", model,
           ocr_cpu_threads(), openblas_get_config(), o.reps, o.warmup, o.cpu_clock ? "process CPU time" : "wall");

    if (!only || strcmp(only, "gemm") == 0) {
        printf("## sgemm (f32, via ocr_gemm())\n\n");
        printf("| case | M×N×K | op | ms | GFLOP/s |\n|---|---|---|---|---|\n");
        bench_gemm("square", 512, 512, 512, 0, 0, o);
        bench_gemm("square", 1024, 1024, 1024, 0, 0, o);
        int64_t rows = (int64_t)batch * 6 * 160;
        bench_gemm("pw 256→256 fwd", rows, 256, 256, 0, 1, o);
        bench_gemm("pw 256→256 dinp", rows, 256, 256, 0, 0, o);
        bench_gemm("pw 256→256 dweight", 256, 256, rows, 1, 0, o);
        bench_gemm("pw 64→64 fwd (24×160)", (int64_t)batch * 24 * 160, 64, 64, 0, 1, o);
        bench_gemm("stem im2col fwd", (int64_t)batch * 24 * 160, 16, 27, 0, 1, o);
        printf("\n");
    }

    if (!only || strcmp(only, "conv") == 0) {
        // PP-OCRv3 (MobileNetV1Enhance scale 0.5) layers at 48×320 input.
        static const ConvLayer v3[] = {
            {"stem 3×3 s2 3→16 @48×320", 3, 16, 3, 3, 48, 320, {2, 2, 1, 1, 1}},
            {"dw 3×3 s1 64 @24×160", 64, 64, 3, 3, 24, 160, {1, 1, 1, 1, 64}},
            {"dw 3×3 s(2,1) 128 @12×160", 128, 128, 3, 3, 12, 160, {2, 1, 1, 1, 128}},
            {"pw 1×1 64→64 @24×160", 64, 64, 1, 1, 24, 160, {1, 1, 0, 0, 1}},
            {"dw 5×5 s1 256 @6×160", 256, 256, 5, 5, 6, 160, {1, 1, 2, 2, 256}},
            {"pw 1×1 256→256 @6×160", 256, 256, 1, 1, 6, 160, {1, 1, 0, 0, 1}},
            {"dw 5×5 s(1,2) 512 @3×160", 512, 512, 5, 5, 3, 160, {1, 2, 2, 2, 512}},
        };
        // PP-OCRv6 (PPLCNetV4 tiny and small) at 48×320: the stem's two 3×3 stride-2 convs, the
        // blocks' 1×1 expand/compress (channel mixer) and depthwise token mixers, in the
        // shapes of a training step (the ones with most of the conv time).
        static const ConvLayer v6[] = {
            {"tiny stem conv1.0 3×3 s2 3→24 @48×320", 3, 24, 3, 3, 48, 320, {2, 2, 1, 1, 1}},
            {"tiny stem conv1.2 3×3 s2 24→48 @24×160", 24, 48, 3, 3, 24, 160, {2, 2, 1, 1, 1}},
            {"small stem conv1.0 3×3 s2 3→48 @48×320", 3, 48, 3, 3, 48, 320, {2, 2, 1, 1, 1}},
            {"small stem 3×3 s2 96→48 @24×160", 96, 48, 3, 3, 24, 160, {2, 2, 1, 1, 1}},
            {"tiny expand 1×1 160→320 @3×80", 160, 320, 1, 1, 3, 80, {1, 1, 0, 0, 1}},
            {"tiny compress 1×1 320→160 @3×80", 320, 160, 1, 1, 3, 80, {1, 1, 0, 0, 1}},
            {"tiny expand 1×1 96→192 @6×80", 96, 192, 1, 1, 6, 80, {1, 1, 0, 0, 1}},
            {"tiny expand 1×1 48→96 @12×80", 48, 96, 1, 1, 12, 80, {1, 1, 0, 0, 1}},
            {"small expand 1×1 192→384 @6×80", 192, 384, 1, 1, 6, 80, {1, 1, 0, 0, 1}},
            {"small compress 1×1 384→192 @6×80", 384, 192, 1, 1, 6, 80, {1, 1, 0, 0, 1}},
            {"small expand 1×1 384→768 @3×80", 384, 768, 1, 1, 3, 80, {1, 1, 0, 0, 1}},
            {"tiny dw 3×3 s1 48 @12×80", 48, 48, 3, 3, 12, 80, {1, 1, 1, 1, 48}},
            {"small dw 3×3 s1 192 @6×80", 192, 192, 3, 3, 6, 80, {1, 1, 1, 1, 192}},
        };
        const int is_v6 = strcmp(net, "v6") == 0;
        const ConvLayer *layers = is_v6 ? v6 : v3;
        const size_t n_layers = is_v6 ? sizeof v6 / sizeof v6[0] : sizeof v3 / sizeof v3[0];
        const ocr_dtype_t dts[] = {OCR_F32, OCR_F16, OCR_BF16};
        int use_dt[3];
        for (size_t d = 0; d < 3; d++) {
            // Whole names in the comma-separated list ("f16" must not match "bf16").
            const char *name = ocr_dtype_name(dts[d]), *alias = d == 0 ? "f32" : d == 1 ? "f16" : "bf16";
            use_dt[d] = 0;
            for (const char *p = dtypes; *p;) {
                size_t len = strcspn(p, ",");
                if ((strlen(alias) == len && !strncmp(p, alias, len)) || (strlen(name) == len && !strncmp(p, name, len)))
                    use_dt[d] = 1;
                p += len + (p[len] == ',');
            }
        }
        printf("## conv2d (batch %d; backward = dinp + dweight; GFLOP/s counts 2·MACs, backward 2× forward)\n\n",
               batch);
        printf("| layer | dtype | fwd ms | bwd ms | fwd GFLOP/s | bwd GFLOP/s |\n|---|---|---|---|---|---|\n");
        for (size_t l = 0; l < n_layers; l++)
            for (size_t d = 0; d < 3; d++)
                if (use_dt[d]) bench_conv(&layers[l], batch, dts[d], o);
        printf("\n");
        if (is_v6) return 0;
        printf("## block in sequence (batch %d; forward dw, pw, backward pw, dw; vs the four steps timed apart)\n\n",
               batch);
        printf("| block | dtype | sequence ms | sum of steps ms |\n|---|---|---|---|\n");
        for (size_t d = 0; d < 3; d++)
            if (use_dt[d]) bench_block(batch, dts[d], o);
        printf("\n");
    }
    return 0;
}
