// CTC loss forward+backward on the CPU at the PP-OCRv4 training shape: B=128, T=40,
// C=6625 (the Chinese dictionary + blank + space), target lengths uniform in [1, 25].
//
//   bench_ctc [threads=2] [runs=15] [B=128] [T=40] [C=6625]
//
// Prints the median, min and max wall time of `runs` timed calls (after 2 warm-ups), for
// the fused loss+gradient call the trainer makes and for the loss alone, and the median
// CPU time per call summed over threads (on a shared machine wall time inflates when
// other processes compete for the cores; CPU time much less so).
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "core/rng.h"
#include "core/timer.h"
#include "kernels/backend.h"
#include "kernels/ctc.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// out[runs] wall times (sorted), cpu[runs] CPU times (sorted).
static void time_runs(double *out, double *cpu, int runs, OcrTensor *losses, OcrTensor *dlogits,
                      const OcrTensor *logits, const OcrTensor *targets, const OcrTensor *tl) {
    CtcParams p = {0};
    for (int i = 0; i < 2; i++) ocr_ctc_loss_forward(losses, NULL, dlogits, NULL, logits, targets, tl, NULL, p);
    for (int i = 0; i < runs; i++) {
        double c0 = cpu_seconds(), t0 = ocr_now_seconds();
        ocr_ctc_loss_forward(losses, NULL, dlogits, NULL, logits, targets, tl, NULL, p);
        out[i] = ocr_now_seconds() - t0;
        cpu[i] = cpu_seconds() - c0;
    }
    qsort(out, runs, sizeof *out, cmp_double);
    qsort(cpu, runs, sizeof *cpu, cmp_double);
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 2;
    int runs = argc > 2 ? atoi(argv[2]) : 15;
    int B = argc > 3 ? atoi(argv[3]) : 128, T = argc > 4 ? atoi(argv[4]) : 40, C = argc > 5 ? atoi(argv[5]) : 6625;
    const int S = 25;
    if (threads < 1 || runs < 1 || B < 1 || T < S || C < 3) {
        fprintf(stderr, "usage: bench_ctc [threads>=1] [runs>=1] [B] [T>=%d] [C>=3]\n", S);
        return 2;
    }
    ocr_backends_init(threads);

    OcrTensor logits, dlogits, targets, tl, losses;
    int64_t n = (int64_t)B * T * C;
    if (ocr_tensor_alloc(&logits, OCR_F32, ocr_cpu(), 3, (int64_t[]){B, T, C}, OCR_MEM_ACTIVATIONS) ||
        ocr_tensor_alloc(&dlogits, OCR_F32, ocr_cpu(), 3, (int64_t[]){B, T, C}, OCR_MEM_ACTIVATIONS) ||
        ocr_tensor_alloc(&targets, OCR_I32, ocr_cpu(), 2, (int64_t[]){B, S}, OCR_MEM_DATA) ||
        ocr_tensor_alloc(&tl, OCR_I32, ocr_cpu(), 1, (int64_t[]){B}, OCR_MEM_DATA) ||
        ocr_tensor_alloc(&losses, OCR_F32, ocr_cpu(), 1, (int64_t[]){B}, OCR_MEM_ACTIVATIONS)) {
        fprintf(stderr, "bench_ctc: %s\n", ocr_last_error());
        return 1;
    }
    ocr_rng_fill_normal(logits.data, (size_t)n, 1234, 0, 0, 0.0f, 3.0f);
    OcrRng rng = ocr_rng_make(1234, 1);
    int32_t *tg = targets.data, *len = tl.data;
    for (int b = 0; b < B; b++) {
        len[b] = (int32_t)ocr_rng_next_int(&rng, 1, S);
        for (int j = 0; j < S; j++) {
            int32_t c = 0;
            // No adjacent repeats, so every sample fits in T >= 25 frames.
            while (j < len[b] && (c == 0 || (j > 0 && c == tg[b * S + j - 1]))) c = (int32_t)ocr_rng_next_int(&rng, 1, C - 1);
            tg[b * S + j] = c;
        }
    }

    double *fb = malloc(sizeof(double) * runs), *fw = malloc(sizeof(double) * runs);
    double *cb = malloc(sizeof(double) * runs), *cw = malloc(sizeof(double) * runs);
    time_runs(fb, cb, runs, &losses, &dlogits, &logits, &targets, &tl);
    time_runs(fw, cw, runs, &losses, NULL, &logits, &targets, &tl);
    printf("ctc B=%d T=%d C=%d L<=%d threads=%d runs=%d\n", B, T, C, S, ocr_cpu_threads(), runs);
    printf("forward+backward: median %.2f ms (min %.2f, max %.2f), CPU %.2f ms/call\n", 1e3 * fb[runs / 2],
           1e3 * fb[0], 1e3 * fb[runs - 1], 1e3 * cb[runs / 2]);
    printf("forward only:     median %.2f ms (min %.2f, max %.2f), CPU %.2f ms/call\n", 1e3 * fw[runs / 2],
           1e3 * fw[0], 1e3 * fw[runs - 1], 1e3 * cw[runs / 2]);
    free(fb), free(fw), free(cb), free(cw);
    ocr_tensor_free(&logits);
    ocr_tensor_free(&dlogits);
    ocr_tensor_free(&targets);
    ocr_tensor_free(&tl);
    ocr_tensor_free(&losses);
    return 0;
}
