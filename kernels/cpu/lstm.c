// The LSTM cell's elementwise step (Paddle's gate order i, f, g, o) on the CPU, in fp32.
//
// The backward recomputes σ/tanh of the gates and the new cell state from the saved gate
// pre-activations and c_prev with the forward's expressions, so nothing but the gates (which
// the GEMMs produced anyway) and the cell states needs to be kept per step.
#include <math.h>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/ops.h"

static float sigm(float x) { return 1.0f / (1.0f + expf(-x)); }

static void shapes(const OcrTensor *gates, int64_t *B, int64_t *H, const char *op) {
    CPU_ASSERT_FLOAT(gates);
    OCR_ASSERT(gates->ndim == 2 && gates->shape[1] % 4 == 0, "%s: gates must be (B, 4H)", op);
    *B = gates->shape[0];
    *H = gates->shape[1] / 4;
}

static void check_state(const OcrTensor *t, int64_t B, int64_t H, const char *what) {
    if (!t) return;
    CPU_ASSERT_FLOAT(t);
    OCR_ASSERT(t->ndim == 2 && t->shape[0] == B && t->shape[1] == H, "%s must be (%lld, %lld)", what, (long long)B,
               (long long)H);
}

void ocr_cpu_lstm_cell_forward(OcrTensor *h, OcrTensor *c, const OcrTensor *gates, const OcrTensor *c_prev) {
    int64_t B, H;
    shapes(gates, &B, &H, "lstm_cell");
    check_state(h, B, H, "lstm_cell: h");
    check_state(c, B, H, "lstm_cell: c");
    check_state(c_prev, B, H, "lstm_cell: c_prev");
    CpuScratch s = {0};
    const float *a = ocr_cpu_f32_in(&s, gates);
    const float *cp = c_prev ? ocr_cpu_f32_in(&s, c_prev) : NULL;
    float *ho = ocr_cpu_f32_out(&s, h, 0), *co = ocr_cpu_f32_out(&s, c, 0);
#pragma omp parallel for schedule(static) if (B * H > 16384)
    for (int64_t b = 0; b < B; b++) {
        const float *ab = a + b * 4 * H;
        for (int64_t j = 0; j < H; j++) {
            const float i = sigm(ab[j]), f = sigm(ab[H + j]), g = tanhf(ab[2 * H + j]), o = sigm(ab[3 * H + j]);
            const float cn = f * (cp ? cp[b * H + j] : 0.0f) + i * g;
            co[b * H + j] = cn;
            ho[b * H + j] = o * tanhf(cn);
        }
    }
    ocr_cpu_f32_store(h, ho);
    ocr_cpu_f32_store(c, co);
    ocr_cpu_scratch_free(&s);
}

void ocr_cpu_lstm_cell_backward(OcrTensor *dgates, OcrTensor *dc_prev, const OcrTensor *dh, const OcrTensor *dc,
                                const OcrTensor *gates, const OcrTensor *c_prev) {
    int64_t B, H;
    shapes(gates, &B, &H, "lstm_cell_backward");
    check_state(dh, B, H, "lstm_cell_backward: dh");
    check_state(dc, B, H, "lstm_cell_backward: dc");
    check_state(c_prev, B, H, "lstm_cell_backward: c_prev");
    check_state(dc_prev, B, H, "lstm_cell_backward: dc_prev");
    if (dgates) {
        CPU_ASSERT_FLOAT(dgates);
        OCR_ASSERT(ocr_tensor_same_shape(dgates, gates), "lstm_cell_backward: dgates must be (B, 4H)");
    }
    if (!dgates && !dc_prev) return;
    CpuScratch s = {0};
    const float *a = ocr_cpu_f32_in(&s, gates);
    const float *cp = c_prev ? ocr_cpu_f32_in(&s, c_prev) : NULL;
    const float *gh = ocr_cpu_f32_in(&s, dh);
    const float *gc = dc ? ocr_cpu_f32_in(&s, dc) : NULL;
    float *da = dgates ? ocr_cpu_f32_out(&s, dgates, 0) : NULL;
    float *dcp = dc_prev ? ocr_cpu_f32_out(&s, dc_prev, 0) : NULL;
#pragma omp parallel for schedule(static) if (B * H > 16384)
    for (int64_t b = 0; b < B; b++) {
        const float *ab = a + b * 4 * H;
        for (int64_t j = 0; j < H; j++) {
            const int64_t k = b * H + j;
            const float i = sigm(ab[j]), f = sigm(ab[H + j]), g = tanhf(ab[2 * H + j]), o = sigm(ab[3 * H + j]);
            const float c0 = cp ? cp[k] : 0.0f;
            const float tc = tanhf(f * c0 + i * g);
            // Total gradient of the new cell state: from later steps and through h = o·tanh(c).
            const float dct = (gc ? gc[k] : 0.0f) + gh[k] * o * (1.0f - tc * tc);
            if (da) {
                float *db = da + b * 4 * H;
                db[j] = dct * g * i * (1.0f - i);
                db[H + j] = dct * c0 * f * (1.0f - f);
                db[2 * H + j] = dct * i * (1.0f - g * g);
                db[3 * H + j] = gh[k] * tc * o * (1.0f - o);
            }
            if (dcp) dcp[k] = dct * f;
        }
    }
    if (da) ocr_cpu_f32_store(dgates, da);
    if (dcp) ocr_cpu_f32_store(dc_prev, dcp);
    ocr_cpu_scratch_free(&s);
}
