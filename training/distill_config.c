#include "training/distill_config.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"

// ---- small helpers ----------------------------------------------------------------------------------

static const char *src(const OcrConfig *cfg) { return ocr_config_source(cfg); }

const char *distill_term_class(distill_term_kind_t k) {
    static const char *const names[] = {"DistillationDMLLoss",   "DistillationKLDivLoss", "DistillationDKDLoss",
                                        "DistillCTCLogits",      "DistillationDistanceLoss", "DistillationCTCLoss",
                                        "DistillationSARLoss",   "DistillationNRTRLoss"};
    return (unsigned)k < sizeof names / sizeof names[0] ? names[k] : "?";
}

static int is_distill_arch(const cJSON *arch) {
    if (!cJSON_IsObject(arch)) return 0;
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(arch, "name");
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(arch, "algorithm");
    return (cJSON_IsString(n) && strcmp(n->valuestring, "DistillationModel") == 0) ||
           (cJSON_IsString(a) && strcmp(a->valuestring, "Distillation") == 0) ||
           cJSON_GetObjectItemCaseSensitive(arch, "Models") != NULL;
}

int distill_config_is(const OcrConfig *cfg) {
    return ocr_config_has(cfg, "Distillation") || is_distill_arch(ocr_config_node(cfg, "Architecture"));
}

int distill_net_index(const DistillConfig *dc, const char *name) {
    for (int i = 0; i < dc->nnets; i++)
        if (strcmp(dc->nets[i].name, name) == 0) return i;
    return -1;
}

// The full path of a key under the sections' base ("" as written, "Distillation." rewritten).
static const char *P(char *buf, size_t n, const char *base, const char *fmt, ...) {
    size_t b = (size_t)snprintf(buf, n, "%s", base);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + b, n - b, fmt, ap);
    va_end(ap);
    return buf;
}

// A name list of the networks for messages.
static void net_list(const DistillConfig *dc, char *out, size_t n) {
    size_t u = 0;
    out[0] = '\0';
    for (int i = 0; i < dc->nnets && u < n; i++) u += (size_t)snprintf(out + u, n - u, "%s%s", i ? ", " : "", dc->nets[i].name);
}

static ocr_status_t net_by_name(const OcrConfig *cfg, const DistillConfig *dc, const char *key, const cJSON *v,
                                int *out) {
    char names[256];
    net_list(dc, names, sizeof names);
    if (!cJSON_IsString(v))
        return ocr_set_error(OCR_ERR_CONFIG, "%s: %s must name a network of Architecture.Models (%s)", src(cfg), key,
                             names);
    *out = distill_net_index(dc, v->valuestring);
    if (*out < 0)
        return ocr_set_error(OCR_ERR_CONFIG,
                             "%s: %s names the network \"%s\", which Architecture.Models does not have (it has %s)",
                             src(cfg), key, v->valuestring, names);
    return OCR_OK;
}

// Head of a network's section: 1 MultiHead with NRTR, 2 MultiHead with SAR, 0 otherwise.
static int guide_kind_of(const DistillNet *n) {
    return n->arch.multihead.kind == OCR_GUIDE_NRTR ? 1 : n->arch.multihead.kind == OCR_GUIDE_SAR ? 2 : 0;
}

// ---- one network's config -----------------------------------------------------------------------------

static const char *const NET_KEYS[] = {"pretrained", "freeze_params", "return_all_feats", "model_type", "algorithm",
                                       "Transform",  "Backbone",      "Neck",             "Head",       NULL};

// The first entry of loss_config_list of class `cls` that lists network `name` in model_name_list.
static const cJSON *gt_entry(const cJSON *list, const char *cls, const char *name) {
    const cJSON *e;
    cJSON_ArrayForEach(e, list) {
        const cJSON *body = cJSON_GetObjectItemCaseSensitive(e, cls);
        if (!body) continue;
        const cJSON *names = cJSON_GetObjectItemCaseSensitive(body, "model_name_list"), *m;
        cJSON_ArrayForEach(m, names) if (cJSON_IsString(m) && strcmp(m->valuestring, name) == 0) return body;
    }
    return NULL;
}

static double weight_of(const cJSON *body) {
    const cJSON *w = body ? cJSON_GetObjectItemCaseSensitive(body, "weight") : NULL;
    return cJSON_IsNumber(w) ? w->valuedouble : 1.0;
}

// The network's own losses as the plain config's Loss section: CTCLoss, or MultiLoss [CTCLoss,
// NRTRLoss|SARLoss] with weight_1 / weight_2 the weights of its DistillationCTCLoss and
// DistillationNRTRLoss / DistillationSARLoss entries (0 for an absent one).
static cJSON *net_loss(const cJSON *net, const cJSON *loss_list, const char *name) {
    const cJSON *head = cJSON_GetObjectItemCaseSensitive(net, "Head");
    const cJSON *hn = head ? cJSON_GetObjectItemCaseSensitive(head, "name") : NULL;
    cJSON *loss = cJSON_CreateObject();
    if (!(cJSON_IsString(hn) && strcmp(hn->valuestring, "MultiHead") == 0)) {
        cJSON_AddStringToObject(loss, "name", "CTCLoss");
        return loss;
    }
    const cJSON *hl = cJSON_GetObjectItemCaseSensitive(head, "head_list");
    const cJSON *second = cJSON_GetArrayItem(hl, 1);
    int sar = second && second->child && second->child->string && strcmp(second->child->string, "SARHead") == 0;
    const cJSON *ctc = gt_entry(loss_list, "DistillationCTCLoss", name);
    const cJSON *gt = gt_entry(loss_list, sar ? "DistillationSARLoss" : "DistillationNRTRLoss", name);
    cJSON_AddStringToObject(loss, "name", "MultiLoss");
    cJSON *l = cJSON_AddArrayToObject(loss, "loss_config_list");
    cJSON *c = cJSON_CreateObject();
    cJSON_AddItemToObject(c, "CTCLoss", cJSON_CreateObject());
    cJSON_AddItemToArray(l, c);
    cJSON *g = cJSON_CreateObject(), *gb = cJSON_CreateObject();
    if (gt) {
        static const char *const copy[] = {"smoothing", "ignore_index", NULL};
        for (int i = 0; copy[i]; i++) {
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(gt, copy[i]);
            if (v && !(sar && strcmp(copy[i], "smoothing") == 0)) cJSON_AddItemToObject(gb, copy[i], cJSON_Duplicate(v, 1));
        }
    }
    cJSON_AddItemToObject(g, sar ? "SARLoss" : "NRTRLoss", gb);
    cJSON_AddItemToArray(l, g);
    cJSON_AddNumberToObject(loss, "weight_1", ctc ? weight_of(ctc) : 0.0);
    cJSON_AddNumberToObject(loss, "weight_2", gt ? weight_of(gt) : 0.0);
    return loss;
}

// The network's Architecture section: Models.<name> without the distillation keys.
static cJSON *net_arch(const cJSON *net) {
    cJSON *a = cJSON_Duplicate(net, 1);
    cJSON_DeleteItemFromObjectCaseSensitive(a, "pretrained");
    cJSON_DeleteItemFromObjectCaseSensitive(a, "freeze_params");
    cJSON_DeleteItemFromObjectCaseSensitive(a, "return_all_feats");
    return a;
}

static void replace_section(cJSON *root, const char *key, cJSON *item) {
    if (cJSON_GetObjectItemCaseSensitive(root, key))
        cJSON_ReplaceItemInObjectCaseSensitive(root, key, item);
    else
        cJSON_AddItemToObject(root, key, item);
}

// The error of a sub-network's architecture with its keys named as written.
static ocr_status_t net_error(ocr_status_t st, const char *name) {
    const char *msg = ocr_last_error();
    char out[2048], with[96];
    snprintf(with, sizeof with, "Architecture.Models.%s.", name);
    size_t u = 0;
    const char *p = msg;
    while (*p && u + 1 < sizeof out) {
        if (strncmp(p, "Architecture.", 13) == 0 && strncmp(p, "Architecture.Models.", 20) != 0) {
            u += (size_t)snprintf(out + u, sizeof out - u, "%s", with);
            p += 13;
            continue;
        }
        out[u++] = *p++;
    }
    out[u < sizeof out ? u : sizeof out - 1] = '\0';
    return ocr_set_error(st, "%s", out);
}

// Builds one network's OcrArch from a copy of cfg whose Architecture and Loss are its own.
static ocr_status_t build_net_arch(const OcrConfig *cfg, const cJSON *net, const cJSON *loss_list, DistillNet *n) {
    OcrConfig *sub;
    OCR_TRY(ocr_config_clone(&sub, cfg));
    cJSON *root = ocr_config_root(sub);
    replace_section(root, "Architecture", net_arch(net));
    replace_section(root, "Loss", net_loss(net, loss_list, n->name));
    cJSON_DeleteItemFromObjectCaseSensitive(root, "Distillation");
    ocr_status_t st = ocr_arch_from_config(&n->arch, sub);
    ocr_config_free(sub);
    if (st != OCR_OK) return net_error(st, n->name);
    return OCR_OK;
}

// ---- dictionaries ---------------------------------------------------------------------------------------

// The dictionary recorded next to a pretrained checkpoint (model.dict.txt in a checkpoint
// directory, X.dict.txt beside X.safetensors / X.pdparams / the prefix X); "" when none.
static void recorded_dict(const char *pretrained, char *out, size_t n) {
    out[0] = '\0';
    char p[1200];
    snprintf(p, sizeof p, "%s/model.dict.txt", pretrained);
    if (ocr_file_exists(p)) {
        snprintf(out, n, "%s", p);
        return;
    }
    char stem[1100];
    snprintf(stem, sizeof stem, "%s", pretrained);
    char *dot = strrchr(stem, '.'), *slash = strrchr(stem, '/');
    if (dot && (!slash || dot > slash) && (strcmp(dot, ".safetensors") == 0 || strcmp(dot, ".pdparams") == 0)) *dot = 0;
    snprintf(p, sizeof p, "%s.dict.txt", stem);
    if (ocr_file_exists(p)) snprintf(out, n, "%s", p);
}

// 1 when the two dictionary files hold the same lines (a trailing newline or CR aside).
static int same_dict(const char *a, const char *b) {
    char *ta = NULL, *tb = NULL;
    size_t na = 0, nb = 0;
    if (ocr_read_file(a, &ta, &na) != OCR_OK || ocr_read_file(b, &tb, &nb) != OCR_OK) {
        free(ta);
        free(tb);
        return 1;  // unreadable: the loader reports it
    }
    while (na && (ta[na - 1] == '\n' || ta[na - 1] == '\r')) na--;
    while (nb && (tb[nb - 1] == '\n' || tb[nb - 1] == '\r')) nb--;
    int same = 1;
    size_t i = 0, j = 0;
    while (same && (i < na || j < nb)) {
        if (i < na && ta[i] == '\r') { i++; continue; }
        if (j < nb && tb[j] == '\r') { j++; continue; }
        if (i >= na || j >= nb || ta[i] != tb[j]) same = 0;
        i++, j++;
    }
    free(ta);
    free(tb);
    return same;
}

// ---- the losses -----------------------------------------------------------------------------------------

typedef struct {
    const char *cls;
    distill_term_kind_t kind;
    int pairs;  // model_name_pairs (1) or model_name_list (0)
    const char *const *keys;
} LossClass;

static const char *const K_DML[] = {"weight", "act", "use_log", "model_name_pairs", "key", "multi_head", "dis_head",
                                    "maps_name", "name", NULL};
static const char *const K_KL[] = {"weight", "model_name_pairs", "key", "multi_head", "dis_head", "maps_name", "name",
                                   NULL};
static const char *const K_DKD[] = {"weight", "model_name_pairs", "key", "multi_head", "dis_head", "maps_name", "name",
                                    "temperature", "alpha", "beta", NULL};
static const char *const K_CTCL[] = {"weight", "reduction", "model_name_pairs", "key", "name", NULL};
static const char *const K_DIST[] = {"weight", "mode", "model_name_pairs", "key", "name", NULL};
static const char *const K_GT[] = {"weight", "model_name_list", "key", "multi_head", "name", NULL};
static const char *const K_NRTR[] = {"weight", "model_name_list", "key", "multi_head", "smoothing", "ignore_index",
                                     "name", NULL};
static const char *const K_SAR[] = {"weight", "model_name_list", "key", "multi_head", "ignore_index", "name", NULL};

static const LossClass LOSSES[] = {
    {"DistillationDMLLoss", DISTILL_DML, 1, K_DML},
    {"DistillationKLDivLoss", DISTILL_KL, 1, K_KL},
    {"DistillationDKDLoss", DISTILL_DKD, 1, K_DKD},
    {"DistillCTCLogits", DISTILL_CTC_LOGITS, 1, K_CTCL},
    {"DistillationDistanceLoss", DISTILL_DISTANCE, 1, K_DIST},
    {"DistillationCTCLoss", DISTILL_GT_CTC, 0, K_GT},
    {"DistillationSARLoss", DISTILL_GT_SAR, 0, K_SAR},
    {"DistillationNRTRLoss", DISTILL_GT_NRTR, 0, K_NRTR},
};
#define NLOSSES ((int)(sizeof LOSSES / sizeof LOSSES[0]))

// Which output of network n the entry reads (key, multi_head, dis_head as PaddleOCR's classes do).
static ocr_status_t term_output(const OcrConfig *cfg, const char *base, const char *ep, const DistillNet *n,
                                const LossClass *lc, DistillTerm *t) {
    char k[256];
    const char *key;
    OCR_TRY(ocr_config_get_string(cfg, P(k, sizeof k, base, "%s.key", ep), NULL, &key));
    int mh = 0, has_mh = lc->keys == K_DML || lc->keys == K_KL || lc->keys == K_DKD || lc->keys == K_GT ||
                         lc->keys == K_NRTR || lc->keys == K_SAR;
    if (has_mh) OCR_TRY(ocr_config_get_bool(cfg, P(k, sizeof k, base, "%s.multi_head", ep), 0, &mh));
    if (key && strcmp(key, "backbone_out") == 0) {
        if (t->kind != DISTILL_DISTANCE && t->kind != DISTILL_DML && t->kind != DISTILL_KL)
            return ocr_set_error(OCR_ERR_CONFIG, "%s: %s.key backbone_out: %s reads head outputs", src(cfg), ep,
                                 lc->cls);
        if (!n->return_all_feats)
            return ocr_set_error(OCR_ERR_CONFIG,
                                 "%s: %s.key backbone_out needs Architecture.Models.%s.return_all_feats: true", src(cfg),
                                 ep, n->name);
        t->out = DISTILL_OUT_BACKBONE;
        return OCR_OK;
    }
    if (key && strcmp(key, "head_out") != 0)
        return ocr_set_error(OCR_ERR_CONFIG, "%s: %s.key must be head_out or backbone_out (or null), got \"%s\"",
                             src(cfg), ep, key);
    if (key && !n->return_all_feats)
        return ocr_set_error(OCR_ERR_CONFIG,
                             "%s: %s.key head_out needs Architecture.Models.%s.return_all_feats: true (without it the "
                             "network returns its head's output and key must be null)",
                             src(cfg), ep, n->name);
    if (!key && n->return_all_feats)
        return ocr_set_error(OCR_ERR_CONFIG,
                             "%s: %s.key is null but Architecture.Models.%s.return_all_feats is true: name head_out "
                             "or backbone_out",
                             src(cfg), ep, n->name);
    const int gk = guide_kind_of(n);
    const char *head = "ctc";
    if (t->kind == DISTILL_GT_NRTR) head = "gtc";
    else if (t->kind == DISTILL_GT_SAR) head = "sar";
    else if (lc->keys == K_DML || lc->keys == K_KL || lc->keys == K_DKD)
        OCR_TRY(ocr_config_get_string(cfg, P(k, sizeof k, base, "%s.dis_head", ep), "ctc", &head));
    if (t->kind == DISTILL_CTC_LOGITS) mh = gk != 0;  // KLCTCLogits reads out["ctc"] of a MultiHead
    if (gk && !mh)
        return ocr_set_error(OCR_ERR_CONFIG,
                             "%s: %s.multi_head must be true: Architecture.Models.%s has a MultiHead (its head_out "
                             "holds ctc and %s)",
                             src(cfg), ep, n->name, gk == 1 ? "gtc" : "sar");
    if (!gk && mh)
        return ocr_set_error(OCR_ERR_CONFIG,
                             "%s: %s.multi_head is true but Architecture.Models.%s has a %s, not a MultiHead", src(cfg),
                             ep, n->name, "CTCHead");
    if (!mh && (t->kind == DISTILL_GT_NRTR || t->kind == DISTILL_GT_SAR))
        return ocr_set_error(OCR_ERR_CONFIG, "%s: %s: Architecture.Models.%s has no %s head (it has a CTCHead)",
                             src(cfg), ep, n->name, head);
    if (strcmp(head, "ctc") == 0) {
        t->out = DISTILL_OUT_CTC;
    } else if ((strcmp(head, "gtc") == 0 && gk == 1) || (strcmp(head, "sar") == 0 && gk == 2)) {
        t->out = DISTILL_OUT_GUIDE;
    } else {
        return ocr_set_error(OCR_ERR_CONFIG,
                             "%s: %s%s names the head \"%s\", which Architecture.Models.%s does not have (its head_out "
                             "holds %s)",
                             src(cfg), ep, (t->kind == DISTILL_GT_NRTR || t->kind == DISTILL_GT_SAR) ? "" : ".dis_head",
                             head, n->name, gk == 1 ? "ctc, gtc" : gk == 2 ? "ctc, sar" : "ctc only");
    }
    return OCR_OK;
}

static ocr_status_t parse_entry(const OcrConfig *cfg, const char *base, int idx, DistillConfig *dc) {
    char k[256], ep[96];
    const cJSON *e = ocr_config_node(cfg, P(k, sizeof k, base, "Loss.loss_config_list.%d", idx));
    if (!cJSON_IsObject(e) || !e->child || e->child->next)
        return ocr_set_error(OCR_ERR_CONFIG, "%s: Loss.loss_config_list.%d must be a map with one key (a loss name)",
                             src(cfg), idx);
    const char *cls = e->child->string;
    const LossClass *lc = NULL;
    for (int i = 0; i < NLOSSES; i++)
        if (strcmp(LOSSES[i].cls, cls) == 0) lc = &LOSSES[i];
    snprintf(ep, sizeof ep, "Loss.loss_config_list.%d.%s", idx, cls);
    if (!lc) {
        char known[600];
        size_t u = 0;
        for (int i = 0; i < NLOSSES; i++) u += (size_t)snprintf(known + u, sizeof known - u, "%s%s", i ? ", " : "", LOSSES[i].cls);
        return ocr_set_error(OCR_ERR_CONFIG, "%s: Loss.loss_config_list.%d: unknown loss %s in a CombinedLoss (known: %s)",
                             src(cfg), idx, cls, known);
    }
    if (!cJSON_IsObject(e->child) && !cJSON_IsNull(e->child))
        return ocr_set_error(OCR_ERR_CONFIG, "%s: %s must be a map of the loss's settings", src(cfg), ep);
    OCR_TRY(ocr_config_check_keys(cfg, P(k, sizeof k, base, "%s", ep), lc->keys));
    DistillTerm proto;
    memset(&proto, 0, sizeof proto);
    proto.kind = lc->kind;
    snprintf(proto.path, sizeof proto.path, "%s", ep);
    const char *name;
    OCR_TRY(ocr_config_get_string(cfg, P(k, sizeof k, base, "%s.name", ep), cls, &name));
    snprintf(proto.name, sizeof proto.name, "%s", name);
    OCR_TRY(ocr_config_get_double(cfg, P(k, sizeof k, base, "%s.weight", ep), 1.0, &proto.weight));
    OCR_TRY(ocr_config_check_range(cfg, P(k, sizeof k, base, "%s.weight", ep), proto.weight, 0.0, 1e6));
    if (lc->keys == K_DML || lc->keys == K_KL || lc->keys == K_DKD) {
        const cJSON *mn = ocr_config_node(cfg, P(k, sizeof k, base, "%s.maps_name", ep));
        if (mn && !cJSON_IsNull(mn))
            return ocr_set_error(OCR_ERR_CONFIG, "%s: %s.maps_name selects detection maps; recognition has none",
                                 src(cfg), ep);
    }
    switch (lc->kind) {
        case DISTILL_DML: {
            const char *act;
            OCR_TRY(ocr_config_get_string(cfg, P(k, sizeof k, base, "%s.act", ep), NULL, &act));
            if (!act || strcmp(act, "softmax") != 0)
                return ocr_set_error(OCR_ERR_CONFIG, "%s: %s.act must be softmax (sigmoid and none are not reproduced), "
                                     "got %s", src(cfg), ep, act ? act : "null");
            OCR_TRY(ocr_config_get_bool(cfg, P(k, sizeof k, base, "%s.use_log", ep), 0, &proto.use_log));
            break;
        }
        case DISTILL_KL: proto.temperature = 1.0; break;
        case DISTILL_DKD:
            OCR_TRY(ocr_config_get_double(cfg, P(k, sizeof k, base, "%s.temperature", ep), 1.0, &proto.temperature));
            OCR_TRY(ocr_config_get_double(cfg, P(k, sizeof k, base, "%s.alpha", ep), 1.0, &proto.alpha));
            OCR_TRY(ocr_config_get_double(cfg, P(k, sizeof k, base, "%s.beta", ep), 1.0, &proto.beta));
            OCR_TRY(ocr_config_check_range(cfg, P(k, sizeof k, base, "%s.temperature", ep), proto.temperature, 1e-3, 1e3));
            break;
        case DISTILL_CTC_LOGITS: {
            proto.temperature = 0.5;
            const char *red;
            OCR_TRY(ocr_config_get_string(cfg, P(k, sizeof k, base, "%s.reduction", ep), "mean", &red));
            // DistillCTCLogits stores reduction and never reads it (KLCTCLogits runs mode "mean").
            (void)red;
            break;
        }
        case DISTILL_DISTANCE: {
            const char *mode;
            OCR_TRY(ocr_config_get_string(cfg, P(k, sizeof k, base, "%s.mode", ep), "l2", &mode));
            if (strcmp(mode, "l2") == 0) proto.mode = OCR_DISTANCE_L2;
            else if (strcmp(mode, "l1") == 0) proto.mode = OCR_DISTANCE_L1;
            else if (strcmp(mode, "smooth_l1") == 0) proto.mode = OCR_DISTANCE_SMOOTH_L1;
            else
                return ocr_set_error(OCR_ERR_CONFIG, "%s: %s.mode must be l2, l1 or smooth_l1, got \"%s\"", src(cfg), ep,
                                     mode);
            break;
        }
        default: break;
    }
    const cJSON *lst = ocr_config_node(cfg, P(k, sizeof k, base, "%s.%s", ep, lc->pairs ? "model_name_pairs" : "model_name_list"));
    if (!cJSON_IsArray(lst) || cJSON_GetArraySize(lst) < 1)
        return ocr_set_error(OCR_ERR_CONFIG, "%s: %s.%s must list %s", src(cfg), ep,
                             lc->pairs ? "model_name_pairs" : "model_name_list",
                             lc->pairs ? "pairs of network names, e.g. [[Student, Teacher]]" : "network names, e.g. [Student]");
    int pi = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, lst) {
        if (dc->nterms >= DISTILL_MAX_TERMS)
            return ocr_set_error(OCR_ERR_CONFIG, "%s: Loss.loss_config_list: at most %d terms in all", src(cfg),
                                 DISTILL_MAX_TERMS);
        DistillTerm t = proto;
        char kk[160];
        if (lc->pairs) {
            if (!cJSON_IsArray(it) || cJSON_GetArraySize(it) != 2)
                return ocr_set_error(OCR_ERR_CONFIG, "%s: %s.model_name_pairs.%d must be a pair [name, name]", src(cfg),
                                     ep, pi);
            snprintf(kk, sizeof kk, "%s.model_name_pairs.%d.0", ep, pi);
            OCR_TRY(net_by_name(cfg, dc, kk, cJSON_GetArrayItem(it, 0), &t.a));
            snprintf(kk, sizeof kk, "%s.model_name_pairs.%d.1", ep, pi);
            OCR_TRY(net_by_name(cfg, dc, kk, cJSON_GetArrayItem(it, 1), &t.b));
            if (t.a == t.b)
                return ocr_set_error(OCR_ERR_CONFIG, "%s: %s.model_name_pairs.%d pairs %s with itself", src(cfg), ep, pi,
                                     dc->nets[t.a].name);
        } else {
            snprintf(kk, sizeof kk, "%s.model_name_list.%d", ep, pi);
            OCR_TRY(net_by_name(cfg, dc, kk, it, &t.a));
            t.b = -1;
        }
        // Both sides read the same output (PaddleOCR indexes both with the same key and head).
        OCR_TRY(term_output(cfg, base, ep, &dc->nets[t.a], lc, &t));
        if (t.b >= 0) {
            DistillTerm tb = t;
            OCR_TRY(term_output(cfg, base, ep, &dc->nets[t.b], lc, &tb));
        }
        if (t.kind == DISTILL_KL && t.out == DISTILL_OUT_GUIDE) {
            int mh;
            OCR_TRY(ocr_config_get_bool(cfg, P(k, sizeof k, base, "%s.multi_head", ep), 0, &mh));
            t.masked = mh;
        }
        if (t.kind == DISTILL_DKD && t.out != DISTILL_OUT_GUIDE)
            return ocr_set_error(OCR_ERR_CONFIG,
                                 "%s: %s: DKD needs per-position targets: dis_head gtc (the NRTR head), as PP-OCRv4's "
                                 "config has it",
                                 src(cfg), ep);
        if (t.kind == DISTILL_DKD && guide_kind_of(&dc->nets[t.a]) != 1)
            return ocr_set_error(OCR_ERR_CONFIG, "%s: %s: DKD reads the NRTR head (gtc)", src(cfg), ep);
        dc->terms[dc->nterms++] = t;
        pi++;
    }
    return OCR_OK;
}

// ---- the whole section ------------------------------------------------------------------------------------

static ocr_status_t parse(DistillConfig *dc, const OcrConfig *cfg, const char *base) {
    memset(dc, 0, sizeof *dc);
    char k[256];
    static const char *const arch_keys[] = {"model_type", "name", "algorithm", "Models", NULL};
    OCR_TRY(ocr_config_check_keys(cfg, P(k, sizeof k, base, "Architecture"), arch_keys));
    const char *s;
    OCR_TRY(ocr_config_get_string(cfg, P(k, sizeof k, base, "Architecture.model_type"), "rec", &s));
    if (strcmp(s, "rec") != 0)
        return ocr_set_error(OCR_ERR_CONFIG, "%s: Architecture.model_type must be rec for a DistillationModel, got \"%s\"",
                             src(cfg), s);
    OCR_TRY(ocr_config_get_string(cfg, P(k, sizeof k, base, "Architecture.name"), "DistillationModel", &s));
    if (strcmp(s, "DistillationModel") != 0)
        return ocr_set_error(OCR_ERR_CONFIG, "%s: Architecture.name must be DistillationModel, got \"%s\"", src(cfg), s);
    OCR_TRY(ocr_config_get_string(cfg, P(k, sizeof k, base, "Architecture.algorithm"), "Distillation", &s));
    if (strcmp(s, "Distillation") != 0)
        return ocr_set_error(OCR_ERR_CONFIG, "%s: Architecture.algorithm must be Distillation for a DistillationModel, got "
                             "\"%s\"", src(cfg), s);
    const cJSON *models = ocr_config_node(cfg, P(k, sizeof k, base, "Architecture.Models"));
    if (!cJSON_IsObject(models) || !models->child)
        return ocr_set_error(OCR_ERR_CONFIG, "%s: Architecture.Models must map network names (Teacher, Student, ...) to "
                             "recognizer sections", src(cfg));
    const cJSON *loss_list = ocr_config_node(cfg, P(k, sizeof k, base, "Loss.loss_config_list"));
    const cJSON *net;
    cJSON_ArrayForEach(net, models) {
        if (dc->nnets >= DISTILL_MAX_NETS)
            return ocr_set_error(OCR_ERR_CONFIG, "%s: Architecture.Models: at most %d networks", src(cfg), DISTILL_MAX_NETS);
        DistillNet *n = &dc->nets[dc->nnets];
        if (strlen(net->string) >= sizeof n->name || !net->string[0] || strchr(net->string, '.'))
            return ocr_set_error(OCR_ERR_CONFIG, "%s: Architecture.Models.%s: a network name is 1 to 31 characters "
                                 "without '.'", src(cfg), net->string);
        snprintf(n->name, sizeof n->name, "%s", net->string);
        char np[128];
        snprintf(np, sizeof np, "Architecture.Models.%s", n->name);
        if (!cJSON_IsObject(net))
            return ocr_set_error(OCR_ERR_CONFIG, "%s: %s must be a recognizer section", src(cfg), np);
        OCR_TRY(ocr_config_check_keys(cfg, P(k, sizeof k, base, "%s", np), NET_KEYS));
        OCR_TRY(ocr_config_get_bool(cfg, P(k, sizeof k, base, "%s.freeze_params", np), 0, &n->frozen));
        OCR_TRY(ocr_config_get_bool(cfg, P(k, sizeof k, base, "%s.return_all_feats", np), 0, &n->return_all_feats));
        const char *pre;
        OCR_TRY(ocr_config_get_string(cfg, P(k, sizeof k, base, "%s.pretrained", np), NULL, &pre));
        if (pre && pre[0]) snprintf(n->pretrained, sizeof n->pretrained, "%s", pre);
        OCR_TRY(build_net_arch(cfg, net, loss_list, n));
        dc->nnets++;
    }
    // One dictionary for every network: the class counts, and what a pretrained checkpoint recorded.
    for (int i = 1; i < dc->nnets; i++)
        if (dc->nets[i].arch.num_classes != dc->nets[0].arch.num_classes)
            return ocr_set_error(OCR_ERR_CONFIG,
                                 "%s: Architecture.Models.%s has %d classes and Architecture.Models.%s %d: the networks "
                                 "of a distillation share one dictionary (Global.character_dict_path)",
                                 src(cfg), dc->nets[i].name, dc->nets[i].arch.num_classes, dc->nets[0].name,
                                 dc->nets[0].arch.num_classes);
    for (int i = 0; i < dc->nnets; i++) {
        const DistillNet *n = &dc->nets[i];
        char rec[1200];
        if (!n->pretrained[0] || !n->arch.dict_path[0]) continue;
        recorded_dict(n->pretrained, rec, sizeof rec);
        if (rec[0] && !same_dict(rec, n->arch.dict_path))
            return ocr_set_error(OCR_ERR_CONFIG,
                                 "%s: Architecture.Models.%s.pretrained %s was trained with the dictionary %s, which "
                                 "differs from Global.character_dict_path %s: the networks of a distillation share "
                                 "one dictionary",
                                 src(cfg), n->name, n->pretrained, rec, n->arch.dict_path);
    }

    // Loss: CombinedLoss.
    static const char *const loss_keys[] = {"name", "loss_config_list", NULL};
    OCR_TRY(ocr_config_check_keys(cfg, P(k, sizeof k, base, "Loss"), loss_keys));
    OCR_TRY(ocr_config_get_string(cfg, P(k, sizeof k, base, "Loss.name"), NULL, &s));
    if (!s || strcmp(s, "CombinedLoss") != 0)
        return ocr_set_error(OCR_ERR_CONFIG, "%s: Loss.name must be CombinedLoss for a DistillationModel, got \"%s\"",
                             src(cfg), s ? s : "null");
    if (!cJSON_IsArray(loss_list) || cJSON_GetArraySize(loss_list) < 1)
        return ocr_set_error(OCR_ERR_CONFIG, "%s: Loss.loss_config_list must list the losses", src(cfg));
    for (int i = 0; i < cJSON_GetArraySize(loss_list); i++) OCR_TRY(parse_entry(cfg, base, i, dc));
    // A network's ground-truth loss of one class listed twice would be folded once.
    for (int i = 0; i < dc->nterms; i++)
        for (int j = i + 1; j < dc->nterms; j++)
            if (dc->terms[i].kind >= DISTILL_GT_CTC && dc->terms[i].kind == dc->terms[j].kind &&
                dc->terms[i].a == dc->terms[j].a)
                return ocr_set_error(OCR_ERR_CONFIG, "%s: %s lists %s a second time (first in %s)", src(cfg),
                                     dc->terms[j].path, dc->nets[dc->terms[j].a].name, dc->terms[i].path);

    // Metric: DistillationMetric keyed on the trained network (the CTC-loss check below needs it).
    static const char *const metric_keys[] = {"name", "base_metric_name", "main_indicator", "key", "ignore_space",
                                              "is_filter", NULL};
    OCR_TRY(ocr_config_check_keys(cfg, P(k, sizeof k, base, "Metric"), metric_keys));
    OCR_TRY(ocr_config_get_string(cfg, P(k, sizeof k, base, "Metric.name"), "DistillationMetric", &s));
    if (strcmp(s, "DistillationMetric") != 0)
        return ocr_set_error(OCR_ERR_CONFIG, "%s: Metric.name must be DistillationMetric for a DistillationModel, got \"%s\"",
                             src(cfg), s);
    OCR_TRY(ocr_config_get_string(cfg, P(k, sizeof k, base, "Metric.base_metric_name"), "RecMetric", &s));
    if (strcmp(s, "RecMetric") != 0)
        return ocr_set_error(OCR_ERR_CONFIG, "%s: Metric.base_metric_name must be RecMetric, got \"%s\"", src(cfg), s);
    OCR_TRY(ocr_config_get_string(cfg, P(k, sizeof k, base, "Metric.main_indicator"), "acc", &s));
    if (strcmp(s, "acc") != 0)
        return ocr_set_error(OCR_ERR_CONFIG, "%s: Metric.main_indicator must be acc, got \"%s\"", src(cfg), s);
    const cJSON *mk = ocr_config_node(cfg, P(k, sizeof k, base, "Metric.key"));
    if (mk && !cJSON_IsNull(mk)) {
        OCR_TRY(net_by_name(cfg, dc, "Metric.key", mk, &dc->trained));
    } else {
        dc->trained = distill_net_index(dc, "Student");
        if (dc->trained < 0)
            return ocr_set_error(OCR_ERR_CONFIG, "%s: Metric.key is missing and Architecture.Models has no Student: name "
                                 "the network to train and score", src(cfg));
    }
    if (dc->nets[dc->trained].frozen)
        return ocr_set_error(OCR_ERR_CONFIG,
                             "%s: Metric.key names %s, whose Architecture.Models.%s.freeze_params is true: the scored "
                             "network is the one trained",
                             src(cfg), dc->nets[dc->trained].name, dc->nets[dc->trained].name);

    // A CTCHead network trains with its CTC loss at weight 1 (the plain config's CTCLoss has no
    // weight): its DistillationCTCLoss must be listed, at 1.0.
    if (!guide_kind_of(&dc->nets[dc->trained])) {
        int found = 0;
        for (int i = 0; i < dc->nterms; i++) {
            const DistillTerm *x = &dc->terms[i];
            if (x->kind != DISTILL_GT_CTC || x->a != dc->trained) continue;
            found = 1;
            if (x->weight != 1.0)
                return ocr_set_error(OCR_ERR_CONFIG, "%s: %s.weight %g: %s has a CTCHead, whose CTC loss trains at "
                                     "weight 1.0 here", src(cfg), x->path, x->weight, dc->nets[dc->trained].name);
        }
        if (!found)
            return ocr_set_error(OCR_ERR_CONFIG, "%s: Loss.loss_config_list has no DistillationCTCLoss for %s (Metric.key): "
                                 "its CTC loss always trains; list it (weight 1.0)", src(cfg), dc->nets[dc->trained].name);
    }

    // PostProcess: DistillationCTCLabelDecode.
    static const char *const post_keys[] = {"name", "model_name", "key", "multi_head", "character_dict_path",
                                            "use_space_char", NULL};
    OCR_TRY(ocr_config_check_keys(cfg, P(k, sizeof k, base, "PostProcess"), post_keys));
    OCR_TRY(ocr_config_get_string(cfg, P(k, sizeof k, base, "PostProcess.name"), "DistillationCTCLabelDecode", &s));
    if (strcmp(s, "DistillationCTCLabelDecode") != 0)
        return ocr_set_error(OCR_ERR_CONFIG,
                             "%s: PostProcess.name must be DistillationCTCLabelDecode for a DistillationModel, got \"%s\"",
                             src(cfg), s);
    const cJSON *pm = ocr_config_node(cfg, P(k, sizeof k, base, "PostProcess.model_name"));
    if (cJSON_IsString(pm)) {
        OCR_TRY(net_by_name(cfg, dc, "PostProcess.model_name", pm, &dc->decode[dc->ndecode++]));
    } else if (cJSON_IsArray(pm)) {
        const cJSON *e;
        int i = 0;
        cJSON_ArrayForEach(e, pm) {
            char kk[64];
            snprintf(kk, sizeof kk, "PostProcess.model_name.%d", i++);
            if (dc->ndecode >= DISTILL_MAX_NETS)
                return ocr_set_error(OCR_ERR_CONFIG, "%s: PostProcess.model_name: at most %d names", src(cfg), DISTILL_MAX_NETS);
            OCR_TRY(net_by_name(cfg, dc, kk, e, &dc->decode[dc->ndecode++]));
        }
    } else {
        dc->decode[dc->ndecode++] = distill_net_index(dc, "Student") >= 0 ? distill_net_index(dc, "Student") : dc->trained;
    }
    const char *pk;
    OCR_TRY(ocr_config_get_string(cfg, P(k, sizeof k, base, "PostProcess.key"), NULL, &pk));
    if (pk && strcmp(pk, "head_out") != 0)
        return ocr_set_error(OCR_ERR_CONFIG, "%s: PostProcess.key must be head_out (or null), got \"%s\"", src(cfg), pk);
    int pmh;
    OCR_TRY(ocr_config_get_bool(cfg, P(k, sizeof k, base, "PostProcess.multi_head"), 0, &pmh));
    for (int i = 0; i < dc->ndecode; i++) {
        const DistillNet *n = &dc->nets[dc->decode[i]];
        if (pmh && !guide_kind_of(n))
            return ocr_set_error(OCR_ERR_CONFIG,
                                 "%s: PostProcess.multi_head is true but Architecture.Models.%s has a CTCHead", src(cfg),
                                 n->name);
        if (!pmh && guide_kind_of(n))
            return ocr_set_error(OCR_ERR_CONFIG,
                                 "%s: PostProcess.multi_head must be true: Architecture.Models.%s has a MultiHead (its "
                                 "CTC branch is decoded)",
                                 src(cfg), n->name);
    }
    dc->enabled = 1;
    return OCR_OK;
}

// A pattern of the optimizer's parameter groups (Optimizer.lr_mult, Global.freeze_params) names a
// network when it starts with "<name>.". Frozen networks are refused; the trained network's
// prefix is stripped (its parameters are named without it inside the run); patterns of other
// trainable networks are refused (only one network trains).
static ocr_status_t pattern_net(const OcrConfig *cfg, const DistillConfig *dc, const char *key, const char *pat,
                                const char **stripped) {
    *stripped = pat;
    for (int i = 0; i < dc->nnets; i++) {
        const DistillNet *n = &dc->nets[i];
        size_t len = strlen(n->name);
        if (strncmp(pat, n->name, len) != 0 || pat[len] != '.') continue;
        if (n->frozen)
            return ocr_set_error(OCR_ERR_CONFIG,
                                 "%s: %s \"%s\" names the frozen network %s (Architecture.Models.%s.freeze_params: "
                                 "true): a frozen network has no place in the optimizer's parameter groups",
                                 src(cfg), key, pat, n->name, n->name);
        if (i != dc->trained)
            return ocr_set_error(OCR_ERR_CONFIG,
                                 "%s: %s \"%s\" names %s; these parameter groups apply to the scored network "
                                 "(Metric.key %s) only",
                                 src(cfg), key, pat, n->name, dc->nets[dc->trained].name);
        *stripped = pat + len + 1;
    }
    return OCR_OK;
}

static ocr_status_t rewrite_groups(OcrConfig *cfg, const DistillConfig *dc) {
    cJSON *root = ocr_config_root(cfg);
    cJSON *opt = cJSON_GetObjectItemCaseSensitive(root, "Optimizer");
    cJSON *lm = opt ? cJSON_GetObjectItemCaseSensitive(opt, "lr_mult") : NULL;
    if (cJSON_IsObject(lm)) {
        cJSON *e;
        cJSON_ArrayForEach(e, lm) {
            const char *st;
            OCR_TRY(pattern_net(cfg, dc, "Optimizer.lr_mult", e->string, &st));
            if (st != e->string) memmove(e->string, st, strlen(st) + 1);
        }
    }
    cJSON *g = cJSON_GetObjectItemCaseSensitive(root, "Global");
    cJSON *fp = g ? cJSON_GetObjectItemCaseSensitive(g, "freeze_params") : NULL;
    if (cJSON_IsArray(fp)) {
        cJSON *e;
        cJSON_ArrayForEach(e, fp) {
            if (!cJSON_IsString(e)) continue;
            const char *st;
            OCR_TRY(pattern_net(cfg, dc, "Global.freeze_params", e->valuestring, &st));
            if (st != e->valuestring) memmove(e->valuestring, st, strlen(st) + 1);
        }
    }
    return OCR_OK;
}

ocr_status_t distill_config_check_training(const DistillConfig *dc, const OcrConfig *cfg) {
    int cache;
    OCR_TRY(ocr_config_get_bool(cfg, "Global.distill_teacher_cache", 0, &cache));
    if (cache) {
        // A cached output is only the network's output for that sample when the sample is the
        // same image every epoch.
        static const char *const aug[] = {"RecAug", "RecConAug", "BaseDataAugmentation", "TextLineAug", NULL};
        const cJSON *tr = ocr_config_node(cfg, "Train.dataset.transforms");
        int i = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, tr) {
            for (int k = 0; aug[k]; k++)
                if (cJSON_IsObject(e) && cJSON_GetObjectItemCaseSensitive(e, aug[k]))
                    return ocr_set_error(OCR_ERR_CONFIG,
                                         "%s: Global.distill_teacher_cache needs the same image for a sample every epoch; "
                                         "Train.dataset.transforms.%d.%s augments it (remove it or the cache)",
                                         src(cfg), i, aug[k]);
            i++;
        }
        // The cache is keyed by the sample's index in the epoch's dataset: it must name the same
        // image every epoch (files sampled with ratio < 1 are re-drawn per epoch).
        double ratios[64];
        int nr = 0;
        OCR_TRY(ocr_config_get_double_list(cfg, "Train.dataset.ratio_list", ratios, 64, &nr));
        for (int k = 0; k < nr; k++)
            if (ratios[k] < 1.0)
                return ocr_set_error(OCR_ERR_CONFIG,
                                     "%s: Global.distill_teacher_cache needs the same lines every epoch; "
                                     "Train.dataset.ratio_list.%d is %g (a subset re-drawn per epoch)",
                                     src(cfg), k, ratios[k]);
        if (ocr_config_has(cfg, "Train.dataset.batch_ratio_list"))
            return ocr_set_error(OCR_ERR_CONFIG, "%s: Global.distill_teacher_cache with "
                                 "Train.dataset.batch_ratio_list is not supported", src(cfg));
    }
    for (int t = 0; t < dc->nterms; t++) {
        const DistillTerm *x = &dc->terms[t];
        if (x->kind >= DISTILL_GT_CTC) continue;
        const int a_tr = x->a == dc->trained || !dc->nets[x->a].frozen;
        const int b_tr = x->b == dc->trained || !dc->nets[x->b].frozen;
        if (!a_tr && !b_tr) continue;  // a constant: it does not run
        if ((x->kind == DISTILL_KL || x->kind == DISTILL_DKD || x->kind == DISTILL_CTC_LOGITS) && !a_tr)
            return ocr_set_error(OCR_ERR_UNSUPPORTED,
                                 "%s: %s: the first network of the pair (%s) is frozen; %s trains the first network "
                                 "of model_name_pairs (the student) against the second (the teacher)",
                                 src(cfg), x->path, dc->nets[x->a].name, distill_term_class(x->kind));
        if ((x->kind == DISTILL_KL || x->kind == DISTILL_DKD || x->kind == DISTILL_CTC_LOGITS) && b_tr)
            return ocr_set_error(OCR_ERR_UNSUPPORTED,
                                 "%s: %s: the second network of the pair (%s) trains too; PaddleOCR would train it "
                                 "through %s as well, which is not reproduced (freeze it, or use DML)",
                                 src(cfg), x->path, dc->nets[x->b].name, distill_term_class(x->kind));
    }
    return OCR_OK;
}

ocr_status_t distill_config_read(DistillConfig *dc, const OcrConfig *cfg) {
    memset(dc, 0, sizeof *dc);
    if (!ocr_config_has(cfg, "Distillation")) return OCR_OK;
    static const char *const keys[] = {"Architecture", "Loss", "PostProcess", "Metric", NULL};
    OCR_TRY(ocr_config_check_keys(cfg, "Distillation", keys));
    return parse(dc, cfg, "Distillation.");
}

ocr_status_t distill_config_rewrite(OcrConfig *cfg) {
    cJSON *root = ocr_config_root(cfg);
    cJSON *arch = cJSON_GetObjectItemCaseSensitive(root, "Architecture");
    if (!is_distill_arch(arch)) return OCR_OK;
    if (cJSON_GetObjectItemCaseSensitive(root, "Distillation"))
        return ocr_set_error(OCR_ERR_CONFIG, "%s: a Distillation section and a DistillationModel Architecture: the "
                             "section is written from the Architecture (docs/DISTILLATION.md); remove it", src(cfg));
    DistillConfig *dc = malloc(sizeof *dc);
    if (!dc) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
    ocr_status_t st = parse(dc, cfg, "");
    if (st == OCR_OK) st = rewrite_groups(cfg, dc);
    if (st != OCR_OK) {
        free(dc);
        return st;
    }
    const char *trained = dc->nets[dc->trained].name;
    const cJSON *models = cJSON_GetObjectItemCaseSensitive(arch, "Models");
    const cJSON *net = cJSON_GetObjectItemCaseSensitive(models, trained);
    const cJSON *loss_list = ocr_config_node(cfg, "Loss.loss_config_list");
    cJSON *new_arch = net_arch(net), *new_loss = net_loss(net, loss_list, trained);
    cJSON *post = cJSON_CreateObject(), *metric = cJSON_CreateObject();
    cJSON_AddStringToObject(post, "name", "CTCLabelDecode");
    cJSON_AddStringToObject(metric, "name", "RecMetric");
    cJSON_AddStringToObject(metric, "main_indicator", "acc");
    static const char *const mcopy[] = {"ignore_space", "is_filter", NULL};
    for (int i = 0; mcopy[i]; i++) {
        const cJSON *v = ocr_config_node(cfg, mcopy[i][1] == 'g' ? "Metric.ignore_space" : "Metric.is_filter");
        if (v) cJSON_AddItemToObject(metric, mcopy[i], cJSON_Duplicate(v, 1));
    }
    cJSON *d = cJSON_CreateObject();
    static const char *const moved[] = {"Architecture", "Loss", "PostProcess", "Metric", NULL};
    for (int i = 0; moved[i]; i++) {
        cJSON *v = cJSON_DetachItemFromObjectCaseSensitive(root, moved[i]);
        if (v) cJSON_AddItemToObject(d, moved[i], v);
    }
    cJSON_AddItemToObject(root, "Architecture", new_arch);
    cJSON_AddItemToObject(root, "Loss", new_loss);
    cJSON_AddItemToObject(root, "PostProcess", post);
    cJSON_AddItemToObject(root, "Metric", metric);
    cJSON_AddItemToObject(root, "Distillation", d);
    // The trained network's own `pretrained` is its starting point, as PaddleOCR's
    // DistillationModel loads each sub-network's before Global.pretrained_model (which, when
    // set, is loaded after it and so wins: here it replaces it).
    const char *own = dc->nets[dc->trained].pretrained;
    cJSON *global = cJSON_GetObjectItemCaseSensitive(root, "Global");
    const cJSON *gp = cJSON_GetObjectItemCaseSensitive(global, "pretrained_model");
    if (own[0] && cJSON_IsObject(global) && !(cJSON_IsString(gp) && gp->valuestring[0])) {
        if (gp)
            cJSON_ReplaceItemInObjectCaseSensitive(global, "pretrained_model", cJSON_CreateString(own));
        else
            cJSON_AddStringToObject(global, "pretrained_model", own);
    }
    free(dc);
    return OCR_OK;
}
