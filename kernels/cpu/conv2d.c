// 2-D convolution on the CPU, NHWC activations and (OC, KH, KW, C/groups) weights.
//
// - 1×1, stride 1, no padding: the NHWC buffer already is the (N·H·W, C) GEMM operand, so
//   the convolution is one sgemm per group with no copy. These are most of PP-OCR's FLOPs.
// - Other dense and grouped convolutions: im2col into workspace (rows N·Ho·Wo, columns
//   KH·KW·C/groups, channel fastest, matching the weight's KRSC layout) + sgemm per group.
//   The batch is processed in chunks of whole images so the column buffer stays bounded; on
//   the oneDNN path the forward and dinp take cache-sized chunks (their GEMM rows are
//   independent), the weight gradient whole-budget ones (each chunk adds into dweight).
// - Depthwise (groups == C == OC): direct loops in conv2d_depthwise.c, which read and write
//   f16/bf16 maps in their dtype (widening a block of rows at a time); under
//   Global.cpu_exact_numerics the maps are widened whole here instead (the reference, same bits).
// Backward: dweight += doutᵀ·col, dcol = dout·W followed by a gather col2im (each input
// pixel sums the column entries that read it), so no scatter races and no zeroing pass.
// f16/bf16 convolutions (1×1 and im2col) run on the CPU's BF16/FP16 hardware through oneDNN
// where it exists (kernels/cpu/isa.h): the same GEMMs on the low-precision data itself (the
// column buffer is built in that dtype), fp32 accumulation, one rounding into the output, no
// fp32 copies of the tensors. Without such hardware the operands are widened to fp32 and take
// the same oneDNN fp32 GEMMs as an fp32 run; the reference (Global.cpu_exact_numerics) widens
// and uses sgemm. With f16/bf16 maps and an f32 weight (a compute dtype without AMP's weight
// casts) the forward and dinp widen, while the weight gradient, which reads only the maps,
// still takes the hardware GEMM.
#include <cblas.h>
#include <omp.h>
#include <string.h>

#include "core/half.h"
#include "kernels/cpu/conv2d_depthwise.h"
#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/onednn.h"
#include "kernels/ops.h"

// Column buffer budget per chunk (bytes); one image is always processed even when bigger.
#define IM2COL_BUDGET_BYTES ((size_t)64 << 20)

// Test hooks (not in ops.h): force the im2col path for depthwise convolutions, and shrink
// the column budget (0 restores the default) so small tests exercise batch chunking.
void ocr_conv2d_force_general(int force);
void ocr_conv2d_set_im2col_budget(size_t bytes);
static int force_general;
static size_t im2col_budget = IM2COL_BUDGET_BYTES;
void ocr_conv2d_force_general(int force) { force_general = force; }
void ocr_conv2d_set_im2col_budget(size_t bytes) { im2col_budget = bytes ? bytes : IM2COL_BUDGET_BYTES; }

int ocr_conv2d_out_size(int in_size, int kernel, int stride, int pad) {
    OCR_ASSERT(stride > 0 && kernel > 0 && pad >= 0, "conv2d: bad kernel %d / stride %d / pad %d", kernel, stride, pad);
    int span = in_size + 2 * pad - kernel;
    return span < 0 ? 0 : span / stride + 1;
}

typedef struct {
    int64_t N, H, W, C, OC, KH, KW, Ho, Wo;
    int64_t G, Cg, OCg, KKC;  // groups, channels per group, out channels per group, KH·KW·Cg
    int sh, sw, ph, pw;
} ConvGeom;

static ConvGeom conv_geom(const OcrTensor *inp, const OcrTensor *weight, Conv2dParams p) {
    CPU_ASSERT_FLOAT(inp);
    CPU_ASSERT_FLOAT(weight);
    OCR_ASSERT(inp->ndim == 4 && weight->ndim == 4, "conv2d: inp must be (N, H, W, C), weight (OC, KH, KW, C/groups)");
    ConvGeom g;
    g.N = inp->shape[0], g.H = inp->shape[1], g.W = inp->shape[2], g.C = inp->shape[3];
    g.OC = weight->shape[0], g.KH = weight->shape[1], g.KW = weight->shape[2];
    g.G = p.groups;
    OCR_ASSERT(g.G >= 1 && g.C % g.G == 0 && g.OC % g.G == 0, "conv2d: %lld in / %lld out channels, %lld groups",
               (long long)g.C, (long long)g.OC, (long long)g.G);
    g.Cg = g.C / g.G, g.OCg = g.OC / g.G;
    OCR_ASSERT(weight->shape[3] == g.Cg, "conv2d: weight has %lld input channels, expected C/groups = %lld",
               (long long)weight->shape[3], (long long)g.Cg);
    g.KKC = g.KH * g.KW * g.Cg;
    g.sh = p.stride_h, g.sw = p.stride_w, g.ph = p.pad_h, g.pw = p.pad_w;
    g.Ho = ocr_conv2d_out_size((int)g.H, (int)g.KH, g.sh, g.ph);
    g.Wo = ocr_conv2d_out_size((int)g.W, (int)g.KW, g.sw, g.pw);
    return g;
}

static int is_pointwise(const ConvGeom *g) {
    return g->KH == 1 && g->KW == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0;
}

static int is_depthwise(const ConvGeom *g) { return !force_general && g->G == g->C && g->OC == g->C && g->Cg == 1; }

static int64_t images_per_chunk(const ConvGeom *g) {
    size_t per_image = (size_t)(g->Ho * g->Wo * g->KKC) * sizeof(float);
    int64_t n = per_image ? (int64_t)(im2col_budget / per_image) : g->N;
    if (n < 1) n = 1;
    return n < g->N ? n : g->N;
}

// Where the column rows are independent GEMM rows (the forward, and dinp's dcol), smaller
// chunks cost nothing in rounding and keep the buffer in cache between the pass that writes it
// and the one that reads it (im2col → GEMM, GEMM → col2im gather): the stem's whole-batch
// columns are 13–27 MB, streamed through memory twice. Images of es-byte column entries per
// chunk, within IM2COL_CACHE_BYTES (at least one image) and the budget above.
#define IM2COL_CACHE_BYTES ((size_t)2 << 20)
static int64_t images_per_cached_chunk(const ConvGeom *g, size_t es) {
    size_t per_image = (size_t)(g->Ho * g->Wo * g->KKC) * es;
    int64_t n = per_image ? (int64_t)(IM2COL_CACHE_BYTES / per_image) : g->N;
    if (n < 1) n = 1;
    int64_t cap = images_per_chunk(g);
    return n < cap ? n : cap;
}

static void sgemm_rm(int ta, int tb, int64_t M, int64_t N, int64_t K, const float *a, int64_t lda, const float *b,
                     int64_t ldb, float beta, float *c, int64_t ldc) {
    OCR_ASSERT(M <= 0x7fffffff && N <= 0x7fffffff && K <= 0x7fffffff, "conv2d: GEMM too large for BLAS's int");
    if (M == 0 || N == 0 || K == 0) return;  // callers only reach here with beta = 1 or non-empty K
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)M, (int)N, (int)K,
                1.0f, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
}

// col (nb·Ho·Wo, KKC) for images n0 .. n0+nb−1 and group grp on elements of es bytes (fp32 for
// sgemm; the low-precision hardware path builds its columns in the tensor's own dtype); padding
// reads are zeros (zero bytes are +0 in every float format).
static void im2col_bytes(void *col, const void *x, size_t es, const ConvGeom *g, int64_t n0, int64_t nb, int64_t grp) {
    const int64_t Cg = g->Cg, KKC = g->KKC;
    // Without groups the kw taps of one kernel row are adjacent pixels of one input row, which
    // NHWC stores back to back: one copy per kernel row instead of one per tap (the stem's 3
    // channels would otherwise be 6- or 12-byte copies, call overhead rather than bandwidth).
    const int contiguous_taps = Cg == g->C;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < nb * g->Ho; r++) {
        int64_t n = n0 + r / g->Ho, oh = r % g->Ho;
        for (int64_t ow = 0; ow < g->Wo; ow++) {
            char *dst = (char *)col + (size_t)((r * g->Wo + ow) * KKC) * es;
            // Taps kw0 .. kw1−1 read inside the row; the others are padding.
            const int64_t iw0 = ow * g->sw - g->pw;
            const int64_t kw0 = iw0 < 0 ? (-iw0 < g->KW ? -iw0 : g->KW) : 0;
            const int64_t kw1 = g->W - iw0 < g->KW ? (g->W - iw0 > kw0 ? g->W - iw0 : kw0) : g->KW;
            for (int64_t kh = 0; kh < g->KH; kh++, dst += (size_t)(g->KW * Cg) * es) {
                int64_t ih = oh * g->sh - g->ph + kh;
                if (ih < 0 || ih >= g->H) {
                    memset(dst, 0, (size_t)(g->KW * Cg) * es);
                    continue;
                }
                const char *src_row = (const char *)x + (size_t)(((n * g->H + ih) * g->W) * g->C + grp * Cg) * es;
                if (kw0 > 0) memset(dst, 0, (size_t)(kw0 * Cg) * es);
                if (kw1 < g->KW) memset(dst + (size_t)(kw1 * Cg) * es, 0, (size_t)((g->KW - kw1) * Cg) * es);
                if (contiguous_taps) {
                    if (kw1 > kw0)
                        memcpy(dst + (size_t)(kw0 * Cg) * es, src_row + (size_t)((iw0 + kw0) * g->C) * es,
                               (size_t)((kw1 - kw0) * Cg) * es);
                } else {
                    for (int64_t kw = kw0; kw < kw1; kw++)
                        memcpy(dst + (size_t)(kw * Cg) * es, src_row + (size_t)((iw0 + kw) * g->C) * es,
                               (size_t)Cg * es);
                }
            }
        }
    }
}

// acc (Cg) = Σ of the dcol entries that read input pixel (ih, iw) of local image nl, group
// columns only (dcol holds images n0 .. n0+nb−1), in a fixed order.
static inline void gather_pixel(float *restrict acc, const float *dcol, const ConvGeom *g, int64_t nl, int64_t ih,
                                int64_t iw) {
    const int64_t Cg = g->Cg, KKC = g->KKC;
    for (int64_t c = 0; c < Cg; c++) acc[c] = 0.0f;
    // kh ≡ ih + ph (mod sh) so that oh = (ih + ph − kh) / sh is exact.
    for (int64_t kh = (ih + g->ph) % g->sh; kh < g->KH; kh += g->sh) {
        int64_t oh = (ih + g->ph - kh) / g->sh;
        if (ih + g->ph - kh < 0 || oh >= g->Ho) continue;
        for (int64_t kw = (iw + g->pw) % g->sw; kw < g->KW; kw += g->sw) {
            int64_t ow = (iw + g->pw - kw) / g->sw;
            if (iw + g->pw - kw < 0 || ow >= g->Wo) continue;
            const float *restrict src = dcol + ((nl * g->Ho + oh) * g->Wo + ow) * KKC + (kh * g->KW + kw) * Cg;
            for (int64_t c = 0; c < Cg; c++) acc[c] += src[c];
        }
    }
}

// dx[..., grp·Cg : (grp+1)·Cg] = Σ of the dcol entries that read each input pixel (assigned),
// for images n0 .. n0+nb−1, dx of dtype dt. Each pixel is written by one thread. An f32 dx is
// summed in place; f16/bf16 pixels are summed in fp32 (tmp_all: W·Cg floats per thread, one
// input row) and rounded once when stored, which is what the fp32 gather followed by one
// conversion of the whole tensor gives, without the fp32 copy of dx. Without groups a row's
// pixels are adjacent in dx, so the row is converted in one call (the stem's 3 or 24 channels
// per call would otherwise cost more in calls than in conversion).
static void col2im_gather_to(void *dx, ocr_dtype_t dt, const float *dcol, const ConvGeom *g, int64_t n0, int64_t nb,
                             int64_t grp, float *tmp_all) {
    const int64_t Cg = g->Cg;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < nb * g->H; r++) {
        int64_t nl = r / g->H, ih = r % g->H;
        const int64_t row_off = (((n0 + nl) * g->H + ih) * g->W) * g->C + grp * Cg;
        if (dt == OCR_F32) {
            for (int64_t iw = 0; iw < g->W; iw++) gather_pixel((float *)dx + row_off + iw * g->C, dcol, g, nl, ih, iw);
            continue;
        }
        float *acc = tmp_all + (size_t)omp_get_thread_num() * (size_t)(g->W * Cg);
        for (int64_t iw = 0; iw < g->W; iw++) gather_pixel(acc + iw * Cg, dcol, g, nl, ih, iw);
        const int64_t runs = Cg == g->C ? 1 : g->W, run_len = Cg == g->C ? g->W * Cg : Cg;
        for (int64_t k = 0; k < runs; k++) {
            const int64_t off = row_off + k * g->C;
            if (dt == OCR_BF16)
                ocr_f32_to_bf16_array((ocr_bf16_t *)dx + off, acc + k * Cg, (size_t)run_len);
            else
                ocr_f32_to_f16_array((ocr_f16_t *)dx + off, acc + k * Cg, (size_t)run_len);
        }
    }
}

// y (rows, C) = bias broadcast over rows.
static void fill_rows(float *y, const float *bias, int64_t rows, int64_t C) {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) memcpy(y + r * C, bias, (size_t)C * sizeof(float));
}

// The oneDNN path: dense/grouped (not depthwise) non-empty convolutions whose data tensors
// share one native low-precision dtype, or are all f32 where oneDNN's fp32 matmul is chosen
// (ocr_cpu_f32_conv_onednn); outputs in f32 or that dtype.
static int conv_lp_native(const ConvGeom *g, ocr_dtype_t dt, const OcrTensor *const *ins, int n_in,
                          const OcrTensor *const *outs, int n_out) {
    if (is_depthwise(g) || !(ocr_cpu_lp_native(dt) || (dt == OCR_F32 && ocr_cpu_f32_conv_onednn()))) return 0;
    if (g->N * g->Ho * g->Wo == 0 || g->OC == 0 || g->KKC == 0) return 0;
    for (int i = 0; i < n_in; i++)
        if (ins[i]->dtype != dt) return 0;
    for (int i = 0; i < n_out; i++)
        if (outs[i] && outs[i]->dtype != OCR_F32 && outs[i]->dtype != dt) return 0;
    return 1;
}

// oneDNN's own convolution kernels (onednn.h) instead of im2col + GEMM for a dense convolution
// that is not pointwise (one group): on Zen 4 (docs/BENCHMARKS.md) they computed every weight
// gradient of PP-OCRv6's stems faster (the stem's 3x3 and 2x2 convolutions: 1.7-3x), and the
// forward and the input gradient too where the reduction KH·KW·C is short (there im2col's column
// buffer is most of the traffic: 5x for the 3-channel first convolution) or in fp32; for the bf16
// 3x3 stride-2 convolution over 96 channels (K = 864) im2col + GEMM was 1.8x faster forward.
// Without AVX-512 the fp32 backward passes are the exception: on Zen 3 (AVX2) oneDNN's
// backward kernels ran the stems' gradients at about half the rate of im2col + GEMM (v6 small's
// 3x3 96 -> 48 stem conv at batch 32, input and weight gradients: 61-69 ms against 36-49;
// bench_kernels --net v6), while its forward kernels stayed the faster forward.
#define ONEDNN_CONV_MAX_KKC 512
typedef enum { CONV_PASS_FORWARD, CONV_PASS_INPUT_GRADIENT, CONV_PASS_WEIGHT_GRADIENT } ConvPass;
// fp32 on a CPU whose oneDNN kernels are the AVX2 ones: where the two backward choices below
// were measured.
static int fp32_below_avx512(ocr_dtype_t dt) { return dt == OCR_F32 && ocr_cpu_vec_level() < CPU_VEC_AVX512; }
static int use_onednn_conv(const ConvGeom *g, ocr_dtype_t dt, ConvPass pass) {
    if (g->G != 1 || is_pointwise(g) || is_depthwise(g) || g->Ho == 0 || g->Wo == 0) return 0;
    if (pass != CONV_PASS_FORWARD && fp32_below_avx512(dt)) return 0;
    return pass == CONV_PASS_WEIGHT_GRADIENT || dt == OCR_F32 || g->KKC <= ONEDNN_CONV_MAX_KKC;
}

static OnednnConvGeom onednn_geom(const ConvGeom *g) {
    OnednnConvGeom c = {g->N, g->H, g->W, g->C, g->OC, g->KH, g->KW, g->Ho, g->Wo, g->sh, g->sw, g->ph, g->pw};
    return c;
}

static void conv_forward_lp(OcrTensor *out, const OcrTensor *inp, const OcrTensor *weight, const float *b,
                            const ConvGeom *g, CpuScratch *s) {
    const ocr_dtype_t dt = inp->dtype, odt = out->dtype;
    const int64_t rows = g->N * g->Ho * g->Wo;
    if (is_pointwise(g)) {
        for (int64_t grp = 0; grp < g->G; grp++)
            ocr_onednn_gemm(1, rows, g->OCg, g->Cg, 1.0f, onednn_mat(inp->data, dt, grp * g->Cg, g->C, 0),
                            onednn_mat(weight->data, dt, grp * g->OCg * g->Cg, g->Cg, 1), b ? b + grp * g->OCg : NULL,
                            0, onednn_elem(out->data, odt, grp * g->OCg), odt, g->OC, 0);
        return;
    }
    if (use_onednn_conv(g, dt, CONV_PASS_FORWARD)) {
        const OnednnConvGeom cg = onednn_geom(g);
        if (ocr_onednn_conv_forward(out->data, odt, inp->data, weight->data, b, dt, &cg)) return;
    }
    const size_t es = ocr_dtype_size(dt);
    const int64_t chunk = images_per_cached_chunk(g, es), img_rows = g->Ho * g->Wo;
    void *col = ocr_cpu_scratch_bytes(s, (size_t)(chunk * img_rows * g->KKC) * es);
    for (int64_t n0 = 0; n0 < g->N; n0 += chunk) {
        int64_t nb = g->N - n0 < chunk ? g->N - n0 : chunk;
        for (int64_t grp = 0; grp < g->G; grp++) {
            im2col_bytes(col, inp->data, es, g, n0, nb, grp);
            ocr_onednn_gemm(1, nb * img_rows, g->OCg, g->KKC, 1.0f, onednn_mat(col, dt, 0, g->KKC, 0),
                            onednn_mat(weight->data, dt, grp * g->OCg * g->KKC, g->KKC, 1),
                            b ? b + grp * g->OCg : NULL, 0,
                            onednn_elem(out->data, odt, n0 * img_rows * g->OC + grp * g->OCg), odt, g->OC, 0);
        }
    }
}

// A 1×1 convolution's fp32 weight gradient is the GEMM doutᵀ · inp (OC × C, the reduction over
// every pixel). Where OC > C (PPLCNetV4's expand convs) oneDNN's fp32 matmul on AVX2 runs the
// transposed product inpᵀ · dout (C × OC: fewer rows than columns) faster, and the result is
// added transposed: Zen 3, 2 threads, batch 32 (docs/BENCHMARKS.md): 256 -> 512 over 30,720
// pixels (v6 medium's blocks3) 69-73 -> 52-57 ms, 192 -> 384 over 15,360 (v6 small's blocks4)
// 15-18 -> 14-16 ms; with OC < C the given orientation is the faster one, and with 512+
// channels both are the same. Only where measured: fp32 without AVX-512.
static int pointwise_weight_gradient_transposed(const ConvGeom *g, ocr_dtype_t dt, ocr_dtype_t dweight_dt) {
    return fp32_below_avx512(dt) && dweight_dt == OCR_F32 && g->G == 1 && g->OC > g->C;
}

static void conv_backward_lp(OcrTensor *dinp, OcrTensor *dweight, OcrTensor *dbias, const OcrTensor *dout,
                             const OcrTensor *inp, const OcrTensor *weight, const ConvGeom *g, CpuScratch *s) {
    const ocr_dtype_t dt = dout->dtype;
    const int64_t rows = g->N * g->Ho * g->Wo;
    if (dbias) {
        float *db = ocr_cpu_f32_out(s, dbias, 1);
        ocr_cpu_column_sums_add(db, dout->data, dt, rows, g->OC, g->OC);
        ocr_cpu_f32_store(dbias, db);
    }
    if (is_pointwise(g)) {
        if (dweight && pointwise_weight_gradient_transposed(g, dt, dweight->dtype)) {
            // dweightᵀ (C, OC) = inpᵀ · dout in fp32, added transposed into dweight (OC, C).
            float *dwt = ocr_cpu_scratch_floats(s, (size_t)(g->C * g->OC));
            ocr_onednn_gemm(1, g->C, g->OC, rows, 1.0f, onednn_mat(inp->data, dt, 0, g->C, 1),
                            onednn_mat(dout->data, dt, 0, g->OC, 0), NULL, 0, dwt, OCR_F32, g->OC, 0);
            float *dw = dweight->data;
            const int64_t C = g->C, OC = g->OC;
#pragma omp parallel for schedule(static) if (C * OC > 65536)
            for (int64_t o = 0; o < OC; o++)
                for (int64_t c = 0; c < C; c++) dw[o * C + c] += dwt[c * OC + o];
            dweight = NULL;
        }
        for (int64_t grp = 0; grp < g->G; grp++) {
            // dweight_g (OCg, Cg) += dout_gᵀ · inp_g;  dinp_g (rows, Cg) = dout_g · weight_g.
            if (dweight)
                ocr_onednn_gemm(1, g->OCg, g->Cg, rows, 1.0f, onednn_mat(dout->data, dt, grp * g->OCg, g->OC, 1),
                                onednn_mat(inp->data, dt, grp * g->Cg, g->C, 0), NULL, 1,
                                onednn_elem(dweight->data, dweight->dtype, grp * g->OCg * g->Cg), dweight->dtype,
                                g->Cg, 0);
            if (dinp)
                ocr_onednn_gemm(1, rows, g->Cg, g->OCg, 1.0f, onednn_mat(dout->data, dt, grp * g->OCg, g->OC, 0),
                                onednn_mat(weight->data, dt, grp * g->OCg * g->Cg, g->Cg, 0), NULL, 0,
                                onednn_elem(dinp->data, dinp->dtype, grp * g->Cg), dinp->dtype, g->C, 0);
        }
        return;
    }
    const OnednnConvGeom cg = onednn_geom(g);
    if (dweight && use_onednn_conv(g, dt, CONV_PASS_WEIGHT_GRADIENT)) {
        // dweight += the gradient, formed in fp32 and rounded once into dweight's dtype.
        float *dw = ocr_cpu_scratch_floats(s, (size_t)(g->OC * g->KKC));
        if (ocr_onednn_conv_backward_weights(dw, inp->data, dout->data, dt, &cg)) {
            float *acc = ocr_cpu_f32_out(s, dweight, 1);
            for (int64_t i = 0; i < g->OC * g->KKC; i++) acc[i] += dw[i];
            ocr_cpu_f32_store(dweight, acc);
            dweight = NULL;
        }
    }
    if (dinp && use_onednn_conv(g, dt, CONV_PASS_INPUT_GRADIENT) &&
        ocr_onednn_conv_backward_data(dinp->data, dinp->dtype, dout->data, weight->data, dt, &cg))
        dinp = NULL;
    if (!dweight && !dinp) return;
    // One buffer serves the low-precision columns (dweight) and then the fp32 dcol (dinp). The
    // weight gradient takes whole-budget chunks where each chunk's sum is rounded into an f16/bf16
    // dweight once more, and cache-sized ones into an fp32 dweight (fp32 sums of fp32 products
    // either way; the budget's 64 MiB buffer would otherwise raise the step's peak: v6 small's
    // stem on AVX2); dinp's rows are independent, so it takes cache-sized chunks.
    const size_t es = ocr_dtype_size(dt);
    const int64_t img_rows = g->Ho * g->Wo;
    const int fp32_dweight = dweight && dt == OCR_F32 && dweight->dtype == OCR_F32;
    const int64_t wchunk = fp32_dweight ? images_per_cached_chunk(g, es) : images_per_chunk(g);
    const int64_t xchunk = images_per_cached_chunk(g, sizeof(float));
    size_t col_bytes = dweight ? (size_t)(wchunk * img_rows * g->KKC) * es : 0;
    if (dinp && (size_t)(xchunk * img_rows * g->KKC) * sizeof(float) > col_bytes)
        col_bytes = (size_t)(xchunk * img_rows * g->KKC) * sizeof(float);
    void *col = ocr_cpu_scratch_bytes(s, col_bytes);
    for (int64_t n0 = 0; dweight && n0 < g->N; n0 += wchunk) {
        int64_t nb = g->N - n0 < wchunk ? g->N - n0 : wchunk;
        for (int64_t grp = 0; grp < g->G; grp++) {
            im2col_bytes(col, inp->data, es, g, n0, nb, grp);
            ocr_onednn_gemm(1, g->OCg, g->KKC, nb * img_rows, 1.0f,
                            onednn_mat(dout->data, dt, n0 * img_rows * g->OC + grp * g->OCg, g->OC, 1),
                            onednn_mat(col, dt, 0, g->KKC, 0), NULL, 1,
                            onednn_elem(dweight->data, dweight->dtype, grp * g->OCg * g->KKC), dweight->dtype, g->KKC,
                            0);
        }
    }
    if (!dinp) return;
    float *tmp = ocr_cpu_scratch_floats(s, (size_t)omp_get_max_threads() * (size_t)(g->W * g->Cg));
    for (int64_t n0 = 0; n0 < g->N; n0 += xchunk) {
        int64_t nb = g->N - n0 < xchunk ? g->N - n0 : xchunk;
        for (int64_t grp = 0; grp < g->G; grp++) {
            ocr_onednn_gemm(1, nb * img_rows, g->KKC, g->OCg, 1.0f,
                            onednn_mat(dout->data, dt, n0 * img_rows * g->OC + grp * g->OCg, g->OC, 0),
                            onednn_mat(weight->data, dt, grp * g->OCg * g->KKC, g->KKC, 0), NULL, 0, col, OCR_F32,
                            g->KKC, 0);
            col2im_gather_to(dinp->data, dinp->dtype, col, g, n0, nb, grp, tmp);
        }
    }
}

// Depthwise: the loops take the maps in their own dtype; under exact numerics the maps are
// widened whole first and rounded whole after (the reference the native path must equal).
static void depthwise_forward(OcrTensor *out, const OcrTensor *inp, const float *w, const float *b,
                              const ConvGeom *g, Conv2dParams p, CpuScratch *s) {
    if (ocr_cpu_exact_numerics()) {
        float *y = ocr_cpu_f32_out(s, out, 0);
        OcrTensor xv = ocr_cpu_f32_view(inp, ocr_cpu_f32_in(s, inp)), yv = ocr_cpu_f32_view(out, y);
        ocr_cpu_conv2d_depthwise_forward(&yv, &xv, w, b, g->N, g->H, g->W, g->C, g->KH, g->KW, g->Ho, g->Wo, p);
        ocr_cpu_f32_store(out, y);
    } else {
        ocr_cpu_conv2d_depthwise_forward(out, inp, w, b, g->N, g->H, g->W, g->C, g->KH, g->KW, g->Ho, g->Wo, p);
    }
}

static void depthwise_backward(OcrTensor *dinp, OcrTensor *dweight, OcrTensor *dbias, const OcrTensor *dout,
                               const OcrTensor *inp, const OcrTensor *weight, const ConvGeom *g, Conv2dParams p,
                               CpuScratch *s) {
    const float *w = dinp ? ocr_cpu_f32_in(s, weight) : NULL;
    float *dw = dweight ? ocr_cpu_f32_out(s, dweight, 1) : NULL;
    float *db = dbias ? ocr_cpu_f32_out(s, dbias, 1) : NULL;
    if (ocr_cpu_exact_numerics()) {
        float *dx = dinp ? ocr_cpu_f32_out(s, dinp, 0) : NULL;
        OcrTensor dyv = ocr_cpu_f32_view(dout, ocr_cpu_f32_in(s, dout));
        OcrTensor xv = ocr_cpu_f32_view(inp, dweight ? ocr_cpu_f32_in(s, inp) : NULL);
        OcrTensor dxv = dinp ? ocr_cpu_f32_view(dinp, dx) : xv;
        ocr_cpu_conv2d_depthwise_backward(dinp ? &dxv : NULL, dw, db, &dyv, &xv, w, g->N, g->H, g->W, g->C, g->KH,
                                          g->KW, g->Ho, g->Wo, p);
        if (dx) ocr_cpu_f32_store(dinp, dx);
    } else {
        ocr_cpu_conv2d_depthwise_backward(dinp, dw, db, dout, inp, w, g->N, g->H, g->W, g->C, g->KH, g->KW, g->Ho,
                                          g->Wo, p);
    }
    if (dw) ocr_cpu_f32_store(dweight, dw);
    if (db) ocr_cpu_f32_store(dbias, db);
}

// f16/bf16 dense convolutions without the hardware widen their maps to fp32 (below): whole,
// that is up to four fp32 copies of maps at once (x, y forward; dy, x, dx backward), 300 MiB of
// scratch for PP-OCRv5 server's widest 1x1 conv at batch 32. Past EMULATED_SLAB_BYTES of widened
// maps they go a slab of whole images at a time instead (images are independent; the weight
// gradient's fp32 sums run on over every slab and are rounded once, as whole). The same fp32
// GEMMs on the same rounded values, on fewer rows per call (oneDNN's summation order may differ
// with the row count, as between sgemm and oneDNN). Exact numerics keeps the whole-tensor
// reference; depthwise convolutions widen a block of rows at a time already.
#define EMULATED_SLAB_BYTES ((int64_t)16 << 20)

static int64_t emulated_slab_images(const ConvGeom *g, ocr_dtype_t dt) {
    if (is_depthwise(g) || dt == OCR_F32 || ocr_cpu_exact_numerics() || ocr_cpu_lp_native(dt)) return 0;
    const int64_t per_image = (2 * g->H * g->W * g->C + g->Ho * g->Wo * g->OC) * (int64_t)sizeof(float);
    int64_t slab = per_image > 0 ? EMULATED_SLAB_BYTES / per_image : g->N;
    if (slab < 1) slab = 1;
    return g->N > slab ? slab : 0;
}

// Images [n0, n0 + n) of an NHWC map, over the same memory.
static OcrTensor images_view(const OcrTensor *t, int64_t n0, int64_t n) {
    const int64_t per_image = t->shape[1] * t->shape[2] * t->shape[3];
    return ocr_tensor_view((char *)t->data + n0 * per_image * (int64_t)ocr_dtype_size(t->dtype), t->dtype, t->device,
                           4, (int64_t[]){n, t->shape[1], t->shape[2], t->shape[3]});
}

void ocr_cpu_conv2d_forward(OcrTensor *out, const OcrTensor *inp, const OcrTensor *weight, const OcrTensor *bias,
                    Conv2dParams p) {
    ConvGeom g = conv_geom(inp, weight, p);
    CPU_ASSERT_FLOAT(out);
    OCR_ASSERT(out->ndim == 4 && out->shape[0] == g.N && out->shape[1] == g.Ho && out->shape[2] == g.Wo &&
                   out->shape[3] == g.OC,
               "conv2d: out must be (%lld, %lld, %lld, %lld)", (long long)g.N, (long long)g.Ho, (long long)g.Wo,
               (long long)g.OC);
    if (bias) {
        CPU_ASSERT_FLOAT(bias);
        OCR_ASSERT(ocr_tensor_numel(bias) == g.OC, "conv2d: bias must have OC elements");
    }
    CpuScratch s = {0};
    if (conv_lp_native(&g, inp->dtype, (const OcrTensor *const[]){inp, weight}, 2, (const OcrTensor *const[]){out}, 1)) {
        conv_forward_lp(out, inp, weight, bias ? ocr_cpu_f32_in(&s, bias) : NULL, &g, &s);
        ocr_cpu_scratch_free(&s);
        return;
    }
    const int64_t slab = emulated_slab_images(&g, inp->dtype);
    if (slab) {
        for (int64_t n0 = 0; n0 < g.N; n0 += slab) {
            const int64_t n = g.N - n0 < slab ? g.N - n0 : slab;
            OcrTensor xi = images_view(inp, n0, n), yo = images_view(out, n0, n);
            ocr_cpu_conv2d_forward(&yo, &xi, weight, bias, p);
        }
        return;
    }
    const float *w = ocr_cpu_f32_in(&s, weight);
    const float *b = bias ? ocr_cpu_f32_in(&s, bias) : NULL;
    if (is_depthwise(&g)) {
        depthwise_forward(out, inp, w, b, &g, p, &s);
        ocr_cpu_scratch_free(&s);
        return;
    }
    const float *x = ocr_cpu_f32_in(&s, inp);
    float *y = ocr_cpu_f32_out(&s, out, 0);
    const int64_t rows = g.N * g.Ho * g.Wo;
    // f16/bf16 without the hardware: the widened operands take the fp32 run's oneDNN GEMMs
    // (the same products of the same rounded values, fp32 sums in oneDNN's order). Exact
    // numerics keeps sgemm, the reference.
    OcrTensor xv = ocr_cpu_f32_view(inp, x), wv = ocr_cpu_f32_view(weight, w), yv = ocr_cpu_f32_view(out, y);
    if (conv_lp_native(&g, OCR_F32, (const OcrTensor *const[]){&xv, &wv}, 2, (const OcrTensor *const[]){&yv}, 1)) {
        conv_forward_lp(&yv, &xv, &wv, b, &g, &s);
    } else {
        // Start from the bias and let sgemm add into it (beta = 1).
        float beta = 0.0f;
        if (b) {
            fill_rows(y, b, rows, g.OC);
            beta = 1.0f;
        } else if (g.KKC == 0) {
            memset(y, 0, (size_t)rows * (size_t)g.OC * sizeof(float));
        }
        if (is_pointwise(&g)) {
            for (int64_t grp = 0; grp < g.G; grp++)
                sgemm_rm(0, 1, rows, g.OCg, g.Cg, x + grp * g.Cg, g.C, w + grp * g.OCg * g.Cg, g.Cg, beta,
                         y + grp * g.OCg, g.OC);
        } else if (rows > 0 && g.KKC > 0) {
            const int64_t chunk = images_per_chunk(&g), img_rows = g.Ho * g.Wo;
            float *col = ocr_cpu_scratch_floats(&s, (size_t)(chunk * img_rows * g.KKC));
            for (int64_t n0 = 0; n0 < g.N; n0 += chunk) {
                int64_t nb = g.N - n0 < chunk ? g.N - n0 : chunk;
                for (int64_t grp = 0; grp < g.G; grp++) {
                    im2col_bytes(col, x, sizeof(float), &g, n0, nb, grp);
                    sgemm_rm(0, 1, nb * img_rows, g.OCg, g.KKC, col, g.KKC, w + grp * g.OCg * g.KKC, g.KKC, beta,
                             y + n0 * img_rows * g.OC + grp * g.OCg, g.OC);
                }
            }
        }
    }
    ocr_cpu_f32_store(out, y);
    ocr_cpu_scratch_free(&s);
}

void ocr_cpu_conv2d_backward(OcrTensor *dinp, OcrTensor *dweight, OcrTensor *dbias, const OcrTensor *dout,
                     const OcrTensor *inp, const OcrTensor *weight, Conv2dParams p) {
    ConvGeom g = conv_geom(inp, weight, p);
    CPU_ASSERT_FLOAT(dout);
    OCR_ASSERT(dout->ndim == 4 && dout->shape[0] == g.N && dout->shape[1] == g.Ho && dout->shape[2] == g.Wo &&
                   dout->shape[3] == g.OC,
               "conv2d backward: dout must be (%lld, %lld, %lld, %lld)", (long long)g.N, (long long)g.Ho,
               (long long)g.Wo, (long long)g.OC);
    if (dinp) {
        CPU_ASSERT_FLOAT(dinp);
        OCR_ASSERT(ocr_tensor_same_shape(dinp, inp), "conv2d backward: dinp must match inp");
    }
    if (dweight) {
        CPU_ASSERT_FLOAT(dweight);
        OCR_ASSERT(ocr_tensor_same_shape(dweight, weight), "conv2d backward: dweight must match weight");
    }
    if (dbias) {
        CPU_ASSERT_FLOAT(dbias);
        OCR_ASSERT(ocr_tensor_numel(dbias) == g.OC, "conv2d backward: dbias must have OC elements");
    }
    CpuScratch s = {0};
    if (conv_lp_native(&g, dout->dtype, (const OcrTensor *const[]){dout, inp, weight}, 3,
                       (const OcrTensor *const[]){dinp, dweight}, 2)) {
        conv_backward_lp(dinp, dweight, dbias, dout, inp, weight, &g, &s);
        ocr_cpu_scratch_free(&s);
        return;
    }
    if (is_depthwise(&g)) {
        depthwise_backward(dinp, dweight, dbias, dout, inp, weight, &g, p, &s);
        ocr_cpu_scratch_free(&s);
        return;
    }
    // Mixed dtypes (f16/bf16 maps with an f32 weight, as a per-op compute dtype leaves them): the
    // weight gradient reads only dout and inp, so when those two share a dtype with hardware it
    // is the GEMM of the all-native path on the maps as stored, into an f32 or that-dtype
    // dweight. That is the widened path's arithmetic (a product of two f16/bf16 values is exact
    // in fp32, the sums are fp32; only their order differs, as between sgemm and oneDNN), without
    // the fp32 copy of inp and at the hardware's rate. dinp needs the f32 weight: widened below.
    if (dweight && conv_lp_native(&g, dout->dtype, (const OcrTensor *const[]){dout, inp}, 2,
                                  (const OcrTensor *const[]){dweight}, 1)) {
        conv_backward_lp(NULL, dweight, NULL, dout, inp, weight, &g, &s);
        dweight = NULL;
        if (!dinp) {
            if (dbias) {
                float *db = ocr_cpu_f32_out(&s, dbias, 1);
                ocr_cpu_column_sums_add(db, dout->data, dout->dtype, g.N * g.Ho * g.Wo, g.OC, g.OC);
                ocr_cpu_f32_store(dbias, db);
            }
            ocr_cpu_scratch_free(&s);
            return;
        }
    }
    const int64_t slab = inp->dtype == dout->dtype ? emulated_slab_images(&g, dout->dtype) : 0;
    if (slab) {
        // dweight and dbias sum in fp32 over every slab (views of fp32 buffers), stored once.
        float *dwf = dweight ? ocr_cpu_f32_out(&s, dweight, 1) : NULL, *dbf = dbias ? ocr_cpu_f32_out(&s, dbias, 1) : NULL;
        OcrTensor dwv = dweight ? ocr_cpu_f32_view(dweight, dwf) : (OcrTensor){0};
        OcrTensor dbv = dbias ? ocr_cpu_f32_view(dbias, dbf) : (OcrTensor){0};
        for (int64_t n0 = 0; n0 < g.N; n0 += slab) {
            const int64_t n = g.N - n0 < slab ? g.N - n0 : slab;
            OcrTensor dyi = images_view(dout, n0, n), xi = images_view(inp, n0, n);
            OcrTensor dxi = dinp ? images_view(dinp, n0, n) : (OcrTensor){0};
            ocr_cpu_conv2d_backward(dinp ? &dxi : NULL, dweight ? &dwv : NULL, dbias ? &dbv : NULL, &dyi, &xi, weight, p);
        }
        if (dweight) ocr_cpu_f32_store(dweight, dwf);
        if (dbias) ocr_cpu_f32_store(dbias, dbf);
        ocr_cpu_scratch_free(&s);
        return;
    }
    const float *dy = ocr_cpu_f32_in(&s, dout);
    const float *x = dweight ? ocr_cpu_f32_in(&s, inp) : NULL;
    const float *w = dinp ? ocr_cpu_f32_in(&s, weight) : NULL;
    float *dx = dinp ? ocr_cpu_f32_out(&s, dinp, 0) : NULL;
    float *dw = dweight ? ocr_cpu_f32_out(&s, dweight, 1) : NULL;
    float *db = dbias ? ocr_cpu_f32_out(&s, dbias, 1) : NULL;
    const int64_t rows = g.N * g.Ho * g.Wo;
    // As in the forward: without the f16/bf16 hardware the widened operands take oneDNN's fp32
    // GEMMs, exact numerics keeps sgemm. Views of absent tensors are never read.
    OcrTensor dyv = ocr_cpu_f32_view(dout, dy), xv = ocr_cpu_f32_view(inp, x), wv = ocr_cpu_f32_view(weight, w);
    OcrTensor dxv = dinp ? ocr_cpu_f32_view(dinp, dx) : xv, dwv = dweight ? ocr_cpu_f32_view(dweight, dw) : wv;
    OcrTensor dbv = dbias ? ocr_cpu_f32_view(dbias, db) : wv;
    if (conv_lp_native(&g, OCR_F32, (const OcrTensor *const[]){&dyv, &xv, &wv}, 3,
                       (const OcrTensor *const[]){dinp ? &dxv : NULL, dweight ? &dwv : NULL}, 2)) {
        conv_backward_lp(dinp ? &dxv : NULL, dweight ? &dwv : NULL, dbias ? &dbv : NULL, &dyv, &xv, &wv, &g, &s);
    } else {
        if (db) ocr_cpu_column_sums_add(db, dy, OCR_F32, rows, g.OC, g.OC);
        if (is_pointwise(&g)) {
            for (int64_t grp = 0; grp < g.G; grp++) {
                const float *dyg = dy + grp * g.OCg;
                // dweight_g (OCg, Cg) += dout_gᵀ · inp_g;  dinp_g (rows, Cg) = dout_g · weight_g.
                if (dw) sgemm_rm(1, 0, g.OCg, g.Cg, rows, dyg, g.OC, x + grp * g.Cg, g.C, 1.0f, dw + grp * g.OCg * g.Cg, g.Cg);
                if (dx) {
                    if (g.OCg == 0 || rows == 0) {
                        for (int64_t r = 0; r < rows; r++) memset(dx + r * g.C + grp * g.Cg, 0, (size_t)g.Cg * sizeof(float));
                    } else {
                        sgemm_rm(0, 0, rows, g.Cg, g.OCg, dyg, g.OC, w + grp * g.OCg * g.Cg, g.Cg, 0.0f, dx + grp * g.Cg, g.C);
                    }
                }
            }
        } else if (dw || dx) {
            const int64_t chunk = g.N ? images_per_chunk(&g) : 1, img_rows = g.Ho * g.Wo;
            float *col = ocr_cpu_scratch_floats(&s, (size_t)(chunk * img_rows * g.KKC));
            for (int64_t n0 = 0; n0 < g.N; n0 += chunk) {
                int64_t nb = g.N - n0 < chunk ? g.N - n0 : chunk;
                const float *dyc = dy + n0 * img_rows * g.OC;
                for (int64_t grp = 0; grp < g.G; grp++) {
                    const float *dyg = dyc + grp * g.OCg;
                    if (dw) {
                        im2col_bytes(col, x, sizeof(float), &g, n0, nb, grp);
                        sgemm_rm(1, 0, g.OCg, g.KKC, nb * img_rows, dyg, g.OC, col, g.KKC, 1.0f,
                                 dw + grp * g.OCg * g.KKC, g.KKC);
                    }
                    if (dx) {
                        if (g.OCg == 0 || nb * img_rows == 0) {
                            memset(col, 0, (size_t)(nb * img_rows * g.KKC) * sizeof(float));
                        } else {
                            sgemm_rm(0, 0, nb * img_rows, g.KKC, g.OCg, dyg, g.OC, w + grp * g.OCg * g.KKC, g.KKC,
                                     0.0f, col, g.KKC);
                        }
                        col2im_gather_to(dx, OCR_F32, col, &g, n0, nb, grp, NULL);
                    }
                }
            }
        }
    }
    if (dx) ocr_cpu_f32_store(dinp, dx);
    if (dw) ocr_cpu_f32_store(dweight, dw);
    if (db) ocr_cpu_f32_store(dbias, db);
    ocr_cpu_scratch_free(&s);
}
