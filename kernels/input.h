// Input normalisation: the first op of every step, on the device the model runs on.
//
// out (N, H, W, C), any float dtype = (p / 255 − 0.5) / 0.5 for the uint8 batch inp
// (N, H, W, C), each operation in IEEE float32 in that order — PaddleOCR's numpy float32
// recipe, so the values are bit-identical to its (and the golden data's) inputs; f16/bf16
// outputs are that float32 value rounded to nearest even. PaddleOCR pads after normalising,
// with 0.0 = pixel 127.5, which no uint8 value gives: input_normalize_padded_forward takes
// each sample's width and writes that exact 0 into the padding.
#ifndef OCR_KERNELS_INPUT_H
#define OCR_KERNELS_INPUT_H

#include "core/tensor.h"

void ocr_input_normalize_forward(OcrTensor *out, const OcrTensor *inp);
// The same with PaddleOCR's padding: in sample b every column x >= widths[b] becomes exactly
// 0.0 (its pad value after normalising), whatever the loader wrote there (data/loader.h pads
// with 128); columns x < widths[b] are the values above, bit for bit. widths (N) int32 lives
// on the op's device (the resized width of each sample, 1..W from the loader; values outside
// [0, W] are clamped to it). widths = NULL is input_normalize_forward.
void ocr_input_normalize_padded_forward(OcrTensor *out, const OcrTensor *inp, const OcrTensor *widths);
// The 256 values, for checks: lut[p] = ((float)p / 255.0f − 0.5f) / 0.5f.
void ocr_input_normalize_lut(float lut[256]);

#endif
