// The distillation losses' per-element formulas (kernels/ops.h, "distillation losses"), one copy
// for both backends: kernels/cpu/distill.c and kernels/cuda/distill.cu compile these same double
// expressions, so the two differ only in the order their row sums are added.
//
// The epsilons are PaddleOCR's (ppocr/losses/basic_loss.py, distillation_loss.py) and sit where
// its code puts them: they change the value by far less than f32 rounding for probabilities that
// are not tiny, but they bound the logs of tiny ones, which is what a faithful twin must copy.
#ifndef OCR_KERNELS_DISTILL_MATH_H
#define OCR_KERNELS_DISTILL_MATH_H

#include <math.h>

#ifdef __CUDACC__
#define DISTILL_INLINE static __forceinline__ __host__ __device__
#else
#define DISTILL_INLINE static inline
#endif

#define DISTILL_EPS_LOG 1e-10   // DMLLoss / KLDivLoss / DKDLoss: softmax + 1e-10, log(target + 1e-10)
#define DISTILL_EPS_KLJS 1e-5   // KLJSLoss (DMLLoss with use_log false)
#define DISTILL_EPS_CTC 1e-6    // KLCTCLogits.kl_loss
#define DISTILL_DKD_SHIFT 1000.0  // DKDLoss removes the target class by subtracting 1000 from its logit

// ---- DML, use_log: q = p + 1e-10 on both sides --------------------------------------------------
// q2·(log(q2 + ε) − log q1) + q1·(log(q1 + ε) − log q2)
DISTILL_INLINE double dml_term(double p1, double p2) {
    const double q1 = p1 + DISTILL_EPS_LOG, q2 = p2 + DISTILL_EPS_LOG;
    return q2 * (log(q2 + DISTILL_EPS_LOG) - log(q1)) + q1 * (log(q1 + DISTILL_EPS_LOG) - log(q2));
}
// ∂ dml_term / ∂q1 (= ∂/∂p1); ∂/∂p2 is dml_dq1(p2, p1) by symmetry.
DISTILL_INLINE double dml_dq1(double p1, double p2) {
    const double q1 = p1 + DISTILL_EPS_LOG, q2 = p2 + DISTILL_EPS_LOG;
    return -q2 / q1 + log(q1 + DISTILL_EPS_LOG) + q1 / (q1 + DISTILL_EPS_LOG) - log(q2);
}

// ---- DML without use_log: KLJSLoss mode "kl" on q = p + 1e-10 -------------------------------------
// ½[q2·log((q2 + e)/(q1 + e) + e) + q1·log((q1 + e)/(q2 + e) + e)], e = 1e-5
DISTILL_INLINE double kljs_term(double p1, double p2) {
    const double a = p1 + DISTILL_EPS_LOG + DISTILL_EPS_KLJS, c = p2 + DISTILL_EPS_LOG + DISTILL_EPS_KLJS;
    const double q1 = p1 + DISTILL_EPS_LOG, q2 = p2 + DISTILL_EPS_LOG;
    return 0.5 * (q2 * log(c / a + DISTILL_EPS_KLJS) + q1 * log(a / c + DISTILL_EPS_KLJS));
}
// ∂ kljs_term / ∂q1; the term is symmetric, so ∂/∂q2 is kljs_dq1(p2, p1).
DISTILL_INLINE double kljs_dq1(double p1, double p2) {
    const double a = p1 + DISTILL_EPS_LOG + DISTILL_EPS_KLJS, c = p2 + DISTILL_EPS_LOG + DISTILL_EPS_KLJS;
    const double q1 = p1 + DISTILL_EPS_LOG, q2 = p2 + DISTILL_EPS_LOG;
    const double u = c / a + DISTILL_EPS_KLJS, v = a / c + DISTILL_EPS_KLJS;
    return 0.5 * (q2 * (-c / (a * a)) / u + log(v) + q1 / (c * v));
}

// ---- KL(target || prediction) with the target's log guarded: t·(log(t + ε) − lp) ----------------
DISTILL_INLINE double kl_term(double t, double lp) { return t * (log(t + DISTILL_EPS_LOG) - lp); }

// ---- KLCTCLogits.kl_loss: P·log((P + e)/(S + e) + e), e = 1e-6 ----------------------------------
DISTILL_INLINE double ctc_kl_term(double P, double S) {
    return P * log((P + DISTILL_EPS_CTC) / (S + DISTILL_EPS_CTC) + DISTILL_EPS_CTC);
}
// ∂/∂S
DISTILL_INLINE double ctc_kl_dS(double P, double S) {
    const double se = S + DISTILL_EPS_CTC, r = (P + DISTILL_EPS_CTC) / se;
    return -P * r / (se * (r + DISTILL_EPS_CTC));
}

// ---- distances (Paddle's MSELoss, L1Loss, SmoothL1Loss) ----------------------------------------
DISTILL_INLINE double distance_term(int mode, double d, double delta) {
    const double a = fabs(d);
    if (mode == 0) return d * d;
    if (mode == 1) return a;
    return a < delta ? 0.5 * d * d : delta * (a - 0.5 * delta);
}
DISTILL_INLINE double distance_grad(int mode, double d, double delta) {
    const double s = d > 0 ? 1.0 : d < 0 ? -1.0 : 0.0;
    if (mode == 0) return 2.0 * d;
    if (mode == 1) return s;
    return fabs(d) < delta ? d : delta * s;
}

#endif
