// PaddleOCR's names and layouts for a .pdparams read by core/pickle.c: the name mapping, the load
// into a model with its report, and the network inferred from the tensors.
#include "models/pdparams.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---- into ocrtrain networks ----------------------------------------------------------------------

static ocr_status_t oom(void) { return ocr_set_error(OCR_ERR_OOM, "out of host memory"); }

static int starts(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

ocr_pd_map_t ocr_pdparams_map_name(const char *paddle, char *ours, size_t size) {
    static const char *const guidance[] = {"head.sar_head.", "head.gtc_head.", "head.before_gtc.", "head.nrtr_head.", NULL};
    for (int k = 0; guidance[k]; k++)
        if (starts(paddle, guidance[k])) {
            snprintf(ours, size, "%s", paddle);
            return OCR_PD_GUIDANCE;
        }
    if (starts(paddle, "head.ctc_encoder."))
        snprintf(ours, size, "neck.%s", paddle + strlen("head.ctc_encoder."));
    else if (starts(paddle, "head.ctc_head."))
        snprintf(ours, size, "head.%s", paddle + strlen("head.ctc_head."));
    else
        snprintf(ours, size, "%s", paddle);
    return OCR_PD_MAPPED;
}

// A MultiHead SAR checkpoint's second name of an LSTM parameter, "<rnn>.{k}.cell.{weight_ih,
// weight_hh, bias_ih, bias_hh}", becomes "<rnn>.{...}_l{k}" in `ours` (returns 1); other names
// are left alone (returns 0).
static int sar_lstm_alias(const char *paddle, char *ours, size_t size) {
    static const char *const rnns[] = {".rnn_encoder.", ".rnn_decoder.", NULL};
    for (int q = 0; rnns[q]; q++) {
        const char *at = strstr(paddle, rnns[q]);
        if (!at || strncmp(paddle, "head.sar_head.", 14) != 0) continue;
        const char *tail = at + strlen(rnns[q]);
        char *end;
        long k = strtol(tail, &end, 10);
        if (end == tail || k < 0 || k > 64 || strncmp(end, ".cell.", 6) != 0) continue;
        const char *what = end + 6;
        if (strcmp(what, "weight_ih") && strcmp(what, "weight_hh") && strcmp(what, "bias_ih") && strcmp(what, "bias_hh"))
            continue;
        snprintf(ours, size, "%.*s%s_l%ld", (int)(tail - paddle), paddle, what, k);
        return 1;
    }
    return 0;
}

static ocr_status_t add_str(char ***arr, int *n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static ocr_status_t add_str(char ***arr, int *n, const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    char **na = realloc(*arr, ((size_t)*n + 1) * sizeof *na);
    if (!na) return oom();
    *arr = na;
    if (!(na[*n] = strdup(buf))) return oom();
    (*n)++;
    return OCR_OK;
}

void ocr_pdparams_report_free(OcrPdLoadReport *r) {
    if (!r) return;
    for (int i = 0; i < r->n_not_loaded; i++) free(r->not_loaded[i]);
    for (int i = 0; i < r->n_missing_names; i++) free(r->missing_names[i]);
    free(r->not_loaded);
    free(r->missing_names);
    memset(r, 0, sizeof *r);
}

static const char *shape_str(int ndim, const int64_t *shape, char *buf, size_t n) {
    size_t u = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < ndim && u < n; d++) u += (size_t)snprintf(buf + u, n - u, "%s%lld", d ? "," : "", (long long)shape[d]);
    if (u < n) snprintf(buf + u, n - u, "]");
    return buf;
}

// Does Paddle tensor t fit our entry p (conv weights as (OC, C/g, KH, KW) against ours)?
static int fits(const OcrParamInfo *p, const OcrPdTensor *t, int *conv) {
    *conv = 0;
    if (p->numel != t->numel) return 0;
    if (p->ndim == 4 && t->ndim == 4) {
        *conv = 1;
        return t->shape[0] == p->shape[0] && t->shape[1] == p->shape[3] && t->shape[2] == p->shape[1] &&
               t->shape[3] == p->shape[2];
    }
    if (p->ndim == 4 && t->ndim == 3 && p->shape[1] == 1) {
        // Paddle's Conv1D (OC, C/g, K) (PP-OCRv6 tiny's guide layer): ours (OC, 1, K, C/g).
        *conv = 1;
        return t->shape[0] == p->shape[0] && t->shape[1] == p->shape[3] && t->shape[2] == p->shape[2];
    }
    if (p->numel == 1) return 1;  // LearnableAffineBlock scalars: [1] on both sides
    if (p->ndim != t->ndim) return 0;
    for (int d = 0; d < p->ndim; d++)
        if (p->shape[d] != t->shape[d]) return 0;
    return 1;
}

ocr_status_t ocr_pdparams_load_into(OcrModel *m, const OcrPdparams *p, OcrPdLoadReport *r) {
    memset(r, 0, sizeof *r);
    OcrParamTable *tabs[2] = {ocr_model_params(m), ocr_model_stats(m)};
    OcrParamTable host[2];
    OCR_TRY(ocr_params_host_copy(tabs[0], &host[0]));
    ocr_status_t st = ocr_params_host_copy(tabs[1], &host[1]);
    if (st != OCR_OK) {
        ocr_params_host_release(&host[0]);
        return st;
    }
    unsigned char *filled[2] = {calloc((size_t)tabs[0]->count + 1, 1), calloc((size_t)tabs[1]->count + 1, 1)};
    if (!filled[0] || !filled[1]) st = oom();
    char ours[512], a[96], b[96];
    for (int i = 0; st == OCR_OK && i < p->count; i++) {
        const OcrPdTensor *t = &p->tensors[i];
        int alias = 0;
        if (ocr_pdparams_map_name(t->name, ours, sizeof ours) == OCR_PD_GUIDANCE &&
            (alias = sar_lstm_alias(t->name, ours, sizeof ours)) >= 0 && ocr_params_find(&host[0], ours) < 0) {
            r->guidance++;
            st = add_str(&r->not_loaded, &r->n_not_loaded, "%s: MultiHead guidance branch, not part of a CTC model", t->name);
            continue;
        }
        int tab = -1, k = -1;
        for (int q = 0; q < 2 && k < 0; q++)
            if ((k = ocr_params_find(&host[q], ours)) >= 0) tab = q;
        // A MultiHead model keeps PaddleOCR's own names (head.ctc_encoder.*, head.ctc_head.*).
        for (int q = 0; q < 2 && k < 0; q++)
            if ((k = ocr_params_find(&host[q], t->name)) >= 0) {
                tab = q;
                snprintf(ours, sizeof ours, "%s", t->name);
            }
        if (k < 0) {
            if (!r->unexpected++) snprintf(r->first_unexpected, sizeof r->first_unexpected, "%s", t->name);
            st = add_str(&r->not_loaded, &r->n_not_loaded, "%s: no such tensor in the model", t->name);
            continue;
        }
        const OcrParamInfo *pi = &host[tab].items[k];
        int conv;
        if (!fits(pi, t, &conv)) {
            r->shape_mismatch++;
            st = add_str(&r->not_loaded, &r->n_not_loaded, "%s: shape %s, the model's %s is %s", t->name,
                         shape_str(t->ndim, t->shape, a, sizeof a), ours, shape_str(pi->ndim, pi->shape, b, sizeof b));
            continue;
        }
        if (filled[tab][k] && (alias > 0 || strncmp(ours, "head.sar_head.", 14) == 0)) {
            // Paddle's nn.LSTM lists each parameter twice (weight_ih_l{k} and {k}.cell.weight_ih):
            // one tensor, so the second entry must repeat the first.
            OcrTensor have = ocr_params_tensor(&host[tab], k);
            int same = 1;
            for (int64_t e = 0; same && e < t->numel; e++) same = ocr_tensor_get_f32(&have, e) == t->f32[e];
            if (same) {
                r->aliases++;
                continue;
            }
            st = add_str(&r->not_loaded, &r->n_not_loaded, "%s: differs from %s (the same LSTM parameter)", t->name, ours);
            r->shape_mismatch++;
            continue;
        }
        if (filled[tab][k]) {
            st = add_str(&r->not_loaded, &r->n_not_loaded, "%s: %s was already loaded from another entry", t->name, ours);
            continue;
        }
        OcrTensor dst = ocr_params_tensor(&host[tab], k);
        if (conv) {
            // A Conv1D's (OC, C/g, K) is the (OC, C/g, 1, K) of a one-row conv.
            int64_t oc = t->shape[0], cg = t->shape[1], kh = t->ndim == 4 ? t->shape[2] : 1, kw = t->shape[t->ndim - 1];
            float *tr = malloc((size_t)t->numel * sizeof(float));
            if (!tr) {
                st = oom();
                break;
            }
            for (int64_t o = 0; o < oc; o++)
                for (int64_t c = 0; c < cg; c++)
                    for (int64_t y = 0; y < kh; y++)
                        for (int64_t x = 0; x < kw; x++)
                            tr[((o * kh + y) * kw + x) * cg + c] = t->f32[((o * cg + c) * kh + y) * kw + x];
            ocr_tensor_from_f32(&dst, tr);
            free(tr);
        } else {
            ocr_tensor_from_f32(&dst, t->f32);
        }
        filled[tab][k] = 1;
        r->loaded++;
        r->values += t->numel;
    }
    r->other = p->nother;
    for (int q = 0; st == OCR_OK && q < 2; q++)
        for (int k = 0; st == OCR_OK && k < tabs[q]->count; k++) {
            if (filled[q][k]) continue;
            if (!r->missing++) snprintf(r->first_missing, sizeof r->first_missing, "%s", tabs[q]->items[k].name);
            st = add_str(&r->missing_names, &r->n_missing_names, "%s", tabs[q]->items[k].name);
        }
    if (st == OCR_OK) {
        ocr_params_upload(tabs[0], host[0].data);
        ocr_params_upload(tabs[1], host[1].data);
    }
    free(filled[0]);
    free(filled[1]);
    ocr_params_host_release(&host[0]);
    ocr_params_host_release(&host[1]);
    if (st != OCR_OK) ocr_pdparams_report_free(r);
    return st;
}

ocr_status_t ocr_pdparams_load_model(OcrModel *m, const char *path, OcrPdLoadReport *rep) {
    memset(rep, 0, sizeof *rep);
    size_t n = strlen(path);
    char *file = malloc(n + 16);
    if (!file) return oom();
    if (n >= 9 && strcmp(path + n - 9, ".pdparams") == 0)
        snprintf(file, n + 16, "%s", path);
    else
        snprintf(file, n + 16, "%s.pdparams", path);
    OcrPdparams *p;
    ocr_status_t st = ocr_pdparams_load(&p, file);
    free(file);
    if (st != OCR_OK) return st;
    // A distillation checkpoint: this network's tensors (its weights prefix), else the student's.
    if (!ocr_pdparams_select_prefix(p, ocr_model_weights_prefix(m))) ocr_pdparams_select_prefix(p, "Student.");
    st = ocr_pdparams_load_into(m, p, rep);
    ocr_pdparams_free(p);
    return st;
}

int ocr_pdparams_select_prefix(OcrPdparams *p, const char *prefix) {
    size_t n = prefix ? strlen(prefix) : 0;
    if (!n) return 0;
    int found = 0;
    for (int i = 0; i < p->count && !found; i++) found = strncmp(p->tensors[i].name, prefix, n) == 0;
    if (!found) return 0;
    int k = 0;
    for (int i = 0; i < p->count; i++) {
        OcrPdTensor *t = &p->tensors[i];
        if (strncmp(t->name, prefix, n) != 0) {
            free(t->name);
            free(t->f32);
            continue;
        }
        memmove(t->name, t->name + n, strlen(t->name + n) + 1);
        p->tensors[k++] = *t;
    }
    p->count = k;
    return k;
}

// ---- the architecture a checkpoint holds ----------------------------------------------------------

static const OcrPdTensor *findf(const OcrPdparams *p, char *buf, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static const OcrPdTensor *findf(const OcrPdparams *p, char *buf, size_t n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, n, fmt, ap);
    va_end(ap);
    return ocr_pdparams_find(p, buf);
}

ocr_status_t ocr_pdparams_arch(const OcrPdparams *p, OcrArch *a, char *desc, size_t size) {
    memset(a, 0, sizeof *a);
    snprintf(a->algorithm, sizeof a->algorithm, "SVTR_LCNet");
    a->img_h = 48;
    a->img_w = 320;
    a->seed = 1024;
    a->fc_decay = 1e-5;
    char k[256], bb[96], neck[128] = "Im2Seq neck";
    const OcrPdTensor *t;
    const char *version;
    if ((t = ocr_pdparams_find(p, "backbone.conv1._conv.weight"))) {
        version = "PP-OCRv3";
        a->backbone = OCR_BACKBONE_MV1E;
        a->in_channels = t->ndim == 4 ? (int)t->shape[1] : 0;
        if (t->ndim != 4 || !t->numel) return ocr_set_error(OCR_ERR_FORMAT, "backbone.conv1._conv.weight is not a conv weight");
        const OcrPdTensor *last = findf(p, k, sizeof k, "backbone.block_list.12._pointwise_conv._conv.weight");
        if (!last || last->ndim != 4 || last->shape[0] % 8 || last->numel == 0)
            return ocr_set_error(OCR_ERR_FORMAT, "MobileNetV1Enhance checkpoint without a usable %s", k);
        a->mv1e.scale = last->shape[0] / 1024.0;
        if (a->mv1e.scale < 0.125 || a->mv1e.scale > 4.0)  // Architecture.Backbone.scale's range
            return ocr_set_error(OCR_ERR_FORMAT, "%s has %lld channels: MobileNetV1Enhance scale %g is outside [0.125, 4]", k,
                                 (long long)last->shape[0], a->mv1e.scale);
        a->mv1e.last_conv_stride[0] = 1;
        a->mv1e.last_conv_stride[1] = 2;
        a->mv1e.last_pool_avg = 1;
        a->mv1e.last_pool_kernel[0] = a->mv1e.last_pool_kernel[1] = 2;
        snprintf(bb, sizeof bb, "MobileNetV1Enhance %g", a->mv1e.scale);
    } else if ((t = ocr_pdparams_find(p, "backbone.conv1.conv.weight")) &&
               (ocr_pdparams_find(p, "backbone.blocks2.0.dw_conv.conv_kxk.0.conv.weight") ||
                ocr_pdparams_find(p, "backbone.blocks2.0.dw_conv.reparam_conv.weight"))) {
        version = "PP-OCRv4";
        a->backbone = OCR_BACKBONE_LCNETV3;
        a->in_channels = t->ndim == 4 ? (int)t->shape[1] : 0;
        if (t->ndim != 4 || !t->numel) return ocr_set_error(OCR_ERR_FORMAT, "backbone.conv1.conv.weight is not a conv weight");
        LcnetSpec *s = &a->lcnet;
        s->deploy = ocr_pdparams_find(p, "backbone.blocks2.0.dw_conv.reparam_conv.weight") != NULL;
        s->conv_kxk_num = 4;
        if (!s->deploy) {
            int n = 0;
            while (n <= OCR_REP_MAX_BRANCHES && findf(p, k, sizeof k, "backbone.blocks2.0.dw_conv.conv_kxk.%d.conv.weight", n)) n++;
            if (n > OCR_REP_MAX_BRANCHES)
                return ocr_set_error(OCR_ERR_UNSUPPORTED, "PPLCNetV3 with more than %d kxk branches per rep layer", OCR_REP_MAX_BRANCHES);
            s->conv_kxk_num = n;
        }
        s->lab_lr = 0.1;
        for (int i = 0; i < 6; i++) s->lr_mult_list[i] = 1.0;
        // The block outputs (stage, count) as PPLCNetV3's NET_CONFIG: base channels × scale.
        static const int stages[5] = {1, 2, 2, 5, 4}, base[14] = {32, 64, 64, 128, 128, 256, 256, 256, 256, 256, 512, 512, 512, 512};
        int64_t outs[14];
        int b = 0;
        for (int st = 0; st < 5; st++)
            for (int i = 0; i < stages[st]; i++, b++) {
                const OcrPdTensor *w = s->deploy ? findf(p, k, sizeof k, "backbone.blocks%d.%d.pw_conv.reparam_conv.weight", st + 2, i)
                                                 : findf(p, k, sizeof k, "backbone.blocks%d.%d.pw_conv.conv_kxk.0.conv.weight", st + 2, i);
                if (!w || w->ndim != 4) return ocr_set_error(OCR_ERR_FORMAT, "PPLCNetV3 checkpoint without %s", k);
                outs[b] = w->shape[0];
            }
        static const double common[] = {0.95, 0.5, 0.35, 0.75, 1.0, 1.5, 2.0};
        s->scale = 0;
        for (int pass = 0; pass < 2 && s->scale == 0; pass++) {
            int n = pass ? 400 : (int)(sizeof common / sizeof *common);
            for (int q = 0; q < n && s->scale == 0; q++) {
                double sc = pass ? (q + 1) / 100.0 : common[q];
                int ok = ocr_lcnet_make_divisible(16 * sc) == t->shape[0];
                for (int j = 0; ok && j < 14; j++) ok = ocr_lcnet_make_divisible(base[j] * sc) == outs[j];
                if (ok) s->scale = sc;
            }
        }
        if (s->scale == 0)
            return ocr_set_error(OCR_ERR_FORMAT, "no PPLCNetV3 scale gives these channels (stem %lld, last block %lld)",
                                 (long long)t->shape[0], (long long)outs[13]);
        snprintf(bb, sizeof bb, "PPLCNetV3 %g (%s)", s->scale, s->deploy ? "deploy-fused" : "training form, rep branches");
    } else {
        return ocr_set_error(OCR_ERR_FORMAT,
                             "neither backbone.conv1._conv.weight (MobileNetV1Enhance) nor backbone.conv1.conv.weight with "
                             "blocks2 (PPLCNetV3): not a PP-OCRv3/v4 recognizer checkpoint (first key: %s)",
                             p->count ? p->tensors[0].name : "none");
    }
    const char *np = ocr_pdparams_find(p, "neck.encoder.conv1.conv.weight") ? "neck.encoder"
                     : ocr_pdparams_find(p, "head.ctc_encoder.encoder.conv1.conv.weight") ? "head.ctc_encoder.encoder"
                                                                                       : NULL;
    if (np) {
        a->neck_svtr = 1;
        SvtrNeckSpec *n = &a->neck;
        const OcrPdTensor *c1 = findf(p, k, sizeof k, "%s.conv1.conv.weight", np);
        const OcrPdTensor *c2 = findf(p, k, sizeof k, "%s.conv2.conv.weight", np);
        const OcrPdTensor *cx = findf(p, k, sizeof k, "%s.conv1x1.conv.weight", np);
        const OcrPdTensor *fc1 = findf(p, k, sizeof k, "%s.svtr_block.0.mlp.fc1.weight", np);
        if (!c1 || !c2 || !cx || !fc1 || c1->ndim != 4 || c2->ndim != 4 || cx->ndim != 4 || fc1->ndim != 2 || !c1->numel ||
            !c2->numel || !cx->numel || !fc1->numel)
            return ocr_set_error(OCR_ERR_FORMAT, "an SVTR neck (%s) without conv1, conv2, conv1x1 and svtr_block.0", np);
        if (c1->shape[2] > 15 || c1->shape[3] > 15)
            return ocr_set_error(OCR_ERR_FORMAT, "%s.conv1 has a %lldx%lld kernel", np, (long long)c1->shape[2], (long long)c1->shape[3]);
        n->dims = (int)cx->shape[0];
        n->hidden = (int)c2->shape[0];
        n->kernel[0] = (int)c1->shape[2];
        n->kernel[1] = (int)c1->shape[3];
        while (n->depth <= 64 && findf(p, k, sizeof k, "%s.svtr_block.%d.norm1.weight", np, n->depth)) n->depth++;
        if (n->depth > 64) return ocr_set_error(OCR_ERR_UNSUPPORTED, "an SVTR neck of more than 64 blocks");
        n->heads = 8;
        n->mlp_ratio = (float)fc1->shape[1] / (float)n->hidden;
        n->drop = n->attn_drop = 0.1f;
        if (n->hidden % n->heads)
            return ocr_set_error(OCR_ERR_FORMAT, "SVTR neck hidden dims %d are not divisible by PaddleOCR's 8 heads", n->hidden);
        snprintf(neck, sizeof neck, "SVTR neck (dims %d, hidden %d, kernel %dx%d, depth %d)", n->dims, n->hidden, n->kernel[0],
                 n->kernel[1], n->depth);
    }
    if (a->in_channels < 1 || a->in_channels > 4)
        return ocr_set_error(OCR_ERR_FORMAT, "the stem convolution reads %d channels (1 to 4 are built)", a->in_channels);
    const OcrPdTensor *fc = ocr_pdparams_find(p, "head.fc.weight");
    if (!fc) fc = ocr_pdparams_find(p, "head.ctc_head.fc.weight");
    if (!fc) {
        if (ocr_pdparams_find(p, "head.fc1.weight") || ocr_pdparams_find(p, "head.ctc_head.fc1.weight"))
            return ocr_set_error(OCR_ERR_UNSUPPORTED, "a CTC head with mid_channels (head.fc1/fc2) is not supported");
        return ocr_set_error(OCR_ERR_FORMAT, "no CTC head (head.fc.weight or head.ctc_head.fc.weight)");
    }
    if (fc->ndim != 2 || fc->shape[1] < 2 || fc->numel == 0)
        return ocr_set_error(OCR_ERR_FORMAT, "%s is not an (in, classes) matrix", fc->name);
    a->num_classes = (int)fc->shape[1];
    snprintf(desc, size, "%s %s: %s + %s + CTC head (%d classes)%s", version,
             a->num_classes == 97 ? "en" : a->num_classes == 6625 ? "ch" : "other", bb, neck, a->num_classes,
             ocr_pdparams_find(p, "head.ctc_head.fc.weight") ? ", CTC branch of a MultiHead checkpoint" : "");
    return OCR_OK;
}
