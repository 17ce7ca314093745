// Packed cache writer and mmap reader. See pack.h for the format.
#include "data/pack.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fileio.h"
#include "core/timer.h"
#include "data/lmdb_dataset.h"
#include "data/transforms.h"

static const char pack_magic[8] = {'O', 'C', 'R', 'P', 'A', 'C', 'K', '\0'};

// ---- hash ---------------------------------------------------------------------------

#define HK1 0x9FB21C651E98DF25ull
#define HK2 0xC6A4A7935BD1E995ull
#define HK3 0xD6E8FEB86659FD93ull
#define HK4 0xFF51AFD7ED558CCDull

static inline uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
static inline uint64_t load64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];  // little-endian on any host
    return v;
}

uint64_t ocr_pack_hash64(const void *data, size_t size, uint64_t seed) {
    const uint8_t *p = data;
    size_t n = size;
    // Each lane step is a bijection of the word for a fixed lane state (odd multipliers,
    // xor, rotation), so any change in one word changes that lane.
    uint64_t a = seed ^ HK1, b = seed + HK2, c = rotl64(seed, 17) ^ HK3, d = seed - HK4;
    while (n >= 32) {
        a = rotl64(a ^ (load64(p) * HK1), 29) * HK3;
        b = rotl64(b ^ (load64(p + 8) * HK1), 29) * HK3;
        c = rotl64(c ^ (load64(p + 16) * HK1), 29) * HK3;
        d = rotl64(d ^ (load64(p + 24) * HK1), 29) * HK3;
        p += 32, n -= 32;
    }
    uint64_t h = rotl64(a, 1) + rotl64(b, 7) + rotl64(c, 12) + rotl64(d, 18);
    h ^= (uint64_t)size * HK2;
    while (n >= 8) {
        h = rotl64(h ^ (load64(p) * HK1), 27) * HK3 + HK2;
        p += 8, n -= 8;
    }
    while (n > 0) {
        h = rotl64(h ^ ((uint64_t)*p * HK4), 11) * HK1;
        p++, n--;
    }
    h ^= h >> 33;
    h *= HK4;
    h ^= h >> 29;
    h *= HK2;
    h ^= h >> 32;
    return h;
}

ocr_status_t ocr_pack_source_hash(const char *data_dir, const char *const *label_files, int num_files,
                                  uint64_t *out) {
    const char *dd = data_dir ? data_dir : "";
    uint64_t h = ocr_pack_hash64(dd, strlen(dd) + 1, 0x736f75726365ull);
    for (int f = 0; f < num_files; f++) {
        char *data;
        size_t size;
        OCR_TRY(ocr_read_file(label_files[f], &data, &size));
        h = ocr_pack_hash64(label_files[f], strlen(label_files[f]) + 1, h);
        h = ocr_pack_hash64(data, size, h);
        free(data);
    }
    *out = h ? h : 1;  // 0 means "no fingerprint"
    return OCR_OK;
}

// ---- little-endian fields -----------------------------------------------------------

static void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t get64(const uint8_t *p) { return load64(p); }

// Header field offsets.
enum {
    H_MAGIC = 0, H_VERSION = 8, H_HEADER_BYTES = 12, H_HEIGHT = 16, H_CHANNELS = 20, H_ORDER = 24,
    H_NUM_FILES = 28, H_NUM_RECORDS = 32, H_DATA_OFFSET = 40, H_TEXT_OFFSET = 48, H_TEXT_BYTES = 56,
    H_NAMES_BYTES = 64, H_INDEX_OFFSET = 72, H_SOURCE_HASH = 80, H_TEXT_HASH = 88, H_INDEX_HASH = 96,
    H_HEADER_HASH = 120
};
// Index entry field offsets.
enum { E_PIXELS = 0, E_TEXT = 8, E_HASH = 16, E_WIDTH = 24, E_TEXT_LEN = 28, E_FILE = 32, E_LINE = 36 };

// ---- writer ---------------------------------------------------------------------------

typedef struct {
    OcrImage img;
    ocr_status_t status;
    ocr_skip_reason_t reason;
    char *message;
} PackItem;

typedef struct {
    char *data;
    size_t size, cap;
} Buf;

static ocr_status_t buf_add(Buf *b, const void *p, size_t n) {
    if (b->size + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->size + n) cap *= 2;
        char *d = realloc(b->data, cap);
        if (!d) return ocr_set_error(OCR_ERR_OOM, "pack: out of memory");
        b->data = d, b->cap = cap;
    }
    memcpy(b->data + b->size, p, n);
    b->size += n;
    return OCR_OK;
}

static ocr_status_t write_all(OcrAtomicFile *af, const void *p, size_t n, uint64_t *pos) {
    if (n && fwrite(p, 1, n, af->fp) != n) return ocr_set_error(OCR_ERR_IO, "pack %s: write failed: %s", af->path, strerror(errno));
    *pos += n;
    return OCR_OK;
}

static ocr_status_t pad8(OcrAtomicFile *af, uint64_t *pos) {
    static const uint8_t zeros[8] = {0};
    return write_all(af, zeros, (size_t)((8 - *pos % 8) % 8), pos);
}

// Loads and height-normalises one sample (called from several threads).
static void pack_item(PackItem *it, const OcrDataset *ds, int64_t idx, const OcrPackSpec *spec) {
    memset(it, 0, sizeof *it);
    OcrImage img;
    it->status = ocr_dataset_load_image(ds, idx, spec->order, &img, &it->reason);
    if (it->status == OCR_OK && img.height != spec->height) {
        int w = ocr_rec_resized_width(img.height, img.width, spec->height, OCR_IMAGE_MAX_DIM);
        OcrImage out;
        it->status = ocr_image_resize(&out, &img, w, spec->height);
        it->reason = OCR_SKIP_REASON_COUNT;
        ocr_image_free(&img);
        img = out;
    }
    if (it->status == OCR_OK) it->img = img;
    else it->message = strdup(ocr_last_error());
}

ocr_status_t ocr_pack_write(const char *path, const OcrDataset *ds, const OcrPackSpec *spec, int threads,
                            OcrPackWriteStats *stats) {
    memset(stats, 0, sizeof *stats);
    if (spec->height < 1 || spec->height > 1024)
        return ocr_set_error(OCR_ERR_INVALID_ARG, "pack: height %d (1..1024)", spec->height);
    if (threads < 1) threads = 1;
    double t0 = ocr_now_seconds();
    int channels = spec->order == OCR_CHANNELS_GRAY ? 1 : 3;
    int64_t n = ocr_dataset_size(ds);
    OcrAtomicFile af;
    OCR_TRY(ocr_atomic_open(&af, path));
    Buf texts = {0}, index = {0};
    enum { CHUNK = 256 };
    PackItem *items = calloc(CHUNK, sizeof *items);
    ocr_status_t st = items ? OCR_OK : ocr_set_error(OCR_ERR_OOM, "pack: out of memory");
    uint64_t pos = 0;
    uint8_t header[OCR_PACK_HEADER_BYTES] = {0};
    if (st == OCR_OK) st = write_all(&af, header, sizeof header, &pos);
    for (int f = 0; st == OCR_OK && f < ds->num_files; f++)
        st = buf_add(&texts, ds->label_files[f], strlen(ds->label_files[f]) + 1);
    uint64_t names_bytes = texts.size;
    for (int64_t start = 0; st == OCR_OK && start < n; start += CHUNK) {
        int m = (int)(n - start < CHUNK ? n - start : CHUNK);
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
        for (int j = 0; j < m; j++) pack_item(&items[j], ds, start + j, spec);
        for (int j = 0; j < m; j++) {
            PackItem *it = &items[j];
            if (st == OCR_OK && it->status != OCR_OK) {
                if (it->reason == OCR_SKIP_REASON_COUNT) {
                    st = ocr_set_error(it->status, "%s", it->message ? it->message : "pack: failed");
                } else {
                    ocr_log(OCR_LOG_WARN, "pack: skipping %s", it->message ? it->message : "an image");
                    ocr_skip_stats_add(&stats->skipped, it->reason, "%s", it->message ? it->message : "");
                }
            } else if (st == OCR_OK) {
                OcrSample s;
                st = ocr_dataset_get(ds, start + j, &s);
                int file = 0;
                for (int f = 0; f < ds->num_files; f++)
                    if (s.label_file == ds->label_files[f]) file = f;
                size_t bytes = (size_t)it->img.width * it->img.height * channels;
                uint8_t e[OCR_PACK_INDEX_ENTRY_BYTES];
                size_t tlen = strlen(s.text);
                put64(e + E_PIXELS, pos);
                put64(e + E_TEXT, texts.size);
                put64(e + E_HASH, ocr_pack_hash64(it->img.pixels, bytes, (uint64_t)stats->written));
                put32(e + E_WIDTH, (uint32_t)it->img.width);
                put32(e + E_TEXT_LEN, (uint32_t)tlen);
                put32(e + E_FILE, (uint32_t)file);
                put32(e + E_LINE, (uint32_t)(s.line > UINT32_MAX ? UINT32_MAX : s.line));
                if (st == OCR_OK) st = write_all(&af, it->img.pixels, bytes, &pos);
                if (st == OCR_OK) st = buf_add(&texts, s.text, tlen + 1);
                if (st == OCR_OK) st = buf_add(&index, e, sizeof e);
                stats->written++;
                stats->pixel_bytes += (int64_t)bytes;
            }
            ocr_image_free(&it->img);
            free(it->message);
            it->message = NULL;
        }
    }
    free(items);
    if (st == OCR_OK && stats->written == 0)
        st = ocr_set_error(OCR_ERR_FORMAT, "pack %s: no sample could be loaded (%lld skipped)", path,
                           (long long)ocr_skip_stats_total(&stats->skipped));
    uint64_t text_offset = 0, index_offset = 0;
    if (st == OCR_OK) st = pad8(&af, &pos);
    text_offset = pos;
    if (st == OCR_OK) st = write_all(&af, texts.data, texts.size, &pos);
    if (st == OCR_OK) st = pad8(&af, &pos);
    index_offset = pos;
    if (st == OCR_OK) st = write_all(&af, index.data, index.size, &pos);
    if (st == OCR_OK) {
        memcpy(header + H_MAGIC, pack_magic, 8);
        put32(header + H_VERSION, OCR_PACK_VERSION);
        put32(header + H_HEADER_BYTES, OCR_PACK_HEADER_BYTES);
        put32(header + H_HEIGHT, (uint32_t)spec->height);
        put32(header + H_CHANNELS, (uint32_t)channels);
        put32(header + H_ORDER, (uint32_t)spec->order);
        put32(header + H_NUM_FILES, (uint32_t)ds->num_files);
        put64(header + H_NUM_RECORDS, (uint64_t)stats->written);
        put64(header + H_DATA_OFFSET, OCR_PACK_HEADER_BYTES);
        put64(header + H_TEXT_OFFSET, text_offset);
        put64(header + H_TEXT_BYTES, texts.size);
        put64(header + H_NAMES_BYTES, names_bytes);
        put64(header + H_INDEX_OFFSET, index_offset);
        put64(header + H_SOURCE_HASH, spec->source_hash);
        put64(header + H_TEXT_HASH, ocr_pack_hash64(texts.data, texts.size, 1));
        put64(header + H_INDEX_HASH, ocr_pack_hash64(index.data, index.size, 2));
        put64(header + H_HEADER_HASH, ocr_pack_hash64(header, H_HEADER_HASH, 3));
        if (fseek(af.fp, 0, SEEK_SET) != 0 || fwrite(header, 1, sizeof header, af.fp) != sizeof header)
            st = ocr_set_error(OCR_ERR_IO, "pack %s: cannot write the header: %s", path, strerror(errno));
    }
    free(texts.data);
    free(index.data);
    if (st == OCR_OK) st = ocr_atomic_commit(&af);
    else ocr_atomic_abort(&af);
    stats->seconds = ocr_now_seconds() - t0;
    return st;
}

// ---- reader ---------------------------------------------------------------------------

void ocr_pack_close(OcrPack *p) {
    if (p->map_) munmap((void *)p->map_, p->map_size_);
    free(p->file_names);
    free(p->path);
    memset(p, 0, sizeof *p);
}

static ocr_status_t bad(OcrPack *p, const char *path, const char *what) {
    ocr_status_t st = ocr_set_error(OCR_ERR_FORMAT, "pack %s: %s (damaged or not a pack: rebuild it with ocrtrain pack)",
                                    path, what);
    ocr_pack_close(p);
    return st;
}

ocr_status_t ocr_pack_open(OcrPack *p, const char *path) {
    memset(p, 0, sizeof *p);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return ocr_set_error(errno == ENOENT ? OCR_ERR_NOT_FOUND : OCR_ERR_IO, "pack %s: cannot open: %s", path,
                             strerror(errno));
    struct stat stt;
    if (fstat(fd, &stt) != 0) {
        close(fd);
        return ocr_set_error(OCR_ERR_IO, "pack %s: cannot stat: %s", path, strerror(errno));
    }
    size_t size = (size_t)stt.st_size;
    if (size < OCR_PACK_HEADER_BYTES) {
        close(fd);
        return ocr_set_error(OCR_ERR_FORMAT, "pack %s: %zu bytes, too short for a pack", path, size);
    }
    void *m = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) return ocr_set_error(OCR_ERR_IO, "pack %s: mmap failed: %s", path, strerror(errno));
    p->map_ = m;
    p->map_size_ = size;
    p->path = strdup(path);
    if (!p->path) return bad(p, path, "out of memory");
    const uint8_t *h = p->map_;
    if (memcmp(h, pack_magic, 8) != 0) return bad(p, path, "no OCRPACK magic");
    uint32_t version = get32(h + H_VERSION);
    if (version != OCR_PACK_VERSION) {
        ocr_status_t st = ocr_set_error(OCR_ERR_FORMAT, "pack %s: format version %u, this build reads version %d: "
                                        "rebuild it with ocrtrain pack", path, version, OCR_PACK_VERSION);
        ocr_pack_close(p);
        return st;
    }
    if (get64(h + H_HEADER_HASH) != ocr_pack_hash64(h, H_HEADER_HASH, 3)) return bad(p, path, "header checksum mismatch");
    p->height = (int)get32(h + H_HEIGHT);
    p->channels = (int)get32(h + H_CHANNELS);
    uint32_t order = get32(h + H_ORDER);
    p->num_files = (int)get32(h + H_NUM_FILES);
    p->num_records = (int64_t)get64(h + H_NUM_RECORDS);
    p->source_hash = get64(h + H_SOURCE_HASH);
    uint64_t text_off = get64(h + H_TEXT_OFFSET), text_bytes = get64(h + H_TEXT_BYTES);
    uint64_t names_bytes = get64(h + H_NAMES_BYTES), index_off = get64(h + H_INDEX_OFFSET);
    if (get32(h + H_HEADER_BYTES) != OCR_PACK_HEADER_BYTES || get64(h + H_DATA_OFFSET) != OCR_PACK_HEADER_BYTES ||
        p->height < 1 || p->height > 1024 || (p->channels != 1 && p->channels != 3) || order > OCR_CHANNELS_GRAY ||
        (order == OCR_CHANNELS_GRAY) != (p->channels == 1) || p->num_files < 1 || p->num_files > 1 << 20 ||
        p->num_records < 1 || (uint64_t)p->num_records > size / OCR_PACK_INDEX_ENTRY_BYTES)
        return bad(p, path, "invalid header fields");
    p->order = (ocr_channel_order_t)order;
    uint64_t index_bytes = (uint64_t)p->num_records * OCR_PACK_INDEX_ENTRY_BYTES;
    if (text_off < OCR_PACK_HEADER_BYTES || text_off > size || text_bytes > size - text_off || names_bytes > text_bytes ||
        index_off < text_off + text_bytes || index_off > size || index_bytes > size - index_off)
        return bad(p, path, "sections outside the file (truncated?)");
    p->texts_ = (const char *)h + text_off;
    p->text_bytes_ = text_bytes;
    p->index_ = h + index_off;
    if (get64(h + H_TEXT_HASH) != ocr_pack_hash64(p->texts_, text_bytes, 1)) return bad(p, path, "text section checksum mismatch");
    if (get64(h + H_INDEX_HASH) != ocr_pack_hash64(p->index_, index_bytes, 2)) return bad(p, path, "index checksum mismatch");
    // File names, then every entry's bounds.
    p->file_names = calloc((size_t)p->num_files, sizeof(char *));
    if (!p->file_names) return bad(p, path, "out of memory");
    uint64_t off = 0;
    for (int f = 0; f < p->num_files; f++) {
        const char *s = p->texts_ + off;
        const char *end = memchr(s, '\0', names_bytes - off);
        if (off >= names_bytes || !end) return bad(p, path, "bad label file names");
        p->file_names[f] = s;
        off += (uint64_t)(end - s) + 1;
    }
    uint64_t pixel_end = text_off;
    for (int64_t i = 0; i < p->num_records; i++) {
        const uint8_t *e = p->index_ + i * OCR_PACK_INDEX_ENTRY_BYTES;
        uint64_t po = get64(e + E_PIXELS), to = get64(e + E_TEXT);
        uint64_t w = get32(e + E_WIDTH), tl = get32(e + E_TEXT_LEN), f = get32(e + E_FILE);
        uint64_t bytes = w * (uint64_t)p->height * (uint64_t)p->channels;
        if (w < 1 || w > OCR_IMAGE_MAX_DIM || po < OCR_PACK_HEADER_BYTES || po > pixel_end || bytes > pixel_end - po ||
            to < names_bytes || to > text_bytes || tl >= text_bytes - to || p->texts_[to + tl] != '\0' ||
            f >= (uint64_t)p->num_files) {
            char what[96];
            snprintf(what, sizeof what, "index entry %lld is invalid", (long long)i);
            return bad(p, path, what);
        }
    }
    return OCR_OK;
}

static const char *order_name(ocr_channel_order_t o) {
    return o == OCR_CHANNELS_BGR ? "BGR" : o == OCR_CHANNELS_RGB ? "RGB" : "GRAY";
}

ocr_status_t ocr_pack_check(const OcrPack *p, const OcrPackSpec *want, const char *what) {
    if (p->height != want->height)
        return ocr_set_error(OCR_ERR_CONFIG,
                             "pack %s was built for height %d, but %s needs height %d: rebuild it with "
                             "`ocrtrain pack -c CFG --out %s`",
                             p->path, p->height, what, want->height, p->path);
    if (p->order != want->order)
        return ocr_set_error(OCR_ERR_CONFIG,
                             "pack %s holds %s images, but %s decodes %s (DecodeImage.img_mode): rebuild it with "
                             "`ocrtrain pack -c CFG --out %s`",
                             p->path, order_name(p->order), what, order_name(want->order), p->path);
    if (want->source_hash != 0 && p->source_hash != want->source_hash)
        return ocr_set_error(OCR_ERR_CONFIG,
                             "pack %s was built from other label files than %s uses (or they changed since): "
                             "rebuild it with `ocrtrain pack -c CFG --out %s`",
                             p->path, what, p->path);
    return OCR_OK;
}

void ocr_pack_record_info(const OcrPack *p, int64_t i, OcrPackRecord *rec) {
    OCR_ASSERT(i >= 0 && i < p->num_records, "record %lld of %lld", (long long)i, (long long)p->num_records);
    const uint8_t *e = p->index_ + i * OCR_PACK_INDEX_ENTRY_BYTES;
    rec->width = (int)get32(e + E_WIDTH);
    rec->height = p->height;
    rec->channels = p->channels;
    rec->pixels = p->map_ + get64(e + E_PIXELS);
    rec->text = p->texts_ + get64(e + E_TEXT);
    rec->text_bytes = (int)get32(e + E_TEXT_LEN);
    rec->file = (int)get32(e + E_FILE);
    rec->line = get32(e + E_LINE);
}

ocr_status_t ocr_pack_record(const OcrPack *p, int64_t i, OcrPackRecord *rec) {
    ocr_pack_record_info(p, i, rec);
    const uint8_t *e = p->index_ + i * OCR_PACK_INDEX_ENTRY_BYTES;
    size_t bytes = (size_t)rec->width * rec->height * rec->channels;
    if (ocr_pack_hash64(rec->pixels, bytes, (uint64_t)i) != get64(e + E_HASH))
        return ocr_set_error(OCR_ERR_FORMAT, "pack %s: record %lld (%s:%lld) is damaged (checksum mismatch)", p->path,
                             (long long)i, p->file_names[rec->file], (long long)rec->line);
    return OCR_OK;
}

// ---- PaddleOCR LMDB datasets (ocrtrain pack --lmdb) -----------------------------------

ocr_status_t ocr_pack_write_lmdb(const char *dir, const OcrDataset *ds, OcrPackWriteStats *stats) {
    memset(stats, 0, sizeof *stats);
    double t0 = ocr_now_seconds();
    OcrLmdbWriter *w;
    OCR_TRY(ocr_lmdb_writer_open(&w, dir));
    int64_t n = ocr_dataset_size(ds), k = 0;
    ocr_status_t st = OCR_OK;
    for (int64_t i = 0; st == OCR_OK && i < n; i++) {
        OcrSample s;
        if ((st = ocr_dataset_get(ds, i, &s)) != OCR_OK) break;
        uint8_t *bytes = NULL;
        size_t size = 0;
        ocr_skip_reason_t reason = OCR_SKIP_REASON_COUNT;
        st = ocr_dataset_read_image_bytes(ds, i, &bytes, &size, &reason);
        if (st == OCR_OK) {
            // As create_lmdb_dataset's checkImageIsValid: only images that decode go in.
            OcrImage img;
            st = ocr_image_decode(&img, bytes, size, OCR_CHANNELS_BGR, s.path);
            if (st == OCR_OK) ocr_image_free(&img);
            if (st != OCR_OK && !ocr_skip_reason_for_image_status(st, &reason)) reason = OCR_SKIP_REASON_COUNT;
            if (st != OCR_OK) st = ocr_wrap_error(st, "sample %s:%lld", s.label_file, (long long)s.line);
        }
        if (st != OCR_OK) {
            free(bytes);
            if (reason == OCR_SKIP_REASON_COUNT) break;  // not a data problem (OOM): stop
            ocr_skip_stats_add(&stats->skipped, reason, "%s", ocr_last_error());
            ocr_log(OCR_LOG_WARN, "pack --lmdb: skipping an image: %s", ocr_last_error());
            st = OCR_OK;
            continue;
        }
        char key[32];
        k++;
        ocr_lmdb_key(key, sizeof key, "image", k);
        st = ocr_lmdb_writer_put(w, key, bytes, size);
        free(bytes);
        ocr_lmdb_key(key, sizeof key, "label", k);
        if (st == OCR_OK) st = ocr_lmdb_writer_put(w, key, s.text, strlen(s.text));
        stats->pixel_bytes += (int64_t)size;
    }
    if (st == OCR_OK && k == 0)
        st = ocr_set_error(OCR_ERR_FORMAT, "pack --lmdb %s: no sample has a readable image (%lld skipped)", dir,
                           (long long)ocr_skip_stats_total(&stats->skipped));
    if (st == OCR_OK) {
        char count[32];
        snprintf(count, sizeof count, "%lld", (long long)k);
        st = ocr_lmdb_writer_put(w, "num-samples", count, strlen(count));
    }
    if (st != OCR_OK) {
        ocr_lmdb_writer_abort(w);
        return st;
    }
    OCR_TRY(ocr_lmdb_writer_finish(w));
    stats->written = k;
    stats->seconds = ocr_now_seconds() - t0;
    return OCR_OK;
}
