// ocrtrain import --onnx FILE --out W.safetensors: PaddleOCR's PP-OCRv4 recognizer (the
// paddle2onnx export) → weights of the fused PP-OCRv4 network. The graph is checked node by
// node against the network; a file that does not match is rejected and nothing is written.
#include <stdio.h>
#include <string.h>

#include "app/commands.h"
#include "models/model.h"
#include "models/onnx.h"
#include "models/onnx_import.h"

static void usage(FILE *f) { fprintf(f, "usage: ocrtrain import --onnx FILE --out W.safetensors\n"); }

int cmd_import(int argc, char **argv) {
    const char *onnx_path = NULL, *out_path = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--onnx") == 0 && i + 1 < argc) {
            onnx_path = argv[++i];
        } else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) {
            out_path = argv[++i];
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "ocrtrain import: unexpected argument '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (!onnx_path || !out_path) {
        fprintf(stderr, "ocrtrain import: --onnx and --out are required\n");
        usage(stderr);
        return 2;
    }
    OcrOnnxModel *onnx;
    if (ocr_onnx_load(&onnx, onnx_path) != OCR_OK) {
        fprintf(stderr, "ocrtrain import: %s\n", ocr_last_error());
        return 1;
    }
    OcrModel *m;
    ocr_status_t st = ocr_import_ppocrv4_onnx(&m, onnx, onnx_path);
    ocr_onnx_free(onnx);
    if (st != OCR_OK) {
        fprintf(stderr, "ocrtrain import: %s\nnothing was written\n", ocr_last_error());
        return 1;
    }
    st = ocr_model_save_weights(m, out_path);
    if (st != OCR_OK) {
        fprintf(stderr, "ocrtrain import: %s\n", ocr_last_error());
        ocr_model_free(m);
        return 1;
    }
    const OcrArch *a = ocr_model_arch(m);
    printf("imported %s -> %s: PP-OCRv4 recognizer, fused form (PPLCNetV3 0.95 deploy + SVTR neck + CTC head, %d "
           "classes), %lld parameters and %lld BN statistics in %d tensors\n",
           onnx_path, out_path, a->num_classes, (long long)ocr_model_param_count(m),
           (long long)ocr_model_stats(m)->numel, ocr_model_params(m)->count + ocr_model_stats(m)->count);
    printf("use it with -c configs/rec_ppocrv4_%s.json -o Architecture.Backbone.deploy=true\n",
           a->num_classes == 97 ? "en" : "ch");
    ocr_model_free(m);
    return 0;
}
