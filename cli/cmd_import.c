// ocrtrain import (--onnx FILE | --pdparams FILE) --out W.safetensors [--dict-out FILE]
//
// PaddleOCR's PP-OCRv3/v4 recognizers as users get them → ocrtrain weights:
//   --onnx      a paddle2onnx export (PaddleOCR's, RapidOCR's wheels, ...): the graph is walked
//               layer by layer and the matching network is built (models/onnx_import.h); the
//               dictionary embedded in the metadata ("character") is written next to the
//               weights (OUT.dict.txt, or --dict-out);
//   --pdparams  a PaddleOCR training checkpoint (best_accuracy.pdparams, latest.pdparams): the
//               unfused training-form network with its BN statistics (models/pdparams.h);
//               MultiHead checkpoints give their CTC branch, the guidance branch is listed as
//               not loaded.
// Prints what it recognised, the tensors loaded, every tensor not loaded (counts and names),
// and the config to train with. A file that does not match is rejected and nothing is written.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "core/fileio.h"
#include "models/model.h"
#include "models/onnx.h"
#include "models/onnx_import.h"
#include "models/pdparams.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: ocrtrain import (--onnx FILE | --pdparams FILE) --out W.safetensors [--dict-out FILE]\n"
            "  --onnx FILE       PaddleOCR PP-OCRv3/v4 recognizer exported to ONNX (paddle2onnx)\n"
            "  --pdparams FILE   PaddleOCR training checkpoint (.pdparams, or its prefix)\n"
            "  --out FILE        the weights to write (safetensors)\n"
            "  --dict-out FILE   where the dictionary embedded in the ONNX metadata goes (default: OUT\n"
            "                    with .safetensors replaced by .dict.txt)\n");
}

static void dict_path_for(const char *out, char *buf, size_t n) {
    size_t len = strlen(out);
    const char *ext = ".safetensors";
    size_t el = strlen(ext);
    if (len > el && strcmp(out + len - el, ext) == 0)
        snprintf(buf, n, "%.*s.dict.txt", (int)(len - el), out);
    else
        snprintf(buf, n, "%s.dict.txt", out);
}

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
        int space = a->num_classes == dict_lines + 2;
        snprintf(extra, sizeof extra, " Global.character_dict_path=%s Global.use_space_char=%s", dict_path,
                 space ? "true" : "false");
    }
    printf("train with: ocrtrain train -c %s -o %s%s%s%sGlobal.pretrained_model=<the weights>\n", cfg, ov, ov[0] ? " " : "",
           extra[0] ? extra + 1 : "", extra[0] ? " " : "");
}

static int do_onnx(const char *in, const char *out, const char *dict_out) {
    OcrOnnxModel *onnx;
    if (ocr_onnx_load(&onnx, in) != OCR_OK) {
        fprintf(stderr, "ocrtrain import: %s\n", ocr_last_error());
        return 1;
    }
    OcrModel *m;
    OcrOnnxImportInfo info;
    if (ocr_import_onnx(&m, onnx, in, &info) != OCR_OK) {
        fprintf(stderr, "ocrtrain import: %s\nnothing was written\n", ocr_last_error());
        ocr_onnx_free(onnx);
        return 1;
    }
    const OcrArch *a = ocr_model_arch(m);
    char dict_path[1200];
    int have_dict = info.dictionary && info.dictionary_lines > 0;
    if (have_dict) {
        if (dict_out)
            snprintf(dict_path, sizeof dict_path, "%s", dict_out);
        else
            dict_path_for(out, dict_path, sizeof dict_path);
        if (info.dictionary_lines + 1 != a->num_classes && info.dictionary_lines + 2 != a->num_classes)
            fprintf(stderr,
                    "ocrtrain import: warning: the embedded dictionary has %d lines, the head %d classes (blank + lines "
                    "[+ space] would be %d or %d)\n",
                    info.dictionary_lines, a->num_classes, info.dictionary_lines + 1, info.dictionary_lines + 2);
    }
    ocr_status_t st = ocr_model_save_weights(m, out);
    if (st == OCR_OK && have_dict) {
        size_t n = strlen(info.dictionary);
        int nl = n && info.dictionary[n - 1] != '\n';
        char *text = malloc(n + 2);
        if (!text) {
            st = ocr_set_error(OCR_ERR_OOM, "out of host memory");
        } else {
            memcpy(text, info.dictionary, n);
            if (nl) text[n++] = '\n';
            st = ocr_write_file_atomic(dict_path, text, n);
            free(text);
        }
    }
    if (st != OCR_OK) {
        fprintf(stderr, "ocrtrain import: %s\n", ocr_last_error());
        ocr_model_free(m);
        ocr_onnx_free(onnx);
        return 1;
    }
    printf("recognised: %s\n", info.variant);
    printf("  from %s: ONNX IR %lld, opset %lld, %d nodes walked, %s output\n", in, (long long)onnx->ir_version,
           (long long)onnx->opset, info.nodes_walked, info.softmax_output ? "softmax" : "logits");
    printf("loaded: %d tensors (%lld parameters, %lld BN statistics; %lld values) -> %s\n", info.tensors_loaded,
           (long long)ocr_model_param_count(m), (long long)ocr_model_stats(m)->numel, (long long)info.values_loaded, out);
    printf("not loaded: %d graph constants: %d float arrays, %d scalar/shape helpers (hardswish's 3 and 6, epsilons, "
           "scales, reshape shapes: checked, not weights)\n",
           info.unused_arrays + info.unused_helpers, info.unused_arrays, info.unused_helpers);
    for (int i = 0; i < info.unused_arrays && i < OCR_ONNX_MAX_LISTED; i++)
        printf("  not loaded: %s (float array)\n", info.unused_array_names[i]);
    if (info.unused_arrays > OCR_ONNX_MAX_LISTED) printf("  ... and %d more float arrays\n", info.unused_arrays - OCR_ONNX_MAX_LISTED);
    // The helpers by name, several to a line.
    for (int i = 0, col = 0; i < info.unused_helpers && i < OCR_ONNX_MAX_LISTED; i++) {
        const char *nm = info.unused_helper_names[i];
        int w = (int)strlen(nm) + 1;
        if (col == 0) col = printf("  helpers:");
        else if (col + w > 110) col = printf("\n  helpers:");
        col += printf(" %s", nm);
        if (i + 1 == info.unused_helpers || i + 1 == OCR_ONNX_MAX_LISTED) printf("\n");
    }
    if (info.unused_helpers > OCR_ONNX_MAX_LISTED) printf("  ... and %d more helpers\n", info.unused_helpers - OCR_ONNX_MAX_LISTED);
    if (have_dict)
        printf("dictionary: %d lines from the metadata (\"character\") -> %s\n", info.dictionary_lines, dict_path);
    else
        printf("dictionary: none in the file's metadata (use PaddleOCR's %s)\n",
               a->num_classes == 97 ? "en_dict.txt with use_space_char" : a->num_classes == 6625 ? "ppocr_keys_v1.txt with use_space_char" : "dictionary");
    print_train_hint(a, have_dict ? dict_path : NULL, info.dictionary_lines);
    ocr_model_free(m);
    ocr_onnx_free(onnx);
    return 0;
}

static int do_pdparams(const char *in, const char *out) {
    size_t n = strlen(in);
    char path[1200];
    if (n >= 9 && strcmp(in + n - 9, ".pdparams") == 0)
        snprintf(path, sizeof path, "%s", in);
    else
        snprintf(path, sizeof path, "%s.pdparams", in);
    OcrPdparams *p;
    if (ocr_pdparams_load(&p, path) != OCR_OK) {
        fprintf(stderr, "ocrtrain import: %s\n", ocr_last_error());
        return 1;
    }
    OcrArch arch;
    char desc[300];
    if (ocr_pdparams_arch(p, &arch, desc, sizeof desc) != OCR_OK) {
        fprintf(stderr, "ocrtrain import: %s: %s\nnothing was written\n", path, ocr_last_error());
        ocr_pdparams_free(p);
        return 1;
    }
    OcrModel *m;
    OcrPdLoadReport rep;
    if (ocr_model_create(&m, &arch) != OCR_OK || ocr_pdparams_load_into(m, p, &rep) != OCR_OK) {
        fprintf(stderr, "ocrtrain import: %s: %s\n", path, ocr_last_error());
        ocr_pdparams_free(p);
        return 1;
    }
    int code = 0;
    if (rep.missing) {
        fprintf(stderr, "ocrtrain import: %s: %d of the network's tensors are not in the file (first: %s)%s\nnothing was written\n",
                path, rep.missing, rep.first_missing, rep.shape_mismatch ? "; some have another shape, listed below" : "");
        code = 1;
    } else if (ocr_model_save_weights(m, out) != OCR_OK) {
        fprintf(stderr, "ocrtrain import: %s\n", ocr_last_error());
        code = 1;
    }
    FILE *f = code ? stderr : stdout;
    fprintf(f, "recognised: %s\n", desc);
    fprintf(f, "  from %s: pickle protocol %d, %d arrays, %d other entries\n", path, p->protocol, p->count, p->nother);
    if (arch.backbone == OCR_BACKBONE_MV1E)
        fprintf(f, "  not in the weights, taken from PP-OCRv3's config: last_conv_stride [1, 2], last pool avg 2x2%s\n",
                arch.neck_svtr ? ", 8 attention heads" : "");
    else if (arch.neck_svtr)
        fprintf(f, "  not in the weights, taken from PaddleOCR's EncoderWithSVTR: 8 attention heads\n");
    if (!code)
        fprintf(f, "loaded: %d tensors (%lld values; parameters and BN statistics, training form) -> %s\n", rep.loaded,
                (long long)rep.values, out);
    fprintf(f, "not loaded: %d (%d MultiHead guidance branch, %d not in the model, %d of another shape, %d not float arrays)\n",
            rep.n_not_loaded + p->nother, rep.guidance, rep.unexpected, rep.shape_mismatch, p->nother);
    for (int i = 0; i < rep.n_not_loaded; i++) fprintf(f, "  not loaded: %s\n", rep.not_loaded[i]);
    for (int i = 0; i < p->nother; i++) fprintf(f, "  not loaded: %s, not a tensor\n", p->other[i]);
    if (rep.missing) {
        fprintf(f, "missing from the file: %d\n", rep.missing);
        for (int i = 0; i < rep.n_missing_names; i++) fprintf(f, "  missing: %s\n", rep.missing_names[i]);
    }
    if (!code) {
        printf("dictionary: none in a .pdparams (use the training config's Global.character_dict_path)\n");
        print_train_hint(&arch, NULL, 0);
    }
    ocr_pdparams_report_free(&rep);
    ocr_model_free(m);
    ocr_pdparams_free(p);
    return code;
}

int cmd_import(int argc, char **argv) {
    const char *onnx_path = NULL, *pd_path = NULL, *out_path = NULL, *dict_out = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--onnx") == 0 && i + 1 < argc) {
            onnx_path = argv[++i];
        } else if (strcmp(argv[i], "--pdparams") == 0 && i + 1 < argc) {
            pd_path = argv[++i];
        } else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) {
            out_path = argv[++i];
        } else if (strcmp(argv[i], "--dict-out") == 0 && i + 1 < argc) {
            dict_out = argv[++i];
        } else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "ocrtrain import: unexpected argument '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (!out_path || (!onnx_path) == (!pd_path)) {
        fprintf(stderr, "ocrtrain import: --out and exactly one of --onnx and --pdparams are required\n");
        usage(stderr);
        return 2;
    }
    if (dict_out && pd_path) {
        fprintf(stderr, "ocrtrain import: --dict-out applies to --onnx (a .pdparams carries no dictionary)\n");
        return 2;
    }
    const char *in = onnx_path ? onnx_path : pd_path;
    if (!ocr_file_exists(in) && !(pd_path && strlen(in) < 1100)) {
        fprintf(stderr, "ocrtrain import: %s does not exist\n", in);
        return 2;
    }
    return onnx_path ? do_onnx(onnx_path, out_path, dict_out) : do_pdparams(pd_path, out_path);
}
