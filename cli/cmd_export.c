// ocrtrain export (-c CFG (--weights W | --init) | --weights CHECKPOINT.pdparams) [--onnx OUT.onnx] [--pdparams OUT.pdparams]
//                 [--dict FILE] [--fold-bn] [-o Key=value ...]
//                 [--probe IN.f32 --probe-out OUT.f32 [--probe-logits OUT.f32]]
//
// The weights of a model ocrtrain trained or imported, for deployment:
//   --onnx      the inference network (models/onnx_export.h): CTC branch only, PPLCNetV3 rep
//               layers fused, softmax output, input x (N, 3, H, W) with dynamic N and W, the
//               config's dictionary in the metadata ("character") for RapidOCR;
//   --pdparams  PaddleOCR's state dict (models/pdparams_write.h): training-form names with the
//               BN statistics (MultiHead names for a MultiHead model), for PaddleOCR's
//               tools/eval.py, tools/export_model.py or Global.pretrained_model.
// Without a config, a PaddleOCR checkpoint (.pdparams) is exported directly: the network is read
// off its tensors as `ocrtrain import --pdparams` does (input height 48), and --dict gives the
// dictionary for the metadata (with a config, --dict replaces Global.character_dict_path there).
// --init exports the config's freshly initialised network (Global.seed) instead of trained weights:
// for checking names, shapes and layouts against PaddleOCR's network without a training run.
// Both are written atomically (a temporary file renamed over the target), so an error leaves
// no partial file. --probe runs ocrtrain's own forward pass (float32, eval mode) on one
// preprocessed line, a float32 NCHW (1, 3, H, W) file as PaddleOCR's predictor feeds it, and
// writes the probabilities (1, T, classes), and with --probe-logits the CTC head's logits: what
// the exported files must reproduce (tools/check_export.py compares them).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "training/inference.h"
#include "training/report.h"
#include "training/run_config.h"
#include "core/fileio.h"
#include "models/pdparams.h"
#include "models/onnx_export.h"
#include "models/pdparams_write.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: ocrtrain export (-c CFG (--weights W | --init) | --weights CHECKPOINT.pdparams) [--onnx OUT.onnx]\n"
            "                       [--pdparams OUT.pdparams] [--dict FILE] [-o Key=value ...]\n"
            "                       [--probe IN.f32 --probe-out OUT.f32 [--probe-logits OUT.f32]]\n"
            "  --weights W        a .safetensors file or a checkpoint directory of the config's network; without\n"
            "                     -c, a PaddleOCR .pdparams checkpoint (the network read off its tensors)\n"
            "  --init             the config's freshly initialised network (Global.seed) instead of --weights\n"
            "  --dict FILE        the dictionary written into the ONNX metadata (default: the config's)\n"
            "  --onnx FILE        the inference network as ONNX (opset %d; input x (N, 3, H, W), output probs\n"
            "                     (N, T, classes); rep layers fused, CTC branch only)\n"
            "  --fold-bn          fold every BatchNormalization into its convolution (onnxruntime does this\n"
            "                     itself at load; ocrtrain import reads only the unfolded form)\n"
            "  --pdparams FILE    PaddleOCR's state dict (training-form names, BN statistics)\n"
            "  --probe IN.f32     a (1, 3, H, W) float32 NCHW input: ocrtrain's own probabilities on it go to\n"
            "  --probe-out FILE   (1, T, classes) float32, and the logits before the softmax to --probe-logits\n"
            "at least one of --onnx, --pdparams and --probe is required\n",
            OCR_ONNX_EXPORT_OPSET);
}

// The dictionary file's text with a final newline (NULL with *text NULL when there is none).
static ocr_status_t read_dictionary(const char *path, char **text) {
    *text = NULL;
    if (!path) return OCR_OK;
    size_t n;
    char *d;
    OCR_TRY(ocr_read_file(path, &d, &n));
    // PaddleOCR's export keeps the lines as they are, without a trailing empty line.
    while (n > 0 && (d[n - 1] == '\n' || d[n - 1] == '\r')) d[--n] = '\0';
    *text = d;
    return OCR_OK;
}

// ocrtrain's probabilities on one NCHW float32 line.
static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

// A PaddleOCR checkpoint as a model: the architecture from its tensors, every tensor loaded.
static ocr_status_t model_from_pdparams(OcrModel **out, const char *path) {
    *out = NULL;
    OcrPdparams *p;
    OCR_TRY(ocr_pdparams_load(&p, path));
    OcrArch arch;
    char desc[300];
    OcrModel *m = NULL;
    OcrPdLoadReport rep;
    memset(&rep, 0, sizeof rep);
    ocr_status_t st = ocr_pdparams_arch(p, &arch, desc, sizeof desc);
    if (st == OCR_OK) st = ocr_model_create(&m, &arch);
    if (st == OCR_OK) st = ocr_pdparams_load_into(m, p, &rep);
    if (st == OCR_OK && rep.missing)
        st = ocr_set_error(OCR_ERR_FORMAT, "%s: %d of the network's tensors are not in the file (first: %s)", path,
                           rep.missing, rep.first_missing);
    if (st == OCR_OK) printf("recognised: %s\n", desc);
    ocr_pdparams_report_free(&rep);
    ocr_pdparams_free(p);
    if (st != OCR_OK) {
        ocr_model_free(m);
        return st;
    }
    *out = m;
    return OCR_OK;
}

static ocr_status_t write_f32(const OcrTensor *t, const char *path) {
    int64_t count = ocr_tensor_numel(t);
    float *host = malloc((size_t)count * sizeof(float));
    if (!host) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
    ocr_tensor_to_f32(t, host);
    ocr_status_t st = ocr_write_file_atomic(path, host, (size_t)count * sizeof(float));
    free(host);
    return st;
}

static ocr_status_t probe(OcrModel *m, const char *in, const char *out, const char *logits) {
    const OcrArch *a = ocr_model_arch(m);
    char *d;
    size_t n;
    OCR_TRY(ocr_read_file(in, &d, &n));
    size_t row = (size_t)3 * (size_t)a->img_h * sizeof(float);
    if (n == 0 || n % row != 0) {
        free(d);
        return ocr_set_error(OCR_ERR_FORMAT, "--probe %s: %zu bytes is not a (1, 3, %d, W) float32 array", in, n, a->img_h);
    }
    int64_t H = a->img_h, W = (int64_t)(n / row);
    const float *x = (const float *)d;
    float *nhwc = malloc(n);
    if (!nhwc) {
        free(d);
        return ocr_set_error(OCR_ERR_OOM, "out of host memory");
    }
    for (int64_t c = 0; c < 3; c++)
        for (int64_t y = 0; y < H; y++)
            for (int64_t w = 0; w < W; w++) nhwc[(y * W + w) * 3 + c] = x[(c * H + y) * W + w];
    free(d);
    OcrTensor img = ocr_tensor_view_cpu(nhwc, OCR_F32, 4, ((int64_t[]){1, H, W, 3}));
    ocr_status_t st = ocr_model_forward(m, &img, 0);
    free(nhwc);
    OCR_TRY(st);
    const OcrTensor *p = ocr_model_probs(m);
    st = write_f32(p, out);
    if (st == OCR_OK && logits) st = write_f32(ocr_model_logits(m), logits);
    if (st == OCR_OK)
        printf("probe: %s (1, 3, %lld, %lld) -> %s (1, %lld, %lld) float32\n", in, (long long)H, (long long)W, out,
               (long long)p->shape[1], (long long)p->shape[2]);
    return st;
}

int cmd_export(int argc, char **argv) {
    CliConfigArgs ca = {0};
    const char *weights = NULL, *dict_path = NULL, *onnx_path = NULL, *pd_path = NULL, *probe_in = NULL, *probe_out = NULL,
               *probe_logits = NULL;
    int init = 0, fold_bn = 0;
    for (int i = 1; i < argc;) {
        int n = cli_take_config_arg(&ca, argc, argv, i);
        if (n < 0) {
            fprintf(stderr, "ocrtrain export: %s\n", ocr_last_error());
            cli_config_args_free(&ca);
            return 2;
        }
        const char **slot = NULL;
        if (n > 0) {
            i += n;
            continue;
        }
        if (strcmp(argv[i], "--weights") == 0) slot = &weights;
        else if (strcmp(argv[i], "--onnx") == 0) slot = &onnx_path;
        else if (strcmp(argv[i], "--dict") == 0) slot = &dict_path;
        else if (strcmp(argv[i], "--pdparams") == 0) slot = &pd_path;
        else if (strcmp(argv[i], "--probe") == 0) slot = &probe_in;
        else if (strcmp(argv[i], "--probe-out") == 0) slot = &probe_out;
        else if (strcmp(argv[i], "--probe-logits") == 0) slot = &probe_logits;
        if (slot && i + 1 < argc) {
            *slot = argv[i + 1];
            i += 2;
        } else if (strcmp(argv[i], "--init") == 0) {
            init = 1;
            i++;
        } else if (strcmp(argv[i], "--fold-bn") == 0) {
            fold_bn = 1;
            i++;
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            cli_config_args_free(&ca);
            return 0;
        } else {
            fprintf(stderr, "ocrtrain export: %s '%s'\n", slot ? "a value is missing after" : "unexpected argument", argv[i]);
            usage(stderr);
            cli_config_args_free(&ca);
            return 2;
        }
    }
    if (init && weights) {
        fprintf(stderr, "ocrtrain export: --init and --weights exclude each other\n");
        cli_config_args_free(&ca);
        return 2;
    }
    if (init && ca.config) weights = "(initialised)";
    const int from_pd = !ca.config && weights && ends_with(weights, ".pdparams");
    const char *missing = !ca.config && !from_pd ? "a config (-c CFG), or --weights with a .pdparams checkpoint,"
                          : !weights ? "--weights W"
                          : !onnx_path && !pd_path && !probe_in ? "--onnx, --pdparams or --probe"
                          : (!probe_in) != (!probe_out) || (probe_logits && !probe_in) ? "--probe together with --probe-out"
                                                        : NULL;
    if (missing) {
        fprintf(stderr, "ocrtrain export: %s is required\n", missing);
        usage(stderr);
        cli_config_args_free(&ca);
        return 2;
    }
    if (from_pd && ca.n_overrides) {
        fprintf(stderr, "ocrtrain export: -o needs a config (-c CFG)\n");
        cli_config_args_free(&ca);
        return 2;
    }
    OcrConfig *cfg = NULL;
    RunConfig rc;
    memset(&rc, 0, sizeof rc);
    ocr_status_t st = OCR_OK;
    if (!from_pd) st = run_config_load(&cfg, &rc, ca.config, (const char *const *)ca.overrides, ca.n_overrides, 0);
    cli_config_args_free(&ca);
    if (st != OCR_OK) {
        fprintf(stderr, "ocrtrain export: %s\n", ocr_last_error());
        return cli_exit_code(st);
    }
    InferModel im = {0};
    char *dict = NULL;
    // Float32 on the CPU, whatever the config's AMP policy: the export is the f32 network.
    if (from_pd)
        st = model_from_pdparams(&im.m, weights);
    else if (init)
        st = ocr_model_from_config(&im.m, cfg);
    else
        st = infer_model_load(&im, cfg, weights, 0, NULL);
    if (st == OCR_OK && onnx_path) st = read_dictionary(dict_path ? dict_path : rc.dict_path, &dict);
    if (st == OCR_OK) {
        const OcrArch *a = ocr_model_arch(im.m);
        printf("model: %s, %s backbone%s, %d classes, input (N, 3, %d, W), %lld parameters\n", a->algorithm,
               a->backbone == OCR_BACKBONE_MV1E ? "MobileNetV1Enhance" : a->backbone == OCR_BACKBONE_LCNETV3 ? "PPLCNetV3" : "SVTRNet",
               a->backbone == OCR_BACKBONE_LCNETV3 ? (a->lcnet.deploy ? " (deploy form)" : " (training form)") : "",
               a->num_classes, a->img_h, (long long)ocr_model_param_count(im.m));
    }
    if (st == OCR_OK && onnx_path) {
        OcrOnnxExportOptions opt = {dict, training_version(), fold_bn};
        OcrOnnxExportInfo info;
        st = ocr_onnx_export(im.m, &opt, onnx_path, &info);
        if (st == OCR_OK)
            printf("onnx: %s: opset %d, %d nodes, %d initializers (%lld values)%s%s%s, T = W/%d, dictionary %s\n",
                   onnx_path, OCR_ONNX_EXPORT_OPSET, info.nodes, info.initializers, (long long)info.values,
                   info.fused ? ", rep layers fused" : "", fold_bn ? ", BN folded into the convolutions" : "", info.multihead_ctc ? ", MultiHead: CTC branch only" : "",
                   info.seq_divisor, dict ? "in the metadata (\"character\")" : "none (the config has no character_dict_path)");
    }
    if (st == OCR_OK && pd_path) {
        OcrPdWriteInfo info;
        st = ocr_pdparams_write(im.m, pd_path, &info);
        if (st == OCR_OK)
            printf("pdparams: %s: %d tensors (%lld values, parameters and BN statistics)%s\n", pd_path, info.tensors,
                   (long long)info.values,
                   info.unfused ? ", written in the training form equal to the fused network" : "");
        if (st == OCR_OK && info.aliases)
            printf("pdparams: %d of them are the second names Paddle's nn.LSTM gives its parameters ({k}.cell.*)\n",
                   info.aliases);
        // Paddle's NRTR state dict also holds its sinusoid table, a buffer it recomputes when it
        // builds the network; ocrtrain computes it too and has no tensor for it.
        if (st == OCR_OK && ocr_model_arch(im.m)->multihead.kind == OCR_GUIDE_NRTR)
            printf("pdparams: not written: head.gtc_head.positional_encoding.pe (a sinusoid table PaddleOCR rebuilds "
                   "from nrtr_dim and max_text_length)\n");
    }
    if (st == OCR_OK && probe_in) st = probe(im.m, probe_in, probe_out, probe_logits);
    int code = 0;
    if (st != OCR_OK) {
        fprintf(stderr, "ocrtrain export: %s\n", ocr_last_error());
        code = cli_exit_code(st);
    }
    free(dict);
    if (from_pd || init)
        ocr_model_free(im.m);
    else
        infer_model_free(&im);
    if (cfg) ocr_config_free(cfg);
    return code;
}
