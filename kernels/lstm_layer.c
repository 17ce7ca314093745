// One layer of Paddle's nn.LSTM (forward direction, zero initial state) over a time-major
// sequence, composed from ops of this library, so it runs on whichever device its tensors are
// on: the input projection of every step is one GEMM, then per step one GEMM of the previous
// hidden state and the lstm_cell op. The backward (BPTT) walks the steps in reverse with the
// cell op's backward, then forms the weight gradients with one GEMM each over all steps:
// time-major storage makes every step's (B, ·) block and the "all steps but the first / last"
// ranges contiguous.
#include "kernels/ops.h"

static OcrTensor step_view(const OcrTensor *t, int64_t step, int64_t rows, int64_t cols) {
    size_t off = (size_t)(step * rows * cols) * ocr_dtype_size(t->dtype);
    return ocr_tensor_view((char *)t->data + off, t->dtype, t->device, 2, (int64_t[]){rows, cols});
}

static OcrTensor rows_view(const OcrTensor *t, int64_t first_row, int64_t rows, int64_t cols) {
    size_t off = (size_t)(first_row * cols) * ocr_dtype_size(t->dtype);
    return ocr_tensor_view((char *)t->data + off, t->dtype, t->device, 2, (int64_t[]){rows, cols});
}

static void shapes(const OcrTensor *x, const OcrTensor *w_ih, const OcrTensor *w_hh, int64_t *T, int64_t *B,
                   int64_t *I, int64_t *H, const char *op) {
    OCR_ASSERT(x->ndim == 3, "%s: x must be (T, B, I)", op);
    *T = x->shape[0], *B = x->shape[1], *I = x->shape[2];
    OCR_ASSERT(w_hh->ndim == 2 && w_hh->shape[0] == 4 * w_hh->shape[1], "%s: w_hh must be (4H, H)", op);
    *H = w_hh->shape[1];
    OCR_ASSERT(w_ih->ndim == 2 && w_ih->shape[0] == 4 * *H && w_ih->shape[1] == *I, "%s: w_ih must be (4H, I)", op);
}

static void check_seq(const OcrTensor *t, int64_t T, int64_t B, int64_t C, const char *what) {
    OCR_ASSERT(t->ndim == 3 && t->shape[0] == T && t->shape[1] == B && t->shape[2] == C,
               "%s must be (%lld, %lld, %lld)", what, (long long)T, (long long)B, (long long)C);
}

void ocr_lstm_layer_forward(OcrTensor *y, OcrTensor *gates, OcrTensor *cells, const OcrTensor *x, const OcrTensor *w_ih,
                            const OcrTensor *w_hh, const OcrTensor *b_ih, const OcrTensor *b_hh) {
    int64_t T, B, I, H;
    shapes(x, w_ih, w_hh, &T, &B, &I, &H, "lstm_layer");
    check_seq(y, T, B, H, "lstm_layer: y");
    check_seq(gates, T, B, 4 * H, "lstm_layer: gates");
    check_seq(cells, T, B, H, "lstm_layer: cells");
    if (T * B == 0) return;
    OcrTensor x2 = ocr_tensor_reshape(x, 2, (int64_t[]){T * B, I});
    OcrTensor g2 = ocr_tensor_reshape(gates, 2, (int64_t[]){T * B, 4 * H});
    ocr_gemm(&g2, &x2, w_ih, 0, 1, 1.0f, 0.0f);
    // The two bias vectors are added separately, as Paddle's gates = x·W_ihᵀ + b_ih + h·W_hhᵀ + b_hh.
    OcrTensor bi = ocr_tensor_reshape(b_ih, 2, (int64_t[]){1, 4 * H}), bh = ocr_tensor_reshape(b_hh, 2, (int64_t[]){1, 4 * H});
    ocr_batch_broadcast_add_forward(&g2, &g2, &bi);
    ocr_batch_broadcast_add_forward(&g2, &g2, &bh);
    for (int64_t t = 0; t < T; t++) {
        OcrTensor gt = step_view(gates, t, B, 4 * H), ht = step_view(y, t, B, H), ct = step_view(cells, t, B, H);
        if (t > 0) {
            OcrTensor hp = step_view(y, t - 1, B, H), cp = step_view(cells, t - 1, B, H);
            ocr_gemm(&gt, &hp, w_hh, 0, 1, 1.0f, 1.0f);
            ocr_lstm_cell_forward(&ht, &ct, &gt, &cp);
        } else {
            ocr_lstm_cell_forward(&ht, &ct, &gt, NULL);
        }
    }
}

void ocr_lstm_layer_backward(OcrTensor *dx, OcrTensor *dw_ih, OcrTensor *dw_hh, OcrTensor *db_ih, OcrTensor *db_hh,
                             OcrTensor *dgates, OcrTensor *state, const OcrTensor *dy, const OcrTensor *x,
                             const OcrTensor *y, const OcrTensor *gates, const OcrTensor *cells, const OcrTensor *w_ih,
                             const OcrTensor *w_hh) {
    int64_t T, B, I, H;
    shapes(x, w_ih, w_hh, &T, &B, &I, &H, "lstm_layer_backward");
    check_seq(dy, T, B, H, "lstm_layer_backward: dy");
    check_seq(y, T, B, H, "lstm_layer_backward: y");
    check_seq(gates, T, B, 4 * H, "lstm_layer_backward: gates");
    check_seq(dgates, T, B, 4 * H, "lstm_layer_backward: dgates");
    check_seq(cells, T, B, H, "lstm_layer_backward: cells");
    OCR_ASSERT(state->ndim == 3 && state->shape[0] == 3 && state->shape[1] == B && state->shape[2] == H,
               "lstm_layer_backward: state must be (3, B, H)");
    if (dx) check_seq(dx, T, B, I, "lstm_layer_backward: dx");
    if (T * B == 0) return;
    // state: dh (this step's total hidden gradient), and two cell gradients that swap roles.
    OcrTensor dh = step_view(state, 0, B, H), dc[2] = {step_view(state, 1, B, H), step_view(state, 2, B, H)};
    int cur = 0;  // dc[cur]: the gradient of c_t from step t + 1
    for (int64_t t = T - 1; t >= 0; t--) {
        OcrTensor dyt = step_view(dy, t, B, H), gt = step_view(gates, t, B, 4 * H), dgt = step_view(dgates, t, B, 4 * H);
        ocr_cast_forward(&dh, &dyt);
        if (t < T - 1) {
            OcrTensor dgn = step_view(dgates, t + 1, B, 4 * H);
            ocr_gemm(&dh, &dgn, w_hh, 0, 0, 1.0f, 1.0f);
        }
        if (t > 0) {
            OcrTensor cp = step_view(cells, t - 1, B, H);
            ocr_lstm_cell_backward(&dgt, &dc[cur ^ 1], &dh, t < T - 1 ? &dc[cur] : NULL, &gt, &cp);
        } else {
            ocr_lstm_cell_backward(&dgt, NULL, &dh, t < T - 1 ? &dc[cur] : NULL, &gt, NULL);
        }
        cur ^= 1;
    }
    OcrTensor dg2 = ocr_tensor_reshape(dgates, 2, (int64_t[]){T * B, 4 * H});
    OcrTensor x2 = ocr_tensor_reshape(x, 2, (int64_t[]){T * B, I});
    if (dw_ih) ocr_gemm(dw_ih, &dg2, &x2, 1, 0, 1.0f, 1.0f);
    if (dw_hh && T > 1) {
        OcrTensor dgl = rows_view(dgates, B, (T - 1) * B, 4 * H), yp = rows_view(y, 0, (T - 1) * B, H);
        ocr_gemm(dw_hh, &dgl, &yp, 1, 0, 1.0f, 1.0f);
    }
    if (db_ih) {
        OcrTensor b = ocr_tensor_reshape(db_ih, 2, (int64_t[]){1, 4 * H});
        ocr_batch_broadcast_add_backward(NULL, &b, &dg2);
    }
    if (db_hh) {
        OcrTensor b = ocr_tensor_reshape(db_hh, 2, (int64_t[]){1, 4 * H});
        ocr_batch_broadcast_add_backward(NULL, &b, &dg2);
    }
    if (dx) {
        OcrTensor dx2 = ocr_tensor_reshape(dx, 2, (int64_t[]){T * B, I});
        ocr_gemm(&dx2, &dg2, w_ih, 0, 0, 1.0f, 0.0f);
    }
}
