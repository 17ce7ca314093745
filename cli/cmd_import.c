// ocrtrain import (--onnx FILE [--dict FILE] | --pdparams FILE [-c CFG]) --out W.safetensors [--dict-out FILE]
//
// PaddleOCR's PP-OCRv3/v4/v5 (mobile, server) and PP-OCRv6 tiny/small recognizers as users get them → ocrtrain weights (training/import.h):
//   --onnx      a paddle2onnx export (PaddleOCR's, RapidOCR's wheels, ...): the graph is walked
//               layer by layer and the matching network is built (models/onnx_import.h); the
//               dictionary embedded in the metadata ("character"), or the file --dict names,
//               is written next to the weights (OUT.dict.txt, or --dict-out);
//   --pdparams  a PaddleOCR training checkpoint (best_accuracy.pdparams, latest.pdparams): the
//               unfused training-form network with its BN statistics (models/pdparams.h);
//               MultiHead checkpoints give their CTC branch, the guidance branch is listed as
//               not loaded.
//   --pdparams FILE -c CFG  the checkpoint into the config's network, every tensor (PaddleOCR 3.x's
//               PP-OCRv5 server / PP-OCRv6 training form: MultiHead, NRTR included); the
//               config's dictionary is written next to the weights.
// Prints what it recognised, the tensors loaded, every tensor not loaded (counts and names),
// and the config to train with. A file that does not match is rejected and nothing is written.
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "core/fileio.h"
#include "training/training.h"

static void print_train_hint(const OcrArch *a, const char *dict_path, int dict_lines) {
    char ov[512];
    const char *cfg = ocr_import_suggest_config(a, ov, sizeof ov);
    if (!cfg) {
        printf("train with: no config of ours fits this network\n");
        return;
    }
    char extra[1400] = "";
    if (dict_path) {
        // PaddleOCR's classes: blank + dictionary lines (+ space with use_space_char).
        int space = import_dict_uses_space(dict_lines, a->num_classes);
        snprintf(extra, sizeof extra, " Global.character_dict_path=%s Global.use_space_char=%s", dict_path,
                 space ? "true" : "false");
    }
    printf("train with: ocrtrain train -c %s -o %s%s%s%sGlobal.pretrained_model=<the weights>\n", cfg, ov, ov[0] ? " " : "",
           extra[0] ? extra + 1 : "", extra[0] ? " " : "");
    size_t cl = strlen(cfg);
    if (cl > 9 && strcmp(cfg + cl - 9, "_ctc.json") == 0)
        // PaddleOCR's own config is MultiHead: the CTC-only weights load into it (models/weights_names.h).
        printf("  or with PaddleOCR's MultiHead config %.*s.json and the same overrides: the CTC branch loads, the NRTR "
               "branch starts from its initialisation\n", (int)(cl - 9), cfg);
}

static int do_onnx(const char *in, const char *out, const char *dict_out, const char *dict_in) {
    ImportOnnx r;
    ocr_status_t st = import_onnx(&r, in, out, dict_out, dict_in);
    const OcrOnnxImportInfo *info = &r.info;
    if (r.m && r.have_dict && !r.dict_fits) {
        const OcrArch *a = ocr_model_arch(r.m);
        fprintf(stderr,
                "ocrtrain import: warning: the metadata's dictionary has %d lines, the head %d classes (blank + lines "
                "[+ space] would be %d or %d)\n",
                info->dictionary_lines, a->num_classes, info->dictionary_lines + 1, info->dictionary_lines + 2);
    }
    if (st != OCR_OK) {
        fprintf(stderr, "ocrtrain import: %s\n%s", ocr_last_error(), r.onnx && !r.m ? "nothing was written\n" : "");
        import_onnx_free(&r);
        return 1;
    }
    const OcrOnnxModel *onnx = r.onnx;
    OcrModel *m = r.m;
    const OcrArch *a = ocr_model_arch(m);
    printf("recognised: %s\n", info->variant);
    printf("  from %s: ONNX IR %lld, opset %lld, %d nodes walked, %s output\n", in, (long long)onnx->ir_version,
           (long long)onnx->opset, info->nodes_walked, info->softmax_output ? "softmax" : "logits");
    printf("loaded: %d tensors (%lld parameters, %lld BN statistics; %lld values) -> %s\n", info->tensors_loaded,
           (long long)ocr_model_param_count(m), (long long)ocr_model_stats(m)->numel, (long long)info->values_loaded, out);
    printf("not loaded: %d graph constants: %d float arrays, %d scalar/shape helpers (hardswish's 3 and 6, epsilons, "
           "scales, reshape shapes: checked, not weights)\n",
           info->unused_arrays + info->unused_helpers, info->unused_arrays, info->unused_helpers);
    for (int i = 0; i < info->unused_arrays && i < OCR_ONNX_MAX_LISTED; i++)
        printf("  not loaded: %s (float array)\n", info->unused_array_names[i]);
    if (info->unused_arrays > OCR_ONNX_MAX_LISTED)
        printf("  ... and %d more float arrays\n", info->unused_arrays - OCR_ONNX_MAX_LISTED);
    // The helpers by name, several to a line.
    for (int i = 0, col = 0; i < info->unused_helpers && i < OCR_ONNX_MAX_LISTED; i++) {
        const char *nm = info->unused_helper_names[i];
        int w = (int)strlen(nm) + 1;
        if (col == 0) col = printf("  helpers:");
        else if (col + w > 110) col = printf("\n  helpers:");
        col += printf(" %s", nm);
        if (i + 1 == info->unused_helpers || i + 1 == OCR_ONNX_MAX_LISTED) printf("\n");
    }
    if (info->unused_helpers > OCR_ONNX_MAX_LISTED)
        printf("  ... and %d more helpers\n", info->unused_helpers - OCR_ONNX_MAX_LISTED);
    if (r.have_dict)
        printf("dictionary: %d lines from %s%s%s%s -> %s\n", info->dictionary_lines,
               info->dictionary_from_file ? dict_in : "the metadata (\"character\")",
               info->dictionary_known ? " (PaddleOCR's " : "", info->dictionary_known ? info->dictionary_known : "",
               info->dictionary_known ? ".txt)" : "", r.dict_path);
    else
        printf("dictionary: none in the file's metadata (use PaddleOCR's %s; --dict FILE names one)\n",
               a->num_classes == 97     ? "en_dict.txt with use_space_char"
               : a->num_classes == 6625 ? "ppocr_keys_v1.txt with use_space_char"
               : a->num_classes == OCR_PPOCRV5_CLASSES ? "ppocrv5_dict.txt with use_space_char: configs/dicts/ppocrv5_dict.txt"
               : a->backbone == OCR_BACKBONE_LCNETV4 && a->num_classes == 6906
                   ? "ppocrv6_tiny_dict.txt with use_space_char: configs/dicts/ppocrv6_tiny_dict.txt"
               : a->backbone == OCR_BACKBONE_LCNETV4 && a->num_classes == 18710
                   ? "ppocrv6_dict.txt with use_space_char: configs/dicts/ppocrv6_dict.txt"
                   : "dictionary");
    print_train_hint(a, r.have_dict ? r.dict_path : NULL, info->dictionary_lines);
    import_onnx_free(&r);
    return 0;
}

static int do_pdparams(const char *in, const char *out) {
    ImportPdparams r;
    ocr_status_t st = import_pdparams(&r, in, out);
    if (!r.p || !r.rep_ok) {
        if (!r.p) fprintf(stderr, "ocrtrain import: %s\n", ocr_last_error());
        else fprintf(stderr, "ocrtrain import: %s: %s\n%s", r.path, ocr_last_error(), r.arch_ok ? "" : "nothing was written\n");
        import_pdparams_free(&r);
        return 1;
    }
    int code = st != OCR_OK;
    if (code) fprintf(stderr, "ocrtrain import: %s\n%s", ocr_last_error(), r.rep.missing ? "nothing was written\n" : "");
    const OcrPdparams *p = r.p;
    const OcrPdLoadReport *rep = &r.rep;
    FILE *f = code ? stderr : stdout;
    fprintf(f, "recognised: %s\n", r.desc);
    fprintf(f, "  from %s: pickle protocol %d, %d arrays, %d other entries\n", r.path, p->protocol, p->count, p->nother);
    if (r.arch.backbone == OCR_BACKBONE_MV1E)
        fprintf(f, "  not in the weights, taken from PP-OCRv3's config: last_conv_stride [1, 2], last pool avg 2x2%s\n",
                r.arch.neck_svtr ? ", 8 attention heads" : "");
    else if (r.arch.neck_svtr)
        fprintf(f, "  not in the weights, taken from PaddleOCR's EncoderWithSVTR: 8 attention heads\n");
    if (!code)
        fprintf(f, "loaded: %d tensors (%lld values; parameters and BN statistics, training form) -> %s\n", rep->loaded,
                (long long)rep->values, out);
    fprintf(f, "not loaded: %d (%d MultiHead guidance branch, %d not in the model, %d of another shape, %d not float arrays)\n",
            rep->n_not_loaded + p->nother, rep->guidance, rep->unexpected, rep->shape_mismatch, p->nother);
    for (int i = 0; i < rep->n_not_loaded; i++) fprintf(f, "  not loaded: %s\n", rep->not_loaded[i]);
    for (int i = 0; i < p->nother; i++) fprintf(f, "  not loaded: %s, not a tensor\n", p->other[i]);
    if (rep->missing) {
        fprintf(f, "missing from the file: %d\n", rep->missing);
        for (int i = 0; i < rep->n_missing_names; i++) fprintf(f, "  missing: %s\n", rep->missing_names[i]);
    }
    if (!code) {
        printf("dictionary: none in a .pdparams (use the training config's Global.character_dict_path)\n");
        print_train_hint(&r.arch, NULL, 0);
    }
    import_pdparams_free(&r);
    return code;
}

// --pdparams with -c CFG: the checkpoint into the config's network, every tensor (the guidance
// branch of a MultiHead config included; training/import.h import_pdparams_config).
static int do_pdparams_config(const char *in, const char *out, const CliConfigArgs *ca) {
    OcrConfig *cfg = NULL;
    ocr_status_t st = ocr_config_load(&cfg, ca->config);
    for (int i = 0; st == OCR_OK && i < ca->n_overrides; i++) st = ocr_config_apply_override(cfg, ca->overrides[i]);
    if (st != OCR_OK) {
        fprintf(stderr, "ocrtrain import: %s\nnothing was written\n", ocr_last_error());
        ocr_config_free(cfg);
        return 1;
    }
    ImportPdparams r;
    st = import_pdparams_config(&r, in, cfg, ca->config, out);
    ocr_config_free(cfg);
    int code = st != OCR_OK;
    FILE *f = code ? stderr : stdout;
    if (code) fprintf(stderr, "ocrtrain import: %s\nnothing was written\n", ocr_last_error());
    if (r.rep_ok) {
        const OcrPdLoadReport *rep = &r.rep;
        fprintf(f, "into: %s\n", r.desc);
        fprintf(f, "  from %s: pickle protocol %d, %d arrays, %d other entries\n", r.path, r.p->protocol, r.p->count,
                r.p->nother);
        if (!code)
            fprintf(f, "loaded: %d tensors (%lld values; every tensor of the network) -> %s\n", rep->loaded,
                    (long long)rep->values, out);
        for (int i = 0; i < rep->n_not_loaded; i++) fprintf(f, "  not loaded: %s\n", rep->not_loaded[i]);
        for (int i = 0; i < rep->n_missing_names && i < 20; i++) fprintf(f, "  missing: %s\n", rep->missing_names[i]);
        if (rep->n_missing_names > 20) fprintf(f, "  ... and %d more missing\n", rep->n_missing_names - 20);
    }
    if (!code) {
        if (r.dict_path[0]) printf("dictionary: the config's %s -> %s\n", r.arch.dict_path, r.dict_path);
        printf("train with: ocrtrain train -c %s -o Global.pretrained_model=%s\n", ca->config, out);
    }
    import_pdparams_free(&r);
    return code;
}

int cmd_import(int argc, char **argv) {
    CliConfigArgs ca = {0};
    const char *onnx_path = NULL, *pd_path = NULL, *out_path = NULL, *dict_out = NULL, *dict_in = NULL;
    const CliFlag flags[] = {
        {CLI_STRING, "--onnx", .meta = "FILE", .dest = &onnx_path,
         .help = "PaddleOCR PP-OCRv3/v4/v5 (mobile, server) or PP-OCRv6 tiny/small recognizer\n"
                 "exported to ONNX (paddle2onnx)"},
        {CLI_STRING, "--pdparams", .meta = "FILE", .dest = &pd_path,
         .help = "PaddleOCR training checkpoint (.pdparams, or its prefix)"},
        {CLI_STRING, "--out", .meta = "FILE", .dest = &out_path, .help = "the weights to write (safetensors)"},
        {CLI_STRING, "--dict", .meta = "FILE", .dest = &dict_in,
         .help = "the model's dictionary when its metadata has none (one entry a line; checked\n"
                 "against the head's classes, written next to the weights)"},
        {CLI_CONFIG, .dest = &ca,
         .help = "with --pdparams: the training config whose network the checkpoint holds (PP-OCRv5\n"
                 "server, PP-OCRv6 training form, MultiHead); every tensor loads, NRTR included"},
        {CLI_STRING, "--dict-out", .meta = "FILE", .dest = &dict_out,
         .help = "where the dictionary embedded in the ONNX metadata goes (default: OUT\n"
                 "with .safetensors replaced by .dict.txt)"},
        {0}};
    const CliCommand cmd = {.name = "import", .flags = flags,
                            .synopsis = "(--onnx FILE [--dict FILE] | --pdparams FILE [-c CFG]) --out W.safetensors [--dict-out FILE]"};
    int rc = cli_parse(&cmd, argc, argv);
    if (rc != CLI_CONTINUE) return rc;
    if (!out_path || (!onnx_path) == (!pd_path))
        return cli_usage_error(&cmd, "--out and exactly one of --onnx and --pdparams are required");
    if (dict_out && pd_path) return cli_fail(&cmd, 2, "--dict-out applies to --onnx (a .pdparams carries no dictionary)");
    if (dict_in && pd_path) return cli_fail(&cmd, 2, "--dict applies to --onnx (a .pdparams import writes no dictionary)");
    if (dict_in && !ocr_file_exists(dict_in)) return cli_fail(&cmd, 2, "%s does not exist", dict_in);
    const char *in = onnx_path ? onnx_path : pd_path;
    if (!ocr_file_exists(in) && !(pd_path && strlen(in) < 1100)) return cli_fail(&cmd, 2, "%s does not exist", in);
    if (ca.config && onnx_path) return cli_fail(&cmd, 2, "-c applies to --pdparams (an ONNX graph names its network)");
    int code = ca.config  ? do_pdparams_config(pd_path, out_path, &ca)
               : onnx_path ? do_onnx(onnx_path, out_path, dict_out, dict_in)
                           : do_pdparams(pd_path, out_path);
    cli_free(&cmd);
    return code;
}
