// The op table: every op of kernels/ops.h (kernels/ctc.h, kernels/input.h) that runs on either
// backend, one row each. kernels/dispatch.c expands it into the public functions; nothing else
// includes it. To find an op, look up its row here:
//
//   family  the file pair with its kernels: kernels/cpu/<family>.c and kernels/cuda/<family>.cu
//   name    the public function ocr_<name> (kernels/ops.h)
//   kernel  (OCR_OP_AS rows only) the backend functions' name; otherwise it is `name`
//   params  the public parameter list
//   args    the parameter names, passed on to the backend functions unchanged
//   route   DEVICE_OF(tensors): every non-NULL one of these tensors must be on one device, the
//           first non-NULL one's device runs the op; DEVICE_OF_LIST(list, count, extra): the
//           same over list[0..count) and extra (NULL entries skipped)
//
// A row runs ocr_cpu_<kernel> (declared in kernels/cpu/cpu_ops.h) for CPU tensors and
// ocr_cuda_<kernel> (kernels/cuda/cuda_ops.h) for CUDA tensors; a device mismatch aborts naming
// <kernel>. OCR_OP rows return void, OCR_OP_RET rows the backend function's value.
//
// Adding an op: declare ocr_<name> in kernels/ops.h, the two kernels in cpu_ops.h and
// cuda_ops.h, define them in the family's two files and add the row. The few entry points that
// are not a choice between two kernels are written out in kernels/dispatch.c.
//
// No include guard: the includer defines OCR_OP, OCR_OP_AS, OCR_OP_RET, DEVICE_OF and
// DEVICE_OF_LIST first.

// ---- GEMM, linear, batched matmul --------------------------------------------------------------
OCR_OP(gemm, gemm,
       (OcrTensor *c, const OcrTensor *a, const OcrTensor *b, int trans_a, int trans_b, float alpha, float beta),
       (c, a, b, trans_a, trans_b, alpha, beta), DEVICE_OF(c, a, b))
OCR_OP(gemm, linear_forward, (OcrTensor *out, const OcrTensor *inp, const OcrTensor *weight, const OcrTensor *bias),
       (out, inp, weight, bias), DEVICE_OF(out, inp, weight, bias))
OCR_OP(gemm, linear_backward,
       (OcrTensor *dinp, OcrTensor *dweight, OcrTensor *dbias, const OcrTensor *dout, const OcrTensor *inp,
        const OcrTensor *weight),
       (dinp, dweight, dbias, dout, inp, weight), DEVICE_OF(dinp, dweight, dbias, dout, inp, weight))
OCR_OP(gemm, matmul_batched_forward,
       (OcrTensor *out, const OcrTensor *a, const OcrTensor *b, int trans_a, int trans_b, float alpha),
       (out, a, b, trans_a, trans_b, alpha), DEVICE_OF(out, a, b))
OCR_OP(gemm, matmul_batched_backward,
       (OcrTensor *da, OcrTensor *db, const OcrTensor *dout, const OcrTensor *a, const OcrTensor *b, int trans_a,
        int trans_b, float alpha),
       (da, db, dout, a, b, trans_a, trans_b, alpha), DEVICE_OF(da, db, dout, a, b))

// ---- convolution (depthwise: the families' conv2d_depthwise files, called by conv2d) --------------
OCR_OP(conv2d, conv2d_forward,
       (OcrTensor *out, const OcrTensor *inp, const OcrTensor *weight, const OcrTensor *bias, Conv2dParams p),
       (out, inp, weight, bias, p), DEVICE_OF(out, inp, weight, bias))
OCR_OP(conv2d, conv2d_backward,
       (OcrTensor *dinp, OcrTensor *dweight, OcrTensor *dbias, const OcrTensor *dout, const OcrTensor *inp,
        const OcrTensor *weight, Conv2dParams p),
       (dinp, dweight, dbias, dout, inp, weight, p), DEVICE_OF(dinp, dweight, dbias, dout, inp, weight))

// ---- normalisation ------------------------------------------------------------------------------
OCR_OP(batchnorm, batchnorm2d_forward,
       (OcrTensor *out, OcrTensor *save_mean, OcrTensor *save_rstd, OcrTensor *running_mean, OcrTensor *running_var,
        const OcrTensor *inp, const OcrTensor *gamma, const OcrTensor *beta, float momentum, float eps, int training),
       (out, save_mean, save_rstd, running_mean, running_var, inp, gamma, beta, momentum, eps, training),
       DEVICE_OF(out, save_mean, save_rstd, running_mean, running_var, inp, gamma, beta))
OCR_OP(bn_act, batchnorm2d_forward_accumulate,
       (OcrTensor *out, OcrTensor *save_mean, OcrTensor *save_rstd, OcrTensor *running_mean, OcrTensor *running_var,
        const OcrTensor *inp, const OcrTensor *gamma, const OcrTensor *beta, float momentum, float eps, int training),
       (out, save_mean, save_rstd, running_mean, running_var, inp, gamma, beta, momentum, eps, training),
       DEVICE_OF(out, save_mean, save_rstd, running_mean, running_var, inp, gamma, beta))
OCR_OP(batchnorm, batchnorm2d_backward,
       (OcrTensor *dinp, OcrTensor *dgamma, OcrTensor *dbeta, const OcrTensor *dout, const OcrTensor *inp,
        const OcrTensor *gamma, const OcrTensor *save_mean, const OcrTensor *save_rstd, int training),
       (dinp, dgamma, dbeta, dout, inp, gamma, save_mean, save_rstd, training),
       DEVICE_OF(dinp, dgamma, dbeta, dout, inp, gamma, save_mean, save_rstd))
OCR_OP(layernorm, layernorm_forward,
       (OcrTensor *out, OcrTensor *mean, OcrTensor *rstd, const OcrTensor *inp, const OcrTensor *gamma,
        const OcrTensor *beta, float eps),
       (out, mean, rstd, inp, gamma, beta, eps), DEVICE_OF(out, mean, rstd, inp, gamma, beta))
OCR_OP(layernorm, layernorm_backward,
       (OcrTensor *dinp, OcrTensor *dgamma, OcrTensor *dbeta, const OcrTensor *dout, const OcrTensor *inp,
        const OcrTensor *gamma, const OcrTensor *mean, const OcrTensor *rstd),
       (dinp, dgamma, dbeta, dout, inp, gamma, mean, rstd),
       DEVICE_OF(dinp, dgamma, dbeta, dout, inp, gamma, mean, rstd))

// ---- batch norm + activation, fused (the backends' functions take the sync argument; the forms
// without it are written out in dispatch.c) ----------------------------------------------------------
OCR_OP_AS(bn_act, batchnorm2d_act_forward_sync, batchnorm2d_act_forward,
          (OcrTensor *out, OcrTensor *save_mean, OcrTensor *save_rstd, OcrTensor *save_scale, OcrTensor *running_mean,
           OcrTensor *running_var, const OcrTensor *inp, const OcrTensor *gamma, const OcrTensor *beta,
           ocr_activation_t act, float momentum, float eps, int training, const OcrBnSync *sync),
          (out, save_mean, save_rstd, save_scale, running_mean, running_var, inp, gamma, beta, act, momentum, eps,
           training, sync),
          DEVICE_OF(out, save_mean, save_rstd, save_scale, running_mean, running_var, inp, gamma, beta))
OCR_OP(bn_act, batchnorm2d_act_apply,
       (OcrTensor *out, const OcrTensor *inp, const OcrTensor *save_mean, const OcrTensor *save_scale,
        const OcrTensor *beta, ocr_activation_t act),
       (out, inp, save_mean, save_scale, beta, act), DEVICE_OF(out, inp, save_mean, save_scale, beta))
OCR_OP_AS(bn_act, batchnorm2d_act_backward_sync, batchnorm2d_act_backward,
          (OcrTensor *dinp, OcrTensor *dgamma, OcrTensor *dbeta, const OcrTensor *dout, const OcrTensor *inp,
           const OcrTensor *gamma, const OcrTensor *beta, const OcrTensor *save_mean, const OcrTensor *save_rstd,
           const OcrTensor *save_scale, ocr_activation_t act, ocr_dtype_t mid, int training, const OcrBnSync *sync),
          (dinp, dgamma, dbeta, dout, inp, gamma, beta, save_mean, save_rstd, save_scale, act, mid, training, sync),
          DEVICE_OF(dinp, dgamma, dbeta, dout, inp, gamma, beta, save_mean, save_rstd, save_scale))
OCR_OP(bn_act, batchnorm2d_act_backward_rebuild,
       (OcrTensor *out, OcrTensor *dinp, OcrTensor *dgamma, OcrTensor *dbeta, const OcrTensor *dout,
        const OcrTensor *inp, const OcrTensor *gamma, const OcrTensor *beta, const OcrTensor *save_mean,
        const OcrTensor *save_rstd, const OcrTensor *save_scale, ocr_activation_t act, int training,
        const OcrBnSync *sync),
       (out, dinp, dgamma, dbeta, dout, inp, gamma, beta, save_mean, save_rstd, save_scale, act, training, sync),
       DEVICE_OF(out, dinp, dgamma, dbeta, dout, inp, gamma, beta, save_mean, save_rstd, save_scale))

// ---- activations --------------------------------------------------------------------------------
OCR_OP(activation, activation_forward, (OcrTensor *out, const OcrTensor *inp, ocr_activation_t act),
       (out, inp, act), DEVICE_OF(out, inp))
OCR_OP(activation, activation_backward,
       (OcrTensor *dinp, const OcrTensor *dout, const OcrTensor *inp, ocr_activation_t act), (dinp, dout, inp, act),
       DEVICE_OF(dinp, dout, inp))

// ---- pooling ------------------------------------------------------------------------------------
OCR_OP(pool, avgpool2d_forward, (OcrTensor *out, const OcrTensor *inp, Pool2dParams p), (out, inp, p),
       DEVICE_OF(out, inp))
OCR_OP(pool, avgpool2d_backward, (OcrTensor *dinp, const OcrTensor *dout, Pool2dParams p), (dinp, dout, p),
       DEVICE_OF(dinp, dout))
OCR_OP(pool, maxpool2d_forward, (OcrTensor *out, const OcrTensor *inp, Pool2dParams p), (out, inp, p),
       DEVICE_OF(out, inp))
OCR_OP(pool, maxpool2d_backward, (OcrTensor *dinp, const OcrTensor *dout, const OcrTensor *inp, Pool2dParams p),
       (dinp, dout, inp, p), DEVICE_OF(dinp, dout, inp))
OCR_OP(pool, adaptive_avgpool2d_forward, (OcrTensor *out, const OcrTensor *inp), (out, inp), DEVICE_OF(out, inp))
OCR_OP(pool, adaptive_avgpool2d_backward, (OcrTensor *dinp, const OcrTensor *dout), (dinp, dout),
       DEVICE_OF(dinp, dout))

// ---- elementwise and layout ---------------------------------------------------------------------
OCR_OP(elementwise, channel_scale_forward, (OcrTensor *out, const OcrTensor *inp, const OcrTensor *scale),
       (out, inp, scale), DEVICE_OF(out, inp, scale))
OCR_OP(elementwise, channel_scale_backward,
       (OcrTensor *dinp, OcrTensor *dscale, const OcrTensor *dout, const OcrTensor *inp, const OcrTensor *scale),
       (dinp, dscale, dout, inp, scale), DEVICE_OF(dinp, dscale, dout, inp, scale))
OCR_OP(elementwise, add_forward, (OcrTensor *out, const OcrTensor *a, const OcrTensor *b), (out, a, b),
       DEVICE_OF(out, a, b))
OCR_OP(elementwise, add_backward, (OcrTensor *da, OcrTensor *db, const OcrTensor *dout), (da, db, dout),
       DEVICE_OF(da, db, dout))
OCR_OP(elementwise, accumulate, (OcrTensor *dst, const OcrTensor *src), (dst, src), DEVICE_OF(dst, src))
OCR_OP(elementwise, scale_forward, (OcrTensor *out, const OcrTensor *inp, float alpha), (out, inp, alpha),
       DEVICE_OF(out, inp))
OCR_OP(elementwise, zero_tensor, (OcrTensor *t), (t), DEVICE_OF(t))
OCR_OP(elementwise, concat_forward, (OcrTensor *out, const OcrTensor *const *inputs, int count),
       (out, inputs, count), DEVICE_OF_LIST(inputs, count, out))
OCR_OP(elementwise, concat_backward, (OcrTensor *const *dinputs, int count, const OcrTensor *dout),
       (dinputs, count, dout), DEVICE_OF_LIST(dinputs, count, dout))
OCR_OP(elementwise, permute_forward, (OcrTensor *out, const OcrTensor *inp, const int *perm), (out, inp, perm),
       DEVICE_OF(out, inp))
OCR_OP(elementwise, permute_backward, (OcrTensor *dinp, const OcrTensor *dout, const int *perm),
       (dinp, dout, perm), DEVICE_OF(dinp, dout))
OCR_OP(pad, pad2d_forward, (OcrTensor *out, const OcrTensor *inp, int top, int left, float value),
       (out, inp, top, left, value), DEVICE_OF(out, inp))
OCR_OP(pad, pad2d_backward, (OcrTensor *dinp, const OcrTensor *dout, int top, int left), (dinp, dout, top, left),
       DEVICE_OF(dinp, dout))

// ---- scalar affine, fused affine → activation → affine, positional embedding -------------------
OCR_OP(affine, scalar_affine_forward,
       (OcrTensor *out, const OcrTensor *inp, const OcrTensor *scale, const OcrTensor *bias), (out, inp, scale, bias),
       DEVICE_OF(out, inp, scale, bias))
OCR_OP(affine, scalar_affine_backward,
       (OcrTensor *dinp, OcrTensor *dscale, OcrTensor *dbias, const OcrTensor *dout, const OcrTensor *inp,
        const OcrTensor *scale),
       (dinp, dscale, dbias, dout, inp, scale), DEVICE_OF(dinp, dscale, dbias, dout, inp, scale))
OCR_OP(affine, affine_act_affine_forward,
       (OcrTensor *out, const OcrTensor *inp, const OcrTensor *s1, const OcrTensor *b1, ocr_activation_t act,
        const OcrTensor *s2, const OcrTensor *b2),
       (out, inp, s1, b1, act, s2, b2), DEVICE_OF(out, inp, s1, b1, s2, b2))
OCR_OP(affine, affine_act_affine_backward,
       (OcrTensor *dinp, OcrTensor *ds1, OcrTensor *db1, OcrTensor *ds2, OcrTensor *db2, const OcrTensor *dout,
        const OcrTensor *inp, const OcrTensor *s1, const OcrTensor *b1, ocr_activation_t act, const OcrTensor *s2,
        ocr_dtype_t mid),
       (dinp, ds1, db1, ds2, db2, dout, inp, s1, b1, act, s2, mid),
       DEVICE_OF(dinp, ds1, db1, ds2, db2, dout, inp, s1, b1, s2))
OCR_OP(affine, batch_broadcast_add_forward, (OcrTensor *out, const OcrTensor *inp, const OcrTensor *pos),
       (out, inp, pos), DEVICE_OF(out, inp, pos))
OCR_OP(affine, batch_broadcast_add_backward, (OcrTensor *dinp, OcrTensor *dpos, const OcrTensor *dout),
       (dinp, dpos, dout), DEVICE_OF(dinp, dpos, dout))

// ---- softmax, attention -------------------------------------------------------------------------
OCR_OP(softmax, softmax_forward, (OcrTensor *out, const OcrTensor *inp), (out, inp), DEVICE_OF(out, inp))
OCR_OP(softmax, softmax_backward, (OcrTensor *dinp, const OcrTensor *dout, const OcrTensor *out), (dinp, dout, out),
       DEVICE_OF(dinp, dout, out))
OCR_OP(softmax, log_softmax_forward, (OcrTensor *out, const OcrTensor *inp), (out, inp), DEVICE_OF(out, inp))
OCR_OP(softmax, log_softmax_backward, (OcrTensor *dinp, const OcrTensor *dout, const OcrTensor *out),
       (dinp, dout, out), DEVICE_OF(dinp, dout, out))
OCR_OP(attention, attention_forward,
       (OcrTensor *out, OcrTensor *probs, const OcrTensor *qkv, const OcrTensor *mask, int num_heads, float scale,
        DropoutParams dropout),
       (out, probs, qkv, mask, num_heads, scale, dropout), DEVICE_OF(out, probs, qkv, mask))
OCR_OP(attention, attention_backward,
       (OcrTensor *dqkv, const OcrTensor *dout, const OcrTensor *qkv, const OcrTensor *probs, int num_heads,
        float scale, DropoutParams dropout),
       (dqkv, dout, qkv, probs, num_heads, scale, dropout), DEVICE_OF(dqkv, dout, qkv, probs))
OCR_OP(attention, attention_cross_forward,
       (OcrTensor *out, OcrTensor *probs, const OcrTensor *q, const OcrTensor *kv, int num_heads, float scale,
        DropoutParams dropout),
       (out, probs, q, kv, num_heads, scale, dropout), DEVICE_OF(out, probs, q, kv))
OCR_OP(attention, attention_cross_backward,
       (OcrTensor *dq, OcrTensor *dkv, const OcrTensor *dout, const OcrTensor *q, const OcrTensor *kv,
        const OcrTensor *probs, int num_heads, float scale, DropoutParams dropout),
       (dq, dkv, dout, q, kv, probs, num_heads, scale, dropout), DEVICE_OF(dq, dkv, dout, q, kv, probs))
OCR_OP(attention, attention_local_mask, (OcrTensor *mask, int grid_h, int grid_w, int window_h, int window_w),
       (mask, grid_h, grid_w, window_h, window_w), DEVICE_OF(mask))

// ---- dropout, drop path -------------------------------------------------------------------------
OCR_OP(dropout, dropout_forward, (OcrTensor *out, const OcrTensor *inp, DropoutParams d), (out, inp, d),
       DEVICE_OF(out, inp))
OCR_OP(dropout, dropout_backward, (OcrTensor *dinp, const OcrTensor *dout, DropoutParams d), (dinp, dout, d),
       DEVICE_OF(dinp, dout))
OCR_OP(dropout, droppath_forward, (OcrTensor *out, const OcrTensor *inp, DropoutParams d), (out, inp, d),
       DEVICE_OF(out, inp))
OCR_OP(dropout, droppath_backward, (OcrTensor *dinp, const OcrTensor *dout, DropoutParams d), (dinp, dout, d),
       DEVICE_OF(dinp, dout))

// ---- casts and AMP support, the optimizer -------------------------------------------------------
OCR_OP(cast, cast_forward, (OcrTensor *out, const OcrTensor *inp), (out, inp), DEVICE_OF(out, inp))
OCR_OP(cast, cast_backward, (OcrTensor *dinp, const OcrTensor *dout), (dinp, dout), DEVICE_OF(dinp, dout))
OCR_OP_RET(cast, int, unscale_and_check,
           (OcrTensor *const *grads, int count, float inv_scale, float *amax, int *nonfinite),
           (grads, count, inv_scale, amax, nonfinite), DEVICE_OF_LIST(grads, count, NULL))
OCR_OP(optim, adam_update,
       (OcrTensor *param, OcrTensor *master, OcrTensor *m, OcrTensor *v, const OcrTensor *grad, AdamParams p),
       (param, master, m, v, grad, p), DEVICE_OF(param, master, m, v, grad))
OCR_OP_RET(optim, double, grad_global_norm, (OcrTensor *const *grads, int count), (grads, count),
           DEVICE_OF_LIST(grads, count, NULL))
OCR_OP_RET(optim, double, clip_grad_global_norm, (OcrTensor *const *grads, int count, float max_norm),
           (grads, count, max_norm), DEVICE_OF_LIST(grads, count, NULL))

// ---- CTC loss (kernels/ctc.h), input normalisation (kernels/input.h) ------------------------------
OCR_OP_RET(ctc, double, ctc_loss_forward,
           (OcrTensor *losses, OcrTensor *loss, OcrTensor *dlogits, OcrTensor *infeasible, const OcrTensor *logits,
            const OcrTensor *targets, const OcrTensor *target_lengths, const OcrTensor *input_lengths, CtcParams p),
           (losses, loss, dlogits, infeasible, logits, targets, target_lengths, input_lengths, p),
           DEVICE_OF(logits, losses, loss, dlogits, infeasible, targets, target_lengths, input_lengths))
OCR_OP_AS(input, input_normalize_padded_forward, input_normalize_forward,
          (OcrTensor *out, const OcrTensor *inp, const OcrTensor *widths), (out, inp, widths),
          DEVICE_OF(out, inp, widths))

// ---- embedding lookup, cross-entropy ------------------------------------------------------------
OCR_OP(embedding, embedding_forward,
       (OcrTensor *out, const OcrTensor *ids, const OcrTensor *table, int padding_idx), (out, ids, table, padding_idx),
       DEVICE_OF(out, ids, table))
OCR_OP(embedding, embedding_backward,
       (OcrTensor *dtable, const OcrTensor *dout, const OcrTensor *ids, int padding_idx),
       (dtable, dout, ids, padding_idx), DEVICE_OF(dtable, dout, ids))
OCR_OP(cross_entropy, cross_entropy_forward,
       (OcrTensor *losses, OcrTensor *loss, OcrTensor *counted, const OcrTensor *logits, const OcrTensor *targets,
        CrossEntropyParams p),
       (losses, loss, counted, logits, targets, p), DEVICE_OF(logits, targets, losses, loss, counted))
OCR_OP(cross_entropy, cross_entropy_backward,
       (OcrTensor *dlogits, const OcrTensor *logits, const OcrTensor *targets, CrossEntropyParams p),
       (dlogits, logits, targets, p), DEVICE_OF(dlogits, logits, targets))

// ---- distillation losses -----------------------------------------------------------------------
OCR_OP(distill, dml_loss_forward, (OcrTensor *loss, const OcrTensor *x1, const OcrTensor *x2, DmlLossParams p),
       (loss, x1, x2, p), DEVICE_OF(x1, x2, loss))
OCR_OP(distill, dml_loss_backward,
       (OcrTensor *dx1, OcrTensor *dx2, const OcrTensor *x1, const OcrTensor *x2, DmlLossParams p),
       (dx1, dx2, x1, x2, p), DEVICE_OF(x1, x2, dx1, dx2))
OCR_OP(distill, kl_div_loss_forward,
       (OcrTensor *loss, const OcrTensor *student, const OcrTensor *teacher, const OcrTensor *targets,
        KlDivLossParams p),
       (loss, student, teacher, targets, p), DEVICE_OF(student, teacher, targets, loss))
OCR_OP(distill, kl_div_loss_backward,
       (OcrTensor *dstudent, const OcrTensor *student, const OcrTensor *teacher, const OcrTensor *targets,
        KlDivLossParams p),
       (dstudent, student, teacher, targets, p), DEVICE_OF(student, teacher, targets, dstudent))
OCR_OP(distill, ctc_logits_kl_forward,
       (OcrTensor *loss, const OcrTensor *student, const OcrTensor *teacher, CtcLogitsKlParams p),
       (loss, student, teacher, p), DEVICE_OF(student, teacher, loss))
OCR_OP(distill, ctc_logits_kl_backward,
       (OcrTensor *dstudent, const OcrTensor *student, const OcrTensor *teacher, CtcLogitsKlParams p),
       (dstudent, student, teacher, p), DEVICE_OF(student, teacher, dstudent))
OCR_OP(distill, dkd_loss_forward,
       (OcrTensor *loss, const OcrTensor *student, const OcrTensor *teacher, const OcrTensor *targets,
        DkdLossParams p),
       (loss, student, teacher, targets, p), DEVICE_OF(student, teacher, targets, loss))
OCR_OP(distill, dkd_loss_backward,
       (OcrTensor *dstudent, const OcrTensor *student, const OcrTensor *teacher, const OcrTensor *targets,
        DkdLossParams p),
       (dstudent, student, teacher, targets, p), DEVICE_OF(student, teacher, targets, dstudent))
OCR_OP(distill, distance_loss_forward,
       (OcrTensor *loss, const OcrTensor *x, const OcrTensor *y, DistanceLossParams p), (loss, x, y, p),
       DEVICE_OF(x, y, loss))
OCR_OP(distill, distance_loss_backward,
       (OcrTensor *dx, OcrTensor *dy, const OcrTensor *x, const OcrTensor *y, DistanceLossParams p),
       (dx, dy, x, y, p), DEVICE_OF(x, y, dx, dy))

// ---- LSTM cell ----------------------------------------------------------------------------------
OCR_OP(lstm, lstm_cell_forward, (OcrTensor *h, OcrTensor *c, const OcrTensor *gates, const OcrTensor *c_prev),
       (h, c, gates, c_prev), DEVICE_OF(h, c, gates, c_prev))
OCR_OP(lstm, lstm_cell_backward,
       (OcrTensor *dgates, OcrTensor *dc_prev, const OcrTensor *dh, const OcrTensor *dc, const OcrTensor *gates,
        const OcrTensor *c_prev),
       (dgates, dc_prev, dh, dc, gates, c_prev), DEVICE_OF(dgates, dc_prev, dh, dc, gates, c_prev))

// ---- SAR's 2-D attention score ------------------------------------------------------------------
OCR_OP(sar_attention, sar_attention_score_forward,
       (OcrTensor *scores, const OcrTensor *key, const OcrTensor *query, const OcrTensor *w, const OcrTensor *bias,
        const OcrTensor *valid_w, int grid_w),
       (scores, key, query, w, bias, valid_w, grid_w), DEVICE_OF(scores, key, query, w, bias, valid_w))
OCR_OP(sar_attention, sar_attention_score_backward,
       (OcrTensor *dkey, OcrTensor *dquery, OcrTensor *dw, OcrTensor *dbias, const OcrTensor *dscores,
        const OcrTensor *key, const OcrTensor *query, const OcrTensor *w, const OcrTensor *valid_w, int grid_w),
       (dkey, dquery, dw, dbias, dscores, key, query, w, valid_w, grid_w),
       DEVICE_OF(dkey, dquery, dw, dbias, dscores, key, query, w, valid_w))
