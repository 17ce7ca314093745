// ocrtrain info -c CFG [--json] [-o Key.path=value ...]: validates the whole config as train
// does (without looking for its data; a refusal is a warning) and lists the keys accepted with
// no effect here; then the model's layer table (every op
// instance with its output shape at the config's input size, parameters and compute dtype),
// the parameter total and the forward FLOPs per sample. The compute dtypes are those the AMP
// policy gives from the config's Global AMP keys (use_amp, amp_level, amp_dtype, the custom
// lists, amp_fp32_layers), resolved as the trainer resolves them (amp_engine_attach: each op's
// input is the op before it; training/model_info.h), with the op's class and the reason in --json.
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_common.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "training/training.h"
#include "core/config.h"
#include "kernels/backend.h"

static const char *fmt_count(int64_t v, char *buf, size_t n) {
    char tmp[32];
    snprintf(tmp, sizeof tmp, "%lld", (long long)v);
    size_t len = strlen(tmp), o = 0;
    for (size_t i = 0; i < len && o + 1 < n; i++) {
        if (i > 0 && (len - i) % 3 == 0 && o + 2 < n) buf[o++] = ',';
        buf[o++] = tmp[i];
    }
    buf[o] = '\0';
    return buf;
}

static const char *fmt_shape(const OcrOpInfo *o, char *buf, size_t n) {
    size_t u = 0;
    buf[0] = '\0';
    for (int d = 0; d < o->out_ndim && u < n; d++)
        u += (size_t)snprintf(buf + u, n - u, "%s%lld", d ? "x" : "", (long long)o->out_shape[d]);
    return buf;
}

static const char *backbone_desc(const OcrArch *a) {
    switch (a->backbone) {
    case OCR_BACKBONE_MV1E: return "MobileNetV1Enhance";
    case OCR_BACKBONE_LCNETV3: return a->lcnet.deploy ? "PPLCNetV3 (deploy: fused rep layers)" : "PPLCNetV3 (training form)";
    case OCR_BACKBONE_LCNETV4:
        switch (a->lcnet4.size) {
        case OCR_LCNETV4_TINY: return a->lcnet4.deploy ? "PPLCNetV4 tiny (deploy: fused)" : "PPLCNetV4 tiny (training form)";
        case OCR_LCNETV4_SMALL:
            return a->lcnet4.deploy ? "PPLCNetV4 small (deploy: fused)" : "PPLCNetV4 small (training form)";
        default: return a->lcnet4.deploy ? "PPLCNetV4 medium (deploy: fused)" : "PPLCNetV4 medium (training form)";
        }
    case OCR_BACKBONE_HGNETV2:
        return a->hgnet2.deploy ? "PPHGNetV2_B4 text_rec (deploy: without the unused classifier)"
                                : "PPHGNetV2_B4 text_rec (training form)";
    default: return "SVTRNet";
    }
}

int cmd_info(int argc, char **argv) {
    CliConfigArgs ca = {0};
    int json = 0;
    const CliFlag flags[] = {
        {CLI_CONFIG, .dest = &ca, .required = 1, .help = "the config (JSON or PaddleOCR's .yml)"},
        {CLI_BOOL, "--json", .dest = &json, .help = "the same as one JSON object, with each op's AMP class and reason"},
        {0}};
    const CliCommand cmd = {.name = "info", .flags = flags};
    int rc0 = cli_parse(&cmd, argc, argv);
    if (rc0 != CLI_CONTINUE) return rc0;
    const char *cfg_path = ca.config;
    // Every key is validated as `train` would (its data need not exist), so the listing of
    // keys with no effect here is complete.
    run_config_register_no_effect_keys();
    OcrConfig *cfg = NULL;
    ocr_status_t st = ocr_config_load(&cfg, cfg_path);
    for (int i = 0; st == OCR_OK && i < ca.n_overrides; i++) st = ocr_config_apply_override(cfg, ca.overrides[i]);
    if (st != OCR_OK) {
        if (cfg) ocr_config_free(cfg);
        return cli_fail(&cmd, 2, "%s", ocr_last_error());
    }
    cli_free(&cmd);
    ModelInfo mi;
    st = model_info_build(&mi, cfg);
    if (!mi.valid) fprintf(stderr, "ocrtrain info: warning: train would refuse this config: %s\n", mi.refusal);
    if (st != OCR_OK) {
        fprintf(stderr, "ocrtrain info: %s\n", ocr_last_error());
        model_info_free(&mi);
        ocr_config_free(cfg);
        return st == OCR_ERR_OOM ? 1 : 2;
    }
    const OcrArch *arch = &mi.arch;
    const AmpPolicy *pol = &mi.amp.policy;
    const OcrMemPlan *plan = &mi.plan;
    const amp_reason_t *reasons = mi.reasons;
    const int valid = mi.valid;
    OcrModel *m = mi.m;
    const int n_ignored = ocr_config_num_ignored(cfg);
    const OcrOpTable *ops = ocr_model_ops(m);
    int64_t total = ocr_model_param_count(m);
    int64_t stats = ocr_model_stats(m)->numel;
    char a[64], b[64];
    if (json) {
        cJSON *root = cJSON_CreateObject();
        cJSON_AddStringToObject(root, "config", cfg_path);
        cJSON_AddStringToObject(root, "algorithm", arch->algorithm);
        cJSON_AddStringToObject(root, "backbone", backbone_desc(arch));
        cJSON *in = cJSON_AddArrayToObject(root, "input_shape");
        cJSON_AddItemToArray(in, cJSON_CreateNumber(arch->in_channels));
        cJSON_AddItemToArray(in, cJSON_CreateNumber(arch->img_h));
        cJSON_AddItemToArray(in, cJSON_CreateNumber(arch->img_w));
        cJSON_AddStringToObject(root, "layout", "NHWC");
        cJSON_AddNumberToObject(root, "seq_len", plan->seq_len);
        cJSON_AddNumberToObject(root, "classes", plan->classes);
        cJSON_AddNumberToObject(root, "params_total", (double)total);
        cJSON_AddNumberToObject(root, "bn_stats_total", (double)stats);
        cJSON_AddNumberToObject(root, "flops_per_sample", plan->flops);
        cJSON_AddNumberToObject(root, "activation_bytes_per_sample_inference", (double)plan->activations_bytes);
        cJSON_AddBoolToObject(root, "valid_for_training", valid);
        cJSON *ij = cJSON_AddArrayToObject(root, "ignored_keys");
        for (int i = 0; i < n_ignored; i++) {
            const char *reason, *key = ocr_config_ignored(cfg, i, &reason);
            cJSON *k = cJSON_CreateObject();
            cJSON_AddStringToObject(k, "key", key);
            cJSON_AddStringToObject(k, "reason", reason);
            cJSON_AddItemToArray(ij, k);
        }
        cJSON *ampj = cJSON_AddObjectToObject(root, "amp");
        cJSON_AddStringToObject(ampj, "level", amp_level_name(pol->level));
        cJSON_AddStringToObject(ampj, "dtype", ocr_dtype_name(pol->level == OCR_AMP_O0 ? OCR_F32 : pol->dtype));
        char isa[160];
        ocr_backend_cpu_isa(isa, sizeof isa);
        cJSON_AddStringToObject(root, "cpu_isa", isa);
        cJSON *layers = cJSON_AddArrayToObject(root, "layers");
        for (int i = 0; i < ops->count; i++) {
            const OcrOpInfo *o = &ops->items[i];
            cJSON *l = cJSON_CreateObject();
            cJSON_AddStringToObject(l, "name", o->name);
            cJSON_AddStringToObject(l, "type", o->type);
            cJSON *shape = cJSON_AddArrayToObject(l, "output_shape");
            for (int d = 0; d < o->out_ndim; d++) cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)o->out_shape[d]));
            cJSON_AddNumberToObject(l, "params", (double)o->params);
            cJSON_AddNumberToObject(l, "flops", o->flops);
            cJSON_AddStringToObject(l, "compute_dtype", ocr_dtype_name(o->compute_dtype));
            cJSON_AddStringToObject(l, "amp_class", amp_op_class_name(amp_policy_op_class(pol, o->type)));
            cJSON_AddStringToObject(l, "amp_reason", amp_reason_name(reasons[i]));
            cJSON_AddItemToArray(layers, l);
        }
        char *text = cJSON_Print(root);
        printf("%s\n", text);
        free(text);
        cJSON_Delete(root);
    } else {
        printf("model: %s, backbone %s, neck %s, %sCTC head with %d classes\n", arch->algorithm, backbone_desc(arch),
               arch->neck_svtr ? "EncoderWithSVTR" : arch->neck_light ? "EncoderWithLightSVTR" : "Im2Seq",
               arch->head_guide ? "guided " : "", arch->num_classes);
        printf("input: %dx%dx%d (C x H x W); tensors below are NHWC with batch 1; sequence length %d\n",
               arch->in_channels, arch->img_h, arch->img_w, plan->seq_len);
        if (pol->level == OCR_AMP_O0)
            printf("precision: float32 (AMP off)\n");
        else
            printf("precision: AMP %s, %s (dtype column: each layer's compute dtype under the policy)\n",
                   amp_level_name(pol->level), ocr_dtype_name(pol->dtype));
        char isa[160];
        ocr_backend_cpu_isa(isa, sizeof isa);
        printf("cpu GEMMs/convolutions: %s\n", isa);
        printf("%-58s %-11s %-18s %10s  %s\n", "layer", "type", "output (NHWC)", "params", "dtype");
        for (int i = 0; i < ops->count; i++) {
            const OcrOpInfo *o = &ops->items[i];
            char shape[64];
            printf("%-58s %-11s %-18s %10s  %s\n", o->name, o->type, fmt_shape(o, shape, sizeof shape),
                   fmt_count(o->params, a, sizeof a), ocr_dtype_name(o->compute_dtype));
        }
        printf("\ntrainable parameters: %s\n", fmt_count(total, a, sizeof a));
        printf("BN running statistics: %s (not trained)\n", fmt_count(stats, b, sizeof b));
        printf("forward FLOPs per sample: %.4g G (%s)\n", plan->flops / 1e9, fmt_count((int64_t)plan->flops, a, sizeof a));
        printf("ops: %d\n", ops->count);
        if (n_ignored)
            printf("\naccepted with no effect here (%d%s):\n", n_ignored,
                   valid ? "" : ", up to the error above");
        for (int i = 0; i < n_ignored; i++) {
            const char *reason, *key = ocr_config_ignored(cfg, i, &reason);
            printf("  %-40s %s\n", key, reason);
        }
    }
    model_info_free(&mi);
    ocr_config_free(cfg);
    return 0;
}
