// bench_dist_plan: the "on paper" data-parallel plan of a network (docs/DISTRIBUTED.md): its
// gradient bytes per step (FP32 and AMP-O2), the buckets they form in backward order, when each
// bucket is complete during the backward, and the link bandwidth that hides the all-reduce
// behind the backward on G GPUs per node x N nodes.
//
//   bench_dist_plan -c configs/rec_ppocrv4_ch.json [--batch 384] [--tflops 100] [--bucket-mb 25]
//                   [--gpus-per-node 8] [--height 48] [--width 320] [--latency-us 20 50]
//                   [-o Key.path=value ...]
//
// Gradient sizes are the model's own parameter table. Backward time per op is derived: twice
// the op's forward FLOPs (the planner's count at this input size) at the given sustained rate,
// --tflops (the default 100 TFLOP/s is ~10 % of an H100/H200's dense FP16 peak: these are small
// and depthwise convolutions); ops without FLOPs (activations, adds) count as free, which makes
// the backward shorter and the bandwidth asked for higher (conservative). Required bandwidth:
// each bucket may start when its last op's backward is done and the link handles one bucket at
// a time; all buckets but the last (ready only when the backward ends) must be done by the end,
// so for every bucket k: f · (bytes of buckets k .. K−2) / bandwidth ≤ T_backward − t_ready(k),
// with f the ring all-reduce factor 2(P−1)/P of the P ranks sharing that link. Within a node
// (NVLink) P = G; across nodes the hierarchical all-reduce (reduce-scatter in the node, all-reduce
// of one G-th across N nodes, all-gather) puts 2(N−1)/N · bytes/G on each GPU's share of the
// network. Every all-reduce also costs a latency (--latency-us: 20 µs in a node, 50 µs across
// nodes, NCCL's small-message ring times in order of magnitude), which is what many small
// buckets pay.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "models/model.h"

typedef struct {
    int64_t bytes_fp32, bytes_o2;
    double ready_s;  // backward time elapsed when the bucket is complete
    int first_param, last_param;
} PlanBucket;

// O2 gradients: f16/bf16 except the norms' and scalars' (kept f32 at every AMP level).
static int64_t o2_bytes(const OcrParamInfo *p) {
    return p->numel * ((p->role == OCR_ROLE_NORM || p->role == OCR_ROLE_SCALAR) ? 4 : 2);
}

// The least bandwidth so that buckets 0..K-2 finish by t_end, each all-reduce costing
// latency + factor·bytes/bandwidth; INFINITY when the latencies alone do not fit.
static double needed_bandwidth(const PlanBucket *b, int K, int o2, double t_end, double factor, double latency) {
    double need = 0;
    for (int k = 0; k < K - 1; k++) {
        double rest = 0;
        for (int j = k; j < K - 1; j++) rest += (double)(o2 ? b[j].bytes_o2 : b[j].bytes_fp32);
        double slack = t_end - b[k].ready_s - latency * (K - 1 - k);
        if (slack <= 0) return INFINITY;
        double bw = factor * rest / slack;
        if (bw > need) need = bw;
    }
    return need;
}

int main(int argc, char **argv) {
    const char *cfg_path = NULL;
    int batch = 384, gpn = 8, H = 48, W = 320;
    double tflops = 100, bucket_mb = 25, lat_in = 20e-6, lat_net = 50e-6;
    const char *overrides[32];
    int n_over = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-c") && i + 1 < argc) cfg_path = argv[++i];
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc) batch = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--tflops") && i + 1 < argc) tflops = atof(argv[++i]);
        else if (!strcmp(argv[i], "--bucket-mb") && i + 1 < argc) bucket_mb = atof(argv[++i]);
        else if (!strcmp(argv[i], "--gpus-per-node") && i + 1 < argc) gpn = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--height") && i + 1 < argc) H = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--latency-us") && i + 2 < argc) {
            lat_in = atof(argv[++i]) * 1e-6;
            lat_net = atof(argv[++i]) * 1e-6;
        }
        else if (!strcmp(argv[i], "--width") && i + 1 < argc) W = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-o")) {
            while (i + 1 < argc && argv[i + 1][0] != '-' && n_over < 32) overrides[n_over++] = argv[++i];
        } else {
            fprintf(stderr, "bench_dist_plan: unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    if (!cfg_path || batch < 1 || !(tflops > 0) || !(bucket_mb > 0) || gpn < 1 || H < 1 || W < 1) {
        fprintf(stderr, "usage: bench_dist_plan -c CFG [--batch 384] [--tflops 100] [--bucket-mb 25] "
                        "[--gpus-per-node 8] [-o K=V ...]\n");
        return 2;
    }
    OcrConfig *cfg;
    if (ocr_config_load(&cfg, cfg_path) != OCR_OK) {
        fprintf(stderr, "bench_dist_plan: %s\n", ocr_last_error());
        return 1;
    }
    for (int i = 0; i < n_over; i++)
        if (ocr_config_apply_override(cfg, overrides[i]) != OCR_OK) {
            fprintf(stderr, "bench_dist_plan: %s\n", ocr_last_error());
            return 1;
        }
    OcrModel *m;
    if (ocr_model_from_config(&m, cfg) != OCR_OK) {
        fprintf(stderr, "bench_dist_plan: %s\n", ocr_last_error());
        return 1;
    }
    const OcrArch *a = ocr_model_arch(m);
    OcrMemPlan plan;
    // One sample's training pass: FLOPs scale with the batch.
    if (ocr_model_plan(m, 1, H, W, 1, &plan) != OCR_OK) {
        fprintf(stderr, "bench_dist_plan: %s\n", ocr_last_error());
        return 1;
    }
    const OcrParamTable *pt = ocr_model_params(m);
    const OcrOpTable *ops = ocr_model_ops(m);
    double rate = tflops * 1e12;
    // Backward time of each op at the batch; elapsed time when each op's backward is done
    // (backward order: the last op first).
    double *done_at = calloc((size_t)ops->count + 1, sizeof *done_at);
    double t = 0, total_flops = 0;
    for (int i = ops->count - 1; i >= 0; i--) {
        double f = 2.0 * ops->items[i].flops * batch;
        total_flops += f;
        t += f / rate;
        done_at[i] = t;
    }
    double t_bwd = t;
    // Buckets in backward order (the table's end first), as distributed/grad_sync.c forms them.
    PlanBucket *b = calloc((size_t)pt->count + 1, sizeof *b);
    int K = 0;
    int64_t cap = (int64_t)(bucket_mb * 1048576.0), total32 = 0, total16 = 0;
    for (int i = pt->count - 1; i >= 0; i--) {
        const OcrParamInfo *p = &pt->items[i];
        int64_t b32 = p->numel * 4, b16 = o2_bytes(p);
        total32 += b32;
        total16 += b16;
        if (K == 0 || b[K - 1].bytes_fp32 + b32 > cap) {
            b[K].last_param = i;
            K++;
        }
        PlanBucket *c = &b[K - 1];
        c->bytes_fp32 += b32;
        c->bytes_o2 += b16;
        c->first_param = i;
        double ready = (pt->ops_recorded && p->op >= 0 && p->op < ops->count) ? done_at[p->op] : t_bwd;
        if (ready > c->ready_s) c->ready_s = ready;
    }
    printf("%s: %s, input %dx%d, %lld trainable parameters in %d tensors\n", cfg_path, a->algorithm, H, W,
           (long long)ocr_model_param_count(m), pt->count);
    printf("gradient bytes per step and GPU: FP32 %.2f MiB, AMP-O2 %.2f MiB (%.3f x FP32)\n", total32 / 1048576.0,
           total16 / 1048576.0, (double)total16 / (double)total32);
    printf("backward at batch %d per GPU: %.1f GFLOP, %.2f ms at %.0f TFLOP/s sustained\n", batch, total_flops / 1e9,
           1e3 * t_bwd, tflops);
    // Per stage (the first two parts of the parameter names: backbone.blocks5, neck.encoder, ...):
    // gradient bytes and the backward time of the ops owning them.
    printf("\n| stage | parameters | FP32 gradient MiB | O2 gradient MiB | backward ms |\n|---|---:|---:|---:|---:|\n");
    for (int i = 0; i < pt->count;) {
        char stage[128];
        const char *nm = pt->items[i].name, *dot = strchr(nm, '.');
        dot = dot ? strchr(dot + 1, '.') : NULL;
        int len = dot ? (int)(dot - nm) : (int)strlen(nm);
        snprintf(stage, sizeof stage, "%.*s", len, nm);
        int64_t n = 0, b32 = 0, b16 = 0;
        double ms = 0;
        int j = i;
        for (; j < pt->count && strncmp(pt->items[j].name, stage, (size_t)len) == 0 &&
               (pt->items[j].name[len] == '.' || pt->items[j].name[len] == 0);
             j++) {
            n += pt->items[j].numel;
            b32 += pt->items[j].numel * 4;
            b16 += o2_bytes(&pt->items[j]);
        }
        // Backward time of the ops of this stage (ops named with the same prefix).
        for (int o = 0; o < ops->count; o++)
            if (strncmp(ops->items[o].name, stage, (size_t)len) == 0 &&
                (ops->items[o].name[len] == '.' || ops->items[o].name[len] == 0))
                ms += 1e3 * 2.0 * ops->items[o].flops * batch / rate;
        printf("| %s | %lld | %.3f | %.3f | %.2f |\n", stage, (long long)n, b32 / 1048576.0, b16 / 1048576.0, ms);
        i = j;
    }
    printf("\nbuckets of %g MiB (FP32 sizes) in backward order: %d\n", bucket_mb, K);
    for (int k = 0; k < K; k++)
        printf("  bucket %2d: %-44s .. %-44s FP32 %8.3f MiB  O2 %8.3f MiB  complete at %6.2f ms\n", k,
               pt->items[b[k].last_param].name, pt->items[b[k].first_param].name, b[k].bytes_fp32 / 1048576.0,
               b[k].bytes_o2 / 1048576.0, 1e3 * b[k].ready_s);
    const double last32 = (double)b[K - 1].bytes_fp32, last16 = (double)b[K - 1].bytes_o2;
    printf("\nbandwidth each link needs to hide all but the last bucket (%.3f MiB FP32) behind the backward\n"
           "(latency %.0f us per all-reduce in a node, +%.0f us across nodes):\n",
           last32 / 1048576.0, 1e6 * lat_in, 1e6 * lat_net);
    printf("%-22s %16s %16s %18s %18s\n", "GPUs", "NVLink FP32", "NVLink O2", "network/GPU FP32", "network/GPU O2");
    printf("%-22s %16s %16s %18s %18s\n", "", "(GB/s)", "(GB/s)", "(GB/s)", "(GB/s)");
    const int nodes[] = {1, 2, 4, 8, 16, 32};
    for (size_t k = 0; k < sizeof nodes / sizeof nodes[0]; k++) {
        int N = nodes[k];
        double f_in = 2.0 * (gpn - 1) / gpn;
        double f_net = N > 1 ? 2.0 * (N - 1) / N / gpn : 0;
        double lat = N > 1 ? lat_in + lat_net : lat_in;
        double in32 = needed_bandwidth(b, K, 0, t_bwd, f_in, lat), in16 = needed_bandwidth(b, K, 1, t_bwd, f_in, lat);
        double n32 = needed_bandwidth(b, K, 0, t_bwd, f_net, lat), n16 = needed_bandwidth(b, K, 1, t_bwd, f_net, lat);
        char label[64];
        snprintf(label, sizeof label, "%d x %d = %d", gpn, N, gpn * N);
        printf("%-22s %16.2f %16.2f %18.2f %18.2f\n", label, in32 / 1e9, in16 / 1e9, n32 / 1e9, n16 / 1e9);
    }
    printf("(the last bucket is exposed whatever the bandwidth: %.3f MiB FP32 / %.3f MiB O2)\n", last32 / 1048576.0,
           last16 / 1048576.0);
    // What the exposed last bucket costs on today's links: NVLink 4 (NCCL's all-reduce bus
    // bandwidth on 8 H100/H200, ~360 GB/s) and one 400 Gb/s NIC per GPU (50 GB/s).
    const double nvlink = 360e9, nic = 50e9;
    for (size_t k = 0; k < sizeof nodes / sizeof nodes[0]; k++) {
        int N = nodes[k];
        double f_in = 2.0 * (gpn - 1) / gpn, f_net = N > 1 ? 2.0 * (N - 1) / N / gpn : 0;
        double lat = N > 1 ? lat_in + lat_net : lat_in;
        double e32 = lat + last32 * (f_in / nvlink + f_net / nic), e16 = lat + last16 * (f_in / nvlink + f_net / nic);
        printf("  %2d node(s): exposed last bucket %.3f ms FP32, %.3f ms O2 (%.1f %% / %.1f %% of the backward)\n", N,
               1e3 * e32, 1e3 * e16, 100 * e32 / t_bwd, 100 * e16 / t_bwd);
    }
    free(done_at);
    free(b);
    ocr_model_free(m);
    ocr_config_free(cfg);
    return 0;
}
