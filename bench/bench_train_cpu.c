// bench_train_cpu: ocrtrain's full CPU training step (training/step.c: forward under the AMP
// policy, CTC, backward, unscale + check, Adam) per config × precision, side by side with
// tools/torch_bench.py (the same networks, batch and threads in PyTorch).
//
//   bench_train_cpu [-c CFG]... [--precisions fp32,bf16-o1,bf16-o2,fp16-o1,fp16-o2] [--batch 32]
//                   [--height 48] [--width 320] [--threads 2] [--iters 5] [--warmup 2]
//                   [--rounds 3] [--exact] [--json FILE]
//
// Each measurement runs in a child process of its own (this executable re-run with --one), so
// its peak RSS is its own and no thread pool or cache carries over; rounds alternate over all
// configs and precisions and the table gives medians over the rounds — the fair way to
// measure on a machine that other jobs share. Per line: samples/s (wall clock over the timed
// steps), samples per CPU-second (process CPU time: the figure that load from other jobs
// disturbs least), the median step, the child's peak RSS, the tracked peak (all categories),
// and what the CPU's GEMMs/convolutions ran on. --exact sets Global.cpu_exact_numerics
// (f16/bf16 on the emulated reference). Batches are synthetic (uniform pixels, 10-character
// labels), full width; the default configs are PP-OCRv3 en and PP-OCRv4 ch (training form).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "amp/engine.h"
#include "training/optim.h"
#include "training/run_config.h"
#include "training/runtime.h"
#include "training/step.h"
#include "core/config.h"
#include "core/error.h"
#include "core/memory.h"
#include "core/rng.h"
#include "core/timer.h"
#include "kernels/backend.h"
#include "models/model.h"
#include "models/amp_view.h"

typedef struct {
    const char *configs[8];
    int n_configs;
    char precisions[128];
    int batch, height, width, threads, iters, warmup, rounds, exact;
    const char *json_path;
} Args;

typedef struct {
    double samples_per_s, samples_per_cpu_s, median_step_s, peak_rss_mib, tracked_mib, loss_first, loss_last;
    int skipped;
    char isa[160];
} Result;

// The process's own peak RSS: VmHWM, the high-water mark of this address space. getrusage's
// ru_maxrss is not that after an exec: Linux carries the parent's peak over into it, so a child
// of tools/torch_bench.py (whose parent has built PyTorch twins, ~0.6 GiB) would report at least
// the parent's peak. ru_maxrss where /proc is not there.
static double peak_rss_mib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %ld kB", &kib) == 1) break;
    if (f) fclose(f);
    if (kib >= 0) return (double)kib / 1024.0;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}

static const char *const OV_FP32[] = {"Global.use_amp=false", NULL};
static const char *const OV_BF16O1[] = {"Global.use_amp=true", "Global.amp_level=O1", "Global.amp_dtype=bfloat16",
                                        NULL};
static const char *const OV_BF16O2[] = {"Global.use_amp=true", "Global.amp_level=O2", "Global.amp_dtype=bfloat16",
                                        "Global.amp_stochastic_rounding=false", NULL};
static const char *const OV_F16O1[] = {"Global.use_amp=true", "Global.amp_level=O1", "Global.amp_dtype=float16",
                                       NULL};
static const char *const OV_F16O2[] = {"Global.use_amp=true", "Global.amp_level=O2", "Global.amp_dtype=float16",
                                       NULL};

static const char *const *precision_overrides(const char *p) {
    if (!strcmp(p, "fp32")) return OV_FP32;
    if (!strcmp(p, "bf16-o1")) return OV_BF16O1;
    if (!strcmp(p, "bf16-o2")) return OV_BF16O2;
    if (!strcmp(p, "fp16-o1")) return OV_F16O1;
    if (!strcmp(p, "fp16-o2")) return OV_F16O2;
    return NULL;
}

static double cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// One measurement in this process.
static ocr_status_t measure(const char *cfg_path, const char *precision, const Args *a, Result *res) {
    memset(res, 0, sizeof *res);
    const char *const *pov = precision_overrides(precision);
    if (!pov) return ocr_set_error(OCR_ERR_INVALID_ARG, "unknown precision %s", precision);
    const char *ov[16];
    int n = 0;
    for (int i = 0; pov[i]; i++) ov[n++] = pov[i];
    ov[n++] = "Global.device=cpu";
    ov[n++] = a->exact ? "Global.cpu_exact_numerics=true" : "Global.cpu_exact_numerics=false";
    OcrConfig *cfg;
    RunConfig rc;
    OCR_TRY(run_config_load(&cfg, &rc, cfg_path, ov, n, 0));
    ocr_backends_init(a->threads);
    OcrModel *m = NULL;
    AmpEngine amp;
    AmpConfig ac;
    Optimizer optim;
    StepCtx sc;
    int amp_ok = 0, optim_ok = 0, step_ok = 0;
    const int B = a->batch, H = a->height, W = a->width;
    OcrTensor img = {0};
    ocr_status_t st = ocr_model_from_config(&m, cfg);
    if (st == OCR_OK) st = amp_config_from_config(&ac, cfg);
    if (st == OCR_OK) {
        amp_engine_init(&amp, &ac);
        amp_ok = 1;
        st = ocr_amp_attach(&amp, ocr_model_ops(m), ocr_model_params(m), ocr_model_stats(m));
        // O1: the model's white ops read the engine's per-step low-precision weight copies.
        if (st == OCR_OK && amp.cfg.policy.level == OCR_AMP_O1) st = ocr_model_set_cast_cache(m, &amp.cache);
    }
    if (st == OCR_OK) st = optim_init(&optim, &rc.optim, ocr_model_params(m));
    optim_ok = st == OCR_OK;
    if (st == OCR_OK) st = step_ctx_init(&sc, m, &amp, &optim, B, 0);
    step_ok = st == OCR_OK;
    const int C = m ? ocr_model_arch(m)->in_channels : 3, classes = m ? ocr_model_arch(m)->num_classes : 2;
    const int L = 25;
    int32_t *labels = calloc((size_t)B * L, sizeof *labels), *lengths = calloc((size_t)B, sizeof *lengths);
    int32_t *widths = calloc((size_t)B, sizeof *widths);
    // The loader's uint8 batch; the step normalises it on the model's device.
    if (st == OCR_OK) st = ocr_tensor_alloc(&img, OCR_U8, ocr_cpu(), 4, (int64_t[]){B, H, W, C}, OCR_MEM_DATA);
    if (st == OCR_OK) {
        uint8_t *px = img.data;
        for (size_t i = 0; i < (size_t)B * H * W * C; i++) px[i] = (uint8_t)(ocr_rng_uniform(1, 7, i) * 256.0f);
        uint64_t x = 88172645463325252ull;
        for (int b = 0; b < B; b++) {
            widths[b] = W;  // full width
            lengths[b] = 10;
            for (int j = 0; j < 10; j++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                labels[(size_t)b * L + j] = 1 + (int32_t)(x % (uint64_t)(classes - 1));
            }
        }
    }
    FeedBatch fb = {.capacity = B, .count = B, .height = H, .width = W, .channels = C, .max_len = L,
                    .pixels = img.data, .labels = labels, .lengths = lengths, .widths = widths};
    FeedDeviceBatch db;
    feed_batch_view(&fb, &db);
    int total = a->warmup + a->iters;
    double *times = calloc((size_t)total, sizeof *times);
    double t0 = 0, c0 = 0;
    for (int i = 0; st == OCR_OK && i < total; i++) {
        if (i == a->warmup) {
            ocr_mem_reset_peak(ocr_cpu());
            t0 = ocr_now_seconds();
            c0 = cpu_seconds();
        }
        double ts = ocr_now_seconds();
        StepOutcome o;
        st = step_run(&sc, &db, 1e-4, &o);
        times[i] = ocr_now_seconds() - ts;
        if (i == 0) res->loss_first = o.loss;
        res->loss_last = o.loss;
        if (i >= a->warmup) res->skipped += o.skipped;
    }
    if (st == OCR_OK) {
        double wall = ocr_now_seconds() - t0, cpu = cpu_seconds() - c0;
        res->samples_per_s = wall > 0 ? (double)B * a->iters / wall : 0;
        res->samples_per_cpu_s = cpu > 0 ? (double)B * a->iters / cpu : 0;
        res->median_step_s = median(times + a->warmup, a->iters);
        res->tracked_mib = (double)ocr_mem_stats(ocr_cpu()).peak_total / (1 << 20);
        res->peak_rss_mib = peak_rss_mib();
        ocr_backend_cpu_isa(res->isa, sizeof res->isa);
    }
    free(times);
    free(labels);
    free(lengths);
    free(widths);
    ocr_tensor_free(&img);
    if (step_ok) step_ctx_free(&sc);
    if (optim_ok) optim_free(&optim);
    if (amp_ok) amp_engine_free(&amp);
    ocr_model_free(m);
    ocr_config_free(cfg);
    return st;
}

// Runs `--one CFG PREC` in a child (this executable) and reads its result line.
static int run_child(char **argv0, const Args *a, const char *cfg, const char *prec, Result *r) {
    int fd[2];
    if (pipe(fd) != 0) return 0;
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        dup2(fd[1], STDOUT_FILENO);
        char b[16], h[16], w[16], t[16], it[16], wu[16];
        snprintf(b, sizeof b, "%d", a->batch), snprintf(h, sizeof h, "%d", a->height);
        snprintf(w, sizeof w, "%d", a->width), snprintf(t, sizeof t, "%d", a->threads);
        snprintf(it, sizeof it, "%d", a->iters), snprintf(wu, sizeof wu, "%d", a->warmup);
        char *args[] = {argv0[0], "--one", (char *)cfg, (char *)prec, "--batch", b, "--height", h, "--width", w,
                        "--threads", t, "--iters", it, "--warmup", wu, a->exact ? "--exact" : NULL, NULL};
        execv("/proc/self/exe", args);
        _exit(127);
    }
    close(fd[1]);
    FILE *f = fdopen(fd[0], "r");
    char line[1024];
    int ok = 0;
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "RESULT ", 7) != 0) continue;
        memset(r, 0, sizeof *r);
        ok = sscanf(line + 7, "%lf %lf %lf %lf %lf %lf %lf %d %159[^\n]", &r->samples_per_s, &r->samples_per_cpu_s,
                    &r->median_step_s, &r->peak_rss_mib, &r->tracked_mib, &r->loss_first, &r->loss_last, &r->skipped,
                    r->isa) == 9;
    }
    if (f) fclose(f);
    int status = 0;
    waitpid(pid, &status, 0);
    return ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static void loadavg(char *buf, size_t n) {
    FILE *f = fopen("/proc/loadavg", "r");
    buf[0] = 0;
    if (f) {
        if (!fgets(buf, (int)n, f)) buf[0] = 0;
        fclose(f);
    }
    buf[strcspn(buf, "\n")] = 0;
}

static void usage(void) {
    fprintf(stderr, "usage: bench_train_cpu [-c CFG]... [--precisions fp32,bf16-o1,bf16-o2,fp16-o1,fp16-o2]\n"
                    "       [--batch 32] [--height 48] [--width 320] [--threads 2] [--iters 5] [--warmup 2]\n"
                    "       [--rounds 3] [--exact] [--json FILE]\n");
}

int main(int argc, char **argv) {
    training_tune_runtime(argv);
    Args a;
    memset(&a, 0, sizeof a);
    snprintf(a.precisions, sizeof a.precisions, "fp32,bf16-o1,bf16-o2,fp16-o1,fp16-o2");
    a.batch = 32, a.height = 48, a.width = 320, a.threads = 2, a.iters = 5, a.warmup = 2, a.rounds = 3;
    const char *one_cfg = NULL, *one_prec = NULL;
    for (int i = 1; i < argc; i++) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(k, "--exact")) { a.exact = 1; continue; }
        if (!strcmp(k, "--one") && i + 2 < argc) { one_cfg = argv[i + 1], one_prec = argv[i + 2], i += 2; continue; }
        if (!v) { usage(); return 2; }
        if (!strcmp(k, "-c") && a.n_configs < 8) a.configs[a.n_configs++] = v;
        else if (!strcmp(k, "--precisions")) snprintf(a.precisions, sizeof a.precisions, "%s", v);
        else if (!strcmp(k, "--batch")) a.batch = atoi(v);
        else if (!strcmp(k, "--height")) a.height = atoi(v);
        else if (!strcmp(k, "--width")) a.width = atoi(v);
        else if (!strcmp(k, "--threads")) a.threads = atoi(v);
        else if (!strcmp(k, "--iters")) a.iters = atoi(v);
        else if (!strcmp(k, "--warmup")) a.warmup = atoi(v);
        else if (!strcmp(k, "--rounds")) a.rounds = atoi(v);
        else if (!strcmp(k, "--json")) a.json_path = v;
        else { usage(); return 2; }
        i++;
    }
    if (a.batch < 1 || a.iters < 1 || a.warmup < 0 || a.rounds < 1 || a.threads < 0) { usage(); return 2; }
    if (one_cfg) {
        ocr_log_set_level(OCR_LOG_ERROR);  // random data may overflow fp16 at the first scales: expected
        Result r;
        if (measure(one_cfg, one_prec, &a, &r) != OCR_OK) {
            fprintf(stderr, "bench_train_cpu: %s %s: %s\n", one_cfg, one_prec, ocr_last_error());
            return 1;
        }
        printf("RESULT %.4f %.4f %.6f %.1f %.1f %.6f %.6f %d %s\n", r.samples_per_s, r.samples_per_cpu_s,
               r.median_step_s, r.peak_rss_mib, r.tracked_mib, r.loss_first, r.loss_last, r.skipped, r.isa);
        return 0;
    }
    if (!a.n_configs) {
        a.configs[a.n_configs++] = "configs/rec_ppocrv3_en.json";
        a.configs[a.n_configs++] = "configs/rec_ppocrv4_ch.json";
    }
    const char *precs[8];
    int np = 0;
    for (char *save = NULL, *p = strtok_r(a.precisions, ",", &save); p && np < 8; p = strtok_r(NULL, ",", &save)) {
        if (!precision_overrides(p)) {
            fprintf(stderr, "bench_train_cpu: unknown precision %s\n", p);
            return 2;
        }
        precs[np++] = p;
    }
    int cells = a.n_configs * np;
    Result *all = calloc((size_t)(cells * a.rounds), sizeof *all);
    int *ok = calloc((size_t)(cells * a.rounds), sizeof *ok);
    char la[128];
    loadavg(la, sizeof la);
    printf("bench_train_cpu: batch %d, %dx%d, %d thread(s), %d warm-up + %d timed steps, %d alternated round(s)%s; "
           "load average at start: %s\n", a.batch, a.height, a.width, a.threads, a.warmup, a.iters, a.rounds,
           a.exact ? ", exact numerics" : "", la);
    for (int r = 0; r < a.rounds; r++)
        for (int c = 0; c < a.n_configs; c++)
            for (int p = 0; p < np; p++) {
                int idx = (c * np + p) * a.rounds + r;
                ok[idx] = run_child(argv, &a, a.configs[c], precs[p], &all[idx]);
                fprintf(stderr, "round %d %s %s: %s %.2f samples/s\n", r + 1, a.configs[c], precs[p],
                        ok[idx] ? "ok" : "FAILED", all[idx].samples_per_s);
            }
    loadavg(la, sizeof la);
    printf("load average at end: %s\n", la);
    printf("%-28s %-8s %10s %12s %9s %9s %10s  %s\n", "config", "prec", "samples/s", "per CPU-s", "step ms",
           "RSS MiB", "tracked", "isa");
    FILE *json = a.json_path ? fopen(a.json_path, "w") : NULL;
    int failures = 0;
    for (int c = 0; c < a.n_configs; c++)
        for (int p = 0; p < np; p++) {
            double v[5][16];
            int k = 0;
            const Result *last = NULL;
            int skipped = 0;
            for (int r = 0; r < a.rounds && k < 16; r++) {
                int idx = (c * np + p) * a.rounds + r;
                if (!ok[idx]) continue;
                const Result *x = &all[idx];
                v[0][k] = x->samples_per_s, v[1][k] = x->samples_per_cpu_s, v[2][k] = x->median_step_s;
                v[3][k] = x->peak_rss_mib, v[4][k] = x->tracked_mib;
                skipped += x->skipped;
                last = x;
                k++;
            }
            if (!k) {
                printf("%-28s %-8s failed\n", a.configs[c], precs[p]);
                failures++;
                continue;
            }
            double sps = median(v[0], k), spc = median(v[1], k), step = median(v[2], k), rss = median(v[3], k),
                   tr = median(v[4], k);
            printf("%-28s %-8s %10.2f %12.2f %9.1f %9.0f %10.0f  %s%s\n", a.configs[c], precs[p], sps, spc, 1e3 * step,
                   rss, tr, last->isa, skipped ? " (overflow-skipped steps)" : "");
            if (json)
                fprintf(json, "{\"config\":\"%s\",\"precision\":\"%s\",\"batch\":%d,\"threads\":%d,\"rounds\":%d,"
                              "\"samples_per_s\":%.3f,\"samples_per_cpu_s\":%.3f,\"median_step_s\":%.5f,"
                              "\"peak_rss_mib\":%.1f,\"tracked_peak_mib\":%.1f,\"cpu_isa\":\"%s\",\"exact\":%s}\n",
                        a.configs[c], precs[p], a.batch, a.threads, k, sps, spc, step, rss, tr, last->isa,
                        a.exact ? "true" : "false");
        }
    if (json) fclose(json);
    free(all);
    free(ok);
    return failures ? 1 : 0;
}
