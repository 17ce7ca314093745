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
//               tools/eval.py, tools/export_model.py or Global.pretrained_model. A distillation
//               config exports its trained network alone, or with --all-networks every network
//               of Architecture.Models under its name ("Teacher.", "Student."), PaddleOCR's
//               DistillationModel state dict, read from the distillation checkpoint --weights.
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
#include <string.h>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "training/training.h"
#include "models/onnx_export.h"
#include "models/pdparams_write.h"

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

// The opset as text, for the help line.
#define EXPORT_STR_(x) #x
#define EXPORT_STR(x) EXPORT_STR_(x)

int cmd_export(int argc, char **argv) {
    CliConfigArgs ca = {0};
    const char *weights = NULL, *dict_path = NULL, *onnx_path = NULL, *pd_path = NULL, *probe_in = NULL, *probe_out = NULL,
               *probe_logits = NULL;
    int init = 0, fold_bn = 0, all_networks = 0;
    const CliFlag flags[] = {
        {CLI_CONFIG, .dest = &ca, .help = "the config of the network (JSON or PaddleOCR's .yml)"},
        {CLI_STRING, "--weights", .meta = "W", .dest = &weights,
         .help = "a .safetensors file or a checkpoint directory of the config's network; without\n"
                 "-c, a PaddleOCR .pdparams checkpoint (the network read off its tensors)"},
        {CLI_BOOL, "--init", .dest = &init,
         .help = "the config's freshly initialised network (Global.seed) instead of --weights"},
        {CLI_STRING, "--dict", .meta = "FILE", .dest = &dict_path,
         .help = "the dictionary written into the ONNX metadata (default: the config's)"},
        {CLI_STRING, "--onnx", .meta = "FILE", .dest = &onnx_path,
         .help = "the inference network as ONNX (opset " EXPORT_STR(OCR_ONNX_EXPORT_OPSET) "; input x (N, 3, H, W), "
                 "output probs\n(N, T, classes); rep layers fused, CTC branch only)"},
        {CLI_BOOL, "--all-networks", .dest = &all_networks,
         .help = "with a distillation config and --pdparams: every network of Architecture.Models\n"
                 "under its name (PaddleOCR's DistillationModel state dict), not the trained one alone"},
        {CLI_BOOL, "--fold-bn", .dest = &fold_bn,
         .help = "fold every BatchNormalization into its convolution (onnxruntime does this\n"
                 "itself at load; ocrtrain import reads only the unfolded form)"},
        {CLI_STRING, "--pdparams", .meta = "FILE", .dest = &pd_path,
         .help = "PaddleOCR's state dict (training-form names, BN statistics)"},
        {CLI_STRING, "--probe", .meta = "IN.f32", .dest = &probe_in,
         .help = "a (1, 3, H, W) float32 NCHW input: ocrtrain's own probabilities on it go to"},
        {CLI_STRING, "--probe-out", .meta = "FILE", .dest = &probe_out,
         .help = "(1, T, classes) float32, and the logits before the softmax to --probe-logits"},
        {CLI_STRING, "--probe-logits", .meta = "FILE", .dest = &probe_logits},
        {0}};
    const CliCommand cmd = {
        .name = "export", .flags = flags,
        .synopsis = "(-c CFG (--weights W | --init) | --weights CHECKPOINT.pdparams) [--onnx OUT.onnx] "
                    "[--pdparams OUT.pdparams [--all-networks]] [--dict FILE] [--fold-bn] [-o Key=value ...] "
                    "[--probe IN.f32 --probe-out OUT.f32 [--probe-logits OUT.f32]]",
        .epilog = "at least one of --onnx, --pdparams and --probe is required\n"};
    int rc0 = cli_parse(&cmd, argc, argv);
    if (rc0 != CLI_CONTINUE) return rc0;
    if (init && weights) return cli_fail(&cmd, 2, "--init and --weights exclude each other");
    if (init && ca.config) weights = "(initialised)";
    const int from_pd = !ca.config && weights && ends_with(weights, ".pdparams");
    const char *missing = !ca.config && !from_pd ? "a config (-c CFG), or --weights with a .pdparams checkpoint,"
                          : !weights ? "--weights W"
                          : !onnx_path && !pd_path && !probe_in ? "--onnx, --pdparams or --probe"
                          : (!probe_in) != (!probe_out) || (probe_logits && !probe_in) ? "--probe together with --probe-out"
                                                        : NULL;
    if (missing) return cli_usage_error(&cmd, "%s is required", missing);
    if (from_pd && ca.n_overrides) return cli_fail(&cmd, 2, "-o needs a config (-c CFG)");
    if (all_networks && (!pd_path || !ca.config || init))
        return cli_fail(&cmd, 2, "--all-networks writes --pdparams from a distillation config (-c) and its checkpoint "
                        "(--weights)");
    OcrConfig *cfg = NULL;
    RunConfig rc;
    memset(&rc, 0, sizeof rc);
    ocr_status_t st = OCR_OK;
    if (!from_pd) st = run_config_load(&cfg, &rc, ca.config, (const char *const *)ca.overrides, ca.n_overrides, 0);
    if (st != OCR_OK) return cli_fail_status(&cmd, st);
    cli_free(&cmd);
    InferModel im = {0};
    char *dict = NULL;
    // Float32 on the CPU, whatever the config's AMP policy: the export is the f32 network.
    if (from_pd) {
        char desc[300];
        st = export_model_from_pdparams(&im.m, weights, desc, sizeof desc);
        if (st == OCR_OK) printf("recognised: %s\n", desc);
    } else if (init) {
        st = ocr_model_from_config(&im.m, cfg);
    } else {
        st = infer_model_load(&im, cfg, weights, 0, NULL);
    }
    if (st == OCR_OK && onnx_path) st = export_read_dictionary(dict_path ? dict_path : rc.dict_path, &dict);
    if (st == OCR_OK) {
        const OcrArch *a = ocr_model_arch(im.m);
        printf("model: %s, %s backbone%s, %d classes, input (N, 3, %d, W), %lld parameters\n", a->algorithm,
               a->backbone == OCR_BACKBONE_MV1E      ? "MobileNetV1Enhance"
               : a->backbone == OCR_BACKBONE_LCNETV3 ? "PPLCNetV3"
               : a->backbone == OCR_BACKBONE_LCNETV4 ? "PPLCNetV4"
               : a->backbone == OCR_BACKBONE_HGNETV2 ? "PPHGNetV2_B4"
                                                     : "SVTRNet",
               a->backbone == OCR_BACKBONE_LCNETV3   ? (a->lcnet.deploy ? " (deploy form)" : " (training form)")
               : a->backbone == OCR_BACKBONE_LCNETV4 ? (a->lcnet4.deploy ? " (deploy form)" : " (training form)")
               : a->backbone == OCR_BACKBONE_HGNETV2 ? (a->hgnet2.deploy ? " (deploy form)" : " (training form)")
                                                     : "",
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
        int nnets = 1;
        st = all_networks ? export_distillation_pdparams(cfg, im.m, weights, pd_path, &info, &nnets)
                          : ocr_pdparams_write(im.m, pd_path, &info);
        if (st == OCR_OK)
            printf("pdparams: %s: %d tensors (%lld values, parameters and BN statistics)%s%s\n", pd_path, info.tensors,
                   (long long)info.values,
                   info.unfused ? ", written in the training form equal to the fused network" : "",
                   all_networks ? ", every network of Architecture.Models under its name" : "");
        if (st == OCR_OK && all_networks) printf("pdparams: %d networks\n", nnets);
        if (st == OCR_OK && info.aliases)
            printf("pdparams: %d of them are the second names Paddle's nn.LSTM gives its parameters ({k}.cell.*)\n",
                   info.aliases);
        // Paddle's NRTR state dict also holds its sinusoid table, a buffer it recomputes when it
        // builds the network; ocrtrain computes it too and has no tensor for it.
        if (st == OCR_OK && ocr_model_arch(im.m)->multihead.kind == OCR_GUIDE_NRTR)
            printf("pdparams: not written: head.gtc_head.positional_encoding.pe (a sinusoid table PaddleOCR rebuilds "
                   "from nrtr_dim and max_text_length)\n");
    }
    if (st == OCR_OK && probe_in) {
        ExportProbe pr;
        st = export_probe(im.m, probe_in, probe_out, probe_logits, &pr);
        if (st == OCR_OK)
            printf("probe: %s (1, 3, %lld, %lld) -> %s (1, %lld, %lld) float32\n", probe_in, (long long)pr.height,
                   (long long)pr.width, probe_out, (long long)pr.steps, (long long)pr.classes);
    }
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
