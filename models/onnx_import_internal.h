// The ONNX importer's shared machinery (models/onnx_import.c), for the walkers of other network
// families (models/onnx_import_lcnetv4.c): the graph as a data-flow index, the layer patterns it
// recognises and the pairing of what they found with the network's parameters. Internal to
// models/: nothing outside the importer includes it.
#ifndef OCR_MODELS_ONNX_IMPORT_INTERNAL_H
#define OCR_MODELS_ONNX_IMPORT_INTERNAL_H

#include "models/onnx_import.h"

// ---- the graph as a data-flow index (see onnx_import.c) ---------------------------------------------
typedef struct {
    const OcrOnnxModel *m;
    const char *file;
    int nt, tcap;            // interned tensor names
    const char **tname;
    int *canon;              // id -> the id it aliases (itself when not an alias)
    int *producer;           // id -> node index (-1: graph input / constant)
    const OcrOnnxTensor **konst;
    int hcap;
    int *hash;               // open addressing over ids (-1 empty)
    int **in, **out;         // per node: canonical input ids (-1 for "") / output ids
    unsigned char *skip;     // Constant / Identity / Dropout: never a consumer
    unsigned char *used;     // nodes the walk consumed
    int *rstart, *readers;   // CSR: the nodes reading tensor t are readers[rstart[t] .. rstart[t + 1])
    int nindexed;            // tensors in the index (names interned later have no readers)
    OcrOnnxTensor *folded;   // constants computed from constants (Reshape / Unsqueeze / Transpose of a weight)
    const OcrOnnxTensor **folded_src;  // the graph constant each was computed from (for the unused listing)
    int nfolded, fcap;
    void **owned;            // data the folds allocated (a transposed weight, a Constant's value_floats)
    int nowned;
} G;

// The nodes reading t, in node order.
static inline int rbegin(const G *g, int t) { return t >= 0 && t < g->nindexed ? g->rstart[t] : 0; }
static inline int rend(const G *g, int t) { return t >= 0 && t < g->nindexed ? g->rstart[t + 1] : 0; }
#define FOR_READERS(g, t, i) for (int r_ = rbegin(g, t), i = 0; r_ < rend(g, t) && ((i = (g)->readers[r_]), 1); r_++)

static inline const OcrOnnxNode *N(const G *g, int i) { return &g->m->nodes[i]; }
static inline int O(const G *g, int i) { return g->out[i][0] >= 0 ? g->canon[g->out[i][0]] : -1; }  // a node's first output
static inline const char *TN(const G *g, int t) { return t >= 0 ? g->tname[t] : "(none)"; }
static inline const OcrOnnxTensor *K(const G *g, int t) { return t >= 0 ? g->konst[t] : NULL; }

void oi_g_build(G *g, const OcrOnnxModel *m, const char *file);
void oi_g_free(G *g);
int oi_intern(G *g, const char *name);
// The first node of type `op` (NULL: any) reading t at input `slot` (-1: any).
int oi_consumer(const G *g, int t, const char *op, int slot);
int oi_data_consumers(const G *g, int t);          // readers of t, Shape nodes aside
int oi_other_input(const G *g, int n, int t);      // the other input of a two-input node reading t
int oi_scalar_of(const G *g, int t, float *v);     // t is a one-element float constant
int64_t oi_attr_i(const OcrOnnxNode *n, const char *name, int64_t def);
float oi_attr_f(const OcrOnnxNode *n, const char *name, float def);
void oi_attr_pair(const OcrOnnxNode *n, const char *name, int def, int out[2]);
void oi_use(G *g, int n);                          // the walk consumed node n
// OCR_ERR_FORMAT "<file>: node #i Op (name): ..." / "<file>: after tensor t (from node ...): ...".
ocr_status_t oi_fail_node(const G *g, int i, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
ocr_status_t oi_fail_tensor(const G *g, int t, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

// ---- layer patterns -----------------------------------------------------------------------------------
// The activations a unit may end in (ACT_GELU: PPLCNetV4's, erf form or the Gelu op).
enum { ACT_NONE = 0, ACT_HSWISH, ACT_SWISH, ACT_RELU, ACT_HSIG, ACT_GELU };
extern const char *const oi_act_names[];

typedef struct {
    int conv;  // node
    const OcrOnnxTensor *w, *b;
    int stride[2], pad[4], group, dil[2];
    int bn;  // node or -1
    const OcrOnnxTensor *bnt[4];
    float bn_eps;
    const OcrOnnxTensor *lab[2], *alab[2];  // affine after the conv/BN, after the activation
    int lab_node, alab_node;
    int act;
    float hs_alpha, hs_beta;
    int act_node;
    int out;
} Unit;

typedef struct {
    int node;
    const OcrOnnxTensor *w, *b;
    int out;
} Lin;

typedef struct {
    int node;  // the first node of the pattern
    const OcrOnnxTensor *g, *b;
    float eps;
    int out;
} Ln;

typedef struct {
    Ln ln1, ln2;
    Lin qkv, proj, fc1, fc2;
    float scale;
    int scale_node, softmax_node, act;
} Blk;

// The Conv node `conv` is depthwise: a constant weight (C, 1, kh, kw) with group C (0 for -1).
int oi_is_depthwise(const G *g, int conv);
// Pads of a pool node (kernel k, strides s) into pad[4] (top, left, bottom, right): explicit, or
// auto_pad SAME_UPPER / SAME_LOWER at stride 1 (k - 1 in all). 0: a SAME pad that depends on the
// input size (stride > 1) or an unknown auto_pad.
int oi_pool_pads(const OcrOnnxNode *nd, const int k[2], const int s[2], int pad[4]);

// conv [+ bias] [+ BN] [+ affine] [+ activation] [+ affine] reading t (the only Conv reading it),
// or starting at the Conv node `conv` (parallel branches allowed).
ocr_status_t oi_match_unit(G *g, int t, Unit *u, const char *what);
ocr_status_t oi_match_unit_at(G *g, int conv, Unit *u, const char *what);
int oi_match_act(G *g, int t, int *act, int *node, float *alpha, float *beta);
int oi_follow_shape_ops(G *g, int t);
ocr_status_t oi_match_linear(G *g, int t, Lin *l, const char *what);
ocr_status_t oi_match_ln(G *g, int t, Ln *l);
int oi_residual_add(G *g, int t, int other);
ocr_status_t oi_match_attention(G *g, Blk *b);
ocr_status_t oi_expect_unit(const G *g, const Unit *u, const char *what, int want_bn, int want_bias, int want_lab, int act,
                            int want_alab);

// ---- pairing with the network ----------------------------------------------------------------------------
typedef struct {
    const G *g;
    OcrModel *model;
    OcrParamTable *params, *stats;
    int loaded;
    int64_t values;
    const OcrOnnxTensor **taken;  // the constants loaded (one per tensor filled)
} Ctx;

ocr_status_t oi_put(Ctx *c, OcrParamTable *tab, const char *name, const OcrOnnxTensor *src, const float *data, int node);
ocr_status_t oi_put_conv(Ctx *c, const OcrOpInfo *o, const Unit *u);
ocr_status_t oi_put_pair(Ctx *c, const OcrOpInfo *o, const OcrOnnxTensor *w, const OcrOnnxTensor *b, const char *wn,
                         const char *bnm, int node);
// Builds the network of `arch` into c->model and sets c->params, c->stats and c->taken whenever a
// model was built (the caller frees it, refused or not).
ocr_status_t oi_ctx_create(Ctx *c, const OcrArch *arch);

// The image input (to *x): the graph input that is not an initializer.
ocr_status_t oi_image_input(G *g, int *x);
// SVTR blocks from h until a LayerNorm no linear layer reads (the neck's final norm, to `norm`);
// at most `max` blocks, *depth counts them.
ocr_status_t oi_walk_svtr(G *g, int h, Blk *svtr, int max, int *depth, Ln *norm);
// After the head's last linear layer (output t): an optional Softmax over the classes (its node to
// *softmax_node, -1 when none), then the graph's one output (to *output).
ocr_status_t oi_walk_output(G *g, int t, int *softmax_node, int *output);

// A deploy-form network (PP-OCRv5 server, PP-OCRv6) as walked: what the pairing needs of it.
#define OI_MAX_SVTR 8
#define OI_MAX_HEAD 2
typedef struct {
    const Unit *units;  // in the network's order of convolutions
    int nunits;
    const Blk *svtr;
    int depth;
    const Ln *norm;     // the neck's final LayerNorm (NULL: the network has none)
    const Lin *head;    // the head's linear layers, in order
    int nhead;
    int output;         // the graph output (named when the network has more than the graph)
    const char *backbone;  // named when the network has an affine block (deploy form has none)
    int heads, attn_width;  // the attention's head count and the width they split
} OiDeployNet;
// Walks the network's op table in order, pairs each conv2d / batchnorm / layernorm / linear with
// the walked units, norms and linear layers, fills their tensors and checks the attention scales;
// a 2x2 conv after a "pad" layer (Paddle's SAME) must pad 0 before and 1 after in the graph.
// Anything on one side without a counterpart is refused, named at its node.
ocr_status_t oi_pair_deploy(Ctx *c, const OiDeployNet *p);

uint64_t oi_dict_fnv(const char *dictionary);
int oi_count_lines(const char *s);
// The variant line's dictionary note: "; dictionary not given", "; dictionary NAME (N lines)" when
// the text is the one whose FNV-1a hash is want_fnv, else "; a dictionary of N lines that is not NAME".
void oi_dict_note(char *buf, size_t cap, const char *dict, uint64_t want_fnv, const char *want_name);

// ---- PPLCNetV4 (PP-OCRv6), models/onnx_import_lcnetv4.c ------------------------------------------------------
// The graph computes GELU (Erf or Gelu nodes): a PPLCNetV4 recognizer, not a PP-OCRv3/v4/v5 one.
int oi_is_lcnetv4(const G *g);
// Walks it, builds the matching deploy-form network into c->model (c->params, c->stats, c->taken
// set) and fills every tensor; `arch` and `info` receive what was recognised.
ocr_status_t oi_import_lcnetv4(G *g, const char *dict, Ctx *c, OcrArch *arch, OcrOnnxImportInfo *info);

// ---- PPHGNetV2_B4 (PP-OCRv5 server), models/onnx_import_hgnet.c ----------------------------------------------
// The graph has StemBlock's stride-1 MaxPool and a Concat of more than two tensors (HG blocks): a
// PP-OCRv5 server recognizer (asked after oi_is_lcnetv4, whose StemBlock has the same pool).
int oi_is_hgnet(const G *g);
// Walks it, builds configs/rec_ppocrv5_server.json's CTC branch in deploy form (CTC-only names) into
// c->model and fills every tensor; `arch` and `info` receive what was recognised.
ocr_status_t oi_import_hgnet(G *g, const char *dict, Ctx *c, OcrArch *arch, OcrOnnxImportInfo *info);

#endif
