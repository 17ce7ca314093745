#include "amp/check.h"

#include <stdlib.h>

#include "kernels/ops.h"

AmpCheckResult amp_unscale_check(OcrTensor *const *grads, int count, float scale, float *amax, int *nonfinite,
                                 float *grad_scale) {
    AmpCheckResult r = {0, 0, -1, (float)(1.0 / (double)scale)};
    if (count <= 0) return r;
    // Two sub-lists, one call each: f32 gradients unscaled in place, low-precision ones checked.
    OcrTensor **list = malloc((size_t)count * sizeof *list);
    int *index = malloc((size_t)count * sizeof *index);
    float *a = malloc((size_t)count * sizeof *a);
    int *bad = malloc((size_t)count * sizeof *bad);
    OCR_ASSERT(list && index && a && bad, "out of host memory");
    for (int pass = 0; pass < 2; pass++) {
        int n = 0;
        for (int i = 0; i < count; i++) {
            if (!grads[i]) continue;
            int is_f32 = grads[i]->dtype == OCR_F32;
            if (is_f32 != (pass == 0)) continue;
            list[n] = grads[i];
            index[n++] = i;
        }
        if (!n) continue;
        float inv = pass == 0 ? r.inv_scale : 1.0f;
        ocr_unscale_and_check(list, n, inv, a, bad);
        for (int k = 0; k < n; k++) {
            int i = index[k];
            if (amax) amax[i] = pass == 0 ? a[k] : a[k] * r.inv_scale;
            if (nonfinite) nonfinite[i] = bad[k];
            if (grad_scale) grad_scale[i] = pass == 0 ? 1.0f : r.inv_scale;
            if (bad[k]) {
                r.found_inf = 1;
                r.bad_count++;
                if (i > r.first_bad) r.first_bad = i;
            }
        }
    }
    for (int i = 0; i < count; i++) {
        if (grads[i]) continue;
        if (amax) amax[i] = 0.0f;
        if (nonfinite) nonfinite[i] = 0;
        if (grad_scale) grad_scale[i] = 1.0f;
    }
    free(list);
    free(index);
    free(a);
    free(bad);
    return r;
}
