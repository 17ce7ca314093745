// Counter-based random numbers (Philox4x32-10, Salmon et al. 2011).
//
// A number is a pure function of (seed, stream, index): no hidden state, so the CPU and the
// GPU produce the same values, any thread can compute any element, and a run resumes
// exactly by remembering an offset. Mapping: key = seed (low, high 32 bits); counter =
// (index / 4 low, index / 4 high, stream low, stream high); lane = index % 4.
// Streams separate uses: each layer's weight init, each dropout site, the sampler, each
// augmentation worker.
#ifndef OCR_CORE_RNG_H
#define OCR_CORE_RNG_H

#include <stddef.h>
#include <stdint.h>

// Philox's round multipliers and key increments (kernels/cpu/dropout.c draws blocks as vectors).
#define OCR_PHILOX_M0 0xD2511F53u
#define OCR_PHILOX_M1 0xCD9E8D57u
#define OCR_PHILOX_W0 0x9E3779B9u
#define OCR_PHILOX_W1 0xBB67AE85u

void ocr_philox4x32_10(const uint32_t counter[4], const uint32_t key[2], uint32_t out[4]);


// The index-th 32-bit value of (seed, stream).
uint32_t ocr_rng_u32(uint64_t seed, uint64_t stream, uint64_t index);
// Uniform in [0, 1) with 24 random bits: (u32 >> 8) * 2^-24. Same formula on the GPU.
static inline float ocr_rng_u32_to_uniform(uint32_t x) { return (float)(x >> 8) * (1.0f / 16777216.0f); }
float ocr_rng_uniform(uint64_t seed, uint64_t stream, uint64_t index);

// Bulk fills: element i uses index offset + i; uniform values lie in [lo, hi] (fp32 rounding
// of lo + (hi - lo)·u can reach hi) (normal: indices offset + 2i and offset + 2i + 1).
void ocr_rng_fill_uniform(float *dst, size_t n, uint64_t seed, uint64_t stream, uint64_t offset, float lo, float hi);
// Box-Muller normals.
void ocr_rng_fill_normal(float *dst, size_t n, uint64_t seed, uint64_t stream, uint64_t offset, float mean, float std);
// Normals redrawn until inside mean ± 2·std (truncated normal, as trunc_normal_ initialisers).
void ocr_rng_fill_trunc_normal(float *dst, size_t n, uint64_t seed, uint64_t stream, uint64_t offset, float mean,
                               float std);

// A sequential generator over one stream, for host-side work (shuffling, augmentation).
typedef struct {
    uint64_t seed;
    uint64_t stream;
    uint64_t offset;  // next index; save it to resume
} OcrRng;

static inline OcrRng ocr_rng_make(uint64_t seed, uint64_t stream) { OcrRng r = {seed, stream, 0}; return r; }
uint32_t ocr_rng_next_u32(OcrRng *rng);
float ocr_rng_next_uniform(OcrRng *rng);                  // [0, 1)
double ocr_rng_next_double(OcrRng *rng);                  // [0, 1), 53 bits
float ocr_rng_next_normal(OcrRng *rng, float mean, float std);
// Uniform integer in [lo, hi] inclusive, without modulo bias.
int64_t ocr_rng_next_int(OcrRng *rng, int64_t lo, int64_t hi);
// Fisher-Yates shuffle of n int32 values.
void ocr_rng_shuffle_i32(OcrRng *rng, int32_t *values, size_t n);

#endif
