// Parameter tables: every trainable tensor of a model lives in ONE buffer (tracked as
// OCR_MEM_PARAMS) described by a table of names, shapes, dtypes and byte offsets; the
// gradients live in a second buffer (OCR_MEM_GRADS) with the same offsets. BatchNorm
// running statistics use the same table type in a separate, non-trainable buffer.
//
// Names follow PaddleOCR's state-dict names ("backbone.conv1.conv.weight",
// "neck.encoder.svtr_block.0.mixer.qkv.weight", "head.fc.weight") so weights map by name.
// Layouts are ours: convolution weights (OC, KH, KW, C/groups), linear weights (IN, OUT).
//
// Each entry also carries what the optimizer needs (PaddleOCR's per-parameter ParamAttr):
// a learning-rate multiplier and the weight-decay rule (the optimizer's global L2, none, or
// a fixed coefficient such as the CTC head's fc_decay).
#ifndef OCR_MODELS_PARAMS_H
#define OCR_MODELS_PARAMS_H

#include <stdint.h>

#include "core/error.h"
#include "core/tensor.h"

typedef enum {
    OCR_INIT_CONST = 0,     // a
    OCR_INIT_NORMAL,        // mean a, std b
    OCR_INIT_UNIFORM,       // [a, b)
    OCR_INIT_TRUNC_NORMAL,  // mean a, std b, redrawn outside a ± 2b
} ocr_init_kind_t;

typedef struct {
    ocr_init_kind_t kind;
    float a, b;
} OcrInit;

typedef enum {
    OCR_DECAY_GLOBAL = 0,  // the optimizer's coefficient (Optimizer.regularizer.factor)
    OCR_DECAY_NONE,        // L2Decay(0.0) in PaddleOCR
    OCR_DECAY_FIXED,       // this entry's `decay` (e.g. CTC fc_decay 1e-5)
} ocr_decay_kind_t;

typedef enum {
    OCR_ROLE_WEIGHT = 0,  // conv / linear weight
    OCR_ROLE_BIAS,
    OCR_ROLE_NORM,        // BN / LN gamma and beta (kept in fp32 under every AMP level)
    OCR_ROLE_SCALAR,      // LearnableAffineBlock scale / bias (fp32 scalars)
    OCR_ROLE_EMBED,       // positional embedding
    OCR_ROLE_STAT,        // BN running mean / variance (buffers, never trained)
} ocr_param_role_t;

typedef struct {
    char *name;
    int ndim;
    int64_t shape[OCR_MAX_DIMS];
    int64_t numel;
    ocr_dtype_t dtype;
    size_t offset;  // bytes from the start of the buffer (multiple of OCR_PARAM_ALIGN)
    OcrInit init;
    float lr_mult;
    ocr_decay_kind_t decay_kind;
    float decay;  // coefficient for OCR_DECAY_FIXED
    ocr_param_role_t role;
    int op;  // index of the owning op in the model's op table (nn.h OcrOpTable); -1: none
             // (valid when the table's ops_recorded is set: a zeroed entry is not "op 0")
    int frozen;  // fine-tuning (Global.freeze_params): no update, no optimizer state, no decay
} OcrParamInfo;

#define OCR_PARAM_ALIGN 64

typedef struct {
    OcrParamInfo *items;
    int count, cap;
    size_t bytes;   // buffer size, valid after ocr_params_layout
    int64_t numel;  // total elements
    void *data;     // the buffer (category `category`)
    void *grad;     // gradients (OCR_MEM_GRADS), NULL until ocr_params_alloc_grads
    ocr_device_t device;
    ocr_mem_category_t category;
    int ops_recorded;  // the model's builder filled every entry's `op` (hand-made tables: 0)
} OcrParamTable;

void ocr_params_init_table(OcrParamTable *t, ocr_mem_category_t category);
// Registers an entry (f32); returns its index. Names must be unique (asserted).
int ocr_params_add(OcrParamTable *t, const char *name, int ndim, const int64_t *shape, OcrInit init,
                   ocr_param_role_t role);
int ocr_params_find(const OcrParamTable *t, const char *name);  // -1 when absent
// Computes offsets from the entries' dtypes (call again after changing dtypes).
void ocr_params_layout(OcrParamTable *t);
// Allocates the buffer on the CPU (after layout) and fills every entry from its init rule
// with the seeded Philox generator: one stream per entry, derived from its name, so the
// values do not depend on the order the network was built in.
ocr_status_t ocr_params_alloc(OcrParamTable *t, uint64_t seed);
ocr_status_t ocr_params_alloc_grads(OcrParamTable *t);
void ocr_params_zero_grads(OcrParamTable *t);
void ocr_params_free(OcrParamTable *t);

// Moves the buffers (parameters, and gradients when allocated) to `device`, keeping their
// categories; a no-op when they are there already. Everything later allocated for the table
// (gradients) goes to that device too. Waits for the copies.
ocr_status_t ocr_params_to_device(OcrParamTable *t, ocr_device_t device);
// Host access to a table on any device: a copy of the table whose `data` is a host copy of the
// parameter buffer (plain malloc, device CPU, no gradients; items are shared with t, so it
// must not outlive t or be passed to ocr_params_free). Release it with ocr_params_host_release.
ocr_status_t ocr_params_host_copy(const OcrParamTable *t, OcrParamTable *host);
void ocr_params_host_release(OcrParamTable *host);
// Writes a host image of the whole buffer (t->bytes, as ocr_params_host_copy made it) back into
// t's buffer on its device.
void ocr_params_upload(OcrParamTable *t, const void *host_data);

// Re-initialises one entry from its rule (used by tests and by init).
void ocr_params_init_entry(OcrParamTable *t, int i, uint64_t seed);
// Views into the buffers.
OcrTensor ocr_params_tensor(const OcrParamTable *t, int i);
OcrTensor ocr_params_grad(const OcrParamTable *t, int i);
// The Philox stream of a name (FNV-1a 64).
uint64_t ocr_params_stream(const char *name);

#endif
