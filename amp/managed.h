// What the AMP engine manages, as its owner describes it: op instances with a type and a name
// (the policy's lists match types, Global.amp_fp32_layers matches names), and parameters as
// named tensor views with an owning op. The engine never sees a network or the owner's structs:
// the owner (models/amp_view.h for a model's tables) fills in the callbacks, and the dependency
// runs one way (core <- kernels <- amp <- models).
//
// The callbacks read the owner's current state at every call (a table moved to a GPU after
// attach is seen there); ctx holds the owner's pointers, so the description can be copied.
#ifndef OCR_AMP_MANAGED_H
#define OCR_AMP_MANAGED_H

#include <stddef.h>

#include "core/device.h"
#include "core/error.h"
#include "core/tensor.h"

typedef struct AmpManaged AmpManaged;

struct AmpManaged {
    void *ctx[4];  // the owner's
    int n_ops;     // op instances, in build (= forward) order: op i's input is op i - 1's output
    int n_params;

    const char *(*op_name)(const AmpManaged *m, int op);  // "backbone.conv1.conv"
    const char *(*op_type)(const AmpManaged *m, int op);  // "conv2d", "batchnorm", ...
    // The engine assigns every op its compute dtype once, at attach.
    void (*set_op_dtype)(const AmpManaged *m, int op, ocr_dtype_t dtype);
    // The op's output of the last pass into *out (data NULL when the pass did not keep it);
    // returns 0 when the op did not run in that pass.
    int (*op_output)(const AmpManaged *m, int op, OcrTensor *out);

    const char *(*param_name)(const AmpManaged *m, int i);
    // The owning op, or -1 when the owner does not know it (the engine then goes by the names:
    // amp_param_owner).
    int (*param_op)(const AmpManaged *m, int i);
    // 1 for what may become low precision with its op (weights, biases, embeddings); 0 for what
    // stays f32 under every level (BN/LN parameters, LearnableAffineBlock scalars).
    int (*param_lowerable)(const AmpManaged *m, int i);
    OcrTensor (*param)(const AmpManaged *m, int i);  // view of the value
    OcrTensor (*grad)(const AmpManaged *m, int i);   // view of its gradient (data NULL: none yet)
    // O2: lays the parameters out again in these dtypes, each value rounded to nearest from the
    // current f32 one, and drops the gradients (the owner allocates them again at the new sizes).
    ocr_status_t (*lower)(const AmpManaged *m, const ocr_dtype_t *dtypes);
    // The BN running statistics as one buffer (snapshot before a step, restored when it
    // overflows): NULL when there are none.
    void *(*stats)(const AmpManaged *m, size_t *bytes, ocr_device_t *device);
};

#endif
