// Input normalisation: the first op of every step, on the device the model runs on.
//
// out (N, H, W, C), any float dtype = (p / 255 − 0.5) / 0.5 for the uint8 batch inp
// (N, H, W, C), each operation in IEEE float32 in that order — PaddleOCR's numpy float32
// recipe, so the values are bit-identical to its (and the golden data's) inputs; f16/bf16
// outputs are that float32 value rounded to nearest even. Padding is whatever the loader
// wrote (PaddleOCR pads after normalising, with 0.0 = pixel 127.5, which no uint8 value
// gives: the loader pads the normalised batch, or pads with 127/128 knowingly).
#ifndef OCR_KERNELS_INPUT_H
#define OCR_KERNELS_INPUT_H

#include "core/tensor.h"

void input_normalize_forward(OcrTensor *out, const OcrTensor *inp);
// The 256 values, for checks: lut[p] = ((float)p / 255.0f − 0.5f) / 0.5f.
void input_normalize_lut(float lut[256]);

#endif
