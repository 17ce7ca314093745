#include "distributed/grad_sync.h"

#include <stdlib.h>
#include <string.h>

#include "core/timer.h"

ocr_status_t grad_sync_init(GradSync *g, OcrDist *dist, OcrModel *m, int64_t bucket_bytes) {
    memset(g, 0, sizeof *g);
    if (bucket_bytes < 1)
        return ocr_set_error(OCR_ERR_INVALID_ARG, "grad sync: bucket of %lld bytes", (long long)bucket_bytes);
    g->dist = dist;
    g->m = m;
    g->world = ocr_dist_world_size(dist);
    OcrParamTable *p = ocr_model_params(m);
    OCR_TRY(ocr_params_alloc_grads(p));
    int n = p->count;
    const OcrOpTable *ops = ocr_model_ops(m);
    g->n_ops = ops->count;
    g->buckets = calloc((size_t)(n ? n : 1), sizeof *g->buckets);
    g->param_bucket = malloc((size_t)(n ? n : 1) * sizeof *g->param_bucket);
    g->op_param_start = calloc((size_t)g->n_ops + 2, sizeof *g->op_param_start);
    g->op_params = malloc((size_t)(n ? n : 1) * sizeof *g->op_params);
    if (!g->buckets || !g->param_bucket || !g->op_param_start || !g->op_params) {
        grad_sync_free(g);
        return ocr_set_error(OCR_ERR_OOM, "out of host memory");
    }
    // Buckets from the end of the table (the backward reaches the head's parameters first).
    GradBucket *cur = NULL;
    char *prev_data = NULL;
    for (int i = n - 1; i >= 0; i--) {
        OcrTensor t = ocr_params_grad(p, i);
        int64_t bytes = ocr_tensor_numel(&t) * (int64_t)ocr_dtype_size(t.dtype);
        if (prev_data && (char *)t.data + bytes > prev_data) {
            grad_sync_free(g);
            return ocr_set_error(OCR_ERR_INTERNAL, "grad sync: parameter %d's gradient is not below parameter %d's", i,
                                 i + 1);
        }
        // The current bucket's bytes if this parameter joined it (the padding between included).
        int64_t span = 0;
        if (cur) {
            char *end = (char *)cur->data + cur->count * (int64_t)ocr_dtype_size(cur->dtype);
            span = (int64_t)(end - (char *)t.data);
        }
        if (!cur || t.dtype != cur->dtype || span > bucket_bytes) {
            cur = &g->buckets[g->n_buckets++];
            cur->last = i;
            cur->dtype = t.dtype;
            cur->data = t.data;
            cur->count = ocr_tensor_numel(&t);
        } else {
            cur->count = span / (int64_t)ocr_dtype_size(t.dtype);
            cur->data = t.data;
        }
        cur->first = i;
        cur->n_params++;
        g->param_bucket[i] = (int)(cur - g->buckets);
        prev_data = t.data;
    }
    // op -> parameters (counting sort by op; parameters without a recorded op belong to none).
    for (int i = 0; i < n; i++) {
        int op = p->ops_recorded ? p->items[i].op : -1;
        if (op >= 0 && op < g->n_ops) g->op_param_start[op + 1]++;
    }
    for (int o = 0; o < g->n_ops; o++) g->op_param_start[o + 1] += g->op_param_start[o];
    int *fill = calloc((size_t)g->n_ops + 1, sizeof *fill);
    if (!fill) {
        grad_sync_free(g);
        return ocr_set_error(OCR_ERR_OOM, "out of host memory");
    }
    for (int i = 0; i < n; i++) {
        int op = p->ops_recorded ? p->items[i].op : -1;
        if (op >= 0 && op < g->n_ops) g->op_params[g->op_param_start[op] + fill[op]++] = i;
    }
    free(fill);
    return OCR_OK;
}

void grad_sync_free(GradSync *g) {
    if (g->m) ocr_model_set_grad_ready_hook(g->m, NULL, NULL);
    free(g->buckets);
    free(g->param_bucket);
    free(g->op_param_start);
    free(g->op_params);
    memset(g, 0, sizeof *g);
}

static void start_bucket(GradSync *g, GradBucket *b) {
    if (b->started || g->error != OCR_OK) return;
    char what[96];
    OcrParamTable *p = ocr_model_params(g->m);
    snprintf(what, sizeof what, "gradient bucket %d of %d (from %.28s)", (int)(b - g->buckets), g->n_buckets,
             p->items[b->first].name);
    b->started = 1;
    b->t_start = ocr_now_seconds();
    if (g->started_in_order++ == 0) g->t_first_start = b->t_start;
    g->error = ocr_dist_allreduce_start(g->dist, b->data, b->count, b->dtype, what, &b->req);
}

static void on_op_done(void *user, int op) {
    GradSync *g = user;
    if (op < 0 || op >= g->n_ops) return;
    // Highest parameter first: an op whose parameters span buckets starts them in bucket order.
    for (int k = g->op_param_start[op + 1] - 1; k >= g->op_param_start[op]; k--) {
        GradBucket *b = &g->buckets[g->param_bucket[g->op_params[k]]];
        if (++b->ready == b->n_params) start_bucket(g, b);
    }
    // MPI moves a started collective forward only inside MPI calls: give it a turn per layer.
    if (g->started_in_order > 0 && g->error == OCR_OK) {
        int all;
        g->error = ocr_dist_progress(g->dist, &all);
        double now = ocr_now_seconds();
        for (int i = 0; i < g->n_buckets; i++) {
            GradBucket *b = &g->buckets[i];
            if (b->started && b->t_done == 0 && ocr_dist_test(g->dist, &b->req)) b->t_done = now;
        }
    }
}

void grad_sync_begin(GradSync *g) {
    for (int i = 0; i < g->n_buckets; i++) {
        GradBucket *b = &g->buckets[i];
        b->ready = 0;
        b->started = 0;
        b->t_start = b->t_done = 0;
        b->req.slot = -1;
    }
    g->started_in_order = 0;
    g->error = OCR_OK;
    g->t_backward_start = ocr_now_seconds();
    ocr_model_set_grad_ready_hook(g->m, on_op_done, g);
}

ocr_status_t grad_sync_finish(GradSync *g) {
    ocr_model_set_grad_ready_hook(g->m, NULL, NULL);
    double t_end = ocr_now_seconds();
    g->stats.early_buckets += g->started_in_order;
    // Whatever no op reported starts now, in bucket order (the same on every rank).
    for (int i = 0; i < g->n_buckets; i++) start_bucket(g, &g->buckets[i]);
    if (g->error != OCR_OK) return g->error;
    for (int i = 0; i < g->n_buckets; i++) {
        GradBucket *b = &g->buckets[i];
        OCR_TRY(ocr_dist_wait(g->dist, &b->req));
        if (b->t_done == 0) b->t_done = ocr_now_seconds();
        g->stats.bytes += b->count * (int64_t)ocr_dtype_size(b->dtype);
        g->stats.calls++;
    }
    double first = g->n_buckets ? g->t_first_start : t_end;
    double all_done = 0;
    for (int i = 0; i < g->n_buckets; i++)
        if (g->buckets[i].t_done > all_done) all_done = g->buckets[i].t_done;
    g->stats.steps++;
    g->stats.backward_seconds += t_end - g->t_backward_start;
    g->stats.comm_seconds += all_done > first ? all_done - first : 0;
    g->stats.exposed_seconds += all_done > t_end ? all_done - t_end : 0;
    return OCR_OK;
}

int64_t grad_sync_total_bytes(const GradSync *g) {
    int64_t s = 0;
    for (int i = 0; i < g->n_buckets; i++) s += g->buckets[i].count * (int64_t)ocr_dtype_size(g->buckets[i].dtype);
    return s;
}
