// The packed cache (data/pack.c): ocr_pack_open on a temporary file (it maps the file), then
// ocr_pack_check and every record through ocr_pack_record_info and ocr_pack_record.
//
// Input: one control byte, then the pack. Control bit 0 recomputes the checksums first (the
// header's text and index hashes, its own hash and each record's pixel hash where the index
// entry's range lies in the file), so that mutations reach the field checks behind them;
// bits 1-2: the channel order asked of ocr_pack_check; bit 3: ask for height 48 instead of
// the pack's own height. The offsets below mirror the layout documented in data/pack.h.
// Checked: every record of a pack that opens lies inside the mapping (ASan sees the whole
// mapped file as one region, so the harness checks the bounds itself), its text is
// NUL-terminated where the index says, and its file index names one of the pack's files.
#include <stdlib.h>
#include <string.h>

#include "data/pack.h"
#include "fuzz/fuzz_util.h"

enum { H_NUM_RECORDS = 32, H_TEXT_OFFSET = 48, H_TEXT_BYTES = 56, H_INDEX_OFFSET = 72, H_HEIGHT = 16,
       H_CHANNELS = 20, H_TEXT_HASH = 88, H_INDEX_HASH = 96, H_HEADER_HASH = 120 };
enum { E_PIXELS = 0, E_HASH = 16, E_WIDTH = 24 };

static uint64_t rd(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}
static void wr64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void repair(uint8_t *b, size_t n) {
    if (n < OCR_PACK_HEADER_BYTES) return;
    uint64_t records = rd(b + H_NUM_RECORDS, 8), text_off = rd(b + H_TEXT_OFFSET, 8), text_bytes = rd(b + H_TEXT_BYTES, 8);
    uint64_t index_off = rd(b + H_INDEX_OFFSET, 8);
    uint64_t row = rd(b + H_HEIGHT, 4) * rd(b + H_CHANNELS, 4);
    if (text_off <= n && text_bytes <= n - text_off) wr64(b + H_TEXT_HASH, ocr_pack_hash64(b + text_off, text_bytes, 1));
    if (records <= n / OCR_PACK_INDEX_ENTRY_BYTES && index_off <= n &&
        records * OCR_PACK_INDEX_ENTRY_BYTES <= n - index_off) {
        for (uint64_t i = 0; i < records; i++) {
            uint8_t *e = b + index_off + i * OCR_PACK_INDEX_ENTRY_BYTES;
            uint64_t po = rd(e + E_PIXELS, 8), bytes = rd(e + E_WIDTH, 4) * row;
            if (row <= (1u << 20) && po <= n && bytes <= n - po) wr64(e + E_HASH, ocr_pack_hash64(b + po, bytes, i));
        }
        wr64(b + H_INDEX_HASH, ocr_pack_hash64(b + index_off, records * OCR_PACK_INDEX_ENTRY_BYTES, 2));
    }
    wr64(b + H_HEADER_HASH, ocr_pack_hash64(b, H_HEADER_HASH, 3));
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_quiet();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int ctl = data[0];
    size_t n = size - 1;
    uint8_t *b = malloc(n ? n : 1);
    memcpy(b, data + 1, n);
    if (ctl & 1) repair(b, n);
    const char *path = fuzz_temp_file("in.pack", b, n);
    free(b);
    OcrPack p;
    if (ocr_pack_open(&p, path) != OCR_OK) {
        OCR_ASSERT(strstr(ocr_last_error(), "in.pack"), "message without the file: %s", ocr_last_error());
        return 0;
    }
    OcrPackSpec want = {.height = ctl & 8 ? 48 : p.height, .order = (ocr_channel_order_t)((ctl >> 1) & 3) % 3};
    if (ocr_pack_check(&p, &want, "Train") == OCR_OK)
        OCR_ASSERT(p.height == want.height && p.order == want.order, "check accepted another spec");
    const uint8_t *lo = p.map_, *hi = p.map_ + p.map_size_;
    for (int64_t i = 0; i < p.num_records; i++) {
        OcrPackRecord r;
        ocr_pack_record_info(&p, i, &r);
        size_t bytes = (size_t)r.width * r.height * r.channels;
        OCR_ASSERT(r.width >= 1 && r.pixels >= lo && r.pixels <= hi && bytes <= (size_t)(hi - r.pixels),
                   "record %lld: %d px wide, pixels outside the file", (long long)i, r.width);
        OCR_ASSERT((const uint8_t *)r.text >= lo && (const uint8_t *)r.text + r.text_bytes < hi &&
                       r.text[r.text_bytes] == '\0',
                   "record %lld: text outside the file or not terminated", (long long)i);
        OCR_ASSERT(r.file >= 0 && r.file < p.num_files && p.file_names[r.file], "record %lld: file %d of %d",
                   (long long)i, r.file, p.num_files);
        if (ocr_pack_record(&p, i, &r) != OCR_OK)
            OCR_ASSERT(strstr(ocr_last_error(), "damaged"), "%s", ocr_last_error());
    }
    ocr_pack_close(&p);
    return 0;
}
