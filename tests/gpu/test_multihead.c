// A MultiHead model (CTC + NRTR guidance) on the GPU against the same model on the CPU: the
// training forward (both branches' logits), the backward (parameter gradients across backbone,
// CTC neck and FC, and the NRTR decoder, with use_guide off so the backbone sees both branches)
// and the CTC-only inference. Every op involved has its own twin test; this checks the wiring on
// the device (token and target uploads, the causal mask and positions, the summed backbone
// gradient). Bounds: the GPU's GEMMs and reductions sum in other orders; 1e-4 of each tensor's
// largest value is two orders above the fp32 differences of these depths and far below any
// wiring error (a missing branch, a wrong token, a transposed mask: O(1)).
#include "tests/gpu/gpu_test.h"
#include "tests/models/model_test_util.h"

#ifdef OCR_HAVE_CUDA

#define B 2
#define L 6

static const int32_t kLabels[B * L] = {5, 7, 9, 0, 0, 0, 1, 37, 2, 2, 0, 0};
static const int32_t kLengths[B] = {3, 4};

static OcrModel *small(void) {
    const char *const ov[] = {"Global.character_dict_path=\"\"",
                              "Global.max_text_length=6",
                              "Architecture.Head.head_list.1.NRTRHead.nrtr_dim=64",
                              "Architecture.Head.head_list.1.NRTRHead.num_decoder_layers=2",
                              "Architecture.Head.head_list.0.CTCHead.Neck.drop_rate=0",
                              "Architecture.Head.head_list.0.CTCHead.Neck.attn_drop_rate=0",
                              "Architecture.Head.head_list.0.CTCHead.Neck.use_guide=false",
                              NULL};
    OcrConfig *cfg = tm_config("rec_ppocrv3_en_gtc_nrtr.json", ov);
    OcrArch a;
    ck_assert_msg(ocr_arch_from_config(&a, cfg) == OCR_OK, "%s", ocr_last_error());
    ocr_config_free(cfg);
    a.multihead.nrtr_dropout = 0.0f;
    OcrModel *m;
    ck_assert_msg(ocr_model_create(&m, &a) == OCR_OK, "%s", ocr_last_error());
    return m;
}

START_TEST(test_multihead_equals_cpu) {
    OcrModel *c = small(), *g = small();  // same seed: same initial weights
    ck_assert_msg(ocr_model_to_device(g, ocr_cuda_device(0)) == OCR_OK, "%s", ocr_last_error());
    OcrTensor xc = tm_images(B, 48, 32, 17), xg;
    ck_assert_int_eq(ocr_tensor_alloc(&xg, OCR_F32, ocr_cuda_device(0), 4, xc.shape, OCR_MEM_DATA), OCR_OK);
    ocr_copy_bytes(xg.device, xg.data, ocr_cpu(), xc.data, ocr_tensor_bytes(&xc));
    OcrModel *m[2] = {c, g};
    const OcrTensor *x[2] = {&xc, &xg};
    for (int k = 0; k < 2; k++) {
        ck_assert_int_eq(ocr_params_alloc_grads(ocr_model_params(m[k])), OCR_OK);
        ocr_params_zero_grads(ocr_model_params(m[k]));
        ck_assert_int_eq(ocr_model_set_guide_labels(m[k], kLabels, kLengths, B, L), OCR_OK);
        ck_assert_msg(ocr_model_forward(m[k], x[k], 1) == OCR_OK, "%s", ocr_last_error());
    }
    gpu_model_close(ocr_model_logits(c), ocr_model_logits(g), "training CTC logits");
    gpu_model_close(ocr_model_guide_logits(c), ocr_model_guide_logits(g), "training NRTR logits");
    for (int k = 0; k < 2; k++) {
        gpu_fill_uniform(ocr_model_dlogits(m[k]), 5);
        gpu_fill_uniform(ocr_model_guide_dlogits(m[k]), 6);
        ck_assert_msg(ocr_model_backward(m[k]) == OCR_OK, "%s", ocr_last_error());
    }
    const char *const names[] = {"backbone.conv1._conv.weight", "head.ctc_encoder.encoder.conv1.conv.weight",
                                 "head.ctc_head.fc.weight", "head.before_gtc.1.fc.weight",
                                 "head.gtc_head.embedding.embedding.weight", "head.gtc_head.decoder.0.self_attn.qkv.weight",
                                 "head.gtc_head.decoder.1.cross_attn.kv.weight", "head.gtc_head.tgt_word_prj.weight",
                                 NULL};
    for (int i = 0; names[i]; i++) {
        int pc = ocr_params_find(ocr_model_params(c), names[i]), pg = ocr_params_find(ocr_model_params(g), names[i]);
        ck_assert(pc >= 0 && pg >= 0);
        OcrTensor gc = ocr_params_grad(ocr_model_params(c), pc), gg = ocr_params_grad(ocr_model_params(g), pg);
        gpu_model_close(&gc, &gg, names[i]);
    }
    ck_assert_int_eq(ocr_model_forward(c, &xc, 0), OCR_OK);
    ck_assert_msg(ocr_model_forward(g, &xg, 0) == OCR_OK, "%s", ocr_last_error());
    gpu_model_close(ocr_model_probs(c), ocr_model_probs(g), "inference CTC probabilities");
    ocr_tensor_free(&xc);
    ocr_tensor_free(&xg);
    ocr_model_free(c);
    ocr_model_free(g);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("gpu_multihead");
    TCase *tc = tcase_create("multihead");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_multihead_equals_cpu);
    suite_add_tcase(s, tc);
    return s;
}

#endif

GPU_TEST_MAIN("gpu_multihead", suite)
